"""status.json, dead-pid detection, run discovery and the comparison table."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from embedlab.checkpoint.index import Index
from embedlab.config import OptimConfig, TrainConfig
from embedlab.errors import InputError
from embedlab.run.lock import RunLock
from embedlab.run.status import read_status, write_status
from embedlab.track.jsonl import METRICS_FILE, read_metrics
from embedlab.track.runs import (
    differing_keys,
    effective_status,
    find_runs,
    format_count,
    format_duration,
    run_info,
    runs_tables,
)

from .fakerun import fake_vocab, write_run_files


def test_write_status_merges_and_stamps(tmp_path: Path) -> None:
    write_status(tmp_path, status="running", step=0, pid=123)
    st1 = write_status(tmp_path, step=10, loss=1.5)
    assert read_status(tmp_path) == st1
    assert st1["status"] == "running" and st1["step"] == 10 and st1["pid"] == 123
    assert st1["loss"] == 1.5 and isinstance(st1["updated"], float)
    assert not [p for p in tmp_path.iterdir() if p.name != "status.json"]  # no temp files left


def test_write_status_rejects_unknown_state(tmp_path: Path) -> None:
    write_status(tmp_path, status="finished")
    with pytest.raises(ValueError, match="status must be one of"):
        write_status(tmp_path, status="done")
    assert read_status(tmp_path)["status"] == "finished"  # the saved file is untouched


def test_read_status_missing_or_corrupt_is_empty(tmp_path: Path) -> None:
    assert read_status(tmp_path) == {}
    (tmp_path / "status.json").write_text('{"status": "runn')
    assert read_status(tmp_path) == {}
    assert write_status(tmp_path, status="failed")["status"] == "failed"


json_values = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                        st.text(max_size=20), st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: k not in ("status",
                       "updated", "host")), json_values, max_size=6))
def test_status_round_trip(tmp_path_factory: pytest.TempPathFactory, fields: dict) -> None:
    run = tmp_path_factory.mktemp("st")
    written = write_status(run, **fields)
    back = read_status(run)
    assert back == written
    assert {k: back[k] for k in fields} == fields


def test_running_with_dead_pid_shows_failed() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    import socket

    host = socket.gethostname()
    assert effective_status({"status": "running", "pid": proc.pid, "host": host}) == "failed"
    import os

    assert effective_status({"status": "running", "pid": os.getpid(), "host": host}) == "running"
    assert effective_status({"status": "running", "pid": 1, "host": "elsewhere"}) == "running"
    assert effective_status({"status": "interrupted", "pid": proc.pid}) == "interrupted"
    assert effective_status({}) == "unknown"


def _make_run(path: Path, **optim: object) -> None:
    cfg = dataclasses.replace(TrainConfig(), optim=dataclasses.replace(OptimConfig(), **optim))
    write_run_files(path, cfg, fake_vocab())


def test_find_runs_nested_and_single(tmp_path: Path) -> None:
    _make_run(tmp_path / "a")
    _make_run(tmp_path / "group" / "b")
    (tmp_path / "a" / "exports").mkdir()
    (tmp_path / "a" / "exports" / "config.json").write_text("{}")  # inside a run: ignored
    (tmp_path / "notarun").mkdir()
    assert find_runs(tmp_path) == [tmp_path / "a", tmp_path / "group" / "b"]
    assert find_runs(tmp_path / "a") == [tmp_path / "a"]
    with pytest.raises(InputError, match="no such folder"):
        find_runs(tmp_path / "missing")
    with pytest.raises(InputError, match="not a folder"):
        find_runs(tmp_path / "a" / "config.json")


def test_run_info_and_table(tmp_path: Path) -> None:
    _make_run(tmp_path / "sg-lr0.5", lr=0.5)
    _make_run(tmp_path / "sg-lr1.0", lr=1.0)
    write_status(tmp_path / "sg-lr0.5", status="finished", step=200, words_seen=1_234_567,
                 loss=9.0, wall_time=3725.0)
    with (tmp_path / "sg-lr0.5" / "metrics.jsonl").open("w") as f:
        f.write(json.dumps({"step": 100, "train/loss": 2.5}) + "\n")
        f.write(json.dumps({"step": 200, "train/loss": 2.0}) + "\n")
    infos = [run_info(r, tmp_path) for r in find_runs(tmp_path)]
    a, b = infos
    assert (a.name, a.status, a.step, a.loss) == ("sg-lr0.5", "finished", 200, 2.0)
    assert a.best == "train/loss 2.0000 @200"
    assert (b.status, b.step, b.loss, b.best) == ("unknown", None, None, "")
    assert differing_keys(infos) == ["optim.lr"]
    console = Console(width=200, record=True)
    tables = runs_tables(infos)
    assert len(tables) == 1
    console.print(*tables)
    out = console.export_text()
    header = out.splitlines()[1]
    assert "optim.lr" in header and "model.dim" not in out
    row = next(line for line in out.splitlines() if "sg-lr0.5" in line)
    for cell in ("finished", "200", "1.2M", "2.0000", "train/loss 2.0000 @200", "1:02:05", "0.5"):
        assert cell in row, cell
    tables = runs_tables(infos, all_hparams=True)
    assert len(tables) == 2
    console = Console(width=200, record=True)
    console.print(tables[1])
    lines = console.export_text().splitlines()
    dim = next(line for line in lines if "model.dim" in line)
    assert dim.count("100") == 2  # one cell per run
    assert len([line for line in lines if "│" in line]) == len(infos[0].hparams)  # body rows


def test_run_info_unreadable_config(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="unreadable"):
        run_info(tmp_path / "r", tmp_path)


@pytest.mark.parametrize("field, value, needle", [
    ("wall_time", "x", "wall_time is 'x'"),
    ("wall_time", float("inf"), "wall_time is inf"),
    ("words_seen", "x", "words_seen is 'x'"),
    ("words_seen", 10**400, "words_seen is 1000"),
    ("step", True, "step is True"),
    ("pid", 99999999999999999999, "pid is 99999999999999999999"),
    ("status", 5, "status is 5"),
    ("host", ["h"], "host is ['h']"),
    ("loss", "low", "loss is 'low'"),
], ids=["wall-text", "wall-inf", "words-text", "words-huge", "step-bool", "pid-huge",
        "status-int", "host-list", "loss-text"])
def test_run_info_lists_a_status_field_of_the_wrong_type_as_unknown(
        tmp_path: Path, field: str, value: object, needle: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    _make_run(tmp_path / "r")
    status = {"status": "running", "pid": os.getpid(), "step": 5, "words_seen": 10,
              "wall_time": 1.0, field: value}
    (tmp_path / "r" / "status.json").write_text(json.dumps(status))
    info = run_info(tmp_path / "r", tmp_path)
    assert (info.status, info.step, info.words_seen, info.wall_time) == ("unknown", None, None,
                                                                         None)
    msg = capsys.readouterr().err
    assert "status.json is unreadable" in msg and needle in msg and "fix or remove" in msg
    assert msg.endswith(f"; listing {tmp_path / 'r'} with status unknown\n")
    assert msg.count("\n") == 1 and len(msg) < 400


def test_a_cut_short_status_is_said_and_a_running_status_needs_its_lock(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _make_run(tmp_path / "r")
    status = tmp_path / "r" / "status.json"
    status.write_text('{"status": "fini')
    assert run_info(tmp_path / "r", tmp_path).status == "unknown"
    assert "status.json is unreadable (not a JSON object: cut short?)" in capsys.readouterr().err
    # "running" with a live pid that is not the run's: nothing holds the run's lock
    status.write_text(json.dumps({"status": "running", "pid": 1, "host": socket.gethostname()}))
    assert run_info(tmp_path / "r", tmp_path).status == "failed"
    # a lock file naming a live process that does not hold it (a killed trainer's pid reused)
    (tmp_path / "r" / ".lock").write_text(json.dumps({"pid": os.getpid(),
                                                      "host": socket.gethostname()}))
    assert run_info(tmp_path / "r", tmp_path).status == "failed"
    with RunLock(tmp_path / "r", argv=["test"]):  # held, as by a trainer
        assert run_info(tmp_path / "r", tmp_path).status == "running"
    assert capsys.readouterr().err == ""


def test_run_info_refuses_a_text_config_field_of_another_type(tmp_path: Path) -> None:
    _make_run(tmp_path / "r")
    raw = json.loads((tmp_path / "r" / "config.json").read_text())
    raw["checkpoint"]["best_metric"] = 5
    (tmp_path / "r" / "config.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"unreadable \(checkpoint.best_metric is 5, not a string"):
        run_info(tmp_path / "r", tmp_path)


def test_run_info_names_the_file_of_a_value_out_of_range(tmp_path: Path) -> None:
    """The file and its key, not the train flag inside the value's check: runs has no --lr."""
    _make_run(tmp_path / "r")
    raw = json.loads((tmp_path / "r" / "config.json").read_text())
    raw["optim"]["lr"] = -1
    (tmp_path / "r" / "config.json").write_text(json.dumps(raw))
    with pytest.raises(InputError) as e:
        run_info(tmp_path / "r", tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'r' / 'config.json'} holds a value embedlab "
                                   "cannot use (")
    assert str(e.value).endswith("; fix that key in the file")


