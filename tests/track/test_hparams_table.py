"""The HParams table's columns: a logdir-level experiment summary listing the hyperparameters
that differ between the finished runs, kept current while ``embedlab tensorboard`` serves."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from embedlab.config import TrainConfig
from embedlab.track.hparams_table import (
    SAME_EVERYWHERE,
    TABLE_PREFIX,
    Columns,
    HParamsTable,
    Record,
    finished_record,
    table_columns,
)

from . import fakerun
from .tbserver import post, start_server, stop_server


def config(lr: float = 0.025, dim: int = 100) -> TrainConfig:
    cfg = fakerun.make_config()
    return dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim, lr=lr),
                               model=dataclasses.replace(cfg.model, dim=dim))


def test_columns_are_the_hyperparameters_that_differ_and_final_metrics_come_first() -> None:
    records = [Record({"optim.lr": 0.025, "model.dim": 100, "data.corpus": "a"},
                      frozenset({"train/loss", "final/loss"})),
               Record({"optim.lr": 0.05, "model.dim": 100, "data.corpus": "b"},
                      frozenset({"train/loss", "eval/analogy", "final/analogy"}))]
    assert table_columns(records) == Columns(
        hparams=(("data.corpus", ("a", "b")), ("optim.lr", (0.025, 0.05))),
        metrics=("final/analogy", "final/loss", "eval/analogy", "train/loss"), differ=True)


def test_columns_when_nothing_differs_are_the_few_that_name_a_run() -> None:
    values = {"optim.lr": 0.025, "model.dim": 100, "data.min_count": 5, "model.model": "skipgram"}
    columns = table_columns([Record(values, frozenset({"final/loss"}))] * 2)
    assert columns is not None and not columns.differ
    assert [name for name, _ in columns.hparams] == [k for k in SAME_EVERYWHERE if k in values]
    assert table_columns([]) is None


def test_only_finished_runs_count(tmp_path: Path) -> None:
    cache: dict[Path, object] = {}
    fakerun.simulate(tmp_path / "done", steps=20, cfg=config())
    fakerun.simulate(tmp_path / "training", steps=20, cfg=config(lr=0.5), final=False)
    record = finished_record(tmp_path / "done", cache)  # type: ignore[arg-type]
    assert record is not None and record.values["optim.lr"] == 0.025
    assert {"train/loss", "eval/analogy", "final/loss"} <= record.tags
    assert finished_record(tmp_path / "training", cache) is None  # type: ignore[arg-type]
    (tmp_path / "done" / "config.json").write_text("{")
    assert finished_record(tmp_path / "done", cache) is None  # type: ignore[arg-type]


def written_columns(folder: Path) -> tuple[list[tuple[str, bool]], list[str]]:
    """The experiment summary in ``folder`` as TensorBoard's hparams plugin parses it."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import metadata

    (events,) = folder.glob("events.out.tfevents.*")
    (value,) = [v for event in EventFileLoader(str(events)).Load() for v in event.summary.value]
    assert value.tag == metadata.EXPERIMENT_TAG
    experiment = metadata.parse_experiment_plugin_data(value.metadata.plugin_data.content)
    return ([(h.name, h.differs) for h in experiment.hparam_infos],
            [m.name.tag for m in experiment.metric_infos])


def test_refresh_writes_a_new_folder_only_when_the_columns_change(tmp_path: Path) -> None:
    fakerun.simulate(tmp_path / "a", steps=20, cfg=config())
    fakerun.simulate(tmp_path / "b", steps=20, cfg=config(lr=0.05))
    table = HParamsTable(tmp_path)
    table.refresh()
    first = table.folder
    assert first is not None and first.name == f"{TABLE_PREFIX}{os.getpid()}-1"
    hparams, metrics = written_columns(first)
    assert hparams == [("optim.lr", True)] and metrics[:2] == ["final/eval/analogy", "final/loss"]
    table.refresh()
    assert table.folder == first
    fakerun.simulate(tmp_path / "c", steps=20, cfg=config(dim=50))
    table.refresh()
    assert table.folder is not None and table.folder != first and not first.exists()
    assert written_columns(table.folder)[0] == [("model.dim", True), ("optim.lr", True)]
    table.close()
    assert not list(tmp_path.glob(f"{TABLE_PREFIX}*"))


