"""config.json / env.json: content and atomic writes."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from embedlab import provenance
from embedlab.config import TrainConfig
from embedlab.errors import InputError


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
    # /work/main is a git checkout: the commit is recorded (absent is allowed elsewhere).
    git = env["git"]
    assert git is None or (len(git["commit"]) == 40 and isinstance(git["dirty"], bool))
    assert not list(tmp_path.glob(".env.json.tmp-*"))


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
