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

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.export.atomic import atomic_export, check_writable

_ROWS_PER_WRITE = 4096  # rows formatted per write call: bounded memory for big vocabularies


def validate_words(words: Sequence[str]) -> None:
    """Raise :class:`InputError` unless every word can be stored in the word2vec formats."""
    for i, word in enumerate(words):
        if not word or any(ch.isspace() for ch in word):
            raise InputError(f"word #{i} {word!r} is empty or contains whitespace, which the "
                             "word2vec and vocab.tsv formats cannot store; "
                             "rename it in the vocabulary")
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"word #{i} {word!r} cannot be encoded as UTF-8; "
                             "fix the vocabulary") from None


def write_word2vec(path: Path, words: Sequence[str], matrix: np.ndarray, *,
                   binary: bool = False, force: bool = False) -> Path:
    """Write ``words`` (V) and ``matrix`` (V×D, cast to float32) atomically; returns ``path``.

    A ``.npy`` name is refused: :func:`embedlab.vectors.load` reads ``.npy`` files as npy exports,
    so the file could not be loaded back.
    """
    if path.suffix.lower() == ".npy":
        fmt = "word2vec-binary" if binary else "word2vec"
        raise InputError(f"--out {path} ends in .npy, but --format {fmt} writes a word2vec file "
                         "that would then be read as a .npy matrix; pass --format npy, or an "
                         f"--out name ending in {'.bin' if binary else '.txt'}")
    _check_shapes(words, matrix)
    validate_words(words)
    check_writable(path, force=force, example="vectors.bin" if binary else "vectors.txt")
    mat = np.ascontiguousarray(matrix, dtype="<f4")
    n, dim = mat.shape
    with atomic_export(path) as fh:
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


def read_word2vec(path: Path) -> tuple[list[str], np.ndarray]:
    """Read a word2vec text or binary file (detected from its content).

    Returns the words in file order and a float32 matrix (V×D). Raises :class:`InputError` for
    anything that is not a well-formed word2vec file, and for values that are not finite
    float32 (nan, inf, or text like ``1e39`` that overflows): they would poison every query.
    """
    data = path.read_bytes()
    n, dim, pos = _parse_header(path, data)
    # Before allocating anything of the header's size: a text row takes at least 2*D+1 bytes
    # ("w" and D " 0"), so a header claiming 10^11 words fails here, not in a 745 GiB allocation.
    _check_size(path, data, pos, n, dim, 2 * dim + 1)
    if _first_record_is_text(data, pos, dim):
        return _drop_duplicates(path, *_read_text(path, data, pos, n, dim))
    try:
        _check_size(path, data, pos, n, dim, 4 * dim + 2)  # "w" + " " + D float32
        words, mat = _read_binary(path, data, pos, n, dim)
    except InputError:
        if not _is_utf8(data, pos):
            raise
        # Binary records are (almost) never valid UTF-8: this is a text file whose first row is
        # malformed, and the text reader names the row and the value (rather than calling a
        # text file a truncated binary one).
        return _drop_duplicates(path, *_read_text(path, data, pos, n, dim))
    check_finite(path, words, mat, "record")
    return _drop_duplicates(path, words, mat)


def is_word2vec_file(path: Path) -> bool:
    """Cheap sniff: does the file start with a ``V D`` header line?"""
    try:
        with path.open("rb") as fh:
            head = fh.readline(256)
    except OSError:
        return False
    parts = head.split()
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


def _parse_header(path: Path, data: bytes) -> tuple[int, int, int]:
    end = data.find(b"\n")
    parts = data[:end].split() if end >= 0 else []
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise _not_w2v(path, "the first line must be 'VOCAB_SIZE DIM'")
    n, dim = int(parts[0]), int(parts[1])
    if n < 1 or dim < 1:
        raise _not_w2v(path, f"header says {n} words of dimension {dim}")
    return n, dim, end + 1


def _check_size(path: Path, data: bytes, pos: int, n: int, dim: int, min_record: int) -> None:
    if n * min_record > len(data) - pos:
        raise _not_w2v(path, f"header says {n} words × {dim} dims but the file has only "
                             f"{len(data)} bytes")


