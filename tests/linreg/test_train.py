"""Linear regression on the experiment core: fit, exact resume (in-process and after SIGKILL)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.cli import cli, main
from embedlab.errors import InputError, TrainingInterrupted
from embedlab.linreg.train import LinRegConfig, batch_indices, read_table, train_linreg


def _table(path: Path, n: int = 60, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, 7, n)
    y = 85 - 6 * x + rng.normal(0, 1, n)
    rows = [f"C{i}\t{a:.3f}\t{b:.6f}" for i, (a, b) in enumerate(zip(x, y, strict=True))]
    path.write_text("Country\tBirth rate\tLife expectancy\n" + "\n".join(rows) + "\n")
    return path


def _params(run: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(find_checkpoint(run), framework="pt")[0]


CFG = LinRegConfig(steps=600, lr=0.02, batch_size=8, checkpoint_every=50)


def test_fits_the_line(tmp_path: Path) -> None:
    res = train_linreg(_table(tmp_path / "t.tsv"), tmp_path / "run",
                       LinRegConfig(steps=4000, lr=0.02, batch_size=8), argv=["test"])
    assert res.step == 4000 and abs(res.w + 6) < 0.5 and abs(res.b - 85) < 2.5
    x = read_table(tmp_path / "t.tsv")
    ols = np.polyfit(x.x.numpy(), x.y.numpy(), 1)
    assert res.loss < 1.5 * float(np.mean((np.polyval(ols, x.x.numpy()) - x.y.numpy()) ** 2))
    for name in ("config.json", "env.json", "checkpoint", "metrics.jsonl"):
        assert (tmp_path / "run" / name).is_file()


def test_exact_resume_bit_for_bit(tmp_path: Path) -> None:
    table = _table(tmp_path / "t.tsv")
    full = train_linreg(table, tmp_path / "a", CFG, argv=["a"])
    assert full.resumed_from is None and full.step == 600
    part = train_linreg(table, tmp_path / "b", CFG, argv=["b"], max_steps=237)
    assert part.step == 237 and part.resumed_from is None
    rest = train_linreg(table, tmp_path / "b", CFG, argv=["b"])
    assert rest.resumed_from == 237 and rest.step == 600
    a, b = _params(tmp_path / "a"), _params(tmp_path / "b")
    assert torch.equal(a["w"], b["w"]) and torch.equal(a["b"], b["b"])
    steps = [int(line.split('"step": ')[1].split(",")[0])
             for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps))  # no duplicated or out-of-order lines after resume


def test_a_resume_drops_the_lines_and_folders_of_work_lost_with_a_killed_process(
        tmp_path: Path) -> None:
    # what a SIGKILL may leave past the newest checkpoint (step 100): the metrics line of a
    # step whose checkpoint was not committed, a torn line, a half-written checkpoint folder
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "run"
    train_linreg(table, run, CFG, argv=["a"], max_steps=100)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 150, "loss": 1.0}\n{"step": 2')
    stale = run / "checkpoints" / "ckpt-00000150.tmp-0123456789ab"
    stale.mkdir()
    (stale / "tensors.safetensors").write_bytes(b"half")
    train_linreg(table, run, CFG, argv=["b"], max_steps=200)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [50, 100, 150, 200] and rows[2]["loss"] != 1.0
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "ckpt-00000050", "ckpt-00000100", "ckpt-00000150", "ckpt-00000200"]


def test_a_run_killed_in_its_first_save_starts_afresh(tmp_path: Path) -> None:
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "run"
    train_linreg(table, tmp_path / "ref", CFG, argv=["ref"], max_steps=100)
    (run / "checkpoints" / "ckpt-00000050.tmp-0123456789ab").mkdir(parents=True)
    res = train_linreg(table, run, CFG, argv=["a"], max_steps=100)
    assert res.resumed_from is None
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "ckpt-00000050", "ckpt-00000100"]
    a, b = _params(run), _params(tmp_path / "ref")
    assert torch.equal(a["w"], b["w"]) and torch.equal(a["b"], b["b"])


def test_sigkill_then_resume_matches(tmp_path: Path) -> None:
    table = _table(tmp_path / "t.tsv")
    cfg = LinRegConfig(steps=200_000, lr=0.02, batch_size=8, checkpoint_every=500)
    run = tmp_path / "killed"
    cmd = [sys.executable, "-m", "embedlab", "linreg", str(table), "--run", str(run),
           "--steps", str(cfg.steps), "--lr", "0.02", "--batch-size", "8",
           "--checkpoint-every", "500"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (run / "checkpoint").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(random.uniform(0.0, 0.5))  # a random moment, possibly mid-save
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed_at = int(load_checkpoint(find_checkpoint(run))[1]["step"])
    assert 0 < killed_at < cfg.steps
    stop = killed_at + 700
    train_linreg(table, run, cfg, argv=["resume"], max_steps=stop)
    train_linreg(table, tmp_path / "ref", cfg, argv=["ref"], max_steps=stop)
    a, b = _params(run), _params(tmp_path / "ref")
    assert torch.equal(a["w"], b["w"]) and torch.equal(a["b"], b["b"])


def test_sigterm_saves_and_exits_143(tmp_path: Path) -> None:
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "embedlab", "linreg", str(table), "--run",
                             str(run), "--steps", "10000000", "--checkpoint-every", "1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (run / "checkpoint").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    last = err.strip().splitlines()[-1]
    step = int(last.split()[2])
    assert last == f"saved step {step} — re-run the same command to resume"
    assert int(load_checkpoint(find_checkpoint(run))[1]["step"]) == step
    assert not (run / ".lock").exists()


def test_signal_in_process_raises_interrupted(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab.linreg.train as lr

    real = lr.sgd_step
    calls = {"n": 0}

    def step_then_signal(*args: object, **kwargs: object) -> dict[str, torch.Tensor]:
        calls["n"] += 1
        if calls["n"] == 42:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lr, "sgd_step", step_then_signal)
    with pytest.raises(TrainingInterrupted, match="saved step 42 — re-run") as e:
        train_linreg(_table(tmp_path / "t.tsv"), tmp_path / "run", CFG, argv=["x"])
    assert e.value.exit_code == 130
    assert load_checkpoint(find_checkpoint(tmp_path / "run"))[1]["step"] == 42


@given(n=st.integers(2, 50), bs=st.integers(1, 20), seed=st.integers(0, 5))
def test_property_each_epoch_visits_every_row_once(n: int, bs: int, seed: int) -> None:
    per_epoch = -(-n // bs)
    for epoch in range(2):
        rows = np.concatenate([batch_indices(seed, n, bs, epoch * per_epoch + k)
                               for k in range(per_epoch)])
        assert sorted(rows.tolist()) == list(range(n))


@pytest.mark.parametrize(("content", "match"), [
    ("h\n1\t2\n", "has 1 data row;"),
    ("h\n1\t2\n3\n", r"t\.tsv:3: expected at least 2 tab-separated columns"),
    ("h\n1\tx\n3\t4\n", r"t\.tsv:2: '1' / 'x' is not a number"),
    ("h\n1\tnan\n3\t4\n", "values must be finite"),
    # read as x=2, y=9 without a word: x and y are a row's last two fields
    ("c\tx\ty\na\t1\t2\nb\t2\t9\t3\nc\t3\t4\n",
     r"t\.tsv:3: 4 tab-separated columns, but the first row \(line 2\) has 3"),
    ("x\ty\t\n1\t2\t\n3\t4\t\n", r"t\.tsv:2: the row ends in a tab"),
    # inf in the float32 the model computes in, blamed on the learning rate
    ("x\ty\n1e39\t2\n2\t3\n", r"t\.tsv:2: 1e\+39 is beyond float32's range"),
])
def test_bad_tables(tmp_path: Path, content: str, match: str) -> None:
    (tmp_path / "t.tsv").write_text(content)
    with pytest.raises(InputError, match=match):
        read_table(tmp_path / "t.tsv")


def test_cli_errors_are_one_line_and_leave_run_intact(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "run"
    runner = CliRunner()
    ok = runner.invoke(cli, ["linreg", str(table), "--run", str(run), "--steps", "100",
                             "--checkpoint-every", "50"])
    assert ok.exit_code == 0, ok.output
    # every file, env.json included: a refused resume must not be recorded as a resume
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert run / "env.json" in before
    for args, msg in [
        (["--lr", "0.5"], "cannot resume"),
        (["--steps", "0"], "--steps must be an integer from 1 to 9223372036854775807, got 0; "
                           "pass e.g. --steps 2000"),
        (["--seed", str(2**63)], "--seed must be an integer from 0 to 9223372036854775807"),
        (["--lr", "nan"], "--lr must be a finite number"),
    ]:
        code, err = _main(["linreg", str(table), "--run", str(run), *args], capsys)
        assert code == 2 and err.count("\n") == 1 and msg in err
        assert err.startswith("embedlab: error: ")
    (tmp_path / "other.tsv").write_text("h\n1\t2\n3\t5\n")
    code, err = _main(["linreg", str(tmp_path / "other.tsv"), "--run", str(run)], capsys)
    assert code == 2 and "the table differs" in err
    code, err = _main(["linreg", str(tmp_path / "missing.tsv"), "--run", str(run)], capsys)
    assert code == 2 and "does not exist" in err
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert after == before


def test_a_damaged_index_leaves_the_run_untouched(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # config.json and env.json were rewritten before the index was found damaged
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "run"
    main(["linreg", str(table), "--run", str(run), "--steps", "100", "--checkpoint-every", "50"])
    (run / "checkpoint").write_bytes(b"\xff\xfe\x80")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    code, err = _main(["linreg", str(table), "--run", str(run), "--steps", "200"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "checkpoint is damaged (not UTF-8 text); delete it" in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The real entry point in-process (error formatting + exit code), cheaper than a subprocess."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(args)
    return int(e.value.code or 0), capsys.readouterr().err


def test_unwritable_run_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path / "t.tsv")
    (tmp_path / "my.txt").write_text("precious")
    code, err = _main(["linreg", str(table), "--run", str(tmp_path / "my.txt")], capsys)
    assert code == 2 and err.count("\n") == 1 and "--run" in err and "is a file" in err
    code, err = _main(["linreg", str(table), "--run", str(tmp_path / "my.txt" / "lr")], capsys)
    assert code == 2 and err == (f"embedlab: error: --run {tmp_path / 'my.txt' / 'lr'} lies "
                                 f"below {tmp_path / 'my.txt'}, which is a file; pass a path "
                                 "whose parents are folders\n")
    assert (tmp_path / "my.txt").read_text() == "precious"
    # a folder of someone else's files is refused as train refuses it, and left as it was
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("x")
    code, err = _main(["linreg", str(table), "--run", str(tmp_path / "home")], capsys)
    assert code == 2 and "is a folder holding other files, not an embedlab run" in err
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["thesis.tex"]

    def denied(*args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied")  # as in a read-only folder (we are root)

    monkeypatch.setattr("embedlab.run.lock.RunLock.acquire", denied)
    code, err = _main(["linreg", str(table), "--run", str(tmp_path / "ro")], capsys)
    assert code == 2 and err.count("\n") == 1 and "Permission denied" in err
    assert "pass --run in a writable folder" in err


def test_divergence_is_one_line_and_saves_nothing_non_finite(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path / "t.tsv")
    code, err = _main(["linreg", str(table), "--run", str(tmp_path / "a"), "--lr", "100"], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("embedlab: error: ")
    assert "diverged" in err and "no checkpoint was written" in err and err.endswith(
        "Start over with a lower learning rate (the same --run: nothing was kept), e.g. --lr 10 "
        "or lower\n")
    assert not (tmp_path / "a").exists()  # the new run's folder goes: the same --run starts over
    main(["linreg", str(table), "--run", str(tmp_path / "a"), "--lr", "0.001", "--steps", "5"])
    assert find_checkpoint(tmp_path / "a").name == "ckpt-00000005"
    # diverging after some saves: those checkpoints stay, all finite
    code, err = _main(["linreg", str(table), "--run", str(tmp_path / "b"), "--lr", "0.1",
                       "--checkpoint-every", "1", "--keep", "1000"], capsys)
    assert code == 2 and err.count("\n") == 1 and "diverged at step" in err
    steps = sorted(int(p.name.split("-")[1]) for p in (tmp_path / "b/checkpoints").iterdir())
    assert steps and f"checkpoints up to step {steps[-1]} are intact" in err
    for step in steps:
        params = load_checkpoint(find_checkpoint(tmp_path / "b", step=step), framework="pt")[0]
        assert all(torch.isfinite(t).all() for t in params.values())
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(steps) and "Infinity" not in lines[-1] and "NaN" not in lines[-1]


def test_overflowing_loss_with_finite_parameters_is_not_saved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab.linreg.train as lr

    monkeypatch.setattr(lr, "mse", lambda params, table: float("inf"))
    with pytest.raises(InputError, match="diverged at step 50: the loss became inf"):
        train_linreg(_table(tmp_path / "t.tsv"), tmp_path / "run", CFG, argv=["test"])
    assert not (tmp_path / "run" / "checkpoints").exists()


FIXTURES = Path(__file__).resolve().parent / "fixtures"
# recorded by resuming the fixture with the version that made it (see fixtures/README.md)
LEGACY_FINAL_SHA256 = "3d93105cfc61781431e404b5795f0b8585c17fdcc687f3409d2bdaae43a0b730"
LEGACY_METRICS = [(50, 603.7989501953125), (100, 346.4370422363281), (150, 216.7831573486328),
                  (200, 88.05622100830078), (237, 54.21333694458008), (250, 47.12053298950195),
                  (300, 25.613338470458984), (350, 14.008822441101074), (400, 8.327057838439941),
                  (450, 4.659545421600342), (500, 2.916764259338379), (550, 2.1147258281707764),
                  (600, 2.2237932682037354)]


def test_a_run_of_an_earlier_version_resumes_bit_identical(tmp_path: Path) -> None:
    run = tmp_path / "legacy_run"
    shutil.copytree(FIXTURES / "legacy_run", run)
    result = CliRunner().invoke(cli, ["linreg", str(FIXTURES / "table.tsv"), "--run", str(run),
                                      "--steps", "600", "--lr", "0.02", "--batch-size", "8",
                                      "--checkpoint-every", "50"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("step 600: w=-5.81266 b=83.2902 ")
    assert result.stderr == f"embedlab: resuming {run} from ckpt-00000237 (step 237)\n"
    final = run / "checkpoints" / "ckpt-00000600" / "tensors.safetensors"
    assert hashlib.sha256(final.read_bytes()).hexdigest() == LEGACY_FINAL_SHA256
    expected = "".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in LEGACY_METRICS)
    assert (run / "metrics.jsonl").read_text() == expected


def test_word2vec_commands_name_a_linreg_run_as_such(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "lr"
    main(["linreg", str(table), "--run", str(run), "--steps", "5"])
    code, err = _main(["train", "--run", str(run)], capsys)
    assert code == 2 and err == (f"embedlab: error: {run} is a run of 'embedlab linreg', not of "
                                 "word2vec; pass another --run\n")
    for command in (["neighbors", str(run), "water"], ["export", str(run), "--out",
                                                         str(tmp_path / "v.txt")],
                    ["visualize", str(run), "--out", str(tmp_path / "p.png")]):
        code, err = _main(command, capsys)
        assert code == 2 and err == (f"embedlab: error: {run} is a run of 'embedlab linreg' (a "
                                     "line's w and b), not word vectors; pass a run of "
                                     "'embedlab train'\n")


def test_a_run_another_process_holds_is_left_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two commands making the same new run: both find it missing, one takes the lock; the
    other, refused, removes nothing of the folder the first trains in."""
    import embedlab.linreg.train as lr
    from embedlab.run.lock import RunLock

    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "new"
    monkeypatch.setattr(lr, "missing_folders", lambda path: [path])  # it was missing
    with RunLock(run):
        (run / "config.json").write_text("{}")
        with pytest.raises(InputError, match="is in use by pid"):
            train_linreg(table, run, LinRegConfig(steps=3), argv=["x"])
        assert (run / "config.json").is_file()


