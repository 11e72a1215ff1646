"""The run's TensorBoard event files: the writer, and the rewrites that cut them back.

Everything is written into the run folder itself (no per-run sub-folders), so
``tensorboard --logdir runs`` shows one run per training run, hparams included. On resume from
step ``S`` nothing logged after ``S`` survives: the event files are rewritten without those
events, and the new event file carries ``purge_step = S + 1`` besides.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedlab.errors import InputError, python_caller, resume_how, spell
from embedlab.fsutil import disk_fix
from embedlab.track.jsonl import FINAL_PREFIX

if TYPE_CHECKING:
    from tensorboard.compat.proto.summary_pb2 import Summary

REWRITE_PREFIX = ".events-rewrite-"  # scratch file of truncate_event_files
HPARAMS_PREFIX = "_hparams_/"  # the hparams plugin's summaries: a run's start and end
# written at the end of each run by embedlab before 2026-11-24; see drop_experiment_summaries
EXPERIMENT_TAG = "_hparams_/experiment"


def event_files(run_dir: Path) -> list[Path]:
    """The run's TensorBoard event files (not the scratch files of a rewrite)."""
    return sorted(p for p in run_dir.glob("events.out.tfevents.*") if not p.name.endswith(".tmp"))


def remove_stale_rewrites(run_dir: Path) -> None:
    """Scratch files of an event-file rewrite that was killed; the run lock is held."""
    # events.out.tfevents.*.tmp: the name older versions used (TensorBoard read it as events)
    for path in [*run_dir.glob(f"{REWRITE_PREFIX}*"), *run_dir.glob("events.out.tfevents.*.tmp")]:
        path.unlink(missing_ok=True)


def truncate_event_files(run_dir: Path, resume_step: int) -> None:
    """Drop every event after ``resume_step`` from the run's event files (atomic rewrite), and
    the final metrics and hparams record of ``resume_step`` (see
    :func:`embedlab.track.jsonl.truncate_metrics`).

    ``purge_step`` alone is not enough: the TensorBoard server (2.21, its fast data loader and
    ``--load_fast=false`` alike) keeps showing histograms, images and text of steps that a
    resume from an *older* checkpoint (``--from``, or falling back past a damaged one) abandoned.
    Rewriting the files the way metrics.jsonl is rewritten removes them at the source. Left in
    place, the hparams record of a finished run given more --epochs would be a second one in
    the same file, and TensorBoard shows the first: the old epoch count.
    """
    remove_stale_rewrites(run_dir)
    paths = event_files(run_dir)
    if not paths:
        return  # nothing to read: spare the tensorboard imports (a run without TensorBoard)

    def keep(event: Any) -> bool:
        if not event.HasField("summary"):
            return True
        if _is_experiment(event):
            return False  # an older embedlab's: it hides the other runs' metrics
        return event.step < resume_step or (event.step == resume_step and not _ends_run(event))

    for path in paths:
        _rewrite_events(path, keep)


def drop_experiment_summaries(run_dir: Path) -> bool:
    """Remove the ``_hparams_/experiment`` summary an embedlab before 2026-11-24 wrote at the end
    of each run; True if one was removed. The caller holds the run's lock.

    TensorBoard builds its HParams table from the first such summary it finds in the logdir,
    so one old run hides the metrics and differing hyperparameters of all the others.
    """
    changed = False
    for path in event_files(run_dir):
        with path.open("rb") as f:  # cheap test first: most files have none
            if EXPERIMENT_TAG.encode() not in f.read():
                continue
        changed |= _rewrite_events(
            path, lambda e: not (e.HasField("summary") and _is_experiment(e)))
    return changed


def _ends_run(event: Any) -> bool:
    """A final metric or an hparams summary: written once, at the end of training."""
    return any(v.tag.startswith((FINAL_PREFIX, HPARAMS_PREFIX)) for v in event.summary.value)


def _is_experiment(event: Any) -> bool:
    return any(v.tag == EXPERIMENT_TAG for v in event.summary.value)


