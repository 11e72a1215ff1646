"""The native reader's passes: words counted in C tables, the vocabulary selected, sorted and
written in C, token ids mapped on threads (pieces from :mod:`embedlab.data.native_tokenise`).

- :func:`scan`: the one pass. Each thread tokenises a piece and folds its distinct words into
  a table shared by all threads (``tk_words_fold``: 64 shards by hash, each behind a lock), then
  writes its tokens' word ids; the main thread only appends them to the scratch file in piece
  order. Ids are given in whatever order the threads meet words, but they stay scratch values:
  the counts are sums, and what is written (the vocabulary, sorted by count then word, and the
  ids mapped to it) does not depend on them.
- :class:`Counted`: with more distinct words than ``--max-distinct``, the threads tokenise and
  the main thread counts every token in corpus order with word2vec's pruning (``tk_count``), as
  :class:`embedlab.data.vocab.WordCounter` does; its second pass (:meth:`Counted.finish`) maps
  each piece's distinct tokens to vocabulary ids on the threads.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from embedlab.data.corpus import ReadStats
from embedlab.data.native_tokenise import (
    Fallback,
    Lines,
    Piece,
    Tokenised,
    add_stats,
    addr,
    checked,
    flagged_words,
    in_order,
    library,
    read_pieces,
    tokenise,
)
from embedlab.data.prepared import ENDS_FILE, IDS_FILE, VOCAB_FILE, file_chunks
from embedlab.data.vocab import PruneInfo, build_from_arrays
from embedlab.errors import InputError

_NO_WORD = np.uint32(0xFFFFFFFF)


def write_array(f: IO[bytes], arr: npt.NDArray[Any]) -> None:
    """Append ``arr``'s bytes to ``f``. Not ``ndarray.tofile``: on a full disk that raises
    ``OSError("N requested and 0 written")`` with no errno, so the cause cannot be told;
    a file's own write raises ENOSPC (and is as fast: one write of the whole buffer)."""
    f.write(np.ascontiguousarray(arr).data)


def _type_args(t: Tokenised) -> tuple[int, int, int, int]:
    return addr(t.piece.buf), addr(t.type_off), addr(t.type_len), addr(t.type_flag)


@dataclass
class Encoded:
    """What an encoding pass wrote: ``vocab_size`` words (UNK's count exact), the ids of
    ``tokens`` tokens in ``sentences`` sentences."""

    vocab_size: int
    tokens: int
    sentences: int


class IdWriter:
    """Appends vocabulary ids and sentence ends (in positions among the ids kept) to the
    prepared files; a sentence that lost all its tokens to OOV removal is left out."""

    def __init__(self, ids: IO[bytes], ends: IO[bytes]) -> None:
        self.ids_file, self.ends_file = ids, ends
        self.kept = self.last_end = self.sentences = self.zeros = 0

    def write(self, ids: npt.NDArray[np.uint32], ends: npt.NDArray[np.int64], zeros: int) -> None:
        """``ends``: relative to ``ids``'s start."""
        ends = self.kept + ends
        ends = ends[ends > self.last_end]
        if len(ends) > 1:  # ascending: a repeated end is a sentence left empty
            ends = ends[np.concatenate([[True], ends[1:] != ends[:-1]])]
        write_array(self.ids_file, ids.astype("<u4", copy=False))
        write_array(self.ends_file, ends.astype("<i8", copy=False))
        self.kept += len(ids)
        self.zeros += zeros
        if len(ends):
            self.last_end = int(ends[-1])
        self.sentences += len(ends)


