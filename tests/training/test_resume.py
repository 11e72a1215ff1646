"""The acceptance test of exact resume: real processes stopped at random points.

For any interruption - SIGTERM, SIGINT, or SIGKILL at a random moment (including during a save,
since a checkpoint is written every step here) - re-running the same command must end with
final vectors bit-identical to an uninterrupted run's, and the same logged loss at every step.

Kill points are chosen by *progress* (the step in status.json, rewritten every step with
--log-every 1) plus a small random delay, not by wall-clock time alone, so the tests behave
the same on a loaded machine. Seeds make the points reproducible. A few cases run by default;
many more under ``-m slow``.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from embedlab.checkpoint import find_checkpoint
from embedlab.testing import write_zipf_corpus

pytestmark = pytest.mark.timeout(600)

FLAGS = ["--dim", "8", "--batch-size", "16", "--epochs", "2", "--threads", "1",
         "--no-tensorboard", "--log-every", "1", "--checkpoint-every", "1", "--keep", "3",
         "--no-progress"]
SAVED = re.compile(r"saved step (\d+) — re-run the same command to resume")


def write_corpus(path: Path, *, lines: int = 400, **kw: Any) -> Path:
    return write_zipf_corpus(path, lines=lines, **kw)


def command(run: Path, corpus: Path) -> list[str]:
    return [sys.executable, "-m", "embedlab", "train", "--run", str(run), "--corpus",
            str(corpus), *FLAGS]


def status_step(run: Path) -> int:
    try:
        return int(json.loads((run / "status.json").read_text())["step"])
    except (OSError, ValueError, KeyError):
        return -1


def run_and_signal(run: Path, corpus: Path, sig: int | None, *, at_step: int = 0,
                   delay: float = 0.0, after_start: float | None = None
                   ) -> tuple[int, str]:
    """Start the command; send ``sig`` once status.json shows ``at_step`` (then ``delay`` s),
    or ``after_start`` seconds after starting. Returns (exit code, stderr)."""
    proc = subprocess.Popen(command(run, corpus), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        if sig is not None:
            started = time.monotonic()
            while proc.poll() is None:
                if after_start is not None:
                    due = time.monotonic() - started >= after_start
                else:
                    due = status_step(run) >= at_step
                if due:
                    time.sleep(delay)
                    proc.send_signal(sig)
                    break
                time.sleep(0.002)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def losses(run: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["train/loss"] for r in rows if "train/loss" in r}


def final_bytes(run: Path) -> bytes:
    return (find_checkpoint(run) / "tensors.safetensors").read_bytes()


def assert_same_as_reference(run: Path, reference: Path) -> None:
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "finished"
    assert find_checkpoint(run).name == find_checkpoint(reference).name
    ours, theirs = losses(run), losses(reference)
    differ = [s for s in sorted(theirs) if ours.get(s) != theirs[s]]
    assert not differ and ours.keys() == theirs.keys(), f"loss differs from step {differ[:1]}"
    assert final_bytes(run) == final_bytes(reference)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "c.txt")


@pytest.fixture(scope="module")
def reference_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The same command, uninterrupted, in its own process; and its wall time in seconds."""
    run = tmp_path_factory.mktemp("ref") / "run"
    started = time.monotonic()
    code, err = run_and_signal(run, corpus, None)
    assert code == 0, err
    return run, time.monotonic() - started


@pytest.fixture(scope="module")
def reference(reference_run: tuple[Path, float]) -> Path:
    return reference_run[0]


@pytest.fixture(scope="module")
def total_steps(reference: Path) -> int:
    steps = status_step(reference)
    assert steps >= 100, "the corpus must give enough steps for random stop points"
    return steps


