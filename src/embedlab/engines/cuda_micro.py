"""The cuda engine's step cut into micro-batches (``--micro-batches M``), for
:mod:`embedlab.engines.microbatch`: each micro-batch's contributions summed per row on the GPU,
then all M applied together, in the order j = 0..M−1.

A micro-batch goes through the step's first launch (``cuda_kernels.skipgram_tiles`` or
``cbow_tiles``: scores, loss and a contribution per row occurrence, nothing written) and then
``cuda_kernels.sum_rows``, which sums each row's occurrences in the order one step would (the
stable sort of ``cuda_batches.plan_updates``) into one row per distinct id, in ascending id. Those
sums are what the processes of a run exchange. To apply a step, the M micro-batches' rows are
laid end to end in the order j = 0..M−1, planned again (a stable sort, so a row's sums keep
that order) and applied by ``cuda_kernels.apply_rows``, damped by the curvature summed over all
of them. Whichever process summed a micro-batch, the sums are the same bits, and so is the step:
N processes train the bits of one for every N dividing M. They are not the bits of the engine's
single-batch step, whose rows sum every occurrence of the batch in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

import embedlab.engines.cuda_kernels as K
from embedlab.engines.cuda_batches import segments
from embedlab.engines.torch_ops import Contributions, Part

if TYPE_CHECKING:
    from embedlab.data.pairs import Batch
    from embedlab.engines.cuda_engine import CudaEngine


@dataclass(frozen=True)
class _Params:
    """What :class:`~embedlab.engines.microbatch.MicroBatches` reads of a step's parameters."""

    w_in: torch.Tensor
    b_out: torch.Tensor | None


class CudaMicroStep:
    """The cuda engine's step as :class:`~embedlab.engines.microbatch.MicroBatches` uses the
    torch engine's (:class:`~embedlab.engines.torch.Word2VecStep`): ``row_sums`` of one
    micro-batch, ``apply`` of several."""

    def __init__(self, engine: CudaEngine) -> None:
        self.engine, self.cfg = engine, engine.cfg
        self.p = _Params(engine.w_in, engine.b_out)
        self.damping = engine.cfg.damping > 0
        self._step = torch.zeros(1, dtype=torch.int32, device=engine.device)

    def row_sums(self, batch: Batch) -> Contributions:
        """``batch``'s contributions from the parameters as they are, summed per row (each
        matrix's rows once, in ascending id; nothing is updated)."""
        engine = self.engine
        buf = engine.loaded(batch)
        engine.launch_tiles(buf, engine.rows)
        loss = buf.loss[0].sum(dtype=torch.float64)
        dev, dim = engine.device, engine.dim
        n_in, n_out = buf.plan_in[0].shape[1], buf.plan_out[0].shape[1]
        in_sum, out_sum = torch.zeros((n_in, dim), device=dev), torch.zeros((n_out, dim),
                                                                             device=dev)
        in_h, out_h, out_b = (torch.zeros(n, device=dev) for n in (n_in, n_out, n_out))
        bias = engine.b_out is not None
        programs_in, programs_out = buf.programs
        K.sum_rows[(programs_in + programs_out,)](
            buf.step, dim, programs_in, *buf.plan_in, buf.in_d, buf.in_h, in_sum, in_h, n_in,
            *buf.plan_out, buf.out_d, buf.out_h, buf.out_b, out_sum, out_h, out_b, n_out,
            BIAS=bias, MB=engine.kernels.occ_block, BDK=engine.kernels.apply_slice,
            num_warps=engine.kernels.apply_warps)
        damped = self.damping
        parts: list[Part] = []
        for plan, rows, h, b in ((buf.plan_in, in_sum, in_h, None),
                                 (buf.plan_out, out_sum, out_h, out_b if bias else None)):
            heads, ends, sid = plan[0][0], plan[1][0], plan[2][0]
            n = int((ends > heads).sum())  # the rows touched: the used slots come first
            parts.append((sid[heads[:n]], rows[:n], h[:n] if damped else None,
                          None if b is None else b[:n]))
        return Contributions(loss, [parts[0]], [parts[1]])

    def contributions(self, batch: Batch) -> Contributions:
        return self.row_sums(batch)

    def apply(self, parts: list[Contributions], lr: float) -> None:
        """Add ``parts`` (each summed per row) at rate ``lr``: each row's sums in the order of
        ``parts``, damped by the curvature summed over all of them."""
        engine, dev = self.engine, self.engine.device
        merged, programs = [], []
        for side in ("inputs", "outputs"):
            got = [p for c in parts for p in getattr(c, side)]
            ids = torch.cat([g[0].to(dev) for g in got])
            rows = torch.cat([g[1].to(dev) for g in got]).contiguous()
            h = torch.cat([g[2].to(dev) for g in got]) if self.damping else \
                torch.zeros(len(ids), device=dev)
            heads, ends, sid, order, n_heads = segments(ids[None, :])
            merged.append((heads, ends, sid, order, rows, h))
            programs.append(len(ids) if dev.type == "cuda" else int(n_heads.max()))
        biases = [g[3] for c in parts for g in c.outputs]
        bias = merged[1][5] if engine.b_out is None else \
            torch.cat([b.to(dev) for b in biases if b is not None])
        rate = torch.tensor([lr], dtype=torch.float32, device=dev)
        engine.launch_apply_rows(self._step, rate, merged[0], (*merged[1], bias), programs)
