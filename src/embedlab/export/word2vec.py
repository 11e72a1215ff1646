"""The word2vec text and binary formats (as written by word2vec.c and read by gensim).

Both start with an ASCII header line ``V D\\n``. Then, per word, in vocabulary order:

* text: ``word v1 v2 ... vD\\n``, values as decimal text. We write ``%.9g``: nine significant
  digits identify every float32 exactly, so text files round-trip bit for bit (shortest-repr
  would be prettier but is ~2× slower to produce).
* binary: ``word`` + one space + D little-endian float32 + ``\\n``. (gensim omits the newline;
  the reader accepts both, as gensim's does.)

Words are UTF-8 and must be non-empty and free of whitespace (the formats separate fields with
spaces and records with newlines). Duplicate words keep their first vector, as in gensim.
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import gzip
import io
import lzma
import mmap
import os
import re
import shlex
import tempfile
import zlib
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import IO

import numpy as np

from embedlab.errors import InputError, python_caller, warn
from embedlab.export.atomic import _out, atomic_export, check_writable

_ROWS_PER_WRITE = 4096  # rows formatted per write call: bounded memory for big vocabularies
_TEXT_BLOCK = 8 << 20  # bytes of text rows parsed at a time
_GATHER_BYTES = 1 << 20  # bytes of binary records gathered at a time (8 per byte of index)


#: what ends a word in word2vec.c's reader (space, tab, newline; a carriage return is dropped)
#: and in gensim's and embedlab's; other whitespace (a form feed, a no-break space) is part of
#: a word there
WORD2VEC_SEPARATORS = frozenset(" \t\n\r")
_SEPARATOR_NAMES = {" ": "a space", "\t": "a tab", "\n": "a line end (\\n)",
                    "\r": "a carriage return (\\r)"}


def _word2vec_flaw(word: str) -> str | None:
    """Why ``word`` cannot be a word of a word2vec file, or None."""
    if not word:
        return "is empty"
    ch = next((c for c in word if c in WORD2VEC_SEPARATORS), None)
    if ch is not None:
        return f"contains {_SEPARATOR_NAMES[ch]}"
    if word[0] in "\v\f":  # a text row that starts with whitespace is no row of a word
        return f"starts with whitespace ({word[0]!r})"
    return None


def validate_words(words: Sequence[str], *, vocab_tsv: bool = False) -> None:
    """Raise :class:`InputError` unless every word can be stored in the word2vec formats, or with
    ``vocab_tsv`` in a ``vocab.tsv``, whose words hold no whitespace at all (a corpus's tokens
    never do)."""
    rename = "give it another name where the words come from"
    for i, word in enumerate(words):
        flaw = _word2vec_flaw(word)
        if vocab_tsv and flaw is None and any(ch.isspace() for ch in word):
            space = next(ch for ch in word if ch.isspace())
            raise InputError(f"word #{i} {word!r} contains whitespace ({space!r}), which a "
                             "vocab.tsv cannot store; export it as a word2vec file (.txt or "
                             f".bin), which keeps such words, or {rename}")
        if flaw is not None:
            formats = "a vocab.tsv and the word2vec formats" if vocab_tsv else \
                "the word2vec formats"
            raise InputError(f"word #{i} {word!r} {flaw}, which {formats} cannot store; "
                             f"{rename}")
        if "\x00" in word and not vocab_tsv:  # word2vec.c's C strings end there
            raise InputError(f"word #{i} {word!r} holds a NUL character, which the word2vec "
                             "formats cannot store (readers take it for binary data); export "
                             "the npy format, which stores any word")
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"word #{i} {word!r} cannot be encoded as UTF-8; "
                             "fix the vocabulary") from None


#: archive and compression suffixes that are not written (.gz, .bz2 and .xz are)
OTHER_COMPRESSIONS = {".zip", ".zst", ".lz4", ".7z", ".rar", ".tar", ".tgz", ".lzma", ".z",
                      ".br", ".lz", ".sz"}


def refuse_other_compression(path: Path, plain: str) -> None:
    """An output named for an archive or another compressor (``v.zip``) would hold plain text
    under that name: refused, naming the suffixes that are written (``plain``: the format's
    uncompressed ones)."""
    if path.suffix.lower() in OTHER_COMPRESSIONS:
        raise InputError(f"{_out(str(path))}: embedlab does not write {path.suffix} files; it "
                         "compresses for a name ending in .gz, .bz2 or .xz (e.g. "
                         f"{_out(str(path.with_suffix('.gz')))}), or writes plain {plain}")


def write_word2vec(path: Path, words: Sequence[str], matrix: np.ndarray, *,
                   binary: bool = False, force: bool = False) -> Path:
    """Write ``words`` (V) and ``matrix`` (V×D, cast to float32) atomically; returns ``path``.

    A ``.npy`` name is refused: :func:`embedlab.vectors.load` reads ``.npy`` files as npy exports,
    so the file could not be loaded back.
    """
    if format_suffix(path) == ".npy":
        fmt = "word2vec-binary" if binary else "word2vec"
        suffix = ".bin" if binary else ".txt"
        if python_caller():
            raise InputError(f"{_out(str(path))} ends in .npy, but a word2vec file is written "
                             "there, which would then be read as a .npy matrix; call to_npy for "
                             f"that format, or pass a name ending in {suffix}")
        raise InputError(f"--out {path} ends in .npy, but --format {fmt} writes a word2vec file "
                         "that would then be read as a .npy matrix; pass --format npy, or an "
                         f"--out name ending in {suffix}")
    refuse_other_compression(path, ".txt/.bin")
    _check_shapes(words, matrix)
    validate_words(words)
    check_writable(path, force=force, example="vectors.bin" if binary else "vectors.txt")
    mat = np.ascontiguousarray(matrix, dtype="<f4")
    n, dim = mat.shape
    with atomic_export(path, force=force) as raw, _compressing(raw, path) as fh:
        fh.write(f"{n} {dim}\n".encode("ascii"))
        if binary:
            for word, row in zip(words, mat, strict=True):
                fh.write(word.encode("utf-8") + b" " + row.tobytes() + b"\n")
        else:
            fmt = " ".join(["%.9g"] * dim)
            for start in range(0, n, _ROWS_PER_WRITE):
                rows = mat[start:start + _ROWS_PER_WRITE].tolist()
                chunk = "".join(f"{w} {fmt % tuple(r)}\n"
                                for w, r in zip(words[start:start + len(rows)], rows, strict=True))
                fh.write(chunk.encode("utf-8"))
    return path


#: file suffixes written compressed (as gensim's smart_open writes them), by the module to use
COMPRESSED_SUFFIXES = {".gz": gzip, ".bz2": bz2, ".xz": lzma}


def format_suffix(path: Path) -> str:
    """The suffix that names ``path``'s format: ``.bin`` for ``vectors.bin.gz``."""
    suffixes = [x.lower() for x in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


@contextlib.contextmanager
def _compressing(raw: IO[bytes], path: Path) -> Iterator[IO[bytes]]:
    """``raw``, or a compressor writing into it when ``path`` ends in .gz, .bz2 or .xz. gzip's
    header gets no time stamp and no name, so the same vectors give the same bytes. The levels
    are chosen for speed (gzip 6, xz preset 1: 13 MB/s of text against preset 6's 0.7 MB/s, for
    a file 17 % larger; bzip2 at its default, whose levels differ little in speed): an export
    of millions of words should take seconds, not minutes."""
    module = COMPRESSED_SUFFIXES.get(path.suffix.lower())
    if module is None:
        yield raw
    elif module is gzip:  # level 6, the gzip command's: 9 is 2.5x slower for 1 % smaller text
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                           compresslevel=6) as fh:
            yield fh  # type: ignore[misc]
    elif module is lzma:  # preset 1: preset 6 took 16 minutes for 610 MB of text on one core
        with lzma.open(raw, "wb", preset=1) as fh:
            yield fh
    else:
        with module.open(raw, "wb") as fh:
            yield fh


