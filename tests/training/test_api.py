"""embedlab.train(...): the Python call trains, names, resumes and prints as `embedlab train`."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import embedlab
from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.cli import main
from embedlab.errors import InputError
from embedlab.vectors import Vectors

from .small_runs import final_bytes

FAST: dict[str, Any] = {"dim": 8, "batch_size": 32, "epochs": 2, "threads": 1,
                        "tensorboard": False, "log_every": 1, "progress": False}


def as_flags(options: dict[str, Any]) -> list[str]:
    """The command-line flags for ``options``."""
    flags = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else f"--no-{flag[2:]}")
        else:
            flags += [flag, str(value)]
    return flags


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """stderr of ``embedlab train ARGS`` run in this process (which must succeed)."""
    capsys.readouterr()
    main(["train", *(str(a) for a in args)])
    return capsys.readouterr().err


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def test_one_step_smoke(corpus: Path, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", dim=8, threads=1, max_steps=1,
                            log_every=1, progress=False)
    assert (result.step, result.finished, result.run_dir) == (1, False, tmp_path / "run")
    assert result.loss is not None and np.isfinite(result.loss) and result.words_seen > 0
    assert isinstance(result.vectors, Vectors) and result.vectors.matrix.shape[1] == 8
    assert result.config.model.dim == 8 and result.config.max_steps == 1
    tensors, state = load_checkpoint(find_checkpoint(tmp_path / "run"))
    assert state["step"] == 1
    np.testing.assert_array_equal(result.vectors.matrix, tensors["input_embeddings"])
    err = capsys.readouterr().err
    assert err.startswith(f"embedlab: new run {tmp_path / 'run'}\n")
    assert "embedlab: stopped at --max-steps 1: step 1, " in err


def test_the_call_and_the_command_give_the_same_vectors(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    options = {**FAST, "model": "cbow", "window": 3, "seed": 7}
    result = embedlab.train(corpus=str(corpus), run=tmp_path / "py", **options)
    cli(capsys, "--corpus", corpus, "--run", tmp_path / "cli", *as_flags(options))
    assert final_bytes(tmp_path / "py") == final_bytes(tmp_path / "cli")
    from_cli, _ = load_checkpoint(find_checkpoint(tmp_path / "cli"))
    assert sha256(result.vectors.matrix) == sha256(from_cli["input_embeddings"])
    assert (tmp_path / "py" / "config.json").read_text() == \
        (tmp_path / "cli" / "config.json").read_text().replace(str(tmp_path / "cli"),
                                                                str(tmp_path / "py"))


def test_the_call_prints_what_the_command_prints(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def normal(err: str, run: Path) -> str:
        return re.sub(r"\d+\.\d s training", "T s training", err.replace(str(run), "RUN"))

    capsys.readouterr()
    embedlab.train(corpus=corpus, run=tmp_path / "py", **FAST, max_steps=3)
    embedlab.train(corpus=corpus, run=tmp_path / "py", **FAST)
    from_python = capsys.readouterr()
    err = cli(capsys, "--corpus", corpus, "--run", tmp_path / "cli", *as_flags(FAST),
              "--max-steps", "3")
    err += cli(capsys, "--corpus", corpus, "--run", tmp_path / "cli", *as_flags(FAST))
    assert from_python.out == ""
    assert normal(from_python.err, tmp_path / "py") == normal(err, tmp_path / "cli")
    assert "resuming RUN from ckpt-00000003 (step 3)" in normal(err, tmp_path / "cli")


def test_the_call_names_its_run_as_the_command_and_resumes_it(
        corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    cut = embedlab.train(corpus=corpus, runs_dir=runs, **FAST, lr=0.05, max_steps=5)
    assert cut.run_dir == runs / "c-sg-d8-lr0.05-b32-e2" and cut.step == 5
    whole = embedlab.train(corpus=corpus, runs_dir=runs, **FAST, lr=0.05)
    assert whole.run_dir == cut.run_dir and whole.finished
    assert "from ckpt-00000005 (step 5)" in capsys.readouterr().err
    # the command finds the same folder, finished
    err = cli(capsys, "--corpus", corpus, "--runs-dir", runs, *as_flags(FAST), "--lr", "0.05")
    assert f"{cut.run_dir} already finished at step {whole.step}" in err
    cli(capsys, "--corpus", corpus, "--run", tmp_path / "through", *as_flags(FAST), "--lr",
        "0.05")
    assert final_bytes(cut.run_dir) == final_bytes(tmp_path / "through")
    assert sorted(p.name for p in runs.iterdir()) == [cut.run_dir.name]


def test_restart_and_from_checkpoint(corpus: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, **FAST, checkpoint_every=4, keep=10, max_steps=9)
    again = embedlab.train(corpus=corpus, run=run, **FAST, from_checkpoint="ckpt-00000004",
                           max_steps=6)
    assert again.step == 6 and "from ckpt-00000004 (step 4)" in capsys.readouterr().err
    fresh = embedlab.train(corpus=corpus, run=run, **FAST, restart=True, max_steps=2)
    assert fresh.step == 2 and len(list(tmp_path.glob("run.old-*"))) == 1
    with pytest.raises(InputError, match="--restart and --from exclude each other"):
        embedlab.train(corpus=corpus, run=run, restart=True, from_checkpoint="best")


@pytest.mark.parametrize(("options", "message"), [
    ({"dimension": 8}, "embedlab.train() got an unknown option dimension=; did you mean dim=? "),
    ({"from_ckpt": "best"}, "unknown option from_ckpt=; did you mean from_checkpoint=? "),
    ({"zzz": 1}, "unknown option zzz=; its options are the flags of 'embedlab train' with "
                 "underscores (dim=, window=, epochs=, ...): see help(embedlab.train)"),
])
def test_an_unknown_option_is_one_line_naming_it(corpus: Path, tmp_path: Path,
                                                 options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as e:
        embedlab.train(corpus=corpus, run=tmp_path / "run", **options)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


def test_a_bad_value_is_the_commands_message(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--dim must be a finite number > 0, got -3"):
        embedlab.train(corpus=corpus, run=tmp_path / "run", dim=-3)
    assert not (tmp_path / "run").exists()


def test_lists_take_one_value_too(corpus: Path, tmp_path: Path) -> None:
    result = embedlab.train(corpus=corpus, run=tmp_path / "run", **FAST, max_steps=1,
                            probe="w0")
    assert result.config.track.probe_words == ("w0",)


def test_import_embedlab_stays_cheap() -> None:
    code = ("import sys, embedlab\n"
            "assert callable(embedlab.train)\n"
            "import embedlab.training.state\n"
            "assert callable(embedlab.train) and embedlab.training.state.TrainState\n"
            "print(sorted(m for m in ('numpy', 'torch', 'embedlab.training.api')\n"
            "             if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "['numpy']"  # embedlab.training.state needs numpy; nothing else
