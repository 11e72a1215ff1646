"""embedlab vs gensim 4.4 on gcide8: speed, memory and quality, side by side.

A benchmark, not a test: it prints a table and writes ``benchmarks/_work/vs_gensim.json`` (and a
Markdown copy of the table, ``vs_gensim.md``). Both systems train skip-gram, dim 100, window 5,
negative 5, sample 1e-3, min_count 5, lr 0.025 on 2 threads with seed 1 (``--model cbow``: CBOW
with the mean of the context vectors instead, for both):

- timing: ``--reps`` runs of 1 epoch each, alternating gensim, embedlab, gensim, embedlab... so
  that drift in the machine (other load, thermal state) hits both alike; medians are reported;
- quality: ``--quality-seeds`` (5) runs of ``--quality-epochs`` (5) epochs each, with seeds
  1, 2, 3..., evaluated by the *same* neutral evaluator (gensim's ``KeyedVectors``) on
  questions-words (restrict 30k and 300k, case insensitive) and WordSim-353 (Spearman); the
  table shows the mean over seeds, the notes the range and the standard error of each mean and
  of the difference (single runs of either system spread over ±0.6 pp of analogy accuracy here,
  more than the differences being measured; gensim's multi-threaded runs also differ from one
  another with the same seed).

Each training run is its own child process, reaped with :func:`os.wait4`, whose rusage gives that
child's own peak RSS (``ru_maxrss``). Definitions (units in the names):

- ``wall_s``: the child's wall time end to end (interpreter start, imports, corpus reading,
  vocabulary, training, model teardown), minus the time it spent writing vectors for evaluation
  (gensim does that in the same child and reports it; embedlab exports in a separate process);
- ``train_s``: time inside training only (gensim: around ``model.train``; embedlab: the
  trainer's ``train_seconds`` in ``RUN/status.json``);
- ``words_per_s``: raw corpus tokens x epochs / ``train_s`` (the same numerator for both);
- ``rss_mib``: peak resident set size of the child, MiB (``ru_maxrss``: the larger of the child's
  and of each of its reaped children's own peaks, never their sum);
- ``tree_mib``: the peak of the *summed* RSS of the child and every process it started (sampled
  every 20 ms), MiB: what the command holds at once, e.g. embedlab's trainer while its
  corpus-tokenising child runs beside it. Pages of shared libraries mapped by both count twice,
  so it errs high;
- ``anon_mib``: the child's peak anonymous memory (``RssAnon`` in ``/proc/PID/status``, sampled
  every 20 ms, so a spike shorter than that can be missed; the direct child only, not a process
  it starts, such as embedlab's corpus-tokenising child), MiB. RSS also counts the pages of
  shared libraries mapped into the process, and how many of those are resident depends on the
  page cache (the kernel maps cached neighbours of a touched page), so the same imports can
  measure tens of MiB apart on different days (benchmarks/README.md). The anonymous part is
  what the run itself allocated and cannot be dropped by the kernel, so it is the steadier
  measure of a system's own memory.

gensim runs in ``corpus_file`` mode on a copy of the corpus split into 1,000-word lines: on
longer lines that mode silently drops words (see ../shared/data/README.md).

``--corpus NAME`` trains both on another corpus instead of gcide8, one that ``corpora.py`` builds
from public-domain text in registry packages (``--work``/corpora/NAME/). Its lines are sentences
or paragraphs of at most 1,000 words, so embedlab and gensim read the same file, with the same
sentence ends.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import corpora  # beside this file: the corpora other than gcide8

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "benchmarks" / "_work"
SYSTEMS = ("gensim", "embedlab")
MODELS = ("skipgram", "cbow")

# The shared hyperparameters. gensim and embedlab spell them differently below.
DIM, WINDOW, NEGATIVE, SAMPLE, MIN_COUNT, LR, THREADS, SEED = 100, 5, 5, 1e-3, 5, 0.025, 2, 1
LINE_WORDS = 1_000  # gensim corpus_file mode drops words on longer lines

# The project's targets: embedlab/gensim ratios (benchmarks/README.md).
TARGET_THROUGHPUT, TARGET_WALL_SPEEDUP, TARGET_RSS = 3.0, 2.0, 1.5


class BenchError(Exception):
    """A problem the user can fix (missing data, bad flag); printed as one line, exit 2."""


# ---- data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    corpus: Path  # text8 format, one line (what embedlab reads)
    corpus_lines: Path  # the same tokens, 1,000 per line (what gensim reads)
    questions: Path
    wordsim: Path
    raw_tokens: int  # whitespace-separated tokens in the corpus


def _iter_tokens(path: Path, chunk_bytes: int = 1 << 20) -> Iterator[str]:
    """Stream whitespace-separated tokens in bounded memory (a token may span two chunks)."""
    tail = ""
    with path.open(encoding="utf-8") as f:
        while chunk := f.read(chunk_bytes):
            parts = (tail + chunk).split()
            # The last piece may continue in the next chunk unless the chunk ended on a space.
            tail = "" if chunk[-1].isspace() else parts.pop() if parts else ""
            yield from parts
    if tail:
        yield tail


def _write_atomic(path: Path, write: Any) -> None:
    # A crash mid-write must not leave a truncated cache that later runs would trust.
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    try:
        write(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def prepare_data(shared: Path, work: Path, name: str = "gcide8") -> Data:
    """Decompress gcide8 once into ``work`` and write gensim's 1,000-word-line copy (cached);
    any other corpus ``name`` is built by :func:`corpora.build`."""
    data = shared / "data"
    src = data / "gcide8.xz"
    questions, wordsim = data / "questions-words.txt", data / "wordsim353.tsv"
    for p in (src, questions, wordsim) if name == "gcide8" else (questions, wordsim):
        if not p.is_file():
            raise BenchError(f"missing {p}; pass --shared DIR where DIR/data holds gcide8.xz, "
                             "questions-words.txt and wordsim353.tsv")
    if name != "gcide8":
        return prepare_other(name, work, questions, wordsim)
    work.mkdir(parents=True, exist_ok=True)
    corpus, lines, meta_path = work / "gcide8.txt", work / "gcide8.lines.txt", work / "gcide8.json"
    key = {"source": str(src), "size": src.stat().st_size, "mtime_ns": src.stat().st_mtime_ns,
           "line_words": LINE_WORDS}
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("key") != key or not corpus.is_file() or not lines.is_file():
        print(f"decompressing {src} into {work} ...", file=sys.stderr)
        _write_atomic(corpus, lambda tmp: _decompress(src, tmp))
        counted: list[int] = []
        _write_atomic(lines, lambda tmp: counted.append(_split_lines(corpus, tmp)))
        meta = {"key": key, "raw_tokens": counted[0]}
        _write_atomic(meta_path, lambda tmp: tmp.write_text(json.dumps(meta, indent=1)))
    return Data(corpus, lines, questions, wordsim, int(meta["raw_tokens"]))


def prepare_other(name: str, work: Path, questions: Path, wordsim: Path) -> Data:
    """A corpus of ``corpora.py``, whose lines already fit gensim: both systems read that file."""
    try:
        text = corpora.build(name, work / "corpora", max_line_words=LINE_WORDS)
    except corpora.CorpusError as exc:
        raise BenchError(str(exc)) from exc
    return Data(text, text, questions, wordsim, sum(1 for _ in _iter_tokens(text)))


def _decompress(src: Path, dst: Path) -> None:
    with lzma.open(src, "rb") as fin, dst.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def _split_lines(corpus: Path, dst: Path) -> int:
    """Write the corpus's tokens ``LINE_WORDS`` per line; returns the token count."""
    n = 0
    line: list[str] = []
    with dst.open("w", encoding="utf-8") as out:
        for tok in _iter_tokens(corpus):
            line.append(tok)
            n += 1
            if len(line) == LINE_WORDS:
                out.write(" ".join(line) + "\n")
                line.clear()
        if line:
            out.write(" ".join(line) + "\n")
    return n


