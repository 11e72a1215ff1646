"""Saving checkpoints: atomic saves, failed saves, retention roles, listing."""

from __future__ import annotations

import errno
import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.checkpoint import (
    CheckpointError,
    CheckpointManager,
    ckpt_name,
    load_checkpoint,
    read_index,
)
from embedlab.checkpoint import format as ckpt_format
from embedlab.checkpoint import manager as ckpt_manager
from embedlab.errors import EmbedlabWarning, InputError, messages_for

from .sample import FIXTURE_OK, sample_tensors, save_sample


def test_round_trip_layout_and_index(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    path = save_sample(m, 12000)
    assert path == tmp_path / "checkpoints" / "ckpt-00012000"
    assert sorted(p.name for p in path.iterdir()) == ["MANIFEST.json", "state.json",
                                                      "tensors.safetensors"]
    manifest = json.loads((path / "MANIFEST.json").read_text())
    assert set(manifest["files"]) == {"tensors.safetensors", "state.json"}
    tensors, state = load_checkpoint(path)
    for name, t in sample_tensors(12000).items():
        assert np.array_equal(tensors[name], t) and tensors[name].dtype == t.dtype
    assert state == {"epoch": 0, "cursor": 120000, "step": 12000, "metrics": {"loss": 1 / 12001}}
    index = (tmp_path / "checkpoint").read_text()
    assert "latest: ckpt-00012000" in index
    assert "kept: ckpt-00012000" in index
    assert f"best: ckpt-00012000 loss={1 / 12001!r} (min)" in index
    assert m.latest() == path and m.best() == path
    assert not list((tmp_path / "checkpoints").glob("*.tmp-*"))


@pytest.mark.usefixtures("cli_messages")  # the messages a run's saves give
def test_failed_save_enospc_leaves_earlier_checkpoints_and_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = CheckpointManager(tmp_path, keep=2)
    for s in (10, 20):
        save_sample(m, s)
    before_index = (tmp_path / "checkpoint").read_bytes()
    root = tmp_path / "checkpoints"
    before = {p.name: (p / "MANIFEST.json").read_bytes() for p in root.iterdir()}

    def disk_full(*args: object, **kwargs: object) -> None:
        Path(str(args[1])).write_bytes(b"partial")  # a torn write, then the failure
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt_format, "save_tensors", disk_full)
    with pytest.raises(CheckpointError) as e:
        save_sample(m, 30)
    # training's wording (an export of a subset words it its own way, see tests/cli/test_ckpt.py)
    assert str(e.value) == (f"could not save checkpoint at step 30 in {root}: No space left on "
                            "device; free disk space, then re-run the same command to resume "
                            "from the last saved checkpoint (earlier checkpoints are intact)")
    assert isinstance(e.value.os_error, OSError) and e.value.os_error.errno == errno.ENOSPC
    from embedlab.errors import acting_once

    with acting_once("--restart"), pytest.raises(CheckpointError) as e:  # typed again: over
        save_sample(m, 30)
    assert "free disk space, then re-run the same command without --restart to resume" in \
        str(e.value)
    assert (tmp_path / "checkpoint").read_bytes() == before_index
    after = {p.name: (p / "MANIFEST.json").read_bytes() for p in root.iterdir()}
    assert after == before  # no tmp folder left, nothing deleted or modified
    assert m.latest() == tmp_path / "checkpoints" / "ckpt-00000020"
    assert load_checkpoint(m.latest())[1]["step"] == 20  # type: ignore[arg-type]


def test_failed_save_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulated: the tests may run as root, where chmod does not deny anything.
    m = CheckpointManager(tmp_path)
    save_sample(m, 1)

    def denied(path: Path, data: bytes) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(ckpt_format, "_write_file", denied)
    with pytest.raises(CheckpointError, match=r"Permission denied; make .* writable"):
        save_sample(m, 2)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000001"]


