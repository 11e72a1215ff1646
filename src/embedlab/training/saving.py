"""When the loop saves a checkpoint, and what a save writes.

Saves come every ``--checkpoint-every`` steps and every ``--checkpoint-secs`` seconds, whichever
comes first. Checkpointing must stay a small share of training time: the time-based cadence is
stretched to at least :data:`SAVE_TIME_FACTOR` times the last save's duration (2% => 50x).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from embedlab.errors import InputError, python_caller, spell, spell_name
from embedlab.run import status
from embedlab.training import distributed
from embedlab.training.memory import release_free_memory

if TYPE_CHECKING:
    from embedlab.track.tracker import Tracker
    from embedlab.training.clocks import WallClock
    from embedlab.training.setup import TrainingRun

SAVE_TIME_FACTOR = 50
#: elements tested for nan/inf at a time: a bounded temporary, whatever the matrices' size
_FINITE_CHUNK = 1 << 18


def divergence_fix(run: TrainingRun) -> str:
    """What to do about a run that diverged: a lower rate, or a start nearer the default width
    where the run's is wider."""
    from embedlab.engines.params import default_init_scale

    model = run.cfg.model
    join = ", " if python_caller() else " "
    fix = f"Start over with a lower learning rate, e.g. {spell('--restart', True)}{join}" \
          f"{spell('--lr', float(f'{run.cfg.optim.lr / 4:g}'))}"
    default = default_init_scale(model.model)
    if model.init == "centered" and model.init_scale > default:
        # the starting vectors' width is the other setting that makes a run diverge
        fix += f", or start the vectors narrower: {spell_name('--init-scale')} " \
               f"{model.init_scale:g} is wider than the default {default:g}"
    return fix


def non_finite(tensors: Mapping[str, np.ndarray]) -> str | None:
    """The name of the first floating-point tensor holding nan or inf, if any."""
    for name, array in tensors.items():
        if array.dtype.kind != "f":
            continue
        flat = array.reshape(-1)
        for start in range(0, flat.size, _FINITE_CHUNK):
            if not np.isfinite(flat[start:start + _FINITE_CHUNK]).all():
                return name
    return None


class Saver:
    """Saves the run's checkpoints and says when the next one is due."""

    def __init__(self, run: TrainingRun, wall: WallClock,
                 metrics: Callable[..., dict[str, float]] | None = None) -> None:
        self.run = run
        self.wall = wall
        # the metrics a checkpoint records (Reporter.checkpoint_metrics); the state's otherwise
        self.metrics: Callable[..., dict[str, float]] = \
            metrics or (lambda evaluate=True: dict(run.state.metrics))
        self.last_save = time.perf_counter()
        self.saved_step = run.state.step if run.resumed else -1

    def due(self, step: int) -> bool:
        """Whether step ``step``, just trained, is to be saved (the last step is not: it is
        saved once, after the loop, with the final summaries)."""
        c, manager = self.run.cfg.checkpoint, self.run.manager
        interval = max(c.every_secs, SAVE_TIME_FACTOR * (manager.last_save_seconds or 0.0))
        return bool((c.every_steps and step % c.every_steps == 0)
                    or time.perf_counter() - self.last_save >= interval)

    def save(self, tracker: Tracker, *, final: bool = False, stopping: bool = False,
             at_max_steps: bool = False) -> float:
        """Save the current step; return the wall time recorded with it.

        Summaries of step S are written (and flushed) *before* checkpoint S is committed: a
        resume from S keeps the events up to S and drops later ones, so with this order a kill
        at any moment leaves neither gaps nor duplicates. They are computed while the
        checkpoint's files are written (not yet visible), which overlaps the two.

        ``stopping``: the save a signal (or a callback's stop) asks for. ``at_max_steps``: the
        save of a stop at ``--max-steps``, which writes the projector as the end of the data
        does (``final``): the embeddings this run trained to.

        With several processes, every process's parameters are checked against these first,
        and the others wait until the checkpoint is committed
        (:mod:`embedlab.training.distributed`).
        """
        run, state, engine = self.run, self.run.state, self.run.engine
        group = distributed.current()
        tensors = engine.state_dict()  # host arrays: the cuda engine copies its tensors here
        if group is not None:
            group.check_replicas(tensors, state.step)
        state.wall_seconds = self.wall.seconds()
        state.finished = final
        began = time.perf_counter()  # an evaluation for the checkpoint is not training time
        # a signal's save does not wait for one (a scheduler's SIGKILL may follow)
        # finite values only, which a checkpoint holds: an evaluation of vectors that overflow
        # (Spearman nan) ranks nothing, and the check below says the run diverged
        metrics = {k: v for k, v in self.metrics(evaluate=not stopping).items()
                   if math.isfinite(v)}
        saved = {**state.state_dict(), "metrics": metrics}
        release_free_memory()  # the batch producer's freed chunks: summaries allocate next

        def summaries() -> None:  # while the checkpoint's files are written; before its commit
            # Scores are clipped (word2vec's ±6), so the loss can stay finite while the vectors
            # overflow: never a checkpoint of them, whose resume would train on nan. Checked
            # here, beside the write (0.2 s for 2.3M words × 100 dims), which it then stops.
            bad = non_finite(tensors)
            if bad is not None:
                kept = f"checkpoints up to step {self.saved_step} are intact" \
                    if self.saved_step > 0 else "no checkpoint was written"
                raise InputError(f"training diverged by step {state.step}: {bad} holds nan or "
                                 f"inf values, though the loss stayed finite; {kept}. "
                                 f"{divergence_fix(run)}")
            # vectors near float32's limit (a run about to diverge) overflow in the neighbour
            # table and histograms: their summaries say so, NumPy's warnings would not
            with np.errstate(over="ignore", invalid="ignore"):
                tracker.log_checkpoint(state.step, engine.input_vectors, engine.output_vectors,
                                       projector=at_max_steps)
                if final:
                    tracker.log_final(state.step, engine.input_vectors, engine.output_vectors,
                                      run.cfg.to_dict(), state.metrics)

        run.manager.save(state.step, tensors, saved, metrics, alongside=summaries)
        run.records_before = {}  # saved: this call's config.json and env.json are the run's
        if group is None or group.leader:  # committed: a process lost in the wait below does
            self.saved_step = state.step  # not make this checkpoint unsaved
            # that the run has a checkpoint, where a resume that finds none can read it; and
            # the step it is at (log windows write it too, but a kill -9 after a checkpoint
            # between two of them showed a step behind the one saved)
            status.write_status(run.run_dir, checkpoint=state.step, step=state.step,
                                words_seen=state.words_seen, train_seconds=state.train_seconds,
                                wall_time=state.wall_seconds)
        if group is not None:
            group.wait_for_leader()
        self.last_save = time.perf_counter()
        state.window.pause(self.last_save - began)  # words/s counts training time only
        self.saved_step = state.step
        return state.wall_seconds
