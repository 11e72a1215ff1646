"""The training loop, in process: determinism, --max-steps slices, warm start, messages.

Runs use a tiny generated corpus (a Zipf vocabulary of 200 words) and dim 8, so each takes
about a second. The subprocess and signal cases live in test_resume.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.config import TrainConfig
from embedlab.data.pairs import PIECE_TOKENS
from embedlab.data.vocab import Vocab
from embedlab.engines import build_engine
from embedlab.engines import params as params_module
from embedlab.engines.params import init_params
from embedlab.engines.step import StepConfig
from embedlab.errors import InputError
from embedlab.seeding import mt19937_rng
from embedlab.testing import write_zipf_corpus
from embedlab.train import trainer as trainer_module
from embedlab.train.trainer import TrainResult, train, warm_start


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
    out = io.StringIO()
    result = train(cfg, run, argv=["test"], out=out)
    return result, out.getvalue()


def final_bytes(run: Path) -> bytes:
    return (find_checkpoint(run) / "tensors.safetensors").read_bytes()


def wrap_steps(monkeypatch: pytest.MonkeyPatch, wrap: Any) -> None:
    """Make every engine a run builds train through ``wrap(engine.step)``."""
    real = trainer_module.engine_for_config

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        engine = real(*args, **kwargs)
        engine.step = wrap(engine.step)
        return engine

    monkeypatch.setattr(trainer_module, "engine_for_config", wrapped)


def logged(run: Path, tag: str = "train/loss") -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r[tag] for r in rows if tag in r}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "c.txt")


@pytest.fixture(scope="module")
def reference(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted 2-epoch run; other tests compare against it bit for bit."""
    run = tmp_path_factory.mktemp("ref") / "run"
    result, _ = run_train(make_cfg(corpus, optim={"epochs": 2}), run)
    assert result.finished and result.step > 50
    return run


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


def test_state_holds_the_data_position(corpus: Path, tmp_path: Path) -> None:
    run_train(make_cfg(corpus, max_steps=9), tmp_path / "r")
    tensors, state = load_checkpoint(find_checkpoint(tmp_path / "r"))
    assert state["step"] == 9 and state["words_seen"] > 0
    assert set(state["cursor"]) == {"epoch", "chunk", "batch"} and state["epoch"] == 0
    assert set(tensors) == {"input_embeddings", "output_embeddings"}
    assert tensors["input_embeddings"].dtype == np.float32


def test_too_few_tokens_is_an_input_error(tmp_path: Path) -> None:
    corpus = tmp_path / "one.txt"
    corpus.write_text("hello\n")
    with pytest.raises(InputError, match="fewer than a window needs"):
        run_train(make_cfg(corpus, data={"min_count": 1}), tmp_path / "r")


# ---- warm start ------------------------------------------------------------------------------

def _overlapping_corpus(tmp_path: Path) -> Path:
    """A corpus sharing w0..w99 with the reference's vocabulary and adding x0..x99."""
    other = tmp_path / "other.txt"
    text = write_corpus(tmp_path / "a.txt", lines=300, vocab=100, seed=5).read_text()
    text += write_corpus(tmp_path / "b.txt", lines=300, vocab=100, seed=6, prefix="x").read_text()
    other.write_text(text)
    return other


def _engine(params: Any) -> Any:
    """A native engine training ``params`` (what a run's set-up builds)."""
    return build_engine("native", StepConfig("skipgram", "neg", 5, 5, 16), params, None, 16)


