"""word2vec's linear learning-rate decay: a pure function of progress, with a floor."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from embedlab.training.schedule import linear_lr

lrs = st.floats(min_value=1e-6, max_value=10.0)
ratios = st.floats(min_value=1e-6, max_value=1.0)
totals = st.integers(min_value=1, max_value=10**12)


def test_endpoints() -> None:
    assert linear_lr(0.025, 1e-4, 0, 1000) == 0.025
    assert math.isclose(linear_lr(0.025, 1e-4, 500, 1000), 0.0125)
    assert math.isclose(linear_lr(0.025, 1e-4, 1000, 1000), 0.025 * 1e-4)
    assert math.isclose(linear_lr(0.025, 1e-4, 5000, 1000), 0.025 * 1e-4)  # never below floor


def test_zero_total_does_not_divide_by_zero() -> None:
    assert linear_lr(0.1, 0.5, 0, 0) == 0.1


@given(lrs, ratios, totals, st.data())
def test_bounded_and_monotone(lr: float, ratio: float, total: int, data: st.DataObject) -> None:
    a = data.draw(st.integers(0, 2 * total))
    b = data.draw(st.integers(a, 2 * total + 1))
    la, lb = linear_lr(lr, ratio, a, total), linear_lr(lr, ratio, b, total)
    assert lr * ratio * (1 - 1e-12) <= lb <= la <= lr


@given(lrs, ratios, totals, st.data())
def test_linear_above_the_floor(lr: float, ratio: float, total: int,
                                data: st.DataObject) -> None:
    done = data.draw(st.integers(0, total))
    expected = lr * (1 - done / total)
    if expected > lr * ratio:
        assert math.isclose(linear_lr(lr, ratio, done, total), expected, rel_tol=1e-12)
    else:
        assert math.isclose(linear_lr(lr, ratio, done, total), lr * ratio, rel_tol=1e-12)


@given(lrs, ratios, totals, st.data())
def test_raising_the_total_never_lowers_the_rate(lr: float, ratio: float, total: int,
                                                 data: st.DataObject) -> None:
    # Raising --epochs on resume stretches the remaining decay: at the same position the rate
    # is at least the old one, and it still starts at lr.
    done = data.draw(st.integers(0, total))
    more = data.draw(st.integers(total, 4 * total))
    assert linear_lr(lr, ratio, done, more) >= linear_lr(lr, ratio, done, total)
    assert linear_lr(lr, ratio, 0, more) == lr
