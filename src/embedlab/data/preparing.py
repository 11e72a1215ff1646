"""Preparing a corpus: tokenise it once into a prepared folder (:mod:`embedlab.data.prepared`).

The folder is built in a temporary sibling and renamed into place, so it is either complete or
absent, and an existing prepared folder is replaced only after the new one is complete. The
reading passes are in :mod:`embedlab.data.token_ids`.
"""

from __future__ import annotations

import contextlib
import errno
import numbers
import os
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from embedlab import __version__
from embedlab.config import DataConfig
from embedlab.data import native_tokenise, sentences, token_ids
from embedlab.data.corpus import (
    SPECIAL_CORPORA,
    ReadStats,
    corpus_label,
    holds_prepared_files_only,
    list_files,
    other_entries,
    unreadable_file,
)
from embedlab.data.native_words import Encoded
from embedlab.data.prepared import (
    FORMAT,
    FORMAT_VERSION,
    META_FILE,
    PreparedCorpus,
    check_not_inside,
    is_prepared,
    write_meta,
)
from embedlab.data.vocab import PruneInfo
from embedlab.errors import (
    InputError,
    checked_bool,
    note,
    python_entry,
    rerun,
    spell,
    spell_name,
    warn,
)
from embedlab.fsutil import (
    DISK_ERRORS,
    checked_path,
    commit_folder,
    elsewhere_fix,
    hidden_prefix,
    missing_folders,
    remove_dead_leftovers,
    remove_empty_folders,
)
from embedlab.training.memory import release_free_memory


@python_entry
def prepare(corpus: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
            lowercase: bool = False, min_count: int = 5, max_vocab: int | None = None,
            unk: str | None = None, max_distinct: int = 10_000_000, progress: bool = True,
            force: bool = False, run_dir: Path | None = None,
            workers: int | None = None) -> PreparedCorpus:
    """Tokenise ``corpus`` (a path, 'text8' / 'demo', or the label of sentences given in memory:
    :mod:`embedlab.data.sentences`) into the prepared folder ``out_dir``.

    Out-of-vocabulary tokens are dropped (word2vec) unless ``unk`` is set, then they map to id 0.
    ``out_dir`` must be absent, an empty folder, or (with ``force``) an existing prepared corpus.
    Warnings (invalid UTF-8, pruning) go to stderr, one line each. ``run_dir``: the run folder
    'train' prepares for (its errors then name the run folder, not ``out_dir``). ``workers``:
    threads that tokenise (default ``$EMBEDLAB_PREPARE_WORKERS``, else every core); the folder
    is the same for any number. See :func:`prepare_into`.
    """
    prepare_into(corpus, out_dir, lowercase=lowercase, min_count=min_count, max_vocab=max_vocab,
                 unk=unk, max_distinct=max_distinct, progress=progress, force=force,
                 run_dir=run_dir, workers=workers)
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
    workers: int | None = None,
) -> None:
    """:func:`prepare` without opening the result (the child of
    :mod:`embedlab.data.tokenise_child` hands the folder over without reading it).

    One pass over the corpus (:func:`embedlab.data.token_ids.count`) unless it has more than
    ``max_distinct`` distinct words; then two more: count with word2vec-style pruning (bounded
    memory), then encode.
    """
    force, progress = checked_bool("force", force), checked_bool("progress", progress)
    corpus = checked_path("corpus", corpus, "a text file or folder", ", 'demo' or 'text8'")
    out_dir = checked_path("out_dir", out_dir, "the folder to prepare into")
    if run_dir is not None:
        run_dir = Path(checked_path("run_dir", run_dir, "the run folder"))
    label = corpus_label(corpus)
    DataConfig(corpus=label, lowercase=lowercase, min_count=min_count, max_vocab=max_vocab,
               unk=unk, max_distinct=max_distinct)  # validates the options, one message each
    out = Path(out_dir)
    if out.is_symlink():
        # a link to a folder on another disk (made, or still to make): the corpus goes where it
        # points, as export --out and train --run write through theirs; committing at the link
        # would replace the link with a folder here
        out = Path(os.path.realpath(out))
    _check_out(out, force, run_dir)
    workers = native_tokenise.default_workers() if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral):
        raise InputError(f"workers must be a whole number >= 1, got {workers!r}; pass e.g. "
                         "workers=2, or leave it out for every core")
    workers = int(workers)
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}; pass e.g. workers=2, or leave "
                         "it out for every core")
    with _sigterm_cleans_up():
        _prepare_into(label, out, lowercase, min_count, max_vocab, unk, max_distinct, progress,
                      run_dir, workers, force)
    # the pass's tables and pieces are freed, but malloc keeps much of it for reuse: hand it
    # back, so that whatever this process does next (open the folder, train) starts lean
    release_free_memory()


