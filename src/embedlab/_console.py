"""The ``embedlab`` command's entry point (and ``python -m embedlab``'s).

It imports the command line itself, so that a Ctrl-C in the first tenth of a second, while
click, rich and the commands' modules load, ends with one line and exit status 130 instead of
Python's traceback of an import: nothing of any run has been touched yet.
"""

from __future__ import annotations

import sys


def run() -> None:
    """Load :mod:`embedlab.cli` and run its :func:`~embedlab.cli.run`."""
    _closed_streams_to_devnull()
    _unencodable_escaped()
    try:
        from embedlab.cli import run as run_command
    except KeyboardInterrupt:
        sys.stderr.write("embedlab: stopped by SIGINT while starting; nothing was done\n")
        sys.stderr.flush()
        end_by_sigint()
        raise SystemExit(130) from None
    except SystemExit as exc:  # the command line's own words for a Ctrl-C while it loads
        if exc.code == 130:
            end_by_sigint()
        raise
    except ImportError as exc:
        from embedlab.errors import out_of_memory_loading

        if not out_of_memory_loading(exc):
            raise
        sys.stderr.write("embedlab: error: out of memory while starting (a library could not "
                         "be loaded); free memory or raise the limit (ulimit -v), and re-run: "
                         "nothing was done\n")
        sys.stderr.flush()
        raise SystemExit(2) from None
    run_command()


def end_by_sigint() -> None:
    """End this process as SIGINT's default action would, once its Ctrl-C is said (its exit
    status would be 130): a shell running it in a loop, make or xargs then stop as well, which
    they do only for a child that a SIGINT ended (a status of 130 reads as a signal the child
    handled, and they go on). Not in a process that a launcher (``train --nproc``, torchrun)
    started, whose status the launcher reads. Standard library only: it runs before the
    command line has loaded."""
    import contextlib
    import os
    import signal

    from embedlab.training.launched import LAUNCHER_PID  # standard library only

    if LAUNCHER_PID in os.environ or "TORCHELASTIC_RUN_ID" in os.environ:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream that cannot take it has nothing to save
            stream.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)  # returns only where SIGINT is blocked: the exit follows


def _closed_streams_to_devnull() -> None:
    """A standard stream the shell closed (``>&-``, ``2>&-``, ``<&-``) is None in Python, and
    a command's first write or read of it was an AttributeError traceback (exit 1, after the
    work was done, or for a refusal that exits 2). Such a stream reads and writes
    ``/dev/null``, as the descriptor it would be given (the lowest free) is its own number."""
    import os

    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115


def _unencodable_escaped() -> None:
    """A stdout or stderr that cannot encode every character (``PYTHONIOENCODING=ascii``, a
    C locale's terminal) writes the others as ``\\xe9``, not a UnicodeEncodeError traceback
    for a word such as café or a table's ×."""
    import codecs

    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        try:
            utf = codecs.lookup(getattr(stream, "encoding", None) or "ascii").name.startswith(
                "utf")
        except LookupError:
            utf = False
        # a C locale's stdout is ASCII with surrogateescape, which still raises for a ×
        if (errors == "strict" or (errors == "surrogateescape" and not utf)) and \
                hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