def encode_ids(ids: npt.NDArray[np.uint32], to_vocab: npt.NDArray[np.int32],
               ends: npt.NDArray[np.int64],
               ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64], int]:
    """``to_vocab[ids]`` without the values < 0; the positions ``ends`` among those kept; how
    many of them are 0."""
    lib = library()
    assert lib is not None
    out, kept_at, res = np.empty(len(ids), np.uint32), np.empty(len(ends), np.int64), \
        np.zeros(2, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    lib.tk_encode(addr(ids), len(ids), addr(to_vocab), addr(ends), len(ends), addr(out),
                  addr(kept_at), addr(res))
    return out[:int(res[0])], kept_at, int(res[1])


# ---- the word tables ----------------------------------------------------------------------------
class _Tables:
    """C tables read as one (``tk_select`` and the functions after it in ``_tokenise.c``)."""

    def __init__(self, lib: ctypes.CDLL, handle: int, tables: int, ntables: int,
                 workers: int) -> None:
        self.lib, self.handle, self.tables, self.ntables = lib, handle, tables, ntables
        self.workers = workers  # threads that sort the vocabulary

    def select(self, min_count: int, max_vocab: int | None,
               unk: str | None) -> npt.NDArray[np.int64]:
        """Word ids of the vocabulary (UNK left out), in its order."""
        bound = self.lib.tk_id_bound(self.tables, self.ntables)
        ids = np.empty(max(bound, 1), np.int64)
        raw = np.frombuffer((unk or "").encode() + b"\0", np.uint8)
        from embedlab.engines.native import openmp_threads

        # the sort's two OpenMP threads, recorded: a process forked after them runs one
        n = self.lib.tk_select(self.tables, self.ntables, min_count, addr(raw),
                               -1 if unk is None else len(raw) - 1,
                               openmp_threads(self.workers), addr(ids))
        if n < 0:
            raise MemoryError("out of memory while sorting the vocabulary")
        kept = ids[:n]
        if max_vocab is not None:
            kept = kept[:max_vocab - (unk is not None)]
        return kept

    def tsv(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
        """The ``vocab.tsv`` lines of the words ``ids``, as bytes."""
        out = np.empty(self.lib.tk_tsv_size(self.tables, self.ntables, addr(ids), len(ids)) + 1,
                       np.uint8)
        counts = np.empty(len(ids), np.int64)
        self.lib.tk_tsv_write(self.tables, self.ntables, addr(ids), len(ids), addr(out),
                              addr(counts))
        return out[:-1]

    def refuse_empty(self, min_count: int, unk: str | None) -> None:
        """Raise the error of :func:`embedlab.data.vocab.build` for a vocabulary left empty."""
        ids = self.select(1, None, None)
        lines = self.tsv(ids).tobytes().decode("utf-8").split("\n")[:-1]
        words, counts = zip(*(line.split("\t") for line in lines), strict=True) if lines \
            else ((), ())
        build_from_arrays(list(words), np.array([int(c) for c in counts], np.int64),
                          min_count=min_count, unk=unk)
        raise AssertionError("a vocabulary was found where tk_select found none")

    def write_vocab(self, ids: npt.NDArray[np.int64], unk: str | None, unk_count: int,
                    tmp: Path) -> None:
        with open(tmp / VOCAB_FILE, "wb") as f:
            if unk is not None:
                f.write(f"{unk}\t{unk_count}\n".encode())
            f.write(self.tsv(ids).data)

    def to_vocab(self, ids: npt.NDArray[np.int64], unk: str | None) -> npt.NDArray[np.int32]:
        """Word id -> vocabulary id; -1 (dropped) or 0 (UNK) for words not kept."""
        bound = self.lib.tk_id_bound(self.tables, self.ntables)
        to_vocab = np.full(bound + 1, 0 if unk is not None else -1, np.int32)
        to_vocab[ids] = np.arange(len(ids), dtype=np.int32) + (unk is not None)
        return to_vocab


@dataclass
class _Folded:
    """A piece's tokens as word ids, and what the main thread needs of it."""

    t: Tokenised
    ids: npt.NDArray[np.uint32] | None  # None: the table went past --max-distinct


class Words(_Tables):
    """The corpus's words, folded by every thread (``tk_words_fold``), in C memory until
    :meth:`close`."""

    def __init__(self, lib: ctypes.CDLL, workers: int) -> None:
        handle = lib.tk_words_new()
        if not handle:
            raise MemoryError("out of memory for the corpus's word table")
        super().__init__(lib, handle, lib.tk_words_tables(handle), lib.tk_words_shards(),
                         workers)

    def close(self) -> None:
        if self.handle:
            self.lib.tk_words_free(self.handle)
        self.handle = 0

    def fold(self, t: Tokenised, lowercase: bool, limit: int) -> npt.NDArray[np.uint32] | None:
        """Word ids of the piece's types (None: more than ``limit`` distinct words)."""
        lib, ntypes = self.lib, len(t.type_off)
        word = np.empty(ntypes, np.uint32)
        left = lib.tk_words_known(self.handle, *_type_args(t), ntypes, addr(word))
        todo = np.flatnonzero((t.type_flag != 0) & (word == _NO_WORD)) if left else None
        canon, canon_off = flagged_words(t, lowercase, todo) if left else \
            (np.zeros(1, np.uint8), np.zeros(ntypes + 1, np.int64))
        rc = lib.tk_words_fold(self.handle, *_type_args(t), addr(t.type_count),
                               addr(t.type_hash), ntypes, addr(canon), addr(canon_off), limit,
                               addr(word))
        if rc < 0:
            raise MemoryError("out of memory for the corpus's word table")
        return None if rc else word


def _fold(words: Words, piece: Piece, lowercase: bool, limit: int) -> _Folded:
    """Tokenise and fold one piece (on a worker thread)."""
    t = checked(tokenise(words.lib, piece, lowercase))
    word = words.fold(t, lowercase, limit)
    return _Folded(t, None if word is None else np.take(word, t.ids))


def scan(files: list[Path], lowercase: bool, max_distinct: int, ids_file: IO[bytes],
         ends_file: IO[bytes], stats: ReadStats, progress: Callable[[int], None],
         workers: int) -> Words | None:
    """Write each token's word id to ``ids_file`` and the raw sentence ends to ``ends_file``
    (as :func:`embedlab.data.token_ids.scan` does) and return the words with their counts;
    None when there are more than ``max_distinct`` distinct words. Raises :class:`Fallback`
    for input that needs the Python reader."""
    lib = library()
    if lib is None:
        raise Fallback
    words, lines = Words(lib, workers), Lines()
    try:
        # closing: the threads have stopped before the table is let go of
        with closing(in_order(read_pieces(files, stats, progress),
                              lambda p: _fold(words, p, lowercase, max_distinct),
                              workers)) as folded_pieces:
            for folded in folded_pieces:
                if folded.ids is None:
                    break
                t, base = folded.t, lines.position
                write_array(ids_file, folded.ids)
                ends = lines.ends(t, t.ends.astype(np.int64), len(t.ids)) + base
                write_array(ends_file, ends)
                add_stats(stats, t, len(ends))
            else:
                return words
    except BaseException:
        words.close()
        raise
    words.close()
    return None


def _chunks_with_ends(ids_path: Path, ends_path: Path,
                      ) -> Iterator[tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]]:
    """The scratch ids in chunks, each with its raw sentence ends relative to its start."""
    ends_chunks = file_chunks(ends_path, np.dtype("<i8"))
    pending, start = np.zeros(0, np.int64), 0
    for chunk in file_chunks(ids_path, np.dtype("<u4")):
        stop = start + len(chunk)
        while not len(pending) or pending[-1] <= stop:
            more = next(ends_chunks, None)
            if more is None:
                break
            pending = np.concatenate([pending, more])
        inside = int(np.searchsorted(pending, stop, side="right"))
        yield chunk, pending[:inside] - start
        pending, start = pending[inside:], stop


@dataclass
class ScanResult:
    """The one pass's scratch files and word table; :meth:`finish` writes the folder's files."""

    words: Words
    ids_path: Path
    ends_path: Path
    stats: ReadStats
    workers: int
    prune: PruneInfo = field(default_factory=PruneInfo)

    def close(self) -> None:
        self.words.close()

    def kept_any(self, min_count: int, unk: str | None) -> bool:
        return len(self.words.select(min_count, None, unk)) > 0

    def finish(self, min_count: int, max_vocab: int | None, unk: str | None,
               tmp: Path) -> Encoded:
        """Select the vocabulary, write the folder's ids, ends and ``vocab.tsv`` into ``tmp``."""
        ids = self.words.select(min_count, max_vocab, unk)
        if not len(ids):
            self.words.refuse_empty(min_count, unk)
        to_vocab = self.words.to_vocab(ids, unk)
        with open(tmp / IDS_FILE, "wb") as ids_file, open(tmp / ENDS_FILE, "wb") as ends_file, \
                ThreadPoolExecutor(max_workers=self.workers) as pool:
            writer = IdWriter(ids_file, ends_file)
            chunks = _chunks_with_ends(self.ids_path, self.ends_path)
            for out, ends, zeros in _mapped(pool, chunks, to_vocab, self.workers):
                writer.write(out, ends, zeros)
        self.ids_path.unlink()
        self.ends_path.unlink()
        self.words.write_vocab(ids, unk, writer.zeros, tmp)
        return Encoded(len(ids) + (unk is not None), writer.kept, writer.sentences)


def _mapped(pool: ThreadPoolExecutor,
            chunks: Iterator[tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]],
            to_vocab: npt.NDArray[np.int32], workers: int,
            ) -> Iterator[tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64], int]]:
    """:func:`encode_ids` of each chunk on the pool's threads, in order."""
    pending = []
    for ids, ends in chunks:
        pending.append(pool.submit(encode_ids, ids, to_vocab, ends))
        if len(pending) > workers:
            yield pending.pop(0).result()
    for future in pending:
        yield future.result()


