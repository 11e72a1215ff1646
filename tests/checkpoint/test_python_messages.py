"""The checkpoint library called from Python: its messages name its arguments (the commands'
wording is tested beside each function's other tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedlab.checkpoint import CheckpointManager, find_checkpoint, load_checkpoint, load_latest
from embedlab.errors import InputError

from .sample import save_sample


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keep": 0}, "keep must be a whole number >= 1, got 0; e.g. keep=5"),
    ({"keep_every": 0}, "keep_every must be a whole number >= 1 or None, got 0; e.g. "
                        "keep_every=10000"),
    # True would be keep=1: a retention that deletes every checkpoint but the newest
    ({"keep": True}, "keep must be a whole number >= 1, got True; e.g. keep=5"),
    ({"keep": 2.5}, "keep must be a whole number >= 1, got 2.5; e.g. keep=5"),
    ({"keep": "5"}, "keep must be a whole number >= 1, got '5'; e.g. keep=5"),
    ({"keep_every": "7"}, "keep_every must be a whole number >= 1 or None, got '7'"),
    ({"best_metric": 5}, "best_metric must be the name of a metric passed to save"),
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


@pytest.mark.parametrize("call", [
    lambda: CheckpointManager(b"runs/x"),  # type: ignore[arg-type]
    lambda: find_checkpoint(b"runs/x"),  # type: ignore[arg-type]
    lambda: find_checkpoint(None),  # type: ignore[arg-type]
    lambda: load_latest(b"runs/x"),  # type: ignore[arg-type]
    lambda: load_checkpoint(None),  # type: ignore[arg-type]
])
def test_a_path_of_the_wrong_type_is_one_line(call: Any) -> None:
    with pytest.raises(InputError, match=r"^(run_dir|path|run|ckpt_dir)= (is bytes|must be "
                                         r"the path)"):
        call()


@pytest.mark.parametrize(("tensors", "state", "message"), [
    ({"input_embeddings": [[1.0]]}, {}, r"^tensors\['input_embeddings'\] is a list, not a "
                                        r"NumPy array or a torch tensor"),
    (np.ones((2, 2), np.float32), {}, r"^tensors must be a dict of names to arrays, not "
                                      r"ndarray"),
    ({5: np.ones(2, np.float32)}, {}, r"^tensors has the key 5, not a name"),
    ({"x": np.ones(2, np.float32)}, [1], r"^state must be a dict \(written as state.json\), "
                                         r"not list"),
    ({"x": np.ones(2, np.float32)}, {"a": object()}, r"^state cannot be written as JSON "
                                                     r"\(Object of type object"),
])
def test_save_refuses_contents_of_the_wrong_type_before_writing(
        tmp_path: Path, tensors: Any, state: Any, message: str) -> None:
    m = CheckpointManager(tmp_path)
    with pytest.raises(InputError, match=message):
        m.save(10, tensors, state, {"loss": 1.0})
    assert not (tmp_path / "checkpoints").exists() or not any(
        (tmp_path / "checkpoints").iterdir())


def test_protect_takes_a_step_number(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    with pytest.raises(InputError, match=r"^step must be a whole number >= 0, got '2000'"):
        m.protect("2000")  # type: ignore[arg-type]
    m.protect(np.int64(2000))  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"verify": "no"}, r"^verify= must be True or False, got the str 'no'"),
    ({"state_spec": {"last_loss": "float"}}, r"^state_spec\['last_loss'\] is 'float'; a "
                                             r"field's shape is int, float"),
    ({"state_spec": {"w": ({"a": 3}, None)}}, r"^state_spec\['w'\]\[0\]\['a'\] is 3"),
    ({"state_spec": [int]}, r"^state_spec must be a dict of field names to shapes"),
])
def test_load_checkpoint_refuses_options_of_the_wrong_type(tmp_path: Path, kwargs: Any,
                                                           message: str) -> None:
    ckpt = save_sample(CheckpointManager(tmp_path), 1)
    with pytest.raises(InputError, match=message):
        load_checkpoint(ckpt, **kwargs)
    assert load_checkpoint(ckpt, state_spec={"epoch": (int, None), "cursor": int})[1]["cursor"] \
        == 10


def test_a_spec_is_checked_by_identity_and_takes_nonetype(tmp_path: Path) -> None:
    ckpt = save_sample(CheckpointManager(tmp_path), 1)
    for spec in (np.dtype("int64"), np.array([1, 2])):  # == int, or no truth value
        with pytest.raises(InputError, match=r"^state_spec\['epoch'\] is "):
            load_checkpoint(ckpt, state_spec={"epoch": spec})
    load_checkpoint(ckpt, state_spec={"epoch": (int, type(None))})


def test_a_path_object_spelled_in_bytes_is_one_line(tmp_path: Path) -> None:
    class BytesPath:
        def __fspath__(self) -> bytes:
            return bytes(tmp_path)

    with pytest.raises(InputError, match=r"^path= is bytes"):
        find_checkpoint(BytesPath())  # type: ignore[arg-type]
