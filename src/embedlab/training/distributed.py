"""One run trained by the processes torchrun starts: who writes, what they exchange, when they stop.

``torchrun --nproc-per-node N -m embedlab -- train ...`` starts N copies of the command. They
find each other through torchrun's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``) over gloo and train one run in synchronous steps of ``--micro-batches M``
micro-batches (:mod:`embedlab.engines.microbatch`): after every step each process holds the
parameters one process would hold, bit for bit.

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

A step's exchange waits at most :data:`STEP_TIMEOUT` seconds; the others, which wait while
rank 0 alone works (preparing a corpus, saving, evaluating), :data:`PATIENT_TIMEOUT`. A process
that dies closes its connections, and the others stop at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import threading
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.errors import InputError, ProcessLost, import_torch

if TYPE_CHECKING:
    from embedlab.config import TrainConfig

#: seconds a step's exchange waits for the other processes before the run stops
#: (``EMBEDLAB_STEP_TIMEOUT`` sets another)
STEP_TIMEOUT = 60
#: seconds the other processes wait while rank 0 alone works (set-up, saves, evaluation)
PATIENT_TIMEOUT = 4 * 3600
#: the stop code of a stop that is not a signal (an ``on_progress`` callback raised on rank 0)
CALLBACK_STOP = 255

_current: Group | None = None


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


def step_timeout() -> float:
    """Seconds a step's exchange waits: :data:`STEP_TIMEOUT`, or ``EMBEDLAB_STEP_TIMEOUT``."""
    given = os.environ.get("EMBEDLAB_STEP_TIMEOUT", "")
    try:
        return float(given) if given and float(given) > 0 else STEP_TIMEOUT
    except ValueError:
        raise InputError(f"EMBEDLAB_STEP_TIMEOUT must be a number of seconds, got {given!r}; "
                         "unset it for 60") from None


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
    group = Group.join()
    _current = group
    try:
        yield group
    finally:
        _current = None
        group.leave()


