"""Training on big corpora: start-up, words/s, peak RSS and the final save, by vocabulary size.

A benchmark, not a test: it prints a Markdown table. It writes its corpora itself, straight into
the prepared format (``embedlab.data.prepared``'s files, ``Vocab.save_tsv``, ``write_meta``),
into ``benchmarks/_work/train-<tokens>-<vocab>/`` (kept for the next run; ``--delete`` removes
them afterwards). A corpus of T tokens with a vocabulary of about V words: lines of 20 words,
word k of V/0.97 candidates drawn from a mixture of Zipf's law (P ∝ 1/(k+1.5), the
continuous log-uniform approximation) and a uniform share that gives every candidate about 10
expected occurrences; candidates seen fewer than 5 times (min count 5) are left out, as
``embedlab prepare`` leaves them out. At 300M tokens and 2.3M words the uniform share is 8 %,
close to a natural Zipf corpus; at 30M tokens it is three quarters of the corpus.

Each measurement runs ``embedlab.train`` in a fresh child process (``--steps`` steps, default
2,000, skip-gram d100 w5 n5, 2 threads, no TensorBoard, one checkpoint: the final one):

- ``start s``: from the child's first line (before ``import embedlab``) to the first step
  (the training loop's entry);
- ``set-up s``: from the call to ``embedlab.train`` to the first step;
- ``words/s``: raw corpus words per training second over the steps;
- ``save s``: the final checkpoint (write, fsync, hash, rename);
- ``peak RSS``: the child's ``ru_maxrss``; ``matrices``: the two float32 matrices' size.

``--gensim-tokens N`` adds gensim's ``Word2Vec(corpus_file=...)``, skip-gram d100 w5 n5 with 2
workers, given each corpus's vocabulary (``build_vocab_from_freq``) and trained for one epoch on
the corpus's first N tokens, written as text (gensim reads text only; the whole corpus would be
GBs of it).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from big_corpus import _word, run_child

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / "_work"
PYTHON = Path(sys.executable)
LINE_WORDS = 20
CHUNK_LINES = 500_000  # 10M tokens per NumPy pass
MIN_COUNT = 5
TAIL_EXPECTED = 10  # expected occurrences the uniform share gives each candidate


def _ranks(seed: int, chunk: int, lines: int, candidates: int, uniform: float) -> np.ndarray:
    """The candidate ranks of ``lines`` lines of chunk ``chunk`` (int64, lines × 20)."""
    rng = np.random.default_rng([seed, chunk])
    u = rng.random(lines * LINE_WORDS)
    zipf = np.exp(u * np.log(candidates + 1.0)).astype(np.int64) - 1
    flat = rng.random(len(u)) < uniform
    zipf[flat] = rng.integers(0, candidates, int(flat.sum()))
    np.clip(zipf, 0, candidates - 1, out=zipf)
    return zipf.reshape(lines, LINE_WORDS)


def generate(out: Path, tokens: int, vocab: int, seed: int = 1) -> None:
    """Write a prepared corpus of ``tokens`` raw tokens and about ``vocab`` words to ``out``
    (see the module's docstring), through a temporary sibling renamed into place."""
    from embedlab.data.prepared import (
        ENDS_FILE,
        FORMAT,
        FORMAT_VERSION,
        IDS_FILE,
        META_FILE,
        VOCAB_FILE,
        write_meta,
    )
    from embedlab.data.vocab import Vocab

    candidates = int(vocab / 0.97)
    uniform = min(0.9, TAIL_EXPECTED * candidates / tokens)
    lines = tokens // LINE_WORDS
    chunks = [(c, min(CHUNK_LINES, lines - start))
              for c, start in enumerate(range(0, lines, CHUNK_LINES))]
    counts = np.zeros(candidates, dtype=np.int64)
    for c, n in chunks:
        counts += np.bincount(_ranks(seed, c, n, candidates, uniform).ravel(),
                              minlength=candidates)
    names = np.array([_word(k) for k in range(candidates)])
    kept = np.flatnonzero(counts >= MIN_COUNT)
    kept = kept[np.argsort(names[kept], kind="stable")]  # ties by word ascending
    kept = kept[np.argsort(-counts[kept], kind="stable")]  # then count descending
    new_id = np.full(candidates, -1, dtype=np.int64)
    new_id[kept] = np.arange(len(kept))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    written = sentences = 0
    with open(tmp / IDS_FILE, "wb") as ids_file, open(tmp / ENDS_FILE, "wb") as ends_file:
        for c, n in chunks:
            mapped = new_id[_ranks(seed, c, n, candidates, uniform)]
            keep = mapped >= 0
            mapped[keep].astype("<u4").tofile(ids_file)
            per_line = keep.sum(axis=1)
            ends = written + np.cumsum(per_line)[per_line > 0]
            ends.astype("<i8").tofile(ends_file)
            written += int(per_line.sum())
            sentences += len(ends)
    Vocab(tuple(names[kept].tolist()), counts[kept]).save_tsv(tmp / VOCAB_FILE)
    write_meta(tmp / META_FILE, {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "source": f"synthetic: {tokens} tokens, {candidates} candidates, seed {seed}",
        "source_files": [], "lowercase": True, "min_count": MIN_COUNT, "max_vocab": None,
        "unk": None, "max_distinct": 10_000_000, "raw_tokens": lines * LINE_WORDS,
        "tokens": written, "sentences": sentences, "vocab_size": len(kept),
        "invalid_utf8": 0, "pruned": None})
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)