def _prepare_into(label: str, out: Path, lowercase: bool, min_count: int, max_vocab: int | None,
                  unk: str | None, max_distinct: int, progress: bool,
                  run_dir: Path | None, workers: int, force: bool) -> None:
    made = missing_folders(out.parent)  # a failed run removes them again (if still empty)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_leftovers(out, ("tmp", "old"))
        # mkdir (not mkdtemp) so the folder gets the user's umask, not mode 0700; the pid in
        # the name lets a later prepare remove it if this process is killed (remove_dead_leftovers)
        tmp = out.parent / f"{hidden_prefix(out.name, 'tmp')}{secrets.token_hex(6)}"
        tmp.mkdir()
    except OSError as exc:
        remove_empty_folders(made)
        above = next((p for p in out.parents if p.is_file()), None)
        if above is not None:  # --out corpus.txt/x
            raise InputError(f"cannot create {_out_name()} {out}: {above} is a file, not a "
                             "folder; pass a folder path") from None
        raise InputError(f"cannot create {_out_name()} {out} ({exc.strerror or exc}); pass a "
                         "folder in a writable location") from None
    try:
        source = _resolve_source(label, tmp / ".source", progress)
        check_not_inside(out, source, run_dir)
        files = list_files(source)
        stamps = _stamps(files)  # before reading: what meta.json records is what was read
        counts = token_ids.count(source, lowercase, max_distinct, tmp, progress, workers)
        try:
            stats, prune = counts.stats, counts.prune
            if stats.tokens == 0:
                raise InputError(f"corpus {label} holds no tokens; pass a corpus with "
                                 "whitespace-separated words")
            if prune.times and not counts.kept_any(min_count, unk):
                raise InputError(_pruned_away(prune, max_distinct, stats.tokens, min_count))
            encoded = counts.finish(min_count, max_vocab, unk, tmp)
        finally:
            counts.close()
        _check_unchanged(files, stamps, run_dir)
        meta = _meta(label, source, files, stamps, lowercase, min_count, max_vocab, unk,
                     max_distinct, stats, prune, encoded)
        write_meta(tmp / META_FILE, meta)
        shutil.rmtree(tmp / ".source", ignore_errors=True)
        _fsync_files(tmp)
        # checked again: another prepare into the same --out may have finished meanwhile, and
        # without --force its corpus is not replaced
        _check_out(out, force, run_dir)
        commit_folder(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty_folders(made)
        if isinstance(exc, OSError) and (exc.errno is None or exc.errno in _WRITE_PROBLEMS):
            raise _write_failed(out, exc, run_dir) from None
        raise
    _warn_about(label, stats, prune, max_distinct)


#: errors of a write into the temporary folder that the user fixes by freeing space or by
#: choosing another --out (corpus files that cannot be read are reported where they are read)
_WRITE_PROBLEMS = DISK_ERRORS | {errno.EACCES, errno.EPERM}


def _write_failed(out: Path, exc: OSError, run_dir: Path | None = None) -> InputError:
    # numpy and some libraries report a short write with no errno: nearly always a full disk
    why = exc.strerror or f"{exc}: the disk is probably full"
    # train prepares into RUN/prepared: where it goes is --run's (or --runs-dir's) choice
    where = spell_name("--run") if run_dir is not None else _out_name()
    fix = elsewhere_fix(OSError(errno.ENOSPC, "") if exc.errno is None else exc, where) or \
        f"pass {where} in a writable folder"
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
    too: SIGTERM's default action ends the process at once, which would leave hidden folders as
    big as the corpus. Only the default action is replaced (a caller's handler, e.g. the
    trainer's, or an ignored SIGTERM stays), and only in the main thread, where handlers run.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up
        with contextlib.suppress(OSError):  # said as Ctrl-C's "interrupted" is
            print("embedlab: terminated (SIGTERM); the partial output is removed",
                  file=sys.stderr, flush=True)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _pruned_away(p: PruneInfo, limit: int, total: int, min_count: int) -> str:
    """The error for a vocabulary emptied by pruning: the counts left are too low to show
    (build's "the most frequent occurs N times; lower --min-count" would blame --min-count)."""
    bigger = DataConfig().max_distinct if limit < DataConfig().max_distinct else limit * 10
    return (f"no word occurs at least {spell('--min-count', min_count)} times in the counts left "
            f"after pruning to {spell('--max-distinct', limit)} (pruning dropped "
            f"{p.dropped_tokens:,} of {total:,} occurrences, so the counts are lower bounds); "
            f"raise {spell_name('--max-distinct')}, e.g. {spell('--max-distinct', bigger)}")


def _out_name() -> str:
    """``prepare``'s destination as the caller names it: ``--out`` or ``out_dir``."""
    return spell_name("--out", python="out_dir")


def _check_out(out: Path, force: bool, run_dir: Path | None = None) -> None:
    if run_dir is not None and out.is_dir() and any(out.iterdir()) and not is_prepared(out):
        # train's own RUN/prepared, damaged (its meta.json lost, say): train has no --out
        raise InputError(f"the run's prepared corpus {out} is damaged (no valid meta.json); "
                         f"remove {out} to prepare the corpus again, or restore it from a "
                         "backup")
    if out.is_file() or (out.exists() and not out.is_dir()):
        raise InputError(f"{_out_name()} {out} is a file; pass a new folder name")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not is_prepared(out) and holds_prepared_files_only(out):
        if force:
            return
        raise InputError(f"{_out_name()} {out} holds a damaged prepared corpus; pass "
                         f"{spell('--force', True)} to replace it, or choose another folder")
    if not is_prepared(out):
        raise InputError(f"{_out_name()} {out} is a folder that is not empty and holds no "
                         "prepared corpus; pass a new or empty folder")
    if not force:
        raise InputError(f"{_out_name()} {out} already holds a prepared corpus; pass "
                         f"{spell('--force', True)} to replace it, or choose another folder")
    others = other_entries(out)
    if others:  # --force replaces the whole folder: never files the user put beside it
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3
                                         else "")
        raise InputError(f"{_out_name()} {out} holds a prepared corpus and other files "
                         f"({shown}), which {spell('--force', True)} would delete with it; move "
                         "them out of the folder, or choose another folder")





def _resolve_source(label: str, scratch: Path, progress: bool) -> Path:
    if sentences.is_label(label):
        return sentences.written_file(label)
    if label == "text8":
        from embedlab.data.download import fetch_text8

        return fetch_text8(progress=progress)
    if label == "demo":
        from embedlab.data.demo import write_demo_corpus  # another module; imported lazily

        if os.path.lexists("demo"):  # as for text8: the name means the built-in corpus
            note("'demo' names the built-in demo corpus, not demo in this folder; pass ./demo "
                 "to use that")
        scratch.mkdir()
        return Path(write_demo_corpus(scratch / "demo.txt"))
    return Path(label)


def _stamps(files: list[Path]) -> list[os.stat_result]:
    """Each file's size and modification time (its status), taken before it is read."""
    try:
        return [p.stat() for p in files]
    except OSError as exc:
        raise unreadable_file(exc.filename, exc) from None


def _check_unchanged(files: list[Path], stamps: list[os.stat_result],
                     run_dir: Path | None) -> None:
    """Refuse a corpus a file of which was written, replaced or removed while it was read: the
    ids would mix texts, and meta.json's record of the file (what a resume's note of a changed
    corpus compares) would describe neither. ``run_dir``: a train preparing its own copy, whose
    user re-runs the train, not a prepare."""
    again = rerun() if run_dir is not None else "run 'embedlab prepare' again"
    for path, before in zip(files, stamps, strict=True):
        try:
            now = path.stat()
        except OSError:
            raise InputError(f"{path} was removed while the corpus was being prepared; "
                             f"{again} once it is back") from None
        if (now.st_size, now.st_mtime_ns, now.st_ino) != \
                (before.st_size, before.st_mtime_ns, before.st_ino):
            raise InputError(f"{path} changed while the corpus was being prepared "
                             f"({before.st_size:,} bytes, then {now.st_size:,}); {again} once "
                             "nothing writes to it")


def _meta(label: str, source: Path, files: list[Path], stamps: list[os.stat_result],
          lowercase: bool, min_count: int, max_vocab: int | None, unk: str | None,
          max_distinct: int, stats: ReadStats, prune: PruneInfo, encoded: Encoded
          ) -> dict[str, Any]:
    demo, in_memory = label == "demo", sentences.is_label(label)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "embedlab_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source": label if label in SPECIAL_CORPORA or in_memory else str(source.resolve()),
        # the demo corpus is generated in a scratch folder that is deleted afterwards, and the
        # file of sentences given in memory (embedlab.data.sentences) too
        "source_files": [] if demo or in_memory else [
            {"path": str(p.resolve()), "size": st.st_size, "mtime": st.st_mtime}
            for p, st in zip(files, stamps, strict=True)
        ],
        "lowercase": lowercase,
        "min_count": min_count,
        "max_vocab": max_vocab,
        "unk": unk,
        "max_distinct": max_distinct,
        "raw_tokens": stats.tokens,
        "tokens": encoded.tokens,
        "sentences": encoded.sentences,
        "vocab_size": encoded.vocab_size,
        "invalid_utf8": stats.invalid_utf8,
        "pruned": prune.to_dict() if prune.times else None,
    }


