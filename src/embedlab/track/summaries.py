"""What a run reports while it learns: ``metrics.jsonl`` always, TensorBoard events when enabled.

The trainer talks to one :class:`Tracker` and never asks "is TensorBoard on?": the tracker fans
out to a list of sinks, and a disabled TensorBoard is simply a sink that is not in the list
(the null-object pattern, as in torchtitan's ``metrics.py``).

Invariants
----------
- Every scalar that reaches TensorBoard is also a line ``{"step": N, "<tag>": value, ...}`` in
  ``RUN/metrics.jsonl``.
- On resume from step ``S`` nothing logged after ``S`` survives: ``metrics.jsonl`` is rewritten
  atomically keeping lines with ``step <= S``, the new event file carries ``purge_step = S + 1``
  (TensorBoard hides older events with ``step >= S + 1``), and projector entries after ``S`` are
  dropped. So curves continue without overlaps or duplicates.
- ``projector_config.pbtxt`` never lists a step folder that is missing or half written, whenever
  the process is killed: a step's files are complete before the config (rewritten atomically)
  names them, and on resume the config stops naming abandoned steps before their folders go.
  TensorBoard's projector reads every listed file to answer ``/data/plugin/projector/runs``; one
  missing file makes it fail (HTTP 500) for every run in the logdir.
- Everything is written into the run folder itself (no per-run sub-folders), so
  ``tensorboard --logdir runs`` shows one run per training run, hparams included.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from embedlab.config import TrainConfig, flatten
from embedlab.eval.scoring import top_k
from embedlab.fsutil import atomic_open, atomic_write_text

if TYPE_CHECKING:
    from tensorboard.compat.proto.summary_pb2 import Summary

METRICS_FILE = "metrics.jsonl"
PROJECTOR_CONFIG = "projector_config.pbtxt"
PROJECTOR_TAG = "input_embeddings"
REWRITE_PREFIX = ".events-rewrite-"  # scratch file of truncate_event_files
PCA_WORDS = 200  # words in the per-checkpoint PCA image: enough to see structure, cheap to draw
HIST_BINS = 60
NEIGHBOURS = 8  # neighbours shown per probe word
DEFAULT_PROBES = 8  # probe words chosen when --probe is not given


class VocabLike(Protocol):
    """The part of :class:`embedlab.data.vocab.Vocab` the tracker relies on."""

    @property
    def words(self) -> tuple[str, ...]: ...

    @property
    def counts(self) -> np.ndarray: ...

    def __len__(self) -> int: ...


class Sink(Protocol):
    """One destination for summaries; methods that do not apply are no-ops."""

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None: ...

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray) -> None: ...

    def log_final(self, step: int, w_in: np.ndarray, hparams: Mapping[str, Any],
                  metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


# ---- metrics.jsonl ------------------------------------------------------------------------


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Parse ``metrics.jsonl``; a torn last line (a SIGKILL mid-write) or junk lines are skipped."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
    return rows


def truncate_metrics(path: Path, resume_step: int) -> None:
    """Keep only rows with ``step <= resume_step`` (atomic rewrite; a missing file stays so).

    The ``final/*`` row of ``resume_step`` goes too: training goes on from there (a finished
    run given more --epochs), so it is no longer the end, and the new end writes its own.
    """
    if not path.exists():
        return
    kept = [r for r in read_metrics(path)
            if r["step"] < resume_step or (r["step"] == resume_step and not _is_final_row(r))]
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def _is_final_row(row: Mapping[str, Any]) -> bool:
    keys = [k for k in row if k != "step"]
    return bool(keys) and all(k.startswith(FINAL_PREFIX) for k in keys)


def _json_number(v: float) -> float | str:
    # JSON has no NaN/inf; keep the information as a string rather than writing invalid JSON.
    f = float(v)
    return f if math.isfinite(f) else str(f)


class JsonlSink:
    """Appends one JSON object per scalar call to ``RUN/metrics.jsonl`` (line-buffered)."""

    def __init__(self, run_dir: Path) -> None:
        self._f = (run_dir / METRICS_FILE).open("a", encoding="utf-8")

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        row: dict[str, Any] = {"step": int(step)}
        row.update({k: _json_number(v) for k, v in values.items()})
        self._f.write(json.dumps(row) + "\n")
        self._f.flush()

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray) -> None:
        return None

    def log_final(self, step: int, w_in: np.ndarray, hparams: Mapping[str, Any],
                  metrics: Mapping[str, float]) -> None:
        if metrics:
            self.log_scalars(step, {final_metric_tag(k): v for k, v in metrics.items()})

    def close(self) -> None:
        self._f.close()


# ---- TensorBoard --------------------------------------------------------------------------


def default_probes(words: Sequence[str], unk: str | None, n: int = DEFAULT_PROBES) -> list[str]:
    """Frequent words at geometrically spaced ranks 10, 20, 40, ... (falling back to the top).

    The very top of a frequency list is function words ("the", "of") whose neighbours say little;
    spacing the ranks shows frequent content words as well.
    """
    candidates = [w for w in words if w != unk]
    picks: list[str] = []
    rank = 10
    while len(picks) < n and rank < len(candidates):
        picks.append(candidates[rank])
        rank *= 2
    for w in candidates:  # small vocabularies: top up with the most frequent words
        if len(picks) >= n:
            break
        if w not in picks:
            picks.append(w)
    return picks


def nearest_neighbours(w: np.ndarray, ids: Sequence[int],
                       k: int) -> list[list[tuple[int, float]]]:
    """Top-``k`` cosine neighbours (excluding the word itself) for each row id in ``ids``,
    most similar first."""
    w = np.asarray(w, dtype=np.float32)  # no copy for the trainer's float32 matrices
    rows = np.asarray(ids, dtype=np.int64)
    # Divided by the norms afterwards rather than multiplying unit vectors: normalising the whole
    # matrix first made a V×D copy (17 MiB for gcide8), at the final checkpoint, the run's peak.
    norms = np.maximum(row_norms(w), 1e-12)  # a zero row (never trained) stays 0, not NaN
    sims = (w[rows] @ w.T) / norms  # (P, V)
    sims /= norms[rows, None]
    sims[np.arange(len(rows)), rows] = -np.inf
    k = min(k, w.shape[0] - 1)
    # the order of embedlab's other neighbour lists: equal similarities by id, also at the cut
    return [[(int(i), float(row[i])) for i in top_k(row, k)] if k > 0 else [] for row in sims]


def row_norms(w: np.ndarray) -> np.ndarray:
    """Euclidean norm of each row, without the V×D temporary of ``np.linalg.norm(w, axis=1)``
    (:func:`embedlab.eval.scoring.row_norms`, whose values evaluation keeps): this one runs at
    the final checkpoint, the run's peak of memory."""
    return np.sqrt(np.einsum("ij,ij->i", w, w))


def neighbours_markdown(words: Sequence[str], w: np.ndarray, probes: Sequence[str],
                        k: int = NEIGHBOURS) -> str:
    """A markdown table: one row per probe word, its neighbours with cosine similarity."""
    index = {word: i for i, word in enumerate(words)}
    ids = [index[p] for p in probes if p in index]
    if not ids or w.shape[0] < 2:
        return "(no probe words in the vocabulary)"
    lines = ["| word | nearest neighbours (cosine) |", "|---|---|"]
    for i, row in zip(ids, nearest_neighbours(w, ids, k), strict=True):
        cells = ", ".join(f"{words[j]} ({s:.2f})" for j, s in row)
        lines.append(f"| **{words[i]}** | {cells} |")
    return "\n".join(lines)


def hparam_values(hparams: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """Flatten a (nested) config dict into values the hparams plugin accepts."""
    out: dict[str, bool | int | float | str] = {}
    for k, v in flatten(dict(hparams)).items():
        if isinstance(v, (bool, int, float)):
            out[k] = v
        elif v is None:
            out[k] = "none"
        else:
            text = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
            # A path that is not UTF-8 (a --corpus folder named with other bytes) reaches us
            # with lone surrogates, which the protobuf writer cannot encode: it crashed the
            # final summaries after the whole run had trained. Shown as \xNN escapes instead.
            out[k] = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return out


FINAL_PREFIX = "final/"
HPARAMS_PREFIX = "_hparams_/"  # the hparams plugin's summaries: session start and end
EXPERIMENT_TAG = "_hparams_/experiment"  # no longer written (see log_final)


def final_metric_tag(name: str) -> str:
    """Tag under which a final metric is written (and which the hparams table shows)."""
    return f"{FINAL_PREFIX}{name}"


def _ends_run(event: Any) -> bool:
    """A final metric or an hparams session summary: written once, at the end of training."""
    return any(v.tag.startswith((FINAL_PREFIX, HPARAMS_PREFIX)) for v in event.summary.value)


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
    the final metrics and hparams session of ``resume_step`` (see :func:`truncate_metrics`).

    ``purge_step`` alone is not enough: the TensorBoard server (2.21, its fast data loader and
    ``--load_fast=false`` alike) keeps showing histograms, images and text of steps that a
    resume from an *older* checkpoint (``--from``, or falling back past a damaged one) abandoned.
    Rewriting the files the way metrics.jsonl is rewritten removes them at the source. Left
    behind, the hparams session of a finished run given more --epochs was a second one in the
    same file, and TensorBoard showed the first: the old epoch count.
    """
    remove_stale_rewrites(run_dir)
    paths = event_files(run_dir)
    if not paths:
        return  # nothing to read: spare the tensorboard imports (a run without TensorBoard)

    def keep(event: Any) -> bool:
        if not event.HasField("summary"):
            return True
        if _is_experiment(event):
            return False  # an older embedlab's: it hides the other runs' metrics (log_final)
        return event.step < resume_step or (event.step == resume_step and not _ends_run(event))

    for path in paths:
        _rewrite_events(path, keep)


def _is_experiment(event: Any) -> bool:
    return any(v.tag == EXPERIMENT_TAG for v in event.summary.value)


def _rewrite_events(path: Path, keep: Callable[[Any], bool]) -> bool:
    """Rewrite one event file with the events ``keep`` accepts (atomic); False if all are."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    records = list(RawEventFileLoader(str(path)).Load())
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


def drop_experiment_summaries(run_dir: Path) -> bool:
    """Remove the ``_hparams_/experiment`` summary an embedlab before 2026-11-24 wrote at the end
    of each run; True if one was removed. The caller holds the run's lock.

    TensorBoard builds its HParams table from the first such summary it finds in the logdir,
    so one old run hid the metrics and differing hyperparameters of all the others.
    """
    changed = False
    for path in event_files(run_dir):
        with path.open("rb") as f:  # cheap test first: most files have none
            if EXPERIMENT_TAG.encode() not in f.read():
                continue
        changed |= _rewrite_events(
            path, lambda e: not (e.HasField("summary") and _is_experiment(e)))
    return changed


class EventWriter:
    """The run's own event file, ``RUN/events.out.tfevents.*``, written by tensorboard's
    ``EventFileWriter`` the way torch's ``SummaryWriter`` wrote it: the same file name, a queue
    of 10 events and a background flush every 120 s (else only at :meth:`flush`)."""

    def __init__(self, run_dir: Path, purge_step: int | None) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._file = EventFileWriter(str(run_dir), max_queue_size=10, flush_secs=120)
        if purge_step is not None:
            self._purge_from(purge_step)

    def _purge_from(self, step: int) -> None:
        # SummaryWriter(purge_step=S)'s two events: TensorBoard's event accumulator, reading a
        # version-2 file, drops everything it read before with step >= S at the session start.
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog

        self._add(Event(step=step, file_version="brain.Event:2"))
        self._add(Event(step=step, session_log=SessionLog(status=SessionLog.START)))

    def add_summary(self, step: int, summary: Summary) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self._add(Event(step=step, summary=summary))

    def _add(self, event: Any) -> None:
        event.wall_time = time.time()
        self._file.add_event(event)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TensorBoardSink:
    """Scalars, histograms, text, images, projector and hparams in the run's own event stream."""

    def __init__(self, run_dir: Path, cfg: TrainConfig, vocab: VocabLike,
                 resume_step: int | None) -> None:
        self._run_dir = run_dir
        self._cfg = cfg
        self._words = tuple(vocab.words)
        self._counts = np.asarray(vocab.counts)
        self._unk: str | None = getattr(vocab, "unk", None)
        probes = list(cfg.track.probe_words) or default_probes(self._words, self._unk)
        known = set(self._words)
        self._probes = [p for p in probes if p in known]
        purge = None if not resume_step else resume_step + 1
        # A fresh run (no checkpoint) keeps nothing of a process killed before its first
        # checkpoint either: its projector entries would otherwise be shown beside ours.
        self._projector = trim_projector(run_dir, resume_step or 0)
        self._projector_steps = {_projector_step(e.tensor_path)
                                 for e in self._projector.embeddings}
        self._w = EventWriter(run_dir, purge)

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        for tag, v in values.items():
            self._w.add_summary(step, scalar_summary(tag, v))

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray) -> None:
        with one_blas_thread():
            self._checkpoint_summaries(step, w_in, w_out)
        self._w.flush()

    def _checkpoint_summaries(self, step: int, w_in: np.ndarray, w_out: np.ndarray) -> None:
        for name, w in (("input", w_in), ("output", w_out)):
            self._w.add_summary(step, histogram_summary(f"embeddings/{name}", w))
            self._w.add_summary(step, histogram_summary(f"embeddings/{name}_norm", row_norms(w)))
        if self._probes:
            text = neighbours_markdown(self._words, w_in, self._probes)
            self._w.add_summary(step, text_summary("neighbours", text))
        self._log_pca(step, w_in)
        if self._cfg.track.projector_each_checkpoint:
            self._log_projector(step, w_in)

    def log_final(self, step: int, w_in: np.ndarray, hparams: Mapping[str, Any],
                  metrics: Mapping[str, float]) -> None:
        self._log_projector(step, w_in)  # no BLAS: only formatting and files
        self.log_scalars(step, {final_metric_tag(k): v for k, v in metrics.items()})
        # The session summaries in our own file, not in a sub-folder (add_hparams' way, which
        # TensorBoard shows as a second run). Not the experiment summary either: TensorBoard
        # takes the first one it finds as the whole logdir's, so the other runs' metrics and
        # differing hyperparameters went missing from the table; without one it builds the
        # table from every run's session, its metrics being the runs' scalars.
        for summary in hparams_summaries(hparam_values(hparams)):
            self._w.add_summary(step, summary)
        self._w.flush()

    def close(self) -> None:
        self._w.close()

    def _log_pca(self, step: int, w_in: np.ndarray) -> None:
        from embedlab.track.plots import plot_words, project_2d, top_word_ids

        ids = top_word_ids(self._words, self._unk, PCA_WORDS)
        if len(ids) < 3:
            return
        points = project_2d(w_in[ids], "pca")
        fig = plot_words([self._words[i] for i in ids], points,
                         title=f"PCA of the {len(ids)} most frequent words, step {step}")
        # The PNG straight from matplotlib, a few MiB: torch's add_figure() turned the RGBA
        # pixels into float32 copies first (measured: +45 MiB peak RSS for this 1200×1200
        # figure, the run's peak).
        self._w.add_summary(step, png_summary("embeddings/pca", fig))

    def _log_projector(self, step: int, w_in: np.ndarray) -> None:
        if step in self._projector_steps:
            return  # the per-checkpoint projector already holds this step
        n = min(self._cfg.track.projector_words, w_in.shape[0])
        # Written here, in the layout and file formats of torch's SummaryWriter.add_embedding,
        # which wrote the config before it was done with the tensors, in place (a kill left it
        # naming a half-written file, or torn), and the values one `str(x.item())` at a time
        # (0.2 s for 2000×100, at every run's end).
        subdir = f"{step:05d}/{PROJECTOR_TAG}"
        folder = self._run_dir / subdir
        folder.mkdir(parents=True, exist_ok=True)
        rows = [f"{w}\t{int(c)}" for w, c in zip(self._words[:n], self._counts[:n], strict=True)]
        atomic_write_text(folder / "metadata.tsv", "\n".join(["word\tcount", *rows]) + "\n")
        with atomic_open(folder / "tensors.tsv") as f:
            # 9 significant digits: exact for float32
            np.savetxt(f, w_in[:n], fmt="%.9g", delimiter="\t")
        info = self._projector.embeddings.add()
        info.tensor_name = f"{PROJECTOR_TAG}:{step:05d}"
        info.tensor_path = f"{subdir}/tensors.tsv"
        info.metadata_path = f"{subdir}/metadata.tsv"
        _write_projector_config(self._run_dir, self._projector)  # last: the files are complete
        self._projector_steps.add(step)


def one_blas_thread() -> AbstractContextManager[object]:
    """numpy's BLAS (OpenBLAS) on one thread while summaries are computed.

    They run between training steps, right after the native kernel's OpenMP threads. With
    OpenBLAS's own threads on the same cores, the PCA of 200×100 (median 2 ms) took up to
    0.26 s after a BLAS call and an OpenMP region (15 of 300 tries over 20 ms; 2 cores,
    GOMP_SPINCOUNT=2000), and up to 1.9 s beside a thread running OpenMP regions; on one BLAS
    thread, the same median and at most 45 ms. The products here are small (PCA 200×100,
    probes 8×D·D×V): one thread loses nothing.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


# ---- summaries (protos as torch.utils.tensorboard wrote them, so old and new runs read alike) --


def scalar_summary(tag: str, value: float) -> Summary:
    """A scalar in the ``simple_value`` field, as ``SummaryWriter.add_scalar`` wrote it."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    return Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])


def histogram_summary(tag: str, values: np.ndarray) -> Summary:
    """A histogram of ``values`` (any shape): ``HIST_BINS`` equal buckets from min to max, each
    bucket's limit its upper edge, sums in float64 (``add_histogram_raw``'s layout)."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    flat = values.reshape(-1)
    lo, hi = float(flat.min()), float(flat.max())
    if hi > lo:
        # numpy's equal-width path bins block by block (64k values): no copy of the matrix.
        # Not TensorBoard's default ~1,500 exponential buckets: torch's add_histogram took ~1 s
        # on 7M values (text8's 71k×100) with them, alone more than the overhead budget.
        counts, edges = np.histogram(flat, bins=HIST_BINS, range=(lo, hi))
    else:  # one value everywhere (an untouched matrix): all of it in the first bucket
        hi = lo + 1e-6  # np.histogram cannot split so narrow a float32 range away from 0
        counts = np.zeros(HIST_BINS, dtype=np.int64)
        counts[0] = flat.size
        edges = np.linspace(lo, hi, HIST_BINS + 1)
    total, squares = float64_moments(flat)
    histo = HistogramProto(min=lo, max=hi, num=flat.size, sum=total, sum_squares=squares,
                           bucket_limit=edges[1:].tolist(), bucket=counts.tolist())
    return Summary(value=[Summary.Value(tag=tag, histo=histo)])


def text_summary(tag: str, text: str) -> Summary:
    """Markdown text under ``<tag>/text_summary``: torch's add_text appended the suffix, and
    the runs it wrote show their text under that tag."""
    from tensorboard.plugins.text.summary_v2 import text_pb

    return text_pb(f"{tag}/text_summary", [text])


def hparams_summaries(values: Mapping[str, bool | int | float | str]) -> tuple[Summary, Summary]:
    """The hparams plugin's session start (``values``) and end (success) summaries.

    As torch's ``summary.hparams`` built them (tensorboard's own ``hparams.summary`` needs
    TensorFlow): numbers and booleans as ``number_value`` (a boolean shows as 1 or 0), the rest
    as ``string_value``.
    """
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    start = plugin_data_pb2.SessionStartInfo()
    for name, value in values.items():
        if isinstance(value, str):
            start.hparams[name].string_value = value
        else:
            start.hparams[name].number_value = value
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)
    return (_hparams_summary(metadata.SESSION_START_INFO_TAG,
                             plugin_data_pb2.HParamsPluginData(session_start_info=start)),
            _hparams_summary(metadata.SESSION_END_INFO_TAG,
                             plugin_data_pb2.HParamsPluginData(session_end_info=end)))


def _hparams_summary(tag: str, data: Any) -> Summary:
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import metadata

    return Summary(value=[Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data))])


def float64_moments(values: np.ndarray, chunk: int = 1 << 16) -> tuple[float, float]:
    """Sum and sum of squares of a float32 array, accumulated in float64.

    Chunk by chunk: a float64 copy of a whole embedding matrix (and of its square) would add
    twice its size again to the run's peak memory (measured: +66 MiB at gcide8's 43k×100).
    Small chunks (512 KiB as float64): +2 MiB; 8 MiB ones, +17 MiB (two alive at once), and in
    the torch version glibc served them from the heap top, which kept growing (+40 MiB at the
    final checkpoint).
    """
    flat = values.reshape(-1)
    total = squares = 0.0
    for start in range(0, flat.size, chunk):
        part = flat[start:start + chunk].astype(np.float64)
        total += float(part.sum())
        squares += float(part @ part)
    return total, squares


def png_summary(tag: str, fig: Any) -> Summary:
    """An image Summary holding ``fig`` as a PNG rendered by matplotlib; closes nothing."""
    import io

    from tensorboard.compat.proto.summary_pb2 import Summary

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    width, height = fig.canvas.get_width_height()
    image = Summary.Image(height=height, width=width, colorspace=4,
                          encoded_image_string=buf.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=image)])


def _projector_step(tensor_path: str) -> int:
    # add_embedding stores tensors under "<zero-padded step>/<tag>/tensors.tsv".
    head = tensor_path.split("/", 1)[0]
    return int(head) if head.isdigit() else -1


def _write_projector_config(run_dir: Path, config: Any) -> None:
    from google.protobuf import text_format

    atomic_write_text(run_dir / PROJECTOR_CONFIG, text_format.MessageToString(config))


def _has_projector(run_dir: Path) -> bool:
    return (run_dir / PROJECTOR_CONFIG).exists() or any(
        p.name.isdigit() and (p / PROJECTOR_TAG).is_dir() for p in run_dir.glob("[0-9]*"))


def trim_projector(run_dir: Path, resume_step: int) -> Any:
    """Drop the projector entries after ``resume_step``; return the kept ``ProjectorConfig``.

    The trimmed config is written (atomically) *before* the abandoned step folders are removed,
    so a kill in between leaves unlisted folders, never a listed folder that is gone. Step
    folders after ``resume_step`` that the config does not list (a kill after their files were
    written, before the config named them) go too. An unreadable config (written by an older
    embedlab, whose writes were not atomic) is rebuilt from the complete step folders kept.
    """
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    path = run_dir / PROJECTOR_CONFIG
    folders = {int(p.name): p for p in run_dir.glob("[0-9]*")
               if p.name.isdigit() and (p / PROJECTOR_TAG).is_dir()}
    kept = ProjectorConfig()
    old: Any = None
    if path.exists():
        try:
            old = text_format.Parse(path.read_text(encoding="utf-8"), ProjectorConfig())
        except (text_format.ParseError, UnicodeDecodeError):
            old = None
    if old is not None:
        for e in old.embeddings:
            if 0 <= _projector_step(e.tensor_path) <= resume_step:
                kept.embeddings.add().CopyFrom(e)
    else:
        for step in sorted(s for s in folders if s <= resume_step):
            subdir = f"{folders[step].name}/{PROJECTOR_TAG}"
            if (run_dir / subdir / "tensors.tsv").is_file() and \
                    (run_dir / subdir / "metadata.tsv").is_file():
                e = kept.embeddings.add()
                e.tensor_name = f"{PROJECTOR_TAG}:{folders[step].name}"
                e.tensor_path = f"{subdir}/tensors.tsv"
                e.metadata_path = f"{subdir}/metadata.tsv"
    if path.exists() and (old is None or kept != old):
        _write_projector_config(run_dir, kept)
    for step, folder in sorted(folders.items()):
        if step > resume_step:
            shutil.rmtree(folder, ignore_errors=True)
    return kept


# ---- the tracker --------------------------------------------------------------------------


class Tracker:
    """Fans every call out to its sinks and keeps the seconds spent doing so.

    ``seconds`` lets the trainer (and ``benchmarks/summary_overhead.py``) report the cost of
    summaries as a share of training time.
    """

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self._sinks = list(sinks)
        self.seconds = 0.0

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        t = time.perf_counter()
        for s in self._sinks:
            s.log_scalars(step, values)
        self.seconds += time.perf_counter() - t

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray) -> None:
        """Histograms of values and row norms, probe neighbours, PCA image (and projector)."""
        t = time.perf_counter()
        for s in self._sinks:
            s.log_checkpoint(step, w_in, w_out)
        self.seconds += time.perf_counter() - t

    def log_final(self, step: int, w_in: np.ndarray, w_out: np.ndarray,
                  hparams: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
        """Projector of the final input embeddings, final metrics and the hparams table.

        ``metrics`` names (e.g. ``loss``, ``eval/analogy``) are written as scalars
        ``final/<name>`` at ``step`` and referenced by the hparams table.
        """
        t = time.perf_counter()
        del w_out  # in the contract for symmetry; the projector shows the input embeddings
        for s in self._sinks:
            s.log_final(step, w_in, hparams, metrics)
        self.seconds += time.perf_counter() - t

    def close(self) -> None:
        for s in self._sinks:
            s.close()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_tracker(run_dir: Path, cfg: TrainConfig, *, vocab: VocabLike,
                 resume_step: int | None = None) -> Tracker:
    """Open the run's sinks. ``resume_step`` (the step of the checkpoint resumed from) drops
    everything logged after it, so resumed curves do not overlap; None, a fresh run, drops
    everything an earlier attempt in the folder logged (one killed before its first checkpoint),
    so the new curves do not restart on top of it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if resume_step is None:
        (run_dir / METRICS_FILE).unlink(missing_ok=True)
        remove_stale_rewrites(run_dir)
        for events in event_files(run_dir):
            events.unlink()
    elif resume_step:
        truncate_metrics(run_dir / METRICS_FILE, resume_step)
        # whether or not this invocation writes TensorBoard: a --from resume with
        # --no-tensorboard left the abandoned branch's curves and projector on show
        truncate_event_files(run_dir, resume_step)
    if not cfg.track.tensorboard and _has_projector(run_dir):
        trim_projector(run_dir, resume_step or 0)
    sinks: list[Sink] = [JsonlSink(run_dir)]
    if cfg.track.tensorboard:
        try:
            sinks.append(TensorBoardSink(run_dir, cfg, vocab, resume_step))
        except BaseException:
            sinks[0].close()  # e.g. Ctrl-C while the old events are being truncated
            raise
    return Tracker(sinks)
