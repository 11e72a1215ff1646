"""The CUDA engine's kernels, run on the CPU through Triton's interpreter: the batches it builds
are the batch specification's, bit for bit; its step is the torch engine's to float32 rounding;
many steps per call equal one step per call, and a run cut anywhere resumes to the same bits."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# before triton is imported: Triton reads it when it defines its own and our kernels
os.environ["EMBEDLAB_CUDA_INTERPRET"] = "1"
os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("torch")
pytest.importorskip("triton")

import torch

from embedlab.data.batchspec import SpecBatchStream
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Batch, BatchStream, Cursor
from embedlab.engines.cuda_batches import Buffers, ChunkBuilder
from embedlab.engines.cuda_engine import CudaBatches, CudaEngine, Kernels, launch_step
from embedlab.engines.params import Word2VecParams, init_params
from embedlab.engines.step import StepConfig, band_block_length
from embedlab.engines.stepping import Schedule
from embedlab.engines.torch import TorchEngine
from embedlab.seeding import mt19937_rng
from embedlab.testing import spec_batch_stream, zipf_ids

FIELDS = ("centers", "span", "mask", "contexts", "negatives")




def _chunk_batches(stream: SpecBatchStream, epoch: int, chunk: int) -> list[Batch]:
    """The chunk the CUDA engine builds, as :class:`Batch` es (its layout read back)."""
    cfg = StepConfig("skipgram", "neg", stream.window, 5, stream.group)
    shape_engine = CudaEngine.__new__(CudaEngine)
    shape_engine.cfg, shape_engine.rows = cfg, stream.rows
    shape_engine.w_in = torch.zeros(1, 4)
    buf = Buffers(shape_engine.shape(stream.batch_size, stream.chunk_tokens,
                                     stream.noise_per_group), torch.device("cpu"))
    info = ChunkBuilder(stream, buf).build(epoch, chunk)
    W, B, R = stream.window, stream.batch_size, stream.rows
    out = []
    for i in range(info.n_batches):
        first = i * B
        mask = buf.mask[first:first + R].numpy().copy()
        ctx = buf.ctx[first:first + R].numpy().copy()
        mask[B:], ctx[B:] = 0, 0.0
        out.append(Batch(centers=buf.tok_p[W + first:W + first + R].numpy().copy(),
                         span=buf.tok_p[first:first + R + 2 * W].numpy().copy(), mask=mask,
                         contexts=ctx, negatives=buf.negs[i].numpy().copy(),
                         n_pairs=int(info.n_pairs[i]),
                         n_centers=int(max(0, min(B, info.n_kept - first))),
                         words_done=int(info.words_done[i]),
                         cursor_next=stream.cursor_after(epoch, chunk, i, info.n_batches)))
    return out


def _assert_same(ref: list[Batch], got: list[Batch]) -> None:
    assert len(ref) == len(got)
    for i, (a, b) in enumerate(zip(ref, got, strict=True)):
        for f in FIELDS:
            assert np.array_equal(getattr(a, f), getattr(b, f)), (i, f)
        for f in ("n_pairs", "n_centers", "words_done", "cursor_next"):
            assert getattr(a, f) == getattr(b, f), (i, f)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 6000), vocab=st.integers(2, 60), sentences=st.integers(0, 300),
       window=st.integers(1, 5), batch=st.sampled_from([16, 48, 64]),
       pad=st.sampled_from([1, 16]), group=st.sampled_from([4, 8, 16]),
       shared=st.integers(1, 12), sample=st.sampled_from([0.0, 1e-3, 5e-2]),
       chunk=st.sampled_from([512, 2048]), interleave=st.integers(1, 3),
       seed=st.integers(0, 2**40), data=st.integers(0, 99))
def test_the_gpu_chunk_builder_gives_the_reference_batches(
        n: int, vocab: int, sentences: int, window: int, batch: int, pad: int, group: int,
        shared: int, sample: float, chunk: int, interleave: int, seed: int, data: int) -> None:
    ids, ends = zipf_ids(n, vocab, sentences, data)
    stream = spec_batch_stream(ids, ends, window=window, batch_size=batch, pad_to=pad, group=group,
                               noise_per_group=shared, sample=sample, chunk_tokens=chunk,
                               interleave=interleave, seed=seed)
    for epoch, c in ((0, 0), (1, stream.n_chunks - 1)):
        _assert_same(stream.chunk_batches(epoch, c), _chunk_batches(stream, epoch, c))


# ---- the step ------------------------------------------------------------------------------
V, D, W = 40, 8, 2


def _params(nce: bool) -> Word2VecParams:
    p = init_params(V, D, init="centered", nce=nce, rng=mt19937_rng(0, "init"))
    rng = np.random.default_rng(0)
    p.w_out[:] = rng.normal(0, 0.3, size=p.w_out.shape)
    if p.b_out is not None:
        p.b_out[:] = rng.normal(0, 0.1, size=p.b_out.shape)
    return p


@pytest.mark.parametrize(("model", "loss", "group", "damping", "reduction"), [
    ("skipgram", "neg", 8, 16.0, "sum"), ("skipgram", "nce", 32, 16.0, "sum"),
    ("skipgram", "neg", 4, 0.0, "mean"), ("cbow", "neg", 16, 16.0, "sum"),
    ("cbow", "nce", 8, 0.0, "sum")])
def test_a_step_is_the_torch_engines_to_float32_rounding(model: str, loss: str, group: int,
                                                         damping: float,
                                                         reduction: str) -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, V, size=300).astype(np.uint32)
    counts = np.bincount(ids, minlength=V) + 1
    stream = BatchStream(ids, np.array([70, 71, 150, 300]), None, NoiseDistribution(counts),
                         window=W, batch_size=32, group=group, noise_per_group=3, seed=5,
                         epochs=1, chunk_tokens=128, pad_to=band_block_length(W))
    log_kq = NoiseDistribution(np.arange(1, V + 1)).log_expected_count(5) \
        if loss == "nce" else None
    cfg = StepConfig(model, loss, W, 5, group, reduction=reduction, damping=damping)
    ref, params = _params(loss == "nce"), _params(loss == "nce")
    torch_engine = TorchEngine(cfg, ref, log_kq, stream.rows)
    gpu = CudaEngine(cfg, params, log_kq, stream.rows)
    for batch in list(stream.iterate(Cursor()))[:3]:
        want = torch_engine.step(batch, 0.1)
        assert gpu.step(batch, 0.1) == pytest.approx(want, rel=1e-5)
        got = gpu.state_dict()
        for name, array in ref.tensors().items():
            np.testing.assert_allclose(got[name], array, rtol=1e-5, atol=1e-6)


# ---- the runner: many steps per call, resumed anywhere -------------------------------------
def _runner(stream: SpecBatchStream, model: str = "skipgram", loss: str = "neg", dim: int = 16,
            kernels: Kernels | None = None) -> CudaBatches:
    cfg = StepConfig(model, loss, stream.window, 5, stream.group, damping=16.0)
    params = init_params(len(stream.noise), dim, init="centered", nce=loss == "nce",
                         rng=mt19937_rng(3, "init"))
    params.w_out[:] = np.random.default_rng(1).normal(0, 0.1, size=params.w_out.shape)
    log_kq = stream.noise.log_expected_count(5) if loss == "nce" else None
    engine = CudaEngine(cfg, params, log_kq, stream.rows)
    if kernels is not None:
        engine.kernels = kernels.resolved(dim)
    total = stream.epochs * stream.n_tokens
    return CudaBatches(engine, stream, Schedule(0.05, 1e-4, total))


def _train(runner: CudaBatches, cursor: Cursor, steps: int, limit: int,
           seen: int = 0) -> tuple[list[float], Cursor, int]:
    """``steps`` steps from ``cursor`` (``seen`` positions into the run), at most ``limit``
    per call (a call goes on into the next chunk of its epoch)."""
    losses: list[float] = []
    n = runner.s.n_tokens
    while len(losses) < steps:
        done = runner.run(cursor, seen, min(limit, steps - len(losses)))
        losses += [float(x) for x in done.losses]
        seen = cursor.epoch * n + int(done.words_done[-1])
        cursor = done.cursor_after(len(done) - 1)
    return losses, cursor, seen


# ~40 s each in Triton's interpreter: CBOW in the default suite, skip-gram slow
@pytest.mark.parametrize("model", [pytest.param("skipgram", marks=pytest.mark.slow), "cbow"])
def test_many_steps_per_call_equal_one_step_per_call_and_resume_exactly(model: str) -> None:
    ids, ends = zipf_ids(3000, 50, 40, 7)
    stream = spec_batch_stream(ids, ends, chunk_tokens=1024, batch_size=64, group=16, window=2,
                               noise_per_group=6, epochs=1)
    many = _runner(stream, model)
    losses_many, cursor_many, _ = _train(many, Cursor(), 8, limit=5)
    one = _runner(stream, model)
    losses_one, cursor_one, _ = _train(one, Cursor(), 8, limit=1)
    assert losses_many == losses_one and cursor_many == cursor_one
    assert all(np.array_equal(a, b) for a, b in zip(many.engine.state_dict().values(),
                                                    one.engine.state_dict().values(),
                                                    strict=True))
    # a fresh engine loading the state after 3 steps and continuing gives the same bits
    part = _runner(stream, model)
    _, cursor, seen = _train(part, Cursor(), 3, limit=2)
    resumed = _runner(stream, model)
    resumed.engine.load_state_dict(part.engine.state_dict())
    losses_rest, cursor_rest, _ = _train(resumed, cursor, 5, limit=4, seen=seen)
    assert losses_rest == losses_one[3:] and cursor_rest == cursor_one
    assert all(np.array_equal(a, b) for a, b in zip(resumed.engine.state_dict().values(),
                                                    one.engine.state_dict().values(),
                                                    strict=True))


def _epoch(runner: CudaBatches, limit: int) -> tuple[list[tuple[Any, ...]], int]:
    """Every step of epoch 0, ``limit`` at most per call: what the loop reads of each; and
    the number of calls."""
    steps: list[tuple[Any, ...]] = []
    cursor, seen, n, calls = Cursor(), 0, runner.s.n_tokens, 0
    while cursor.epoch == 0:
        done = runner.run(cursor, seen, limit)
        calls += 1
        steps += [(float(done.losses[i]), int(done.pairs[i]), int(done.words_done[i]),
                   float(done.lrs[i]), done.cursor_after(i)) for i in range(len(done))]
        seen = cursor.epoch * n + int(done.words_done[-1])
        cursor = done.cursor_after(len(done) - 1)
    return steps, calls


@pytest.mark.slow  # ~85 s in Triton's interpreter
def test_a_call_goes_on_through_the_chunks_of_its_epoch_and_stops_at_its_end() -> None:
    ids, ends = zipf_ids(1000, 50, 30, 11)
    stream = spec_batch_stream(ids, ends, chunk_tokens=256, batch_size=32, group=16, window=2,
                               noise_per_group=6, epochs=2, sample=1e-2)
    one = _runner(stream)
    by_one, _ = _epoch(one, 1)
    assert len({c.chunk for *_, c in by_one}) >= 4  # so calls cross chunks
    for limit, calls in ((5, -(-len(by_one) // 5)), (1000, 1)):
        many = _runner(stream)
        # a call stops at its limit, or at the epoch's end (the next epoch takes a call of
        # its own), and nowhere else
        assert _epoch(many, limit) == (by_one, calls)
        assert all(np.array_equal(a, b) for a, b in zip(many.engine.state_dict().values(),
                                                        one.engine.state_dict().values(),
                                                        strict=True))
    assert by_one[-1][-1] == Cursor(1, 0, 0)


@pytest.mark.slow  # ~60 s in Triton's interpreter
def test_on_a_gpu_a_buffer_set_is_rebuilt_only_after_its_queued_steps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's order of work, followed on the CPU: streams and events stand-ins that log what
    the runner asks of them. The next chunk is built on the second stream while the steps run,
    and a buffer set is built into only once the host has waited for the end of its steps."""
    from contextlib import contextmanager

    ids, ends = zipf_ids(1000, 50, 30, 11)
    stream = spec_batch_stream(ids, ends, chunk_tokens=256, batch_size=32, group=16, window=2,
                               noise_per_group=6, epochs=2, sample=1e-2)
    log: list[tuple[Any, ...]] = []

    class Event:
        count = 0

        def record(self) -> None:
            Event.count += 1
            self.id = Event.count
            log.append(("record", self.id))

        def synchronize(self) -> None:
            log.append(("wait", self.id))

    class Stream:
        def wait_stream(self, other: object) -> None:
            log.append(("main waits for side",))

    side = Stream()

    @contextmanager
    def on(stream: object) -> Any:
        log.append(("side",))
        yield
        log.append(("main",))

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "stream", on)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: Stream())
    runner = _runner(stream)
    runner._side = side  # type: ignore[assignment]

    def steps(slot: int, n: int) -> None:
        log.append(("steps", slot))
        for _ in range(n):
            launch_step(runner.engine, runner.bufs[slot], stream.batch_size)

    monkeypatch.setattr(runner, "_steps", steps)
    for slot, builder in enumerate(runner.builders):
        def start(epoch: int, chunk: int, slot: int = slot, real: Any = builder.start) -> Any:
            log.append(("build", slot, epoch, chunk))
            return real(epoch, chunk)

        monkeypatch.setattr(builder, "start", start)
    by_one, _ = _epoch(_runner(stream), 1)
    assert _epoch(runner, 1000) == (by_one, 1)  # the same steps, in one call
    pending: dict[int, int | None] = {0: None, 1: None}  # a set's last steps' event
    builds, on_side, main_waits = [], False, False
    for i, entry in enumerate(log):
        if entry[0] == "steps":
            assert main_waits  # for the chunk built on the second stream
            assert log[i + 1][0] == "record"
            pending[entry[1]] = log[i + 1][1]
        elif entry[0] == "build":
            event = pending[entry[1]]
            assert event is None or ("wait", event) in log[:i]
            builds.append((entry[2:], on_side))
        on_side = {"side": True, "main": False}.get(entry[0], on_side)
        main_waits = entry[0] == "main waits for side" or (main_waits and entry[0] != "steps")
    chunks = sorted({c.chunk for *_, c in by_one[:-1]} | {0})
    # the first chunk is built before the first step; every other one, and the next epoch's
    # first, on the second stream while the steps before it run
    assert builds == [((0, 0), False)] + [((0, c), True) for c in chunks[1:]] + [((1, 0), True)]


