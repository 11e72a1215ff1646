"""What both engines share: the step's configuration, and the choice of engine.

A training step is a callable ``step(batch, lr) -> loss`` (the summed loss over the batch's
positive examples, a float computed in float64) that updates :class:`Word2VecParams` in place.
Two engines compute the same step (agreement to float32 rounding is tested):

* ``native``: ``_kernel.c``, built on first use (:mod:`embedlab.engines.native`); NumPy only;
* ``torch``: PyTorch operations that read like the paper (:mod:`embedlab.engines.torch`).

This module imports neither, so choosing the native engine never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from embedlab.data.pairs import Batch
from embedlab.engines.params import Word2VecParams

ENGINES = ("torch", "native")  # native: embedlab/engines/_kernel.c


@dataclass(frozen=True)
class StepConfig:
    model: str  # "skipgram" | "cbow"
    loss: str  # "neg" | "nce"
    window: int
    negative: int  # K
    group: int  # centres sharing one set of S noise words
    reduction: str = "sum"  # "sum": word2vec's per-pair SGD; "mean": average over the batch's pairs
    damping: float = 16.0  # κ in lr / (1 + lr·h/κ); 0 turns damping off (see Word2VecStep)

    def batch_lr(self, lr: float, batch: Batch) -> float:
        """The rate a batch's summed gradient is applied with: word2vec's per-pair SGD sums,
        the "mean" reduction (the lecture's batch-mean loss) divides by the batch's pairs."""
        return lr / max(1, batch.n_pairs) if self.reduction == "mean" else lr


class TrainStep(Protocol):
    def __call__(self, batch: Batch, lr: float) -> float: ...


def band_block_length(window: int) -> int:
    """Centres per block of the banded products: a multiple of 16 and >= 2W (the torch engine's
    overlap-add needs 2W <= L; batches are padded to a multiple of it for both engines)."""
    return 16 * max(1, -(-2 * window // 16))


def make_step(cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None, rows: int,
              *, engine: str, threads: int = 1) -> TrainStep:
    """The step of ``engine`` for batches of ``rows`` centre slots.

    ``log_kq`` (V,): log(K·Q(w)) for NCE, else None. ``threads``: the native kernel's threads,
    or torch's intra-op threads (a process-wide setting) for the torch engine.
    """
    if engine == "native":
        from embedlab.engines.native import NativeWord2VecStep

        return NativeWord2VecStep(cfg, params, log_kq, rows, threads)
    if engine == "torch":
        import torch

        from embedlab.engines.torch import Word2VecStep

        torch.set_num_threads(threads)
        return Word2VecStep(cfg, params, log_kq, rows)
    raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")


def pairs_in(batch: Batch, model: str) -> int:
    """Positive examples a batch trains: (centre, context) pairs for skip-gram, centres for CBOW."""
    if model == "skipgram":
        return batch.n_pairs
    return int(np.count_nonzero(batch.contexts))
