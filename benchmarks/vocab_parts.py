"""The per-word work before a run's first step, by vocabulary size: the native library's way
against NumPy's and Python's, side by side in the same process (same values, tested).

A benchmark, not a test: it prints a Markdown table. For each size it writes a ``vocab.tsv`` of
that many words (Zipf counts, words ``w0``, ``w1``... in the order a prepared corpus sorts
them) into a temporary folder and times, medians of ``--reps`` alternating runs:

- ``read vocab.tsv``: ``Vocab.load_tsv`` — the lines and counts, the check that no word comes
  twice, and the words' sha256 (a checkpoint's vocabulary hash and the start of the corpus
  fingerprint: ``Vocab.words_sha256``); natively ``tk_vocab_columns``, otherwise NumPy's
  columns, a set of the words and a join;
- ``alias table``: Walker's table of the noise words (``NoiseDistribution``); natively
  ``w2v_alias_walk``, otherwise a Python loop for the running value.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np


def _vocab_tsv(path: Path, words: int) -> None:
    counts = np.maximum(5, (1e9 / np.arange(1, words + 1)).astype(np.int64))
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for start in range(0, words, 1 << 16):
            stop = min(words, start + (1 << 16))
            f.write("".join(f"w{i}\t{c}\n" for i, c in
                            zip(range(start, stop), counts[start:stop].tolist(), strict=True)))


def _read(path: Path, lib: object) -> None:
    """Vocab.load_tsv(path) and its words' hash, by the native library ``lib`` or, for None,
    by NumPy and Python."""
    import embedlab.data.vocab_tsv as vocab_tsv
    from embedlab.data.vocab import Vocab

    real = vocab_tsv._native_library
    vocab_tsv._native_library = lambda data, build: lib  # type: ignore[assignment]
    try:
        Vocab.load_tsv(path).words_sha256()
    finally:
        vocab_tsv._native_library = real  # type: ignore[assignment]


def _timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", default="100000,500000,2300000")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    from embedlab.data.noise import NoiseDistribution, _alias_table
    from embedlab.data.vocab import Vocab
    from embedlab.engines.native import library_if

    lib = library_if(True)
    if lib is None:
        raise SystemExit("the native library does not build here")
    print(f"Machine: {platform.node()}, {platform.machine()}, "
          f"{len(os.sched_getaffinity(0))} cores; medians of {args.reps}.\n")
    print("| words | read vocab.tsv: native s | NumPy s | ratio | alias table: native s "
          "| Python s | ratio |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for words in (int(w) for w in args.words.split(",")):
            path = Path(folder) / f"vocab-{words}.tsv"
            _vocab_tsv(path, words)
            times: dict[str, list[float]] = {k: [] for k in ("rn", "rp", "an", "ap")}

            probs = NoiseDistribution(Vocab.load_tsv(path).counts).probs
            for _ in range(args.reps):
                times["rn"].append(_timed(partial(_read, path, lib)))
                times["rp"].append(_timed(partial(_read, path, None)))
                times["an"].append(_timed(partial(_alias_table, probs, native=True)))
                times["ap"].append(_timed(partial(_alias_table, probs, native=False)))
            m = {k: statistics.median(v) for k, v in times.items()}
            print(f"| {words:,} | {m['rn']:.3f} | {m['rp']:.3f} | {m['rp'] / m['rn']:.1f}x "
                  f"| {m['an']:.3f} | {m['ap']:.3f} | {m['ap'] / m['an']:.1f}x |")


if __name__ == "__main__":
    main()
