"""Steps of M micro-batches, computed by any number of processes with the same bits.

A global step takes the next M batches of the batch specification (micro-batches j = 0..M−1)
and trains them as one synchronous step at one learning rate. Rank r of N computes the
contributions of the micro-batches j ≡ r (mod N) from the parameters as the step began
(:meth:`embedlab.engines.torch.Word2VecStep.contributions`); the ranks exchange them with one
all-gather, and every rank applies all M in the order j = 0..M−1
(:meth:`~embedlab.engines.torch.Word2VecStep.apply`). Each rank therefore holds the same
parameters after every step, and N ranks give the bits of one rank for every N dividing M —
the sums over a row's occurrences run in the same order whoever computed them.

What is exchanged is every row occurrence's gradient (and its damping curvature and bias
gradient), a fixed number of floats per micro-batch: (R + R+2W + groups·S) × (D + 2) for
skip-gram, so the all-gather needs no sizes first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from embedlab.engines.step import pairs_in
from embedlab.engines.stepping import BatchReader, Schedule, StepsDone
from embedlab.engines.torch_ops import Contributions, Part

if TYPE_CHECKING:
    from embedlab.data.pairs import Batch, BatchStream, Cursor
    from embedlab.engines.torch import Word2VecStep


@dataclass(frozen=True)
class World:
    """This process's place among the processes training one run (torch.distributed's rank and
    world size; one process: rank 0 of 1, no process group). ``group``: the process group of
    the exchange (None: the default one)."""

    rank: int = 0
    size: int = 1
    group: Any = None

    @classmethod
    def current(cls) -> World:
        """The run's processes (:mod:`embedlab.training.distributed`) when this process trains
        among them, else torch.distributed's default group if one is initialised."""
        import torch.distributed as dist

        from embedlab.training import distributed

        run = distributed.current()
        if run is not None:
            return cls(run.rank, run.size, run.step_group)
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's ``tensor`` (the same shape on each), in rank order. A failed exchange (a
        process died, a link broke) raises :class:`~embedlab.errors.ProcessLost`."""
        if self.size == 1:
            return [tensor]
        import torch.distributed as dist

        from embedlab.training.distributed import lost_on_failure

        out = [torch.empty_like(tensor) for _ in range(self.size)]
        with lost_on_failure():
            dist.all_gather(out, tensor, group=self.group)
        return out


@dataclass(frozen=True)
class Layout:
    """The shapes of one micro-batch's contributions: rows per part of each matrix."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    dim: int
    damped: bool
    biased: bool

    @classmethod
    def of(cls, stream: BatchStream, model: str, dim: int, *, damped: bool,
           biased: bool) -> Layout:
        rows, span = stream.rows, stream.rows + 2 * stream.window
        noise = stream.rows // stream.group * stream.noise_per_group
        if model == "skipgram":
            return cls((rows,), (span, noise), dim, damped, biased)
        return cls((span,), (rows, noise), dim, damped, biased)

    @property
    def n_ids(self) -> int:
        return sum(self.inputs) + sum(self.outputs)

    @property
    def n_values(self) -> int:
        per_row = self.dim + (1 if self.damped else 0)
        return self.n_ids * per_row + (sum(self.outputs) if self.biased else 0)

    def pack(self, c: Contributions | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``c`` as (ids int64, values float32) of fixed sizes (zeros for an empty slot)."""
        if c is None:
            return torch.zeros(self.n_ids, dtype=torch.int64), torch.zeros(self.n_values)
        parts = c.inputs + c.outputs
        ids = torch.cat([p[0] for p in parts])
        values = [p[1].reshape(-1) for p in parts]
        if self.damped:
            values += [p[2] for p in parts if p[2] is not None]
        if self.biased:
            values += [p[3] for p in c.outputs if p[3] is not None]
        return ids, torch.cat(values)

    def unpack(self, ids: torch.Tensor, values: torch.Tensor, loss: torch.Tensor) -> Contributions:
        sizes = list(self.inputs + self.outputs)
        id_parts = list(torch.split(ids, sizes))
        at = sum(sizes) * self.dim
        rows = [r.view(n, self.dim) for r, n in
                zip(torch.split(values[:at], [n * self.dim for n in sizes]), sizes, strict=True)]
        hs: list[torch.Tensor | None] = [None] * len(sizes)
        if self.damped:
            hs = list(torch.split(values[at:at + sum(sizes)], sizes))
            at += sum(sizes)
        biases: list[torch.Tensor | None] = [None] * len(self.outputs)
        if self.biased:
            biases = list(torch.split(values[at:], list(self.outputs)))
        n_in = len(self.inputs)
        parts: list[Part] = [(id_parts[i], rows[i], hs[i], None) for i in range(n_in)]
        outs: list[Part] = [(id_parts[n_in + i], rows[n_in + i], hs[n_in + i], biases[i])
                            for i in range(len(self.outputs))]
        return Contributions(loss, parts, outs)


class MicroBatches:
    """The step runner of steps of ``micro`` micro-batches on ``world`` (see the module
    docstring); ``step``: the torch engine's step, whose parameters every rank holds."""

    def __init__(self, stream: BatchStream, step: Word2VecStep, schedule: Schedule, model: str,
                 micro: int, world: World) -> None:
        if micro % world.size:
            raise ValueError(f"{world.size} processes do not divide {micro} micro-batches")
        if step.cfg.reduction != "sum":
            raise ValueError("micro-batches train the summed loss only (no mean reduction)")
        self.s, self.step, self.schedule, self.model = stream, step, schedule, model
        self.micro, self.world = micro, world
        self.layout = Layout.of(stream, model, step.p.w_in.shape[1], damped=step.damping,
                                biased=step.p.b_out is not None)
        self._reader = BatchReader(stream)

    def _take(self, cursor: Cursor) -> list[Batch]:
        """The next ``micro`` batches from ``cursor``: fewer at the end of an epoch, so that a
        step's progress stays within one epoch (the schedule counts positions per epoch)."""
        got = [self._reader.read(cursor)]
        while len(got) < self.micro and got[-1].cursor_next.epoch == cursor.epoch:
            got.append(self._reader.read(got[-1].cursor_next))
        return got

    def run(self, cursor: Cursor, words_seen: int, limit: int) -> StepsDone:
        batches = self._take(cursor)
        lr = self.schedule.at(words_seen)
        world, layout = self.world, self.layout
        per_rank = self.micro // world.size
        ids = torch.zeros((per_rank, layout.n_ids), dtype=torch.int64)
        values = torch.zeros((per_rank, layout.n_values))
        losses = torch.zeros(per_rank, dtype=torch.float64)
        for k in range(per_rank):
            j = k * world.size + world.rank
            if j < len(batches):
                c = self.step.contributions(batches[j])
                ids[k], values[k] = layout.pack(c)
                losses[k] = c.loss
        gathered = [world.all_gather(t) for t in (ids, values, losses)]
        parts = []
        for j in range(len(batches)):
            r, k = j % world.size, j // world.size
            parts.append(layout.unpack(gathered[0][r][k], gathered[1][r][k], gathered[2][r][k]))
        self.step.apply(parts, lr)
        loss = float(sum(float(p.loss) for p in parts))
        pairs = sum(pairs_in(b, self.model) for b in batches)
        after = batches[-1].cursor_next
        return StepsDone(np.array([loss]), np.array([pairs]), np.array([batches[-1].words_done]),
                         np.array([lr]), lambda i: after)

    def close(self) -> None:
        self._reader.close()