def _is_utf8(data: bytes, pos: int) -> bool:
    try:
        data[pos:].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _first_record_is_text(data: bytes, pos: int, dim: int) -> bool:
    end = data.find(b"\n", pos)
    line = data[pos:end if end >= 0 else len(data)]
    try:
        parts = line.decode("utf-8").rstrip().split(" ")
        if len(parts) != dim + 1:
            return False
        [float(x) for x in parts[1:]]
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def _read_text(path: Path, data: bytes, pos: int, n: int, dim: int) -> tuple[list[str], np.ndarray]:
    try:
        text = data[pos:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_w2v(path, f"invalid UTF-8 at byte {pos + exc.start}") from None
    lines = text.split("\n")  # only \n ends a record (words may hold other line separators)
    if len(lines) < n or (len(lines) == n and not lines[n - 1]):
        raise _not_w2v(path, f"the header promises {n} words but the file ends early")
    words: list[str] = []
    values: list[str] = []
    for i in range(n):
        parts = lines[i].rstrip().split(" ")
        if not parts[0]:
            raise _not_w2v(path, f"line {i + 2} starts with whitespace instead of a word")
        if len(parts) != dim + 1:
            raise _not_w2v(path, f"line {i + 2}: word {parts[0]!r} has {len(parts) - 1} "
                                 f"values, expected {dim}")
        words.append(parts[0])
        values.extend(parts[1:])
    try:
        with np.errstate(over="ignore"):  # 1e39 becomes inf in float32: refused just below
            mat = np.array(values, dtype=np.float64).astype(np.float32).reshape(n, dim)
    except ValueError:
        raise _not_w2v(path, _first_non_number(words, values, dim)) from None
    bad = ~np.isfinite(mat.ravel())
    if bad.any():
        i = int(np.argmax(bad))
        raise _non_finite(path, f"line {i // dim + 2}", words[i // dim], values[i])
    return words, mat


def _first_non_number(words: list[str], values: list[str], dim: int) -> str:
    """Which row holds the value numpy could not parse (searched only once parsing failed)."""
    for i, value in enumerate(values):
        try:
            float(value)
        except ValueError:
            row = i // dim
            return f"line {row + 2}: word {words[row]!r} has a non-number value {value!r}"
    return "a value is not a number"


def _read_binary(path: Path, data: bytes, pos: int, n: int,
                 dim: int) -> tuple[list[str], np.ndarray]:
    width = 4 * dim
    words: list[str] = []
    offsets = np.empty(n, dtype=np.int64)
    for i in range(n):
        while pos < len(data) and data[pos] == 0x0A:  # newline left by the previous record
            pos += 1
        space = data.find(b" ", pos)
        if space < 0 or len(data) - (space + 1) < width:
            raise _not_w2v(path, f"binary record {i + 1} of {n} is truncated")
        if space == pos:
            raise _not_w2v(path, f"binary record {i + 1} of {n} has no word")
        try:
            words.append(data[pos:space].decode("utf-8"))
        except UnicodeDecodeError:
            raise _not_w2v(path, f"word {i + 1} is not valid UTF-8") from None
        offsets[i] = space + 1
        pos = space + 1 + width
    buf = np.frombuffer(data, dtype=np.uint8)
    # Gather all records with one fancy-indexing op instead of V small frombuffer calls.
    idx = offsets[:, None] + np.arange(width, dtype=np.int64)[None, :]
    mat = buf[idx].view("<f4").reshape(n, dim).astype(np.float32)
    return words, mat


def _drop_duplicates(path: Path, words: list[str], mat: np.ndarray) -> tuple[list[str], np.ndarray]:
    if len(set(words)) == len(words):
        return words, mat
    seen: set[str] = set()
    keep = []
    for i, w in enumerate(words):
        if w not in seen:
            seen.add(w)
            keep.append(i)
    # one line on stderr like every embedlab warning (logging printed it without the prefix)
    print(f"embedlab: warning: {path}: {len(words) - len(keep)} duplicate words; keeping the "
          "first vector of each (as gensim does)", file=sys.stderr, flush=True)
    return [words[i] for i in keep], mat[keep]