def test_failure_of_other_kind_cleans_tmp(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    a = np.zeros(4)
    with pytest.raises(ValueError, match="disagrees"):
        m.save(5, {"a": a}, {"step": 4}, {})
    assert list((tmp_path / "checkpoints").iterdir()) == []
    assert not (tmp_path / "checkpoint").exists()


def test_best_max_mode_and_missing_metric(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=1, best_metric="analogy", best_mode="max")
    m.save(1, sample_tensors(1), {}, {"loss": 3.0, "analogy": 0.2})
    m.save(2, sample_tensors(2), {}, {"loss": 2.0})  # no analogy: best unchanged
    m.save(3, sample_tensors(3), {}, {"analogy": 0.1})
    m.save(4, sample_tensors(4), {}, {"analogy": 0.05})
    idx = read_index(tmp_path)
    assert idx.best == 1 and idx.best_value == 0.2 and idx.kept == (4,)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["ckpt-00000001",
                                                                          "ckpt-00000004"]


@pytest.mark.parametrize(("metrics", "message"), [
    ({"loss": [1]}, "metrics['loss'] = [1] is not a number"),
    ({"loss": "0.5"}, "metrics['loss'] = '0.5' is not a number"),
    ({"loss": True}, "metrics['loss'] = True is not a number"),
    ({"loss": np.bool_(True)}, "is not a number"),
    ({"loss": None}, "metrics['loss'] = None is not a number"),
    ({"loss": math.nan}, "metrics['loss'] = nan is not a finite number"),
    ({"loss": -math.inf}, "metrics['loss'] = -inf is not a finite number"),
    ({"loss": np.float32("inf")}, "metrics['loss'] = inf is not a finite number"),
    ({"loss": 10 ** 400}, "is not a finite number"),
    ({1: 0.5}, "metrics has the key 1, not a str"),
    ([("loss", 0.5)], "metrics must be a dict of names to numbers, not list"),
])
def test_metrics_that_are_not_finite_numbers_are_refused_before_anything_is_written(
        tmp_path: Path, metrics: object, message: str) -> None:
    m = CheckpointManager(tmp_path)
    save_sample(m, 1)
    before = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    index = (tmp_path / "checkpoint").read_bytes()
    with pytest.raises(InputError) as e:
        m.save(2, sample_tensors(2), {}, metrics)  # type: ignore[arg-type]
    text = str(e.value)
    assert "\n" not in text and message in text and "e.g. {'loss': 0.5}" in text
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == before
    assert (tmp_path / "checkpoint").read_bytes() == index


def test_numpy_metrics_are_saved_as_plain_numbers(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    metrics = {"loss": np.float32(0.5), "analogy": np.float64(0.25), "seen": np.int64(7),
               "words": 3}
    path = m.save(1, sample_tensors(1), {"metrics": metrics}, metrics)
    _, state = load_checkpoint(path)
    assert state["metrics"] == {"loss": 0.5, "analogy": 0.25, "seen": 7, "words": 3}
    assert type(state["metrics"]["seen"]) is int and read_index(tmp_path).best_value == 0.5


def test_a_step_that_is_no_whole_number_is_refused(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    for step in ("20", 20.0, -1, True):
        with pytest.raises(InputError, match=r"step must be a whole number >= 0, got "):
            m.save(step, sample_tensors(1), {}, {})  # type: ignore[arg-type]
    assert not (tmp_path / "checkpoints").exists()
    assert m.save(np.int64(3), sample_tensors(3), {}, {}).name == ckpt_name(3)


def test_protect_keeps_resume_point_until_newer_commit(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=3, best_metric="none")
    for s in (10, 20, 30):
        save_sample(m, s)
    # A run restarted from step 20 (e.g. --step) saves step 15 of a new branch.
    m2 = CheckpointManager(tmp_path, keep=1, best_metric="none")
    m2.protect(20)
    save_sample(m2, 15)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["ckpt-00000015", "ckpt-00000020"]  # 10 and 30 are ours and past --keep
    save_sample(m2, 25)  # newer than the protected one: protection ends
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["ckpt-00000025"]


def test_crash_between_commit_and_index_adopts_new_folder(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=1, best_metric="none")
    save_sample(m, 1)
    index = (tmp_path / "checkpoint").read_text()
    save_sample(CheckpointManager(tmp_path, keep=5, best_metric="none"), 2)
    (tmp_path / "checkpoint").write_text(index)  # as if the process died before the rewrite
    save_sample(CheckpointManager(tmp_path, keep=1, best_metric="none"), 3)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000003"]


def test_a_checkpoint_adopted_after_a_crash_is_ranked_for_the_best(tmp_path: Path) -> None:
    # committed, then killed before the index rewrite: adopted by the next save, but never
    # ranked, so a better loss than the listed best stayed out of --from best for good
    save_sample(CheckpointManager(tmp_path, keep=5), 1, loss=2.0)
    index = (tmp_path / "checkpoint").read_text()
    save_sample(CheckpointManager(tmp_path, keep=5), 2, loss=1.0)
    (tmp_path / "checkpoint").write_text(index)  # as if the process died before the rewrite
    save_sample(CheckpointManager(tmp_path, keep=5), 3, loss=1.5)
    assert read_index(tmp_path).best == 2
    save_sample(CheckpointManager(tmp_path, keep=5), 4, loss=0.5)  # a better one still wins
    assert read_index(tmp_path).best == 4


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(steps=st.lists(st.integers(1, 60), min_size=1, max_size=14, unique=True).map(sorted),
       losses=st.lists(st.floats(0, 10, allow_nan=False), min_size=14, max_size=14),
       keep=st.integers(1, 4), keep_every=st.none() | st.integers(2, 20),
       mode=st.sampled_from(["min", "max"]))
def test_property_retention_invariants(no_fsync: None, tmp_path: Path, steps: list[int],
                                       losses: list[float], keep: int, keep_every: int | None,
                                       mode: str) -> None:
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    root = run / "checkpoints"
    root.mkdir(parents=True)
    # Unknown folders: a user's notes, a foreign ckpt-like folder without our manifest, a tmp.
    for name in ("notes", "ckpt-00000999", "ckpt-00000003.tmp-x"):
        (root / name).mkdir()
        (root / name / "keep.txt").write_text("mine")
    m = CheckpointManager(run, keep=keep, keep_every=keep_every, best_metric="loss",
                          best_mode=mode)  # type: ignore[arg-type]
    best_step, best_val = None, None
    for step, loss in zip(steps, losses, strict=False):
        m.save(step, {"w": torch.tensor([float(step)])}, {}, {"loss": loss})
        if best_val is None or (loss < best_val if mode == "min" else loss > best_val):
            best_step, best_val = step, loss
    present = {p.name for p in root.iterdir()}
    for name in ("notes", "ckpt-00000999", "ckpt-00000003.tmp-x"):
        assert (root / name / "keep.txt").read_text() == "mine"
    ours = {n for n in present if n.startswith("ckpt-") and n != "ckpt-00000999"
            and ".tmp-" not in n}
    assert best_step is not None
    expected = set(steps[-keep:]) | {best_step}
    if keep_every:
        expected |= {s for s in steps if s % keep_every == 0}
    assert ours == {ckpt_name(s) for s in expected}
    idx = read_index(run)
    assert idx.latest == steps[-1] and idx.best == best_step
    assert set(idx.kept) == set(steps[-keep:])
    for s in expected:
        assert load_checkpoint(root / ckpt_name(s))[0]["w"].item() == float(s)


def test_list_roles_and_sizes(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=2, keep_every=2)
    for s, loss in ((1, 0.1), (2, 0.5), (3, 0.4), (5, 0.3)):
        save_sample(m, s, loss)
    infos = {i.step: i for i in m.list()}
    assert set(infos) == {1, 2, 3, 5}
    assert infos[1].roles == ("best",) and infos[2].roles == ("archive",)
    assert infos[5].roles == ("latest", "kept") and infos[3].roles == ("kept",)
    assert all(i.verified and i.size > 0 and i.time > 0 for i in infos.values())


def test_same_step_saved_twice_replaces(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    m.save(4, {"w": np.zeros(2)}, {}, {})
    m.save(4, {"w": np.ones(2)}, {}, {})
    assert np.array_equal(load_checkpoint(m.latest())[0]["w"], np.ones(2))  # type: ignore[arg-type]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000004"]


def test_a_save_reports_how_long_it_took(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The trainer stretches --checkpoint-secs to 50x the last save's duration (tested in
    # test_trainer with a fake value): here, that the manager measures it, and that only a
    # save that succeeded counts.
    import time
    import types

    m = CheckpointManager(tmp_path)
    assert m.last_save_seconds is None
    readings = [100.0, 102.5]  # a save's start and end; any later reading stays at the end

    def perf_counter() -> float:
        return readings.pop(0) if len(readings) > 1 else readings[0]

    monkeypatch.setattr(ckpt_manager, "time", types.SimpleNamespace(
        **{**vars(time), "perf_counter": perf_counter}))
    save_sample(m, 1)
    assert m.last_save_seconds == 2.5
    monkeypatch.setattr(ckpt_manager, "commit_folder", lambda tmp, final: (_ for _ in ()).throw(
        OSError(28, "No space left on device")))
    with pytest.raises(CheckpointError):
        save_sample(m, 2)
    assert m.last_save_seconds == 2.5  # a failed save leaves the last good measure


def test_remove_stale_tmp_deletes_only_uncommitted_save_folders(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    m.save(1, {"x": np.zeros(2)}, {}, {})
    stale = tmp_path / "checkpoints" / "ckpt-00000002.tmp-abc"
    stale.mkdir()
    (stale / "tensors.safetensors").write_bytes(b"partial")
    other = tmp_path / "checkpoints" / "notes"
    other.mkdir()
    assert m.remove_stale_tmp() == (stale,)
    assert not stale.exists() and other.is_dir() and m.latest() is not None
    # a save of step 1 again, killed after it moved the old folder aside
    aside = tmp_path / "checkpoints" / ".ckpt-00000001.old-123-456"
    aside.mkdir()
    assert m.remove_stale_tmp() == (aside,)
    assert not aside.exists() and other.is_dir() and m.latest() is not None


def test_work_alongside_a_save_is_done_before_the_commit(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    seen: list[list[str]] = []

    def alongside() -> None:  # what a trainer's summaries see: no committed folder yet
        seen.append(sorted(p.name for p in (tmp_path / "checkpoints").iterdir()
                           if ".tmp-" not in p.name))

    tensors = sample_tensors(3)
    path = m.save(3, tensors, {"step": 3}, {"loss": 1.0}, alongside=alongside)
    assert seen == [[]] and path == tmp_path / "checkpoints" / "ckpt-00000003"
    loaded, _ = load_checkpoint(path)
    assert all(np.array_equal(loaded[k], v) for k, v in tensors.items())


def test_a_failure_alongside_a_save_commits_nothing(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    m = CheckpointManager(tmp_path)
    save_sample(m, 1)
    before = (tmp_path / "checkpoint").read_bytes()

    def summaries_fail() -> None:
        raise RuntimeError("a summary failed")

    with pytest.raises(RuntimeError, match="a summary failed"):
        m.save(2, sample_tensors(2), {"step": 2}, {}, alongside=summaries_fail)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000001"]
    assert (tmp_path / "checkpoint").read_bytes() == before

    def events_file_denied() -> None:  # a summary's own file: not the checkpoint folder's fault
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "events"))

    with pytest.raises(PermissionError) as denied:
        m.save(2, sample_tensors(2), {"step": 2}, {}, alongside=events_file_denied)
    assert not isinstance(denied.value, CheckpointError) and "events" in str(denied.value)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000001"]

    ran: list[bool] = []

    def disk_full(*args: object, **kwargs: object) -> None:  # the writing thread fails
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt_format, "save_tensors", disk_full)
    with pytest.raises(CheckpointError, match="No space left on device; free disk space"):
        m.save(3, sample_tensors(3), {"step": 3}, {}, alongside=lambda: ran.append(True))
    assert ran == [True]  # the work alongside finished before the error was raised
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000001"]


@pytest.mark.usefixtures("cli_messages")  # the messages a run's saves give
def test_a_changed_best_metric_ranks_the_kept_checkpoints_by_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A resume with another --best-metric: the best is the kept checkpoint best by the new
    metric (as a rebuilt index would choose), said in one line, not the next save alone."""
    first = CheckpointManager(tmp_path, keep=10, best_metric="loss", best_mode="min")
    first.save(1, sample_tensors(1), {}, {"loss": 3.0, "analogy": 0.30})
    first.save(2, sample_tensors(2), {}, {"loss": 2.0, "analogy": 0.10})
    assert read_index(tmp_path).best == 2
    capsys.readouterr()
    again = CheckpointManager(tmp_path, keep=10, best_metric="analogy", best_mode="max")
    again.save(3, sample_tensors(3), {}, {"loss": 1.5, "analogy": 0.20})
    index = read_index(tmp_path)
    assert (index.best, index.best_metric, index.best_value) == (1, "analogy", 0.30)
    assert capsys.readouterr().err == (
        "embedlab: warning: --best-metric is now analogy:max (was loss:min): the best checkpoint "
        "is ckpt-00000001 (analogy 0.3); ckpt-00000002, the best by loss, stays only while --keep "
        "or --keep-every keeps it\n")
    again.save(4, sample_tensors(4), {}, {"loss": 1.0, "analogy": 0.25})
    assert read_index(tmp_path).best == 1 and capsys.readouterr().err == ""  # said once


@pytest.mark.usefixtures("cli_messages")  # the messages a run's saves give
def test_a_changed_best_metric_says_which_old_best_may_go(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = CheckpointManager(tmp_path, keep=1, best_metric="analogy", best_mode="max")
    first.save(1, sample_tensors(1), {}, {"loss": 3.0, "analogy": 0.30})
    first.save(2, sample_tensors(2), {}, {"loss": 2.0, "analogy": 0.10})
    again = CheckpointManager(tmp_path, keep=1, best_metric="loss", best_mode="min")
    capsys.readouterr()
    again.save(3, sample_tensors(3), {}, {"loss": 1.5})
    assert read_index(tmp_path).best == 3
    assert "ckpt-00000001, the best by analogy, stays only while --keep" in capsys.readouterr().err


def test_a_warning_made_an_error_stops_a_whole_save(tmp_path: Path) -> None:
    """A program that makes EmbedlabWarning an error: retention's warning is raised after the
    index is rewritten and retention done, not between the commit and the index."""
    first = CheckpointManager(tmp_path, keep=1, best_metric="analogy", best_mode="max")
    first.save(1, sample_tensors(1), {}, {"loss": 3.0, "analogy": 0.30})
    first.save(2, sample_tensors(2), {}, {"loss": 2.0, "analogy": 0.10})
    again = CheckpointManager(tmp_path, keep=1, best_metric="loss", best_mode="min")
    with messages_for("python"), warnings.catch_warnings():
        warnings.simplefilter("error", EmbedlabWarning)
        with pytest.raises(EmbedlabWarning, match="is now loss:min"):
            again.save(3, sample_tensors(3), {}, {"loss": 1.5})
    index = read_index(tmp_path)
    assert (index.latest, index.best, index.best_metric) == (3, 3, "loss")
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["ckpt-00000003"]


@pytest.mark.usefixtures("cli_messages")  # the messages a run's saves give
def test_a_checkpoint_retention_cannot_delete_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A folder that cannot be deleted (made read-only) drops out of the index, and stays on
    the disk listed nowhere: said, with the reason."""
    m = CheckpointManager(tmp_path, keep=1)
    old = save_sample(m, 1)
    real = shutil.rmtree

    def refusing(path: object, *args: object, **kwargs: object) -> None:
        if "ckpt-00000001" in Path(str(path)).name:  # as a read-only folder: nothing goes
            if kwargs.get("ignore_errors"):
                return
            raise PermissionError(13, "Permission denied")
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shutil, "rmtree", refusing)
    capsys.readouterr()
    save_sample(m, 2)
    assert old.is_dir() and m.index().ours() == {2}
    assert capsys.readouterr().err == (
        f"embedlab: warning: could not delete {tmp_path / 'checkpoints' / 'ckpt-00000001'}, "
        "which --keep 1 no longer keeps (Permission denied); delete it by hand to free its space\n")


def test_skipping_the_oldest_bad_checkpoint_says_none_is_left(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = CheckpointManager(tmp_path)
    for step in (1, 2):
        save_sample(m, step)
        data = tmp_path / "checkpoints" / f"ckpt-0000000{step}" / "tensors.safetensors"
        data.write_bytes(data.read_bytes()[:-4])
    ckpt_format._VERIFIED.clear()
    assert m.latest() is None
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "ckpt-00000002" in lines[0] and "ckpt-00000001" in lines[1]
    assert lines[0].endswith("; falling back to the previous one")
    assert lines[1].endswith("; no earlier checkpoint is left")


def test_retention_takes_a_checkpoint_out_of_sight_before_deleting_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader (ckpt --verify, an export) of a run in training sees a checkpoint that retention
    drops whole or not at all: it is renamed to a leftover name, then deleted."""
    m = CheckpointManager(tmp_path, keep=1)
    first = save_sample(m, 1)
    deleted: list[tuple[str, bool]] = []
    real = shutil.rmtree

    def recording(path: object, *args: object, **kwargs: object) -> None:
        deleted.append((Path(str(path)).name, first.exists()))
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shutil, "rmtree", recording)
    save_sample(m, 2)
    (name, still_there), = deleted
    assert name.startswith(".ckpt-00000001.old-") and not still_there
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["ckpt-00000002"]


def test_a_checkpoint_deleted_while_listed_is_left_out_not_called_damaged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    m = CheckpointManager(tmp_path, keep=5)
    first, second, third = save_sample(m, 1), save_sample(m, 2), save_sample(m, 3)
    real = ckpt_manager.verify
    doomed = {first.name}

    def deleted_meanwhile(path: Path) -> str | None:  # by a training process's retention
        if path.name in doomed and path.exists():
            shutil.rmtree(path)
        return real(path)

    monkeypatch.setattr(ckpt_manager, "verify", deleted_meanwhile)
    capsys.readouterr()
    infos = m.list()
    assert [info.step for info in infos] == [2, 3] and all(info.verified for info in infos)
    doomed.add(third.name)  # the newest, gone between finding the folders and verifying it
    assert m.latest() == second
    assert capsys.readouterr().err == ""


def test_a_folder_renamed_by_hand_is_no_checkpoint_and_never_deleted(tmp_path: Path) -> None:
    """ckpt-5 for ckpt-00000005: not listed beside the step's (missing) checkpoint, not
    resumed from, and not deleted by retention, which deletes only folders it wrote."""
    m = CheckpointManager(tmp_path, keep=1)
    first = save_sample(m, 5)
    renamed = first.with_name("ckpt-5")
    first.rename(renamed)
    save_sample(m, 6)
    save_sample(m, 7)
    assert [info.step for info in m.list()] == [7]
    assert renamed.is_dir() and (renamed / "MANIFEST.json").is_file()


def test_a_best_checkpoint_that_is_gone_is_chosen_again_from_those_kept(tmp_path: Path) -> None:
    # with the recorded best deleted by hand (or moved aside by --from), the next save took
    # "best" without comparing, and --keep then deleted the best one left
    m = CheckpointManager(tmp_path, keep=2, best_metric="analogy", best_mode="max")
    for step, value in ((1, 0.5), (2, 0.1), (3, 0.4), (4, 0.3)):
        m.save(step, sample_tensors(step), {}, {"analogy": value})
    assert read_index(tmp_path).best == 1
    shutil.rmtree(tmp_path / "checkpoints" / "ckpt-00000001")
    m.save(5, sample_tensors(5), {}, {"analogy": 0.2})
    index = read_index(tmp_path)
    assert (index.best, index.best_value) == (3, 0.4)  # not 5, the latest, at 0.2
    assert (tmp_path / "checkpoints" / "ckpt-00000003").is_dir()  # kept as the best
    m.save(6, sample_tensors(6), {}, {"analogy": 0.45})
    assert read_index(tmp_path).best == 6


def test_forget_after_leaves_a_missing_index_to_the_next_save(tmp_path: Path) -> None:
    # written from nothing, the index listed the resume point alone: older checkpoints were
    # no longer the run's (never deleted, never the best)
    m = CheckpointManager(tmp_path, keep=10, best_metric="loss", best_mode="min")
    for step, loss in ((10, 0.9), (20, 0.5), (30, 0.7), (40, 0.2)):
        m.save(step, sample_tensors(step), {}, {"loss": loss})
    (tmp_path / "checkpoint").unlink()
    shutil.move(str(tmp_path / "checkpoints" / "ckpt-00000040"), str(tmp_path / "aside"))
    m.forget_after(30)
    assert not (tmp_path / "checkpoint").exists()
    m.save(31, sample_tensors(31), {}, {"loss": 0.8})
    index = read_index(tmp_path)
    assert index.best == 20 and {10, 20, 30, 31} <= index.ours()


@pytest.mark.usefixtures("cli_messages")  # the messages a run's saves give
def test_a_first_save_that_fails_promises_no_checkpoint_to_resume_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It said "resume from the last saved checkpoint (earlier checkpoints are intact)" with
    none saved, and "check FOLDER" for a file over the shell's file size limit."""
    m = CheckpointManager(tmp_path, keep=2)

    def too_large(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(ckpt_format, "save_tensors", too_large)
    with pytest.raises(CheckpointError) as e:
        save_sample(m, 10)
    assert str(e.value) == (f"could not save checkpoint at step 10 in {tmp_path / 'checkpoints'}"
                            ": File too large; raise the file size limit (ulimit -f unlimited), "
                            "then re-run the same command")
