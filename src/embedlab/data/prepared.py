"""The prepared corpus: token ids on disk, memory-mapped, plus vocabulary and metadata.

Layout of a prepared folder (format version 1)::

    ids.u32        raw little-endian uint32 token ids, all sentences concatenated
    sentences.i64  raw little-endian int64 exclusive end offsets into ids (strictly increasing,
                   last == len(ids)); sentences left empty by OOV removal are omitted
    vocab.tsv      word<TAB>count, id = line number (see embedlab.data.vocab)
    meta.json      format, version, source files (size, mtime), options, token counts

The folder is built in a temporary sibling and renamed into place, so it is either complete or
absent, and an existing prepared folder is replaced only after the new one is complete.
Nothing here unpickles: ids are read with ``np.memmap`` and metadata with ``json``.
"""

from __future__ import annotations

import array
import contextlib
import errno
import glob
import json
import math
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from types import FrameType
from typing import IO, Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from embedlab import __version__
from embedlab.config import MAX_INT, DataConfig
from embedlab.data.corpus import (
    PREPARED_FORMAT,
    SPECIAL_CORPORA,
    ReadStats,
    iter_blocks,
    list_files,
    says_prepared,
)
from embedlab.data.vocab import Vocab, WordCounter, build
from embedlab.errors import InputError
from embedlab.fsutil import fsync_dir, missing_folders, remove_empty_folders

FORMAT = PREPARED_FORMAT
FORMAT_VERSION = 1
IDS_FILE, ENDS_FILE, VOCAB_FILE, META_FILE = "ids.u32", "sentences.i64", "vocab.tsv", "meta.json"
_FLUSH_TOKENS = 1 << 18  # encode this many tokens per numpy call
_SCAN_CHUNK = 1 << 20  # first-seen ids counted / mapped per numpy call (bounds memory)


@dataclass(frozen=True, eq=False)
class PreparedCorpus:
    """A prepared folder, opened read-only. ``ids`` is a read-only memmap (uint32)."""

    root: Path
    ids: npt.NDArray[np.uint32]
    sentence_ends: npt.NDArray[np.int64]
    vocab: Vocab
    meta: dict[str, Any]
    _longest: int = 0  # tokens in the longest sentence, found while checking the ends

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> PreparedCorpus:
        """Open and check a prepared folder; :class:`InputError` if it is not a valid one."""
        root = Path(path)
        meta = _read_meta(root)
        vocab = Vocab.load_tsv(root / VOCAB_FILE, unk=meta.get("unk"))
        ids = _map(root / IDS_FILE, np.dtype("<u4"))
        ends = _map(root / ENDS_FILE, np.dtype("<i8"))
        problem = _check_consistency(meta, ids, ends, vocab)
        if problem:
            raise _invalid(root, problem)
        return cls(root, ids, ends, vocab, meta, _check_contents(root, len(vocab)))

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
    return meta.is_file() and says_prepared(meta)


#: the options that decide the vocabulary, recorded in meta.json
VOCAB_OPTIONS = ("lowercase", "min_count", "max_vocab", "unk")