# ~50 s each in Triton's interpreter: skip-gram neg in the default suite, the others slow
@pytest.mark.parametrize(("model", "loss"), [
    ("skipgram", "neg"), pytest.param("skipgram", "nce", marks=pytest.mark.slow),
    pytest.param("cbow", "neg", marks=pytest.mark.slow)])
def test_splitting_a_tiles_gradients_between_programs_keeps_the_step(model: str,
                                                                     loss: str) -> None:
    """A tile's parts compute its scores alike and write disjoint slices of its gradients: the
    same bits as one program per tile when the slices are the same; the same step to float32
    rounding when the gradients' slices are narrower."""
    ids, ends = zipf_ids(2000, 50, 40, 7)
    stream = spec_batch_stream(ids, ends, chunk_tokens=1024, batch_size=64, group=16, window=2,
                               noise_per_group=6, epochs=1)
    dim = 70  # 5 slices of 16: the last one partly masked

    def trained(kernels: Kernels) -> tuple[list[float], list[np.ndarray]]:
        r = _runner(stream, model, loss, dim, kernels)
        losses, _, _ = _train(r, Cursor(), 4, limit=4)
        return losses, list(r.engine.state_dict().values())

    one_losses, one = trained(Kernels(score_slice=16, split=1))
    for kernels in (Kernels(score_slice=16, split=2), Kernels(score_slice=16, split=5)):
        losses, state = trained(kernels)
        assert losses == one_losses, kernels
        assert all(np.array_equal(a, b) for a, b in zip(state, one, strict=True)), kernels
    wide_losses, wide = trained(Kernels(score_slice=128, split=1))  # scores in one slice
    narrow_losses, narrow = trained(Kernels(score_slice=128, split=3, grad_slice=32))
    np.testing.assert_allclose(narrow_losses, wide_losses, rtol=1e-6)
    np.testing.assert_allclose(wide_losses, one_losses, rtol=1e-5)
    for a, b in zip(narrow, wide, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_kernel_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.engines.cuda_engine import KERNELS_ENV
    from embedlab.errors import InputError

    monkeypatch.setenv(KERNELS_ENV, "split=4, grad_slice=32,tile_warps=8")
    assert Kernels.from_env() == Kernels(split=4, grad_slice=32, tile_warps=8)
    assert Kernels.from_env().resolved(100) == Kernels(score_slice=16, split=4, grad_slice=32,
                                                       tile_warps=8, apply_slice=128)
    assert Kernels(score_slice=128, split=8).resolved(100).split == 1  # one slice: one part
    assert Kernels(split=8).resolved(100).split == 7  # 7 slices of 16
    monkeypatch.setenv(KERNELS_ENV, "splits=4")
    with pytest.raises(InputError, match="splits=4"):
        Kernels.from_env()
    for wrong, said in (("tile_warps=3", "tile_warps must be a power of two >= 1, got 3"),
                        ("score_slice=8", "score_slice must be a power of two >= 16, got 8"),
                        ("split=0", "split must be >= 1, got 0")):
        monkeypatch.setenv(KERNELS_ENV, wrong)
        with pytest.raises(InputError, match=said):
            Kernels.from_env()
    monkeypatch.setenv(KERNELS_ENV, "score_slice=0,split=3")
    assert Kernels.from_env() == Kernels(score_slice=0, split=3)
    assert "launch settings differ from the defaults" in capsys.readouterr().err
    monkeypatch.delenv(KERNELS_ENV)
    assert Kernels.from_env() == Kernels()
    assert capsys.readouterr().err == ""


def test_the_runner_agrees_with_the_native_engine_to_float32_rounding() -> None:
    from embedlab.engines import native
    from embedlab.engines.native import NativeEngine

    if native.unavailable_reason() is not None:
        pytest.skip("the native kernel does not build here")
    ids, ends = zipf_ids(3000, 50, 40, 7)
    stream = spec_batch_stream(ids, ends, chunk_tokens=1024, batch_size=64, group=16, window=2,
                               noise_per_group=6, epochs=1)
    gpu = _runner(stream)
    start = {k: v.copy() for k, v in gpu.engine.state_dict().items()}
    losses, _, _ = _train(gpu, Cursor(), 6, limit=6)
    cpu = NativeEngine(gpu.engine.cfg, Word2VecParams.of(start, nce=False), None, stream.rows, 2)
    runner = cpu.runner(stream, gpu.schedule, "skipgram")
    cpu_losses, _, _ = _train(runner, Cursor(), 6, limit=6)  # type: ignore[arg-type]
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-5)
    for name, array in gpu.engine.state_dict().items():
        np.testing.assert_allclose(array, cpu.state_dict()[name], rtol=1e-4, atol=1e-6)


