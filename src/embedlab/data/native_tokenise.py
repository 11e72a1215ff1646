"""Reading a corpus with native code on several threads, with the same results as the Python
reader: the pieces, their tokens, and the bindings of ``engines/_tokenise.c`` (the passes that
use them are in :mod:`embedlab.data.native_words`).

The corpus is read (and decompressed) here, in pieces of about :data:`PIECE_BYTES` that end at
an ASCII whitespace byte, so no token and no UTF-8 sequence crosses two pieces. Threads tokenise
the pieces independently (``tk_tokenise``; ctypes lets go of the GIL during the call), and
:func:`in_order` hands the results on in reading order. Python still computes the words of the
few distinct tokens that need it: non-ASCII tokens under ``--lowercase`` (``str.lower()``) and
tokens with invalid UTF-8 (U+FFFD), once per distinct token of a piece (the one pass remembers
them across pieces). Anything the native path does not handle exactly — a token longer than
:data:`~embedlab.data.corpus.MAX_TOKEN_CHARS` bytes, a stretch of text without ASCII whitespace —
raises :class:`Fallback`, and the caller reads the corpus with the Python reader instead.
"""

from __future__ import annotations

import codecs
import ctypes
import functools
import io
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from embedlab.data import corpus
from embedlab.data.corpus import ReadStats
from embedlab.errors import InputError
from embedlab.run.signals import deferred_interrupt

#: corpora smaller than this (bytes on disk) are read by the Python reader: it takes under a
#: second for them, less than building the native library the first time, and a small corpus
#: of a torch-engine run then loads no second OpenMP runtime beside torch's
MIN_BYTES = 1 << 20
#: decompressed bytes read per piece; each thread holds about 5 times this while tokenising
PIECE_BYTES = 4 << 20
#: a stretch of text this long without ASCII whitespace is left to the Python reader
MAX_STRETCH = 64 << 20
_ASCII_SPACES = tuple(bytes([b]) for b in (*range(0x09, 0x0E), *range(0x1C, 0x21)))
_T = TypeVar("_T")


class Fallback(Exception):
    """The input needs the Python reader (see the module's docstring)."""


def default_workers() -> int:
    """Threads for tokenising: ``$EMBEDLAB_PREPARE_WORKERS``, else the cores this process may
    use. A value that is not a whole number >= 1 is an :class:`InputError`."""
    value = os.environ.get("EMBEDLAB_PREPARE_WORKERS", "").strip()
    cores = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else os.cpu_count() or 1)
    if value:
        if value.isascii() and value.isdigit() and int(value) > 0:
            if int(value) > cores:
                _more_workers_than_cores(int(value), cores)
            return int(value)
        raise InputError(f"EMBEDLAB_PREPARE_WORKERS must be a number of threads >= 1, got "
                         f"{value!r}; set it to e.g. 2, or unset it for every core")
    return cores


@functools.cache
def _more_workers_than_cores(workers: int, cores: int) -> None:
    """Said once: threads beyond the cores add no speed, and each holds its own word table."""
    from embedlab.errors import warn

    warn(f"EMBEDLAB_PREPARE_WORKERS={workers} is more than the {cores} cores this process may "
         "use: the extra threads add no speed, and each holds its own pieces and word table; "
         f"set it to {cores} or less, or unset it")


