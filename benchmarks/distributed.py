"""One run trained by two processes through torchrun against one process: words/s, start-up,
the bits, the bytes a step exchanges, and what those bytes predict for more devices.

A benchmark, not a test: it prints Markdown tables. It runs the real command in child processes
(``embedlab.engines.microbatch`` inside it, :mod:`embedlab.training.distributed` around it):

- **end to end**: ``python -m torch.distributed.run --standalone --nproc-per-node 2 -m embedlab
  -- train ... --threads 1`` against ``embedlab train ... --threads 2``, the same flags
  otherwise: gcide8 (prepared with the defaults into ``--work``), skip-gram d100 w5 n5, torch
  engine, ``--micro-batches`` M (4) of ``--batch-size`` B (512) centres, ``--max-steps``
  ``--steps`` (1,500), no TensorBoard, one checkpoint (the final one); alternating, ``--reps``
  (3) times, medians. ``words/s`` = the run's ``words_seen`` / ``train_seconds`` from
  ``status.json`` (the trainer's clock: training only); ``outside training`` = the command's
  wall time minus ``train_seconds`` (start-up, the final save, exit). The two final
  checkpoints' ``tensors.safetensors`` are compared by sha256: the product promises the bits of
  one process.
- **bytes**: two processes through torchrun train ``--count-steps`` (100) steps of gcide8 and of
  a synthetic Zipf corpus of about ``--vocab`` (1M) words (``big_training.generate``,
  ``--vocab-tokens`` raw tokens), in a child that counts every tensor passed to
  ``World.all_gather`` (the steps' exchange; the per-step agreement on stopping is 16 bytes
  apart from it) and times, in process 0, each micro-batch's contributions, each step's
  application, its all-gathers (waiting for the other process included) and the whole step. A
  step's bytes = what all processes put into the exchange (each ends the step holding all of
  it; a ring all-gather moves (N−1)/N of it through each link); per word = over the run's
  ``words_seen`` per step. The chunk order sends each micro-batch's rows summed per row
  (variable sizes, padded to the largest slot's); ``every occurrence`` is what a step would
  send with a row per occurrence (the consecutive order's fixed layout: ``Layout.n_ids`` int64
  ids, ``n_values`` float32 values, and float64 notes), for comparison.
- **predicted**: one device computes a step of M·B = 2,048 centres in ``--t-step-us`` (by
  default the CUDA engine's measured 63 µs step at d100, batch 2048, on an H100,
  benchmarks/README.md — an assumption: the micro-batch path runs on the torch engine). Of that
  time the share ``a`` that applies the contributions is repeated by every device (each applies
  all M micro-batches), the rest is split; ``a`` is the share measured here (the torch engine
  on this CPU, assumed to hold on the GPU). N devices then take (1−a)·T/N + a·T + (N−1)/N·bytes
  / link + L a step of the measured size (no overlap), L (``--latency-us``) the fixed cost of
  a step's all-gathers, by default what ``nccl_exchange.py`` measured at world size 1 on an
  H100 (204 µs: a lower bound, as more devices add hops). N must divide M, so 32 devices need
  M ≥ 32: a larger step or smaller micro-batches; per word the terms stay the same (the window
  rows of smaller micro-batches aside). Links: 400 GB/s (NVLink, 8 GPUs in one node) and
  25 GB/s (Ethernet, between 4 nodes of 8).

    .venv/bin/python benchmarks/distributed.py [--steps 1500 --reps 3 --count-steps 100]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import big_training  # the synthetic prepared corpus of a big vocabulary
import scaling  # the prepared gcide8

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
TORCHRUN = [PYTHON, "-m", "torch.distributed.run", "--standalone"]
ONE, TWO = "1 process x 2 threads", "2 processes x 1 thread (torchrun)"
LINKS = (("8 GPUs, one node (NVLink 400 GB/s)", 8, 400e9),
         ("4 nodes x 8 GPUs (Ethernet 25 GB/s)", 32, 25e9))

#: run by torchrun in place of ``-m embedlab``: the command itself, its exchange counted
COUNTING_CHILD = r'''
import atexit, json, os, sys, time
from embedlab.engines import microbatch
from embedlab.engines.torch import Word2VecStep

out = sys.argv.pop(1)
tally = {"bytes": 0, "calls": 0, "steps": 0, "micro_batches": 0, "contributions_s": 0.0,
         "apply_s": 0.0, "gather_s": 0.0, "step_s": 0.0}

def timed(cls, name, key, count=None):
    inner = getattr(cls, name)
    def wrapper(self, *args):
        began = time.perf_counter()
        try:
            return inner(self, *args)
        finally:
            tally[key] += time.perf_counter() - began
            if count:
                tally[count] += 1
    setattr(cls, name, wrapper)

timed(Word2VecStep, "contributions", "contributions_s", "micro_batches")
timed(Word2VecStep, "apply", "apply_s")
timed(microbatch.World, "all_gather", "gather_s", "calls")
gather = microbatch.World.all_gather
def all_gather(self, tensor):
    tally["bytes"] += tensor.nbytes
    return gather(self, tensor)
microbatch.World.all_gather = all_gather
for kind in (microbatch.MicroBatches, microbatch.ChunkMicroBatches):  # either order's steps
    timed(kind, "run", "step_s", "steps")
    def step(self, *args, run=kind.run):
        tally["layout"] = {"n_ids": self.layout.n_ids, "n_values": self.layout.n_values,
                           "notes": self.NOTES, "micro": self.micro, "size": self.world.size}
        return run(self, *args)
    kind.run = step

def write():
    with open(f"{out}.{os.environ.get('RANK', '0')}", "w") as f:
        json.dump(tally, f)
atexit.register(write)
sys.argv[0] = "embedlab"
from embedlab.cli import run as cli
cli()
'''


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


def flags(corpus: Path, run: Path, args: argparse.Namespace, steps: int) -> list[str]:
    return ["train", "--run", str(run), "--corpus", str(corpus), "--engine", "torch",
            "--model", "skipgram", "--dim", "100", "--window", "5", "--negative", "5",
            "--micro-batches", str(args.micro), "--batch-size", str(args.batch),
            "--max-steps", str(steps), "--no-tensorboard", "--no-progress",
            "--checkpoint-secs", "86400"]


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode:
        raise SystemExit(f"{what} exited with {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-3000:]}")


def timed_run(processes: int, corpus: Path, run: Path, args: argparse.Namespace
              ) -> dict[str, Any]:
    """One run of the real command; its words/s, time outside training and final tensors'
    sha256 (the run folder is removed afterwards)."""
    train = flags(corpus, run, args, args.steps)
    if processes == 1:
        argv = [PYTHON, "-m", "embedlab", *train, "--threads", "2"]
    else:
        argv = [*TORCHRUN, "--nproc-per-node", str(processes), "-m", "embedlab", "--", *train,
                "--threads", "1"]
    shutil.rmtree(run, ignore_errors=True)
    load = os.getloadavg()[0]
    began = time.perf_counter()
    proc = subprocess.run(argv, env=_env(), cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - began
    _check(proc, " ".join(argv[:8]))
    status = json.loads((run / "status.json").read_text())
    tensors = run / "checkpoints" / f"ckpt-{args.steps:08d}" / "tensors.safetensors"
    digest = hashlib.sha256(tensors.read_bytes()).hexdigest()
    shutil.rmtree(run, ignore_errors=True)
    return {"words": status["words_seen"], "train_s": status["train_seconds"], "wall_s": wall,
            "outside_s": wall - status["train_seconds"], "sha256": digest, "load": load,
            "words_per_s": status["words_seen"] / status["train_seconds"],
            "step": status["step"]}


def counted_run(corpus: Path, run: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Two processes through torchrun for ``--count-steps`` steps, their exchange counted."""
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp) / "counting.py", Path(tmp) / "tally"
        script.write_text(COUNTING_CHILD)
        shutil.rmtree(run, ignore_errors=True)
        argv = [*TORCHRUN, "--nproc-per-node", "2", str(script), str(out), "--",
                *flags(corpus, run, args, args.count_steps), "--threads", "1"]
        proc = subprocess.run(argv, env=_env(), cwd=REPO, capture_output=True, text=True)
        _check(proc, "the counting run")
        tallies = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in (0, 1)]
    status = json.loads((run / "status.json").read_text())
    vocab = json.loads((corpus / "meta.json").read_text())["vocab_size"]
    shutil.rmtree(run, ignore_errors=True)
    steps, layout = tallies[0]["steps"], tallies[0]["layout"]
    # a row per occurrence: ids, values, and float64 notes (the loss, whether it was there)
    per_micro = layout["n_ids"] * 8 + layout["n_values"] * 4 + (2 + layout["notes"]) * 8
    c_mb = tallies[0]["contributions_s"] / tallies[0]["micro_batches"]
    apply = tallies[0]["apply_s"] / steps
    return {"vocab": vocab, "steps": steps, "calls": sum(t["calls"] for t in tallies) / steps,
            "bytes_step": sum(t["bytes"] for t in tallies) / steps,
            "layout_step": per_micro * layout["micro"], "layout": layout,
            "words_step": status["words_seen"] / status["step"],
            "apply_share": apply / (apply + c_mb * layout["micro"]),
            "contrib_ms": c_mb * 1e3, "apply_ms": apply * 1e3,
            "gather_ms": tallies[0]["gather_s"] / steps * 1e3,
            "step_ms": tallies[0]["step_s"] / steps * 1e3}


