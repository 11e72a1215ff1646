"""The torch-ops baseline of the CUDA engine: the torch engine's skip-gram step, on a GPU, in a
CUDA graph.

The step is the one :class:`embedlab.engines.torch.Word2VecStep` takes for skip-gram with
negative sampling — each group of 32 centres shares S noise words, a noise word equal to a
pair's context is skipped, every row's summed update is damped by ``1 / (1 + lr·h_row/κ)`` —
written with the same operations (:mod:`embedlab.engines.torch_ops`) on tensors of any device,
with the learning rate as a 0-dimensional tensor so that one captured graph serves every step.
On a GPU its row updates are summed by atomics (``scatter_add_``), in no fixed order: the
baseline is not exact, and nothing here claims it is.

How it is timed: the batches of the first ``--chunks`` chunks of one epoch are cut on the CPU by
embedlab's :class:`~embedlab.data.batchspec.SpecBatchStream`, ahead of time, and uploaded; each
step copies its batch into the graph's static input buffers and replays the graph. A pass is
every step over those batches, the parameters training on; ``--reps`` passes are timed after a
warm-up. ``words_per_s`` = raw corpus tokens the batches cover / a pass's seconds (the
corpus's out-of-vocabulary tokens counted as the trainer counts them). Without CUDA, or with
``--no-graph``, the same step runs eagerly (a smoke run on the CPU).

Run from the repository root: ``PYTHONPATH=src python3 benchmarks/gpu_baseline.py --corpus
PREPARED``; it prints one JSON line. ``benchmarks/gpu.py`` runs it as its row d, and its
``--check-baseline`` compares this step with the torch engine's on the CPU
(:func:`check_against_torch_engine`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from embedlab.config import ModelConfig, OptimConfig, TrainConfig
from embedlab.data.batchspec import SpecBatchStream
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Batch, keep_probabilities
from embedlab.data.prepared import PreparedCorpus
from embedlab.engines.params import Word2VecParams, fresh_params
from embedlab.engines.step import StepConfig, step_config
from embedlab.engines.stepping import Schedule
from embedlab.engines.torch_ops import Band, add_rows, damped_scales, norm_sq


@dataclass
class Inputs:
    """One batch as tensors (see :class:`embedlab.data.pairs.Batch`), and its learning rate."""

    centers: torch.Tensor  # (R,) int64
    span: torch.Tensor  # (R + 2W,) int64
    mask: torch.Tensor  # (R, 2W + 1) uint8
    contexts: torch.Tensor  # (R,) float32
    negatives: torch.Tensor  # (G, S) int64
    lr: torch.Tensor  # () float32

    @classmethod
    def of(cls, batch: Batch, lr: float, device: str) -> Inputs:
        arrays = [np.ascontiguousarray(getattr(batch, f.name)) for f in fields(cls)[:-1]]
        return cls(*(torch.from_numpy(a).to(device) for a in arrays),
                   torch.tensor(lr, dtype=torch.float32, device=device))

    def copy_(self, other: Inputs) -> None:
        """Fill these (static) buffers with ``other``'s values."""
        for f in fields(self):
            getattr(self, f.name).copy_(getattr(other, f.name))


@dataclass
class Params:
    """The skip-gram parameters on one device, and the damping's per-row accumulators."""

    w_in: torch.Tensor  # (V, D) float32
    w_out: torch.Tensor  # (V, D) float32
    h_in: torch.Tensor  # (V,) float32, zero between steps
    h_out: torch.Tensor  # (V,) float32, zero between steps

    @classmethod
    def of(cls, params: Word2VecParams, device: str) -> Params:
        w_in = torch.from_numpy(params.w_in.copy()).to(device)
        w_out = torch.from_numpy(params.w_out.copy()).to(device)
        return cls(w_in, w_out, torch.zeros(len(w_in), device=device),
                   torch.zeros(len(w_in), device=device))


