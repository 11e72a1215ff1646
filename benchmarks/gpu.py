"""embedlab's CUDA engine on one GPU, against the targets of the CUDA engine (README): words/s,
wall time, memory and quality, in one run of at most ``--budget-s`` seconds.

A benchmark, not a test: it prints Markdown tables and writes ``gpu.json`` and ``gpu.md`` into
``--out`` (``benchmarks/_work/gpu/``). Every training run is a child process
(:func:`vs_gensim.run_embedlab`: ``embedlab train`` from this source tree, wall time and peak RSS
from ``os.wait4``, ``train_s`` from ``RUN/status.json``), skip-gram d100 w5 n5 with vs_gensim.py's
settings unless a row says otherwise. Rows:

- **a**: ``--engine cuda``, 1 epoch of gcide8 repeated 21 times (101.2M tokens, one copy per
  line; its vocabulary at min count 5 is every word of gcide8, 213,816), ``--reps`` runs: words/s
  and end-to-end wall time / training time;
- **b**: the same at d300;
- **c**: d300, 1 epoch of a synthetic corpus of 64M tokens in 20-word lines whose words follow
  Zipf's law (rank k of 2M drawn with probability ln((k+1)/k) / ln(2M+1), about 1/k), which
  leaves about 1.05M words at min count 5;
- **d**: ``gpu_baseline.py``: the torch engine's step as torch operations in a CUDA graph, batch
  2048, on the batches of the first ``--baseline-chunks`` chunks of row a's corpus (not exact:
  its row updates are summed by atomics);
- **e**: quality on gcide8: 5 epochs, seeds 1-5, analogy accuracy (questions-words, the 30,000
  most frequent words, case-insensitive) and WS-353 Spearman, by embedlab's evaluator (which
  gives gensim's numbers), mean ± standard deviation over seeds; ``--gensim-reference FILE``
  puts gensim's values from a CPU run beside them.

Definitions: ``words_per_s`` = raw corpus tokens x epochs / ``train_s`` (gensim's convention,
vs_gensim.py's code); ``wall_s`` = the child's wall time, interpreter start to exit (imports,
opening the prepared corpus, training, the final checkpoint); ``gpu_mib`` = the largest
``memory.used`` nvidia-smi reports for GPU 0 while the child runs (sampled every 100 ms) minus
its value before: the whole process's device memory, CUDA context included. Medians are over
``--reps`` runs, each run's value listed beside them.

The corpora are prepared before the first row, and kept in ``--work`` for the next run (their
time counts against the budget): gcide8 by ``embedlab prepare`` from ``--data``/gcide8.xz (at
min count 5 for row e, at min count 1 for tiling); row a's corpus is that folder's ids written
21 times, with every count times 21 — what ``embedlab prepare`` makes of the repeated text, in a
second instead of a minute; row c's ids are drawn with NumPy and written as a prepared folder
(writing and tokenising 450 MB of text would take most of the budget).

Every row runs in its own ``try``: a failing row prints its error and the others still run. Past
the deadline (``--budget-s`` from the start) the remaining rows are skipped with a note, and a
child still running is stopped (``timeout``). ``--quick`` shrinks every corpus and run for a
smoke run on the CPU (with ``--engine native``, or the cuda engine under
``EMBEDLAB_CUDA_INTERPRET=1``). ``--check-baseline`` compares gpu_baseline.py's step with the
torch engine's on the CPU and exits; ``--make-gensim-reference FILE`` trains gensim 4.4 on this
machine (the quality settings of row e, 2 threads) and writes the JSON ``--gensim-reference``
reads.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import lzma
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import vs_gensim  # beside this file: child processes, embedlab's runs, gensim's runs

REPO, SRC = vs_gensim.REPO, vs_gensim.REPO / "src"
if importlib.util.find_spec("embedlab") is None:  # run from the source tree, not installed
    sys.path.insert(1, str(SRC))

OUT = vs_gensim.WORK / "gpu"
MIN_COUNT, LINE_WORDS = vs_gensim.MIN_COUNT, 20
ROWS = ("a", "b", "c", "d", "e")
MIN_RUN_S = 20.0  # a run is not started with less time than this left
RESERVE_S = 15.0  # of the budget, kept for stopping a child at the deadline and the tables
TIMEOUT_ENV = "GPU_BENCH_TIMEOUT_S"  # the launcher stops its child after this many seconds
TARGETS = {"a": ("words_per_s", 50e6, "≥ 50M words/s, wall/train ≤ 1.5"),
           "b": ("words_per_s", 20e6, "≥ 20M words/s"),
           "c": ("words_per_s", 20e6, "≥ 20M words/s")}
ANALOGY_MARGIN, WS353_MARGIN, WALL_RATIO = 0.3, 0.01, 1.5


class BenchError(Exception):
    """A problem the user can fix (missing data, bad flag); one line, exit 2."""


@dataclass(frozen=True)
class Sizes:
    gcide8_tokens: int | None  # None: all of gcide8; else its first N tokens
    tiles: int
    zipf_tokens: int
    zipf_distinct: int
    baseline_chunks: int
    quality_seeds: int
    quality_epochs: int
    reps: int


FULL = Sizes(None, 21, 64_000_000, 2_000_000, 32, 5, 5, 3)
QUICK = Sizes(200_000, 5, 2_000_000, 100_000, 1, 2, 1, 1)


# ---- corpora --------------------------------------------------------------------------------


def _same_source(out: Path, source: Path, min_count: int) -> bool:
    """Whether ``out`` is a prepared corpus of ``source`` as it is now, at ``min_count``."""
    from embedlab.data.prepared import META_FILE, is_prepared

    if not is_prepared(out):
        return False
    meta = json.loads((out / META_FILE).read_text())
    files = meta.get("source_files") or [{}]
    st = source.stat()
    return (meta.get("min_count") == min_count and files[0].get("path") == str(source.resolve())
            and files[0].get("size") == st.st_size and files[0].get("mtime") == st.st_mtime)


def gcide8_source(data: Path, work: Path, tokens: int | None) -> Path:
    """gcide8.xz, or (``tokens``) a text file of its first ``tokens`` tokens."""
    xz = data / "gcide8.xz"
    if not xz.is_file():
        raise BenchError(f"missing {xz}; pass --data DIR where DIR holds gcide8.xz, "
                         "questions-words.txt and wordsim353.tsv")
    if tokens is None:
        return xz
    head = work / f"gcide8-head{tokens}.txt"
    if not head.is_file():
        work.mkdir(parents=True, exist_ok=True)
        with lzma.open(xz, "rt", encoding="utf-8") as f:
            words = f.read(12 * tokens).split()[:tokens]  # ~5.5 bytes a token in gcide8
        head.write_text(" ".join(words) + "\n", encoding="utf-8")
    return head


def prepared(source: Path, out: Path, min_count: int) -> Path:
    """``embedlab prepare SOURCE --out OUT --min-count N`` (kept while the source is unchanged)."""
    from embedlab.data.preparing import prepare

    if not _same_source(out, source, min_count):
        prepare(source, out, min_count=min_count, progress=False, force=True)
    return out


def _commit_prepared(tmp: Path, out: Path, meta: dict[str, Any]) -> Path:
    """Write meta.json into the complete folder ``tmp`` and move it to ``out`` (``embedlab
    train`` checks every id and sentence end when it opens it)."""
    from embedlab.data.prepared import META_FILE, write_meta
    from embedlab.fsutil import commit_folder

    write_meta(tmp / META_FILE, meta)
    if out.exists():
        shutil.rmtree(out)
    commit_folder(tmp, out)
    return out


def _fresh_tmp(out: Path) -> Path:
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def tiled(source: Path, out: Path, times: int) -> Path:
    """The prepared corpus of ``times`` copies of ``source`` (a prepared one-line corpus at min
    count 1), one per line, at min count 5: its ids repeated, its counts multiplied."""
    from embedlab.data.prepared import ENDS_FILE, IDS_FILE, META_FILE, VOCAB_FILE, PreparedCorpus
    from embedlab.data.vocab import Vocab

    pc = PreparedCorpus.open(source)
    label = f"{pc.meta['source']} repeated {times} times, one copy per line"
    if (out / META_FILE).is_file() and json.loads((out / META_FILE).read_text())["source"] == label:
        return out
    if pc.meta["sentences"] != 1 or int(pc.vocab.counts.min()) * times < MIN_COUNT:
        raise BenchError(f"{source}: tiling needs a one-line corpus whose every word occurs "
                         f">= {MIN_COUNT} times in {times} copies")
    tmp, n = _fresh_tmp(out), len(pc.ids)
    ids = (source / IDS_FILE).read_bytes()
    with open(tmp / IDS_FILE, "wb") as f:
        for _ in range(times):
            f.write(ids)
    (np.arange(1, times + 1, dtype="<i8") * n).tofile(tmp / ENDS_FILE)
    Vocab(pc.vocab.words, pc.vocab.counts * times).save_tsv(tmp / VOCAB_FILE)
    meta = {**pc.meta, "source": label, "source_files": [], "min_count": MIN_COUNT,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **{k: pc.meta[k] * times for k in ("raw_tokens", "tokens", "sentences")}}
    return _commit_prepared(tmp, out, meta)


def zipf(out: Path, tokens: int, distinct: int, seed: int = 1) -> Path:
    """A prepared synthetic corpus: ``tokens`` words (whole lines of 20), word k of ``distinct``
    (named ``z<k>``) drawn with probability ln((k+1)/k) / ln(distinct+1), at min count 5."""
    from embedlab import __version__
    from embedlab.config import DataConfig
    from embedlab.data.prepared import (
        ENDS_FILE,
        FORMAT,
        FORMAT_VERSION,
        IDS_FILE,
        META_FILE,
        VOCAB_FILE,
    )
    from embedlab.data.vocab import build_from_arrays

    label = f"synthetic Zipf corpus: {tokens} tokens, {distinct} words, seed {seed}"
    if (out / META_FILE).is_file() and json.loads((out / META_FILE).read_text())["source"] == label:
        return out
    lines = tokens // LINE_WORDS
    rng, ranks = np.random.default_rng(seed), np.empty(lines * LINE_WORDS, dtype=np.int32)
    for lo in range(0, len(ranks), 1 << 23):  # log-uniform on [1, distinct + 1), floored: rank k
        u = rng.random(min(1 << 23, len(ranks) - lo))
        u *= math.log(distinct + 1)
        np.exp(u, out=u)
        np.minimum(u, distinct, out=u)
        ranks[lo:lo + len(u)] = u - 1
    counts = np.bincount(ranks, minlength=distinct)
    candidates = np.flatnonzero(counts >= MIN_COUNT)  # naming only these saves a second
    vocab, order = build_from_arrays([f"z{k + 1}" for k in candidates.tolist()],
                                     counts[candidates], min_count=MIN_COUNT)
    lookup = np.full(distinct, -1, dtype=np.int32)
    lookup[candidates[order]] = np.arange(len(order), dtype=np.int32)
    ids = lookup[ranks]
    del ranks
    known = ids >= 0
    per_line = known.reshape(lines, LINE_WORDS).sum(1)
    tmp = _fresh_tmp(out)
    ids[known].astype("<u4").tofile(tmp / IDS_FILE)
    np.cumsum(per_line)[per_line > 0].astype("<i8").tofile(tmp / ENDS_FILE)
    vocab.save_tsv(tmp / VOCAB_FILE)
    d = DataConfig()
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "embedlab_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "source": label,
            "source_files": [], "lowercase": d.lowercase, "min_count": MIN_COUNT,
            "max_vocab": None, "unk": None, "max_distinct": d.max_distinct,
            "raw_tokens": lines * LINE_WORDS, "tokens": int(per_line.sum()),
            "sentences": int(np.count_nonzero(per_line)),
            "vocab_size": len(vocab), "invalid_utf8": 0, "pruned": None}
    return _commit_prepared(tmp, out, meta)


def corpus_facts(path: Path) -> dict[str, Any]:
    """What a row's table line says about its corpus (from meta.json)."""
    meta = json.loads((path / "meta.json").read_text())
    return {"corpus": meta["source"].rsplit("/", 1)[-1], "raw_tokens": meta["raw_tokens"],
            "vocab": meta["vocab_size"]}


