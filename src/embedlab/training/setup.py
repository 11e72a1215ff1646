"""Setting a run up: checkpoints, corpus, batches, engine and evaluator, and the input checks.

:func:`set_up` does everything that may refuse the command before it writes anything of the run:
a refused resume leaves ``config.json`` (and so the next plain re-run) and the checkpoints as
they were. Only then does it record the run (``config.json``, ``env.json``, ``vocab.tsv``) and
say what it is doing: a new run, a resume, a warm start.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from embedlab.checkpoint import (
    STATE_FILE,
    CheckpointManager,
    find_checkpoint,
    lists_them,
    load_checkpoint,
    tensor_specs,
)
from embedlab.config import (
    TrainConfig,
    check_best_metric,
    edited_settings,
    recorded_settings,
)
from embedlab.data.batchspec import SPEC_STREAM, SpecBatchStream
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import BatchStream, keep_probabilities
from embedlab.data.prepared import (
    SPECIAL_CORPORA,
    PreparedCorpus,
    declared_vocab_size,
    is_prepared,
)
from embedlab.data.vocab import Vocab
from embedlab.engines import (
    BATCH_SPEC_REVISION,
    STEP_CHANGE_ENGINES,
    STEP_CHANGE_LOSSES,
    STEP_CHANGES,
    STEP_REVISION,
    engine_for_config,
)
from embedlab.engines.step import step_config
from embedlab.engines.stepping import Schedule
from embedlab.errors import (
    InputError,
    printable,
    python_caller,
    rerun,
    restated,
    said_by_another_process,
    spell,
    spell_metavar,
    spell_name,
    warn,
)
from embedlab.fsutil import atomic_write_bytes, remove_leftover_temporaries
from embedlab.run.folder import CONFIG_FILE, abandon_after
from embedlab.run.provenance import (
    last_kernel,
    started_step_revision,
    write_config_json,
    write_env_json,
)
from embedlab.run.signals import deferred_interrupt
from embedlab.seeding import LEGACY_STREAMS
from embedlab.training import distributed, handshake
from embedlab.training.corpus import (
    PREPARED_DIR,
    check_enough_tokens,
    check_pairs_possible,
    open_corpus,
)
from embedlab.training.memory import (
    Shape,
    check_disk,
    check_memory,
    chunks_in_flight,
    memory_need,
    noise_bytes,
)
from embedlab.training.state import TRAIN_STATE, TrainState
from embedlab.training.warm_start import VOCAB_FILE, warm_start, warn_if_another_warm_start

if TYPE_CHECKING:
    from embedlab.data.tokenise_child import PrepareAhead
    from embedlab.engines.base import Engine
    from embedlab.engines.stepping import StepRunner
    from embedlab.eval import Evaluator


@dataclass
class TrainingRun:
    """A run ready to train: everything the loop needs, and where it stands."""

    cfg: TrainConfig
    run_dir: Path
    vocab: Vocab
    stream: BatchStream
    steps: StepRunner  # trains the engine on the stream's batches, from a data position
    engine: Engine
    evaluator: Evaluator | None
    manager: CheckpointManager
    state: TrainState
    resumed: bool  # from a checkpoint (else a new run, perhaps warm-started)
    n_tokens: int  # in-vocabulary tokens per epoch
    raw_per_token: float  # corpus words (out-of-vocabulary ones too) per in-vocabulary token
    progress: bool  # show a progress bar
    progress_lines: bool = False  # no terminal: a progress line a minute instead
    #: a resume's config.json and env.json as they were before it recorded itself (None: no
    #: such file), put back by :meth:`forget_this_call` when it stops before it saves a step
    records_before: dict[str, bytes | None] = field(default_factory=dict)

    def forget_this_call(self) -> None:
        """A resume that stopped before saving a checkpoint (a Ctrl-C, a SIGTERM, a failure while
        the writers open or at its save) leaves the run as it was, as one that trains nothing
        does: its flags (a larger --epochs, another --best-metric) recorded would make the
        command that made the run "a different config", though the stop said the run is as it
        was."""
        _put_back(self.run_dir, self.records_before)
        self.records_before = {}

    @property
    def total_words(self) -> int:
        """The positions of the whole run, over which the learning rate decays."""
        return self.cfg.optim.epochs * self.n_tokens


def set_up(cfg: TrainConfig, run_dir: Path, *, argv: list[str], resume_from: str | None,
           out: TextIO, ahead: PrepareAhead | None, abandon_newer: bool) -> TrainingRun:
    """Check the input, build what training needs, then record the run in ``run_dir``.

    ``resume_from``: a checkpoint to resume from instead of the latest; ``abandon_newer``
    (``--from``): move the checkpoints newer than it aside once every check has passed.
    """
    check_best_metric(cfg)
    if cfg.track.tensorboard:  # refused before the run is set up, not by the tracker after it
        from embedlab.track.events import check_writable_name

        check_writable_name(run_dir)
    group = distributed.current()
    progress = cfg.track.progress and out.isatty()
    manager, ckpt = _checkpoints(cfg, run_dir, resume_from)
    if group is not None:  # a resumed run keeps its --micro-batches: the fix differs
        handshake.check_config(group.size, cfg, resumed=ckpt is not None)
    initial = _start_initial_vectors(cfg) if ckpt is None else None
    had_copy = is_prepared(run_dir / PREPARED_DIR)
    prepared = open_corpus(cfg, run_dir, progress=progress, ahead=ahead, fresh=ckpt is None)
    vocab = prepared.vocab
    check_enough_tokens(prepared, cfg)
    if initial is None or initial.vocab_size != len(vocab):
        prepared_folder = cfg.data.corpus not in SPECIAL_CORPORA and is_prepared(cfg.data.corpus)
        _check_memory(cfg, len(vocab), shape="resumed" if ckpt is not None else
                      "prepared" if prepared_folder else "raw")
    keep = keep_probabilities(vocab.counts, cfg.model.sample)
    check_pairs_possible(prepared, cfg, keep)
    _check_probe_words(cfg, vocab)
    _say_unlogged(cfg)
    try:
        evaluator = make_evaluator(cfg)
        if evaluator is not None:  # a file that misses the vocabulary: refused now, not mid-run
            evaluator.check(vocab.words)
    except InputError as exc:
        if ckpt is None:
            raise
        # a resumed run's file, moved, deleted or changed since: the way out that keeps the run
        # a best checkpoint chosen by an evaluation needs another metric without it
        loss = "" if cfg.checkpoint.best_name == "loss" else \
            f" {spell('--best-metric', 'loss')}" if not python_caller() else \
            f", {spell('--best-metric', 'loss')}"
        raise restated(exc, f"{exc} (or pass {spell('--no-eval', True)}{loss} to resume "
                            "without the run's evaluation)") from None
    noise = NoiseDistribution(vocab.counts, cfg.model.noise_exponent)
    legacy = _legacy_batches(run_dir, ckpt)
    stream = batches_for(cfg, prepared, keep, noise, legacy=legacy)
    warm_from: list[Path] = []
    fingerprint = handshake.corpus_fingerprint(prepared)
    engine, state, started = _engine_and_state(
        cfg, run_dir, ckpt, vocab, noise, stream.rows, initial, warm_from,
        same_corpus=lambda trained_on: _check_same_corpus(cfg, run_dir, prepared, ckpt,
                                                          trained_on, fingerprint,
                                                          had_copy=had_copy))
    trains = state.cursor.epoch < cfg.optim.epochs and (cfg.max_steps is None or
                                                        state.step < cfg.max_steps)
    if trains and (group is None or group.leader):  # process 0 writes the checkpoints
        check_disk(run_dir, memory_need(len(vocab), cfg.model.dim, loss=cfg.model.loss,
                                        window=cfg.model.window).matrices, cfg.checkpoint.keep,
                   kept=len(manager.index().ours()) if ckpt is not None else 0,
                   tensorboard=cfg.track.tensorboard)
    state.corpus = fingerprint
    state.vocabulary = vocab.words_sha256().hexdigest()  # state.vocabulary_sha256(vocab.words)
    state.settings = recorded_settings(cfg)
    n_tokens = len(prepared.ids)
    schedule = Schedule(cfg.optim.lr, cfg.optim.min_lr_ratio, cfg.optim.epochs * n_tokens)
    if ckpt is not None and started and trains:  # resuming, with epochs left to train
        started += _more_epochs(run_dir, cfg, state, n_tokens)
    steps = engine.runner(stream, schedule, cfg.model.model)
    if ckpt is not None:
        _check_cursor(cfg, ckpt, state, stream, steps)
        _check_run_files(run_dir)
    _warn_short_of_chunks(cfg, stream)
    if group is not None:  # the other processes set up their part, or refuse with this one
        handshake.release(group, shared_run(cfg, run_dir, prepared, state,
                                            resumed=ckpt is not None, legacy=legacy,
                                            evaluates=evaluator is not None),
                          engine.state_dict())
    # Everything above may refuse the command; nothing of the run was written (or moved) before
    # this point.
    if ckpt is not None and abandon_newer:
        moved = abandon_after(run_dir, state.step)
        if moved:  # said at once: a write below may still fail, and the user must know
            name = spell_name("--from", python="from_checkpoint")
            print(f"embedlab: {name}: moved {len(moved)} newer checkpoint(s) to {moved[0].parent}",
                  file=out, flush=True)
            manager.forget_after(state.step)  # the index names no checkpoint that moved
    # A resume that trains nothing (already at --max-steps, or finished) leaves the run as it
    # is: its flags (a larger --epochs, another --best-metric) must not become the run's config,
    # or the command that made the run would be refused as "a different config" next time, and
    # config.json would name a --best-metric that the index's best checkpoint was not chosen by.
    records_before = _records(run_dir) if ckpt is not None and trains else {}
    try:
        if ckpt is None or trains:
            write_config_json(run_dir, cfg)
        elif group is None or group.leader:
            _say_unapplied(run_dir, cfg, finished=state.finished)
        kernel = _kernel_identity(cfg.engine)
        if ckpt is not None:
            manager.protect(state.step)
            _warn_if_other_step_revision(run_dir, cfg.engine, loss=cfg.model.loss)
            _warn_if_other_kernel(run_dir, kernel)
        # the streams the batches draw from: the batch specification's one key, or, for a run
        # started before it, the separate streams of that generator
        streams = LEGACY_STREAMS if legacy else ("init", SPEC_STREAM)
        # how the run started, as one command: written by the start that creates the run
        command = None if ckpt is not None else reproducing_command(
            cfg, run_dir, init_from=warm_from[0] if warm_from else None)
        if ckpt is None or trains:  # a call that trains nothing is no resume of the run
            write_env_json(run_dir, argv=argv, threads=cfg.threads, seed=cfg.seed, streams=streams,
                           processes=1 if group is None else group.size, step=state.step,
                           command=command, kernel=kernel, start=ckpt is None)
        vocab.save_tsv(run_dir / VOCAB_FILE)
        for line in started:  # a run folder named with a line break stays on its line
            print(printable(line), file=out)
    except BaseException:  # a stop (or a failure) before the run is handed over
        _put_back(run_dir, records_before)
        raise
    return TrainingRun(cfg, run_dir, vocab, stream, steps, engine, evaluator, manager, state,
                       resumed=ckpt is not None, n_tokens=n_tokens,
                       raw_per_token=prepared.raw_tokens / max(1, n_tokens), progress=progress,
                       progress_lines=cfg.track.progress and not progress and
                       not said_by_another_process(), records_before=records_before)


def _put_back(run_dir: Path, records: dict[str, bytes | None]) -> None:
    """Write ``records`` (:func:`_records`) back as they were."""
    for name, data in records.items():
        with contextlib.suppress(OSError):  # the stop's own message comes first
            if data is None:
                (run_dir / name).unlink(missing_ok=True)
            else:
                atomic_write_bytes(run_dir / name, data)


def _records(run_dir: Path) -> dict[str, bytes | None]:
    """config.json and env.json as they are (None: missing)."""
    out: dict[str, bytes | None] = {}
    for name in (CONFIG_FILE, "env.json"):
        try:
            out[name] = (run_dir / name).read_bytes()
        except FileNotFoundError:
            out[name] = None
    return out


def _check_legacy_vocabulary(run_dir: Path, vocab: Vocab, cfg: TrainConfig, ckpt: Path) -> None:
    """A checkpoint without the corpus's fingerprint: the corpus read now must at least give the
    vocabulary the run recorded (its vocab.tsv), word for word, or the checkpoint's rows would
    belong to other words (a RUN/prepared lost and the corpus prepared again from other
    text)."""
    recorded = run_dir / VOCAB_FILE
    if not recorded.is_file():
        return
    words = Vocab.load_tsv(recorded).words
    if words != vocab.words:
        raise InputError(f"the corpus {cfg.data.corpus} gives another vocabulary than the one "
                         f"{ckpt.name} was trained with ({recorded}: {len(words):,} words, this "
                         f"corpus: {len(vocab):,}, or the same in another order); pass the "
                         f"corpus the run was trained on, or {spell('--restart', True)} to "
                         "start over on this one")


def _check_cursor(cfg: TrainConfig, ckpt: Path, state: TrainState, stream: BatchStream,
                  steps: object) -> None:
    """Refuse a checkpoint whose data position lies outside this corpus's batches: its
    state.json altered behind a re-signed manifest, say. The native kernel reads a chunk's
    batches without bounds checks, so a batch past the chunk's last would read past its
    arrays."""
    c, epochs = state.cursor, cfg.optim.epochs
    bad = c.epoch > epochs or (c.epoch == epochs and (c.chunk, c.batch) != (0, 0)) or \
        not 0 <= c.chunk < stream.n_chunks
    where = f"{stream.n_chunks:,} chunk(s) an epoch"
    if not bad and c.batch > 0 and c.epoch < epochs and cfg.optim.micro_batches == 1:
        build = getattr(steps, "build", None)  # the native engine's, kept for its first step
        n = build(c.epoch, c.chunk).n_batches if build is not None else \
            len(stream.chunk_batches(c.epoch, c.chunk))
        bad, where = c.batch >= n, f"chunk {c.chunk} has {n:,} batch(es)"
    if bad:
        from embedlab.checkpoint.load import listing_command

        listing = listing_command(ckpt.parent.parent)
        from_step = spell_metavar("--from", "STEP", python="from_checkpoint")
        raise InputError(f"checkpoint {ckpt} records a data position (epoch {c.epoch}, chunk "
                         f"{c.chunk}, batch {c.batch}) outside this run's batches ({where}; "
                         f"{epochs} epoch(s)): its {STATE_FILE} was altered; resume from "
                         f"another checkpoint ({from_step}; list them: {listing})")


def _more_epochs(run_dir: Path, cfg: TrainConfig, state: TrainState, n_tokens: int) -> list[str]:
    """The line of a resume that raised --epochs: the learning rate's decay is stretched over
    the new total from here, so the rate jumps up; said with the numbers, once (the config the
    run trained under until now is still the stored one)."""
    from embedlab.run.folder import stored_config
    from embedlab.training.schedule import linear_lr

    before = stored_config(run_dir)
    if before is None or before.optim.epochs >= cfg.optim.epochs:
        return []
    o, was = cfg.optim, before.optim.epochs
    if o.min_lr_ratio == 1:  # a constant rate (the cs20 preset's): nothing decays
        return [f"embedlab: {spell('--epochs', o.epochs)} (was {was}): training goes on to the "
                f"end of epoch {o.epochs} at the constant rate {o.lr:g}"]
    old = linear_lr(o.lr, o.min_lr_ratio, state.words_seen, was * n_tokens)
    new = linear_lr(o.lr, o.min_lr_ratio, state.words_seen, o.epochs * n_tokens)
    return [f"embedlab: {spell('--epochs', o.epochs)} (was {was}): the learning rate decays "
            f"to the end of epoch {o.epochs} from here, {new:.6g} at step {state.step} "
            f"({old:.6g} with {was} epoch{'s' if was != 1 else ''})"]


def _checkpoints(cfg: TrainConfig, run_dir: Path, resume_from: str | None
                 ) -> tuple[CheckpointManager, Path | None]:
    """The run's checkpoint manager, and the checkpoint to resume from (None: a new run)."""
    c = cfg.checkpoint
    manager = CheckpointManager(run_dir, keep=c.keep, keep_every=c.keep_every or None,
                                best_metric=c.best_name, best_mode=c.best_mode)
    manager.check_index()  # a damaged index is refused before anything of the run is written
    manager.check_writable()
    manager.remove_stale_tmp()  # a save killed mid-way leaves one; we hold the lock
    # and so do the run's own files written atomically (status, index, projector config);
    # only process 0 writes those, so only it may take them as left over
    group = distributed.current()
    if group is None or group.leader:
        for folder in (run_dir, *run_dir.glob("[0-9]*/input_embeddings")):
            remove_leftover_temporaries(folder)
    if resume_from:
        return manager, find_checkpoint(resume_from)
    latest = manager.latest()  # warns about each damaged one it skips
    # A run whose checkpoints all fail verification is refused rather than started over: a
    # fresh start in the same folder would overwrite the damaged checkpoints' evidence and mix
    # two runs' histories.
    if latest is None and manager.list(check=False):
        raise InputError(f"run {run_dir} has checkpoints but none of them is intact (see the "
                         "warnings above); restore them from a backup, or pass "
                         f"{spell('--restart', True)} to start over (the old folder is moved "
                         "aside)")
    listed = manager.index().ours()
    if latest is None and listed:
        # checkpoints/ deleted (or replaced by a file): starting over in place would overwrite
        # the run's metrics and events, which go on to the steps the index names
        raise InputError(f"run {run_dir} has no checkpoints, but its index "
                         f"({run_dir / 'checkpoint'}) lists {len(listed)} up to step "
                         f"{max(listed)}: the checkpoints/ folder was moved or deleted; "
                         "restore it, or pass "
                         f"{spell('--restart', True)} to start over (the old folder is moved "
                         "aside)")
    if latest is None and not listed:
        _refuse_if_saved_before(run_dir)
    if latest is not None:
        _warn_missing_newer(run_dir, latest)
    return manager, latest


