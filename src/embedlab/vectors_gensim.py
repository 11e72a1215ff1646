"""gensim's ``KeyedVectors`` dialect, spoken by :class:`embedlab.vectors.Vectors`.

Code written for gensim 4 keeps working on ``embedlab.load(...)``: ``vec["king"]``,
``vec.most_similar(positive=["king", "woman"], negative=["man"], topn=5)``,
``vec.evaluate_word_analogies("questions-words.txt")``... take gensim's arguments and return
what gensim returns (tests/test_vectors_gensim.py compares both on the same vectors). The
maths is :mod:`embedlab.eval`'s. ``most_similar`` and ``similarity`` are embedlab's own methods
(see :mod:`embedlab.vectors`), which also take gensim's arguments.

Where the dialect departs from gensim, on purpose:

* an unknown word is ``KeyError("Key 'w' not present")`` in every method here, also in
  ``n_similarity`` and ``doesnt_match``, which gensim 4.4 answers by skipping the word;
* ``most_similar_cosmul`` honours ``restrict_vocab``, which gensim 4.4 accepts and ignores;
* a zero vector has cosine 0 with everything (gensim: NaN) and stays zero when normed, and the
  vectors are read-only;
* ``save_word2vec_format`` writes ``fname`` and ``binary`` only (gensim's ``fvocab`` and
  its other options are refused unless at their defaults);
* ``evaluate_word_pairs`` returns plain ``(statistic, p-value)`` tuples of floats;
* ``evaluate_word_analogies`` refuses a ``similarity_function`` other than ``"most_similar"``,
  which gensim 4.4 accepts and ignores;
* ``restrict_vocab`` must be ``None`` (every word) or at least 1;
* a missing file is a :class:`MissingFileError`, an :class:`InputError` that is also gensim's
  ``FileNotFoundError``.
"""

from __future__ import annotations

import io
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, overload

import numpy as np

from embedlab.errors import InputError, MissingFileError, checked_bool, python_entry
from embedlab.eval.analogy import case_groups, no_section_yet
from embedlab.eval.scoring import COSMUL_EPS, analogy_scores, cosine_to_all, safe, top_k
from embedlab.eval.similarity import _cosine as gensim_cosine
from embedlab.export.atomic import path_argument
from embedlab.fsutil import checked_path, clip, file_bytes, read_utf8, text_lines

PathLike = str | os.PathLike[str]
# Real aliases, not strings: typing.get_type_hints() of the methods resolves them (the names
# of a string alias would be looked up in the module of each method that uses it).
#: a word or a row number, gensim's "key"
Key: TypeAlias = str | int | np.integer
#: a count or a row bound: NumPy's integers count as Python's
Count: TypeAlias = int | np.integer
#: several keys: a list or tuple of them, or a NumPy array of words or row numbers
KeyList: TypeAlias = Sequence[Key] | np.ndarray
#: a term of a query: a key, or a vector (1-D array) used as it is
Term: TypeAlias = Key | np.ndarray
#: ``positive=``/``negative=``: nothing, one term or several, each maybe with its weight
Keys: TypeAlias = Term | tuple[Term, float] | Sequence[Term | tuple[Term, float]] | None
_K = TypeVar("_K", bound=Key)  # the type of the keys given, which a method returns one of

GENSIM_RESTRICT = 300_000  # the restrict_vocab default of gensim's evaluate_word_* methods
_TOP = 5  # gensim's evaluate_word_analogies looks at this many answers per question
_SCORE_BUDGET = 1 << 25  # analogy scores held at once (128 MiB of float32)


def read_text_file(path: PathLike, *, what: str, missing_fix: str, unreadable_fix: str) -> str:
    """:func:`~embedlab.fsutil.read_utf8` of a file a Python caller named: its one-line
    :class:`InputError`, a :class:`MissingFileError` when the file does not exist."""
    try:
        return read_utf8(Path(path), what=what, missing_fix=missing_fix,
                         unreadable_fix=unreadable_fix)
    except InputError as exc:
        if Path(path).exists():
            raise
        raise MissingFileError(str(exc), path) from None


class EmptyListError(ZeroDivisionError, ValueError):
    """``n_similarity`` of an empty list: the ZeroDivisionError gensim raises, and a ValueError
    like embedlab's other refusals, so that either ``except`` catches it."""


