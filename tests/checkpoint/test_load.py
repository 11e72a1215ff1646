"""Finding and loading checkpoints: fallbacks, subsets and renames, damaged states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from embedlab.checkpoint import CheckpointManager, find_checkpoint, load_checkpoint, tensor_specs
from embedlab.errors import InputError

from .sample import resign, sample_tensors, save_sample

# these library functions are the commands' own: their messages as the commands give them
pytestmark = pytest.mark.usefixtures("cli_messages")


def test_tmp_dirs_are_ignored_and_none_verified_is_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "ckpt-00000005.tmp-abc").mkdir(parents=True)
    (root / "ckpt-00000005.tmp-abc" / "MANIFEST.json").write_text("{}")
    m = CheckpointManager(tmp_path)
    assert m.latest() is None and m.list() == []
    with pytest.raises(InputError, match="has no checkpoints yet; train it first"):
        find_checkpoint(tmp_path)
    (tmp_path / "fresh").mkdir()
    with pytest.raises(InputError, match="holds no checkpoints"):
        find_checkpoint(tmp_path / "fresh")
    with pytest.raises(InputError, match="does not exist"):
        find_checkpoint(tmp_path / "nope")


def test_subset_and_rename(tmp_path: Path) -> None:
    path = save_sample(CheckpointManager(tmp_path), 7)
    t = sample_tensors(7)
    got, _ = load_checkpoint(path, names=["input_embeddings"])
    assert list(got) == ["input_embeddings"] and np.array_equal(got["input_embeddings"],
                                                                  t["input_embeddings"])
    got, _ = load_checkpoint(path, names=[], rename={"embed_matrix": "input_embeddings"})
    assert list(got) == ["embed_matrix"]
    assert np.array_equal(got["embed_matrix"], t["input_embeddings"])
    got, _ = load_checkpoint(path, rename={"embed_matrix": "input_embeddings"})
    assert set(got) == {"embed_matrix", "output_embeddings", "output_bias"}
    with pytest.raises(InputError, match="no tensor named nce_weight; it has: input_embeddings"):
        load_checkpoint(path, names=["nce_weight"])
    with pytest.raises(InputError, match="two tensors the name"):
        load_checkpoint(path, rename={"output_bias": "input_embeddings"})


def test_find_checkpoint_step_best_and_folder(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=2)
    for s, loss in ((1, 5.0), (2, 1.0), (3, 3.0), (4, 4.0)):
        save_sample(m, s, loss)
    root = tmp_path / "checkpoints"
    assert find_checkpoint(tmp_path, best=True) == root / "ckpt-00000002"
    assert find_checkpoint(tmp_path, step=3) == root / "ckpt-00000003"
    assert find_checkpoint(root / "ckpt-00000004") == root / "ckpt-00000004"
    with pytest.raises(InputError, match=r"no checkpoint at step 1 \(available: 2, 3, 4\)"):
        find_checkpoint(tmp_path, step=1)


def test_no_pickle_on_load_path() -> None:
    import embedlab.checkpoint

    sources = Path(embedlab.checkpoint.__file__).parent.glob("*.py")
    for source in sources:
        src = source.read_text()
        for call in ("torch.load(", "pickle.load", "allow_pickle=True", "import pickle"):
            assert call not in src, source.name


def test_tensor_specs_of_an_unparsable_resigned_file_is_one_line(tmp_path: Path) -> None:
    path = save_sample(CheckpointManager(tmp_path), 3)
    (path / "tensors.safetensors").write_bytes(b"\xff" * 300)
    resign(path)
    with pytest.raises(InputError, match=r"cannot read checkpoint .*ckpt-00000003 \(.*\); use "
                                         r"another checkpoint \('embedlab ckpt .+' lists them\)"):
        tensor_specs(path)


def test_a_tensor_asked_for_is_named_with_what_the_file_holds(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    path = save_sample(CheckpointManager(tmp_path), 3)
    with pytest.raises(InputError, match=r"has no tensor named nope; it has: "):
        load_checkpoint(path, names=["nope"])
    save_file({}, str(path / "tensors.safetensors"))  # re-signed with no tensor in it
    resign(path)
    with pytest.raises(InputError) as e:
        load_checkpoint(path, names=["input_embeddings"])
    assert str(e.value) == (f"checkpoint {path} has no tensor named input_embeddings; it holds "
                            "no tensor at all; use another checkpoint")


def _edit_state(path: Path, edit: dict[str, object], drop: tuple[str, ...] = ()) -> None:
    state = json.loads((path / "state.json").read_text())
    state.update(edit)
    for key in drop:
        del state[key]
    (path / "state.json").write_text(json.dumps(state))
    resign(path)


@pytest.mark.parametrize(("edit", "drop", "message"), [
    ({}, ("step",), "state.json has no 'step'"),
    ({"step": "x"}, (), "'step' = \"x\", not a whole number >= 0"),
    ({"step": -1}, (), "'step' = -1, not a whole number >= 0"),
    ({"step": True}, (), "'step' = true, not a whole number >= 0"),
    ({"step": "x" * 50}, (), "'step' = \"" + "x" * 36 + "..., not a whole number >= 0"),
    ({"step": 4}, (), "state.json says step 4, its folder name step 3"),
    ({"metrics": [1]}, (), "'metrics' = [1], not an object of numbers"),
    ({"metrics": {"loss": "low"}}, (), "not an object of numbers"),
])
def test_a_resigned_state_of_the_wrong_shape_is_one_line(tmp_path: Path, edit: dict[str, object],
                                                         drop: tuple[str, ...],
                                                         message: str) -> None:
    path = save_sample(CheckpointManager(tmp_path), 3)
    _edit_state(path, edit, drop)
    with pytest.raises(InputError) as e:
        load_checkpoint(path)
    text = str(e.value)
    assert "\n" not in text and message in text
    assert text.startswith(f"checkpoint {path} is damaged: ")
    assert text.endswith(f"; use another checkpoint ('embedlab ckpt {tmp_path}' lists them)")


_SPEC = {"cursor": {"epoch": int, "chunk": int, "batch": int}, "last_loss": (float, None),
         "words_seen": int}


@pytest.mark.parametrize(("edit", "message"), [
    ({"cursor": 5}, "'cursor' = 5, not an object with epoch, chunk, batch"),
    ({"cursor": {"epoch": 0, "chunk": 1}}, "not an object whose 'batch' is present"),
    ({"cursor": {"epoch": 0, "chunk": 1, "batch": "2"}}, "whose 'batch' is a whole number >= 0"),
    ({"last_loss": "x"}, "'last_loss' = \"x\", not a number or null"),
    ({"words_seen": 1.5}, "'words_seen' = 1.5, not a whole number >= 0"),
])
def test_state_spec_checks_the_callers_fields(tmp_path: Path, edit: dict[str, object],
                                              message: str) -> None:
    path = save_sample(CheckpointManager(tmp_path), 3)
    ok = {"cursor": {"epoch": 0, "chunk": 1, "batch": 2}, "last_loss": None, "words_seen": 7}
    _edit_state(path, ok)
    assert load_checkpoint(path, state_spec=_SPEC)[1]["cursor"] == ok["cursor"]
    _edit_state(path, {**ok, **edit})
    load_checkpoint(path)  # without a spec only step and metrics are checked
    with pytest.raises(InputError, match=re.escape(message)):
        load_checkpoint(path, state_spec=_SPEC)


def test_a_run_being_trained_before_its_first_checkpoint_names_the_trainer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A query on a run whose first checkpoint is still to come: not "train it first", since
    another process is training it; this process's own lock (a query from on_progress, or
    --init-from its own run) is nothing to wait for."""
    import subprocess
    import sys

    from embedlab.cli import main
    from embedlab.run.lock import RunLock

    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from embedlab.run.lock import RunLock\n"
         f"with RunLock({str(run)!r}):\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(InputError) as e:
            find_checkpoint(run)
        assert str(e.value).startswith(f"{run} has no checkpoints yet: pid {holder.pid} is "
                                       "training it now and saves its first after "
                                       "--checkpoint-every steps or --checkpoint-secs seconds")
        (run / "checkpoints").mkdir()  # the trainer made its checkpoints/ folder
        with pytest.raises(InputError, match=r"has no checkpoints yet: pid \d+ is training"):
            find_checkpoint(run)
        (run / "checkpoints").rmdir()
        (run / "config.json").write_text("{}")  # export without --out: the run, not --out
        with pytest.raises(SystemExit):
            main(["export", str(run)])
        assert "is training it now" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    (run / "checkpoints").mkdir()
    with pytest.raises(InputError, match="has no checkpoints yet; train it first"):
        find_checkpoint(run)  # the trainer gone: train it
    with RunLock(run), pytest.raises(InputError, match="train it first"):
        find_checkpoint(run)  # this process's own lock


