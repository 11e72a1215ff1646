"""Corpus text to token-id files: the reading passes of the preparation pipeline.

:func:`count` reads the corpus once (:func:`scan`), giving each token its *first-seen* id on
disk, and the result's ``finish`` maps those to vocabulary ids and writes the folder's files;
where the corpus has more distinct words than ``--max-distinct``, it counts with word2vec-style
pruning (bounded memory) and ``finish`` reads the corpus a second time. Corpora of 1 MiB or
more take the native reader's passes (:mod:`embedlab.data.native_words`), smaller ones (and
input the native reader leaves to Python) the Python reader's below; every way writes the same
``ids.u32``, ``sentences.i64`` and ``vocab.tsv`` bytes (see :mod:`embedlab.data.prepared`).
"""

from __future__ import annotations

import array
import contextlib
import sys
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from embedlab.data import native_tokenise, native_words
from embedlab.data.corpus import ReadStats, iter_blocks, list_files
from embedlab.data.native_words import Encoded
from embedlab.data.prepared import ENDS_FILE, IDS_FILE, VOCAB_FILE, file_chunks, map_file
from embedlab.data.vocab import PruneInfo, Vocab, WordCounter, build, build_from_arrays
from embedlab.errors import InputError, note, spell

_FLUSH_TOKENS = 1 << 18  # encode this many tokens per numpy call


@contextlib.contextmanager
def _bar(source: Path, desc: str, progress: bool) -> Iterator[tqdm[Any]]:
    total = sum(p.stat().st_size for p in list_files(source))
    # "iB": tqdm's prefixes over 1024 then read MiB/s, as they are
    with tqdm(total=total, unit="iB", unit_scale=True, unit_divisor=1024, desc=desc,
              disable=None if progress else True, leave=False, file=sys.stderr) as bar:
        yield bar


class Scan:
    """One pass over the corpus: each token's *first-seen* id (on disk), sentence ends, words.

    Counting with ``Counter`` and then encoding in a second read costs two tokenisations and two
    hash lookups per token in Python. Here each token is looked up once, by a C loop over the
    block, in a dict that hands a new word the next free id (:class:`_FirstSeen`); the ids go to a
    uint32 file, and counting is a ``bincount`` over that file;
    :meth:`encode` maps first-seen ids to vocabulary ids in numpy. The result is byte for byte
    what count-then-encode writes (tested); only the pruning case (more distinct words than
    ``--max-distinct``) still needs two passes, because pruning changes the counts while
    reading.
    """

    def __init__(self, words: list[str], ids_path: Path, ends_path: Path,
                 stats: ReadStats) -> None:
        self.words, self.ids_path, self.ends_path, self.stats = words, ids_path, ends_path, stats
        counts = np.zeros(len(words), dtype=np.int64)
        for chunk in file_chunks(self.ids_path, np.dtype("<u4")):
            counts += np.bincount(chunk, minlength=len(words))
        self.counts = counts
        self.prune = PruneInfo()
        self._kept: npt.NDArray[np.intp] | None = None  # set by build_vocab

    def close(self) -> None:
        """Nothing to let go of (the scratch files are in the temporary folder)."""

    def kept_any(self, min_count: int, unk: str | None) -> bool:
        """Whether a word other than ``unk`` is counted at least ``min_count`` times."""
        return any(c >= min_count for w, c in zip(self.words, self.counts.tolist(), strict=True)
                   if w != unk)

    def finish(self, min_count: int, max_vocab: int | None, unk: str | None,
               tmp: Path) -> Encoded:
        """Select the vocabulary, write the folder's ids, ends and ``vocab.tsv`` into ``tmp``."""
        return _saved(self.encode(self.build_vocab(min_count, max_vocab, unk), tmp), tmp)

    def build_vocab(self, min_count: int, max_vocab: int | None, unk: str | None) -> Vocab:
        """The vocabulary of the counts (:func:`embedlab.data.vocab.build_from_arrays`)."""
        vocab, self._kept = build_from_arrays(self.words, self.counts, min_count=min_count,
                                              max_vocab=max_vocab, unk=unk,
                                              total=self.stats.tokens)
        return vocab

    def encode(self, vocab: Vocab, tmp: Path) -> tuple[Vocab, int, int]:
        """Write ``vocab``'s ids of the corpus into ``tmp``; the scan's own files go."""
        # first-seen id -> vocabulary id, or -1 (dropped) / 0 (UNK) for out-of-vocabulary words
        missing = 0 if vocab.unk is not None else -1
        kept = self._kept
        if kept is not None and len(kept) + (vocab.unk is not None) == len(vocab):
            to_vocab = np.full(len(self.words), missing, dtype=np.int64)
            to_vocab[kept] = np.arange(len(kept)) + (vocab.unk is not None)
        else:
            to_vocab = np.fromiter(map(vocab.index.get, self.words, repeat(missing)),
                                   dtype=np.int64, count=len(self.words))
        raw_ends = map_file(self.ends_path, np.dtype("<i8"))
        with open(tmp / IDS_FILE, "wb") as ids, open(tmp / ENDS_FILE, "wb") as ends:
            writer = _IdWriter(ids, ends)
            start = 0
            for chunk in file_chunks(self.ids_path, np.dtype("<u4")):
                stop = start + len(chunk)
                lo, hi = np.searchsorted(raw_ends, [start, stop], side="right")
                writer.write(to_vocab[chunk], np.asarray(raw_ends[lo:hi]) - start)
                start = stop
        self.ids_path.unlink()
        self.ends_path.unlink()
        return writer.result(vocab)


