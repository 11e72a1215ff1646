"""What the loop reports while it trains: logging windows and evaluations to the tracker
(metrics.jsonl, TensorBoard), progress to status.json and to the progress bar.

The progress bar is shown only on a terminal (and with ``--progress``); elsewhere it is a
:class:`NoBar`, so the loop never asks whether there is one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from embedlab.run import status
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


def progress_bar(enabled: bool, total: int, initial: int, out: TextIO) -> Any:
    """A bar over the run's ``total`` words, at ``initial`` already trained."""
    if not enabled:
        return NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="w", unit_scale=True, file=out,
                dynamic_ncols=True, smoothing=0.1, desc="train")


def progress_fields(run: TrainingRun) -> dict[str, Any]:
    """What status.json says of a run's progress."""
    s = run.state
    return {"step": s.step, "words_seen": s.words_seen, "loss": s.last_loss,
            "train_seconds": s.train_seconds,
            "raw_words": int(s.words_seen * run.raw_per_token)}


class Reporter:
    """Reports the loop's numbers; ``time`` counts the training time they are measured over."""

    def __init__(self, run: TrainingRun, tracker: Tracker, bar: Any, wall: WallClock) -> None:
        self.run = run
        self.tracker = tracker
        self.bar = bar
        self.wall = wall
        self.time = TrainingTime(run.state)

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
        state.window = LogWindow.opening_now()
        status.write_status(run.run_dir, **progress_fields(run), wall_time=self.wall.seconds())

    def close_last_window(self) -> None:
        """Log the last, partial window: only at the natural end, so that a run sliced by
        --max-steps logs exactly the steps an uninterrupted run logs. The bar, at 100 %, then
        shows the final loss and the rate the schedule ends at, not the last full window's."""
        run, state = self.run, self.run.state
        if state.window.pairs:
            state.last_loss = state.window.mean_loss()
            state.metrics["loss"] = state.last_loss
            self.tracker.log_scalars(state.step, {"train/loss": state.last_loss,
                                                  "train/progress": state.words_seen /
                                                  run.total_words})
            state.window = LogWindow.opening_now()
        if state.last_loss is not None:
            optim = run.cfg.optim
            end_lr = linear_lr(optim.lr, optim.min_lr_ratio, state.words_seen, run.total_words)
            self.bar.set_postfix(loss=f"{state.last_loss:.4f}", lr=f"{end_lr:.2e}", refresh=False)

    def evaluate(self) -> None:
        """Evaluate the input vectors; the results join the metrics a checkpoint records."""
        run, state = self.run, self.run.state
        assert run.evaluator is not None
        results = run.evaluator(run.vocab.words, run.engine.input_vectors)
        state.metrics.update(results)
        self.tracker.log_scalars(state.step, {f"eval/{k}": v for k, v in results.items()})
