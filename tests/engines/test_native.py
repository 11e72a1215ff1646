"""The native engine (``_kernel.c``): same mathematics as the torch engine, thread-independent
bits, a cached build, and a clear fallback or error where no compiler exists.

Agreement with the paper's per-pair loss is in test_word2vec.py (``engine="native"``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embedlab.config import TrainConfig
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Batch, BatchStream, Cursor
from embedlab.engines import build_engine, native
from embedlab.engines.base import Engine
from embedlab.engines.huffman import build_tree
from embedlab.engines.params import Word2VecParams, init_params
from embedlab.engines.step import StepConfig, TrainStep, band_block_length
from embedlab.errors import InputError
from embedlab.seeding import mt19937_rng
from embedlab.testing import run_cli, write_zipf_corpus

V = 300


def make_step(cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None, rows: int, *,
              engine: str, threads: int = 1) -> TrainStep:
    """The step of engine ``engine`` (built by name) on ``params``."""
    built: Engine = build_engine(engine, cfg, params, log_kq, rows, threads=threads)
    return built.step


def _stream(dim_rows_pad: int, group: int, shared: int, window: int = 3) -> list[Batch]:
    rng = np.random.default_rng(1)
    counts = (1000 / np.arange(1, V + 1)).astype(np.int64) + 1
    ids = rng.choice(V, size=4000, p=counts / counts.sum()).astype(np.uint32)
    ends = np.array([500, 501, 2200, 4000])
    stream = BatchStream(ids, ends, None, NoiseDistribution(counts), window=window,
                         batch_size=100, group=group, noise_per_group=shared, seed=3,
                         epochs=1, chunk_tokens=1500, pad_to=dim_rows_pad)
    return list(stream.iterate(Cursor()))


def _params(dim: int, nce: bool) -> Word2VecParams:
    p = init_params(V, dim, init="centered", nce=nce, rng=mt19937_rng(2, "init"))
    rng = np.random.default_rng(2)
    p.w_out[:] = rng.normal(0, 0.2, size=p.w_out.shape)
    if p.b_out is not None:
        p.b_out[:] = rng.normal(0, 0.1, size=p.b_out.shape)
    return p


def _run(engine: str, p: Word2VecParams, batches: list[Batch], cfg: StepConfig,
         log_kq: np.ndarray | None, threads: int) -> list[float]:
    step = make_step(cfg, p, log_kq, batches[0].centers.shape[0], engine=engine,
                     threads=threads)
    return [step(b, 0.05) for b in batches]


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
@pytest.mark.parametrize("loss", ["neg", "nce"])
@pytest.mark.parametrize("dim", [8, 13, 100])  # 13: the kernel's remainder paths
# the noise-score tiles are 4 centres x 16 noise words: (16, 12) fills whole tiles with padding,
# (6, 20) leaves a partial tile of centres and a remainder vector of 8 noise words; the noise
# GEMMs take two rows at a time, and (5, 13) leaves a lone last centre and noise word
@pytest.mark.parametrize(("group", "shared"), [(16, 12), (6, 20), (5, 13)])
def test_native_agrees_with_torch_with_damping(model: str, loss: str, dim: int, group: int,
                                               shared: int) -> None:
    window = 3
    pad = band_block_length(window)
    batches = _stream(pad, group=group, shared=shared, window=window)
    cfg = StepConfig(model, loss, window, 5, group, damping=2.0)  # damping engaged
    log_kq = NoiseDistribution(np.arange(1, V + 1)).log_expected_count(5) \
        if loss == "nce" else None
    a = _params(dim, loss == "nce")
    b = a.copy()
    la = _run("torch", a, batches, cfg, log_kq, 1)
    lb = _run("native", b, batches, cfg, log_kq, 2)
    np.testing.assert_allclose(lb, la, rtol=2e-5)
    np.testing.assert_allclose(b.w_in, a.w_in, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.w_out, a.w_out, rtol=1e-4, atol=1e-5)
    if a.b_out is not None and b.b_out is not None:
        np.testing.assert_allclose(b.b_out, a.b_out, rtol=1e-4, atol=1e-5)
    assert not np.array_equal(a.w_in, _params(dim, loss == "nce").w_in)  # it did train


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
@pytest.mark.parametrize("loss", ["neg", "nce"])
def test_native_bits_do_not_depend_on_the_thread_count(model: str, loss: str) -> None:
    batches = _stream(16, group=16, shared=10)
    cfg = StepConfig(model, loss, 3, 5, 16, damping=2.0)
    log_kq = NoiseDistribution(np.arange(1, V + 1)).log_expected_count(5) \
        if loss == "nce" else None
    runs = []
    for threads in (1, 2, 3):
        p = _params(24, loss == "nce")
        losses = _run("native", p, batches, cfg, log_kq, threads)
        bias = b"" if p.b_out is None else p.b_out.tobytes()
        runs.append((losses, p.w_in.tobytes(), p.w_out.tobytes(), bias))
    assert runs[0] == runs[1] == runs[2]


def _hs_run(engine: str, model: str, dim: int, threads: int, damping: float = 2.0,
            input_damping: float | None = 5.0) -> tuple[list[float], Word2VecParams]:
    counts = (1000 / np.arange(1, V + 1)).astype(np.int64) + 1
    tree = build_tree(counts)
    p = init_params(V, dim, init="centered", nce=False, rng=mt19937_rng(2, "init"), hs=True,
                    scale=8.0)
    p.w_out[:] = np.random.default_rng(2).normal(0, 0.2, size=p.w_out.shape)
    batches = _stream(band_block_length(3), group=1, shared=0)
    cfg = StepConfig(model, "hs", 3, 0, 1, damping=damping, input_damping=input_damping)
    step = build_engine(engine, cfg, p, None, batches[0].centers.shape[0], threads=threads,
                        tree=tree).step
    return [step(b, 0.05) for b in batches], p


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
@pytest.mark.parametrize("dim", [8, 13, 100])  # 13: the kernel's remainder paths
def test_native_hierarchical_softmax_agrees_with_torch(model: str, dim: int) -> None:
    la, a = _hs_run("torch", model, dim, 1)
    lb, b = _hs_run("native", model, dim, 2)
    np.testing.assert_allclose(lb, la, rtol=2e-5)
    np.testing.assert_allclose(b.w_in, a.w_in, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.w_out, a.w_out, rtol=1e-4, atol=1e-5)
    for undamped in ({"damping": 0.0}, {"input_damping": 0.0}):  # both κ are engaged
        other = _hs_run("torch", model, dim, 1, **undamped)[1]  # type: ignore[arg-type]
        assert not np.array_equal(a.w_in, other.w_in)


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_native_hierarchical_softmax_bits_do_not_depend_on_the_thread_count(model: str) -> None:
    runs = []
    for threads in (1, 2, 3):
        losses, p = _hs_run("native", model, 24, threads)
        runs.append((losses, p.w_in.tobytes(), p.w_out.tobytes()))
    assert runs[0] == runs[1] == runs[2]


def test_native_takes_the_mask_as_bytes_and_refuses_floats() -> None:
    batches = _stream(16, 16, 12)
    assert batches[0].mask.dtype == np.uint8  # a quarter of float32's memory per chunk
    p = _params(8, False)
    step = make_step(StepConfig("skipgram", "neg", 3, 5, 16), p, None,
                     batches[0].centers.shape[0], engine="native")
    b = batches[0]
    as_float = Batch(b.centers, b.span, b.mask.astype(np.float32), b.contexts, b.negatives,
                     b.n_pairs, b.n_centers, b.words_done, b.cursor_next)
    with pytest.raises(ValueError, match="uint8"):
        step(as_float, 0.05)


def test_native_refuses_parameters_it_could_not_update_in_place() -> None:
    # the kernel writes through the arrays' memory: a copy (float64, strided, read-only) would
    # take the updates and leave the model as it was
    batches = _stream(16, 16, 12)
    read_only = np.zeros((V, 8), np.float32)
    read_only.flags.writeable = False
    for bad in (np.zeros((V, 8)), np.zeros((V, 16), np.float32)[:, ::2], read_only):
        p = _params(8, False)
        p.w_in = bad
        step = make_step(StepConfig("skipgram", "neg", 3, 5, 16), p, None,
                         batches[0].centers.shape[0], engine="native")
        with pytest.raises(ValueError, match="writable, contiguous float32"):
            step(batches[0], 0.05)


# ---- building -------------------------------------------------------------------------------

@pytest.fixture
def fresh_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty kernel cache, and no memory of an earlier build in this process."""
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    native.library.cache_clear()
    yield tmp_path / "cache"
    native.library.cache_clear()  # later tests build (or find) the kernel in the usual cache


