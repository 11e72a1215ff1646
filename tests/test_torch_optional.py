"""PyTorch is an optional extra: without it the native engine trains and every query command
works, and what needs torch (the torch engine, linreg) says in one line how to install it.

Each command runs in a fresh interpreter in which ``import torch`` fails as it does where torch
is not installed. (tests/training/test_memory.py checks that a native run and the query commands
never even try to import it.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# torch (and every torch.* submodule) is "not installed": the import raises what Python raises
# for a missing package, which is what embedlab.errors.import_torch and the lazy command
# loader of the CLI see in an environment without the extra.
WITHOUT_TORCH = """
import sys

class TorchNotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.modules.pop("torch", None)
sys.meta_path.insert(0, TorchNotInstalled())
sys.argv = ["embedlab", *sys.argv[1:]]
from embedlab.cli import run
run()
"""

EXTRA = "pip install 'embedlab[torch]'"


def _embedlab(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def _table(path: Path) -> Path:
    path.write_text("Country\tBirth rate\tLife expectancy\nA\t1.5\t80.1\nB\t4.0\t65.2\n"
                    "C\t6.5\t50.3\n")
    return path


def _one_line_naming_the_extra(out: subprocess.CompletedProcess[str], purpose: str) -> None:
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr  # no traceback
    assert out.stderr.startswith(f"embedlab: error: {purpose} needs PyTorch"), out.stderr
    assert EXTRA in out.stderr and out.stdout == ""


def test_linreg_without_torch_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    table = _table(tmp_path / "t.tsv")
    before = table.read_bytes()
    out = _embedlab("linreg", table, "--run", tmp_path / "run", "--steps", "10")
    _one_line_naming_the_extra(out, "embedlab linreg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.tsv"]
    assert table.read_bytes() == before


def test_the_torch_engine_without_torch_is_one_line(tmp_path: Path) -> None:
    out = _embedlab("train", "--corpus", "demo", "--run", tmp_path / "run", "--engine",
                    "torch", "--epochs", "1", "--no-progress")
    _one_line_naming_the_extra(out, "--engine torch")


def test_help_lists_every_command_without_torch() -> None:
    out = _embedlab("--help")
    assert out.returncode == 0, out.stderr
    for command in ("train", "prepare", "neighbors", "analogy", "eval", "export", "ckpt",
                    "runs", "visualize", "linreg"):
        assert f"  {command} " in out.stdout, command


def test_prepare_and_training_on_the_prepared_corpus_without_torch(tmp_path: Path) -> None:
    # the commands test_memory.py does not cover: prepare, and a run on its folder
    prepared = tmp_path / "prepared"
    out = _embedlab("prepare", "demo", "--out", prepared, "--no-progress")
    assert out.returncode == 0, out.stderr
    run = tmp_path / "run"
    out = _embedlab("train", "--corpus", prepared, "--run", run, "--epochs", "1",
                    "--no-progress", "--threads", "2")
    assert out.returncode == 0, out.stderr
    assert '"engine": "native"' in (run / "config.json").read_text()
    out = _embedlab("neighbors", run, "king", "-k", "3")
    assert out.returncode == 0, out.stderr