# ---- micro-batches -------------------------------------------------------------------------
@pytest.mark.parametrize(("model", "loss"), [("skipgram", "neg"), ("cbow", "nce")])
def test_micro_batch_steps_are_the_torch_engines_to_float32_rounding(model: str,
                                                                     loss: str) -> None:
    """Steps of 2 micro-batches from their own chunks: the cuda engine's row sums and their
    application (engines.cuda_micro) against the torch engine's (engines.microbatch)."""
    import dataclasses

    from embedlab.engines.microbatch import ChunkMicroBatches, World
    from embedlab.engines.torch import Word2VecStep

    ids, ends = zipf_ids(2000, 40, 30, 5)
    stream = spec_batch_stream(ids, ends, chunk_tokens=512, batch_size=32, group=16, window=2,
                               noise_per_group=6, epochs=1, pad_to=16)
    cfg = StepConfig(model, loss, 2, 5, 16, damping=16.0, micro_batches=2)
    start = init_params(len(stream.noise), 8, init="centered", nce=loss == "nce",
                        rng=mt19937_rng(3, "init"))
    start.w_out[:] = np.random.default_rng(1).normal(0, 0.1, size=start.w_out.shape)
    log_kq = stream.noise.log_expected_count(5) if loss == "nce" else None
    schedule = Schedule(0.05, 1e-4, stream.n_tokens)
    ref_params = Word2VecParams.of({k: v.copy() for k, v in start.tensors().items()},
                                   nce=loss == "nce")
    ref = ChunkMicroBatches(stream, Word2VecStep(cfg, ref_params, log_kq, stream.rows),
                            schedule, model, 2, World())
    engine = CudaEngine(cfg, dataclasses.replace(start), log_kq, stream.rows)
    got = engine.runner(stream, schedule, model)
    assert isinstance(got, ChunkMicroBatches)
    ref_losses, _, _ = _train(ref, Cursor(), 5, limit=1)  # type: ignore[arg-type]
    got_losses, _, _ = _train(got, Cursor(), 5, limit=1)  # type: ignore[arg-type]
    got.close()
    ref.close()
    np.testing.assert_allclose(got_losses, ref_losses, rtol=1e-5)
    for name, array in engine.state_dict().items():
        np.testing.assert_allclose(array, ref_params.tensors()[name], rtol=1e-4, atol=1e-6)