# ---- running one child --------------------------------------------------------------------


@dataclass
class Run:
    system: str
    epochs: int
    wall_s: float  # end to end, minus vector export time (see module docstring)
    train_s: float
    rss_mib: float
    raw_words: int  # raw corpus tokens x epochs, as the system reports it
    words_per_s: float  # raw_tokens x epochs / train_s
    cpu_s: float  # the training child's CPU time
    others_cpu_s: float  # CPU time used by other processes during the run (should be ~0)
    vectors: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    anon_mib: float = 0.0  # peak anonymous memory (sampled; see the module docstring)
    tree_mib: float = 0.0  # peak RSS summed over the child and its descendants (sampled)


@dataclass(frozen=True)
class ChildResult:
    wall_s: float
    rss_mib: float
    cpu_s: float  # the child's user + system CPU time (its reaped descendants included)
    others_cpu_s: float  # CPU time the rest of the machine used meanwhile (contention)
    stdout: str
    anon_mib: float = 0.0  # the child's peak RssAnon, sampled every ANON_SAMPLE_S
    tree_mib: float = 0.0  # peak of the summed VmRSS of the child and its descendants


#: how often the child's anonymous memory is sampled while it runs
ANON_SAMPLE_S = 0.02


def _status_kib(pid: int, key: bytes) -> int:
    """A ``/proc/PID/status`` field of a live process (``RssAnon``, ``VmRSS``), KiB; 0 once it
    has exited or on a kernel without it."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(key + b":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it (``/proc/PID/task/TID/children``)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
    return found


class _MemoryPeaks(threading.Thread):
    """Samples a child's anonymous memory, and the RSS of its process tree, until told to stop;
    ``anon_kib`` and ``tree_kib`` are the largest values seen."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.anon_kib, self.tree_kib = pid, 0, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(ANON_SAMPLE_S):
            self.anon_kib = max(self.anon_kib, _status_kib(self.pid, b"RssAnon"))
            tree = sum(_status_kib(p, b"VmRSS") for p in _descendants(self.pid))
            self.tree_kib = max(self.tree_kib, tree)

    def stop(self) -> tuple[int, int]:
        self._stop_event.set()
        self.join()
        return self.anon_kib, self.tree_kib


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores, /proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(x) for x in fields]
    # user nice system idle iowait irq softirq steal ...; idle and iowait are not busy.
    busy = sum(ticks[:8]) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait_s: float, threshold: float = 0.15, sample_s: float = 2.0) -> float:
    """Wait until other processes use < ``threshold`` of one core (or ``max_wait_s`` passes).

    Returns the busy fraction seen last. Other work on a 2-core machine halves a 2-thread
    trainer's speed, so timing under load measures the load, not the system.
    """
    deadline = time.monotonic() + max_wait_s
    while True:
        b0 = machine_busy_s()
        time.sleep(sample_s)
        busy = (machine_busy_s() - b0) / sample_s
        if busy < threshold or time.monotonic() >= deadline:
            return busy


