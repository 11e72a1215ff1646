"""User-facing errors.

Anything the user can fix (bad path, bad flag value, empty corpus...) is raised as
:class:`InputError`. The CLI prints it as one line ``embedlab: error: <message>`` and exits 2,
never with a traceback. The message names the problem *and* the fix.
"""

from __future__ import annotations

from typing import Any


class InputError(Exception):
    """A problem with the user's input; the message says what is wrong and what to do."""

    exit_code = 2


def diverged(step: int, loss: float, saved_step: int, fix: str) -> InputError:
    """A training loop's loss became non-finite at ``step``; raised before anything of that step
    is saved, so the checkpoints on disk (up to ``saved_step``) stay finite."""
    kept = f"checkpoints up to step {saved_step} are intact" if saved_step > 0 else \
        "no checkpoint was written"
    return InputError(f"training diverged at step {step}: the loss became {loss}; {kept}. {fix}")


class TrainingInterrupted(Exception):
    """Raised inside the trainer after a signal-triggered save; carries the exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def warn(message: str) -> None:
    """One line on stderr. Not warnings.warn, which tests turn into errors and users rarely see."""
    import sys

    print(f"embedlab: warning: {message}", file=sys.stderr, flush=True)


def import_torch(purpose: str) -> Any:
    """``import torch`` for ``purpose`` (e.g. "--engine torch"), or one line naming the extra.

    PyTorch is optional: ``pip install embedlab`` trains with the native engine and answers every
    query command without it; ``pip install "embedlab[torch]"`` adds the torch engine and linreg.
    """
    try:
        import torch
    except ImportError:
        raise InputError(f"{purpose} needs PyTorch, which is not installed; install it with "
                         "pip install 'embedlab[torch]'") from None
    return torch
