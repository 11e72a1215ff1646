"""Summary protos: the bytes and layouts torch.utils.tensorboard wrote (no torch needed to write
them; the comparisons with torch's run where torch is installed)."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from embedlab.track.protos import (
    equal_width_counts,
    float32_span,
    float64_moments,
    histogram_summary,
    hparam_values,
    hparams_summaries,
    native_statistics,
    scalar_summary,
    text_summary,
)

from .fakerun import make_config


def test_scalar_text_and_hparams_summaries_are_torchs_bytes() -> None:
    ts = pytest.importorskip("torch.utils.tensorboard.summary")
    assert scalar_summary("train/lr", 0.025) == ts.scalar("train/lr", 0.025)
    text = "| word | nearest |\n|---|---|\n| **king** | queen (0.91) — é |"
    assert text_summary("neighbours", text).SerializeToString() == \
        ts.text("neighbours", text).SerializeToString()
    values = hparam_values({**make_config().to_dict(), "flag": True, "missing": None})
    _, start, end = ts.hparams(values, {"final/loss": 1.0})
    assert [_hparams_content(s) for s in hparams_summaries(values)] == \
        [_hparams_content(start), _hparams_content(end)]


def _hparams_content(summary: Any) -> tuple[str, Any, Any]:
    """Tag, metadata and parsed plugin data: the bytes of a map's entries come in no set order."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    (value,) = summary.value
    content = value.metadata.plugin_data.content
    value.metadata.plugin_data.content = b""
    return value.tag, value.metadata, plugin_data_pb2.HParamsPluginData.FromString(content)


def test_histogram_has_torchs_layout_and_buckets() -> None:
    torch = pytest.importorskip("torch")
    ts = pytest.importorskip("torch.utils.tensorboard.summary")
    w = np.random.default_rng(5).standard_normal((3000, 16), dtype=np.float32)
    (got,) = histogram_summary("embeddings/input", w).value
    t = torch.from_numpy(w).reshape(-1)
    lo, hi = float(t.min()), float(t.max())
    total, squares = float64_moments(w)
    (want,) = ts.histogram_raw("embeddings/input", lo, hi, t.numel(), total, squares,
                               torch.linspace(lo, hi, 61)[1:].tolist(),
                               torch.histc(t, bins=60, min=lo, max=hi).tolist()).value
    assert got.tag == want.tag
    g, h = got.histo, want.histo
    assert (g.min, g.max, g.num) == (h.min, h.max, h.num)
    # the native library's sums (where this process has loaded it) are added in another order
    assert (g.sum, g.sum_squares) == pytest.approx((h.sum, h.sum_squares), rel=1e-12)
    assert len(g.bucket) == len(h.bucket) == 60 and sum(g.bucket) == g.num
    assert g.bucket_limit[-1] == pytest.approx(hi, rel=1e-6)
    np.testing.assert_allclose(g.bucket_limit, h.bucket_limit, rtol=1e-6, atol=1e-6)
    # values at a bucket edge may land on either side of it, float32 rounding apart
    assert np.abs(np.subtract(g.bucket, h.bucket)).max() <= 1


@settings(max_examples=40, deadline=None)
@given(st.floats(-50, 50, width=32), st.floats(0.125, 100, width=32),
       st.lists(st.integers(0, 59), min_size=1, max_size=400), st.integers(1, 64))
def test_equal_width_counts_put_each_value_in_its_bucket(lo: float, span: float,
                                                         buckets: list[int], block: int) -> None:
    """Values at the middle of their buckets (and the ends, min and max) land where
    np.histogram puts them, block by block as at once."""
    hi = float(np.float32(lo + span))
    width = (hi - lo) / 60
    values = np.array([lo + (k + 0.5) * width for k in buckets] + [lo, hi], dtype=np.float32)
    lo, hi = float(values.min()), float(values.max())
    got = equal_width_counts(values, lo, hi, 60, block=block)
    want, _ = np.histogram(values, bins=60, range=(lo, hi))
    assert got.tolist() == want.tolist() and got.sum() == values.size


def test_equal_width_counts_of_a_span_too_narrow_for_float32() -> None:
    values = np.array([1e-39, 2e-39, 3e-39], dtype=np.float32)
    got = equal_width_counts(values, float(values.min()), float(values.max()), 60)
    assert got.sum() == 3 and got[0] == 1 and got[-1] == 1


@pytest.mark.parametrize("value", [0.0, -3.5, 100.0])
def test_histogram_of_one_value_everywhere(value: float) -> None:
    # an untouched matrix (output embeddings start at zero) has max == min
    w = np.full((50, 4), value, dtype=np.float32)
    (got,) = histogram_summary("embeddings/output", w).value
    h = got.histo
    assert (h.min, h.num, h.sum) == (value, 200, 200 * value)
    assert h.max > h.min and sum(h.bucket) == 200 and max(h.bucket) == 200
    assert list(h.bucket_limit) == sorted(h.bucket_limit)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=0, max_size=300), st.integers(1, 64))
def test_float64_moments_are_exact_sums_of_the_float32_values(values: list[float],
                                                              chunk: int) -> None:
    a = np.array(values, dtype=np.float32)
    total, squares = float64_moments(a, chunk=chunk)
    exact = [float(v) for v in a]  # float32 values, summed exactly in Python floats
    assert total == pytest.approx(math.fsum(exact), rel=1e-12, abs=1e-9)
    assert squares == pytest.approx(math.fsum(v * v for v in exact), rel=1e-12, abs=1e-9)


