"""metrics.jsonl: round trip, truncation on resume, non-finite values, torn lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.track.jsonl import METRICS_FILE, JsonlSink, read_metrics, truncate_metrics

from .fakerun import TRAIN_TAGS

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.dictionaries(
    st.sampled_from(TRAIN_TAGS), finite, min_size=1)), max_size=20), st.integers(0, 10_000))
def test_jsonl_round_trip_and_truncate(tmp_path_factory: pytest.TempPathFactory,
                                       rows: list[tuple[int, dict[str, float]]],
                                       resume: int) -> None:
    run = tmp_path_factory.mktemp("run")
    sink = JsonlSink(run)
    for step, values in rows:
        sink.log_scalars(step, values)
    sink.close()
    path = run / METRICS_FILE
    expected = [{"step": s, **v} for s, v in rows]
    assert read_metrics(path) == expected
    truncate_metrics(path, resume)
    assert read_metrics(path) == [r for r in expected if r["step"] <= resume]


def test_jsonl_keeps_non_finite_values_as_strings_and_skips_torn_lines(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path)
    sink.log_scalars(1, {"train/loss": math.nan, "train/lr": math.inf})
    sink.close()
    with (tmp_path / METRICS_FILE).open("a") as f:
        f.write('{"step": 2, "train/lo')  # a SIGKILL in the middle of a write
    assert read_metrics(tmp_path / METRICS_FILE) == [
        {"step": 1, "train/loss": "nan", "train/lr": "inf"}]
    lines = (tmp_path / METRICS_FILE).read_text().splitlines()
    json.loads(lines[0])  # still strict JSON


def test_damaged_lines_dropped_at_a_resume_are_said_and_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torn last line after the resumed step is a kill mid-write, dropped without a word;
    other lines that are no metrics rows (edited by hand, bytes of another file, a row the
    checkpoint covers cut short) are said, and the file as it was is kept beside the rewrite."""
    path = tmp_path / METRICS_FILE
    path.write_text('{"step": 1, "train/loss": 2.0}\n{"step": 6, "train/lo')
    truncate_metrics(path, 5)
    assert capsys.readouterr().err == "" and not list(tmp_path.glob("metrics.jsonl.damaged*"))
    # the row of step 5 was complete before checkpoint 5 was: cut short since, it is damage
    path.write_text('{"step": 1, "train/loss": 2.0}\n{"step": 5, "train/lo')
    truncate_metrics(path, 5)
    assert "has 1 line(s) that are not metrics rows (the first is line 2)" in \
        capsys.readouterr().err
    for copy in tmp_path.glob("metrics.jsonl.damaged*"):
        copy.unlink()
    path.write_text('{"step": 1, "train/loss": 2.0}\n\n')  # a blank line: nothing to lose
    truncate_metrics(path, 5)
    assert capsys.readouterr().err == ""
    before = b'{"step": 1, "train/loss": 2.0}\ngarb\xffage\n[3]\n{"step": 2, "train/loss": 1.0}\n'
    path.write_bytes(before)
    truncate_metrics(path, 5)
    assert read_metrics(path) == [{"step": 1, "train/loss": 2.0}, {"step": 2, "train/loss": 1.0}]
    (copy,) = tmp_path.glob("metrics.jsonl.damaged-*")
    assert copy.read_bytes() == before  # byte for byte
    assert capsys.readouterr().err == (
        f"embedlab: warning: {path} has 2 line(s) that are not metrics rows (the first is line "
        f"2); the rewrite at this resume drops them, and the file as it was is kept in "
        f"{copy}\n")


def test_a_full_disk_names_metrics_jsonl(tmp_path: Path) -> None:
    import errno

    sink = JsonlSink(tmp_path)

    class Full:
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self) -> None: ...

    real, sink._f = sink._f, Full()  # type: ignore[assignment]
    with pytest.raises(OSError) as failed:
        sink.log_scalars(1, {"train/loss": 1.0})
    assert failed.value.filename == str(tmp_path / METRICS_FILE)
    real.close()
