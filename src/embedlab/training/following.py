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
from embedlab.errors import InputError, ProcessLost, TrainingInterrupted
from embedlab.run.signals import SignalFlag, interrupted
from embedlab.training import distributed
from embedlab.training.setup import batches_for, vocab_sha256
from embedlab.training.state import TrainResult, TrainState

if TYPE_CHECKING:
    from embedlab.engines.base import Engine
    from embedlab.engines.stepping import StepRunner
    from embedlab.training.distributed import Group


@dataclass
class _Part:
    """A follower's share of the run: what its loop needs."""

    cfg: TrainConfig
    run_dir: Path
    engine: Engine
    steps: StepRunner
    state: TrainState
    n_tokens: int
    vocab: Any


def follow(group: Group, threads: int = 0, corpus: str | None = None) -> TrainResult:
    """Train this process's part of the run rank 0 leads; return what rank 0's call returns
    (the vectors are the same). ``threads``, ``corpus``: this process's ``--threads`` and
    ``--corpus`` (machines differ: its cores, its working folder)."""
    run, tensors = group.receive()
    try:
        part = _set_up(run, tensors, threads, corpus)
    except InputError as exc:
        group.ready(str(exc))  # raises, here and on every process, naming this one
        raise
    group.ready()
    return _train(part, group)


def _set_up(run: dict[str, Any], tensors: dict[str, np.ndarray], threads: int,
            corpus: str | None) -> _Part:
    cfg = TrainConfig.from_dict(run["config"])
    cfg = dataclasses.replace(cfg, threads=dataclasses.replace(cfg, threads=threads).resolve(
        say=False).threads)  # this machine's cores, as rank 0 resolves its own
    # its own --corpus where that is a prepared folder (a relative path names this machine's),
    # else the folder process 0 trains on (RUN/prepared, made from a raw corpus)
    folder = Path(corpus if corpus is not None and is_prepared(corpus) else run["corpus"])
    if not is_prepared(folder):
        raise InputError(f"the prepared corpus {folder} that process 0 trains on cannot be read "
                         f"on {socket.gethostname()}; put the run folder on a file system "
                         "every machine reads, or prepare the corpus ('embedlab prepare') at "
                         "the same path on every machine and pass that folder as --corpus")
    prepared = PreparedCorpus.open(folder)
    if vocab_sha256(prepared.vocab) != run["vocab_sha256"]:
        raise InputError(f"the prepared corpus {folder} on {socket.gethostname()} has another "
                         "vocabulary than process 0's; give every machine the same prepared "
                         "folder")
    vocab = prepared.vocab
    keep = keep_probabilities(vocab.counts, cfg.model.sample)
    noise = NoiseDistribution(vocab.counts, cfg.model.noise_exponent)
    stream = batches_for(cfg, prepared, keep, noise, legacy=run["legacy"])
    engine = engine_for_config(cfg, noise, stream.rows, tensors=tensors, counts=vocab.counts)
    n_tokens = len(prepared.ids)
    schedule = Schedule(cfg.optim.lr, cfg.optim.min_lr_ratio, cfg.optim.epochs * n_tokens)
    steps = engine.runner(stream, schedule, cfg.model.model)
    return _Part(cfg, Path(run["run_dir"]), engine, steps, TrainState.from_state_dict(
        run["state"]), n_tokens, vocab)


def _train(part: _Part, group: Group) -> TrainResult:
    """Rank 0's loop (:mod:`embedlab.training.loop`) as far as the other processes take part
    in it: the steps, the agreement after each, the replica check at each save."""
    cfg, state = part.cfg, part.state
    epochs = cfg.optim.epochs
    saved = state.step if state.step else -1  # the step of the last checkpoint (Saver's)
    with SignalFlag() as flag:
        try:
            while state.cursor.epoch < epochs:
                if cfg.max_steps is not None and state.step >= cfg.max_steps:
                    break
                done = part.steps.run(state.cursor, state.words_seen, 1)
                losses = done.losses
                if not np.isfinite(losses).all():  # rank 0 refuses the same step with a message
                    raise TrainingInterrupted(f"training diverged at step {state.step + 1}; "
                                              "see process 0's message", 2)
                state.advance_to(done.words_done[-1], done.cursor_after(len(done) - 1),
                                 part.n_tokens, len(done))
                last = state.cursor.epoch >= epochs
                stop, due = group.agree(flag.signum or 0, False)
                if _evaluates(cfg, state.step):  # rank 0 evaluates: wait for it
                    group.barrier()
                if stop and not last:
                    _save(part, group)
                    raise _stopped(stop, state.step)
                if due:
                    _save(part, group)
                    saved = state.step
        except ProcessLost as exc:
            distributed.finish_exit()
            raise ProcessLost(f"{exc}; stopped at step {state.step} — re-run the same command "
                              "to resume", exc.exit_code) from None
        finally:
            part.steps.close()
        finished = state.cursor.epoch >= epochs
        if saved != state.step:  # rank 0 saves where the loop ended (_finish)
            _save(part, group)
    return TrainResult(part.run_dir, state.step, state.words_seen, state.last_loss,
                       state.train_seconds, finished, part.vocab, part.engine.input_vectors,
                       cfg)


def _evaluates(cfg: TrainConfig, step: int) -> bool:
    """Whether rank 0 evaluates at ``step`` (:mod:`embedlab.training.loop`)."""
    every = cfg.eval.every_steps
    return bool(every and step % every == 0 and (cfg.eval.analogies or cfg.eval.similarity))


def _save(part: _Part, group: Group) -> None:
    """Rank 0 saves: this process's parameters are checked against its, then it waits until
    the checkpoint is written."""
    group.check_replicas(part.engine.state_dict(), part.state.step)
    group.barrier()


def _stopped(code: int, step: int) -> TrainingInterrupted:
    if code == distributed.CALLBACK_STOP:
        return TrainingInterrupted(f"process 0 stopped the run at step {step} (saved) — re-run "
                                   "the same command to resume", 1)
    return interrupted(code, step)
