"""Reading a run while another process trains it: the trainer's retention deletes each
checkpoint once a newer one is committed, between a reader's listing of the folders and its
reading of them. The trainer is played here by a second manager whose saves run at the exact
moment the reader's hooks choose, so that every interleaving is deterministic."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedlab.checkpoint import (
    CheckpointManager,
    ckpt_name,
    find_checkpoint,
    load_checkpoint,
    load_latest,
    read_picked,
)
from embedlab.checkpoint import load as ckpt_load
from embedlab.checkpoint import manager as ckpt_manager
from embedlab.errors import InputError

from .sample import sample_tensors, save_sample

# these library functions are the commands' own: their messages as the commands give them
pytestmark = pytest.mark.usefixtures("cli_messages")


class Trainer:
    """The other process: saves step after step with ``keep=1``, as a run in training does."""

    def __init__(self, run: Path) -> None:
        self.manager = CheckpointManager(run, keep=1)
        self.step = 0

    def save(self, *, index: bool = True, monkeypatch: pytest.MonkeyPatch | None = None) -> Path:
        """The next checkpoint; ``index=False`` stops this save after its retention, before it
        rewrites the index (the index then lists the checkpoint retention just deleted)."""
        self.step += 1
        if index:
            return save_sample(self.manager, self.step)
        assert monkeypatch is not None
        with monkeypatch.context() as m:
            m.setattr(ckpt_manager, "atomic_write_text", lambda *a, **k: None)
            return save_sample(self.manager, self.step)


def after(real: Callable[..., Any], action: Callable[[], object]) -> Callable[..., Any]:
    """``real``, with ``action`` run once, after its first call (a save that lands between two
    steps of a reader)."""
    act = once(action)

    def call(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        act()
        return result

    return call


def once(action: Callable[[], object]) -> Callable[[], None]:
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            action()

    return run


@pytest.mark.parametrize("newest", [lambda run: CheckpointManager(run).latest(),
                                    find_checkpoint], ids=["latest", "find_checkpoint"])
def test_a_reader_lists_again_when_every_listed_checkpoint_was_deleted_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        newest: Callable[[Path], Path | None]) -> None:
    """A run in training: its newest checkpoint, not None nor an error."""
    trainer = Trainer(tmp_path)
    trainer.save()
    # commits step 2, and retention deletes step 1
    monkeypatch.setattr(ckpt_manager, "committed_folders",
                        after(ckpt_manager.committed_folders, trainer.save))
    assert newest(tmp_path) == tmp_path / "checkpoints" / ckpt_name(2)
    assert capsys.readouterr().err == ""


def test_no_deleted_warning_for_what_retention_deleted_while_the_index_was_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Chosen: step 1. Then the trainer commits 2 (deleting 1, indexing 2) and commits 3,
    deleting 2, but has not yet rewritten the index, which lists 2, now gone: not a checkpoint
    deleted by hand, and not a reason to read an older one."""
    trainer = Trainer(tmp_path)
    trainer.save()
    def two_saves() -> None:
        trainer.save()
        trainer.save(index=False, monkeypatch=monkeypatch)

    monkeypatch.setattr(ckpt_manager, "verify", after(ckpt_manager.verify, two_saves))
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoints" / ckpt_name(3)
    assert capsys.readouterr().err == ""


def test_a_newest_checkpoint_deleted_by_hand_is_still_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    m = CheckpointManager(tmp_path, keep=3)
    for step in (1, 2, 3):
        save_sample(m, step)
    shutil.rmtree(tmp_path / "checkpoints" / ckpt_name(3))
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoints" / ckpt_name(2)
    err = capsys.readouterr().err
    assert f"lists {ckpt_name(3)}, which is not in" in err and f"reading {ckpt_name(2)}" in err


