"""Batches: every kept token is a centre exactly once; masks obey windows and sentences; chunks
are pure functions of their coordinates, so resuming from a cursor replays the same batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import BatchStream, Cursor, keep_probabilities


def _stream(n: int = 500, window: int = 3, batch: int = 16, sample: float = 0.0, epochs: int = 2,
            ends: list[int] | None = None, seed: int = 7) -> BatchStream:
    rng = np.random.default_rng(1)
    ids = rng.zipf(1.5, size=n).clip(1, 50).astype(np.uint32) - 1
    counts = np.bincount(ids, minlength=50) + 1
    keep = keep_probabilities(counts, sample)
    return BatchStream(ids, np.array(ends or [n]), keep, NoiseDistribution(counts),
                       window=window, batch_size=batch, group=8, noise_per_group=4, seed=seed,
                       epochs=epochs, chunk_tokens=128, pad_to=16)


def _same(a, b) -> bool:  # type: ignore[no-untyped-def]
    return all(torch.equal(getattr(a, f), getattr(b, f))
               for f in ("centers", "span", "mask", "contexts", "negatives")) and \
        a.cursor_next == b.cursor_next and a.words_done == b.words_done


def test_every_token_is_a_centre_once_without_subsampling() -> None:
    s = _stream(epochs=1)
    seen = []
    for b in s.iterate(Cursor()):
        seen.extend(b.centers[: b.n_centers].tolist())
    assert seen == s.ids.astype(np.int64).tolist()


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(1, 60), min_size=1, max_size=8))
def test_mask_respects_window_and_sentences(window: int, lengths: list[int]) -> None:
    ends = np.cumsum(lengths).tolist()
    s = _stream(n=ends[-1], window=window, ends=ends, epochs=1)
    sentence = np.searchsorted(np.array(ends), np.arange(ends[-1]), side="right")
    pos = 0
    for b in s.iterate(Cursor()):
        for t in range(b.n_centers):
            for j in np.nonzero(b.mask[t].numpy())[0]:
                o = int(j) - window
                assert 1 <= abs(o) <= window
                assert sentence[pos + t + o] == sentence[pos + t]
                assert int(b.span[t + j]) == int(s.ids[pos + t + o])
        assert not b.mask[b.n_centers :].any()
        pos += b.n_centers
    assert pos == ends[-1]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(1, 60), min_size=1, max_size=8),
       st.sampled_from([16, 13]))
def test_each_centre_has_every_context_up_to_its_window(window: int, lengths: list[int],
                                                         batch: int) -> None:
    ends = np.cumsum(lengths).tolist()
    s = _stream(n=ends[-1], window=window, ends=ends, epochs=1, batch=batch)
    sentence = np.searchsorted(np.array(ends), np.arange(ends[-1]), side="right")
    pos = 0
    for b in s.iterate(Cursor()):
        mask = b.mask.numpy()
        for t in range(b.n_centers):
            offsets = (np.nonzero(mask[t])[0] - window).tolist()
            # the shrunk window b_t >= 1 is the farthest context: every offset up to it that
            # stays in the centre's sentence (and chunk) must be there, none missing at distance 1
            c, reach = pos + t, max((abs(o) for o in offsets), default=1)
            inside = [o for o in range(-reach, reach + 1) if o and 0 <= c + o < ends[-1]
                      and sentence[c + o] == sentence[c]
                      and (c + o) // s.chunk_tokens == c // s.chunk_tokens]
            assert offsets == inside
        pos += b.n_centers


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.sampled_from([0.0, 0.05]), st.sampled_from([16, 13]))
def test_contexts_and_pair_counts_agree_with_the_mask(window: int, sample: float,
                                                      batch: int) -> None:
    s = _stream(n=700, window=window, ends=[300, 301, 700], epochs=1, sample=sample, batch=batch)
    for b in s.iterate(Cursor()):
        mask = b.mask.numpy()
        assert b.mask.dtype == torch.uint8 and set(np.unique(mask).tolist()) <= {0, 1}
        np.testing.assert_array_equal(b.contexts.numpy(), mask.sum(axis=1))
        assert b.n_pairs == int(mask.sum())  # rows past the batch's own centres have none
        assert not mask[b.n_centers :].any()


def test_resume_from_any_cursor_replays_identical_batches() -> None:
    s = _stream(sample=1e-2)
    full = list(s.iterate(Cursor()))
    for k in (0, 1, 5, len(full) // 2, len(full) - 1):
        resumed = list(s.iterate(full[k - 1].cursor_next if k else Cursor()))
        assert len(resumed) == len(full) - k
        assert all(_same(a, b) for a, b in zip(full[k:], resumed, strict=True))


def test_streams_are_independent_and_seeded() -> None:
    a = _stream(sample=1e-2).chunk_batches(0, 0)
    b = _stream(sample=1e-2).chunk_batches(0, 0)
    c = _stream(sample=1e-2, seed=8).chunk_batches(0, 0)
    assert all(_same(x, y) for x, y in zip(a, b, strict=True))
    assert not all(_same(x, y) for x, y in zip(a, c, strict=False))
    # a different epoch re-draws subsampling and windows
    e1 = _stream(sample=1e-2).chunk_batches(1, 0)
    assert not all(_same(x, y) for x, y in zip(a, e1, strict=False))


def test_words_done_is_monotone_and_ends_at_the_corpus_size() -> None:
    s = _stream(sample=1e-2, epochs=1)
    done = [b.words_done for b in s.iterate(Cursor())]
    assert done == sorted(done) and done[-1] == len(s.ids)


def test_keep_probabilities_formula() -> None:
    counts = np.array([1000, 10, 1])
    p = keep_probabilities(counts, 1e-3)
    assert p is not None
    t = 1e-3 * counts.sum()
    expected = np.minimum(1, (np.sqrt(counts / t) + 1) * t / counts)
    np.testing.assert_allclose(p, expected)
    assert keep_probabilities(counts, 0.0) is None


def test_wide_windows_count_every_context() -> None:
    # more than 255 contexts per centre: the count must not wrap around a byte
    n, window = 2000, 200
    counts = np.full(10, 10)
    s = BatchStream(np.arange(n, dtype=np.uint32) % 10, np.array([n]), None,
                    NoiseDistribution(counts), window=window, batch_size=64, group=8,
                    noise_per_group=4, seed=3, epochs=1, chunk_tokens=4096, pad_to=8)
    most = 0
    for b in s.iterate(Cursor()):
        np.testing.assert_array_equal(b.contexts.numpy(), b.mask.numpy().sum(axis=1))
        most = max(most, int(b.contexts.max()))
    assert most > 255


def _rss_file_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_a_memory_mapped_corpus_does_not_stay_resident(tmp_path: Path) -> None:
    n, vocab = 4_000_000, 1000  # 16 MB of ids
    ids = np.random.default_rng(5).integers(0, vocab, n, dtype=np.uint32)
    (tmp_path / "ids.u32").write_bytes(ids.tobytes())
    mapped = np.memmap(tmp_path / "ids.u32", dtype=np.uint32, mode="r")  # nothing read yet
    counts = np.bincount(ids, minlength=vocab) + 1

    def stream(ids: np.ndarray) -> BatchStream:
        return BatchStream(ids, np.array([n]), keep_probabilities(counts, 1e-3),
                           NoiseDistribution(counts), window=2, batch_size=4096, group=32,
                           noise_per_group=8, seed=1, epochs=1, chunk_tokens=1 << 19, pad_to=32)

    in_memory = list(stream(ids).iterate(Cursor()))  # also warms the code paths
    before = _rss_file_kib()
    from_file = list(stream(mapped).iterate(Cursor()))
    grown = _rss_file_kib() - before
    assert grown < 16_000 / 4, f"RssFile grew by {grown} KiB while streaming 16 MB of ids"
    assert len(from_file) == len(in_memory)
    assert all(_same(a, b) for a, b in zip(in_memory, from_file, strict=True))