def test_status_odd_but_harmless_values_are_shown(tmp_path: Path) -> None:
    _make_run(tmp_path / "r")
    write_status(tmp_path / "r", status="finished", loss=None, wall_time=-5.0)
    info = run_info(tmp_path / "r", tmp_path)
    assert info.status == "finished" and info.loss is None
    assert format_duration(info.wall_time) == "0:00:00"  # a clock set back: not "-1:59:55"
    # a lock's pid that is no pid cannot be checked: shown as stored, not a crash
    assert effective_status({"status": "running", "pid": 10**20}) == "running"


def test_formatting() -> None:
    assert format_duration(None) == "" and format_duration(59.9) == "0:00:59"
    assert format_count(999) == "999" and format_count(17_000_000) == "17.0M"
    assert format_count(999_999) == "1.0M" and format_count(999_949) == "999.9k"
    assert format_count(1_000) == "1.0k"


def test_best_is_the_best_checkpoint_with_enough_digits(tmp_path: Path) -> None:
    run = tmp_path / "sg"
    _make_run(run)
    with (run / "metrics.jsonl").open("w") as f:
        for step, loss in ((6300, 2.1), (6400, 1.9997), (6500, 2.05)):
            f.write(json.dumps({"step": step, "train/loss": loss}) + "\n")
    # no checkpoint index: the best logged window
    assert run_info(run, tmp_path).best == "train/loss 1.9997 @6400"
    # the best checkpoint, saved after that window, holds its loss: the step named is its own
    index = Index(latest=6500, kept=(6420, 6500), best=6420, best_metric="loss",
                  best_value=1.9997, best_mode="min")
    (run / "checkpoint").write_text(index.render())
    assert run_info(run, tmp_path).best == "train/loss 1.9997 @6420"
    (run / "checkpoint").write_bytes(b"\xff\xfe")  # damaged: listed as if it had none
    assert run_info(run, tmp_path).best == "train/loss 1.9997 @6400"


