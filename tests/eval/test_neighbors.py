from __future__ import annotations

import numpy as np
import pytest

from embedlab.eval.neighbors import nearest, suggest
from embedlab.eval.scoring import row_norms

WORDS = ["the", "of", "king", "kingdom", "kings", "queen", "King", "thing", "ring"]


def test_suggest_orders_case_then_prefix_then_spelling() -> None:
    assert suggest("KING", WORDS)[:2] == ["king", "King"]
    assert suggest("kingd", WORDS)[0] == "kingdom"  # prefix match first, then spellings
    assert "king" in suggest("kimg", WORDS)
    assert suggest("zzzzzz", WORDS) == []
    assert len(suggest("k", WORDS, n=3)) <= 3


def test_nearest_excludes_and_orders() -> None:
    m = np.array([[1, 0], [0.9, 0.1], [0, 1], [-1, 0], [0, 0]], dtype=np.float32)
    got = nearest(m, row_norms(m), m[0], 10, exclude=[0])
    assert [i for i, _ in got] == [1, 2, 4, 3] or [i for i, _ in got] == [1, 4, 2, 3]
    assert got[0][1] == pytest.approx(0.9 / np.hypot(0.9, 0.1))
    assert got[-1] == (3, pytest.approx(-1.0))  # the zero row scores 0, not NaN
    far = nearest(m, row_norms(m), m[0], 2, metric="euclidean", exclude=[0])
    assert far[0][0] == 1 and far[0][1] == pytest.approx(np.hypot(0.1, 0.1), rel=1e-5)
