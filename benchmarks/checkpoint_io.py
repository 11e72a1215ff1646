"""Checkpoint save/restore time and size (medians of --repeats runs).

Sizes: the lecture's 50,000 × 128 (two float32 matrices, ~51 MB) and 1,000,000 × 300 (two
matrices, ~2.4 GB). Save = CheckpointManager.save (write, fsync, sha256 manifest, rename, index);
restore = find_checkpoint + load_checkpoint (sha256 verification + safetensors load). The
share columns are the fraction of training time spent checkpointing: at a fixed 120 s cadence
(save / (120 + save)), and at the trainer's actual default cadence, which waits at least
max(--checkpoint-secs 120, 50 × the last save's duration) between saves (see
embedlab.training.saving.SAVE_TIME_FACTOR), so big models stay near 2%.

    .venv/bin/python benchmarks/checkpoint_io.py [--dir /tmp] [--repeats 3] [--small-only]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from embedlab.checkpoint import CheckpointManager, find_checkpoint, load_checkpoint
from embedlab.checkpoint import format as ck
from embedlab.training.saving import SAVE_TIME_FACTOR

DEFAULT_SECS = 120.0


def bench(rows: int, dim: int, repeats: int, base: Path) -> tuple[float, float, int]:
    g = np.random.default_rng(0)
    tensors = {"input_embeddings": g.random((rows, dim), dtype=np.float32),
               "output_embeddings": g.random((rows, dim), dtype=np.float32)}
    saves, loads, size = [], [], 0
    for i in range(repeats):
        run = Path(tempfile.mkdtemp(prefix="ckpt-bench-", dir=base))
        try:
            m = CheckpointManager(run)
            t0 = time.perf_counter()
            path = m.save(1000 + i, tensors, {"cursor": i}, {"loss": 1.0})
            saves.append(time.perf_counter() - t0)
            size = sum(f.stat().st_size for f in path.iterdir())
            ck._VERIFIED.clear()  # measure a cold verification, as a fresh process would do
            t0 = time.perf_counter()
            loaded, _ = load_checkpoint(find_checkpoint(run))
            loads.append(time.perf_counter() - t0)
            assert np.array_equal(loaded["input_embeddings"], tensors["input_embeddings"])
            del loaded
        finally:
            shutil.rmtree(run, ignore_errors=True)
    return statistics.median(saves), statistics.median(loads), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                    help="where to write the checkpoints (needs ~5 GB free for the big size)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per size; medians are shown")
    ap.add_argument("--small-only", action="store_true",
                    help="only the 50,000 x 128 size (skips the 2.4 GB one)")
    args = ap.parse_args()
    sizes = [(50_000, 128)] + ([] if args.small_only else [(1_000_000, 300)])
    print(f"{'shape (x2)':>16} {'size MB':>9} {'save s':>8} {'restore s':>10} "
          f"{'save MB/s':>10} {'share@120s':>11} {'share@default':>14}")
    for rows, dim in sizes:
        save, load, size = bench(rows, dim, args.repeats, args.dir)
        share = save / (DEFAULT_SECS + save)
        interval = max(DEFAULT_SECS, SAVE_TIME_FACTOR * save)
        share_default = save / (interval + save)
        print(f"{f'{rows:,}x{dim}':>16} {size / 1e6:9.1f} {save:8.3f} {load:10.3f} "
              f"{size / 1e6 / save:10.0f} {share:11.3%} {share_default:14.3%}")


if __name__ == "__main__":
    main()
