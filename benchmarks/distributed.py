"""Steps of micro-batches across processes (``embedlab.engines.microbatch``): what they exchange,
what two processes gain on this machine, and what the exchange predicts for more.

A benchmark, not a test: it prints Markdown tables. On gcide8 (prepared with the defaults into
``--work``), skip-gram d100 w5 n5, batch 2048, ``--micro-batches`` M (4) per step, torch engine:

- **bytes**: what one micro-batch's contributions take in the all-gather (row ids int64, rows and
  damping curvatures float32; fixed by the step's shape: R centres, R+2W window rows and
  groups×S noise rows, whatever the vocabulary, so a 1M-word vocabulary exchanges the same),
  per step and per corpus word of the measured steps;
- **measured**: ``--steps`` steps after 2 warm-up steps, in child processes: 1 process × 2
  threads against 2 processes × 1 thread (gloo on 127.0.0.1, rendezvous through a file),
  alternating, ``--reps`` (3) times; medians of words/s and their ratio;
- **predicted**: a ring all-gather moves (N−1)/N of a step's bytes through each link, so a step
  takes (M/N)·t_mb of computing plus (N−1)/N·M·bytes/link of exchange (no overlap), with t_mb
  the time of one micro-batch's contributions and application on one device (``--t-mb-us``:
  by default the CUDA engine's measured 142 µs step at d100 on an H100, benchmarks/README.md —
  an assumption: the micro-batch path runs on the torch engine today). Links: 400 GB/s
  (NVLink, 8 GPUs in one node) and 25 GB/s (Ethernet, between 4 nodes of 8).

    .venv/bin/python benchmarks/distributed.py [--steps 20 --reps 3 --micro 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scaling  # the prepared gcide8 and the child environment

REPO = Path(__file__).resolve().parents[1]

CHILD = r'''
import json, sys, time
import numpy as np
import torch
from embedlab.config import ModelConfig, TrainConfig
from embedlab.data.batchspec import SpecBatchStream
from embedlab.data.pairs import Cursor, keep_probabilities
from embedlab.data.noise import NoiseDistribution
from embedlab.data.prepared import PreparedCorpus
from embedlab.engines.microbatch import MicroBatches, World
from embedlab.engines.params import fresh_params
from embedlab.engines.step import step_config
from embedlab.engines.stepping import Schedule
from embedlab.engines.torch import TorchEngine

prepared, micro, rank, size, store, threads, steps, out = sys.argv[1:9]
rank, size, threads, steps = int(rank), int(size), int(threads), int(steps)
if size > 1:
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
torch.set_num_threads(threads)
corpus = PreparedCorpus.open(prepared)
counts = np.asarray(corpus.vocab.counts)
cfg = TrainConfig(model=ModelConfig(dim=100))
plan = step_config(cfg)
stream = SpecBatchStream(corpus.ids, corpus.sentence_ends, keep_probabilities(counts, 1e-3),
                         NoiseDistribution(counts), window=5, batch_size=2048,
                         group=plan.step.group, noise_per_group=plan.noise_per_group, seed=1,
                         epochs=1, pad_to=plan.pad_to, interleave=2)
engine = TorchEngine(plan.step, fresh_params(cfg.model, len(counts), 1), None, stream.rows)
runner = MicroBatches(stream, engine._step, Schedule(0.025, 1e-4, stream.n_tokens), "skipgram",
                      int(micro), World(rank, size))
cursor, seen, words, began = Cursor(), 0, 0, 0.0
for i in range(steps + 2):
    if i == 2:
        began, words = time.perf_counter(), 0
    done = runner.run(cursor, seen, 1)
    after = int(done.words_done[0])
    words += after - (seen - cursor.epoch * stream.n_tokens)
    seen, cursor = cursor.epoch * stream.n_tokens + after, done.cursor_after(0)
elapsed = time.perf_counter() - began
layout = runner.layout
if rank == 0:
    json.dump({"words_per_s": words / elapsed, "words_per_step": words / steps,
               "bytes_per_micro": layout.n_ids * 8 + layout.n_values * 4 + 8},
              open(out, "w"))
if size > 1:
    dist.barrier()
    dist.destroy_process_group()
'''


def measure(prepared: Path, micro: int, size: int, threads: int, steps: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        script, store, out = Path(tmp) / "child.py", Path(tmp) / "store", Path(tmp) / "out.json"
        script.write_text(CHILD)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": str(threads)}
        procs = [subprocess.Popen([sys.executable, str(script), str(prepared), str(micro),
                                   str(r), str(size), str(store), str(threads), str(steps),
                                   str(out)], env=env) for r in range(size)]
        for p in procs:
            p.wait()
            if p.returncode:
                raise RuntimeError(f"a child exited with {p.returncode}")
        return dict(json.loads(out.read_text()))


def predicted(bytes_step: float, micro: int, t_mb: float) -> list[tuple[str, int, float, float]]:
    """(setting, N, step seconds, speed-up over one device) for the links named above."""
    rows = []
    for name, n, link in (("8 GPUs, one node (NVLink 400 GB/s)", 8, 400e9),
                          ("4 nodes x 8 GPUs (Ethernet 25 GB/s)", 32, 25e9)):
        m = max(micro, n)
        compute = m / n * t_mb
        exchange = (n - 1) / n * bytes_step / micro * m / link
        rows.append((name, n, compute + exchange, m * t_mb / (compute + exchange)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--t-mb-us", type=float, default=142.0)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--work", type=Path, default=REPO / "benchmarks" / "_work")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    prepared = scaling.prepared_gcide8(args.shared, args.work)
    runs: dict[str, list[float]] = {"1 process x 2 threads": [], "2 processes x 1 thread": []}
    info: dict[str, float] = {}
    for _ in range(args.reps):
        for name, size, threads in (("1 process x 2 threads", 1, 2),
                                    ("2 processes x 1 thread", 2, 1)):
            got = measure(prepared, args.micro, size, threads, args.steps)
            runs[name].append(got["words_per_s"])
            info = got
            print(f"{name}: {got['words_per_s']:,.0f} words/s", file=sys.stderr)
    per_micro = info["bytes_per_micro"]
    per_step = per_micro * args.micro
    words = info["words_per_step"]
    print(f"\n| exchanged | bytes |\n|---|---|\n| a micro-batch (R = 2048, d100) | "
          f"{per_micro:,.0f} |\n| a step of {args.micro} | {per_step:,.0f} |\n"
          f"| per corpus word ({words:,.0f} words a step) | {per_step / words:,.0f} |\n")
    print("| configuration | words/s (median) | runs |\n|---|---|---|")
    med = {k: statistics.median(v) for k, v in runs.items()}
    for k, v in runs.items():
        print(f"| {k} | {med[k]:,.0f} | {', '.join(f'{x:,.0f}' for x in v)} |")
    ratio = med["2 processes x 1 thread"] / med["1 process x 2 threads"]
    print(f"\n2 processes x 1 thread / 1 process x 2 threads: **{ratio:.2f}x**\n")
    print(f"| predicted (t_mb {args.t_mb_us:.0f} µs, M = max({args.micro}, N)) | N | step µs | "
          "speed-up | limited by |\n|---|---|---|---|---|")
    for name, n, seconds, speed in predicted(per_step, args.micro, args.t_mb_us * 1e-6):
        m = max(args.micro, n)
        compute = m / n * args.t_mb_us
        term = "exchange" if seconds * 1e6 - compute > compute else "compute"
        print(f"| {name} | {n} | {seconds * 1e6:,.0f} | {speed:.1f}x | {term} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