def test_a_word2vec_folder_without_checkpoints_is_not_taken_over(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "w2v"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"model": {"dim": 8}}))
    code, err = _main(["linreg", str(table), "--run", str(run), "--steps", "3"], capsys)
    assert code == 2 and f"embedlab: error: {run} is a word2vec run; pass another --run folder " \
        "for linreg\n" in err
    assert json.loads((run / "config.json").read_text()) == {"model": {"dim": 8}}
    # a linreg folder with a config and no checkpoint starts afresh, without its old rows
    lr = tmp_path / "lr"
    lr.mkdir()
    (lr / "config.json").write_text(json.dumps({"model": "linreg", "lr": 5.0}))
    (lr / "metrics.jsonl").write_text('{"step": 9, "loss": 1.0}\n')
    main(["linreg", str(table), "--run", str(lr), "--steps", "2"])
    assert [json.loads(x)["step"] for x in (lr / "metrics.jsonl").read_text().splitlines()] == [2]


def test_the_same_command_without_its_flags_resumes(tmp_path: Path) -> None:
    """Re-running 'linreg TABLE --run RUN' resumes with the run's own settings, as 'train'
    does: the run of an earlier version too, to the same bits."""
    run = tmp_path / "legacy_run"
    shutil.copytree(FIXTURES / "legacy_run", run)
    result = CliRunner().invoke(cli, ["linreg", str(FIXTURES / "table.tsv"), "--run", str(run),
                                      "--steps", "600"])
    assert result.exit_code == 0, result.output
    final = run / "checkpoints" / "ckpt-00000600" / "tensors.safetensors"
    assert hashlib.sha256(final.read_bytes()).hexdigest() == LEGACY_FINAL_SHA256
    # a flag given that differs is still refused
    result = CliRunner().invoke(cli, ["linreg", str(FIXTURES / "table.tsv"), "--run", str(run),
                                      "--lr", "0.5"])
    assert isinstance(result.exception, InputError)
    assert "--lr (stored 0.02, requested 0.5)" in str(result.exception)


