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
        with np.errstate(over="ignore"):
            weights = np.where(counts > 0, counts**alpha, 0.0)
        total = weights.sum()
        if not np.isfinite(total) and counts.max() > 0:
            # count**alpha overflows float64 for a large alpha (--noise-exponent 200): scaled
            # by the largest count first, the same distribution in range (only then, so that
            # every other alpha keeps its bits)
            weights = np.where(counts > 0, (counts / counts.max()) ** alpha, 0.0)
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


def _alias_table(probs: np.ndarray, *, native: bool | None = None,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias method: column i keeps i with probability threshold[i], else alias[i].

    The table of the classic loop (:func:`_alias_table_loop`, the specification), value for
    value. In that loop the small columns (scaled probability < 1) are taken from the top of
    their stack, and each gives its deficit to the large column on top of the other stack until
    that one drops below 1: then it is pushed onto the small stack and taken next, aliased to
    the next large column. So the small columns go, in order, to runs of large columns, and
    only the running value of the current large column needs the loop: its sequence of float
    operations ``(w + s) - 1`` is the loop's, so the values are bit for bit the same. The
    thresholds of the small columns are their scaled probabilities, set at array speed.
    ``native``: as :func:`_walk_natively`'s.
    """
    n = len(probs)
    scaled = probs * n
    threshold = np.ones(n, dtype=np.float64)
    alias = np.arange(n, dtype=np.int64)
    small = np.flatnonzero(scaled < 1.0)[::-1]  # in the order the loop takes them
    large = np.flatnonzero(scaled >= 1.0)[::-1]
    if not len(small) or not len(large):
        return threshold, alias
    taken, residuals = _walk_natively(scaled[small], scaled[large], native=native)
    # large column j took small ones taken[j - 1]..taken[j] - 1, then went small itself with
    # what was left (residuals[j]), aliased to large column j + 1
    done = small[:taken[-1]]
    owner = np.repeat(np.arange(len(taken)), np.diff(taken, prepend=0))
    threshold[done] = scaled[done]
    alias[done] = large[owner]
    went = len(residuals)
    threshold[large[:went]] = residuals
    alias[large[:went]] = large[1:went + 1]
    return threshold, alias


def _walk_natively(small: np.ndarray, large: np.ndarray, *, native: bool | None = None,
                   ) -> tuple[np.ndarray | list[int], np.ndarray | list[float]]:
    """:func:`_walk` in the native library (``w2v_alias_walk``: the same double operations in
    the same order, so the same bits) where it is loaded, or builds for a vocabulary of
    :data:`~embedlab.engines.native.NATIVE_VOCAB_WORDS` words or more (the Python loop takes
    ~0.5 s at 2.3M words); ``native`` True or False forces one way."""
    from embedlab.engines.native import NATIVE_VOCAB_WORDS, library_if

    words = len(small) + len(large)
    lib = None if native is False else library_if(bool(native) or words >= NATIVE_VOCAB_WORDS)
    if lib is None:
        return _walk(small.tolist(), large.tolist())
    small = np.ascontiguousarray(small, dtype=np.float64)
    large = np.ascontiguousarray(large, dtype=np.float64)
    taken = np.empty(len(large) + 1, dtype=np.int64)
    residuals = np.empty(len(large), dtype=np.float64)
    went = np.zeros(1, dtype=np.int64)
    n = lib.w2v_alias_walk(small.ctypes.data, len(small), large.ctypes.data, len(large),
                           taken.ctypes.data, residuals.ctypes.data, went.ctypes.data)
    return taken[:n], residuals[:int(went[0])]


def _walk(small: list[float], large: list[float]) -> tuple[list[int], list[float]]:
    """The running value of the current large column over the small columns ``small`` (scaled
    probabilities, in the order taken), the large ones being ``large`` (in order).

    Returns ``taken``: for each large column that went small and was aliased, the number of
    small columns taken up to then, and last the number taken in all; and ``residuals``: what
    each of those large columns had left. The loop stops where :func:`_alias_table_loop` does:
    when the small columns run out, or when a large column goes small and no large one is left
    (that one keeps threshold 1).
    """
    taken: list[int] = []
    residuals: list[float] = []
    last = len(large) - 1
    j, value = 0, large[0]
    for i, s in enumerate(small, 1):
        value = (value + s) - 1.0
        while value < 1.0:
            if j == last:  # no large column left to alias it to: the loop ends
                taken.append(i)
                return taken, residuals
            taken.append(i)
            residuals.append(value)
            j += 1
            value = (large[j] + value) - 1.0
    taken.append(len(small))
    return taken, residuals


def _alias_table_loop(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias method as the classic loop over two stacks (the specification of
    :func:`_alias_table`; one Python iteration per column)."""
    n = len(probs)
    scaled = probs * n
    threshold = np.ones(n, dtype=np.float64)
    alias = np.arange(n, dtype=np.int64)
    small = [int(i) for i in np.flatnonzero(scaled < 1.0)]
    large = [int(i) for i in np.flatnonzero(scaled >= 1.0)]
    work = scaled.tolist()
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
