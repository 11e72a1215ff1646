"""Steps of M micro-batches: one micro-batch per step is the torch engine's own step, and N
processes (gloo, real processes on 127.0.0.1) give the bits of one for every N dividing M, in
both orders; in the chunk order each process builds only its own chunks, and an epoch's steps
train every batch of every chunk once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from embedlab.data.pairs import Cursor  # noqa: E402
from embedlab.engines.microbatch import ChunkMicroBatches, MicroBatches, World  # noqa: E402
from embedlab.engines.stepping import BatchByBatch, Schedule, StepRunner  # noqa: E402

# the run every process trains: a stream, a torch engine, the steps of its epochs
WORKER = r'''
import hashlib, json, sys
import numpy as np
import torch
from embedlab.data.pairs import Cursor
from embedlab.engines.microbatch import ChunkMicroBatches, MicroBatches, World
from embedlab.engines.params import init_params
from embedlab.engines.step import StepConfig
from embedlab.engines.stepping import Schedule
from embedlab.engines.torch import TorchEngine
from embedlab.seeding import mt19937_rng
from embedlab.testing import spec_batch_stream, zipf_ids

def train(model, loss, micro, world, order, threads=1):
    torch.set_num_threads(threads)
    ids, ends = zipf_ids(4000, 60, 50, 3)
    # 4,000 tokens: 4 chunks in the consecutive order's runs, 6 in the chunk order's (two groups
    # of 4, the second with 2 chunks, the last one partial)
    stream = spec_batch_stream(ids, ends, batch_size=32, group=8, window=2, noise_per_group=5,
                               epochs=2, chunk_tokens=1024 if order == "consecutive" else 700,
                               pad_to=16)
    built = []
    build = stream.chunk_batches
    def chunk_batches(epoch, chunk):
        built.append([epoch, chunk])
        return build(epoch, chunk)
    stream.chunk_batches = chunk_batches
    params = init_params(60, 12, init="centered", nce=loss == "nce", rng=mt19937_rng(2, "init"))
    params.w_out[:] = np.random.default_rng(0).normal(0, 0.1, params.w_out.shape)
    log_kq = stream.noise.log_expected_count(5) if loss == "nce" else None
    engine = TorchEngine(StepConfig(model, loss, 2, 5, 8, damping=8.0), params, log_kq,
                         stream.rows)
    schedule = Schedule(0.05, 1e-4, 2 * stream.n_tokens)
    kind = MicroBatches if order == "consecutive" else ChunkMicroBatches
    runner = kind(stream, engine._step, schedule, model, micro, world)
    cursor, seen, losses = Cursor(), 0, []
    while cursor.epoch < 2:
        done = runner.run(cursor, seen, 1)
        losses.append(float(done.losses[0]))
        seen = cursor.epoch * stream.n_tokens + int(done.words_done[0])
        cursor = done.cursor_after(0)
    runner.close()
    h = hashlib.sha256()
    for a in engine.state_dict().values():
        h.update(a.tobytes())
    return {"sha": h.hexdigest(), "losses": losses, "built": sorted(built)}

if __name__ == "__main__":
    model, loss, micro, order, rank, size, store, out = sys.argv[1:9]
    rank, size = int(rank), int(size)
    if size > 1:  # rendezvous through a file; gloo then connects the ranks on 127.0.0.1
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                world_size=size)
    got = train(model, loss, int(micro), World(rank, size), order)
    with open(out, "w") as f:
        json.dump(got, f)
    if size > 1:  # a process group left open aborts the interpreter's exit
        dist.barrier()
        dist.destroy_process_group()
'''


def _train(tmp: Path, model: str, loss: str, micro: int, size: int,
           order: str = "consecutive") -> list[dict[str, Any]]:
    """Train the worker's run on ``size`` processes; each rank's result."""
    script, store = tmp / "worker.py", tmp / f"store-{size}"
    script.write_text(WORKER)
    store.unlink(missing_ok=True)
    procs = [subprocess.Popen([sys.executable, str(script), model, loss, str(micro), order,
                               str(r), str(size), str(store), str(tmp / f"{size}-{r}.json")],
                              stderr=subprocess.PIPE, text=True) for r in range(size)]
    try:
        errors = [p.communicate(timeout=300)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), errors
    return [json.loads((tmp / f"{size}-{r}.json").read_text()) for r in range(size)]


@pytest.mark.parametrize(("model", "loss", "order"), [("skipgram", "neg", "consecutive"),
                                                      ("cbow", "nce", "consecutive"),
                                                      ("skipgram", "neg", "chunks"),
                                                      ("cbow", "nce", "chunks")])
def test_two_processes_give_the_bits_of_one(tmp_path: Path, model: str, loss: str,
                                            order: str) -> None:
    one = _train(tmp_path, model, loss, 4, 1, order)[0]
    two = _train(tmp_path, model, loss, 4, 2, order)
    result = ("sha", "losses")
    assert [two[0][k] for k in result] == [two[1][k] for k in result]  # identical replicas
    assert [two[0][k] for k in result] == [one[k] for k in result]  # the bits of one process
    assert len(one["losses"]) > 10
    if order == "chunks":  # each process built only its own chunks, each once; one process all
        every = [[e, c] for e in range(2) for c in range(6)]
        assert one["built"] == every
        assert two[0]["built"] == [[e, c] for e, c in every if c % 2 == 0]
        assert two[1]["built"] == [[e, c] for e, c in every if c % 2 == 1]


def _runs(runner: StepRunner, steps: int) -> tuple[list[float], Cursor]:
    cursor, seen, losses = Cursor(), 0, []
    for _ in range(steps):
        done = runner.run(cursor, seen, 1)
        losses.append(float(done.losses[0]))
        seen = cursor.epoch * 4000 + int(done.words_done[0])
        cursor = done.cursor_after(0)
    return losses, cursor


def test_one_micro_batch_per_step_is_the_torch_engines_step() -> None:
    from embedlab.engines.params import init_params
    from embedlab.engines.step import StepConfig
    from embedlab.engines.torch import TorchEngine
    from embedlab.seeding import mt19937_rng
    from embedlab.testing import spec_batch_stream, zipf_ids

    ids, ends = zipf_ids(4000, 60, 50, 3)
    engines, runners = [], []
    for kind in ("plain", "micro"):
        stream = spec_batch_stream(ids, ends, batch_size=32, group=8, window=2,
                                   noise_per_group=5, epochs=1, chunk_tokens=1024, pad_to=16)
        params = init_params(60, 12, init="centered", nce=False, rng=mt19937_rng(2, "init"))
        engine = TorchEngine(StepConfig("skipgram", "neg", 2, 5, 8, damping=8.0), params, None,
                             stream.rows)
        schedule = Schedule(0.05, 1e-4, stream.n_tokens)
        engines.append(engine)
        runners.append(BatchByBatch(stream, engine, schedule, "skipgram") if kind == "plain"
                       else MicroBatches(stream, engine._step, schedule, "skipgram", 1, World()))
    plain, micro = (_runs(r, 20) for r in runners)
    assert plain == micro
    for a, b in zip(engines[0].state_dict().values(), engines[1].state_dict().values(),
                    strict=True):
        assert np.array_equal(a, b)
    for r in runners:
        r.close()


def _chunk_order_run(micro: int, chunk_tokens: int) -> tuple[Any, ChunkMicroBatches]:
    from embedlab.engines.params import init_params
    from embedlab.engines.step import StepConfig
    from embedlab.engines.torch import TorchEngine
    from embedlab.seeding import mt19937_rng
    from embedlab.testing import spec_batch_stream, zipf_ids

    ids, ends = zipf_ids(4000, 60, 50, 3)
    stream = spec_batch_stream(ids, ends, batch_size=32, group=8, window=2, noise_per_group=5,
                               epochs=2, chunk_tokens=chunk_tokens, pad_to=16, sample=1e-2)
    params = init_params(60, 12, init="centered", nce=False, rng=mt19937_rng(2, "init"))
    engine = TorchEngine(StepConfig("skipgram", "neg", 2, 5, 8, damping=8.0), params, None,
                         stream.rows)
    schedule = Schedule(0.05, 1e-4, 2 * stream.n_tokens)
    return stream, ChunkMicroBatches(stream, engine._step, schedule, "skipgram", micro, World())


@pytest.mark.parametrize(("micro", "chunk_tokens"), [(4, 700), (3, 500), (2, 4000), (5, 1000)])
def test_an_epoch_in_the_chunk_order_trains_every_batch_once(micro: int,
                                                             chunk_tokens: int) -> None:
    """Steps of group g train batch k of each of chunks g·M..g·M+M−1 that has one: the epoch's
    pairs are those of all its chunks' batches, its progress ends at the corpus's length, and
    the cursor walks (epoch, g·M, k) to the next epoch."""
    from embedlab.engines.step import pairs_in

    stream, runner = _chunk_order_run(micro, chunk_tokens)
    sizes = [len(stream.chunk_batches(0, c)) for c in range(stream.n_chunks)]
    want_pairs = sum(pairs_in(b, "skipgram") for c in range(stream.n_chunks)
                     for b in stream.chunk_batches(0, c))
    cursor, seen, pairs, progress, cursors = Cursor(), 0, 0, [], []
    while cursor.epoch == 0:
        cursors.append(cursor)
        done = runner.run(cursor, seen, 1)
        pairs += int(done.pairs[0])
        progress.append(int(done.words_done[0]))
        seen = int(done.words_done[0])
        cursor = done.cursor_after(0)
    runner.close()
    groups = range(0, stream.n_chunks, micro)
    assert cursors == [Cursor(0, g, k) for g in groups
                       for k in range(max(sizes[g:g + micro]))]
    assert cursor == Cursor(1, 0, 0)
    assert pairs == want_pairs
    assert progress == sorted(progress) and progress[-1] == stream.n_tokens


def test_a_chunk_order_run_resumes_from_any_step() -> None:
    """A fresh runner started at a step's cursor (a resume) trains the steps that followed."""
    _, whole = _chunk_order_run(2, 700)
    cursor, seen, steps = Cursor(), 0, []
    while cursor.epoch < 2:
        done = whole.run(cursor, seen, 1)
        steps.append((cursor, seen, float(done.losses[0]), int(done.words_done[0])))
        seen = cursor.epoch * 4000 + int(done.words_done[0])
        cursor = done.cursor_after(0)
    whole.close()
    cut = len(steps) // 2 + 3  # inside a group
    assert steps[cut][0].batch > 0
    _, resumed = _chunk_order_run(2, 700)
    # the parameters differ (a fresh model), so compare what the data gives: progress and
    # the steps' cursors; the loss follows the model, the bits are the command tests' business
    cursor, seen = steps[cut][0], steps[cut][1]
    for want in steps[cut:]:
        done = resumed.run(cursor, seen, 1)
        assert (cursor, seen, int(done.words_done[0])) == (want[0], want[1], want[3])
        seen = cursor.epoch * 4000 + int(done.words_done[0])
        cursor = done.cursor_after(0)
    resumed.close()


