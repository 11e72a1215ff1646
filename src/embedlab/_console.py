"""The ``embedlab`` command's entry point (and ``python -m embedlab``'s).

It imports the command line itself, so that a Ctrl-C in the first tenth of a second, while
click, rich and the commands' modules load, ends with one line and exit status 130 instead of
Python's traceback of an import: nothing of any run has been touched yet.
"""

from __future__ import annotations

import sys


def run() -> None:
    """Load :mod:`embedlab.cli` and run its :func:`~embedlab.cli.run`."""
    try:
        from embedlab.cli import run as run_command
    except KeyboardInterrupt:
        sys.stderr.write("embedlab: stopped by SIGINT while starting; nothing was done\n")
        sys.stderr.flush()
        raise SystemExit(130) from None
    run_command()
