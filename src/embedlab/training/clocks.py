"""The loop's two clocks: training time (``train_seconds``) and wall-clock time of a run."""

from __future__ import annotations

import time

from embedlab.training.state import TrainState


class WallClock:
    """Wall-clock seconds of the invocations that trained the run, this one included.

    ``before``: those of earlier invocations up to the checkpoint resumed from (what an earlier
    one did after it is lost, like its training).
    """

    def __init__(self, before: float) -> None:
        self.before = before
        self.started = time.time()  # a date, for status.json
        # the elapsed time is the monotonic clock's: a wall clock set back or forward (NTP, a
        # suspended laptop's catch-up, an operator) must not give a run negative or days of
        # extra wall time, stored in its checkpoints for every later invocation to inherit
        self._since = time.monotonic()

    def seconds(self) -> float:
        return self.before + time.monotonic() - self._since


class TrainingTime:
    """Adds the time spent training to ``state.train_seconds``, leaving out what the loop does
    between steps by choice (saving checkpoints)."""

    def __init__(self, state: TrainState) -> None:
        self.state = state
        self.since = time.perf_counter()

    def lap(self) -> None:
        """Count the time since the last lap (or restart) as training."""
        now = time.perf_counter()
        self.state.train_seconds += now - self.since
        self.since = now

    def restart(self) -> None:
        """Training goes on now; the time since the last lap was not training."""
        self.since = time.perf_counter()
