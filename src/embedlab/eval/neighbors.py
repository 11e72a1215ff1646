"""Nearest neighbours and "did you mean" suggestions for unknown words."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Literal

import numpy as np

from embedlab.errors import InputError
from embedlab.eval.scoring import safe, top_k

Metric = Literal["cosine", "euclidean"]
METRICS: tuple[Metric, ...] = ("cosine", "euclidean")

_SUGGEST_POOL = 50_000  # fuzzy matching looks at this many most frequent words (it is O(V))


def nearest(matrix: np.ndarray, norms: np.ndarray, query: np.ndarray, k: int, *,
            metric: Metric = "cosine", exclude: Sequence[int] = ()) -> list[tuple[int, float]]:
    """The ``k`` rows closest to ``query`` (D), best first, as ``(row, score)``.

    cosine: score = cosine similarity (higher is closer). euclidean: score = L2 distance (lower
    is closer). Rows in ``exclude`` (e.g. the query words) are never returned. Equal scores
    come in row order (see :func:`~embedlab.eval.scoring.top_k`).
    """
    check_metric(metric)
    q = np.asarray(query, dtype=np.float32)
    dot = matrix @ q  # V
    if metric == "cosine":
        qn = float(np.linalg.norm(q))
        scores = dot / (safe(norms) * (qn if qn > 0 else 1.0))
    else:  # euclidean
        # ||x - q||² = ||x||² - 2 x·q + ||q||², one GEMV instead of a V×D difference
        sq = np.square(norms, dtype=np.float32) - 2 * dot + float(q @ q)
        scores = -np.maximum(sq, 0.0)  # negate so that "largest" means closest
    excluded = sorted(set(exclude))
    scores[excluded] = -np.inf
    k = min(k, len(scores) - len(excluded))
    if k <= 0:
        return []
    top = top_k(scores, k)
    values = np.sqrt(-scores[top]) if metric == "euclidean" else scores[top]
    return [(int(i), float(v)) for i, v in zip(top.tolist(), values.tolist(), strict=True)]


def check_metric(metric: object) -> None:
    """Raise :class:`InputError` unless ``metric`` is one :func:`nearest` ranks by: a user's
    typo, not a bug (INTERFACES: what the user can fix is an InputError)."""
    if not isinstance(metric, str) or metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}; use {' or '.join(map(repr, METRICS))}")


def nearest_to_rows(matrix: np.ndarray, norms: np.ndarray, ids: Sequence[int],
                    k: int) -> list[list[tuple[int, float]]]:
    """For each row in ``ids``, the ``k`` rows of highest cosine similarity (the row itself
    excluded), best first, as ``(row, similarity)``; ``k`` is capped at V - 1.

    One product for all the rows (len(ids)×V scores), divided by the norms afterwards:
    normalising the matrix first would copy it (V×D), and the training summaries call this
    beside the matrices being trained. A zero row (a word never trained) has similarity 0 with
    everything, not NaN. Equal similarities come in row order, also at the cut.
    """
    matrix = np.asarray(matrix, dtype=np.float32)  # no copy for the trainer's float32 matrices
    rows = np.asarray(ids, dtype=np.int64)
    norms = safe(norms)
    sims = (matrix[rows] @ matrix.T) / norms  # (P, V)
    sims /= norms[rows, None]
    sims[np.arange(len(rows)), rows] = -np.inf
    k = min(k, matrix.shape[0] - 1)
    return [[(int(i), float(row[i])) for i in top_k(row, k)] if k > 0 else [] for row in sims]


def suggest(word: str, words: Sequence[str], n: int = 5) -> list[str]:
    """Words the user may have meant: case variants, then prefix matches, then close spellings.

    Frequent words first (vocabulary order is frequency order).
    """
    low = word.lower()
    pool = words[:_SUGGEST_POOL]
    out: list[str] = [w for w in pool if w.lower() == low]
    if len(out) < n and len(low) >= 2:
        out += [w for w in pool if w.lower().startswith(low) and w not in out][: n - len(out)]
    if len(out) < n:
        # Length prefilter: difflib's ratio needs similar lengths anyway, and it is slow per word.
        # compared in lower case, so that "Kingg" finds king as "kingg" does; of the case
        # variants of a close spelling, the one cased as the query ("kinq": king, not a more
        # frequent King), else the most frequent
        near: dict[str, str] = {}
        for w in pool:
            if abs(len(w) - len(word)) <= 2:
                low_w = w.lower()
                if low_w not in near or (_casing(w) == _casing(word) and
                                         _casing(near[low_w]) != _casing(word)):
                    near[low_w] = w
        close = difflib.get_close_matches(low, list(near), n=n, cutoff=0.75)
        # fewest edits first (two letters swapped is one), of those the query's length (its
        # letters kept: "kign" is king before kin), then difflib's similarity, in its order
        close.sort(key=lambda c: (_edits(low, c), abs(len(c) - len(low))))
        out += [near[c] for c in close if near[c] not in out]
    return out[:n]


def _edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbouring letters that turn ``a``
    into ``b`` (the optimal string alignment distance; short words only)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def _casing(word: str) -> tuple[bool, bool, bool]:
    """How ``word`` is cased: lower, upper, title."""
    return word.islower(), word.isupper(), word.istitle()
