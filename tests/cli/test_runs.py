"""``embedlab runs``, ``embedlab tensorboard`` and ``embedlab visualize`` as a user runs them."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
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


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    """Exit 2, one ``embedlab: error:`` line holding every needle (the problem and its fix)."""
    assert code == 2
    assert err.startswith("embedlab: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


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


def test_runs_json_gives_programs_every_column_and_setting(
        two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, _ = run_cli(["runs", str(two_runs), "--json", "--sort", "optim.lr",
                            "--reverse"], capsys)
    assert code == 0
    listed = json.loads(out)
    assert [r["name"] for r in listed] == ["demo-sg-lr1.0", "demo-sg-lr0.5"]
    first = listed[0]
    assert {k: first[k] for k in ("kind", "status", "step", "words_seen")} == {
        "kind": "word2vec", "status": "finished", "step": 20, "words_seen": 20_000}
    assert first["hparams"]["optim.lr"] == 1.0 and "model.dim" in first["hparams"]
    best = first["best"]
    assert best["metric"] == "train/loss" and isinstance(best["value"], float) and \
        isinstance(best["step"], int)
    code, out, _ = run_cli(["runs", str(two_runs), "--json", "--status", "running"], capsys)
    assert (code, json.loads(out)) == (0, [])


def test_the_saved_column_is_where_a_resume_starts(two_runs: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A killed run's status names the step it reached; a resume starts at its newest checkpoint,
    and a run whose checkpoints were deleted has none to start from."""
    import torch

    from embedlab.checkpoint import CheckpointManager

    CheckpointManager(two_runs / "demo-sg-lr0.5").save(
        10, {"input_embeddings": torch.zeros(2, 2)}, {"epoch": 0}, {})  # and none for lr1.0
    code, out, _ = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]]
            for line in out.splitlines() if "demo-sg-lr" in line}
    assert rows["demo-sg-lr0.5"][:3] == ["finished", "20", "10"]
    assert rows["demo-sg-lr1.0"][:3] == ["finished", "20", "-"]
    code, out, _ = run_cli(["runs", str(two_runs), "--sort", "saved"], capsys)
    assert code == 0 and out.index("demo-sg-lr0.5") < out.index("demo-sg-lr1.0")  # none: last


def test_the_loss_is_the_status_files_when_the_metrics_lag_behind(
        two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """metrics.jsonl cut short: its last row is an older step's loss, not the run's latest."""
    import json

    run = two_runs / "demo-sg-lr0.5"
    status = json.loads((run / "status.json").read_text())
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run / "metrics.jsonl").write_text("".join(lines[:2]) + lines[2][:10])
    code, out, _ = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0
    row = next(line for line in out.splitlines() if "demo-sg-lr0.5" in line)
    assert f"{status['loss']:.4f}" in row
    # ahead of it (status.json is written less often): the row of status.json's step
    (run / "metrics.jsonl").write_text("".join(lines) + json.dumps(
        {"step": status["step"] + 5, "train/loss": 9.25}) + "\n")
    out = run_cli(["runs", str(two_runs)], capsys)[1]
    row = next(line for line in out.splitlines() if "demo-sg-lr0.5" in line)
    assert "9.2500" not in row and f"{status['loss']:.4f}" in row


