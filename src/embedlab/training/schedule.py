"""word2vec's learning-rate schedule: linear decay with a floor, a pure function of progress."""

from __future__ import annotations


def linear_lr(lr: float, min_ratio: float, words_done: int, total_words: int) -> float:
    """lr · max(min_ratio, 1 − words_done / total_words).

    Progress is counted in in-vocabulary corpus words (subsampled ones included, as word2vec's
    ``word_count_actual``), so the schedule is the same whatever the batch size, and a resumed
    run sees exactly the rates of an uninterrupted one. ``--max-steps`` stops early without
    changing it; raising ``--epochs`` on resume stretches the remaining decay over the new total.
    """
    frac = 1.0 - words_done / max(1, total_words)
    return lr * max(min_ratio, frac)
