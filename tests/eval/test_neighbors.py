from __future__ import annotations

import math

import numpy as np
import pytest

from embedlab.eval.neighbors import nearest, nearest_to_rows, suggest
from embedlab.eval.scoring import row_norms

WORDS = ["the", "of", "king", "kingdom", "kings", "queen", "King", "thing", "ring"]


def test_suggest_orders_case_then_prefix_then_spelling() -> None:
    assert suggest("KING", WORDS)[:2] == ["king", "King"]
    assert suggest("kingd", WORDS)[0] == "kingdom"  # prefix match first, then spellings
    assert "king" in suggest("kimg", WORDS)
    assert suggest("zzzzzz", WORDS) == []
    assert len(suggest("k", WORDS, n=3)) <= 3


def test_suggest_puts_the_fewest_edits_first() -> None:
    """Two letters swapped is one edit, and keeps the word's letters: kign is king first."""
    assert suggest("kign", ["the", "kin", "krin", "king", "of"])[0] == "king"
    assert suggest("qeuen", ["the", "queens", "queue", "queen"])[0] == "queen"


def test_suggest_spells_in_lower_case() -> None:
    """A capitalised typo finds the spellings its lower case finds, each by one case variant:
    the one cased as the typo, else the most frequent."""
    assert suggest("Kimg", WORDS)[0] == "King" and "king" not in suggest("Kimg", WORDS)
    assert suggest("kimg", WORDS)[0] == "king" and "King" not in suggest("kimg", WORDS)
    assert suggest("Qeen", WORDS) == ["queen"]  # no Queen: the most frequent variant
    assert [w.lower() for w in suggest("Kimg", WORDS)] == suggest("kimg", WORDS)
    # the exact-case word is not hidden behind a more frequent variant
    assert suggest("kinq", ["the", "King", "of", "king", "KING"]) == ["king"]
    assert suggest("KINQ", ["the", "King", "of", "king", "KING"]) == ["KING"]


def test_nearest_excludes_and_orders() -> None:
    m = np.array([[1, 0], [0.9, 0.1], [0, 1], [-1, 0], [0, 0]], dtype=np.float32)
    got = nearest(m, row_norms(m), m[0], 10, exclude=[0])
    assert [i for i, _ in got] == [1, 2, 4, 3] or [i for i, _ in got] == [1, 4, 2, 3]
    assert got[0][1] == pytest.approx(0.9 / np.hypot(0.9, 0.1))
    assert got[-1] == (3, pytest.approx(-1.0))  # the zero row scores 0, not NaN
    far = nearest(m, row_norms(m), m[0], 2, metric="euclidean", exclude=[0])
    assert far[0][0] == 1 and far[0][1] == pytest.approx(np.hypot(0.1, 0.1), rel=1e-5)


def test_nearest_to_rows_are_cosine_neighbours_with_zero_rows() -> None:
    # computed without a normalised copy of the matrix: same result as normalising first,
    # and a zero row (a word never trained) is similarity 0 to everything, not NaN
    w = np.random.default_rng(3).standard_normal((300, 8), dtype=np.float32)
    w[7] = 0.0
    before = w.copy()
    ids = [0, 7, 42]
    got = nearest_to_rows(w, row_norms(w, low_memory=True), ids, k=5)
    unit = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-12)
    sims = unit[ids] @ unit.T
    for row, i in enumerate(ids):
        sims[row, i] = -math.inf
        want = np.argsort(-sims[row], kind="stable")[:5]
        assert [j for j, _ in got[row]] == want.tolist() or i == 7
        assert [s for _, s in got[row]] == pytest.approx(sims[row, want].tolist(), abs=1e-6)
    assert all(math.isfinite(s) for row in got for _, s in row)
    assert [s for _, s in got[1]] == [0.0] * 5
    np.testing.assert_array_equal(w, before)  # the trainer's matrix is only read


def test_nearest_to_rows_of_a_tiny_vocabulary() -> None:
    w = np.eye(3, dtype=np.float32)
    norms = row_norms(w)
    assert [[j for j, _ in row] for row in nearest_to_rows(w, norms, [0, 2], k=8)] == [[1, 2],
                                                                                      [0, 1]]
    assert nearest_to_rows(w, norms, [0], k=0) == [[]]