def run_child(argv: Sequence[str], log: Path, env: dict[str, str] | None = None) -> ChildResult:
    """Run ``argv``, return its wall time and its own peak RSS (rusage from ``os.wait4``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    # Output goes to files, not pipes: nothing to drain while we block in wait4.
    out_path = log.with_suffix(".out")
    with out_path.open("wb") as out, log.open("wb") as err:
        busy0 = machine_busy_s()
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, env=env)
        sampler = _MemoryPeaks(proc.pid)
        sampler.start()
        _, status, rusage = os.wait4(proc.pid, 0)
        anon_kib, tree_kib = sampler.stop()
        wall = time.perf_counter() - t0
        busy = machine_busy_s() - busy0
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits on it again
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise RuntimeError(f"{shlex.join(argv)} exited {proc.returncode}; stderr tail "
                           f"({log}):\n" + "\n".join(tail))
    cpu = rusage.ru_utime + rusage.ru_stime
    # Linux reports ru_maxrss in KiB.
    # a sample can miss a short peak: the tree is never below the process's own peak
    return ChildResult(wall, rusage.ru_maxrss / 1024, cpu, max(0.0, busy - cpu),
                       out_path.read_text(), anon_kib / 1024,
                       max(tree_kib / 1024, rusage.ru_maxrss / 1024))


def run_gensim(data: Data, epochs: int, out_dir: Path, *, save: bool, seed: int = SEED,
               model: str = "skipgram") -> Run:
    out_dir.mkdir(parents=True, exist_ok=True)
    vec = out_dir / "vectors.txt"
    argv = [sys.executable, str(Path(__file__).resolve()), "_gensim-child",
            "--corpus", str(data.corpus_lines), "--epochs", str(epochs), "--seed", str(seed),
            "--model", model]
    if save:
        argv += ["--save", str(vec)]
    res = run_child(argv, out_dir / "gensim.log")
    report = json.loads(res.stdout.strip().splitlines()[-1])
    raw = data.raw_tokens * epochs
    return Run("gensim", epochs, res.wall_s - report["save_seconds"], report["train_seconds"],
               res.rss_mib, int(report["raw_words"]), raw / report["train_seconds"],
               res.cpu_s, res.others_cpu_s, str(vec) if save else None,
               {"effective_words": report["effective_words"], "vocab": report["vocab"],
                "vocab_seconds": report["vocab_seconds"]}, anon_mib=res.anon_mib,
               tree_mib=res.tree_mib)


def gensim_child(corpus: str, epochs: int, save: str | None, seed: int = SEED,
                 sg: int = 1, *, hs: int = 0, negative: int = NEGATIVE) -> None:
    """Runs inside the child: build the vocabulary, train, optionally save; print JSON.

    CBOW (``sg=0``) uses gensim's default ``cbow_mean=1``: the mean of the context vectors.
    ``hs=1, negative=0``: hierarchical softmax alone (``hs_vs_gensim.py``).
    """
    from gensim.models import Word2Vec

    model = Word2Vec(sg=sg, hs=hs, vector_size=DIM, window=WINDOW, negative=negative,
                     sample=SAMPLE, min_count=MIN_COUNT, alpha=LR, workers=THREADS,
                     epochs=epochs, seed=seed)
    t0 = time.perf_counter()
    model.build_vocab(corpus_file=corpus)
    t1 = time.perf_counter()
    effective, raw = model.train(corpus_file=corpus, total_words=model.corpus_total_words,
                                 total_examples=model.corpus_count, epochs=model.epochs)
    t2 = time.perf_counter()
    if save:
        model.wv.save_word2vec_format(save)
    t3 = time.perf_counter()
    print(json.dumps({"vocab_seconds": t1 - t0, "train_seconds": t2 - t1, "save_seconds": t3 - t2,
                      "effective_words": effective, "raw_words": raw,
                      "vocab": len(model.wv)}))


def embedlab_bin() -> Path:
    exe = Path(sys.executable).parent / "embedlab"
    if not exe.is_file():
        raise BenchError(f"{exe} not found; install the project first (make venv)")
    return exe


def run_embedlab(data: Data, epochs: int, out_dir: Path, *, save: bool,
                 extra: Sequence[str], seed: int = SEED, model: str = "skipgram") -> Run:
    exe = embedlab_bin()
    run_dir = out_dir / "run"
    if run_dir.exists():  # a fresh run each time: an existing one would resume
        shutil.rmtree(run_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [str(exe), "train", "--corpus", str(data.corpus), "--run", str(run_dir),
            "--model", model, "--loss", "neg", "--dim", str(DIM), "--window", str(WINDOW),
            "--negative", str(NEGATIVE), "--sample", str(SAMPLE), "--min-count", str(MIN_COUNT),
            "--lr", str(LR), "--epochs", str(epochs), "--threads", str(THREADS),
            "--seed", str(seed), *extra]
    res = run_child(argv, out_dir / "embedlab.log")
    status = json.loads((run_dir / "status.json").read_text())
    missing = [k for k in ("train_seconds", "raw_words") if k not in status]
    if missing or status.get("status") != "finished":
        raise RuntimeError(f"{run_dir}/status.json: status {status.get('status')!r}, "
                           f"missing {missing}; the trainer's contract is not met")
    vec = out_dir / "vectors.txt"
    if save:
        vec.unlink(missing_ok=True)  # never evaluate a stale file if export wrote nothing
        run_child([str(exe), "export", str(run_dir), "--format", "word2vec", "--out", str(vec)],
                  out_dir / "export.log")
    train_s = float(status["train_seconds"])
    return Run("embedlab", epochs, res.wall_s, train_s, res.rss_mib, int(status["raw_words"]),
               data.raw_tokens * epochs / train_s, res.cpu_s, res.others_cpu_s,
               str(vec) if save else None,
               {**{k: status[k] for k in ("step", "words_seen", "loss") if k in status},
                "engine": json.loads((run_dir / "config.json").read_text()).get("engine")},
               anon_mib=res.anon_mib, tree_mib=res.tree_mib)


def run_system(system: str, data: Data, epochs: int, out_dir: Path, *, save: bool,
               embedlab_extra: Sequence[str], wait_idle_s: float, seed: int = SEED,
               model: str = "skipgram") -> Run:
    if wait_idle_s > 0:
        busy = wait_for_quiet(wait_idle_s)
        if busy >= 0.15:
            print(f"warning: the machine is busy ({busy:.0%} of a core used by other processes); "
                  "timings will be pessimistic", file=sys.stderr)
    if system == "gensim":
        return run_gensim(data, epochs, out_dir, save=save, seed=seed, model=model)
    return run_embedlab(data, epochs, out_dir, save=save, extra=embedlab_extra, seed=seed,
                        model=model)


# ---- evaluation (one neutral evaluator for both) ------------------------------------------


def evaluate(vectors: str, data: Data) -> dict[str, float]:
    """Analogy accuracy (%) at restrict 30k / 300k and WS-353 Spearman, via gensim."""
    import logging

    from gensim.models import KeyedVectors

    logging.getLogger("gensim").setLevel(logging.ERROR)  # it logs every section at INFO
    kv = KeyedVectors.load_word2vec_format(vectors, binary=False)
    out: dict[str, float] = {"vocab": len(kv)}
    for restrict in (30_000, 300_000):
        score, sections = kv.evaluate_word_analogies(
            str(data.questions), restrict_vocab=restrict, case_insensitive=True)
        total = sections[-1]  # gensim's last section is the "Total accuracy" summary
        out[f"analogy_{restrict // 1000}k"] = 100 * float(score)
        out[f"analogy_{restrict // 1000}k_n"] = len(total["correct"]) + len(total["incorrect"])
    _, spearman, oov = kv.evaluate_word_pairs(str(data.wordsim), case_insensitive=True)
    out["ws353"] = float(spearman[0])
    out["ws353_oov_pct"] = float(oov)
    return out


# ---- machine and tables -------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu, flags = platform.processor() or "unknown", ""
    family = model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (s.strip() for s in line.partition(":"))
            if key == "model name":
                cpu = value
            elif key == "flags":
                flags = value
            elif key == "cpu family":
                family = value
            elif key == "model":
                model = value
            if key == "processor" and value == "1":
                break  # the first CPU describes them all
    except OSError:
        pass
    versions: dict[str, str] = {"python": platform.python_version()}
    for mod in ("gensim", "torch", "numpy", "embedlab"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # a missing or broken package is reported, not fatal
            versions[mod] = "n/a"
    mem_kib = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text()
                    .splitlines() if line.startswith("MemTotal")), 0)
    return {"cpu": cpu, "cpu_family_model": f"{family}/{model}",
            "avx512": "avx512f" in flags.split(), "cores": len(os.sched_getaffinity(0)),
            "mem_gib": round(mem_kib / 2**20, 1), "os": platform.platform(), **versions}


def _median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def summarise(timing: dict[str, list[Run]], quality: dict[str, dict[str, float]]
              ) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        row: dict[str, float] = {}
        if timing.get(system):
            runs = timing[system]
            row.update({"words_per_s": _median(runs, "words_per_s"),
                        "train_s": _median(runs, "train_s"), "wall_s": _median(runs, "wall_s"),
                        "rss_mib": _median(runs, "rss_mib"), "anon_mib": _median(runs, "anon_mib"),
                        "cpu_s": _median(runs, "cpu_s"),
                        "cpu_util": statistics.median(r.cpu_s / r.wall_s for r in runs),
                        "others_util": statistics.median(r.others_cpu_s / r.wall_s
                                                         for r in runs)})
            if all(r.tree_mib for r in runs):  # runs saved by an older vs_gensim.py have none
                row["tree_mib"] = _median(runs, "tree_mib")
        row.update(quality.get(system, {}))
        if row:
            rows[system] = row
    g, e = rows.get("gensim"), rows.get("embedlab")
    if g and e:
        ratio: dict[str, float] = {}
        if "words_per_s" in g and "words_per_s" in e:
            ratio["words_per_s"] = e["words_per_s"] / g["words_per_s"]
            ratio["train_s"] = g["train_s"] / e["train_s"]  # speed-up
            ratio["wall_s"] = g["wall_s"] / e["wall_s"]  # speed-up
            ratio["rss_mib"] = e["rss_mib"] / g["rss_mib"]
            for key in ("anon_mib", "tree_mib"):  # absent from runs saved by an older vs_gensim.py
                if g.get(key) and e.get(key):
                    ratio[key] = e[key] / g[key]
            ratio["cpu_s"] = g["cpu_s"] / e["cpu_s"]  # CPU-time saving
            # run i of each system ran back to back, so a slow spell of the machine hits both:
            # the median of the per-pair ratios is steadier than the ratio of the medians
            pairs = list(zip(timing["gensim"], timing["embedlab"], strict=False))
            ratio["paired_words_per_s"] = statistics.median(b.words_per_s / a.words_per_s
                                                            for a, b in pairs)
            ratio["paired_wall_s"] = statistics.median(a.wall_s / b.wall_s for a, b in pairs)
            quiet = quiet_pairs(pairs)
            ratio["quiet_pairs"] = len(quiet)
            if quiet:
                ratio["quiet_words_per_s"] = statistics.median(b.words_per_s / a.words_per_s
                                                               for a, b in quiet)
                ratio["quiet_wall_s"] = statistics.median(a.wall_s / b.wall_s for a, b in quiet)
        for k in ("analogy_30k", "analogy_300k", "ws353"):
            if k in g and k in e:
                ratio[k] = e[k] - g[k]  # a difference: positive = embedlab better
        rows["embedlab vs gensim"] = ratio
    return rows


#: a run is "at full speed" when its CPU time is within this factor of its system's least
QUIET_CPU = 1.10


def quiet_pairs(pairs: list[tuple[Run, Run]]) -> list[tuple[Run, Run]]:
    """The pairs in which both runs went at full speed.

    A virtual machine can have slow spells (memory contention from outside: the same work
    takes 1.3-1.5x the CPU time) that no load counter shows. A run's CPU time for a fixed
    amount of work exposes them, so runs more than 10 % above their system's least CPU time
    are set aside here; a spell that hits one run of a pair decides that pair's ratio.
    """
    if not pairs:
        return []
    least = [min(p[i].cpu_s for p in pairs) for i in (0, 1)]
    return [p for p in pairs if all(p[i].cpu_s <= QUIET_CPU * least[i] for i in (0, 1))]


COLUMNS = (  # key, header, format for a system row, format for the ratio row
    ("words_per_s", "train words/s", "{:,.0f}", "{:.2f}x"),
    ("train_s", "1-ep train s", "{:.2f}", "{:.2f}x faster"),
    ("wall_s", "1-ep wall s", "{:.2f}", "{:.2f}x faster"),
    ("cpu_s", "1-ep CPU s", "{:.1f}", "{:.2f}x less"),
    ("rss_mib", "peak RSS MiB", "{:.0f}", "{:.2f}x"),
    ("tree_mib", "peak tree RSS MiB", "{:.0f}", "{:.2f}x"),
    ("anon_mib", "peak anon MiB", "{:.0f}", "{:.2f}x"),
    ("analogy_30k", "analogy % 30k", "{:.1f}", "{:+.1f} pp"),
    ("analogy_300k", "analogy % 300k", "{:.1f}", "{:+.1f} pp"),
    ("ws353", "WS-353 ρ", "{:.3f}", "{:+.3f}"),
)


def table_cells(rows: dict[str, dict[str, float]]) -> list[list[str]]:
    cells = []
    for name, row in rows.items():
        is_ratio = name == "embedlab vs gensim"
        line = [name]
        for key, _, fmt, rfmt in COLUMNS:
            line.append((rfmt if is_ratio else fmt).format(row[key]) if key in row else "—")
        cells.append(line)
    return cells


def targets(rows: dict[str, dict[str, float]]) -> list[str]:
    r = rows.get("embedlab vs gensim", {})
    checks = [("words_per_s", f"training throughput >= {TARGET_THROUGHPUT:g}x gensim",
               lambda v: v >= TARGET_THROUGHPUT),
              ("wall_s", f"wall time >= {TARGET_WALL_SPEEDUP:g}x faster",
               lambda v: v >= TARGET_WALL_SPEEDUP),
              ("rss_mib", f"peak RSS <= {TARGET_RSS:g}x gensim", lambda v: v <= TARGET_RSS),
              ("tree_mib", f"peak RSS of the process tree (summed) <= {TARGET_RSS:g}x gensim",
               lambda v: v <= TARGET_RSS),
              ("analogy_300k", "analogy (300k) >= gensim", lambda v: v >= 0),
              ("ws353", "WS-353 >= gensim", lambda v: v >= 0)]
    return [f"{'PASS' if ok(r[k]) else 'FAIL'}  {text}" for k, text, ok in checks if k in r]


def spread(evals: dict[str, list[dict[str, float]]]) -> str:
    """Per system, the range over seeds of each quality metric (the mean is in the table)."""
    parts = []
    for system, es in evals.items():
        if len(es) < 2:
            continue
        ranges = ", ".join(
            f"{k} {min(e[k] for e in es):.{3 if k == 'ws353' else 1}f}–"
            f"{max(e[k] for e in es):.{3 if k == 'ws353' else 1}f}"
            for k in ("analogy_30k", "analogy_300k", "ws353") if k in es[0])
        parts.append(f"{system}: {ranges}")
    return (" Range over seeds: " + "; ".join(parts) + "." + uncertainty(evals)) if parts else ""


def _sem(values: list[float]) -> float:
    """Standard error of the mean of independent runs (sample standard deviation / sqrt n)."""
    return statistics.stdev(values) / math.sqrt(len(values))


def uncertainty(evals: dict[str, list[dict[str, float]]]) -> str:
    """Standard errors of each system's mean and of the difference embedlab − gensim."""
    g, e = evals.get("gensim", []), evals.get("embedlab", [])
    if len(g) < 2 or len(e) < 2:
        return ""
    parts = []
    for key, unit, digits in (("analogy_300k", " pp", 2), ("ws353", "", 3)):
        if key not in g[0] or key not in e[0]:
            continue
        gv, ev = [r[key] for r in g], [r[key] for r in e]
        se_g, se_e = _sem(gv), _sem(ev)
        diff = statistics.fmean(ev) - statistics.fmean(gv)
        parts.append(f"{key} gensim ±{se_g:.{digits}f}, embedlab ±{se_e:.{digits}f}, difference "
                     f"{diff:+.{digits}f} ± {math.hypot(se_g, se_e):.{digits}f}{unit}")
    return (" Standard errors: " + "; ".join(parts) + ".") if parts else ""


