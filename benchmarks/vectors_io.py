"""Loading word2vec files: embedlab against gensim, peak memory and time.

    .venv/bin/python benchmarks/vectors_io.py [--words 100000] [--dim 300] [--reps 3]

Writes random vectors (``--words`` × ``--dim``, float32) as word2vec binary, text and
gzip-compressed binary into a temporary folder, then loads each file in a fresh interpreter
with ``embedlab.load`` and with gensim's ``KeyedVectors.load_word2vec_format``, alternating,
``--reps`` times. Prints a Markdown table of medians: seconds (from the call to the loaded
object) and peak RSS (the child's ``VmHWM``, which includes the interpreter and its
imports), with the file's size and the matrix's for scale. A GoogleNews-sized file (3M × 300,
3.6 GB) is this one scaled by 30.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from big_corpus import run_child  # a fresh interpreter on this source tree; its last JSON line

#: the child: load the file, print seconds and peak RSS (KiB) as JSON
CHILD = """
import json, sys, time
system, path, binary = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if system == "embedlab":
    import embedlab
    t = time.perf_counter()
    v = embedlab.load(path)
    n = len(v)
else:
    from gensim.models import KeyedVectors
    t = time.perf_counter()
    v = KeyedVectors.load_word2vec_format(path, binary=binary)
    n = len(v)
seconds = time.perf_counter() - t
# VmHWM, the peak of this image's memory: ru_maxrss would carry the parent's over the exec
hwm = next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "rss_kib": hwm, "words": n}))
"""


def load_in_child(system: str, path: Path, binary: bool) -> dict[str, Any]:
    return run_child(CHILD, system, str(path), "1" if binary else "0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    from embedlab.vectors import Vectors

    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.words, args.dim), dtype=np.float32)
    vectors = Vectors(tuple(f"w{i}" for i in range(args.words)), matrix)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = [("binary", Path(tmp) / "v.bin", True), ("text", Path(tmp) / "v.txt", False),
                 ("binary, gzip", Path(tmp) / "v.bin.gz", True)]
        for _, path, binary in files:
            vectors.save_word2vec_format(path, binary=binary)
        for kind, path, binary in files:
            got: dict[str, list[dict[str, Any]]] = {"embedlab": [], "gensim": []}
            for _ in range(args.reps):
                for system in got:
                    got[system].append(load_in_child(system, path, binary))
            med = {s: {k: statistics.median(r[k] for r in runs) for k in ("seconds", "rss_kib")}
                   for s, runs in got.items()}
            assert all(r["words"] == args.words for runs in got.values() for r in runs)
            rows.append((kind, path.stat().st_size, med))
    mib = 1 << 20
    print(f"{args.words:,} × {args.dim} float32 (matrix {matrix.nbytes / mib:,.0f} MiB); "
          f"medians of {args.reps}, each load in a fresh interpreter\n")
    print("| file | size | embedlab s | gensim s | embedlab peak RSS | gensim peak RSS | "
          "RSS ratio |")
    print("|---|---|---|---|---|---|---|")
    for kind, size, med in rows:
        e, g = med["embedlab"], med["gensim"]
        print(f"| {kind} | {size / mib:,.0f} MiB | {e['seconds']:.2f} | {g['seconds']:.2f} | "
              f"{e['rss_kib'] / 1024:,.0f} MiB | {g['rss_kib'] / 1024:,.0f} MiB | "
              f"{e['rss_kib'] / g['rss_kib']:.2f}× |")


if __name__ == "__main__":
    main()
