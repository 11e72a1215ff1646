"""A checkpoint folder's files: exact round trips, file modes, write errors, verification."""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.checkpoint import (
    CheckpointError,
    CheckpointManager,
    find_checkpoint,
    load_checkpoint,
)
from embedlab.checkpoint import format as ckpt_format
from embedlab.checkpoint.format import MANIFEST_FORMAT, verify
from embedlab.errors import InputError

from .sample import FIXTURE_OK, resign, sample_tensors, save_sample

# these library functions are the commands' own: their messages as the commands give them
pytestmark = pytest.mark.usefixtures("cli_messages")

_SHAPES = st.dictionaries(st.text("abcxyz_", min_size=1, max_size=8),
                          st.lists(st.integers(0, 4), max_size=3), min_size=1, max_size=4)
_STATES = st.dictionaries(st.text(max_size=5).filter(lambda k: k not in ("step", "metrics")),
                          st.integers() | st.text() | st.booleans() | st.none(), max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_OK)
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


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_OK)
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
    # the NumPy writer and the torch writer give byte-identical files, so a run saved either
    # way resumes either way
    arrays = sample_tensors(5)
    a = CheckpointManager(tmp_path / "a").save(5, arrays, {}, {})
    b = CheckpointManager(tmp_path / "b").save(5, {n: torch.from_numpy(t)
                                                   for n, t in arrays.items()}, {}, {})
    assert (a / "tensors.safetensors").read_bytes() == (b / "tensors.safetensors").read_bytes()


def test_checkpoint_files_get_the_umasks_mode(tmp_path: Path) -> None:
    # a run shared with a group (umask 002) or the world (022) stays readable past its JSON
    # files: neither mkdtemp's 0700 folder nor safetensors' 0600 file
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
    # safetensors raises its own SafetensorError for a full disk, not an OSError; the save
    # still reports it as its one-line error, not a traceback
    manager = CheckpointManager(tmp_path / "run")
    manager.save(1, {"w": np.zeros(4)}, {"step": 1}, {})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # writes past 100 kB: EFBIG
    try:
        with pytest.raises(CheckpointError, match=r"could not save checkpoint at step 2 in .*: "
                                                  r"File too large; raise the file size limit "
                                                  r"\(ulimit -f unlimited\), .*earlier "
                                                  r"checkpoints"):
            manager.save(2, {"w": np.zeros(100_000)}, {"step": 2}, {})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["ckpt-00000001"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "no_manifest", "state_edit"])
