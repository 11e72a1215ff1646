"""The CUDA engine's own throughput, in one process: chunk building and steps, without the
command around them (start-up, the loop, checkpoints, summaries; ``benchmarks/gpu.py`` measures
the command end to end).

A benchmark, not a test: it prints a Markdown table. The corpus is a synthetic Zipf stream
(``--tokens`` ids over ``--vocab`` words, sentences of ~1,000 words, subsampling 1e-3), so the
numbers depend on the vocabulary and the dimension, not on a file. For each configuration:
``--reps`` timed passes over ``--chunks`` chunks of 2^18 positions after one warm-up chunk
(Triton compiles the kernels and the step graph is captured there); the medians are reported.

- ``words/s``: positions of the corpus consumed per second (subsampled ones count, as the
  schedule and gensim count them), chunk building included;
- ``step µs``: the median step's GPU time (graph replays only, CUDA events);
- ``tiles``, ``rows``: the median GPU µs of each of a step's two launches (the centre tiles;
  both matrices' rows), launched eagerly one at a time (so each includes a launch's fixed
  cost);
- ``build ms``: what is left of a chunk's building once the engine builds each chunk while
  the one before it trains (CUDA events).

``--variants`` measures each configuration under several launch settings (the fields of
:class:`embedlab.engines.cuda_engine.Kernels`, as ``$EMBEDLAB_CUDA_KERNELS`` spells them;
``default`` is the defaults), and prints, for each, the sha256 of the parameters after the
same steps: a setting that keeps the first one's bits says so (``same bits``).

Run on a GPU machine: ``PYTHONPATH=src python3 benchmarks/gpu_step.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embedlab.data.batchspec import SpecBatchStream
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Cursor, keep_probabilities
from embedlab.engines import cuda_batches
from embedlab.engines.cuda_engine import KERNELS_ENV, CudaBatches, CudaEngine
from embedlab.engines.params import init_params
from embedlab.engines.step import StepConfig, step_config
from embedlab.engines.stepping import Schedule
from embedlab.seeding import mt19937_rng


def zipf_corpus(tokens: int, vocab: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ids drawn from a Zipf law (exponent 1) over ``vocab`` words, most frequent first."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    cdf = np.cumsum(p / p.sum())
    ids = np.searchsorted(cdf, rng.random(tokens)).astype(np.uint32)
    ids = np.minimum(ids, vocab - 1)
    ends = np.arange(1000, tokens, 1000, dtype=np.int64)
    return ids, np.append(ends, tokens)


def runner(ids: np.ndarray, ends: np.ndarray, *, dim: int, model: str, loss: str,
           batch: int) -> CudaBatches:
    from embedlab.config import ModelConfig, OptimConfig, TrainConfig

    vocab = int(ids.max()) + 1
    counts = np.bincount(ids, minlength=vocab) + 1
    cfg = TrainConfig(model=ModelConfig(model=model, loss=loss, dim=dim),
                      optim=OptimConfig(batch_size=batch))
    plan = step_config(cfg)
    stream = SpecBatchStream(ids, ends, keep_probabilities(counts, 1e-3),
                             NoiseDistribution(counts), window=5, batch_size=batch,
                             group=plan.step.group, noise_per_group=plan.noise_per_group,
                             seed=1, epochs=1, pad_to=plan.pad_to, interleave=2)
    params = init_params(vocab, dim, init="centered", nce=loss == "nce",
                         rng=mt19937_rng(1, "init"))
    step: StepConfig = plan.step
    log_kq = stream.noise.log_expected_count(5) if loss == "nce" else None
    engine = CudaEngine(step, params, log_kq, stream.rows)
    return CudaBatches(engine, stream, Schedule(0.025, 1e-4, stream.n_tokens))


def measure(r: CudaBatches, chunks: int, reps: int) -> dict[str, Any]:
    """Median words/s over ``reps`` passes of ``chunks`` chunks, after one warm-up chunk."""
    s = r.s
    # compile, capture the graph; a call that may take more steps than a chunk's goes on into
    # the next chunk, so each call below is given its chunk's batches
    r.run(Cursor(0, 0, 0), 0, r._build(0, 0)[0].n_batches)
    rates, steps_us, builds_ms = [], [], []
    for rep in range(reps):
        torch.cuda.synchronize()
        began = time.perf_counter()
        words = 0
        for c in range(1 + rep * chunks, 1 + (rep + 1) * chunks):
            c %= s.n_chunks
            e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            e0.record()
            info, _ = r._build(0, c)  # built ahead (prefetched) except the first
            e1.record()
            done = r.run(Cursor(0, c, 0), c * s.chunk_tokens, info.n_batches)
            e2.record()
            words += int(info.words_done[-1]) - c * s.chunk_tokens
            torch.cuda.synchronize()
            builds_ms.append(e0.elapsed_time(e1))
            steps_us.append(e1.elapsed_time(e2) * 1000 / max(1, len(done)))
        torch.cuda.synchronize()
        rates.append(words / (time.perf_counter() - began))
    return {"words_per_s": statistics.median(rates), "runs": rates,
            "step_us": statistics.median(steps_us), "build_ms": statistics.median(builds_ms)}


def breakdown(r: CudaBatches, steps: int = 50) -> dict[str, float]:
    """Median GPU µs of each launch of a step (eager launches, one CUDA event pair each), on
    the first chunk's first ``steps`` batches."""
    from embedlab.engines.cuda_engine import launch_apply, launch_tiles

    info, slot = r._build(0, 0)
    buf, engine, batch = r.bufs[slot], r.engine, r.s.batch_size
    buf.step.fill_(0)
    times: dict[str, list[float]] = {"tiles": [], "rows": []}
    for _ in range(min(steps, info.n_batches)):
        for name, launch in (("tiles", lambda: launch_tiles(engine, buf, batch)),
                             ("rows", lambda: launch_apply(engine, buf))):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            launch()
            e1.record()
            torch.cuda.synchronize()
            times[name].append(e0.elapsed_time(e1) * 1000)
        buf.step += 1
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=20_000_000)
    ap.add_argument("--chunks", type=int, default=12)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--configs", default="100:43000:16,100:43000:32,300:43000:16,300:1000000:16,"
                    "100:43000:16:cbow",
                    help="comma-separated dim:vocab:tile[:model]")
    ap.add_argument("--variants", default="default",
                    help="semicolon-separated launch settings, e.g. "
                    "'default;split=4,grad_slice=32'")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    rows = []
    corpora: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for spec in args.configs.split(","):
        parts = spec.split(":")
        dim, vocab, tile = int(parts[0]), int(parts[1]), int(parts[2])
        model = parts[3] if len(parts) > 3 else "skipgram"
        if vocab not in corpora:
            corpora[vocab] = zipf_corpus(args.tokens, vocab)
        cuda_batches.TILE_ROWS = tile
        first_sha = None
        for variant in args.variants.split(";"):
            os.environ[KERNELS_ENV] = "" if variant.strip() == "default" else variant.strip()
            try:
                r = runner(*corpora[vocab], dim=dim, model=model, loss="neg", batch=2048)
                m = measure(r, args.chunks, args.reps)
                m.update(breakdown(r))
                m["sha256"] = hashlib.sha256(b"".join(
                    t.tobytes() for t in r.engine.state_dict().values())).hexdigest()
                m["kernels"] = str(r.engine.kernels)
            except Exception as exc:  # a failing configuration is reported, the others run
                print(f"{spec} [{variant}]: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            first_sha = first_sha or m["sha256"]
            m.update(dim=dim, vocab=vocab, tile=tile, model=model, variant=variant,
                     same_bits=m["sha256"] == first_sha)
            rows.append(m)
            print(f"{spec} [{variant}]: {m['words_per_s'] / 1e6:.1f}M words/s, step "
                  f"{m['step_us']:.0f} µs (tiles {m['tiles']:.0f}, rows {m['rows']:.0f} µs, "
                  f"eager), build "
                  f"{m['build_ms']:.2f} ms, sha256 {m['sha256'][:12]}", flush=True)
            del r
            torch.cuda.empty_cache()
    print(f"\n{torch.cuda.get_device_name(0)}, torch {torch.__version__}\n")
    print("| model | dim | vocabulary | tile | launch settings | words/s (median of 3) | "
          "step µs | tiles µs | rows µs | chunk build ms | bits |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in rows:
        runs = ", ".join(f"{x / 1e6:.1f}" for x in m["runs"])
        bits = "same bits" if m["same_bits"] else f"differ ({m['sha256'][:8]})"
        print(f"| {m['model']} | {m['dim']} | {m['vocab']:,} | {m['tile']} | {m['variant']} | "
              f"{m['words_per_s'] / 1e6:.1f}M ({runs}) | {m['step_us']:.0f} | "
              f"{m['tiles']:.0f} | {m['rows']:.0f} | "
              f"{m['build_ms']:.2f} | {bits} |")
    if args.out:
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(0),
                                        "torch": torch.__version__, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