def test_a_run_that_lost_its_config_is_not_passed_over_in_silence(
        two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No config.json: no row (its settings are gone), but a warning that it is there; a subset
    of a checkpoint (which has none by design) is no lost run."""
    import torch

    from embedlab.checkpoint import CheckpointManager

    lost = two_runs / "lost"
    CheckpointManager(lost).save(5, {"input_embeddings": torch.zeros(2, 2)}, {"epoch": 0}, {})
    assert run_cli(["ckpt", str(lost), "--export-subset", str(two_runs / "subset")],
                   capsys)[0] == 0
    code, out, err = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0 and out.count("demo-sg-lr") == 2
    assert err == (f"embedlab: warning: skipped {lost}: it has checkpoints but no config.json, "
                   "which holds its settings; restore config.json from a backup\n")


def test_another_programs_config_is_named_so(two_runs: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (two_runs / "other-tool").mkdir()
    (two_runs / "other-tool" / "config.json").write_text('{"lr": 0.1, "model": "resnet"}')
    code, out, err = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0 and out.count("demo-sg-lr") == 2
    assert err == (f"embedlab: warning: skipped {two_runs / 'other-tool'}: "
                   f"{two_runs / 'other-tool' / 'config.json'} is not an embedlab run's (no "
                   "data, model and optim sections): another program's folder needs nothing; "
                   "for a run of embedlab's, restore its config.json from a backup\n")


def test_runs_skips_a_broken_run_with_a_warning(two_runs: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (two_runs / "broken").mkdir()
    (two_runs / "broken" / "config.json").write_text("{")
    code, out, err = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0 and out.count("demo-sg-lr") == 2
    assert "warning: skipped" in err and "broken" in err


def test_one_broken_run_asked_for_is_one_error(two_runs: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # a warning, then "no runs under RUN (a run folder holds config.json)" with exit 0, or the
    # same sentence twice; a subset was told to restore a config.json it never had
    import shutil

    import torch

    from embedlab.checkpoint import CheckpointManager

    run = two_runs / "demo-sg-lr0.5"
    (run / "config.json").write_text("{")
    code, _, err = run_cli(["runs", str(run)], capsys)
    assert_one_line_error(code, err, f"{run / 'config.json'} is unreadable")
    (run / "config.json").unlink()
    CheckpointManager(run).save(5, {"input_embeddings": torch.zeros(2, 2)}, {"epoch": 0}, {})
    code, _, err = run_cli(["runs", str(run)], capsys)
    assert_one_line_error(code, err, f"run {run} has checkpoints but no config.json")
    shutil.rmtree(run)
    lost = two_runs / "lost"
    CheckpointManager(lost).save(5, {"input_embeddings": torch.zeros(2, 2)}, {"epoch": 0}, {})
    subset = two_runs.parent / "subset"
    assert run_cli(["ckpt", str(lost), "--export-subset", str(subset)], capsys)[0] == 0
    code, _, err = run_cli(["runs", str(subset)], capsys)
    assert_one_line_error(code, err, f"{subset} is a subset of a run's checkpoint",
                          f"embedlab neighbors {subset} WORD")


def test_runs_follows_links_to_runs_once(two_runs: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "linked").symlink_to(two_runs / "demo-sg-lr0.5")
    (sweep / "zz-linked").symlink_to(two_runs / "demo-sg-lr0.5")  # the same run again
    (sweep / "again").symlink_to(sweep)  # a link to a folder is not walked into
    code, out, _ = run_cli(["runs", str(sweep)], capsys)
    assert code == 0 and out.count("linked") == 1 and "demo-sg-lr1.0" not in out
    (two_runs / "to-lr1").symlink_to(two_runs / "demo-sg-lr1.0")
    code, out, _ = run_cli(["runs", str(two_runs)], capsys)  # a run listed under its own name
    assert code == 0 and "to-lr1" not in out and out.count("demo-sg-lr") == 2


def test_runs_lists_a_run_with_a_bad_status_field_as_unknown(
        two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    status = two_runs / "demo-sg-lr0.5" / "status.json"
    before = status.read_text()
    status.write_text(json.dumps({**json.loads(before), "wall_time": "x"}))
    code, out, err = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0 and "demo-sg-lr1.0" in out
    row = next(line for line in out.splitlines() if "demo-sg-lr0.5" in line)
    assert "unknown" in row
    assert err.startswith("embedlab: warning: ") and err.count("\n") == 1, err
    assert "wall_time is 'x'" in err and "with status unknown" in err and "Traceback" not in err


def test_runs_lists_linreg_runs_beside_word2vec_runs(two_runs: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "birth_life.txt"
    rows = [f"c{i}\t{1 + i % 7 * 0.5}\t{80 - 4 * (1 + i % 7 * 0.5)}" for i in range(40)]
    table.write_text("Country\tBirth rate\tLife expectancy\n" + "\n".join(rows) + "\n")
    code, _, _ = run_cli(["linreg", str(table), "--run", str(two_runs / "linreg"),
                          "--steps", "300", "--max-steps", "200"], capsys)
    assert code == 0
    code, out, err = run_cli(["runs", str(two_runs)], capsys)
    assert code == 0 and err == ""  # not "skipped runs/linreg: config.json is unreadable"
    row = next(line for line in out.splitlines() if "linreg" in line)
    for cell in ("linreg", "interrupted", "200", "loss "):
        assert cell in row, (cell, row)
    assert out.count("word2vec") == 2 and "optim.lr" in out


def test_runs_empty_and_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["runs", str(tmp_path)], capsys)
    assert code == 0 and "no runs under" in out
    assert "start one with: embedlab train --corpus demo" in out
    code, _, err = run_cli(["runs", str(tmp_path / "nope")], capsys)
    assert_one_line_error(code, err, "no such folder",
                          "; pass the folder that holds your runs (e.g. embedlab runs runs/)")


@pytest.mark.parametrize("command", ["runs", "tensorboard"])
def test_the_default_folder_missing_names_another_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        command: str) -> None:
    """Without runs/ here, "e.g. runs/" would name the very folder that failed."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli([command], capsys)
    assert_one_line_error(code, err, f"no such folder: runs in {tmp_path}; pass the folder that "
                                     f"holds your runs (e.g. embedlab {command} path/to/runs)")


def test_tensorboard_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["tensorboard", str(tmp_path / "nope")], capsys)
    assert_one_line_error(code, err, "no such folder", "; pass the folder that holds your runs "
                                                       "(e.g. embedlab tensorboard runs/)")
    (tmp_path / "corpus.txt").write_text("a b c\n")
    code, _, err = run_cli(["tensorboard", str(tmp_path / "corpus.txt")], capsys)
    assert_one_line_error(code, err, f"{tmp_path / 'corpus.txt'} is not a folder; pass the folder")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run_cli(["tensorboard", str(tmp_path), "--port", str(port)], capsys)
    assert_one_line_error(code, err, f"port {port} on 127.0.0.1 is not available",
                          "; pass another --port or leave it out to pick a free one")
    code, _, err = run_cli(["tensorboard", str(tmp_path), "--port", "65536"], capsys)
    assert_one_line_error(code, err, "'--port': 65536 is not in the range 0<=x<=65535",
                          "(see 'embedlab tensorboard --help')")  # 0: a free one
    # TensorBoard's loader panics on such a path and serves nothing: refused up front
    bad = os.fsdecode(os.fsencode(tmp_path) + b"/tbd\xff")
    os.mkdir(bad)
    code, _, err = run_cli(["tensorboard", bad], capsys)
    assert_one_line_error(code, err, "tbd\\udcff is not valid UTF-8, which TensorBoard needs; "
                                     "rename the folder")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on port {port}"
            time.sleep(0.2)