# ---- the native library's statistics --------------------------------------------------------
def _native() -> None:
    from embedlab.engines import native

    reason = native.unavailable_reason()  # loads it: native_statistics then uses it
    if reason is not None:
        pytest.skip(reason)


@settings(max_examples=80, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 3000),
                  elements=st.floats(-1e6, 1e6, width=32)
                  | st.floats(width=32, allow_nan=False, allow_infinity=False)
                  | st.sampled_from([0.0, -0.0, 1e-40, 3e38, -3e38])),
       st.integers(1, 3))
def test_native_statistics_count_as_numpy_does(values: np.ndarray, threads: int) -> None:
    """The same min, max and buckets as NumPy's path (the same float32 arithmetic, values on
    the edges included), sums within float64 rounding of the exact ones."""
    _native()
    got = native_statistics(values, 60, threads)
    lo, hi = float(values.min()), float(values.max())
    if not hi > lo or not float32_span(lo, hi, 60):
        assert got is None  # NumPy's path: one value, or a span float32 cannot divide
        return
    assert got is not None
    g_lo, g_hi, counts, total, squares = got
    assert (g_lo, g_hi) == (lo, hi)
    assert counts.tolist() == equal_width_counts(values, lo, hi, 60).tolist()
    exact = [float(v) for v in values]
    assert total == pytest.approx(math.fsum(exact), rel=1e-12, abs=1e-6)
    assert squares == pytest.approx(math.fsum(v * v for v in exact), rel=1e-12, abs=1e-6)


def test_a_span_wider_than_float32_holds_is_counted_in_float64() -> None:
    _native()
    values = np.array([-3e38, 0.0, 1.0, 3e38] * 1000, dtype=np.float32)
    assert native_statistics(values, 60, 2) is None
    lo, hi = float(values.min()), float(values.max())
    counts = equal_width_counts(values, lo, hi, 60)
    want = np.histogram(values.astype(np.float64), bins=60, range=(lo, hi))[0]
    assert counts.tolist() == want.tolist()
    (got,) = histogram_summary("embeddings/input", values.reshape(100, 40), threads=2).value
    assert sum(got.histo.bucket) == 4000 and got.histo.bucket[0] == got.histo.bucket[-1] == 1000


def test_native_statistics_want_a_bucket() -> None:
    with pytest.raises(ValueError, match="bins must be at least 1, got 0"):
        native_statistics(np.ones(10, dtype=np.float32), 0)


def test_native_statistics_are_the_same_bits_on_any_threads() -> None:
    _native()
    # several blocks of 65,536 values and a short one
    values = np.random.default_rng(3).standard_normal(300_001).astype(np.float32) * 7 + 2
    runs = [native_statistics(values, 60, threads) for threads in (1, 2, 3, 8)]
    assert runs[0] is not None
    for run in runs[1:]:
        assert run is not None
        assert run[:2] == runs[0][:2] and run[3:] == runs[0][3:]
        assert run[2].tolist() == runs[0][2].tolist()
    assert runs[0][2].sum() == values.size


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_native_statistics_leave_values_that_are_not_finite_to_numpy(bad: float) -> None:
    _native()
    values = np.linspace(-1, 1, 200_000, dtype=np.float32)
    values[123_457] = bad
    assert native_statistics(values, 60, 2) is None  # NumPy's min and max say NaN and ±inf


def test_native_statistics_take_only_contiguous_float32() -> None:
    _native()
    w = np.random.default_rng(1).standard_normal((100, 8)).astype(np.float32)
    assert native_statistics(w.reshape(-1), 60) is not None
    assert native_statistics(w[:, ::2].reshape(-1)[::2], 60) is None
    assert native_statistics(w.astype(np.float64).reshape(-1), 60) is None
    assert native_statistics(w, 60) is None  # 2-D: histogram_summary flattens first
    assert native_statistics(np.zeros(0, dtype=np.float32), 60) is None


def test_histogram_summary_is_the_same_with_and_without_the_native_library(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from embedlab.track import protos

    _native()
    w = np.random.default_rng(9).standard_normal((4000, 30), dtype=np.float32)
    (fast,) = histogram_summary("embeddings/input", w, threads=2).value
    monkeypatch.setattr(protos, "native_statistics", lambda *a, **k: None)
    (slow,) = histogram_summary("embeddings/input", w).value
    f, s = fast.histo, slow.histo
    assert (f.min, f.max, f.num, list(f.bucket), list(f.bucket_limit)) == \
        (s.min, s.max, s.num, list(s.bucket), list(s.bucket_limit))
    assert (f.sum, f.sum_squares) == pytest.approx((s.sum, s.sum_squares), rel=1e-12)


def test_hparam_values_flattens_to_plain_types() -> None:
    out = hparam_values({"a": {"b": None, "c": [1, 2]}, "d": 1.5, "e": True})
    assert out == {"a.b": "none", "a.c": "1,2", "d": 1.5, "e": True}


def test_hparams_of_a_path_that_is_not_utf8_can_be_written() -> None:
    # a --corpus folder named with the byte 0xfe: a UnicodeEncodeError here would come in the
    # final summaries, after the whole run has trained
    corpus = os.fsdecode(b"/data/d\xfe")
    out = hparam_values({"data": {"corpus": corpus}, "dim": 8})
    assert out == {"data.corpus": "/data/d\\xfe", "dim": 8}
    for summary in hparams_summaries(out):
        summary.SerializeToString()