class _FirstSeen(dict[str, int]):
    """word -> id in order of first appearance; looking up a new word gives it the next id.

    Lookups of known words stay in dict's C code; only the tokens that are new call
    ``__missing__``.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, word: str) -> int:
        # checked here, per new word, so the table never outgrows --max-distinct by a block's
        # worth of new words before the scan gives up
        if len(self) >= self.limit:
            raise _TooManyWords
        new = self[word] = len(self)
        return new


class _TooManyWords(Exception):
    """More distinct words than --max-distinct: counting needs pruning (the two-pass path)."""


def scan(source: Path, lowercase: bool, max_distinct: int, tmp: Path, progress: bool,
         workers: int = 1) -> Scan | native_words.ScanResult | None:
    """Read the corpus once (see :class:`Scan`); None when it has > ``max_distinct`` words.

    With a C compiler, ``workers`` threads tokenise (:mod:`embedlab.data.native_words`);
    the files are the same for any number of them, and the same as the Python reader's.
    """
    ids_path, ends_path = tmp / ".first-ids.u32", tmp / ".raw-ends.i64"
    if native_tokenise.usable(list_files(source)):
        try:
            return _native_scan(source, lowercase, max_distinct, ids_path, ends_path, progress,
                                workers)
        except native_tokenise.Fallback:
            pass  # the Python reader below reads it, and reports any problem as it always does
    index = _FirstSeen(max_distinct)
    stats = ReadStats()
    position = 0
    ends: list[int] = []
    with open(ids_path, "wb") as ids_file, open(ends_path, "wb") as ends_file, \
            _bar(source, "reading", progress) as bar:
        for tokens, ends_sentence in iter_blocks(source, lowercase=lowercase, stats=stats,
                                                 progress=bar.update):
            # array.array fills from the iterator in C, a little faster than np.fromiter
            try:
                first = array.array("I", map(index.__getitem__, tokens))
            except _TooManyWords:
                break
            _write_array(ids_file, np.frombuffer(first, dtype=np.uintc).astype("<u4", copy=False))
            position += len(tokens)
            if ends_sentence:
                ends.append(position)
                if len(ends) >= _FLUSH_TOKENS:
                    _write_array(ends_file, np.array(ends, dtype="<i8"))
                    ends = []
        else:
            _write_array(ends_file, np.array(ends, dtype="<i8"))
            ids_file.flush()  # Scan reads both files back at once
            ends_file.flush()
            # dicts keep insertion order, and ids were handed out in that order
            return Scan(list(index), ids_path, ends_path, stats)
    ids_path.unlink()
    ends_path.unlink()
    return None


def _native_scan(source: Path, lowercase: bool, max_distinct: int, ids_path: Path,
                 ends_path: Path, progress: bool, workers: int) -> native_words.ScanResult | None:
    stats = ReadStats()
    with open(ids_path, "wb") as ids_file, open(ends_path, "wb") as ends_file, \
            _bar(source, "reading", progress) as bar:
        words = native_words.scan(list_files(source), lowercase, max_distinct, ids_file,
                                  ends_file, stats, bar.update, workers)
    if words is None:
        ids_path.unlink()
        ends_path.unlink()
        return None
    return native_words.ScanResult(words, ids_path, ends_path, stats, workers)


_write_array = native_words.write_array


def count_words(source: Path, lowercase: bool, max_distinct: int,
                progress: bool) -> tuple[WordCounter, ReadStats]:
    """The first of the two passes: word counts, pruned word2vec-style beyond ``max_distinct``
    distinct words, and what reading the corpus found."""
    counter, stats = WordCounter(max_distinct=max_distinct), ReadStats()
    with _bar(source, "counting", progress) as bar:
        for tokens, _ in iter_blocks(source, lowercase=lowercase, stats=stats,
                                     progress=bar.update):
            counter.update(tokens)
    return counter, stats


class _IdWriter:
    """Buffers ids and sentence ends; writes them to disk in large numpy chunks.

    Sentence ends are recorded as positions in the raw token stream and translated to positions
    among the kept ids when the buffer is flushed, so OOV filtering stays vectorised.
    """

    def __init__(self, ids: IO[bytes], ends: IO[bytes]) -> None:
        self.ids_file, self.ends_file = ids, ends
        self.buf: list[int] = []
        self.raw_ends: list[int] = []  # exclusive ends, relative to the buffer
        self.kept = 0  # ids written so far
        self.last_end = 0
        self.sentences = 0
        self.zeros = 0  # tokens with id 0 (= UNK's exact count when unk is set)

    def flush(self) -> None:
        self.write(np.array(self.buf, dtype=np.int64), np.array(self.raw_ends, dtype=np.int64))
        self.buf, self.raw_ends = [], []

    def result(self, vocab: Vocab) -> tuple[Vocab, int, int]:
        """``vocab`` with UNK's count made exact (the tokens that got id 0), the ids and the
        sentences written."""
        if vocab.unk is not None:
            counts = vocab.counts.copy()
            counts[0] = self.zeros
            vocab = Vocab(vocab.words, counts, vocab.unk)
        return vocab, self.kept, self.sentences

    def write(self, arr: npt.NDArray[np.int64], raw_ends: npt.NDArray[np.int64]) -> None:
        """Write ids (< 0 = dropped) and the sentence ends inside them (exclusive, relative)."""
        keep = arr >= 0
        kept_before = np.concatenate([[0], np.cumsum(keep)])  # kept ids before raw position i
        ends = self.kept + kept_before[raw_ends]
        ends = np.unique(ends[ends > self.last_end])  # drop sentences that became empty
        arr = arr[keep]
        self.zeros += int(np.count_nonzero(arr == 0))
        _write_array(self.ids_file, arr.astype("<u4"))
        _write_array(self.ends_file, ends.astype("<i8"))
        self.kept += len(arr)
        if len(ends):
            self.last_end = int(ends[-1])
        self.sentences += len(ends)


def encode(source: Path, vocab: Vocab, lowercase: bool, tmp: Path, progress: bool,
           counted: ReadStats) -> tuple[Vocab, int, int]:
    """The second of the two passes: write ``vocab``'s ids of the corpus into ``tmp``.

    ``counted``: what the counting pass read; a different token count means the corpus changed
    in between, and the counts would not match the ids (:class:`InputError`).
    """
    get = vocab.index.get
    missing = 0 if vocab.unk is not None else -1
    stats = ReadStats()
    with open(tmp / IDS_FILE, "wb") as ids, open(tmp / ENDS_FILE, "wb") as ends, \
            _bar(source, "encoding", progress) as bar:
        writer = _IdWriter(ids, ends)
        for tokens, ends_sentence in iter_blocks(source, lowercase=lowercase, stats=stats,
                                                 progress=bar.update):
            writer.buf.extend(map(get, tokens, repeat(missing)))
            if ends_sentence:
                writer.raw_ends.append(len(writer.buf))
            if len(writer.buf) >= _FLUSH_TOKENS:
                writer.flush()
        writer.flush()
    if stats.tokens != counted.tokens:
        raise InputError(f"the corpus changed while it was being prepared ({counted.tokens:,} "
                         f"tokens, then {stats.tokens:,}); run 'embedlab prepare' again")
    return writer.result(vocab)


def _saved(encoded: tuple[Vocab, int, int], tmp: Path) -> Encoded:
    vocab, tokens, sentences = encoded
    vocab.save_tsv(tmp / VOCAB_FILE)
    return Encoded(len(vocab), tokens, sentences)


class _Pruned:
    """The Python reader's counts pruned word2vec-style; :meth:`finish` reads the corpus again."""

    def __init__(self, source: Path, lowercase: bool, max_distinct: int, progress: bool) -> None:
        self.source, self.lowercase, self.progress = source, lowercase, progress
        self.counter, self.stats = count_words(source, lowercase, max_distinct, progress)
        self.prune = self.counter.prune

    def close(self) -> None:
        """Nothing to let go of."""

    def kept_any(self, min_count: int, unk: str | None) -> bool:
        return any(c >= min_count for w, c in self.counter.counts.items() if w != unk)

    def finish(self, min_count: int, max_vocab: int | None, unk: str | None,
               tmp: Path) -> Encoded:
        vocab = build(self.counter.counts, min_count=min_count, max_vocab=max_vocab, unk=unk,
                      total=self.counter.total)
        return _saved(encode(self.source, vocab, self.lowercase, tmp, self.progress, self.stats),
                      tmp)