# ---- more distinct words than --max-distinct: count with pruning, then encode -----------------
def _with_words(lib: ctypes.CDLL, piece: Piece, lowercase: bool,
                ) -> tuple[Tokenised, npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    t = checked(tokenise(lib, piece, lowercase))
    return (t, *flagged_words(t, lowercase))


class Counted(_Tables):
    """Word counts pruned word2vec-style (``tk_count``), in C memory until :meth:`close`."""

    def __init__(self, lib: ctypes.CDLL, files: list[Path], lowercase: bool, max_distinct: int,
                 workers: int) -> None:
        handle = lib.tk_counter_new(max_distinct)
        if not handle:
            raise MemoryError("out of memory for the corpus's word table")
        super().__init__(lib, handle, lib.tk_counter_tables(handle), 1, workers)
        self.files, self.lowercase = files, lowercase
        self.stats, self.prune = ReadStats(), PruneInfo()

    def close(self) -> None:
        if self.handle:
            self.lib.tk_counter_free(self.handle)
        self.handle = 0

    def count(self, progress: Callable[[int], None]) -> None:
        """The first pass: count every token, in corpus order."""
        lib, lines = self.lib, Lines()
        with closing(in_order(read_pieces(self.files, self.stats, progress),
                              lambda p: _with_words(lib, p, self.lowercase),
                              self.workers)) as pieces:
            for t, canon, canon_off in pieces:
                if lib.tk_count(self.handle, addr(t.ids), len(t.ids), *_type_args(t),
                                addr(t.type_hash), len(t.type_off), addr(canon),
                                addr(canon_off)):
                    raise MemoryError("out of memory for the corpus's word table")
                ends = lines.ends(t, t.ends.astype(np.int64), len(t.ids))
                add_stats(self.stats, t, len(ends))
        out = np.zeros(5, np.int64)
        lib.tk_counter_stats(self.handle, addr(out))
        self.prune = PruneInfo(*map(int, out[:4]))

    def kept_any(self, min_count: int, unk: str | None) -> bool:
        return len(self.select(min_count, None, unk)) > 0

    def finish(self, min_count: int, max_vocab: int | None, unk: str | None, tmp: Path,
               progress: Callable[[int], None]) -> Encoded:
        """The second pass: the vocabulary's ids of every token into ``tmp``."""
        ids = self.select(min_count, max_vocab, unk)
        if not len(ids):
            self.refuse_empty(min_count, unk)
        lookup = self.lib.tk_lookup_new(self.tables, 1, addr(ids), len(ids),
                                        int(unk is not None))
        if not lookup:
            raise MemoryError("out of memory for the vocabulary's table")
        try:
            writer = self._encode(lookup, -1 if unk is None else 0, tmp, progress)
        finally:
            self.lib.tk_table_free(lookup)
        self.write_vocab(ids, unk, writer.zeros, tmp)
        return Encoded(len(ids) + (unk is not None), writer.kept, writer.sentences)

    def _encode(self, lookup: int, missing: int, tmp: Path,
                progress: Callable[[int], None]) -> IdWriter:
        lib, stats, lines = self.lib, ReadStats(), Lines()

        def work(piece: Piece) -> tuple[Tokenised, npt.NDArray[np.uint32],
                                        npt.NDArray[np.int64], int]:
            t, canon, canon_off = _with_words(lib, piece, self.lowercase)
            to_vocab = np.empty(len(t.type_off), np.int32)
            lib.tk_lookup(lookup, *_type_args(t), addr(t.type_hash), len(t.type_off),
                          addr(canon), addr(canon_off), missing, addr(to_vocab))
            return (t, *encode_ids(t.ids, to_vocab, t.ends.astype(np.int64)))

        with open(tmp / IDS_FILE, "wb") as ids_file, open(tmp / ENDS_FILE, "wb") as ends_file, \
                closing(in_order(read_pieces(self.files, stats, progress), work,
                                 self.workers)) as encoded:  # the threads stop before lookup goes
            writer = IdWriter(ids_file, ends_file)
            for t, out, kept_at, zeros in encoded:
                writer.write(out, lines.ends(t, kept_at, len(out)), zeros)
                add_stats(stats, t, 0)
        if stats.tokens != self.stats.tokens:
            raise InputError(f"the corpus changed while it was being prepared "
                             f"({self.stats.tokens:,} tokens, then {stats.tokens:,}); run "
                             "'embedlab prepare' again")
        return writer