# ---- the command ---------------------------------------------------------------------------
def test_a_run_stopped_at_max_steps_resumes_to_the_uninterrupted_runs_bits(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.checkpoint import find_checkpoint
    from embedlab.testing import run_cli, write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=120)
    flags = ["--corpus", str(corpus), "--engine", "cuda", "--dim", "16", "--batch-size", "64",
             "--epochs", "1", "--no-tensorboard", "--no-progress", "--log-every", "1"]
    code, _, err = run_cli(["train", "--run", str(tmp_path / "ref"), *flags], capsys)
    assert code == 0, err
    run = str(tmp_path / "cut")
    code, _, err = run_cli(["train", "--run", run, *flags, "--max-steps", "2"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["train", "--run", run, *flags], capsys)
    assert code == 0, err
    assert "(step 2)" in err  # resumed
    ref, cut = (find_checkpoint(tmp_path / n) / "tensors.safetensors" for n in ("ref", "cut"))
    assert ref.read_bytes() == cut.read_bytes()


def test_a_model_larger_than_the_gpus_free_memory_is_refused_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.engines.cuda_engine import check_gpu_memory
    from embedlab.errors import InputError

    gib = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * gib, 80 * gib))
    check_gpu_memory(1_000_000, 300, nce=False, device=torch.device("cuda"))  # 2.2 GiB + margin
    with pytest.raises(InputError) as refused:
        check_gpu_memory(3_000_000, 300, nce=True, device=torch.device("cuda"))
    message = str(refused.value)
    assert "\n" not in message and "7.2 GiB" in message and "3.0 of 80.0 GiB" in message
    assert "--dim" in message and "--max-vocab" in message and "--engine native" in message
    check_gpu_memory(10**9, 10**4, nce=False, device=torch.device("cpu"))  # the interpreter: no GPU