class KeyedVectorsDialect:
    """gensim ``KeyedVectors``' attributes and methods, for :class:`~embedlab.vectors.Vectors`
    (which provides ``words``, ``matrix``, ``norms`` and ``dim``)."""

    if TYPE_CHECKING:  # provided by Vectors
        words: tuple[str, ...]
        matrix: np.ndarray
        _index: dict[str, int]

        @property
        def norms(self) -> np.ndarray: ...

        @property
        def dim(self) -> int: ...

        def __len__(self) -> int: ...

        most_similar: Callable[..., Any]
        similarity: Callable[..., float]
        _write_word2vec: Callable[..., Path]

    # ---- attributes ----------------------------------------------------------------------
    @property
    def vectors(self) -> np.ndarray:
        """The V×D float32 matrix (read-only): row ``i`` is ``index_to_key[i]``'s vector."""
        return self.matrix

    @property
    def vector_size(self) -> int:
        """The number of values in each vector (gensim's name of :attr:`dim`)."""
        return self.dim

    @property
    def index_to_key(self) -> tuple[str, ...]:
        """The words in row order (frequency order for runs)."""
        return self.words

    @property
    def key_to_index(self) -> Mapping[str, int]:
        """word -> row, a read-only view (the vocabulary of a Vectors never changes)."""
        return MappingProxyType(self._index)

    # ---- vectors -------------------------------------------------------------------------
    __iter__ = None  # iterating over a Vectors is a TypeError, not a loop over rows by number

    def __getitem__(self, key_or_keys: Key | KeyList) -> np.ndarray:
        """The vector of one word or row number (1-D, read-only), or of several as rows of a
        new 2-D array."""
        if isinstance(key_or_keys, str | int | np.integer):
            return self.get_vector(key_or_keys)
        try:  # bytes would be read as row numbers, one per byte
            keys = None if isinstance(key_or_keys, bytes | bytearray) else iter(key_or_keys)
        except TypeError:  # a float, a 0-d array...
            keys = None
        if keys is None:
            raise InputError(f"key_or_keys must be a word (a str), a row number (an int) or a "
                             f"list of them, got {type(key_or_keys).__name__} "
                             f"{clip(repr(key_or_keys))}; e.g. vec['king'] or "
                             "vec[['king', 'queen']]")
        return self.matrix[[self.get_index(k) for k in keys]]

    def get_vector(self, key: Key, norm: bool = False) -> np.ndarray:
        """The vector of ``key``, a word or a row number (read-only); with ``norm`` scaled to
        unit length."""
        row = self.get_index(key)
        if not checked_bool("norm", norm):
            return self.matrix[row]
        unit = self.matrix[row] / safe(self.norms[row : row + 1])[0]
        unit.flags.writeable = False
        return unit

    def get_index(self, key: Any, default: int | None = None) -> int:
        """The row of ``key``; an integer row number is itself; else ``default`` if given, or
        gensim's ``KeyError("Key 'w' not present")``."""
        row = self._index.get(key, -1) if isinstance(key, str) else -1
        if row >= 0:
            return row
        if isinstance(key, int | np.integer) and 0 <= key < len(self.words):
            return int(key)
        if default is not None:
            return default
        raise KeyError(f"Key '{key}' not present")

    def has_index_for(self, key: Any) -> bool:
        """Whether ``key`` has a row (a word of the vocabulary, or a row number)."""
        return self.get_index(key, -1) >= 0

    def get_normed_vectors(self) -> np.ndarray:
        """Every vector scaled to unit length (a new V×D float32 array; a zero vector stays
        zero, where gensim divides by 0)."""
        return self.matrix / safe(self.norms)[:, None]

    @staticmethod
    def cosine_similarities(vector_1: np.ndarray, vectors_all: np.ndarray) -> np.ndarray:
        """Cosine similarities between one vector and each row of ``vectors_all`` (0 where
        either is a zero vector)."""
        norm = np.linalg.norm(vector_1)
        all_norms = np.linalg.norm(vectors_all, axis=1)
        return (vectors_all @ vector_1) / safe(norm * all_norms)

    def _key_row(self, key: object) -> int:
        """Row of ``key`` (a word, or a row number as gensim takes one); an unknown key raises
        gensim's ``KeyError("Key 'w' not present")``."""
        if isinstance(key, bool):
            raise KeyError(f"Key '{key}' not present")
        return self.get_index(key)

    def _query_term(self, key: Term, lookup: Callable[[Key], int] | None = None
                    ) -> tuple[np.ndarray, int | None]:
        """A query item as gensim uses it: a word's unit vector and its row, or a vector as
        given (and no row). ``lookup`` maps a word to its row (default :meth:`_key_row`)."""
        if isinstance(key, np.ndarray):
            if key.size != self.dim:
                raise InputError(f"a query vector must have {self.dim} values (the vectors' "
                                 f"dimension), got one of shape {key.shape}")
            vector = np.asarray(key, dtype=np.float32).reshape(self.dim)
            if not np.isfinite(vector).all():  # every score would be nan, ranked anyhow
                raise InputError("a query vector holds nan or inf values, which give no "
                                 "similarity; pass a vector of finite values")
            return vector, None
        row = (lookup or self._key_row)(key)
        return self.matrix[row] / safe(self.norms[row : row + 1])[0], row

    def _weighted_query(self, positive: list[Any], negative: list[Any],
                        lookup: Callable[[Key], int]) -> tuple[np.ndarray, list[int]]:
        """gensim's ``most_similar`` query and the rows of its words: the mean of the items'
        terms (:meth:`_query_term`) weighted +1 (positive) or -1 (negative), or by ``w`` for
        an item ``(key, w)``."""
        terms, weights, rows = [], [], []
        for sign, items in ((1.0, positive), (-1.0, negative)):
            for item in items:
                key, weight = item if isinstance(item, tuple) else (item, sign)
                if not _is_weight(weight):
                    raise InputError(f"a (word, weight) pair needs a number as its weight, got "
                                     f"{item!r}; e.g. ({key!r}, 0.5)")
                if not _finite(weight):
                    raise InputError(f"a (word, weight) pair needs a finite weight, got "
                                     f"{item!r}; e.g. ({key!r}, 0.5)")
                term, row = self._query_term(key, lookup)
                terms.append(term)
                weights.append(weight)
                rows += [] if row is None else [row]
        w = np.asarray(weights, dtype=np.float32)
        total = float(np.abs(w).sum())  # 0 only when every weight is: then gensim does not divide
        return (w[:, None] * np.stack(terms)).sum(axis=0) / (total or 1.0), rows

    # ---- similarities --------------------------------------------------------------------
    @overload
    def most_similar_cosmul(self, positive: Keys = None, negative: Keys = None, topn: Count = 10,
                            restrict_vocab: Count | None = None) -> list[tuple[str, float]]: ...

    @overload
    def most_similar_cosmul(self, positive: Keys = None, negative: Keys = None, *, topn: None,
                            restrict_vocab: Count | None = None) -> np.ndarray: ...

    def most_similar_cosmul(self, positive: Keys = None, negative: Keys = None,
                            topn: Count | None = 10, restrict_vocab: Count | None = None
                            ) -> list[tuple[str, float]] | np.ndarray:
        """Levy & Goldberg's 3CosMul generalised (gensim's ``most_similar_cosmul``): rank by
        the product of the shifted cosines (1 + cos) / 2 with the ``positive`` words over
        that with the ``negative`` ones (+ 1e-6). Words of the query are never answers;
        ``topn=None`` returns the scores of every word (of the first ``restrict_vocab``), of
        gensim's dtype: float64, and with negative items float32 unless a float64 vector is
        among the items. Words and vectors only: a
        ``(word, weight)`` pair has no meaning in a product of cosines (gensim's takes none
        either)."""
        check_topn(topn)
        if isinstance(topn, int | np.integer) and topn < 1:
            return []
        items = as_list(positive) + as_list(negative)
        if any(isinstance(item, tuple) for item in items):
            raise InputError("most_similar_cosmul takes words and vectors, not (word, weight) "
                             "pairs; pass the words alone, or use most_similar for weights")
        pos = [self._query_term(k) for k in as_list(positive)]
        neg = [self._query_term(k) for k in as_list(negative)]
        if not pos:
            raise ValueError("cannot compute similarity with no input")
        n = restricted(restrict_vocab, len(self))
        terms = np.stack([t for t, _ in pos + neg])
        # gensim divides by the row norms only: a vector given raw is used as it is
        shifted = (1 + (terms @ self.matrix[:n].T) / safe(self.norms[:n])) / 2
        scores = np.prod(shifted[: len(pos)], axis=0) / (
            np.prod(shifted[len(pos) :], axis=0) + np.float32(COSMUL_EPS))
        if topn is None:  # gensim's dtype: its empty product (no negatives) is float64's 1.0,
            # and a float64 vector given makes its cosines float64
            given = [np.asarray(k).dtype for k in items if isinstance(k, np.ndarray)]
            return scores.astype(np.result_type(np.float32, *given) if neg else np.float64)
        rows = [r for _, r in pos + neg if r is not None]
        return self._best_of(scores, int(topn), rows)

    def _best_of(self, scores: np.ndarray, topn: int, exclude: Sequence[int]
                ) -> list[tuple[str, float]]:
        """The ``topn`` best ``(word, score)`` of ``scores`` (one per row of the first
        ``len(scores)``), best first, rows in ``exclude`` left out."""
        masked = sorted({r for r in exclude if r < len(scores)})
        scores[masked] = -np.inf
        k = min(topn, len(scores) - len(masked))
        if k <= 0:
            return []
        return [(self.words[i], float(scores[i])) for i in top_k(scores, k).tolist()]

    @overload
    def similar_by_word(self, word: Key, topn: Count = 10, restrict_vocab: Count | None = None
                        ) -> list[tuple[str, float]]: ...

    @overload
    def similar_by_word(self, word: Key, topn: None, restrict_vocab: Count | None = None
                        ) -> np.ndarray: ...

    def similar_by_word(self, word: Key, topn: Count | None = 10,
                        restrict_vocab: Count | None = None
                        ) -> list[tuple[str, float]] | np.ndarray:
        """``most_similar(positive=[word], topn=topn, restrict_vocab=restrict_vocab)``."""
        return self.similar_by_key(word, topn, restrict_vocab)

    @overload
    def similar_by_key(self, key: Term, topn: Count = 10, restrict_vocab: Count | None = None
                       ) -> list[tuple[str, float]]: ...

    @overload
    def similar_by_key(self, key: Term, topn: None, restrict_vocab: Count | None = None
                       ) -> np.ndarray: ...

    def similar_by_key(self, key: Term, topn: Count | None = 10, restrict_vocab: Count | None = None
                       ) -> list[tuple[str, float]] | np.ndarray:
        """``most_similar(positive=[key], topn=topn, restrict_vocab=restrict_vocab)``: ``key`` a
        word or a row number."""
        return self.most_similar(positive=[key], topn=topn, restrict_vocab=restrict_vocab)

    @overload
    def similar_by_vector(self, vector: np.ndarray, topn: Count = 10,
                          restrict_vocab: Count | None = None) -> list[tuple[str, float]]: ...

    @overload
    def similar_by_vector(self, vector: np.ndarray, topn: None,
                          restrict_vocab: Count | None = None) -> np.ndarray: ...

    def similar_by_vector(self, vector: np.ndarray, topn: Count | None = 10,
                          restrict_vocab: Count | None = None
                          ) -> list[tuple[str, float]] | np.ndarray:
        """The words nearest to ``vector`` by cosine (none excluded), best first."""
        return self.most_similar(positive=[vector], topn=topn, restrict_vocab=restrict_vocab)

    def closer_than(self, key1: Key, key2: Key) -> list[str]:
        """The words (``key1`` left out) closer to ``key1`` than ``key2`` is, by cosine
        distance, in row order."""
        distances = self.distances(key1)
        row1, row2 = self._key_row(key1), self._key_row(key2)
        closer = np.flatnonzero(distances < distances[row2])
        return [self.words[i] for i in closer.tolist() if i != row1]

    def words_closer_than(self, word1: Key, word2: Key) -> list[str]:
        """gensim's older name of :meth:`closer_than`."""
        return self.closer_than(word1, word2)

    def rank(self, key1: Key, key2: Key) -> int:
        """Where ``key2`` comes among the words nearest to ``key1``: 1 + the number of words
        closer (:meth:`closer_than`)."""
        return len(self.closer_than(key1, key2)) + 1

    @overload
    def most_similar_to_given(self, key1: Key, keys_list: Sequence[_K]) -> _K: ...

    @overload
    def most_similar_to_given(self, key1: Key, keys_list: np.ndarray) -> Key: ...

    def most_similar_to_given(self, key1: Key, keys_list: KeyList) -> Key:
        """The key of ``keys_list`` most similar to ``key1`` (the first of equals), as given: a
        row number given is returned as that number, not as its word."""
        refuse_bytes(keys_list)
        sims = [self.similarity(key1, key) for key in keys_list]
        return keys_list[int(np.argmax(sims))]

    def n_similarity(self, ws1: KeyList, ws2: KeyList) -> float:
        """Cosine similarity of the mean vectors of two lists of words."""
        refuse_bytes(ws1)
        refuse_bytes(ws2)
        if not (len(ws1) and len(ws2)):
            raise EmptyListError("At least one of the passed list is empty.")
        mean1 = self.matrix[[self._key_row(w) for w in ws1]].mean(axis=0)
        mean2 = self.matrix[[self._key_row(w) for w in ws2]].mean(axis=0)
        return gensim_cosine(mean1, mean2)

    @overload
    def doesnt_match(self, words: Sequence[_K]) -> _K: ...

    @overload
    def doesnt_match(self, words: np.ndarray) -> Key: ...

    def doesnt_match(self, words: KeyList) -> Key:
        """The key of ``words`` least similar to the mean of their unit vectors, as given."""
        refuse_bytes(words)
        if len(words) == 0:  # a NumPy array of words has no truth value
            raise ValueError("cannot select a word from an empty list")
        units = np.stack([self._query_term(w)[0] for w in words])
        mean = units.mean(axis=0)
        sims = units @ (mean / max(float(np.linalg.norm(mean)), 1e-30))
        return min(zip(sims.tolist(), words, strict=True))[1]  # gensim: ties go to min(word)

    def distance(self, w1: Key, w2: Key) -> float:
        """Cosine distance, 1 - cosine similarity."""
        return 1.0 - gensim_cosine(self.matrix[self._key_row(w1)], self.matrix[self._key_row(w2)])

    def distances(self, word_or_vector: Term, other_words: KeyList = ()) -> np.ndarray:
        """Cosine distances (float32) from a word or vector to ``other_words``, or to every
        word (itself included) when ``other_words`` is empty."""
        refuse_bytes(word_or_vector)
        refuse_bytes(other_words)
        query = (self.get_vector(word_or_vector)
                 if isinstance(word_or_vector, str | int | np.integer)
                 else self._query_term(np.asarray(word_or_vector))[0])
        if len(other_words):
            rows = [self._key_row(w) for w in other_words]
            cos = cosine_to_all(self.matrix[rows], self.norms[rows], query[None])[0]
        else:
            cos = cosine_to_all(self.matrix, self.norms, query[None])[0]
        return 1 - cos

    # ---- files ---------------------------------------------------------------------------
    @python_entry
    def save_word2vec_format(self, fname: PathLike, fvocab: PathLike | None = None,
                             binary: bool = False, total_vec: int | None = None,
                             write_header: bool = True, prefix: str = "",
                             append: bool = False, sort_attr: str = "count") -> None:
        """The word2vec text or binary format, as gensim writes it, in row order (frequency
        order for a run), overwriting ``fname`` as gensim does (:meth:`to_word2vec` refuses to
        overwrite unless ``force``). gensim's other options are accepted at their defaults
        only: another value is an :class:`InputError`."""
        given = {"fvocab": (fvocab, None), "total_vec": (total_vec, None),
                 "write_header": (write_header, True), "prefix": (prefix, ""),
                 "append": (append, False), "sort_attr": (sort_attr, "count")}
        other = [name for name, (value, default) in given.items() if value != default]
        if other:
            counts = " (to_npy writes the vocabulary with its counts)" if "fvocab" in other \
                else ""
            raise InputError(f"save_word2vec_format writes fname= and binary= only; drop "
                             f"{', '.join(f'{n}=' for n in other)}{counts}")
        fname = checked_path("fname", fname, "the word2vec file to write")
        with path_argument("fname"):
            self._write_word2vec(fname, checked_bool("binary", binary), True)

    # ---- evaluation ----------------------------------------------------------------------
    def evaluate_word_analogies(self, analogies: PathLike,
                                restrict_vocab: Count | None = GENSIM_RESTRICT,
                                case_insensitive: bool = True, dummy4unknown: bool = False,
                                similarity_function: str = "most_similar"
                                ) -> tuple[float, list[dict[str, Any]]]:
        """gensim's ``evaluate_word_analogies``: ``(accuracy, sections)``, each section a dict
        ``{"section": name, "correct": [(a, b, c, d), ...], "incorrect": [...]}``, the last
        one ``"Total accuracy"``. Only the first ``restrict_vocab`` words count, as questions
        and as answers; a question with another word is skipped, or with ``dummy4unknown``
        counted incorrect. 3CosAdd, the question words excluded (:mod:`embedlab.eval.analogy`
        gives the same numbers, without the lists): ``similarity_function`` is
        ``"most_similar"``, the only one gensim 4.4 applies (it ignores another name)."""
        if similarity_function != "most_similar":
            raise InputError(f"similarity_function={similarity_function!r}: "
                             "evaluate_word_analogies answers with most_similar (3CosAdd) only "
                             "(gensim 4.4 takes another name and ignores it); drop "
                             "similarity_function=, or for 3CosMul call "
                             "evaluate_analogies(path, method='3cosmul')")
        analogies = checked_path("analogies", analogies, "a questions-words file")
        n = restricted(restrict_vocab, len(self))
        case_insensitive = checked_bool("case_insensitive", case_insensitive)
        dummy4unknown = checked_bool("dummy4unknown", dummy4unknown)
        lookup, group = vocabulary_keys(self.words, n, case_insensitive)
        names, quads, section_of = read_analogies(analogies, case_insensitive)
        ids = np.array([[lookup.get(w, -1) for w in q] for q in quads], dtype=np.int64)
        known = np.all(ids >= 0, axis=1)
        hits = np.zeros(len(quads), dtype=bool)
        hits[known] = solve_analogies(self.matrix, self.norms, ids[known], group, n)
        sections: list[dict[str, Any]] = [{"section": name, "correct": [], "incorrect": []}
                                          for name in names]
        for quad, sec, ok, hit in zip(quads, section_of, known.tolist(), hits.tolist(),
                                      strict=True):
            if ok or dummy4unknown:
                sections[sec]["correct" if hit else "incorrect"].append(quad)
        total = {"section": "Total accuracy",
                 "correct": [q for s in sections for q in s["correct"]],
                 "incorrect": [q for s in sections for q in s["incorrect"]]}
        answered = len(total["correct"]) + len(total["incorrect"])
        return (len(total["correct"]) / answered if answered else 0.0), [*sections, total]

    def evaluate_word_pairs(self, pairs: PathLike, delimiter: str | None = "\t",
                            encoding: str = "utf8",
                            restrict_vocab: Count | None = GENSIM_RESTRICT,
                            case_insensitive: bool = True, dummy4unknown: bool = False
                            ) -> tuple[tuple[float, float], tuple[float, float], float]:
        """gensim's ``evaluate_word_pairs``: ``((pearson, p), (spearman, p), oov_ratio)``,
        the correlations of the cosine similarities with the scores of ``word1 word2 score``
        lines (``#`` comments), ``oov_ratio`` the percent of pairs with a word outside the
        first ``restrict_vocab``. Such pairs are left out, or with ``dummy4unknown`` scored 0
        (and ``oov_ratio`` is then over all pairs, as gensim counts it)."""
        from scipy import stats  # imported here: see embedlab.eval.similarity

        pairs = checked_path("pairs", pairs, "a word-pairs file")
        case_insensitive = checked_bool("case_insensitive", case_insensitive)
        dummy4unknown = checked_bool("dummy4unknown", dummy4unknown)
        lookup, _ = vocabulary_keys(self.words, restricted(restrict_vocab, len(self)),
                                    case_insensitive)
        gold: list[float] = []
        model: list[float] = []
        oov = 0
        for a, b, score in read_pairs(pairs, delimiter, encoding, case_insensitive):
            known = a in lookup and b in lookup
            oov += not known
            if known or dummy4unknown:
                gold.append(score)
                model.append(gensim_cosine(self.matrix[lookup[a]], self.matrix[lookup[b]])
                             if known else 0.0)
        if len(gold) < 2:
            raise InputError(f"{len(gold)} usable word pairs in {pairs} (a correlation needs 2); "
                             f"check delimiter={delimiter!r}, case_insensitive and restrict_vocab")
        pearson, spearman = stats.pearsonr(gold, model), stats.spearmanr(gold, model)
        # in gensim's order of operations, so that the float is gensim's to the last bit
        oov_ratio = float(oov) / (len(gold) if dummy4unknown else len(gold) + oov) * 100
        return ((float(pearson.statistic), float(pearson.pvalue)),
                (float(spearman.statistic), float(spearman.pvalue)), oov_ratio)