def _graceful_stop(run: Path, corpus: Path, total: int, sig: int, code: int) -> int:
    """Stop with ``sig`` at a random step; check exit code, message and checkpoint; the step."""
    rng = random.Random(int(sig))
    at = rng.randrange(5, total // 2)
    got, err = run_and_signal(run, corpus, sig, at_step=at, delay=rng.uniform(0, 0.02))
    # after a Ctrl-C the command ends as SIGINT's default action would (a shell's $? is 130)
    assert (128 - got if got == -signal.SIGINT else got) == code, err
    saved = SAVED.findall(err)
    assert len(saved) == 1, err
    step = int(saved[0])
    assert at <= step < total
    assert (run / "checkpoints" / f"ckpt-{step:08d}").is_dir()
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "interrupted" and status["step"] == step
    assert "Traceback" not in err
    return step


def test_sigint_saves_and_exits_130(corpus: Path, total_steps: int, tmp_path: Path) -> None:
    _graceful_stop(tmp_path / "run", corpus, total_steps, signal.SIGINT, 130)


def test_sigterm_saves_exits_143_and_resumes_exactly(corpus: Path, reference: Path,
                                                     total_steps: int, tmp_path: Path) -> None:
    run = tmp_path / "run"
    step = _graceful_stop(run, corpus, total_steps, signal.SIGTERM, 143)
    got, err = run_and_signal(run, corpus, None)
    assert got == 0, err
    assert f"(step {step})" in err  # resumed from the checkpoint the signal saved
    assert_same_as_reference(run, reference)


def _kill_and_resume(corpus: Path, reference: Path, total: int, run: Path, seed: int,
                     kills: int, *, early_within: float | None = None) -> None:
    rng = random.Random(seed)
    targets = sorted(rng.sample(range(1, total - 5), kills))
    killed = 0
    for i, at in enumerate(targets):
        # optionally the first kill lands at a random time after start: during interpreter
        # start-up, corpus preparation or the first steps. ``early_within``: an uninterrupted
        # run's wall time here, so the moment is early on a fast machine and on a slow one
        after = rng.uniform(0.1, 0.8) * early_within \
            if early_within is not None and i == 0 else None
        code, err = run_and_signal(run, corpus, signal.SIGKILL, at_step=at,
                                   delay=rng.uniform(0, 0.03), after_start=after)
        while code == 0 and after is not None and after > 0.05:
            # the reference was timed on a busier machine: the whole run ended before the early
            # kill; start it over and kill it sooner
            shutil.rmtree(run)
            after /= 2
            code, err = run_and_signal(run, corpus, signal.SIGKILL, at_step=at,
                                       after_start=after)
        if code == 0:
            break  # the run finished before the kill landed; the comparison still holds
        assert code == -signal.SIGKILL, err
        killed += 1
    assert killed >= 1, "no kill landed: the run is too short for this machine"
    code, err = run_and_signal(run, corpus, None)
    assert code == 0, err
    assert_same_as_reference(run, reference)


def test_sigkill_twice_at_random_steps_resumes_exactly(corpus: Path, reference: Path,
                                                       total_steps: int, tmp_path: Path) -> None:
    # --checkpoint-every 1: most of a step's time is spent saving, so kills land in saves too
    _kill_and_resume(corpus, reference, total_steps, tmp_path / "run", 11, kills=2)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 124))
def test_sigkill_many_random_points(corpus: Path, reference_run: tuple[Path, float],
                                    total_steps: int, tmp_path: Path, seed: int) -> None:
    reference, seconds = reference_run
    _kill_and_resume(corpus, reference, total_steps, tmp_path / "run", seed,
                     kills=1 + seed % 3, early_within=seconds if seed % 4 == 0 else None)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200, 206))
def test_sigterm_then_sigkill_mixed(corpus: Path, reference: Path, total_steps: int,
                                    tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    run = tmp_path / "run"
    a, b = sorted(rng.sample(range(3, total_steps - 5), 2))
    code, err = run_and_signal(run, corpus, signal.SIGTERM, at_step=a)
    assert code == 143, err
    code, err = run_and_signal(run, corpus, signal.SIGKILL, at_step=b,
                               delay=rng.uniform(0, 0.03))
    assert code in (0, -signal.SIGKILL), err
    code, err = run_and_signal(run, corpus, None)
    assert code == 0, err
    assert_same_as_reference(run, reference)