def _evaluated_corpus(folder: Any) -> list[str]:
    """A small corpus with an analogy and a similarity file, and the flags that evaluate them
    during training, with TensorBoard's summaries and a probe word."""
    from pathlib import Path

    from embedlab.testing import write_zipf_corpus

    folder = Path(folder)
    corpus = write_zipf_corpus(folder / "c.txt", lines=1500)
    (folder / "q.txt").write_text(": s\nw1 w2 w3 w4\nw5 w6 w7 w8\nw2 w1 w4 w3\n")
    (folder / "sim.tsv").write_text("w1\tw2\t3\nw3\tw4\t1\nw5\tw9\t2\nw1\tw7\t5\n")
    return ["--corpus", str(corpus), "--engine", "cuda", "--dim", "16", "--batch-size", "64",
            "--min-count", "1", "--log-every", "2", "--eval-every", "2", "--eval-analogies",
            str(folder / "q.txt"), "--eval-similarity", str(folder / "sim.tsv"), "--probe", "w1",
            "--no-progress", "--checkpoint-every", "2"]


def test_evaluation_and_summaries_during_training(tmp_path: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from embedlab.testing import run_cli

    run = tmp_path / "run"
    code, _, err = run_cli(["train", "--run", str(run), *_evaluated_corpus(tmp_path),
                            "--max-steps", "4"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r["step"] for r in rows if "eval/analogy" in r and "eval/similarity/sim" in r]
    assert evaluated == [2, 4], rows
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run), size_guidance={"scalars": 0, "histograms": 0,
                                                       "tensors": 0})
    events.Reload()
    tags = events.Tags()
    assert {"train/loss", "eval/analogy", "eval/similarity/sim"} <= set(tags["scalars"]), tags
    assert [e.step for e in events.Scalars("eval/analogy")] == [2, 4]
    assert "embeddings/input" in tags["histograms"] and tags["images"], tags
    table = events.Tensors("neighbours/text_summary")[-1].tensor_proto.string_val[0].decode()
    assert "w1" in table  # the probe word's neighbours


