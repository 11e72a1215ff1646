"""TensorBoard summary protos, built as ``torch.utils.tensorboard`` built them, so that runs
written with torch and without it read alike: scalars, histograms, text, images, hparams.

Only tensorboard's own protos are used (imported on first use): neither torch nor TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.config import flatten

if TYPE_CHECKING:
    from tensorboard.compat.proto.summary_pb2 import Summary

HIST_BINS = 60


def scalar_summary(tag: str, value: float) -> Summary:
    """A scalar in the ``simple_value`` field, as ``SummaryWriter.add_scalar`` wrote it."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    return Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])


def histogram_summary(tag: str, values: np.ndarray, threads: int = 1) -> Summary:
    """A histogram of ``values`` (any shape): ``HIST_BINS`` equal buckets from min to max, each
    bucket's limit its upper edge, sums in float64 (``add_histogram_raw``'s layout). Large
    float32 arrays are counted by the native library on ``threads`` threads
    (:func:`native_statistics`), others by NumPy: the same buckets either way."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    flat = values.reshape(-1)
    stats = native_statistics(flat, HIST_BINS, threads)
    if stats is not None:
        lo, hi, counts, total, squares = stats
        edges = np.linspace(lo, hi, HIST_BINS + 1)
    else:
        lo, hi = float(flat.min()), float(flat.max())
        if hi > lo:
            # Not TensorBoard's default ~1,500 exponential buckets: on a text8-sized matrix
            # they alone would cost more than the whole budget of the summaries.
            edges = np.linspace(lo, hi, HIST_BINS + 1)
            counts = equal_width_counts(flat, lo, hi, HIST_BINS)
        else:  # one value everywhere (an untouched matrix): all of it in the first bucket
            hi = lo + 1e-6  # np.histogram cannot split so narrow a float32 range away from 0
            counts = np.zeros(HIST_BINS, dtype=np.int64)
            counts[0] = flat.size
            edges = np.linspace(lo, hi, HIST_BINS + 1)
        total, squares = float64_moments(flat)
    histo = HistogramProto(min=lo, max=hi, num=flat.size, sum=total, sum_squares=squares,
                           bucket_limit=edges[1:].tolist(), bucket=counts.tolist())
    return Summary(value=[Summary.Value(tag=tag, histo=histo)])


#: float32 arrays from this many values have their histogram counted natively even if the
#: native library must be compiled first (a few seconds, once per machine: its cache outlives
#: the process; a build that fails is not tried again in the process); smaller ones only when
#: the process has loaded it already (NumPy takes ~0.2 s for a 213k × 100 matrix, ~2.7 s for
#: 1M × 300 on the 2-core machine)
NATIVE_VALUES = 50_000_000


def native_statistics(flat: np.ndarray, bins: int, threads: int = 1
                      ) -> tuple[float, float, np.ndarray, float, float] | None:
    """Min, max, the counts of ``bins`` equal buckets and the float64 sum and sum of squares of
    a 1-D float32 array, in two passes of the native library (``_stats.c``) on ``threads``
    threads; None where NumPy's path must answer: the library is not built (or ``flat`` too
    small to build it for), ``flat`` is not contiguous float32, holds NaN or ±inf, or spans
    one value or a range :func:`float32_span` refuses.

    The counts are :func:`equal_width_counts`'s (the same float32 arithmetic); the sums are
    added in another order than :func:`float64_moments`' and may differ from them in the last
    bits, the same for any ``threads``."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    if flat.dtype != np.float32 or flat.ndim != 1 or not flat.flags.c_contiguous or not flat.size:
        return None
    from embedlab.engines.native import library_if, openmp_threads

    lib = library_if(flat.size >= NATIVE_VALUES)
    if lib is None:
        return None
    threads = openmp_threads(threads)
    bounds, bad = np.empty(2, dtype=np.float32), np.zeros(1, dtype=np.int64)
    lib.st_min_max(flat.ctypes.data, flat.size, threads, bounds.ctypes.data, bad.ctypes.data)
    lo, hi = float(bounds[0]), float(bounds[1])
    if bad[0] or not hi > lo or not float32_span(lo, hi, bins):
        return None
    counts, moments = np.zeros(bins, dtype=np.int64), np.zeros(2, dtype=np.float64)
    if lib.st_counts_moments(flat.ctypes.data, flat.size, float(np.float32(lo)),
                             float(np.float32(bins / (hi - lo))), bins, threads,
                             counts.ctypes.data, moments.ctypes.data) != 0:
        return None  # no memory for the per-block sums
    return lo, hi, counts, float(moments[0]), float(moments[1])