# ---- the GPU and the machine --------------------------------------------------------------


def _smi(*query: str) -> list[str] | None:
    """nvidia-smi's CSV answer for GPU 0, or None without nvidia-smi or a GPU."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(query)}",
                              "--format=csv,noheader,nounits", "-i", "0"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [s.strip() for s in out.strip().split(",")]


class GpuMemory:
    """The peak of GPU 0's memory.used while the block runs, minus its value before, MiB
    (``nvidia-smi -lms 100``); ``peak_mib`` is None without nvidia-smi."""

    def __enter__(self) -> GpuMemory:
        used = _smi("memory.used")
        self.before, self.samples = (float(used[0]) if used else None), []
        self.proc: subprocess.Popen[str] | None = None
        if self.before is not None:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                 "-i", "0", "-lms", "100"], stdout=subprocess.PIPE, text=True)
            self.reader = threading.Thread(target=self._read, daemon=True)
            self.reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.samples.append(float(line))
            except ValueError:
                continue

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
            self.reader.join()

    @property
    def peak_mib(self) -> float | None:
        if self.before is None or not self.samples:
            return None
        return max(self.samples) - self.before


def machine() -> dict[str, Any]:
    """vs_gensim.py's description of the machine, plus the GPU and the packages it runs."""
    info = {k: v for k, v in vs_gensim.machine().items() if k not in ("gensim", "torch")}
    gpu = _smi("name", "driver_version", "memory.total")
    info["gpu"] = f"{gpu[0]} ({gpu[2]} MiB, driver {gpu[1]})" if gpu else "none found"
    for package in ("torch", "triton", "gensim"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package] = "n/a"
    try:
        info["commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True, check=True,
                                        timeout=20).stdout.strip()
        # a working tree copied onto another machine may carry an older .git: say when the
        # files differ from the commit, so a result never names a commit it did not run
        changed = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                  "--untracked-files=no"], capture_output=True, text=True,
                                 check=True, timeout=20).stdout.strip()
        if changed:
            info["commit"] += " with uncommitted changes"
    except (OSError, subprocess.SubprocessError):
        info["commit"] = "unknown (no git here)"
    info["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return info


# ---- running ------------------------------------------------------------------------------


class Deadline(Exception):
    """The budget is spent: what is left is skipped."""


@dataclass
class Bench:
    """One benchmark run: its options, its deadline and the corpora it prepared."""

    args: argparse.Namespace
    sizes: Sizes
    deadline: float  # time.monotonic() at which the budget is spent
    corpora: dict[str, Path]
    prep_s: dict[str, float]

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def corpus(self, name: str) -> Path:
        """A prepared corpus by name (made on first use; its seconds go to ``prep_s``)."""
        if name not in self.corpora:
            began = time.monotonic()
            self.corpora[name] = self._make(name)
            self.prep_s[name] = time.monotonic() - began
        return self.corpora[name]

    def _make(self, name: str) -> Path:
        folder, s = self.args.work / "gpu-corpora", self.sizes
        source = gcide8_source(self.args.data, folder, s.gcide8_tokens)
        head = "" if s.gcide8_tokens is None else f"-head{s.gcide8_tokens}"
        if name == "gcide8":
            return prepared(source, folder / f"gcide8{head}-m{MIN_COUNT}", MIN_COUNT)
        if name == "gcide8-m1":
            return prepared(source, folder / f"gcide8{head}-m1", 1)
        if name == "tiled":
            return tiled(self.corpus("gcide8-m1"), folder / f"gcide8{head}-x{s.tiles}", s.tiles)
        return zipf(folder / f"zipf-{s.zipf_tokens}", s.zipf_tokens, s.zipf_distinct)

    def eval_file(self, name: str) -> Path:
        path = self.args.data / name
        if not path.is_file():
            raise BenchError(f"missing {path}; pass --data DIR where DIR holds it")
        return path

    def train(self, corpus: Path, epochs: int, out_dir: Path, extra: Sequence[str],
              seed: int = vs_gensim.SEED) -> tuple[vs_gensim.Run, float | None]:
        """One ``embedlab train`` child (vs_gensim.run_embedlab), stopped at the deadline; the
        run and the GPU memory it took."""
        left = self.remaining()
        if left < MIN_RUN_S:
            raise Deadline(f"{left:.0f} s left")
        os.environ[TIMEOUT_ENV] = str(int(left))
        data = vs_gensim.Data(corpus, corpus, self.eval_file("questions-words.txt"),
                              self.eval_file("wordsim353.tsv"),
                              json.loads((corpus / "meta.json").read_text())["raw_tokens"])
        flags = ["--engine", self.args.engine, *extra, *self.args.embedlab_args]
        try:
            with GpuMemory() as mem:
                run = vs_gensim.run_embedlab(data, epochs, out_dir, save=False, extra=flags,
                                             seed=seed)
        except RuntimeError:
            if self.remaining() < 1:
                raise Deadline("a run was stopped at the deadline") from None
            raise
        return run, mem.peak_mib


def launcher(work: Path) -> Path:
    """An ``embedlab`` command that runs this source tree with this interpreter, stopped after
    ``$GPU_BENCH_TIMEOUT_S`` seconds: what vs_gensim.run_embedlab starts (it looks for
    ``embedlab`` beside the interpreter, where this tree is not installed)."""
    import shlex

    path = work / "gpu-bin" / "embedlab"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n"
                    f'PYTHONPATH={shlex.quote(str(SRC))}"${{PYTHONPATH:+:$PYTHONPATH}}"\n'
                    "export PYTHONPATH\n"
                    f'exec timeout -k 5 "${{{TIMEOUT_ENV}:-3600}}" '
                    f'{shlex.quote(sys.executable)} -m embedlab "$@"\n')
    path.chmod(0o755)
    return path


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def timing_row(bench: Bench, key: str, corpus_name: str, dim: int) -> dict[str, Any]:
    """Rows a-c: ``--reps`` 1-epoch runs of the engine on a corpus at ``dim``."""
    corpus = bench.corpus(corpus_name)
    row: dict[str, Any] = {"row": key, "what": f"embedlab --engine {bench.args.engine}, "
                           f"skip-gram d{dim} w5 n5, 1 epoch", "dim": dim,
                           **corpus_facts(corpus), "runs": []}
    for rep in range(bench.sizes.reps):
        out_dir = bench.args.work / "gpu-runs" / f"{key}-{rep}"
        try:
            run, mib = bench.train(corpus, 1, out_dir, ["--dim", str(dim)])
        except Deadline as exc:
            if not row["runs"]:
                raise
            row["note"] = f"{len(row['runs'])} of {bench.sizes.reps} runs ({exc})"
            break
        shutil.rmtree(out_dir / "run", ignore_errors=True)  # checkpoints: up to GBs
        row["runs"].append({"words_per_s": run.words_per_s, "train_s": run.train_s,
                            "wall_s": run.wall_s, "wall_ratio": run.wall_s / run.train_s,
                            "gpu_mib": mib, "rss_mib": run.rss_mib,
                            "engine": run.extra.get("engine")})
        _log(f"[{key} {rep + 1}/{bench.sizes.reps}] {run.words_per_s / 1e6:.2f}M words/s, "
             f"train {run.train_s:.2f} s, wall {run.wall_s:.2f} s, GPU {_mib(mib)}")
    runs = row["runs"]
    for k in ("words_per_s", "train_s", "wall_s", "wall_ratio"):
        row[k] = statistics.median(r[k] for r in runs)
    row["gpu_mib"] = max((r["gpu_mib"] for r in runs if r["gpu_mib"] is not None), default=None)
    return row


