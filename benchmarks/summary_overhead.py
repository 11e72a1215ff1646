"""How much training time do summaries cost at the default cadence?

Times a training-like step (an SGNS-shaped batch: gather, GEMM against shared negatives,
index_add_ updates) and the tracker's calls on a text8-sized vocabulary (71,290 × 100), then
reports the share of wall time spent in summaries with the defaults: scalars every
``log_every`` steps, checkpoint summaries every ``checkpoint.every_secs`` seconds.

    .venv/bin/python benchmarks/summary_overhead.py [--vocab 71290] [--dim 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from embedlab.config import TrainConfig
from embedlab.track.summaries import open_tracker


@dataclass(frozen=True)
class Vocab:
    words: tuple[str, ...]
    counts: np.ndarray

    def __len__(self) -> int:
        return len(self.words)


def fake_step(w_in: torch.Tensor, w_out: torch.Tensor, g: torch.Generator) -> None:
    v = w_in.shape[0]
    centres = torch.randint(0, v, (10_240,), generator=g)  # 1,024 centres × ~10 contexts
    contexts = torch.randint(0, v, (10_240,), generator=g)
    negs = torch.randint(0, v, (5,), generator=g)
    h, c = w_in[centres], w_out[contexts]
    pos = torch.sigmoid((h * c).sum(1, keepdim=True)) - 1
    neg = torch.sigmoid(h @ w_out[negs].T)
    grad_h = pos * c + neg @ w_out[negs]
    w_in.index_add_(0, centres, grad_h, alpha=-0.025)
    w_out.index_add_(0, contexts, pos * h, alpha=-0.025)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=71_290, help="rows of the embedding matrices")
    ap.add_argument("--dim", type=int, default=100, help="columns of the embedding matrices")
    ap.add_argument("--steps", type=int, default=300, help="training steps timed per setting")
    args = ap.parse_args()
    cfg = TrainConfig()
    vocab = Vocab(tuple(f"w{i}" for i in range(args.vocab)),
                  np.arange(args.vocab, 0, -1, dtype=np.int64))
    g = torch.Generator().manual_seed(0)
    w_in = (torch.rand(args.vocab, args.dim, generator=g) - 0.5) / args.dim
    w_out = torch.zeros(args.vocab, args.dim)
    with tempfile.TemporaryDirectory() as tmp:
        tracker = open_tracker(Path(tmp), cfg, vocab=vocab, resume_step=None)
        t0 = time.perf_counter()
        for step in range(1, args.steps + 1):
            fake_step(w_in, w_out, g)
            if step % cfg.track.log_every == 0:
                tracker.log_scalars(step, {"train/loss": 1.0, "train/lr": 0.02,
                                           "train/words_per_sec": 1e6, "train/pairs_per_sec": 1e7,
                                           "train/progress": step / args.steps})
        loop_s = time.perf_counter() - t0 - tracker.seconds
        scalar_calls = args.steps // cfg.track.log_every
        scalar_s = tracker.seconds / max(scalar_calls, 1)
        before = tracker.seconds
        reps = 3
        for k in range(reps):
            tracker.log_checkpoint(args.steps + k, w_in, w_out)
        ckpt_s = (tracker.seconds - before) / reps
        before = tracker.seconds
        tracker.log_final(args.steps + reps, w_in, w_out, cfg.to_dict(), {"loss": 1.0})
        final_s = tracker.seconds - before
        tracker.close()
    step_s = loop_s / args.steps
    share_scalars = scalar_s / (cfg.track.log_every * step_s)
    share_ckpt = ckpt_s / cfg.checkpoint.every_secs
    print(f"vocab {args.vocab} x dim {args.dim}, torch threads {torch.get_num_threads()}")
    print(f"training-like step          {step_s * 1e3:8.2f} ms")
    print(f"log_scalars (per call)      {scalar_s * 1e3:8.2f} ms  every {cfg.track.log_every} "
          f"steps -> {share_scalars:.3%}")
    print(f"log_checkpoint (per call)   {ckpt_s * 1e3:8.1f} ms  every "
          f"{cfg.checkpoint.every_secs:.0f} s -> {share_ckpt:.3%}")
    print(f"log_final (once)            {final_s * 1e3:8.1f} ms")
    print(f"summary overhead at default cadence: {share_scalars + share_ckpt:.3%} (budget 3%)")


if __name__ == "__main__":
    main()