def predicted(bytes_step: float, share: float, t_step: float, link: float, n: int,
              latency: float = 0.0) -> dict[str, float]:
    """The seconds of a step's terms on ``n`` devices (see the module docstring), per step of
    the measured size; the speed-up over one device."""
    terms = {"compute": (1 - share) * t_step / n, "apply": share * t_step,
             "exchange": (n - 1) / n * bytes_step / link + latency}
    return {**terms, "step": sum(terms.values()), "speedup": t_step / sum(terms.values())}


def _cpu() -> str:
    """The processor's model name (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def header(args: argparse.Namespace) -> str:
    """The date, the tree, the machine and the configuration, taken before the runs."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=REPO,
                           capture_output=True, text=True).stdout.split("\n")
    changed = sum(1 for line in dirty if line.strip())
    import torch

    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}"
            f"{f' (+ {changed} uncommitted files in src/)' if changed else ''}; "
            f"{platform.node()}: {_cpu()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, torch "
            f"{torch.__version__}. gcide8, skip-gram d100 w5 n5, torch engine, {args.micro} "
            f"micro-batches of {args.batch} centres a step, gloo on 127.0.0.1.")


def end_to_end_table(runs: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["| configuration | words/s (median) | runs (words/s) | train s | outside training "
             "s (median) | steps | final tensors sha256 |", "|---|---|---|---|---|---|---|"]
    med = {k: statistics.median(r["words_per_s"] for r in v) for k, v in runs.items()}
    for name, rs in runs.items():
        digests = sorted({r["sha256"][:16] for r in rs})
        lines.append(f"| {name} | {med[name]:,.0f} | "
                     f"{', '.join(format(r['words_per_s'], ',.0f') for r in rs)} | "
                     f"{statistics.median(r['train_s'] for r in rs):.1f} | "
                     f"{statistics.median(r['outside_s'] for r in rs):.2f} | {rs[0]['step']:,} | "
                     f"{', '.join(digests)}… |")
    same = all(a["sha256"] == b["sha256"] for a, b in zip(runs[ONE], runs[TWO], strict=True))
    lines += ["", f"{TWO} / {ONE}: **{med[TWO] / med[ONE]:.2f}x**; final checkpoints' "
              f"tensors.safetensors byte-identical in every rep: **{'yes' if same else 'NO'}**"]
    return "\n".join(lines)


def bytes_table(counted: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    lines = ["| corpus | vocabulary | words a step | exchanged a step (counted) | every "
             "occurrence | per word | all-gathers a step | contributions ms / micro-batch | "
             "apply ms / step | apply share a | all-gather ms / step (waits included) | step ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, c in counted.items():
        lines.append(f"| {name} | {c['vocab']:,} | {c['words_step']:,.0f} | "
                     f"{c['bytes_step']:,.0f} | {c['layout_step']:,} | "
                     f"{c['bytes_step'] / c['words_step']:,.0f} | {c['calls']:.0f} | "
                     f"{c['contrib_ms']:.2f} | {c['apply_ms']:.2f} | {c['apply_share']:.1%} | "
                     f"{c['gather_ms']:.2f} | {c['step_ms']:.2f} |")
    lay = next(iter(counted.values()))["layout"]
    lines += ["", f"A micro-batch has {lay['n_ids']:,} row occurrences ({lay['n_values']:,} "
              f"float32 values with them), the same for both vocabularies; {args.count_steps} "
              f"steps of 2 processes, timings of process 0 (1 thread)."]
    return "\n".join(lines)


def predicted_table(counted: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    t_step = args.t_step_us * 1e-6
    lines = [f"| predicted (T = {args.t_step_us:.0f} µs a step of {args.micro * args.batch:,} "
             f"centres on one device, L = {args.latency_us:.0f} µs) | corpus | N | compute µs | "
             "apply µs | exchange µs | "
             "step µs | speed-up | limited by |", "|---|---|---|---|---|---|---|---|---|"]
    for setting, n, link in LINKS:
        for name, c in counted.items():
            p = predicted(c["bytes_step"], c["apply_share"], t_step, link, n,
                          args.latency_us * 1e-6)
            limit = max(("compute", "apply", "exchange"), key=lambda k: p[k])
            lines.append(f"| {setting} | {name} | {n} | {p['compute'] * 1e6:,.1f} | "
                         f"{p['apply'] * 1e6:,.1f} | {p['exchange'] * 1e6:,.1f} | "
                         f"{p['step'] * 1e6:,.1f} | {p['speedup']:.1f}x | {limit} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--count-steps", type=int, default=100)
    ap.add_argument("--vocab", type=int, default=1_000_000)
    ap.add_argument("--vocab-tokens", type=int, default=30_000_000)
    ap.add_argument("--t-step-us", type=float, default=63.0)
    ap.add_argument("--latency-us", type=float, default=204.0)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--work", type=Path, default=REPO / "benchmarks" / "_work")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    gcide8 = scaling.prepared_gcide8(args.shared, args.work)
    big = args.work / f"train-{args.vocab_tokens}-{args.vocab}"
    if not (big / "meta.json").exists():
        big_training.generate(big, args.vocab_tokens, args.vocab)
    run = args.work / "distributed-run"
    about = header(args)
    runs: dict[str, list[dict[str, Any]]] = {ONE: [], TWO: []}
    for rep in range(args.reps):
        for name, processes in ((ONE, 1), (TWO, 2)):
            got = timed_run(processes, gcide8, run, args)
            runs[name].append(got)
            print(f"rep {rep + 1} {name}: {got['words_per_s']:,.0f} words/s, "
                  f"{got['outside_s']:.2f} s outside training, load {got['load']:.2f}",
                  file=sys.stderr, flush=True)
    loads = [r["load"] for rs in runs.values() for r in rs]
    counted = {"gcide8": counted_run(gcide8, run, args),
               f"Zipf, {args.vocab_tokens / 1e6:.0f}M tokens": counted_run(big, run, args)}
    print(f"{about} Load average (1 min) {min(loads):.2f}–{max(loads):.2f} at the runs' "
          "starts.", end_to_end_table(runs), bytes_table(counted, args),
          predicted_table(counted, args), sep="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