def _refuse_if_saved_before(run_dir: Path) -> None:
    """A run whose status.json says it saved a checkpoint, now without checkpoints/ and without
    the index (both deleted): starting over in place would overwrite its metrics and events."""
    from embedlab.errors import step_number
    from embedlab.run.status import read_status

    recorded = read_status(run_dir)
    saved = step_number(recorded.get("checkpoint"))
    if saved is None and recorded.get("status") == "finished":
        saved = step_number(recorded.get("step"))  # a run that finished saved its last step
    if saved:
        raise InputError(f"run {run_dir} saved a checkpoint at step {saved} (its status.json "
                         f"says so), but its checkpoints/ folder and index are gone: moved or "
                         f"deleted; restore them, or pass {spell('--restart', True)} to start "
                         "over (the old folder is moved aside)")


def _warn_missing_newer(run_dir: Path, latest: Path) -> None:
    """A checkpoint the index lists beyond the one resumed whose folder is gone (deleted by
    hand; a damaged one is warned about as it is skipped): its steps are trained again."""
    from embedlab.checkpoint.format import ckpt_name, parse_step
    from embedlab.checkpoint.load import missing_listed

    step = parse_step(latest.name)
    if step is None:
        return
    gone = [s for s in missing_listed(run_dir) if s > step]
    if gone:
        warn(f"the index of {run_dir} lists {ckpt_name(max(gone))}, which is not in "
             f"{run_dir / 'checkpoints'} (deleted?): resuming from {latest.name}, the "
             f"{max(gone) - step:,} step(s) after it are trained again")


