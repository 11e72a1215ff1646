"""The npy export: ``NAME.npy`` (V×D float32, ``np.save`` without pickle) + ``NAME.vocab.tsv``.

The vocabulary file uses the run folder's ``vocab.tsv`` format: one word per line, id = line
number (0-based), optionally ``word<TAB>count``. Counts are written when they are known (vectors
from a run), otherwise the file holds words only (which is also TensorBoard projector metadata).
Loading never unpickles (``allow_pickle=False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np

from embedlab.data.vocab import check_count_fits, warn_of_a_leading_mark
from embedlab.errors import InputError, python_caller
from embedlab.export.atomic import atomic_export, check_writable
from embedlab.export.word2vec import check_finite, validate_words

_NPY_MAGIC = b"\x93NUMPY"


def vocab_path_for(npy_path: Path) -> Path:
    """``vectors.npy`` (or ``.NPY``) -> ``vectors.vocab.tsv`` (beside the matrix)."""
    name = npy_path.name
    return npy_path.with_name((name[:-4] if name.lower().endswith(".npy") else name) +
                              ".vocab.tsv")


def write_npy(path: Path, words: Sequence[str], matrix: np.ndarray,
              counts: np.ndarray | None = None, *, force: bool = False) -> tuple[Path, Path]:
    """Write the matrix to ``path`` (must end in ``.npy``) and the vocabulary beside it.

    Both destinations are checked before anything is written; both files are written atomically
    and renamed into place only once both are complete.
    Returns ``(matrix_path, vocab_path)``.
    """
    if path.suffix.lower() != ".npy":
        if python_caller():  # Vectors.to_npy: no --format there
            from embedlab.export.word2vec import COMPRESSED_SUFFIXES, format_suffix

            if path.suffix.lower() in COMPRESSED_SUFFIXES and format_suffix(path) == ".npy":
                raise InputError(f"path={str(path)!r}: npy exports are not written compressed "
                                 f"(NumPy maps them); pass path={str(path.with_suffix(''))!r}")
            raise InputError(f"path={str(path)!r} must end in .npy; e.g. "
                             f"path={str(path.with_suffix('.npy'))!r}")
        raise InputError(f"--out {path} must end in .npy for --format npy; e.g. --out vectors.npy")
    if matrix.ndim != 2 or matrix.shape[0] != len(words):
        raise ValueError(f"matrix shape {matrix.shape} does not match {len(words)} words")
    validate_words(words, vocab_tsv=True)
    vocab_path = vocab_path_for(path)
    check_writable(path, force=force, example="vectors.npy")
    check_writable(vocab_path, force=force, example="vectors.npy", beside=path)
    # Nested, so both temporaries are complete before either is renamed: a failure (disk full
    # while writing the matrix) leaves an earlier pair as it was, never a new vocabulary beside
    # an old matrix.
    with atomic_export(vocab_path, force=force) as vocab_fh, \
            atomic_export(path, force=force) as matrix_fh:
        vocab_fh.write(_vocab_text(words, counts).encode("utf-8"))
        _save(matrix_fh, np.ascontiguousarray(matrix, dtype=np.float32))
    return path, vocab_path


def _save(fh: IO[bytes], matrix: np.ndarray) -> None:
    """``np.save``'s bytes (its version 1.0 header, then the C-ordered data), written by the
    file's own ``write``: ``np.save`` writes a file with ``ndarray.tofile``, whose error on a
    full disk or past the file size limit (``N requested and M written``) has no errno to name
    the cause by."""
    from numpy.lib import format as npy_format

    npy_format.write_array_header_1_0(fh, npy_format.header_data_from_array_1_0(matrix))
    fh.write(matrix.data)


def read_npy(path: Path) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """Read ``NAME.npy`` and its vocabulary (``NAME.vocab.tsv``, else ``vocab.tsv`` beside it)."""
    _check_magic(path)
    vocab = vocab_path_for(path)
    if not vocab.is_file():
        vocab = path.with_name("vocab.tsv")
    if not vocab.is_file():
        raise InputError(f"no vocabulary beside {path}; expected {vocab_path_for(path).name} "
                         "(written by 'embedlab export --format npy') in the same folder")
    try:
        matrix = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputError(f"{path} is not a readable .npy matrix ({exc}); re-export it with "
                         "'embedlab export --format npy'") from None
    if matrix.ndim != 2 or not np.issubdtype(matrix.dtype, np.floating):
        raise InputError(f"{path} holds a {matrix.dtype} array of shape {matrix.shape}, not a "
                         "V×D float matrix; re-export it with 'embedlab export --format npy'")
    words, counts = read_vocab_tsv(vocab)
    if len(words) != matrix.shape[0]:
        raise InputError(f"{vocab} lists {len(words)} words but {path} has {matrix.shape[0]} rows; "
                         "re-export both files together")
    matrix = matrix.astype(np.float32, copy=False)
    check_finite(path, words, matrix, "row")
    return words, matrix, counts


def _check_magic(path: Path) -> None:
    """Without numpy's magic bytes np.load takes the file for a pickle and suggests loading it
    with allow_pickle, the one thing never to do with a file of unknown origin."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
    except OSError as exc:
        raise InputError(f"cannot read {path} ({exc.strerror or exc}); check the path and "
                         "its permissions") from None
    if head != _NPY_MAGIC:
        raise InputError(f"{path} is not a .npy array file (it does not start with numpy's "
                         "magic bytes); pass a .npy written by 'embedlab export --format npy', "
                         "or give a word2vec file a .txt or .bin name")