def test_warm_start_copies_shared_rows_only(reference: Path, tmp_path: Path) -> None:
    src_vocab = Vocab.load_tsv(reference / "vocab.tsv")
    src, _ = load_checkpoint(find_checkpoint(reference))
    words = ("w0", "w3", "new1", "w7", "new2")
    vocab = Vocab(words, np.array([9, 8, 7, 6, 5], dtype=np.int64), None)
    params = init_params(len(vocab), 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    fresh_in, fresh_out = params.w_in.copy(), params.w_out.copy()
    message = warm_start(_engine(params), vocab, str(reference))
    assert "copied 3 of 5 words' rows" in message and "2 new words" in message
    for i, w in enumerate(words):
        j = src_vocab.id(w)
        if j is None:
            assert np.array_equal(params.w_in[i], fresh_in[i])
            assert np.array_equal(params.w_out[i], fresh_out[i])
        else:
            assert np.array_equal(params.w_in[i], src["input_embeddings"][j])
            assert np.array_equal(params.w_out[i], src["output_embeddings"][j])


def test_warm_start_refuses_another_dim(reference: Path) -> None:
    vocab = Vocab(("w0",), np.array([5], dtype=np.int64), None)
    params = init_params(1, 4, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    with pytest.raises(InputError, match="has dim 8, this run 4; pass a matching --dim"):
        warm_start(_engine(params), vocab, str(reference))


def test_init_from_says_what_was_copied(reference: Path, tmp_path: Path) -> None:
    other = _overlapping_corpus(tmp_path)
    cfg = make_cfg(other, init_from=str(reference), max_steps=1)
    result, message = run_train(cfg, tmp_path / "warm")
    src_vocab = Vocab.load_tsv(reference / "vocab.tsv")
    expected = sum(1 for w in result.vocab.words if src_vocab.id(w) is not None)
    assert 10 < expected < len(result.vocab)
    assert f"copied {expected} of {len(result.vocab)} words' rows" in message


# ---- messages go where the caller's stderr is ------------------------------------------------

def test_messages_follow_the_current_stderr(corpus: Path, tmp_path: Path) -> None:
    # train()'s `out` must default to sys.stderr *at call time*: a default bound at import
    # time writes to whatever stream existed then (a closed capture, a replaced notebook stream).
    run = tmp_path / "r"
    train(make_cfg(corpus, max_steps=3), run, argv=["test"], out=io.StringIO())
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        train(make_cfg(corpus, max_steps=5), run, argv=["test"])
    assert "resuming" in buf.getvalue() and "(step 3)" in buf.getvalue()


# ---- a kill between two writes leaves nothing missing or doubled -----------------------------

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
    # The race the random-kill tests found once in CI: killed after the final checkpoint was
    # committed but before status.json said "finished", the re-run used to report "already
    # finished" and leave the status "running" (and the final summaries unwritten).
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


# ---- stability at high learning rates ---------------------------------------------------------

@pytest.mark.parametrize("engine", ["native", "torch"])
@pytest.mark.parametrize("lr", [0.1, 0.5])
def test_big_batches_stay_finite_at_high_learning_rates(tmp_path: Path, engine: str,
                                                        lr: float) -> None:
    """Frequent words get hundreds of contributions per 1024-centre step. With Gauss–Newton
    damping (σ' → 0 when a logit saturates on the wrong side) this diverged to NaN from
    lr 0.05 on (measured: loss 196 at 0.05, NaN at 0.1 and 0.5, both engines); the |∂L/∂s|
    curvature keeps every row bounded."""
    corpus = write_corpus(tmp_path / "c.txt", lines=3000, vocab=300)
    cfg = make_cfg(corpus, data={"min_count": 1}, model={"dim": 16}, engine=engine,
                   optim={"lr": lr, "epochs": 3, "batch_size": 1024})
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.loss is not None and math.isfinite(result.loss)
    assert float(np.linalg.norm(result.w_in, axis=1).max()) < 10.0


def test_a_resume_by_another_step_revision_warns(tmp_path: Path) -> None:
    from embedlab.engines import STEP_REVISION

    corpus = write_corpus(tmp_path / "c.txt")
    run = tmp_path / "run"
    run_train(make_cfg(corpus, max_steps=3), run)
    env = json.loads((run / "env.json").read_text())
    assert env["step_revision"] == STEP_REVISION
    _, out = run_train(make_cfg(corpus, max_steps=6), run)
    assert "warning" not in out  # same revision: silent
    del env["step_revision"]  # as written before revisions were recorded
    (run / "env.json").write_text(json.dumps(env))
    _, out = run_train(make_cfg(corpus), run)
    warnings = [line for line in out.splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert f"revision 1, this is revision {STEP_REVISION} (damping by |dL/ds|" in warnings[0]
    assert "--restart" in warnings[0]


@pytest.mark.parametrize(("model", "given", "used"), [
    ("skipgram", 0.0, 8.0), ("cbow", 0.0, 12.0), ("cbow", 3.0, 3.0)])
def test_the_start_takes_the_models_default_init_scale(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, given: float,
        used: float) -> None:
    scales: list[float] = []

    def spy(*args: Any, **kw: Any) -> Any:
        scales.append(kw["scale"])
        return init_params(*args, **kw)

    monkeypatch.setattr(params_module, "init_params", spy)
    cfg = make_cfg(corpus, model={"model": model, "init_scale": given}, max_steps=1)
    run_train(cfg, tmp_path / "run")
    assert scales == [used]
    stored = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    assert stored["model"]["init_scale"] == given  # 0 stays "the default" in the record


# ---- time-based checkpoints ------------------------------------------------------------------

class _Clock:
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


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    import time
    import types

    from embedlab.checkpoint import CheckpointManager

    c = _Clock(save_seconds=0.0)
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

    monkeypatch.setattr(trainer_module, "time",
                        types.SimpleNamespace(**{**vars(time), "perf_counter": c.perf_counter}))
    wrap_steps(monkeypatch, tick)
    monkeypatch.setattr(CheckpointManager, "save", timed_save)
    return c


def _checkpoint_steps(run: Path) -> list[int]:
    return sorted(int(p.name.removeprefix("ckpt-")) for p in (run / "checkpoints").glob("ckpt-*"))


def test_a_tiny_checkpoint_secs_saves_after_every_step(corpus: Path, tmp_path: Path,
                                                       clock: _Clock) -> None:
    # No --checkpoint-every: only the clock decides. Each step takes 1 s >= 1e-9 s and saves
    # take no time, so every step is saved — the last one once, as the final checkpoint.
    cfg = make_cfg(corpus, checkpoint={"every_secs": 1e-9, "keep": 10**6})
    assert cfg.checkpoint.every_steps is None
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.finished and result.step > 10
    assert clock.saved == list(range(1, result.step + 1))
    assert _checkpoint_steps(tmp_path / "run") == clock.saved  # written, not just attempted
    _, state = load_checkpoint(find_checkpoint(tmp_path / "run"))
    assert state["finished"] and state["step"] == result.step


def test_a_huge_checkpoint_secs_saves_only_the_final_step(corpus: Path, tmp_path: Path,
                                                          clock: _Clock) -> None:
    cfg = make_cfg(corpus, checkpoint={"every_secs": 1e9, "keep": 10**6})
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.finished and result.step > 10
    assert clock.saved == [result.step]
    assert _checkpoint_steps(tmp_path / "run") == [result.step]


@pytest.mark.parametrize(("every_secs", "save_seconds", "gap"), [
    (1.0, 0.001, 1),  # 50 × 1 ms < 1 s: --checkpoint-secs rules, a save each step
    (1.0, 0.09, 5),  # 50 × 0.09 s = 4.5 s: stretched to every 5th step (steps take 1 s)
    (3.0, 0.01, 3),  # 50 × 0.01 s = 0.5 s < 3 s: --checkpoint-secs rules
    (3.0, 0.15, 8),  # 50 × 0.15 s = 7.5 s > 3 s: the save's cost rules
])
def test_the_save_interval_stretches_with_the_time_a_save_takes(
        corpus: Path, tmp_path: Path, clock: _Clock, every_secs: float, save_seconds: float,
        gap: int) -> None:
    # Checkpointing must stay under 1/SAVE_TIME_FACTOR of the time: after a save that took d
    # seconds the next time-based one waits max(--checkpoint-secs, SAVE_TIME_FACTOR · d).
    # Before the first save there is no d yet, so the first one comes after --checkpoint-secs.
    assert trainer_module.SAVE_TIME_FACTOR == 50
    clock.save_seconds = save_seconds
    cfg = make_cfg(corpus, checkpoint={"every_secs": every_secs, "keep": 10**6})
    result, _ = run_train(cfg, tmp_path / "run")
    assert result.finished and result.step > 3 * gap
    first = math.ceil(every_secs)
    expected = [*range(first, result.step, gap), result.step]
    assert clock.saved == expected
    assert _checkpoint_steps(tmp_path / "run") == expected


def test_checkpoint_every_and_checkpoint_secs_whichever_comes_first(
        corpus: Path, tmp_path: Path, clock: _Clock) -> None:
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


# ---- words/s, wall time and status across the writers' opening and resumes -------------------

def _slow_writers(monkeypatch: pytest.MonkeyPatch, clock: _Clock, seconds: float) -> None:
    """Opening the writers takes ``seconds`` on the trainer's clock (like a resume rewriting
    large event files)."""
    import embedlab.track.tracker as summaries

    real = summaries.open_tracker

    def slow(*args: Any, **kwargs: Any) -> Any:
        clock.now += seconds
        return real(*args, **kwargs)

    monkeypatch.setattr(summaries, "open_tracker", slow)


def test_words_per_second_counts_training_time_only(
        corpus: Path, tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first window's clock started before the model was built and the writers opened, so
    # the first words/s of every process was a fraction of the rest (40k against 200k)
    _slow_writers(monkeypatch, clock, 100.0)
    cfg = make_cfg(corpus, track={"log_every": 5})
    run_train(cfg, tmp_path / "run")
    rates = list(logged(tmp_path / "run", "train/words_per_sec").values())
    assert len(rates) > 4
    assert rates[0] == pytest.approx(float(np.median(rates[1:-1])), rel=0.5)


def test_a_resumed_window_keeps_its_earlier_seconds(
        corpus: Path, tmp_path: Path, clock: _Clock) -> None:
    # A checkpoint inside a logging window (step 7 of 5..10): the resumed window holds words of
    # steps 6-7, trained by the first process; over the new process's seconds alone its rate
    # came out 5/3 too high. Steps take 1 s on this clock, so the rates must agree exactly.
    cfg = make_cfg(corpus, track={"log_every": 5})
    run_train(cfg, tmp_path / "ref")
    run_train(make_cfg(corpus, track={"log_every": 5}, max_steps=7), tmp_path / "cut")
    run_train(cfg, tmp_path / "cut")
    want = logged(tmp_path / "ref", "train/words_per_sec")
    got = logged(tmp_path / "cut", "train/words_per_sec")
    assert got.keys() == want.keys() and 10 in got
    assert got[10] == pytest.approx(want[10], rel=1e-9)


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
    import time
    import types

    from embedlab.run.status import read_status, write_status

    now = [1e9]

    def ticking() -> float:  # every reading of the wall clock is 10 s after the last
        now[0] += 10.0
        return now[0]

    monkeypatch.setattr(trainer_module, "time",
                        types.SimpleNamespace(**{**vars(time), "time": ticking}))
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


def test_numpys_blas_runs_on_one_thread_whatever_threads(corpus: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenBLAS's sums depend on its thread count: evaluation during training (which picks the
    # best checkpoint) must give the same bits for any --threads, which a resume may change
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    seen: list[set[int]] = []

    class Spy:
        def check(self, words: object) -> None: ...

        def __call__(self, words: object, matrix: object) -> dict[str, float]:
            seen.append(blas_threads())
            return {}

    monkeypatch.setattr(trainer_module, "_make_evaluator", lambda cfg: Spy())
    with threadpool_limits(2, user_api="blas"):  # as on a 2-core machine, wherever this runs
        run_train(make_cfg(corpus, threads=2, max_steps=4, eval={"every_steps": 2}),
                  tmp_path / "run")
        assert blas_threads() == {2}  # given back afterwards
    assert seen == [{1}, {1}]
