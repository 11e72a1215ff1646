"""``embedlab train --nproc N``: the N processes of one run on this machine.

They are started as torchrun starts them — the same command, with ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set — and then find
each other as under torchrun (:mod:`embedlab.training.distributed`). Launching them here rather
than through torchrun keeps the command's contract: process 0's exit status (2 for a refusal,
143 after SIGTERM), and one line where torchrun adds its own report and traceback of a failed
worker.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence


def run_processes(nproc: int, args: Sequence[str]) -> int:
    """Run ``embedlab ARGS`` as ``nproc`` processes of one run; process 0's exit status (or,
    when it succeeded, the first failure of another)."""
    port = _free_port()
    cores = max(1, len(os.sched_getaffinity(0)) // nproc)
    procs = []
    for rank in range(nproc):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(cores))}
        procs.append(subprocess.Popen([sys.executable, "-m", "embedlab", *args], env=env))

    def pass_on(signum: int, frame: object) -> None:  # a scheduler's SIGTERM: to every process
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    # Ctrl-C reaches every process of the terminal's foreground group by itself
    before = {sig: signal.signal(sig, handler) for sig, handler in
              ((signal.SIGTERM, pass_on), (signal.SIGINT, signal.SIG_IGN))}
    try:
        codes = [_status(proc.wait()) for proc in procs]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return codes[0] or next((code for code in codes if code), 0)


def _status(returncode: int) -> int:
    """A child's exit status as a shell reports it (128 + N for a child killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def _free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, for process 0's rendezvous store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
