"""What a run reports while it learns: ``metrics.jsonl`` always, TensorBoard events when enabled.

The trainer talks to one :class:`Tracker` and never asks "is TensorBoard on?": the tracker fans
out to a list of sinks, and a disabled TensorBoard is simply a sink that is not in the list
(the null-object pattern, as in torchtitan's ``metrics.py``).

Invariants
----------
- Every scalar that reaches TensorBoard is also a line in ``RUN/metrics.jsonl``
  (:mod:`embedlab.track.jsonl`).
- On resume from step ``S`` nothing logged after ``S`` survives: ``metrics.jsonl`` and the
  event files are rewritten keeping what was logged up to ``S`` (:mod:`embedlab.track.events`),
  and projector entries after ``S`` are dropped (:mod:`embedlab.track.projector`). So curves
  continue without overlaps or duplicates, whether or not the resumed run writes TensorBoard.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from embedlab.config import TrainConfig
from embedlab.track.events import event_files, remove_stale_rewrites, truncate_event_files
from embedlab.track.jsonl import METRICS_FILE, JsonlSink, truncate_metrics
from embedlab.track.projector import has_projector, trim_projector
from embedlab.track.tensorboard import TensorBoardSink, VocabLike


class Sink(Protocol):
    """One destination for summaries; methods that do not apply are no-ops."""

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None: ...

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray, *,
                       projector: bool = False) -> None: ...

    def log_final(self, step: int, w_in: np.ndarray, hparams: Mapping[str, Any],
                  metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


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

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray, *,
                       projector: bool = False) -> None:
        """Histograms of values and row norms, probe neighbours, PCA image, and the projector
        with ``projector`` (a stop at --max-steps: the end of what this run trains) or
        ``--projector-each-checkpoint``."""
        t = time.perf_counter()
        for s in self._sinks:
            s.log_checkpoint(step, w_in, w_out, projector=projector)
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
        # --no-tensorboard would leave the abandoned branch's curves and projector on show
        truncate_event_files(run_dir, resume_step)
    if not cfg.track.tensorboard and has_projector(run_dir):
        trim_projector(run_dir, resume_step or 0)
    sinks: list[Sink] = [JsonlSink(run_dir)]
    if cfg.track.tensorboard:
        try:
            sinks.append(TensorBoardSink(run_dir, cfg, vocab, resume_step))
        except BaseException:
            sinks[0].close()  # e.g. Ctrl-C while the old events are being truncated
            raise
    return Tracker(sinks)
