"""Setting a run up: the start of a new run, a resume by another step revision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from embedlab.engines import params as params_module
from embedlab.engines.params import init_params

from .small_runs import make_cfg, run_train, write_corpus


def test_a_resume_by_another_step_revision_warns(tmp_path: Path) -> None:
    from embedlab.engines import STEP_REVISION

    corpus = write_corpus(tmp_path / "c.txt")
    run = tmp_path / "run"
    run_train(make_cfg(corpus, max_steps=3), run)
    env = json.loads((run / "env.json").read_text())
    assert env["step_revision"] == STEP_REVISION
    _, out = run_train(make_cfg(corpus, max_steps=6), run)
    assert "warning" not in out  # same revision: silent
    del env["step_revision"]  # as written before revisions were recorded
    (run / "env.json").write_text(json.dumps(env))
    _, out = run_train(make_cfg(corpus), run)
    warnings = [line for line in out.splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert f"revision 1, this is revision {STEP_REVISION} (damping by |dL/ds|" in warnings[0]
    assert "--restart" in warnings[0]


@pytest.mark.parametrize(("model", "given", "used"), [
    ("skipgram", 0.0, 8.0), ("cbow", 0.0, 12.0), ("cbow", 3.0, 3.0)])
def test_the_start_takes_the_models_default_init_scale(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, given: float,
        used: float) -> None:
    scales: list[float] = []

    def spy(*args: Any, **kw: Any) -> Any:
        scales.append(kw["scale"])
        return init_params(*args, **kw)

    monkeypatch.setattr(params_module, "init_params", spy)
    cfg = make_cfg(corpus, model={"model": model, "init_scale": given}, max_steps=1)
    run_train(cfg, tmp_path / "run")
    assert scales == [used]
    stored = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    assert stored["model"]["init_scale"] == given  # 0 stays "the default" in the record
