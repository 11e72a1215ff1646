"""Preparing big corpora: `embedlab prepare` against gensim's `build_vocab(corpus_file=...)`.

A benchmark, not a test: it prints a Markdown table. It generates its corpus itself, a
synthetic Zipf corpus (``--tokens``, default 30M; lines of 20 words; word k of ``--distinct``
(3M) drawn with probability proportional to 1/k; words are lowercase ASCII, shorter for frequent
ones), into ``benchmarks/_work/big-<tokens>.txt`` (kept for the next run; ``--delete`` removes
it afterwards). Each measurement runs in a fresh child process, ``--reps`` (3) times, the
configurations alternating so that drift in the machine hits them alike; medians are reported:

- ``embedlab W``: ``embedlab.data.preparing.prepare(corpus, out, workers=W)`` with the defaults
  of ``embedlab prepare`` (min count 5; ``--max-distinct`` passes its own, to measure pruning),
  for each W of ``--workers`` (1,2); the output folder is deleted after each run;
- ``gensim``: ``Word2Vec(min_count=5, workers=2).build_vocab(corpus_file=corpus)``
  (``--skip-gensim`` leaves it out).

``--train-steps N`` keeps the last preparation's folder and trains N steps on it, as
``benchmarks/big_training.py`` measures a run (start-up, words/s, final save, peak RSS; 2
threads), then removes the folder and the run.

``tokens/s`` = the corpus's tokens / the call's wall time (imports excluded); ``peak RSS`` = the
child's ``ru_maxrss`` (imports included).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / "_work"
PYTHON = Path(sys.executable)
LINE_WORDS = 20
BLOCK_LINES = 50_000

EMBEDLAB_CHILD = """
import json, resource, shutil, sys, time
from embedlab.data.preparing import prepare
corpus, out, workers, max_distinct = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
keep = sys.argv[5] == "keep"
began = time.perf_counter()
pc = prepare(corpus, out, workers=workers, progress=False, max_distinct=max_distinct)
seconds = time.perf_counter() - began
result = {"seconds": seconds, "tokens": pc.raw_tokens, "vocab": len(pc.vocab),
          "pruned": pc.meta["pruned"],
          "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
del pc
if not keep:
    shutil.rmtree(out)
print(json.dumps(result))
"""

GENSIM_CHILD = """
import json, logging, resource, sys, time
from gensim.models import Word2Vec
corpus = sys.argv[1]
model = Word2Vec(min_count=5, workers=2)
began = time.perf_counter()
model.build_vocab(corpus_file=corpus)
seconds = time.perf_counter() - began
print(json.dumps({"seconds": seconds, "tokens": model.corpus_total_words,
                  "vocab": len(model.wv), "rss_kib":
                  resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _word(k: int) -> str:
    """Word of rank ``k``: two letters from a hash of k, then k in base 26 (unique)."""
    h = (k * 2654435761) % 676
    digits = [chr(97 + h // 26), chr(97 + h % 26)]
    while True:
        k, d = divmod(k, 26)
        digits.append(chr(97 + d))
        if k == 0:
            return "".join(digits)


def generate(path: Path, tokens: int, distinct: int, seed: int = 1) -> None:
    """Write the synthetic Zipf corpus (see the module's docstring) to ``path`` atomically."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, distinct + 1))
    cdf /= cdf[-1]
    words = [_word(k) for k in range(distinct)]
    lines = tokens // LINE_WORDS
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        for start in range(0, lines, BLOCK_LINES):
            n = min(BLOCK_LINES, lines - start)
            ranks = np.searchsorted(cdf, rng.random(n * LINE_WORDS), side="right")
            ranks = np.minimum(ranks, distinct - 1).reshape(n, LINE_WORDS).tolist()
            f.write("".join(" ".join(map(words.__getitem__, row)) + "\n" for row in ranks))
    tmp.replace(path)


def run_child(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter on this source tree; the JSON of its last line."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([str(PYTHON), "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=REPO, check=False)
    if proc.returncode:
        sys.exit(f"benchmark child failed:\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=30_000_000)
    ap.add_argument("--distinct", type=int, default=3_000_000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-distinct", type=int, default=10_000_000,
                    help="embedlab's --max-distinct (below the corpus's distinct words: pruning)")
    ap.add_argument("--skip-gensim", action="store_true")
    ap.add_argument("--train-steps", type=int, default=0,
                    help="then train this many steps on the last prepared folder (0: none)")
    ap.add_argument("--delete", action="store_true", help="remove the corpus afterwards")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    corpus = WORK / f"big-{args.tokens}.txt"
    if not corpus.exists():
        print(f"generating {corpus} ...", file=sys.stderr)
        generate(corpus, args.tokens, args.distinct)
    configs = [f"embedlab {w}" for w in args.workers.split(",")]
    configs += [] if args.skip_gensim else ["gensim"]
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    prepared = WORK / "big-prepared"
    last = (args.reps - 1, next(c for c in reversed(configs) if c != "gensim"))
    for rep in range(args.reps):
        for config in configs:
            if config == "gensim":
                r = run_child(GENSIM_CHILD, str(corpus))
            else:
                keep = "keep" if args.train_steps and (rep, config) == last else "remove"
                r = run_child(EMBEDLAB_CHILD, str(corpus), str(prepared), config.split()[1],
                              str(args.max_distinct), keep)
            print(f"rep {rep + 1} {config}: {r}", file=sys.stderr)
            results[config].append(r)
    print(table(corpus, results))
    if args.train_steps:
        print(train_table(prepared, args.train_steps))
    if args.delete:
        corpus.unlink()


def train_table(prepared: Path, steps: int) -> str:
    """Train ``steps`` steps on ``prepared`` as big_training.py does; its table row. The folder
    and the run are removed afterwards."""
    from big_training import EMBEDLAB_CHILD as TRAIN_CHILD

    run = WORK / "big-prepared-run"
    try:
        r = run_child(TRAIN_CHILD, str(prepared), str(run), str(steps))
    finally:
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(prepared, ignore_errors=True)
    print(f"training: {r}", file=sys.stderr)
    return "\n".join([
        "", f"Training {steps:,} steps on it (skip-gram d100 w5 n5, 2 threads):", "",
        "| start s | words/s | save s | peak RSS |", "|---|---|---|---|",
        f"| {r['start']:.2f} | {r['words'] / r['train_seconds'] / 1e6:.2f}M | {r['save']:.2f} | "
        f"{r['rss_kib'] / 1024:,.0f} MiB |"])


def table(corpus: Path, results: dict[str, list[dict[str, Any]]]) -> str:
    size = corpus.stat().st_size
    rows = {c: {"seconds": statistics.median(r["seconds"] for r in rs),
                "rss": statistics.median(r["rss_kib"] for r in rs) / 1024,
                "tokens": rs[0]["tokens"], "vocab": rs[0]["vocab"]} for c, rs in results.items()}
    peer = rows.get("gensim")
    out = [f"{corpus.name}: {size / 1e6:,.0f} MB, {platform.processor() or platform.machine()}, "
           f"{os.cpu_count()} cores, Python {platform.python_version()}", "",
           "| preparer | seconds | tokens/s | peak RSS | vocabulary | speed vs gensim |",
           "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        ratio = f"{peer['seconds'] / r['seconds']:.2f}x" if peer else "n/a"
        out.append(f"| {name} | {r['seconds']:.1f} | {r['tokens'] / r['seconds'] / 1e6:.2f}M | "
                   f"{r['rss']:,.0f} MiB | {r['vocab']:,} | {ratio} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
