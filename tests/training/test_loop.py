"""The training loop, in process: determinism, --max-steps slices, resumes, signals, status.

Runs use the tiny corpus of small_runs.py; the subprocess kill cases live in test_resume.py.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.config import TrainConfig
from embedlab.data.pairs import PIECE_TOKENS
from embedlab.errors import TrainingInterrupted
from embedlab.testing import wrap_steps

from .small_runs import (
    checkpoint_steps,
    final_bytes,
    logged,
    make_cfg,
    replace_clock,
    run_train,
    write_corpus,
)


def test_same_config_gives_identical_bytes(corpus: Path, reference: Path,
                                           tmp_path: Path) -> None:
    result, _ = run_train(make_cfg(corpus, optim={"epochs": 2}), tmp_path / "again")
    assert result.finished
    assert final_bytes(tmp_path / "again") == final_bytes(reference)
    assert logged(tmp_path / "again") == logged(reference)


def test_another_seed_gives_other_vectors(corpus: Path, reference: Path,
                                          tmp_path: Path) -> None:
    run_train(make_cfg(corpus, optim={"epochs": 2}, seed=2), tmp_path / "s2")
    assert final_bytes(tmp_path / "s2") != final_bytes(reference)


def test_training_lowers_the_loss(reference: Path) -> None:
    loss = logged(reference)
    steps = sorted(loss)
    assert steps == list(range(1, len(steps) + 1))
    first, last = np.mean([loss[s] for s in steps[:10]]), np.mean([loss[s] for s in steps[-10:]])
    assert all(math.isfinite(v) for v in loss.values())
    assert last < first


def test_each_step_trains_at_the_rate_where_its_batch_starts(reference: Path) -> None:
    """word2vec's alpha for the words a step reads next: the first step at --lr exactly."""
    lr, progress = logged(reference, "train/lr"), logged(reference, "train/progress")
    lr0 = TrainConfig().optim.lr
    assert lr[1] == pytest.approx(lr0, rel=1e-12)
    for step in sorted(lr)[1:]:
        assert lr[step] == pytest.approx(lr0 * max(1e-4, 1.0 - progress[step - 1]), rel=1e-9)
    assert progress[max(progress)] == 1.0 and lr[max(lr)] > lr0 * 1e-4  # ends near the floor


@pytest.mark.parametrize("slices", [(17,), (25, 60)])
def test_max_steps_slices_are_bit_identical(corpus: Path, reference: Path, tmp_path: Path,
                                            slices: tuple[int, ...]) -> None:
    run = tmp_path / "run"
    for stop in slices:
        result, _ = run_train(make_cfg(corpus, optim={"epochs": 2}, max_steps=stop), run)
        assert result.step == stop and not result.finished
        status = json.loads((run / "status.json").read_text())
        assert status["step"] == stop and status["status"] == "interrupted"
    result, _ = run_train(make_cfg(corpus, optim={"epochs": 2}), run)
    assert result.finished
    assert final_bytes(run) == final_bytes(reference)
    assert logged(run) == logged(reference)
    assert logged(run, "train/lr") == logged(reference, "train/lr")  # schedule unchanged


@pytest.mark.parametrize("every", [None, 10])  # a step a checkpoint falls on, or not
def test_a_stop_at_max_steps_writes_the_projector_of_that_step(corpus: Path, tmp_path: Path,
                                                               every: int | None) -> None:
    """What --max-steps stops at is the end of what the run trains (the cs20 preset stops at
    100,000): its embeddings are in the projector, as the end of the data's are."""
    run = tmp_path / "run"
    cfg = make_cfg(corpus, optim={"epochs": 2}, max_steps=20,
                   checkpoint={"every_steps": every},
                   track={"tensorboard": True, "projector_words": 10})
    run_train(cfg, run)
    config = (run / "projector_config.pbtxt").read_text()
    assert 'tensor_path: "00020/input_embeddings/tensors.tsv"' in config
    assert checkpoint_steps(run) == ([10, 20] if every else [20])
    result, _ = run_train(make_cfg(corpus, optim={"epochs": 2},
                                   track={"tensorboard": True, "projector_words": 10}), run)
    assert result.finished  # the end's entry replaces the stop's: one folder of text, not one
    config = (run / "projector_config.pbtxt").read_text()  # for each slice of a run
    assert '"00020/' not in config and f'"{result.step:05d}/' in config
    assert sorted(p.name for p in run.iterdir() if p.name.isdigit()) == [f"{result.step:05d}"]


def test_max_steps_beyond_the_end_just_finishes(corpus: Path, reference: Path,
                                                tmp_path: Path) -> None:
    result, _ = run_train(make_cfg(corpus, optim={"epochs": 2}, max_steps=10**6), tmp_path / "r")
    assert result.finished and final_bytes(tmp_path / "r") == final_bytes(reference)


