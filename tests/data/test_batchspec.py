"""The batch specification's reference (docs/batches.md): draws are pure functions of positions."""

from __future__ import annotations

import numpy as np
import pytest

from embedlab.data.batchspec import SpecBatchStream, alias_thresholds, keep_thresholds
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Cursor, keep_probabilities

V = 40


def _stream(n: int = 6000, *, chunk_tokens: int = 1024, sample: float = 1e-2, seed: int = 3,
            window: int = 4, interleave: int = 1, epochs: int = 2) -> SpecBatchStream:
    rng = np.random.default_rng(0)
    ids = (rng.zipf(1.4, n) % V).astype(np.uint32)
    counts = np.bincount(ids, minlength=V) + 1
    return SpecBatchStream(ids, np.array([n // 3, n // 2, n]), keep_probabilities(counts, sample),
                           NoiseDistribution(counts), window=window, batch_size=64, group=8,
                           noise_per_group=12, seed=seed, epochs=epochs,
                           chunk_tokens=chunk_tokens, interleave=interleave)


def _kept_windows(s: SpecBatchStream, epoch: int) -> dict[int, tuple[int, int]]:
    """Position -> (id, window) of every kept centre of ``epoch``."""
    out: dict[int, tuple[int, int]] = {}
    for chunk in range(s.n_chunks):
        lo = chunk * s.chunk_tokens
        tok = np.asarray(s.ids[lo:lo + s.chunk_tokens], dtype=np.int64)
        kept = s._kept(epoch, chunk, tok, lo)
        pos = kept + lo
        for q, b in zip(pos.tolist(), s._windows(epoch, chunk, pos).tolist(), strict=True):
            out[q] = (int(s.ids[q]), b)
    return out


def test_subsampling_and_windows_depend_on_the_position_only() -> None:
    # the same position keeps the same token with the same window whatever the chunk size:
    # a thread, a rank or a GPU block can start anywhere
    a = _kept_windows(_stream(chunk_tokens=1024), epoch=1)
    b = _kept_windows(_stream(chunk_tokens=1536), epoch=1)
    assert a == b and 0 < len(a) < 6000
    assert all(1 <= w <= 4 for _, w in a.values())
    assert _kept_windows(_stream(), epoch=0) != a  # another epoch draws anew


def test_subsampling_keeps_each_word_at_its_probability() -> None:
    s = _stream(n=60000, chunk_tokens=1 << 14, sample=1e-2)
    kept = np.zeros(V)
    for chunk in range(s.n_chunks):
        lo = chunk * s.chunk_tokens
        tok = np.asarray(s.ids[lo:lo + s.chunk_tokens], dtype=np.int64)
        np.add.at(kept, tok[s._kept(0, chunk, tok, lo)], 1)
    seen = np.bincount(np.asarray(s.ids), minlength=V)
    often = seen > 2000
    assert s.keep_prob is not None
    assert np.allclose(kept[often] / seen[often], s.keep_prob[often], atol=0.03)


def test_window_sizes_are_uniform() -> None:
    s = _stream(n=40000, chunk_tokens=1 << 14, sample=0.0, window=5)
    pos = np.arange(40000)
    b = s._windows(0, 0, pos)
    share = np.bincount(b, minlength=6)[1:] / len(b)
    assert np.allclose(share, 0.2, atol=0.01)


def test_noise_words_follow_the_noise_distribution() -> None:
    s = _stream()
    negs = s._negatives(0, 0, (200, 8, 12)).ravel()
    share = np.bincount(negs, minlength=V) / len(negs)
    assert np.abs(share - s.noise.probs).max() < 0.01
    assert not np.array_equal(negs, s._negatives(0, 1, (200, 8, 12)).ravel())  # per chunk


@pytest.mark.parametrize("p", [0.0, 1.0, 0.5, 2.0**-32, 1 - 2.0**-40, 0.3])
def test_integer_thresholds_are_exact(p: float) -> None:
    # a probability p keeps a uniform 32-bit draw x when x < floor(p * 2^32): exactly p up
    # to 2^-32, with 1 always and 0 never
    (t,) = keep_thresholds(np.array([p]))
    assert int(t) == int(np.floor(p * 2**32))
    assert (p == 1.0) == (int(t) == 2**32) and (p == 0.0) == (int(t) == 0)


def test_alias_thresholds_reproduce_the_table() -> None:
    noise = NoiseDistribution(np.array([5, 1, 0, 9, 3]))
    thresholds, aliases = alias_thresholds(noise)
    assert thresholds.dtype == np.uint64 and aliases.dtype == np.int64
    # what the integer table gives each word, summed over columns, is Q
    v = len(noise)
    q = np.zeros(v)
    for j in range(v):
        keep = int(thresholds[j]) / 2**32
        q[j] += keep / v
        q[aliases[j]] += (1 - keep) / v
    assert np.allclose(q, noise.probs, atol=1e-9)


def test_the_stream_is_a_pure_function_of_its_coordinates() -> None:
    a = list(_stream(interleave=2).iterate(Cursor(1, 2, 3)))
    b = list(_stream(interleave=2).iterate(Cursor(1, 2, 3)))
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.negatives, y.negatives) and np.array_equal(x.mask, y.mask)