def test_the_build_is_cached_and_reused(fresh_build: Path) -> None:
    assert native.unavailable_reason() is None
    (built,) = fresh_build.glob("w2v-*.so")
    stamp = built.stat().st_mtime_ns
    native.library.cache_clear()
    assert native.unavailable_reason() is None
    assert list(fresh_build.glob("w2v-*.so")) == [built] and built.stat().st_mtime_ns == stamp
    assert not list(fresh_build.glob(".build-*"))  # the temporary build folder is gone


def _built_not_loaded() -> Path:
    """The kernel built into the cache but not loaded: dlopen would hand this process its loaded
    copy again for the same path, whatever the file holds now."""
    path, temporary, _ = native._build(native.kernel_sources(), native.compiler_command())
    assert not temporary
    return path


def _intact_builds(cache: Path) -> list[Path]:
    return [p for p in cache.glob("w2v-*.so")
            if p.name.endswith(f"-{native._content_hash(p)}.so")]


def _other_library(tmp_path: Path) -> bytes:
    other = tmp_path / "other.c"
    other.write_text("int not_the_kernel(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "other.so"), str(other)],
                   check=True)
    return (tmp_path / "other.so").read_bytes()


# each builds the kernel again (~20 s on 2 cores): one kind of damage in the default suite
@pytest.mark.parametrize("damage", ["truncated", pytest.param("garbage", marks=pytest.mark.slow),
                                    pytest.param("another library", marks=pytest.mark.slow)])
