"""Hierarchical softmax (``--loss hs``; Mikolov et al. 2013, word2vec.c's ``hs=1``) in torch:
the readable reference the native kernel (``_kernel.c``, ``w2v_hs_step``) agrees with.

A word w is predicted through its path in the Huffman tree (:mod:`embedlab.engines.huffman`):
inner nodes n_1..n_L (root first) with code bits c_1..c_L, and

    P(w | h) = Π_l σ((1 − 2·c_l) · h·u_{n_l}),   u_n = hs_nodes[n] ((V−1)×D, starting at zero).

With f = σ(h·u_n), word2vec.c's update for one (h, w) pair and node n is g = (1 − c − f)·lr,
neu1e += g·u_n, u_n += g·h, and h's rows receive neu1e. As there:

* skip-gram predicts the centre word from each of its contexts: h = v_context (word2vec.c's
  ``l1 = last_word``), so all pairs of a centre share the centre's path;
* CBOW predicts the centre from h, the mean of its context vectors, and every context row
  receives the whole neu1e (word2vec.c's and gensim's ``cbow_mean=1`` rule).

The batch is one synchronous step, like the other losses (:mod:`embedlab.engines.torch`): every
gradient is taken at the same parameters, summed per row and applied once, with the same
damping, step ``lr / (1 + lr·h_row/κ)``, ``h_row = Σ |∂L/∂s|·|partner|²`` over the row's terms.
It matters here more than for negative sampling: the root lies on every path, so it collects
a term from every pair of the batch, all pushing it alike; the input rows, whose terms come from
different paths and mostly cancel, take a larger κ (``StepConfig.input_damping``,
:data:`~embedlab.engines.step.HS_INPUT_DAMPING_RATIO` times the nodes'). Unlike word2vec.c, a
node whose score is beyond ±6 is not skipped: σ is computed exactly, as for the other losses,
and the damping bounds the step.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from embedlab.data.pairs import Batch
from embedlab.engines.huffman import HuffmanTree
from embedlab.engines.params import Word2VecParams
from embedlab.engines.step import StepConfig
from embedlab.engines.torch_ops import Band, add_rows, damped_scales, norm_sq


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


class HierarchicalSoftmaxStep:
    """One synchronous SGD step of hierarchical softmax on a :class:`Batch` (its ``negatives``
    are empty and unused); returns the summed loss over the batch's (h, word) pairs, each the
    sum over its path's nodes of −log σ(±h·u_n), accumulated in float64."""

    def __init__(self, cfg: StepConfig, params: Word2VecParams, tree: HuffmanTree,
                 rows: int) -> None:
        if tree.vocab_size != params.w_in.shape[0] or tree.n_nodes != params.w_out.shape[0]:
            raise ValueError(f"a Huffman tree of {tree.vocab_size} words and {tree.n_nodes} "
                             f"inner nodes does not fit parameters of shapes "
                             f"{params.w_in.shape} and {params.w_out.shape}")
        self.cfg, self.tree = cfg, tree
        self.w_in = torch.from_numpy(params.w_in)  # (V, D)
        self.nodes = torch.from_numpy(params.w_out)  # (V−1, D)
        self.band = Band(rows, cfg.window)
        # per-row curvature sums, zeroed again after each use (only touched entries)
        self._h_in = torch.zeros(params.w_in.shape[0], dtype=torch.float32)
        self._h_node = torch.zeros(params.w_out.shape[0], dtype=torch.float32)

    def __call__(self, batch: Batch, lr: float) -> float:
        lr = self.cfg.batch_lr(lr, batch)
        ids, codes, on_path = (torch.from_numpy(a) for a in self.tree.padded(batch.centers))
        trains = torch.from_numpy(batch.contexts > 0).to(torch.float32)  # padding: no pairs
        on_path = on_path * trains.unsqueeze(1)  # (R, L): the (centre, node) terms
        step = self._skipgram if self.cfg.model == "skipgram" else self._cbow
        return float(step(batch, ids, codes, on_path, lr))

    def _apply(self, span: torch.Tensor, d_span: torch.Tensor, h_span: torch.Tensor,
               ids: torch.Tensor, on_path: torch.Tensor, d_node: torch.Tensor,
               h_node: torch.Tensor, lr: float) -> None:
        """Apply the summed gradients: input rows by span position, node rows by (centre, node)
        term (the terms on paths only), each row's step damped by its summed curvature."""
        keep = on_path.reshape(-1).nonzero().squeeze(1)
        node_ids = ids.reshape(-1)[keep]
        d_node = d_node.reshape(-1, d_node.shape[-1])[keep]
        if self.cfg.input_kappa > 0:
            (k_span,) = damped_scales(self._h_in, [(span, h_span)], lr / self.cfg.input_kappa)
            d_span *= k_span
        if self.cfg.damping > 0:
            (k_node,) = damped_scales(self._h_node, [(node_ids, h_node.reshape(-1)[keep])],
                                      lr / self.cfg.damping)
            d_node *= k_node
        add_rows(self.w_in, span, d_span, -lr)
        add_rows(self.nodes, node_ids, d_node, -lr)

    @staticmethod
    def _terms(scores: torch.Tensor, codes: torch.Tensor, weight: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For scores s = h·u_n and code bits c: the summed loss −log σ((1 − 2c)·s), its
        gradient ∂L/∂s = σ(s) − (1 − c) and the damping's curvature |∂L/∂s|, each weighted
        (0 off the path or the window)."""
        loss = -(F.logsigmoid(scores * (1.0 - 2.0 * codes)) * weight).sum(dtype=torch.float64)
        g = (torch.sigmoid(scores) - (1.0 - codes)) * weight
        return loss, g, g.abs()

    # ---- skip-gram: each context predicts the centre ----------------------------------------
    def _skipgram(self, batch: Batch, ids: torch.Tensor, codes: torch.Tensor,
                  on_path: torch.Tensor, lr: float) -> torch.Tensor:
        band = self.band
        span = _tensor(batch.span)
        x_span = self.w_in.index_select(0, span)  # (R+2W, D) input vectors around the centres
        d = x_span.shape[1]
        x = x_span.as_strided((band.R, band.J, d), (d, d, 1))  # (R, J, D): pair (t, j)'s h
        u = self.nodes.index_select(0, ids.reshape(-1)).view(*ids.shape, d)  # (R, L, D)
        scores = torch.bmm(x, u.transpose(1, 2))  # (R, J, L)
        mask = _tensor(batch.mask).to(torch.float32)  # (R, J)
        weight = mask.unsqueeze(2) * on_path.unsqueeze(1)  # (R, J, L)
        loss, g, c = self._terms(scores, codes.unsqueeze(1), weight)
        d_pair = torch.bmm(g, u)  # (R, J, D): neu1e of each pair
        d_node = torch.bmm(g.transpose(1, 2), x)  # (R, L, D): Σ over the centre's pairs
        d_span = torch.zeros(band.R + 2 * band.W, d)
        for j in range(band.J):  # span position t + j receives pair (t, j)'s neu1e
            d_span[j : j + band.R] += d_pair[:, j]
        h_pair = (c * norm_sq(u).unsqueeze(1)).sum(2)  # (R, J)
        h_span = band.diag_scatter(h_pair, torch.ones(band.R))
        x_sq = norm_sq(x_span).as_strided((band.R, band.J), (1, 1))
        h_node = (c * x_sq.unsqueeze(2)).sum(1)  # (R, L)
        self._apply(span, d_span, h_span, ids, on_path, d_node, h_node, lr)
        return loss

    # ---- CBOW: the mean of the contexts predicts the centre ---------------------------------
    def _cbow(self, batch: Batch, ids: torch.Tensor, codes: torch.Tensor,
              on_path: torch.Tensor, lr: float) -> torch.Tensor:
        band = self.band
        span = _tensor(batch.span)
        mask = _tensor(batch.mask).to(torch.float32)
        contexts = _tensor(batch.contexts)
        avg_w = mask / contexts.clamp(min=1.0).unsqueeze(1)
        h = band.gather(band.band(avg_w), self.w_in.index_select(0, span))  # (R, D) means
        d = h.shape[1]
        u = self.nodes.index_select(0, ids.reshape(-1)).view(*ids.shape, d)  # (R, L, D)
        scores = torch.bmm(u, h.unsqueeze(2)).squeeze(2)  # (R, L)
        loss, g, c = self._terms(scores, codes, on_path)
        d_h = torch.bmm(g.unsqueeze(1), u).squeeze(1)  # (R, D): neu1e
        d_node = g.unsqueeze(2) * h.unsqueeze(1)  # (R, L, D)
        # word2vec's CBOW rule: every context row receives the whole neu1e
        d_span = band.scatter(band.band(mask), d_h)
        # curvature w.r.t. h; a context row moves h by 1/count of its own step
        h_h = (c * norm_sq(u)).sum(1)
        h_span = band.diag_scatter(avg_w, h_h)
        h_node = c * norm_sq(h).unsqueeze(1)
        self._apply(span, d_span, h_span, ids, on_path, d_node, h_node, lr)
        return loss

