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


def test_a_change_of_one_engines_arithmetic_warns_only_its_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.engines import STEP_CHANGE_ENGINES, STEP_REVISION
    from embedlab.training.setup import _warn_if_other_step_revision

    assert STEP_CHANGE_ENGINES[7] == {"cuda"}  # the slices of 16 of the cuda engine's scores
    (tmp_path / "env.json").write_text(json.dumps({"step_revision": 6}))
    for engine, warned in (("native", False), ("torch", False), ("cuda", True)):
        _warn_if_other_step_revision(tmp_path, engine)
        assert ("warning" in capsys.readouterr().err) is warned, engine
    _warn_if_other_step_revision(tmp_path, "cuda")
    assert f"revision 6, this is revision {STEP_REVISION} (the cuda engine" in \
        capsys.readouterr().err


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


@pytest.mark.parametrize("loss", ["neg", "nce", "hs"])
def test_vectors_drawn_while_a_prepared_corpus_opens_are_the_fresh_ones(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loss: str) -> None:
    # --corpus PREPARED draws the initial vectors on a thread (InitialVectors); a raw corpus
    # draws them in the engine: the same vocabulary gives the same bits either way
    from embedlab.data.preparing import prepare
    from embedlab.training import setup

    from .small_runs import final_bytes

    prepared = tmp_path / "prepared"
    prepare(corpus, prepared)
    model = {"loss": loss}
    run_train(make_cfg(corpus, model=model, max_steps=3), tmp_path / "raw")
    started = []
    start = setup._start_initial_vectors

    def spy(cfg: Any) -> Any:
        started.append(start(cfg))
        return started[-1]

    monkeypatch.setattr(setup, "_start_initial_vectors", spy)
    run_train(make_cfg(prepared, model=model, max_steps=3), tmp_path / "prepared-run")
    assert started and started[0] is not None
    assert final_bytes(tmp_path / "prepared-run") == final_bytes(tmp_path / "raw")


def test_initial_vectors_of_another_size_are_not_taken(corpus: Path) -> None:
    from embedlab.training.setup import InitialVectors

    initial = InitialVectors(make_cfg(corpus), 50)
    assert initial.tensors(51) is None
    tensors = initial.tensors(50)
    assert tensors is not None and tensors["input_embeddings"].shape == (50, 8)


def test_a_revision_warning_names_only_what_changed_for_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Hierarchical softmax draws no noise words: negative sampling's change is not its; a run
    of a newer embedlab is said to be one; Python callers are told restart=True, by an
    EmbedlabWarning at their own line."""
    from embedlab.engines import STEP_CHANGES, STEP_REVISION
    from embedlab.errors import EmbedlabWarning, messages_for
    from embedlab.training.setup import _warn_if_other_step_revision

    (tmp_path / "env.json").write_text(json.dumps({"step_revision": 4}))
    _warn_if_other_step_revision(tmp_path, "native", loss="hs")
    err = capsys.readouterr().err
    assert STEP_CHANGES[5] not in err and "negative sampling" not in err
    _warn_if_other_step_revision(tmp_path, "native", loss="neg")
    assert STEP_CHANGES[5] in capsys.readouterr().err
    (tmp_path / "env.json").write_text(json.dumps({"step_revision": STEP_REVISION + 1}))
    with messages_for("python"), pytest.warns(EmbedlabWarning) as caught:
        _warn_if_other_step_revision(tmp_path, "native")
    assert capsys.readouterr().err == ""
    assert [str(w.message) for w in caught] == [
        f"{tmp_path} was started by an embedlab with training-step revision "
        f"{STEP_REVISION + 1}, newer than this one's {STEP_REVISION}; it resumes with this "
        "revision's step, so its result will differ from an uninterrupted run of the newer "
        "version — resume it with that version, or pass restart=True for a run of one "
        "revision"]
    assert caught[0].filename == __file__