def test_a_best_evaluated_only_at_its_checkpoint_has_the_tag_of_a_logged_one(
        tmp_path: Path) -> None:
    """A checkpoint evaluated for --best-metric analogy before any window logged it: the same
    label, eval/analogy, as when the value was logged."""
    from embedlab.config import CheckpointConfig

    run = tmp_path / "sg"
    cfg = dataclasses.replace(TrainConfig(), checkpoint=CheckpointConfig(best_metric="analogy:max"))
    write_run_files(run, cfg, fake_vocab())
    (run / "metrics.jsonl").write_text(json.dumps({"step": 100, "train/loss": 2.5}) + "\n")
    index = Index(latest=600, kept=(600,), best=600, best_metric="analogy", best_value=0.036036,
                  best_mode="max")
    (run / "checkpoint").write_text(index.render())
    assert run_info(run, tmp_path).best == "eval/analogy 0.036036 @600"


def _linreg_run(run: Path, tmp_path: Path, *, max_steps: int | None = None) -> None:
    from embedlab.linreg.train import LinRegConfig, train_linreg

    table = tmp_path / "table.tsv"
    rows = [f"c{i}\t{1 + i % 7 * 0.5}\t{80 - 4 * (1 + i % 7 * 0.5)}" for i in range(40)]
    table.write_text("Country\tBirth rate\tLife expectancy\n" + "\n".join(rows) + "\n")
    train_linreg(table, run, LinRegConfig(steps=300, checkpoint_every=100), argv=["linreg"],
                 max_steps=max_steps)


