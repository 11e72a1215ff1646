"""word2vec's parameters and their initialisation, as plain NumPy arrays.

* ``w_in``  (V×D): input vectors v (the embeddings users keep).
* ``w_out`` (V×D): output vectors u. ``b_out`` (V,): output biases (NCE only).
  With hierarchical softmax (``--loss hs``) ``w_out`` is ((V−1)×D): the vectors of the Huffman
  tree's inner nodes (:mod:`embedlab.engines.huffman`), stored as ``hs_nodes``, not
  ``output_embeddings``: its rows are not words, so code that takes the output matrix's rows
  for words' rows (a warm start, an export of context vectors) must not find it under that name.

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
NODES = "hs_nodes"  # hierarchical softmax's inner-node vectors, (V−1)×D


@dataclass
class Word2VecParams:
    w_in: np.ndarray  # (V, D) float32, C-contiguous
    w_out: np.ndarray  # (V, D) float32, C-contiguous; hs: (V−1, D) inner-node vectors
    b_out: np.ndarray | None = None  # (V,) float32, NCE only
    hs: bool = False  # w_out holds hierarchical softmax's inner nodes (stored as hs_nodes)

    def tensors(self) -> dict[str, np.ndarray]:
        """The checkpoint's tensors, under their stored names (the arrays themselves)."""
        out = {INPUT: self.w_in, NODES if self.hs else OUTPUT: self.w_out}
        if self.b_out is not None:
            out[BIAS] = self.b_out
        return out

    @classmethod
    def of(cls, tensors: Mapping[str, np.ndarray], *, nce: bool,
           hs: bool = False) -> Word2VecParams:
        """The parameters held in checkpoint ``tensors`` (adopted, not copied)."""
        if hs:
            return cls(tensors[INPUT], tensors[NODES], None, hs=True)
        return cls(tensors[INPUT], tensors[OUTPUT], tensors[BIAS] if nce else None)

    @property
    def bias_sq(self) -> float:
        """What a bias adds to an output row's squared partner norm in the damping: an NCE row's
        logits move with the augmented input [x; 1], of squared norm |x|² + 1."""
        return 1.0 if self.b_out is not None else 0.0

    def copy(self) -> Word2VecParams:
        return Word2VecParams(self.w_in.copy(), self.w_out.copy(),
                              None if self.b_out is None else self.b_out.copy(), self.hs)


def default_init_scale(model: str) -> float:
    """The centred start's width when --init-scale is 0: 8 for skip-gram, 12 for CBOW.

    Output vectors start at zero, so every vector's first updates are proportional to the input
    vectors' initial size; a wider start learns faster, which decides a short run. Chosen by
    analogy accuracy after 5 epochs (docs/performance.md); too wide a start loses again. 12
    keeps CBOW near gensim's CBOW.
    """
    return 8.0 if model == "skipgram" else 12.0


def init_params(vocab_size: int, dim: int, *, init: str, nce: bool,
                rng: np.random.RandomState, scale: float = 1.0,
                hs: bool = False) -> Word2VecParams:
    """Centred initialisation: v ~ U(−scale/2, scale/2)/D, u = 0 (``init="centered"``).
    With ``hs`` the output matrix holds the V−1 inner nodes of the Huffman tree, zero too (as
    word2vec.c's syn1); the input vectors are the same draws.

    ``rng``: the ``init`` stream (:func:`embedlab.seeding.mt19937_rng`); the values are those
    of ``torch.rand`` on the generator it mirrors, so earlier runs restart identically.
    ``scale`` 1 is word2vec.c's, 2 gensim 4's; a run's default is per model
    (:func:`default_init_scale`).

    ``init="uniform"`` is the CS20 lecture's U[0, 1) for the input vectors — kept for replication;
    all-positive vectors start nearly collinear and barely train. ``scale`` does not apply to it.
    """
    w_in = _input_vectors(rng, vocab_size, dim, scale if init == "centered" else None)
    w_out = np.empty((max(0, vocab_size - 1) if hs else vocab_size, dim), dtype=np.float32)
    # written, not np.zeros' untouched pages: the first steps would otherwise take a page fault
    # at nearly every output row they read (for millions of words, seconds of the first
    # chunk), and a new run draws its parameters on a thread beside the corpus's opening
    w_out.fill(0.0)
    b_out = np.zeros(vocab_size, dtype=np.float32) if nce else None
    return Word2VecParams(w_in, w_out, b_out, hs)


#: values from which the input vectors are drawn by the native library when it loads here
#: (:func:`native_uniform`: one pass over the matrix, several times faster); below, NumPy's
#: draw takes a few milliseconds and the library is not built for it
NATIVE_DRAW_VALUES = 1 << 24


def _input_vectors(rng: np.random.RandomState, vocab_size: int, dim: int,
                   centred_scale: float | None) -> np.ndarray:
    """U[0, 1) draws (V×D), centred as :func:`init_params` says when ``centred_scale`` is
    given; the same bits whichever way they are drawn."""
    if vocab_size * dim >= NATIVE_DRAW_VALUES:
        drawn = native_uniform(rng, (vocab_size, dim), centred_scale=centred_scale)
        if drawn is not None:
            return drawn
    w_in = uniform_float32(rng, (vocab_size, dim))
    if centred_scale is not None:
        # float32 arithmetic in this order, as the torch version computed it (same bits)
        w_in -= np.float32(0.5)
        w_in *= np.float32(centred_scale)
        w_in /= np.float32(dim)
    return w_in


def native_uniform(rng: np.random.RandomState, shape: tuple[int, int], *,
                   centred_scale: float | None = None) -> np.ndarray | None:
    """:func:`embedlab.seeding.uniform_float32`'s values drawn by the native library
    (``w2v_mt19937_uniform`` in ``_batches.c``) in one pass, with ``centred_scale`` s also
    centred as :func:`init_params` centres them: ((u − 0.5)·s)/D in float32 (the same bits).
    ``rng`` is left where the NumPy draw leaves it. None when the library cannot be built here.
    """
    from embedlab.engines.native import NativeUnavailable, library

    try:
        lib = library()
    except NativeUnavailable:
        return None
    state = rng.get_state(legacy=False)
    words = np.array(state["state"]["key"], dtype=np.uint32)  # a copy the draw advances
    at = np.array([state["state"]["pos"]], dtype=np.int32)
    out = np.empty(shape, dtype=np.float32)
    lib.w2v_mt19937_uniform(words.ctypes.data, at.ctypes.data, out.size, out.ctypes.data,
                            int(centred_scale is not None), centred_scale or 1.0, shape[-1])
    state["state"] = {"key": words, "pos": int(at[0])}
    rng.set_state(state)
    return out


def fresh_params(model: ModelConfig, vocab_size: int, seed: int) -> Word2VecParams:
    """A new run's parameters: ``model``'s initialisation drawn from the ``init`` stream of
    ``seed`` (an --init-scale of 0 takes :func:`default_init_scale`)."""
    return init_params(vocab_size, model.dim, init=model.init,
                       scale=model.init_scale or default_init_scale(model.model),
                       nce=model.loss == "nce", rng=mt19937_rng(seed, "init"),
                       hs=model.loss == "hs")
