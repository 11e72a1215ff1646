"""``embedlab train --nproc N``: the N processes of one run on this machine.

They are started as torchrun starts them — the same command, with ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set — and then find
each other as under torchrun (:mod:`embedlab.training.distributed`). Launching them here rather
than through torchrun keeps the command's contract: process 0's exit status (2 for a refusal,
143 after SIGTERM), and one line where torchrun adds its own report and traceback of a failed
worker.

The launcher answers for its processes:

- they are in a process group of their own, and a signal for the command (Ctrl-C, which the
  terminal sends to the launcher's group; SIGTERM from a scheduler, ``timeout`` or ``kill --
  -PGID``; SIGINT sent to its pid) reaches each process once, through the launcher;
- they end with it: a launcher killed outright (SIGKILL) sends them SIGTERM through the
  kernel (``PR_SET_PDEATHSIG``), on which they save and stop as on any SIGTERM;
- once process 0 has ended, or another process failed, the others have the step's time limit
  and :data:`GRACE` seconds more to end by themselves (a lost process stops the rest within the
  step's limit); one that is still there then (stopped, hung) gets SIGTERM, and SIGKILL
  :data:`GRACE` seconds later, so the command always returns.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from embedlab.training.launched import LAUNCHER_ARGV, LAUNCHER_PID

if TYPE_CHECKING:
    from embedlab.errors import InputError

#: seconds beyond the step's time limit that the launcher waits for a process to end by itself,
#: and then between its SIGTERM and its SIGKILL
GRACE = 30.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
#: the command's name as the user typed it (``embedlab``), for the processes it starts: they
#: run as ``python -m embedlab``, which their hints would otherwise name
PROGRAM_NAME = "EMBEDLAB_PROGRAM"


def _typed_program() -> str:
    from embedlab.training.loop import _program

    return _program()


def run_processes(nproc: int, args: Sequence[str]) -> int:
    """Run ``embedlab ARGS`` as ``nproc`` processes of one run; process 0's exit status (or,
    when it succeeded, the first failure of another that the launcher did not stop)."""
    from embedlab.training.distributed import step_timeout

    port = _free_port()
    cores = max(1, len(os.sched_getaffinity(0)) // nproc)
    procs: list[subprocess.Popen[bytes]] = []
    received: list[int] = []

    def pass_on(signum: int, frame: object) -> None:
        received.append(signum)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    # SIGHUP too (a closed terminal): each process saves as for SIGTERM, and this one waits.
    # A signal this command ignores (nohup's SIGHUP, a script's background job's SIGINT) stays
    # ignored, here and so in the processes, which inherit it so.
    before = {sig: signal.signal(sig, pass_on)
              for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
              if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        for rank in range(nproc):
            env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
                   "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                   "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(cores)),
                   LAUNCHER_PID: str(os.getpid()), LAUNCHER_ARGV: json.dumps(sys.argv),
                   # the name the user typed, for the hints the processes print
                   PROGRAM_NAME: _typed_program()}
            procs.append(subprocess.Popen([sys.executable, "-m", "embedlab", *args], env=env,
                                          process_group=0))
        stopped = _wait(procs, step_timeout() + GRACE)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    codes = [_status(proc.wait()) for proc in procs]
    if received and procs[0].returncode == -received[0]:
        # process 0 ended by the signal's default action: it came before the process could
        # handle it (Python starting, torch importing), so it trained and saved nothing
        print(f"embedlab: stopped by {signal.Signals(received[0]).name} before training "
              "began; the run's checkpoints are as they were — re-run the same command",
              file=sys.stderr, flush=True)
    if signal.SIGINT not in received:  # a SIGINT sent to one of the processes alone
        from embedlab.run.signals import sigint_came_elsewhere

        sigint_came_elsewhere()
    return codes[0] or next((code for rank, code in enumerate(codes)
                             if code and rank not in stopped), 0)


def _wait(procs: Sequence[subprocess.Popen[bytes]], patience: float) -> set[int]:
    """Wait for every process; once process 0 has ended or another failed, stop those still
    there after ``patience`` seconds (SIGTERM, then SIGKILL). Returns the ranks stopped so."""
    deadline: float | None = None
    stopped: set[int] = set()
    killing = False
    while True:
        codes = [proc.poll() for proc in procs]
        if all(code is not None for code in codes):
            return stopped
        now = time.monotonic()
        if deadline is None and (codes[0] is not None or any(codes)):
            deadline = now + patience
        if deadline is not None and now >= deadline:
            left = [rank for rank, code in enumerate(codes) if code is None]
            if not killing:
                print(f"embedlab: process{'es' if len(left) > 1 else ''} "
                      f"{', '.join(map(str, left))} did not end within {patience:.0f} s of the "
                      "run's end; stopping them", file=sys.stderr, flush=True)
            for rank in left:
                with contextlib.suppress(ProcessLookupError):
                    if killing:
                        procs[rank].kill()
                    else:  # a stopped process must run to take its SIGTERM
                        procs[rank].send_signal(signal.SIGCONT)
                        procs[rank].send_signal(signal.SIGTERM)
                stopped.add(rank)
            killing, deadline = True, now + GRACE
        time.sleep(0.1)


def end_with_launcher() -> None:
    """In a process ``--nproc`` started (``LAUNCHER_PID`` set), first thing: ask the kernel for
    SIGTERM when the launcher dies, and stop at once if it already has. Done here rather than
    between fork and exec, where Python code is unsafe in a process with threads."""
    launcher = os.environ.get(LAUNCHER_PID, "")
    if not launcher.isdigit():
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != int(launcher):
        os.kill(os.getpid(), signal.SIGTERM)


def _status(returncode: int) -> int:
    """A child's exit status as a shell reports it (128 + N for a child killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def _free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, for process 0's rendezvous store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def uneven_split(size: int, m: int) -> InputError | None:
    """The refusal of ``size`` processes sharing steps of ``m`` (> 1) micro-batches that they
    cannot split evenly; None where they can. The launcher of ``--nproc`` says it before it
    starts any process, where ``--micro-batches`` is given."""
    if m % size == 0:
        return None
    from embedlab.errors import InputError, spell

    return InputError(f"{size} processes share a step of {m} micro-batches, which they cannot "
                      f"split evenly; pass "
                      f"{spell('--micro-batches', max(size, (m + size - 1) // size * size))} "
                      f"(a multiple of {size}; keep it × {spell('--batch-size')} near 2048) or "
                      "start a number of processes that divides it")
