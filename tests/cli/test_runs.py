"""``embedlab runs``, ``embedlab tensorboard`` and ``embedlab visualize`` as a user runs them."""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path
from types import ModuleType

import pytest

from embedlab.cli import main


def _load_fakerun() -> ModuleType:
    # tests/track/fakerun.py, loaded by path so this works whatever the test package layout
    path = Path(__file__).resolve().parents[1] / "track" / "fakerun.py"
    spec = importlib.util.spec_from_file_location("embedlab_test_fakerun", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fakerun = _load_fakerun()


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def assert_one_line_error(code: int, err: str, needle: str) -> None:
    assert code == 2
    assert err.startswith("embedlab: error: ") and err.count("\n") == 1, err
    assert needle in err and "Traceback" not in err


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    import dataclasses

    from embedlab.config import OptimConfig

    root = tmp_path / "runs"
    for lr in (0.5, 1.0):
        cfg = dataclasses.replace(fakerun.make_config(tensorboard=False),
                                  optim=dataclasses.replace(OptimConfig(), lr=lr))
        fakerun.simulate(root / f"demo-sg-lr{lr}", steps=20, ckpt_every=10, cfg=cfg)
    return root


def test_runs_lists_runs_with_differing_hyperparameters(two_runs: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    code, out, _ = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0
    rows = [line for line in out.splitlines() if "demo-sg-lr" in line]
    assert len(rows) == 2
    for row, lr in zip(rows, ("0.5", "1.0"), strict=True):
        for cell in ("finished", "20", "20.0k", lr, "0:00:12"):
            assert cell in row, (cell, row)
    assert "optim.lr" in out and "model.dim" not in out
    code, out, _ = run_cli(["runs", str(two_runs), "--all"], capsys)
    assert code == 0 and "model.dim" in out


def test_runs_skips_a_broken_run_with_a_warning(two_runs: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (two_runs / "broken").mkdir()
    (two_runs / "broken" / "config.json").write_text("{")
    code, out, err = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0 and out.count("demo-sg-lr") == 2
    assert "warning: skipped" in err and "broken" in err


def test_runs_empty_and_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["runs", str(tmp_path)], capsys)
    assert code == 0 and "no runs under" in out
    code, _, err = run_cli(["runs", str(tmp_path / "nope")], capsys)
    assert_one_line_error(code, err, "no such folder")


def test_tensorboard_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["tensorboard", str(tmp_path / "nope")], capsys)
    assert_one_line_error(code, err, "no such folder")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run_cli(["tensorboard", str(tmp_path), "--port", str(port)], capsys)
    assert_one_line_error(code, err, f"port {port}")
    code, _, err = run_cli(["tensorboard", str(tmp_path), "--port", "0"], capsys)
    assert_one_line_error(code, err, "--port")


def test_visualize_writes_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.train.checkpoint import CheckpointManager

    run = tmp_path / "run"
    vocab = fakerun.fake_vocab()
    fakerun.write_run_files(run, fakerun.make_config(), vocab)
    w = fakerun.embeddings_at(vocab, 7, 7)
    CheckpointManager(run).save(7, {"input_embeddings": w, "output_embeddings": w.clone()},
                              {"step": 7})
    out = tmp_path / "plot.png"
    code, stdout, _ = run_cli(["visualize", str(run), "--words", "40", "--out", str(out)], capsys)
    assert code == 0 and stdout.strip() == f"wrote {out}"
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("args", "needle"), [
    (["--method", "umap"], "--method"),
    (["--words", "1"], "--words must be >= 3"),
    ([], "vocab.tsv not found"),
])
def test_visualize_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                args: list[str], needle: str) -> None:
    code, _, err = run_cli(["visualize", str(tmp_path), *args], capsys)
    assert_one_line_error(code, err, needle)


@pytest.mark.parametrize("command", ["runs", "tensorboard", "visualize"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0 and "Usage: embedlab " + command in out