def paired(rows: dict[str, dict[str, float]]) -> str:
    """The medians of the per-pair ratios (gensim run i against embedlab run i)."""
    r = rows.get("embedlab vs gensim", {})
    if "paired_words_per_s" not in r:
        return ""
    text = (f"Median over back-to-back pairs: throughput {r['paired_words_per_s']:.2f}x, wall "
            f"{r['paired_wall_s']:.2f}x faster. ")
    if "quiet_pairs" in r:
        text += (f"Pairs with both runs at full speed (CPU time within "
                 f"{(QUIET_CPU - 1) * 100:.0f} % of the system's least): {r['quiet_pairs']:.0f}")
        text += (f", median throughput {r['quiet_words_per_s']:.2f}x, wall "
                 f"{r['quiet_wall_s']:.2f}x faster. " if r["quiet_pairs"] else ". ")
    return text


def contention(rows: dict[str, dict[str, float]]) -> str:
    """One sentence on CPU use: the system's own (cores busy) and other processes' (noise)."""
    parts = [f"{name} used {row['cpu_util']:.2f} cores, other processes "
             f"{row['others_util']:.2f}" for name, row in rows.items() if "cpu_util" in row]
    return ("CPU during timing runs (median): " + "; ".join(parts) + ".") if parts else ""


