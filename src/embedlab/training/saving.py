"""When the loop saves a checkpoint, and what a save writes.

Saves come every ``--checkpoint-every`` steps and every ``--checkpoint-secs`` seconds, whichever
comes first. Checkpointing must stay a small share of training time: the time-based cadence is
stretched to at least :data:`SAVE_TIME_FACTOR` times the last save's duration (2% => 50x).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from embedlab.run import status
from embedlab.training import distributed
from embedlab.training.memory import release_free_memory

if TYPE_CHECKING:
    from embedlab.track.tracker import Tracker
    from embedlab.training.clocks import WallClock
    from embedlab.training.setup import TrainingRun

SAVE_TIME_FACTOR = 50


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
        if group is not None:
            group.check_replicas(engine.state_dict(), state.step)
        state.wall_seconds = self.wall.seconds()
        state.finished = final
        began = time.perf_counter()  # an evaluation for the checkpoint is not training time
        # a signal's save does not wait for one (a scheduler's SIGKILL may follow)
        metrics = self.metrics(evaluate=not stopping)
        saved = {**state.state_dict(), "metrics": metrics}
        release_free_memory()  # the batch producer's freed chunks: summaries allocate next

        def summaries() -> None:  # while the checkpoint's files are written; before its commit
            tracker.log_checkpoint(state.step, engine.input_vectors, engine.output_vectors,
                                   projector=at_max_steps)
            if final:
                tracker.log_final(state.step, engine.input_vectors, engine.output_vectors,
                                  run.cfg.to_dict(), state.metrics)

        run.manager.save(state.step, engine.state_dict(), saved, metrics, alongside=summaries)
        if group is None or group.leader:  # committed: a process lost in the wait below does
            self.saved_step = state.step  # not make this checkpoint unsaved
            # that the run has a checkpoint, where a resume that finds none can read it
            status.write_status(run.run_dir, checkpoint=state.step)
        if group is not None:
            group.wait_for_leader()
        self.last_save = time.perf_counter()
        state.window.pause(self.last_save - began)  # words/s counts training time only
        self.saved_step = state.step
        return state.wall_seconds
