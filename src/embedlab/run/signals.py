"""Graceful stop: SIGINT/SIGTERM (and SIGHUP, a terminal or ssh connection that hangs up, unless
``nohup`` ignores it) only set a flag; the training loop checks it between steps.

The loop then saves a checkpoint and raises :class:`~embedlab.errors.TrainingInterrupted` with
:func:`exit_code_for` (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP: the shell convention
128 + signal).
A second signal while saving is noted and otherwise ignored: the save is atomic, and a
half-written save would be skipped on resume anyway; SIGKILL remains the hard stop.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any

from embedlab.errors import (
    TrainingInterrupted,
    TrainingKeyboardInterrupt,
    python_caller,
    resume_how,
    said_by_another_process,
    spell_name,
)

_Handler = Callable[[int, FrameType | None], Any] | int | None


def exit_code_for(signum: int) -> int:
    """The conventional exit status of a process stopped by ``signum`` (128 + signum)."""
    return 128 + int(signum)


def interrupted(signum: int, step: int, *, saved: bool = True,
                finished: bool = False) -> TrainingInterrupted:
    """The exception a loop raises after saving step ``step`` because of ``signum``.

    ``saved=False``: stopped before anything was trained or saved (a new run's first moments).
    ``finished``: a finished run given a larger --epochs, stopped before it trained on.
    """
    kind = TrainingKeyboardInterrupt if signum == signal.SIGINT and python_caller() else \
        TrainingInterrupted
    if not saved:
        return kind("stopped before training began; no checkpoint was saved",
                    exit_code_for(signum))
    if finished:
        return kind(f"stopped before training on: the run is as it was, finished at step "
                    f"{step}", exit_code_for(signum))
    return kind(f"saved step {step} — {resume_how()} to resume", exit_code_for(signum))


#: set by a launcher of processes (train --nproc) whose processes stopped for a SIGINT that it
#: did not get itself (a kill of one of them): it exits 130 without ending as SIGINT's
_NOT_OURS: list[bool] = []


def sigint_came_elsewhere() -> None:
    """Say that this process's exit status 130 is another process's SIGINT, not its own."""
    _NOT_OURS.append(True)


def end_as_interrupted() -> None:
    """End this process as SIGINT's default action would after its own clean exit (status 130;
    :func:`embedlab._console.end_by_sigint`), unless the SIGINT came to another process."""
    from embedlab._console import end_by_sigint

    if not _NOT_OURS:
        end_by_sigint()


def stopped_at_the_end(signum: int, step: int, *, finished: bool) -> TrainingInterrupted:
    """The exception of a Python call that a signal reached while it saved its end (the final
    checkpoint, the summaries): everything is saved, and the caller's program, asked to stop,
    stops (a notebook cell goes no further) rather than going on as if nothing came. Not
    ``finished``: the call stopped at its --max-steps, which a larger one trains on from."""
    kind = TrainingKeyboardInterrupt if signum == signal.SIGINT else TrainingInterrupted
    where = f"finished at step {step}" if finished else \
        f"saved step {step}, its {spell_name('--max-steps')} (a larger one trains on)"
    return kind(f"stopped by {signal.Signals(signum).name} as the call ended; {where}",
                exit_code_for(signum))


class SignalFlag:
    """Context manager: SIGINT/SIGTERM set :attr:`signum` instead of interrupting.

    Only the main thread can install handlers; elsewhere this is a no-op (the flag never
    rises). Previous handlers are restored on exit.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM,
                                                   signal.SIGHUP)) -> None:
        self.signals = signals
        self.signum: int | None = None
        self.count = 0
        self.raising = 0  # inside call_interruptibly: a SIGINT raises as well
        self._previous: dict[int, _Handler] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        first = self.signum is None
        if first:
            self.signum = signum
        # every process of the run gets the signal: one of them says so
        with contextlib.suppress(OSError):  # a terminal that hung up (SIGHUP) takes no more
            if first and not said_by_another_process():
                # a new line ends a terminal's progress bar (and its ^C); a log file has neither
                lead = "\n" if sys.stderr.isatty() else ""
                print(f"{lead}embedlab: {signal.Signals(signum).name} received; finishing the "
                      "current step and saving", file=sys.stderr, flush=True)
            elif not self.raising and not said_by_another_process():
                print("embedlab: still saving; the checkpoint is written atomically, please "
                      "wait", file=sys.stderr, flush=True)
        if self.raising and signum == signal.SIGINT:  # the caller's code runs: stop it too
            raise KeyboardInterrupt

    def __bool__(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> SignalFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                if sig == signal.SIGHUP and not (signal.getsignal(sig) == signal.SIG_DFL or
                                                 set_up_handler(signal.getsignal(sig))):
                    # nohup ignores it (the run goes on when the terminal hangs up), or a
                    # program calling embedlab.train has its own use for it
                    continue
                if sig == signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
                    # a background job of a script: the shell keeps the terminal's Ctrl-C
                    # from it, and so does the run
                    continue
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()


def call_interruptibly(function: Callable[[], object]) -> None:
    """Call ``function`` so that a Ctrl-C raises the :class:`SignalFlag` in place and then
    KeyboardInterrupt in it too: for a caller's own code run from the loop (``on_progress``),
    which a flag checked between steps cannot stop while it runs (a stuck plot, a notebook's
    "interrupt kernel"). The flag stops the run at the next step boundary even when that code
    swallows the KeyboardInterrupt. Where another handler is in place, a plain call. (No
    context manager: a signal between its entry and its block would leave the flag raising.)
    """
    flag = getattr(signal.getsignal(signal.SIGINT), "__self__", None) \
        if threading.current_thread() is threading.main_thread() else None
    if not isinstance(flag, SignalFlag):
        function()
        return
    before = flag.raising
    try:  # set inside: a signal at any point leaves the count as it was found
        flag.raising = before + 1
        function()
    finally:
        flag.raising = before


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C back during the block; raise KeyboardInterrupt when it ends.

    For the heavy imports at start-up. torch's C++ code imports numpy inside a catch-all that
    clears any Python error, so a KeyboardInterrupt landing there was swallowed and left numpy
    half-initialised: the run went on and died later with "module 'numpy' has no attribute
    'matrix'" (or trained to the end, ignoring the Ctrl-C). Only the default SIGINT handler
    is replaced: an ignored SIGINT (a background job) stays ignored, and a caller's own
    handler is left alone.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGTERM and SIGHUP too where they raise (terminate_as_interrupt)
    held = [sig for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
            if signal.getsignal(sig) in (signal.default_int_handler, _raise_terminated)]
    received: list[int] = []
    before = {sig: signal.signal(sig, lambda signum, frame: received.append(signum))
              for sig in held}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt if received[0] == signal.SIGINT else Terminated(received[0])


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP before the training loop takes the signals over (while a run is set
    up): it unwinds as Ctrl-C does, so that a half-made run is cleaned away and ``--restart``
    puts the old run back, instead of the process dying where it stands. The command exits
    with 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_as_interrupt(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)
                           ) -> Iterator[None]:
    """SIGTERM and SIGHUP (``signals``) raise :class:`Terminated` in the block, where their
    handler is the default one (an ignored SIGHUP, under nohup, stays ignored; a caller's own
    handler is left alone). The training loop's :class:`SignalFlag` takes them over while it
    trains."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, _raise_terminated) for sig in signals
              if signal.getsignal(sig) == signal.SIG_DFL}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if signal.getsignal(sig) is _raise_terminated:  # else another took it over since
                signal.signal(sig, handler)


def set_up_handler(handler: object) -> bool:
    """Whether ``handler`` is :func:`terminate_as_interrupt`'s, which belongs to its block
    only: code that saves a handler to put back later puts back the default instead."""
    return handler is _raise_terminated
