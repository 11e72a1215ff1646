"""Checkpoint manager: atomic saves, verification/fallback, retention roles, subset restore."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import resource
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedlab import checkpoint as ck
from embedlab.checkpoint import (
    CheckpointError,
    CheckpointManager,
    find_checkpoint,
    load_checkpoint,
    read_index,
)
from embedlab.errors import InputError

_FIXTURE_OK = [HealthCheck.function_scoped_fixture]


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Property tests check logic, not durability; fsync would dominate their run time."""
    monkeypatch.setattr(ck.os, "fsync", lambda fd: None)


def _tensors(step: int) -> dict[str, np.ndarray]:
    g = np.random.default_rng(step)
    return {"input_embeddings": g.standard_normal((7, 3), dtype=np.float32),
            "output_embeddings": g.standard_normal((7, 3), dtype=np.float32),
            "output_bias": np.arange(7, dtype=np.float32) + step}


def _save(m: CheckpointManager, step: int, loss: float | None = None) -> Path:
    metrics = {"loss": loss if loss is not None else 1.0 / (step + 1)}
    return m.save(step, _tensors(step), {"epoch": 0, "cursor": step * 10}, metrics)


def test_round_trip_layout_and_index(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    path = _save(m, 12000)
    assert path == tmp_path / "checkpoints" / "ckpt-00012000"
    assert sorted(p.name for p in path.iterdir()) == ["MANIFEST.json", "state.json",
                                                      "tensors.safetensors"]
    manifest = json.loads((path / "MANIFEST.json").read_text())
    assert set(manifest["files"]) == {"tensors.safetensors", "state.json"}
    tensors, state = load_checkpoint(path)
    for name, t in _tensors(12000).items():
        assert np.array_equal(tensors[name], t) and tensors[name].dtype == t.dtype
    assert state == {"epoch": 0, "cursor": 120000, "step": 12000, "metrics": {"loss": 1 / 12001}}
    index = (tmp_path / "checkpoint").read_text()
    assert "latest: ckpt-00012000" in index
    assert "kept: ckpt-00012000" in index
    assert f"best: ckpt-00012000 loss={1 / 12001!r} (min)" in index
    assert m.latest() == path and m.best() == path
    assert not list((tmp_path / "checkpoints").glob("*.tmp-*"))


_SHAPES = st.dictionaries(st.text("abcxyz_", min_size=1, max_size=8),
                          st.lists(st.integers(0, 4), max_size=3), min_size=1, max_size=4)
_STATES = st.dictionaries(st.text(max_size=5).filter(lambda k: k not in ("step", "metrics")),
                          st.integers() | st.text() | st.booleans() | st.none(), max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(shapes=_SHAPES, dtype=st.sampled_from([np.float32, np.float64, np.int64, np.uint8]),
       state=_STATES)
def test_property_save_load_round_trip(no_fsync: None, tmp_path: Path, shapes: dict[str, list[int]],
                                       dtype: type, state: dict[str, object]) -> None:
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    rng = np.random.default_rng(0)
    tensors = {n: (rng.random(tuple(s)) * 100).astype(dtype) for n, s in shapes.items()}
    path = CheckpointManager(run).save(3, tensors, state, {"loss": 0.5})
    got, got_state = load_checkpoint(path)
    assert got.keys() == tensors.keys()
    for n, t in tensors.items():
        assert got[n].dtype == t.dtype and got[n].shape == t.shape and np.array_equal(got[n], t)
    assert got_state == {**state, "step": 3, "metrics": {"loss": 0.5}}


@settings(max_examples=25, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(shapes=_SHAPES, dtype=st.sampled_from([torch.float32, torch.float64, torch.int64,
                                              torch.uint8, torch.bfloat16]),
       state=_STATES)
def test_property_torch_tensors_round_trip(no_fsync: None, tmp_path: Path,
                                           shapes: dict[str, list[int]], dtype: torch.dtype,
                                           state: dict[str, object]) -> None:
    # the linear regression saves torch tensors; framework="pt" gives them back as stored,
    # bfloat16 included, and a NumPy load of the same file widens bfloat16 to float32 exactly
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    tensors = {n: (torch.rand(tuple(s)) * 100).to(dtype) for n, s in shapes.items()}
    path = CheckpointManager(run).save(3, tensors, state, {"loss": 0.5})
    got, got_state = load_checkpoint(path, framework="pt")
    assert got.keys() == tensors.keys()
    for n, t in tensors.items():
        assert got[n].dtype == t.dtype and got[n].shape == t.shape and torch.equal(got[n], t)
    assert got_state == {**state, "step": 3, "metrics": {"loss": 0.5}}
    arrays, _ = load_checkpoint(path)
    for n, t in tensors.items():
        want = t.float().numpy() if dtype == torch.bfloat16 else t.numpy()
        assert arrays[n].dtype == want.dtype and np.array_equal(arrays[n], want)


def test_numpy_and_torch_tensors_give_the_same_file(tmp_path: Path) -> None:
    # runs saved by torch-era embedlab and by today's NumPy path are byte-identical
    arrays = _tensors(5)
    a = CheckpointManager(tmp_path / "a").save(5, arrays, {}, {})
    b = CheckpointManager(tmp_path / "b").save(5, {n: torch.from_numpy(t)
                                                   for n, t in arrays.items()}, {}, {})
    assert (a / "tensors.safetensors").read_bytes() == (b / "tensors.safetensors").read_bytes()


def test_failed_save_enospc_leaves_earlier_checkpoints_and_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = CheckpointManager(tmp_path, keep=2)
    for s in (10, 20):
        _save(m, s)
    before_index = (tmp_path / "checkpoint").read_bytes()
    root = tmp_path / "checkpoints"
    before = {p.name: (p / "MANIFEST.json").read_bytes() for p in root.iterdir()}

    def disk_full(*args: object, **kwargs: object) -> None:
        Path(str(args[1])).write_bytes(b"partial")  # a torn write, then the failure
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ck, "save_tensors", disk_full)
    with pytest.raises(CheckpointError) as e:
        _save(m, 30)
    # training's wording (an export of a subset words it its own way, see tests/cli/test_ckpt.py)
    assert str(e.value) == (f"could not save checkpoint at step 30 in {root}: No space left on "
                            "device; free disk space, then re-run the same command to resume "
                            "from the last saved checkpoint (earlier checkpoints are intact)")
    assert isinstance(e.value.os_error, OSError) and e.value.os_error.errno == errno.ENOSPC
    assert (tmp_path / "checkpoint").read_bytes() == before_index
    after = {p.name: (p / "MANIFEST.json").read_bytes() for p in root.iterdir()}
    assert after == before  # no tmp folder left, nothing deleted or modified
    assert m.latest() == tmp_path / "checkpoints" / "ckpt-00000020"
    assert load_checkpoint(m.latest())[1]["step"] == 20  # type: ignore[arg-type]


def test_failed_save_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulated: the tests may run as root, where chmod does not deny anything.
    m = CheckpointManager(tmp_path)
    _save(m, 1)

    def denied(path: Path, data: bytes) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(ck, "_write_file", denied)
    with pytest.raises(CheckpointError, match=r"Permission denied; make .* writable"):
        _save(m, 2)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000001"]


def test_failure_of_other_kind_cleans_tmp(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path)
    a = np.zeros(4)
    with pytest.raises(ValueError, match="disagrees"):
        m.save(5, {"a": a}, {"step": 4}, {})
    assert list((tmp_path / "checkpoints").iterdir()) == []
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize("damage", ["flip", "truncate", "no_manifest", "state_edit"])
def test_damaged_latest_is_skipped_with_warning(tmp_path: Path, damage: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    m = CheckpointManager(tmp_path)
    _save(m, 1)
    bad = _save(m, 2)
    f = bad / "tensors.safetensors"
    if damage == "flip":
        data = bytearray(f.read_bytes())
        data[-5] ^= 0x01
        f.write_bytes(bytes(data))
    elif damage == "truncate":
        f.write_bytes(f.read_bytes()[:-10])
    elif damage == "no_manifest":
        (bad / "MANIFEST.json").unlink()
    else:
        st_ = json.loads((bad / "state.json").read_text())
        st_["cursor"] = 0
        (bad / "state.json").write_text(json.dumps(st_))
    ck._VERIFIED.clear()
    assert ck.verify(bad) is not None
    assert m.latest() == tmp_path / "checkpoints" / "ckpt-00000001"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "skipping checkpoint" in err and "ckpt-00000002" in err
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoints" / "ckpt-00000001"
    with pytest.raises(InputError, match="failed verification"):
        load_checkpoint(bad)
    with pytest.raises(InputError, match="failed verification"):
        find_checkpoint(tmp_path, step=2)


def test_tmp_dirs_are_ignored_and_none_verified_is_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "ckpt-00000005.tmp-abc").mkdir(parents=True)
    (root / "ckpt-00000005.tmp-abc" / "MANIFEST.json").write_text("{}")
    m = CheckpointManager(tmp_path)
    assert m.latest() is None and m.list() == []
    with pytest.raises(InputError, match="no verified checkpoint"):
        find_checkpoint(tmp_path)
    (tmp_path / "fresh").mkdir()
    with pytest.raises(InputError, match="holds no checkpoints"):
        find_checkpoint(tmp_path / "fresh")
    with pytest.raises(InputError, match="does not exist"):
        find_checkpoint(tmp_path / "nope")


def test_subset_and_rename(tmp_path: Path) -> None:
    path = _save(CheckpointManager(tmp_path), 7)
    t = _tensors(7)
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
        _save(m, s, loss)
    root = tmp_path / "checkpoints"
    assert find_checkpoint(tmp_path, best=True) == root / "ckpt-00000002"
    assert find_checkpoint(tmp_path, step=3) == root / "ckpt-00000003"
    assert find_checkpoint(root / "ckpt-00000004") == root / "ckpt-00000004"
    with pytest.raises(InputError, match=r"no checkpoint at step 1 \(available: 2, 3, 4\)"):
        find_checkpoint(tmp_path, step=1)


def test_best_max_mode_and_missing_metric(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=1, best_metric="analogy", best_mode="max")
    m.save(1, _tensors(1), {}, {"loss": 3.0, "analogy": 0.2})
    m.save(2, _tensors(2), {}, {"loss": 2.0})  # no analogy: best unchanged
    m.save(3, _tensors(3), {}, {"analogy": 0.1})
    m.save(4, _tensors(4), {}, {"analogy": math.nan})
    idx = read_index(tmp_path)
    assert idx.best == 1 and idx.best_value == 0.2 and idx.kept == (4,)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["ckpt-00000001",
                                                                          "ckpt-00000004"]


def test_protect_keeps_resume_point_until_newer_commit(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=3, best_metric="none")
    for s in (10, 20, 30):
        _save(m, s)
    # A run restarted from step 20 (e.g. --step) saves step 15 of a new branch.
    m2 = CheckpointManager(tmp_path, keep=1, best_metric="none")
    m2.protect(20)
    _save(m2, 15)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["ckpt-00000015", "ckpt-00000020"]  # 10 and 30 are ours and past --keep
    _save(m2, 25)  # newer than the protected one: protection ends
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["ckpt-00000025"]


def test_crash_between_commit_and_index_adopts_new_folder(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=1, best_metric="none")
    _save(m, 1)
    index = (tmp_path / "checkpoint").read_text()
    _save(CheckpointManager(tmp_path, keep=5, best_metric="none"), 2)
    (tmp_path / "checkpoint").write_text(index)  # as if the process died before the rewrite
    _save(CheckpointManager(tmp_path, keep=1, best_metric="none"), 3)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["ckpt-00000003"]


@settings(max_examples=40, deadline=None, suppress_health_check=_FIXTURE_OK)
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
    assert ours == {ck.ckpt_name(s) for s in expected}
    idx = read_index(run)
    assert idx.latest == steps[-1] and idx.best == best_step
    assert set(idx.kept) == set(steps[-keep:])
    for s in expected:
        assert load_checkpoint(root / ck.ckpt_name(s))[0]["w"].item() == float(s)


def test_list_roles_and_sizes(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=2, keep_every=2)
    for s, loss in ((1, 0.1), (2, 0.5), (3, 0.4), (5, 0.3)):
        _save(m, s, loss)
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

    monkeypatch.setattr(ck, "time", types.SimpleNamespace(**{**vars(time),
                                                             "perf_counter": perf_counter}))
    _save(m, 1)
    assert m.last_save_seconds == 2.5
    monkeypatch.setattr(ck, "_commit", lambda tmp, final: (_ for _ in ()).throw(
        OSError(28, "No space left on device")))
    with pytest.raises(CheckpointError):
        _save(m, 2)
    assert m.last_save_seconds == 2.5  # a failed save leaves the last good measure


def test_no_pickle_on_load_path() -> None:
    src = Path(ck.__file__).read_text()
    for call in ("torch.load(", "pickle.load", "allow_pickle=True", "import pickle"):
        assert call not in src


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


def test_checkpoint_files_get_the_umasks_mode(tmp_path: Path) -> None:
    # mkdtemp made every checkpoint folder 0700 and safetensors writes its file 0600: a run
    # shared with a group (umask 002) or the world (022) was unreadable past its JSON files.
    old = os.umask(0o002)
    try:
        folder = CheckpointManager(tmp_path / "run").save(
            1, {"w": np.zeros((2, 2))}, {"step": 1}, {})
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o775
    for f in folder.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o664, f.name


def test_a_write_failure_inside_safetensors_is_the_one_line_save_error(tmp_path: Path) -> None:
    # safetensors raises its own SafetensorError for a full disk, not an OSError: it escaped
    # the save's error handling as a traceback.
    manager = CheckpointManager(tmp_path / "run")
    manager.save(1, {"w": np.zeros(4)}, {"step": 1}, {})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # writes past 100 kB: EFBIG
    try:
        with pytest.raises(CheckpointError, match=r"could not save checkpoint at step 2 in .*: "
                                                  r"File too large; check .*earlier checkpoints"):
            manager.save(2, {"w": np.zeros(100_000)}, {"step": 2}, {})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["ckpt-00000001"]


def _resign(ckpt_dir: Path, **fields: object) -> None:
    """Rewrite MANIFEST.json so that it matches the folder's files again (as a hand edit with a
    re-signed manifest would), with ``fields`` replaced."""
    manifest = json.loads((ckpt_dir / "MANIFEST.json").read_text())
    for name in manifest["files"]:
        manifest["files"][name] = {"sha256": ck.file_digest(ckpt_dir / name, "sha256"),
                                   "size": (ckpt_dir / name).stat().st_size}
    manifest.update(fields)
    (ckpt_dir / "MANIFEST.json").write_text(json.dumps(manifest))
    ck._VERIFIED.clear()


_FILES_OK = {"sha256": "0" * 64, "size": 1}


@pytest.mark.parametrize("manifest", [
    [1, 2], "x", 3, None,
    {"format": ck.MANIFEST_FORMAT, "files": [1]},
    {"format": ck.MANIFEST_FORMAT, "files": {"tensors.safetensors": _FILES_OK}},
    {"format": ck.MANIFEST_FORMAT, "files": {"tensors.safetensors": [1], "state.json": _FILES_OK}},
    {"format": ck.MANIFEST_FORMAT, "files": {"tensors.safetensors": {"sha256": 1, "size": 1},
                                             "state.json": _FILES_OK}},
    {"format": ck.MANIFEST_FORMAT, "files": {"tensors.safetensors": {"sha256": "0", "size": "1"},
                                             "state.json": _FILES_OK}},
    {"format": ck.MANIFEST_FORMAT, "files": {"tensors.safetensors": {"sha256": "0", "size": True},
                                             "state.json": _FILES_OK}},
    {"format": ck.MANIFEST_FORMAT, "files": {"tensors.safetensors": _FILES_OK,
                                             "state.json": _FILES_OK, "../../x": _FILES_OK}},
])
def test_manifest_of_the_wrong_shape_is_skipped_like_other_damage(
        tmp_path: Path, manifest: object, capsys: pytest.CaptureFixture[str]) -> None:
    # valid JSON that is not a manifest's shape was an AttributeError/KeyError in every reader
    m = CheckpointManager(tmp_path)
    good = _save(m, 1)
    bad = _save(m, 2)
    (bad / "MANIFEST.json").write_text(json.dumps(manifest))
    ck._VERIFIED.clear()
    assert ck.verify(bad) is not None
    assert m.latest() == good and find_checkpoint(tmp_path) == good
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "skipping checkpoint" in err  # latest() and find_checkpoint
    infos = m.list()
    assert [i.verified for i in infos] == [True, False] and infos[1].problem
    with pytest.raises(InputError, match="failed verification"):
        load_checkpoint(bad)


@pytest.mark.parametrize("created", [1e20, math.nan, -math.inf, [1], "today", True, None])
def test_a_bad_created_time_lists_the_folder_mtime(tmp_path: Path, created: object) -> None:
    # "created" is not hashed: a hand edit made `ckpt RUN` crash (OverflowError, ValueError)
    path = _save(CheckpointManager(tmp_path), 3)
    _resign(path, created=created)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    [info] = CheckpointManager(tmp_path).list()
    assert info.verified and info.time == 1_700_000_000


def test_tensor_specs_of_an_unparsable_resigned_file_is_one_line(tmp_path: Path) -> None:
    path = _save(CheckpointManager(tmp_path), 3)
    (path / "tensors.safetensors").write_bytes(b"\xff" * 300)
    _resign(path)
    with pytest.raises(InputError, match=r"cannot read checkpoint .*ckpt-00000003 \(.*\); use "
                                         r"another checkpoint \('embedlab ckpt RUN' lists them\)"):
        ck.tensor_specs(path)


def _edit_state(path: Path, edit: dict[str, object], drop: tuple[str, ...] = ()) -> None:
    state = json.loads((path / "state.json").read_text())
    state.update(edit)
    for key in drop:
        del state[key]
    (path / "state.json").write_text(json.dumps(state))
    _resign(path)


@pytest.mark.parametrize(("edit", "drop", "message"), [
    ({}, ("step",), "state.json has no 'step'"),
    ({"step": "x"}, (), "'step' = \"x\", not a whole number >= 0"),
    ({"step": -1}, (), "'step' = -1, not a whole number >= 0"),
    ({"step": True}, (), "'step' = true, not a whole number >= 0"),
    ({"step": 4}, (), "state.json says step 4, its folder name step 3"),
    ({"metrics": [1]}, (), "'metrics' = [1], not an object of numbers"),
    ({"metrics": {"loss": "low"}}, (), "not an object of numbers"),
])
def test_a_resigned_state_of_the_wrong_shape_is_one_line(tmp_path: Path, edit: dict[str, object],
                                                         drop: tuple[str, ...],
                                                         message: str) -> None:
    path = _save(CheckpointManager(tmp_path), 3)
    _edit_state(path, edit, drop)
    with pytest.raises(InputError) as e:
        load_checkpoint(path)
    text = str(e.value)
    assert "\n" not in text and message in text
    assert text.startswith(f"checkpoint {path} is damaged: ")
    assert text.endswith("; use another checkpoint ('embedlab ckpt RUN' lists them)")


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
    path = _save(CheckpointManager(tmp_path), 3)
    ok = {"cursor": {"epoch": 0, "chunk": 1, "batch": 2}, "last_loss": None, "words_seen": 7}
    _edit_state(path, ok)
    assert load_checkpoint(path, state_spec=_SPEC)[1]["cursor"] == ok["cursor"]
    _edit_state(path, {**ok, **edit})
    load_checkpoint(path)  # without a spec only step and metrics are checked
    with pytest.raises(InputError, match=re.escape(message)):
        load_checkpoint(path, state_spec=_SPEC)


def test_a_garbled_index_is_refused_up_front_and_deleting_it_is_the_fix(tmp_path: Path) -> None:
    m = CheckpointManager(tmp_path, keep=2)
    _save(m, 1, loss=0.5)  # the best, outside the two kept
    _save(m, 2, loss=0.9)
    _save(m, 3, loss=0.8)
    (tmp_path / "checkpoint").write_bytes(b"\xff\xfe garbage \x80")
    m = CheckpointManager(tmp_path, keep=2)
    # the trainer asks before it writes anything; the fix is "delete it", not "permissions"
    with pytest.raises(CheckpointError, match=re.escape(
            f"{tmp_path / 'checkpoint'} is damaged (not UTF-8 text); delete it (it is rebuilt "
            "from the checkpoint folders at the next save)")):
        m.check_index()
    (tmp_path / "checkpoint").unlink()
    m.check_index()
    m.protect(3)
    _save(m, 4, loss=0.7)
    # the rebuilt index keeps the best checkpoint (from its state.json's metrics), so the
    # deletion did not cost the run its best
    index = read_index(tmp_path)
    assert index.latest == 4 and index.best == 1 and index.best_value == 0.5
    assert sorted(ck._scan(tmp_path / "checkpoints")) == [1, 3, 4]
    _save(m, 5, loss=0.9)
    assert sorted(ck._scan(tmp_path / "checkpoints")) == [1, 4, 5]


def test_an_unreadable_index_still_names_permissions(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _save(CheckpointManager(tmp_path), 1)
    real = Path.read_text

    def denied(self: Path, *args: object, **kwargs: object) -> str:
        if self.name == "checkpoint":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(CheckpointError, match=r"cannot read .*checkpoint \(Permission denied\); "
                                              "fix its permissions or delete it"):
        CheckpointManager(tmp_path).check_index()