@pytest.mark.slow
def test_sigterm_saves_and_the_run_resumes_to_the_uninterrupted_bits(tmp_path: Any) -> None:
    import json
    import signal
    import subprocess
    import sys
    import time

    from embedlab.checkpoint import find_checkpoint

    flags = _evaluated_corpus(tmp_path)
    env = {**os.environ, "EMBEDLAB_CUDA_INTERPRET": "1", "TRITON_INTERPRET": "1"}

    def train(run: str, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "embedlab", "train", "--run", run,
                                 *flags, *extra], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    cut = tmp_path / "cut"
    proc = train(str(cut))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            step = json.loads((cut / "status.json").read_text())["step"]
        except (OSError, ValueError, KeyError):
            step = 0
        if step >= 3 and list((cut / "checkpoints").glob("ckpt-*")):
            break
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 143, out
    status = json.loads((cut / "status.json").read_text())
    stopped = int(status["step"])
    assert status["status"] == "interrupted"
    assert f"saved step {stopped} — re-run the same command to resume" in out
    assert find_checkpoint(cut).name == f"ckpt-{stopped:08d}"
    end = str(stopped + 2)
    resumed = train(str(cut), "--max-steps", end)
    out, _ = resumed.communicate(timeout=240)
    assert resumed.returncode == 0 and f"(step {stopped})" in out, out
    whole = train(str(tmp_path / "whole"), "--max-steps", end)
    out, _ = whole.communicate(timeout=240)
    assert whole.returncode == 0, out
    assert (find_checkpoint(cut) / "tensors.safetensors").read_bytes() == \
        (find_checkpoint(tmp_path / "whole") / "tensors.safetensors").read_bytes()
