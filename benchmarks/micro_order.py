"""Steps of micro-batches in their two orders, one process: each micro-batch from its own chunk
and summed per row (``chunks``, new runs) against M consecutive batches (``consecutive``, runs
made before it) — speed, then quality.

A benchmark, not a test: it prints Markdown tables. Both parts train gcide8 (prepared with the
defaults into ``--work``), skip-gram d100 w5 n5, torch engine, ``--micro-batches`` M (4) of
``--batch-size`` B (512) centres, in this process through
:func:`embedlab.training.trainer.train` (``optim.micro_order`` is a key of the run's config, not
a flag), the orders alternating.

- **Speed**: ``--steps`` (1,500) steps at 1 and at 2 threads, ``--reps`` (3) times each;
  words/s = ``words_seen / train_seconds`` from ``status.json``, medians.
- **Quality**: ``--epochs`` (5), ``--seeds`` (3) seeds from ``--first-seed`` (1), 2 threads.
  Evaluated on the final input vectors with gensim's dialect of :class:`embedlab.Vectors`:
  analogy accuracy over the 300k (all) words and WS-353 Spearman, case-insensitive (the
  numbers gensim's ``KeyedVectors`` gives, tested in tests/test_vectors_gensim.py). Means ±
  the standard deviation over seeds, and the differences per seed.

    .venv/bin/python benchmarks/micro_order.py [--reps 3 --seeds 3 --first-seed 1 --epochs 5]
        [--skip-speed] [--skip-quality]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scaling  # the prepared gcide8

REPO = Path(__file__).resolve().parents[1]
ORDERS = ("chunks", "consecutive")


def _train(corpus: Path, run: Path, order: str, args: argparse.Namespace, **top: Any) -> float:
    """Train one run in this process; its seconds."""
    from embedlab.config import TrainConfig
    from embedlab.training.trainer import train

    cfg = TrainConfig.from_dict({
        "data": {"corpus": str(corpus)}, "engine": "torch",
        "optim": {"epochs": args.epochs, "batch_size": args.batch, "micro_batches": args.micro,
                  "micro_order": order},
        "track": {"tensorboard": False, "progress": False}, **top,
    })
    shutil.rmtree(run, ignore_errors=True)
    began = time.perf_counter()
    train(cfg, run, argv=["micro_order"], out=io.StringIO())
    return time.perf_counter() - began


def speed(corpus: Path, args: argparse.Namespace) -> None:
    print("| order | threads | words/s (median) | runs (words/s) |\n|---|---|---|---|")
    for threads in (1, 2):
        got: dict[str, list[float]] = {o: [] for o in ORDERS}
        for rep in range(args.reps):
            for order in ORDERS if rep % 2 == 0 else ORDERS[::-1]:
                run = args.work / f"micro-{order}"
                _train(corpus, run, order, args, threads=threads, max_steps=args.steps)
                status = json.loads((run / "status.json").read_text())
                got[order].append(status["words_seen"] / status["train_seconds"])
                shutil.rmtree(run, ignore_errors=True)
        for order, ws in got.items():
            print(f"| {order} | {threads} | {statistics.median(ws):,.0f} | "
                  f"{', '.join(format(w, ',.0f') for w in ws)} |")
        ratio = statistics.median(got["chunks"]) / statistics.median(got["consecutive"])
        print(f"| chunks / consecutive | {threads} | {ratio:.2f}x | |")
    print()


def train_and_evaluate(corpus: Path, run: Path, order: str, seed: int, args: argparse.Namespace,
                       shared: Path) -> dict[str, float]:
    import embedlab

    seconds = _train(corpus, run, order, args, threads=2, seed=seed)
    vec = embedlab.load(run)
    analogy, _ = vec.evaluate_word_analogies(shared / "data" / "questions-words.txt",
                                             restrict_vocab=300_000)
    _, (spearman, _), _ = vec.evaluate_word_pairs(shared / "data" / "wordsim353.tsv")
    shutil.rmtree(run, ignore_errors=True)
    return {"analogy": 100 * analogy, "ws353": float(spearman), "seconds": seconds}


def sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--work", type=Path, default=REPO / "benchmarks" / "_work")
    args = ap.parse_args(argv)
    corpus = scaling.prepared_gcide8(args.shared, args.work)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}; "
          f"{platform.node()}, Python {platform.python_version()}. gcide8, skip-gram d100 w5 "
          f"n5, torch engine, {args.micro} micro-batches of {args.batch} centres a step, "
          f"{args.epochs} epochs, 2 threads.\n")
    if not args.skip_speed:
        speed(corpus, args)
    if args.skip_quality:
        return 0
    got: dict[str, list[dict[str, float]]] = {o: [] for o in ORDERS}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for order in ORDERS if seed % 2 else ORDERS[::-1]:
            r = train_and_evaluate(corpus, args.work / f"micro-{order}", order, seed, args,
                                   args.shared)
            got[order].append(r)
            print(f"seed {seed} {order}: analogy {r['analogy']:.2f} %, WS-353 "
                  f"{r['ws353']:.3f}, {r['seconds']:.0f} s", file=sys.stderr)
    print("| order | analogy % (300k) | WS-353 | per seed (analogy / WS-353) | train+eval s |")
    print("|---|---|---|---|---|")
    for order, rs in got.items():
        a, w = [r["analogy"] for r in rs], [r["ws353"] for r in rs]
        print(f"| {order} | {statistics.mean(a):.2f} ± {sd(a):.2f} | {statistics.mean(w):.3f} ± "
              f"{sd(w):.3f} | {', '.join(f'{x:.2f} / {y:.3f}' for x, y in zip(a, w, strict=True))}"
              f" | {statistics.median(r['seconds'] for r in rs):.0f} |")
    da = [c["analogy"] - s["analogy"] for c, s in zip(got["chunks"], got["consecutive"],
                                                       strict=True)]
    dw = [c["ws353"] - s["ws353"] for c, s in zip(got["chunks"], got["consecutive"],
                                                  strict=True)]
    print(f"\nchunks − consecutive, per seed: analogy {', '.join(f'{d:+.2f}' for d in da)} pp "
          f"(mean {statistics.mean(da):+.2f}); WS-353 {', '.join(f'{d:+.3f}' for d in dw)} "
          f"(mean {statistics.mean(dw):+.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