def test_a_damaged_cached_kernel_is_built_again(fresh_build: Path, tmp_path: Path,
                                                damage: str) -> None:
    # A truncated .so (full disk, crash) would fail every run with "cannot load" until someone
    # found and deleted it; loading one can even kill the process with SIGBUS, so the file is
    # checked against the hash in its name before dlopen ever sees it.
    built = _built_not_loaded()
    if damage == "another library":
        data = _other_library(tmp_path)
    else:
        data = built.read_bytes()[:4096] if damage == "truncated" else b"not a library"
    built.write_bytes(data)  # never loaded in this process, so rewriting it in place is safe
    assert native.unavailable_reason() is None
    assert native.library().w2v_scratch_floats(64, 5, 1, 5, 16, 1) > 0
    assert all(p.read_bytes() != data for p in fresh_build.glob("w2v-*.so"))
    assert len(_intact_builds(fresh_build)) == 1


def test_a_library_without_the_kernel_is_refused_in_one_line(fresh_build: Path,
                                                              tmp_path: Path) -> None:
    # intact (its hash matches its name) but not the kernel, e.g. what a wrapper $CC made:
    # refused by its missing symbols, not called into
    built = _built_not_loaded()
    data = _other_library(tmp_path)
    built.unlink()
    stem = built.name.rsplit("-", 1)[0]
    digest = native.hashlib.sha256(data).hexdigest()[:native.CONTENT_HASH]
    other = fresh_build / f"{stem}-{digest}.so"
    other.write_bytes(data)
    reason = native.unavailable_reason()
    assert reason is not None and reason.startswith(f"cannot load {other}")
    assert "w2v_skipgram_step" in reason and "\n" not in reason


