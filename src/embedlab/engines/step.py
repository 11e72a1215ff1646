"""The training step's configuration, derived from the run's config, and what both engines share.

A training step takes a batch and a learning rate, updates the parameters in place and returns
the summed loss over the batch's positive examples (a float computed in float64). How the step
is configured — which noise words a group of centres shares, how strongly a row's summed update
is damped, how batches are padded — is decided here, once, for every engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    from embedlab.config import TrainConfig
    from embedlab.data.pairs import Batch

#: κ of the per-row damping at batch 1024 (see :class:`embedlab.engines.torch.Word2VecStep`);
#: a batch of B centres uses κ = DAMPING_AT_1024 · 1024 / B
DAMPING_AT_1024 = 32.0

#: Hierarchical softmax damps its input rows with a κ this many times the node rows' own. The
#: bound h = Σ |∂L/∂s|·|partner|² assumes a row's terms all push one way. That holds for the
#: nodes near the root, which every pair of a batch updates alike (damped less, training
#: diverges); an input row's terms come from the paths of different centres and mostly cancel,
#: and damping them as strongly as the nodes slowed the input vectors enough to cost about two
#: points of analogy accuracy on gcide8 (docs/performance.md).
HS_INPUT_DAMPING_RATIO = 16.0


@dataclass(frozen=True)
class StepConfig:
    model: str  # "skipgram" | "cbow"
    loss: str  # "neg" | "nce" | "hs" (hierarchical softmax: no noise words)
    window: int
    negative: int  # K (unused by hs)
    group: int  # centres sharing one set of S noise words (1 for hs)
    reduction: str = "sum"  # "sum": word2vec's per-pair SGD; "mean": average over the batch's pairs
    damping: float = 16.0  # κ in lr / (1 + lr·h/κ); 0 turns damping off (see Word2VecStep)
    input_damping: float | None = None  # hs only: κ of the input rows (None: damping's)
    micro_batches: int = 1  # batches a step trains together (engines.microbatch)
    micro_order: str = "chunks"  # where they come from: "chunks" or "consecutive"

    @property
    def input_kappa(self) -> float:
        """κ of the input rows' damping (hierarchical softmax's may differ; 0: undamped)."""
        return self.damping if self.input_damping is None else self.input_damping

    def batch_lr(self, lr: float, batch: Batch) -> float:
        """The rate a batch's summed gradient is applied with: word2vec's per-pair SGD sums,
        the "mean" reduction (the lecture's batch-mean loss) divides by the batch's pairs."""
        return lr / max(1, batch.n_pairs) if self.reduction == "mean" else lr


class TrainStep(Protocol):
    def __call__(self, batch: Batch, lr: float) -> float: ...


class StepPlan(NamedTuple):
    """The step configuration and the shape of the batches it takes."""

    step: StepConfig
    noise_per_group: int  # S: noise words a group of centres shares
    pad_to: int  # batches are padded to a multiple of this many centre slots


def band_block_length(window: int) -> int:
    """Centres per block of the banded products: a multiple of 16 and >= 2W (the torch engine's
    overlap-add needs 2W <= L; batches are padded to a multiple of it for both engines)."""
    return 16 * max(1, -(-2 * window // 16))


def default_shared_negatives(negative: int, window: int) -> int:
    """S when --shared-negatives is 0: ⌈4/3 · K·(window+1)⌉ (40 for K = 5, window 5)."""
    return math.ceil(negative * (window + 1) * 4 / 3)


def step_config(cfg: TrainConfig) -> StepPlan:
    """The step of the run configured by ``cfg``, and how its batches are cut."""
    m, batch = cfg.model, cfg.optim.batch_size
    # word2vec draws K noise words per pair, about K·(window+1) per centre (E[2b] = window+1);
    # a group shares a third more distinct ones than that, each weighted < 1, so no noise row
    # stands in for many draws at once
    s = m.shared_negatives or default_shared_negatives(m.negative, m.window)
    # TensorFlow's nce_loss (the lecture) shares one noise sample across the whole batch
    group = batch if m.shared_negatives and m.loss == "nce" else math.gcd(m.negative_group, batch)
    if m.loss == "hs":  # no noise words: the noise flags change nothing, not even the padding
        s, group = 0, 1
    band_block = band_block_length(m.window)
    reduction = "mean" if cfg.preset == "cs20" else "sum"
    damping = DAMPING_AT_1024 * 1024 / batch  # contributions per row grow with the batch
    input_damping = damping * HS_INPUT_DAMPING_RATIO if m.loss == "hs" else None
    return StepPlan(StepConfig(m.model, m.loss, m.window, m.negative, group, reduction, damping,
                               input_damping, cfg.optim.micro_batches,
                               cfg.optim.micro_order), s,
                    math.lcm(band_block, group))


def pairs_in(batch: Batch, model: str) -> int:
    """Positive examples a batch trains: (centre, context) pairs for skip-gram, centres for CBOW."""
    if model == "skipgram":
        return batch.n_pairs
    return int(np.count_nonzero(batch.contexts))
