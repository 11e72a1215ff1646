"""release_free_memory gives a thread's freed malloc memory back (glibc, which CI runs)."""

from __future__ import annotations

import platform
import re
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
    assert "resuming" in out.stderr
    # the report's counts say what they count (n/m read as "n of m answered")
    assert re.search(r"^planted analogies \(3CosAdd\): [\d.]+% \(\d+ correct of \d+ answered, "
                     r"\d+ skipped\)$", out.stdout, re.MULTILINE), out.stdout
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


# ---- the estimate before training ------------------------------------------------------------

def test_the_estimate_counts_the_matrices_tables_and_batches() -> None:
    from embedlab.training.memory import CHUNK_TOKENS, memory_need

    need = memory_need(1000, 50, loss="neg", window=5)
    assert need.matrices == 2 * 1000 * 50 * 4
    assert memory_need(1000, 50, loss="nce", window=5).matrices == need.matrices + 4 * 1000
    assert memory_need(1000, 50, loss="hs", window=5).matrices == (1000 + 999) * 50 * 4
    assert need.batches == 3 * CHUNK_TOKENS * (8 + 8 + 11 + 4 + 4)  # any corpus length
    assert need.total == need.matrices + need.tables + need.batches


def test_micro_batches_in_the_chunk_order_hold_their_groups_chunks() -> None:
    """A process holds its own chunks of the group it trains and of the next one."""
    from embedlab.training.memory import CHUNKS_IN_FLIGHT, chunks_in_flight

    assert chunks_in_flight(1, "chunks", 1) == CHUNKS_IN_FLIGHT
    assert chunks_in_flight(4, "consecutive", 2) == CHUNKS_IN_FLIGHT
    assert chunks_in_flight(4, "chunks", 1) == 8
    assert chunks_in_flight(4, "chunks", 4) == 2
    assert chunks_in_flight(16, "chunks", 2) == 16


def test_available_memory_reads_meminfo() -> None:
    from embedlab.training.memory import available_memory

    found = available_memory()
    if platform.system() != "Linux":
        pytest.skip("/proc/meminfo is Linux's")
    assert found is not None and found[0] > 0


def _little_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.training import memory

    monkeypatch.setattr(memory, "available_memory", lambda: (20 << 20, "MemAvailable"))


def test_a_run_that_does_not_fit_is_refused_by_the_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.cli import main
    from embedlab.testing import write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    _little_memory(monkeypatch)
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--corpus", str(corpus), "--run", str(run), "--dim", "8000",
              "--min-count", "1", "--no-tensorboard", "--threads", "1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("embedlab: error: this run needs about ")
    # below a GiB in MiB: "0.0 GiB available" read as none at all
    assert "more than the 20.0 MiB available (MemAvailable); pass a smaller --dim or " \
           "--max-vocab" in err[0] and err[0].endswith("or a larger --min-count")
    assert "words x 8000 dimensions: vectors" in err[0]
    assert not run.exists()  # nothing of the run was left behind