@pytest.mark.parametrize(("model", "loss"), [("skipgram", "nce"), ("cbow", "neg")])
def test_per_row_sums_are_the_occurrences_sums(model: str, loss: str) -> None:
    """What the chunk order exchanges: each matrix's rows once, ascending, holding the sum of
    the row's occurrences (gradient, curvature, bias gradient); applied, they move the
    parameters as the occurrences do, to float32 rounding."""
    from embedlab.engines.microbatch import per_row
    from embedlab.engines.params import init_params
    from embedlab.engines.step import StepConfig
    from embedlab.engines.torch import TorchEngine
    from embedlab.seeding import mt19937_rng
    from embedlab.testing import spec_batch_stream, zipf_ids

    ids, ends = zipf_ids(4000, 60, 50, 3)
    stream = spec_batch_stream(ids, ends, batch_size=32, group=8, window=2, noise_per_group=5,
                               epochs=1, chunk_tokens=1024, pad_to=16)
    batch = stream.chunk_batches(0, 0)[1]
    engines = []
    for _ in range(2):
        params = init_params(60, 12, init="centered", nce=loss == "nce",
                             rng=mt19937_rng(2, "init"))
        params.w_out[:] = np.random.default_rng(0).normal(0, 0.1, params.w_out.shape)
        log_kq = stream.noise.log_expected_count(5) if loss == "nce" else None
        engines.append(TorchEngine(StepConfig(model, loss, 2, 5, 8, damping=8.0), params, log_kq,
                                   stream.rows))
    c = engines[0]._step.contributions(batch)
    s = per_row(c)
    assert len(s.inputs) == len(s.outputs) == 1 and float(s.loss) == float(c.loss)
    for occurrences, (got_ids, rows, h, bias) in ((c.inputs, s.inputs[0]),
                                                  (c.outputs, s.outputs[0])):
        every = np.concatenate([p[0].numpy() for p in occurrences])
        assert got_ids.tolist() == sorted(set(every.tolist()))
        assert len(got_ids) < len(every)  # rows repeat within a batch
        for k, name in ((1, "rows"), (2, "h"), (3, "bias")):
            if occurrences[0][k] is None:
                assert (bias if k == 3 else h) is None
                continue
            values = np.concatenate([p[k].numpy() for p in occurrences]).astype(np.float64)
            want = np.zeros((len(got_ids), *values.shape[1:]))
            np.add.at(want, np.searchsorted(got_ids.numpy(), every), values)
            got = {1: rows, 2: h, 3: bias}[k]
            assert got is not None
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=name)
    engines[0]._step.apply([c], 0.05)
    engines[1]._step.apply([per_row(engines[1]._step.contributions(batch))], 0.05)
    for a, b in zip(engines[0].state_dict().values(), engines[1].state_dict().values(),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_processes_must_divide_the_micro_batches() -> None:
    with pytest.raises(ValueError, match="3 processes do not divide 4 micro-batches"):
        MicroBatches(None, None, None, "skipgram", 4, World(0, 3))  # type: ignore[arg-type]


# ---- the command -----------------------------------------------------------------------------
def test_a_run_of_micro_batch_steps_resumes_exactly(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.checkpoint import find_checkpoint
    from embedlab.testing import run_cli, write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=150)
    flags = ["--corpus", str(corpus), "--micro-batches", "2", "--dim", "8", "--batch-size",
             "32", "--epochs", "2", "--no-tensorboard", "--no-progress", "--threads", "1"]
    code, _, err = run_cli(["train", "--run", str(tmp_path / "ref"), *flags], capsys)
    assert code == 0, err
    # a corpus of one chunk: steps of one micro-batch, said in one line
    assert ("embedlab: warning: the corpus fills 1 chunk (of up to 262,144 in-vocabulary tokens "
            "each), fewer than --micro-batches 2: a step trains 1 micro-batch (32 centres, not "
            "64), and processes of a run whose chunks are missing idle; a corpus of 262,145 "
            "in-vocabulary tokens or more (those kept by --min-count) gives every step all 2"
            ) in err.splitlines()
    config = json.loads((tmp_path / "ref" / "config.json").read_text())
    assert config["optim"]["micro_batches"] == 2 and config["engine"] == "torch"
    cut = str(tmp_path / "cut")
    assert run_cli(["train", "--run", cut, *flags, "--max-steps", "3"], capsys)[0] == 0
    code, _, err = run_cli(["train", "--run", cut, *flags], capsys)
    assert code == 0 and "(step 3)" in err, err
    ref, got = (find_checkpoint(tmp_path / n) / "tensors.safetensors" for n in ("ref", "cut"))
    assert ref.read_bytes() == got.read_bytes()


@pytest.mark.parametrize(("flags", "message"), [
    (["--engine", "native"], "--micro-batches 2 trains on the torch and cuda engines; pass "
                              "--engine torch or --engine cuda"),
    (["--loss", "hs"], "--micro-batches 2 trains negative sampling and NCE; pass --loss neg or "
     "--micro-batches 1"),
    (["--preset", "cs20"], "--micro-batches 2 trains the summed loss, and --preset cs20 the "
     "batch mean; drop one of them"),
    (["--micro-batches", "0"], "--micro-batches must be")])
def test_micro_batches_refuse_what_they_cannot_train(tmp_path: Path, flags: list[str],
                                                     message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.testing import run_cli, write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=20)
    code, _, err = run_cli(["train", "--run", str(tmp_path / "r"), "--corpus", str(corpus),
                            "--micro-batches", "2", *flags], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_device_cpu_with_micro_batches_is_the_torch_engine(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    # --device cpu means "the CPU's engine": with micro-batches that is torch, but it was
    # refused with "pass --engine torch or --engine cuda"
    from embedlab.testing import run_cli, write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=20)
    code, _, err = run_cli(["train", "--run", str(tmp_path / "r"), "--corpus", str(corpus),
                            "--micro-batches", "2", "--device", "cpu", "--batch-size", "16",
                            "--dim", "8", "--max-steps", "1", "--no-tensorboard",
                            "--no-progress"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "r" / "config.json").read_text())["engine"] == "torch"
