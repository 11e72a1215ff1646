"""The prepared corpus: token ids on disk, memory-mapped, plus vocabulary and metadata.

Layout of a prepared folder (format version 1)::

    ids.u32        raw little-endian uint32 token ids, all sentences concatenated
    sentences.i64  raw little-endian int64 exclusive end offsets into ids (strictly increasing,
                   last == len(ids)); sentences left empty by OOV removal are omitted
    vocab.tsv      word<TAB>count, id = line number (see embedlab.data.vocab)
    meta.json      format, version, source files (size, mtime), options, token counts

This module opens and checks such a folder; :mod:`embedlab.data.preparing` builds one in a
temporary sibling and renames it into place, so it is either complete or absent.
Nothing here unpickles: ids are read with ``np.memmap`` and metadata with ``json``.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedlab.config import MAX_INT
from embedlab.data.corpus import PREPARED_FORMAT, remake_fix, says_prepared
from embedlab.data.corpus import SPECIAL_CORPORA as SPECIAL_CORPORA  # re-exported
from embedlab.data.vocab import Vocab
from embedlab.errors import InputError, spell_name
from embedlab.fsutil import clip

FORMAT = PREPARED_FORMAT
FORMAT_VERSION = 1
IDS_FILE, ENDS_FILE, VOCAB_FILE, META_FILE = "ids.u32", "sentences.i64", "vocab.tsv", "meta.json"
_SCAN_CHUNK = 1 << 20  # values per numpy call in file_chunks (bounds memory)


@dataclass(frozen=True, eq=False)
class PreparedCorpus:
    """A prepared folder, opened read-only. ``ids`` is a read-only memmap (uint32)."""

    root: Path
    ids: npt.NDArray[np.uint32]
    sentence_ends: npt.NDArray[np.int64]
    vocab: Vocab
    meta: dict[str, Any]
    _longest: int = 0  # tokens in the longest sentence, found while checking the ends

    def __repr__(self) -> str:  # not the dataclass's: it would print all of meta.json
        return (f"PreparedCorpus({str(self.root)!r}: {len(self.ids):,} tokens, "
                f"{len(self.sentence_ends):,} sentences, {len(self.vocab):,} words)")

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, check_ids: bool = True) -> PreparedCorpus:
        """Open and check a prepared folder; :class:`InputError` if it is not a valid one.

        ``check_ids`` False leaves out the check that every id of ``ids.u32`` names a word (a
        read of the whole corpus): for a reader that checks each id as it reads it, as the
        native batch generator does (:func:`unknown_id`).
        """
        root = Path(path)
        meta = _read_meta(root)
        # The ids are checked on a thread while the vocabulary is read: the check reads the whole
        # corpus (disk-bound when it is not cached), the vocabulary is Python work. Its verdict
        # is taken only once the checks before it have passed, so the first problem named is
        # the same as in a serial open.
        contents = _ContentsCheck(root, meta["vocab_size"] if check_ids else None)
        try:
            vocab = Vocab.load_tsv(root / VOCAB_FILE, unk=meta.get("unk"))
            ids = map_file(root / IDS_FILE, np.dtype("<u4"))
            ends = map_file(root / ENDS_FILE, np.dtype("<i8"))
            problem = _check_consistency(meta, ids, ends, vocab)
            if problem:
                raise _invalid(root, problem)
            longest = contents.result()
        except BaseException:
            contents.stop.set()
            raise
        return cls(root, ids, ends, vocab, meta, longest)

    @property
    def raw_tokens(self) -> int:
        """Corpus tokens before OOV removal (the denominator of words/s)."""
        return int(self.meta["raw_tokens"])

    def longest_sentence(self) -> int:
        """Tokens in the longest sentence (0 for an empty corpus)."""
        return self._longest

    def sentences(self) -> Iterator[npt.NDArray[np.uint32]]:
        """Each sentence's ids as a view into the memmap."""
        start = 0
        for end in self.sentence_ends:
            yield self.ids[start:int(end)]
            start = int(end)


