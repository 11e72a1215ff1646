from __future__ import annotations

from pathlib import Path

import pytest

from .fakerun import simulate


@pytest.fixture(scope="session")
def fresh_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fake run (50 steps, checkpoints at 25 and 50) shared by the read-only tests."""
    run = tmp_path_factory.mktemp("fresh") / "run"
    simulate(run, steps=50, ckpt_every=25)
    return run
