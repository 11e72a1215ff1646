"""The loop's clocks: wall time that a changed system clock does not distort."""

from __future__ import annotations

import time

import pytest

from embedlab.training.clocks import WallClock


@pytest.mark.parametrize("jump", [-7200.0, 86400.0], ids=["set-back", "set-forward"])
def test_wall_time_ignores_a_system_clock_that_jumps(monkeypatch: pytest.MonkeyPatch,
                                                     jump: float) -> None:
    """The elapsed seconds come from the monotonic clock; the start stays a date."""
    real = time.time
    clock = WallClock(before=5.0)
    assert abs(clock.started - real()) < 5
    monkeypatch.setattr(time, "time", lambda: real() + jump)
    assert 5.0 <= clock.seconds() < 5.0 + 5
