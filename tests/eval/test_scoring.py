from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from embedlab.eval.scoring import analogy_scores, row_norms, top_k

EVAL_MODULES = ("embedlab.eval", "embedlab.eval.analogy", "embedlab.eval.scoring",
                "embedlab.eval.similarity", "embedlab.eval.neighbors")


def test_eval_never_imports_torch() -> None:
    # The trainer evaluates in its own process, where `import torch` alone costs ~270 MiB RSS.
    code = (f"import sys, {', '.join(EVAL_MODULES)}\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'torch')\n"
            "assert not loaded, loaded")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def _reference_order(scores: np.ndarray) -> list[int]:
    """Score descending (NaN as +inf), then index ascending: top_k's documented order."""
    key = -np.nan_to_num(scores.astype(np.float64), nan=np.inf, posinf=np.inf, neginf=-np.inf)
    return sorted(range(len(scores)), key=lambda i: (key[i], i))


# few distinct values, so that ties (also across the cut) are the rule, not the exception
VALUES = st.sampled_from([-np.inf, -1.0, 0.0, 0.5, 0.5, 2.0, np.inf, np.nan])


@given(st.lists(VALUES, min_size=1, max_size=40), st.integers(1, 40))
def test_top_k_orders_by_score_then_index(values: list[float], k: int) -> None:
    scores = np.asarray(values, dtype=np.float32)
    k = min(k, len(scores))
    assert top_k(scores, k).tolist() == _reference_order(scores)[:k]


def test_top_k_on_distinct_scores_equals_a_full_sort() -> None:
    scores = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    assert np.array_equal(top_k(scores, 25), np.argsort(-scores)[:25])


@pytest.mark.parametrize("method", ["3cosadd", "3cosmul"])
def test_analogy_scores_equal_the_float64_formula(method: str) -> None:
    rng = np.random.default_rng(1)
    m = rng.standard_normal((300, 16)).astype(np.float32)
    m[7] = 0  # a zero row scores cosine 0, not NaN
    a, b, c = np.array([1, 2]), np.array([3, 4]), np.array([5, 6])
    got = analogy_scores(m, row_norms(m), a, b, c, 250, method)  # type: ignore[arg-type]
    assert got.dtype == np.float32 and got.shape == (2, 250)

    norms = np.linalg.norm(m.astype(np.float64), axis=1)
    unit = m / np.where(norms > 0, norms, 1)[:, None]
    cos = unit[:250] @ unit.T  # 250×300: cos[x, w]
    if method == "3cosadd":
        query = unit[b] + unit[c] - unit[a]
        want = (unit[:250] @ query.T).T / np.linalg.norm(query, axis=1)[:, None]
    else:
        sa, sb, sc = ((1 + cos[:, ids].T) / 2 for ids in (a, b, c))
        want = sb * sc / (sa + 1e-6)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isfinite(got).all()


def test_low_memory_row_norms_are_the_norms_without_a_copy() -> None:
    m = np.random.default_rng(2).standard_normal((500, 37)).astype(np.float32)
    m[3] = 0
    before = m.copy()
    exact = np.linalg.norm(m.astype(np.float64), axis=1)
    for norms in (row_norms(m), row_norms(m, low_memory=True)):
        assert norms.dtype == np.float32 and norms.shape == (500,)
        np.testing.assert_allclose(norms, exact, rtol=1e-6)
        assert norms[3] == 0.0
    np.testing.assert_array_equal(m, before)