def _check_probe_words(cfg: TrainConfig, vocab: Vocab) -> None:
    unknown = [w for w in cfg.track.probe_words if w not in vocab.index]
    if unknown:
        from embedlab.eval.neighbors import suggest

        close = [w for w in suggest(unknown[0], vocab.words, n=4) if w != vocab.unk][:3]
        hint = (f"did you mean {', '.join(close)}? " if close and len(unknown) == 1 else "")
        frequent = [w for w in vocab.words[:4] if w != vocab.unk][:3]  # UNK is no word to probe
        raise InputError(f"{spell_name('--probe')} word(s) not in the vocabulary: "
                         f"{', '.join(unknown)}; {hint}pick words the corpus has (the most "
                         f"frequent: {', '.join(frequent)})")


def _say_unlogged(cfg: TrainConfig) -> None:
    """--probe and --projector-each-checkpoint log to TensorBoard alone: with it off, said."""
    given = [spell_name(flag) for flag, on in (
        ("--probe", bool(cfg.track.probe_words)),
        ("--projector-each-checkpoint", cfg.track.projector_each_checkpoint)) if on]
    if given and not cfg.track.tensorboard:
        off = spell("--tensorboard", False) if python_caller() else "--no-tensorboard"
        one = len(given) == 1
        warn(f"{' and '.join(given)} {'logs' if one else 'log'} to TensorBoard alone, which "
             f"{off} turns off: {'it does' if one else 'they do'} nothing in this run; drop "
             f"{off} to log {'it' if one else 'them'}")


