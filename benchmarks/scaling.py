"""How the native engine scales with threads, and what share of a step is serial.

A benchmark, not a test: it prints a table (and writes ``benchmarks/_work/scaling.json``). Each
run trains gcide8 (prepared once, ``embedlab prepare`` defaults), skip-gram with the default
flags (TensorBoard summaries included), for ``--epochs`` (1) epoch in a fresh child process,
``--reps`` (3) times per configuration, the configurations alternating so that drift in the
machine hits them alike; medians are reported. Configurations: this tree at each of
``--threads`` (1,2), and with ``--baseline COMMIT`` the same at that commit (checked out with
``git worktree`` into ``benchmarks/_work/``), so today's and an earlier version's throughput
share one run.

Definitions (this tree only; an earlier tree without the counters shows n/a):

- ``words/s``: the run's words seen / its ``train_seconds`` (the trainer's own clock: training
  time, checkpoint saves excluded);
- ``parallel``: seconds inside the native library's OpenMP regions (the steps' and the batch
  generator's), summed by the master thread after each region joins
  (:func:`embedlab.engines.native_batches.kernel_seconds`);
- ``C serial``: seconds inside the library's batch calls but outside those regions (per-step
  scalars, carving scratch, summing losses);
- ``Python``: the rest of ``train_seconds`` (the loop's bookkeeping between calls, logging,
  summaries, evaluation);
- ``serial share`` = (C serial + Python) / train_seconds at ``--threads 1``, where no thread
  waits on another; the Amdahl bound for N threads is 1 / (s + (1 − s)/N).

What the machine itself gives a second thread is measured in the same run: before each rep,
``machine_probe.c`` (compiled with ``$CC``, default ``cc``) times a compute-bound load (float
multiply-add chains) and a memory-bound one (random 400-byte row updates) with 1 and then N
threads, the same work per thread; its speedups (N when perfect) are printed beside the
thread ratios. On a virtual machine whose other cores are shared, a thread ratio below N with a
probe ratio as low says the cores were not there; a probe near N says the loss is embedlab's.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / "_work"
PYTHON = Path(sys.executable)


def prepared_gcide8(shared: Path, work: Path) -> Path:
    """gcide8 prepared with the defaults, cached in ``work``."""
    out = work / "gcide8-prepared"
    if (out / "meta.json").exists():
        return out
    text = work / "gcide8.txt"
    if not text.exists():
        with lzma.open(shared / "data" / "gcide8.xz") as src, open(text, "wb") as dst:
            shutil.copyfileobj(src, dst)
    subprocess.run([str(PYTHON), "-m", "embedlab", "prepare", str(text), "--out", str(out)],
                   check=True, cwd=REPO, env=_env(REPO / "src"))
    return out


def baseline_tree(commit: str, work: Path) -> Path:
    """A checkout of ``commit`` (its ``src`` goes first on the child's PYTHONPATH)."""
    tree = work / f"baseline-{commit}"
    if not (tree / "src" / "embedlab").is_dir():
        subprocess.run(["git", "worktree", "add", "--force", "--detach", str(tree), commit],
                       check=True, cwd=REPO, capture_output=True)
    return tree


def _env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src)}


CHILD = """
import json, sys, time
import embedlab
corpus, run, threads, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
began = time.perf_counter()
result = embedlab.train(corpus=corpus, run=run, epochs=epochs, threads=threads,
                        progress=False)
wall = time.perf_counter() - began
out = {"words": result.words_seen, "train_s": result.train_seconds, "wall_s": wall}
try:
    from embedlab.engines import native
    from embedlab.engines.native_batches import kernel_seconds
    out["parallel_s"], out["call_s"] = kernel_seconds(native.library())
except ImportError:  # an embedlab without the counters
    pass
print(json.dumps(out))
"""