def _fsync_files(folder: Path) -> None:
    for p in folder.iterdir():
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def _which_files(label: str, counts: dict[Path, int], shown: int = 3) -> str:
    """`` (in a.txt: 3, b.txt: 2 and 4 more files)`` for a folder: which files to re-encode."""
    if not counts or Path(label).is_file():  # one file: the label names it
        return ""
    worst = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    named = ", ".join(f"{_relative(path, label)}: {n:,}" for path, n in worst[:shown])
    more = f" and {len(worst) - shown:,} more file(s)" if len(worst) > shown else ""
    return f" (in {named}{more})"


def _relative(path: Path, label: str) -> str:
    try:
        return str(path.relative_to(label))
    except ValueError:
        return str(path)


def _warn_about(label: str, stats: ReadStats, p: PruneInfo, max_distinct: int) -> None:
    if stats.invalid_utf8:
        warn(f"replaced {stats.invalid_utf8:,} invalid UTF-8 sequences in {label}"
             f"{_which_files(label, stats.invalid_files)} with U+FFFD (words that differ only "
             "there became one word); re-encode the corpus as UTF-8 if that is wrong")
    if p.times:
        limit = spell("--max-distinct", max_distinct)
        warn(f"more than {max_distinct:,} distinct words ({limit}): "
             f"pruned rare words {p.times:,} time(s) while counting (up to count {p.threshold}; "
             f"{p.dropped_tokens:,} occurrences dropped), so counts are approximate and words "
             f"near {spell_name('--min-count')} may be missing from the vocabulary; raise "
             f"{spell_name('--max-distinct')} for exact counts")
