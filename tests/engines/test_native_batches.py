"""The native engine's batch generator (``_batches.c``) gives the reference's batches bit for bit,
and its many-steps-per-call loop trains exactly as one step per call on those batches."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedlab.data.batchspec import SpecBatchStream
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import PIECE_TOKENS, Batch, Cursor
from embedlab.engines import native
from embedlab.engines.native_batches import NativeBatches, philox
from embedlab.engines.params import fresh_params
from embedlab.engines.step import StepConfig
from embedlab.engines.stepping import BatchByBatch, Schedule
from embedlab.seeding import philox4x32
from embedlab.testing import spec_batch_stream, zipf_ids

pytestmark = pytest.mark.skipif(native.unavailable_reason() is not None,
                                reason="the native kernel does not build here")

FIELDS = ("centers", "span", "mask", "contexts", "negatives")
SCALARS = ("n_pairs", "n_centers", "words_done", "cursor_next")




def _assert_same(ref: list[Batch], got: list[Batch]) -> None:
    assert len(ref) == len(got)
    for i, (a, b) in enumerate(zip(ref, got, strict=True)):
        for f in FIELDS:
            assert np.array_equal(getattr(a, f), getattr(b, f)), (i, f)
        for f in SCALARS:
            assert getattr(a, f) == getattr(b, f), (i, f)


def _generator(stream: SpecBatchStream, threads: int) -> NativeBatches:
    return NativeBatches(native.library(), stream, None, None, threads)  # type: ignore[arg-type]


@pytest.mark.parametrize(("counter", "key"), [((0, 0, 0, 0), (0, 0)),
                                              ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2),
                                              ((7, 1, 2, 1), (123456789, 987654321))])
def test_the_c_philox_is_the_reference_philox(counter: tuple[int, ...],
                                              key: tuple[int, int]) -> None:
    want = tuple(int(w) for w in philox4x32(*counter, key=key))
    assert philox(native.library(), *counter, key=key) == want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 9000), vocab=st.integers(2, 60), sentences=st.integers(0, 400),
       window=st.integers(1, 6), batch=st.sampled_from([16, 48, 64, 100]),
       pad=st.sampled_from([1, 16, 32]), group=st.sampled_from([1, 4, 8, 16]),
       shared=st.integers(1, 12), sample=st.sampled_from([0.0, 1e-3, 5e-2]),
       chunk=st.sampled_from([512, 2048, 5000]), interleave=st.integers(1, 3),
       seed=st.integers(0, 2**40), threads=st.integers(1, 3), data=st.integers(0, 99))
def test_the_c_generator_gives_the_reference_batches(
        n: int, vocab: int, sentences: int, window: int, batch: int, pad: int, group: int,
        shared: int, sample: float, chunk: int, interleave: int, seed: int, threads: int,
        data: int) -> None:
    # sentence ends, reading-order pieces (interleave), chunk ends, padded rows (pad, group):
    # every batch field equal, for every chunk of both epochs
    if batch % group:
        group = 1
    ids, ends = zipf_ids(n, vocab, sentences, data)
    s = spec_batch_stream(ids, ends, vocab=vocab, window=window, batch_size=batch, pad_to=pad,
                          group=group, noise_per_group=shared, sample=sample, chunk_tokens=chunk,
                          interleave=interleave, seed=seed)
    gen = _generator(s, threads)
    for epoch in range(2):
        for c in range(s.n_chunks):
            _assert_same(s.chunk_batches(epoch, c), gen.batches(epoch, c))


def test_interleaved_pieces_stop_windows_in_c_too() -> None:
    # a corpus long enough for two parts of several pieces, one sentence: windows stop only at
    # the pieces' seams (and chunk ends), which both must place identically
    n = 6 * PIECE_TOKENS + 123
    ids, _ = zipf_ids(n, 50, 0, 1)
    s = spec_batch_stream(ids, np.array([n]), interleave=2, chunk_tokens=3 * PIECE_TOKENS + 7,
                          sample=0.0)
    gen = _generator(s, 2)
    for c in range(s.n_chunks):
        _assert_same(s.chunk_batches(1, c), gen.batches(1, c))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_c_generator_does_not_depend_on_the_thread_count(threads: int) -> None:
    ids, ends = zipf_ids(20000, 80, 300, 2)
    s = spec_batch_stream(ids, ends, chunk_tokens=8192)
    one, many = _generator(s, 1), _generator(s, threads)
    for c in range(s.n_chunks):
        _assert_same(one.batches(0, c), many.batches(0, c))


# ---- training: many steps per call == one step per call on the reference batches ------------

STEPS = {
    "skipgram-neg": StepConfig("skipgram", "neg", 3, 5, 8),
    "cbow-nce": StepConfig("cbow", "nce", 3, 5, 8),
    "skipgram-mean": StepConfig("skipgram", "neg", 3, 5, 8, reduction="mean"),
    "skipgram-hs": StepConfig("skipgram", "hs", 3, 0, 1, input_damping=256.0),
    "cbow-hs": StepConfig("cbow", "hs", 3, 0, 1, input_damping=256.0),
}


def _engine(step: StepConfig, counts: np.ndarray, rows: int, threads: int) -> Any:
    from embedlab.config import ModelConfig
    from embedlab.engines.huffman import build_tree

    model = ModelConfig(model=step.model, loss=step.loss, dim=16, window=step.window,
                        negative=step.negative)
    params = fresh_params(model, len(counts), seed=4)
    log_kq = NoiseDistribution(counts).log_expected_count(5) if step.loss == "nce" else None
    tree = build_tree(counts) if step.loss == "hs" else None
    return native.NativeEngine(step, params, log_kq, rows, threads, tree=tree)


def _train(name: str, *, per_call: int, threads: int = 1, steps: int = 60,
           close_between: bool = False) -> str:
    step = STEPS[name]
    ids, ends = zipf_ids(12000, 70, 200, 3)
    hs = step.loss == "hs"
    s = spec_batch_stream(ids, ends, window=step.window, group=step.group,
                          noise_per_group=0 if hs else 10, chunk_tokens=4096, pad_to=16)
    counts = np.bincount(ids, minlength=70) + 1
    engine = _engine(step, counts, s.rows, threads)
    schedule = Schedule(0.05, 1e-4, s.epochs * s.n_tokens)
    runner = engine.runner(s, schedule, step.model) if per_call > 1 else \
        BatchByBatch(s, engine, schedule, step.model)
    cursor, words, done, losses = Cursor(), 0, 0, []
    while done < steps and cursor.epoch < s.epochs:
        out = runner.run(cursor, words, min(per_call, steps - done))
        words = cursor.epoch * s.n_tokens + int(out.words_done[-1])
        cursor = out.cursor_after(len(out) - 1)
        losses += out.losses.tolist()
        done += len(out)
        if close_between:  # mid-chunk: the next call allocates and builds the chunk again
            runner.close()
    runner.close()
    h = hashlib.sha256(np.asarray(losses).tobytes())
    for array in engine.state_dict().values():
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", list(STEPS))
def test_many_steps_per_call_train_as_one_step_per_call(name: str) -> None:
    # the C loop's learning rates, batch views and step calls are the Python loop's, bit for
    # bit (the per-batch path runs the same kernel on the NumPy reference's batches)
    assert _train(name, per_call=7) == _train(name, per_call=1)


@pytest.mark.parametrize("name", ["skipgram-neg", "cbow-hs"])
def test_a_closed_runner_hands_its_buffers_back_and_trains_on_as_if_never_closed(
        name: str) -> None:
    assert _train(name, per_call=7, close_between=True) == _train(name, per_call=7)


def test_close_frees_the_chunk_buffers_and_the_kernel_scratch() -> None:
    ids, ends = zipf_ids(6000, 50, 100, 5)
    s = spec_batch_stream(ids, ends, window=3, chunk_tokens=4096, pad_to=16)
    engine = _engine(STEPS["skipgram-neg"], np.bincount(ids, minlength=50) + 1, s.rows, 1)
    runner = engine.runner(s, Schedule(0.05, 1e-4, s.epochs * s.n_tokens), "skipgram")
    runner.run(Cursor(), 0, 3)
    assert runner._tok_p.size > 0 and engine.native_step._kernel._scratch.size > 0
    runner.close()
    assert not hasattr(runner, "_tok_p") and engine.native_step._kernel._scratch.size == 0


@pytest.mark.parametrize("threads", [2, 3])
def test_training_does_not_depend_on_the_thread_count(threads: int) -> None:
    assert _train("skipgram-neg", per_call=32, threads=threads) == \
        _train("skipgram-neg", per_call=32, threads=1)


def test_rows_past_the_batch_have_no_contexts_in_the_c_loop() -> None:
    # batch 60 padded to 64 rows: rows 60..63 are the next batch's centres, masked here
    step = replace(STEPS["skipgram-neg"], group=4)
    ids, ends = zipf_ids(5000, 40, 50, 4)
    s = spec_batch_stream(ids, ends, batch_size=60, pad_to=32, group=4, chunk_tokens=2048)
    assert s.rows == 64
    counts = np.bincount(ids, minlength=40) + 1
    a, b = _engine(step, counts, s.rows, 1), _engine(step, counts, s.rows, 1)
    schedule = Schedule(0.05, 1e-4, s.epochs * s.n_tokens)
    fast, slow = a.runner(s, schedule, "skipgram"), BatchByBatch(s, b, schedule, "skipgram")
    out = fast.run(Cursor(), 0, 5)
    cursors = [Cursor(), *(out.cursor_after(i) for i in range(4))]
    ref = [slow.run(c, w, 1) for c, w in zip(cursors, [0, *out.words_done[:4].tolist()],
                                             strict=True)]
    slow.close()
    assert out.losses.tolist() == [float(r.losses[0]) for r in ref]
    assert np.array_equal(a.params.w_in, b.params.w_in)


def test_the_kernel_counts_its_parallel_and_call_seconds() -> None:
    from embedlab.engines.native_batches import kernel_seconds

    lib = native.library()
    parallel0, call0 = kernel_seconds(lib)
    _train("skipgram-neg", per_call=16, steps=20)
    parallel, call = kernel_seconds(lib)
    assert 0 < parallel - parallel0 <= call - call0


@pytest.mark.parametrize(("sample", "interleave", "threads"), [(0.0, 1, 1), (1e-2, 3, 2)])
def test_an_id_that_names_no_word_is_refused_where_it_is_read(
        tmp_path: Any, sample: float, interleave: int, threads: int) -> None:
    # a run on the native engine opens its corpus without reading all of it first: the
    # generator checks each id as it reads it, and names the file and the position
    from embedlab.errors import InputError

    ids, ends = zipf_ids(6000, 40, 200, 1)
    vocab, bad = int(ids.max()) + 1, 4321
    (tmp_path / "ids.u32").write_bytes(ids.astype("<u4").tobytes())
    mapped = np.memmap(tmp_path / "ids.u32", dtype=np.uint32, mode="r")
    s = spec_batch_stream(mapped, ends, vocab=vocab, chunk_tokens=2048, sample=sample,
                          interleave=interleave)
    damage = np.memmap(tmp_path / "ids.u32", dtype=np.uint32, mode="r+")
    damage[bad] = ids[bad] = vocab + 7  # after the stream's tables were made for the vocabulary
    damage.flush()
    gen = _generator(s, threads)
    holding = [c for c in range(s.n_chunks)
               if any(a <= bad < b for a, b in _reading_runs(s, c))]
    for c in range(s.n_chunks):
        if c in holding:
            with pytest.raises(InputError, match=f"ids.u32 holds id {vocab + 7:,} at position "
                                                 f"{bad:,}, but the vocabulary has {vocab:,} "
                                                 "words"):
                gen.build(0, c)
        else:
            gen.build(0, c)
    assert len(holding) == 1
    in_memory = _generator(s, 1)
    in_memory.ids = ids.astype(np.uint32)  # not a file: the error names no folder
    with pytest.raises(ValueError, match=f"token id {vocab + 7:,} at position {bad:,}"):
        for c in range(s.n_chunks):
            in_memory.build(0, c)


def _reading_runs(s: Any, chunk: int) -> list[tuple[int, int]]:
    from embedlab.data.pairs import reading_runs

    lo = chunk * s.chunk_tokens
    return [(int(a), int(b)) for a, b in
            reading_runs(s.n_tokens, s.interleave, lo, min(s.n_tokens, lo + s.chunk_tokens))]
