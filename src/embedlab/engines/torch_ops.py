"""Pieces the torch steps share (:mod:`embedlab.engines.torch` and
:mod:`embedlab.engines.torch_hs`): banded products between centres and their window, row updates
summed in index order, the damped step's per-row scales, and a batch's contributions (what the
step adds, before it adds it; :mod:`embedlab.engines.microbatch` exchanges them)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from embedlab.engines.step import band_block_length

Part = tuple[torch.Tensor, torch.Tensor, "torch.Tensor | None", "torch.Tensor | None"]


@dataclass
class Contributions:
    """A batch's gradient, one row per occurrence, computed from the parameters as they were
    when the step began: what the step adds to each row before damping and the rate.

    ``inputs`` and ``outputs`` are parts ``(ids, rows, h, bias)`` of the input and the output
    matrix: row ``rows[i]`` goes to ``ids[i]``; ``h`` (per occurrence) is the damping's
    curvature (None undamped); ``bias`` the output biases' gradient (NCE, else None). A step
    applies one batch's; a step of several micro-batches applies theirs together, in order
    (:meth:`embedlab.engines.torch.Word2VecStep.apply`), which is what lets processes compute
    them apart.
    """

    loss: torch.Tensor  # float64 scalar: the summed loss over the batch's positives
    inputs: list[Part]
    outputs: list[Part]


def norm_sq(x: torch.Tensor) -> torch.Tensor:
    """Squared norms of rows, shape x.shape[:-1]."""
    return (x * x).sum(-1)


def add_rows(param: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor, alpha: float) -> None:
    """param[ids[i]] += alpha · rows[i], duplicates summed in index order. ``rows`` is consumed.

    ``scatter_add_`` with the index broadcast along the row is deterministic on the CPU, gives
    the same bits as ``index_add_`` and is faster for updates of a batch's size.
    """
    rows.mul_(alpha)
    param.scatter_add_(0, ids.unsqueeze(1).expand(-1, rows.shape[1]), rows)


def damped_scales(buf: torch.Tensor, parts: list[tuple[torch.Tensor, torch.Tensor]],
                  rate: float) -> list[torch.Tensor]:
    """Per-occurrence step scales 1 / (1 + rate·h_row) (rate = lr/κ) for ``parts``, pairs of
    (row ids, curvature per occurrence), h_row summed over every occurrence of the row in all
    parts. ``buf`` (one entry per row, zero) accumulates the sums and is zero again after."""
    for ids, h in parts:
        buf.index_add_(0, ids, h)
    out = [(1.0 / (1.0 + rate * buf.index_select(0, ids))).unsqueeze(1) for ids, _ in parts]
    for ids, _ in parts:
        buf.index_fill_(0, ids, 0.0)
    return out


class Band:
    """Banded products between R centres and their span of R+2W rows, as small dense GEMMs.

    Centre t interacts with span rows t..t+2W (offsets −W..W). Cutting the centres into blocks
    of L and multiplying each block with its (L+2W)-row slice of the span computes the whole band
    with ``bmm`` — a few percent of wasted products, but GEMM speed instead of one tiny
    dot product per pair. ``band(g)`` scatters a (R, J) matrix into the blocks' band positions.
    """

    def __init__(self, rows: int, window: int) -> None:
        self.W, self.J = window, 2 * window + 1
        self.L = band_block_length(window)  # >= 2W: see scatter
        if rows % self.L:
            raise ValueError(f"batch rows ({rows}) must be a multiple of the band block {self.L}")
        self.R, self.nb = rows, rows // self.L
        self.wide = self.L + 2 * window

    def diag_dot(self, c: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
        """(R,): Σ_j c[t, j] · col[t+j] for a per-position scalar ``col`` (R+2W,)."""
        return (c * col.as_strided((self.R, self.J), (1, 1))).sum(1)

    def diag_scatter(self, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """(R+2W,): position r receives Σ_t c[t, r−t] · x[t] for a per-centre scalar x (R,)."""
        per_pair = c * x.unsqueeze(1)
        out = torch.zeros(self.R + 2 * self.W, dtype=c.dtype)
        for j in range(self.J):
            out[j : j + self.R] += per_pair[:, j]
        return out

    def blocks(self, span_rows: torch.Tensor) -> torch.Tensor:
        """(R+2W, D) -> (nb, L+2W, D) overlapping view: block b is rows b·L .. b·L+L+2W."""
        d = span_rows.shape[1]
        return span_rows.as_strided((self.nb, self.wide, d), (self.L * d, d, 1))

    def _band_view(self, m: torch.Tensor) -> torch.Tensor:
        """(nb, L, L+2W) -> (nb, L, J) view of the band: element [b, i, j] = m[b, i, i + j]."""
        return m.as_strided((self.nb, self.L, self.J), (self.L * self.wide, self.wide + 1, 1))

    def scores(self, x: torch.Tensor, span_rows: torch.Tensor) -> torch.Tensor:
        """(R, J): x_t · span[t+j]."""
        full = torch.bmm(x.view(self.nb, self.L, -1), self.blocks(span_rows).transpose(1, 2))
        return self._band_view(full).reshape(self.R, self.J)

    def band(self, g: torch.Tensor) -> torch.Tensor:
        """(R, J) -> (nb, L, L+2W) zero matrix with g on the band."""
        out = torch.zeros(self.nb, self.L, self.wide, dtype=g.dtype)
        self._band_view(out).copy_(g.view(self.nb, self.L, self.J))
        return out

    def gather(self, gb: torch.Tensor, span_rows: torch.Tensor) -> torch.Tensor:
        """(R, D): Σ_j g[t, j] · span[t+j]."""
        return torch.bmm(gb, self.blocks(span_rows)).view(self.R, -1)

    def scatter(self, gb: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """(R+2W, D): row r receives Σ_t g[t, r−t] · x_t (overlap-add of the blocks)."""
        d = x.shape[1]
        per_block = torch.bmm(gb.transpose(1, 2), x.view(self.nb, self.L, d))  # (nb, L+2W, D)
        out = torch.zeros(self.R + 2 * self.W, d, dtype=x.dtype)
        out[: self.R] += per_block[:, : self.L].reshape(self.R, d)
        # the 2W tail rows of block b land on the first rows of block b+1 (2W <= L: no overlap)
        tail = out.as_strided((self.nb, 2 * self.W, d), (self.L * d, d, 1), self.L * d)
        tail += per_block[:, self.L :]
        return out