# ---- helpers ----------------------------------------------------------------------------------

def refuse_bytes(value: object) -> None:
    """Raise for ``bytes`` given where words are: iterated, they are row numbers, one per byte
    (``most_similar(b"king")`` would be a query of rows 107, 105, ...)."""
    if isinstance(value, bytes | bytearray):  # a memoryview may be a vector's buffer
        from embedlab.vectors import UnknownWordError

        raise UnknownWordError(f"{clip(repr(value))} is not a word or a row number; pass a str "
                               "(or an int row)")


def as_list(value: Keys) -> list[Any]:
    """gensim's reading of ``positive``/``negative``: nothing, one word, row number or vector,
    or several."""
    if value is None:
        return []
    refuse_bytes(value)
    if isinstance(value, np.ndarray) and value.ndim == 1 and _holds_words(value):
        return value.tolist()  # words, as NumPy holds them: several, not one vector
    if isinstance(value, str | int | np.integer) or (isinstance(value, np.ndarray) and
                                                     value.ndim == 1):
        return [value]
    return list(value)


def _holds_words(array: np.ndarray) -> bool:
    """Whether a 1-D array holds words (``np.array(["king", "man"])``), not a vector's values."""
    return array.dtype.kind in "US" or (array.dtype.kind == "O" and len(array) > 0 and
                                        all(isinstance(x, str) for x in array.tolist()))