def is_prepared(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a folder whose meta.json says it is a prepared corpus."""
    meta = Path(path) / META_FILE
    try:
        return meta.is_file() and says_prepared(meta)
    except OSError:  # a folder this user cannot read: refused where the corpus is read
        return False


def declared_vocab_size(path: str | os.PathLike[str]) -> int | None:
    """The vocabulary size that the meta.json of the prepared folder ``path`` declares, read
    without opening the folder; None when ``path`` is no prepared folder or its meta.json is
    not valid (:meth:`PreparedCorpus.open` says why)."""
    if not is_prepared(path):
        return None
    try:
        size = _read_meta(Path(path))["vocab_size"]
    except InputError:
        return None
    return int(size)


#: the options that decide the vocabulary, recorded in meta.json
VOCAB_OPTIONS = ("lowercase", "min_count", "max_vocab", "unk")


def vocab_options(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The options the prepared folder ``path`` was built with: :data:`VOCAB_OPTIONS` and
    ``max_distinct`` (the pruning limit, which decides the counts when pruning happened)."""
    meta = _read_meta(Path(path))
    return {key: meta[key] for key in (*VOCAB_OPTIONS, "max_distinct") if key in meta}


def _invalid(root: Path, problem: str) -> InputError:
    return InputError(f"{root} is not a valid prepared corpus ({problem}); {remake_fix(root)}")


def _read_meta(root: Path) -> dict[str, Any]:
    try:
        meta = json.loads((root / META_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _invalid(root, f"no {META_FILE}") from None
    except (OSError, ValueError) as exc:
        raise _invalid(root, f"unreadable {META_FILE}: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _invalid(root, f"{META_FILE} is not embedlab's")
    if meta.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{root} has prepared-corpus format version "
                         f"{meta.get('format_version')!r}, this embedlab reads {FORMAT_VERSION}; "
                         "re-run 'embedlab prepare' with this version")
    problem = _check_meta_fields(meta)
    if problem:
        raise _invalid(root, f"{META_FILE}: {problem}")
    return meta


_PRUNED_KEYS = ("times", "threshold", "dropped_types", "dropped_tokens")


def _is_count(value: Any, least: int = 0) -> bool:
    # bool is an int subclass, and json reads 1.0 / NaN as floats: neither is a count
    return type(value) is int and least <= value <= MAX_INT  # int64 arrays, offsets


def _check_meta_fields(meta: dict[str, Any]) -> str | None:
    """The first field of ``meta`` with a wrong type or range, described; None if all fit.

    Checked once where a folder is opened, so an edited or damaged meta.json is refused in one
    line before anything uses it (before train makes a run folder, say). Fields the code relies
    on are required; the descriptive ones may be missing (an older embedlab did not write them
    all).
    """
    for key in ("raw_tokens", "tokens", "sentences", "vocab_size"):
        if key not in meta:
            return f"{key} is missing"
        if not _is_count(meta[key]):
            return f"{key} {clip(repr(meta[key]))} is not a whole number >= 0"
    if meta["raw_tokens"] < meta["tokens"]:
        return f"raw_tokens {meta['raw_tokens']!r} is below tokens {meta['tokens']!r}"
    optional: dict[str, tuple[Any, str]] = {
        "embedlab_version": (lambda v: isinstance(v, str), "not a string"),
        "created": (lambda v: isinstance(v, str), "not a string"),
        "source": (lambda v: isinstance(v, str), "not a string"),
        "source_files": (_are_source_files, "not a list of {path, size, mtime} entries"),
        "lowercase": (lambda v: isinstance(v, bool), "not true or false"),
        "min_count": (lambda v: _is_count(v, 1), "not a whole number >= 1"),
        "max_vocab": (lambda v: v is None or _is_count(v, 1), "not null or a whole number >= 1"),
        "unk": (lambda v: v is None or (isinstance(v, str) and v.split() == [v]),
                "not null or a word without whitespace"),
        "max_distinct": (lambda v: _is_count(v, 1), "not a whole number >= 1"),
        "invalid_utf8": (_is_count, "not a whole number >= 0"),
        "pruned": (lambda v: v is None or (isinstance(v, dict) and set(v) == set(_PRUNED_KEYS)
                                            and all(map(_is_count, v.values()))),
                   "not null or {times, threshold, dropped_types, dropped_tokens} counts"),
    }
    for key, (valid, what) in optional.items():
        if key in meta and not valid(meta[key]):
            return f"{key} {clip(repr(meta[key]))} is {what}"
    return None


def _are_source_files(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(f, dict) and isinstance(f.get("path"), str) and _is_count(f.get("size"))
        and type(f.get("mtime")) in (int, float) and math.isfinite(f["mtime"]) for f in value)


def map_file(path: Path, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """``path`` as a read-only memmap of ``dtype``; an empty array for an empty file.
    A missing file, or one whose size is not a whole number of values, is an
    :class:`InputError` naming the prepared folder."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise _invalid(path.parent, f"{path.name}: {exc.strerror or exc}") from None
    if size % dtype.itemsize:
        raise _invalid(path.parent, f"{path.name} has {size} bytes, not a multiple of "
                                    f"{dtype.itemsize}")
    if size == 0:  # np.memmap refuses empty files
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def _check_consistency(meta: dict[str, Any], ids: npt.NDArray[Any], ends: npt.NDArray[Any],
                       vocab: Vocab) -> str | None:
    if meta.get("tokens") != len(ids):
        said = meta.get("tokens")
        said = f"{said:,}" if isinstance(said, int) and not isinstance(said, bool) else repr(said)
        return f"{IDS_FILE} holds {len(ids):,} ids, {META_FILE} says {said}"
    if meta.get("vocab_size") != len(vocab):
        return f"{VOCAB_FILE} has {len(vocab):,} words, {META_FILE} says {meta.get('vocab_size')!r}"
    if len(ends) != meta.get("sentences"):
        return f"{ENDS_FILE} has {len(ends):,} entries, {META_FILE} says {meta.get('sentences')!r}"
    if len(ids) and (not len(ends) or int(ends[-1]) != len(ids)):
        return f"{ENDS_FILE} does not end at {len(ids):,}"
    return None


class _ContentsCheck:
    """:func:`_check_contents` on a thread; :meth:`result` waits for its verdict."""

    def __init__(self, root: Path, vocab_size: int | None) -> None:
        self.stop = threading.Event()
        self._outcome: list[Any] = []
        self._thread = threading.Thread(target=self._run, args=(root, vocab_size), daemon=True,
                                        name="embedlab-check-ids")
        self._thread.start()

    def _run(self, root: Path, vocab_size: int | None) -> None:
        try:
            self._outcome.append(_check_contents(root, vocab_size, self.stop))
        except BaseException as exc:  # raised where the verdict is taken
            self._outcome.append(exc)

    def result(self) -> int:
        self._thread.join()
        if isinstance(self._outcome[0], BaseException):
            raise self._outcome[0]
        return int(self._outcome[0])


def _check_contents(root: Path, vocab_size: int | None,
                    stop: threading.Event | None = None) -> int:
    """Every id names a word (unless ``vocab_size`` is None) and the sentence ends increase:
    the trainer indexes the embedding matrices with these numbers, so a damaged file must stop
    here (:class:`InputError`), not crash the kernel. Returns the longest sentence's length,
    found on the way.

    Read with plain reads in 1M-value chunks rather than through the memmap, whose pages would
    stay resident (4 bytes per token) until training hands them back.
    """
    if vocab_size is not None and not _ids_name_words(root, vocab_size, stop):
        return 0
    longest = previous = 0
    for n, chunk in enumerate(file_chunks(root / ENDS_FILE, np.dtype("<i8"))):
        steps = np.diff(chunk, prepend=previous)
        if int(steps.min()) <= 0:
            at = n * _SCAN_CHUNK + int(np.argmax(steps <= 0))
            raise _invalid(root, f"{ENDS_FILE} does not increase strictly at entry {at:,}")
        longest = max(longest, int(steps.max()))
        previous = int(chunk[-1])
    return longest


def _ids_name_words(root: Path, vocab_size: int, stop: threading.Event | None) -> bool:
    """Raise :func:`unknown_id` for the first id of ``ids.u32`` that names no word; False when
    ``stop`` was set meanwhile (the open failed otherwise: nobody waits for the verdict)."""
    for n, chunk in enumerate(file_chunks(root / IDS_FILE, np.dtype("<u4"))):
        if stop is not None and stop.is_set():
            return False
        if int(chunk.max()) >= vocab_size:
            i = int(np.argmax(chunk >= vocab_size))
            raise unknown_id(root, n * _SCAN_CHUNK + i, int(chunk[i]), vocab_size)
    return True


def unknown_id(root: Path, position: int, value: int, vocab_size: int) -> InputError:
    """The error for id ``value`` at ``position`` of ``root``'s ``ids.u32``, which names no word
    of a vocabulary of ``vocab_size``."""
    return _invalid(root, f"{IDS_FILE} holds id {value:,} at position {position:,}, but the "
                          f"vocabulary has {vocab_size:,} words")


def file_chunks(path: Path, dtype: np.dtype[Any]) -> Iterator[npt.NDArray[Any]]:
    """The values of the raw file ``path`` in chunks of at most ``_SCAN_CHUNK``, read with
    plain reads (a memmap's pages would stay resident)."""
    # readinto, not np.fromfile: a Ctrl-C inside numpy's read of a file object comes out as a
    # TypeError ("expected str, bytes or os.PathLike object"), a traceback instead of the stop
    with open(path, "rb") as f:
        while True:
            chunk = np.empty(_SCAN_CHUNK, dtype=dtype)
            got = f.readinto(chunk.data.cast("B")) // chunk.itemsize
            if not got:
                return
            yield chunk[:got]


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    """Write ``meta`` as meta.json: indented UTF-8 JSON, non-ASCII text kept readable."""
    # A file name that is not valid UTF-8 reaches us with lone surrogates (os.fsdecode), which
    # UTF-8 cannot encode; they become \udcXX escapes, which json.loads turns back into the
    # same str (so os.fsencode gives the original bytes). Other text stays readable as is.
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}",
                          json.dumps(meta, indent=2, ensure_ascii=False))
    path.write_text(text + "\n", encoding="utf-8")


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def check_not_inside(out: Path, source: Path, run_dir: Path | None = None) -> None:
    """Refuse an output inside a corpus folder (it would be read as corpus text).

    ``run_dir``: preparing for 'train' into RUN/prepared; train has no --out, so the message
    names the run folder and the flags that place it.
    """
    if not source.is_dir():
        return
    root = source.resolve()
    if run_dir is not None and (run_dir.resolve().is_relative_to(root)
                                or out.resolve().is_relative_to(root)):
        raise InputError(f"the run folder {run_dir} is inside the corpus folder {source}; its "
                         f"files would be read as corpus text — pass {spell_name('--run')} or "
                         f"{spell_name('--runs-dir')} outside it")
    if out.resolve().is_relative_to(root):
        raise InputError(f"{spell_name('--out', python='out_dir')} {out} is inside the corpus "
                         f"folder {source}; the output would be read as corpus text — pass a "
                         "folder outside it")