EMBEDLAB_CHILD = r"""
import time
began = time.perf_counter()
import json, resource, sys
import embedlab
from embedlab.training import saving, trainer

marks = {}
loop = trainer.train_loop
def timed_loop(run, out):
    marks["first_step"] = time.perf_counter()
    return loop(run, out)
trainer.train_loop = timed_loop
save = saving.Saver.save
def timed_save(self, tracker, **how):  # final=, stopping=, at_max_steps=: as Saver.save's
    start = time.perf_counter()
    result = save(self, tracker, **how)
    marks["saves"] = marks.get("saves", 0) + 1
    marks["save"] = time.perf_counter() - start  # the last one: after the last step
    return result
saving.Saver.save = timed_save

corpus, run, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
called = time.perf_counter()
result = embedlab.train(corpus, run=run, max_steps=steps, threads=2, tensorboard=False,
                        progress=False, checkpoint_secs=86400)
print(json.dumps({
    "start": marks["first_step"] - began, "setup": marks["first_step"] - called,
    "save": marks["save"], "saves": marks["saves"], "step": result.step,
    "words": result.words_seen, "train_seconds": result.train_seconds,
    "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

GENSIM_CHILD = r"""
import json, resource, sys, time
from gensim.models import Word2Vec
vocab_file, text, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
counts = {}
with open(vocab_file, encoding="utf-8") as f:
    for line in f:
        word, count = line.rstrip("\n").split("\t")
        counts[word] = int(count)
