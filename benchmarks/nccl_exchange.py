"""The cost of a step's exchange through torch.distributed at world size 1: NCCL on GPU tensors
against gloo on CPU tensors, with the messages of the chunk order's step.

A benchmark, not a test: it prints a Markdown table. A step of ``--micro-batches M`` in the
chunk order exchanges two all-gathers (``engines/microbatch.py``, the same
``torch.distributed.all_gather`` call): the micro-batches' numbers (loss, rows, pairs, progress),
then one tensor of the rows they touched, each slot's ids (int32) and values (float32 bits: D
gradient entries, a damping curvature, for NCE a bias gradient). This process sends the sizes
``--bytes`` says
(a step's bytes, as ``benchmarks/distributed.py`` measures them), as one rank of one: the cost
of going through a backend at all — launch, synchronisation, the copy — which N processes pay
on top of moving the bytes between devices. Two processes cannot share one GPU under NCCL, so
one GPU measures world size 1 only.

For each backend and size: ``--reps`` passes of ``--steps`` exchanges after ``--warmup``, the
median µs a step (wall clock, the device synchronised after each step, as the training loop
needs the gathered sums before it applies them).

Run on a GPU machine: ``PYTHONPATH=src python3 benchmarks/nccl_exchange.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

DIM = 100
#: bytes a step exchanged, measured by benchmarks/distributed.py (chunk order, M=4, batch
#: 2048): gcide8 d100 and a 1M-word vocabulary d100
DEFAULT_BYTES = "1930971,2631157"


def messages(step_bytes: int, dim: int, micro: int, device: torch.device
             ) -> list[torch.Tensor]:
    """The two tensors of a step that moves ``step_bytes``: the numbers, then the rows (an id
    and D gradient entries and a curvature each, as int32 words)."""
    per_row = 4 + 4 * (dim + 1)
    rows = max(1, step_bytes // per_row)
    return [torch.zeros(micro * 8, dtype=torch.int64, device=device),
            torch.ones(rows * (dim + 2), dtype=torch.int32, device=device)]


def one_step(tensors: list[torch.Tensor], device: torch.device) -> None:
    for t in tensors:
        out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(out, t)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(tensors: list[torch.Tensor], device: torch.device, steps: int, reps: int,
            warmup: int) -> list[float]:
    for _ in range(warmup):
        one_step(tensors, device)
    times = []
    for _ in range(reps):
        began = time.perf_counter()
        for _ in range(steps):
            one_step(tensors, device)
        times.append((time.perf_counter() - began) / steps * 1e6)
    return times


def copy_only(tensors: list[torch.Tensor], device: torch.device, steps: int, reps: int
              ) -> list[float]:
    """The same bytes copied once on the device, no backend: the floor of a one-rank gather."""
    outs = [torch.empty_like(t) for t in tensors]
    times = []
    for _ in range(reps):
        began = time.perf_counter()
        for _ in range(steps):
            for o, t in zip(outs, tensors, strict=True):
                o.copy_(t)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        times.append((time.perf_counter() - began) / steps * 1e6)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", default=DEFAULT_BYTES, help="comma-separated bytes per step")
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--backends", default="nccl,gloo")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    rows: list[dict[str, Any]] = []
    for backend in args.backends.split(","):
        if backend == "nccl" and not torch.cuda.is_available():
            print("nccl: no CUDA device, skipped", file=sys.stderr)
            continue
        device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
        bound: dict[str, Any] = {"device_id": device} if backend == "nccl" else {}
        dist.init_process_group(backend, rank=0, world_size=1,
                                timeout=timedelta(seconds=60), **bound)
        try:
            for size in (int(b) for b in args.bytes.split(",")):
                tensors = messages(size, DIM, args.micro_batches, device)
                real = sum(t.numel() * t.element_size() for t in tensors)
                runs = measure(tensors, device, args.steps, args.reps, args.warmup)
                floor = copy_only(tensors, device, args.steps, args.reps)
                rows.append({"backend": backend, "device": str(device), "bytes": real,
                             "us_per_step": statistics.median(runs), "runs": runs,
                             "copy_us": statistics.median(floor)})
                print(f"{backend} {real:,} B: {statistics.median(runs):.1f} µs a step "
                      f"(copy alone {statistics.median(floor):.1f} µs)", flush=True)
        finally:
            dist.destroy_process_group()
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"\n{name}, torch {torch.__version__}, world size 1, {args.micro_batches} "
          f"micro-batches, medians of {args.reps} x {args.steps} steps\n")
    print("| backend | tensors on | bytes a step | µs a step (median) | runs µs | "
          "the same bytes copied, µs |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        runs = ", ".join(f"{x:.1f}" for x in r["runs"])
        print(f"| {r['backend']} | {r['device']} | {r['bytes']:,} | {r['us_per_step']:.1f} | "
              f"{runs} | {r['copy_us']:.1f} |")
    if args.out:
        args.out.write_text(json.dumps({"device": name, "torch": torch.__version__,
                                        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