def baseline_row(bench: Bench) -> dict[str, Any]:
    """Row d: gpu_baseline.py in a child, on row a's corpus."""
    corpus = bench.corpus("tiled")
    left = bench.remaining()
    if left < MIN_RUN_S:
        raise Deadline(f"{left:.0f} s left")
    argv = ["timeout", "-k", "5", str(int(left)), sys.executable,
            str(Path(__file__).with_name("gpu_baseline.py")), "--corpus", str(corpus),
            "--chunks", str(bench.sizes.baseline_chunks), "--reps", str(bench.sizes.reps)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
    try:
        with GpuMemory() as mem:
            res = vs_gensim.run_child(argv, bench.args.work / "gpu-runs" / "d" / "baseline.log",
                                      env)
    except RuntimeError:
        if bench.remaining() < 1:
            raise Deadline("the baseline was stopped at the deadline") from None
        raise
    out = json.loads(res.stdout.strip().splitlines()[-1])
    how = "CUDA graph" if out["graph"] else "eager"
    return {"row": "d", "what": f"torch ops ({how}), batch {out['batch']}, d{out['dim']} w5 n5",
            "dim": out["dim"], **corpus_facts(corpus), "runs": [{"words_per_s": w}
                                                               for w in out["words_per_s"]],
            "words_per_s": statistics.median(out["words_per_s"]), "wall_s": res.wall_s,
            "gpu_mib": mem.peak_mib, "baseline": out,
            "note": f"{out['steps']} steps over the first {out['raw_tokens_per_pass']:,.0f} "
                    f"tokens on {out['device']}, timed passes in one process: "
                    f"{len(out['seconds'])}, {out['step_us']:.0f} µs a step"
                    + ("; not exact (atomic row sums)" if out["graph"] else "")}


def evaluate(vectors: Path, questions: Path, wordsim: Path) -> dict[str, float]:
    """embedlab's evaluator (gensim's numbers): analogy accuracy % among the 30,000 most
    frequent words and WS-353 Spearman, case-insensitive."""
    import embedlab

    v = embedlab.load(vectors)
    analogies, pairs = v.evaluate_analogies(questions, 30_000), v.evaluate_similarity(wordsim)
    return {"analogy_30k": 100 * analogies.accuracy,
            "analogy_30k_answered": analogies.total.answered, "ws353": pairs.spearman,
            "ws353_oov_pct": pairs.oov_ratio}


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise_quality(row: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Means and standard deviations over the seeds' ``runs``, into ``row``."""
    for key in ("analogy_30k", "ws353"):
        row[key], row[f"{key}_std"] = mean_std([r[key] for r in runs])
    row["words_per_s"] = statistics.median(r["words_per_s"] for r in runs)
    return row


def quality_row(bench: Bench) -> dict[str, Any]:
    """Row e: seeds 1..N, ``quality_epochs`` epochs each, on gcide8."""
    corpus, s = bench.corpus("gcide8"), bench.sizes
    questions, wordsim = bench.eval_file("questions-words.txt"), bench.eval_file("wordsim353.tsv")
    row: dict[str, Any] = {"row": "e", "what": f"embedlab --engine {bench.args.engine}, "
                           f"skip-gram d100 w5 n5, {s.quality_epochs} epochs",
                           **corpus_facts(corpus), "epochs": s.quality_epochs, "runs": []}
    for seed in range(1, s.quality_seeds + 1):
        out_dir = bench.args.work / "gpu-runs" / f"e-seed{seed}"
        try:
            run, _ = bench.train(corpus, s.quality_epochs, out_dir, [], seed=seed)
        except Deadline as exc:
            if not row["runs"]:
                raise
            row["note"] = f"{len(row['runs'])} of {s.quality_seeds} seeds ({exc})"
            break
        scores = evaluate(out_dir / "run", questions, wordsim)
        row["runs"].append({"seed": seed, "train_s": run.train_s, "wall_s": run.wall_s,
                            "words_per_s": run.words_per_s, **scores})
        _log(f"[e seed {seed}] analogy {scores['analogy_30k']:.2f} %, WS-353 "
             f"{scores['ws353']:.3f}, {run.words_per_s / 1e6:.2f}M words/s")
    return summarise_quality(row, row["runs"])


# ---- gensim's reference (a CPU run) -------------------------------------------------------


def make_gensim_reference(args: argparse.Namespace, sizes: Sizes) -> dict[str, Any]:
    """gensim 4.4 with row e's settings on 2 threads (vs_gensim.py's runs), evaluated by
    embedlab's evaluator and, as a check, by gensim's own."""
    if args.data.name != "data":
        raise BenchError(f"--make-gensim-reference reads gcide8 as vs_gensim.py does, from a "
                         f"folder named data (../shared/data), not {args.data}")
    data = vs_gensim.prepare_data(args.data.parent, args.work)
    runs = []
    for seed in range(1, sizes.quality_seeds + 1):
        run = vs_gensim.run_gensim(data, sizes.quality_epochs,
                                   args.work / "gpu-gensim" / f"seed{seed}", save=True, seed=seed)
        assert run.vectors is not None
        ours = evaluate(Path(run.vectors), data.questions, data.wordsim)
        theirs = vs_gensim.evaluate(run.vectors, data)
        runs.append({"seed": seed, "train_s": run.train_s, "words_per_s": run.words_per_s,
                     **ours, "gensim_evaluator": {k: theirs[k] for k in ("analogy_30k",
                                                                          "ws353")}})
        _log(f"[gensim seed {seed}] analogy {ours['analogy_30k']:.2f} %, WS-353 "
             f"{ours['ws353']:.3f} (gensim's evaluator: {theirs['analogy_30k']:.2f} %, "
             f"{theirs['ws353']:.3f}), {run.words_per_s / 1e6:.2f}M words/s")
    info = machine()
    ref = {"system": f"gensim {info['gensim']}, {vs_gensim.THREADS} CPU threads",
           "what": f"gcide8, skip-gram d{vs_gensim.DIM} w{vs_gensim.WINDOW} "
                   f"n{vs_gensim.NEGATIVE}, sample {vs_gensim.SAMPLE:g}, min count "
                   f"{MIN_COUNT}, lr {vs_gensim.LR}, {sizes.quality_epochs} epochs, seeds "
                   f"1-{sizes.quality_seeds} (vs_gensim.py's runs); analogy among the 30,000 "
                   "most frequent words, case-insensitive, and WS-353 Spearman, by embedlab's "
                   "evaluator", "date": info["date"], "commit": info["commit"],
           "machine": {k: info[k] for k in ("cpu", "cpu_family_model", "cores", "mem_gib",
                                            "os", "python", "gensim", "numpy")},
           "runs": runs}
    return summarise_quality(ref, runs)


def read_reference(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        ref: dict[str, Any] = json.loads(path.read_text())
        float(ref["analogy_30k"]), float(ref["ws353"])  # both must be there
    except (OSError, ValueError, KeyError) as exc:
        raise BenchError(f"cannot read --gensim-reference {path} ({exc}); pass a file "
                         "written by --make-gensim-reference") from None
    return ref


# ---- tables -------------------------------------------------------------------------------


def _mib(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _verdicts(row: dict[str, Any]) -> str:
    target = TARGETS.get(row["row"])
    if target is None or "words_per_s" not in row:
        return "—"
    key, least, _ = target
    parts = [f"words/s {'met' if row[key] >= least else 'missed'}"]
    if row["row"] == "a" and "wall_ratio" in row:
        parts.append(f"wall/train {'met' if row['wall_ratio'] <= WALL_RATIO else 'missed'}")
    return ", ".join(parts)


def speed_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| row | what | corpus | raw tokens | vocabulary | words/s (median) | runs "
             "(M words/s) | train s | wall s | wall / train | peak GPU MiB | target | "
             "verdict |", "|" + "---|" * 13]
    for key in ("a", "b", "c", "d"):
        r = rows.get(key)
        if r is None or "words_per_s" not in r:
            continue
        runs = ", ".join(f"{x['words_per_s'] / 1e6:.2f}" for x in r["runs"])
        num = {k: (f"{r[k]:.2f}" if k in r else "—") for k in ("train_s", "wall_s",
                                                                "wall_ratio")}
        lines.append(f"| {key} | {r['what']} | {r['corpus']} | {r['raw_tokens']:,} | "
                     f"{r['vocab']:,} | **{r['words_per_s'] / 1e6:.2f}M** | {runs} | "
                     f"{num['train_s']} | {num['wall_s']} | {num['wall_ratio']} | "
                     f"{_mib(r.get('gpu_mib'))} | {TARGETS.get(key, ('', 0, '—'))[2]} | "
                     f"{_verdicts(r)} |")
    return lines


def quality_table(row: dict[str, Any] | None, ref: dict[str, Any] | None) -> list[str]:
    lines = ["| system | analogy % (30k) | WS-353 ρ | seeds: analogy % / ρ | words/s |",
             "|---|---|---|---|---|"]
    for name, r in (("embedlab (row e)", row), ("gensim reference", ref)):
        if r is None or "analogy_30k" not in r:
            continue
        seeds = ", ".join(f"{x['analogy_30k']:.2f} / {x['ws353']:.3f}" for x in r["runs"])
        label = name if name.startswith("embedlab") else r.get("system", name)
        lines.append(f"| {label} | {r['analogy_30k']:.2f} ± {r['analogy_30k_std']:.2f} | "
                     f"{r['ws353']:.3f} ± {r['ws353_std']:.3f} | {seeds} | "
                     f"{r['words_per_s'] / 1e6:.2f}M |")
    if row and ref and "analogy_30k" in row:
        d_a, d_w = row["analogy_30k"] - ref["analogy_30k"], row["ws353"] - ref["ws353"]
        cpu = ref.get("machine", {}).get("cpu", "?")
        lines += ["", f"Against gensim: analogy {d_a:+.2f} pt (target ≥ −{ANALOGY_MARGIN}: "
                      f"{'met' if d_a >= -ANALOGY_MARGIN else 'missed'}), WS-353 {d_w:+.3f} "
                      f"(target ≥ −{WS353_MARGIN}: {'met' if d_w >= -WS353_MARGIN else 'missed'})"
                      f"; gensim's from {ref.get('date', '?')}, {cpu}."]
    return lines


def markdown(result: dict[str, Any]) -> str:
    info, rows, ref = result["machine"], result["rows"], result.get("gensim_reference")
    lines = [f"GPU: {info['gpu']}; torch {info['torch']}, triton {info['triton']}; CPU "
             f"{info['cpu']}, {info['cores']} cores; Python {info['python']}; commit "
             f"{info['commit']}, {info['date']}; engine `{result['settings']['engine']}`"
             + (" (--quick)" if result["settings"]["quick"] else "") + ".", "",
             *speed_table(rows), "", *quality_table(rows.get("e"), ref), ""]
    notes = [f"- row {k}: {r['note']}" for k, r in rows.items() if r.get("note")]
    notes += [f"- row {k}: **failed**: {r['error'].strip().splitlines()[-1]} (gpu.json has "
              "the whole error)" for k, r in rows.items() if "error" in r]
    notes += [f"- row {k}: skipped: {r['skipped']}" for k, r in rows.items() if "skipped" in r]
    if info.get("pycache_prefix"):
        notes.append("- torch's installed package held no compiled bytecode: the runs kept "
                     "theirs in a scratch folder, filled before them (as an installed package "
                     "holds it)")
    prep = ", ".join(f"{k} {v:.1f} s" for k, v in result["prep_s"].items())
    notes.append(f"- corpora prepared in: {prep or 'none'}; whole run {result['seconds']:.0f} s "
                 f"of a {result['settings']['budget_s']:.0f} s budget. Peak GPU memory: "
                 "nvidia-smi's memory.used during the child minus before it (— : no "
                 "nvidia-smi).")
    return "\n".join([*lines, *notes]) + "\n"


# ---- main ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                   help="folder holding gcide8.xz, questions-words.txt and wordsim353.tsv")
    p.add_argument("--work", type=Path, default=vs_gensim.WORK,
                   help="scratch folder (prepared corpora, runs)")
    p.add_argument("--out", type=Path, default=OUT, help="where gpu.json and gpu.md go")
    p.add_argument("--rows", default=",".join(ROWS), help="which rows, in order: a,b,c,d,e")
    p.add_argument("--engine", default="cuda", help="the engine rows a-c and e train with")
    p.add_argument("--reps", type=int, default=None, help="runs per speed row (default 3)")
    p.add_argument("--budget-s", type=float, default=300.0,
                   help="the whole run's wall-time limit: rows and runs that would pass it "
                        "are skipped, a child running at it is stopped")
    p.add_argument("--quick", action="store_true", help="tiny corpora and runs (a smoke run)")
    p.add_argument("--embedlab-args", default="",
                   help="extra flags for every 'embedlab train', quoted")
    p.add_argument("--gensim-reference", type=Path, default=None, metavar="FILE",
                   help="gensim's quality (a JSON of --make-gensim-reference) to show beside "
                        "row e, e.g. benchmarks/gpu_gensim_reference.json")
    p.add_argument("--make-gensim-reference", type=Path, default=None, metavar="FILE",
                   help="train gensim here with row e's settings, write FILE and exit")
    p.add_argument("--check-baseline", action="store_true",
                   help="compare gpu_baseline.py's step with the torch engine's (CPU) and exit")
    args = p.parse_args(argv)
    import shlex

    args.embedlab_args = shlex.split(args.embedlab_args)
    args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    bad = [r for r in args.rows if r not in ROWS]
    if bad or not args.rows:
        raise BenchError(f"--rows: unknown {bad or 'empty'}; pass e.g. --rows a,b,e")
    if args.reps is not None and args.reps < 1:
        raise BenchError("--reps must be >= 1")
    return args


ROW_RUNNERS: dict[str, Callable[[Bench], dict[str, Any]]] = {
    "a": lambda b: timing_row(b, "a", "tiled", 100),
    "b": lambda b: timing_row(b, "b", "tiled", 300),
    "c": lambda b: timing_row(b, "c", "zipf", 300),
    "d": baseline_row,
    "e": quality_row,
}


def cache_bytecode(work: Path) -> str | None:
    """Where the children keep compiled Python, when the installed packages hold none.

    An installed Python package carries its bytecode (pip compiles it), so a user's ``embedlab
    train`` does not compile torch's sources; a read-only environment without it (some GPU
    machines' images) compiles them in every process, seconds of each run's wall time. Such a
    machine gets ``$PYTHONPYCACHEPREFIX`` in the scratch folder, filled by one import before
    the timed runs, so that they start as on an installed machine. None: nothing to do."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None or "PYTHONPYCACHEPREFIX" in os.environ:
        return None
    if os.path.exists(importlib.util.cache_from_source(spec.origin)):
        return None
    prefix = str(work / "pycache")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    subprocess.run([sys.executable, "-c", "import torch, triton, embedlab.engines.cuda_engine"],
                   env={**os.environ, "PYTHONPATH": str(SRC)}, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return prefix


def benchmark(args: argparse.Namespace, sizes: Sizes) -> dict[str, Any]:
    began = time.monotonic()
    vs_gensim.embedlab_bin = lambda: launcher(args.work)  # type: ignore[assignment]
    pycache = cache_bytecode(args.work)
    if pycache:
        _log(f"torch's package holds no compiled bytecode: the runs keep theirs in {pycache}")
    info = machine()  # first: it imports torch, seconds that count against the budget
    info["pycache_prefix"] = pycache
    bench = Bench(args, sizes, began + args.budget_s - RESERVE_S, {}, {})
    ref = read_reference(args.gensim_reference)
    rows: dict[str, dict[str, Any]] = {}
    for key in args.rows:
        left = bench.remaining()
        try:
            if left < MIN_RUN_S:
                raise Deadline(f"{left:.0f} s of the {args.budget_s:.0f} s budget left")
            rows[key] = ROW_RUNNERS[key](bench)
        except Deadline as exc:
            rows[key] = {"row": key, "skipped": f"deadline: {exc}"}
        except Exception as exc:  # one row's failure must not cost the others
            traceback.print_exc()
            rows[key] = {"row": key, "error": f"{type(exc).__name__}: {exc}".strip()}
        rows[key].update({k: info[k] for k in ("gpu", "torch", "triton")})
        for what in ("skipped", "error"):
            if what in rows[key]:
                _log(f"[{key}] {what}: {rows[key][what]}")
    return {"settings": {"engine": args.engine, "quick": args.quick, "budget_s": args.budget_s,
                         "sizes": vars(sizes), "embedlab_args": args.embedlab_args,
                         "rows": args.rows},
            "machine": info, "rows": rows, "gensim_reference": ref,
            "prep_s": bench.prep_s, "seconds": time.monotonic() - began}


def check_baseline(args: argparse.Namespace) -> int:
    import gpu_baseline  # beside this file; imports torch

    folder = args.work / "gpu-corpora"
    source = gcide8_source(args.data, folder, QUICK.gcide8_tokens)
    corpus = prepared(source, folder / f"gcide8-head{QUICK.gcide8_tokens}-m{MIN_COUNT}",
                      MIN_COUNT)
    ok, line = gpu_baseline.check_against_torch_engine(corpus)
    print(f"{'PASS' if ok else 'FAIL'}: gpu_baseline.skipgram_step against the torch engine's "
          f"step on the CPU: {line}")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        sizes = QUICK if args.quick else FULL
        if args.reps is not None:
            sizes = replace(sizes, reps=args.reps)
        args.work.mkdir(parents=True, exist_ok=True)
        if args.check_baseline:
            return check_baseline(args)
        if args.make_gensim_reference is not None:
            ref = make_gensim_reference(args, sizes)
            args.make_gensim_reference.write_text(json.dumps(ref, indent=1) + "\n")
            print("\n".join(quality_table(None, ref)))
            print(f"wrote {args.make_gensim_reference}")
            return 0
        result = benchmark(args, sizes)
    except BenchError as exc:
        print(f"gpu: error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "gpu-quick" if args.quick else "gpu"
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    md = markdown(result)
    (args.out / f"{stem}.md").write_text(md)
    print(md)
    print(f"wrote {args.out / f'{stem}.json'} and {args.out / f'{stem}.md'} "
          f"({platform.node()})")
    return 0 if all("error" not in r for r in result["rows"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
