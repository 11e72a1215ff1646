from __future__ import annotations

import numpy as np

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
