"""Word vectors: the object behind ``embedlab.load`` and every query command.

>>> import embedlab
>>> vec = embedlab.load("runs/demo-sg")            # run folder (latest checkpoint), checkpoint
>>> vec.most_similar("king", k=5)                  # folder, word2vec text/binary or .npy file
>>> vec.analogy("man", "king", "woman")            # man is to king as woman is to ?
>>> vec.evaluate_analogies("questions-words.txt").accuracy
>>> vec.most_similar(positive=["king", "woman"], negative=["man"], topn=5)  # gensim's calls too

It also speaks gensim's ``KeyedVectors`` dialect (``vec["king"]``, ``key_to_index``,
``evaluate_word_analogies``...; see :mod:`embedlab.vectors_gensim`).

Invariants:

* ``matrix`` is a read-only float32 array of shape ``(len(words), dim)``; row ``i`` belongs to
  ``words[i]``. Vocabulary order is frequency order for runs (id = row, UNK first when the run
  has one); for word2vec files it is file order (assumed to be frequency order, as gensim does).
  ``restrict_vocab`` options therefore mean "the N most frequent words".
* ``words`` are unique. ``counts`` (int64, one per word) is known only for run folders and npy
  exports that carry them.
* Nothing here modifies the matrix, and nothing draws random numbers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import numbers
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, overload

import numpy as np
from numpy.typing import ArrayLike

from embedlab.errors import (
    InputError,
    checked_bool,
    checked_step,
    counted,
    on_command_line,
    python_entry,
    spell,
)
from embedlab.eval.analogy import AnalogyResult, QuestionSet, evaluate_analogies, parse_questions
from embedlab.eval.neighbors import Metric, check_metric, nearest, suggest
from embedlab.eval.scoring import Method, analogy_scores, cosine_to_all, row_norms, top_k, unit_rows
from embedlab.eval.similarity import (
    DEFAULT_RESTRICT,
    PairSet,
    SimilarityResult,
    evaluate_similarity,
    parse_pairs,
)
from embedlab.fsutil import checked_path, clip, text_lines
from embedlab.vectors_gensim import (
    Count,
    Key,
    KeyedVectorsDialect,
    Keys,
    MissingFileError,
    as_list,
    candidate_rows,
    check_topn,
    one_of,
    read_analogy_text,
    read_text_file,
    restricted,
)

PathLike = str | os.PathLike[str]
_P = ParamSpec("_P")
_R = TypeVar("_R")


class UnknownWordError(InputError, KeyError):
    """A word that is not in the vocabulary: an :class:`InputError` (one line with suggestions
    on the command line) that is also the ``KeyError`` gensim users catch."""

    __str__ = Exception.__str__  # the message as it is, not quoted as KeyError quotes its key


def _checked_words(words: Any) -> tuple[str, ...]:
    """``Vectors``' words as a tuple of str (NumPy's str as Python's); anything but a sequence
    of str is a one-line :class:`InputError`."""
    if isinstance(words, str | bytes):
        raise InputError(f"words= must be a sequence of str, one per row, got the "
                         f"{type(words).__name__} {clip(repr(words))}; e.g. words=['king', "
                         "'queen']")
    try:
        words = tuple(words)
    except TypeError:
        raise InputError(f"words= must be a sequence of str, one per row, got "
                         f"{type(words).__name__} {clip(repr(words))}; e.g. words=['king', "
                         "'queen']") from None
    kinds = set(map(type, words))  # one pass in C: a million words take milliseconds
    if kinds <= {str}:
        return words
    for i, word in enumerate(words):
        if not isinstance(word, str):
            raise InputError(f"words[{i}] is {type(word).__name__} {clip(repr(word))}, not a "
                             "str; pass every word as a str (e.g. str(word))")
    return tuple(map(str, words))  # np.str_ and other subclasses as plain str


def _checked_matrix(matrix: Any, words: tuple[str, ...]) -> np.ndarray:
    """``Vectors``' matrix as float32 (C order, no copy when it is already), one row of finite
    values per word; anything else is a one-line :class:`InputError`."""
    try:
        given = matrix if isinstance(matrix, np.ndarray) else np.asarray(matrix)
    except (TypeError, ValueError) as exc:
        raise InputError(f"matrix= must be numbers, a row of floats per word ({exc}); pass a "
                         f"2-D float array of shape ({len(words)}, DIM)") from None
    _refuse_non_numbers(given)
    try:
        with np.errstate(over="ignore"):  # a float64 beyond float32's range: refused below
            matrix = np.array(given, dtype=np.float32, copy=None, order="C")
    except (TypeError, ValueError) as exc:
        raise InputError(f"matrix= must be numbers, a row of floats per word ({exc}); pass a "
                         f"2-D float array of shape ({len(words)}, DIM)") from None
    if not words:
        raise InputError("no words given; pass at least one word, with its vector as a row of "
                         "matrix=")
    if matrix.ndim != 2 or matrix.shape[0] != len(words):
        raise InputError(f"matrix has shape {matrix.shape} for {len(words)} words; pass one row "
                         f"per word, a matrix of shape ({len(words)}, DIM), row i the vector of "
                         "words[i]")
    if matrix.shape[1] < 1:
        raise InputError(f"matrix has shape {matrix.shape}: vectors of no dimension; pass at "
                         "least one column")
    # One product, no V×D temporary: a row's sum is finite unless the row holds NaN or an
    # infinity (or values so large that their sum overflows: np.isfinite then decides).
    with np.errstate(over="ignore", invalid="ignore"):
        sums = matrix @ np.ones(matrix.shape[1], dtype=np.float32)
    if not np.isfinite(sums).all():
        bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
        if bad.size:
            row = int(bad[0])
            value = matrix[row][~np.isfinite(matrix[row])][0]
            raise InputError(f"the vector of words[{row}] {words[row]!r} holds {value}, not a "
                             "finite float32 number (NaN, infinite or beyond ±3.4e38), which "
                             "would poison every query; fix or drop that row")
    return matrix


def _refuse_non_numbers(given: np.ndarray) -> None:
    """Refuse what NumPy would turn into float32 silently or wrongly: text ("1.5" read as a
    number), complex values (their imaginary parts dropped), None (read as NaN)."""
    kind: str = given.dtype.kind
    odd: list[Any] = []
    if kind == "O":  # items of any type: the first that is not a number, if any
        odd = [x for x in given.ravel().tolist() if not _is_number(x)][:1]
        kind = "" if not odd else "c" if isinstance(odd[0], complex) else "O"
    what = {"U": "text", "S": "text", "c": "complex numbers", "M": "dates", "m": "time spans",
            "V": "records"}.get(kind)
    if kind == "O":
        what = f"{type(odd[0]).__name__} {clip(repr(odd[0]))}"
    if what is not None:
        raise InputError(f"matrix= holds {what} (dtype {given.dtype}), not real numbers; pass "
                         "a 2-D float array of shape (words, DIM)")


def _is_number(value: Any) -> bool:
    """An item of an object array NumPy reads as a float for what it is: a real number of any
    kind (int, float, Decimal, Fraction, NumPy's); not text, None or a complex number."""
    if isinstance(value, str | bytes | complex | np.complexfloating) or value is None:
        return False
    try:
        float(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


_INT64_MAX = np.iinfo(np.int64).max


def _is_count(value: Any) -> bool:
    """Whether one item of ``counts=`` is a whole number that int64 holds (not a bool)."""
    if isinstance(value, bool | np.bool_):
        return False
    if isinstance(value, numbers.Integral):
        return 0 <= int(value) <= _INT64_MAX
    if not isinstance(value, numbers.Real):
        return False
    number = float(value)
    return number.is_integer() and 0 <= number < 2.0**63  # is_integer: False for NaN, inf


def _checked_counts(counts: Any, words: int) -> np.ndarray | None:
    """``Vectors``' counts as a read-only int64 copy (never the caller's array, which they may
    change), a whole number >= 0 per word: what vocab.tsv holds and ``load`` reads back. Anything
    else is a one-line :class:`InputError`."""
    if counts is None:
        return None
    try:
        array = None if isinstance(counts, str | bytes) else np.asarray(counts)
    except (TypeError, ValueError):  # nested sequences of different lengths
        array = None
    if array is None or array.ndim != 1:
        got = (f"an array of shape {counts.shape}" if isinstance(counts, np.ndarray) else
               f"{type(counts).__name__} {clip(repr(counts))}")
        raise InputError(f"counts= must be one whole number >= 0 per word ({words} of them), "
                         f"got {got}; pass a list or 1-D array of the words' counts, in the "
                         "words' order, or counts=None")
    if len(array) != words:
        raise InputError(f"{len(array)} counts for {words} words; pass one count per word, in "
                         "the words' order, or counts=None")
    # a fraction would be cut off, a negative count written to a vocab.tsv that load refuses
    items: Sequence[Any] | np.ndarray = array
    with np.errstate(invalid="ignore"):
        if array.dtype.kind in "iu":
            good = (array >= 0) & (array <= _INT64_MAX)
        elif array.dtype.kind == "f":
            good = (array >= 0) & (array < 2.0**63) & (np.floor(array) == array)
        else:  # text, bools, objects; [1, "x"] is an array of text: its items as given
            items = counts if isinstance(counts, Sequence) else array.tolist()
            good = np.fromiter(map(_is_count, items), dtype=bool, count=len(array))
    if not good.all():
        i = int(np.flatnonzero(~good)[0])
        value = items[i].item() if isinstance(items[i], np.generic) else items[i]
        if isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_) and \
                (int(value) > _INT64_MAX if isinstance(value, numbers.Integral)
                 else float(value) >= 2.0**63):
            raise InputError(f"counts[{i}] is {clip(repr(value))}, more than a count holds "
                             f"(at most {_INT64_MAX:,}, int64); pass each word's count (how "
                             "often it occurs), or counts=None")
        raise InputError(f"counts[{i}] is {type(value).__name__} {clip(repr(value))}, not a "
                         "whole number >= 0; pass each word's count (how often it occurs) as "
                         "an integer, or counts=None")
    out = array.astype(np.int64)  # a copy, also of an int64 array
    out.flags.writeable = False
    return out


def _refuse_duplicate(words: tuple[str, ...]) -> None:
    """Raise :class:`InputError` naming the first word listed twice."""
    first: dict[str, int] = {}
    for i, word in enumerate(words):
        if word in first:
            raise InputError(f"words[{i}] {word!r} is listed twice (first as "
                             f"words[{first[word]}]); words must be unique: drop or rename one, "
                             "with its row")
        first[word] = i


class _Default(int):
    """An argument's default, told apart from the same value given (``topn=10``)."""


_TOPN = _Default(10)


def _count_as_second_argument(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """embedlab's ``most_similar(word, 10)``: an integer as the second and last positional
    argument is the count ``k``. By name (``negative=3``), or followed by more positional
    arguments as in gensim's ``most_similar("king", 3, 5)``, it is ``negative``: a row number."""

    @functools.wraps(method)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        count = args[2] if len(args) == 3 else None  # (self, positive, count)
        if isinstance(count, int | np.integer) and not isinstance(count, bool):
            if "topn" in kwargs:
                raise TypeError(f"a second positional integer is the count k, and topn= is a "
                                f"count too; pass one of them (negative={int(count)}, by name, "
                                f"is row {int(count)} as a negative key, as in gensim)")
            kwargs["k"] = one_of("k", kwargs.get("k"), "a second positional argument",
                                 int(count))
            args = args[:2]  # type: ignore[assignment]
        return method(*args, **kwargs)

    return call


@dataclass(frozen=True, eq=False, init=False)
class Vectors(KeyedVectorsDialect):
    """Words, their vectors (V×D float32, read-only) and, when known, their corpus counts."""

    words: tuple[str, ...]
    matrix: np.ndarray
    counts: np.ndarray | None = None
    source: str = ""
    _index: dict[str, int] = field(init=False, repr=False)

    # __init__ is written out, not generated: it takes lists and other arrays, and the
    # attributes' types are what it makes of them
    def __init__(self, words: Sequence[str] | np.ndarray, matrix: ArrayLike,
                 counts: ArrayLike | None = None, source: str = "") -> None:
        checked = _checked_words(words)
        array = _checked_matrix(matrix, checked)
        index = {w: i for i, w in enumerate(checked)}
        if len(index) != len(checked):
            _refuse_duplicate(checked)
        if array.flags.writeable:
            if isinstance(matrix, np.ndarray) and np.may_share_memory(array, matrix):
                # the caller's array, which they may change: the norms would go stale (a
                # cosine of -7); an array given read-only is shared as it is
                array = array.copy()
            array.flags.writeable = False
        object.__setattr__(self, "words", checked)
        object.__setattr__(self, "matrix", array)
        object.__setattr__(self, "counts", _checked_counts(counts, len(checked)))
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "_index", index)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled or deep-copied: NumPy gives the arrays back writable, and an edit would
        leave the cached norms stale (cosines above 1); they are read-only again, as loaded."""
        for value in state.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        self.__dict__.update(state)

    # ---- basics ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, key: object) -> bool:
        """A word of the vocabulary, or (as in gensim) a row number."""
        if isinstance(key, int | np.integer):
            return bool(0 <= key < len(self.words))
        return key in self._index

    def __repr__(self) -> str:
        return f"Vectors({len(self)} words × {self.dim} dims from {self.source or '<memory>'})"

    @property
    def dim(self) -> int:
        """The number of values in each vector (the matrix's columns)."""
        return int(self.matrix.shape[1])

    @cached_property
    def norms(self) -> np.ndarray:
        """Row norms (float32, V, read-only: the queries use them), computed once. A row too
        long for float32 (values near 1e19 and up, whose squares overflow) is refused: every
        cosine with it would read 0."""
        with np.errstate(over="ignore"):
            norms = row_norms(self.matrix)
        if not np.isfinite(norms).all():
            row = int(np.argmin(np.isfinite(norms)))
            biggest = float(np.abs(self.matrix[row]).max())
            raise InputError(f"the vector of {self.words[row]!r} is too long for float32 "
                             f"arithmetic (it holds {biggest:.3g}; its squared length overflows "
                             "3.4e38), so its cosines would be wrong; scale the vectors down "
                             "(divide the matrix by its largest value) and load them again")
        norms.flags.writeable = False
        return norms

    def index(self, word: Key) -> int:
        """Row of ``word``; a row number (an int, as gensim takes one) is itself; unknown
        words raise :class:`UnknownWordError` with suggestions."""
        if isinstance(word, int | np.integer) and not isinstance(word, bool):
            if 0 <= word < len(self.words):
                return int(word)
            raise UnknownWordError(f"row {word} is not in the vocabulary (rows 0 to "
                                   f"{len(self.words) - 1}); pass a word or a row number in "
                                   "that range")
        i = self._index.get(word) if isinstance(word, str) else None
        if i is None:
            if not isinstance(word, str):
                raise UnknownWordError(f"{clip(repr(word))} is not a word or a row number; pass "
                                       "a str (or an int row)")
            raise UnknownWordError(self._unknown_message(word))
        return i

    def vector(self, word: Key) -> np.ndarray:
        """The (read-only) vector of ``word``, or of a row number."""
        return self.matrix[self.index(word)]

    def _unknown_message(self, word: str) -> str:
        import unicodedata

        for form in ("NFC", "NFD"):  # looks the same, and is another sequence of code points
            other = unicodedata.normalize(form, word)
            if other != word and other in self:  # escaped: the two print alike
                fix = f"pass the word in {form} form" if on_command_line() else \
                    f"pass unicodedata.normalize({form!r}, word)"
                return (f"{word!a} is not in the vocabulary ({counted(len(self), 'word')}), but "
                        f"{other!a}, the same text in Unicode's {form} form, is: words are "
                        f"matched exactly, not normalised; {fix}")
        close = suggest(word, self.words)
        hint = (f"did you mean {', '.join(close)}?" if close
                else "check the spelling or the case; words are matched exactly")
        return f"{word!r} is not in the vocabulary ({len(self)} words); {hint}"

    # ---- queries ---------------------------------------------------------------------------
    @overload
    def most_similar(self, positive: Keys = None, negative: Keys = None, topn: Count = 10,
                     clip_start: Count = 0, clip_end: Count | None = None,
                     restrict_vocab: Count | None = None, indexer: None = None, *,
                     k: Count | None = None, word: Keys = None, metric: Metric = "cosine"
                     ) -> list[tuple[str, float]]: ...

    @overload
    def most_similar(self, positive: Keys = None, negative: Keys = None, *, topn: None,
                     clip_start: Count = 0, clip_end: Count | None = None,
                     restrict_vocab: Count | None = None, indexer: None = None
                     ) -> np.ndarray: ...

    @_count_as_second_argument
    def most_similar(self, positive: Keys = None, negative: Keys = None,
                     topn: Count | None = _TOPN, clip_start: Count = 0,
                     clip_end: Count | None = None, restrict_vocab: Count | None = None,
                     indexer: None = None, *, k: Count | None = None, word: Keys = None,
                     metric: Metric = "cosine") -> list[tuple[str, float]] | np.ndarray:
        """The nearest words to a word (or to the mean of several words), best first.

        Scores are cosine similarities (``metric="cosine"``, higher = closer) or Euclidean
        distances on the raw vectors (``metric="euclidean"``, lower = closer). Several words
        are one query: the mean of their unit vectors with ``metric="cosine"`` (gensim's), the
        mean of their vectors with ``metric="euclidean"``. The query
        words are excluded. Also gensim's call, with gensim's arguments in gensim's order:
        ``positive``/``negative`` words, row numbers, vectors or ``(word, weight)`` pairs,
        ``topn`` (``None``: the cosines of all candidates, an array), ``clip_start`` and
        ``clip_end`` (only rows ``clip_start`` to ``clip_end - 1`` are candidates),
        ``restrict_vocab`` (only the first N words are candidates) and ``indexer`` (None only).
        ``word`` is ``positive`` and ``k`` is ``topn``, except that ``k`` < 1 raises where
        ``topn`` < 1 returns nothing. ``most_similar("king", 5)``, an integer as the second
        and last positional argument, is ``k=5``; ``negative=5`` by name is row 5, as in gensim.
        """
        check_topn(topn)
        check_metric(metric)  # before the query's checks, whose hints assume a known metric
        positive = one_of("positive", positive, "word", word)
        if k is not None:
            if topn is not _TOPN:  # given, even as 10: one of the two counts was meant
                raise TypeError(f"pass k or topn, not both (got k={k!r}, topn={topn!r})")
            _check_k(k)
            topn = k
        elif isinstance(topn, int | np.integer) and topn < 1:
            return []
        if indexer is not None:
            raise InputError(f"indexer={clip(repr(indexer))}: approximate indexes (gensim's "
                             "AnnoyIndexer...) are not supported; drop indexer=: most_similar "
                             "compares the query with every candidate row exactly")
        start, end = candidate_rows(clip_start, clip_end, restrict_vocab, len(self))
        query, rows = self._query(as_list(positive), as_list(negative), metric)
        if topn is None:
            if metric != "cosine":
                raise InputError(f"topn=None returns cosine similarities; drop metric={metric!r} "
                                 "or pass an integer topn")
            return cosine_to_all(self.matrix[start:end], self.norms[start:end], query[None])[0]
        found = nearest(self.matrix[start:end], self.norms[start:end], query, int(topn),
                        metric=metric, exclude=[r - start for r in rows if start <= r < end])
        return [(self.words[start + i], s) for i, s in found]

    def _query(self, positive: list[Any], negative: list[Any], metric: Metric
               ) -> tuple[np.ndarray, list[int]]:
        """The query vector of :meth:`most_similar` and the rows of its words: of several
        words, the mean of their unit vectors for cosine and of their vectors for euclidean."""
        if not positive and not negative:
            raise InputError("no query word given; pass at least one word")
        if not negative and all(isinstance(w, str | int | np.integer) for w in positive):
            ids = [self.index(w) for w in positive]
            if len(ids) == 1 or metric == "euclidean":
                return self.matrix[ids].mean(axis=0), ids
            return unit_rows(self.matrix, self.norms, np.asarray(ids)).mean(axis=0), ids
        if metric != "cosine":
            raise InputError(f"metric={metric!r} ranks by the distance to the mean of positive "
                             "words; negative words, weights and vectors need metric='cosine'")
        return self._weighted_query(positive, negative, self.index)

    # a and b keep their None defaults for gensim's similarity(w1=, w2=); the overloads tell a
    # type checker that two words are needed, either way
    @overload
    def similarity(self, a: Key, b: Key) -> float: ...

    @overload
    def similarity(self, *, w1: Key, w2: Key) -> float: ...

    def similarity(self, a: Key | None = None, b: Key | None = None, *, w1: Key | None = None,
                   w2: Key | None = None) -> float:
        """Cosine similarity of two words, in [-1, 1] (0 if either vector is zero); ``w1`` and
        ``w2`` are gensim's names for ``a`` and ``b``."""
        first, second = one_of("a", a, "w1", w1), one_of("b", b, "w2", w2)
        if first is None or second is None:
            raise TypeError("similarity() needs two words")
        va, vb = self.vector(first).astype(np.float64), self.vector(second).astype(np.float64)
        den = float(np.linalg.norm(va) * np.linalg.norm(vb))
        # the rounding of a word with itself can give 1 + 2e-16 (np.clip keeps a NaN)
        return float(np.clip(float(va @ vb) / den, -1.0, 1.0)) if den > 0 else 0.0

    def analogy(self, a: Key, b: Key, c: Key, k: Count = 10, *,
                method: Method = "3cosadd") -> list[tuple[str, float]]:
        """"``a`` is to ``b`` as ``c`` is to ?": the ``k`` best answers, best first.

        3CosAdd ranks by cos(x, b - a + c) on unit vectors (scores are cosines); 3CosMul by
        Levy & Goldberg's multiplicative objective. ``a``, ``b``, ``c`` are never answers.
        """
        _check_k(k)
        _check_method(method)
        ids = np.array([[self.index(a)], [self.index(b)], [self.index(c)]], dtype=np.int64)
        scores = analogy_scores(self.matrix, self.norms, ids[0], ids[1], ids[2], len(self),
                                method)[0]
        scores[ids[:, 0].tolist()] = float("-inf")
        k = min(int(k), len(self) - len(set(ids[:, 0].tolist())))
        if k <= 0:
            return []
        return [(self.words[i], float(scores[i])) for i in top_k(scores, k).tolist()]

    # ---- evaluation ------------------------------------------------------------------------
    @python_entry
    def evaluate_analogies(self, questions: PathLike | QuestionSet,
                           restrict_vocab: Count | None = 30_000,
                           method: Method = "3cosadd") -> AnalogyResult:
        """Accuracy on a questions-words file, per section and in total (gensim's semantics; see
        :mod:`embedlab.eval.analogy`). Only the ``restrict_vocab`` most frequent words count
        (``None``: all)."""
        _check_method(method)
        restricted(restrict_vocab, len(self))  # checked; the result records what was asked
        if not isinstance(questions, QuestionSet):
            path = checked_path("questions", questions, "a questions-words file",
                                " or a QuestionSet")
            questions = parse_questions(text_lines(read_analogy_text(path)), str(path))
        return evaluate_analogies(self.words, self.matrix, self.norms, questions, method=method,
                                  restrict_vocab=int(restrict_vocab or len(self)))

    @python_entry
    def evaluate_similarity(self, pairs: PathLike | PairSet,
                            restrict_vocab: Count | None = DEFAULT_RESTRICT) -> SimilarityResult:
        """Spearman/Pearson correlation with human scores (gensim's ``evaluate_word_pairs``;
        see :mod:`embedlab.eval.similarity`); ``None`` for ``restrict_vocab``: all words."""
        restricted(restrict_vocab, len(self))  # checked; the result records what was asked
        ps = pairs if isinstance(pairs, PairSet) else _read_pairs(
            checked_path("pairs", pairs, "a 'word1<TAB>word2<TAB>score' file", " or a PairSet"))
        return evaluate_similarity(self.words, self.matrix, self.norms, ps,
                                   restrict_vocab=int(restrict_vocab or len(self)))

    # ---- export ----------------------------------------------------------------------------
    @python_entry
    def to_word2vec(self, path: PathLike, binary: bool | None = None, *,
                    force: bool = False) -> Path:
        """Write the word2vec text (or binary) format atomically; refuses to overwrite unless
        ``force``. Text values are written with 9 significant digits, so they round-trip exactly.

        ``binary``: None (the default) chooses by the name, as ``embedlab export`` does: binary
        for ``.bin`` (``.bin.gz``...), text otherwise; a ``.bin`` name with ``binary=False`` or a
        ``.txt`` or ``.vec`` name with ``binary=True`` is refused, since a reader goes by the
        name.
        (:meth:`save_word2vec_format` writes what it is told, as gensim's does.)"""
        from embedlab.export.word2vec import format_suffix

        path = checked_path("path", path, "the word2vec file to write")
        suffix = format_suffix(Path(path))
        if binary is None:
            binary = suffix == ".bin"
        binary = checked_bool("binary", binary)
        if suffix == ".bin" and not binary:
            raise InputError(f"path={os.fspath(path)!r} names a binary file, but binary=False "
                             "writes text (gensim would read it with binary=True and fail); "
                             "pass binary=True, or a name ending in .txt")
        if suffix in (".txt", ".vec") and binary:  # .vec: fastText's text files
            raise InputError(f"path={os.fspath(path)!r} names a text file, but binary=True "
                             "writes binary; pass binary=False, or a name ending in .bin")
        return self._write_word2vec(path, binary, checked_bool("force", force))

    def _write_word2vec(self, path: PathLike, binary: bool, force: bool) -> Path:
        from embedlab.export.word2vec import write_word2vec

        with _run_exports_folder(Path(path)):
            return write_word2vec(Path(path), self.words, self.matrix, binary=binary,
                                  force=force)

    @python_entry
    def to_npy(self, path: PathLike, *, force: bool = False) -> tuple[Path, Path]:
        """Write ``NAME.npy`` and ``NAME.vocab.tsv`` (with counts when known)."""
        from embedlab.export.npy import write_npy

        path = checked_path("path", path, "the .npy file to write")
        force = checked_bool("force", force)
        with _run_exports_folder(Path(path)):
            return write_npy(Path(path), self.words, self.matrix, self.counts, force=force)


@contextlib.contextmanager
def _run_exports_folder(path: Path) -> Iterator[None]:
    """Around a write of ``path``: a file in ``RUN/exports/`` of a run that has no such folder
    yet gets it made first, as ``embedlab export`` makes it (and as the refusal of a path among
    a run's own files suggests); that folder alone, and removed again if the write fails."""
    folder = path.parent
    made = folder.name == "exports" and not folder.exists() and not folder.is_symlink() \
        and _holds_exports(folder.parent)
    if made:
        from embedlab.export.atomic import make_exports_folder

        make_exports_folder(path, path.name)
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only while empty: nothing of anyone else's is removed
        raise


def _holds_exports(folder: Path) -> bool:
    """Whether ``folder`` is a run whose exports belong in ``folder/exports`` (what
    :func:`embedlab.export.atomic.saved_folder_of` counts as a run): a run of embedlab's, or a
    subset of checkpoints written by ``embedlab ckpt --export-subset``."""
    from embedlab.checkpoint import CKPT_DIR, INDEX_FILE
    from embedlab.run.folder import is_a_run

    return ((folder / "config.json").is_file() and is_a_run(folder)) or (
        (folder / CKPT_DIR).is_dir() and (folder / INDEX_FILE).is_file())


def _check_k(k: Count) -> None:
    if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}; e.g. k=10")


def _read_pairs(path: PathLike) -> PairSet:
    """``read_pairs`` naming Python's fixes, not the CLI's flags (the CLI reads its files)."""
    text = read_text_file(path, what="similarity file",
                          missing_fix="pass the path of a 'word1<TAB>word2<TAB>score' file",
                          unreadable_fix="pass a UTF-8 'word1<TAB>word2<TAB>score' file")
    return parse_pairs(text_lines(text), str(path))


def _check_method(method: str) -> None:
    if method not in ("3cosadd", "3cosmul"):
        raise InputError(f"unknown analogy method {method!r}; use 3cosadd or 3cosmul")


# ---- loading --------------------------------------------------------------------------------

@python_entry
def load(path: PathLike, *, step: Count | None = None, best: bool = False,
         limit: Count | None = None, encoding: str = "utf-8", **gensim_options: Any) -> Vectors:
    """Load vectors from a run folder, a checkpoint folder, a word2vec text/binary file or a
    ``.npy`` export (with its ``.vocab.tsv``).

    For a run folder, ``step`` picks a checkpoint and ``best`` the best one (default: the newest
    verified checkpoint). The input embeddings are used. ``limit``: the first N words only
    (gensim's ``load_word2vec_format(limit=N)``; a run's N most frequent). ``encoding``: the
    words' encoding in a word2vec file (gensim's ``encoding=``: 'cp1251', 'latin-1'...); runs
    and ``.npy`` exports are UTF-8. Never unpickles. gensim's other
    ``load_word2vec_format`` options (``binary=``...) are refused in one line that says what to
    do instead.
    """
    if gensim_options:
        _refuse_gensim_options(gensim_options)
    if not isinstance(path, str | os.PathLike):
        raise InputError(f"path= must be the path of a run folder, a checkpoint folder or a "
                         f"vectors file (a str or os.PathLike), got {type(path).__name__} "
                         f"{clip(repr(path))}")
    step, best = checked_step("step", step, path), checked_bool("best", best)
    if limit is not None and (not isinstance(limit, int | np.integer) or isinstance(limit, bool)
                              or limit < 1):
        raise InputError(f"limit must be None (every word) or an integer >= 1 (the first N "
                         f"words), got {clip(repr(limit))}; e.g. limit=100000")
    limit = None if limit is None else int(limit)
    utf8 = _checked_encoding(encoding)
    p = Path(path)
    if not p.exists():
        raise MissingFileError(f"{p} does not exist; pass a run folder, a checkpoint folder or "
                               "a word2vec/.npy vectors file", p)
    if not utf8 and (p.is_dir() or p.suffix.lower() == ".npy"):
        raise InputError(f"encoding={encoding!r} is for word2vec files, but {p} is a "
                         f"{'folder' if p.is_dir() else '.npy export'}, whose words are UTF-8; "
                         "drop encoding=")
    if p.is_dir():
        if step is not None and best:  # said here, not by find_checkpoint, to name arguments
            raise InputError(f"{spell('--step')} and {spell('--best')} are mutually exclusive; "
                             "pass one of them")
        return _load_checkpoint(p, step=step, best=best, limit=limit)
    if step is not None or best:
        raise InputError(f"{spell('--step')}/{spell('--best')} choose a checkpoint of a run "
                         f"folder, but {p} is a file; drop them or pass the run folder")
    if not p.is_file():
        # a pipe (<(...), /dev/stdin), a FIFO or a device: a vectors file is mapped and read
        # more than once, and a FIFO without a writer would block for ever; said before opening
        raise InputError(f"{p} is not a regular file (a pipe, FIFO or device); save the vectors "
                         "to a file first and pass its path")
    if p.suffix.lower() == ".npy":
        from embedlab.export.npy import read_npy

        words, matrix, counts = read_npy(p)
        return _first(words, matrix, counts, str(p), limit)
    _refuse_pickle(p)
    from embedlab.export.word2vec import read_word2vec

    # the first limit records only are read: GoogleNews's 3M words are 3.6 GB
    words, matrix = read_word2vec(p, limit, encoding)
    return _first(words, matrix, None, str(p), limit)


def _checked_encoding(encoding: Any) -> bool:
    """Refuse an encoding Python does not know; whether it is UTF-8."""
    import codecs

    try:
        if not isinstance(encoding, str):
            raise LookupError
        b"a".decode(encoding, errors="replace")  # 'hex', 'rot13', 'base64': codecs of no text
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        raise InputError(f"encoding={clip(repr(encoding))} is not an encoding Python knows; "
                         "pass a codec name such as 'utf-8', 'cp1251' or 'latin-1'") from None


#: gensim's ``KeyedVectors.load_word2vec_format`` options that ``load`` does without: what to do
_GENSIM_LOAD_OPTIONS = {
    "binary": "binary= is not needed: load tells a binary word2vec file from a text one by its "
              "content (and gzip, bzip2 or xz by their first bytes); drop binary=",
    "fvocab": "fvocab=: load reads no separate vocabulary file; drop fvocab= (a run folder, or "
              "an .npy export with its .vocab.tsv, carries the words' counts)",
    "unicode_errors": "unicode_errors=: bytes that are not UTF-8 in a word read as U+FFFD, with "
                      "a warning (gensim's unicode_errors='replace'); drop unicode_errors=",
    "datatype": "datatype=: vectors load as float32; drop datatype= (vec.matrix.astype(...) is "
                "a copy of another type)",
    "no_header": "no_header=: a word2vec file starts with its 'VOCAB_SIZE DIM' line; drop "
                 "no_header= and add that line (the number of words and of values per word)",
}


def _refuse_gensim_options(options: dict[str, Any]) -> None:
    """One line for the keyword arguments ``load`` does not take: gensim's say what to do
    instead, other names list ``load``'s."""
    hints = [_GENSIM_LOAD_OPTIONS[name] for name in options if name in _GENSIM_LOAD_OPTIONS]
    if hints:
        raise InputError("; ".join(hints))
    raise InputError(f"load() takes no {', '.join(f'{n}=' for n in options)}; its arguments "
                     "are path, step=, best=, limit= and encoding=")


def _refuse_pickle(path: Path) -> None:
    """A pickle (gensim's ``model.save()``) is refused naming gensim's call that writes the
    vectors as a word2vec file; it is never unpickled, which could run any code."""
    try:
        with path.open("rb") as fh:
            head = fh.read(2)
    except OSError:
        return  # the reader reports it
    if len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5:  # pickle protocols 2 to 5
        out = str(path.with_suffix(".bin"))
        raise InputError(f"{path} is a pickle (gensim's model.save() or kv.save() writes one), "
                         "which embedlab never loads (unpickling can run any code); in gensim, "
                         "save the vectors as word2vec: model.wv.save_word2vec_format("
                         f"{out!r}, binary=True) (kv.save_word2vec_format for KeyedVectors), "
                         "and load that file")


def _first(words: Sequence[str], matrix: np.ndarray, counts: np.ndarray | None, source: str,
           limit: int | None) -> Vectors:
    """:class:`Vectors` of the first ``limit`` words (``None``: all), copied out of the
    larger arrays so that those can be freed."""
    if limit is not None and limit < len(words):
        words, matrix = words[:limit], np.array(matrix[:limit])
        counts = None if counts is None else np.array(counts[:limit])
    matrix.flags.writeable = False  # read here, nobody else's: Vectors need not copy it
    return Vectors(tuple(words), matrix, counts, source)


def _load_checkpoint(path: Path, *, step: int | None, best: bool,
                     limit: int | None = None) -> Vectors:
    from embedlab.checkpoint import find_checkpoint
    from embedlab.data.vocab import Vocab

    ckpt = find_checkpoint(path, step=step, best=best)
    run_dir = ckpt.parent.parent  # RUN/checkpoints/ckpt-N
    vocab_file = run_dir / "vocab.tsv"
    latest = step is None and not best and ckpt.parent.name == "checkpoints" and \
        Path(path).resolve() == run_dir.resolve()
    from embedlab.run.folder import is_linreg_run

    if not vocab_file.is_file() and is_linreg_run(run_dir):
        raise InputError(f"{run_dir} is a run of 'embedlab linreg' (a line's w and b), not "
                         "word vectors; pass a run of 'embedlab train'")
    if not vocab_file.is_file():
        raise InputError(f"no vocabulary {vocab_file} for checkpoint {ckpt}; the run folder is "
                         "incomplete - restore vocab.tsv or export vectors from another run")
    vocab = Vocab.load_tsv(vocab_file)
    from embedlab.checkpoint.manager import RELISTS

    # a run in training saving faster than it is read: as often as a listing is retried
    attempts = RELISTS + 1 if latest else 1
    for attempt in range(1, attempts + 1):
        try:
            matrix, _state = load_input_embeddings(ckpt)
            break
        except (InputError, OSError):
            # a run in training: its retention may delete the newest checkpoint found between
            # finding it and reading it, once a newer one is saved; that one is read instead
            if attempt == attempts or ckpt.exists():
                raise
            ckpt = find_checkpoint(path)
    check_vocab_fits(vocab_file, len(vocab), ckpt, matrix)
    check_recorded_words(vocab_file, vocab.words, ckpt, _state.get("vocabulary"))
    if not _trained_on_a_prepared_folder(run_dir):  # else RUN/prepared is not its source
        _check_same_words(vocab_file, vocab.words, run_dir / "prepared" / "vocab.tsv")
    return _first(vocab.words, matrix, vocab.counts, str(ckpt), limit)


def check_recorded_words(vocab_file: Path, words: Sequence[str], ckpt: Path,
                          recorded: Any) -> None:
    """Refuse a vocab.tsv whose words, in row order, are not those the checkpoint recorded
    (checkpoints of earlier versions record none): vectors must not go out under other words'
    names, whatever became of the run's files."""
    from embedlab.training.state import vocabulary_sha256

    if isinstance(recorded, str) and recorded != vocabulary_sha256(words):
        raise InputError(f"{vocab_file} is not the vocabulary {ckpt.name} was trained with (its "
                         "words or their order differ: edited, or replaced?); restore it from "
                         "the run's prepared corpus (its vocab.tsv) or a backup")


def _trained_on_a_prepared_folder(run_dir: Path) -> bool:
    """Whether the run's config names a prepared folder as its corpus, which the trainer reads
    directly (a RUN/prepared left by an earlier attempt in the folder is then stale)."""
    from embedlab.data.corpus import says_prepared

    data = _json_object(run_dir / "config.json").get("data")
    corpus = data.get("corpus") if isinstance(data, dict) else None
    if not isinstance(corpus, str):
        return False
    from embedlab.run.folder import creation_folder

    folder = creation_folder(run_dir)
    for base in (Path.cwd(), folder):
        if base is not None and says_prepared(base / corpus / "meta.json"):
            return True
    return False


def _check_same_words(vocab_file: Path, words: tuple[str, ...], trained: Path) -> None:
    """Refuse a ``vocab.tsv`` whose words are not, in order, those of the prepared copy the run
    was trained on (``RUN/prepared``, where the run has one): reordered or replaced by hand,
    it would put every vector under another word's name. The files are compared as bytes first
    (the run's copy is written in the same form); words only where the bytes differ."""
    import filecmp

    from embedlab.data.vocab import Vocab

    try:
        filecmp.clear_cache()  # its cache goes by (size, mtime): a same-size edit within a tick
        if not trained.is_file() or filecmp.cmp(vocab_file, trained, shallow=False):
            return
        other = Vocab.load_tsv(trained).words
    except (OSError, InputError):  # an unreadable copy: nothing to compare with
        return
    # a copy of another length is no copy of this run's vocabulary (the rows fit vocab_file)
    if len(other) == len(words) and other != words:
        at = next(i for i, (a, b) in enumerate(zip(words, other, strict=True)) if a != b)
        raise InputError(f"{vocab_file} does not list the words the run was trained with, in "
                         f"their order (line {at + 1}: {words[at]!r}, where {trained} has "
                         f"{other[at]!r}); copy {trained} to {vocab_file}")


def check_vocab_fits(vocab_file: Path, words: int, ckpt: Path, matrix: np.ndarray) -> None:
    """Raise :class:`InputError` unless ``matrix``, the input embeddings of checkpoint ``ckpt``,
    has one row per word of the run's ``vocab_file`` (which lists ``words`` words).

    A mismatch means vocab.tsv was replaced or edited after training; the message names a
    vocabulary file to copy back when one with the right number of words is at hand.
    """
    from embedlab.checkpoint import lists_them

    if matrix.ndim != 2:
        raise InputError(f"checkpoint {ckpt} holds input embeddings of shape "
                         f"{tuple(matrix.shape)}, not a words × dims matrix; use another "
                         f"checkpoint ({lists_them(ckpt)})")
    rows = int(matrix.shape[0])
    if rows == words:
        return
    fits = [p for p in _vocab_sources(vocab_file.parent, ckpt) if _words_in(p) == rows]
    fix = (f"copy {fits[0]}, which lists {rows} words, to {vocab_file}" if fits else
           f"restore {vocab_file} (the {rows}-word vocabulary the checkpoint was trained with) "
           "from a backup or from the prepared corpus the run was trained on")
    raise InputError(f"{vocab_file} lists {words} words but checkpoint {ckpt} has {rows} rows "
                     f"of input embeddings; {fix}")


def _vocab_sources(run_dir: Path, ckpt: Path) -> list[Path]:
    """Where a copy of the vocabulary a checkpoint was trained with may be: the prepared corpus
    the trainer read it from (RUN/prepared or the run's --corpus), and for a subset written by
    ``embedlab ckpt --export-subset`` the run it was exported from."""
    from embedlab.checkpoint import STATE_FILE

    found = [run_dir / "prepared" / "vocab.tsv"]
    data = _json_object(run_dir / "config.json").get("data")
    if isinstance(data, dict) and isinstance(data.get("corpus"), str):
        found.append(Path(data["corpus"]) / "vocab.tsv")
    source = _json_object(ckpt / STATE_FILE).get("exported_from")
    if isinstance(source, str):
        found.append(Path(source).parent.parent / "vocab.tsv")  # SRC/checkpoints/ckpt-N
    return found


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _words_in(path: Path) -> int | None:
    from embedlab.data.vocab import Vocab

    try:
        return len(Vocab.load_tsv(path)) if path.is_file() else None
    except (InputError, OSError):  # unreadable: not a file to suggest
        return None


INPUT_EMBEDDINGS = "input_embeddings"


def load_input_embeddings(ckpt: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """``(input embeddings as float32 V×D, state)`` of one (verified) checkpoint folder.

    A subset written by ``embedlab ckpt --export-subset --map NEW=input_embeddings`` stores them
    under NEW and records ``{NEW: "input_embeddings"}`` as ``original_names`` in its state; that
    record, not the tensor names, says which tensor to use.
    """
    from embedlab.checkpoint import load_checkpoint

    name = stored_name(ckpt, INPUT_EMBEDDINGS)
    try:
        tensors, state = load_checkpoint(ckpt, names=[name])
    except InputError:
        held = _tensor_names(ckpt)
        if not held or name in held:
            raise
        # a subset of other tensors (the output embeddings, say): how to read one as vectors;
        # hs_nodes (inner nodes of the Huffman tree) and output_bias have no vector a word
        rows = [t for t in held if t not in ("hs_nodes", "output_bias")]
        if not rows:
            raise InputError(f"checkpoint {ckpt} holds no word vectors (it has: "
                             f"{', '.join(held)}, none of them a vector per word); export the "
                             "input_embeddings of the run it came from") from None
        other = rows[0]
        raise InputError(f"checkpoint {ckpt} holds no input embeddings, which are the word "
                         f"vectors; it has: {', '.join(held)}. To read {other} as the vectors, "
                         f"write a subset that names it so: embedlab ckpt {ckpt.parent.parent} "
                         f"--export-subset OUT --names {other} --map {INPUT_EMBEDDINGS}={other}"
                         ) from None
    return np.asarray(tensors[name], dtype=np.float32), state


def _tensor_names(ckpt: Path) -> list[str] | None:
    """The names of the tensors a checkpoint folder holds, sorted; None if it cannot be read."""
    from safetensors import safe_open

    from embedlab.checkpoint.format import TENSORS_FILE

    try:
        with safe_open(str(ckpt / TENSORS_FILE), framework="numpy") as f:
            return sorted(f.keys())
    except Exception:  # damage is load_checkpoint's to report
        return None


def stored_name(ckpt: Path, original: str) -> str:
    """The name under which checkpoint ``ckpt`` holds the tensor first saved as ``original``:
    a subset written with ``--map NEW=original`` records it; else ``original`` itself."""
    from embedlab.checkpoint import STATE_FILE

    try:
        state = json.loads((ckpt / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return original  # load_checkpoint reports the damage, naming the fix
    return recorded_name(state, original)


def recorded_name(state: Any, original: str) -> str:
    """:func:`stored_name` from a checkpoint's state already read."""
    names = state.get("original_names") if isinstance(state, dict) else None
    if isinstance(names, dict):
        for new, old in names.items():
            if old == original and isinstance(new, str):
                return new
    return original