def test_a_run_that_does_not_fit_is_refused_by_train(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab
    from embedlab.errors import InputError
    from embedlab.testing import write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    _little_memory(monkeypatch)
    with pytest.raises(InputError) as info:
        embedlab.train(str(corpus), run=tmp_path / "run", dim=8000, min_count=1,
                       tensorboard=False, threads=1)
    assert "pass a smaller dim= or max_vocab=" in str(info.value)
    assert str(info.value).endswith("or a larger min_count=")
    assert not (tmp_path / "run").exists()


def test_a_prepared_corpus_that_does_not_fit_is_told_to_prepare_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A prepared folder fixes its vocabulary (train refuses --max-vocab or --min-count that
    differ from it), so the fix named is --dim or another `embedlab prepare`."""
    from embedlab.cli import main
    from embedlab.testing import write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    prepared = tmp_path / "prepared"
    main(["prepare", str(corpus), "--out", str(prepared), "--min-count", "1"])
    capsys.readouterr()
    _little_memory(monkeypatch)
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--corpus", str(prepared), "--run", str(run), "--dim", "8000",
              "--no-tensorboard", "--threads", "1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("embedlab: error: this run needs about ")
    assert err[0].endswith("(MemAvailable); pass a smaller --dim, or run 'embedlab prepare' "
                           "again with a smaller --max-vocab or a larger --min-count (and "
                           "--force, to replace the folder)")
    assert not run.exists()


def test_a_resumed_run_that_does_not_fit_is_told_where_to_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Resumed, a run keeps its vocabulary and dimensions: no flag makes it smaller."""
    from embedlab.cli import main
    from embedlab.testing import write_zipf_corpus

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    run = tmp_path / "run"
    args = ["train", "--corpus", str(corpus), "--run", str(run), "--dim", "16", "--min-count",
            "1", "--no-tensorboard", "--threads", "1", "--batch-size", "64"]
    main([*args, "--max-steps", "2"])
    capsys.readouterr()
    saved = sorted(p.name for p in (run / "checkpoints").iterdir())
    monkeypatch.setattr("embedlab.training.memory.available_memory",
                        lambda: (1 << 10, "MemAvailable"))
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--max-steps", "4"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("embedlab: error: this run needs about ")
    assert err[-1].endswith("; resume it where more memory is free: its vocabulary and "
                            "dimensions are those it was started with")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == saved


def test_a_step_of_millions_of_centres_is_counted_and_its_batch_size_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A step's arrays grow with --batch-size (about 1.8 KB a centre at dim 100 on the native
    kernel: 10M centres take 18 GB on any corpus). Refused before the run is made, naming the
    batch size that fits."""
    from embedlab.cli import main
    from embedlab.errors import InputError
    from embedlab.testing import write_zipf_corpus
    from embedlab.training import memory

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    assert memory.step_bytes(2048, 100, 5, "native") < 8 << 20  # the default: a few MiB
    need = memory.memory_need(1000, 100, loss="neg", window=5, batch_size=10_000_000)
    assert need.batches >= 10_000_000 * 1800
    monkeypatch.setattr(memory, "available_memory", lambda: (8 << 30, "MemAvailable"))
    with pytest.raises(InputError) as info:
        memory.check_memory(1000, 100, loss="neg", window=5, batch_size=10_000_000)
    assert str(info.value) == (
        "this run needs about 19.6 GiB of memory, 19.6 GiB of it for a step of 10,000,000 "
        "centres, more than the 8.0 GiB available (MemAvailable); pass a smaller --batch-size "
        "(--batch-size 3600000 would fit)")
    # the cuda engine's step is in the GPU's memory; a suggested --window counts the step too
    assert memory.step_bytes(10_000_000, 100, 5, "cuda") == 0
    room = memory.memory_need(2_000_000, 100, loss="neg", window=5,
                              batch_size=200_000).total + (1 << 20)
    monkeypatch.setattr(memory, "available_memory", lambda: (room, "MemAvailable"))
    with pytest.raises(InputError) as info:  # 10 would fit without the step's arrays
        memory.check_memory(2_000_000, 100, loss="neg", window=20, batch_size=200_000)
    found = re.search(r"--window (\d+) would fit", str(info.value))
    assert found is not None and found.group(1) == "5"
    memory.check_memory(2_000_000, 100, loss="neg", window=5, batch_size=200_000)
    monkeypatch.setattr(memory, "available_memory", lambda: (8 << 30, "MemAvailable"))
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--run", str(run), "--corpus", str(corpus), "--batch-size", "10000000",
              "--threads", "1", "--no-tensorboard"])
    assert exit_info.value.code == 2 and not run.exists()
    assert "for a step of 10,000,000 centres" in capsys.readouterr().err


def test_the_noise_words_of_a_huge_negative_are_counted_and_the_flag_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk holds S noise ids (int64) per group of centres, S = ⌈4/3·K·(window+1)⌉: a few
    MiB at K = 5, hundreds of GiB at K = 10^6, which NumPy failed to allocate with a
    MemoryError. Refused before the run is made, naming the option that sets S."""
    import embedlab
    from embedlab.errors import InputError
    from embedlab.testing import write_zipf_corpus
    from embedlab.training import memory

    assert memory.noise_bytes(40, 32) < 8 << 20  # the defaults
    assert memory.noise_bytes(8_000_000, 32, chunks=1) == 8192 * 8_000_000 * 8
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    monkeypatch.setattr(memory, "available_memory", lambda: (8 << 30, "MemAvailable"))
    for options, fix in (({"negative": 10**6}, "pass a smaller negative (word2vec's are 5 to "
                                               "25)"),
                         ({"shared_negatives": 10**7}, "pass a smaller shared_negatives")):
        with pytest.raises(InputError) as info:
            embedlab.train(corpus=corpus, run=tmp_path / "run", threads=1, tensorboard=False,
                           progress=False, max_steps=1, **options)
        assert re.fullmatch(r"this run needs about [\d.]+ GiB of memory, [\d.]+ GiB of it for "
                            r"the noise words of its batches, more than the 8\.0 GiB available "
                            r"\(MemAvailable\); " + re.escape(fix), str(info.value)), info.value
        assert not (tmp_path / "run").exists()


