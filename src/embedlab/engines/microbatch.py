"""Steps of M micro-batches, computed by any number of processes with the same bits.

A global step trains M micro-batches (j = 0..M−1) of the batch specification as one
synchronous step at one learning rate. Rank r of N computes the contributions of the
micro-batches j ≡ r (mod N) from the parameters as the step began
(:meth:`embedlab.engines.torch.Word2VecStep.contributions`); the ranks exchange them with
all-gathers (two a step in the chunk order, three in the consecutive one), and every rank
applies all M in the order j = 0..M−1 (:meth:`~embedlab.engines.torch.Word2VecStep.apply`).
Each rank therefore holds the same parameters after every step, and N ranks give the bits of
one rank for every N dividing M — the sums over a row's occurrences run in the same order
whoever computed them.

Where the micro-batches come from (the run's ``optim.micro_order``):

* ``"chunks"`` (:class:`ChunkMicroBatches`): the chunks of an epoch are taken M at a time;
  micro-batch j of the steps of group g is the next batch of chunk g·M + j. Rank r builds only
  the chunks j ≡ r (mod N) of each group, so it reads only its own share of the corpus
  (1/N of it) and builds only the batches it computes;
* ``"consecutive"`` (:class:`MicroBatches`): a step is the next M batches in order, as runs
  made before the chunk order train; every rank builds all M (it computes only its own).

What is exchanged, in the chunk order: each micro-batch's gradient summed per row it touched
(:func:`per_row`: the rows of the input matrix and of the output matrix, each row once, in
ascending id, with its summed damping curvature and bias gradient), so a row that a
micro-batch touches many times (a frequent context, a noise word) travels once; and a few
numbers per micro-batch (its loss, its rows, its pairs, its progress through its chunk and
whether its chunk has more batches), from which every rank sizes the exchange and derives the
same progress and next cursor. The sums run in the same order whichever rank computes them, so
the bits stay those of one rank. In the consecutive order every row occurrence's gradient
travels, a fixed number of floats per micro-batch: (R + R+2W + groups·S) × (D + 2) for
skip-gram, so that all-gather needs no sizes first.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from embedlab.data.pairs import Cursor
from embedlab.engines.step import pairs_in
from embedlab.engines.stepping import BatchReader, Schedule, StepsDone
from embedlab.engines.torch_ops import Contributions, Part

if TYPE_CHECKING:
    from typing import TypeAlias

    from embedlab.data.pairs import Batch, BatchStream
    from embedlab.engines.cuda_micro import CudaMicroStep
    from embedlab.engines.torch import Word2VecStep

    Step: TypeAlias = Word2VecStep | CudaMicroStep


@dataclass(frozen=True)
class World:
    """This process's place among the processes training one run (torch.distributed's rank and
    world size; one process: rank 0 of 1, no process group). ``group``: the process group of
    the exchange (None: the default one)."""

    rank: int = 0
    size: int = 1
    group: Any = None
    device: Any = None  # where the exchanged tensors live (None: the CPU; NCCL's: a GPU)

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
            if tensor.device.type == "cuda":  # NCCL queues the work: its failure shows in wait
                from datetime import timedelta

                from embedlab.training.distributed import step_timeout

                work = dist.all_gather(out, tensor, group=self.group, async_op=True)
                work.wait(timedelta(seconds=step_timeout()))
                torch.cuda.current_stream().synchronize()
            else:
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
    """The step runner of steps of ``micro`` consecutive micro-batches on ``world`` (see the
    module docstring); ``step``: the torch engine's step, whose parameters every rank holds."""

    NOTES = 0  # numbers a micro-batch's owner sends with it beyond its loss (see _exchange)

    def __init__(self, stream: BatchStream, step: Step, schedule: Schedule, model: str,
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

    def _exchange(self, mine: list[Batch | None],
                  notes: np.ndarray) -> tuple[list[Contributions | None], np.ndarray]:
        """Compute this rank's micro-batches ``mine`` (slot k is micro-batch j = k·N + rank;
        None: no batch there) and exchange them with the other ranks, with a row of ``notes``
        (float64) per slot; return every micro-batch's contributions and notes in the order
        j = 0..M−1 (None where no rank had a batch)."""
        computed = [None if b is None else self._computed(b) for b in mine]
        if self.world.size == 1:  # nothing to send: the same values, without copying them about
            return computed, notes
        return self._gathered(computed, notes)

    def _gathered(self, computed: list[Contributions | None],
                  notes: np.ndarray) -> tuple[list[Contributions | None], np.ndarray]:
        """Every rank's ``computed`` and ``notes`` (see :meth:`_exchange`): a row per
        occurrence, in tensors of the layout's fixed size."""
        world, layout = self.world, self.layout
        per_rank = self.micro // world.size
        ids = torch.zeros((per_rank, layout.n_ids), dtype=torch.int64)
        values = torch.zeros((per_rank, layout.n_values))
        meta = torch.zeros((per_rank, 2 + notes.shape[1]), dtype=torch.float64)  # loss, there
        meta[:, 2:] = torch.from_numpy(notes)
        for k, c in enumerate(computed):
            if c is not None:
                ids[k], values[k] = layout.pack(c)
                meta[k, 0], meta[k, 1] = c.loss, 1.0
        gathered = [world.all_gather(t) for t in (ids, values, meta)]
        parts: list[Contributions | None] = []
        rows = np.zeros((self.micro, notes.shape[1]))
        for j in range(self.micro):
            r, k = j % world.size, j // world.size
            row = gathered[2][r][k]
            rows[j] = row[2:].numpy()
            parts.append(layout.unpack(gathered[0][r][k], gathered[1][r][k], row[0])
                         if float(row[1]) else None)
        return parts, rows

    def _computed(self, batch: Batch) -> Contributions:
        """What this rank sends of a micro-batch: its contributions, a row per occurrence."""
        return self.step.contributions(batch)

    def _apply(self, parts: list[Contributions | None], lr: float) -> float:
        """Apply the micro-batches that were there, in order; their summed loss."""
        there = [p for p in parts if p is not None]
        self.step.apply(there, lr)
        return float(sum(float(p.loss) for p in there))

    def run(self, cursor: Cursor, words_seen: int, limit: int) -> StepsDone:
        batches = self._take(cursor)
        lr = self.schedule.at(words_seen)
        world = self.world
        mine = [batches[j] if j < len(batches) else None
                for j in range(world.rank, self.micro, world.size)]
        parts, _ = self._exchange(mine, np.zeros((len(mine), self.NOTES)))
        loss = self._apply(parts, lr)
        pairs = sum(pairs_in(b, self.model) for b in batches)
        after = batches[-1].cursor_next
        return StepsDone(np.array([loss]), np.array([pairs]), np.array([batches[-1].words_done]),
                         np.array([lr]), lambda i: after)

    def close(self) -> None:
        self._reader.close()


class ChunkMicroBatches(MicroBatches):
    """Steps of ``micro`` micro-batches in the chunk order (see the module docstring).

    The cursor of a step is (epoch, g·M, k): the step trains batch k of each chunk of group g
    that has one (chunks hold a few batches more or less, and the last group of an epoch may
    have fewer than M chunks: those steps train fewer micro-batches). After it, the epoch has
    consumed the whole chunks before the group plus each chunk's positions up to its batch k,
    as one batch's progress counts them (the batch specification).

    A background thread builds this rank's chunks of the group and of the next one ahead of
    use; NumPy releases the GIL in its kernels, so building overlaps the step's compute.
    """

    NOTES = 3  # its pairs, its progress through its chunk, whether the chunk has more batches
    HEAD = 4  # columns before the notes: loss, there, input rows, output rows

    def __init__(self, stream: BatchStream, step: Step, schedule: Schedule, model: str,
                 micro: int, world: World) -> None:
        super().__init__(stream, step, schedule, model, micro, world)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="embedlab-chunks")
        self._chunks: dict[tuple[int, int], Future[list[Batch]]] = {}

    def own_chunks(self, epoch: int, first: int) -> list[int | None]:
        """This rank's chunk of each of its slots in the group starting at chunk ``first``
        (None past the epoch's last chunk)."""
        n = self.s.n_chunks
        return [first + j if first + j < n else None
                for j in range(self.world.rank, self.micro, self.world.size)]

    def _next_group(self, epoch: int, first: int) -> tuple[int, int]:
        """The group after the one starting at chunk ``first``: (epoch, its first chunk)."""
        nxt = first + self.micro
        return (epoch, nxt) if nxt < self.s.n_chunks else (epoch + 1, 0)

    def _built(self, epoch: int, first: int) -> list[tuple[int, list[Batch]] | None]:
        """This rank's chunks of the group, each with its batches (built, or waited for; None
        past the epoch's last chunk), the next group's started."""
        ahead = self._next_group(epoch, first)
        wanted = [(e, c) for e, f in ((epoch, first), ahead) if e < self.s.epochs
                  for c in self.own_chunks(e, f) if c is not None]
        for key in [k for k in self._chunks if k not in wanted]:
            self._chunks.pop(key).cancel()  # a group done (or another cursor): free its batches
        for key in wanted:
            if key not in self._chunks:
                self._chunks[key] = self._pool.submit(self.s.chunk_batches, *key)
        return [None if c is None else (c, self._chunks[(epoch, c)].result())
                for c in self.own_chunks(epoch, first)]

    def run(self, cursor: Cursor, words_seen: int, limit: int) -> StepsDone:
        s, (epoch, first, k) = self.s, (cursor.epoch, cursor.chunk, cursor.batch)
        if first % self.micro:
            raise ValueError(f"cursor chunk {first} does not start a group of {self.micro}")
        mine: list[Batch | None] = []
        notes = np.zeros((self.micro // self.world.size, self.NOTES))
        for slot, built in enumerate(self._built(epoch, first)):
            if built is None:
                mine.append(None)
                continue
            c, batches = built
            lo, hi = c * s.chunk_tokens, min(s.n_tokens, (c + 1) * s.chunk_tokens)
            if k < len(batches):
                b = batches[k]
                mine.append(b)
                notes[slot] = (pairs_in(b, self.model), b.words_done - lo, k + 1 < len(batches))
            else:  # this chunk is done: all of it consumed
                mine.append(None)
                notes[slot] = (0, hi - lo, 0)
        lr = self.schedule.at(words_seen)
        parts, rows = self._exchange(mine, notes)
        loss = self._apply(parts, lr)
        pairs = int(rows[:, 0].sum())
        words_done = first * s.chunk_tokens + int(rows[:, 1].sum())
        after = (Cursor(epoch, first, k + 1) if rows[:, 2].any()
                 else Cursor(*self._next_group(epoch, first), 0))
        return StepsDone(np.array([loss]), np.array([pairs]), np.array([words_done]),
                         np.array([lr]), lambda i: after)

    def _gathered(self, summed: list[Contributions | None],
                  notes: np.ndarray) -> tuple[list[Contributions | None], np.ndarray]:
        """As :meth:`MicroBatches._gathered`, for contributions summed per row
        (:func:`per_row`): a first all-gather sends every slot's loss, row counts and notes, so
        that the rows themselves travel in a second one, of the largest slot's size: each
        slot's ids (int32) then its values (float32, their bits as int32) in one tensor — one
        collective fewer, as each costs a round trip whatever its size."""
        world, dev = self.world, self.world.device
        per_rank, head = self.micro // world.size, self.HEAD
        meta = torch.zeros((per_rank, head + notes.shape[1]), dtype=torch.float64, device=dev)
        meta[:, head:] = torch.from_numpy(notes)
        for k, c in enumerate(summed):
            if c is not None:
                meta[k, :head] = torch.tensor([float(c.loss), 1.0, len(c.inputs[0][0]),
                                               len(c.outputs[0][0])], dtype=torch.float64)
        metas = [m.cpu() for m in world.all_gather(meta)]
        # a slot's layout: one part per matrix, of the rows it touched
        slots = [self._slot(int(m[k, 2]), int(m[k, 3])) for m in metas for k in range(per_rank)]
        n_ids = max(lay.n_ids for lay in slots)
        n_values = max(lay.n_values for lay in slots)
        packed = torch.zeros((per_rank, n_ids + n_values), dtype=torch.int32, device=dev)
        for k, c in enumerate(summed):
            if c is not None:
                i, v = self._slot(len(c.inputs[0][0]), len(c.outputs[0][0])).pack(c)
                packed[k, :len(i)] = i  # row ids < 2^31: a vocabulary's size
                packed[k, n_ids:n_ids + len(v)] = v.view(torch.int32)
        gathered = world.all_gather(packed)
        parts: list[Contributions | None] = []
        out = np.zeros((self.micro, notes.shape[1]))
        for j in range(self.micro):
            r, k = j % world.size, j // world.size
            m, slot, lay = metas[r][k], gathered[r][k], slots[r * per_rank + k]
            out[j] = m[head:].numpy()
            parts.append(lay.unpack(slot[:lay.n_ids].long(),
                                    slot[n_ids:n_ids + lay.n_values].view(torch.float32), m[0])
                         if float(m[1]) else None)
        return parts, out

    def _computed(self, batch: Batch) -> Contributions:
        """What this rank sends of a micro-batch: its contributions summed per row (by the
        step itself where it can: the cuda engine's, on the GPU)."""
        sums = getattr(self.step, "row_sums", None)
        return sums(batch) if sums is not None else per_row(self.step.contributions(batch))

    def _slot(self, n_in: int, n_out: int) -> Layout:
        """The layout of a micro-batch summed per row: ``n_in`` input, ``n_out`` output rows."""
        return dataclasses.replace(self.layout, inputs=(n_in,), outputs=(n_out,))

    def close(self) -> None:
        for future in self._chunks.values():
            future.cancel()
        self._chunks.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)
        super().close()


def per_row(c: Contributions) -> Contributions:
    """``c`` with one part per matrix, each row it touches once, in ascending id: the
    occurrences' gradients, curvatures and bias gradients summed in their order (index_add on
    the CPU adds duplicates in index order, so the sums are the same bits wherever they are
    computed)."""
    return Contributions(c.loss, [_summed(c.inputs)], [_summed(c.outputs)])


def _summed(parts: list[Part]) -> Part:
    ids = torch.cat([p[0] for p in parts])
    unique, where = torch.unique(ids, sorted=True, return_inverse=True)

    def add(values: list[torch.Tensor | None]) -> torch.Tensor | None:
        if any(v is None for v in values):
            return None
        flat = torch.cat([v for v in values if v is not None])
        out = torch.zeros((len(unique), *flat.shape[1:]), dtype=flat.dtype)
        return out.index_add_(0, where, flat)

    rows = add([p[1] for p in parts])
    assert rows is not None
    return unique, rows, add([p[2] for p in parts]), add([p[3] for p in parts])


def micro_batch_runner(stream: BatchStream, step: Step, schedule: Schedule, model: str,
                       world: World) -> MicroBatches:
    """The step runner of the step's ``micro_batches`` in its ``micro_order``."""
    kind = ChunkMicroBatches if step.cfg.micro_order == "chunks" else MicroBatches
    return kind(stream, step, schedule, model, step.cfg.micro_batches, world)