def read_word2vec(path: Path, limit: int | None = None,
                  encoding: str = "utf-8") -> tuple[list[str], np.ndarray]:
    """Read a word2vec text or binary file (detected from its content), plain or compressed
    with gzip, bzip2 or xz (detected from its first bytes, as GoogleNews' ``.bin.gz`` ships).

    Returns the words in file order and a float32 matrix (V×D). Raises :class:`InputError` for
    anything that is not a well-formed word2vec file, and for values that are not finite
    float32 (nan, inf, or text like ``1e39`` that overflows): they would poison every query.
    Text rows may separate their fields by runs of spaces or tabs (``%10.6f`` columns), and end
    in ``\\r\\n``. Words that are not valid UTF-8 (word2vec.c cuts words at 99 bytes, which can
    split a character) get U+FFFD for the bad bytes, with one warning, as gensim's
    ``unicode_errors="replace"`` gives them. ``encoding``: the words' encoding, as gensim's
    ``encoding=`` (a file saved in cp1251 or latin-1). ``limit``: read the first ``limit``
    records only, as gensim's ``limit=`` (the rest of a plain file is not read at all, and a
    compressed file is decompressed only as far as those records go).
    """
    with _contents(path, partial=limit is not None) as prefixes:
        for data, complete in prefixes:
            try:
                words, mat, replaced = _read_all(path, data, limit, encoding)
                break
            except _CutShort:
                if complete:
                    raise  # the whole file is too short: a prefix would have been told more
    kept = _drop_duplicates(path, words, mat, encoding if replaced else None)
    if replaced:  # after the refusal of words merged by it, which says more
        warn(f"{path}: {replaced} words are not valid {_encoding_name(encoding)}; their bad bytes "
             "read as U+FFFD")
    return kept