def test_linreg_runs_are_listed_as_their_own_kind(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _make_run(root / "sg")
    _linreg_run(root / "linreg-done", tmp_path)
    _linreg_run(root / "linreg-part", tmp_path, max_steps=200)
    infos = {i.name: i for i in (run_info(r, root) for r in find_runs(root))}
    sg, done, part = infos["sg"], infos["linreg-done"], infos["linreg-part"]
    assert (sg.kind, done.kind, part.kind) == ("word2vec", "linreg", "linreg")
    assert (done.status, done.step, part.status, part.step) == ("finished", 300, "interrupted",
                                                                200)
    losses = [r["loss"] for r in read_metrics(root / "linreg-part" / METRICS_FILE)]
    assert part.loss == losses[-1] and part.best.startswith("loss ")
    assert done.hparams["linreg.lr"] == 0.01 and done.hparams["linreg.steps"] == 300
    # keys of one kind are compared among the runs of that kind only
    assert differing_keys(list(infos.values())) == []
    console = Console(width=300, record=True)
    console.print(*runs_tables(list(infos.values())))
    out = console.export_text()
    assert "kind" in out.splitlines()[1]
    row = next(line for line in out.splitlines() if "linreg-part" in line)
    for cell in ("linreg", "interrupted", "200", f"{part.loss:.4f}"):
        assert cell in row, cell


def test_a_killed_linreg_run_shows_failed(tmp_path: Path) -> None:
    run = tmp_path / "linreg"
    _linreg_run(run, tmp_path, max_steps=100)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run / ".lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    assert run_info(run, tmp_path).status == "failed"
    (run / ".lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    assert run_info(run, tmp_path).status == "failed"  # named, but not held
    with RunLock(run, argv=["test"]):
        assert run_info(run, tmp_path).status == "running"


def test_per_invocation_settings_are_not_differing_hyperparameters(tmp_path: Path) -> None:
    from embedlab.config import TrackConfig

    for name, lr, max_steps, progress in (("a", 0.5, 100, True), ("b", 1.0, None, False)):
        cfg = dataclasses.replace(TrainConfig(), max_steps=max_steps, threads=1 + len(name),
                                  optim=dataclasses.replace(OptimConfig(), lr=lr),
                                  track=dataclasses.replace(TrackConfig(), progress=progress))
        write_run_files(tmp_path / name, cfg, fake_vocab())
    infos = [run_info(r, tmp_path) for r in find_runs(tmp_path)]
    assert {"max_steps", "track.progress"} <= {k for k in infos[0].hparams
                                                if infos[0].hparams[k] != infos[1].hparams[k]}
    assert differing_keys(infos) == ["optim.lr"]


def test_the_noise_settings_of_hierarchical_softmax_runs_are_no_difference(
        tmp_path: Path) -> None:
    """An hs run draws no noise words: its --negative 0 (gensim's hs=1, negative=0) beside
    negative-sampling runs is no differing hyperparameter, in the table or in TensorBoard's."""
    from embedlab.config import ModelConfig
    from embedlab.track.tensorboard import table_hparams

    for name, loss, negative in (("hs", "hs", 0), ("neg", "neg", 5), ("nce", "nce", 5)):
        model = dataclasses.replace(ModelConfig(), loss=loss, negative=negative)
        write_run_files(tmp_path / name, dataclasses.replace(TrainConfig(), model=model),
                        fake_vocab())
    infos = [run_info(r, tmp_path) for r in find_runs(tmp_path)]
    assert differing_keys(infos) == ["model.loss"]
    # every stored setting is the run's all the same: --json and --all list it
    assert infos[0].hparams["model.negative"] == 0 and infos[1].hparams["model.negative"] == 5
    assert infos[0].to_json()["hparams"]["model.negative"] == 0
    # two hs runs that differ only there are told apart (their folders are two)
    model = dataclasses.replace(ModelConfig(), loss="hs", negative=5)
    write_run_files(tmp_path / "hs5", dataclasses.replace(TrainConfig(), model=model),
                    fake_vocab())
    infos = [run_info(r, tmp_path) for r in find_runs(tmp_path)]
    assert differing_keys(infos) == ["model.loss"]  # unread, so no difference in the table
    table = runs_tables(infos, all_hparams=True)[-1]
    assert "model.negative" in [c for c in table.columns[0].cells]
    config = json.loads((tmp_path / "hs" / "config.json").read_text())
    assert "model.negative" not in table_hparams(config)
    assert "model.noise_exponent" in table_hparams(
        json.loads((tmp_path / "neg" / "config.json").read_text()))


def test_a_run_from_before_an_option_shows_the_value_it_trained_with(tmp_path: Path) -> None:
    """config.json written before --interleave and --init-scale: listed with what a resume
    reads (1 and word2vec's 1.0), so a new run beside it shows as differing."""
    _make_run(tmp_path / "old")
    _make_run(tmp_path / "new")
    path = tmp_path / "old" / "config.json"
    raw = json.loads(path.read_text())
    del raw["optim"]["interleave"], raw["model"]["init_scale"]
    path.write_text(json.dumps(raw))
    new, old = (run_info(r, tmp_path) for r in find_runs(tmp_path))  # sorted by name
    assert (new.name, old.name) == ("new", "old")
    assert (old.hparams["optim.interleave"], new.hparams["optim.interleave"]) == (1, 2)
    assert differing_keys([old, new]) == ["model.init_scale", "optim.interleave"]


def test_sorting_puts_the_best_first_and_what_has_no_number_last() -> None:
    from embedlab.track.runs import RunInfo, sort_runs

    def info(name: str, loss: float | None, best: str, rank: float | None,
             lr: object = 0.1) -> RunInfo:
        return RunInfo(name, Path(name), "finished", 1, 1, loss, best, 1.0,
                       {"optim.lr": lr}, best_rank=rank)

    runs = [info("a", 3.0, "train/loss 3.0 @1", 3.0), info("b", float("nan"), "", None),
            info("c", 1.0, "train/loss 1.0 @1", 1.0),
            info("d", None, "eval/analogy 0.2 @1", -0.2),  # an accuracy: negated, lower better
            info("e", 0.5, "eval/analogy 0.6 @1", -0.6, lr="x")]
    assert [i.name for i in sort_runs(runs, "loss")] == ["e", "c", "a", "b", "d"]
    assert [i.name for i in sort_runs(runs, "loss", reverse=True)] == ["a", "c", "e", "b", "d"]
    # best: a loss low, an accuracy high, both best first; no best cell last
    assert [i.name for i in sort_runs(runs, "best")] == ["e", "d", "c", "a", "b"]
    # numbers before text, whatever the kinds of run mix
    assert [i.name for i in sort_runs(runs, "optim.lr")] == ["a", "b", "c", "d", "e"]
    for alias, column in (("name", "run"), ("words_seen", "words"), ("wall_time", "wall")):
        # --json's names of the columns
        assert sort_runs(runs, alias, reverse=True) == sort_runs(runs, column, reverse=True)
    assert [i.name for i in sort_runs(runs, "name", reverse=True)] == ["e", "d", "c", "b", "a"]


def test_a_huge_loss_is_written_with_an_exponent() -> None:
    # a diverged linreg run's loss filled the cell with 35 digits
    from embedlab.track.runs import _loss_cell

    assert _loss_cell(1.99974) == "1.9997"
    assert _loss_cell(3.9297735583613104e34) == "3.9298e+34"


def test_files_this_user_may_not_read_are_said_so_not_called_damaged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shared run's unreadable status.json is not 'cut short?', nor its config.json a raw
    '[Errno 13] Permission denied: ...' (root reads everything: the denial is simulated)."""
    import builtins

    from embedlab.track.runs import checked_status, run_info

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(TrainConfig().to_dict()))
    write_status(run, status="finished", step=1)
    denied = {run / "status.json", run / "config.json"}
    real_open, real_os_open = builtins.open, os.open

    def no(path: object) -> bool:
        return isinstance(path, (str, os.PathLike)) and Path(os.fspath(path)) in denied

    def guarded_open(path: object, *args: object, **kwargs: object) -> object:
        if no(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    def guarded_os_open(path: object, *args: object, **kwargs: object) -> int:
        if no(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_os_open(path, *args, **kwargs)  # type: ignore[arg-type]

    import io

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)  # pathlib's
    monkeypatch.setattr(os, "open", guarded_os_open)
    with pytest.raises(InputError, match=r"status.json is unreadable \(Permission denied\); "
                                         r"give your user permission to read it$"):
        checked_status(run)
    with pytest.raises(InputError, match=r"config.json is unreadable \(Permission denied\); "
                                         r"give your user permission to read it$"):
        run_info(run, tmp_path)
