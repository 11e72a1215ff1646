"""The training loop: batch → step → bookkeeping, then logging, evaluation and saving when due.

One step trains the engine on a batch at the learning rate where the batch starts. The loop
counts the batch into the :class:`~embedlab.training.state.TrainState`, logs a window every
``--log-every`` steps and evaluates every ``--eval-every`` steps
(:class:`~embedlab.training.reporting.Reporter`), and saves when the cadence says so
(:class:`~embedlab.training.saving.Saver`). SIGINT/SIGTERM only raise a flag, checked once per step:
the loop saves that step and stops; so does an ``on_progress`` callback that raises
(:class:`~embedlab.training.reporting.ProgressCallback`). The last step is saved once, after the
loop, together with the final summaries.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from embedlab.errors import (
    InputError,
    ProcessLost,
    TrainingInterrupted,
    diverged,
    python_caller,
    rerun,
    resume_how,
    spell,
    warn,
)
from embedlab.run import status
from embedlab.run.folder import ABANDONED
from embedlab.run.signals import SignalFlag, interrupted, stopped_at_the_end
from embedlab.training import distributed
from embedlab.training.clocks import WallClock
from embedlab.training.reporting import (
    NoBar,
    ProgressSink,
    Reporter,
    bar_total,
    final_progress,
    progress_bar,
    progress_fields,
    progress_sink,
    stopped_by,
)
from embedlab.training.saving import Saver, divergence_fix
from embedlab.training.state import TrainResult

if TYPE_CHECKING:
    from pathlib import Path

    from embedlab.config import TrainConfig
    from embedlab.engines.stepping import StepsDone
    from embedlab.track.tracker import Tracker
    from embedlab.training.setup import TrainingRun


def train_loop(run: TrainingRun, out: TextIO) -> TrainResult:
    """Train ``run`` from where its state stands until its data ends, ``--max-steps`` is reached
    or a signal stops it; status.json says which."""
    from embedlab.track.tracker import open_tracker  # looked up per call: tests replace it

    state = run.state
    if state.cursor.epoch >= run.cfg.optim.epochs:
        return _already_finished(run, out)
    if run.resumed and run.cfg.max_steps is not None and state.step >= run.cfg.max_steps:
        # nothing to train: the run's records stay as they are. Opening the writers would
        # have dropped a finished run's final/* records (given a larger --epochs, it trains
        # on from its end) and called it interrupted, for a call that trains nothing.
        run.forget_this_call()
        _repair_after_a_kill(run, finished=False)
        progress_sink().end(final_progress(run))
        return _result(run, False)
    wall = WallClock(state.wall_seconds)
    saver = Saver(run, wall)
    resumed_at, ended = saver.saved_step, False
    # a finished run given a larger --epochs: its writers drop its end records (final/*, the
    # hparams) as they open, which a stop before its next save must write again
    was_finished = run.resumed and state.finished
    sink = progress_sink()
    bar: Any = NoBar()
    tracker: Tracker | None = None
    try:
        # The handlers are in place before status.json says "running": a SIGTERM while the
        # writers open (a resume rewriting its event files can take seconds) must not kill the
        # process silently, leaving "running" and the lock behind.
        with SignalFlag() as flag:
            status.write_status(run.run_dir, status="running", pid=os.getpid(), step=state.step,
                                words_seen=state.words_seen, started=wall.started,
                                train_seconds=state.train_seconds, wall_time=wall.seconds(),
                                clear=("error",))
            tracker = open_tracker(run.run_dir, run.cfg, vocab=run.vocab,
                                   resume_step=state.step if run.resumed else None)
            # the bar's clock starts with the training: a resume's event files rewritten
            # while the writers opened gave its first rate a tenth of the real one
            bar = progress_bar(run.progress, bar_total(run, state.step, state.words_seen),
                               state.words_seen, out, lines=run.progress_lines)
            signum = flag.signum or 0
            group = distributed.current()
            if group is not None:  # the others wait until the writers are open
                signum = group.begin(signum)
            if signum:  # nothing was trained by this process: the checkpoint is where it stands
                status.write_status(run.run_dir, status="interrupted", step=state.step,
                                    wall_time=wall.before)
                raise interrupted(signum, state.step, saved=run.resumed, finished=was_finished)
            state.window.start()
            ABANDONED.set(None)  # a stop from here saves: the line says so, not the --from move
            reporter = Reporter(run, tracker, bar, wall, sink)
            saver.metrics = reporter.checkpoint_metrics
            finished = _train(run, reporter, saver, _Stop(flag, sink))
            _finish(run, reporter, saver, finished)
            ended = True
    except ProcessLost as exc:  # another process of the run stopped: resume from the last save
        distributed.finish_exit()
        # the step, its words and its loss from one moment: the last step trained
        status.note_status(run.run_dir, status="interrupted", **progress_fields(run),
                           error=str(exc)[:500])
        # a new run with no checkpoint is removed (trainer.train): re-run, it starts again
        again = "to resume" if saver.saved_step > 0 else "to start it again"
        raise ProcessLost(f"{exc}; stopped at step {state.step}, "
                          f"{_saved(saver.saved_step)} — "
                          f"{resume_how() if saver.saved_step > 0 else rerun()} {again}",
                          exc.exit_code) from None
    except TrainingInterrupted:
        raise
    except KeyboardInterrupt:
        # where the handlers could not catch it (raised by code, or they are not ours): nothing
        # was trained since the last checkpoint, which is where a re-run resumes
        status.note_status(run.run_dir, status="interrupted", **progress_fields(run),
                           wall_time=wall.seconds())
        raise
    except BaseException as exc:
        # how far it got, not the counters of the start (before any log window wrote them)
        status.note_status(run.run_dir, status="failed", **progress_fields(run),
                           wall_time=wall.seconds(), error=str(exc)[:500])
        raise
    finally:
        bar.close()
        unsaved = not ended and run.resumed and saver.saved_step == resumed_at
        if tracker is not None:
            if unsaved and was_finished and state.step == resumed_at:  # nothing trained
                _end_records_again(run, tracker)
            tracker.close()
        if unsaved:
            run.forget_this_call()  # stopped with nothing saved: the run is as it was
    if flag.signum is not None and python_caller():
        # a signal while the end was saved, which it let finish: the call stops as asked (the
        # command's process ends here anyway, with the run's own status)
        raise stopped_at_the_end(flag.signum, run.state.step, finished=finished)
    # all saved and closed: a callback that raises loses nothing
    sink.end(final_progress(run, reporter))
    return _result(run, finished)


def _end_records_again(run: TrainingRun, tracker: Tracker) -> None:
    """A finished run whose --epochs raise stopped before it saved (a Ctrl-C while its writers
    opened, or at its first step): the end records that opening the writers dropped — final/*
    in metrics.jsonl and the events, the hparams record — written again as its final save wrote
    them, with the run's settings as they were (its config.json is put back next), and its
    status says finished again. Without them the run would leave TensorBoard's HParams table
    for good: a re-run finds it finished and writes nothing."""
    import json

    before = run.records_before.get("config.json")
    try:
        hparams = json.loads(before) if before else run.cfg.to_dict()
        state, engine = run.state, run.engine
        with np.errstate(over="ignore", invalid="ignore"):
            tracker.log_final(state.step, engine.input_vectors, engine.output_vectors, hparams,
                              state.metrics)
        status.write_status(run.run_dir, status="finished", **progress_fields(run),
                            checkpoint=state.step, wall_time=state.wall_seconds)
    except Exception as exc:  # the stop's own message and exit come first
        warn(f"the end records of {run.run_dir} (final/* and the hparams) could not be "
             f"written again ({exc}); they come back when the run trains on to a new end")


class _Stop:
    """Whether the loop stops at this step boundary, and why: a signal (SIGINT/SIGTERM), or an
    ``on_progress`` callback that raised; with several processes, a signal any of them got."""

    def __init__(self, flag: SignalFlag, sink: ProgressSink) -> None:
        self.flag, self.sink = flag, sink
        self.agreed = 0  # the stop code the processes agreed on (distributed.Group.agree)

    def __bool__(self) -> bool:
        return bool(self.flag) or self.sink.failure is not None

    def code(self) -> int:
        """This process's stop code: a signal number, a callback's stop, or 0."""
        if self.flag.signum is not None:
            return self.flag.signum
        return distributed.CALLBACK_STOP if self.sink.failure is not None else 0

    def error(self, step: int) -> BaseException:
        """What the loop raises once it has saved ``step``: a callback's error as its own; a
        KeyboardInterrupt it raised while the flag rose as the signal's stop (a Ctrl-C while
        on_progress ran raises there too, see call_interruptibly)."""
        failure = self.sink.failure
        if failure is not None and not (isinstance(failure, KeyboardInterrupt) and
                                        self.flag.signum is not None):
            return stopped_by(failure, step)
        signum = self.flag.signum or self.agreed
        if signum == distributed.CALLBACK_STOP:
            return TrainingInterrupted(f"process 0 stopped the run at step {step} (saved) — "
                                       f"{resume_how()} to resume", 1)
        return interrupted(signum, step)


#: Steps one call of the step runner may train at most: the latency of a signal, a callback's
#: stop or a time-based checkpoint (a call also ends at every step where a log window, an
#: evaluation, a step-based checkpoint or --max-steps falls due, and at the end of a chunk).
MAX_STEPS_PER_CALL = 32


def _train(run: TrainingRun, reporter: Reporter, saver: Saver, stop: _Stop) -> bool:
    """Train call after call of the step runner; True when the data ran out, False at
    ``--max-steps``."""
    cfg, state = run.cfg, run.state
    first = state.step, state.words_seen
    try:
        while state.cursor.epoch < cfg.optim.epochs:
            if cfg.max_steps is not None and state.step >= cfg.max_steps:
                break
            done = run.steps.run(state.cursor, state.words_seen, _steps_until_due(run))
            words = _count_steps(run, done, saver)
            if cfg.max_steps is not None:  # the bar runs to --max-steps' words, estimated
                reporter.bar.total = bar_total(run, *first)
            reporter.bar.update(words)
            _after_steps(run, reporter, saver, stop, float(done.lrs[-1]))
    finally:
        run.steps.close()
    reporter.time.lap()
    return state.cursor.epoch >= cfg.optim.epochs


def _steps_until_due(run: TrainingRun) -> int:
    """Steps from here to the next one where something other than training is due."""
    cfg, step = run.cfg, run.state.step
    limit = getattr(run.steps, "steps_per_call", MAX_STEPS_PER_CALL)
    every = [cfg.track.log_every, cfg.checkpoint.every_steps,
             cfg.eval.every_steps if run.evaluator else 0]
    for n in every:
        if n:
            limit = min(limit, n - step % n)
    if cfg.max_steps is not None:
        limit = min(limit, cfg.max_steps - step)
    return max(1, limit)


def _count_steps(run: TrainingRun, done: StepsDone, saver: Saver) -> int:
    """Count the steps ``done`` into the run's state and log window, as many as one step at a
    time would (a step whose loss is not finite is counted, then refused); the corpus words they
    advanced by."""
    state, before = run.state, run.state.words_seen
    finite = np.isfinite(done.losses)
    n = len(done) if finite.all() else int(np.argmin(finite))  # steps with a finite loss
    if n:
        state.advance_to(done.words_done[n - 1], done.cursor_after(n - 1), run.n_tokens, n)
        state.window.add_steps(done.losses[:n], int(done.pairs[:n].sum()),
                               state.words_seen - before)
    if n < len(done):
        state.advance_to(done.words_done[n], done.cursor_after(n), run.n_tokens)
        raise _diverged(run, float(done.losses[n]), saver.saved_step)
    return state.words_seen - before


def _after_steps(run: TrainingRun, reporter: Reporter, saver: Saver, stop: _Stop,
                 lr: float) -> None:
    """What falls due at the step just trained: a log window, an evaluation, a stop, a
    checkpoint (the last step, of the data or of --max-steps, is saved after the loop, with the
    final summaries or the projector)."""
    cfg, state = run.cfg, run.state
    last = state.cursor.epoch >= cfg.optim.epochs
    ends = last or (cfg.max_steps is not None and state.step >= cfg.max_steps)
    group = distributed.current()
    if group is not None:  # every process stops, or saves, at the same step: a signal (or a
        # callback's stop) that comes after the agreement waits for the next step's
        stop.agreed, due = group.agree(stop.code(), not ends and saver.due(state.step))
        if stop.agreed and not stop.code() and stop.agreed != distributed.CALLBACK_STOP:
            # another process got the signal: this one says why the run stops, as for its own
            lead = "\n" if sys.stderr.isatty() else ""  # ends a progress bar's line
            print(f"{lead}embedlab: {signal.Signals(stop.agreed).name} received by another "
                  "process of the run; finishing the current step and saving", file=sys.stderr,
                  flush=True)
    reporter.lr = lr
    if log_due(cfg, state.step):
        reporter.close_window(lr)
        if group is not None:  # the others wait while this process logs alone
            group.wait_for_leader()
    if evaluation_due(cfg, state.step, evaluates=run.evaluator is not None):
        # not training time (as a checkpoint's save is not): words/s and train_seconds counted
        # it, 27k words/s against 614k for the same steps with --eval-every 20
        reporter.time.lap()
        began = time.perf_counter()
        reporter.evaluate()
        if group is not None:
            group.wait_for_leader()
        state.window.pause(time.perf_counter() - began)
        reporter.time.restart()
    reporter.report_window()  # after this step's evaluation: on_progress gets it too
    if group is None:
        stopping, due = bool(stop), not ends and saver.due(state.step)
    else:
        stopping = bool(stop.agreed)
    if stopping and not last:
        _save_and_stop(run, reporter, saver, stop, at_max_steps=ends)
    if due:
        reporter.time.lap()
        saved_wall = saver.save(reporter.tracker)
        reporter.time.restart()
        if group is None and stop and not ends:
            # a signal during this save: the step it stops at is saved already; another step
            # and another save would double the time a scheduler's kill-wait must allow
            reporter.bar.close()
            status.write_status(run.run_dir, status="interrupted", **progress_fields(run),
                                wall_time=saved_wall)
            raise stop.error(state.step)


def log_due(cfg: TrainConfig, step: int) -> bool:
    """Whether a logging window closes at ``step``."""
    return step % cfg.track.log_every == 0


def evaluation_due(cfg: TrainConfig, step: int, *, evaluates: bool) -> bool:
    """Whether a run evaluates at ``step``; ``evaluates``: it has an evaluator."""
    every = cfg.eval.every_steps
    return bool(evaluates and every and step % every == 0)


def _save_and_stop(run: TrainingRun, reporter: Reporter, saver: Saver, stop: _Stop, *,
                   at_max_steps: bool) -> None:
    """A signal came, or a callback raised: save the step just trained, and stop."""
    reporter.time.lap()
    reporter.bar.close()  # its last line: the training's rate and time, not the save's
    # the status: what it holds
    saved_wall = saver.save(reporter.tracker, stopping=True, at_max_steps=at_max_steps)
    status.write_status(run.run_dir, status="interrupted", **progress_fields(run),
                        wall_time=saved_wall)
    raise stop.error(run.state.step)


def _finish(run: TrainingRun, reporter: Reporter, saver: Saver, finished: bool) -> None:
    """At the end of the data: the last window, the final evaluation and the final checkpoint;
    at --max-steps, a checkpoint of where the run stopped. Then the status says which."""
    state = run.state
    if finished:
        reporter.close_last_window()
    # the bar's last line: the training's rate and time, not the save's that follows
    reporter.bar.close()
    # the last step may have been evaluated by --eval-every already: one point, not two
    if finished and run.evaluator and not reporter.evaluated_at(state.step):
        reporter.evaluate()
    saved = saver.saved_step == state.step
    end_wall = saver.wall.seconds() if saved else \
        saver.save(reporter.tracker, final=finished, at_max_steps=not finished)
    status.write_status(run.run_dir, status="finished" if finished else "interrupted",
                        **progress_fields(run), wall_time=end_wall)


def _already_finished(run: TrainingRun, out: TextIO) -> TrainResult:
    """Nothing left to train: leave the finished run exactly as it is, and say in one line how
    to train it further or start it over.

    Only the final checkpoint reaches the end of the data, and everything it summarises was
    logged before it was committed; a kill after that commit can only have missed the status.

    The line names the command that continues the run, with ``--run``: the same flags with
    another ``--epochs`` name another run (run folder names record the hyperparameters,
    ``--epochs`` among them), and rightly so. Training a finished run further stretches its
    learning-rate decay over the new total from where it stopped, which gives other vectors
    than a run trained for that many epochs from the start, and that is what ``--epochs N``
    without ``--run`` names, whether or not a shorter run with the other flags exists.
    """
    state = run.state
    _repair_after_a_kill(run, finished=True)
    epochs = run.cfg.optim.epochs
    print(f"embedlab: {run.run_dir} already finished at step {state.step} ({epochs} "
          f"epoch{'s' if epochs != 1 else ''}); {_train_further(run.run_dir, epochs)}", file=out)
    progress_sink().end(final_progress(run))  # on_progress hears every call end, this one too
    return _result(run, True)


def _repair_after_a_kill(run: TrainingRun, *, finished: bool) -> None:
    """A call that trains nothing, at the checkpoint the run stopped at: where a kill came after
    that checkpoint's commit, its index rewrite and status are made now (the index named the
    checkpoint before as the latest; status.json said "running" for a process long gone). By
    process 0 alone, which writes the run's records."""
    group = distributed.current()
    if group is not None and not group.leader:
        return
    state = run.state
    run.manager.finish_save(state.step)
    now = status.read_status(run.run_dir)
    was = now.get("status")
    target = "finished" if finished else "interrupted" if was in (None, "running") else was
    if was != target or now.get("checkpoint") != state.step:
        status.write_status(run.run_dir, status=target, **progress_fields(run),
                            checkpoint=state.step, wall_time=state.wall_seconds)


def _train_further(run_dir: Path, epochs: int) -> str:
    """How to train a finished run further, or start it over, as the caller passes arguments
    (:func:`embedlab.errors.spell`): a command for the command line, a call for Python."""
    if not python_caller():
        from embedlab.training.launched import launched_processes

        nproc = launched_processes()
        with_nproc = "" if nproc is None else f" --nproc {nproc}"
        return (f"to train more: {_program()} train{with_nproc} --run "
                f"{shlex.quote(str(run_dir))} --epochs N (N > {epochs}); to start over: add "
                "--restart")
    return (f"to train more: embedlab.train({spell('--run', str(run_dir))}, epochs=N) "
            f"(N > {epochs}); to start over: add {spell('--restart', True)}")


def _program() -> str:
    """The command as it can be typed again: ``embedlab`` where the shell finds this one by
    that name, else the path that was run (``.venv/bin/embedlab`` of a make checkout), or
    ``python -m embedlab``."""
    import os
    import shutil
    import sys
    from pathlib import PurePath

    argv0 = sys.argv[0] if sys.argv else ""
    typed = os.environ.get("EMBEDLAB_PROGRAM")  # a process 'train --nproc' started
    if typed:
        return typed
    if PurePath(argv0).parts[-2:] == ("embedlab", "__main__.py"):
        # the interpreter that ran it: the shell's python may be none, or one without embedlab
        on_path = shutil.which("python")
        same = on_path is not None and os.path.abspath(on_path) == os.path.abspath(sys.executable)
        return f"{'python' if same else shlex.quote(sys.executable)} -m embedlab"
    if os.path.basename(argv0) != "embedlab":
        return "embedlab"  # called in process (a test, a notebook): the command's usual name
    found = shutil.which("embedlab")
    same = found is not None and os.path.realpath(found) == os.path.realpath(argv0)
    return "embedlab" if same else shlex.quote(argv0)


def _result(run: TrainingRun, finished: bool) -> TrainResult:
    s = run.state
    return TrainResult(run.run_dir, s.step, s.words_seen, s.last_loss, s.train_seconds,
                       finished, run.vocab, run.engine.input_vectors, run.cfg)


def _saved(step: int) -> str:
    return f"checkpoints up to step {step} are intact" if step > 0 else "no checkpoint was saved"


def _diverged(run: TrainingRun, loss: float, saved_step: int) -> InputError:
    return diverged(run.state.step, loss, saved_step, divergence_fix(run))
