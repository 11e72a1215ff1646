"""word2vec's parameters and their initialisation, as plain NumPy arrays.

* ``w_in``  (V×D): input vectors v (the embeddings users keep).
* ``w_out`` (V×D): output vectors u. ``b_out`` (V,): output biases (NCE only).

The arrays are the one copy of the model: the native engine updates them in place through
their memory, and the torch engine through zero-copy tensor views
(:class:`embedlab.engines.torch.Word2VecStep`). Keeping them in NumPy means a run on the
native engine never imports torch, whose import alone holds more memory than the rest of
the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from embedlab.seeding import mt19937_rng, uniform_float32

if TYPE_CHECKING:
    from embedlab.config import ModelConfig

#: the checkpoint's tensor names
INPUT, OUTPUT, BIAS = "input_embeddings", "output_embeddings", "output_bias"


@dataclass
class Word2VecParams:
    w_in: np.ndarray  # (V, D) float32, C-contiguous
    w_out: np.ndarray  # (V, D) float32, C-contiguous
    b_out: np.ndarray | None = None  # (V,) float32, NCE only

    def tensors(self) -> dict[str, np.ndarray]:
        """The checkpoint's tensors, under their stored names (the arrays themselves)."""
        out = {INPUT: self.w_in, OUTPUT: self.w_out}
        if self.b_out is not None:
            out[BIAS] = self.b_out
        return out

    @classmethod
    def of(cls, tensors: Mapping[str, np.ndarray], *, nce: bool) -> Word2VecParams:
        """The parameters held in checkpoint ``tensors`` (adopted, not copied)."""
        return cls(tensors[INPUT], tensors[OUTPUT], tensors[BIAS] if nce else None)

    @property
    def bias_sq(self) -> float:
        """What a bias adds to an output row's squared partner norm in the damping: an NCE row's
        logits move with the augmented input [x; 1], of squared norm |x|² + 1."""
        return 1.0 if self.b_out is not None else 0.0

    def copy(self) -> Word2VecParams:
        return Word2VecParams(self.w_in.copy(), self.w_out.copy(),
                              None if self.b_out is None else self.b_out.copy())


def default_init_scale(model: str) -> float:
    """The centred start's width when --init-scale is 0: 8 for skip-gram, 12 for CBOW.

    Output vectors start at zero, so every vector's first updates are proportional to the input
    vectors' initial size; a wider start learns faster, which decides a short run. Chosen by
    analogy accuracy after 5 epochs (docs/performance.md); too wide a start loses again. 12
    keeps CBOW near gensim's CBOW.
    """
    return 8.0 if model == "skipgram" else 12.0


def init_params(vocab_size: int, dim: int, *, init: str, nce: bool,
                rng: np.random.RandomState, scale: float = 1.0) -> Word2VecParams:
    """Centred initialisation: v ~ U(−scale/2, scale/2)/D, u = 0 (``init="centered"``).

    ``rng``: the ``init`` stream (:func:`embedlab.seeding.mt19937_rng`); the values are those
    of ``torch.rand`` on the generator it mirrors, so earlier runs restart identically.
    ``scale`` 1 is word2vec.c's, 2 gensim 4's; a run's default is per model
    (:func:`default_init_scale`).

    ``init="uniform"`` is the CS20 lecture's U[0, 1) for the input vectors — kept for replication;
    all-positive vectors start nearly collinear and barely train. ``scale`` does not apply to it.
    """
    w_in = uniform_float32(rng, (vocab_size, dim))
    if init == "centered":
        # float32 arithmetic in this order, as the torch version computed it (same bits)
        w_in -= np.float32(0.5)
        w_in *= np.float32(scale)
        w_in /= np.float32(dim)
    w_out = np.zeros((vocab_size, dim), dtype=np.float32)
    b_out = np.zeros(vocab_size, dtype=np.float32) if nce else None
    return Word2VecParams(w_in, w_out, b_out)


def fresh_params(model: ModelConfig, vocab_size: int, seed: int) -> Word2VecParams:
    """A new run's parameters: ``model``'s initialisation drawn from the ``init`` stream of
    ``seed`` (an --init-scale of 0 takes :func:`default_init_scale`)."""
    return init_params(vocab_size, model.dim, init=model.init,
                       scale=model.init_scale or default_init_scale(model.model),
                       nce=model.loss == "nce", rng=mt19937_rng(seed, "init"))