def test_a_run_outpacing_every_read_is_said_as_such(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trainer that commits a checkpoint (and deletes the one before) during every read:
    after a bounded number of new listings the reader gives up, saying why, not that the
    checkpoints are damaged."""
    trainer = Trainer(tmp_path)
    trainer.save()
    real = ckpt_manager.committed_folders
    saving: list[bool] = []

    def listed_then_saved(root: Path) -> dict[int, Path]:
        found = real(root)
        if not saving:  # the trainer's own listing (its retention) is not a read
            saving.append(True)
            trainer.save()
            saving.clear()
        return found

    monkeypatch.setattr(ckpt_manager, "committed_folders", listed_then_saved)
    with pytest.raises(InputError) as e:
        find_checkpoint(tmp_path)
    text = str(e.value)
    assert "\n" not in text and "deleted while" in text and "corrupted" not in text
    assert trainer.step <= 2 + ckpt_manager.RELISTS


@pytest.mark.parametrize("moment", ["before", "during"])
def test_load_latest_of_a_newest_deleted_before_or_while_read_reads_the_newer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str) -> None:
    trainer = Trainer(tmp_path)
    trainer.save()
    real_find, real_read = ckpt_load.find_checkpoint, ckpt_load._read_tensors
    act = once(trainer.save)  # commits step 2, and retention deletes step 1

    def found_then_saved(*args: object, **kwargs: object) -> Path:
        found = real_find(*args, **kwargs)  # type: ignore[arg-type]
        if moment == "before":
            act()
        return found

    def saved_then_read(*args: object, **kwargs: object) -> dict[str, object]:
        if moment == "during":
            act()
        return real_read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt_load, "find_checkpoint", found_then_saved)
    monkeypatch.setattr(ckpt_load, "_read_tensors", saved_then_read)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path, tensors, state = load_latest(tmp_path, names=["output_bias"])
    assert path == tmp_path / "checkpoints" / ckpt_name(2) and state["step"] == 2
    assert list(tensors) == ["output_bias"]
    assert np.array_equal(tensors["output_bias"], sample_tensors(2)["output_bias"])


def test_load_of_a_checkpoint_deleted_while_read_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_checkpoint reads the folder it is given or fails: its caller holds that path (and
    may record it), so a newer checkpoint is not read in its place."""
    trainer = Trainer(tmp_path)
    trainer.save()
    chosen = find_checkpoint(tmp_path)
    real = ckpt_load._read_tensors
    act = once(trainer.save)

    def saved_then_read(*args: object, **kwargs: object) -> dict[str, object]:
        act()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt_load, "_read_tensors", saved_then_read)
    with pytest.raises(InputError) as e:
        load_checkpoint(chosen)
    assert str(e.value) == (f"checkpoint {chosen} was deleted while it was read: the run "
                            f"training it saved {ckpt_name(2)}, and its retention let "
                            f"{ckpt_name(1)} go; run the command again, which reads the newest")


def test_best_deleted_while_the_index_was_read_is_the_new_best(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = Trainer(tmp_path)  # every save is the best: 1 / (step + 1) falls
    trainer.save()
    real = ckpt_load.read_index
    act = once(trainer.save)

    def read_then_saved(run: Path) -> object:
        index = real(run)
        act()
        return index

    monkeypatch.setattr(ckpt_load, "read_index", read_then_saved)
    assert find_checkpoint(tmp_path, best=True) == tmp_path / "checkpoints" / ckpt_name(2)


@pytest.mark.parametrize("best", [False, True], ids=["latest", "best"])
def test_read_picked_reads_the_newer_pick_of_one_deleted_while_read(
        tmp_path: Path, best: bool) -> None:
    """What visualize, --init-from and ckpt --export-subset read: the newest (or best) is
    picked again when the trainer's retention deleted the one read (they failed, saying to
    run the command again)."""
    trainer = Trainer(tmp_path)
    trainer.save()
    act = once(trainer.save)  # commits step 2 (the new best), and retention deletes step 1

    def read(ckpt: Path) -> dict[str, Any]:
        act()
        return load_checkpoint(ckpt)[1]

    path, state = read_picked(tmp_path, read, best=best)
    assert path == tmp_path / "checkpoints" / ckpt_name(2) and state["step"] == 2


def test_read_picked_reads_a_step_once(tmp_path: Path) -> None:
    """A checkpoint picked by its step goes only when someone deletes it: no other is read."""
    trainer = Trainer(tmp_path)
    trainer.save()
    act = once(trainer.save)

    def read(ckpt: Path) -> dict[str, Any]:
        act()
        return load_checkpoint(ckpt)[1]

    with pytest.raises(InputError, match=f"{ckpt_name(1)} is missing"):
        read_picked(tmp_path, read, step=1)


def test_best_deleted_between_its_check_and_its_verification_is_the_new_best(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It said the best "is missing" and to list the checkpoints, as for damage."""
    trainer = Trainer(tmp_path)
    trainer.save()
    real = ckpt_load._verified_or_fail
    act = once(trainer.save)

    def saved_then_verified(ckpt: Path) -> Path:
        act()
        return real(ckpt)

    monkeypatch.setattr(ckpt_load, "_verified_or_fail", saved_then_verified)
    assert find_checkpoint(tmp_path, best=True) == tmp_path / "checkpoints" / ckpt_name(2)