def _encoding_name(encoding: str) -> str:
    return "UTF-8" if codecs.lookup(encoding).name == "utf-8" else encoding


def _read_all(path: Path, data: bytes | mmap.mmap, limit: int | None,
              encoding: str) -> tuple[list[str], np.ndarray, int]:
    n, dim, pos = _parse_header(path, data)
    whole = limit is None or limit >= n
    n = n if limit is None else min(n, limit)
    # Before allocating anything of the header's size: a text row takes at least 2*D+1 bytes
    # ("w" and D " 0"), so a header claiming 10^11 words fails here, not in a 745 GiB
    # allocation.
    if n * (2 * dim + 1) > len(data) - pos:  # too short for the header: its dims, or cut?
        _check_first_row(path, data, pos, dim)
    _check_size(path, data, pos, n, dim, 2 * dim + 1, whole)
    return _read_records(path, data, pos, n, dim, whole=whole, encoding=encoding)


def is_word2vec_file(path: Path) -> bool:
    """Cheap sniff: does the file start with a ``V D`` header line?"""
    try:
        with path.open("rb") as fh:
            head = fh.readline(256)
    except OSError:
        return False
    parts = head.removeprefix(codecs.BOM_UTF8).split()
    return len(parts) == 2 and all(p.isdigit() for p in parts) and head.endswith(b"\n")


