"""word2vec as in Mikolov et al. (2013), with hand-written gradients and batched updates: the
torch engine (the native engine, :mod:`embedlab.engines.native`, fuses the same step in C).

Notation (per batch): B centres, window W, J = 2W+1 offsets, D dimensions, groups of ``group``
centres that share S noise words, K = noise words per positive pair.

* ``w_in``  (V×D): input vectors v (the embeddings users keep).
* ``w_out`` (V×D): output vectors u. ``b_out`` (V,): output biases (NCE only).
  (NumPy arrays, :class:`embedlab.engines.params.Word2VecParams`, updated through tensor views.)

Skip-gram maximises, for each centre t and each context c of t,
    log σ(v_t·u_c) + Σ_{k=1..K} log σ(−v_t·u_{n_k}),  n_k ~ Q (negative sampling),
CBOW replaces v_t by h_t, the mean of the context input vectors, and predicts the centre.
NCE (Gutmann & Hyvärinen; TensorFlow's ``nce_loss`` as in the CS20 lecture) uses logits
s − log(K·Q(w)) with output biases.

Updates are synchronous per batch: every gradient is computed from the same parameters and then
applied with ``index_add_`` (deterministic on CPU: duplicates are summed in index order).
Sharing noise words only within small groups keeps the number of contributions a noise row gets
per step close to what it would get from sequential SGD, which is what keeps large batches stable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from embedlab.data.pairs import Batch
from embedlab.engines.base import HostEngine
from embedlab.engines.huffman import HuffmanTree
from embedlab.engines.params import Word2VecParams
from embedlab.engines.step import StepConfig
from embedlab.engines.torch_ops import Band, Contributions, add_rows, damped_scales, norm_sq

if TYPE_CHECKING:
    from embedlab.data.pairs import BatchStream
    from embedlab.engines.stepping import Schedule, StepRunner


@dataclass
class _Tensors:
    """Zero-copy torch views of :class:`Word2VecParams`: the engine updates the arrays' memory."""

    w_in: torch.Tensor  # (V, D) float32
    w_out: torch.Tensor  # (V, D) float32
    b_out: torch.Tensor | None  # (V,) float32, NCE only

    @classmethod
    def of(cls, p: Word2VecParams) -> _Tensors:
        return cls(torch.from_numpy(p.w_in), torch.from_numpy(p.w_out),
                   None if p.b_out is None else torch.from_numpy(p.b_out))


@dataclass
class _TorchBatch:
    """A :class:`Batch`'s arrays as tensor views (see there for shapes)."""

    centers: torch.Tensor
    span: torch.Tensor
    mask: torch.Tensor
    contexts: torch.Tensor
    negatives: torch.Tensor

    @classmethod
    def of(cls, b: Batch) -> _TorchBatch:
        return cls(*(torch.from_numpy(np.ascontiguousarray(a)) for a in
                     (b.centers, b.span, b.mask, b.contexts, b.negatives)))


