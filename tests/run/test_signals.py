"""SignalFlag: signals only set a flag; handlers are restored; exit codes 130/143. Ctrl-C held
back during start-up imports."""

from __future__ import annotations

import os
import signal
import time

import pytest

from embedlab.errors import TrainingInterrupted
from embedlab.run.signals import SignalFlag, deferred_interrupt, exit_code_for, interrupted


def test_exit_codes() -> None:
    assert exit_code_for(signal.SIGINT) == 130
    assert exit_code_for(signal.SIGTERM) == 143


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_flag_set_not_raised_and_restored(sig: int, capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(sig)
    with SignalFlag() as flag:
        assert not flag and flag.signum is None
        os.kill(os.getpid(), sig)  # delivered before the next bytecode in the main thread
        assert flag and flag.signum == sig
        os.kill(os.getpid(), signal.SIGTERM)  # a second signal does not change the first
        assert flag.signum == sig and flag.count == 2
    assert signal.getsignal(sig) is before
    err = capsys.readouterr().err
    assert "finishing the current step and saving" in err and "still saving" in err
    # not a terminal: no progress bar to end, so no empty line before the message
    assert err.startswith(f"embedlab: {signal.Signals(sig).name} received; ")


def test_interrupted_message() -> None:
    exc = interrupted(signal.SIGTERM, 1200)
    assert isinstance(exc, TrainingInterrupted)
    assert str(exc) == "saved step 1200 — re-run the same command to resume"
    assert exc.exit_code == 143
    assert not isinstance(interrupted(signal.SIGINT, 5), KeyboardInterrupt)  # the command's


def test_the_saved_step_message_leaves_out_flags_that_act_once() -> None:
    """--restart or --from typed again would start over, or go back, once more."""
    from embedlab.errors import acting_once, messages_for

    with acting_once("--restart"):
        assert str(interrupted(signal.SIGTERM, 7)) == (
            "saved step 7 — re-run the same command without --restart to resume")
    with acting_once("--restart", "--from"), messages_for("python"):
        assert str(interrupted(signal.SIGTERM, 7)) == (
            "saved step 7 — call embedlab.train again with the same arguments but without "
            "restart=True and from_checkpoint to resume")
    assert str(interrupted(signal.SIGTERM, 7)).endswith("re-run the same command to resume")


def test_ctrl_c_in_a_python_call_is_a_keyboard_interrupt_too() -> None:
    from embedlab.errors import messages_for

    with messages_for("python"):
        exc = interrupted(signal.SIGINT, 1200)
        assert isinstance(exc, KeyboardInterrupt) and isinstance(exc, TrainingInterrupted)
        assert str(exc) == ("saved step 1200 — call embedlab.train again with the same "
                            "arguments to resume")
        assert not isinstance(interrupted(signal.SIGTERM, 5), KeyboardInterrupt)
        early = interrupted(signal.SIGINT, 0, saved=False)  # before the first step, too
        assert isinstance(early, KeyboardInterrupt) and early.exit_code == 130


def test_deferred_interrupt_holds_ctrl_c_until_the_block_ends() -> None:
    # torch's C++ import of numpy swallows a KeyboardInterrupt raised inside it, leaving numpy
    # half-initialised; the start-up imports run in this block instead.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    reached_end = False
    with pytest.raises(KeyboardInterrupt), deferred_interrupt():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)  # the handler runs here, between bytecodes
        reached_end = True
    assert reached_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_deferred_interrupt_without_ctrl_c_changes_nothing() -> None:
    with deferred_interrupt():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_deferred_interrupt_leaves_an_ignored_sigint_ignored() -> None:
    # a background job started by a shell ignores SIGINT; that choice is not ours to undo
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with deferred_interrupt():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("theirs", [signal.SIG_IGN, lambda signum, frame: None],
                         ids=["nohup", "a program's own"])
def test_a_sighup_handler_that_is_not_the_default_is_left_alone(theirs: object) -> None:
    # a program's own SIGHUP handler (a log reopened on logrotate's signal) was taken over, and
    # its next SIGHUP stopped training with exit status 129
    before = signal.signal(signal.SIGHUP, theirs)  # type: ignore[arg-type]
    try:
        with SignalFlag():
            assert signal.getsignal(signal.SIGHUP) is theirs
    finally:
        signal.signal(signal.SIGHUP, before)


def test_an_ignored_sigint_stays_ignored_while_training() -> None:
    """A background job of a script ignores SIGINT, so the terminal's Ctrl-C for the script
    does not stop it: the training loop's handler is not put in its place either."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with SignalFlag() as flag:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            assert not flag
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_set_up_signals_raise_and_leave_their_handlers_as_found() -> None:
    from embedlab.run.signals import Terminated, terminate_as_interrupt

    with pytest.raises(Terminated) as stopped, terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises first
    assert stopped.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