def test_without_a_compiler_auto_falls_back_and_says_so(
        fresh_build: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CC", "no-such-compiler-embedlab")
    cfg = TrainConfig.from_dict({"threads": 1}).resolve()
    assert cfg.engine == "torch"
    assert "native engine is unavailable (no C compiler" in capsys.readouterr().err
    with pytest.raises(InputError, match="--engine native is unavailable: no C compiler"):
        TrainConfig.from_dict({"threads": 1, "engine": "native"}).resolve()
    # what the CLI asks before training, to decide on a tokenising child: no note, no refusal
    assert TrainConfig.from_dict({}).engine_for() == "torch"
    assert TrainConfig.from_dict({"engine": "native"}).engine_for() == "native"
    assert capsys.readouterr().err == ""


def test_a_failing_compiler_is_reported_in_one_line(fresh_build: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "badcc"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && exit 0\necho 'cc: fatal error: "
                    "no omp.h' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    reason = native.unavailable_reason()
    assert reason is not None and "failed to build the kernel: cc: fatal error: no omp.h" in reason
    assert not list(fresh_build.glob("*.so"))


def _file_as_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """EMBEDLAB_CACHE naming a file (the cache is unusable), and an empty folder as the
    temporary folder the kernel is then built in: (the file, that folder)."""
    import tempfile

    blocker = tmp_path / "a-file"
    blocker.write_text("keep me\n")
    monkeypatch.setenv("EMBEDLAB_CACHE", str(blocker))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return blocker, scratch


def test_an_unusable_cache_is_named_and_the_kernel_still_builds(
        fresh_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a file as EMBEDLAB_CACHE (like /dev/full, or HOME set to a file) is the cache's problem,
    # not a build failure with "install a C compiler" as the fix
    import tempfile

    blocker, scratch = _file_as_cache(tmp_path, monkeypatch)
    assert native.unavailable_reason() is None  # built in a temporary folder instead
    err = capsys.readouterr().err
    assert err.startswith("embedlab: warning: the kernel cache folder ") and err.count("\n") == 1
    assert f"{blocker} is not usable (it is not a folder)" in err
    assert "set EMBEDLAB_CACHE to a writable folder" in err
    assert blocker.read_text() == "keep me\n"
    assert list(scratch.iterdir()) == []  # the temporary build folder is removed once loaded
    # when no temporary folder is usable either, the reason says so and names the fix
    native.library.cache_clear()
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))
    reason = native.unavailable_reason()
    assert reason is not None and "compiler" not in reason
    assert reason.startswith(f"the kernel cache folder {blocker} is not usable")
    assert reason.endswith("set EMBEDLAB_CACHE to a writable folder")


def test_a_failed_build_in_a_temporary_folder_leaves_nothing_there(
        fresh_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unusable cache and a compiler that fails: the temporary folder goes too."""
    _, scratch = _file_as_cache(tmp_path, monkeypatch)
    monkeypatch.setenv("CC", "false")
    reason = native.unavailable_reason()
    assert reason is not None and "failed to build the kernel" in reason
    assert list(scratch.iterdir()) == []


def test_builds_killed_long_ago_are_swept_from_the_cache(
        fresh_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build killed by SIGKILL leaves its .build-* folder of sources, which nothing else
    removes; one younger than an hour may be another process's build, and stays."""
    import os
    import time

    old, young = fresh_build / ".build-old", fresh_build / ".build-young"
    for folder in (old, young):
        folder.mkdir(parents=True)
        (folder / "_kernel.c").write_text("/* sources */\n")
    hours_ago = time.time() - 7200
    os.utime(old, (hours_ago, hours_ago))
    assert native.unavailable_reason() is None
    assert not old.exists() and young.exists()


def test_cc_with_arguments_is_split_like_make_does(fresh_build: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc is not None
    monkeypatch.setenv("CC", f"{cc} -DEMBEDLAB_UNUSED=1")  # like CC="ccache gcc"
    assert native.unavailable_reason() is None
    assert len(list(fresh_build.glob("w2v-*.so"))) == 1
    monkeypatch.setenv("CC", "'my cc' -m64")
    assert native.compiler_command() == ["my cc", "-m64"]
    monkeypatch.setenv("CC", "  ")
    assert native.compiler_command() == ["cc"]
    monkeypatch.setenv("CC", "'cc")
    with pytest.raises(native.NativeUnavailable, match=r"\$CC is not a valid command line"):
        native.compiler_command()


def test_the_compiler_arguments_are_part_of_the_cache_key(fresh_build: Path,
                                                          tmp_path: Path) -> None:
    log = tmp_path / "log"
    fake = tmp_path / "fakecc"  # records its arguments and "builds" an empty file
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nprev=\nfor a in \"$@\"; do "
                    "[ \"$prev\" = -o ] && : > \"$a\"; prev=$a; done\nexit 0\n")
    fake.chmod(0o755)
    first, _, _ = native._build({"_kernel.c": b"int x;"}, [str(fake), "-DA"])
    second, _, _ = native._build({"_kernel.c": b"int x;"}, [str(fake), "-DB"])
    again, _, _ = native._build({"_kernel.c": b"int x;"}, [str(fake), "-DA"])
    assert first != second and again == first and first.parent == fresh_build
    calls = log.read_text().splitlines()
    assert calls[0] == "-DA --version"  # the arguments come first, as make passes $(CC)
    assert calls[1].startswith("-DA -O3 ") and calls[3].startswith("-DB -O3 ")
    assert len(calls) == 5  # the third call found its build in the cache


@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_auto_resolves_to_native_for_both_models(model: str) -> None:
    cfg = TrainConfig.from_dict({"model": {"model": model}})
    assert cfg.resolve().engine == "native"
    assert TrainConfig.from_dict({"model": {"model": model}, "engine": "torch"}).resolve() \
        .engine == "torch"


# ---- through the CLI ------------------------------------------------------------------------

def test_cli_records_the_engine_and_a_resume_keeps_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    run = tmp_path / "run"
    flags = ["train", "--corpus", str(corpus), "--run", str(run), "--dim", "8",
             "--batch-size", "32", "--threads", "1", "--no-tensorboard", "--no-progress"]
    code, _, err = run_cli([*flags, "--max-steps", "3"], capsys)
    assert code == 0, err
    assert '"engine": "native"' in (run / "config.json").read_text()
    code, _, err = run_cli([*flags, "--engine", "torch"], capsys)
    assert code == 2 and "--engine (stored 'native', requested 'torch')" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli(flags, capsys)
    assert code == 0 and "(step 3)" in err


def test_a_cbow_run_started_with_the_torch_engine_resumes_with_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CBOW runs of earlier versions recorded engine torch (native was skip-gram only): they
    keep it, so their resumes stay exact."""
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    run = tmp_path / "run"
    flags = ["train", "--corpus", str(corpus), "--run", str(run), "--dim", "8", "--model",
             "cbow", "--batch-size", "32", "--threads", "1", "--no-tensorboard", "--no-progress"]
    code, _, err = run_cli([*flags, "--engine", "torch", "--max-steps", "3"], capsys)
    assert code == 0, err
    assert '"engine": "torch"' in (run / "config.json").read_text()
    code, _, err = run_cli(flags, capsys)
    assert code == 0 and "(step 3)" in err
    assert '"engine": "torch"' in (run / "config.json").read_text()



def test_the_fix_named_matches_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    # "install a C compiler" was the fix for every reason, a missing cache folder too
    from embedlab.engines import native

    cache = ("the kernel cache folder /x is not usable (Read-only file system), nor is a "
             "temporary folder (No space left on device); set EMBEDLAB_CACHE to a writable folder")
    assert native.install_hint(cache) == "set EMBEDLAB_CACHE to a writable folder"
    assert native.install_hint("no C compiler ('cc' not found)").startswith(
        "install a C compiler with OpenMP")
    monkeypatch.setattr(native, "unavailable_reason", lambda: cache)
    with pytest.raises(InputError) as e:
        TrainConfig(engine="native").resolve()
    assert str(e.value) == (f"--engine native is unavailable: {cache}; set EMBEDLAB_CACHE to a "
                            "writable folder or pass --engine torch (a run keeps the engine it "
                            "started with)")


def test_a_hierarchical_softmax_run_resumes_bit_identical_on_other_threads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    flags = ["train", "--corpus", str(corpus), "--dim", "8", "--loss", "hs", "--negative", "0",
             "--batch-size", "32", "--epochs", "2", "--checkpoint-every", "5", "--no-tensorboard",
             "--no-progress"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert run_cli([*flags, "--run", str(whole), "--threads", "2"], capsys)[0] == 0
    assert run_cli([*flags, "--run", str(split), "--threads", "1", "--max-steps", "7"],
                   capsys)[0] == 0
    code, _, err = run_cli([*flags, "--run", str(split), "--threads", "3"], capsys)
    assert code == 0 and "(step 7)" in err
    last = sorted((whole / "checkpoints").glob("ckpt-*"))[-1]
    assert (split / "checkpoints" / last.name / "tensors.safetensors").read_bytes() == \
        (last / "tensors.safetensors").read_bytes()
    assert '"loss": "hs"' in (whole / "config.json").read_text()
    code, out, _ = run_cli(["ckpt", str(whole), "--tensors"], capsys)
    assert code == 0 and "hs_nodes" in out and "output_embeddings" not in out


def test_negative_zero_is_hierarchical_softmax_only(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=50)
    code, _, err = run_cli(["train", "--corpus", str(corpus), "--run", str(tmp_path / "r"),
                            "--negative", "0", "--max-steps", "1", "--no-progress"], capsys)
    assert code == 2 and ("--negative must be an integer > 0, got 0; pass e.g. --negative 5 "
                          "(word2vec.c's -hs 1 -negative 0 is --loss hs, which takes "
                          "--negative 0)") in err


_FORKED = """
import hashlib, multiprocessing, sys
import embedlab

def train(run):
    r = embedlab.train(corpus=sys.argv[1], run=run, dim=8, epochs=1, batch_size=32, threads=2,
                       progress=False, tensorboard=False)
    return hashlib.sha256(r.w_in.tobytes()).hexdigest()

parent = train(sys.argv[2] + "/parent")
with multiprocessing.get_context("fork").Pool(1) as pool:
    child = pool.apply_async(train, (sys.argv[2] + "/child",)).get(timeout=60)
print(parent == child)
"""


_FORKED_AFTER_PREPARE = """
import multiprocessing, sys
import numpy as np
from embedlab.data.preparing import prepare
from embedlab.engines.native import library
from embedlab.track.protos import native_statistics

def histogram(_):
    library()  # as a native engine's run has it; the histogram is then counted natively
    return native_statistics(np.linspace(-1, 1, 1_000_000, dtype=np.float32), 60, 2)[2].sum()

prepare(sys.argv[1], sys.argv[2], min_count=1, progress=False)
with multiprocessing.get_context("fork").Pool(1) as pool:
    print(pool.apply_async(histogram, (0,)).get(timeout=60))
"""


def test_a_process_forked_after_a_vocabulary_was_sorted_on_two_threads_does_not_hang(
        tmp_path: Path) -> None:
    # the sort of a vocabulary over 65,536 words runs an OpenMP team of two: a forked child's
    # first team of two (here a histogram's) would wait forever for threads the fork left behind
    corpus = tmp_path / "c.txt"  # 80,000 words, over 1 MiB: the native reader's (and sort's)
    words = [f"w{i}" for i in range(80_000)] * 3
    corpus.write_text("\n".join(" ".join(words[i:i + 20]) for i in range(0, len(words), 20))
                      + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _FORKED_AFTER_PREPARE, str(corpus),
                           str(tmp_path / "prepared")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1000000\n"


def test_a_native_build_that_failed_is_not_tried_again_for_optional_work(
        fresh_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tries = []

    def failing(*args: object) -> None:
        tries.append(args)
        raise native.NativeUnavailable("no compiler here")

    monkeypatch.setattr(native, "_build", failing)
    assert native.library_if(True) is None and native.library_if(True) is None
    assert len(tries) == 1
    with pytest.raises(native.NativeUnavailable):  # the engine's own ask still tries
        native.library()
    assert len(tries) == 2
    native.library.cache_clear()
    assert native.library_if(True) is None and len(tries) == 3


def test_a_process_forked_after_threads_ran_trains_on_one_thread_with_the_same_bits(
        tmp_path: Path) -> None:
    # libgomp's thread pool does not survive fork: a forked child's first parallel region
    # waited forever for the parent's threads (multiprocessing.Pool's default start on Linux)
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    done = subprocess.run([sys.executable, "-c", _FORKED, str(corpus), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"
    assert done.stderr.count("this process was forked from one whose native engine ran OpenMP "
                             "threads") == 1
    assert "it trains on 1 thread, not 2 (the same bits, slower)" in done.stderr
