"""The noise distribution Q(w) ∝ count(w)^alpha used by negative sampling and NCE.

word2vec fills a 10^8-entry table. We build Walker's alias table instead (Vose's construction):
O(V) memory and O(1) per draw — one uniform picks a column, the column's threshold picks it or its
alias — so drawing the ~3 noise words per token costs a few vectorised numpy operations, not a
binary search per draw (which was a third of batch preparation).
"""

from __future__ import annotations

import numpy as np


class NoiseDistribution:
    """Unigram^alpha noise over a vocabulary (ids 0..V-1)."""

    def __init__(self, counts: np.ndarray, alpha: float = 0.75) -> None:
        counts = np.asarray(counts, dtype=np.float64)
        # a word never seen (an --unk token nothing was mapped to) is never noise, whatever
        # alpha: numpy's 0**0 is 1, which gave it Q = 1/V at --noise-exponent 0
        weights = np.where(counts > 0, counts**alpha, 0.0)
        total = weights.sum()
        if not np.isfinite(total) or total <= 0:
            raise ValueError("noise distribution needs at least one positive count")
        self.probs = weights / total  # Q(w), float64
        self._threshold, self._alias = _alias_table(self.probs)

    def __len__(self) -> int:
        return len(self.probs)

    @property
    def alias_threshold(self) -> np.ndarray:
        """Walker's table: column i gives i with this probability (float64), else its alias."""
        return self._threshold

    @property
    def alias(self) -> np.ndarray:
        """Walker's table: the word column i gives otherwise (int64)."""
        return self._alias

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
        """Draw ids (int64) i.i.d. from Q."""
        # one uniform per draw: its integer part (scaled by V) is the column, its fraction is
        # compared with the column's threshold (independent of the column for a uniform u)
        # (in place where possible: this runs for every chunk, beside the training threads)
        scaled = rng.random(size)
        scaled *= len(self.probs)
        column = scaled.astype(np.int64)
        np.minimum(column, len(self.probs) - 1, out=column)  # u·V rounds to V only if u ≈ 1
        scaled -= column
        drawn = self._alias[column]
        np.copyto(drawn, column, where=scaled < self._threshold[column])
        return drawn

    def log_expected_count(self, k: int) -> np.ndarray:
        """log(k·Q(w)) for every word: NCE's correction term (float32, length V).

        A word of count 0 (an --unk token no word was mapped to) has Q = 0: it is never drawn
        and never a target, so its term is never used; it is floored at float32's smallest
        normal (log ≈ −87.3) rather than −inf, which would warn and could turn a vectorised
        gather into NaN.
        """
        floor = np.finfo(np.float32).tiny
        return np.log(np.maximum(k * self.probs, floor)).astype(np.float32)


def _alias_table(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias method: column i keeps i with probability threshold[i], else alias[i]."""
    n = len(probs)
    scaled = probs * n
    threshold = np.ones(n, dtype=np.float64)
    alias = np.arange(n, dtype=np.int64)
    small = [int(i) for i in np.flatnonzero(scaled < 1.0)]
    large = [int(i) for i in np.flatnonzero(scaled >= 1.0)]
    work = scaled.tolist()  # Python floats: this loop runs once per vocabulary
    while small and large:
        s, g = small.pop(), large[-1]
        threshold[s] = work[s]
        alias[s] = g
        work[g] = (work[g] + work[s]) - 1.0
        if work[g] < 1.0:
            large.pop()
            small.append(g)
    # what is left is 1 up to rounding: those columns keep themselves (threshold 1)
    return threshold, alias