def run_child(src: Path, corpus: Path, threads: int, epochs: int, work: Path) -> dict[str, Any]:
    run = work / "scaling-run"
    shutil.rmtree(run, ignore_errors=True)
    proc = subprocess.run([str(PYTHON), "-c", CHILD, str(corpus), str(run), str(threads),
                           str(epochs)], capture_output=True, text=True, env=_env(src),
                          cwd=work, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr[-2000:]}")
    shutil.rmtree(run, ignore_errors=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_probe(work: Path) -> Path | None:
    """``machine_probe.c`` compiled into ``work``; None (and a warning) without a C compiler."""
    exe = work / "machine_probe"
    source = REPO / "benchmarks" / "machine_probe.c"
    if exe.exists() and exe.stat().st_mtime >= source.stat().st_mtime:
        return exe
    cc = os.environ.get("CC", "cc")
    proc = subprocess.run([cc, "-O2", "-march=native", "-fopenmp", str(source), "-o", str(exe)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"warning: {cc} could not build machine_probe.c; no machine probe:\n"
              f"{proc.stderr[-500:]}", file=sys.stderr)
        return None
    return exe


def run_probe(exe: Path, threads: int) -> dict[str, float]:
    out = subprocess.run([str(exe), str(threads)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict[str, Any]]) -> dict[str, float]:
    med = {k: statistics.median(r[k] for r in runs) for k in ("train_s", "wall_s")}
    rates = [r["words"] / r["train_s"] for r in runs]
    out = {"words_per_s": statistics.median(rates), **med,
           "spread": (max(rates) - min(rates)) / statistics.median(rates)}
    if all("parallel_s" in r for r in runs):
        shares = [(r["train_s"] - r["parallel_s"]) / r["train_s"] for r in runs]
        python = [(r["train_s"] - r["call_s"]) / r["train_s"] for r in runs]
        c_serial = [(r["call_s"] - r["parallel_s"]) / r["train_s"] for r in runs]
        out |= {"serial": statistics.median(shares), "python": statistics.median(python),
                "c_serial": statistics.median(c_serial)}
    return out


def amdahl(serial: float, n: int) -> float:
    return 1.0 / (serial + (1.0 - serial) / n)


def table(rows: dict[str, dict[str, float]], threads: list[int], baseline: str | None,
          probes: dict[int, list[dict[str, float]]]) -> str:
    lines = ["| tree | threads | words/s (median) | spread | train s | serial share | "
             "Python | C serial |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        tree, n = name.rsplit("@", 1)
        cells = [tree, n, f"{r['words_per_s']:,.0f}", f"{r['spread']:.1%}", f"{r['train_s']:.2f}"]
        if "serial" in r:
            cells += [f"{r['serial']:.2%}", f"{r['python']:.2%}", f"{r['c_serial']:.2%}"]
        else:
            cells += ["n/a"] * 3
        lines.append("| " + " | ".join(cells) + " |")
    one = rows.get(f"this@{threads[0]}")
    lines.append("")
    if one and "serial" in one:
        s = one["serial"]
        lines.append(f"serial share at 1 thread: {s:.2%} (target <= 3%); Amdahl bound: "
                     f"{amdahl(s, 16):.1f}x at 16 threads (target >= 12x), "
                     f"{amdahl(s, 2):.2f}x at 2")
    for k in threads[1:]:
        if one and f"this@{k}" in rows:
            ratio = rows[f"this@{k}"]["words_per_s"] / one["words_per_s"]
            line = f"{k} threads / 1 thread: {ratio:.2f}x"
            if probes.get(k):
                comp = statistics.median(p["compute_speedup"] for p in probes[k])
                mem = statistics.median(p["rows_speedup"] for p in probes[k])
                each = ", ".join(f"{p['compute_speedup']:.2f}" for p in probes[k])
                line += (f"; the machine in the same run (machine_probe, medians of "
                         f"{len(probes[k])}): compute {comp:.2f}x (each {each}), random row "
                         f"updates {mem:.2f}x")
            lines.append(line)
    if baseline and one and f"{baseline}@{threads[0]}" in rows:
        ratio = one["words_per_s"] / rows[f"{baseline}@{threads[0]}"]["words_per_s"]
        lines.append(f"1 thread, this tree / {baseline}: {ratio:.2f}x (target >= 1.3x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--baseline", default=None, metavar="COMMIT",
                   help="also measure this commit (e.g. f3cb018)")
    p.add_argument("--work", type=Path, default=WORK)
    p.add_argument("--no-probe", action="store_true",
                   help="skip the machine probe (machine_probe.c) between the reps")
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = prepared_gcide8(args.shared, args.work)
    threads = [int(t) for t in args.threads.split(",")]
    trees = {"this": REPO / "src"}
    if args.baseline:
        trees[args.baseline] = baseline_tree(args.baseline, args.work) / "src"
    runs: dict[str, list[dict[str, Any]]] = {f"{t}@{n}": [] for t in trees for n in threads}
    probe = None if args.no_probe else build_probe(args.work)
    probes: dict[int, list[dict[str, float]]] = {n: [] for n in threads[1:]}
    for rep in range(args.reps):
        for n, seen in probes.items():
            if probe is None:
                break
            seen.append(run_probe(probe, n))
            print(f"rep {rep + 1}: machine probe {n} threads: compute "
                  f"{seen[-1]['compute_speedup']:.2f}x, rows {seen[-1]['rows_speedup']:.2f}x",
                  file=sys.stderr, flush=True)
        for name, src in trees.items():
            for n in threads:
                r = run_child(src, corpus, n, args.epochs, args.work)
                runs[f"{name}@{n}"].append(r)
                print(f"rep {rep + 1}: {name} threads {n}: {r['words'] / r['train_s']:,.0f} "
                      "words/s", file=sys.stderr, flush=True)
    rows = {name: summarise(rs) for name, rs in runs.items()}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    info = {"date": time.strftime("%Y-%m-%d"), "commit": commit, "machine": platform.node(),
            "cpus": os.cpu_count(), "reps": args.reps, "epochs": args.epochs}
    (args.work / "scaling.json").write_text(json.dumps({"info": info, "rows": rows,
                                                        "runs": runs, "probes": probes},
                                                       indent=1))
    print(f"scaling: {info}")
    print(table(rows, threads, args.baseline, probes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