def test_damaged_latest_is_skipped_with_warning(tmp_path: Path, damage: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    m = CheckpointManager(tmp_path)
    save_sample(m, 1)
    bad = save_sample(m, 2)
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
    ckpt_format._VERIFIED.clear()
    assert verify(bad) is not None
    assert m.latest() == tmp_path / "checkpoints" / "ckpt-00000001"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "skipping checkpoint" in err and "ckpt-00000002" in err
    assert find_checkpoint(tmp_path) == tmp_path / "checkpoints" / "ckpt-00000001"
    with pytest.raises(InputError, match="failed verification"):
        load_checkpoint(bad)
    with pytest.raises(InputError, match="failed verification"):
        find_checkpoint(tmp_path, step=2)


@pytest.mark.parametrize(("cut", "said"), [(-10, "truncated?"), (10, "appended to?")])
def test_a_file_of_another_size_says_whether_it_is_short_or_long(
        tmp_path: Path, cut: int, said: str) -> None:
    f = save_sample(CheckpointManager(tmp_path), 1) / "tensors.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:cut] if cut < 0 else data + b"x" * cut)
    ckpt_format._VERIFIED.clear()
    assert verify(f.parent) == (f"tensors.safetensors has {len(data) + cut} bytes, the manifest "
                                f"says {len(data)} ({said})")


_FILES_OK = {"sha256": "0" * 64, "size": 1}


@pytest.mark.parametrize("manifest", [
    [1, 2], "x", 3, None,
    {"format": MANIFEST_FORMAT, "files": [1]},
    {"format": MANIFEST_FORMAT, "files": {"tensors.safetensors": _FILES_OK}},
    {"format": MANIFEST_FORMAT, "files": {"tensors.safetensors": [1], "state.json": _FILES_OK}},
    {"format": MANIFEST_FORMAT, "files": {"tensors.safetensors": {"sha256": 1, "size": 1},
                                          "state.json": _FILES_OK}},
    {"format": MANIFEST_FORMAT, "files": {"tensors.safetensors": {"sha256": "0", "size": "1"},
                                          "state.json": _FILES_OK}},
    {"format": MANIFEST_FORMAT, "files": {"tensors.safetensors": {"sha256": "0", "size": True},
                                          "state.json": _FILES_OK}},
    {"format": MANIFEST_FORMAT, "files": {"tensors.safetensors": _FILES_OK,
                                          "state.json": _FILES_OK, "../../x": _FILES_OK}},
])
def test_manifest_of_the_wrong_shape_is_skipped_like_other_damage(
        tmp_path: Path, manifest: object, capsys: pytest.CaptureFixture[str]) -> None:
    # valid JSON that is not a manifest's shape is damage like any other in every reader, not
    # an AttributeError or KeyError
    m = CheckpointManager(tmp_path)
    good = save_sample(m, 1)
    bad = save_sample(m, 2)
    (bad / "MANIFEST.json").write_text(json.dumps(manifest))
    ckpt_format._VERIFIED.clear()
    assert verify(bad) is not None
    assert m.latest() == good and find_checkpoint(tmp_path) == good
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "skipping checkpoint" in err  # latest() and find_checkpoint
    infos = m.list()
    assert [i.verified for i in infos] == [True, False] and infos[1].problem
    with pytest.raises(InputError, match="failed verification"):
        load_checkpoint(bad)


@pytest.mark.parametrize("created", [1e20, math.nan, -math.inf, [1], "today", True, None])
def test_a_bad_created_time_lists_the_folder_mtime(tmp_path: Path, created: object) -> None:
    # "created" is not hashed: a hand edit may leave a value that is no time, and `ckpt RUN`
    # shows the folder's mtime instead of failing on it (OverflowError, ValueError)
    path = save_sample(CheckpointManager(tmp_path), 3)
    resign(path, created=created)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    [info] = CheckpointManager(tmp_path).list()
    assert info.verified and info.time == 1_700_000_000


def test_names_sort_by_step_and_only_committed_folders_count(tmp_path: Path) -> None:
    assert ckpt_format.ckpt_name(12000) == "ckpt-00012000"
    assert ckpt_format.ckpt_name(123_456_789) == "ckpt-123456789"
    assert ckpt_format.parse_step("ckpt-00000007") == 7
    assert ckpt_format.parse_step("ckpt-123456789") == 123_456_789
    # renamed by hand: not the step's checkpoint (listed twice, then deleted by retention)
    for name in ("ckpt-00000007.tmp-ab12", "ckpt-", "notes", "ckpt-7x", "ckpt-7",
                 "ckpt-000000007"):
        assert ckpt_format.parse_step(name) is None
    root = tmp_path / "checkpoints"
    assert ckpt_format.committed_folders(root) == {}
    for name in ("ckpt-00000002", "ckpt-00000003.tmp-ab12", "notes"):
        (root / name).mkdir(parents=True)
    (root / "ckpt-00000004").write_text("a file, not a folder")
    assert ckpt_format.committed_folders(root) == {2: root / "ckpt-00000002"}


def test_a_listed_file_that_is_no_regular_file_fails_verification_without_reading(
        tmp_path: Path) -> None:
    # a FIFO (or a link to /dev/zero) listed in a crafted manifest: ckpt --verify, which the
    # docs recommend for a run received from someone, hashed it for ever
    ckpt = save_sample(CheckpointManager(tmp_path), 1)
    manifest = json.loads((ckpt / "MANIFEST.json").read_text())
    manifest["files"]["extra"] = {"sha256": "0" * 64, "size": 0}
    (ckpt / "MANIFEST.json").write_text(json.dumps(manifest))
    os.mkfifo(ckpt / "extra")
    ckpt_format._VERIFIED.clear()
    assert verify(ckpt) == "extra is not a regular file"


@pytest.mark.parametrize(("content", "why"), [
    ("[" * 5000 + "]" * 5000, "nested too deeply"),
    (None, "not a regular file but a FIFO"),
])
def test_a_manifest_that_cannot_be_read_safely_fails_verification(
        tmp_path: Path, content: str | None, why: str) -> None:
    ckpt = save_sample(CheckpointManager(tmp_path), 1)
    (ckpt / "MANIFEST.json").unlink()
    if content is None:
        os.mkfifo(ckpt / "MANIFEST.json")  # reading it blocked for ever
    else:
        (ckpt / "MANIFEST.json").write_text(content)  # RecursionError: a traceback
    ckpt_format._VERIFIED.clear()
    assert verify(ckpt) == f"MANIFEST.json is unreadable ({why})"


@pytest.mark.parametrize("name", [f"ckpt-{'9' * 5000}", f"ckpt-{2**63}", f"ckpt-{2**64 - 1}"])
def test_folder_names_beyond_a_step_are_no_checkpoints(name: str) -> None:
    # int() refused 5,000 digits with a ValueError; 2^63 broke the event files' purge
    assert ckpt_format.parse_step(name) is None
    assert ckpt_format.parse_step(f"ckpt-{2**63 - 1}") == 2**63 - 1