def make_evaluator(cfg: TrainConfig) -> Any:
    """The evaluation during training (None: no evaluation file was given)."""
    if not (cfg.eval.analogies or cfg.eval.similarity):
        if cfg.eval.every_steps:
            raise InputError(f"{spell('--eval-every')} needs "
                             f"{spell_metavar('--eval-analogies', 'FILE')} and/or "
                             f"{spell_metavar('--eval-similarity', 'FILE')}")
        return None
    from embedlab.eval import make_evaluator as evaluator_for

    return evaluator_for(cfg.eval)


def _legacy_batches(run_dir: Path, ckpt: Path | None) -> bool:
    """Whether the run resumes batches drawn before the batch specification: a run started by
    an embedlab whose step revision predates it keeps the draws it started with, so that it
    finishes as it would have."""
    if ckpt is None:
        return False
    started = started_step_revision(run_dir)
    if started is None:  # which generator to keep is not known: guessing changes the result
        raise InputError(f"{run_dir / 'env.json'} is missing or unreadable; it records how the "
                         "run started (its batch generator), which a resume must keep: restore "
                         f"it from a backup, or pass {spell('--restart', True)} to start over")
    return started < BATCH_SPEC_REVISION


def shared_run(cfg: TrainConfig, run_dir: Path, prepared: PreparedCorpus, state: TrainState,
               *, resumed: bool, legacy: bool, evaluates: bool) -> dict[str, Any]:
    """What process 0 sends the other processes of a run (:mod:`embedlab.training.handshake`),
    as JSON values: the resolved config, where the run and its corpus are, the corpus's
    fingerprint (theirs must be the same) and the training state; the parameters travel
    apart."""
    return {"config": cfg.to_dict(), "run_dir": str(run_dir.resolve()),
            "corpus": str(Path(prepared.root).resolve()),
            "corpus_sha256": state.corpus or handshake.corpus_fingerprint(prepared),
            "state": state.state_dict(), "resumed": resumed, "legacy": legacy,
            "evaluates": evaluates}