@pytest.mark.parametrize(("framework", "kind"), [
    ("numpy", np.ndarray), ("np", np.ndarray), ("pt", "Tensor"), ("torch", "Tensor")])
def test_framework_names_numpy_or_torch_as_safetensors_does(tmp_path: Path, framework: str,
                                                           kind: object) -> None:
    path = save_sample(CheckpointManager(tmp_path), 3)
    for names in (None, ["output_bias"]):  # one pass for all, or tensor by tensor
        tensors, _ = load_checkpoint(path, names=names, framework=framework)  # type: ignore[arg-type]
        for t in tensors.values():
            assert isinstance(t, np.ndarray) if kind is np.ndarray else \
                type(t).__name__ == kind and type(t).__module__ == "torch"


@pytest.mark.parametrize("framework", ["tf", "jax", "flax", None, "NumPy", 1])
def test_another_framework_is_refused_in_one_line(tmp_path: Path, framework: object) -> None:
    path = save_sample(CheckpointManager(tmp_path), 3)
    with pytest.raises(InputError) as e:
        load_checkpoint(path, framework=framework)  # type: ignore[arg-type]
    assert str(e.value) == (f"framework= must be 'numpy' (NumPy arrays) or 'pt' (torch "
                            f"tensors), got {framework!r}; pass framework='numpy' or "
                            "framework='pt'")