@contextlib.contextmanager
def _server_group(cmd: list[str]) -> Iterator[subprocess.Popen[str]]:
    """``cmd`` in its own process group (its server child is in it too), killed afterwards
    whatever the test found, so no server outlives the test."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        yield proc
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _assert_stopped_with_its_child(proc: subprocess.Popen[str], signum: int, port: int) -> None:
    os.kill(proc.pid, signum)  # to embedlab alone, as `kill PID` does
    code = proc.wait(timeout=20)
    deadline = time.monotonic() + 5
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group_alive(proc.pid), "the server child outlived embedlab"
    assert code == 128 + signum  # the shell's convention for "stopped by this signal"
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # only a listener refuses it
        s.bind(("127.0.0.1", port))


def test_tensorboard_stopped_by_sigterm_stops_the_real_server(tmp_path: Path) -> None:
    """``kill PID`` on ``embedlab tensorboard`` must not leave TensorBoard behind, re-parented
    to pid 1 and holding the port."""
    with _server_group([sys.executable, "-m", "embedlab", "tensorboard", str(tmp_path)]) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(line.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
        _wait_listening(port)
        _assert_stopped_with_its_child(proc, signal.SIGTERM, port)


SERVE_STUB = """
import sys
from embedlab.cli.runs import serve
child = "import socket, time; s = socket.create_server(('127.0.0.1', 0)); " \\
        "print(s.getsockname()[1], flush=True); time.sleep(600)"
