"""The batch specification (docs/batches.md) in NumPy: the reference every engine follows.

Batches are cut as :class:`~embedlab.data.pairs.BatchStream` cuts them — reading order,
chunks, kept centres in order, windows stopped by sentence ends, piece boundaries and chunk
ends, groups of centres sharing noise words — and every random draw is Philox-4x32-10
(:func:`embedlab.seeding.philox4x32`) at a counter made of where the draw is used:

* position q of the reading order in epoch e: ``(x0, x1, x2, x3) = philox(q mod 2^32,
  q div 2^32, e, 0)``. Subsampling keeps the token w at q when ``x0 < keep[w]`` (an integer
  threshold, :func:`keep_thresholds`); a kept centre's window is ``b = 1 + (x1·window) >> 32``;
* noise draw d of chunk c in epoch e (d = (batch·groups + group)·S + slot): ``(y0, y1, ..) =
  philox(d, c, e, 1)``; column ``j = (y0·V) >> 32`` of Walker's alias table gives j when
  ``y1 < threshold[j]`` (integer, :func:`alias_thresholds`), else ``alias[j]``.

The key is :func:`embedlab.seeding.philox_key` of ``(seed, "batches")``. Only integer arithmetic
decides a batch, so the C generator of the native engine (``_batches.c``) and a GPU kernel give
the same batches bit for bit, in any order, on any number of threads. Every draw depends on its
own position, not on how many draws came before, which is what lets a thread (or a rank) start
anywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import BatchStream
from embedlab.seeding import philox4x32, philox_key

SPEC_STREAM = "batches"  # the Philox key's stream name
POSITION_TAG, NOISE_TAG = 0, 1  # the counters' last word: which kind of draw
ONE = 1 << 32  # a probability of 1 as an integer threshold: every 32-bit draw is below it


def keep_thresholds(keep_prob: np.ndarray) -> np.ndarray:
    """Subsampling's keep probabilities as integer thresholds: ⌊p·2^32⌋ (uint64; 2^32 keeps
    always). Scaling by a power of two is exact in float64, so no rounding differs anywhere."""
    return np.floor(np.asarray(keep_prob, dtype=np.float64) * ONE).astype(np.uint64)


def alias_thresholds(noise: NoiseDistribution) -> tuple[np.ndarray, np.ndarray]:
    """The noise distribution's alias table as (integer thresholds ⌊t·2^32⌋ uint64, aliases
    int64)."""
    return keep_thresholds(noise.alias_threshold), noise.alias.astype(np.int64)


class SpecBatchStream(BatchStream):
    """:class:`~embedlab.data.pairs.BatchStream` with the draws of the batch specification."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key = philox_key(self.seed, SPEC_STREAM)
        self.keep_threshold = None if self.keep_prob is None else keep_thresholds(self.keep_prob)
        self.noise_threshold, self.noise_alias = alias_thresholds(self.noise)

    def position_draws(self, epoch: int, positions: np.ndarray) -> tuple[np.ndarray, ...]:
        """Philox's four words at the given positions of the reading order in ``epoch``."""
        q = np.asarray(positions, dtype=np.uint64)
        return philox4x32(q & np.uint64(0xFFFF_FFFF), q >> np.uint64(32), epoch, POSITION_TAG,
                          self.key)

    def _kept(self, epoch: int, chunk: int, tok: np.ndarray, lo: int) -> np.ndarray | None:
        if self.keep_threshold is None:
            return None
        x0 = self.position_draws(epoch, np.arange(lo, lo + len(tok)))[0]
        return np.flatnonzero(x0 < self.keep_threshold[tok])

    def _windows(self, epoch: int, chunk: int, pos: np.ndarray) -> np.ndarray:
        x1 = self.position_draws(epoch, pos)[1].astype(np.uint64)
        return (1 + ((x1 * np.uint64(self.window)) >> np.uint64(32))).astype(np.int64)

    def _negatives(self, epoch: int, chunk: int, shape: tuple[int, int, int]) -> np.ndarray:
        d = np.arange(int(np.prod(shape)), dtype=np.uint64)
        y0, y1, _, _ = philox4x32(d, chunk, epoch, NOISE_TAG, self.key)
        column = (y0.astype(np.uint64) * np.uint64(len(self.noise))) >> np.uint64(32)
        column = column.astype(np.int64)
        keep = y1 < self.noise_threshold[column]
        return np.where(keep, column, self.noise_alias[column]).reshape(shape)
