"""One run trained by the processes torchrun starts: who writes, what they exchange, when they stop.

``torchrun --nproc-per-node N -m embedlab -- train ...`` starts N copies of the command. They
find each other through torchrun's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``) over gloo and train one run in synchronous steps of ``--micro-batches M``
micro-batches (:mod:`embedlab.engines.microbatch`): after every step each process holds the
parameters one process would hold, bit for bit. The cuda engine's processes exchange their
micro-batches over NCCL where each has a GPU of its own
(:func:`embedlab.engines.cuda_engine.exchange_world`); everything else goes over gloo.

The run folder belongs to process 0 ("rank 0"). It takes the lock, resolves the run (new,
resumed, ``--restart``, ``--from``), checks the input, evaluates, and writes config, status,
summaries and checkpoints. The other processes write nothing. They receive the resolved config,
the training state and the parameters from rank 0, so they need the corpus but not the run
folder; and at each save they compare the sha256 of their parameters with rank 0's.

Beside the steps' own exchange, the processes exchange:

* before anything is written: their arguments (a process started with other flags is
  refused, on every process); then, once rank 0 has set the run up, whether each other process
  could set up its part (a corpus missing on one machine is refused before rank 0 writes);
* after every step: whether a process was signalled, and whether rank 0's clock says a
  checkpoint is due, so that all stop, or save, at the same step;
* at each save: the sha256 of every process's parameters.

A step's exchange waits at most :data:`STEP_TIMEOUT` seconds. While rank 0 alone works
(preparing a corpus, saving, evaluating) the others wait as long as it takes, up to
:data:`PATIENT_TIMEOUT`, but only while rank 0 is heard from: it raises a counter in the run's
rendezvous store every :data:`BEAT_SECONDS` from a thread of its own, and a process that waits
stops the run once the counter has not moved for the step's time limit (a rank 0 that hangs,
or a link that breaks silently). A process that dies closes its connections, and the others
stop at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.errors import (
    InputError,
    ProcessLost,
    TrainingInterrupted,
    import_torch,
    said_by_another_process,
)

if TYPE_CHECKING:
    pass

#: seconds a step's exchange waits for the other processes before the run stops
#: (``EMBEDLAB_STEP_TIMEOUT`` sets another)
STEP_TIMEOUT = 60
#: seconds the other processes wait while rank 0 alone works (set-up, saves, evaluation)
PATIENT_TIMEOUT = 4 * 3600
#: the stop code of a stop that is not a signal (an ``on_progress`` callback raised on rank 0)
CALLBACK_STOP = 255
#: seconds between two of rank 0's heartbeats (see the module's docstring)
BEAT_SECONDS = 1.0
_BEATS_KEY = "embedlab/rank0-alive"

_current: Group | None = None
_sigterm_before: Any = None  # SIGTERM's handler before finish_exit


def own_gpu() -> bool:
    """Whether this process has a GPU of its own: torchrun started no more processes on this
    machine than it has CUDA devices (NCCL refuses two processes on one GPU)."""
    import torch

    if os.environ.get("EMBEDLAB_CUDA_INTERPRET") or not torch.cuda.is_available():
        return False
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    return local.isdigit() and 0 < int(local) <= torch.cuda.device_count()


def launched_by_torchrun() -> bool:
    """Whether torchrun (or another launcher of torch.distributed) started this process, as
    one of any number (``--nproc-per-node 1`` too)."""
    return "RANK" in os.environ and "MASTER_ADDR" in os.environ


def launched_size() -> int:
    """The number of processes torchrun started for this run (1 without torchrun)."""
    if "RANK" not in os.environ or "MASTER_ADDR" not in os.environ:
        return 1
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def launched_rank() -> int:
    """This process's rank among those torchrun started (0 without torchrun)."""
    try:
        return int(os.environ.get("RANK", "0")) if launched_size() > 1 else 0
    except ValueError:
        return 0


#: seconds a process waits for the others to join before it says so
JOIN_NOTICE_SECONDS = 15.0


def _say_waiting(where: str) -> None:
    with contextlib.suppress(OSError):
        print(f"embedlab: process {launched_rank()} of {launched_size()} is waiting for the "
              f"run's other processes at {where} (started with the same command on every "
              "machine?)", file=sys.stderr, flush=True)


#: the longest wait ``EMBEDLAB_STEP_TIMEOUT`` gives (a year: "never" in practice, and well
#: inside what a ``timedelta`` and the store's millisecond timeouts hold)
MAX_STEP_TIMEOUT = 365 * 24 * 3600.0


