"""Running training steps from a data position: one batch at a time, or many per call.

The training loop asks a :class:`StepRunner` for up to ``limit`` steps from a cursor and gets
back what each step did (:class:`StepsDone`): its summed loss, positive examples, where the
epoch stands after it, and the rate it trained at. How the steps are run is the runner's
business:

* :class:`BatchByBatch` takes the batches of a :class:`~embedlab.data.pairs.BatchStream` (built
  by NumPy in a background thread) and hands them to :meth:`Engine.step
  <embedlab.engines.base.Engine.step>` one by one: one step per call (the torch engine, and the
  runs started before the batch specification);
* :class:`~embedlab.engines.native_batches.NativeBatches` builds the batches in C from the
  batch specification and trains many steps in one call, with no Python between them.

The rate of a step is :class:`Schedule`'s, evaluated where the step starts; both runners give
the same value for the same position, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from embedlab.engines.step import pairs_in
from embedlab.training.schedule import linear_lr

if TYPE_CHECKING:
    from embedlab.data.pairs import Batch, BatchStream, Cursor
    from embedlab.engines.base import Engine


@dataclass(frozen=True)
class Schedule:
    """word2vec's linear learning-rate decay over the run's ``total_words`` positions."""

    lr: float
    min_ratio: float
    total_words: int

    def at(self, words_seen: int) -> float:
        return linear_lr(self.lr, self.min_ratio, words_seen, self.total_words)


@dataclass
class StepsDone:
    """What consecutive steps of one epoch did, one entry per step, in order."""

    losses: np.ndarray  # float64: summed loss over the step's positive examples
    pairs: np.ndarray  # int64: positive examples, (centre, context) pairs or CBOW's centres
    words_done: np.ndarray  # int64: in-vocabulary positions of the epoch consumed after the step
    lrs: np.ndarray  # float64: the schedule's rate where the step started
    cursor_after: Callable[[int], Cursor]  # where the data continues after step i

    def __len__(self) -> int:
        return len(self.losses)


class StepRunner(Protocol):
    def run(self, cursor: Cursor, words_seen: int, limit: int) -> StepsDone:
        """Train from ``cursor`` (``words_seen`` positions into the run) for at least one and
        at most ``limit`` steps, stopping early at most at the end of a chunk."""
        ...

    def close(self) -> None:
        """Stop whatever works ahead (a background producer)."""
        ...


class BatchReader:
    """The batches of ``stream`` in order from any cursor; the stream's iterator (and its
    background producer) is reopened only when asked for another cursor than where the last
    batch left off."""

    def __init__(self, stream: BatchStream) -> None:
        self.stream = stream
        self._batches: Iterator[Batch] | None = None
        self._next: Cursor | None = None  # where the batches of the open iterator continue

    def read(self, cursor: Cursor) -> Batch:
        if self._batches is None or cursor != self._next:
            self.close()
            self._batches = self.stream.iterate(cursor)
        batch = next(self._batches)
        self._next = batch.cursor_next
        return batch

    def close(self) -> None:
        if self._batches is not None:
            close = getattr(self._batches, "close", None)
            if close is not None:
                close()
            self._batches = None


class BatchByBatch:
    """One step per call, on the batches of ``stream`` (a background thread builds them)."""

    def __init__(self, stream: BatchStream, engine: Engine, schedule: Schedule,
                 model: str) -> None:
        self.stream, self.engine, self.schedule, self.model = stream, engine, schedule, model
        self._reader = BatchReader(stream)

    def run(self, cursor: Cursor, words_seen: int, limit: int) -> StepsDone:
        batch = self._reader.read(cursor)
        lr = self.schedule.at(words_seen)
        loss = float(self.engine.step(batch, lr))
        after = batch.cursor_next
        return StepsDone(np.array([loss]), np.array([pairs_in(batch, self.model)]),
                         np.array([batch.words_done]), np.array([lr]), lambda i: after)

    def close(self) -> None:
        self._reader.close()