def check_finite(path: Path, words: Sequence[str], mat: np.ndarray, unit: str) -> None:
    """Refuse nan/inf: cosine scores against them are nan, and a query listed the word itself
    at -inf. ``unit`` names row i as ``f"{unit} {i + 1}"`` ("record", "row")."""
    finite = np.isfinite(mat).all(axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        value = mat[row][~np.isfinite(mat[row])][0]
        raise _non_finite(path, f"{unit} {row + 1}", words[row], str(value))


def _non_finite(path: Path, at: str, word: str, value: str) -> InputError:
    return InputError(f"{path} {at}: the vector of {word!r} holds {value}, not a finite float32 "
                      "number; fix or remove that row, or re-export the vectors")


# ---- internals ------------------------------------------------------------------------------

def _check_shapes(words: Sequence[str], matrix: np.ndarray) -> None:
    if matrix.ndim != 2 or matrix.shape[0] != len(words):
        raise ValueError(f"matrix shape {matrix.shape} does not match {len(words)} words")


def _not_w2v(path: Path, why: str) -> InputError:
    return InputError(f"{path} is not a word2vec file ({why}); pass a word2vec text/binary file, "
                      "a .npy export, a run folder or a checkpoint folder")


def _parse_header(path: Path, data: bytes | mmap.mmap) -> tuple[int, int, int]:
    # a text file saved by an editor that writes a UTF-8 byte-order mark: the mark goes
    start = len(codecs.BOM_UTF8) if data[:len(codecs.BOM_UTF8)] == codecs.BOM_UTF8 else 0
    end = data.find(b"\n")
    parts = data[start:end].split() if end >= 0 else []
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise _header_problem(path, data, start, end)
    if any(len(p) > 18 for p in parts):  # int() refuses 4,300 digits; no file holds 10^18 words
        raise _not_w2v(path, "the header's numbers are too large to be a word count and a "
                             "dimension")
    n, dim = int(parts[0]), int(parts[1])
    if n < 1 or dim < 1:
        raise _not_w2v(path, f"header says {n} words of dimension {dim}")
    return n, dim, end + 1


class _CutShort(InputError):
    """The bytes end before the records asked for: of a whole file, its one-line error; of a
    compressed file's decompressed beginning, a sign to decompress more."""


def _header_problem(path: Path, data: bytes | mmap.mmap, start: int, end: int) -> InputError:
    """What a file without a ``V D`` first line is, where it can be told, and its fix."""
    quoted = shlex.quote(str(path))
    cat = _decompressor(path)  # the hints' commands read the text, not the compressed bytes
    text = f"{cat} {quoted} | " if cat != "cat" else ""
    if data[:4] == b"PK\x03\x04":
        return InputError(f"{path} is a zip archive, not a word2vec file; unzip it and pass the "
                          f"file inside (unzip -l {quoted} lists it)")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or data[1:2] == b"\x00":
        source = "" if text else f" {quoted}"
        return InputError(f"{path} is UTF-16 text; word2vec files are UTF-8: convert it with "
                          f"{text}iconv -f UTF-16 -t UTF-8{source} > vectors.txt, and pass that")
    if end < 0 and b"\r" in data[:256]:
        source = "" if text else f" < {quoted}"
        return InputError(f"{path}'s lines end in a carriage return alone (old Mac line ends); "
                          f"convert them with {text}tr '\\r' '\\n'{source} > vectors.txt, "
                          "and pass that")
    first = _fields(data[start:end if end >= 0 else min(len(data), 1 << 16)])
    if len(first) > 2:
        try:
            [float(x) for x in first[1:]]
        except ValueError:
            pass
        else:  # a word and its values: GloVe's layout, which has no header line
            dim = len(first) - 1
            count = f"{cat} {quoted} | wc -l" if text else f"wc -l < {quoted}"
            return InputError(f"{path} has no 'VOCAB_SIZE DIM' first line: its first line is "
                              f"a word and {dim} values, as in GloVe's files; add that line, "
                              f"e.g. (echo \"$({count}) {dim}\"; {cat} {quoted}) > "
                              "vectors.txt, and pass that")
    return _not_w2v(path, "the first line must be 'VOCAB_SIZE DIM'")


def _decompressor(path: Path) -> str:
    """The command that prints ``path``'s text: ``zcat``, ``bzcat``, ``xzcat`` or ``cat``."""
    try:
        with path.open("rb") as fh:
            head = fh.read(6)
    except OSError:
        return "cat"
    commands = {"gzip": "zcat", "bzip2": "bzcat", "xz": "xzcat"}
    return next((commands[name] for magic, name, _ in _COMPRESSIONS if head.startswith(magic)),
                "cat")


def _check_size(path: Path, data: bytes | mmap.mmap, pos: int, n: int, dim: int,
                min_record: int, whole: bool) -> None:
    """Refuse, before anything of the header's size is allocated, a file too short for it: cut
    short, or a header whose count is wrong (10^11 words)."""
    if n * min_record <= len(data) - pos:
        return
    if whole:
        raise _CutShort(f"{path} has {len(data):,} bytes, too few for the {n:,} words × {dim} "
                        "dims its header promises: the file is cut short, or the header's "
                        "count is wrong; export the vectors again, or make the header's first "
                        "number the count of rows")
    raise _CutShort(f"{path} has {len(data):,} bytes, too few for the first {n:,} words × {dim} "
                    "dims asked for: the file is cut short, or its header is wrong; export the "
                    "vectors again, or ask for fewer words")


def _cut_short(path: Path, read: int, n: int, whole: bool) -> InputError:
    if whole:
        return _CutShort(f"{path} ends after {read} of the {n} words its header promises: the "
                         "file is cut short, or the header's count is wrong; export the vectors "
                         f"again, or make the header's first number {read}")
    return _CutShort(f"{path} ends after {read} of the first {n} words asked for: the file is "
                     f"cut short; export the vectors again, or ask for at most {read} words")


def _check_first_row(path: Path, data: bytes | mmap.mmap, pos: int, dim: int) -> None:
    """A first row of text with another number of values than the header's: named as such,
    before the size check blames a header of too many dims on a file cut short."""
    end = data.find(b"\n", pos, pos + _TEXT_BLOCK)
    line = data[pos:end if end >= 0 else min(len(data), pos + _TEXT_BLOCK)]
    parts = _fields(line)
    if len(parts) < 2 or b"\x00" in line or line[:1].isspace() or len(parts) == dim + 1:
        return
    try:
        [float(x) for x in parts[1:]]
        line.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return  # binary records, or a row that the text reader names
    raise InputError(f"{path} line 2: word {_word(parts[0])[0]!r} has {len(parts) - 1} values, "
                     f"but the header says {dim} per word; make the header's second number "
                     f"{len(parts) - 1}")


def _warn_if_more(path: Path, data: bytes | mmap.mmap, pos: int, n: int) -> None:
    """One warning where rows follow the ``n`` the header says (gensim, too, reads ``n``)."""
    if _NOT_SPACE.search(data, pos) is not None:
        warn(f"{path}: the file goes on after the {n} words its header says; read those {n} "
             "(make the header's first number the count of rows to read them all)")


_NOT_SPACE = re.compile(rb"\S")


_COMPRESSIONS = ((b"\x1f\x8b", "gzip", gzip.open), (b"BZh", "bzip2", bz2.open),
                 (b"\xfd7zXZ\x00", "xz", lzma.open))


@contextlib.contextmanager
def _contents(path: Path, *, partial: bool = False
              ) -> Iterator[Iterator[tuple[bytes | mmap.mmap, bool]]]:
    """The file's bytes, mapped, as ``(data, complete)``: the readers hand back the pages they
    are done with (see :func:`_done_with`), so memory holds the matrix and a block, not the
    file. A compressed file is decompressed into a temporary file (a GoogleNews .bin.gz held
    in memory would be its 3.6 GB more); with ``partial``, only a beginning of it at first,
    ending at a line break (so that text is never cut inside a character), then twice as much
    each time the reader needs more, until ``complete``. A file system that cannot map is
    read into memory."""
    with path.open("rb") as fh:
        head = fh.read(6)
        fh.seek(0)
        for magic, name, opener in _COMPRESSIONS:
            if head.startswith(magic):
                with tempfile.TemporaryFile() as plain, opener(fh, "rb") as stream:
                    prefixes = _prefixes(path, name, stream, plain, partial)
                    try:
                        yield prefixes
                    finally:
                        prefixes.close()  # its mapping goes before the temporary file does
                return
        with _mapped(fh) as data:
            yield iter([(data, True)])


_FIRST_PREFIX = 4 << 20  # decompressed bytes a limit= read starts from


def _prefixes(path: Path, name: str, stream: io.BufferedIOBase, plain: IO[bytes],
              partial: bool) -> Generator[tuple[bytes | mmap.mmap, bool], None, None]:
    """``stream`` decompressed into ``plain``, all at once, or (``partial``) a growing
    beginning at a time. A stream damaged after the beginning a reader needs is no error
    (gensim's ``limit=`` reads such a file too); the damage is raised when more is asked.
    Past its first block, no more is decompressed than the header's words and dims can take
    (:func:`_size_cap`): a few KB that decompress to gigabytes are not written out whole."""
    size, cap = _FIRST_PREFIX, None
    while True:
        ended, damage = _fill(path, name, stream, plain, size, cap)
        if cap is None:
            cap = _size_cap(plain)
            if cap is None and damage is not None:
                raise damage  # damaged before its header: that is what to say
            if cap is None:
                ended = True  # no header: the reader refuses the file from what is here
            elif not partial and not ended and damage is None:
                ended, damage = _fill(path, name, stream, plain, -1, cap)
        if damage is not None and not partial:
            raise damage
        length = plain.tell() if ended else _last_line_end(plain)
        with _mapped(plain, length) as data:
            yield data, ended
        if damage is not None:
            raise damage
        size *= 2


def _size_cap(plain: IO[bytes]) -> int | None:
    """The most bytes the header's ``V D`` can take: a word of up to 1 KiB a row and 64 bytes
    a value (``%.9g`` text takes at most 16), beyond which the file is no word2vec file of that
    header; None without a header."""
    end = plain.tell()
    plain.seek(0)
    first = plain.readline(256).removeprefix(codecs.BOM_UTF8).split()
    plain.seek(end)
    if len(first) != 2 or not all(f.isdigit() and len(f) <= 18 for f in first):
        return None
    words, dim = int(first[0]), int(first[1])
    return 256 + words * (1024 + 64 * dim)


def _fill(path: Path, name: str, stream: io.BufferedIOBase, plain: IO[bytes],
          size: int, cap: int | None = None) -> tuple[bool, InputError | None]:
    """Decompress until ``plain`` holds ``size`` bytes (all, for -1, or ``cap``): whether the
    stream ended (or reached ``cap``), and the error that describes its damage, if it is
    damaged."""
    damage: Exception | None = None
    try:
        while size < 0 or plain.tell() < size:
            block = stream.read1(1 << 20)  # read() drops what it had when damage follows
            if not block:
                plain.flush()
                return True, None
            plain.write(block)
            if cap is not None and plain.tell() >= cap:
                # what follows cannot belong to the header's records: not decompressed (a few
                # KB can decompress to gigabytes), as gensim reads no further either
                plain.flush()
                return True, None
    except (EOFError, ValueError, lzma.LZMAError, zlib.error) as exc:
        damage = exc
    except OSError as exc:  # gzip's "Not a gzipped file", bz2's "Invalid data"
        if exc.errno is not None:
            raise  # a full temporary folder: the command's own line names it
        damage = exc
    plain.flush()
    if damage is None:
        return False, None
    return False, InputError(f"{path} is a damaged {name} file ({damage}); download or "
                             "export it again")


def _last_line_end(plain: IO[bytes]) -> int:
    """The length of ``plain`` up to its last line break: text is never cut inside a character,
    and the records after it wait for a longer beginning."""
    length = end = plain.tell()
    while length > 0:
        start = max(0, length - (1 << 20))
        plain.seek(start)
        cut = plain.read(length - start).rfind(b"\n")
        if cut >= 0:
            length = start + cut + 1
            break
        length = start
    plain.seek(end)
    return length


@contextlib.contextmanager
def _mapped(fh: IO[bytes], length: int | None = None) -> Iterator[bytes | mmap.mmap]:
    """The first ``length`` bytes of ``fh`` (all of it for None), mapped."""
    if (os.fstat(fh.fileno()).st_size if length is None else length) == 0:
        yield b""
        return
    try:
        mapped = mmap.mmap(fh.fileno(), length or 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system that cannot map (FUSE direct_io): read it
        fh.seek(0)
        yield fh.read(-1 if length is None else length)
        fh.seek(0, os.SEEK_END)
        return
    with mapped as data:
        yield data


def _done_with(data: bytes | mmap.mmap, stop: int) -> None:
    """Drop the mapped pages before ``stop`` from this process's memory (they stay in the page
    cache); a no-op for bytes."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        upto = stop - stop % mmap.PAGESIZE
        if upto > 0:
            data.madvise(mmap.MADV_DONTNEED, 0, upto)


def _fields(line: bytes) -> list[bytes]:
    """A text row's fields: split at runs of spaces and tabs (other whitespace, such as
    ``\\x0b``, stays inside words, as word2vec.c keeps it); a ``\\r`` before the newline goes."""
    return [f for f in line.replace(b"\t", b" ").rstrip(b"\r ").split(b" ") if f]


def _read_records(path: Path, data: bytes | mmap.mmap, pos: int, n: int,
                  dim: int, *, whole: bool, encoding: str) -> tuple[list[str], np.ndarray, int]:
    """The records, text or binary. A first row of a word and ``dim`` numbers is text (C
    strings hold no NUL byte, so no word does). Other content that is text (UTF-8 without a
    NUL byte, which binary float32 records practically never are) is read as text, so that a
    malformed row is named rather than the file cut into nonsense records (text with runs of
    spaces did read as binary); only a file named ``.bin`` is first tried as binary then, as
    a few records of binary can happen to be valid UTF-8. The rest is binary."""
    if _first_row_is_text(data, pos, dim):
        return _read_text(path, data, pos, n, dim, whole=whole, encoding=encoding)
    if not _is_text(data, pos):
        return _read_binary_records(path, data, pos, n, dim, whole=whole, encoding=encoding)
    if format_suffix(path) == ".bin":
        try:
            return _read_binary_records(path, data, pos, n, dim, whole=whole, encoding=encoding)
        except InputError:
            pass  # the text reader names what is wrong with the rows
    return _read_text(path, data, pos, n, dim, whole=whole, encoding=encoding)


def _read_binary_records(path: Path, data: bytes | mmap.mmap, pos: int, n: int, dim: int, *,
                         whole: bool, encoding: str) -> tuple[list[str], np.ndarray, int]:
    _check_size(path, data, pos, n, dim, 4 * dim + 2, whole)  # "w" + " " + D float32
    words, mat, replaced = _read_binary(path, data, pos, n, dim, whole=whole, encoding=encoding)
    check_finite(path, words, mat, "record")
    return words, mat, replaced


def _first_row_is_text(data: bytes | mmap.mmap, pos: int, dim: int) -> bool:
    end = data.find(b"\n", pos)
    line = data[pos:end if end >= 0 else len(data)]
    parts = _fields(line)
    if len(parts) != dim + 1 or line[:1].isspace() or b"\x00" in line:
        return False
    try:
        [float(x) for x in parts[1:]]
    except ValueError:
        return False
    return True


def _is_text(data: bytes | mmap.mmap, pos: int) -> bool:
    """Whether the content from ``pos`` is UTF-8 without a NUL byte, which binary float32
    records practically never are."""
    if data.find(b"\x00", pos) >= 0:
        return False
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(pos, len(data), _TEXT_BLOCK):  # a block at a time: bounded memory
            decoder.decode(data[start:start + _TEXT_BLOCK], start + _TEXT_BLOCK >= len(data))
    except UnicodeDecodeError:
        return False
    return True


def _word(raw: bytes, encoding: str = "utf-8") -> tuple[str, bool]:
    """``raw`` as a word, and whether bytes that are not of ``encoding`` were replaced."""
    try:
        return raw.decode(encoding), False
    except UnicodeDecodeError:
        return raw.decode(encoding, errors="replace"), True


def _read_text(path: Path, data: bytes | mmap.mmap, pos: int, n: int,
               dim: int, *, whole: bool, encoding: str) -> tuple[list[str], np.ndarray, int]:
    """Rows parsed a block of lines at a time: memory beyond the matrix stays bounded (one
    Python object per value of the whole file took 10 times the file's size)."""
    words: list[str] = []
    mat = np.empty((n, dim), dtype=np.float32)
    replaced = 0
    row = 0
    while row < n:
        if pos >= len(data):
            raise _cut_short(path, row, n, whole)
        stop = data.rfind(b"\n", pos, pos + _TEXT_BLOCK)
        if stop < 0:  # one row longer than a block
            stop = data.find(b"\n", pos)
        stop = len(data) if stop < 0 else stop
        lines = data[pos:stop].split(b"\n")[:n - row]  # rows beyond the count: said below
        # the file's last line, without its newline: where a file cut short ends
        torn = stop == len(data) and data[len(data) - 1:] != b"\n"
        values: list[bytes] = []
        for i, line in enumerate(lines, start=row):
            parts = _fields(line)
            if not parts:
                raise _not_w2v(path, f"line {i + 2} is empty instead of a word and its values")
            if line[:1].isspace():
                raise _not_w2v(path, f"line {i + 2} starts with whitespace instead of a word")
            word, bad = _word(parts[0], encoding)
            replaced += bad
            if len(parts) != dim + 1:
                if torn and i == row + len(lines) - 1 and len(parts) < dim + 1:
                    raise _cut_short(path, i, n, whole)
                if len(parts) > dim + 1 and _numbers(parts[-dim:]) and \
                        not _numbers(parts[1:len(parts) - dim]):
                    spaced = " ".join(_word(f)[0] for f in parts[:len(parts) - dim])
                    raise InputError(f"{path} line {i + 2}: the word {spaced!r} holds a space, "
                                     "which word2vec text files cannot store (the values are "
                                     f"the line's last {dim}); join its parts, e.g. "
                                     f"{spaced.replace(' ', '_')!r}")
                raise _not_w2v(path, f"line {i + 2}: word {word!r} has {len(parts) - 1} "
                                     f"values, expected {dim}")
            words.append(word)
            values.extend(parts[1:])
        try:
            with np.errstate(over="ignore"):  # 1e39 becomes inf in float32: refused below
                block = np.array(values, dtype=np.float64).astype(np.float32)
        except ValueError:
            raise _not_w2v(path, _first_non_number(words[row:], values, dim, row)) from None
        bad_value = ~np.isfinite(block)
        if bad_value.any():
            k = int(np.argmax(bad_value))
            raise _non_finite(path, f"line {row + k // dim + 2}", words[row + k // dim],
                              values[k].decode("ascii", errors="replace"))
        mat[row:row + len(lines)] = block.reshape(len(lines), dim)
        row += len(lines)
        pos += sum(len(line) + 1 for line in lines)  # past the rows read, newlines included
        _done_with(data, pos)
    if whole:
        _warn_if_more(path, data, pos, n)
    return words, mat, replaced


def _numbers(fields: list[bytes]) -> bool:
    try:
        [float(x) for x in fields]
    except ValueError:
        return False
    return True


def _first_non_number(words: list[str], values: list[bytes], dim: int, first_row: int) -> str:
    """Which row holds the value numpy could not parse (searched only once parsing failed)."""
    for i, value in enumerate(values):
        try:
            float(value)
        except ValueError:
            row = i // dim
            shown = value.decode("utf-8", errors="replace")
            return (f"line {first_row + row + 2}: word {words[row]!r} has a non-number value "
                    f"{shown!r}")
    return "a value is not a number"


def _read_binary(path: Path, data: bytes | mmap.mmap, pos: int, n: int,
                 dim: int, *, whole: bool, encoding: str) -> tuple[list[str], np.ndarray, int]:
    """The records, and the count of their words that are not valid UTF-8."""
    width = 4 * dim
    words: list[str] = []
    mat = np.empty((n, dim), dtype=np.float32)
    buf = np.frombuffer(data, dtype=np.uint8)
    try:
        # records gathered by fancy indexing a block at a time, once their words are read: the
        # index takes 8 bytes per byte gathered (a whole file's at once took 8 times the matrix)
        rows = max(1, _GATHER_BYTES // width)
        columns = np.arange(width, dtype=np.int64)[None, :]
        offsets = np.empty(min(rows, n), dtype=np.int64)
        replaced = 0
        for i in range(n):
            while pos < len(data) and data[pos] == 0x0A:  # newline left by the previous record
                pos += 1
            space = data.find(b" ", pos)
            if pos >= len(data):
                raise _cut_short(path, i, n, whole)
            if space < 0 or len(data) - (space + 1) < width:  # the file ends inside it
                raise _cut_short(path, i, n, whole)
            if space == pos:
                raise _not_w2v(path, f"binary record {i + 1} of {n} has no word")
            if i > 0 and data[pos:pos + 2] == b"\r\n":  # the line ends converted to CR LF
                raise _not_w2v(path, f"binary record {i + 1} of {n} starts with a carriage "
                                     "return: its records end in CR LF, as after a conversion "
                                     "to Windows line ends, which changes values' bytes too")
            if data.find(b"\n", pos, space) >= 0:  # no writer's word holds one: text, misread
                raise _not_w2v(path, f"binary record {i + 1} of {n} has a line break in its "
                                     f"word: is {dim}, the header's second number, the count of "
                                     "values per word?")
            if data.find(b"\x00", pos, space) >= 0:  # nor a NUL: float bytes, read as a word
                raise _not_w2v(path, f"binary record {i + 1} of {n} has a NUL byte in its word: "
                                     f"is {dim}, the header's second number, the count of values "
                                     "per word?")
            word, bad = _word(data[pos:space], encoding)
            words.append(word)
            replaced += bad
            offsets[i % rows] = space + 1
            pos = space + 1 + width
            if i % rows == rows - 1 or i == n - 1:
                first = i - i % rows
                idx = offsets[:i - first + 1, None] + columns
                mat[first:i + 1] = buf[idx].view("<f4").reshape(-1, dim)
                _done_with(data, pos)
    finally:
        del buf  # a view of a mapped file must go before the mapping is closed
    if whole:
        _warn_if_more(path, data, pos, n)
    return words, mat, replaced


def _cut_short_word(word: str) -> bool:
    """Whether ``word``'s U+FFFD are a character split by word2vec.c's cut at 99 bytes: a valid
    beginning of nearly that length, then U+FFFD alone (two such words read alike, as they do
    in gensim and word2vec.c: duplicates, not a file in another encoding)."""
    kept = word.rstrip("\ufffd")
    return "\ufffd" not in kept and len(kept.encode("utf-8")) >= 96


def _drop_duplicates(path: Path, words: list[str], mat: np.ndarray,
                     replaced_from: str | None = None) -> tuple[list[str], np.ndarray]:
    """``replaced_from``: the encoding some words were not valid in, if any."""
    if len(set(words)) == len(words):
        return words, mat
    seen: set[str] = set()
    keep = []
    for i, w in enumerate(words):
        if w not in seen:
            seen.add(w)
            keep.append(i)
    dropped = [words[i] for i in sorted(set(range(len(words))) - set(keep))]
    if replaced_from is not None and any("\ufffd" in w and not _cut_short_word(w)
                                         for w in dropped):
        # different words whose bad bytes became the same U+FFFD: a file in another encoding
        how = "pass its encoding= (e.g. 'cp1251', 'latin-1'), or " if python_caller() else ""
        raise InputError(f"{path}: different words became one when their bytes that are not "
                         f"valid {_encoding_name(replaced_from)} read as U+FFFD: the file is in "
                         f"another encoding; {how}convert the file with iconv -f ENCODING "
                         f"-t UTF-8 {shlex.quote(str(path))} > vectors.txt")
    warn(f"{path}: {len(words) - len(keep)} duplicate words; keeping the first vector of each "
         "(as gensim does)")
    return [words[i] for i in keep], mat[keep]
