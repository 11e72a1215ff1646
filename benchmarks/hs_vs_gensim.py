"""embedlab ``--loss hs`` vs gensim 4.4 ``hs=1, negative=0`` on gcide8: speed and quality.

A benchmark, not a test: it prints a table and writes ``benchmarks/_work/hs_vs_gensim.json``
(and a Markdown copy, ``hs_vs_gensim.md``). Both systems train hierarchical softmax with the same
hyperparameters as ``vs_gensim.py`` (skip-gram, or ``--model cbow`` with the mean of the
contexts; dim 100, window 5, sample 1e-3, min_count 5, lr 0.025, 2 threads) and no negative
sampling:

- timing: ``--reps`` runs of 1 epoch each, alternating gensim, embedlab, gensim, embedlab...;
  the table shows medians, and the notes the median of the per-pair ratios;
- quality: ``--seeds`` runs of ``--epochs`` (5) epochs per system, seeds 1, 2, ..., alternating,
  evaluated by gensim's ``KeyedVectors`` (questions-words at restrict 30k and 300k, case
  insensitive; WordSim-353 Spearman); the table shows the means, the notes the range over seeds
  and the standard errors.

The corpus handling, the child processes and their measurements, and the evaluator are
``vs_gensim.py``'s (imported from beside this file); only the two training commands differ.
Targets: training words/s >= 3x gensim's, analogy @300k >= gensim's - 0.3 pp, WS-353 >=
gensim's - 0.01.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_gensim as base  # the shared helpers: data, children, evaluation

TARGET_THROUGHPUT, TARGET_ANALOGY_PP, TARGET_WS353 = 3.0, -0.3, -0.01


# ---- the two training commands --------------------------------------------------------------


def gensim_child(corpus: str, epochs: int, save: str | None, seed: int, sg: int) -> None:
    """Runs inside the child: gensim's hierarchical softmax alone (hs=1, negative=0)."""
    base.gensim_child(corpus, epochs, save, seed, sg, hs=1, negative=0)


def run_gensim(data: base.Data, epochs: int, out_dir: Path, *, save: bool, seed: int,
               model: str) -> base.Run:
    out_dir.mkdir(parents=True, exist_ok=True)
    vec = out_dir / "vectors.txt"
    argv = [sys.executable, str(Path(__file__).resolve()), "_gensim-child", "--corpus",
            str(data.corpus_lines), "--epochs", str(epochs), "--seed", str(seed), "--model",
            model, *(["--save", str(vec)] if save else [])]
    res = base.run_child(argv, out_dir / "gensim.log")
    report = json.loads(res.stdout.strip().splitlines()[-1])
    return base.Run("gensim", epochs, res.wall_s - report["save_seconds"],
                    report["train_seconds"], res.rss_mib, int(report["raw_words"]),
                    data.raw_tokens * epochs / report["train_seconds"], res.cpu_s,
                    res.others_cpu_s, str(vec) if save else None, {"vocab": report["vocab"]},
                    anon_mib=res.anon_mib, tree_mib=res.tree_mib)


def run_embedlab(data: base.Data, epochs: int, out_dir: Path, *, save: bool, seed: int,
                 model: str, extra: Sequence[str]) -> base.Run:
    exe = base.embedlab_bin()
    run_dir = out_dir / "run"
    if run_dir.exists():  # a fresh run each time: an existing one would resume
        shutil.rmtree(run_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(exe), "train", "--corpus", str(data.corpus), "--run", str(run_dir), "--model",
            model, "--loss", "hs", "--negative", "0", "--dim", str(base.DIM), "--window",
            str(base.WINDOW), "--sample", str(base.SAMPLE), "--min-count", str(base.MIN_COUNT),
            "--lr", str(base.LR), "--epochs", str(epochs), "--threads", str(base.THREADS),
            "--seed", str(seed), "--no-tensorboard", "--no-progress", *extra]
    res = base.run_child(argv, out_dir / "embedlab.log")
    status = json.loads((run_dir / "status.json").read_text())
    if status.get("status") != "finished" or "train_seconds" not in status:
        raise RuntimeError(f"{run_dir}/status.json: status {status.get('status')!r}; the "
                           "trainer's contract is not met")
    vec = out_dir / "vectors.txt"
    if save:
        vec.unlink(missing_ok=True)  # never evaluate a stale file if export wrote nothing
        base.run_child([str(exe), "export", str(run_dir), "--format", "word2vec", "--out",
                        str(vec)], out_dir / "export.log")
    train_s = float(status["train_seconds"])
    shutil.rmtree(run_dir / "prepared", ignore_errors=True)  # the run's copy of the corpus
    return base.Run("embedlab", epochs, res.wall_s, train_s, res.rss_mib,
                    int(status["raw_words"]), data.raw_tokens * epochs / train_s, res.cpu_s,
                    res.others_cpu_s, str(vec) if save else None,
                    {"engine": json.loads((run_dir / "config.json").read_text()).get("engine")},
                    anon_mib=res.anon_mib, tree_mib=res.tree_mib)


def run_system(system: str, args: argparse.Namespace, data: base.Data, epochs: int,
               out_dir: Path, *, save: bool, seed: int) -> base.Run:
    if args.wait_idle > 0:
        busy = base.wait_for_quiet(args.wait_idle)
        if busy >= 0.15:
            print(f"warning: the machine is busy ({busy:.0%} of a core used by other processes); "
                  "timings will be pessimistic", file=sys.stderr)
    if system == "gensim":
        return run_gensim(data, epochs, out_dir, save=save, seed=seed, model=args.model)
    return run_embedlab(data, epochs, out_dir, save=save, seed=seed, model=args.model,
                        extra=shlex.split(args.embedlab_args))


# ---- the comparison ---------------------------------------------------------------------------


