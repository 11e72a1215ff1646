from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.data.noise import NoiseDistribution


def test_noise_follows_unigram_to_the_alpha() -> None:
    counts = np.array([100, 10, 1, 0])
    noise = NoiseDistribution(counts, 0.75)
    expected = counts ** 0.75 / (counts ** 0.75).sum()
    np.testing.assert_allclose(noise.probs, expected)
    draws = noise.sample(np.random.default_rng(0), 200_000)
    freq = np.bincount(draws, minlength=4) / len(draws)
    np.testing.assert_allclose(freq, expected, atol=0.005)
    assert freq[3] == 0  # a zero-count word is never drawn


def test_log_expected_count() -> None:
    noise = NoiseDistribution(np.array([3, 1]), 1.0)
    np.testing.assert_allclose(noise.log_expected_count(4), np.log([3.0, 1.0]), rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=300).filter(any),
       st.floats(0.0, 1.5))
def test_alias_table_encodes_the_distribution_exactly(counts: list[int], alpha: float) -> None:
    # the probability the table gives each word, summed column by column, is Q(w) itself
    noise = NoiseDistribution(np.array(counts), alpha)
    n = len(counts)
    threshold, alias = noise._threshold, noise._alias
    implied = threshold.copy()
    np.add.at(implied, alias, 1.0 - threshold)
    np.testing.assert_allclose(implied / n, noise.probs, atol=1e-12)
    assert ((threshold == 0) | (np.array(counts) > 0) | (alpha == 0)).all()


def test_log_expected_count_of_an_unused_word_is_finite_and_silent() -> None:
    # --unk with no word mapped to it: count 0, so Q = 0; numpy's log would warn "divide by
    # zero encountered in log" on stderr (through --preset cs20 on a small corpus).
    noise = NoiseDistribution(np.array([0, 5, 3]), 0.75)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logs = noise.log_expected_count(64)
    assert np.isfinite(logs).all() and logs[0] < -80
    assert logs[1] == pytest.approx(np.log(64 * noise.probs[1]), rel=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.75, 1.0])
def test_a_word_never_seen_is_never_noise_whatever_the_exponent(alpha: float) -> None:
    noise = NoiseDistribution(np.array([0, 3, 1, 6]), alpha=alpha)  # id 0: an unused --unk
    assert noise.probs[0] == 0.0 and noise.probs.sum() == pytest.approx(1.0)
    assert 0 not in noise.sample(np.random.default_rng(0), 20_000)
    if alpha == 0.0:  # the seen words are equally likely
        np.testing.assert_allclose(noise.probs[1:], 1 / 3)


@settings(max_examples=300, deadline=None)
@given(counts=st.lists(st.integers(0, 10**6), min_size=1, max_size=200).filter(any),
       alpha=st.sampled_from([0.0, 0.5, 0.75, 1.0, 2.0]))
def test_alias_table_is_the_classic_loops(counts: list[int], alpha: float) -> None:
    # the draws of every run depend on these values: the same bits as the two-stack loop
    from embedlab.data.noise import _alias_table, _alias_table_loop

    probs = NoiseDistribution(np.array(counts), alpha).probs
    threshold, alias = _alias_table(probs)
    expected_threshold, expected_alias = _alias_table_loop(probs)
    assert threshold.tobytes() == expected_threshold.tobytes()
    assert alias.tobytes() == expected_alias.tobytes()


def test_alias_table_of_a_zipf_vocabulary() -> None:
    from embedlab.data.noise import _alias_table, _alias_table_loop

    counts = np.maximum(5, 10**7 // np.arange(1, 50_001))
    probs = NoiseDistribution(counts, 0.75).probs
    ours, theirs = _alias_table(probs), _alias_table_loop(probs)
    assert ours[0].tobytes() == theirs[0].tobytes() and ours[1].tobytes() == theirs[1].tobytes()


def test_a_large_exponent_is_the_same_distribution_in_range() -> None:
    # count**200 overflowed float64: "needs at least one positive count", a traceback
    counts = np.array([0, 3000, 2000, 10])
    noise = NoiseDistribution(counts, 200.0)
    expected = np.array([0.0, 1.0, (2 / 3) ** 200, (1 / 300) ** 200])
    assert np.allclose(noise.probs, expected / expected.sum(), rtol=1e-12, atol=0)
    small = NoiseDistribution(counts, 0.75)  # an alpha in range keeps its formula, and bits
    weights = np.where(counts > 0, counts.astype(np.float64) ** 0.75, 0.0)
    assert np.array_equal(small.probs, weights / weights.sum())


@pytest.fixture(scope="module")
def native_library() -> None:
    from embedlab.engines.native import library_if

    if library_if(True) is None:
        pytest.skip("the native library does not build here")


@settings(max_examples=300, deadline=None)
@given(counts=st.lists(st.integers(0, 10**6), min_size=1, max_size=200).filter(any),
       alpha=st.sampled_from([0.0, 0.5, 0.75, 1.0, 2.0]))
def test_the_native_walk_gives_the_loops_bits(native_library: None, counts: list[int],
                                              alpha: float) -> None:
    from embedlab.data.noise import _alias_table, _alias_table_loop

    probs = NoiseDistribution(np.array(counts), alpha).probs
    threshold, alias = _alias_table(probs, native=True)
    expected_threshold, expected_alias = _alias_table_loop(probs)
    assert threshold.tobytes() == expected_threshold.tobytes()
    assert alias.tobytes() == expected_alias.tobytes()


def test_the_native_walk_of_a_zipf_vocabulary_is_pythons(native_library: None) -> None:
    # 300,000 words: the many runs of small columns per large one that a big vocabulary has
    from embedlab.data.noise import _alias_table

    counts = np.maximum(5, 10**9 // np.arange(1, 300_001))
    probs = NoiseDistribution(counts, 0.75).probs
    ours, theirs = _alias_table(probs, native=True), _alias_table(probs, native=False)
    assert ours[0].tobytes() == theirs[0].tobytes() and ours[1].tobytes() == theirs[1].tobytes()