sys.exit(serve([sys.executable, "-c", child], "started"))
"""


def test_a_server_child_ends_when_embedlab_is_killed_outright() -> None:
    """SIGKILL reaches no handler: the kernel ends the child (its parent-death signal)."""
    with _server_group([sys.executable, "-c", SERVE_STUB]) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip(), proc.stdout.readline().strip()]
        port = int(next(x for x in lines if x.isdigit()))
        _wait_listening(port)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=20) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(proc.pid), "the server child outlived embedlab"


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_serve_stops_its_child_on_sighup_and_sigterm(signum: int) -> None:
    """The same for a hang-up, with a stand-in server that starts in a fraction of a second."""
    with _server_group([sys.executable, "-c", SERVE_STUB]) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip(), proc.stdout.readline().strip()]
        assert "started" in lines
        port = int(next(x for x in lines if x.isdigit()))
        _wait_listening(port)
        _assert_stopped_with_its_child(proc, signum, port)


def test_visualize_writes_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.checkpoint import CheckpointManager

    run = tmp_path / "run"
    vocab = fakerun.fake_vocab()
    fakerun.write_run_files(run, fakerun.make_config(), vocab)
    w = fakerun.embeddings_at(vocab, 7, 7)
    CheckpointManager(run).save(7, {"input_embeddings": w, "output_embeddings": w.copy()},
                              {"step": 7})
    out = tmp_path / "plot.png"
    code, stdout, _ = run_cli(["visualize", str(run), "--words", "40", "--out", str(out)], capsys)
    assert code == 0 and stdout.strip() == f"wrote {out}"
    assert out.read_bytes()[:4] == b"\x89PNG"
    # an existing file is replaced only with --force, as for export (it was overwritten silently)
    out.write_bytes(b"precious")
    code, _, err = run_cli(["visualize", str(run), "--words", "40", "--out", str(out)], capsys)
    assert_one_line_error(code, err, f"{out} already exists; pass --force to replace it")
    assert out.read_bytes() == b"precious"
    code, stdout, _ = run_cli(["visualize", str(run), "--words", "40", "--out", str(out),
                               "--force"], capsys)
    assert code == 0 and out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("args", "needles"), [
    (["--method", "umap"], ["'--method': 'umap' is not one of 'pca', 'tsne'"]),
    (["--words", "1"], ["--words must be >= 3, got 1; e.g. --words 300"]),
    ([], ["holds no checkpoints (no checkpoints/ folder); pass a run folder that has been "
          "trained, or a checkpoint folder\n"]),
    (["--step", "5", "--best"], ["--step and --best are mutually exclusive; pass one of them"]),
])
def test_visualize_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                args: list[str], needles: list[str]) -> None:
    code, _, err = run_cli(["visualize", str(tmp_path), *args], capsys)
    assert_one_line_error(code, err, *needles)


@pytest.mark.parametrize("command", ["runs", "tensorboard", "visualize"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0 and "Usage: embedlab " + command in out


def test_tensorboard_removes_older_experiment_summaries_except_in_busy_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One run finished by an embedlab before 2026-11-24 hid every other run's metrics from the
    # HParams table; `embedlab tensorboard` cleans such runs before serving, never a run that
    # a trainer holds.
    from embedlab.cli.runs import _drop_old_experiment_summaries
    from embedlab.run.lock import RunLock

    root = tmp_path / "runs"
    for name in ("old", "busy"):
        fakerun.simulate(root / name, steps=20, ckpt_every=10)
        fakerun.add_old_experiment_summary(root / name, 20)
    holder = RunLock(root / "busy").acquire()
    try:
        _drop_old_experiment_summaries(root)
    finally:
        holder.release()
    tag = b"_hparams_/experiment"
    assert tag not in next((root / "old").glob("events.out.tfevents.*")).read_bytes()
    assert tag in next((root / "busy").glob("events.out.tfevents.*")).read_bytes()
    assert "from 1 run(s)" in capsys.readouterr().err


def test_a_run_folder_without_its_config_is_named_not_called_empty(
        two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = two_runs / "demo-sg-lr0.5"
    (run / "config.json").unlink()
    (run / "checkpoints" / "ckpt-00000010").mkdir(parents=True)  # what a trained run holds
    code, _, err = run_cli(["runs", str(run)], capsys)
    assert_one_line_error(code, err, f"run {run} has checkpoints but no config.json, which holds "
                                     "its settings; restore config.json from a backup")


def test_runs_sorted_and_filtered(two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def order(out: str) -> list[str]:
        return [n for line in out.splitlines() for n in ("demo-sg-lr0.5", "demo-sg-lr1.0")
                if n in line]

    code, out, _ = run_cli(["runs", str(two_runs), "--sort", "optim.lr", "--reverse"], capsys)
    assert code == 0 and order(out) == ["demo-sg-lr1.0", "demo-sg-lr0.5"]
    code, out, _ = run_cli(["runs", str(two_runs), "--sort", "optim.lr"], capsys)
    assert code == 0 and order(out) == ["demo-sg-lr0.5", "demo-sg-lr1.0"]
    import json

    from embedlab.track.runs import find_runs, run_info

    with (two_runs / "demo-sg-lr1.0" / "metrics.jsonl").open("a") as f:  # a lower last loss
        f.write(json.dumps({"step": 21, "train/loss": 0.1}) + "\n")
    status = two_runs / "demo-sg-lr1.0" / "status.json"
    status.write_text(json.dumps({**json.loads(status.read_text()), "step": 21}))
    infos = [run_info(r, two_runs) for r in find_runs(two_runs)]
    assert len({i.loss for i in infos}) == 2
    by_loss = [i.name for i in sorted(infos, key=lambda i: i.loss)]
    code, out, _ = run_cli(["runs", str(two_runs), "--sort", "loss"], capsys)
    assert code == 0 and order(out) == by_loss
    code, out, _ = run_cli(["runs", str(two_runs), "--sort", "loss", "--reverse"], capsys)
    assert code == 0 and order(out) == by_loss[::-1]
    statuses = {i.status for i in infos}
    code, out, _ = run_cli(["runs", str(two_runs), *(a for s in statuses for a in ("--status", s))],
                           capsys)
    assert code == 0 and len(order(out)) == 2  # the runs of those statuses are kept
    code, out, _ = run_cli(["runs", str(two_runs), "--status", "failed"], capsys)
    assert code == 0 and out == f"no failed runs under {two_runs}\n"
    code, _, err = run_cli(["runs", str(two_runs), "--sort", "lr"], capsys)
    assert_one_line_error(code, err, "--sort lr: no such column or hyperparameter; pass one of "
                                     "run, status, step, saved, words, loss, best, wall, or a key "
                                     "such as optim.lr")
    code, _, err = run_cli(["runs", str(two_runs), "--status", "failed", "--reverse"], capsys)
    assert_one_line_error(code, err, "--reverse orders by --sort; pass e.g. --sort loss --reverse")
    code, _, err = run_cli(["runs", str(two_runs), "--status", "failed", "--sort", "lr"], capsys)
    assert_one_line_error(code, err, "--sort lr: no such column or hyperparameter")


def test_many_runs_split_the_hyperparameters_over_tables(tmp_path: Path) -> None:
    """Many runs side by side would cut every cell at a terminal's width: 6 runs a table."""
    import dataclasses

    from rich.console import Console

    from embedlab.config import OptimConfig
    from embedlab.track.runs import find_runs, run_info, runs_tables

    root = tmp_path / "runs"
    for k in range(8):
        cfg = dataclasses.replace(fakerun.make_config(tensorboard=False),
                                  optim=dataclasses.replace(OptimConfig(), lr=0.01 * (k + 1)))
        fakerun.write_run_files(root / f"r{k}", cfg, fakerun.fake_vocab())
    infos = [run_info(r, root) for r in find_runs(root)]
    tables = runs_tables(infos, all_hparams=True)
    assert [t.title for t in tables[1:]] == ["hyperparameters (runs 1–6 of 8)",
                                             "hyperparameters (runs 7–8 of 8)"]
    console = Console(width=120, record=True)
    console.print(*tables)
    assert "0.08" in console.export_text() and "…" not in console.export_text()