def targets(rows: dict[str, dict[str, float]]) -> list[str]:
    r = rows.get("embedlab vs gensim", {})
    checks = [("words_per_s", f"training throughput >= {TARGET_THROUGHPUT:g}x gensim's",
               lambda v: v >= TARGET_THROUGHPUT),
              ("analogy_300k", f"analogy (300k) >= gensim's {TARGET_ANALOGY_PP:+g} pp",
               lambda v: v >= TARGET_ANALOGY_PP),
              ("ws353", f"WS-353 >= gensim's {TARGET_WS353:+g}", lambda v: v >= TARGET_WS353)]
    shown = {key: fmt for key, _, _, fmt in base.COLUMNS}
    return [f"{'PASS' if ok(r[k]) else 'FAIL'}  {text} (embedlab: {shown[k].format(r[k])})"
            for k, text, ok in checks if k in r]


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    data = base.prepare_data(args.shared, args.work)
    base.embedlab_bin()  # fail early, before minutes of gensim runs
    timing: dict[str, list[base.Run]] = {s: [] for s in base.SYSTEMS}
    evals: dict[str, list[dict[str, float]]] = {s: [] for s in base.SYSTEMS}
    runs = args.work / "hs-runs"
    if not args.skip_timing:
        for rep in range(args.reps):
            for system in base.SYSTEMS:  # alternating A B A B
                run = run_system(system, args, data, 1, runs / f"{system}-time{rep}", save=False,
                                 seed=base.SEED)
                timing[system].append(run)
                print(f"[time {rep + 1}/{args.reps}] {system}: {run.words_per_s:,.0f} words/s, "
                      f"train {run.train_s:.2f} s, CPU {run.cpu_s:.1f} s, others' CPU "
                      f"{run.others_cpu_s:.1f} s", file=sys.stderr)
    if not args.skip_quality:
        for seed in range(1, args.seeds + 1):
            for system in base.SYSTEMS:
                run = run_system(system, args, data, args.epochs,
                                 runs / f"{system}-quality-seed{seed}", save=True, seed=seed)
                assert run.vectors is not None
                evals[system].append(base.evaluate(run.vectors, data))
                Path(run.vectors).unlink()
                print(f"[quality {args.epochs} ep, seed {seed}] {system}: {evals[system][-1]}",
                      file=sys.stderr)
    quality = {s: {k: statistics.mean(e[k] for e in es) for k in es[0]}
               for s, es in evals.items() if es}
    rows = base.summarise({s: r for s, r in timing.items() if r}, quality)
    settings = {"reps": args.reps, "quality_epochs": args.epochs, "quality_seeds": args.seeds,
                "quality_evals": {s: e for s, e in evals.items() if e},
                "skip_timing": args.skip_timing, "skip_quality": args.skip_quality,
                "embedlab_args": shlex.split(args.embedlab_args), "raw_tokens": data.raw_tokens,
                "hyperparameters": {"dim": base.DIM, "window": base.WINDOW, "loss": "hs",
                                    "negative": 0, "sample": base.SAMPLE,
                                    "min_count": base.MIN_COUNT, "lr": base.LR,
                                    "threads": base.THREADS, "model": args.model}}
    info = base.machine()
    info["embedlab_engine"] = ", ".join(sorted({str(r.extra.get("engine"))
                                                for r in timing["embedlab"]})) or "n/a"
    return {"settings": settings, "machine": info, "summary": rows, "targets": targets(rows),
            "timing_runs": {s: [asdict(r) for r in rs] for s, rs in timing.items()}}


def report(result: dict[str, Any]) -> str:
    """The table (Markdown), the targets and the notes on timing, quality and the machine."""
    rows, settings = result["summary"], result["settings"]
    name = "skip-gram" if settings["hyperparameters"]["model"] == "skipgram" else "CBOW"
    text = [f"embedlab --loss hs vs gensim 4.4 hs=1 negative=0 — gcide8, {name} d100 w5, "
            "2 threads", "", base.markdown(rows, result["machine"], settings).rstrip(), ""]
    return "\n".join([*text, *result["targets"]]) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    base.add_run_args(p)
    p.add_argument("--seeds", type=int, default=5,
                   help="quality runs per system (seeds 1..N); the table shows their mean")
    p.add_argument("--epochs", type=int, default=5, help="epochs of each quality run")
    p.add_argument("--model", choices=base.MODELS, default="skipgram")
    p.add_argument("--work", type=Path, default=base.WORK, help="scratch folder")
    args = p.parse_args(argv)
    if args.reps < 1 or args.seeds < 1 or args.epochs < 1:
        raise base.BenchError("--reps, --seeds and --epochs must be >= 1; e.g. --reps 3")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_gensim-child"]:  # internal: one gensim training run in this process
        p = argparse.ArgumentParser()
        p.add_argument("--corpus", required=True)
        p.add_argument("--epochs", type=int, required=True)
        p.add_argument("--save")
        p.add_argument("--seed", type=int, default=base.SEED)
        p.add_argument("--model", choices=base.MODELS, default="skipgram")
        a = p.parse_args(argv[1:])
        gensim_child(a.corpus, a.epochs, a.save, a.seed, sg=int(a.model == "skipgram"))
        return 0
    try:
        args = parse_args(argv)
        result = benchmark(args)
    except base.BenchError as exc:
        print(f"hs_vs_gensim: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a child failed: its stderr tail says why
        print(f"hs_vs_gensim: failed: {exc}", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    stem = "hs_vs_gensim" if args.model == "skipgram" else f"hs_vs_gensim-{args.model}"
    (args.work / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    text = report(result)
    (args.work / f"{stem}.md").write_text(text)
    print(text, end="")
    print(f"wrote {args.work / f'{stem}.json'} and {args.work / f'{stem}.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
