"""How much training time do summaries cost at the default cadence?

Times a training-like step (an SGNS-shaped batch in numpy: gather, GEMM against shared
negatives, scattered updates) and the tracker's calls on a text8-sized vocabulary
(71,290 × 100 float32, as the trainer hands them over), then reports the share of wall time
spent in summaries with the defaults: scalars every ``log_every`` steps, checkpoint summaries
every ``checkpoint.every_secs`` seconds. Per-call figures are medians over ``--reps`` calls.

    .venv/bin/python benchmarks/summary_overhead.py [--vocab 71290] [--dim 100] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embedlab.config import TrainConfig
from embedlab.eval.scoring import row_norms
from embedlab.track.protos import histogram_summary
from embedlab.track.tensorboard import one_blas_thread
from embedlab.track.tracker import open_tracker


@dataclass(frozen=True)
class Vocab:
    words: tuple[str, ...]
    counts: np.ndarray

    def __len__(self) -> int:
        return len(self.words)


def fake_step(w_in: np.ndarray, w_out: np.ndarray, rng: np.random.Generator) -> None:
    v = w_in.shape[0]
    centres = rng.integers(0, v, 10_240)  # 1,024 centres × ~10 contexts
    contexts = rng.integers(0, v, 10_240)
    negs = rng.integers(0, v, 5)
    h, c, n = w_in[centres], w_out[contexts], w_out[negs]
    pos = 1 / (1 + np.exp(-np.einsum("ij,ij->i", h, c)))[:, None] - 1
    neg = 1 / (1 + np.exp(-(h @ n.T)))
    grad_h = pos * c + neg @ n
    np.add.at(w_in, centres, -0.025 * grad_h)
    np.add.at(w_out, contexts, -0.025 * pos * h)


def median_ms(call: Callable[[int], object], reps: int) -> float:
    """Median wall time of ``call(k)`` for k in 0..reps-1, in milliseconds."""
    times = []
    for k in range(reps):
        t = time.perf_counter()
        call(k)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=71_290, help="rows of the embedding matrices")
    ap.add_argument("--dim", type=int, default=100, help="columns of the embedding matrices")
    ap.add_argument("--steps", type=int, default=300, help="training steps timed")
    ap.add_argument("--reps", type=int, default=5, help="calls timed per checkpoint summary")
    args = ap.parse_args()
    cfg = TrainConfig()
    vocab = Vocab(tuple(f"w{i}" for i in range(args.vocab)),
                  np.arange(args.vocab, 0, -1, dtype=np.int64))
    rng = np.random.default_rng(0)
    w_in = (rng.random((args.vocab, args.dim), dtype=np.float32) - 0.5) / args.dim
    w_out = np.zeros((args.vocab, args.dim), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        tracker = open_tracker(Path(tmp), cfg, vocab=vocab, resume_step=None)
        scalar_times = []
        t0 = time.perf_counter()
        for step in range(1, args.steps + 1):
            fake_step(w_in, w_out, rng)
            if step % cfg.track.log_every == 0:
                before = tracker.seconds
                tracker.log_scalars(step, {"train/loss": 1.0, "train/lr": 0.02,
                                           "train/words_per_sec": 1e6, "train/pairs_per_sec": 1e7,
                                           "train/progress": step / args.steps})
                scalar_times.append(tracker.seconds - before)
        step_s = (time.perf_counter() - t0 - tracker.seconds) / args.steps
        scalar_ms = statistics.median(scalar_times) * 1e3 if scalar_times else 0.0
        ckpt_ms = median_ms(lambda k: tracker.log_checkpoint(args.steps + k, w_in, w_out),
                            args.reps)
        with one_blas_thread():  # as inside log_checkpoint
            hist_ms = median_ms(lambda k: [histogram_summary("h", x) for w in (w_in, w_out)
                                           for x in (w, row_norms(w, low_memory=True))],
                                args.reps)
        final_ms = median_ms(lambda k: tracker.log_final(args.steps + args.reps + k, w_in, w_out,
                                                         cfg.to_dict(), {"loss": 1.0}), 1)
        tracker.close()
    share_scalars = scalar_ms / 1e3 / (cfg.track.log_every * step_s)
    share_ckpt = ckpt_ms / 1e3 / cfg.checkpoint.every_secs
    print(f"vocab {args.vocab} x dim {args.dim}, medians of {args.reps} checkpoint calls")
    print(f"training-like step          {step_s * 1e3:8.2f} ms")
    print(f"log_scalars (per call)      {scalar_ms:8.2f} ms  every {cfg.track.log_every} "
          f"steps -> {share_scalars:.3%}")
    print(f"log_checkpoint (per call)   {ckpt_ms:8.1f} ms  every "
          f"{cfg.checkpoint.every_secs:.0f} s -> {share_ckpt:.3%}")
    print(f"  of which 4 histograms     {hist_ms:8.1f} ms")
    print(f"log_final (once)            {final_ms:8.1f} ms")
    print(f"summary overhead at default cadence: {share_scalars + share_ckpt:.3%} (budget 3%)")


if __name__ == "__main__":
    main()
