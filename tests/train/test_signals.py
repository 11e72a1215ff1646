"""SignalFlag: signals only set a flag; handlers are restored; exit codes 130/143."""

from __future__ import annotations

import os
import signal

import pytest

from embedlab.errors import TrainingInterrupted
from embedlab.train.signals import SignalFlag, exit_code_for, interrupted


def test_exit_codes() -> None:
    assert exit_code_for(signal.SIGINT) == 130
    assert exit_code_for(signal.SIGTERM) == 143


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
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


def test_interrupted_message() -> None:
    exc = interrupted(signal.SIGTERM, 1200)
    assert isinstance(exc, TrainingInterrupted)
    assert str(exc) == "saved step 1200 — re-run the same command to resume"
    assert exc.exit_code == 143