def test_names_may_be_one_name(tmp_path: Path) -> None:
    path = save_sample(CheckpointManager(tmp_path), 3)
    tensors, _ = load_checkpoint(path, names="input_embeddings")
    assert list(tensors) == ["input_embeddings"]
    tensors, _ = load_checkpoint(path, names=(n for n in ["output_bias"]))  # any iterable
    assert list(tensors) == ["output_bias"]
    for names, got in ((5, "5"), ([1], "[1]"), (["a", None], "['a', None]")):
        with pytest.raises(InputError) as e:
            load_checkpoint(path, names=names)  # type: ignore[arg-type]
        assert str(e.value) == (f"names= must be a tensor's name or a list of names (str), got "
                                f"{got}; e.g. names=['input_embeddings']")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"step": "20"}, "--step must be a checkpoint's step, an integer >= 0, got the str '20'"),
    ({"step": 20.0}, "--step must be a checkpoint's step, an integer >= 0, got 20.0"),
    ({"step": -1}, "--step must be a checkpoint's step, an integer >= 0, got -1"),
    ({"best": "no"}, "best= must be True or False, got the str 'no'"),
    ({"best": 1}, "best= must be True or False, got 1"),
])
def test_find_checkpoint_refuses_a_step_or_best_of_another_type(
        tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    save_sample(CheckpointManager(tmp_path), 20)
    with pytest.raises(InputError) as e:
        find_checkpoint(tmp_path, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and str(e.value).startswith(message)
    assert find_checkpoint(tmp_path, step=np.int64(20), best=np.bool_(False)).name == \
        "ckpt-00000020"
