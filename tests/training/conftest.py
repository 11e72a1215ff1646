"""Fixtures of the trainer's tests: a corpus, a reference run, a clock that steps control."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from embedlab.testing import wrap_steps

from .small_runs import Clock, make_cfg, replace_clock, run_train, write_corpus


@pytest.fixture(scope="package")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "c.txt")


@pytest.fixture(scope="package")
def reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted 2-epoch run; other tests compare against it bit for bit."""
    run = tmp_path_factory.mktemp("ref") / "run"
    result, _ = run_train(make_cfg(corpus, optim={"epochs": 2}), run)
    assert result.finished and result.step > 50
    return run


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The loop's clock advances one second per step (see :class:`Clock`)."""
    from embedlab.checkpoint import CheckpointManager

    c = Clock(save_seconds=0.0)
    real_save = CheckpointManager.save

    def tick(step: Any) -> Any:
        def ticking(*a: Any, **k: Any) -> Any:
            c.now += 1.0
            return step(*a, **k)
        return ticking

    def timed_save(self: CheckpointManager, step: int, *args: Any, **kw: Any) -> Any:
        path = real_save(self, step, *args, **kw)
        c.saved.append(step)
        self.last_save_seconds = c.save_seconds
        return path

    replace_clock(monkeypatch, perf_counter=c.perf_counter)
    wrap_steps(monkeypatch, tick)
    monkeypatch.setattr(CheckpointManager, "save", timed_save)
    return c