def _warn_short_of_chunks(cfg: TrainConfig, stream: BatchStream) -> None:
    """Steps of micro-batches from their own chunks, on a corpus of fewer chunks than the step
    has micro-batches: each step trains fewer (and processes without a chunk wait). Said, not
    refused: the run is right, only smaller steps and idle processes than asked for."""
    m, chunks = cfg.optim.micro_batches, stream.n_chunks
    if m == 1 or cfg.optim.micro_order != "chunks" or chunks >= m:
        return
    b = cfg.optim.batch_size
    # a micro-batch j of a step reads chunk j (of up to chunk_tokens tokens) of its group
    warn(f"the corpus fills {chunks} chunk{'s' if chunks > 1 else ''} (of up to "
         f"{stream.chunk_tokens:,} in-vocabulary tokens each), fewer than "
         f"{spell('--micro-batches', m)}: a step trains {chunks} "
         f"micro-batch{'es' if chunks > 1 else ''} ({chunks * b:,} centres, not {m * b:,}), "
         f"and processes of a run whose chunks are missing idle; a corpus of "
         f"{(m - 1) * stream.chunk_tokens + 1:,} in-vocabulary tokens or more (those kept by "
         f"{spell_name('--min-count')}) gives every step all {m}")


def batches_for(cfg: TrainConfig, prepared: PreparedCorpus, keep: np.ndarray | None,
                noise: NoiseDistribution, *, legacy: bool) -> BatchStream:
    """The run's batches, cut for its step (:func:`embedlab.engines.step.step_config`): those of
    the batch specification (:mod:`embedlab.data.batchspec`), or, for a ``legacy`` run, the
    draws of the generator it started with."""
    plan, m = step_config(cfg), cfg.model
    kind = BatchStream if legacy else SpecBatchStream
    return kind(prepared.ids, prepared.sentence_ends, keep, noise, window=m.window,
                       batch_size=cfg.optim.batch_size, group=plan.step.group,
                       noise_per_group=plan.noise_per_group, seed=cfg.seed,
                       epochs=cfg.optim.epochs, pad_to=plan.pad_to,
                       interleave=cfg.optim.interleave)


