"""What the loop reports: words/s over training time only, across the writers' opening and
resumes (on a clock that only training steps advance)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .small_runs import Clock, logged, make_cfg, run_train


def _slow_writers(monkeypatch: pytest.MonkeyPatch, clock: Clock, seconds: float) -> None:
    """Opening the writers takes ``seconds`` on the trainer's clock (like a resume rewriting
    large event files)."""
    import embedlab.track.tracker as summaries

    real = summaries.open_tracker

    def slow(*args: Any, **kwargs: Any) -> Any:
        clock.now += seconds
        return real(*args, **kwargs)

    monkeypatch.setattr(summaries, "open_tracker", slow)


def test_words_per_second_counts_training_time_only(
        corpus: Path, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first window's clock starts once the model is built and the writers are open: a
    # clock started before them makes the first words/s a fraction of the rest (40k and 200k)
    _slow_writers(monkeypatch, clock, 100.0)
    cfg = make_cfg(corpus, track={"log_every": 5})
    run_train(cfg, tmp_path / "run")
    rates = list(logged(tmp_path / "run", "train/words_per_sec").values())
    assert len(rates) > 4
    assert rates[0] == pytest.approx(float(np.median(rates[1:-1])), rel=0.5)


def test_a_resumed_window_keeps_its_earlier_seconds(
        corpus: Path, tmp_path: Path, clock: Clock) -> None:
    # A checkpoint inside a logging window (step 7 of 5..10): the resumed window holds words of
    # steps 6-7, trained by the first process; over the new process's seconds alone its rate
    # came out 5/3 too high. Steps take 1 s on this clock, so the rates must agree exactly.
    cfg = make_cfg(corpus, track={"log_every": 5})
    run_train(cfg, tmp_path / "ref")
    run_train(make_cfg(corpus, track={"log_every": 5}, max_steps=7), tmp_path / "cut")
    run_train(cfg, tmp_path / "cut")
    want = logged(tmp_path / "ref", "train/words_per_sec")
    got = logged(tmp_path / "cut", "train/words_per_sec")
    assert got.keys() == want.keys() and 10 in got
    assert got[10] == pytest.approx(want[10], rel=1e-9)


@pytest.mark.parametrize(("every", "expect_all"), [(0.0, True), (1e9, False)])
def test_the_running_status_is_rewritten_at_most_as_often_as_allowed(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every: float,
        expect_all: bool) -> None:
    import json

    from embedlab.run import status
    from embedlab.training.reporting import Reporter

    windows: list[int] = []
    real = status.write_status

    def spy(run_dir: Any, **fields: Any) -> Any:
        if fields.get("durable") is False:  # a log window's rewrite
            windows.append(int(fields["step"]))
        return real(run_dir, **fields)

    monkeypatch.setattr(status, "write_status", spy)
    monkeypatch.setattr(Reporter, "status_every_s", every)
    run_train(make_cfg(corpus, track={"log_every": 1}, max_steps=12), tmp_path / "run")
    assert windows == (list(range(1, 13)) if expect_all else [1])
    final = json.loads((tmp_path / "run" / "status.json").read_text())
    assert final["step"] == 12  # the stop writes it whatever the windows did


def test_a_log_without_a_terminal_gets_a_progress_line_a_minute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A job under nohup or a scheduler shows in its log, once a minute, that it trains."""
    import io

    from embedlab.training import reporting

    clock = [100.0]
    monkeypatch.setattr(reporting.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    bar = reporting.progress_bar(False, 1_000_000, 100_000, out, lines=True)
    bar.set_postfix(loss="4.1234", lr="2.25e-02", refresh=False)
    clock[0] += 30
    bar.update(300_000)
    assert out.getvalue() == ""  # not a minute yet
    clock[0] += 30
    bar.update(300_000)
    assert out.getvalue() == ("embedlab: 70.0% of 1,000,000 words, 10.0k words/s, loss 4.1234, "
                              "lr 2.25e-02, 0:00:30 left\n")
    assert isinstance(reporting.progress_bar(False, 10, 0, out), reporting.NoBar)


class _RecordingBar:
    """A progress bar that keeps every total it was given and the words it counted."""

    def __init__(self, total: int, initial: int, *args: Any, **kwargs: Any) -> None:
        self.totals, self.n = [total], initial

    @property
    def total(self) -> int:
        return self.totals[-1]

    @total.setter
    def total(self, value: int) -> None:
        self.totals.append(value)

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix(self, **kw: Any) -> None: ...
    def close(self) -> None: ...


def _recorded_bar(monkeypatch: pytest.MonkeyPatch) -> list[_RecordingBar]:
    from embedlab.training import loop

    bars: list[_RecordingBar] = []

    def make(enabled: bool, total: int, initial: int, out: Any, **kw: Any) -> _RecordingBar:
        bars.append(_RecordingBar(total, initial))
        return bars[-1]

    monkeypatch.setattr(loop, "progress_bar", make)
    return bars


def test_the_bar_runs_to_the_words_of_max_steps(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --max-steps the bar's total (and so its percentage and time left) is the words up
    to that step — estimated at first, exact at the end — not the whole run's."""
    bars = _recorded_bar(monkeypatch)
    cfg = make_cfg(corpus, max_steps=6, optim={"epochs": 3})
    result, _ = run_train(cfg, tmp_path / "run")
    bar, = bars
    progress = logged(tmp_path / "run", "train/progress")[6]
    whole_run = result.words_seen / progress  # the 3 epochs' words
    assert whole_run > 4 * result.words_seen
    assert bar.n == bar.totals[-1] == result.words_seen
    assert all(total < whole_run / 2 for total in bar.totals)
    assert bar.totals[0] == pytest.approx(result.words_seen, rel=0.35)  # the first estimate

    resumed = _recorded_bar(monkeypatch)
    run_train(make_cfg(corpus, max_steps=10, optim={"epochs": 3}), tmp_path / "run")
    again, = resumed
    assert again.totals[-1] == again.n > result.words_seen


def test_the_bar_runs_to_the_whole_run_without_max_steps(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bars = _recorded_bar(monkeypatch)
    result, _ = run_train(make_cfg(corpus), tmp_path / "run")
    bar, = bars
    assert bar.totals == [bar.n] == [result.words_seen]  # one epoch, trained to its end


def test_the_bar_starts_once_the_writers_are_open(
        corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening the TensorBoard writers (seconds, for a resume that rewrites its event files)
    is not in the bar's first rate and time left."""
    from embedlab.track import tracker
    from embedlab.training import loop

    order: list[str] = []
    real_open = tracker.open_tracker

    def open_tracker(*args: Any, **kwargs: Any) -> Any:
        order.append("writers")
        return real_open(*args, **kwargs)

    def make(enabled: bool, total: int, initial: int, out: Any, **kw: Any) -> _RecordingBar:
        order.append("bar")
        return _RecordingBar(total, initial)

    monkeypatch.setattr(tracker, "open_tracker", open_tracker)
    monkeypatch.setattr(loop, "progress_bar", make)
    run_train(make_cfg(corpus), tmp_path / "run")
    assert order == ["writers", "bar"]