def vocab_options(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The options the prepared folder ``path`` was built with: :data:`VOCAB_OPTIONS` and
    ``max_distinct`` (the pruning limit, which decides the counts when pruning happened)."""
    meta = _read_meta(Path(path))
    return {key: meta[key] for key in (*VOCAB_OPTIONS, "max_distinct") if key in meta}


def _invalid(root: Path, problem: str) -> InputError:
    return InputError(f"{root} is not a valid prepared corpus ({problem}); re-create it with "
                      f"'embedlab prepare CORPUS --out {root} --force'")


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
    line before anything uses it (train used to make a run folder first, then fail with a
    ValueError on ``raw_tokens``). Fields the code relies on are required; the descriptive ones
    may be missing (an older embedlab did not write them all).
    """
    for key in ("raw_tokens", "tokens", "sentences", "vocab_size"):
        if key not in meta:
            return f"{key} is missing"
        if not _is_count(meta[key]):
            return f"{key} {_short(meta[key])} is not a whole number >= 0"
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
            return f"{key} {_short(meta[key])} is {what}"
    return None


def _are_source_files(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(f, dict) and isinstance(f.get("path"), str) and _is_count(f.get("size"))
        and type(f.get("mtime")) in (int, float) and math.isfinite(f["mtime"]) for f in value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _map(path: Path, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
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
        return f"{IDS_FILE} holds {len(ids):,} ids, {META_FILE} says {meta.get('tokens')!r}"
    if meta.get("vocab_size") != len(vocab):
        return f"{VOCAB_FILE} has {len(vocab):,} words, {META_FILE} says {meta.get('vocab_size')!r}"
    if len(ends) != meta.get("sentences"):
        return f"{ENDS_FILE} has {len(ends):,} entries, {META_FILE} says {meta.get('sentences')!r}"
    if len(ids) and (not len(ends) or int(ends[-1]) != len(ids)):
        return f"{ENDS_FILE} does not end at {len(ids):,}"
    return None


def _check_contents(root: Path, vocab_size: int) -> int:
    """Every id names a word and the sentence ends increase: the trainer indexes the embedding
    matrices with these numbers, so a damaged file must stop here (:class:`InputError`), not
    crash the kernel. Returns the longest sentence's length, found on the way.

    Read with plain reads in 1M-value chunks rather than through the memmap, whose pages would
    stay resident (4 bytes per token) until training hands them back.
    """
    for n, chunk in enumerate(_file_chunks(root / IDS_FILE, np.dtype("<u4"))):
        if int(chunk.max()) >= vocab_size:
            i = int(np.argmax(chunk >= vocab_size))
            raise _invalid(root, f"{IDS_FILE} holds id {int(chunk[i]):,} at position "
                                 f"{n * _SCAN_CHUNK + i:,}, but the vocabulary has "
                                 f"{vocab_size:,} words")
    longest = previous = 0
    for n, chunk in enumerate(_file_chunks(root / ENDS_FILE, np.dtype("<i8"))):
        steps = np.diff(chunk, prepend=previous)
        if int(steps.min()) <= 0:
            at = n * _SCAN_CHUNK + int(np.argmax(steps <= 0))
            raise _invalid(root, f"{ENDS_FILE} does not increase strictly at entry {at:,}")
        longest = max(longest, int(steps.max()))
        previous = int(chunk[-1])
    return longest


def _file_chunks(path: Path, dtype: np.dtype[Any]) -> Iterator[npt.NDArray[Any]]:
    with open(path, "rb") as f:
        while len(chunk := np.fromfile(f, dtype=dtype, count=_SCAN_CHUNK)):
            yield chunk


# ---- prepare ----------------------------------------------------------------------------------
def prepare(corpus: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
            lowercase: bool = False, min_count: int = 5, max_vocab: int | None = None,
            unk: str | None = None, max_distinct: int = 10_000_000, progress: bool = True,
            force: bool = False, run_dir: Path | None = None) -> PreparedCorpus:
    """Tokenise ``corpus`` (a path, or 'text8' / 'demo') into the prepared folder ``out_dir``.

    Out-of-vocabulary tokens are dropped (word2vec) unless ``unk`` is set, then they map to id 0.
    ``out_dir`` must be absent, an empty folder, or (with ``force``) an existing prepared corpus.
    Warnings (invalid UTF-8, pruning) go to stderr, one line each. ``run_dir``: the run folder
    'train' prepares for (its errors then name the run folder, not --out). See
    :func:`prepare_into`.
    """
    prepare_into(corpus, out_dir, lowercase=lowercase, min_count=min_count, max_vocab=max_vocab,
                 unk=unk, max_distinct=max_distinct, progress=progress, force=force,
                 run_dir=run_dir)
    return PreparedCorpus.open(out_dir)


def prepare_into(
    corpus: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    lowercase: bool = False,
    min_count: int = 5,
    max_vocab: int | None = None,
    unk: str | None = None,
    max_distinct: int = 10_000_000,
    progress: bool = True,
    force: bool = False,
    run_dir: Path | None = None,
) -> None:
    """:func:`prepare` without opening the result (the child of :mod:`embedlab.data.ahead` hands
    the folder over without reading it).

    One pass over the corpus (:class:`_Scan`) unless it has more than ``max_distinct`` distinct
    words; then two: count with word2vec-style pruning (bounded memory), then encode.
    """
    label = os.fspath(corpus)
    DataConfig(corpus=label, lowercase=lowercase, min_count=min_count, max_vocab=max_vocab,
               unk=unk, max_distinct=max_distinct)  # validates the options, one message each
    out = Path(out_dir)
    _check_out(out, force)
    with _sigterm_cleans_up():
        _prepare_into(label, out, lowercase, min_count, max_vocab, unk, max_distinct, progress,
                      run_dir)


def _prepare_into(label: str, out: Path, lowercase: bool, min_count: int, max_vocab: int | None,
                  unk: str | None, max_distinct: int, progress: bool,
                  run_dir: Path | None) -> None:
    made = missing_folders(out.parent)  # a failed run removes them again (if still empty)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _sweep_orphans(out)
        # mkdir (not mkdtemp) so the folder gets the user's umask, not mode 0700; the pid in
        # the name lets a later prepare remove it if this process is killed (_sweep_orphans)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(6)}"
        tmp.mkdir()
    except OSError as exc:
        remove_empty_folders(made)
        raise InputError(f"cannot create --out {out} ({exc.strerror or exc}); pass a folder "
                         "in a writable location") from None
    try:
        source = _resolve_source(label, tmp / ".source", progress)
        check_not_inside(out, source, run_dir)
        files = list_files(source)
        # one pass when every distinct word fits in --max-distinct; else word2vec-style
        # pruning while counting, then a second pass to encode
        scan = _scan(source, lowercase, max_distinct, tmp, progress)
        counter, stats = (scan.counter(max_distinct), scan.stats) if scan is not None else \
            _count(source, lowercase, max_distinct, progress)
        if stats.tokens == 0:
            raise InputError(f"corpus {label} holds no tokens; pass a corpus with "
                             "whitespace-separated words")
        if counter.prune.times and not any(c >= min_count for w, c in counter.counts.items()
                                           if w != unk):
            raise InputError(_pruned_away(counter, min_count))
        vocab = build(counter.counts, min_count=min_count, max_vocab=max_vocab, unk=unk,
                      total=counter.total)
        encoded = scan.encode(vocab, tmp) if scan is not None else \
            _encode(source, vocab, lowercase, tmp, progress, stats)
        vocab = encoded.vocab
        vocab.save_tsv(tmp / VOCAB_FILE)
        meta = _meta(label, source, files, lowercase, min_count, max_vocab, unk, max_distinct,
                     stats, counter, encoded)
        _write_json(tmp / META_FILE, meta)
        shutil.rmtree(tmp / ".source", ignore_errors=True)
        _fsync_files(tmp)
        _commit(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty_folders(made)
        if isinstance(exc, OSError) and (exc.errno is None or exc.errno in _WRITE_PROBLEMS):
            raise _write_failed(out, exc) from None
        raise
    _warn_about(label, stats, counter)


#: errors of a write into the temporary folder that the user fixes by freeing space or by
#: choosing another --out (corpus files that cannot be read are reported where they are read)
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_WRITE_PROBLEMS = _DISK_FULL | {errno.EROFS, errno.EACCES, errno.EPERM}


def _write_failed(out: Path, exc: OSError) -> InputError:
    # numpy and some libraries report a short write with no errno: nearly always a full disk
    why = exc.strerror or f"{exc}: the disk is probably full"
    if exc.errno is None or exc.errno in _DISK_FULL:
        fix = "free disk space or pass --out on another disk"
    else:
        fix = "pass --out in a writable folder"
    kept = "the prepared corpus already there is unchanged" if _has_files(out) else \
        "nothing was left behind"
    return InputError(f"cannot write the prepared corpus {out} ({why}); {fix} ({kept})")


def _has_files(folder: Path) -> bool:
    try:
        return folder.is_dir() and any(folder.iterdir())
    except OSError:
        return False


@contextlib.contextmanager
def _sigterm_cleans_up() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit(143)`` during the block, so that the clean-up that runs
    for Ctrl-C (removing the temporary folder, putting an old folder back) runs for ``kill``
    too: by default SIGTERM ended the process at once, leaving hidden folders as big as the
    corpus. Only the default action is replaced (a caller's handler, e.g. the trainer's, or an
    ignored SIGTERM stays), and only in the main thread, where handlers run.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _sweep_orphans(out: Path) -> None:
    """Remove ``.OUT.tmp-<pid>-*`` and ``.OUT.old-<pid>-*`` left beside ``out`` by a prepare
    that was killed (SIGKILL, or a power cut) — each as big as a prepared corpus. Only those of
    processes that no longer run: a live one may be a prepare working right now.
    """
    from embedlab.run.lock import pid_alive  # stdlib only; no torch

    for kind in ("tmp", "old"):
        for path in out.parent.glob(f".{glob.escape(out.name)}.{kind}-*"):
            pid = path.name[len(out.name) + len(kind) + 3:].split("-", 1)
            if len(pid) != 2 or not pid[0].isdigit() or pid_alive(int(pid[0])):
                continue
            if path.is_symlink():  # an old --out that was a link: the link only
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)


def _pruned_away(counter: WordCounter, min_count: int) -> str:
    """The error for a vocabulary emptied by pruning: the counts left are too low to show
    (build's "the most frequent occurs N times; lower --min-count" would blame --min-count)."""
    p, limit = counter.prune, counter.max_distinct
    bigger = DataConfig().max_distinct if limit < DataConfig().max_distinct else limit * 10
    return (f"no word occurs at least --min-count {min_count} times in the counts left after "
            f"pruning to --max-distinct {limit:,} (pruning dropped {p.dropped_tokens:,} of "
            f"{counter.total:,} occurrences, so the counts are lower bounds); raise "
            f"--max-distinct, e.g. --max-distinct {bigger}")


def _check_out(out: Path, force: bool) -> None:
    if out.is_file() or (out.exists() and not out.is_dir()):
        raise InputError(f"--out {out} is a file; pass a new folder name")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not is_prepared(out) and _damaged_prepared(out):
        if force:
            return
        raise InputError(f"--out {out} holds a damaged prepared corpus; pass --force to "
                         "replace it, or choose another folder")
    if not is_prepared(out):
        raise InputError(f"--out {out} is a folder that is not empty and holds no prepared "
                         "corpus; pass a new or empty folder")
    if not force:
        raise InputError(f"--out {out} already holds a prepared corpus; pass --force to "
                         "replace it, or choose another folder")


def _damaged_prepared(out: Path) -> bool:
    """A folder holding nothing but a prepared corpus's files, with a meta.json that does not
    say so (damaged): the error for it says to replace it with --force, so --force may."""
    names = {p.name for p in out.iterdir()}
    return META_FILE in names and names <= {IDS_FILE, ENDS_FILE, VOCAB_FILE, META_FILE}


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
                         "files would be read as corpus text — pass --run or --runs-dir "
                         "outside it")
    if out.resolve().is_relative_to(root):
        raise InputError(f"--out {out} is inside the corpus folder {source}; the output would "
                         "be read as corpus text — pass a folder outside it")


def _resolve_source(label: str, scratch: Path, progress: bool) -> Path:
    if label == "text8":
        from embedlab.data.download import fetch_text8

        return fetch_text8(progress=progress)
    if label == "demo":
        from embedlab.data.demo import write_demo_corpus  # another module; imported lazily

        scratch.mkdir()
        return Path(write_demo_corpus(scratch / "demo.txt"))
    return Path(label)


@contextlib.contextmanager
def _bar(source: Path, desc: str, progress: bool) -> Iterator[tqdm[Any]]:
    total = sum(p.stat().st_size for p in list_files(source))
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc,
              disable=None if progress else True, leave=False, file=sys.stderr) as bar:
        yield bar


class _Scan:
    """One pass over the corpus: each token's *first-seen* id (on disk), sentence ends, words.

    Counting with ``Counter`` and then encoding in a second read costs two tokenisations and two
    hash lookups per token in Python. Here each token is looked up once, by a C loop over the
    block, in a dict that hands a new word the next free id (:class:`_FirstSeen`); the ids go to a
    uint32 file, and counting is a ``bincount`` over that file; :meth:`encode` maps first-seen
    ids to vocabulary ids in numpy. The result is byte for byte what count-then-encode writes
    (tested); only the pruning case (more distinct words than ``--max-distinct``) still needs
    the two-pass path, because pruning changes the counts while reading.
    """

    def __init__(self, words: list[str], ids_path: Path, ends_path: Path,
                 stats: ReadStats) -> None:
        self.words, self.ids_path, self.ends_path, self.stats = words, ids_path, ends_path, stats
        self.counts = np.zeros(len(words), dtype=np.int64)
        for chunk in _file_chunks(self.ids_path, np.dtype("<u4")):
            self.counts += np.bincount(chunk, minlength=len(words))

    def counter(self, max_distinct: int) -> WordCounter:
        counter = WordCounter(max_distinct=max_distinct)
        counter.counts.update(dict(zip(self.words, self.counts.tolist(), strict=True)))
        counter.total = self.stats.tokens
        return counter

    def encode(self, vocab: Vocab, tmp: Path) -> _Encoded:
        # first-seen id -> vocabulary id, or -1 (dropped) / 0 (UNK) for out-of-vocabulary words
        missing = 0 if vocab.unk is not None else -1
        get = vocab.index.get
        to_vocab = np.fromiter(map(get, self.words, repeat(missing)), dtype=np.int64,
                               count=len(self.words))
        raw_ends = _map(self.ends_path, np.dtype("<i8"))
        with open(tmp / IDS_FILE, "wb") as ids, open(tmp / ENDS_FILE, "wb") as ends:
            writer = _IdWriter(ids, ends)
            start = 0
            for chunk in _file_chunks(self.ids_path, np.dtype("<u4")):
                stop = start + len(chunk)
                lo, hi = np.searchsorted(raw_ends, [start, stop], side="right")
                writer.write(to_vocab[chunk], np.asarray(raw_ends[lo:hi]) - start)
                start = stop
        self.ids_path.unlink()
        self.ends_path.unlink()
        return writer.result(vocab)


class _FirstSeen(dict[str, int]):
    """word -> id in order of first appearance; looking up a new word gives it the next id.

    Lookups of known words stay in dict's C code; only the ~1 in 30 tokens that is new calls
    ``__missing__``. (Collecting each block's new words with a set difference first cost 0.3 s
    more on gcide8's 4.8M tokens.)
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


def _scan(source: Path, lowercase: bool, max_distinct: int, tmp: Path,
          progress: bool) -> _Scan | None:
    """Read the corpus once (see :class:`_Scan`); None when it has > ``max_distinct`` words."""
    index = _FirstSeen(max_distinct)
    stats = ReadStats()
    ids_path, ends_path = tmp / ".first-ids.u32", tmp / ".raw-ends.i64"
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
            ids_file.flush()  # _Scan reads both files back at once
            ends_file.flush()
            # dicts keep insertion order, and ids were handed out in that order
            return _Scan(list(index), ids_path, ends_path, stats)
    ids_path.unlink()
    ends_path.unlink()
    return None


def _write_array(f: IO[bytes], arr: npt.NDArray[Any]) -> None:
    """Append ``arr``'s bytes to ``f``. Not ``ndarray.tofile``: on a full disk that raises
    ``OSError("N requested and 0 written")`` with no errno, so the cause could not be told;
    a file's own write raises ENOSPC (and is as fast: one write of the whole buffer)."""
    f.write(np.ascontiguousarray(arr).data)


def _count(source: Path, lowercase: bool, max_distinct: int,
           progress: bool) -> tuple[WordCounter, ReadStats]:
    counter, stats = WordCounter(max_distinct=max_distinct), ReadStats()
    with _bar(source, "counting", progress) as bar:
        for tokens, _ in iter_blocks(source, lowercase=lowercase, stats=stats,
                                     progress=bar.update):
            counter.update(tokens)
    return counter, stats


@dataclass(frozen=True)
class _Encoded:
    vocab: Vocab  # with UNK's count made exact
    tokens: int
    sentences: int


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

    def result(self, vocab: Vocab) -> _Encoded:
        """What was written, with UNK's count made exact (the tokens that got id 0)."""
        if vocab.unk is not None:
            counts = vocab.counts.copy()
            counts[0] = self.zeros
            vocab = Vocab(vocab.words, counts, vocab.unk)
        return _Encoded(vocab, self.kept, self.sentences)

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


def _encode(source: Path, vocab: Vocab, lowercase: bool, tmp: Path, progress: bool,
            counted: ReadStats) -> _Encoded:
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


def _meta(label: str, source: Path, files: list[Path], lowercase: bool, min_count: int,
          max_vocab: int | None, unk: str | None, max_distinct: int, stats: ReadStats,
          counter: WordCounter, encoded: _Encoded) -> dict[str, Any]:
    demo = label == "demo"
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "embedlab_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source": label if label in SPECIAL_CORPORA else str(source.resolve()),
        # the demo corpus is generated in a scratch folder that is deleted afterwards
        "source_files": [] if demo else [
            {"path": str(p.resolve()), "size": p.stat().st_size, "mtime": p.stat().st_mtime}
            for p in files
        ],
        "lowercase": lowercase,
        "min_count": min_count,
        "max_vocab": max_vocab,
        "unk": unk,
        "max_distinct": max_distinct,
        "raw_tokens": stats.tokens,
        "tokens": encoded.tokens,
        "sentences": encoded.sentences,
        "vocab_size": len(encoded.vocab),
        "invalid_utf8": stats.invalid_utf8,
        "pruned": counter.prune.to_dict() if counter.prune.times else None,
    }


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    # A file name that is not valid UTF-8 reaches us with lone surrogates (os.fsdecode), which
    # UTF-8 cannot encode; they become \udcXX escapes, which json.loads turns back into the
    # same str (so os.fsencode gives the original bytes). Other text stays readable as is.
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}",
                          json.dumps(obj, indent=2, ensure_ascii=False))
    path.write_text(text + "\n", encoding="utf-8")


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _fsync_files(folder: Path) -> None:
    for p in folder.iterdir():
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def _commit(tmp: Path, out: Path) -> None:
    """Move the finished folder into place; an old prepared folder goes only after that."""
    old: Path | None = None
    if out.exists() and any(out.iterdir()):
        old = out.with_name(f".{out.name}.old-{os.getpid()}-{time.time_ns()}")
        out.rename(old)
    try:
        os.replace(tmp, out)  # an empty `out` folder is replaced atomically
    except BaseException:
        if old is not None:
            old.rename(out)
        raise
    fsync_dir(out.parent)
    if old is not None and old.is_symlink():  # --out was a link: the link goes, not its target
        old.unlink()
    elif old is not None:
        try:
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:  # SIGTERM or Ctrl-C half-way: finish, then stop
            shutil.rmtree(old, ignore_errors=True)
            raise


def _warn(message: str) -> None:
    print(f"embedlab: warning: {message}", file=sys.stderr)


def _warn_about(label: str, stats: ReadStats, counter: WordCounter) -> None:
    if stats.invalid_utf8:
        _warn(f"replaced {stats.invalid_utf8:,} invalid UTF-8 sequences in {label} with U+FFFD; "
              "re-encode the corpus as UTF-8 if that is wrong")
    if counter.prune.times:
        p = counter.prune
        _warn(f"more than --max-distinct {counter.max_distinct:,} distinct words: pruned rare "
              f"words {p.times} time(s) while counting (up to count {p.threshold}; "
              f"{p.dropped_tokens:,} occurrences dropped), so counts are approximate; raise "
              "--max-distinct for exact counts")