class InitialVectors:
    """A new run's initial parameters (:func:`embedlab.engines.params.fresh_params`), drawn on
    a thread while the corpus is opened and checked.

    The draw reproduces ``torch.rand``'s Mersenne Twister, one 32-bit word per value, so it is
    sequential; for millions of words it is drawn in C (:func:`embedlab.engines.params.
    native_uniform`), and the output matrix's pages are written there too, both without the
    GIL, while the main thread reads the vocabulary. The values are the same whichever thread
    draws them.
    """

    def __init__(self, cfg: TrainConfig, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._drawn: list[Any] = []
        self._thread = threading.Thread(target=self._draw, args=(cfg, vocab_size), daemon=True,
                                        name="embedlab-initial-vectors")
        self._thread.start()

    def _draw(self, cfg: TrainConfig, vocab_size: int) -> None:
        from embedlab.engines.params import fresh_params

        try:
            self._drawn.append(fresh_params(cfg.model, vocab_size, cfg.seed))
        except BaseException as exc:  # MemoryError, say: raised where the vectors are taken
            self._drawn.append(exc)

    def tensors(self, vocab_size: int) -> dict[str, np.ndarray] | None:
        """The parameters as checkpoint tensors, for a vocabulary of ``vocab_size`` words (None
        for another size: the corpus's vocabulary was not the one its meta.json declared)."""
        self._thread.join()
        drawn = self._drawn[0]
        if isinstance(drawn, BaseException):
            raise drawn
        return drawn.tensors() if vocab_size == self.vocab_size else None


def _start_initial_vectors(cfg: TrainConfig) -> InitialVectors | None:
    """Start drawing a new run's initial vectors when --corpus is a prepared folder, whose
    meta.json says the vocabulary's size before the vocabulary is read; the run's memory is
    checked first."""
    size = None if cfg.data.corpus in SPECIAL_CORPORA else declared_vocab_size(cfg.data.corpus)
    if not size:
        return None
    _check_memory(cfg, size, shape="prepared")
    return InitialVectors(cfg, size)


def _check_memory(cfg: TrainConfig, vocab_size: int, *, shape: Shape) -> None:
    group = distributed.current()
    chunks = chunks_in_flight(cfg.optim.micro_batches, cfg.optim.micro_order,
                              1 if group is None else group.size)
    plan = step_config(cfg)
    check_memory(vocab_size, cfg.model.dim, loss=cfg.model.loss, window=cfg.model.window,
                 chunks=chunks, shape=shape, batch_size=cfg.optim.batch_size,
                 engine=cfg.engine, noise=noise_bytes(plan.noise_per_group, plan.step.group,
                                                      chunks),
                 noise_flag="--shared-negatives" if cfg.model.shared_negatives else "--negative")


def _engine_and_state(cfg: TrainConfig, run_dir: Path, ckpt: Path | None, vocab: Vocab,
                      noise: NoiseDistribution, rows: int, initial: InitialVectors | None,
                      warm_from: list[Path], *, same_corpus: Callable[[Any], None]
                      ) -> tuple[Engine, TrainState, list[str]]:
    """The engine with its parameters — resumed, fresh or warm-started — the loop's state, and
    the lines that say which. ``initial``: a new run's parameters, being drawn; ``warm_from``
    gets the checkpoint a warm start copied from; ``same_corpus``: refuses a checkpoint's
    corpus fingerprint that is not the corpus's, before its tensors' shapes are checked (a
    corpus prepared again from other text has another vocabulary size too, and that is what
    must be said)."""
    if ckpt is None:
        tensors = initial.tensors(len(vocab)) if initial is not None else None
        with deferred_interrupt():  # the torch engine imports torch here: see deferred_interrupt
            engine = engine_for_config(cfg, noise, rows, tensors=tensors, counts=vocab.counts)
        started = [f"embedlab: new run {run_dir}"]
        if cfg.init_from:
            started.append(warm_start(engine, vocab, cfg.init_from, used=warm_from))
            warn_if_another_warm_start(cfg.init_from, warm_from[-1])
        return engine, TrainState(), started
    tensors, stored = load_checkpoint(ckpt, state_spec=TRAIN_STATE)
    same_corpus(stored.get("corpus"))
    _check_settings(run_dir, ckpt, cfg, stored.get("settings"))
    if stored.get("corpus") is None:  # a checkpoint from before fingerprints: its words, first
        _check_legacy_vocabulary(run_dir, vocab, cfg, ckpt)
    _check_tensors(tensors, ckpt, len(vocab), cfg.model.dim, loss=cfg.model.loss)
    with deferred_interrupt():
        engine = engine_for_config(cfg, noise, rows, tensors=tensors, counts=vocab.counts)
    state = TrainState.from_state_dict(stored)
    if state.cursor.epoch >= cfg.optim.epochs:  # nothing to resume: the loop says it finished
        return engine, state, []
    return engine, state, [f"embedlab: resuming {run_dir} from {ckpt.name} (step {state.step})"]


def _say_unapplied(run_dir: Path, cfg: TrainConfig, *, finished: bool) -> None:
    """Name the settings a call that trains nothing was given but did not record (another
    --best-metric or --keep for a finished run): they apply only to training, which a larger
    --epochs (a ``finished`` run) or --max-steps (one at its --max-steps) would do."""
    from embedlab.config import flatten, option_spelled
    from embedlab.errors import note
    from embedlab.run.folder import same_file, stored_config_from_here

    stored = stored_config_from_here(run_dir)  # parsed, its paths as a resume reads them
    if stored is None:
        return

    def same(key: str, x: Any, y: Any) -> bool:
        if key == "eval.analogies" and x and y:  # qw.txt and /where/it/is/qw.txt
            return same_file(x, y)
        if key == "eval.similarity":
            x, y = list(x or ()), list(y or ())
            return len(x) == len(y) and all(map(same_file, x, y))
        return bool(x == y)

    a, b = flatten(stored.to_dict()), flatten(cfg.to_dict())
    # what persists in the run's bookkeeping; not threads or max_steps, which are per call
    def shown(key: str) -> str:  # --no-tensorboard as given, not --tensorboard
        name, value = option_spelled(key), b[key]
        if not isinstance(value, bool) or name == key:
            return name
        return (name if value else f"--no-{name[2:]}") if name.startswith("--") else \
            f"{name}={value}"

    changed = [shown(k) for k in sorted(b) if k in a and not same(k, a[k], b[k])
               and k.startswith(("checkpoint.", "track.", "eval.")) and k != "track.progress"]
    if changed:
        further = f"a larger {spell_name('--epochs')}" if finished else \
            f"a larger {spell_name('--max-steps')} or none"
        note(f"{', '.join(changed)} not applied: this call trains nothing, and the run keeps its "
             f"settings (they take effect in a call that trains, e.g. with {further})")


def _check_run_files(run_dir: Path) -> None:
    """Refuse, before config.json and env.json are rewritten, a resume whose run files are in
    the way (a folder where status.json or metrics.jsonl belongs): found by the loop's first
    write, it came after this resume had been recorded."""
    from embedlab.checkpoint import INDEX_FILE
    from embedlab.fsutil import output_target
    from embedlab.run.provenance import ENV_FILE
    from embedlab.run.status import STATUS_FILE
    from embedlab.track.jsonl import METRICS_FILE
    from embedlab.track.projector import PROJECTOR_CONFIG

    for name in (CONFIG_FILE, ENV_FILE, STATUS_FILE, METRICS_FILE, VOCAB_FILE, INDEX_FILE,
                 PROJECTOR_CONFIG):
        path = run_dir / name
        if path.is_symlink():
            # a run's records are its own: through a link (a run folder received from someone)
            # training would rewrite, or empty, the file it points to outside the run
            raise InputError(f"{path} is a symbolic link (to {path.readlink()}), and training "
                             "rewrites the run's records in place; replace the link with a copy "
                             f"of its file (cp --remove-destination \"$(readlink -f "
                             f"{shlex.quote(str(path))})\" {shlex.quote(str(path))}), then "
                             f"{rerun()}")
        output_target(path, fix=f"move it out of the run folder, then {rerun()}")


def _check_settings(run_dir: Path, ckpt: Path, cfg: TrainConfig, recorded: str | None) -> None:
    """Refuse a config.json whose settings are not those ``ckpt`` was trained with: edited by
    hand, it would change the run from here on while its records (env.json's command, the
    ``runs`` table) say it was one run. Flags were checked against config.json before."""
    edited = edited_settings(recorded, cfg) if recorded is not None else []
    if edited:
        raise InputError(f"{run_dir / CONFIG_FILE} does not hold the settings {ckpt.name} was "
                         f"trained with: {'; '.join(edited)}; put the checkpoint's values back "
                         f"(an edit would change the run half-way), or pass "
                         f"{spell('--restart', True)} to start over with the new ones")


def _check_same_corpus(cfg: TrainConfig, run_dir: Path, prepared: PreparedCorpus,
                       ckpt: Path | None, trained_on: Any, fingerprint: str, *,
                       had_copy: bool) -> None:
    """Refuse a corpus whose fingerprint is not the one ``ckpt`` recorded (None: a checkpoint
    from before fingerprints, checked by its words instead). ``had_copy``: RUN/prepared was
    there before this start (else this start made it, from the corpus given)."""
    if ckpt is None or trained_on in (None, fingerprint):
        return
    restart = spell("--restart", True)
    own = Path(prepared.root).resolve() == (run_dir / PREPARED_DIR).resolve()
    if own and not had_copy:
        # made just now from the wrong text: not left to be taken for the run's copy
        shutil.rmtree(prepared.root, ignore_errors=True)
    elif own:
        # the run's own copy, which no --corpus replaces: damaged, or swapped by hand
        raise InputError(f"the run's prepared copy {prepared.root} of its corpus is not what "
                         f"{ckpt.name} was trained on (its vocabulary, sentences or token ids "
                         f"differ: damaged or replaced?); delete {prepared.root} to prepare it "
                         f"again from {cfg.data.corpus}, or pass {restart} to start over")
    raise InputError(f"the corpus {cfg.data.corpus} is not the one {ckpt.name} was trained "
                     f"on (its vocabulary, sentences or token ids differ: prepared again "
                     f"from other text?); pass the corpus the run was trained on"
                     f"{_typed_elsewhere(cfg.data.corpus, run_dir)}, or {restart} to start "
                     "over on this one")


def _typed_elsewhere(corpus: str, run_dir: Path) -> str:
    """Where a relative ``corpus`` pointed when the run was made in another folder: the same
    words from here may name another folder (``prep/`` of another project)."""
    from embedlab.run.folder import creation_folder, typed_in

    folder = creation_folder(run_dir)
    there = typed_in(folder, corpus)
    if folder is None or there is None or Path.cwd().resolve() == folder.resolve():
        return ""
    return f" (the run was made in {folder}, where {corpus} is {there}: " \
           f"{spell('--corpus', there)})"


def _check_tensors(tensors: dict[str, np.ndarray], ckpt: Path, vocab_size: int, dim: int, *,
                   loss: str) -> None:
    """Refuse a checkpoint that lacks a tensor of the model, or whose tensors do not fit the run:
    another vocabulary or --dim, or files altered behind a re-signed manifest. The native kernel
    indexes rows without bounds checks, so this must hold before the first step. Dtypes are the
    stored ones: a NumPy load would widen bfloat16 to float32 and hide it. Hierarchical softmax
    keeps the V−1 inner nodes of the Huffman tree (``hs_nodes``) instead of output vectors."""
    output = "hs_nodes" if loss == "hs" else "output_embeddings"
    needed = ["input_embeddings", output, *(["output_bias"] if loss == "nce" else [])]
    missing = [n for n in needed if n not in tensors]
    if missing:
        raise InputError(f"checkpoint {ckpt} has no {', '.join(missing)} (it holds "
                         f"{', '.join(sorted(tensors)) or 'none'}); resume from another "
                         f"checkpoint ({lists_them(ckpt)}) or pass "
                         f"{spell('--restart', True)} to start over")
    stored = {name: dtype for name, _, dtype in tensor_specs(ckpt)}
    wanted = {"input_embeddings": (vocab_size, dim), "output_embeddings": (vocab_size, dim),
              "hs_nodes": (max(0, vocab_size - 1), dim), "output_bias": (vocab_size,)}
    for name in needed:
        array = tensors[name]
        if array.shape != wanted[name] or stored.get(name) != "F32":
            raise InputError(f"checkpoint {ckpt} holds {name} of shape {tuple(array.shape)} and "
                             f"dtype {stored.get(name)}, but the run's vocabulary × dim needs "
                             f"{wanted[name]} F32; resume from another checkpoint ('embedlab "
                             "ckpt RUN' lists them) or pass "
                             f"{spell('--restart', True)} to start over")
    from embedlab.training.saving import non_finite

    bad = non_finite({name: tensors[name] for name in needed})
    if bad is not None:  # never saved by a run (its save refuses them): altered, re-signed
        raise InputError(f"checkpoint {ckpt} holds nan or inf values in {bad} (vectors that "
                         "overflowed, saved by an older version, or a file altered behind a "
                         "re-signed manifest), from which no step can train; resume from "
                         f"another checkpoint ({lists_them(ckpt)}) or pass "
                         f"{spell('--restart', True)} to start over")


def reproducing_command(cfg: TrainConfig, run_dir: Path, *, init_from: Path | None = None
                        ) -> str:
    """The ``embedlab train`` line that starts this run again (env.json's ``command``): every
    setting that changes the result spelled out, defaults too (a later version may change a
    default), with the preset, the seed, the engine, ``--threads`` for the torch engine (its
    sums depend on it), ``--log-every`` (the logged losses, and the best checkpoint by loss,
    are its windows' means), a stop point (``--max-steps``) if the run has one, and the
    checkpoint a warm start copied from (``init_from``: a run's latest changes as it trains
    on). Sentences given in memory are read from the run's own tokens (``RUN/prepared``). Run
    with another ``--run`` on the same machine and kernel, it trains the same bits for the
    steps it trains and logs the same losses; a resume that raises ``--epochs`` changes the
    run's schedule from its step on (each resume is recorded with its step)."""
    from embedlab.config import MUTABLE_ON_RESUME, OPTIONS, flatten
    from embedlab.data.sentences import is_label

    flat = flatten(cfg.to_dict())
    corpus = str(run_dir / "prepared") if is_label(cfg.data.corpus) else cfg.data.corpus
    args = ["embedlab", "train", "--run", str(run_dir), "--corpus", corpus]
    if cfg.preset:  # a preset is more than its values (cs20 trains the batch's mean loss)
        args += ["--preset", cfg.preset]
    for name, (section, key) in OPTIONS.items():
        full = f"{section}.{key}" if section else key
        value = flat.get(full)
        if name in ("corpus", "init_from") or value is None or (
                full.startswith(MUTABLE_ON_RESUME) and
                name not in ("max_steps", "threads", "log_every")):
            continue
        if name == "threads" and cfg.engine != "torch":
            continue  # the native engine's bits do not depend on it, nor the cuda engine's
        if name == "init_scale" and cfg.model.init == "uniform":
            continue  # the lecture's U[0, 1) has no width: a new run refuses the flag with it
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):  # --lowercase/--no-lowercase, the one such setting
            args.append(flag if value else f"--no-{flag[2:]}")
        else:
            args += [flag, str(value)]
    if init_from is not None:
        args += ["--init-from", str(init_from)]
    return shlex.join(args)


