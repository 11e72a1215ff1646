"""Small training runs for the tests of embedlab.training, and ways to steer them.

Runs use a tiny generated corpus (a Zipf vocabulary of 200 words) and dim 8, so each takes
about a second. The fixtures built on these are in conftest.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import types
from pathlib import Path
from typing import Any

import pytest

from embedlab.checkpoint import find_checkpoint
from embedlab.config import TrainConfig
from embedlab.testing import write_zipf_corpus
from embedlab.training import clocks, saving, state
from embedlab.training.state import TrainResult
from embedlab.training.trainer import train


def write_corpus(path: Path, *, lines: int = 500, **kw: Any) -> Path:
    return write_zipf_corpus(path, lines=lines, **kw)


def make_cfg(corpus: Path, **over: Any) -> TrainConfig:
    d: dict[str, Any] = {
        "data": {"corpus": str(corpus)},
        "model": {"dim": 8},
        "optim": {"batch_size": 32, "epochs": 1},
        "track": {"log_every": 1, "tensorboard": False, "progress": False},
        "threads": 1,
    }
    for key, value in over.items():
        if isinstance(value, dict):
            d.setdefault(key, {}).update(value)
        else:
            d[key] = value
    return TrainConfig.from_dict(d)


def run_train(cfg: TrainConfig, run: Path) -> tuple[TrainResult, str]:
    """Train in this process; (result, what it said, its warnings on stderr too)."""
    out = io.StringIO()
    with contextlib.redirect_stderr(out):
        result = train(cfg, run, argv=["test"], out=out)
    return result, out.getvalue()


def final_bytes(run: Path) -> bytes:
    return (find_checkpoint(run) / "tensors.safetensors").read_bytes()


def logged(run: Path, tag: str = "train/loss") -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r[tag] for r in rows if tag in r}


def checkpoint_steps(run: Path) -> list[int]:
    return sorted(int(p.name.removeprefix("ckpt-")) for p in (run / "checkpoints").glob("ckpt-*"))


def replace_clock(monkeypatch: pytest.MonkeyPatch, **functions: Any) -> None:
    """Replace functions of the ``time`` module (``perf_counter``, ``time``) wherever the
    training loop reads its clocks."""
    fake = types.SimpleNamespace(**{**vars(time), **functions})
    for module in (state, clocks, saving):
        monkeypatch.setattr(module, "time", fake)


class Clock:
    """The trainer's clock, advanced one second per training step and by nothing else.

    Saves take no time on it; ``save_seconds`` is what the manager then reports as the last
    save's duration. So which steps get a time-based checkpoint is a function of the config
    alone, never of how fast this machine happens to be."""

    def __init__(self, save_seconds: float) -> None:
        self.now = 1000.0
        self.save_seconds = save_seconds
        self.saved: list[int] = []

    def perf_counter(self) -> float:
        return self.now
