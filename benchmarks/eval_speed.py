"""Evaluation / query / load speed: embedlab vs gensim on the same random vectors.

    .venv/bin/python benchmarks/eval_speed.py [--questions PATH] [--repeat 3]

Targets (2 cores): all 19,544 questions-words analogies on 30,000 × 100 in <= 2 s;
a neighbours query on 100,000 × 300 in <= 50 ms after loading; loading a 50,000 × 128 run's
vectors in <= 1 s. The vocabulary holds the questions' real words (lower-cased, so every
question is answerable within the first 30,000 words) plus filler; vectors are Gaussian, so
accuracies are ~0 -- this measures speed, and checks that both libraries agree on the counts.
Times are medians of ``--repeat`` runs, in seconds.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gensim.models import KeyedVectors
from threadpoolctl import threadpool_info

from embedlab.checkpoint import CheckpointManager
from embedlab.data.vocab import Vocab
from embedlab.vectors import Vectors, load

DEFAULT_QUESTIONS = Path(__file__).resolve().parents[2] / "shared/data/questions-words.txt"


def median_time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def vocabulary(questions: Path, size: int) -> list[str]:
    words: dict[str, None] = {}
    for line in questions.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(":"):
            words.update((w.lower(), None) for w in line.split())
    out = list(words)
    return out + [f"filler{i}" for i in range(size - len(out))]


def keyed(words: list[str], matrix: np.ndarray) -> KeyedVectors:
    kv = KeyedVectors(matrix.shape[1])
    kv.add_vectors(words, matrix)
    return kv


def bench_analogies(questions: Path, repeat: int) -> list[tuple[str, float, float, str]]:
    rng = np.random.default_rng(0)
    words = vocabulary(questions, 30_000)
    matrix = rng.standard_normal((len(words), 100)).astype(np.float32)
    vec, kv = Vectors(tuple(words), matrix), keyed(words, matrix)
    ours_s, ours = median_time(lambda: vec.evaluate_analogies(questions, 30_000), repeat)
    theirs_s, (_, sections) = median_time(
        lambda: kv.evaluate_word_analogies(str(questions), restrict_vocab=30_000), repeat)
    same = [len(s["correct"]) for s in sections] == [
        s.correct for s in (*ours.sections, ours.total)]
    note = (f"{ours.total.answered} answered; per-section counts "
            f"{'equal' if same else 'DIFFER'} to gensim's")
    return [("analogies 30,000×100, 3CosAdd", ours_s, theirs_s, note)]


def bench_neighbors(repeat: int) -> list[tuple[str, float, float, str]]:
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(100_000)]
    matrix = rng.standard_normal((100_000, 300)).astype(np.float32)
    vec, kv = Vectors(tuple(words), matrix), keyed(words, matrix)
    queries = [words[i] for i in rng.integers(0, 100_000, 20)]
    t0 = time.perf_counter()
    vec.most_similar(queries[0], 10)  # first query also computes the row norms
    first = time.perf_counter() - t0
    kv.most_similar(queries[0], topn=10)

    def ours() -> None:
        for q in queries:
            vec.most_similar(q, 10)

    def theirs() -> None:
        for q in queries:
            kv.most_similar(q, topn=10)

    ours_s, _ = median_time(ours, repeat)
    theirs_s, _ = median_time(theirs, repeat)
    n = len(queries)
    return [("neighbours 100,000×300, per query", ours_s / n, theirs_s / n,
             f"first query incl. norms: {first * 1000:.0f} ms")]


def bench_load(repeat: int) -> list[tuple[str, float, float, str]]:
    rng = np.random.default_rng(2)
    words = tuple(f"w{i}" for i in range(50_000))
    matrix = rng.standard_normal((50_000, 128)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        Vocab(words, np.arange(50_000, 0, -1, dtype=np.int64)).save_tsv(run / "vocab.tsv")
        tensors = {"input_embeddings": matrix, "output_embeddings": matrix.copy()}
        CheckpointManager(run).save(1000, tensors, {})
        binary = Vectors(words, matrix).to_word2vec(Path(tmp) / "v.bin", binary=True)
        run_s, _ = median_time(lambda: load(run), repeat)
        ours_bin_s, _ = median_time(lambda: load(binary), repeat)
        theirs_s, _ = median_time(
            lambda: KeyedVectors.load_word2vec_format(str(binary), binary=True), repeat)
    return [("load 50,000×128 run folder (verified)", run_s, float("nan"),
             "gensim cannot read run folders"),
            ("load 50,000×128 word2vec binary", ours_bin_s, theirs_s, "")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS,
                        help="analogy questions file (questions-words.txt format)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per system (median)")
    args = parser.parse_args()
    logging.getLogger("gensim").setLevel(logging.WARNING)
    # embedlab scores with NumPy's BLAS (OpenBLAS: all cores unless OPENBLAS_NUM_THREADS says
    # otherwise); nothing here imports torch.
    blas = ", ".join(f"{lib['internal_api']} {lib['num_threads']}" for lib in threadpool_info()
                     if lib["user_api"] == "blas")
    print(f"BLAS threads: {blas}; medians of {args.repeat}")
    print(f"{'benchmark':40} {'embedlab s':>11} {'gensim s':>10}  note", flush=True)
    benches: list[Callable[[], list[tuple[str, float, float, str]]]] = []
    if args.questions.is_file():
        benches.append(lambda: bench_analogies(args.questions, args.repeat))
    else:
        print(f"(skipping analogies: {args.questions} not found; pass --questions)")
    benches += [lambda: bench_neighbors(args.repeat), lambda: bench_load(args.repeat)]
    for bench in benches:
        for name, ours, theirs, note in bench():
            print(f"{name:40} {ours:11.4f} {theirs:10.4f}  {note}", flush=True)


if __name__ == "__main__":
    main()