def _rewrite_events(path: Path, keep: Callable[[Any], bool]) -> bool:
    """Rewrite one event file with the events ``keep`` accepts (atomic); False if all are."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    records = list(_records(path))
    kept = [raw for raw in records if keep(event_pb2.Event.FromString(raw))]
    if len(kept) == len(records):
        return False
    # not named events.out.tfevents.*: TensorBoard would read a half-written one as events
    tmp = path.with_name(f"{REWRITE_PREFIX}{path.name.removeprefix('events.out.tfevents.')}")
    with open(tmp, "wb") as f:
        writer = RecordWriter(f)
        for raw in kept:
            writer.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return True


def _records(path: Path) -> Iterator[bytes]:
    """The records of one event file (TFRecord framing: length, its masked CRC-32C, data, its
    masked CRC-32C), up to the first one cut short or damaged, as TensorBoard's loader reads
    them. Read through Python's open(): TensorBoard's loader encodes its path as UTF-8, which
    a folder name that is not (or, in a C locale, any non-ASCII name) cannot be."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    with open(path, "rb") as f:
        while len(head := f.read(12)) == 12:
            (length,), (crc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
            if masked_crc32c(head[:8]) != crc:
                return
            data, tail = f.read(length), f.read(4)
            if len(data) < length or len(tail) < 4 or \
                    masked_crc32c(data) != struct.unpack("<I", tail)[0]:
                return  # a writer killed mid-record: the events before it are kept
            yield data


def check_writable_name(run_dir: Path) -> None:
    """Refuse a run folder whose name TensorBoard's writer cannot encode (not valid UTF-8)."""
    try:
        str(run_dir).encode("utf-8")
    except UnicodeEncodeError:  # the writer encodes its path as UTF-8
        off = spell("--tensorboard", False) if python_caller() else "--no-tensorboard"
        raise InputError(f"the run folder {os.fsdecode(os.fsencode(run_dir))!r} is not valid "
                         f"UTF-8, which TensorBoard's writer needs; rename it, or pass {off}"
                         ) from None


class EventWriter:
    """The run's own event file, ``RUN/events.out.tfevents.*``, written by tensorboard's
    ``EventFileWriter`` the way torch's ``SummaryWriter`` wrote it: the same file name, a queue
    of 10 events and a background flush every 120 s (else only at :meth:`flush`)."""

    def __init__(self, run_dir: Path, purge_step: int | None) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        _quiet_writer_thread()
        try:
            self._file = EventFileWriter(str(run_dir), max_queue_size=10, flush_secs=120)
        except UnicodeEncodeError:  # the writer encodes its path as UTF-8
            raise InputError(f"the run folder {os.fsdecode(os.fsencode(run_dir))!r} is not "
                             "valid UTF-8, which TensorBoard's writer needs; rename it, or "
                             "pass --no-tensorboard") from None
        self._path = getattr(self._file, "_file_name", str(run_dir))  # for messages
        if purge_step is not None:
            self._purge_from(purge_step)
        else:
            self._session_start()

    def _session_start(self) -> None:
        # A new run's session START. The server's reader (--load_fast=false) takes the first
        # START it sees in a run for the session's start and the later ones for restarts that
        # purge what they abandon; without this one, a reader open during the first resume
        # would keep the abandoned steps beside the resumed ones (a kill -9, --from).
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog

        self._add(Event(step=0, session_log=SessionLog(status=SessionLog.START)))

    def _purge_from(self, step: int) -> None:
        # SummaryWriter(purge_step=S)'s two events: TensorBoard's event accumulator, reading a
        # version-2 file, drops everything it read before with step >= S at the SessionLog START.
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog

        self._add(Event(step=step, file_version="brain.Event:2"))
        self._add(Event(step=step, session_log=SessionLog(status=SessionLog.START)))

    def add_summary(self, step: int, summary: Summary) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self._add(Event(step=step, summary=summary))

    def _add(self, event: Any) -> None:
        event.wall_time = time.time()
        with self._failures():
            self._file.add_event(event)

    def flush(self) -> None:
        with self._failures():
            self._file.flush()

    def close(self) -> None:
        with self._failures():
            self._file.close()

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """A write that failed (the writer's thread hands its error to the next call): one
        line naming the file and the fix."""
        try:
            yield
        except OSError as exc:
            off = "tensorboard=False" if python_caller() else "--no-tensorboard"
            fix = disk_fix(exc) or f"check {os.path.dirname(self._path) or '.'}"
            raise InputError(f"could not write TensorBoard events to {self._path} "
                             f"({exc.strerror or exc}); {fix} (or pass {off}), "
                             f"then {resume_how()}: the run resumes from its last "
                             "checkpoint") from None


def _quiet_writer_thread() -> None:
    """Let an OSError of tensorboard's writer thread pass without its traceback: the writer
    raises it again in the main thread at the next event or flush, where it becomes the run's
    one-line error (:meth:`EventWriter._failures`). Other threads' errors go to the hook that
    was in place."""
    before = threading.excepthook
    if getattr(before, "quiets_writer_thread", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        if not writer_thread_failed(args):
            before(args)

    hook.quiets_writer_thread = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def writer_thread_failed(args: threading.ExceptHookArgs) -> bool:
    """Whether ``args`` is an OSError of tensorboard's event writer thread."""
    return (type(args.thread).__name__ == "_AsyncWriterThread" and args.exc_type is not None
            and issubclass(args.exc_type, OSError))
