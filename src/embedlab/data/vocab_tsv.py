"""``vocab.tsv`` lines read and written at array speed, and the checks of their words and counts.

The format (:mod:`embedlab.data.vocab`): one ``word<TAB>count`` line per word, UTF-8, ``\\n``.
:func:`parse_columns` reads a well-formed file with NumPy on its bytes and one ``str.split`` per
slice of lines; anything else goes to :func:`parse_slowly`, which names the first bad line.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedlab.config import MAX_INT
from embedlab.data.corpus import vocabulary_fix
from embedlab.errors import InputError


def count_fits_int64(digits: str) -> bool:
    """Whether a count written as decimal ``digits`` fits int64 (the counts arrays' type). The
    length test comes first: int() refuses strings of over 4,300 digits with its own ValueError."""
    return len(digits.lstrip("0")) <= len(str(MAX_INT)) and int(digits) <= MAX_INT


def check_count_fits(digits: str, where: str, fix: str) -> None:
    """Refuse a count too large for int64 in one line: ``WHERE: count N is too large ...; FIX``
    (a count of thousands of digits is shown cut)."""
    if not count_fits_int64(digits):
        shown = digits if len(digits) <= 30 else f"{digits[:30]}..."
        raise InputError(f"{where}: count {shown} is too large (the most is {MAX_INT}); {fix}")


def check_word(word: Any, where: str,
               fix: str = "fix or regenerate the vocabulary") -> None:
    if not isinstance(word, str) or not word or word.split() != [word]:
        raise InputError(f"invalid word {word!r} in {where}: words must be non-empty and "
                         f"contain no whitespace; {fix}")


SLICE = 1 << 16  # lines per step of reading or writing vocab.tsv (bounds temporary memory)
_OTHER_SPACE = re.compile(r"[^\S\t\n]")  # whitespace that str.split() splits at, but \t, \n


def file_identity(path: Path) -> tuple[int, int, int]:
    """(inode, size, mtime in ns) of ``path``: a file replaced or rewritten since differs."""
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def all_words_valid(words: Sequence[object]) -> bool:
    """Whether every word is a non-empty str without whitespace, at C speed: splitting the
    words joined by newlines gives them back exactly when each is one whitespace-free token."""
    try:
        return "\n".join(words).split() == list(words)  # type: ignore[arg-type]
    except TypeError:  # not all str
        return False


#: the words, the counts, whether the bytes are save_tsv's, whether the words are unique (None:
#: not checked), and a hashlib.sha256 fed the words joined by newlines (None: not computed)
Columns = tuple[list[str], npt.NDArray[np.int64], bool, bool | None, Any]


def parse_columns(data: bytes, *, native: bool | None = None) -> Columns | None:
    """``word<TAB>count`` lines (UTF-8 ``data``) parsed at array speed: the words, the counts,
    whether the bytes are what ``Vocab.save_tsv`` writes for them (no leading zeros, a final
    newline), and whether the words are unique (None: not checked; ``Vocab`` checks them).
    None when a line is not of that shape (then :func:`parse_slowly` names it), or has a count
    of over 18 digits (which may not fit int64).

    The native library (``tk_vocab_columns``) reads the lines and counts and finds a repeated
    word by hashing the words' bytes where it is loaded, or builds for a file of
    :data:`NATIVE_BYTES` or more (``native`` True or False forces one way, where the library
    builds); NumPy reads them otherwise, as follows.

    Every line holds exactly one tab, not at its start and not before its newline, when there
    are as many tabs as lines and each lies inside its line; after it only ASCII digits; and the
    text holds no whitespace but those tabs and newlines. Then ``str.split`` cuts each line into
    exactly its word and its count.
    """
    if not data:
        return [], np.zeros(0, dtype=np.int64), True, True, None
    lib = None if native is False else _native_library(data, bool(native))
    if lib is not None:
        return _columns_natively(lib, data)
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == 10)
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(raw))
    tabs = np.flatnonzero(raw == 9)
    starts = np.concatenate(([0], ends[:-1] + 1))
    digits = ends - tabs - 1 if len(tabs) == len(ends) else None
    if digits is None or not (tabs > starts).all() or digits.min() < 1 or digits.max() > 18:
        return None
    if _other_space(raw, data):
        return None
    words: list[str] = []
    counts = np.empty(len(ends), dtype=np.int64)
    leading_zero = False
    for a in range(0, len(ends), SLICE):
        b = min(a + SLICE, len(ends))
        value = _decimal(raw, tabs[a:b] + 1, digits[a:b])
        if value is None:
            return None
        counts[a:b] = value
        leading_zero |= bool(((raw[tabs[a:b] + 1] == 48) & (digits[a:b] > 1)).any())
        words += data[starts[a]:ends[b - 1]].decode("utf-8").split()[0::2]
    return words, counts, data.endswith(b"\n") and not leading_zero, None, None


#: vocab.tsv files from this size (~500,000 words) are read by the native library even if it
#: must be compiled first (:data:`embedlab.engines.native.NATIVE_VOCAB_WORDS`)
NATIVE_BYTES = 8 << 20


def _native_library(data: bytes, build: bool) -> Any:
    """The native library where :func:`parse_columns` uses it for ``data``, else None."""
    from embedlab.engines.native import library_if

    if len(data) >= 0xFFFFFFFF:  # its hash table holds 32-bit offsets
        return None
    return library_if(build or len(data) >= NATIVE_BYTES)


def _columns_natively(lib: Any, data: bytes) -> Columns | None:
    """:func:`parse_columns` by the native library ``lib``."""
    cap = data.count(b"\n") + 1
    slots = 1 << (cap + cap // 2).bit_length()  # a power of two, at least 1.5 x the lines
    counts = np.empty(cap, dtype=np.int64)
    table = np.zeros(slots, dtype=np.uint64)
    info = np.zeros(2, dtype=np.int64)  # flags, the joined words' length
    joined = np.empty(len(data), dtype=np.uint8)
    lines = lib.tk_vocab_columns(np.frombuffer(data, dtype=np.uint8).ctypes.data, len(data),
                                 cap, counts.ctypes.data, table.ctypes.data, slots,
                                 info.ctypes.data, joined.ctypes.data, info[1:].ctypes.data)
    del table
    if lines < 0:
        return None
    canonical, lead, twice = (bool(int(info[0]) >> bit & 1) for bit in range(3))
    if lead and _OTHER_SPACE.search(data.decode("utf-8")) is not None:
        return None
    text = joined[:max(0, int(info[1]) - 1)].tobytes()  # the words joined by newlines
    del joined
    words_hash = hashlib.sha256(text)
    words = text.decode("utf-8").split("\n") if lines else []
    return words, counts[:lines], canonical, not twice, words_hash


def _other_space(raw: npt.NDArray[np.uint8], data: bytes) -> bool:
    """Whether the UTF-8 text ``data`` holds whitespace other than tabs and newlines.

    The ASCII ones are found with array operations; the others all start with one of four lead
    bytes in UTF-8 (U+0085, U+00A0, U+1680, U+2000...U+3000), and only a text that holds one of
    those is searched as a str.
    """
    ascii_space = np.isin(raw, np.array([11, 12, 13, 28, 29, 30, 31, 32], dtype=np.uint8))
    if ascii_space.any():
        return True
    if not np.isin(raw, np.array([0xC2, 0xE1, 0xE2, 0xE3], dtype=np.uint8)).any():
        return False
    return _OTHER_SPACE.search(data.decode("utf-8")) is not None


def _decimal(raw: npt.NDArray[np.uint8], first: npt.NDArray[np.intp],
             digits: npt.NDArray[np.intp]) -> npt.NDArray[np.int64] | None:
    """The numbers written with ``digits[i]`` ASCII digits from ``raw[first[i]]`` on; None if a
    byte there is not a digit."""
    width = int(digits.max())
    place = np.arange(width)
    inside = place < digits[:, None]
    values = raw[np.where(inside, first[:, None] + place, 0)].astype(np.int64) - 48
    if ((values < 0) | (values > 9))[inside].any():
        return None
    # digit j of an n-digit number is worth 10**(n-1-j); places past the number count 0
    power = np.where(inside, digits[:, None] - 1 - place, 0)
    return (np.where(inside, values, 0) * (10 ** power)).sum(axis=1)


def parse_slowly(lines: list[str], path: str | os.PathLike[str]) -> tuple[list[str], list[int]]:
    words: list[str] = []
    counts: list[int] = []
    for n, line in enumerate(lines, 1):
        word, tab, count = line.partition("\t")
        if not tab or not count.isdigit() or not count.isascii():
            raise InputError(f"{path}:{n}: expected 'word<TAB>count', got {line[:60]!r}; "
                             f"{vocabulary_fix(path)}")
        # the fix only for a bad line: it reads meta.json, which at every one of a million
        # lines took over a minute
        if not count_fits_int64(count):
            check_count_fits(count, f"{path}:{n}", vocabulary_fix(path))
        if not word or word.split() != [word]:
            check_word(word, f"{path}:{n}", vocabulary_fix(path))
        words.append(word)
        counts.append(int(count))
    return words, counts