def markdown(rows: dict[str, dict[str, float]], info: dict[str, Any], args: dict[str, Any]
             ) -> str:
    head = ["system", *(h for _, h, _, _ in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c) + " |" for c in table_cells(rows)]
    notes = []
    if not args.get("skip_timing"):
        notes.append(f"Timing: median of {args['reps']} runs of 1 epoch, alternating systems. "
                     + paired(rows) + contention(rows))
    if not args.get("skip_quality"):
        seeds = args.get("quality_seeds", 1)
        corpus = args.get("corpus", "gcide8")
        where = "" if corpus == "gcide8" else f" on {corpus} ({args['raw_tokens']:,} tokens)"
        notes.append(f"Quality: mean of {seeds} run(s) of {args['quality_epochs']} epochs per "
                     f"system (seeds 1..{seeds}){where}, evaluated by gensim's KeyedVectors "
                     "(case-insensitive analogies)." + spread(args.get("quality_evals", {})))
    lines += ["", *notes,
              f"Machine: {info['cpu']} (family/model {info['cpu_family_model']}, "
              f"AVX-512 {'yes' if info['avx512'] else 'no'}), {info['cores']} cores, "
              f"{info['mem_gib']} GiB; {info['os']}; Python {info['python']}, torch "
              f"{info['torch']}, gensim {info['gensim']}, numpy {info['numpy']}, embedlab "
              f"{info['embedlab']} (engine: {info.get('embedlab_engine', 'n/a')})."]
    return "\n".join(lines) + "\n"


