"""What a process that ``embedlab train --nproc N`` started finds in its environment: the
launcher's pid (:mod:`embedlab.training.launch` ends the process with it) and the command line
the user typed. Standard library only: the launcher imports it before anything else."""

from __future__ import annotations

import contextlib
import json
import os
import sys

#: the launcher's pid, in the environment of the processes it starts (end_with_launcher)
LAUNCHER_PID = "EMBEDLAB_LAUNCHER_PID"
#: the launcher's own command line (``--nproc N`` included), which env.json records
LAUNCHER_ARGV = "EMBEDLAB_LAUNCHER_ARGV"


def typed_argv() -> list[str]:
    """The command line the user typed: this process's, or for a process ``train --nproc``
    started, the launcher's."""
    typed = os.environ.get(LAUNCHER_ARGV) if os.environ.get(LAUNCHER_PID) else None
    if typed:
        with contextlib.suppress(ValueError):
            argv = json.loads(typed)
            if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
                return argv
    return list(sys.argv)


def launched_processes() -> int | None:
    """N for a process ``train --nproc N`` started, else None."""
    if not os.environ.get(LAUNCHER_PID):
        return None
    try:
        return int(os.environ.get("WORLD_SIZE", ""))
    except ValueError:
        return None
