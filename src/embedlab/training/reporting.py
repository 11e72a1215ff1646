"""What the loop reports while it trains: logging windows and evaluations to the tracker
(metrics.jsonl, TensorBoard), progress to status.json and to the progress bar.

The progress bar is shown only on a terminal (and with ``--progress``); elsewhere it is a
:class:`NoBar`, so the loop never asks whether there is one. Likewise ``embedlab.train``'s
``on_progress`` callback: the loop reports every window to a :class:`ProgressSink`, which is a
:class:`NoProgress` unless a callback is given.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import numpy as np

from embedlab.errors import (
    TrainingInterrupted,
    TrainingKeyboardInterrupt,
    TrainingStoppedByError,
    acting_once_left_out,
    spell,
    warn,
)
from embedlab.run import status
from embedlab.run.signals import call_interruptibly
from embedlab.training.clocks import TrainingTime, WallClock
from embedlab.training.schedule import linear_lr
from embedlab.training.state import LogWindow

if TYPE_CHECKING:
    from embedlab.track.tracker import Tracker
    from embedlab.training.setup import TrainingRun


class NoBar:
    """The progress bar where none is shown."""

    def update(self, n: int) -> None: ...
    def set_postfix(self, **kw: Any) -> None: ...
    def close(self) -> None: ...


class ProgressLines:
    """The progress of a run whose stderr is no terminal (a log file, a batch scheduler's): one
    line every ``every`` seconds, the bar's numbers in words, so that a long job's log shows it
    alive. Steps run for milliseconds; the clock is read once per call of the step runner."""

    def __init__(self, total: int, initial: int, out: TextIO, every: float) -> None:
        self.total, self.n, self.out, self.every = max(1, total), initial, out, every
        self._first, self._began = initial, time.monotonic()
        self._last = self._began
        self._postfix: dict[str, Any] = {}

    def update(self, n: int) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._say(now)

    def set_postfix(self, refresh: bool = True, **kw: Any) -> None:
        self._postfix.update(kw)

    def close(self) -> None: ...

    def _say(self, now: float) -> None:
        from embedlab.track.runs import format_duration  # the runs table's H:MM:SS

        rate = (self.n - self._first) / max(1e-9, now - self._began)
        left = (self.total - self.n) / rate if rate > 0 else None
        eta = "" if left is None else f", {format_duration(left)} left"
        extra = "".join(f", {k} {v}" for k, v in self._postfix.items())
        speed = f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:.1f}k"
        with contextlib.suppress(OSError):  # a log on a full disk: training goes on
            print(f"embedlab: {self.n / self.total:.1%} of {self.total:,} words, "
                  f"{speed} words/s{extra}{eta}", file=self.out, flush=True)


#: seconds between two lines of :class:`ProgressLines`
PROGRESS_LINE_SECONDS = 60.0


def progress_bar(enabled: bool, total: int, initial: int, out: TextIO, *,
                 lines: bool = False) -> Any:
    """A bar over the run's ``total`` words, at ``initial`` already trained; ``lines``: where no
    bar is shown (stderr is no terminal), a line a minute (:class:`ProgressLines`)."""
    if not enabled:
        return ProgressLines(total, initial, out, PROGRESS_LINE_SECONDS) if lines else NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="w", unit_scale=True, file=out,
                dynamic_ncols=True, smoothing=0.1, desc="train")


def bar_total(run: TrainingRun, first_step: int, first_words: int) -> int:
    """The words the progress bar runs to: the run's, or with ``--max-steps`` those trained by
    that step — estimated from the words per step since ``first_step`` (at ``first_words``)
    or, before any, from a step's centres and the share of positions subsampling keeps; exact
    once the step is reached."""
    state, max_steps = run.state, run.cfg.max_steps
    if max_steps is None:
        return run.total_words
    left = max_steps - state.step
    if left <= 0:
        return state.words_seen
    done = state.step - first_step
    per_step = (state.words_seen - first_words) / done if done > 0 else _words_per_step(run)
    return min(run.total_words, state.words_seen + round(left * per_step))


def _words_per_step(run: TrainingRun) -> float:
    """The positions a step is expected to advance by: its centres over the share subsampling
    keeps."""
    from embedlab.data.pairs import keep_probabilities

    counts = np.asarray(run.vocab.counts, dtype=np.float64)
    keep = keep_probabilities(counts, run.cfg.model.sample)
    kept = 1.0 if keep is None or counts.sum() <= 0 else float((counts * keep).sum() / counts.sum())
    return run.cfg.optim.batch_size * run.cfg.optim.micro_batches / max(kept, 1e-9)


def progress_fields(run: TrainingRun) -> dict[str, Any]:
    """What status.json says of a run's progress."""
    s = run.state
    return {"step": s.step, "words_seen": s.words_seen, "loss": s.last_loss,
            "train_seconds": s.train_seconds,
            "raw_words": int(s.words_seen * run.raw_per_token)}


@dataclass(frozen=True)
class Progress:
    """What ``embedlab.train(on_progress=...)`` is called with: at the end of every logging window
    (``log_every`` steps) the numbers metrics.jsonl gets for it, and once more when the call ends
    by training to the end or to ``max_steps`` (``final``), after the last checkpoint is saved.
    ``evaluation``: the latest evaluation of the run's files (``eval_analogies``,
    ``eval_similarity``) so far, by metric (``analogy``, ``similarity/NAME``: metrics.jsonl's
    ``eval/`` values), taken at step ``evaluated_step`` (one due at this step comes first);
    None before the first, or in a call that evaluates nothing.
    """

    step: int  # global step
    words_seen: int  # positions trained (in-vocabulary tokens, all epochs so far)
    loss: float | None  # mean loss per positive pair over the window; final: the last logged
    lr: float  # the learning rate of the window's last step; final: where the schedule stands
    words_per_sec: float  # corpus words per second of training: over the window; final: the run
    progress: float  # share of the run's positions trained, 0 to 1
    final: bool = False
    evaluation: Mapping[str, float] | None = None
    evaluated_step: int | None = None


class ProgressSink(Protocol):
    """Where the loop reports each :class:`Progress`; ``failure``: what stops the loop (see
    :class:`ProgressCallback`)."""

    failure: BaseException | None

    def window(self, progress: Progress, time: TrainingTime) -> None: ...
    def end(self, progress: Progress) -> None: ...


class NoProgress:
    """The sink where no callback listens."""

    failure: BaseException | None = None

    def window(self, progress: Progress, time: TrainingTime) -> None: ...
    def end(self, progress: Progress) -> None: ...


class ProgressCallback:
    """Calls ``callback`` with every :class:`Progress`, leaving its time out of the training time.

    An exception the callback raises (any: ``KeyboardInterrupt`` too) stops training as Ctrl-C
    does: kept as ``failure``, it makes the loop save the step and raise
    :class:`~embedlab.errors.TrainingInterrupted` from it (:func:`stopped_by`).
    """

    def __init__(self, callback: Callable[[Progress], object]) -> None:
        self.callback = callback
        self.failure: BaseException | None = None

    def window(self, progress: Progress, time: TrainingTime) -> None:
        time.lap()
        try:
            # a callback that hangs is stopped by Ctrl-C
            call_interruptibly(lambda: self.callback(progress))
        except BaseException as exc:  # raised by the loop once it has saved the step
            self.failure = exc
        finally:
            time.restart()

    def end(self, progress: Progress) -> None:
        if self.failure is not None:  # in the last window: the end is saved already
            raise stopped_by(self.failure, progress.step)
        try:
            self.callback(progress)
        except KeyboardInterrupt as exc:  # reaches the caller as itself, not as a SIGINT
            setattr(exc, FINAL_CALLBACK_RAISED, True)
            raise


#: marks a KeyboardInterrupt the final on_progress call raised, which embedlab.train passes
#: on as it is (everything is saved by then), not as a Ctrl-C that stopped the run
FINAL_CALLBACK_RAISED = "_embedlab_raised_by_final_on_progress"


def stopped_by(failure: BaseException, step: int) -> TrainingInterrupted:
    """The exception of a loop that saved step ``step`` because ``on_progress`` raised
    ``failure`` (its cause)."""
    said = f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__
    kind: type[TrainingInterrupted]
    if isinstance(failure, KeyboardInterrupt):
        kind, code = TrainingKeyboardInterrupt, 128 + signal.SIGINT  # as Ctrl-C's
    elif isinstance(failure, SystemExit):
        # sys.exit(3) in the callback: its status, as the process would have ended with
        kind, code = TrainingInterrupted, failure.code if isinstance(failure.code, int) else 1
    elif isinstance(failure, Exception):
        kind, code = TrainingStoppedByError, 1
    else:  # another BaseException: no Exception either
        kind, code = TrainingInterrupted, 1
    # the same callback would stop the resumed call at once, where it stopped this one
    fix = "with the same arguments" if isinstance(failure, KeyboardInterrupt) else \
        "with an on_progress that lets training go on"
    but = acting_once_left_out()  # restart=True again would start over
    stop = kind(f"on_progress raised {said}; saved step {step} — call embedlab.train again "
                f"{fix}{' but' if but else ''}{but} to resume", code)
    stop.__cause__ = failure
    return stop


_SINK: ContextVar[ProgressSink | None] = ContextVar("embedlab_progress_sink", default=None)


@contextlib.contextmanager
def progress_to(callback: Callable[[Progress], object]) -> Iterator[None]:
    """The training loop run inside the block reports to ``callback`` (``embedlab.train``'s
    ``on_progress``). Handed over in a context variable, as the trainer and its set-up have no
    business with it: the loop takes :func:`progress_sink` when it starts."""
    token = _SINK.set(ProgressCallback(callback))
    try:
        yield
    finally:
        _SINK.reset(token)


def progress_sink() -> ProgressSink:
    """Where the loop starting now reports its progress (see :func:`progress_to`)."""
    return _SINK.get() or NoProgress()


def final_progress(run: TrainingRun, reporter: Reporter | None = None) -> Progress:
    """The :class:`Progress` of a call that ends: where the run stands (with the ``reporter``'s
    latest evaluation, where it has one)."""
    s, optim = run.state, run.cfg.optim
    evaluated = reporter.latest_evaluation() if reporter is not None else (None, None)
    return Progress(s.step, s.words_seen, s.last_loss,
                    linear_lr(optim.lr, optim.min_lr_ratio, s.words_seen, run.total_words),
                    s.words_seen * run.raw_per_token / max(1e-9, s.train_seconds),
                    s.words_seen / run.total_words, True, *evaluated)


class Reporter:
    """Reports the loop's numbers; ``time`` counts the training time they are measured over."""

    #: the status file of a running run is rewritten at most this often (seconds): windows
    #: can close hundreds of times a second on a GPU, and a rewrite takes the loop ~1.5 ms
    #: while the GPU waits; 20 a second still follow a run closely (a stop and the end always
    #: write it)
    status_every_s = 0.05

    def __init__(self, run: TrainingRun, tracker: Tracker, bar: Any, wall: WallClock,
                 sink: ProgressSink) -> None:
        self.run = run
        self.tracker = tracker
        self.bar = bar
        self.wall = wall
        self.sink = sink
        self.time = TrainingTime(run.state)
        self._status_at: float | None = None  # when a window last wrote the status
        self._evaluated: tuple[int, dict[str, float]] | None = None  # the last evaluation
        self._said_not_finite: set[str] = set()  # evaluations said to be nan, once each
        self.lr: float | None = None  # the rate of the last step trained
        self._window: Progress | None = None  # closed, not yet handed to the sink

    def close_window(self, lr: float) -> None:
        """Log the logging window that ends with this step, and open the next."""
        run, state = self.run, self.run.state
        self.time.lap()
        window = state.window
        state.last_loss = window.mean_loss()
        elapsed = max(1e-9, window.elapsed())
        scalars = {"train/loss": state.last_loss, "train/lr": lr,
                   "train/words_per_sec": window.words * run.raw_per_token / elapsed,
                   "train/pairs_per_sec": window.pairs / elapsed,
                   "train/progress": state.words_seen / run.total_words}
        state.metrics["loss"] = state.last_loss
        self.tracker.log_scalars(state.step, scalars)
        self.bar.set_postfix(loss=f"{state.last_loss:.4f}", lr=f"{lr:.2e}", refresh=False)
        # told once an evaluation due at this step has run (report_window), so that the
        # callback has it
        self._window = Progress(state.step, state.words_seen, state.last_loss, lr,
                                scalars["train/words_per_sec"], scalars["train/progress"])
        state.window = LogWindow.opening_now()
        now = time.monotonic()
        if self._status_at is None or now - self._status_at >= self.status_every_s:
            self._status_at = now
            status.write_status(run.run_dir, **progress_fields(run),
                                wall_time=self.wall.seconds(), durable=False)

    def report_window(self) -> None:
        """Hand the window closed at this step to the progress sink, with the latest
        evaluation (see :class:`Progress`)."""
        if self._window is None:
            return
        evaluation, step = self.latest_evaluation()
        window, self._window = self._window, None
        self.sink.window(dataclasses.replace(window, evaluation=evaluation,
                                             evaluated_step=step), self.time)

    def latest_evaluation(self) -> tuple[dict[str, float] | None, int | None]:
        """The results of the latest evaluation in this call and its step, or (None, None)."""
        if self._evaluated is None:
            return None, None
        return dict(self._evaluated[1]), self._evaluated[0]

    def close_last_window(self) -> None:
        """Log the last, partial window: only at the natural end, so that a run sliced by
        --max-steps logs exactly the steps an uninterrupted run logs. The bar, at 100 %, then
        shows the final loss and the rate the schedule ends at, not the last full window's."""
        run, state = self.run, self.run.state
        if state.window.pairs:
            state.last_loss = state.window.mean_loss()
            state.metrics["loss"] = state.last_loss
            scalars = {"train/loss": state.last_loss,
                       "train/progress": state.words_seen / run.total_words}
            if self.lr is not None:  # the lr curve ends where the loss curve does
                scalars["train/lr"] = self.lr
            self.tracker.log_scalars(state.step, scalars)
            state.window = LogWindow.opening_now()
        if state.last_loss is not None:
            optim = run.cfg.optim
            end_lr = linear_lr(optim.lr, optim.min_lr_ratio, state.words_seen, run.total_words)
            self.bar.set_postfix(loss=f"{state.last_loss:.4f}", lr=f"{end_lr:.2e}", refresh=False)

    def evaluate(self) -> None:
        """Evaluate the input vectors; the results join the metrics a checkpoint records."""
        run, state = self.run, self.run.state
        assert run.evaluator is not None
        # vectors that overflow (a run diverging, which the save says) score nan, without
        # NumPy's warnings about the overflow on the way
        with np.errstate(over="ignore", invalid="ignore"):
            results = run.evaluator(run.vocab.words, run.engine.input_vectors)
        self._evaluated = (state.step, results)
        state.metrics.update(results)
        self.tracker.log_scalars(state.step, {f"eval/{k}": v for k, v in results.items()})
        self._say_not_finite(state.step, results)

    def _say_not_finite(self, step: int, results: dict[str, float]) -> None:
        """Once per evaluation: a value that is no number is logged as such (``"nan"`` in
        metrics.jsonl) and left out of the checkpoints, so it can make none of them the best;
        silently, a ``--best-metric`` of it kept no best checkpoint at all."""
        from embedlab.training import distributed

        group = distributed.current()
        if group is not None and not group.leader:
            return
        for name, value in results.items():
            if np.isfinite(value) or name in self._said_not_finite:
                continue
            self._said_not_finite.add(name)
            best = self.run.cfg.checkpoint.best_name == name
            warn(f"evaluation {name} is {value} at step {step}: the vectors rank none of its "
                 "items above another (every pair the same cosine, say, or vectors that "
                 f"overflow); it is logged as {value} and left out of the checkpoints"
                 + (f", so it makes no checkpoint the best ({spell('--best-metric', name)}) "
                    "while it stays so" if best else ""))

    def evaluated_at(self, step: int) -> bool:
        """Whether :meth:`evaluate` ran at ``step`` (in this process)."""
        return self._evaluated is not None and self._evaluated[0] == step

    def checkpoint_metrics(self, *, evaluate: bool = True) -> dict[str, float]:
        """The metrics the checkpoint of this step records, from which the best checkpoint is
        chosen. Where that choice is by an evaluation (``--best-metric analogy``,
        ``similarity/NAME``), a checkpoint whose step was not just evaluated is evaluated for
        itself, so that its value is its own vectors', not the last evaluation's (which no
        checkpoint records as its own); such an
        evaluation goes into the checkpoint only (metrics.jsonl and TensorBoard keep the
        ``--eval-every`` cadence, which a resume reproduces whatever the saves were). The loss
        is the last closed logging window's mean. ``evaluate=False`` (the save a signal asks
        for, which must not wait for an evaluation): the evaluations' values are left out
        instead, so that no stale value competes for the best checkpoint."""
        from embedlab.training import distributed

        run, state = self.run, self.run.state
        # the loss, and evaluations only of this step's vectors: the last evaluation's values,
        # recorded by a later checkpoint as its own, would rank it on a resume with another
        # --best-metric (which reads them from state.json)
        metrics = {k: v for k, v in state.metrics.items() if k == "loss"}
        if self._evaluated is not None and self._evaluated[0] == state.step:
            metrics.update(self._evaluated[1])
        group = distributed.current()
        if run.evaluator is None or run.cfg.checkpoint.best_name == "loss" or (
                group is not None and not group.leader):  # process 0 writes the checkpoint
            return metrics
        if self.evaluated_at(state.step) or not evaluate:
            return metrics
        return {**metrics, **run.evaluator(run.vocab.words, run.engine.input_vectors)}