def test_a_call_that_trains_nothing_changes_no_setting(tmp_path: Path) -> None:
    # --steps 50 on a run at step 100 trained nothing but recorded steps 50, and the next
    # --max-steps 150 was told "not before step 50"
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "run"
    runner = CliRunner()
    args = ["linreg", str(table), "--run", str(run)]
    assert runner.invoke(cli, [*args, "--steps", "100"]).exit_code == 0
    before = {name: (run / name).read_bytes() for name in ("config.json", "env.json")}
    done = runner.invoke(cli, [*args, "--steps", "50"])
    assert done.exit_code == 0
    assert "at step 100, at or past --steps 50; nothing to train" in done.output
    assert {name: (run / name).read_bytes() for name in before} == before
    more = runner.invoke(cli, [*args, "--steps", "100", "--max-steps", "150"])
    assert more.exit_code == 0 and "at or past --steps 100" in more.output
    further = runner.invoke(cli, [*args, "--steps", "150"])
    assert further.exit_code == 0 and "step 150" in further.output


def test_max_steps_says_to_continue_without_it(tmp_path: Path) -> None:
    # the help said "re-run to continue", but the same command with the same --max-steps
    # trains nothing: the run continues without it, or with a larger value
    runner = CliRunner()
    help_text = runner.invoke(cli, ["linreg", "--help"], terminal_width=200).output
    shown = " ".join(help_text.split())  # wrapped at any width, one line
    assert "at this global step; re-run without it (or with a larger value) to continue" in shown
    table = _table(tmp_path / "t.tsv")
    run = tmp_path / "run"
    args = ["linreg", str(table), "--run", str(run), "--steps", "100"]
    assert runner.invoke(cli, [*args, "--max-steps", "40"]).exit_code == 0
    again = runner.invoke(cli, [*args, "--max-steps", "40"])
    assert again.exit_code == 0
    assert ("at step 40 already, not before --max-steps 40; nothing to train (re-run without "
            "--max-steps, or with a larger value, to continue)") in again.output
    larger = runner.invoke(cli, [*args, "--max-steps", "70"])
    assert larger.exit_code == 0 and "step 70:" in larger.output
    without = runner.invoke(cli, args)
    assert without.exit_code == 0 and "step 100:" in without.output


def test_a_first_line_of_numbers_is_read_as_the_header_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a table without its header lost its first row to it, in silence; a header naming its
    # columns by year is a header, so this is said, not refused
    (tmp_path / "t.tsv").write_text("1\t2\n3\t4\n5\t6\n")
    table = read_table(tmp_path / "t.tsv")
    assert table.x.tolist() == [3.0, 5.0]
    assert "t.tsv:1 is read as the table's header, but its last two columns are numbers" in \
        capsys.readouterr().err
    (tmp_path / "t.tsv").write_text("Country\tbirth\t2010\nA\t1\t2\nB\t3\t4\n")
    read_table(tmp_path / "t.tsv")
    assert capsys.readouterr().err == ""