def check_topn(topn: object) -> None:
    """``topn``: an integer or None (gensim's ``topn=0`` and below return nothing)."""
    if topn is not None and (not isinstance(topn, int | np.integer) or isinstance(topn, bool)):
        raise InputError(f"topn must be an integer or None, got {topn!r}; e.g. topn=10")


def one_of(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """The value of an argument that has two names (embedlab's and gensim's)."""
    if value is not None and alias_value is not None:
        raise TypeError(f"pass {name} or {alias}, not both")
    return alias_value if value is None else value


def _finite(value: Any) -> bool:
    """Whether a weight is a finite number (an int beyond float's range is not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _is_weight(value: Any) -> bool:
    """A number gensim can weight a query term by (a NumPy scalar or 0-d array, a Decimal...);
    not a bool, whose True would be a weight of 1 by accident, nor text."""
    if isinstance(value, bool | np.bool_ | str | bytes):
        return False
    if isinstance(value, numbers.Real):
        return True
    if np.ndim(value) != 0:
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def restricted(restrict_vocab: Count | None, words: int) -> int:
    """How many words a ``restrict_vocab`` lets count (``None``: all of them)."""
    if restrict_vocab is None:
        return words
    if not isinstance(restrict_vocab, int | np.integer) or isinstance(restrict_vocab, bool) \
            or restrict_vocab < 1:
        raise InputError(f"restrict_vocab must be None or an integer >= 1, got {restrict_vocab!r}; "
                         f"e.g. restrict_vocab={GENSIM_RESTRICT}")
    return min(int(restrict_vocab), words)


def candidate_rows(clip_start: Count, clip_end: Count | None, restrict_vocab: Count | None,
                   words: int) -> tuple[int, int]:
    """The rows ``most_similar`` ranks, ``(start, end)``: rows ``clip_start`` to ``clip_end - 1``
    (``None``: to the last), or the first ``restrict_vocab``, as gensim's arguments say."""
    if restrict_vocab is not None and (clip_start != 0 or clip_end is not None):
        raise InputError(f"restrict_vocab={restrict_vocab!r} and clip_start={clip_start!r}/"
                         f"clip_end={clip_end!r} both choose the candidate rows (gensim ignores "
                         "clip_start/clip_end then); pass one of them, e.g. "
                         f"clip_end={restrict_vocab!r} alone")
    if restrict_vocab is not None:
        return 0, restricted(restrict_vocab, words)
    if not isinstance(clip_start, int | np.integer) or isinstance(clip_start, bool) \
            or clip_start < 0:
        raise InputError(f"clip_start must be an integer >= 0 (the first candidate row), got "
                         f"{clip_start!r}; e.g. clip_start=0")
    if clip_end is not None and (not isinstance(clip_end, int | np.integer)
                                 or isinstance(clip_end, bool) or clip_end < 1):
        raise InputError(f"clip_end must be None (up to the last row) or an integer >= 1 (the "
                         f"row after the last candidate), got {clip_end!r}; e.g. "
                         f"clip_end={min(words, GENSIM_RESTRICT)}")
    end = words if clip_end is None else min(int(clip_end), words)
    if clip_start >= end:
        raise InputError(f"clip_start={clip_start!r} leaves no candidate rows (they end at row "
                         f"{end}: clip_end={clip_end!r}, {words} words); pass a clip_start "
                         f"below {end}")
    return int(clip_start), end


def vocabulary_keys(words: Sequence[str], n: int, case_insensitive: bool
                    ) -> tuple[dict[str, int], np.ndarray]:
    """As gensim's ``ok_vocab``: key (the upper-cased word, or the word) -> the first of the
    first ``n`` rows with that key; and each of those rows' key row (its group)."""
    if case_insensitive:
        return case_groups(words, n)
    return {w: i for i, w in enumerate(words[:n])}, np.arange(n, dtype=np.int64)


def read_analogies(path: PathLike, case_insensitive: bool
                   ) -> tuple[list[str], list[tuple[str, ...]], list[int]]:
    """A questions-words file read as gensim reads it: section names, questions (a, b, c, d;
    upper-cased when ``case_insensitive``) and each question's section. Lines that are not
    four words are skipped."""
    text = read_analogy_text(path)
    names: list[str] = []
    quads: list[tuple[str, ...]] = []
    section_of: list[int] = []
    for number, line in enumerate(text_lines(text), 1):
        if line.startswith(": "):
            names.append(line.lstrip(": ").strip())
            continue
        words = line.split()
        if words and not names:
            raise no_section_yet(str(path), number, line)
        if len(words) == 4:
            quads.append(tuple(w.upper() for w in words) if case_insensitive else tuple(words))
            section_of.append(len(names) - 1)
    if not quads:
        raise InputError(f"{path} holds no analogy questions; expected ': section' lines "
                         "followed by 'a b c d' lines (questions-words format)")
    return names, quads, section_of


def read_analogy_text(path: PathLike) -> str:
    """A questions-words file's text; a missing or unreadable file is an :class:`InputError`
    naming Python's fix (a missing one a :class:`MissingFileError`; the CLI reads its files
    itself, naming its flags)."""
    return read_text_file(path, what="analogy file",
                          missing_fix="pass the path of a questions-words file",
                          unreadable_fix="pass a UTF-8 questions-words file")


def solve_analogies(matrix: np.ndarray, norms: np.ndarray, ids: np.ndarray, group: np.ndarray,
                    n: int) -> np.ndarray:
    """gensim's verdict on each question (rows of ``ids``: key rows of a, b, c, d): among
    the 5 best 3CosAdd answers of the first ``n`` rows, the question rows left out, the first
    whose key is no question word's (else the 5th) must have d's key."""
    hits = np.zeros(len(ids), dtype=bool)
    batch = max(1, _SCORE_BUDGET // max(n, 1))
    for start in range(0, len(ids), batch):
        q = ids[start : start + batch]
        scores = analogy_scores(matrix, norms, q[:, 0], q[:, 1], q[:, 2], n, "3cosadd")
        for j, (row, question) in enumerate(zip(scores, q.tolist(), strict=True)):
            asked = sorted(set(question[:3]))
            row[asked] = -np.inf
            k = min(_TOP, n - len(asked))
            if k > 0:
                keys = group[top_k(row, k)].tolist()
                chosen = next((g for g in keys if g not in asked), keys[-1])
                hits[start + j] = chosen == question[3]
    return hits


def read_pairs(path: PathLike, delimiter: str | None, encoding: str, case_insensitive: bool
               ) -> list[tuple[str, str, float]]:
    """``(word1, word2, score)`` of each ``word1 word2 score`` line, split on ``delimiter`` and
    upper-cased when ``case_insensitive``, as gensim reads them (words are not stripped);
    ``#`` comments and other lines are skipped."""
    if delimiter is not None and (not isinstance(delimiter, str) or not delimiter):
        raise InputError(f"delimiter={clip(repr(delimiter))} must be a non-empty str, or None "
                         "for any whitespace (as str.split); e.g. delimiter='\\t'")
    if not isinstance(encoding, str):
        raise InputError(f"encoding={clip(repr(encoding))} must be a str naming an encoding; "
                         "e.g. encoding='utf8'")
    try:
        # decompressed by the name's suffix and read in text mode, as gensim's utils.open does
        data = file_bytes(Path(path), what="word-pairs file")
        lines = io.TextIOWrapper(io.BytesIO(data), encoding=encoding).readlines()
    except FileNotFoundError:
        raise MissingFileError(f"word-pairs file {path} does not exist; pass the path of a "
                               "'word1<TAB>word2<TAB>score' file", path) from None
    except (OSError, UnicodeError, LookupError) as exc:  # UTF-16 without a BOM: UnicodeError
        raise InputError(f"cannot read word-pairs file {path} ({exc}); pass a readable file "
                         "and its encoding, e.g. encoding='utf8'") from None
    out = []
    for line in lines:
        if line.startswith("#"):
            continue
        parts = [p.upper() for p in line.split(delimiter)] if case_insensitive else \
            line.split(delimiter)
        try:
            a, b, score = parts
            out.append((a, b, float(score)))
        except ValueError:
            continue
    return out