def test_a_logdir_that_is_a_run_gets_no_summary(tmp_path: Path) -> None:
    fakerun.simulate(tmp_path, steps=20, cfg=config())
    table = HParamsTable(tmp_path)
    table.refresh()
    assert table.folder is None and not list(tmp_path.glob(f"{TABLE_PREFIX}*"))


def test_leftovers_of_killed_servers_go_and_live_ones_stay(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for pid in (dead, str(os.getppid())):
        (tmp_path / f"{TABLE_PREFIX}{pid}-3").mkdir()
    assert HParamsTable(tmp_path).remove_leftovers() == 1
    assert [p.name for p in tmp_path.glob(f"{TABLE_PREFIX}*")] == [
        f"{TABLE_PREFIX}{os.getppid()}-3"]


def test_an_unwritable_logdir_is_served_as_it_is(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    fakerun.simulate(tmp_path / "a", steps=20, cfg=config())
    (tmp_path / f"{TABLE_PREFIX}{os.getpid()}-1").write_text("in the way")
    table = HParamsTable(tmp_path)
    table.refresh()
    table.refresh()
    assert table.folder is None
    err = capsys.readouterr().err
    assert err.count("embedlab: warning: cannot write the HParams table's columns") == 1


def served_hparams(base: str, until: Callable[[list[tuple[str, bool]]], bool] = bool,
                   timeout: float = 60) -> list[tuple[str, bool]]:
    """The served HParams table's hyperparameters (name, differs), once ``until`` holds."""
    deadline = time.monotonic() + timeout
    hparams: list[tuple[str, bool]] = []
    while True:
        try:
            exp = post(base, "hparams/experiment", {"experimentName": ""})
            hparams = [(h["name"], h.get("differs", False)) for h in exp.get("hparamInfos", [])]
            if until(hparams):
                return hparams
        except OSError:
            pass  # not listening yet
        assert time.monotonic() < deadline, f"the served HParams table stayed {hparams}"
        time.sleep(0.5)


def test_embedlab_tensorboard_serves_the_columns_and_removes_them_when_stopped(
        tmp_path: Path) -> None:
    root = tmp_path / "runs"
    fakerun.simulate(root / "a", steps=20, cfg=config())
    fakerun.simulate(root / "b", steps=20, cfg=config(lr=0.05))
    proc, base = start_server(root)
    try:
        assert served_hparams(base) == [("optim.lr", True)]
        # a run finished while serving: a new summary, which TensorBoard takes at its reload
        fakerun.simulate(root / "c", steps=20, cfg=config(dim=50))
        assert served_hparams(base, until=lambda h: len(h) == 2) == [("model.dim", True),
                                                                     ("optim.lr", True)]
        assert len(list(root.glob(f"{TABLE_PREFIX}*"))) == 1
    finally:
        stop_server(proc)
    assert not list(root.glob(f"{TABLE_PREFIX}*"))  # a plain tensorboard shows its own table


def test_a_key_both_string_and_number_gets_its_values_as_checkboxes() -> None:
    """--max-vocab is "none" in some runs and 2000 in others: without a domain the table offers
    a regular expression, which TensorBoard refuses for the numbers (HTTP 400); the values, as
    TensorBoard lists them without the summary, give checkboxes."""
    from tensorboard.plugins.hparams import metadata

    from embedlab.track.hparams_table import experiment_summary

    summary = experiment_summary(Columns(hparams=(("data.max_vocab", ("none", 2000)),
                                                  ("model.dim", (50, 100))),
                                         metrics=(), differ=True))
    experiment = metadata.parse_experiment_plugin_data(
        summary.value[0].metadata.plugin_data.content)
    mixed, numbers = experiment.hparam_infos
    assert [v.string_value for v in mixed.domain_discrete.values] == ["none", "2000.0"]
    assert (numbers.domain_interval.min_value, numbers.domain_interval.max_value) == (50, 100)
