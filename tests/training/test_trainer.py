"""train(): where its messages go, and the BLAS threads it leaves evaluation."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from embedlab.training import setup
from embedlab.training.trainer import train

from .small_runs import make_cfg, run_train


def test_messages_follow_the_current_stderr(corpus: Path, tmp_path: Path) -> None:
    # train()'s `out` must default to sys.stderr *at call time*: a default bound at import
    # time writes to whatever stream existed then (a closed capture, a replaced notebook stream).
    run = tmp_path / "r"
    train(make_cfg(corpus, max_steps=3), run, argv=["test"], out=io.StringIO())
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        train(make_cfg(corpus, max_steps=5), run, argv=["test"])
    assert "resuming" in buf.getvalue() and "(step 3)" in buf.getvalue()


def test_numpys_blas_runs_on_one_thread_whatever_threads(corpus: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenBLAS's sums depend on its thread count: evaluation during training (which picks the
    # best checkpoint) must give the same bits for any --threads, which a resume may change
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    seen: list[set[int]] = []

    class Spy:
        def check(self, words: object) -> None: ...

        def __call__(self, words: object, matrix: object) -> dict[str, float]:
            seen.append(blas_threads())
            return {}

    monkeypatch.setattr(setup, "make_evaluator", lambda cfg: Spy())
    with threadpool_limits(2, user_api="blas"):  # as on a 2-core machine, wherever this runs
        run_train(make_cfg(corpus, threads=2, max_steps=4, eval={"every_steps": 2}),
                  tmp_path / "run")
        assert blas_threads() == {2}  # given back afterwards
    assert seen == [{1}, {1}]
