"""The columns of TensorBoard's HParams table for a folder of runs.

TensorBoard's HParams dashboard (2.21) shows the first five hyperparameters it lists as columns,
those marked as differing first (its bundled ``tf-hparams-query-pane``, ``_computeHParams``:
``Math.min(5, t.length)`` in ``webfiles.zip``/``index.js``). The list is the experiment summary's,
when a run of the logdir holds one (``plugins/hparams/backend_context.py``, lines 96-101), else
every key of every run's hparams record (lines 262-292). So only an experiment summary that lists
the differing hyperparameters alone makes them the default columns, and only a writer that sees
every run knows which differ: ``embedlab tensorboard`` (:class:`HParamsTable`).

The summary lives in a folder of its own, ``LOGDIR/.hparams-table-<pid>-<n>``, which TensorBoard
lists as a run without data. TensorBoard keeps the first summary metadata a run shows
(``backend/event_processing/plugin_event_accumulator.py``, lines 416-424), so a changed summary
goes into a new folder and the old one is deleted (a deleted run is dropped at the next reload).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedlab.config import fill_legacy_keys
from embedlab.errors import InputError, warn
from embedlab.linreg.config import LINREG_MODEL
from embedlab.run.lock import pid_alive
from embedlab.track.events import event_files
from embedlab.track.jsonl import FINAL_PREFIX, METRICS_FILE, read_metrics
from embedlab.track.runs import checked_status, effective_status, find_runs

if TYPE_CHECKING:
    from tensorboard.compat.proto.summary_pb2 import Summary

TABLE_PREFIX = ".hparams-table-"
REFRESH_SECONDS = 10.0  # TensorBoard reloads the logdir every 5 s
# The columns when no hyperparameter differs (one run, or runs alike): the corpus, skip-gram or
# CBOW, the loss, the dimension and the learning rate, what a reader asks of a run first.
SAME_EVERYWHERE = ("data.corpus", "model.model", "model.loss", "model.dim", "optim.lr")

Value = bool | int | float | str  # a value in a run's hparams record


@dataclass(frozen=True)
class Record:
    """What TensorBoard knows of a finished run: its hparams record and its scalar tags."""

    values: Mapping[str, Value]
    tags: frozenset[str]


@dataclass(frozen=True)
class Columns:
    """The table's hyperparameters, each with the distinct values the runs hold (sorted), and
    its metrics, in order; ``differ``: the hyperparameters are those that differ between the
    runs."""

    hparams: tuple[tuple[str, tuple[Value, ...]], ...]
    metrics: tuple[str, ...]
    differ: bool


def table_columns(records: Iterable[Record]) -> Columns | None:
    """The hyperparameters whose values differ between the runs that hold them (those of
    :data:`SAME_EVERYWHERE` that the runs hold when none differ), and every run's scalar tags,
    ``final/*`` first. None without records."""
    records = list(records)
    if not records:
        return None
    seen: dict[str, dict[str, Value]] = {}  # key -> its values by their JSON text
    for record in records:
        for key, value in record.values.items():
            seen.setdefault(key, {})[json.dumps(value)] = value
    differing = sorted(k for k, values in seen.items() if len(values) > 1)
    names = differing or [k for k in SAME_EVERYWHERE if k in seen]
    hparams = tuple((k, tuple(v for _, v in sorted(seen[k].items()))) for k in names)
    tags = {tag for record in records for tag in record.tags}
    metrics = tuple(sorted(tags, key=lambda t: (not t.startswith(FINAL_PREFIX), t)))
    return Columns(hparams, metrics, differ=bool(differing))


def experiment_summary(columns: Columns) -> Summary:
    """The hparams plugin's experiment summary listing ``columns``.

    Each hyperparameter's domain as TensorBoard builds it from the runs' records: a number's
    the interval from its least to its greatest value, a string's its values (its filter in the
    left pane). A key that is a string in some runs and a number in others (``--max-vocab``:
    "none" or 2000) is a string whose values are the strings and the numbers as TensorBoard
    writes them (``2000.0``), as TensorBoard lists them without this summary: its filter is
    the values' checkboxes, not a regular expression, which TensorBoard refuses for numbers.
    """
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    infos = []
    for name, values in columns.hparams:
        info = api_pb2.HParamInfo(name=name, differs=columns.differ,
                                  type=api_pb2.DATA_TYPE_STRING)
        if all(isinstance(v, str) for v in values):
            info.domain_discrete.extend(values)
        elif not any(isinstance(v, str) for v in values):
            # a boolean is in the records as a number (1 or 0)
            info.type = api_pb2.DATA_TYPE_FLOAT64
            info.domain_interval.min_value = float(min(values))
            info.domain_interval.max_value = float(max(values))
        else:
            info.domain_discrete.extend(v if isinstance(v, str) else str(float(v))
                                        for v in values)
        infos.append(info)
    metrics = [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in columns.metrics]
    data = plugin_data_pb2.HParamsPluginData(
        experiment=api_pb2.Experiment(hparam_infos=infos, metric_infos=metrics))
    return Summary(value=[Summary.Value(tag=metadata.EXPERIMENT_TAG,
                                        metadata=metadata.create_summary_metadata(data))])


def finished_record(run: Path, tag_cache: dict[Path, tuple[Any, frozenset[str]]]
                    ) -> Record | None:
    """``run``'s :class:`Record` when TensorBoard shows the run in the table: a finished word2vec
    run with event files (the hparams record is written at its end). None otherwise, and for a
    run whose files are unreadable (TensorBoard shows what it can of those)."""
    from embedlab.track.tensorboard import table_hparams

    if not event_files(run):
        return None
    try:
        if effective_status(checked_status(run)) != "finished":
            return None
        raw = json.loads((run / "config.json").read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("model") == LINREG_MODEL:
            return None
        fill_legacy_keys(raw)  # as the run's record holds them when a resume wrote it
        values = table_hparams(raw, run)
    except (InputError, OSError, ValueError, TypeError, AttributeError, RecursionError):
        return None
    return Record(values, scalar_tags(run / METRICS_FILE, tag_cache))


def scalar_tags(path: Path, cache: dict[Path, tuple[Any, frozenset[str]]]) -> frozenset[str]:
    """The tags in ``metrics.jsonl`` (the run's TensorBoard scalars), read again only when the
    file's size or time changed."""
    try:
        stat = path.stat()
    except OSError:
        return frozenset()
    key = (stat.st_size, stat.st_mtime_ns)
    if path in cache and cache[path][0] == key:
        return cache[path][1]
    tags = frozenset(tag for row in read_metrics(path) for tag in row if tag != "step")
    cache[path] = (key, tags)
    return tags


class HParamsTable:
    """The logdir's experiment summary, kept current by ``embedlab tensorboard`` while it serves
    (:meth:`refresh` every :data:`REFRESH_SECONDS`) and removed when it stops (:meth:`close`)."""

    def __init__(self, logdir: Path) -> None:
        self._logdir = Path(logdir)
        self._pid = os.getpid()
        self._written = 0
        self._folder: Path | None = None
        self._shown: Columns | None = None
        self._tags: dict[Path, tuple[Any, frozenset[str]]] = {}
        self._writable = True

    @property
    def folder(self) -> Path | None:
        """The folder holding the current summary."""
        return self._folder

    def remove_leftovers(self) -> int:
        """Remove the folders of ``embedlab tensorboard`` servers killed before they could
        (their process is gone); return how many. Left there, they would make a plain
        ``tensorboard`` show stale columns."""
        removed = 0
        for folder in self._logdir.glob(f"{TABLE_PREFIX}*"):
            pid = folder.name.removeprefix(TABLE_PREFIX).partition("-")[0]
            if pid.isdigit() and int(pid) != self._pid and not pid_alive(int(pid)):
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed

    def refresh(self) -> None:
        """Write the summary again, into a new folder, when the finished runs' columns changed.

        Not for a logdir that is itself a run: nothing differs in one run, and its folder is
        the trainer's.
        """
        if not self._writable or (self._logdir / "config.json").exists():
            return
        try:
            runs = find_runs(self._logdir)
        except InputError:
            return  # the folder is gone: nothing to show
        columns = table_columns(r for run in runs if (r := finished_record(run, self._tags)))
        if columns == self._shown:
            return
        try:
            folder = self._write(columns) if columns else None
        except OSError as exc:
            warn(f"cannot write the HParams table's columns into {self._logdir} "
                 f"({exc.strerror}); TensorBoard shows its first five hyperparameters")
            self._writable = False
            return
        self.close()
        self._folder, self._shown = folder, columns

    def close(self) -> None:
        """Remove the current summary's folder."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder, self._shown = None, None

    def _write(self, columns: Columns) -> Path:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.record_writer import RecordWriter

        self._written += 1
        folder = self._logdir / f"{TABLE_PREFIX}{self._pid}-{self._written}"
        folder.mkdir(exist_ok=True)
        now = time.time()
        # written under a name TensorBoard does not read, then renamed: it never reads half
        scratch = folder / ".writing"
        with scratch.open("wb") as f:
            records = RecordWriter(f)
            records.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
            records.write(Event(wall_time=now, step=0,
                                summary=experiment_summary(columns)).SerializeToString())
        os.replace(scratch, folder / f"events.out.tfevents.{int(now)}.{socket.gethostname()}"
                                     ".hparams-table")
        return folder
