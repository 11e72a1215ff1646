"""config.json / env.json: content and atomic writes."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from embedlab.config import TrainConfig
from embedlab.errors import InputError
from embedlab.run import provenance


def test_env_json_content(tmp_path: Path) -> None:
    path = provenance.write_env_json(tmp_path, argv=["embedlab", "train", "--seed", "3"],
                                     threads=2, seed=3, streams=["init", "shuffle"])
    env = json.loads(path.read_text())
    assert env["argv"] == ["embedlab", "train", "--seed", "3"]
    assert env["threads"] == 2 and env["seed"] == 3 and env["streams"] == ["init", "shuffle"]
    for pkg in ("embedlab", "torch", "numpy", "safetensors", "tensorboard"):
        assert pkg in env["packages"]
    assert env["packages"]["torch"].startswith("2.")
    assert env["python"] == platform.python_version()
    assert env["platform"] and env["cpu"] and env["cpu_count"] >= 1
    assert not list(tmp_path.glob(".env.json.tmp-*"))
    # env["git"]: test_env_json_records_the_git_commit


def _git_state(where: Path) -> dict[str, object] | None:
    """What git itself says of the checkout holding ``where`` (None: not one, or no git)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(where), *args], capture_output=True,
                                  text=True, timeout=30, check=False)
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else status != ""}


def test_env_json_records_the_git_commit(tmp_path: Path) -> None:
    # A run trained from a git checkout records the package's commit and whether tracked files
    # were modified, so its result can be traced to the code. Read before and after the write:
    # a commit or an edit elsewhere in the checkout may land in between.
    source = Path(provenance.__file__).resolve().parent
    before = _git_state(source)
    path = provenance.write_env_json(tmp_path, argv=["x"], threads=1, seed=1, streams=[])
    after = _git_state(source)
    recorded = json.loads(path.read_text())["git"]
    if before is None and after is None:
        assert recorded is None
        pytest.skip(f"{source} is not in a git checkout (a tarball or wheel): no commit to check")
    # git_commit gives `git status` 2 s; on a loaded machine it may record "dirty": None (not
    # known) where this reading, allowed 30 s, knows: the commit must match all the same
    known = [state for state in (before, after) if state is not None]
    assert recorded is not None and recorded["commit"] in {k["commit"] for k in known}
    assert recorded["dirty"] is None or recorded in known


def test_env_json_appends_resumes(tmp_path: Path) -> None:
    provenance.write_env_json(tmp_path, argv=["a"], threads=1, seed=1, streams=[])
    provenance.write_env_json(tmp_path, argv=["b"], threads=2, seed=1, streams=[])
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["argv"] == ["a"] and [r["argv"] for r in env["resumes"]] == [["b"]]


def test_git_commit_outside_checkout(tmp_path: Path) -> None:
    assert provenance.git_commit(tmp_path) is None


def test_config_json_round_trip(tmp_path: Path) -> None:
    cfg = TrainConfig().resolve()
    provenance.write_config_json(tmp_path, cfg)
    stored = provenance.read_config_json(tmp_path)
    assert stored == cfg.to_dict() and TrainConfig.from_dict(stored) == cfg
    assert stored["checkpoint"]["keep"] == 5  # every default is spelled out


@given(st.dictionaries(st.text(max_size=6), st.integers() | st.text() | st.floats(allow_nan=False)
                       | st.booleans() | st.none(), max_size=6))
def test_property_config_mapping_round_trip(d: dict[str, object]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        provenance.write_config_json(tmp, d)
        assert provenance.read_config_json(tmp) == d


def test_read_config_errors(tmp_path: Path) -> None:
    assert provenance.read_config_json(tmp_path) is None
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(InputError, match="not a JSON object"):
        provenance.read_config_json(tmp_path)
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(InputError, match="unreadable"):
        provenance.read_config_json(tmp_path)


def _env(run: Path) -> None:
    provenance.write_env_json(run, argv=["embedlab"], threads=1, seed=1, streams=["init"])


def test_env_json_records_the_device_the_engine_trains_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.engines import cuda

    monkeypatch.setattr(cuda, "device_name", lambda: "NVIDIA H100 80GB HBM3")
    assert provenance.recorded_device(tmp_path) is None  # no env.json
    _env(tmp_path)  # no config.json (linreg's has no engine either): the CPU
    assert provenance.recorded_device(tmp_path) == "cpu"
    provenance.write_config_json(tmp_path, TrainConfig(engine="cuda"))
    _env(tmp_path)  # a resume on the GPU: the newest record counts
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["device"] == "cpu" and env["resumes"][-1]["device"] == "NVIDIA H100 80GB HBM3"
    assert provenance.recorded_device(tmp_path) == "NVIDIA H100 80GB HBM3"
    provenance.write_config_json(tmp_path, TrainConfig(engine="native"))
    _env(tmp_path)
    assert provenance.recorded_device(tmp_path) == "cpu"


def test_an_env_json_from_before_devices_reads_as_the_cpu(tmp_path: Path) -> None:
    (tmp_path / "env.json").write_text(json.dumps({"threads": 2, "step_revision": 6}))
    assert provenance.recorded_device(tmp_path) == "cpu"
    (tmp_path / "env.json").write_text(json.dumps({"threads": 2, "resumes": [{"threads": 1}]}))
    assert provenance.recorded_device(tmp_path) == "cpu"
    (tmp_path / "env.json").write_text("[1]")
    assert provenance.recorded_device(tmp_path) is None


@pytest.mark.parametrize("resumes", [None, 5, "x", {"a": 1}, [3, None]])
def test_an_edited_resumes_entry_is_read_and_written_past(tmp_path: Path, resumes: object
                                                          ) -> None:
    """``"resumes": null`` (or any other non-list) in env.json reads as no resumes, and the next
    start writes a list in its place."""
    (tmp_path / "env.json").write_text(json.dumps(
        {"step_revision": 7, "kernel": {"id": "a"}, "device": "cpu", "resumes": resumes}))
    assert provenance.last_kernel(tmp_path) == {"id": "a"}
    assert provenance.recorded_device(tmp_path) == "cpu"
    provenance.write_env_json(tmp_path, argv=["x"], threads=1, seed=1, streams=["init"],
                              kernel={"id": "b"})
    env = json.loads((tmp_path / "env.json").read_text())
    assert isinstance(env["resumes"], list) and env["resumes"][-1]["kernel"] == {"id": "b"}
    assert provenance.last_kernel(tmp_path) == {"id": "b"}


def test_argv_is_recorded_as_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    """python -m embedlab (and torchrun's -m embedlab) leave the path of __main__.py in argv,
    which runs nothing as written."""
    main = os.path.join("/x", "site-packages", "embedlab", "__main__.py")
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert provenance.as_typed(["embedlab", "train"]) == ["embedlab", "train"]
    assert provenance.as_typed([main, "train", "--run", "r"]) == [
        "python", "-m", "embedlab", "train", "--run", "r"]
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert provenance.as_typed([main, "train"]) == [
        "torchrun", "--nproc-per-node", "2", "-m", "embedlab", "--", "train"]
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert provenance.as_typed([main, "train"])[:5] == [
        "torchrun", "--nnodes", "4", "--nproc-per-node", "2"]
