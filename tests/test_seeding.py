"""Counter-based seeding: stable keys, reproducible generators, independent named streams."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import BatchStream, keep_probabilities
from embedlab.errors import InputError
from embedlab.seeding import (
    STREAMS,
    derive_key,
    mt19937_rng,
    numpy_rng,
    philox4x32,
    philox_key,
    torch_generator,
    uniform_float32,
)

try:
    import torch
except ImportError:  # the optional extra: the torch generator's tests need it
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch (embedlab[torch])")

seeds = st.integers(min_value=0, max_value=2**62)
counters = st.lists(st.integers(min_value=0, max_value=2**40), max_size=3)


def test_derive_key_is_stable_across_versions() -> None:
    # Hard-coded on purpose: these values were computed once and written here so that a change
    # of the key derivation (hash, packing, byte order) - which would silently change every
    # run's random draws and break reproducing old runs - fails this test.
    assert derive_key(1, "init") == 14695737228810521323
    assert derive_key(0, "negatives", 3, 7) == 14234160097623689331
    assert derive_key(2**40, "shuffle", -1) == 4170425272078251564


@given(seeds, st.sampled_from(STREAMS), counters)
def test_derive_key_is_a_64_bit_pure_function(seed: int, stream: str, cs: list[int]) -> None:
    key = derive_key(seed, stream, *cs)
    assert 0 <= key < 2**64
    assert key == derive_key(seed, stream, *cs)


def test_neighbouring_inputs_give_distinct_keys() -> None:
    keys = {derive_key(s, name, e, c) for s in range(4) for name in STREAMS
            for e in range(4) for c in range(4)}
    assert len(keys) == 4 * len(STREAMS) * 16


@given(seeds, st.sampled_from(STREAMS), counters)
def test_generators_replay_the_same_draws(seed: int, stream: str, cs: list[int]) -> None:
    a = numpy_rng(seed, stream, *cs).integers(0, 2**32, 8)
    b = numpy_rng(seed, stream, *cs).integers(0, 2**32, 8)
    assert np.array_equal(a, b)


@needs_torch
@given(seeds, st.sampled_from(STREAMS), counters)
def test_torch_generators_replay_the_same_draws(seed: int, stream: str, cs: list[int]) -> None:
    ta = torch.rand(5, generator=torch_generator(seed, stream, *cs))
    tb = torch.rand(5, generator=torch_generator(seed, stream, *cs))
    assert np.array_equal(ta, tb)


def test_streams_do_not_shift_each_other() -> None:
    # Drawing any amount from one stream leaves another stream's draws unchanged: each draw is a
    # function of (seed, stream, counters) only, never of a shared generator's position.
    fresh = numpy_rng(7, "init").random(16)
    neg = numpy_rng(7, "negatives", 0, 0)
    neg.random(10_000)
    assert np.array_equal(numpy_rng(7, "init").random(16), fresh)
    assert not np.array_equal(numpy_rng(7, "negatives").random(16), fresh)
    assert not np.array_equal(numpy_rng(8, "init").random(16), fresh)


@needs_torch
@given(seeds, st.sampled_from(STREAMS), st.lists(st.integers(0, 40), min_size=1, max_size=3),
       st.integers(1, 50))
def test_uniform_float32_draws_torch_rand_bits_without_torch(seed: int, stream: str,
                                                             shape: list[int], block: int) -> None:
    # the training process draws its initial vectors this way; earlier versions drew them with
    # torch.rand, and a run restarted must start from the same vectors
    want = torch.rand(tuple(shape), generator=torch_generator(seed, stream), dtype=torch.float32)
    got = uniform_float32(mt19937_rng(seed, stream), tuple(shape), rows_per_draw=block)
    assert got.dtype == np.float32 and got.shape == tuple(shape)
    assert got.tobytes() == want.numpy().tobytes()


@needs_torch
def test_torch_generator_seed_fits_int64() -> None:
    g = torch_generator(2**62, "init", 5)
    assert 0 <= g.initial_seed() < 2**63


def test_torch_generator_without_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # as if not installed: the import fails
    with pytest.raises(InputError) as e:
        torch_generator(1, "init")
    assert str(e.value) == ("embedlab.seeding.torch_generator needs PyTorch, which is not "
                            "installed; install it with pip install 'embedlab[torch]'")


def _stream(noise_per_group: int, seed: int = 3) -> BatchStream:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, 5000).astype(np.uint32)
    counts = np.bincount(ids, minlength=50).astype(np.int64) + 1
    ends = np.arange(10, 5001, 10, dtype=np.int64)
    return BatchStream(ids, ends, keep_probabilities(counts, 1e-2), NoiseDistribution(counts),
                       window=3, batch_size=64, group=8, noise_per_group=noise_per_group,
                       seed=seed, epochs=1, chunk_tokens=1024)


def test_changing_negatives_does_not_shift_subsampling_or_windows() -> None:
    a, b = _stream(4).chunk_batches(0, 1), _stream(9).chunk_batches(0, 1)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.centers, y.centers) and np.array_equal(x.mask, y.mask)
        assert np.array_equal(x.span, y.span) and x.words_done == y.words_done
    assert not np.array_equal(a[0].negatives[:, :4], b[0].negatives[:, :4])


def test_the_seed_changes_the_data_stream() -> None:
    a, b = _stream(4, seed=3).chunk_batches(0, 0), _stream(4, seed=4).chunk_batches(0, 0)
    assert not all(np.array_equal(x.mask, y.mask) for x, y in zip(a, b, strict=False))


# Random123's known-answer vectors for philox4x32_R(10, ctr, key) (its kat_vectors file)
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize(("counter", "key", "expected"), PHILOX_KAT)
def test_philox_gives_random123s_known_answers(counter: tuple[int, ...], key: tuple[int, int],
                                               expected: tuple[int, ...]) -> None:
    assert tuple(int(w) for w in philox4x32(*counter, key=key)) == expected


@given(st.lists(st.integers(0, 2**32 - 1), min_size=4, max_size=4),
       st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_philox_on_arrays_is_philox_on_each_counter(counter: list[int], k0: int, k1: int) -> None:
    # the vectorised form computes each lane as the scalar one does (no lane mixes with another)
    lanes = np.array([counter[0], counter[0] ^ 1, 0], dtype=np.uint64)
    words = philox4x32(lanes, counter[1], counter[2], counter[3], key=(k0, k1))
    for i, c0 in enumerate(lanes):
        one = philox4x32(int(c0), counter[1], counter[2], counter[3], key=(k0, k1))
        assert [int(w[i]) for w in words] == [int(w) for w in one]
    assert all(w.dtype == np.uint32 for w in words)


def test_philox_key_splits_the_derived_key() -> None:
    k0, k1 = philox_key(7, "batches")
    assert k0 | (k1 << 32) == derive_key(7, "batches") and k0 < 2**32 and k1 < 2**32


def test_tritons_philox_is_the_specifications(monkeypatch: pytest.MonkeyPatch) -> None:
    # a GPU engine draws the batch specification's numbers with tl.philox, keyed by the 64-bit
    # key as a signed int64; checked here on CPU with Triton's interpreter
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    tl = pytest.importorskip("triton.language")

    @triton.jit
    def draw(out, key, epoch, first, n: tl.constexpr):  # type: ignore[no-untyped-def]
        lane = tl.arange(0, n)
        q = lane.to(tl.uint64) + first
        c0, c1 = (q & 0xFFFFFFFF).to(tl.uint32), (q >> 32).to(tl.uint32)
        c2 = tl.zeros_like(c0) + epoch
        words = tl.philox(key, c0, c1, c2, tl.zeros_like(c0))
        for i in tl.static_range(4):
            tl.store(out + lane * 4 + i, words[i])

    key = derive_key(1, "batches")
    out = torch.zeros(64, dtype=torch.int32)
    first = 2**32 - 5  # the counter's low word wraps into the high one
    draw[(1,)](out, key - 2**64 if key >= 2**63 else key, 3, first, n=16)
    q = np.arange(16, dtype=np.uint64) + np.uint64(first)
    want = philox4x32(q & np.uint64(0xFFFF_FFFF), q >> np.uint64(32), 3, 0,
                      key=philox_key(1, "batches"))
    assert np.array_equal(out.numpy().view(np.uint32).reshape(16, 4), np.stack(want, axis=1))
