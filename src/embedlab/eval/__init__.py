"""Evaluation of word vectors: analogies, word-pair similarity, nearest neighbours.

:func:`make_evaluator` builds the callable the trainer runs every ``--eval-every`` steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from embedlab.config import EvalConfig
from embedlab.errors import InputError
from embedlab.eval.analogy import evaluate_analogies, read_questions
from embedlab.eval.scoring import row_norms
from embedlab.eval.similarity import evaluate_similarity, read_pairs

Evaluator = Callable[[Sequence[str], np.ndarray], dict[str, float]]


def make_evaluator(cfg: EvalConfig) -> Evaluator:
    """Read the evaluation files once and return ``evaluate(words, matrix) -> metrics``.

    Metric names: ``analogy`` (3CosAdd total accuracy in [0, 1], restricted to the
    ``cfg.restrict_vocab`` most frequent words) and ``similarity/<file stem>`` (Spearman).
    The callable only reads ``matrix`` (V×D, any float dtype; row i = ``words[i]``), draws no
    random numbers, and raises :class:`InputError` when a file shares no words with the
    vocabulary -- call it once before training to fail early. Missing or malformed files raise
    here, at construction.
    """
    questions = read_questions(cfg.analogies) if cfg.analogies else None
    pair_sets = [read_pairs(p) for p in cfg.similarity]
    names = [f"similarity/{ps.name}" for ps in pair_sets]
    if len(set(names)) != len(names):
        raise InputError("two --eval-similarity files share a file name "
                         f"({', '.join(str(Path(p).name) for p in cfg.similarity)}); "
                         "rename one so that their metric names differ")
    restrict = cfg.restrict_vocab

    def evaluate(words: Sequence[str], matrix: np.ndarray) -> dict[str, float]:
        if hasattr(matrix, "detach"):  # a torch tensor straight from the model: read, never write
            matrix = matrix.detach().cpu().numpy()
        mat = np.asarray(matrix, dtype=np.float32)
        norms = row_norms(mat)
        out: dict[str, float] = {}
        if questions is not None:
            out["analogy"] = evaluate_analogies(words, mat, norms, questions,
                                                restrict_vocab=restrict).accuracy
        for name, pairs in zip(names, pair_sets, strict=True):
            out[name] = evaluate_similarity(words, mat, norms, pairs).spearman
        return out

    return evaluate


__all__ = ["Evaluator", "make_evaluator"]
