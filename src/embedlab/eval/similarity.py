"""Word-pair similarity (WordSim-353 style), evaluated like gensim's ``evaluate_word_pairs``.

File format: ``word1<TAB>word2<TAB>score`` per line (whitespace-separated also accepted when a
line has no tab); lines starting with ``#`` are comments; malformed lines are skipped and counted.
A score that is not a finite number (``nan``, ``inf``, ``1e400``) is refused: it would make every
correlation NaN, which is not a number JSON can hold.

Semantics (gensim defaults: ``restrict_vocab=300000, case_insensitive=True, dummy4unknown=False``):
words are matched by ``str.upper`` among the first ``restrict_vocab`` words (the first, most
frequent case variant wins); pairs with an unknown word are dropped and reported as
``oov_ratio`` (percent of valid pairs); Spearman and Pearson correlations are between the gold
scores and the cosine similarities of the remaining pairs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embedlab.errors import InputError
from embedlab.eval.analogy import case_groups, looked_for
from embedlab.fsutil import bare_stem, read_utf8, text_lines

DEFAULT_RESTRICT = 300_000


@dataclass(frozen=True)
class PairSet:
    """Parsed pairs, upper-cased."""

    pairs: tuple[tuple[str, str], ...]
    gold: np.ndarray  # float64, one per pair
    invalid_lines: int
    source: str

    @property
    def name(self) -> str:
        """Short name used in metric keys: the file stem (``wordsim353``; of
        ``wordsim353.tsv.gz`` too)."""
        return bare_stem(self.source)


@dataclass(frozen=True)
class SimilarityResult:
    """A word-pair evaluation (``Vectors.evaluate_similarity``, ``embedlab eval``): Spearman's
    and Pearson's correlation between the file's scores and the cosines over the pairs whose
    words are known (``pairs_used``), ``oov_ratio`` the **percentage** (0–100, as gensim's) of
    pairs with an unknown word (``pairs_oov``), the ``restrict_vocab`` the words came from, the
    file's ``invalid_lines`` and its path (``source``)."""

    source: str
    spearman: float
    pearson: float
    oov_ratio: float  # percent of pairs with an unknown word (gensim's convention)
    pairs_used: int
    pairs_oov: int
    restrict_vocab: int
    invalid_lines: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (``embedlab eval --json``), the fields by name (``source`` as ``file``)."""
        return {"file": self.source, "spearman": _number(self.spearman),
                "pearson": _number(self.pearson),
                "oov_ratio": self.oov_ratio, "pairs_used": self.pairs_used,
                "pairs_oov": self.pairs_oov, "restrict_vocab": self.restrict_vocab,
                "invalid_lines": self.invalid_lines}


def _number(value: float) -> float | None:
    """``value`` for JSON: NaN (no correlation defined) as null, which every parser reads."""
    return value if math.isfinite(value) else None


def _cosine(va: np.ndarray, vb: np.ndarray) -> float:
    """float32 cosine computed with the same BLAS calls as gensim's ``similarity``.

    Why not a vectorised float64 version: Spearman works on ranks, and a 1-ulp difference
    between e.g. two self-pairs (cosine 1 ± ulp) turns a tie into an order, changing the
    correlation in the 4th decimal. Identical arithmetic keeps the numbers equal; word-pair
    files are small, so the per-pair loop costs nothing.
    """
    return float(np.dot(_unit(va), _unit(vb)))


def _unit(vec: np.ndarray) -> np.ndarray:
    # gensim's matutils.unitvec: double-precision nrm2/scal on the float32 vector, cast back.
    # scipy is imported here, not at the top: importing embedlab.eval (the trainer and the
    # TensorBoard summaries do) must not cost scipy.stats' ~0.35 s and ~20 MiB
    from scipy.linalg import blas

    vec = np.ascontiguousarray(vec, dtype=np.float32)
    length = blas.dnrm2(vec)
    return blas.dscal(1.0 / length, vec).astype(np.float32) if length > 0 else vec


def read_pairs(path: str | os.PathLike[str]) -> PairSet:
    p = Path(path)
    text = read_utf8(p, what="similarity file",
                     missing_fix=f"{looked_for(p)}pass the path of an existing "
                     "'word1<TAB>word2<TAB>score' file (such as WordSim-353's)",
                     unreadable_fix="pass a UTF-8 'word1<TAB>word2<TAB>score' file")
    return parse_pairs(text_lines(text), str(p))


def parse_pairs(lines: Sequence[str], source: str = "<pairs>") -> PairSet:
    pairs: list[tuple[str, str]] = []
    gold: list[float] = []
    invalid = 0
    first_invalid: tuple[int, int] | None = None  # (line number, columns)
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        try:
            a, b, score = (x.strip() for x in parts)
            value = float(score)
        except ValueError:
            if not pairs and not invalid and len(parts) == 3 and \
                    parts[2].strip()[:1] not in "0123456789+-.":
                # a header line ("word1 word2 score"), as SimLex's and MEN's files have; a
                # score that starts as a number does ("7,5", "3 # note") is a malformed pair
                continue
            invalid += 1
            first_invalid = first_invalid or (n, len(parts))
            continue
        if not math.isfinite(value):
            raise InputError(f"{source}:{n}: score {score!r} is not a finite number; "
                             "fix or remove that line")
        pairs.append((a.upper(), b.upper()))
        gold.append(value)
    if len(pairs) < 2 and first_invalid is not None and first_invalid[1] > 3:
        # SimLex-999 and others keep more columns than the pair and its score (a line or two
        # that has only those is no file of pairs either: a correlation needs 2)
        n, columns = first_invalid
        held = f"holds 1 word pair, and line {n} has {columns} columns" if pairs else \
            f"holds no word pairs: its lines have more than 3 columns (line {n} has {columns})"
        raise InputError(f"{source} {held}, and a pair is 'word1<TAB>word2<TAB>score'; keep the "
                         "two words and the score, e.g. cut -f1,2,4 for SimLex-999's")
    if not pairs:
        raise InputError(f"{source} holds no word pairs; "
                         "expected 'word1<TAB>word2<TAB>score' lines")
    return PairSet(tuple(pairs), np.asarray(gold, dtype=np.float64), invalid, source)


def pair_ids(words: Sequence[str], pairs: PairSet,
             restrict_vocab: int = DEFAULT_RESTRICT) -> tuple[np.ndarray, np.ndarray]:
    """Row ids (P×2, -1 = unknown) of the pairs' words and which pairs are fully known.

    Needs only the vocabulary, not vectors, so a trainer can call it before training (see
    :meth:`embedlab.eval.Evaluator.check`). Raises :class:`InputError` when fewer than 2 pairs
    are known: no correlation exists then.
    """
    if restrict_vocab < 1:
        raise InputError(f"--restrict-vocab must be >= 1, got {restrict_vocab}; "
                         f"pass e.g. --restrict-vocab {DEFAULT_RESTRICT}")
    lookup, _ = case_groups(words, restrict_vocab)
    ids = np.array([[lookup.get(a, -1), lookup.get(b, -1)] for a, b in pairs.pairs],
                   dtype=np.int64).reshape(-1, 2)
    known: np.ndarray = np.all(ids >= 0, axis=1)
    used = int(known.sum())
    if used < 2 and used == len(ids):  # every pair known: the file is what is short
        raise InputError(f"{pairs.source} holds {len(ids)} word pair{'s' if len(ids) != 1 else ''}"
                         ", and a correlation needs at least 2; use a file with more pairs (a "
                         "first line whose score is no number is read as a header)")
    if used < 2:
        # the whole vocabulary looked at: its corpus, not a limit, lacks the words
        fix = "or train on a corpus that holds its words" if restrict_vocab >= len(words) \
            else f"(word-pair similarity considers the {restrict_vocab:,} most frequent words)"
        raise InputError(f"only {used} of {len(ids)} pairs in {pairs.source} have both words among "
                         f"the first {min(restrict_vocab, len(words))} words of the vocabulary; "
                         f"check the file's language/case {fix}")
    gold = pairs.gold[known]
    if np.ptp(gold) == 0:  # no correlation is defined: a 0 would read as "unrelated"
        raise InputError(f"the {used} pairs of {pairs.source} with both words in the "
                         f"vocabulary all have the score {gold[0]:g}, and a correlation needs "
                         "scores that differ; use a file with more pairs or other scores")
    return ids, known


def evaluate_similarity(words: Sequence[str], matrix: np.ndarray, norms: np.ndarray,
                        pairs: PairSet, *,
                        restrict_vocab: int = DEFAULT_RESTRICT) -> SimilarityResult:
    """Correlate cosine similarity with the gold scores. Raises :class:`InputError` if every pair
    is out of vocabulary (or fewer than 2 remain, when no correlation exists)."""
    ids, known = pair_ids(words, pairs, restrict_vocab)
    used = int(known.sum())
    model = np.array([_cosine(matrix[i], matrix[j]) for i, j in ids[known]], dtype=np.float64)
    gold = pairs.gold[known]
    if np.ptp(model) == 0:
        # vectors that give every pair the same cosine (all zero, say, or a file of a pair and
        # its reverse) rank no pair above another: no correlation is defined, and NaN says so
        # as gensim's does (scipy would warn first); a 0 would read as "unrelated"
        spearman = pearson = math.nan
    else:
        from scipy import stats  # see _unit

        spearman = float(stats.spearmanr(gold, model).statistic)
        pearson = float(stats.pearsonr(gold, model).statistic)
    oov = len(ids) - used
    # gensim's order of operations: its oov_ratio to the last bit
    return SimilarityResult(pairs.source, spearman, pearson, oov / len(ids) * 100, used, oov,
                            restrict_vocab, pairs.invalid_lines)