def test_the_refusal_names_a_vocabulary_that_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.errors import InputError
    from embedlab.training import memory

    monkeypatch.setattr(memory, "available_memory", lambda: (1 << 30, "the cgroup's memory limit"))
    with pytest.raises(InputError) as info:
        memory.check_memory(2_300_000, 100, loss="neg", window=5)
    message = str(info.value)
    assert message.startswith("this run needs about 1.9 GiB of memory (2,300,000 words x 100 "
                              "dimensions: vectors 1.7 GiB, vocabulary tables 157.9 MiB, "
                              "batches 26.2 MiB)")
    assert "more than the 1.0 GiB available (the cgroup's memory limit)" in message
    assert "(--max-vocab 1000000 would fit)" in message
    memory.check_memory(1_000_000, 100, loss="neg", window=5)  # that one does, with a margin
    assert memory.memory_need(1_000_000, 100, loss="neg", window=5).total < 0.91 * (1 << 30)
    with pytest.raises(InputError) as info:  # a prepared folder: the size is prepare's flag
        memory.check_memory(2_300_000, 100, loss="neg", window=5, shape="prepared")
    assert str(info.value).endswith(
        "; pass a smaller --dim, or run 'embedlab prepare' again with a smaller --max-vocab "
        "(--max-vocab 1000000 would fit) or a larger --min-count (and --force, to replace the "
        "folder)")  # without --force, prepare refuses the folder that is there


