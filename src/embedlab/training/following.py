"""The processes of a run other than rank 0: set up from what rank 0 sends, then train in step.

Such a process writes nothing. It receives the run rank 0 set up — the resolved config, the
training state and the parameters (:meth:`embedlab.training.distributed.Group.receive`) — opens
the same prepared corpus (its vocabulary must hash the same), and trains the same steps:
its micro-batches of each step, all of them applied. After every step it takes part in the
agreement on stopping and saving, and at each save it sends the sha256 of its parameters,
which rank 0 compares with its own before it writes the checkpoint.
"""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.config import TrainConfig
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import keep_probabilities
from embedlab.data.prepared import PreparedCorpus, is_prepared
from embedlab.engines import engine_for_config
from embedlab.engines.stepping import Schedule
from embedlab.errors import (
    InputError,
    ProcessLost,
    TrainingInterrupted,
    python_caller,
    resume_how,
)
from embedlab.run.signals import SignalFlag, interrupted, stopped_at_the_end
from embedlab.training import distributed, handshake
from embedlab.training.loop import evaluation_due, log_due
from embedlab.training.setup import batches_for
from embedlab.training.state import TrainResult, TrainState

if TYPE_CHECKING:
    from embedlab.engines.base import Engine
    from embedlab.engines.stepping import StepRunner
    from embedlab.training.distributed import Group


@dataclass
class _Part:
    """This process's share of the run: what its loop needs."""

    cfg: TrainConfig
    run_dir: Path
    engine: Engine
    steps: StepRunner
    state: TrainState
    n_tokens: int
    vocab: Any
    resumed: bool  # from a checkpoint (else a new run): the loop's last saved step
    evaluates: bool  # process 0 evaluates during training (the others wait)


def follow(group: Group, threads: int = 0, corpus: str | None = None) -> TrainResult:
    """Train this process's part of the run process 0 leads. The result's step, words and
    vectors are process 0's; its loss is the last one process 0 saved. ``threads``,
    ``corpus``: this process's ``--threads`` and ``--corpus`` (machines differ: its cores, its
    working folder)."""
    run, tensors = handshake.receive(group)
    try:
        part = _set_up(run, tensors, threads, corpus)
    except InputError as exc:
        handshake.ready(group, str(exc))  # raises, here and on every process, naming this one
        raise
    handshake.ready(group)
    try:
        return _train(part, group)
    except ProcessLost as exc:
        distributed.finish_exit()
        raise ProcessLost(f"{exc}; stopped at step {part.state.step} — {resume_how()} to resume",
                          exc.exit_code) from None


def _set_up(run: dict[str, Any], tensors: dict[str, np.ndarray], threads: int,
            corpus: str | None) -> _Part:
    cfg = TrainConfig.from_dict(run["config"])
    cfg = dataclasses.replace(cfg, threads=dataclasses.replace(cfg, threads=threads).resolve(
        say=False).threads)  # this machine's cores, as process 0 resolves its own
    # its own --corpus where that is a prepared folder (a relative path names this machine's),
    # else the folder process 0 trains on (RUN/prepared, made from a raw corpus)
    folder = Path(corpus if corpus is not None and is_prepared(corpus) else run["corpus"])
    if not is_prepared(folder):
        raise InputError(f"the prepared corpus {folder} that process 0 trains on cannot be read "
                         f"on {socket.gethostname()}; put the run folder on a file system "
                         "every machine reads, or prepare the corpus ('embedlab prepare') at "
                         "the same path on every machine and pass that folder as --corpus")
    prepared = PreparedCorpus.open(folder)
    if handshake.corpus_fingerprint(prepared) != run["corpus_sha256"]:
        raise InputError(f"the prepared corpus {folder} on {socket.gethostname()} differs from "
                         "process 0's (its vocabulary, sentences or token ids); give every "
                         "machine the same prepared folder")
    vocab = prepared.vocab
    keep = keep_probabilities(vocab.counts, cfg.model.sample)
    noise = NoiseDistribution(vocab.counts, cfg.model.noise_exponent)
    stream = batches_for(cfg, prepared, keep, noise, legacy=run["legacy"])
    engine = engine_for_config(cfg, noise, stream.rows, tensors=tensors, counts=vocab.counts)
    n_tokens = len(prepared.ids)
    schedule = Schedule(cfg.optim.lr, cfg.optim.min_lr_ratio, cfg.optim.epochs * n_tokens)
    steps = engine.runner(stream, schedule, cfg.model.model)
    return _Part(cfg, Path(run["run_dir"]), engine, steps, TrainState.from_state_dict(
        run["state"]), n_tokens, vocab, run["resumed"], run["evaluates"])


def _train(part: _Part, group: Group) -> TrainResult:
    """Process 0's loop (:mod:`embedlab.training.loop`) as far as the others take part in it:
    the steps, the agreement after each, waiting while process 0 logs or evaluates, and the
    replica check at each save."""
    cfg, state = part.cfg, part.state
    epochs = cfg.optim.epochs
    if state.cursor.epoch >= epochs:  # process 0 says the run finished, and trains nothing
        return _result(part, True)
    saved = state.step if part.resumed else -1  # the step of the last checkpoint (Saver's)
    with SignalFlag() as flag:
        stop = group.begin(flag.signum or 0)
        if stop:
            raise interrupted(stop, state.step, saved=part.resumed)
        try:
            while state.cursor.epoch < epochs:
                if cfg.max_steps is not None and state.step >= cfg.max_steps:
                    break
                _step(part)
                last = state.cursor.epoch >= epochs
                stop, due = group.agree(flag.signum or 0, False)
                if log_due(cfg, state.step):
                    group.wait_for_leader()
                if evaluation_due(cfg, state.step, evaluates=part.evaluates):
                    group.wait_for_leader()
                if stop and not last:
                    _save(part, group)
                    raise _stopped(stop, state.step)
                if due:
                    _save(part, group)
                    saved = state.step
        finally:
            part.steps.close()
        if saved != state.step:  # process 0 saves where the loop ended (_finish)
            _save(part, group)
    if flag.signum is not None and python_caller():  # as process 0's loop ends the call
        raise stopped_at_the_end(flag.signum, state.step, finished=state.cursor.epoch >= epochs)
    return _result(part, state.cursor.epoch >= epochs)


def _step(part: _Part) -> None:
    """One step, counted as process 0 counts it; a loss that is not finite is refused at the
    same step on every process."""
    state = part.state
    done = part.steps.run(state.cursor, state.words_seen, 1)
    if not np.isfinite(done.losses).all():
        raise InputError(f"training diverged at step {state.step + 1}: the loss became "
                         f"{done.losses[-1]}; see process 0's message")
    state.advance_to(done.words_done[-1], done.cursor_after(len(done) - 1), part.n_tokens,
                     len(done))


def _result(part: _Part, finished: bool) -> TrainResult:
    s = part.state
    return TrainResult(part.run_dir, s.step, s.words_seen, s.last_loss, s.train_seconds,
                       finished, part.vocab, part.engine.input_vectors, part.cfg)


def _save(part: _Part, group: Group) -> None:
    """Process 0 saves: this process's parameters are checked against its, then it waits
    until the checkpoint is written."""
    group.check_replicas(part.engine.state_dict(), part.state.step)
    group.wait_for_leader()


def _stopped(code: int, step: int) -> TrainingInterrupted:
    if code == distributed.CALLBACK_STOP:
        return TrainingInterrupted(f"process 0 stopped the run at step {step} (saved) — "
                                   f"{resume_how()} to resume", 1)
    return interrupted(code, step)