def assert_cut_run_resumes_exactly(corpus: Path, tmp_path: Path, stop: int,
                                   **over: Any) -> None:
    """A run stopped at step ``stop`` and resumed ends bit-identical, with the same logged
    losses, to one that ran through (in ``tmp_path / "whole"``)."""
    run_train(make_cfg(corpus, **over), tmp_path / "whole")
    run_train(make_cfg(corpus, **over, max_steps=stop), tmp_path / "cut")
    result, message = run_train(make_cfg(corpus, **over), tmp_path / "cut")
    assert result.finished and f"from ckpt-{stop:08d} (step {stop})" in message
    assert final_bytes(tmp_path / "cut") == final_bytes(tmp_path / "whole")
    assert logged(tmp_path / "cut") == logged(tmp_path / "whole")


@pytest.mark.parametrize(("model", "loss"), [("cbow", "neg"), ("skipgram", "nce")])
def test_other_models_resume_exactly(corpus: Path, tmp_path: Path, model: str,
                                     loss: str) -> None:
    assert_cut_run_resumes_exactly(corpus, tmp_path, 23, model={"model": model, "loss": loss})


def test_an_interleaved_reading_order_resumes_exactly(tmp_path: Path) -> None:
    """--interleave 2 on a corpus long enough to interleave (more than two 4,096-token pieces):
    a run cut at a step and resumed ends bit-identical to one that ran through."""
    big = write_corpus(tmp_path / "big.txt", lines=2000)
    assert len(big.read_text().split()) > 4 * PIECE_TOKENS
    assert_cut_run_resumes_exactly(big, tmp_path, 37, optim={"batch_size": 128, "interleave": 2})
    # the option reaches the batches: read in order, the same run trains other numbers
    run_train(make_cfg(big, optim={"batch_size": 128, "interleave": 1}), tmp_path / "ordered")
    assert final_bytes(tmp_path / "ordered") != final_bytes(tmp_path / "whole")


def test_micro_batches_in_the_chunk_order_resume_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Steps of 2 micro-batches, each from its own chunk: cut inside a group of chunks and
    resumed, the run ends bit-identical to one that ran through. (Chunks of 4,096 tokens here,
    so that a small corpus has several groups.)"""
    from embedlab.data.pairs import BatchStream

    monkeypatch.setitem(BatchStream.__init__.__kwdefaults__, "chunk_tokens", 4096)
    big = write_corpus(tmp_path / "big.txt", lines=2000)
    assert len(big.read_text().split()) > 4 * 4096  # 5 chunks: groups {0, 1}, {2, 3}, {4}
    over: dict[str, Any] = {"engine": "torch", "optim": {"batch_size": 64, "micro_batches": 2}}
    assert_cut_run_resumes_exactly(big, tmp_path, 37, **over)
    _, said = run_train(make_cfg(big, **over, max_steps=1), tmp_path / "one-step")
    assert "warning" not in said  # chunks enough for every step's 2
    monkeypatch.setitem(BatchStream.__init__.__kwdefaults__, "chunk_tokens", 1 << 18)
    _, said = run_train(make_cfg(big, **over, max_steps=1), tmp_path / "one-chunk")
    assert "fewer than --micro-batches 2: a step trains 1 micro-batch" in said
    state = json.loads(next((tmp_path / "cut" / "checkpoints").glob("ckpt-00000037"))
                       .joinpath("state.json").read_text())
    assert state["cursor"]["batch"] > 0, state  # the cut fell inside a group
    # the order reaches the batches: consecutive micro-batches train other numbers
    run_train(make_cfg(big, engine="torch", optim={"batch_size": 64, "micro_batches": 2,
                                                   "micro_order": "consecutive"}),
              tmp_path / "consecutive")
    assert final_bytes(tmp_path / "consecutive") != final_bytes(tmp_path / "whole")


def test_raising_epochs_continues_a_finished_run(corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    one, _ = run_train(make_cfg(corpus), run)
    assert one.finished
    two, _ = run_train(make_cfg(corpus, optim={"epochs": 2}), run)
    assert two.finished and two.step > one.step and two.words_seen == 2 * one.words_seen
    assert max(logged(run)) == two.step


def test_rerunning_a_finished_run_changes_nothing(corpus: Path, reference: Path,
                                                  tmp_path: Path) -> None:
    run = tmp_path / "run"
    first, _ = run_train(make_cfg(corpus), run)
    before = final_bytes(run)
    again, _ = run_train(make_cfg(corpus), run)
    assert again.finished and again.step == first.step and final_bytes(run) == before


# ---- a kill between two writes leaves nothing missing or doubled ---------------------------------


class _Killed(BaseException):
    """Stands in for SIGKILL: the process writes nothing more once it is raised."""


def _summary_steps(run: Path) -> dict[str, list[int]]:
    """Every TensorBoard tag with the steps it was logged at, in file order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    guidance = {"scalars": 0, "histograms": 0, "images": 0, "tensors": 0}
    ea = EventAccumulator(str(run), size_guidance=guidance).Reload()
    tags = ea.Tags()
    steps: dict[str, list[int]] = {}
    for kind, read in (("scalars", ea.Scalars), ("histograms", ea.Histograms),
                       ("images", ea.Images), ("tensors", ea.Tensors)):
        for tag in tags[kind]:
            steps[tag] = [e.step for e in read(tag)]
    return steps