def _kernel_identity(engine: str) -> dict[str, str] | None:
    """What the native kernel this run trains with was built from; None on other engines."""
    if engine != "native":
        return None
    from embedlab.engines import native

    return native.library.identity()


def _warn_if_other_kernel(run_dir: Path, kernel: dict[str, str] | None) -> None:
    """A resume whose native kernel was built otherwise (another compiler, its flags, another
    CPU) than the one the run last trained with: the same step may round otherwise."""
    before = last_kernel(run_dir)
    if kernel is None or before is None:
        return
    # "step": the hash of the training arithmetic's sources only; runs recorded before it have
    # "build", the whole library's
    key = "step" if "step" in before and "step" in kernel else "build"
    if before.get(key) == kernel.get(key):
        return
    differ = [f"{what} {before.get(key) or '?'} -> {kernel.get(key) or '?'}"
              for key, what in (("compiler", "compiler"), ("command", "build command"))
              if before.get(key) != kernel.get(key)]
    why = "; ".join(differ) if differ else \
        "the same compiler and command: another CPU, or another embedlab's kernel sources"
    warn(f"the native kernel is built otherwise than the one {run_dir} last trained with "
         f"({why}): its result may differ in the last bits from an uninterrupted run's")


def _warn_if_other_step_revision(run_dir: Path, engine: str, *, loss: str = "neg") -> None:
    """A run started by an embedlab whose step arithmetic differs (on ``engine``, which
    resumes it, for its ``loss``) resumes with this one's."""
    started = started_step_revision(run_dir)
    # a run started before the batch specification keeps its batches (see _legacy_batches)
    kept = {BATCH_SPEC_REVISION} if started is not None and started < BATCH_SPEC_REVISION \
        else set()
    differ = [r for r in sorted(STEP_CHANGES) if started is not None and
              started < r <= STEP_REVISION and r not in kept and
              engine in STEP_CHANGE_ENGINES.get(r, (engine,)) and
              loss in STEP_CHANGE_LOSSES.get(r, (loss,))]
    restart = spell("--restart", True)
    if started is not None and started > STEP_REVISION:  # a newer embedlab started it
        warn(f"{run_dir} was started by an embedlab with training-step revision {started}, "
             f"newer than this one's {STEP_REVISION}; it resumes with this revision's step, so "
             "its result will differ from an uninterrupted run of the newer version — resume "
             f"it with that version, or pass {restart} for a run of one revision")
    elif started is not None and differ:
        changes = "; ".join(STEP_CHANGES[r] for r in differ)
        warn(f"{run_dir} was started by an embedlab with training-step revision {started}, this "
             f"is revision {STEP_REVISION} ({changes}); it resumes with this revision's step, so "
             "its result will differ from an uninterrupted run of the old version — pass "
             f"{restart} for a run of one revision")