def step_timeout() -> float:
    """Seconds a step's exchange waits: :data:`STEP_TIMEOUT`, or ``EMBEDLAB_STEP_TIMEOUT``
    (``inf`` or any larger value waits :data:`MAX_STEP_TIMEOUT`)."""
    given = os.environ.get("EMBEDLAB_STEP_TIMEOUT", "")
    try:
        value = float(given) if given else STEP_TIMEOUT
    except ValueError:
        value = math.nan
    if math.isnan(value) or value <= 0:
        raise InputError(f"EMBEDLAB_STEP_TIMEOUT must be a number of seconds > 0, got "
                         f"{given!r}; unset it for 60, or pass inf to wait as long as it takes"
                         ) from None
    return min(value, MAX_STEP_TIMEOUT)


def current() -> Group | None:
    """The group this process trains in, while :func:`joined` holds it (None: one process)."""
    return _current


@contextlib.contextmanager
def joined() -> Iterator[Group | None]:
    """Join the processes torchrun started (None when it started one, or none), and leave them
    when the block ends."""
    global _current
    if launched_size() == 1:
        yield None
        return
    # torch's C++ warnings print a stack trace each: a launcher that dies takes the
    # rendezvous store with it, and every heartbeat and exchange then printed ~20 lines before
    # the run's own one-line error. Errors still show; a value the user set is kept. Read when
    # torch loads, so set before the first import.
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    group = Group.join()
    _current = group
    lost = False
    try:
        yield group
    except ProcessLost:
        lost = True
        raise
    finally:
        _current = None
        group.leave(lost=lost)
        _restore_sigterm()


