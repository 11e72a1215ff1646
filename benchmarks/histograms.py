"""A checkpoint summary's histogram of one embedding matrix: NumPy's path against the native
library's (``track.protos.native_statistics``), on 1 and 2 threads.

A benchmark, not a test: it prints a Markdown table. Each cell is the median of ``--reps``
calls of everything a histogram takes — min, max, the 60 buckets' counts, the float64 sum
and sum of squares — on a float32 matrix of standard normal values (the counts of both paths
are checked equal first).

    .venv/bin/python benchmarks/histograms.py [--shapes 213816x100,1050000x300,2300000x100]
        [--reps 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from embedlab.engines import native
from embedlab.track.protos import (
    HIST_BINS,
    equal_width_counts,
    float64_moments,
    native_statistics,
)


def numpy_path(flat: np.ndarray) -> np.ndarray:
    lo, hi = float(flat.min()), float(flat.max())
    counts = equal_width_counts(flat, lo, hi, HIST_BINS)
    float64_moments(flat)
    return counts


def seconds(call: Callable[[], object], reps: int) -> tuple[float, list[float]]:
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="213816x100,1050000x300,2300000x100")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    reason = native.unavailable_reason()
    if reason is not None:
        print(f"the native library is not available: {reason}")
        return 2
    print(f"{platform.processor() or platform.machine()}, numpy {np.__version__}; medians of "
          f"{args.reps} calls (runs in brackets)\n")
    print("| matrix | values | NumPy s | native, 1 thread s | native, 2 threads s | "
          "NumPy / native (2) |")
    print("|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        rows, dim = (int(x) for x in shape.split("x"))
        flat = np.random.default_rng(0).standard_normal((rows, dim), dtype=np.float32)
        flat = flat.reshape(-1)
        got = native_statistics(flat, HIST_BINS, 2)
        assert got is not None and got[2].tolist() == numpy_path(flat).tolist()
        slow, slow_runs = seconds(lambda f=flat: numpy_path(f), args.reps)
        one, one_runs = seconds(lambda f=flat: native_statistics(f, HIST_BINS, 1), args.reps)
        two, two_runs = seconds(lambda f=flat: native_statistics(f, HIST_BINS, 2), args.reps)

        def fmt(m: float, runs: list[float]) -> str:
            return f"{m:.3f} ({', '.join(f'{r:.3f}' for r in runs)})"

        print(f"| {rows:,} × {dim} | {flat.size:,} | {fmt(slow, slow_runs)} | "
              f"{fmt(one, one_runs)} | {fmt(two, two_runs)} | {slow / two:.1f}× |")
        del flat
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
