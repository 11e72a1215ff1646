"""The checkpoint library called from Python: its messages name its arguments (the commands'
wording is tested beside each function's other tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.checkpoint import CheckpointManager, find_checkpoint, load_checkpoint

from .sample import save_sample


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keep": 0}, "keep must be >= 1, got 0; e.g. keep=5"),
    ({"keep_every": 0}, "keep_every must be >= 1, got 0; e.g. keep_every=10000"),
])
def test_the_manager_names_its_arguments(tmp_path: Path, kwargs: dict[str, int],
                                         message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CheckpointManager(tmp_path, **kwargs)


def test_find_checkpoint_names_its_arguments(tmp_path: Path) -> None:
    save_sample(CheckpointManager(tmp_path), 1)
    with pytest.raises(ValueError) as e:
        find_checkpoint(tmp_path, step=7)
    assert str(e.value).endswith("(available: 1); pass one of them as step=")
    with pytest.raises(ValueError, match=r"^step= must be a checkpoint's step"):
        find_checkpoint(tmp_path, step="7")  # type: ignore[arg-type]


def test_load_checkpoint_names_rename(tmp_path: Path) -> None:
    ckpt = save_sample(CheckpointManager(tmp_path), 1)
    with pytest.raises(ValueError, match=r"^rename would give two tensors the name"):
        load_checkpoint(ckpt, rename={"input_embeddings": "output_embeddings"})