class Group:
    """This process's place among the run's processes, and the exchanges they make.

    Where the others wait while rank 0 works alone (it saves, evaluates, closes a log window,
    opens its writers), they wait as long as rank 0's heartbeat moves (up to
    :data:`PATIENT_TIMEOUT`), and rank 0, which comes last, with the step's time limit
    (``leader_last``): a process that hangs meanwhile still stops the run within that limit.
    """

    def __init__(self, rank: int, size: int, step_group: Any, gpu_group: Any = None) -> None:
        self.rank, self.size = rank, size
        self.step_group = step_group  # the process group of the steps' exchanges
        # NCCL between the processes' GPUs, where every process has one of its own (None:
        # the cuda engine's micro-batches go through host memory over step_group)
        self.gpu_group = gpu_group
        self.released = False  # rank 0 has sent the run to the others (handshake.release)
        # rank 0's heartbeat, which it sends and the others read while they wait for it (None:
        # no store to put it in; the others then wait up to PATIENT_TIMEOUT)
        self._heart: _Heartbeat | None = None
        self._store: Any = None

    @classmethod
    def join(cls) -> Group:
        import_torch("training with torchrun")
        import torch.distributed as dist

        where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
        limit = step_timeout()  # a bad EMBEDLAB_STEP_TIMEOUT is its own error, not the network's
        # a process whose partners never come waits up to PATIENT_TIMEOUT: say so, once
        notice = threading.Timer(JOIN_NOTICE_SECONDS, _say_waiting, (where,))
        notice.daemon = True
        notice.start()
        try:
            dist.init_process_group("gloo", timeout=timedelta(seconds=PATIENT_TIMEOUT))
            steps = dist.new_group(backend="gloo", timeout=timedelta(seconds=limit))
        except (RuntimeError, ValueError) as exc:
            why = _first_line(exc)
            if "listen" in why or "EADDRINUSE" in why or "ddress already in use" in why:
                raise InputError(f"cannot open the run's rendezvous at {where}: the port is in "
                                 f"use by another program ({why}); pass a free port (torchrun's "
                                 "--master-port, or --rdzv-endpoint HOST:PORT)") from None
            raise InputError(f"cannot join the other processes of the run at {where} ({why}); "
                             "check torchrun's --rdzv-endpoint and that every machine can "
                             "reach it") from None
        finally:
            notice.cancel()
        group = cls(dist.get_rank(), dist.get_world_size(), steps)
        # decided here, where every process is, as creating a group takes all of them: a
        # process whose machine has fewer GPUs than processes makes every process do without
        if group._max([0 if own_gpu() and dist.is_nccl_available() else 1])[0] == 0:
            # an exchange is waited for with the step's limit (World.all_gather), which raises
            # the run's one-line error; NCCL's watchdog, which would end the process without
            # it, is given twice as long
            group.gpu_group = dist.new_group(backend="nccl",
                                             timeout=timedelta(seconds=2 * step_timeout()))
        store = _heartbeat_store()
        # every process reaches the store, or none uses it: a counter that only some read and
        # rank 0 could not raise would stop a healthy run
        if group._max([0 if store is not None else 1])[0] == 0:
            group._store = store
            if group.leader:
                group._heart = _Heartbeat(store)
        return group

    def leave(self, *, lost: bool = False) -> None:
        """Close the group; ``lost``: the run lost a process, and the group is left as it is —
        closing it would wait for the exchange in flight, which waits for the lost process
        (the command's exit ends its threads)."""
        import torch.distributed as dist

        if self._heart is not None:
            self._heart.stop()
        if lost:
            return
        with contextlib.suppress(Exception):  # a broken group has nothing left to close
            dist.destroy_process_group()

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def _exchange(self, op: Callable[[bool], Any], *, leader_last: bool = False,
                  patient: bool = True) -> None:
        """Run the collective ``op(async_op)``; see the class docstring for ``leader_last``.
        ``patient``: an exchange of the default group, which may wait for rank 0's work alone;
        the other processes wait for it as long as rank 0 is heard from."""
        with lost_on_failure():
            if leader_last and self.leader:
                op(True).wait(timedelta(seconds=step_timeout()))
            elif patient and not self.leader and self._store is not None:
                self._wait_hearing_leader(op(True))
            else:
                op(False)

    def _wait_hearing_leader(self, work: Any) -> None:
        """Until ``work`` is done, as long as rank 0's heartbeat moves: checked every second,
        it may stand still for the step's time limit. The naps between looks at ``work`` double
        from 0.2 ms to 20 ms, so that a short wait (a log window) ends at most about twice as
        late and a long one at most 20 ms late."""
        limit = max(step_timeout(), 3 * BEAT_SECONDS)  # a few beats, whatever the step's limit
        beats, heard = self._beats(work), time.monotonic()
        check, nap = heard + BEAT_SECONDS, 0.0002
        while not work.is_completed():
            time.sleep(nap)
            nap = min(2 * nap, 0.02)
            now = time.monotonic()
            if now < check:
                continue
            check = now + BEAT_SECONDS
            latest = self._beats(work)
            if latest is None:  # the exchange completed as the store went away
                break
            if latest != beats:
                beats, heard = latest, now
            elif now - heard > limit:
                raise ProcessLost(f"another process of the run stopped or cannot be reached "
                                  f"(process 0 not heard from for {limit:g} s while it worked "
                                  "alone)", 1)
        work.wait()  # the exchange's own failure, if it failed

    def _beats(self, work: Any) -> int | None:
        """Rank 0's heartbeat count; None when the store cannot be reached but ``work`` has
        completed meanwhile (process 0, which holds the store when the processes were started
        by hand, may end as soon as the exchange is done)."""
        try:
            return int(self._store.add(_BEATS_KEY, 0))
        except RuntimeError:
            if work.is_completed():
                return None
            raise

    # ---- the exchanges (no pickle: bytes travel as uint8 tensors) ------------------------
    def broadcast_bytes(self, data: bytes = b"") -> bytes:
        """Rank 0's ``data``, on every process."""
        import torch
        import torch.distributed as dist

        size = torch.tensor([len(data)], dtype=torch.int64)
        self._exchange(lambda a: dist.broadcast(size, 0, async_op=a))
        buffer = torch.zeros(max(1, int(size)), dtype=torch.uint8)
        if self.leader and data:
            buffer[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        self._exchange(lambda a: dist.broadcast(buffer, 0, async_op=a))
        return buffer.numpy().tobytes()[:int(size)]

    def gather_bytes(self, data: bytes, *, leader_last: bool = False) -> list[bytes]:
        """Every process's ``data``, in rank order, on every process."""
        import torch
        import torch.distributed as dist

        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.size)]
        mine = torch.tensor([len(data)], dtype=torch.int64)
        self._exchange(lambda a: dist.all_gather(sizes, mine, async_op=a),
                       leader_last=leader_last)
        longest = max(1, max(int(s) for s in sizes))
        padded = torch.zeros(longest, dtype=torch.uint8)
        if data:
            padded[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        got = [torch.zeros(longest, dtype=torch.uint8) for _ in range(self.size)]
        self._exchange(lambda a: dist.all_gather(got, padded, async_op=a),
                       leader_last=leader_last)
        return [g.numpy().tobytes()[:int(s)] for g, s in zip(got, sizes, strict=True)]

    def broadcast_arrays(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Rank 0's arrays into every process's ``arrays`` (the same names, shapes, dtypes)."""
        import torch
        import torch.distributed as dist

        for name in sorted(arrays):
            tensor = torch.from_numpy(np.ascontiguousarray(arrays[name]))

            def send(a: bool, t: torch.Tensor = tensor) -> Any:
                return dist.broadcast(t, 0, async_op=a)

            self._exchange(send)

    def _max(self, values: list[int], *, group: Any = None, leader_last: bool = False
             ) -> list[int]:
        import torch
        import torch.distributed as dist

        mine = torch.tensor(values, dtype=torch.int64)
        self._exchange(lambda a: dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=group,
                                                 async_op=a), leader_last=leader_last,
                       patient=group is None)
        return [int(v) for v in mine]

    def begin(self, stop: int) -> int:
        """Before the first step, once rank 0 has opened its writers: the stop code of a
        process signalled meanwhile (0: train)."""
        return self._max([stop], leader_last=True)[0]

    def agree(self, stop: int, due: bool) -> tuple[int, bool]:
        """After a step: the stop code (a signal number, :data:`CALLBACK_STOP`, or 0) and
        whether a save is due (rank 0's clock decides), the same on every process. Every
        process is at the step, so it waits with the step's time limit."""
        got = self._max([stop, int(due and self.leader)], group=self.step_group)
        return got[0], bool(got[1])

    def wait_for_leader(self) -> None:
        """The others wait while rank 0 works alone (a log window, an evaluation)."""
        import torch.distributed as dist

        self._exchange(lambda a: dist.barrier(async_op=a), leader_last=True)

    def check_replicas(self, tensors: Mapping[str, np.ndarray], step: int) -> None:
        """At a save: every process's parameters must be rank 0's, bit for bit."""
        digests = self.gather_bytes(parameters_sha256(tensors).encode(), leader_last=True)
        other = next((r for r, d in enumerate(digests) if d != digests[0]), None)
        if other is not None:
            raise ProcessLost(f"the parameters of process {other} differ from process 0's at "
                              f"step {step} (sha256 {digests[other][:12].decode()}… vs "
                              f"{digests[0][:12].decode()}…): a bug in embedlab, please report "
                              "it with the command", 1)


class _Heartbeat:
    """Rank 0 says it is alive: a thread raises a counter in the run's rendezvous store every
    :data:`BEAT_SECONDS`, whatever the main thread is doing (it sleeps and waits for the store
    without the GIL). It stops with the process, or when the store is gone."""

    def __init__(self, store: Any) -> None:
        self._store, self._stop = store, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="embedlab-heartbeat")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(BEAT_SECONDS):
            # a store that fails once may answer the next time; a process that keeps failing
            # to beat is what the others' limit is for
            with contextlib.suppress(Exception):
                self._store.add(_BEATS_KEY, 1)

    def stop(self) -> None:
        self._stop.set()


def _heartbeat_store() -> Any:
    """A connection of this process's own to the run's rendezvous store (torchrun's
    ``MASTER_ADDR``:``MASTER_PORT``), whose operations wait at most the step's time limit;
    None where it cannot be made."""
    import torch.distributed as dist

    limit = step_timeout()  # refused in its own words, not read as "no heartbeat"
    try:
        return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                             is_master=False, timeout=timedelta(seconds=limit),
                             wait_for_workers=False)
    except (KeyError, ValueError, RuntimeError):
        return None


def parameters_sha256(tensors: Mapping[str, np.ndarray]) -> str:
    """One sha256 over the parameters, by name."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(np.ascontiguousarray(tensors[name]).data)
    return h.hexdigest()


@contextlib.contextmanager
def lost_on_failure() -> Iterator[None]:
    """An exchange that fails (a process died, a link broke, a wait ran out) stops the run."""
    try:
        yield
    except RuntimeError as exc:  # gloo's errors (torch.distributed.DistBackendError among them)
        raise ProcessLost(f"another process of the run stopped or cannot be reached "
                          f"({_first_line(exc)})", 1) from None


def _first_line(exc: BaseException) -> str:
    """The gist of a library's error: its first sentence, without a ``[source.cc:123]``
    prefix."""
    lines = str(exc).strip().splitlines()
    text = re.sub(r"^\[[^\]]*\]\s*", "", lines[0]) if lines else type(exc).__name__
    return text.split(". ")[0][:200]


def _restore_sigterm() -> None:
    """Put back the SIGTERM handler :func:`finish_exit` replaced (as the group is left)."""
    global _sigterm_before
    if _sigterm_before is not None:
        signal.signal(signal.SIGTERM, _sigterm_before)
        _sigterm_before = None


def finish_exit() -> None:
    """Let this process end its exit (status, its one line) after the run lost a process:
    torchrun sends the survivors SIGTERM once one of them has died. :func:`joined` puts the
    handler back as it leaves the group."""
    global _sigterm_before
    if threading.current_thread() is threading.main_thread() and _sigterm_before is None:
        from embedlab.run.signals import set_up_handler

        before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # the set-up's raising handler ends with its block, inside this group's
        _sigterm_before = signal.SIG_DFL if set_up_handler(before) else before


@contextlib.contextmanager
def echoed_once(group: Group) -> Iterator[None]:
    """Mark the refusals and stops raised in the block, whose line every process prints alike
    ("saved step N", a refusal), as printed by another process unless this one is the first
    on its machine: the command then exits without printing it, and each machine's log says
    it once. A lost process is said by each (what each saw differs)."""
    try:
        yield
    except (InputError, TrainingInterrupted) as exc:
        if not isinstance(exc, ProcessLost) and said_by_another_process():
            exc.printed_by_another = True
        raise