@pytest.mark.parametrize("kill_after_step", [6, None], ids=["mid-run", "final"])
def test_a_kill_right_after_a_commit_resumes_with_every_summary_once(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        kill_after_step: int | None) -> None:
    # Killed after the final checkpoint was committed but before status.json said "finished":
    # the re-run must not just report "already finished" and leave the status "running" (and
    # the final summaries unwritten).
    from embedlab.checkpoint import CheckpointManager
    from embedlab.run import status as runs

    cfg = make_cfg(corpus, track={"tensorboard": True, "log_every": 2, "projector_words": 20},
                   checkpoint={"every_steps": 3})
    reference, _ = run_train(cfg, tmp_path / "ref")
    kill_at = kill_after_step or reference.step
    dead = False
    real_save, real_status = CheckpointManager.save, runs.write_status

    def save_then_die(self: CheckpointManager, step: int, *args: Any, **kw: Any) -> Any:
        nonlocal dead
        result = real_save(self, step, *args, **kw)
        if step == kill_at:
            dead = True
            raise _Killed
        return result

    def status_unless_dead(run_dir: Path, **fields: Any) -> dict[str, Any]:
        return {} if dead else real_status(run_dir, **fields)

    run = tmp_path / "run"
    monkeypatch.setattr(CheckpointManager, "save", save_then_die)
    monkeypatch.setattr(runs, "write_status", status_unless_dead)
    with pytest.raises(_Killed):
        run_train(cfg, run)
    assert json.loads((run / "status.json").read_text())["status"] == "running"
    monkeypatch.undo()

    again, message = run_train(cfg, run)
    assert again.finished and again.step == reference.step
    assert ("already finished" in message) == (kill_after_step is None)
    assert json.loads((run / "status.json").read_text())["status"] == "finished"
    assert final_bytes(run) == final_bytes(tmp_path / "ref")
    assert (run / "metrics.jsonl").read_text().count("\n") == \
        (tmp_path / "ref" / "metrics.jsonl").read_text().count("\n")
    assert logged(run) == logged(tmp_path / "ref")
    assert _summary_steps(run) == _summary_steps(tmp_path / "ref")


# ---- stability at high learning rates ------------------------------------------------------------


@pytest.mark.parametrize("engine", ["native", "torch"])
@pytest.mark.parametrize("lr", [0.1, 0.5])
def test_big_batches_stay_finite_at_high_learning_rates(tmp_path: Path, engine: str,
                                                        lr: float) -> None:
    """Frequent words get hundreds of contributions per 1024-centre step. With Gauss–Newton
    damping (σ' → 0 when a logit saturates on the wrong side) this diverges to NaN at these
    rates, with both engines; the |∂L/∂s| curvature keeps every row bounded."""
    corpus = write_corpus(tmp_path / "c.txt", lines=3000, vocab=300)
    cfg = make_cfg(corpus, data={"min_count": 1}, model={"dim": 16}, engine=engine,
                   optim={"lr": lr, "epochs": 3, "batch_size": 1024})
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.loss is not None and math.isfinite(result.loss)
    assert float(np.linalg.norm(result.w_in, axis=1).max()) < 10.0


# ---- stops, signals and the status ---------------------------------------------------------------


@pytest.mark.parametrize(("error", "status"), [(KeyboardInterrupt(), "interrupted"),
                                               (OSError(28, "No space left on device"), "failed")],
                         ids=["ctrl-c", "disk-full"])
