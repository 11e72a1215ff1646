"""The noise distribution Q(w) ∝ count(w)^alpha used by negative sampling and NCE.

word2vec fills a 10^8-entry table; we keep the cumulative distribution instead and draw with a
binary search (``np.searchsorted``), which is exact for the float64 CDF and needs O(V) memory.
"""

from __future__ import annotations

import numpy as np


class NoiseDistribution:
    """Unigram^alpha noise over a vocabulary (ids 0..V-1)."""

    def __init__(self, counts: np.ndarray, alpha: float = 0.75) -> None:
        weights = np.asarray(counts, dtype=np.float64) ** alpha
        total = weights.sum()
        if not np.isfinite(total) or total <= 0:
            raise ValueError("noise distribution needs at least one positive count")
        self.probs = weights / total  # Q(w), float64
        self._cdf = np.cumsum(self.probs)
        self._cdf[-1] = 1.0  # guard against rounding: every u < 1 maps to a valid id

    def __len__(self) -> int:
        return len(self.probs)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Draw ids (int64) i.i.d. from Q."""
        u = rng.random(size)
        return np.searchsorted(self._cdf, u, side="right").astype(np.int64)

    def log_expected_count(self, k: int) -> np.ndarray:
        """log(k·Q(w)) for every word: NCE's correction term (float32, length V)."""
        return np.log(k * self.probs).astype(np.float32)
