"""The CUDA engine's batches: the batch specification built on the GPU, chunk by chunk.

A chunk's token ids go from the memory-mapped corpus through a pinned buffer to the GPU; the
draws (subsampling, windows, noise words: ``cuda_kernels.position_draws`` and ``noise_draws``)
and the chunk's layout — kept centres in order, windows stopped at sentence ends, piece seams
and the chunk's end, each batch's pairs and progress — are made there, as
:meth:`embedlab.data.pairs.BatchStream.chunk_batches` makes them on the CPU, bit for bit
(tested against :class:`~embedlab.data.batchspec.SpecBatchStream`).

Then each batch's row updates are planned: which rows the step adds to, and in which order
each row's contributions are summed (a stable sort of the step's row ids). A step's kernels
read everything from buffers allocated once, so one captured CUDA graph trains every step of
every chunk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

import embedlab.engines.cuda_kernels as K
from embedlab.data.pairs import reading_runs, release_mapped

if TYPE_CHECKING:
    from embedlab.data.batchspec import SpecBatchStream
    from embedlab.data.pairs import Batch

DRAW_BLOCK = 1024  # positions or noise draws per program of the draw kernels
#: most batch rows a program of the centre kernels takes (a power of two, >= 16 for tl.dot);
#: a tile stays inside one group of centres, so it is gcd(group, TILE_ROWS). The tiles cut the
#: sums over a noise row's centres, so changing it changes the last bits of every run.
TILE_ROWS = 16


def signed_key(key: tuple[int, int]) -> int:
    """The Philox key (k0, k1) as the signed int64 ``tl.philox`` takes."""
    k = key[0] | (key[1] << 32)
    return k - (1 << 64) if k >= 1 << 63 else k


@dataclass(frozen=True)
class Shape:
    """The step's sizes, and the tiles its kernels cut it into."""

    model: str  # skipgram | cbow
    window: int  # W
    batch: int  # B: real centres per batch of a chunk
    rows: int  # R >= B: centre slots per batch
    group: int  # G: centres sharing one set of noise words
    shared: int  # S: noise words per group (0: none)
    dim: int
    chunk_tokens: int

    @property
    def J(self) -> int:
        return 2 * self.window + 1

    @property
    def tile(self) -> int:
        """TG: batch rows per program of the centre kernels, inside one group."""
        return math.gcd(self.group, TILE_ROWS)

    @property
    def tiles(self) -> int:
        return self.rows // self.tile

    @property
    def groups(self) -> int:
        return self.rows // self.group

    @property
    def span(self) -> int:
        return self.rows + 2 * self.window

    @property
    def tile_span(self) -> int:
        """Window rows of a tile: its TG centres and W on either side."""
        return self.tile + 2 * self.window

    @property
    def n_in(self) -> int:
        """Input-row contributions per step: the centres (skip-gram), or each tile's window
        rows (CBOW)."""
        return self.rows if self.model == "skipgram" else self.tiles * self.tile_span

    @property
    def n_out(self) -> int:
        """Output-row contributions per step: each tile's window rows (skip-gram) or the
        centres (CBOW), then each tile's noise words."""
        first = self.tiles * self.tile_span if self.model == "skipgram" else self.rows
        return first + self.tiles * self.shared

    @property
    def max_batches(self) -> int:
        return max(1, -(-self.chunk_tokens // self.batch))


class Buffers:
    """Everything a step reads and writes, allocated once on ``device``."""

    def __init__(self, shape: Shape, device: torch.device) -> None:
        sh, dev = shape, device
        self.shape = sh
        nb, total = sh.max_batches, sh.chunk_tokens + sh.rows
        z = torch.zeros
        self.tok_p = z(total + 2 * sh.window, dtype=torch.int64, device=dev)
        self.mask = z((total, sh.J), dtype=torch.uint8, device=dev)
        self.ctx = z(total, dtype=torch.float32, device=dev)
        self.negs = z((nb, sh.groups, max(1, sh.shared)), dtype=torch.int64, device=dev)
        self.plan_in = [z((nb, sh.n_in), dtype=torch.int64, device=dev) for _ in range(4)]
        self.plan_out = [z((nb, sh.n_out), dtype=torch.int64, device=dev) for _ in range(4)]
        self.loss = z((nb, sh.tiles), dtype=torch.float32, device=dev)
        self.lr = z(nb, dtype=torch.float32, device=dev)
        self.step = z(1, dtype=torch.int32, device=dev)
        self.programs = [sh.n_in, sh.n_out]  # row programs a step launches (see plan_updates)
        d = sh.dim
        self.in_d, self.in_h = z((sh.n_in, d), device=dev), z(sh.n_in, device=dev)
        self.out_d, self.out_h = z((sh.n_out, d), device=dev), z(sh.n_out, device=dev)
        self.out_b = z(sh.n_out, device=dev)


@dataclass
class ChunkInfo:
    """What the host keeps of a chunk built on the GPU: its batches' counts."""

    epoch: int
    index: int
    n_batches: int
    n_kept: int
    n_pairs: np.ndarray  # (n_batches,) positive pairs of each batch's B rows
    active: np.ndarray  # (n_batches,) centres with a context (CBOW's positive examples)
    words_done: np.ndarray  # (n_batches,) positions of the epoch consumed after each batch


class PendingChunk:
    """A chunk whose build is queued on the device. Its counts travel to pinned host memory
    behind the build, and :meth:`result` waits for them only when the host needs them: a chunk
    built ahead is long done by then, so the build itself never makes the host wait."""

    def __init__(self, epoch: int, index: int, batch: int, counts: torch.Tensor,
                 event: torch.cuda.Event | None) -> None:
        self.epoch, self.index, self._batch = epoch, index, batch
        self._counts, self._event = counts, event  # (4, batches): pairs, active, done, kept
        self._info: ChunkInfo | None = None

    def wait(self) -> None:
        """Wait until the device has built the chunk."""
        if self._event is not None:
            self._event.synchronize()

    def result(self) -> ChunkInfo:
        if self._info is None:
            self.wait()
            host = self._counts.numpy()
            n = int(host[3, 0])
            nb = max(1, -(-n // self._batch))
            self._info = ChunkInfo(self.epoch, self.index, nb, n, host[0, :nb].copy(),
                                   host[1, :nb].copy(), host[2, :nb].copy())
        return self._info


class ChunkBuilder:
    """Builds ``stream``'s chunks into ``buf`` on its device.

    A build is queued without waiting for the device: how many positions subsampling keeps is
    known only there, so the chunk is laid out for the most batches its positions can fill (the
    kept ones packed first by their rank, a prefix sum) and its counts say, later, how many of
    them are real. Batches past the real ones are planned but never trained. A build starts
    once the previous one has finished with the host buffers they share; the device buffers it
    writes are the caller's to keep from steps still reading them
    (:class:`~embedlab.engines.cuda_engine.CudaBatches` waits for a buffer set's last steps).
    """

    def __init__(self, stream: SpecBatchStream, buf: Buffers) -> None:
        self.s, self.buf = stream, buf
        dev = buf.tok_p.device
        self.device = dev
        pin = dev.type == "cuda"
        self._staging = torch.zeros(stream.chunk_tokens, dtype=torch.int32, pin_memory=pin)
        # where sentences and pieces start: at most one a position, and a seam a piece
        self._starts = torch.zeros(2 * stream.chunk_tokens, dtype=torch.int64, pin_memory=pin)
        self._counts = torch.zeros(4 * buf.shape.max_batches, dtype=torch.int64, pin_memory=pin)
        self._last: PendingChunk | None = None  # the build that last used the host buffers
        keep = stream.keep_threshold
        self.keep = None if keep is None else torch.from_numpy(keep.astype(np.int64)).to(dev)
        self.noise_threshold = torch.from_numpy(stream.noise_threshold.astype(np.int64)).to(dev)
        self.noise_alias = torch.from_numpy(stream.noise_alias.astype(np.int64)).to(dev)
        self.key = signed_key(stream.key)

    def _read(self, runs: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The chunk's token ids on the device (int64) and a flag (int32, on the device) at
        each position where a new sentence or piece starts."""
        s, host = self.s, self._staging.numpy()
        at, starts = 0, []
        for start, end in runs:
            host[at:at + end - start] = s.ids[start:end]
            release_mapped(s.ids, start, end)
            a = np.searchsorted(s.sentence_ends, start, side="right")
            b = np.searchsorted(s.sentence_ends, end, side="left")
            starts.append(s.sentence_ends[a:b] - start + at)  # sentence ends inside the run
            if at:
                starts.append(np.array([at], dtype=np.int64))  # a seam between pieces
            at += end - start
        tok = self._staging[:at].to(self.device, non_blocking=True).long()
        new = np.concatenate(starts)
        flags = torch.zeros(at, dtype=torch.int32, device=self.device)
        if new.size:
            pinned = self._starts[:new.size]
            pinned.numpy()[:] = new
            # index_fill_ takes the 1 as a scalar: an assignment would copy it to the device
            # with a pageable copy, which waits for the stream
            flags.index_fill_(0, pinned.to(self.device, non_blocking=True), 1)
        return tok, flags

    def build(self, epoch: int, chunk: int) -> ChunkInfo:
        """Build the chunk and wait for its counts."""
        return self.start(epoch, chunk).result()

    def start(self, epoch: int, chunk: int) -> PendingChunk:
        """Queue the chunk's build on the current stream."""
        if self._last is not None:  # its copies to and from host memory must be done
            self._last.wait()
        s, buf, sh = self.s, self.buf, self.buf.shape
        W, B, R, J = sh.window, sh.batch, sh.rows, sh.J
        dev = self.device
        lo = chunk * s.chunk_tokens
        hi = min(s.n_tokens, lo + s.chunk_tokens)
        tok, starts = self._read(reading_runs(s.n_tokens, s.interleave, lo, hi))
        L = hi - lo
        kept = torch.empty(L, dtype=torch.int8, device=dev)
        window = torch.empty(L, dtype=torch.int32, device=dev)
        K.position_draws[(triton_grid(L),)](
            tok, tok if self.keep is None else self.keep, kept, window, L, lo, self.key, epoch,
            W, SUBSAMPLE=self.keep is not None, BLOCK=DRAW_BLOCK)
        sent = torch.cumsum(starts, 0)
        nb = max(1, -(-L // B))  # the most batches L positions fill
        total = (nb - 1) * B + R
        # where each kept position goes: its rank among the kept ones; the others go to a
        # slot past the end that is dropped (the build never asks the host how many are kept)
        rank = torch.cumsum(kept, 0)
        n = rank[-1:]  # (1,) kept positions
        rank = torch.where(kept != 0, rank - 1, total)

        def packed(values: torch.Tensor, fill: int) -> torch.Tensor:
            out = torch.full((total + 1,), fill, dtype=values.dtype, device=dev)
            return out.scatter_(0, rank, values)[:total]

        tok_p = buf.tok_p[:total + 2 * W]
        tok_p.zero_()
        tok_p[W:W + total] = packed(tok, 0)
        sent_p = torch.full((total + 2 * W,), -1, dtype=torch.int64, device=dev)
        sent_p[W:W + total] = packed(sent, -1)
        b = packed(window, 0)
        positions = packed(torch.arange(lo, hi, device=dev), 0)
        centre = sent_p[W:W + total]
        cols = [torch.zeros(total, dtype=torch.bool, device=dev) if j == W else
                (sent_p[j:j + total] == centre) & (b >= abs(j - W)) for j in range(J)]
        mask = torch.stack(cols, 1)
        buf.mask[:total] = mask
        count = mask.sum(1)
        buf.ctx[:total] = count.float()
        first = torch.arange(nb, device=dev) * B
        last = torch.clamp(first + B, max=total)
        zero = torch.zeros(1, dtype=torch.int64, device=dev)
        pairs = torch.cat((zero, torch.cumsum(count, 0)))
        active = torch.cat((zero, torch.cumsum((count > 0).long(), 0)))
        ends = torch.minimum(first + B, n)
        done = torch.where(ends > 0, positions[torch.clamp(ends - 1, min=0)] + 1, lo)
        real = torch.clamp((n + B - 1) // B, min=1)  # (1,) batches with kept positions, or 1
        done = torch.where(torch.arange(nb, device=dev) == real - 1, hi, done)
        counts = torch.stack((pairs[last] - pairs[first], active[last] - active[first], done,
                              n.expand(nb)))
        draws = nb * sh.groups * sh.shared
        if draws:
            K.noise_draws[(triton_grid(draws),)](
                buf.negs, self.noise_threshold, self.noise_alias, draws, len(s.noise), chunk,
                epoch, self.key, BLOCK=DRAW_BLOCK)
        plan_updates(buf, nb, B)
        host = self._counts[:4 * nb].view(4, nb)
        host.copy_(counts, non_blocking=True)
        event = None
        if dev.type == "cuda":
            event = torch.cuda.Event()
            event.record()
        self._last = PendingChunk(epoch, chunk, B, host, event)
        return self._last


def triton_grid(n: int) -> int:
    return max(1, -(-n // DRAW_BLOCK))


def load_batch(buf: Buffers, batch: Batch) -> None:
    """``batch`` as a chunk of one batch whose R rows are all its own (its mask and contexts
    already say which rows train)."""
    sh, dev = buf.shape, buf.tok_p.device
    buf.tok_p[:sh.span] = torch.from_numpy(np.asarray(batch.span, np.int64)).to(dev)
    buf.mask[:sh.rows] = torch.from_numpy(np.asarray(batch.mask, np.uint8)).to(dev)
    buf.ctx[:sh.rows] = torch.from_numpy(np.asarray(batch.contexts, np.float32)).to(dev)
    if sh.shared:
        buf.negs[0] = torch.from_numpy(np.asarray(batch.negatives, np.int64)).to(dev)
    plan_updates(buf, 1, sh.rows)


def plan_updates(buf: Buffers, n_batches: int, stride: int) -> None:
    """For each batch (``stride`` centres apart in the chunk), the row ids its step adds to
    and the order their contributions are summed in (see ``cuda_kernels.apply_rows``)."""
    sh, dev = buf.shape, buf.tok_p.device
    W = sh.window
    first = torch.arange(n_batches, device=dev)[:, None] * stride
    centres = buf.tok_p[W + first + torch.arange(sh.rows, device=dev)]
    # tile k's window rows: span rows k·TG .. k·TG + TG + 2W − 1
    at = (torch.arange(sh.tiles, device=dev)[:, None] * sh.tile
          + torch.arange(sh.tile_span, device=dev)).reshape(-1)
    span = buf.tok_p[first + at]
    noise = buf.negs[:n_batches].repeat_interleave(sh.group // sh.tile, dim=1)
    noise = noise.reshape(n_batches, -1)[:, :sh.tiles * sh.shared]
    if sh.model == "skipgram":
        into_in, into_out = centres, torch.cat((span, noise), 1)
    else:
        into_in, into_out = span, torch.cat((centres, noise), 1)
    for k, (ids, plan) in enumerate(((into_in, buf.plan_in), (into_out, buf.plan_out))):
        heads, ends, sid, order, n_heads = segments(ids)
        for target, value in zip(plan, (heads, ends, sid, order), strict=True):
            target[:n_batches] = value
        # the row programs a step needs: on a GPU all slots (one graph serves every step); on
        # the CPU, where Triton's interpreter runs each program in turn, only the used ones
        buf.programs[k] = ids.shape[1] if dev.type == "cuda" else int(n_heads.max())


def segments(ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per row of ``ids`` (batches × occurrences): its ids sorted stably (``sid``) and the
    permutation that sorts them (``order``), the runs of equal ids in the sorted order as
    (start, end) pairs, first ``heads`` then unused (0, 0) slots, and the runs per row."""
    sid, order = torch.sort(ids, dim=1, stable=True)
    nb, n = ids.shape
    head = torch.ones_like(sid, dtype=torch.bool)
    head[:, 1:] = sid[:, 1:] != sid[:, :-1]
    pos = torch.arange(n, device=ids.device).expand(nb, n)
    starts, _ = torch.sort(torch.where(head, pos, pos + n), dim=1)
    n_heads = head.sum(1, keepdim=True)
    slot = torch.arange(n, device=ids.device)[None, :]
    nxt = torch.cat((starts[:, 1:], torch.full((nb, 1), n, device=ids.device)), 1)
    used = slot < n_heads
    heads = torch.where(used, starts, 0)
    ends = torch.where(slot < n_heads - 1, nxt, torch.where(slot == n_heads - 1, n, 0))
    return heads, ends, sid, order, n_heads