def test_a_stop_while_opening_the_writers_is_recorded(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException,
        status: str) -> None:
    # Ctrl-C after "resuming ..." but before the first step (TensorBoard's writer opening) left
    # status.json at "running" for good; a failure there did too.
    from embedlab.run.status import read_status

    run = tmp_path / "run"
    cfg = make_cfg(corpus, max_steps=3)
    run_train(cfg, run)
    assert read_status(run)["status"] == "interrupted"  # stopped by --max-steps

    def failing(*args: Any, **kwargs: Any) -> None:
        raise error

    import embedlab.track.tracker as summaries

    monkeypatch.setattr(summaries, "open_tracker", failing)
    with pytest.raises(type(error)):
        run_train(make_cfg(corpus), run)
    assert read_status(run)["status"] == status
    assert read_status(run)["step"] == 3


@pytest.mark.parametrize("error", [KeyboardInterrupt(), OSError(28, "No space left on device")],
                         ids=["ctrl-c", "disk-full"])
def test_a_resume_stopped_before_it_saved_leaves_the_runs_records_as_they_were(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        error: BaseException) -> None:
    """A resume with --epochs raised, stopped while its writers opened: it said the run was as
    it was, yet config.json held the new --epochs (the command that made the run was then "a
    different config") and env.json a resume that trained nothing."""
    run = tmp_path / "run"
    run_train(make_cfg(corpus, max_steps=3), run)
    before = {name: (run / name).read_bytes() for name in ("config.json", "env.json")}

    def failing(*args: Any, **kwargs: Any) -> None:
        raise error

    import embedlab.track.tracker as summaries

    monkeypatch.setattr(summaries, "open_tracker", failing)
    with pytest.raises(type(error)):
        run_train(make_cfg(corpus, optim={"epochs": 2}), run)
    assert {name: (run / name).read_bytes() for name in before} == before
    monkeypatch.undo()
    result, _ = run_train(make_cfg(corpus, max_steps=5), run)  # the run's own command
    assert result.step == 5


def test_a_run_that_fails_mid_training_records_how_far_it_got(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fills at the second checkpoint, before any log window wrote progress: the
    status says the words and seconds trained, not the 0s of the start (``runs`` shows them)."""
    from embedlab.checkpoint.manager import CheckpointManager
    from embedlab.run.status import read_status

    save = CheckpointManager.save

    def full_at_10(self: CheckpointManager, step: int, *args: Any, **kwargs: Any) -> Any:
        if step == 10:
            raise OSError(28, "No space left on device")
        return save(self, step, *args, **kwargs)

    monkeypatch.setattr(CheckpointManager, "save", full_at_10)
    with pytest.raises(OSError):
        run_train(make_cfg(corpus, checkpoint={"every_steps": 5},
                           track={"log_every": 1000}), tmp_path / "run")
    status = read_status(tmp_path / "run")
    assert (status["status"], status["step"]) == ("failed", 10)
    assert status["words_seen"] > 0 and status["train_seconds"] > 0 and status["wall_time"] > 0


def test_a_status_that_cannot_be_written_leaves_the_failure_that_stopped_the_run(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk that failed a save also refuses the "failed" status: the error raised is the
    save's, which names the problem and its fix, not the status file's."""
    from embedlab.checkpoint.manager import CheckpointManager
    from embedlab.run import status

    save, write_status = CheckpointManager.save, status.write_status

    def full_at_10(self: CheckpointManager, step: int, *args: Any, **kwargs: Any) -> Any:
        if step == 10:
            raise OSError(28, "No space left on device (the save)")
        return save(self, step, *args, **kwargs)

    def no_failed_status(run_dir: Path, **fields: Any) -> Any:
        if fields.get("status") == "failed":
            raise OSError(28, "No space left on device (the status)", "status.json")
        return write_status(run_dir, **fields)

    monkeypatch.setattr(CheckpointManager, "save", full_at_10)
    monkeypatch.setattr(status, "write_status", no_failed_status)
    with pytest.raises(OSError, match=r"\(the save\)"):
        run_train(make_cfg(corpus, checkpoint={"every_steps": 5}), tmp_path / "run")
    assert status.read_status(tmp_path / "run")["status"] == "running"


@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "new-run"])
@pytest.mark.parametrize("signum", [2, 15], ids=["sigint", "sigterm"])
def test_a_signal_while_the_writers_open_is_handled(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int,
        fresh: bool) -> None:
    # SIGTERM after status.json said "running" but before the handlers were in place (opening
    # the writers) killed the process silently: "running" and the lock stayed behind.
    from embedlab.errors import TrainingInterrupted
    from embedlab.run.status import read_status
    from embedlab.testing import signal_while_writers_open

    run = tmp_path / "run"
    if not fresh:
        run_train(make_cfg(corpus, max_steps=3), run)
    signal_while_writers_open(monkeypatch, signum)
    with pytest.raises(TrainingInterrupted) as e:
        run_train(make_cfg(corpus), run)
    assert e.value.exit_code == 128 + signum
    if fresh:  # nothing trained, nothing saved: no folder to mistake for a run
        assert str(e.value) == "stopped before training began; no checkpoint was saved"
        assert not run.exists()
    else:
        assert str(e.value).startswith("saved step 3 ")
        status = read_status(run)
        assert (status["status"], status["step"]) == ("interrupted", 3)
        _, state = load_checkpoint(find_checkpoint(run))
        assert status["wall_time"] == state["wall_seconds"]  # what the checkpoint holds
        assert not (run / ".lock").exists()