def print_table(rows: dict[str, dict[str, float]], info: dict[str, Any],
                model: str = "skipgram", corpus: str = "gcide8") -> None:
    from rich.console import Console
    from rich.table import Table

    name = "skip-gram" if model == "skipgram" else "CBOW"
    table = Table(title=f"embedlab vs gensim 4.4 — {corpus}, {name} d100 w5 n5, 2 threads")
    table.add_column("system")
    for _, header, _, _ in COLUMNS:
        table.add_column(header, justify="right")
    for line in table_cells(rows):
        table.add_row(*line)
    # Piped output would default to 80 columns and squash the nine columns into ellipses.
    console = Console(width=None if sys.stdout.isatty() else 150)
    console.print(table)
    for verdict in targets(rows):
        console.print(verdict, markup=False)
    console.print(paired(rows) + contention(rows), markup=False)
    console.print(f"machine: {info['cpu']} ({info['cpu_family_model']}), {info['cores']} cores, "
                  f"python {info['python']}, torch {info['torch']}, gensim {info['gensim']}",
                  markup=False)


# ---- main ---------------------------------------------------------------------------------


def add_run_args(p: argparse.ArgumentParser) -> None:
    """The flags every comparison with gensim takes (this script's and hs_vs_gensim.py's)."""
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared",
                   help="folder whose data/ holds gcide8.xz, questions-words.txt, wordsim353.tsv")
    p.add_argument("--reps", type=int, default=3, help="1-epoch timing runs per system")
    p.add_argument("--skip-quality", action="store_true", help="timing runs only")
    p.add_argument("--skip-timing", action="store_true", help="quality runs only")
    p.add_argument("--embedlab-args", default="",
                   help="extra flags for 'embedlab train', quoted: e.g. '--batch-size 2048'")
    p.add_argument("--wait-idle", type=float, default=120.0,
                   help="before each run, wait up to this many seconds for other processes to "
                        "go quiet (0 = don't wait)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_args(p)
    p.add_argument("--systems", default="gensim,embedlab",
                   help="comma-separated subset of: gensim,embedlab")
    p.add_argument("--quality-epochs", type=int, default=5, help="epochs of each quality run")
    p.add_argument("--quality-seeds", type=int, default=5,
                   help="quality runs per system (seeds 1..N); the table shows their mean")
    p.add_argument("--render", type=Path, default=None, metavar="JSON",
                   help="print the table of a saved vs_gensim.json and exit (runs nothing)")
    p.add_argument("--work", type=Path, default=WORK, help="scratch folder (cached corpus, runs)")
    p.add_argument("--corpus", choices=("gcide8", *corpora.NAMES), default="gcide8",
                   help="what both systems train on: gcide8 (from --shared) or a corpus that "
                        "corpora.py builds from registry packages; results go to "
                        "vs_gensim-NAME.json/.md for the others")
    p.add_argument("--model", choices=MODELS, default="skipgram",
                   help="the architecture both systems train (the targets are for "
                        "skip-gram); results go to vs_gensim-cbow.json/.md for cbow")
    args = p.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad or not systems:
        raise BenchError(f"--systems {args.systems!r}: unknown {bad or 'empty'}; "
                         "pass e.g. --systems gensim,embedlab")
    args.systems = [s for s in SYSTEMS if s in systems]  # gensim first: A B A B
    if args.reps < 1 or args.quality_epochs < 1 or args.quality_seeds < 1:
        raise BenchError("--reps, --quality-epochs and --quality-seeds must be >= 1; "
                         "e.g. --reps 3")
    return args


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    data = prepare_data(args.shared, args.work, args.corpus)
    runs = args.work / ("runs" if args.corpus == "gcide8" else f"runs-{args.corpus}")
    extra = shlex.split(args.embedlab_args)
    if "embedlab" in args.systems:
        embedlab_bin()  # fail early, before minutes of gensim runs
    timing: dict[str, list[Run]] = {s: [] for s in args.systems}
    quality_runs: dict[str, list[Run]] = {}
    quality: dict[str, dict[str, float]] = {}
    evals: dict[str, list[dict[str, float]]] = {}
    if not args.skip_timing:
        for rep in range(args.reps):
            for system in args.systems:  # alternating A B A B
                run = run_system(system, data, 1, runs / f"{system}-time{rep}",
                                 save=False, embedlab_extra=extra, wait_idle_s=args.wait_idle,
                                 model=args.model)
                timing[system].append(run)
                print(f"[time {rep + 1}/{args.reps}] {system}: {run.words_per_s:,.0f} words/s, "
                      f"train {run.train_s:.2f} s, wall {run.wall_s:.2f} s, "
                      f"RSS {run.rss_mib:.0f} MiB (anon {run.anon_mib:.0f}, "
                      f"tree {run.tree_mib:.0f}), "
                      f"CPU {run.cpu_s:.1f} s, "
                      f"others' CPU {run.others_cpu_s:.1f} s", file=sys.stderr)
    if not args.skip_quality:
        for seed in range(1, args.quality_seeds + 1):
            for system in args.systems:
                run = run_system(system, data, args.quality_epochs,
                                 runs / f"{system}-quality-seed{seed}", save=True,
                                 embedlab_extra=extra, wait_idle_s=args.wait_idle, seed=seed,
                                 model=args.model)
                quality_runs.setdefault(system, []).append(run)
                assert run.vectors is not None
                evals.setdefault(system, []).append(evaluate(run.vectors, data))
                print(f"[quality {args.quality_epochs} ep, seed {seed}] {system}: "
                      f"{evals[system][-1]}", file=sys.stderr)
        quality = {system: {k: statistics.mean(e[k] for e in es) for k in es[0]}
                   for system, es in evals.items()}
    rows = summarise(timing, quality)
    info = machine()
    engines = {r.extra.get("engine") for r in [*timing.get("embedlab", []),
                                                 *quality_runs.get("embedlab", [])]}
    info["embedlab_engine"] = ", ".join(sorted(str(e) for e in engines)) or "n/a"
    settings = {"reps": args.reps, "quality_epochs": args.quality_epochs,
                "quality_seeds": args.quality_seeds, "quality_evals": evals,
                "skip_timing": args.skip_timing, "skip_quality": args.skip_quality,
                "systems": args.systems, "embedlab_args": extra, "raw_tokens": data.raw_tokens,
                "corpus": args.corpus,
                "hyperparameters": {"dim": DIM, "window": WINDOW, "negative": NEGATIVE,
                                    "sample": SAMPLE, "min_count": MIN_COUNT, "lr": LR,
                                    "threads": THREADS, "seed": SEED, "model": args.model}}
    return {"settings": settings, "machine": info, "summary": rows,
            "targets": targets(rows),
            "timing_runs": {s: [asdict(r) for r in rs] for s, rs in timing.items()},
            "quality_runs": {s: [{**asdict(r), "eval": e} for r, e in zip(rs, evals[s],
                                                                          strict=True)]
                             for s, rs in quality_runs.items()}}


def render(path: Path) -> int:
    try:
        result = json.loads(path.read_text())
        rows, info, settings = result["summary"], result["machine"], result["settings"]
    except (OSError, ValueError, KeyError) as exc:
        raise BenchError(f"cannot read {path} ({exc}); pass a vs_gensim.json this script "
                         "wrote") from exc
    print_table(rows, info, settings["hyperparameters"].get("model", "skipgram"),
                settings.get("corpus", "gcide8"))
    print(markdown(rows, info, settings))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_gensim-child"]:  # internal: one gensim training run in this process
        p = argparse.ArgumentParser()
        p.add_argument("--corpus", required=True)
        p.add_argument("--epochs", type=int, required=True)
        p.add_argument("--save")
        p.add_argument("--seed", type=int, default=SEED)
        p.add_argument("--model", choices=MODELS, default="skipgram")
        a = p.parse_args(argv[1:])
        gensim_child(a.corpus, a.epochs, a.save, a.seed, sg=int(a.model == "skipgram"))
        return 0
    try:
        args = parse_args(argv)
        if args.render is not None:
            return render(args.render)
        result = benchmark(args)
    except BenchError as exc:
        print(f"vs_gensim: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a child failed: its stderr tail says why
        print(f"vs_gensim: failed: {exc}", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    stem = "vs_gensim" if args.model == "skipgram" else f"vs_gensim-{args.model}"
    if args.corpus != "gcide8":
        stem += f"-{args.corpus}"
    (args.work / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    md = markdown(result["summary"], result["machine"], result["settings"])
    (args.work / f"{stem}.md").write_text(md)
    print_table(result["summary"], result["machine"], args.model, args.corpus)
    print(f"wrote {args.work / f'{stem}.json'} and {args.work / f'{stem}.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
