"""Vocabulary: counting in bounded memory, selection, and the ``vocab.tsv`` format.

Ids follow the lecture's convention: when an UNK token is set it has id 0 and counts every token
that is mapped to it (out-of-vocabulary tokens and literal occurrences of the UNK string); then
words by count descending, ties broken by the word in ascending code-point order, so the same
counts always give the same ids.

``vocab.tsv`` holds one ``word<TAB>count`` line per word; the id is the 0-based line number.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedlab.data.corpus import vocabulary_fix
from embedlab.data.vocab_tsv import (
    SLICE,
    all_words_valid,
    check_word,
    file_identity,
    parse_columns,
    parse_slowly,
)
from embedlab.data.vocab_tsv import check_count_fits as check_count_fits  # re-exported
from embedlab.data.vocab_tsv import count_fits_int64 as count_fits_int64  # re-exported
from embedlab.errors import InputError, spell, spell_name, warn


@dataclass(frozen=True)
class PruneInfo:
    """What word2vec-style pruning did while counting (all zero = nothing was pruned).

    ``times``: how often the table was pruned; ``threshold``: the last count at or below which
    words were dropped; ``dropped_types``: distinct words dropped (a word dropped twice counts
    twice); ``dropped_tokens``: occurrences discarded with them. Counts of words that survive
    may be lower than their true counts by at most ``threshold`` per pruning.
    """

    times: int = 0
    threshold: int = 0
    dropped_types: int = 0
    dropped_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"times": self.times, "threshold": self.threshold,
                "dropped_types": self.dropped_types, "dropped_tokens": self.dropped_tokens}


@dataclass
class WordCounter:
    """Counts words with at most ``max_distinct`` entries (word2vec's ReduceVocab).

    Exactly like word2vec.c's ``LearnVocabFromTrainFile``: after *each token*, if the table holds
    more than ``max_distinct`` distinct words, every word with a count ``<= reduce`` is dropped
    and ``reduce`` grows by one. word2vec.c checks with an ``if``; a ``while`` would do the same,
    because the word that went over the limit is new (count 1 <= reduce) and is always dropped,
    so one pruning always brings the table back to at most ``max_distinct`` words (it holds one
    more only between a token and the pruning it triggers). Because the check follows each
    token, the result depends only on the token sequence, never on how it was split into blocks
    (lines, files, 1 MiB pieces). ``total`` counts every token seen, pruned or not.
    """

    max_distinct: int = 10_000_000
    counts: Counter[str] = field(default_factory=Counter)
    total: int = 0
    prune: PruneInfo = field(default_factory=PruneInfo)
    _reduce: int = 1

    def __post_init__(self) -> None:
        if self.max_distinct < 1:
            raise InputError(f"--max-distinct must be >= 1, got {self.max_distinct}; "
                             "pass e.g. --max-distinct 10000000")

    def update(self, tokens: Sequence[str]) -> None:
        counts, limit, n = self.counts, self.max_distinct, len(tokens)
        self.total += n
        start = 0
        while start < n:
            # Each token adds at most one new word, so within ``room`` tokens the table can pass
            # the limit only at the slice's last token: counting the slice in one C-level
            # Counter.update and checking after it is checking after each token, at block
            # speed (far from the limit, as usual, the whole block is one slice). max(1, ...):
            # counts filled in directly (token_ids.Scan) must not stall the loop.
            room = max(1, limit - len(counts) + 1)
            stop = min(n, start + room)
            counts.update(tokens if start == 0 and stop == n else tokens[start:stop])
            start = stop
            if len(counts) > limit:
                self._prune()

    def _prune(self) -> None:
        drop = [w for w, c in self.counts.items() if c <= self._reduce]
        tokens = 0
        for w in drop:
            tokens += self.counts.pop(w)
        self.prune = PruneInfo(self.prune.times + 1, self._reduce,
                               self.prune.dropped_types + len(drop),
                               self.prune.dropped_tokens + tokens)
        self._reduce += 1


@dataclass(frozen=True, eq=False)
class Vocab:
    """An immutable id <-> word mapping with counts.

    Invariants: ``len(words) == len(counts)``; words are unique, non-empty, whitespace-free;
    ``counts`` is int64 and >= 0; when ``unk`` is set, ``words[0] == unk``.

    The word -> id dict is built on first use: training reads a vocabulary of millions of words
    without ever looking a word up, and the dict costs more than everything else of a load.
    """

    words: tuple[str, ...]
    counts: npt.NDArray[np.int64]
    unk: str | None = None
    _index: dict[str, int] | None = field(init=False, repr=False, default=None)
    # the vocab.tsv this vocabulary was read from, as written by save_tsv, and its identity
    # (path, inode, size, mtime): save_tsv copies it instead of formatting every line again
    _source: tuple[Path, tuple[int, int, int]] | None = field(init=False, repr=False,
                                                              default=None)
    _words_hash: Any = field(init=False, repr=False, default=None)  # words_sha256's

    def __post_init__(self) -> None:
        self._check(known_unique=False)

    @classmethod
    def _of_unique_words(cls, words: tuple[str, ...], counts: npt.NDArray[np.int64],
                         unk: str | None) -> Vocab:
        """A vocabulary whose words are known to be unique (a native read of vocab.tsv hashed
        their bytes): the set of millions of words that would check it again takes seconds."""
        vocab = object.__new__(cls)
        for name, value in (("words", words), ("counts", counts), ("unk", unk),
                            ("_index", None), ("_source", None), ("_words_hash", None)):
            object.__setattr__(vocab, name, value)
        vocab._check(known_unique=True)
        return vocab

    def _check(self, *, known_unique: bool) -> None:
        """The invariants (``known_unique``: the words are known to be unique already)."""
        counts = np.asarray(self.counts, dtype=np.int64)
        counts.setflags(write=False)
        object.__setattr__(self, "words", tuple(self.words))
        object.__setattr__(self, "counts", counts)
        if counts.ndim != 1 or len(counts) != len(self.words):
            raise ValueError(f"{len(self.words)} words but counts of shape {counts.shape}")
        if len(counts) and counts.min() < 0:
            raise ValueError("counts must be >= 0")
        if not known_unique and len(set(self.words)) != len(self.words):  # set: 3x dict speed
            raise ValueError("duplicate words in vocabulary")
        if self.unk is not None and (not self.words or self.words[0] != self.unk):
            raise ValueError(f"unk {self.unk!r} must be word 0")

    def __len__(self) -> int:
        return len(self.words)

    def __repr__(self) -> str:  # not the dataclass's: it would print every word and count
        head = ", ".join(map(repr, self.words[:3])) + (", ..." if len(self.words) > 3 else "")
        unk = f", unk={self.unk!r}" if self.unk is not None else ""
        return f"Vocab({len(self.words):,} words: {head}{unk})"

    def __contains__(self, word: object) -> bool:
        return word in self.index

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return (self.words == other.words and self.unk == other.unk
                and np.array_equal(self.counts, other.counts))

    __hash__ = None  # type: ignore[assignment]

    @property
    def index(self) -> Mapping[str, int]:
        """word -> id (read it, don't change it)."""
        if self._index is None:
            object.__setattr__(self, "_index", dict(zip(self.words, range(len(self.words)),
                                                              strict=True)))
        assert self._index is not None
        return self._index

    def __getstate__(self) -> dict[str, Any]:  # a hash object does not pickle: made again
        return {**self.__dict__, "_words_hash": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a pickle's or copy's counts are a new, writable array: read-only again, as built
        self.__dict__.update(state)
        self.counts.setflags(write=False)

    def words_sha256(self) -> Any:
        """A ``hashlib.sha256`` object fed the words in id order, UTF-8, joined by newlines (a
        copy each call: feed it more freely). Both a checkpoint's vocabulary hash and a prepared
        corpus's fingerprint start with it; with millions of words it takes a second, once."""
        if self._words_hash is None:
            object.__setattr__(self, "_words_hash",
                               hashlib.sha256("\n".join(self.words).encode("utf-8")))
        return self._words_hash.copy()

    @property
    def total(self) -> int:
        """Sum of all counts (tokens covered by the vocabulary, UNK included)."""
        return int(self.counts.sum())

    def id(self, word: str) -> int | None:
        """The word's id; for an unknown word the UNK id 0 when ``unk`` is set, else None."""
        i = self.index.get(word)
        if i is None and self.unk is not None:
            return 0
        return i

    # ---- vocab.tsv ----------------------------------------------------------------------------
    def save_tsv(self, path: str | os.PathLike[str]) -> None:
        """Write ``word<TAB>count`` lines (UTF-8, ``\\n``); the id is the line number."""
        if self._source is not None and file_identity(self._source[0]) == self._source[1]:
            with contextlib.suppress(shutil.SameFileError):  # the same bytes, at disk speed
                shutil.copyfile(self._source[0], path)
            return
        if not all_words_valid(self.words):
            for w in self.words:  # names the first bad word
                check_word(w, "the vocabulary")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for start in range(0, len(self.words), SLICE):
                stop = start + SLICE
                f.write("".join(map("{}\t{}\n".format, self.words[start:stop],
                                    self.counts[start:stop].tolist())))

    @classmethod
    def load_tsv(cls, path: str | os.PathLike[str], *, unk: str | None = None) -> Vocab:
        """Read a file written by :meth:`save_tsv`. ``unk``, if given, must be the first word."""
        try:
            identity = file_identity(Path(path))
            data = Path(path).read_bytes()
            data.decode("utf-8")  # refuses a file that is not UTF-8 before anything else
        except PermissionError as exc:
            raise InputError(f"cannot read vocabulary {path} ({exc.strerror}); give your user "
                             "read permission on it") from None
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise InputError(f"cannot read vocabulary {path} ({why}); "
                             f"{vocabulary_fix(path)}") from None
        parsed = parse_columns(data)
        unique: bool | None = None
        words_hash = None
        if parsed is not None:
            words, counts, canonical, unique, words_hash = parsed
        else:  # the line-by-line reading, which names the first bad line
            lines = data.decode("utf-8").split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            words, listed = parse_slowly(lines, path)
            counts, canonical = np.array(listed, dtype=np.int64), False
        del data  # as large as the file
        if unk is not None and (not words or words[0] != unk):
            raise InputError(f"{path}: the first word must be the UNK token {unk!r}; "
                             f"{vocabulary_fix(path)}")
        try:
            if unique is False:
                raise ValueError("duplicate words in vocabulary")
            counts = np.asarray(counts, dtype=np.int64)
            vocab = (cls._of_unique_words(tuple(words), counts, unk) if unique
                     else cls(tuple(words), counts, unk))
            if words_hash is not None:
                object.__setattr__(vocab, "_words_hash", words_hash)
        except ValueError as exc:
            why = _first_repeat(words) if "duplicate" in str(exc) else str(exc)
            raise InputError(f"invalid vocabulary {path} ({why}); "
                             f"{vocabulary_fix(path)}") from None
        warn_of_a_leading_mark(Path(path), words)
        if canonical:
            object.__setattr__(vocab, "_source", (Path(path), identity))
        return vocab


def warn_of_a_leading_mark(path: Path, words: Sequence[str]) -> None:
    """Warn of a vocabulary file whose first word starts with U+FEFF, kept as part of it: an
    editor that saves "UTF-8 with BOM" puts one there, and the most frequent word then looks
    like one it is not. Not for the vocab.tsv of a prepared or run folder, which embedlab
    wrote: a corpus made by joining files holds their marks inside its text (each file's own
    is dropped only at its start), and such a word is the corpus's own."""
    if not words or not words[0].startswith("\ufeff"):
        return
    from embedlab.data.corpus import says_prepared
    from embedlab.run.folder import is_a_run

    if says_prepared(path.parent / "meta.json") or is_a_run(path.parent):  # embedlab's own
        return
    warn(f"{path} starts with a UTF-8 byte-order mark (U+FEFF), read as part of its first word "
         f"{words[0]!r}; if an editor added it, save the file as UTF-8 without a byte-order "
         "mark (a word of a corpus made by joining files may start with one, and is right)")


def _first_repeat(words: Sequence[str]) -> str:
    """The first word listed twice, and its two lines (an error's words; millions of lines
    are no place to look for it by hand)."""
    seen: dict[str, int] = {}
    for line, word in enumerate(words, 1):
        if word in seen:
            return f"duplicate word {word!r}: on lines {seen[word]:,} and {line:,}"
        seen[word] = line
    return "duplicate words in vocabulary"


def build(
    counts: Mapping[str, int],
    *,
    min_count: int = 5,
    max_vocab: int | None = None,
    unk: str | None = None,
    total: int | None = None,
) -> Vocab:
    """Select and order the vocabulary.

    Keeps words with ``count >= min_count``, the ``max_vocab`` most frequent (UNK counts among
    them), sorted by count descending then word ascending. UNK's count is ``total`` (all tokens,
    default ``sum(counts)``) minus the kept words' counts, i.e. every token that maps to UNK.
    Raises :class:`InputError` when no word is left.
    """
    _check_options(min_count, max_vocab, unk)
    # by word, then (stable, so ties stay by word) by count descending: two C-level sorts,
    # several times faster than one sort on (-count, word) tuples for 10^5-10^6 words
    words = sorted(w for w, c in counts.items() if c >= min_count and w != unk)
    words.sort(key=counts.__getitem__, reverse=True)
    if not words:
        raise InputError(_empty_message(counts, min_count, unk))
    if max_vocab is not None:
        words = words[: max_vocab - (unk is not None)]
    kept = np.fromiter(map(counts.__getitem__, words), dtype=np.int64, count=len(words))
    if unk is None:
        return Vocab(tuple(words), kept, None)
    total = sum(counts.values()) if total is None else total
    unk_count = max(0, total - int(kept.sum()))
    return Vocab((unk, *words), np.concatenate([[unk_count], kept]).astype(np.int64), unk)


def build_from_arrays(
    words: Sequence[str],
    counts: npt.NDArray[np.int64],
    *,
    min_count: int = 5,
    max_vocab: int | None = None,
    unk: str | None = None,
    total: int | None = None,
) -> tuple[Vocab, npt.NDArray[np.intp]]:
    """:func:`build` of ``dict(zip(words, counts))`` (``words`` distinct), selecting with numpy:
    the same vocabulary, and the index in ``words`` of each word it keeps (UNK left out)."""
    _check_options(min_count, max_vocab, unk)
    candidates = np.flatnonzero(counts >= min_count)
    if unk is not None:
        candidates = np.array([i for i in candidates.tolist() if words[i] != unk], np.intp)
    if not len(candidates):
        raise InputError(_empty_message(dict(zip(words, counts.tolist(), strict=True)),
                                        min_count, unk))
    # by word, then (stable, so ties stay by word) by count descending, as build() does
    names = [words[i] for i in candidates.tolist()]
    candidates = candidates[sorted(range(len(names)), key=names.__getitem__)]
    order = candidates[np.argsort(-counts[candidates], kind="stable")]
    if max_vocab is not None:
        order = order[: max_vocab - (unk is not None)]
    kept = counts[order].astype(np.int64)
    kept_words = tuple(words[i] for i in order.tolist())
    if unk is None:
        return Vocab(kept_words, kept, None), order
    total = int(counts.sum()) if total is None else total
    unk_count = max(0, total - int(kept.sum()))
    return Vocab((unk, *kept_words), np.concatenate([[unk_count], kept]).astype(np.int64),
                 unk), order


def _check_options(min_count: int, max_vocab: int | None, unk: str | None) -> None:
    if min_count < 1:
        raise InputError(f"--min-count must be >= 1, got {min_count}; pass e.g. --min-count 5")
    if max_vocab is not None and max_vocab < (2 if unk is not None else 1):
        raise InputError(f"--max-vocab must be >= {2 if unk is not None else 1}, got "
                         f"{max_vocab}; pass e.g. --max-vocab 50000")


def _empty_message(counts: Mapping[str, int], min_count: int, unk: str | None) -> str:
    # the --unk token is never a vocabulary word of its own: naming it as "the most frequent"
    # would contradict "no word occurs at least --min-count times"
    besides = (f" besides the {spell_name('--unk')} token {unk!r}"
               if unk is not None and unk in counts else "")
    others = [(w, c) for w, c in counts.items() if w != unk]
    if not others:
        return f"the corpus has no words{besides}; pass a non-empty corpus"
    top, top_count = max(others, key=lambda wc: (wc[1], wc[0]))
    lower = max(1, min(top_count, math.ceil(min_count / 2)))
    return (f"no word{besides} occurs at least {spell('--min-count', min_count)} times (the "
            f"most frequent, {top!r}, occurs {top_count:,} time{'s' if top_count != 1 else ''}); "
            f"lower {spell_name('--min-count')}, e.g. {spell('--min-count', lower)}")