@functools.cache
def library() -> ctypes.CDLL | None:
    """The native library with the tokeniser's functions, or None without a C compiler."""
    from embedlab.engines.native import NativeUnavailable
    from embedlab.engines.native import library as native_library

    try:
        lib = native_library()
        lib.tk_tokenise  # noqa: B018 - a library built without _tokenise.c: AttributeError
    except (NativeUnavailable, AttributeError):
        return None
    ptr, i64, int_ = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.tk_tokenise.restype = int_
    lib.tk_tokenise.argtypes = [ptr, i64, int_, int_, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.tk_table_new.restype = ptr
    lib.tk_table_new.argtypes = []
    lib.tk_table_free.restype = None
    lib.tk_table_free.argtypes = [ptr]
    _declare(lib)
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    """The signatures of the word tables' functions (embedlab.data.native_words)."""
    ptr, i64, int_, i32, u32 = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int32,
                                ctypes.c_uint32)
    signatures: dict[str, tuple[Any, list[Any]]] = {
        "tk_words_new": (ptr, []), "tk_words_free": (None, [ptr]),
        "tk_words_size": (i64, [ptr]), "tk_words_shards": (int_, []),
        "tk_words_tables": (ptr, [ptr]),
        "tk_words_known": (i64, [ptr, ptr, ptr, ptr, ptr, i64, ptr]),
        "tk_words_fold": (int_, [ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr, i64, ptr]),
        "tk_select": (i64, [ptr, int_, i64, ptr, i64, int_, ptr]),
        "tk_tsv_size": (i64, [ptr, int_, ptr, i64]),
        "tk_tsv_write": (None, [ptr, int_, ptr, i64, ptr, ptr]),
        "tk_id_bound": (i64, [ptr, int_]),
        "tk_lookup_new": (ptr, [ptr, int_, ptr, i64, u32]),
        "tk_lookup": (None, [ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr, i32, ptr]),
        "tk_encode": (None, [ptr, i64, ptr, ptr, i64, ptr, ptr, ptr]),
        "tk_counter_new": (ptr, [i64]), "tk_counter_free": (None, [ptr]),
        "tk_counter_tables": (ptr, [ptr]), "tk_counter_stats": (None, [ptr, ptr]),
        "tk_count": (int_, [ptr, ptr, i64, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes


def usable(files: list[Path]) -> bool:
    """Whether to read ``files`` with the native reader (see :data:`MIN_BYTES`)."""
    return sum(p.stat().st_size for p in files) >= MIN_BYTES and library() is not None


def addr(a: npt.NDArray[Any]) -> int:
    """The address of ``a``'s data, for the C functions."""
    return int(a.ctypes.data)


# ---- reading ----------------------------------------------------------------------------------
@dataclass
class Piece:
    """Decompressed bytes of one file, ending at ASCII whitespace or at the file's end."""

    file: Path
    buf: npt.NDArray[np.uint8]
    first: bool  # the file's first piece (a byte-order mark is dropped)
    last: bool  # the file's last piece (its end ends a sentence)


def _check_binary(path: Path, head: bytes) -> None:
    """The Python reader's test on a file's first piece (:func:`embedlab.data.corpus`)."""
    if b"\x00" in head:
        raise corpus._binary_error(path, "it contains NUL bytes", head[:4096])
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors=corpus._ERRORS)
    text, bad = corpus._decode(decoder, head, not head)
    if bad >= corpus.BINARY_MIN_INVALID and bad > len(text) * corpus.BINARY_REPLACEMENT_SHARE:
        raise corpus._binary_error(path, f"{bad:,} invalid UTF-8 sequences in its first "
                                         f"{len(head):,} bytes", head[:8])


def _cut(data: bytes) -> int:
    """Bytes of ``data`` up to and including its last ASCII whitespace byte (0: none)."""
    # the usual separators first: the rarer ones are then looked for only after them
    last = max(data.rfind(b"\n"), data.rfind(b" "))
    return max(last, *(data.rfind(b, last + 1) for b in _ASCII_SPACES)) + 1


def read_pieces(files: list[Path], stats: ReadStats,
                progress: Callable[[int], None]) -> Iterator[Piece]:
    """The pieces of ``files`` in order; fills ``stats.files``, ``paths``, ``source_bytes``."""
    for path in files:
        stats.files += 1
        stats.paths.append(path)
        stream, raw = corpus._open_source(path)
        with raw, stream:
            yield from _file_pieces(path, stream, raw, stats, progress)


def _file_pieces(path: Path, stream: io.BufferedIOBase, raw: io.BufferedReader, stats: ReadStats,
                 progress: Callable[[int], None]) -> Iterator[Piece]:
    carry, first, checked, done = b"", True, False, 0
    while True:
        parts, size, more = [carry], len(carry), True
        while size < PIECE_BYTES or len(parts) == 1:  # at least one read: carry may be long
            # the Python reader's reads (same sizes, same errors), so its binary test sees the
            # same first piece
            data = corpus._read(stream, path)
            if not checked:
                _check_binary(path, data)
                checked = True
            pos = raw.tell()
            stats.source_bytes += pos - done
            progress(pos - done)
            done = pos
            if not data:
                more = False
                break
            parts.append(data)
            size += len(data)
        text = b"".join(parts)
        cut = _cut(text) if more else len(text)
        if more and cut == 0:
            if len(text) > MAX_STRETCH:
                raise Fallback
            carry = text
            continue
        carry = text[cut:]
        buf = np.empty(cut, np.uint8)
        buf[:] = np.frombuffer(text, np.uint8, count=cut)
        yield Piece(path, buf, first, not more)
        first = False
        if not more:
            return


# ---- tokenising -------------------------------------------------------------------------------
@dataclass
class Tokenised:
    """One piece tokenised: local type ids per token, line ends, the piece's distinct types."""

    piece: Piece
    ids: npt.NDArray[np.uint32]
    ends: npt.NDArray[np.uint32]
    type_off: npt.NDArray[np.uint32]
    type_len: npt.NDArray[np.uint32]
    type_count: npt.NDArray[np.uint32]
    type_flag: npt.NDArray[np.uint8]
    type_hash: npt.NDArray[np.uint64]
    invalid: int
    longest: int
    lead: int  # tokens before the piece's first '\n' (all when it has none)
    has_newline: bool
    tail: int  # tokens after the piece's last '\n' (all when it has none)


def tokenise(lib: ctypes.CDLL, piece: Piece, lowercase: bool) -> Tokenised:
    """Tokenise ``piece`` (its ASCII letters are lowercased in place under ``lowercase``)."""
    n = len(piece.buf)
    cap = n // 2 + 1
    ids, ends = np.empty(cap, np.uint32), np.empty(cap, np.uint32)
    off, length, count = (np.empty(cap, np.uint32) for _ in range(3))
    flag, hashes = np.empty(cap, np.uint8), np.empty(cap, np.uint64)
    out = np.zeros(8, np.int64)
    if lib.tk_tokenise(addr(piece.buf), n, int(lowercase), int(piece.first), addr(ids),
                       addr(ends), addr(off), addr(length), addr(count), addr(flag),
                       addr(hashes), addr(out)):
        raise MemoryError("out of memory while tokenising the corpus")
    ntok, ntypes, nends = int(out[0]), int(out[1]), int(out[2])
    return Tokenised(piece, ids[:ntok], ends[:nends], off[:ntypes], length[:ntypes],
                     count[:ntypes], flag[:ntypes], hashes[:ntypes], int(out[3]),
                     int(out[4]), int(out[5]), bool(out[6]), int(out[7]))


def in_order(pieces: Iterator[Piece], work: Callable[[Piece], _T],
             workers: int) -> Generator[_T, None, None]:
    """``work(piece)`` of each piece, in reading order, ``workers`` threads at a time. An error
    while reading is raised after the pieces before it are handed on (one of them may need the
    Python reader, which then reports the first problem as it always does)."""
    if workers <= 1:
        for piece in pieces:
            yield work(piece)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tokenise") as pool:
        pending: deque[Future[_T]] = deque()
        try:
            try:
                for piece in pieces:
                    # a Ctrl-C inside submit would leave work queued (or a thread half
                    # started) that nothing waits for, using tables the caller then frees
                    with deferred_interrupt():
                        pending.append(pool.submit(work, piece))
                    if len(pending) > workers:
                        yield _first_done(pending)
            except Exception:
                while pending:
                    yield _first_done(pending)
                raise
            while pending:
                yield _first_done(pending)
        finally:  # stopped early (an error, the corpus has too many words, Ctrl-C)
            for future in pending:
                future.cancel()
            _until_done(pending)


def _first_done(pending: deque[Future[_T]]) -> _T:
    """The first future's result, taken off ``pending`` only once it has one: a Ctrl-C while
    waiting for it leaves it among those :func:`_until_done` waits for."""
    result = pending[0].result()
    pending.popleft()
    return result


def _until_done(futures: Iterable[Future[Any]]) -> None:
    """Wait until the running ``futures`` have finished, through Ctrl-C: their work reads and
    writes C tables (the word table) that the caller frees once this generator ends, and a
    second Ctrl-C that cut the executor's own wait short let it free them under a thread still
    folding words (a segmentation fault, or a thread spinning in freed memory for ever). The
    first interrupt is raised once they are done."""
    interrupted: BaseException | None = None
    for future in futures:
        while True:
            try:
                wait([future])
                break
            except KeyboardInterrupt as exc:
                interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


def checked(t: Tokenised) -> Tokenised:
    """``t``, or :class:`Fallback` when a token is longer than the Python reader allows (it
    then reports it)."""
    if t.longest > corpus.MAX_TOKEN_CHARS:
        raise Fallback
    return t


def _word(raw: bytes, lowercase: bool) -> bytes:
    """The word of a token's bytes, exactly as the Python reader makes it."""
    text = raw.decode("utf-8", "replace")
    return (text.lower() if lowercase else text).encode("utf-8")


def flagged_words(t: Tokenised, lowercase: bool, todo: npt.NDArray[np.intp] | None = None,
                  ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """The words of the flagged types ``todo`` (default: all) as the C functions take them:
    type i's word is ``canon[canon_off[i]:canon_off[i + 1]]``."""
    ntypes = len(t.type_off)
    if todo is None:
        todo = np.flatnonzero(t.type_flag)
    canon_off = np.zeros(ntypes + 1, np.int64)
    if not len(todo):
        return np.zeros(1, np.uint8), canon_off
    view = memoryview(t.piece.buf)  # type: ignore[arg-type]
    made = [_word(bytes(view[a:a + n]), lowercase)
            for a, n in zip(t.type_off[todo].tolist(), t.type_len[todo].tolist(), strict=True)]
    lengths = np.zeros(ntypes, np.int64)
    lengths[todo] = [len(w) for w in made]
    np.cumsum(lengths, out=canon_off[1:])
    return np.frombuffer(b"".join(made) + b"\0", np.uint8), canon_off


class Lines:
    """Sentence ends across pieces, in positions of the token stream: a line may begin in one
    piece and end in a later one, and a file's end ends its last line."""

    def __init__(self) -> None:
        self.position, self.open_line = 0, False

    def ends(self, t: Tokenised, local: npt.NDArray[np.int64], kept: int,
             ) -> npt.NDArray[np.int64]:
        """The piece's ends, relative to its start: ``local`` are its line ends (t.ends) in
        the positions wanted, ``kept`` is the piece's length in them."""
        n = len(t.ids)
        parts = [local]
        if self.open_line and t.has_newline and t.lead == 0:  # the line began in a piece before
            parts.insert(0, np.zeros(1, np.int64))
        self.open_line = t.tail > 0 if t.has_newline else self.open_line or n > 0
        self.position += n
        if t.piece.last and self.open_line:
            parts.append(np.array([kept], np.int64))
            self.open_line = False
        return np.concatenate(parts) if len(parts) > 1 else local


def add_stats(stats: ReadStats, t: Tokenised, sentences: int) -> None:
    stats.tokens += len(t.ids)
    stats.add_invalid(t.piece.file, t.invalid)
    stats.sentences += sentences