def read_vocab_tsv(path: Path) -> tuple[list[str], np.ndarray | None]:
    """Read ``word[<TAB>count]`` lines (id = line); counts only if every line has one.

    Words are unique, non-empty and free of whitespace; counts are decimal digits that fit
    int64 (the same rules as a run's ``vocab.tsv``), so a bad file is one line, never a crash.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not valid UTF-8 (byte {exc.start}); "
                         "regenerate the vocabulary file") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # a file saved on Windows: "\r\n" line ends, as a word2vec text file may have them (no
    # word holds a "\r": whitespace is refused in words)
    lines = [line.removesuffix("\r") for line in lines]
    words: list[str] = []
    counts: list[int] = []
    seen: dict[str, int] = {}
    for i, line in enumerate(lines):
        word, tab, count = line.partition("\t")
        if not word:
            raise InputError(f"{path} line {i + 1} has no word; regenerate the vocabulary file")
        if word.split() != [word]:
            raise InputError(f"{path} line {i + 1}: word {word!r} contains whitespace; "
                             "regenerate the vocabulary file")
        if word in seen:
            raise InputError(f"{path} line {i + 1}: word {word!r} is listed twice (first on "
                             f"line {seen[word] + 1}); regenerate the vocabulary file")
        seen[word] = i
        words.append(word)
        if tab:
            # digits only: int() would also take '-3', ' 3' or '3_0'; and at most int64's
            # maximum, which numpy cannot hold beyond (OverflowError)
            if not (count.isascii() and count.isdigit()):
                raise InputError(f"{path} line {i + 1}: count {count!r} is not a non-negative "
                                 "integer; expected 'word<TAB>count'")
            check_count_fits(count, f"{path} line {i + 1}",
                             "fix the count or regenerate the vocabulary file")
            counts.append(int(count))
    warn_of_a_leading_mark(Path(path), words)
    if counts and len(counts) != len(words):  # some lines with a count and some without
        bare = next(i for i, line in enumerate(lines) if "\t" not in line)
        with_count = next(i for i, line in enumerate(lines) if "\t" in line)
        raise InputError(f"{path} line {bare + 1} has no count, but line {with_count + 1} "
                         "has one; give every word its count ('word<TAB>count') or none")
    have_counts = len(counts) == len(words) and len(words) > 0
    return words, (np.asarray(counts, dtype=np.int64) if have_counts else None)


def _vocab_text(words: Sequence[str], counts: np.ndarray | None) -> str:
    if counts is None:
        return "".join(f"{w}\n" for w in words)
    return "".join(f"{w}\t{int(c)}\n" for w, c in zip(words, counts, strict=True))
