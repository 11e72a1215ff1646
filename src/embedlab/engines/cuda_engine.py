"""The CUDA engine: word2vec's parameters on one GPU, trained by the kernels of
:mod:`embedlab.engines.cuda_kernels` on batches built there (:mod:`embedlab.engines.cuda_batches`).

Every launch of a step is deterministic (no atomics; each row's contributions are summed in a
planned order by the one program that owns the row), so two runs of the same command on the
same GPU model give the same bits, and a run resumed from a checkpoint continues exactly as an
uninterrupted one. On a GPU the step's launches are captured once in a CUDA graph and replayed
for every step: the kernels read the step's index, rate and buffers from device memory, so one
graph serves every step of every chunk.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

import embedlab.engines.cuda_kernels as K
from embedlab.engines.cuda import interpreted
from embedlab.engines.cuda_batches import (
    Buffers,
    ChunkBuilder,
    ChunkInfo,
    PendingChunk,
    Shape,
    load_batch,
)
from embedlab.engines.stepping import BatchByBatch, StepsDone
from embedlab.errors import InputError, spell, warn

if TYPE_CHECKING:
    from embedlab.data.pairs import Batch, BatchStream, Cursor
    from embedlab.engines.huffman import HuffmanTree
    from embedlab.engines.microbatch import World
    from embedlab.engines.params import Word2VecParams
    from embedlab.engines.step import StepConfig
    from embedlab.engines.stepping import Schedule, StepRunner

OCCURRENCE_BLOCK = 16  # contributions a row program sums at once
#: GPU memory kept free beyond the estimate: the CUDA context, Triton's modules, the allocator
MEMORY_MARGIN = 512 << 20


#: launch settings for benchmarks, e.g. ``split=4,grad_slice=32,tile_warps=8,apply_warps=2``
KERNELS_ENV = "EMBEDLAB_CUDA_KERNELS"


@dataclass(frozen=True)
class Kernels:
    """How a step's launches are cut into programs (none of it changes the mathematics; what
    changes float32 rounding is said per field). 0 means the default for the dimension.

    The defaults are the fastest of ``benchmarks/gpu_step.py --variants`` on an H100 (d100 and
    d300): slices of 16 dimensions keep a tile program's operands in registers (wider ones
    spill: a 128-wide slice took 255 registers and 3.4 KB of stack a thread), 8 warps and two
    programs per tile give each multiprocessor more than one program's loads to wait on."""

    #: dimensions per slice in the tiles' scores (pass 1): their summation order, so their bits
    score_slice: int = 16
    #: programs per tile, each writing the gradients of its own slices of dimensions
    split: int = 2
    #: dimensions per slice of a program's gradients (pass 2)
    grad_slice: int = 0
    #: warps per tile program, per row program (a reduction's order follows the layout)
    tile_warps: int = 8
    apply_warps: int = 4
    #: dimensions per slice of a row program, contributions it sums at once (the layout of
    #: the sum, so its order)
    apply_slice: int = 0
    occ_block: int = OCCURRENCE_BLOCK

    @classmethod
    def from_env(cls) -> Kernels:
        """The defaults, with the fields ``$EMBEDLAB_CUDA_KERNELS`` names (``key=value,...``);
        said in one line when set, as its settings may change the run's float32 rounding."""
        spec = os.environ.get(KERNELS_ENV, "").strip()
        if not spec:
            return cls()
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, int] = {}
        for item in spec.split(","):
            key, _, value = (part.strip() for part in item.partition("="))
            if key not in names or not value.isdigit():
                raise InputError(f"${KERNELS_ENV}: {item.strip()!r} is not key=number with key "
                                 f"one of {', '.join(sorted(names))}; fix it or unset it")
            number = int(value)
            # Triton's blocks are powers of two, tl.dot's at least 16; a split is a count; a
            # slice of 0 is the default for the dimension
            least = 16 if key.endswith("_slice") else 1
            power = key != "split"
            wrong = number < least or (power and number & (number - 1))
            if wrong and not (key.endswith("_slice") and number == 0):
                what = f"a power of two >= {least}" if power else f">= {least}"
                raise InputError(f"${KERNELS_ENV}: {key} must be {what}, got {number}; fix "
                                 "it or unset it")
            values[key] = number
        warn(f"${KERNELS_ENV}={spec}: the cuda engine's launch settings differ from the "
             "defaults, and a run's bits may differ from one trained without it")
        return cls(**values)

    def resolved(self, dim: int) -> Kernels:
        """Zeros spelled out for ``dim``, and no more parts than a tile has slices."""
        wide = max(16, min(128, _pow2(dim)))
        score = self.score_slice or wide
        grad = self.grad_slice or score
        split = max(1, min(self.split, -(-dim // grad)))
        return dataclasses.replace(self, score_slice=score, grad_slice=grad, split=split,
                                   apply_slice=self.apply_slice or wide)


def _device() -> torch.device:
    """The CPU under the interpreter; else this process's GPU: under torchrun, local process i
    of a machine with several GPUs takes GPU i (modulo their number)."""
    if interpreted():
        return torch.device("cpu")
    count = torch.cuda.device_count()
    local = os.environ.get("LOCAL_RANK", "")
    if count > 1 and local.isdigit():
        device = torch.device("cuda", int(local) % count)
        torch.cuda.set_device(device)
        return device
    return torch.device("cuda")


def exchange_world(device: torch.device) -> World:
    """The processes of the run, exchanging micro-batches over NCCL between their GPUs where
    each process has a GPU of its own (``distributed.Group.gpu_group``); else over the run's
    gloo group, through host memory (the CPU under the interpreter, or processes sharing a GPU,
    which NCCL refuses)."""
    from embedlab.engines.microbatch import World
    from embedlab.training import distributed

    world, run = World.current(), distributed.current()
    if run is None or run.gpu_group is None or device.type != "cuda":
        return world
    return dataclasses.replace(world, group=run.gpu_group, device=device)


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


class CudaEngine:
    """Trains word2vec's parameters on one GPU (see the module docstring)."""

    name: ClassVar[str] = "cuda"

    def __init__(self, cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None,
                 rows: int, threads: int = 1, *, tree: HuffmanTree | None = None) -> None:
        if tree is not None or cfg.loss == "hs":
            raise InputError(f"{spell('--loss', 'hs')} trains on the CPU engines only; pass "
                             f"{spell('--engine', 'native')} or {spell('--loss', 'neg')}")
        self.cfg, self.rows = cfg, rows
        self.device = _device()
        if self.device.type == "cpu":
            torch.set_num_threads(max(1, threads))
        vocab, dim = params.w_in.shape
        check_gpu_memory(vocab, dim, nce=params.b_out is not None, device=self.device)
        self.w_in = torch.from_numpy(params.w_in).to(self.device, copy=True)
        self.w_out = torch.from_numpy(params.w_out).to(self.device, copy=True)
        self.b_out = None if params.b_out is None else \
            torch.from_numpy(params.b_out).to(self.device, copy=True)
        self.log_kq = None if log_kq is None else \
            torch.from_numpy(np.asarray(log_kq, np.float32)).to(self.device)
        self.bias_sq = params.bias_sq
        self.kernels = Kernels.from_env().resolved(dim)
        self._names = list(params.tensors())
        self._one_batch: Buffers | None = None  # for step(): batches given one at a time

    # ---- the Engine interface ------------------------------------------------------------
    def shape(self, batch: int, chunk_tokens: int, shared: int) -> Shape:
        """The step's sizes for batches of ``batch`` centres (``shared`` noise words per
        group) cut from chunks of ``chunk_tokens`` positions."""
        c = self.cfg
        return Shape(c.model, c.window, batch, self.rows, c.group, shared, self.dim,
                     chunk_tokens)

    @property
    def dim(self) -> int:
        return int(self.w_in.shape[1])

    def launch_tiles(self, buf: Buffers, stride: int) -> None:
        """The step's first launch on ``buf`` (its batches ``stride`` rows apart): every
        contribution and the loss, no row written (:func:`launch_tiles`)."""
        launch_tiles(self, buf, stride)

    def launch_apply_rows(self, step: torch.Tensor, lr: torch.Tensor,
                          inputs: tuple[torch.Tensor, ...], outputs: tuple[torch.Tensor, ...],
                          programs: list[int]) -> None:
        """:func:`launch_apply_rows` on this engine's parameters."""
        launch_apply_rows(self, step, lr, inputs, outputs, programs)

    def loaded(self, batch: Batch) -> Buffers:
        """Buffers of one batch holding ``batch``, built elsewhere, at step 0 (its rows
        ``self.rows`` apart)."""
        shared = int(batch.negatives.shape[1])
        buf = self._one_batch
        if buf is None or buf.shape.shared != shared:
            buf = self._one_batch = Buffers(self.shape(self.rows, self.rows, shared),
                                            self.device)
        load_batch(buf, batch)
        buf.step.zero_()
        return buf

    def step(self, batch: Batch, lr: float) -> float:
        """One step on a batch built elsewhere (runs whose batches predate the specification,
        and the tests)."""
        buf = self.loaded(batch)
        buf.lr[0] = self.cfg.batch_lr(lr, batch)
        launch_step(self, buf, self.rows)
        return float(buf.loss[0].sum(dtype=torch.float64))

    def runner(self, stream: BatchStream, schedule: Schedule, model: str) -> StepRunner:
        """Steps of ``--micro-batches`` batches (on every process of the run), else the
        batches built on the GPU (:class:`CudaBatches`), or, for runs whose batches predate
        the batch specification, one batch per step."""
        from embedlab.data.batchspec import SpecBatchStream

        if self.cfg.micro_batches > 1:
            from embedlab.engines.cuda_micro import CudaMicroStep
            from embedlab.engines.microbatch import micro_batch_runner

            if self.cfg.micro_order != "chunks":
                raise InputError("the cuda engine trains micro-batches in the chunk order only "
                                 f"(optim.micro_order \"chunks\"); pass "
                                 f"{spell('--engine', 'torch')} for this run")
            return micro_batch_runner(stream, CudaMicroStep(self), schedule, model,
                                      exchange_world(self.device))
        if isinstance(stream, SpecBatchStream):
            return CudaBatches(self, stream, schedule)
        return BatchByBatch(stream, self, schedule, model)

    def state_dict(self) -> dict[str, np.ndarray]:
        tensors = [self.w_in, self.w_out] + ([] if self.b_out is None else [self.b_out])
        return {name: t.cpu().numpy() for name, t in zip(self._names, tensors, strict=True)}

    def load_state_dict(self, tensors: Mapping[str, np.ndarray]) -> None:
        own = [self.w_in, self.w_out] + ([] if self.b_out is None else [self.b_out])
        missing = [name for name in self._names if name not in tensors]
        if missing:
            raise ValueError(f"the state has no {', '.join(missing)}")
        for name, t in zip(self._names, own, strict=True):
            source = np.asarray(tensors[name])
            if source.shape != tuple(t.shape):
                raise ValueError(f"{name} has shape {source.shape}, the engine's "
                                 f"{tuple(t.shape)}")
            t.copy_(torch.from_numpy(np.ascontiguousarray(source, np.float32)))

    @property
    def input_vectors(self) -> np.ndarray:
        return self.w_in.cpu().numpy()

    @property
    def output_vectors(self) -> np.ndarray:
        return self.w_out.cpu().numpy()


def check_gpu_memory(vocab: int, dim: int, *, nce: bool, device: torch.device) -> None:
    """Refuse, in one line, a model whose matrices do not fit the GPU's free memory."""
    if device.type != "cuda":
        return
    need = vocab * dim * 4 * 2 + (vocab * 4 if nce else 0) + MEMORY_MARGIN
    free, total = torch.cuda.mem_get_info(device)
    if need > free:
        gib = 1 << 30
        raise InputError(
            f"the model needs {need / gib:.1f} GiB of GPU memory ({vocab:,} words x {dim} "
            f"dimensions x 2 matrices), and {free / gib:.1f} of {total / gib:.1f} GiB are free; "
            f"pass a smaller {spell('--dim')} or {spell('--max-vocab')} (or a larger "
            f"{spell('--min-count')}), or train on the CPU with {spell('--engine', 'native')}")


def launch_step(engine: CudaEngine, buf: Buffers, batch: int) -> None:
    """One step's launches on ``buf`` (its ``step`` says which batch of the chunk), rows
    ``batch`` apart in the chunk; the step's index is advanced on the device."""
    launch_tiles(engine, buf, batch)
    launch_apply(engine, buf)
    buf.step += 1


def launch_tiles(engine: CudaEngine, buf: Buffers, batch: int) -> None:
    """The step's centre tiles: scores, loss and every contribution (no row is written)."""
    sh, cfg, kn = buf.shape, engine.cfg, engine.kernels
    bias = engine.b_out if engine.b_out is not None else buf.out_h
    log_kq = engine.log_kq if engine.log_kq is not None else buf.out_h
    tiles = K.skipgram_tiles if sh.model == "skipgram" else K.cbow_tiles
    extra = () if sh.model == "skipgram" else (sh.rows,)
    tiles[(sh.tiles, kn.split)](
        buf.step, buf.tok_p, buf.mask, buf.ctx, buf.negs, engine.w_in, engine.w_out, bias,
        log_kq, buf.loss, buf.in_d, buf.in_h, buf.out_d, buf.out_h, buf.out_b, sh.dim, batch,
        *extra, sh.shared, sh.group, sh.groups, sh.tiles, cfg.negative / max(1, sh.shared),
        engine.bias_sq, W=sh.window, J=sh.J, TG=sh.tile, SW=max(16, _pow2(sh.tile_span)),
        SP=max(16, _pow2(sh.shared)), BDK=kn.score_slice, NCE=cfg.loss == "nce",
        SKIP_HITS=cfg.loss == "neg", USE_DOT=sh.tile >= 16, SPLIT=kn.split, BDG=kn.grad_slice,
        num_warps=kn.tile_warps, num_stages=1)


def launch_apply(engine: CudaEngine, buf: Buffers) -> None:
    """Sum, damp and apply every contribution to the input and the output rows (one launch)."""
    launch_apply_rows(engine, buf.step, buf.lr, (*buf.plan_in, buf.in_d, buf.in_h),
                      (*buf.plan_out, buf.out_d, buf.out_h, buf.out_b), buf.programs)


def launch_apply_rows(engine: CudaEngine, step: torch.Tensor, lr: torch.Tensor,
                      inputs: tuple[torch.Tensor, ...], outputs: tuple[torch.Tensor, ...],
                      programs: list[int]) -> None:
    """``cuda_kernels.apply_rows`` on rows planned elsewhere: ``inputs`` the input rows' plan
    (heads, ends, sid, order), contributions and curvatures; ``outputs`` the output rows', with
    their bias gradients; ``programs`` the row programs of each."""
    cfg, kn = engine.cfg, engine.kernels
    *plan_in, d_in, h_in = inputs
    *plan_out, d_out, h_out, b_out = outputs
    bias = engine.b_out if engine.b_out is not None else h_out
    programs_in, programs_out = programs
    K.apply_rows[(programs_in + programs_out,)](
        step, lr, engine.dim, programs_in,
        *plan_in, d_in, h_in, engine.w_in, max(cfg.input_kappa, 1e-30), plan_in[0].shape[1],
        *plan_out, d_out, h_out, b_out, engine.w_out, bias, max(cfg.damping, 1e-30),
        plan_out[0].shape[1],
        DAMP_IN=cfg.input_kappa > 0, DAMP_OUT=cfg.damping > 0, BIAS=cfg.loss == "nce",
        MB=kn.occ_block, BDK=kn.apply_slice, num_warps=kn.apply_warps)


class CudaBatches:
    """The CUDA engine's step runner: builds ``stream``'s chunks on the GPU and trains up to
    ``limit`` steps per call, replaying a captured CUDA graph per step on a GPU.

    Two sets of buffers take turns, chunk by chunk: while the steps of one chunk run, the next
    chunk is built into the other set, on a second CUDA stream. A call goes on from one chunk
    into the next within an epoch, and the host waits for the GPU only at its end (for the
    losses) and before building into a set whose steps are still queued: the GPU is kept fed
    with steps while the host reads ids and queues the next chunk's build.
    """

    #: at most this many steps per call (the loop's default is 32): a call ends by waiting for
    #: the GPU, and 100 steps (~6 ms at the defaults) keep that wait a small share of the time
    #: while a signal still waits at most a few milliseconds
    steps_per_call = 100
    #: steps per replay of the long graph: a replay cost the host ~26 µs in a profile, a step
    #: the GPU ~63 µs at the defaults, so one graph a step would leave the host little to spare
    graph_steps = 16

    def __init__(self, engine: CudaEngine, stream: BatchStream, schedule: Schedule) -> None:
        self.engine, self.s, self.schedule = engine, stream, schedule
        chunk = min(stream.chunk_tokens, stream.n_tokens)
        shape = engine.shape(stream.batch_size, chunk, stream.noise_per_group)
        self.bufs = [Buffers(shape, engine.device) for _ in range(2)]
        self.builders = [ChunkBuilder(stream, b) for b in self.bufs]  # type: ignore[arg-type]
        self.built: list[PendingChunk | None] = [None, None]
        # per buffer set: the graph of one step and the graph of graph_steps steps
        self._graphs: list[dict[int, torch.cuda.CUDAGraph]] = [{}, {}]
        self._compiled = False
        on_gpu = engine.device.type == "cuda"
        # the next chunk's build goes first where it meets the steps on the GPU: its few small
        # launches do not queue behind a call's steps
        self._side = torch.cuda.Stream(priority=-1) if on_gpu else None
        # per buffer set: the end of its last queued steps, and the rates they read (pinned,
        # so that queuing them does not wait for the steps before)
        self._trained: list[torch.cuda.Event | None] = [None, None]
        self._rates = [torch.zeros(shape.max_batches, dtype=torch.float32, pin_memory=on_gpu)
                       for _ in range(2)]

    def _slot(self, epoch: int, chunk: int) -> int:
        return (epoch * self.s.n_chunks + chunk) % 2  # consecutive chunks alternate

    def _start(self, slot: int, epoch: int, chunk: int) -> PendingChunk:
        """Queue a build of (``epoch``, ``chunk``) into buffer set ``slot`` on the current
        stream, once the set's queued steps are done with it."""
        trained = self._trained[slot]
        if trained is not None:
            trained.synchronize()
        self.built[slot] = pending = self.builders[slot].start(epoch, chunk)
        return pending

    def _build(self, epoch: int, chunk: int) -> tuple[ChunkInfo, int]:
        slot = self._slot(epoch, chunk)
        c = self.built[slot]
        if c is None or (c.epoch, c.index) != (epoch, chunk):
            c = self._start(slot, epoch, chunk)
        return c.result(), slot

    def _prefetch(self, epoch: int, chunk: int) -> None:
        """Build the chunk after (``epoch``, ``chunk``) on the second stream, if there is one."""
        nxt = self.s.cursor_after(epoch, chunk, 0, 1)
        if self._side is None or nxt.epoch >= self.s.epochs:
            return
        slot = self._slot(nxt.epoch, nxt.chunk)
        c = self.built[slot]
        if c is None or (c.epoch, c.index) != (nxt.epoch, nxt.chunk):
            with torch.cuda.stream(self._side):
                self._start(slot, nxt.epoch, nxt.chunk)

    def run(self, cursor: Cursor, words_seen: int, limit: int) -> StepsDone:
        s, cfg = self.s, self.engine.cfg
        losses: list[torch.Tensor] = []
        pairs, done, lrs = [], [], []
        parts: list[tuple[int, int, int, int, int]] = []  # (first step, epoch, chunk, batch, n)
        taken, seen = 0, words_seen
        while True:
            c, slot = self._build(cursor.epoch, cursor.chunk)
            first = cursor.batch
            n = max(1, min(limit - taken, c.n_batches - first))
            at = slice(first, first + n)
            before = cursor.epoch * s.n_tokens
            starts = np.concatenate(([seen], before + c.words_done[first:first + n - 1]))
            part_lrs = np.array([self.schedule.at(int(w)) for w in starts])
            rates = part_lrs / np.maximum(1, c.n_pairs[at]) if cfg.reduction == "mean" \
                else part_lrs
            buf = self.bufs[slot]
            self._set_rates(slot, at, rates)
            buf.step.fill_(first)
            if self._side is not None:  # the chunk may have been built there
                torch.cuda.current_stream().wait_stream(self._side)
            self._steps(slot, n)
            if self._side is not None:
                trained = torch.cuda.Event()
                trained.record()
                self._trained[slot] = trained
            losses.append(buf.loss[at].sum(1, dtype=torch.float64))
            pairs.append(c.n_pairs[at] if cfg.model == "skipgram" else c.active[at])
            done.append(c.words_done[at])
            lrs.append(part_lrs)
            parts.append((taken, cursor.epoch, cursor.chunk, first, c.n_batches))
            taken += n
            seen = before + int(c.words_done[first + n - 1])
            self._prefetch(cursor.epoch, cursor.chunk)  # while the GPU trains
            nxt = s.cursor_after(cursor.epoch, cursor.chunk, first + n - 1, c.n_batches)
            if taken >= limit or nxt.epoch != cursor.epoch:
                break
            cursor = nxt
        host = torch.cat(losses).cpu().numpy()

        def cursor_after(i: int) -> Cursor:
            part = next(p for p in reversed(parts) if p[0] <= i)
            at, epoch, chunk, batch, batches = part
            return s.cursor_after(epoch, chunk, batch + i - at, batches)

        return StepsDone(host, np.concatenate(pairs), np.concatenate(done),
                         np.concatenate(lrs), cursor_after)

    def _set_rates(self, slot: int, at: slice, rates: np.ndarray) -> None:
        """The steps' rates into buffer set ``slot``'s device buffer, behind the queued steps."""
        buf = self.bufs[slot]
        if self._side is None:
            buf.lr[at] = torch.from_numpy(rates.astype(np.float32))
            return
        # this set's earlier steps have read their rates: a call waits for its steps at its end,
        # and a build into the set (before these rates) for the steps queued in this call
        staged = self._rates[slot][at]
        staged.numpy()[:] = rates
        buf.lr[at].copy_(staged, non_blocking=True)

    def _steps(self, slot: int, n: int) -> None:
        """``n`` steps on buffer set ``slot``: on a GPU, replays of a captured graph of
        graph_steps steps, then of one step (the same launches in the same order as n single
        steps: the step's index advances on the device)."""
        engine, buf, batch = self.engine, self.bufs[slot], self.s.batch_size
        if self._side is None:
            for _ in range(n):
                launch_step(engine, buf, batch)
            return
        if not self._compiled:  # the first step compiles the kernels; graphs are captured after
            launch_step(engine, buf, batch)
            self._compiled, n = True, n - 1
        long = self.graph_steps
        for _ in range(n // long):
            self._graph(slot, long).replay()
        for _ in range(n % long):
            self._graph(slot, 1).replay()

    def _graph(self, slot: int, steps: int) -> torch.cuda.CUDAGraph:
        graph = self._graphs[slot].get(steps)
        if graph is None:
            engine, buf, batch = self.engine, self.bufs[slot], self.s.batch_size
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):  # records the launches; runs nothing
                for _ in range(steps):
                    launch_step(engine, buf, batch)
            self._graphs[slot][steps] = graph
        return graph

    def close(self) -> None:
        if self._side is not None:  # a build still queued there writes into the buffers
            self._side.synchronize()
        self.built = [None, None]
