"""The reading order: ``interleave`` parts of the corpus, read a piece from each in turn.

Every token is read once per epoch, chunks cut the reading order like any other, windows never
span two pieces, and resuming from any cursor replays the same batches.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import PIECE_TOKENS, BatchStream, Cursor, reading_runs


def _order(n: int, parts: int, piece: int, cuts: list[int]) -> list[int]:
    """Physical positions in reading order, asked for chunk by chunk (cut at ``cuts``)."""
    bounds = [0, *sorted({min(c, n) for c in cuts}), n]
    out: list[int] = []
    for lo, hi in itertools.pairwise(bounds):
        for a, b in reading_runs(n, parts, lo, hi, piece):
            assert lo <= hi and a < b
            out.extend(range(a, b))
    return out


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 400), parts=st.integers(1, 5), piece=st.integers(1, 20),
       cuts=st.lists(st.integers(0, 400), max_size=6))
def test_each_position_is_read_once_however_the_order_is_cut(
        n: int, parts: int, piece: int, cuts: list[int]) -> None:
    whole = _order(n, parts, piece, [])
    assert sorted(whole) == list(range(n))
    assert _order(n, parts, piece, cuts) == whole  # chunks see the same order


def test_two_parts_alternate_pieces_of_the_two_halves() -> None:
    order = _order(43, 2, 5, [])
    # halves of 4 whole pieces (20 tokens) each; the 3 tokens left are read last
    expected = []
    for i in range(4):
        expected += list(range(5 * i, 5 * i + 5)) + list(range(20 + 5 * i, 20 + 5 * i + 5))
    assert order == [*expected, 40, 41, 42]
    assert _order(43, 1, 5, []) == list(range(43))  # one stream: the corpus order
    assert reading_runs(43, 1, 7, 30, 5) == [(7, 30)]
    assert _order(9, 2, 5, []) == list(range(9))  # shorter than a piece per part: in order


def _stream(n: int, parts: int, *, ends: list[int] | None = None, sample: bool = False,
            epochs: int = 1, window: int = 3) -> BatchStream:
    """Token ids are their corpus positions, so every pair maps back to where it stood."""
    p = None
    if sample:
        p = np.random.default_rng(3).uniform(0.3, 1.0, size=n)
    return BatchStream(np.arange(n, dtype=np.uint32), np.array(ends or [n]), p,
                       NoiseDistribution(np.ones(n)), window=window, batch_size=256, group=8,
                       noise_per_group=4, seed=7, epochs=epochs, chunk_tokens=3000, pad_to=16,
                       interleave=parts)


def _pairs(s: BatchStream) -> tuple[list[int], list[tuple[int, int]]]:
    centres: list[int] = []
    pairs: list[tuple[int, int]] = []
    for b in s.iterate(Cursor()):
        mask = b.mask
        for t in range(b.n_centers):
            c = int(b.centers[t])
            centres.append(c)
            pairs += [(c, int(b.span[t + j])) for j in np.nonzero(mask[t])[0]]
    return centres, pairs


N = 5 * PIECE_TOKENS + 123  # two whole pieces per part with 2 parts, and a tail read in order


def test_an_epoch_reads_every_token_once_in_the_reading_order() -> None:
    centres, _ = _pairs(_stream(N, 2))
    assert centres == _order(N, 2, PIECE_TOKENS, [])
    assert centres[PIECE_TOKENS] == 2 * PIECE_TOKENS  # the second part's first token
    assert _pairs(_stream(N, 1))[0] == list(range(N))


def test_windows_pair_neighbours_of_one_piece_sentence_and_chunk_only() -> None:
    """Window 1 (every b_t is 1) and no subsampling: the pairs are exactly the neighbours in
    the corpus that are also neighbours in the reading order, in the same sentence and chunk."""
    ends = [1000, 7000, N]
    _, pairs = _pairs(_stream(N, 2, ends=ends, window=1))
    order = _order(N, 2, PIECE_TOKENS, [])
    at = np.empty(N, dtype=np.int64)
    at[order] = np.arange(N)
    sentence = np.searchsorted(np.array(ends), np.arange(N), side="right")
    expected = {(c, o) for c in range(N) for o in (c - 1, c + 1)
                if 0 <= o < N and abs(at[c] - at[o]) == 1 and sentence[c] == sentence[o]
                and at[c] // 3000 == at[o] // 3000}
    assert len(pairs) == len(set(pairs)) and set(pairs) == expected
    # the pieces' ends cut pairs the corpus order would have: 2 parts x 2 pieces, and the end of
    # the first part where the in-order tail does not follow it
    assert (PIECE_TOKENS - 1, PIECE_TOKENS) not in expected
    assert (PIECE_TOKENS - 2, PIECE_TOKENS - 1) in expected


@pytest.mark.parametrize("sample", [False, True])
def test_no_window_spans_two_pieces_of_the_mixed_part(sample: bool) -> None:
    _, pairs = _pairs(_stream(N, 2, sample=sample))
    mixed = 2 * (N // 2 // PIECE_TOKENS * PIECE_TOKENS)
    assert pairs
    for c, o in pairs:
        if c < mixed and o < mixed:
            assert c // PIECE_TOKENS == o // PIECE_TOKENS


def test_resume_from_any_cursor_replays_the_interleaved_batches() -> None:
    s = _stream(N, 3, sample=True, epochs=2)
    all_batches = list(s.iterate(Cursor()))
    for k in (0, 1, 7, len(all_batches) // 2, len(all_batches) - 1):
        resumed = list(_stream(N, 3, sample=True, epochs=2).iterate(all_batches[k - 1].cursor_next
                                                                       if k else Cursor()))
        assert len(resumed) == len(all_batches) - k
        for a, b in zip(resumed, all_batches[k:], strict=True):
            assert np.array_equal(a.centers, b.centers) and np.array_equal(a.mask, b.mask)
            assert np.array_equal(a.negatives, b.negatives) and a.words_done == b.words_done


def test_words_done_counts_positions_in_the_reading_order() -> None:
    done = [b.words_done for b in _stream(N, 2, sample=True).iterate(Cursor())]
    assert done == sorted(done) and done[-1] == N


def test_interleave_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interleave"):
        _stream(100, 0)
