"""release_free_memory gives a thread's freed malloc memory back (glibc, which CI runs)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


# Run in a fresh interpreter: glibc's thresholds and arenas are process state, and what earlier
# tests allocated (trainings with their own threads) decides whether this one's blocks are kept.
SCENARIO = """
import threading
from pathlib import Path

import numpy as np

from embedlab.training.memory import release_free_memory


def anon_mib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024


def work():
    # What the batch producer does: a big array freed (glibc then raises its mmap threshold),
    # then MiB-sized arrays from the heap of the thread's own arena, freed except the last
    # (which keeps the arena from shrinking at its top).
    first = np.ones(8 << 20, dtype=np.uint8)
    del first
    blocks = [np.ones(1 << 20, dtype=np.uint8) for _ in range(48)]
    held.append(np.ones(1 << 20, dtype=np.uint8))
    blocks.clear()


held = []
t = threading.Thread(target=work)
t.start()
t.join()
before = anon_mib()
released = release_free_memory()
print(released, before - anon_mib())
"""


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's; elsewhere the call is a no-op")
def test_freed_memory_of_another_thread_goes_back_to_the_os() -> None:
    out = subprocess.run([sys.executable, "-c", SCENARIO], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "True"
    assert float(out[1]) >= 24, out  # 48 MiB freed; without the trim nothing goes back


def test_without_malloc_trim_it_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    # where malloc cannot trim (musl, macOS) the trainer must still run: False, no exception
    import ctypes

    import embedlab.training.memory as memory

    class NoTrim:  # a C library without malloc_trim
        pass

    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", lambda *_: NoTrim())
    try:
        assert memory.release_free_memory() is False
    finally:
        memory._malloc_trim.cache_clear()


# The training process of the native engine must not import torch: the import alone holds
# ~140 MiB of anonymous memory and 220-280 MiB of RSS, more than the rest of a run on a
# 5M-token corpus (the peak-RSS target against gensim). The spy ends the process at the first
# attempt, naming the import chain, so a regression says where torch came from.
NO_TORCH = """
import os, sys, traceback


class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            traceback.print_stack(file=sys.stderr)
            print("TORCH IMPORTED", file=sys.stderr, flush=True)
            os._exit(3)
        return None

sys.meta_path.insert(0, NoTorch())
sys.argv = ["embedlab", *sys.argv[1:]]
from embedlab.cli import run
run()
"""


def test_a_native_run_and_the_commands_reading_it_never_import_torch(tmp_path: Path) -> None:
    """Start, a checkpoint and its summaries, Ctrl-C-free resume, evaluation during training,
    the final summaries (histograms, PCA image, projector, hparams), the demo's report, and the
    query, export and listing commands on the run."""
    sims = tmp_path / "sims.tsv"
    sims.write_text("king\tqueen\t8.5\nman\twoman\t8.3\nparis\tfrance\t7.7\ncat\tdog\t7.0\n")
    run = tmp_path / "run"
    flags = ["train", "--corpus", "demo", "--run", str(run), "--epochs", "1", "--no-progress",
             "--checkpoint-every", "40", "--eval-every", "40", "--eval-similarity", str(sims),
             "--threads", "2"]
    for extra in (["--max-steps", "50"], []):  # the second call resumes and finishes
        out = subprocess.run([sys.executable, "-c", NO_TORCH, *flags, *extra],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
    assert "resuming" in out.stderr and "planted analogies" in out.stdout
    assert '"engine": "native"' in (run / "config.json").read_text()
    assert list(run.glob("events.out.tfevents.*")) and (run / "projector_config.pbtxt").exists()
    # the commands that read a run: they start in half a second without torch's import
    for command in (["neighbors", str(run), "king", "-k", "3"],
                    ["analogy", str(run), "man", "king", "woman"],
                    ["eval", str(run), "--similarity", str(sims)],
                    ["export", str(run), "--format", "word2vec-binary"],
                    ["ckpt", str(run), "--tensors"], ["runs", str(tmp_path)],
                    ["visualize", str(run), "--words", "50", "--out", str(tmp_path / "v.png")]):
        out = subprocess.run([sys.executable, "-c", NO_TORCH, *command],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, (command, out.stderr)


def test_the_trainers_modules_leave_heavy_libraries_unimported() -> None:
    # scipy.stats (~20 MiB, 0.35 s) came in through embedlab.eval's similarity module once the
    # summaries imported eval.scoring: the peak RSS of a 1-epoch gcide8 run rose 179 -> 210 MiB.
    # Only a similarity evaluation needs scipy, and only a t-SNE plot scikit-learn.
    code = ("import sys\n"
            "import embedlab.cli.train, embedlab.training.trainer, embedlab.track.tracker\n"
            "import embedlab.training.api, embedlab.engines.native\n"
            "import embedlab.track.plots, embedlab.eval, embedlab.vectors\n"
            "print(sorted(m for m in ('scipy', 'sklearn', 'torch') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
