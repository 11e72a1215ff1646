"""Evaluation of word vectors: analogies, word-pair similarity, nearest neighbours.

:func:`make_evaluator` builds the callable the trainer runs every ``--eval-every`` steps; its
``check(words)`` refuses files that do not fit the vocabulary before training starts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from embedlab.config import EvalConfig
from embedlab.errors import InputError, restated, spell_name
from embedlab.eval.analogy import QuestionSet, evaluate_analogies, question_ids, read_questions
from embedlab.eval.scoring import row_norms
from embedlab.eval.similarity import PairSet, evaluate_similarity, pair_ids, read_pairs

#: the option of ``train`` that sets the analogies' vocabulary limit, named in its messages
_FLAG = "--eval-restrict-vocab"


class Evaluator:
    """``evaluate(words, matrix) -> metrics``, built by :func:`make_evaluator`.

    Metric names: ``analogy`` (3CosAdd total accuracy in [0, 1], restricted to the
    ``cfg.restrict_vocab`` most frequent words) and ``similarity/<name>`` (Spearman), the
    name being the file's without its suffix and a compression's
    (:func:`embedlab.fsutil.bare_stem`).
    A call only reads ``matrix`` (a V×D NumPy array of any float dtype, or anything
    ``np.asarray`` turns into one, such as a CPU torch tensor that does not require grad; row
    i = ``words[i]``) and draws no random numbers. :meth:`check` needs the vocabulary only:
    call it before training.
    """

    def __init__(self, questions: QuestionSet | None, pair_sets: Sequence[PairSet],
                 names: Sequence[str], restrict_vocab: int) -> None:
        self._questions = questions
        self._pairs = list(zip(names, pair_sets, strict=True))
        self._restrict = restrict_vocab

    def check(self, words: Sequence[str]) -> None:
        """Raise the :class:`InputError` the first evaluation would raise for this vocabulary
        (an analogy file whose questions are all unknown, a similarity file with fewer than 2
        known pairs), so that a bad file is refused before training, not after the first
        ``--eval-every`` steps. Cheap: word look-ups, no vectors."""
        if self._questions is not None:
            question_ids(words, self._questions, self._restrict, _FLAG)
        for _, pairs in self._pairs:
            pair_ids(words, pairs)  # evaluate_similarity's default restriction, as in __call__

    def __call__(self, words: Sequence[str], matrix: npt.ArrayLike) -> dict[str, float]:
        mat = np.asarray(matrix, dtype=np.float32).view()  # a float32 array is not copied
        mat.flags.writeable = False  # so that the "only reads" promise is enforced, not hoped for
        norms = row_norms(mat)
        out: dict[str, float] = {}
        if self._questions is not None:
            out["analogy"] = evaluate_analogies(words, mat, norms, self._questions,
                                                restrict_vocab=self._restrict,
                                                flag=_FLAG).accuracy
        for name, pairs in self._pairs:
            out[name] = evaluate_similarity(words, mat, norms, pairs).spearman
        return out


def make_evaluator(cfg: EvalConfig) -> Evaluator:
    """Read the evaluation files once and return the :class:`Evaluator` for them.

    Missing or malformed files raise :class:`InputError` here, at construction; files that
    share (almost) no words with the vocabulary raise in :meth:`Evaluator.check` and in every
    evaluation.
    """
    try:  # named by the option that gave the file (on a resume, config.json's)
        questions = read_questions(cfg.analogies) if cfg.analogies else None
    except InputError as exc:
        raise restated(exc, f"{spell_name('--eval-analogies')}: {exc}") from None
    pair_sets = []
    for path in cfg.similarity:
        try:
            pair_sets.append(read_pairs(path))
        except InputError as exc:
            raise restated(exc, f"{spell_name('--eval-similarity')}: {exc}") from None
    names = [f"similarity/{ps.name}" for ps in pair_sets]
    if len(set(names)) != len(names):
        paths = [str(p) for p in cfg.similarity]
        if len({os.path.realpath(p) for p in paths}) != len(paths):  # pairs.tsv, ./pairs.tsv
            raise InputError(f"{spell_name('--eval-similarity')} names one file twice "
                             f"({', '.join(paths)}); give each file once")
        raise InputError(f"two {spell_name('--eval-similarity')} files share a name without "
                         f"its suffix ({', '.join(str(Path(p).name) for p in cfg.similarity)}),"
                         " which names their metric (similarity/NAME); rename one so that "
                         "their metric names differ")
    return Evaluator(questions, pair_sets, names, cfg.restrict_vocab)


__all__ = ["Evaluator", "make_evaluator"]