def test_status_of_an_interrupted_run_matches_its_checkpoint(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the signal path wrote the step but not the words seen (nor wall time): the runs table
    # showed the words of the last log row against the saved step
    import os

    from embedlab.errors import TrainingInterrupted
    from embedlab.run.status import read_status

    def step_then_signal(inner: Any) -> Any:
        calls = [0]

        def call(*a: Any, **k: Any) -> Any:
            calls[0] += 1
            if calls[0] == 7:
                os.kill(os.getpid(), 15)
            return inner(*a, **k)
        return call

    wrap_steps(monkeypatch, step_then_signal)
    run = tmp_path / "run"
    with pytest.raises(TrainingInterrupted):
        run_train(make_cfg(corpus, track={"log_every": 5}), run)
    status = read_status(run)
    _, state = load_checkpoint(find_checkpoint(run))
    assert status["step"] == state["step"] == 7
    assert status["words_seen"] == state["words_seen"]
    assert status["wall_time"] == state["wall_seconds"] > 0


def test_wall_time_adds_up_over_resumes_and_a_new_attempt_clears_the_error(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # wall_time was the last invocation's alone (7 s of a 14 s run), and a run that failed
    # once kept its "error" after finishing
    from embedlab.run.status import read_status, write_status

    now = [1e9]

    def ticking() -> float:  # every reading of the wall clock is 10 s after the last
        now[0] += 10.0
        return now[0]

    replace_clock(monkeypatch, monotonic=ticking)  # the wall time's clock (WallClock)
    run = tmp_path / "run"
    run_train(make_cfg(corpus, max_steps=5), run)
    _, cut = load_checkpoint(find_checkpoint(run))
    assert cut["wall_seconds"] >= 10.0
    write_status(run, status="failed", error="injected disk failure")
    result, _ = run_train(make_cfg(corpus), run)
    assert result.finished
    _, final = load_checkpoint(find_checkpoint(run))
    assert final["wall_seconds"] >= cut["wall_seconds"] + 10.0  # the first invocation counts
    status = read_status(run)
    assert status["status"] == "finished" and "error" not in status
    assert status["wall_time"] >= final["wall_seconds"]


# ---- many steps per call (the native engine's own batches) -----------------------------------

MANY = {"track": {"log_every": 40}, "checkpoint": {"every_steps": 10**6, "every_secs": 3600}}


@pytest.mark.parametrize("over", [
    {"model": {"model": "skipgram", "loss": "neg"}},
    {"model": {"model": "cbow", "loss": "nce"}},
    {"model": {"model": "skipgram", "loss": "hs", "negative": 0}},
], ids=["skipgram-neg", "cbow-nce", "skipgram-hs"])
def test_runs_cut_inside_a_call_resume_exactly(corpus: Path, tmp_path: Path,
                                               over: dict[str, Any]) -> None:
    # calls train up to 32 steps; cuts at 37 and 70 fall inside calls of an uninterrupted run
    cfg = {**MANY, **over, "optim": {"epochs": 2}}
    whole, _ = run_train(make_cfg(corpus, **cfg), tmp_path / "whole")
    for stop in (37, 70):
        result, _ = run_train(make_cfg(corpus, **cfg, max_steps=stop), tmp_path / "cut")
        assert result.step == stop
    result, _ = run_train(make_cfg(corpus, **cfg), tmp_path / "cut")
    assert result.finished and result.step == whole.step > 100
    assert final_bytes(tmp_path / "cut") == final_bytes(tmp_path / "whole")
    assert logged(tmp_path / "cut") == logged(tmp_path / "whole")


def _after_each_call(monkeypatch: pytest.MonkeyPatch, then: Any) -> list[int]:
    """Make the native engine's step runner call ``then(calls so far, what the call did)`` after
    each call; the list it returns fills with each call's steps."""
    from embedlab.engines.native_batches import NativeBatches

    real, steps = NativeBatches.run, []

    def run(self: NativeBatches, *args: Any) -> Any:
        done = real(self, *args)
        steps.append(len(done))
        then(len(steps), done)
        return done

    monkeypatch.setattr(NativeBatches, "run", run)
    return steps


@pytest.mark.parametrize("signum", [15, 1], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_during_a_call_saves_the_step_the_call_ended_at(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    # SIGHUP (a terminal or ssh connection that hangs up) killed the run like kill -9: status
    # "running" and a half-written checkpoint left behind
    import os

    from embedlab.errors import TrainingInterrupted

    def third_call_signals(calls: int, done: Any) -> None:
        if calls == 3:  # as if the signal came while the third call trained
            os.kill(os.getpid(), signum)

    cfg = make_cfg(corpus, **MANY, optim={"epochs": 2})
    run_train(cfg, tmp_path / "whole")
    with monkeypatch.context() as m:
        steps = _after_each_call(m, third_call_signals)
        with pytest.raises(TrainingInterrupted) as stopped:
            run_train(cfg, tmp_path / "cut")
    assert stopped.value.exit_code == 128 + signum
    assert max(steps) > 1  # many steps per call, not one
    _, state = load_checkpoint(find_checkpoint(tmp_path / "cut"))
    assert state["step"] == sum(steps[:3])
    result, _ = run_train(cfg, tmp_path / "cut")
    assert result.finished
    assert final_bytes(tmp_path / "cut") == final_bytes(tmp_path / "whole")
    assert logged(tmp_path / "cut") == logged(tmp_path / "whole")


def test_a_loss_that_is_not_finite_inside_a_call_stops_at_its_step(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.errors import InputError

    def nan_in_the_second_call(calls: int, done: Any) -> None:
        if calls == 2:
            done.losses[3] = float("nan")

    steps = _after_each_call(monkeypatch, nan_in_the_second_call)
    with pytest.raises(InputError, match=r"training diverged at step (\d+)") as e:
        run_train(make_cfg(corpus, **MANY, optim={"epochs": 2}), tmp_path / "run")
    assert steps[1] > 4
    assert f"diverged at step {steps[0] + 4}:" in str(e.value)


@pytest.mark.usefixtures("cli_messages")  # the words a command gives
def test_vectors_that_overflow_are_never_saved_though_the_loss_stays_finite(
        corpus: Path, tmp_path: Path) -> None:
    """Scores are clipped at ±6, so a start far too wide overflows the output vectors to inf/nan
    while every step's loss stays finite: the save refuses them, keeping the finite ones."""
    from embedlab.errors import InputError

    cfg = make_cfg(corpus, model={"dim": 8, "init_scale": 1e30}, max_steps=20,
                   checkpoint={"every_steps": 1})
    with pytest.raises(InputError) as e:
        run_train(cfg, tmp_path / "run")
    message = str(e.value)
    assert re.fullmatch(
        r"training diverged by step (\d+): (in|out)put_embeddings holds nan or inf values, "
        r"though the loss stayed finite; (checkpoints up to step \d+ are intact|no checkpoint "
        r"was written)\. Start over with a lower learning rate, e\.g\. --restart --lr 0\.00625, "
        r"or start the vectors narrower: --init-scale 1e\+30 is wider than the default 8",
        message), message
    saved = sorted((tmp_path / "run" / "checkpoints").glob("ckpt-*")) \
        if (tmp_path / "run").exists() else []
    for folder in saved:
        tensors, _ = load_checkpoint(folder)
        assert all(np.isfinite(t).all() for t in tensors.values())


def test_a_run_whose_checkpoints_folder_is_deleted_while_it_trains_is_kept(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure of a new run before its first checkpoint removes the folder (nothing worth
    keeping); one that had saved, and lost checkpoints/ to a hand's rm, keeps its config,
    metrics and events for what can still be saved of it."""
    import shutil

    from embedlab.errors import InputError

    run = tmp_path / "run"

    def remove_checkpoints(calls: int, done: Any) -> None:
        if calls == 3:  # gone, and a file in its place: the next save fails
            shutil.rmtree(run / "checkpoints")
            (run / "checkpoints").write_text("")

    _after_each_call(monkeypatch, remove_checkpoints)
    cfg = make_cfg(corpus, track={"log_every": 40}, checkpoint={"every_steps": 2},
                   optim={"epochs": 2})
    with pytest.raises(InputError, match="could not save checkpoint"):
        run_train(cfg, run)
    assert (run / "config.json").is_file() and (run / "metrics.jsonl").is_file()


def test_rerunning_a_finished_run_with_other_flags_records_nothing(corpus: Path,
                                                                   tmp_path: Path) -> None:
    # a finished run re-run with another --best-metric got it in config.json (and a resume in
    # env.json) though nothing trained and its index's best was chosen by the loss
    run = tmp_path / "run"
    first, _ = run_train(make_cfg(corpus), run)
    before = {name: (run / name).read_bytes() for name in ("config.json", "env.json")}
    again, _ = run_train(make_cfg(corpus, checkpoint={"best_metric": "loss:max"}), run)
    assert again.finished and again.step == first.step
    assert {name: (run / name).read_bytes() for name in before} == before


def test_a_call_that_trains_nothing_names_the_settings_it_did_not_apply(
        corpus: Path, tmp_path: Path) -> None:
    # they were ignored in silence (before, config.json took them though the index did not)
    run = tmp_path / "run"
    run_train(make_cfg(corpus), run)
    _, said = run_train(make_cfg(corpus, checkpoint={"best_metric": "loss:max", "keep": 1}), run)
    assert "note: --best-metric, --keep not applied: this call trains nothing, and the run " \
        "keeps its settings (they take effect in a call that trains, e.g. with a larger " \
        "--epochs)" in said
    _, said = run_train(make_cfg(corpus), run)
    assert "not applied" not in said
    # a run at its --max-steps trains on with more of them, not with more epochs
    halfway = tmp_path / "halfway"
    run_train(make_cfg(corpus, max_steps=3), halfway)
    _, said = run_train(make_cfg(corpus, max_steps=3, track={"log_every": 7}), halfway)
    assert "note: --log-every not applied: this call trains nothing, and the run keeps its " \
        "settings (they take effect in a call that trains, e.g. with a larger --max-steps or " \
        "none)" in said
    watched = tmp_path / "watched"
    run_train(make_cfg(corpus, track={"tensorboard": True}), watched)
    _, said = run_train(make_cfg(corpus, track={"tensorboard": False}), watched)
    assert "note: --no-tensorboard not applied" in said  # as given, not --tensorboard


def test_keep_every_zero_on_a_resume_archives_no_more(corpus: Path, tmp_path: Path) -> None:
    from embedlab.checkpoint import read_index

    run = tmp_path / "run"
    run_train(make_cfg(corpus, checkpoint={"every_steps": 2, "keep": 1, "keep_every": 4},
                       max_steps=9), run)
    archived = read_index(run).archive
    assert archived and all(s % 4 == 0 for s in archived)
    result, _ = run_train(make_cfg(corpus, checkpoint={"every_steps": 2, "keep": 1,
                                                       "keep_every": 0}), run)
    assert read_index(run).archive == archived  # those before stay; none after step 9
    assert result.finished and result.step >= 16  # steps 12 and 16 were saved, not archived


def test_the_same_evaluation_file_spelled_relative_is_no_unapplied_setting(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # config.json's "qw.txt" against the call's absolute path read as another file
    monkeypatch.chdir(tmp_path)
    Path("qw.txt").write_text(": s\nw1 w2 w3 w4\n")
    run = tmp_path / "run"
    run_train(make_cfg(corpus, eval={"analogies": "qw.txt"}), run)
    _, said = run_train(make_cfg(corpus, eval={"analogies": str(tmp_path / "qw.txt")}), run)
    assert "not applied" not in said


def test_a_signal_during_a_periodic_save_stops_at_that_save(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the run trained on to the next call's end and saved a second time: a shutdown twice as
    # long as the scheduler's kill-wait had to allow
    import os

    from embedlab.errors import TrainingInterrupted
    from embedlab.training.saving import Saver

    cfg = make_cfg(corpus, **{**MANY, "checkpoint": {"every_steps": 40, "every_secs": 3600}},
                   optim={"epochs": 2})
    run_train(cfg, tmp_path / "whole")
    real = Saver.save

    def save(self: Saver, *args: Any, **kwargs: Any) -> float:
        if not kwargs.get("stopping") and self.run.state.step == 40:
            os.kill(os.getpid(), 15)  # as if SIGTERM came while the checkpoint was written
        return real(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(Saver, "save", save)
        with pytest.raises(TrainingInterrupted) as stopped:
            run_train(cfg, tmp_path / "cut")
    assert stopped.value.exit_code == 143
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()) == \
        ["ckpt-00000040"]
    result, _ = run_train(cfg, tmp_path / "cut")
    assert result.finished
    assert final_bytes(tmp_path / "cut") == final_bytes(tmp_path / "whole")
    assert logged(tmp_path / "cut") == logged(tmp_path / "whole")



def _end_records(run: Path) -> tuple[list[Any], list[tuple[int, str]]]:
    """final/* rows of metrics.jsonl, and (step, tag) of the events' final/* and hparams."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from embedlab.track.jsonl import METRICS_FILE, read_metrics

    rows = [r for r in read_metrics(run / METRICS_FILE) if any(k.startswith("final/") for k in r)]
    tags = sorted((e.step, v.tag) for path in sorted(run.glob("events.out.tfevents.*"))
                  for e in EventFileLoader(str(path)).Load() for v in e.summary.value
                  if v.tag.startswith(("final/", "_hparams_/")))
    return [{k: v for k, v in r.items() if k != "time"} for r in rows], tags


def test_an_epochs_raise_stopped_before_it_saved_keeps_the_finished_runs_end_records(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a finished run's larger --epochs opens its writers, which drop its final/*
    records and hparams: the config goes back to the old --epochs, and a re-run finds the run
    finished and writes nothing, so the stop must write them again."""
    import os
    import signal

    from embedlab.run.status import read_status

    run = tmp_path / "run"
    cfg = make_cfg(corpus, track={"tensorboard": True})
    run_train(cfg, run)
    rows, tags = _end_records(run)
    assert rows and ("_hparams_/session_start_info" in {t for _, t in tags})
    before = {name: (run / name).read_bytes() for name in ("config.json", "env.json")}

    import embedlab.track.tracker as summaries

    real = summaries.open_tracker

    def opened_then_stopped(*args: Any, **kwargs: Any) -> Any:
        tracker = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # what the trainer's handler catches
        return tracker

    monkeypatch.setattr(summaries, "open_tracker", opened_then_stopped)
    with pytest.raises(TrainingInterrupted, match=r"^stopped before training on: the run is "
                                                  r"as it was, finished at step"):
        run_train(make_cfg(corpus, optim={"epochs": 2}, track={"tensorboard": True}), run)
    monkeypatch.undo()
    assert {name: (run / name).read_bytes() for name in before} == before
    assert _end_records(run) == (rows, tags)
    assert read_status(run)["status"] == "finished"


@pytest.mark.parametrize("where", ["set_up", "loop"])
def test_a_stop_between_the_set_up_and_the_loop_leaves_the_config_as_it_was(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A signal just after the "--epochs N (was M)" line leaves config.json as it was: with the
    new --epochs kept, the command that made the run would be "a different config"."""
    from embedlab.training import setup, trainer

    run = tmp_path / "run"
    run_train(make_cfg(corpus), run)
    before = {name: (run / name).read_bytes() for name in ("config.json", "env.json")}

    def stopped(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    if where == "set_up":
        monkeypatch.setattr(setup, "write_env_json", stopped)
    else:
        monkeypatch.setattr(trainer, "train_loop", stopped)
    with pytest.raises(KeyboardInterrupt):
        run_train(make_cfg(corpus, optim={"epochs": 2}), run)
    monkeypatch.undo()
    assert {name: (run / name).read_bytes() for name in before} == before
    result, said = run_train(make_cfg(corpus), run)  # the run's own command
    assert result.finished and "already finished" in said


def test_an_epochs_raise_that_trained_then_failed_says_failed(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a stop before any step writes the end records again: a run that trained on and
    failed at its save is failed, at the step it saved last, with no final/* beyond it."""
    import errno

    from embedlab.checkpoint import CheckpointManager
    from embedlab.run.status import read_status

    run = tmp_path / "run"
    first, _ = run_train(make_cfg(corpus, track={"tensorboard": True}), run)

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(CheckpointManager, "save", full)
    with pytest.raises(Exception):  # noqa: B017 - the disk's error, however it is worded
        run_train(make_cfg(corpus, optim={"epochs": 2}, track={"tensorboard": True}), run)
    monkeypatch.undo()
    now = read_status(run)
    assert now["status"] == "failed" and now["checkpoint"] == first.step
    rows, _ = _end_records(run)
    assert all(r["step"] <= first.step for r in rows)


def test_a_lost_process_leaves_a_status_of_one_moment(corpus: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """status.json after another process is lost: the step, its words and its loss are those of
    the last step trained (the words and loss of the last logged window beside a later step
    disagree in `embedlab runs`)."""
    from embedlab.errors import ProcessLost
    from embedlab.training import loop

    cfg = make_cfg(corpus, track={"log_every": 7}, checkpoint={"every_steps": 2})
    done, _ = run_train(cfg, tmp_path / "whole")
    whole = json.loads((tmp_path / "whole" / "status.json").read_text())
    assert done.step % 7  # the last step is in no logged window

    def lost(*args: Any, **kwargs: Any) -> None:
        raise ProcessLost("another process of the run stopped", 1)

    monkeypatch.setattr(loop, "_finish", lost)
    with pytest.raises(ProcessLost):
        run_train(cfg, tmp_path / "lost")
    status = json.loads((tmp_path / "lost" / "status.json").read_text())
    assert status["status"] == "interrupted" and status["step"] == whole["step"]
    assert status["words_seen"] == whole["words_seen"]