class Group:
    """This process's place among the run's processes, and the exchanges they make."""

    def __init__(self, rank: int, size: int, steps: Any) -> None:
        self.rank, self.size = rank, size
        self.steps = steps  # the process group of the steps' exchange (STEP_TIMEOUT)
        self.released = False  # rank 0 has sent the run to the others (release)

    @classmethod
    def join(cls) -> Group:
        import_torch("training with torchrun")
        import torch.distributed as dist

        try:
            dist.init_process_group("gloo", timeout=timedelta(seconds=PATIENT_TIMEOUT))
            steps = dist.new_group(backend="gloo", timeout=timedelta(seconds=step_timeout()))
        except (RuntimeError, ValueError) as exc:
            raise InputError(f"cannot join the other processes of the run at "
                             f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} "
                             f"({_first_line(exc)}); check torchrun's --rdzv-endpoint and that "
                             "every machine can reach it") from None
        return cls(dist.get_rank(), dist.get_world_size(), steps)

    def leave(self) -> None:
        import torch.distributed as dist

        with contextlib.suppress(Exception):  # a broken group has nothing left to close
            dist.destroy_process_group()

    @property
    def leader(self) -> bool:
        return self.rank == 0

    # ---- the exchanges (no pickle: bytes travel as uint8 tensors) ------------------------
    def broadcast_bytes(self, data: bytes = b"") -> bytes:
        """Rank 0's ``data``, on every process."""
        import torch
        import torch.distributed as dist

        with lost_on_failure():
            size = torch.tensor([len(data)], dtype=torch.int64)
            dist.broadcast(size, 0)
            buffer = torch.zeros(max(1, int(size)), dtype=torch.uint8)
            if self.leader and data:
                buffer[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            dist.broadcast(buffer, 0)
        return buffer.numpy().tobytes()[:int(size)]

    def gather_bytes(self, data: bytes) -> list[bytes]:
        """Every process's ``data``, in rank order, on every process."""
        import torch
        import torch.distributed as dist

        with lost_on_failure():
            sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.size)]
            dist.all_gather(sizes, torch.tensor([len(data)], dtype=torch.int64))
            longest = max(1, max(int(s) for s in sizes))
            mine = torch.zeros(longest, dtype=torch.uint8)
            if data:
                mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            got = [torch.zeros(longest, dtype=torch.uint8) for _ in range(self.size)]
            dist.all_gather(got, mine)
        return [g.numpy().tobytes()[:int(s)] for g, s in zip(got, sizes, strict=True)]

    def broadcast_arrays(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Rank 0's arrays into every process's ``arrays`` (the same names, shapes, dtypes)."""
        import torch
        import torch.distributed as dist

        with lost_on_failure():
            for name in sorted(arrays):
                dist.broadcast(torch.from_numpy(np.ascontiguousarray(arrays[name])), 0)

    def agree(self, stop: int, due: bool) -> tuple[int, bool]:
        """After a step: the stop code (a signal number, :data:`CALLBACK_STOP`, or 0) and
        whether a save is due (rank 0's clock decides), the same on every process."""
        import torch
        import torch.distributed as dist

        mine = torch.tensor([stop, int(due and self.leader)], dtype=torch.int64)
        with lost_on_failure():  # with the step's time limit: every process is at the step
            dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=self.steps)
        return int(mine[0]), bool(mine[1])

    def check_replicas(self, tensors: Mapping[str, np.ndarray], step: int) -> None:
        """At a save: every process's parameters must be rank 0's, bit for bit."""
        digests = self.gather_bytes(parameters_sha256(tensors).encode())
        other = next((r for r, d in enumerate(digests) if d != digests[0]), None)
        if other is not None:
            raise ProcessLost(f"the parameters of process {other} differ from process 0's at "
                              f"step {step} (sha256 {digests[other][:12].decode()}… vs "
                              f"{digests[0][:12].decode()}…): a bug in embedlab, please report "
                              "it with the command; the saved checkpoints are intact", 1)

    def barrier(self) -> None:
        import torch.distributed as dist

        with lost_on_failure():
            dist.barrier()

    # ---- before training -----------------------------------------------------------------
    def agree_on_arguments(self, arguments: Mapping[str, Any]) -> None:
        """Refuse, on every process, a process started with other arguments than rank 0, or
        one that cannot read the corpus it names."""
        corpus = arguments.get("corpus")
        problem = ""
        if isinstance(corpus, str) and corpus not in ("demo", "text8") \
                and not os.path.exists(corpus):
            problem = (f"corpus {corpus} does not exist on {socket.gethostname()} (working "
                       f"folder {os.getcwd()}); put it at that path on every machine, or pass "
                       "an absolute path that every machine can read")
        mine = json.dumps({"arguments": arguments, "problem": problem}, sort_keys=True,
                          default=str)
        every = [json.loads(b) for b in self.gather_bytes(mine.encode())]
        for rank, got in enumerate(every):
            if got["arguments"] != every[0]["arguments"]:
                differ = _differing(every[0]["arguments"], got["arguments"])
                raise InputError(f"process {rank} of {self.size} was started with other "
                                 f"arguments than process 0 ({', '.join(differ)}); start every "
                                 "process with the same command")
        for rank, got in enumerate(every):
            if got["problem"]:
                raise InputError(f"process {rank} of {self.size}: {got['problem']}")

    def check_config(self, cfg: TrainConfig) -> None:
        """Refuse a run the processes cannot share: one step must split evenly among them."""
        from embedlab.errors import spell

        m = cfg.optim.micro_batches
        if m == 1:
            raise InputError(f"{self.size} processes share each step's micro-batches; pass "
                             f"{spell('--micro-batches', self.size)} (or a multiple of "
                             f"{self.size}) and keep it × {spell('--batch-size')} near 2048, "
                             f"e.g. {spell('--batch-size', 2048 // self.size)}")
        if cfg.engine != "torch":
            raise InputError(f"{self.size} processes train with the torch engine, not "
                             f"{cfg.engine}; pass {spell('--engine', 'torch')} (and "
                             f"{spell('--micro-batches', self.size)} or a multiple)")
        if m % self.size:
            raise InputError(f"{self.size} processes share a step of {m} micro-batch"
                             f"{'es' if m != 1 else ''}, which they cannot split evenly; pass "
                             f"{spell('--micro-batches', _multiple(m, self.size))} (a multiple "
                             f"of {self.size}; keep it × {spell('--batch-size')} near 2048) "
                             "or start a number of processes that divides it")

    @contextlib.contextmanager
    def leading(self) -> Iterator[None]:
        """Rank 0's set-up: a refusal before :meth:`release` is sent to the others, which
        refuse in the same words."""
        try:
            yield
        except BaseException as exc:
            if not self.released:
                message = str(exc) if isinstance(exc, InputError) else \
                    f"process 0 stopped before training ({type(exc).__name__}: {exc})"
                with contextlib.suppress(ProcessLost):
                    self.broadcast_bytes(json.dumps({"refused": message}).encode())
                self.released = True
            raise

    def release(self, run: Mapping[str, Any], tensors: Mapping[str, np.ndarray]) -> None:
        """Rank 0: send the run (``run``: JSON values) and its parameters to the others, wait
        for each to set up, and refuse if one could not."""
        shapes = {n: [list(a.shape), str(a.dtype)] for n, a in tensors.items()}
        self.broadcast_bytes(json.dumps({**run, "tensors": shapes}).encode())
        self.released = True
        self.broadcast_arrays(tensors)
        self._verdict("")

    def receive(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The others: the run rank 0 set up, and its parameters (or rank 0's refusal)."""
        run = json.loads(self.broadcast_bytes())
        if "refused" in run:
            raise InputError(run["refused"])
        tensors = {n: np.empty(shape, dtype=dtype) for n, (shape, dtype) in
                   run.pop("tensors").items()}
        self.broadcast_arrays(tensors)
        return run, tensors

    def ready(self, problem: str = "") -> None:
        """The others: whether this process could set its part of the run up."""
        self._verdict(problem)

    def _verdict(self, problem: str) -> None:
        problems = self.gather_bytes(problem.encode())
        for rank, text in enumerate(problems):
            if text:
                raise InputError(f"process {rank} of {self.size}: {text.decode()}")


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


def finish_exit() -> None:
    """Let this process end its exit (status, its one line) after the run lost a process:
    torchrun sends the survivors SIGTERM once one of them has died."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _multiple(m: int, n: int) -> int:
    return max(n, (m + n - 1) // n * n)


def _differing(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The keys (dotted) whose values differ between ``a`` and ``b``."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _differing(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: {va!r} vs {vb!r}")
    return out