def _hits(targets: torch.Tensor, mask: torch.Tensor | None,
          negatives: torch.Tensor) -> torch.Tensor:
    """(R, S) float32: how many of each centre's positive targets equal each shared noise word.

    ``targets`` (R, J) are the ids each centre's positives predict (``mask`` (R, J) says which
    are real; None: all), ``negatives`` (G, S) the noise words its group shares. word2vec skips
    a noise draw that equals the positive word of its pair ("accidental hit"); with shared noise
    words that is a per-(centre, noise word) count, taken off the centre's noise weight.
    """
    n_groups = negatives.shape[0]
    per_centre = negatives.repeat_interleave(targets.shape[0] // n_groups, dim=0)  # (R, S)
    eq = targets.unsqueeze(2) == per_centre.unsqueeze(1)  # (R, J, S)
    if mask is not None:
        eq &= mask.bool().unsqueeze(2)
    return eq.sum(1, dtype=torch.float32)


class Word2VecStep:
    """The torch engine: one SGD step on a :class:`Batch`, returning the summed loss over its
    positives (accumulated in float64).

    Damping: a row that receives many gradient contributions in one synchronous step — a
    frequent noise word, a frequent context — would overshoot, because sequential SGD's
    self-correction (each small update changes the next logit) is missing. Each row's summed
    gradient is therefore applied with the step ``lr / (1 + lr·h_r/κ)`` where
    ``h_r = Σ |∂L/∂s|·|x|²`` sums, over that row's terms in the batch, the size of each term's
    logit gradient times its partner's squared norm: ``lr·h_r`` bounds how far an undamped step
    could move the row's logits. A row with a few contributions keeps ``lr·h_r/κ ≪ 1`` — plain
    word2vec SGD; a row with hundreds moves its logits by about κ at most. The scale depends only
    on the row, so it multiplies the summed gradient exactly; it costs a few scalar index_adds.

    Why ``|∂L/∂s|`` (``1 − σ(s)`` for a positive, ``σ(s)`` for a noise term) and not the
    Gauss–Newton curvature ``σ'(s) = σ(1 − σ)``: σ' vanishes when a logit saturates on the
    *wrong* side, exactly where the gradient is largest, so one overshoot switches the damping
    off and the next step overshoots further, until training diverges to NaN at high learning
    rates (``test_big_batches_stay_finite_at_high_learning_rates``); with ``|∂L/∂s| ≥ σ'`` it
    stays bounded. Near ``s = 0`` the two differ by a factor of at most 2, which a larger κ
    offsets: a run uses κ = 32·1024/batch (16 at the default batch 2048;
    :func:`embedlab.engines.step.step_config`).
    """

    def __init__(self, cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None,
                 rows: int) -> None:
        self.cfg = cfg
        self.p = _Tensors.of(params)
        # (V,) log(K·Q(w)) for NCE
        self.log_kq = None if log_kq is None else torch.from_numpy(np.asarray(log_kq))
        self.band = Band(rows, cfg.window)
        self.damping = cfg.damping > 0
        vocab = params.w_in.shape[0]
        # per-row curvature accumulators, zeroed again after each use (only touched entries)
        self._h_in = torch.zeros(vocab, dtype=torch.float32)
        self._h_out = torch.zeros(vocab, dtype=torch.float32)
        self._bias_sq = params.bias_sq

    def __call__(self, batch: Batch, lr: float) -> float:
        got = self.contributions(batch)
        self.apply([got], self.cfg.batch_lr(lr, batch))
        return float(got.loss)

    def contributions(self, batch: Batch) -> Contributions:
        """``batch``'s gradient, from the parameters as they are (nothing is updated)."""
        tb = _TorchBatch.of(batch)
        return self._skipgram(tb) if self.cfg.model == "skipgram" else self._cbow(tb)

    def apply(self, parts: list[Contributions], lr: float) -> None:
        """Add the contributions of ``parts`` at rate ``lr``, in their order: each row's step
        damped by the curvature summed over all of its occurrences in all of them."""
        p = self.p
        ins = [part for c in parts for part in c.inputs]
        outs = [part for c in parts for part in c.outputs]
        for param, bias, group in ((p.w_in, None, ins), (p.w_out, p.b_out, outs)):
            buf = self._h_in if param is p.w_in else self._h_out
            scales = None
            if self.damping:  # every part then carries its curvature
                curvature = [(ids, h) for ids, _, h, _ in group if h is not None]
                assert len(curvature) == len(group)
                scales = damped_scales(buf, curvature, lr / self.cfg.damping)
            for i, (ids, rows, _, _) in enumerate(group):
                add_rows(param, ids, rows if scales is None else rows * scales[i], -lr)
            if bias is not None:
                for i, (ids, _, _, b) in enumerate(group):
                    assert b is not None
                    scaled = b if scales is None else b * scales[i].view(-1)
                    bias.index_add_(0, ids, scaled, alpha=-lr)

    # ---- pieces shared by both architectures ----------------------------------------------------
    def _noise_logits(
        self, h: torch.Tensor, negatives: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores of each centre's representation h (R×D) against its group's noise rows."""
        n_groups, s = negatives.shape
        flat = negatives.reshape(-1)
        noise_rows = self.p.w_out.index_select(0, flat).view(n_groups, s, -1)  # (G, S, D)
        logits = torch.bmm(h.view(n_groups, -1, h.shape[1]), noise_rows.transpose(1, 2))
        if self.cfg.loss == "nce":
            assert self.p.b_out is not None and self.log_kq is not None
            logits = logits + (self.p.b_out[flat] - self.log_kq[flat]).view(n_groups, 1, s)
        return logits, noise_rows  # (G, R/G, S), (G, S, D)

    def _nce_shift(self, ids: torch.Tensor) -> torch.Tensor | None:
        """NCE compares s − log(K·Q(w)) with 0; negative sampling uses s itself."""
        if self.cfg.loss != "nce":
            return None
        assert self.p.b_out is not None and self.log_kq is not None
        return self.p.b_out[ids] - self.log_kq[ids]

    def _sq(self, x: torch.Tensor) -> torch.Tensor:
        """Squared norms of an output row's partners (plus 1 for the NCE bias), x.shape[:-1].

        An output row's logits move with its vector and its bias, i.e. with the augmented
        partner [x; 1]; an input row's logits move with its vector only, so its partners'
        norms are :func:`~embedlab.engines.torch_ops.norm_sq` (no bias term).
        """
        return norm_sq(x) + self._bias_sq

    # ---- skip-gram ------------------------------------------------------------------------------
    def _skipgram(self, batch: _TorchBatch) -> Contributions:
        p, band = self.p, self.band
        v = p.w_in.index_select(0, batch.centers)  # (R, D) centre input vectors
        u_span = p.w_out.index_select(0, batch.span)  # (R+2W, D) output vectors around them
        pos = band.scores(v, u_span)  # (R, J): v_t · u_{t+o}
        shift = self._nce_shift(batch.span)
        if shift is not None:
            pos = pos + shift.as_strided((band.R, band.J), (1, 1))
        mask = batch.mask.to(torch.float32)
        # each positive pair brings K noise terms; the group's S shared noise words stand in
        n_groups, s = batch.negatives.shape
        count = batch.contexts.unsqueeze(1)  # (R, 1): positive pairs of each centre
        if self.cfg.loss == "neg":  # word2vec skips a noise word equal to the pair's context
            contexts = batch.span.as_strided((band.R, band.J), (1, 1))
            count = count - _hits(contexts, batch.mask, batch.negatives)
        weight = (count * (self.cfg.negative / s)).view(n_groups, -1, count.shape[1])
        neg, noise_rows = self._noise_logits(v, batch.negatives)  # (G, R/G, S)

        loss = -(F.logsigmoid(pos) * mask).sum(dtype=torch.float64)
        loss -= (F.logsigmoid(-neg) * weight).sum(dtype=torch.float64)

        # dL/dlogit: σ(s) − 1 for positives, σ(s) for noise; damping curvature |dL/dlogit|
        sig_pos, sig_neg = torch.sigmoid(pos), torch.sigmoid(neg)
        g_pos = band.band((sig_pos - 1.0) * mask)  # (nb, L, L+2W)
        g_neg = sig_neg * weight  # (G, R/G, S)
        d_v = band.gather(g_pos, u_span) + torch.bmm(g_neg, noise_rows).view(band.R, -1)
        d_span = band.scatter(g_pos, v)
        d_noise = torch.bmm(g_neg.transpose(1, 2), v.view(n_groups, -1, v.shape[1]))  # (G, S, D)

        flat_neg = batch.negatives.reshape(-1)
        h_v = h_span = h_noise = None
        if self.damping:
            # |dL/dlogit| per row occurrence (see the class docstring); elementwise, not GEMMs
            c_pos = (1.0 - sig_pos) * mask  # (R, J)
            c_neg = sig_neg * weight  # (G, R/G, S)
            v_sq, u_sq, n_sq = self._sq(v), norm_sq(u_span), norm_sq(noise_rows)
            h_v = band.diag_dot(c_pos, u_sq) + (c_neg * n_sq.unsqueeze(1)).sum(2).view(-1)
            h_span = band.diag_scatter(c_pos, v_sq)
            h_noise = (c_neg * v_sq.view(n_groups, -1, 1)).sum(1).view(-1)
        d_b_span = d_b_noise = None
        if p.b_out is not None:
            d_b_span = band.scatter(g_pos, torch.ones(band.R, 1)).view(-1)
            d_b_noise = g_neg.sum(1).reshape(-1)
        return Contributions(loss, [(batch.centers, d_v, h_v, None)],
                             [(batch.span, d_span, h_span, d_b_span),
                              (flat_neg, d_noise.reshape(-1, v.shape[1]), h_noise, d_b_noise)])

    # ---- CBOW -----------------------------------------------------------------------------------
    def _cbow(self, batch: _TorchBatch) -> Contributions:
        p, band = self.p, self.band
        v_span = p.w_in.index_select(0, batch.span)  # (R+2W, D) context input vectors
        count = batch.contexts.clamp(min=1.0)
        avg_w = batch.mask.to(torch.float32) / count.unsqueeze(1)
        avg = band.band(avg_w)  # averaging weights on the band
        h = band.gather(avg, v_span)  # (R, D): mean of each centre's context vectors
        has_ctx = (batch.contexts > 0).to(torch.float32)  # centres without context do not train
        u = p.w_out.index_select(0, batch.centers)  # (R, D)
        pos = (h * u).sum(1)
        shift = self._nce_shift(batch.centers)
        if shift is not None:
            pos = pos + shift
        n_groups, s = batch.negatives.shape
        count = has_ctx.unsqueeze(1)  # (R, 1)
        if self.cfg.loss == "neg":  # word2vec skips a noise word equal to the centre (its target)
            count = (count - _hits(batch.centers.unsqueeze(1), None, batch.negatives)).clamp(min=0)
        weight = (count * (self.cfg.negative / s)).view(n_groups, -1, count.shape[1])
        neg, noise_rows = self._noise_logits(h, batch.negatives)

        loss = -(F.logsigmoid(pos) * has_ctx).sum(dtype=torch.float64)
        loss -= (F.logsigmoid(-neg) * weight).sum(dtype=torch.float64)

        sig_pos, sig_neg = torch.sigmoid(pos), torch.sigmoid(neg)
        g_pos = (sig_pos - 1.0) * has_ctx  # (R,)
        g_neg = sig_neg * weight  # (G, R/G, S)
        d_h = g_pos.unsqueeze(1) * u + torch.bmm(g_neg, noise_rows).view(band.R, -1)
        d_u = g_pos.unsqueeze(1) * h
        d_noise = torch.bmm(g_neg.transpose(1, 2), h.view(n_groups, -1, h.shape[1]))
        # word2vec's CBOW rule: each context vector receives the whole of d_h, not the mean's
        # share d_h/count (word2vec.c adds neu1e to every context row; gensim's cbow_mean=1
        # does the same). The true gradient of the mean trains the input vectors count times
        # slower.
        ones = band.band(batch.mask.to(torch.float32))
        d_span = band.scatter(ones, d_h)

        flat_neg = batch.negatives.reshape(-1)
        h_span = h_u = h_noise = None
        if self.damping:
            c_pos = (1.0 - sig_pos) * has_ctx
            c_neg = sig_neg * weight
            h_sq, u_sq, n_sq = self._sq(h), norm_sq(u), norm_sq(noise_rows)
            # curvature w.r.t. h: a context row moves by the whole step and h by a = 1/count
            # of it, so the row's own move shifts the logits by a·(its step)·|partner|²
            h_h = c_pos * u_sq + (c_neg * n_sq.unsqueeze(1)).sum(2).view(-1)
            h_span = band.diag_scatter(avg_w, h_h)
            h_u = c_pos * h_sq
            h_noise = (c_neg * h_sq.view(n_groups, -1, 1)).sum(1).view(-1)
        d_b_u = d_b_noise = None
        if p.b_out is not None:
            d_b_u, d_b_noise = g_pos, g_neg.sum(1).reshape(-1)
        return Contributions(loss, [(batch.span, d_span, h_span, None)],
                             [(batch.centers, d_u, h_u, d_b_u),
                              (flat_neg, d_noise.reshape(-1, h.shape[1]), h_noise, d_b_noise)])


class TorchEngine(HostEngine):
    """The torch engine: :class:`Word2VecStep` (or, for hierarchical softmax,
    :class:`embedlab.engines.torch_hs.HierarchicalSoftmaxStep` on the Huffman tree ``tree``) on
    zero-copy tensor views of host NumPy parameters. ``threads``: torch's intra-op threads, a
    process-wide setting."""

    name = "torch"

    def __init__(self, cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None,
                 rows: int, threads: int = 1, *, tree: HuffmanTree | None = None) -> None:
        torch.set_num_threads(threads)
        if tree is not None:
            from embedlab.engines.torch_hs import HierarchicalSoftmaxStep

            super().__init__(params, HierarchicalSoftmaxStep(cfg, params, tree, rows))
        else:
            super().__init__(params, Word2VecStep(cfg, params, log_kq, rows))

    def runner(self, stream: BatchStream, schedule: Schedule, model: str) -> StepRunner:
        """Steps of ``--micro-batches`` batches (on every process of the run), else one batch
        per step."""
        step = self._step
        if not isinstance(step, Word2VecStep) or step.cfg.micro_batches == 1:
            return super().runner(stream, schedule, model)
        from embedlab.engines.microbatch import World, micro_batch_runner

        return micro_batch_runner(stream, step, schedule, model, World.current())