def _hits(targets: torch.Tensor, mask: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
    """(R, S): how many of each centre's contexts equal each noise word of its group."""
    n_groups, s = negatives.shape  # expand, not repeat_interleave: no host sync under capture
    per_centre = negatives.unsqueeze(1).expand(n_groups, targets.shape[0] // n_groups, s)
    per_centre = per_centre.reshape(-1, s)
    eq = (targets.unsqueeze(2) == per_centre.unsqueeze(1)) & mask.bool().unsqueeze(2)
    return eq.sum(1, dtype=torch.float32)


def skipgram_step(p: Params, b: Inputs, band: Band, cfg: StepConfig) -> torch.Tensor:
    """One damped skip-gram step with negative sampling, in place; returns the summed loss
    (float64, 0-dimensional). Factories allocate on the default device: call it inside
    ``with torch.device(...)`` (:class:`~embedlab.engines.torch_ops.Band` allocates too)."""
    R, J = band.R, band.J
    n_groups, s = b.negatives.shape
    v = p.w_in.index_select(0, b.centers)  # (R, D)
    u_span = p.w_out.index_select(0, b.span)  # (R + 2W, D)
    pos = band.scores(v, u_span)  # (R, J)
    mask = b.mask.to(torch.float32)
    contexts = b.span.as_strided((R, J), (1, 1))
    count = b.contexts.unsqueeze(1) - _hits(contexts, b.mask, b.negatives)  # (R, S)
    weight = (count * (cfg.negative / s)).view(n_groups, -1, s)
    flat_neg = b.negatives.reshape(-1)
    noise_rows = p.w_out.index_select(0, flat_neg).view(n_groups, s, -1)  # (G, S, D)
    neg = torch.bmm(v.view(n_groups, -1, v.shape[1]), noise_rows.transpose(1, 2))

    loss = -(F.logsigmoid(pos) * mask).sum(dtype=torch.float64)
    loss -= (F.logsigmoid(-neg) * weight).sum(dtype=torch.float64)

    sig_pos, sig_neg = torch.sigmoid(pos), torch.sigmoid(neg)
    g_pos = band.band((sig_pos - 1.0) * mask)
    g_neg = sig_neg * weight
    d_v = band.gather(g_pos, u_span) + torch.bmm(g_neg, noise_rows).view(R, -1)
    d_span = band.scatter(g_pos, v)
    d_noise = torch.bmm(g_neg.transpose(1, 2), v.view(n_groups, -1, v.shape[1]))

    # the damping's |dL/dlogit| per row occurrence times the partner's squared norm
    c_pos, c_neg = (1.0 - sig_pos) * mask, sig_neg * weight
    v_sq, u_sq, n_sq = norm_sq(v), norm_sq(u_span), norm_sq(noise_rows)
    h_v = band.diag_dot(c_pos, u_sq) + (c_neg * n_sq.unsqueeze(1)).sum(2).view(-1)
    h_span = band.diag_scatter(c_pos, v_sq)
    h_noise = (c_neg * v_sq.view(n_groups, -1, 1)).sum(1).view(-1)
    rate = b.lr / cfg.damping
    (k_v,) = damped_scales(p.h_in, [(b.centers, h_v)], rate)
    k_span, k_noise = damped_scales(p.h_out, [(b.span, h_span), (flat_neg, h_noise)], rate)
    add_rows(p.w_in, b.centers, d_v * k_v, -b.lr)
    add_rows(p.w_out, b.span, d_span * k_span, -b.lr)
    add_rows(p.w_out, flat_neg, d_noise.reshape(-1, v.shape[1]) * k_noise, -b.lr)
    return loss


# ---- the run's batches ---------------------------------------------------------------------


def config(dim: int, batch: int, seed: int) -> TrainConfig:
    """The defaults of ``embedlab train`` (skip-gram, window 5, negative 5), at ``dim``/``batch``,
    for one epoch."""
    return TrainConfig(model=ModelConfig(dim=dim), optim=OptimConfig(batch_size=batch, epochs=1),
                       seed=seed)


def batch_stream(pc: PreparedCorpus, cfg: TrainConfig) -> tuple[SpecBatchStream, StepConfig]:
    """The batches a run of ``cfg`` trains on ``pc``, cut as the run's set-up cuts them."""
    plan, m = step_config(cfg), cfg.model
    stream = SpecBatchStream(pc.ids, pc.sentence_ends, keep_probabilities(pc.vocab.counts,
                                                                          m.sample),
                             NoiseDistribution(pc.vocab.counts, m.noise_exponent),
                             window=m.window, batch_size=cfg.optim.batch_size,
                             group=plan.step.group, noise_per_group=plan.noise_per_group,
                             seed=cfg.seed, epochs=cfg.optim.epochs, pad_to=plan.pad_to,
                             interleave=cfg.optim.interleave)
    if plan.step.model != "skipgram" or plan.step.loss != "neg" or plan.step.damping <= 0:
        raise SystemExit("gpu_baseline: only the damped skip-gram step with negative sampling")
    return stream, plan.step


def first_batches(stream: SpecBatchStream, chunks: int, lr: Schedule) -> list[tuple[Batch, float]]:
    """The batches of epoch 0's first ``chunks`` chunks, each with the rate it starts at."""
    out, seen = [], 0
    for chunk in range(min(chunks, stream.n_chunks)):
        for batch in stream.chunk_batches(0, chunk):
            out.append((batch, lr.at(seen)))
            seen = batch.words_done
    return out


# ---- timing --------------------------------------------------------------------------------


def stepper(p: Params, static: Inputs, band: Band, cfg: StepConfig, device: str,
            graph: bool) -> Callable[[], torch.Tensor]:
    """A call that takes one step on what ``static`` holds and returns its loss tensor: the
    replay of a captured CUDA graph, or the eager step."""
    def eager() -> torch.Tensor:
        with torch.device(device):
            return skipgram_step(p, static, band, cfg)

    if not graph:
        return eager
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph, as capture requires
        for _ in range(3):
            eager()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss = eager()

    def replay() -> torch.Tensor:
        g.replay()
        return loss

    return replay


def measure(args: argparse.Namespace) -> dict[str, Any]:
    device = "cuda" if torch.cuda.is_available() and args.device != "cpu" else "cpu"
    graph = device == "cuda" and not args.no_graph
    pc = PreparedCorpus.open(args.corpus)
    cfg = config(args.dim, args.batch, args.seed)
    stream, step_cfg = batch_stream(pc, cfg)
    began = time.perf_counter()
    schedule = Schedule(cfg.optim.lr, cfg.optim.min_lr_ratio, len(pc.ids))
    batches = [Inputs.of(b, lr, device) for b, lr in first_batches(stream, args.chunks,
                                                                   schedule)]
    covered = min(len(pc.ids), args.chunks * stream.chunk_tokens)
    raw = covered * pc.raw_tokens / len(pc.ids)
    build_s = time.perf_counter() - began
    p = Params.of(fresh_params(cfg.model, len(pc.vocab), cfg.seed), device)
    band = Band(stream.rows, cfg.model.window)
    static = Inputs(*(getattr(batches[0], f.name).clone() for f in fields(Inputs)))
    step = stepper(p, static, band, step_cfg, device, graph)
    total = torch.zeros((), dtype=torch.float64, device=device)

    def one_pass() -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for b in batches:
            static.copy_(b)
            total.add_(step())
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    one_pass()  # warm-up: allocator, kernels' first launches
    seconds = [one_pass() for _ in range(args.reps)]
    return {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            "graph": graph, "batch": args.batch, "rows": stream.rows, "dim": args.dim,
            "vocab": len(pc.vocab), "steps": len(batches), "raw_tokens_per_pass": raw,
            "seconds": seconds, "words_per_s": [raw / s for s in seconds],
            "step_us": 1e6 * statistics.median(seconds) / len(batches),
            "build_batches_s": build_s, "finite": bool(torch.isfinite(total).item()),
            "peak_alloc_mib": torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
            else None, "torch": torch.__version__}


# ---- the check against the torch engine ------------------------------------------------------


def check_against_torch_engine(corpus: Path, *, steps: int = 3, dim: int = 32, batch: int = 256,
                               seed: int = 1) -> tuple[bool, str]:
    """Run :func:`skipgram_step` on CPU tensors and the torch engine's step on the same batches
    and parameters (random output vectors, so that every term is non-zero); True when the
    parameters and losses agree to float32 rounding, and a line saying how closely."""
    from embedlab.engines.torch import Word2VecStep

    pc = PreparedCorpus.open(corpus)
    cfg = config(dim, batch, seed)
    stream, step_cfg = batch_stream(pc, cfg)
    schedule = Schedule(cfg.optim.lr, cfg.optim.min_lr_ratio, len(pc.ids))
    rng = np.random.default_rng(seed)
    start = fresh_params(cfg.model, len(pc.vocab), seed)
    start.w_out[:] = rng.normal(0.0, 0.1, start.w_out.shape).astype(np.float32)
    reference, ours = start.copy(), Params.of(start, "cpu")
    engine_step = Word2VecStep(step_cfg, reference, None, stream.rows)
    band = Band(stream.rows, cfg.model.window)
    worst_loss = 0.0
    for b, lr in first_batches(stream, 1, schedule)[:steps]:
        expected = engine_step(b, lr)
        got = float(skipgram_step(ours, Inputs.of(b, lr, "cpu"), band, step_cfg))
        worst_loss = max(worst_loss, abs(got - expected) / max(1.0, abs(expected)))
    diffs = {name: float((getattr(ours, name) - torch.from_numpy(getattr(reference, name)))
                         .abs().max()) for name in ("w_in", "w_out")}
    scale = max(float(np.abs(reference.w_in).max()), float(np.abs(reference.w_out).max()))
    ok = max(diffs.values()) <= 1e-5 * scale and worst_loss <= 1e-5
    return ok, (f"{steps} steps at batch {batch}, d{dim}: max |Δw_in| {diffs['w_in']:.2e}, "
                f"max |Δw_out| {diffs['w_out']:.2e} (largest weight {scale:.3f}), loss relative "
                f"difference {worst_loss:.2e}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, required=True, help="a prepared corpus folder")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--batch", type=int, default=2048, help="centres per step")
    p.add_argument("--chunks", type=int, default=16,
                   help="chunks (of 2^18 in-vocabulary tokens) whose batches are timed")
    p.add_argument("--reps", type=int, default=3, help="timed passes over the batches")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=("auto", "cpu"), default="auto",
                   help="auto: CUDA when torch finds a GPU")
    p.add_argument("--no-graph", action="store_true", help="step eagerly on the GPU too")
    args = p.parse_args(argv)
    print(json.dumps(measure(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
