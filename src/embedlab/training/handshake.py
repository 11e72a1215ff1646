"""What the processes of a run settle before training (:mod:`embedlab.training.distributed`).

1. Every process sends its arguments; one started with other flags than process 0, or whose
   ``--corpus`` does not exist on its machine, is refused on every process.
2. Process 0 resolves and checks the run as one process would (:func:`leading` sends a refusal
   to the others, who refuse in the same words), then sends the run and its parameters
   (:func:`release`).
3. The others set their part up (:func:`receive`, then :func:`ready`); a process that could not
   is refused on every process, before process 0 writes anything of the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.data.prepared import SPECIAL_CORPORA, PreparedCorpus
from embedlab.errors import InputError, ProcessLost, spell
from embedlab.training.launch import uneven_split

if TYPE_CHECKING:
    from embedlab.config import TrainConfig
    from embedlab.training.distributed import Group


def agree_on_arguments(group: Group, arguments: Mapping[str, Any]) -> None:
    """Refuse, on every process, a process started with other arguments than process 0, or
    one that cannot read the corpus it names."""
    from embedlab.training.launched import LAUNCHER_PID

    corpus = arguments.get("corpus")
    problem = ""
    one_machine = bool(os.environ.get(LAUNCHER_PID))  # --nproc: processes of this command
    if isinstance(corpus, str) and corpus not in SPECIAL_CORPORA and not os.path.exists(corpus):
        problem = (f"corpus not found: {corpus}; pass an existing file or folder, 'text8' "
                   "(downloads it) or 'demo'") if one_machine else \
            (f"corpus {corpus} does not exist on {socket.gethostname()} (working folder "
             f"{os.getcwd()}); put it at that path on every machine, or pass an absolute "
             "path that every machine can read")
    mine = json.dumps({"arguments": arguments, "problem": problem}, sort_keys=True, default=str)
    every = [json.loads(b) for b in group.gather_bytes(mine.encode())]
    for rank, got in enumerate(every):
        if got["arguments"] != every[0]["arguments"]:
            differ = _differing(every[0]["arguments"], got["arguments"])
            raise InputError(f"process {rank} of {group.size} was started with other arguments "
                             f"than process 0 ({', '.join(differ)}); start every process with "
                             "the same command")
    for rank, got in enumerate(every):
        if got["problem"]:
            where = "" if one_machine else f"process {rank} of {group.size}: "
            raise InputError(f"{where}{got['problem']}")


def check_config(size: int, cfg: TrainConfig, *, resumed: bool = False) -> None:
    """Refuse a run ``size`` processes cannot share: one step must split evenly among them.
    ``resumed``: the run has a config already, whose ``--micro-batches`` is its own (the fix
    is then another number of processes)."""
    m = cfg.optim.micro_batches
    if cfg.model.loss == "hs":  # before the micro-batches: those are refused for hs
        raise InputError(f"{size} processes train negative sampling or NCE, not hierarchical "
                         f"softmax, which trains in one process; pass "
                         f"{spell('--loss', 'neg')}, or start one process")
    if resumed and (m == 1 or m % size):
        fits = [n for n in range(1, m + 1) if m % n == 0]
        raise InputError(f"this run trains steps of {m} micro-batch{'es' if m > 1 else ''}, "
                         f"which {size} processes cannot share; resume it with a number of "
                         f"processes that divides {m} ({', '.join(map(str, fits))})")
    if m == 1:
        raise InputError(f"{size} processes share each step's micro-batches; pass "
                         f"{spell('--micro-batches', size)} (or a multiple of {size}) and keep "
                         f"it × {spell('--batch-size')} near 2048, e.g. "
                         f"{spell('--batch-size', 2048 // size)}")
    if cfg.engine not in ("torch", "cuda"):
        raise InputError(f"{size} processes train with the torch or cuda engine, not "
                         f"{cfg.engine}; pass {spell('--engine', 'torch')} or "
                         f"{spell('--engine', 'cuda')} (and {spell('--micro-batches', size)} or "
                         "a multiple)")
    uneven = uneven_split(size, m)
    if uneven is not None:
        raise uneven


@contextlib.contextmanager
def leading(group: Group) -> Iterator[None]:
    """Process 0's set-up: a refusal before :func:`release` is sent to the others, which
    refuse in the same words."""
    try:
        yield
    except BaseException as exc:
        if not group.released:
            message = str(exc) if isinstance(exc, InputError) else \
                f"process 0 stopped before training ({type(exc).__name__}: {exc})"
            with contextlib.suppress(ProcessLost):
                group.broadcast_bytes(json.dumps({"refused": message}).encode())
            group.released = True
        raise


def release(group: Group, run: Mapping[str, Any], tensors: Mapping[str, np.ndarray]) -> None:
    """Process 0: send the run (``run``: JSON values) and its parameters to the others, wait
    for each to set up, and refuse if one could not."""
    shapes = {n: [list(a.shape), str(a.dtype)] for n, a in tensors.items()}
    group.broadcast_bytes(json.dumps({**run, "tensors": shapes}).encode())
    group.released = True
    group.broadcast_arrays(tensors)
    _verdict(group, "")


def receive(group: Group) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The others: the run process 0 set up, and its parameters (or its refusal)."""
    run = json.loads(group.broadcast_bytes())
    if "refused" in run:
        raise InputError(run["refused"])
    tensors = {n: np.empty(shape, dtype=dtype) for n, (shape, dtype) in
               run.pop("tensors").items()}
    group.broadcast_arrays(tensors)
    return run, tensors


def ready(group: Group, problem: str = "") -> None:
    """The others: whether this process could set its part of the run up."""
    _verdict(group, problem)


def _verdict(group: Group, problem: str) -> None:
    problems = group.gather_bytes(problem.encode())
    for rank, text in enumerate(problems):
        if text:
            raise InputError(f"process {rank} of {group.size}: {text.decode()}")


def corpus_fingerprint(prepared: PreparedCorpus) -> str:
    """A sha256 that tells two prepared corpora apart: the vocabulary with its counts, and the
    lengths and 64 evenly spaced windows of the sentence ends and of the token ids (reading all
    of a billion-token corpus would take seconds, from a cold disk minutes). The processes of a
    run check that they read the same corpus with it, and a checkpoint records it, so that a
    resume on a corpus prepared again with other data is refused."""
    h = prepared.vocab.words_sha256()  # sha256 of "\n".join(words), UTF-8
    h.update(np.asarray(prepared.vocab.counts, dtype=np.int64).tobytes())
    for array, dtype in ((prepared.sentence_ends, np.int64), (prepared.ids, np.uint32)):
        h.update(np.int64(len(array)).tobytes())
        window = 1 << 14
        for start in np.linspace(0, max(0, len(array) - window), 64, dtype=np.int64):
            h.update(np.ascontiguousarray(array[start:start + window], dtype=dtype).tobytes())
    return h.hexdigest()


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two processes' arguments: the options by their flags
    (``--dim: 32 vs 64``), the others by name (``run: 'a' vs 'b'``)."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if key == "options" and isinstance(va, dict) and isinstance(vb, dict):
            out += _differing(va, vb)
        elif va != vb:
            out.append(f"{key}: {va!r} vs {vb!r}")
    return out