class _NativePruned:
    """:class:`embedlab.data.native_words.Counted` with its progress bars."""

    def __init__(self, source: Path, lowercase: bool, max_distinct: int, progress: bool,
                 workers: int) -> None:
        lib = native_tokenise.library()
        assert lib is not None
        self.source, self.progress = source, progress
        self.counted = native_words.Counted(lib, list_files(source), lowercase, max_distinct,
                                            workers)
        try:
            with _bar(source, "counting", progress) as bar:
                self.counted.count(bar.update)
        except BaseException:
            self.counted.close()
            raise
        self.stats, self.prune = self.counted.stats, self.counted.prune

    def close(self) -> None:
        self.counted.close()

    def kept_any(self, min_count: int, unk: str | None) -> bool:
        return self.counted.kept_any(min_count, unk)

    def finish(self, min_count: int, max_vocab: int | None, unk: str | None,
               tmp: Path) -> Encoded:
        with _bar(self.source, "encoding", self.progress) as bar:
            return self.counted.finish(min_count, max_vocab, unk, tmp, bar.update)


class Counts(Protocol):
    """What :func:`count` found: ``stats`` (what reading found), ``prune``, and ``finish``,
    which selects the vocabulary and writes the folder's files."""

    stats: ReadStats
    prune: PruneInfo

    def close(self) -> None: ...

    def kept_any(self, min_count: int, unk: str | None) -> bool: ...

    def finish(self, min_count: int, max_vocab: int | None, unk: str | None,
               tmp: Path) -> Encoded: ...


def count(source: Path, lowercase: bool, max_distinct: int, tmp: Path, progress: bool,
          workers: int) -> Counts:
    """Read the corpus once (:func:`scan`); when it has more than ``max_distinct`` distinct
    words, count it again with word2vec-style pruning (bounded memory). Call ``close`` on the
    result."""
    found = scan(source, lowercase, max_distinct, tmp, progress, workers)
    if found is not None:
        return found
    if progress:  # the bar starts over: said, or the work so far would seem lost for nothing
        note(f"the corpus holds more than {max_distinct:,} distinct words "
             f"({spell('--max-distinct')}): reading it again, counting with word2vec's pruning, "
             "then once more to write its ids")
    if native_tokenise.usable(list_files(source)):
        try:
            return _NativePruned(source, lowercase, max_distinct, progress, workers)
        except native_tokenise.Fallback:
            pass  # the Python reader below reads it, and reports any problem as it always does
    return _Pruned(source, lowercase, max_distinct, progress)