def test_where_no_vocabulary_fits_a_narrower_window_is_the_fix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The batches' buffers alone exceed the memory at window 5: --max-vocab could not help,
    a narrower window does, and the one named fits."""
    from embedlab.errors import InputError
    from embedlab.training import memory

    need = memory.memory_need(2, 8, loss="neg", window=5).total
    room = (need + memory.memory_need(2, 8, loss="neg", window=4).total) // 2
    monkeypatch.setattr(memory, "available_memory", lambda: (room, "MemAvailable"))
    with pytest.raises(InputError) as info:
        memory.check_memory(2, 8, loss="neg", window=5)
    assert str(info.value).endswith("; pass a smaller --window (batches hold 11 bytes of context "
                                    "mask per token; --window 4 would fit)")
    memory.check_memory(2, 8, loss="neg", window=4)  # the fix, followed


@pytest.mark.parametrize("shape", ["raw", "prepared"])
def test_a_window_too_wide_is_named_as_the_cause(monkeypatch: pytest.MonkeyPatch,
                                                 shape: str) -> None:
    # --window 100000 needed 146 GiB of batches, and the refusal asked for a smaller --dim
    from embedlab.errors import InputError
    from embedlab.training import memory

    monkeypatch.setattr(memory, "available_memory", lambda: (8 << 30, "MemAvailable"))
    with pytest.raises(InputError) as info:
        memory.check_memory(40_000, 100, loss="neg", window=100_000,
                            shape=shape)  # type: ignore[arg-type]
    assert str(info.value).endswith("; pass a smaller --window (batches hold 200001 bytes of "
                                    "context mask per token; --window 10 would fit)")
    memory.check_memory(40_000, 100, loss="neg", window=10, shape=shape)  # type: ignore[arg-type]


def test_a_checkpoint_that_cannot_fit_on_the_disk_is_refused_and_keep_warned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A checkpoint that cannot fit is refused before any training (its save would fail after
    it), and --keep checkpoints that cannot all fit are said."""
    import shutil
    from collections import namedtuple

    from embedlab.errors import InputError
    from embedlab.training import memory

    usage = namedtuple("usage", "total used free")
    free = [10 << 30]
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(0, 0, free[0]))
    run = tmp_path / "runs" / "new"  # not made yet: its nearest folder's disk
    memory.check_disk(run, 1 << 30, keep=5)
    assert capsys.readouterr().err == ""
    memory.check_disk(run, 2 << 30, keep=5)
    assert capsys.readouterr().err == (
        f"embedlab: warning: --keep 5 keeps up to 6 checkpoints of about 2.0 GiB while one is "
        f"saved (12.0 GiB), more than the 10.0 GiB free on the disk of {tmp_path}: a save will "
        "fail once it fills; pass a smaller --keep, or free space\n")
    with pytest.raises(InputError) as info:
        memory.check_disk(run, 12 << 30, keep=5)
    assert str(info.value) == (
        f"a checkpoint of this run takes about 12.0 GiB, and its logs 64.0 MiB to start with, "
        f"more than the 10.0 GiB free on the disk of {tmp_path}; free space there, pass another "
        "--run, or a smaller --dim or vocabulary")
    # a resumed run's kept checkpoints are on the disk already: one more is what it needs
    memory.check_disk(run, 2 << 30, keep=5, kept=5)
    assert capsys.readouterr().err == ""
    with pytest.raises(InputError, match=r"; free space there: the run's dimensions and "
                                         r"vocabulary are its own$"):
        memory.check_disk(run, 12 << 30, keep=5, kept=5)
    # a small model on a small disk: a 2 MiB checkpoint fits in 44 MiB; sizes in MiB
    free[0] = 44 << 20
    memory.check_disk(run, 2 << 20, keep=5)
    free[0] = 5 << 20
    with pytest.raises(InputError, match=r"^a checkpoint of this run takes about 2.0 MiB, and its "
                                         r"logs 4.0 MiB to start with, more than the 5.0 MiB "
                                         r"free"):
        memory.check_disk(run, 2 << 20, keep=1)
    # without TensorBoard, the logs are a metrics.jsonl of kilobytes: 0.6 MiB fits in 1 MiB
    free[0] = 1 << 20
    memory.check_disk(run, 600 << 10, keep=1, tensorboard=False)
    with pytest.raises(InputError, match=r"logs 4.0 MiB to start with"):
        memory.check_disk(run, 600 << 10, keep=1)


def test_a_call_that_trains_nothing_checks_no_disk(corpus: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab
    from embedlab.training import memory

    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, dim=8, epochs=1, threads=1, tensorboard=False,
                   progress=False)

    def full(*args: object, **kwargs: object) -> None:
        raise AssertionError("the disk was checked for a call that trains nothing")

    monkeypatch.setattr(memory, "check_disk", full)
    monkeypatch.setattr("embedlab.training.setup.check_disk", full)
    assert embedlab.train(corpus=corpus, run=run).finished
