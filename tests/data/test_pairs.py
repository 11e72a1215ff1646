"""Batches: every kept token is a centre exactly once; masks obey windows and sentences; chunks
are pure functions of their coordinates, so resuming from a cursor replays the same batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
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
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("centers", "span", "mask", "contexts", "negatives")) and \
        a.cursor_next == b.cursor_next and a.words_done == b.words_done


def test_every_token_is_a_centre_once_without_subsampling() -> None:
    s = _stream(epochs=1)
    seen = []
    for b in s.iterate(Cursor()):
        seen.extend(b.centers[: b.n_centers].tolist())
    assert seen == s.ids.astype(np.int64).tolist()


def _positional_stream(ends: list[int], *, window: int, batch: int = 16,
                       sample: float = 0.0) -> BatchStream:
    """A stream whose token ids are their positions in the corpus (a vocabulary of n words), so
    every (centre, context) pair of a mask maps back to where both tokens stood before
    subsampling. Each position keeps the probability of a Zipf word's token (frequencies of at
    least 500 tokens, so short corpora are subsampled too): sample 0.05 drops about a fifth of
    the tokens, 0.01 about half."""
    n = ends[-1]
    words = np.random.default_rng(1).zipf(1.5, size=max(n, 500)).clip(1, 50) - 1
    p = keep_probabilities(np.bincount(words, minlength=50) + 1, sample)
    return BatchStream(np.arange(n, dtype=np.uint32), np.array(ends),
                       None if p is None else p[words[:n]], NoiseDistribution(np.ones(n)),
                       window=window, batch_size=batch, group=8, noise_per_group=4, seed=7,
                       epochs=1, chunk_tokens=128, pad_to=16)


def _centres_and_contexts(s: BatchStream) -> tuple[list[int], list[list[int]]]:
    """Every centre (an original position) in stream order, with its contexts' offsets in kept
    positions: o such that the context is the centre's o-th kept neighbour. Checks on the way
    that the span holds exactly that neighbour and that padding rows have no contexts."""
    centres: list[int] = []
    offsets: list[list[int]] = []
    spans: list[tuple[int, list[int]]] = []  # (index of the centre, context positions)
    for b in s.iterate(Cursor()):
        mask = b.mask
        assert not mask[b.n_centers :].any()
        for t in range(b.n_centers):
            js = np.nonzero(mask[t])[0]
            spans.append((len(centres), [int(b.span[t + j]) for j in js]))
            centres.append(int(b.centers[t]))
            offsets.append((js - s.window).tolist())
    index = {c: k for k, c in enumerate(centres)}
    for (k, ctx), offs in zip(spans, offsets, strict=True):
        # a context is a kept token (a centre itself) o kept positions away: word2vec applies
        # the window after subsampling, so dropped tokens do not use up window slots
        assert [index[c] - k for c in ctx] == offs
    return centres, offsets


_SAMPLES = st.sampled_from([0.0, 0.01, 0.05])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(1, 60), min_size=1, max_size=8), _SAMPLES)
def test_mask_respects_window_and_sentences(window: int, lengths: list[int],
                                            sample: float) -> None:
    ends = np.cumsum(lengths).tolist()
    s = _positional_stream(ends, window=window, sample=sample)
    sentence = np.searchsorted(np.array(ends), np.arange(ends[-1]), side="right")
    centres, offsets = _centres_and_contexts(s)
    assert centres == sorted(set(centres))  # each kept token is a centre once, in corpus order
    if sample == 0:
        assert centres == list(range(ends[-1]))
    for k, offs in enumerate(offsets):
        c = centres[k]
        for o in offs:
            # in the same sentence and chunk *as positioned before subsampling*, whatever
            # subsampling dropped in between
            assert 1 <= abs(o) <= window
            assert sentence[centres[k + o]] == sentence[c]
            assert centres[k + o] // s.chunk_tokens == c // s.chunk_tokens


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(1, 60), min_size=1, max_size=8),
       st.sampled_from([16, 13]), _SAMPLES)
def test_each_centre_has_every_context_up_to_its_window(window: int, lengths: list[int],
                                                         batch: int, sample: float) -> None:
    ends = np.cumsum(lengths).tolist()
    s = _positional_stream(ends, window=window, batch=batch, sample=sample)
    sentence = np.searchsorted(np.array(ends), np.arange(ends[-1]), side="right")
    centres, offsets = _centres_and_contexts(s)
    for k, offs in enumerate(offsets):
        # the shrunk window b_t >= 1 is the farthest context: every kept neighbour up to it
        # that stays in the centre's sentence (and chunk) must be there, none missing at
        # distance 1
        c, reach = centres[k], max((abs(o) for o in offs), default=1)
        inside = [o for o in range(-reach, reach + 1) if o and 0 <= k + o < len(centres)
                  and sentence[centres[k + o]] == sentence[c]
                  and centres[k + o] // s.chunk_tokens == c // s.chunk_tokens]
        assert offs == inside


@pytest.mark.parametrize("sample", [0.01, 0.05])
def test_subsampled_windows_stop_at_sentence_and_chunk_ends(sample: float) -> None:
    # Fixed cases the two property tests above may draw only now and then: sentence ends in
    # the middle of chunks (300 and 301 in chunk 2, 420 in chunk 3), a one-token sentence, and
    # tokens dropped before each end in its chunk (so kept and original positions disagree
    # there).
    ends = [300, 301, 420, 700]
    s = _positional_stream(ends, window=5, sample=sample)
    sentence = np.searchsorted(np.array(ends), np.arange(ends[-1]), side="right")
    centres, offsets = _centres_and_contexts(s)
    assert len(centres) < 0.9 * ends[-1]
    assert set(range(256, 300)) - set(centres) and set(range(384, 420)) - set(centres)
    wider = 0  # pairs farther apart in the corpus than in kept positions
    for k, offs in enumerate(offsets):
        c = centres[k]
        reach = max((abs(o) for o in offs), default=1)
        inside = [o for o in range(-reach, reach + 1) if o and 0 <= k + o < len(centres)
                  and sentence[centres[k + o]] == sentence[c]
                  and centres[k + o] // s.chunk_tokens == c // s.chunk_tokens]
        assert offs == inside
        wider += sum(abs(centres[k + o] - c) > abs(o) for o in offs)
    assert wider > 0
    # the one-token sentence [300, 301) has no contexts and is nobody's context
    if 300 in centres:
        assert offsets[centres.index(300)] == []
    assert all(centres[k + o] != 300 for k, offs in enumerate(offsets) for o in offs)
    # and windows stop at chunk ends even inside a sentence: chunk 1 ends at 256 in [0, 300)
    last_in_chunk_1 = max(k for k, c in enumerate(centres) if c < 256)
    assert all(o < 0 for o in offsets[last_in_chunk_1])


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.sampled_from([0.0, 0.05]), st.sampled_from([16, 13]))
def test_contexts_and_pair_counts_agree_with_the_mask(window: int, sample: float,
                                                      batch: int) -> None:
    s = _stream(n=700, window=window, ends=[300, 301, 700], epochs=1, sample=sample, batch=batch)
    for b in s.iterate(Cursor()):
        mask = b.mask
        assert b.mask.dtype == np.uint8 and set(np.unique(mask).tolist()) <= {0, 1}
        np.testing.assert_array_equal(b.contexts, mask.sum(axis=1))
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
        np.testing.assert_array_equal(b.contexts, b.mask.sum(axis=1))
        most = max(most, int(b.contexts.max()))
    assert most > 255


def _rss_file_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize("interleave", [1, 3])
def test_a_memory_mapped_corpus_does_not_stay_resident(tmp_path: Path, interleave: int) -> None:
    n, vocab = 4_000_000, 1000  # 16 MB of ids
    ids = np.random.default_rng(5).integers(0, vocab, n, dtype=np.uint32)
    (tmp_path / "ids.u32").write_bytes(ids.tobytes())
    mapped = np.memmap(tmp_path / "ids.u32", dtype=np.uint32, mode="r")  # nothing read yet
    counts = np.bincount(ids, minlength=vocab) + 1

    def stream(ids: np.ndarray) -> BatchStream:
        return BatchStream(ids, np.array([n]), keep_probabilities(counts, 1e-3),
                           NoiseDistribution(counts), window=2, batch_size=4096, group=32,
                           noise_per_group=8, seed=1, epochs=1, chunk_tokens=1 << 19, pad_to=32,
                           interleave=interleave)

    in_memory = list(stream(ids).iterate(Cursor()))  # also warms the code paths
    before = _rss_file_kib()
    from_file = list(stream(mapped).iterate(Cursor()))
    grown = _rss_file_kib() - before
    assert grown < 16_000 / 4, f"RssFile grew by {grown} KiB while streaming 16 MB of ids"
    assert len(from_file) == len(in_memory)
    assert all(_same(a, b) for a, b in zip(in_memory, from_file, strict=True))