model = Word2Vec(vector_size=100, window=5, negative=5, sg=1, min_count=5, workers=2)
model.build_vocab_from_freq(counts)
began = time.perf_counter()
model.train(corpus_file=text, total_words=tokens, epochs=1)
seconds = time.perf_counter() - began
print(json.dumps({"seconds": seconds, "words": tokens, "vocab": len(model.wv),
                  "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def write_text(prepared: Path, out: Path, tokens: int) -> int:
    """The first ``tokens`` (about) in-vocabulary tokens of ``prepared`` as text, one sentence a
    line, for gensim's ``corpus_file``; returns the tokens written."""
    from embedlab.data.prepared import PreparedCorpus

    pc = PreparedCorpus.open(prepared)
    words = np.array(pc.vocab.words)
    written = start = 0
    with open(out, "w", encoding="utf-8") as f:
        for end in pc.sentence_ends:
            f.write(" ".join(words[pc.ids[start:int(end)]].tolist()) + "\n")
            written += int(end) - start
            start = int(end)
            if written >= tokens:
                break
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="30000000,300000000")
    ap.add_argument("--vocab", default="2300000,43000")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--gensim-tokens", type=int, default=0,
                    help="train gensim on this many tokens of each corpus (0: skip)")
    ap.add_argument("--delete", action="store_true", help="remove the corpora afterwards")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    corpora = [(int(t), int(v)) for t in args.tokens.split(",") for v in args.vocab.split(",")]
    for tokens, vocab in corpora:
        folder = WORK / f"train-{tokens}-{vocab}"
        if not (folder / "meta.json").exists():
            print(f"generating {folder} ...", file=sys.stderr)
            began = time.perf_counter()
            generate(folder, tokens, vocab)
            print(f"  {time.perf_counter() - began:.0f} s", file=sys.stderr)
    rows: dict[tuple[int, int], list[dict[str, Any]]] = {c: [] for c in corpora}
    for rep in range(args.reps):
        for tokens, vocab in corpora:  # alternating, so drift in the machine hits all alike
            folder, run = WORK / f"train-{tokens}-{vocab}", WORK / "big-training-run"
            shutil.rmtree(run, ignore_errors=True)
            r = run_child(EMBEDLAB_CHILD, str(folder), str(run), str(args.steps))
            r["size"] = sum(f.stat().st_size for f in run.rglob("*.safetensors"))
            shutil.rmtree(run)
            print(f"rep {rep + 1} {tokens:,} x {vocab:,}: {r}", file=sys.stderr)
            rows[(tokens, vocab)].append(r)
    print(table(rows))
    if args.gensim_tokens:
        print(gensim_table(corpora, args.gensim_tokens))
    if args.delete:
        for tokens, vocab in corpora:
            shutil.rmtree(WORK / f"train-{tokens}-{vocab}")


def table(rows: dict[tuple[int, int], list[dict[str, Any]]]) -> str:
    from embedlab.data.prepared import PreparedCorpus

    lines = [f"Machine: {platform.node()}, {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores; medians of {len(next(iter(rows.values())))} run(s).", "",
             "| raw tokens | vocabulary | start s | set-up s | steps | words/s | save s | "
             "checkpoint | matrices | peak RSS |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (tokens, vocab), results in rows.items():
        words = len(PreparedCorpus.open(WORK / f"train-{tokens}-{vocab}").vocab)
        med = {k: statistics.median(r[k] for r in results)
               for k in ("start", "setup", "save", "words", "train_seconds", "rss_kib", "size")}
        matrices = 2 * words * 100 * 4 / 2**20
        lines.append(f"| {tokens / 1e6:,.0f}M | {words:,} | {med['start']:.2f} | "
                     f"{med['setup']:.2f} | {results[0]['step']:,} | "
                     f"{med['words'] / med['train_seconds'] / 1e6:.2f}M | {med['save']:.2f} | "
                     f"{med['size'] / 2**20:,.0f} MiB | {matrices:,.0f} MiB | "
                     f"{med['rss_kib'] / 1024:,.0f} MiB |")
    return "\n".join(lines)


def gensim_table(corpora: list[tuple[int, int]], tokens: int) -> str:
    lines = ["", f"gensim 4 (skip-gram d100 w5 n5, 2 workers, the corpus's vocabulary through "
             f"build_vocab_from_freq, 1 epoch of its first ~{tokens:,} tokens as text):", "",
             "| raw tokens | vocabulary | words/s | peak RSS |", "|---|---|---|---|"]
    for corpus_tokens, vocab in corpora:
        folder = WORK / f"train-{corpus_tokens}-{vocab}"
        text = WORK / f"train-{corpus_tokens}-{vocab}.txt"
        written = write_text(folder, text, tokens)
        r = run_child(GENSIM_CHILD, str(folder / "vocab.tsv"), str(text), str(written))
        text.unlink()
        lines.append(f"| {corpus_tokens / 1e6:,.0f}M | {r['vocab']:,} | "
                     f"{r['words'] / r['seconds'] / 1e6:.2f}M | {r['rss_kib'] / 1024:,.0f} MiB |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