def equal_width_counts(flat: np.ndarray, lo: float, hi: float, bins: int,
                       block: int = 1 << 16) -> np.ndarray:
    """How many of ``flat``'s values (all within [lo, hi], hi > lo) fall in each of ``bins``
    equal buckets, the last one closed.

    Bucket ⌊(x − lo)·bins/(hi − lo)⌋ in float32, block by block (64k values, into buffers
    allocated once: no copy of the matrix). A value within float32 rounding of an edge may
    land on either side of it, as in ``torch.histc``; ``np.histogram``, which places edges
    exactly in float64, took three times as long (0.12–0.15 s against 0.045 s for 21M values,
    a 213k × 100 matrix, on the 2-core machine)."""
    wide = bins / (hi - lo)
    if not float32_span(lo, hi, bins):
        if not wide < 1e30:  # too narrow: np.histogram's arithmetic
            return np.histogram(flat, bins=bins, range=(lo, hi))[0]
        # too wide for float32 (hi − lo overflows): in float64, a copy (no embedding does this)
        return np.histogram(flat.astype(np.float64), bins=bins, range=(lo, hi))[0]
    scale, origin = np.float32(wide), np.float32(lo)
    counts = np.zeros(bins, dtype=np.int64)
    f_buf = np.empty(min(block, flat.size), dtype=np.float32)
    i_buf = np.empty(min(block, flat.size), dtype=np.intp)
    for start in range(0, flat.size, block):
        part = flat[start:start + block]
        f, i = f_buf[:part.size], i_buf[:part.size]
        np.subtract(part, origin, out=f)  # >= 0: part >= lo, and rounding keeps it so
        np.multiply(f, scale, out=f)
        np.copyto(i, f, casting="unsafe")  # truncation: the bucket
        np.minimum(i, bins - 1, out=i)  # hi itself, and what rounding put past it
        counts += np.bincount(i, minlength=bins)
    return counts


def float32_span(lo: float, hi: float, bins: int) -> bool:
    """Whether float32 arithmetic can place values in ``bins`` buckets from ``lo`` to ``hi``
    (hi > lo): the span neither too narrow (bins / (hi − lo) past 1e30) nor too wide (hi − lo
    past float32's largest value, as with −3e38 and 3e38)."""
    with np.errstate(over="ignore"):
        return bool(bins / (hi - lo) < 1e30 and np.isfinite(np.float32(hi) - np.float32(lo)))


def float64_moments(values: np.ndarray, chunk: int = 1 << 16) -> tuple[float, float]:
    """Sum and sum of squares of a float32 array, accumulated in float64.

    Chunk by chunk: a float64 copy of a whole embedding matrix (and of its square) would add
    twice its size again to the run's peak memory. The chunks are small (512 KiB as float64):
    large ones, two alive at once, would raise the peak by their size, and the allocator may
    serve them from the top of the heap, which then keeps growing.
    """
    flat = values.reshape(-1)
    total = squares = 0.0
    for start in range(0, flat.size, chunk):
        part = flat[start:start + chunk].astype(np.float64)
        total += float(part.sum())
        squares += float(part @ part)
    return total, squares


def text_summary(tag: str, text: str) -> Summary:
    """Markdown text under ``<tag>/text_summary``: torch's add_text appended the suffix, and
    the runs it wrote show their text under that tag."""
    from tensorboard.plugins.text.summary_v2 import text_pb

    return text_pb(f"{tag}/text_summary", [text])


def png_summary(tag: str, fig: Any) -> Summary:
    """An image Summary holding ``fig`` as a PNG rendered by matplotlib; closes nothing.

    Words in scripts the font lacks (日本 with matplotlib's DejaVu Sans) are drawn as boxes;
    matplotlib's warning for each missing glyph is not printed, since training has nothing to do
    about it and would repeat it at every image."""
    import io
    import warnings

    from tensorboard.compat.proto.summary_pb2 import Summary

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        fig.savefig(buf, format="png")
    width, height = fig.canvas.get_width_height()
    image = Summary.Image(height=height, width=width, colorspace=4,
                          encoded_image_string=buf.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=image)])


def hparam_values(hparams: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """Flatten a (nested) config dict into values the hparams plugin accepts."""
    out: dict[str, bool | int | float | str] = {}
    for k, v in flatten(dict(hparams)).items():
        if isinstance(v, (bool, int, float)):
            out[k] = v
        elif v is None:
            out[k] = "none"
        else:
            text = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
            # A path that is not UTF-8 (a --corpus folder named with other bytes) arrives with
            # lone surrogates, which the protobuf writer cannot encode, at the end of a run
            # that has trained to the last step. Shown as \xNN escapes instead.
            out[k] = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return out


def hparams_summaries(values: Mapping[str, bool | int | float | str]) -> tuple[Summary, Summary]:
    """The hparams plugin's start (``values``) and end (success) summaries of a run.

    As torch's ``summary.hparams`` built them (tensorboard's own ``hparams.summary`` needs
    TensorFlow): numbers and booleans as ``number_value`` (a boolean shows as 1 or 0), the rest
    as ``string_value``.
    """
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    start = plugin_data_pb2.SessionStartInfo()
    for name, value in values.items():
        if isinstance(value, str):
            start.hparams[name].string_value = value
        else:
            start.hparams[name].number_value = value
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)
    return (_hparams_summary(metadata.SESSION_START_INFO_TAG,
                             plugin_data_pb2.HParamsPluginData(session_start_info=start)),
            _hparams_summary(metadata.SESSION_END_INFO_TAG,
                             plugin_data_pb2.HParamsPluginData(session_end_info=end)))


def _hparams_summary(tag: str, data: Any) -> Summary:
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import metadata

    return Summary(value=[Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data))])
