"""When the loop saves: --checkpoint-every, --checkpoint-secs and the stretch by the time a
save takes, on a clock that only training steps advance."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.training import saving

from .small_runs import Clock, checkpoint_steps, make_cfg, run_train


def test_a_tiny_checkpoint_secs_saves_after_every_step(corpus: Path, tmp_path: Path,
                                                       clock: Clock) -> None:
    # No --checkpoint-every: only the clock decides. Each step takes 1 s >= 1e-9 s and saves
    # take no time, so every step is saved — the last one once, as the final checkpoint.
    cfg = make_cfg(corpus, checkpoint={"every_secs": 1e-9, "keep": 10**6})
    assert cfg.checkpoint.every_steps is None
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.finished and result.step > 10
    assert clock.saved == list(range(1, result.step + 1))
    assert checkpoint_steps(tmp_path / "run") == clock.saved  # written, not just attempted
    _, state = load_checkpoint(find_checkpoint(tmp_path / "run"))
    assert state["finished"] and state["step"] == result.step


def test_a_huge_checkpoint_secs_saves_only_the_final_step(corpus: Path, tmp_path: Path,
                                                          clock: Clock) -> None:
    cfg = make_cfg(corpus, checkpoint={"every_secs": 1e9, "keep": 10**6})
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.finished and result.step > 10
    assert clock.saved == [result.step]
    assert checkpoint_steps(tmp_path / "run") == [result.step]


@pytest.mark.parametrize(("every_secs", "save_seconds", "gap"), [
    (1.0, 0.001, 1),  # 50 × 1 ms < 1 s: --checkpoint-secs rules, a save each step
    (1.0, 0.09, 5),  # 50 × 0.09 s = 4.5 s: stretched to every 5th step (steps take 1 s)
    (3.0, 0.01, 3),  # 50 × 0.01 s = 0.5 s < 3 s: --checkpoint-secs rules
    (3.0, 0.15, 8),  # 50 × 0.15 s = 7.5 s > 3 s: the save's cost rules
])
def test_the_save_interval_stretches_with_the_time_a_save_takes(
        corpus: Path, tmp_path: Path, clock: Clock, every_secs: float, save_seconds: float,
        gap: int) -> None:
    # Checkpointing must stay under 1/SAVE_TIME_FACTOR of the time: after a save that took d
    # seconds the next time-based one waits max(--checkpoint-secs, SAVE_TIME_FACTOR · d).
    # Before the first save there is no d yet, so the first one comes after --checkpoint-secs.
    assert saving.SAVE_TIME_FACTOR == 50
    clock.save_seconds = save_seconds
    cfg = make_cfg(corpus, checkpoint={"every_secs": every_secs, "keep": 10**6})
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.finished and result.step > 3 * gap
    first = math.ceil(every_secs)
    expected = [*range(first, result.step, gap), result.step]
    assert clock.saved == expected
    assert checkpoint_steps(tmp_path / "run") == expected


def test_checkpoint_every_and_checkpoint_secs_whichever_comes_first(
        corpus: Path, tmp_path: Path, clock: Clock) -> None:
    # --checkpoint-every 10 and a 4 s cadence (steps take 1 s, saves nothing): both fire, and
    # a step-based save restarts the clock (4, 8, 10, 14, 18, 20, ...).
    cfg = make_cfg(corpus, checkpoint={"every_steps": 10, "every_secs": 4.0, "keep": 10**6})
    result, _ = run_train(cfg, tmp_path / "run")
    expected, last = [], 0
    for step in range(1, result.step):
        if step % 10 == 0 or step - last >= 4:
            expected.append(step)
            last = step
    assert clock.saved == [*expected, result.step]
    assert result.step > 20 and expected[:6] == [4, 8, 10, 14, 18, 20]




def test_vectors_that_overflow_while_evaluated_are_said_to_diverge(corpus: Path,
                                                                    tmp_path: Path) -> None:
    # the evaluation of vectors near float32's limit overflows: the save says the run
    # diverged, with no NumPy warning on the way (an error under this suite's filters)
    from embedlab.errors import InputError

    pairs = tmp_path / "ws.tsv"
    pairs.write_text("w0\tw1\t5\nw2\tw3\t2\nw4\tw5\t9\nw1\tw6\t1\n")
    cfg = make_cfg(corpus, model={"dim": 8, "init_scale": 1e30}, max_steps=20,
                   checkpoint={"every_steps": 1, "best_metric": "similarity/ws"},
                   eval={"similarity": [str(pairs)], "every_steps": 1})
    with pytest.raises(InputError, match=r"^training diverged by step \d+: "):
        run_train(cfg, tmp_path / "run")


def test_a_metric_that_is_not_a_number_is_left_out_of_the_checkpoint(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a checkpoint holds finite metrics only (CheckpointManager.save refuses others): a nan
    # evaluation ranks nothing, and the run goes on
    from embedlab.training.reporting import Reporter

    monkeypatch.setattr(Reporter, "checkpoint_metrics",
                        lambda self, evaluate=True: {"loss": 1.5, "analogy": math.nan})
    result, _ = run_train(make_cfg(corpus, checkpoint={"every_steps": 5}), tmp_path / "run")
    assert result.finished
    _, state = load_checkpoint(find_checkpoint(tmp_path / "run"))
    assert state["metrics"] == {"loss": 1.5}


def test_the_status_says_the_step_of_each_checkpoint(corpus: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With checkpoints more often than log windows, a kill -9 left status.json at the last
    window's step, behind the checkpoint it had saved ("runs": step 500, saved 523)."""
    from embedlab.run import status

    written: list[dict[str, Any]] = []
    real = status.write_status

    def recorded(run_dir: Path, **fields: Any) -> Any:
        written.append(fields)
        return real(run_dir, **fields)

    monkeypatch.setattr(status, "write_status", recorded)
    run_train(make_cfg(corpus, checkpoint={"every_steps": 3}, track={"log_every": 100},
                       max_steps=7), tmp_path / "run")
    saves = [f for f in written if "checkpoint" in f]
    assert [f["checkpoint"] for f in saves] == [3, 6, 7]
    assert all(f["step"] == f["checkpoint"] and f["words_seen"] > 0 for f in saves)
