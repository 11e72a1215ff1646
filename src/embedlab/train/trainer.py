"""The training loop: step → metrics → checkpoint → evaluation. Nothing else lives here.

Exactness contract: everything the future depends on is either a pure function of the config and
the data position (batches, noise words, learning rate: see :mod:`embedlab.data.pairs`) or part
of the checkpoint (parameters, global step, data cursor, words seen, the open logging window's
float64 sums, the best metric). Resuming from any checkpoint therefore replays the same steps
with the same bits as an uninterrupted run, on the same machine and thread count.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from threadpoolctl import threadpool_limits

from embedlab.checkpoint import (
    CheckpointManager,
    find_checkpoint,
    load_checkpoint,
    tensor_specs,
)
from embedlab.config import TrainConfig, check_best_metric
from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import BatchStream, Cursor, keep_probabilities
from embedlab.data.prepared import (
    SPECIAL_CORPORA,
    VOCAB_OPTIONS,
    PreparedCorpus,
    is_prepared,
)
from embedlab.data.preparing import prepare
from embedlab.data.tokenise_child import PrepareAhead
from embedlab.data.vocab import Vocab
from embedlab.engines import engine_for_config
from embedlab.engines.base import Engine
from embedlab.engines.step import pairs_in, step_config
from embedlab.errors import InputError, TrainingInterrupted, diverged
from embedlab.fsutil import missing_folders, remove_empty_folders
from embedlab.run.folder import abandon_after
from embedlab.run.lock import RunLock
from embedlab.run.provenance import started_step_revision, write_config_json, write_env_json
from embedlab.run.signals import SignalFlag, deferred_interrupt, interrupted
from embedlab.seeding import STREAMS
from embedlab.train.memory import release_free_memory
from embedlab.train.schedule import linear_lr

PREPARED_DIR = "prepared"
VOCAB_FILE = "vocab.tsv"
# Checkpointing must stay a small share of training time: the time-based cadence is stretched
# to at least this multiple of the last save's duration (2% => 50x).
SAVE_TIME_FACTOR = 50


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    words_seen: int
    loss: float | None
    train_seconds: float
    finished: bool
    vocab: Vocab
    w_in: np.ndarray


# ---- data -----------------------------------------------------------------------------------

def open_corpus(cfg: TrainConfig, run_dir: Path, *, progress: bool,
                ahead: PrepareAhead | None = None, fresh: bool = True) -> PreparedCorpus:
    """The run's prepared corpus: the folder named by --corpus, or RUN/prepared (made once).

    ``ahead``: a child already tokenising the corpus (see :mod:`embedlab.data.ahead`); its folder
    is adopted when the run has none yet, else it is discarded. ``fresh``: the run has no
    checkpoint, so a RUN/prepared made for other data flags is a leftover to rebuild (a trained
    run always keeps its own, whatever the current directory makes of a relative --corpus).
    """
    corpus = cfg.data.corpus
    if corpus not in SPECIAL_CORPORA and is_prepared(corpus):
        prepared = PreparedCorpus.open(corpus)
        _check_prepared_matches(cfg, prepared, fresh=fresh)
        return prepared
    local = run_dir / PREPARED_DIR
    if is_prepared(local):
        prepared = PreparedCorpus.open(local)
        if not fresh or _made_for(prepared, cfg):
            return prepared
        # Left by an attempt with other data flags that never trained (a run that did has a
        # config.json pinning them, and resolve_config refuses other flags): it is derived
        # data of this run folder, so it is rebuilt, never reused for the wrong corpus.
        shutil.rmtree(local)
    if ahead is not None and ahead.data == cfg.data:
        _warm_up(cfg)  # imports the final summaries need, while the child still works
        if ahead.take(local):
            return PreparedCorpus.open(local)
    d = cfg.data
    return prepare(corpus, local, lowercase=d.lowercase, min_count=d.min_count,
                   max_vocab=d.max_vocab, unk=d.unk, max_distinct=d.max_distinct,
                   progress=progress, run_dir=run_dir)


def _made_for(prepared: PreparedCorpus, cfg: TrainConfig) -> bool:
    """True when ``prepared`` was built from ``cfg``'s corpus with its vocabulary options (a key
    missing from an older meta.json is taken to agree)."""
    d = cfg.data
    source = d.corpus if d.corpus in SPECIAL_CORPORA else str(Path(d.corpus).resolve())
    return not _differences(prepared, {"source": source, "max_distinct": d.max_distinct,
                                       **_vocab_options(cfg)})


def _vocab_options(cfg: TrainConfig) -> dict[str, Any]:
    return {key: getattr(cfg.data, key) for key in VOCAB_OPTIONS}


def _differences(prepared: PreparedCorpus, wanted: dict[str, Any]) -> dict[str, Any]:
    """The wanted options ``prepared`` was built otherwise (keys its meta.json lacks, written by
    an older embedlab, are taken to agree)."""
    meta = prepared.meta
    return {key: value for key, value in wanted.items() if key in meta and meta[key] != value}


def _warm_up(cfg: TrainConfig) -> None:
    """Import now what the run imports later anyway (the PCA figure needs matplotlib)."""
    if cfg.track.tensorboard:
        import importlib

        for module in ("embedlab.track.tracker", "embedlab.track.plots"):
            importlib.import_module(module)


def _as_flag(key: str, value: Any) -> str:
    """``value`` of vocabulary option ``key`` as the user would type it."""
    flag = f"--{key.replace('_', '-')}"
    if isinstance(value, bool):
        return flag if value else f"--no-{flag[2:]}"
    return f"{flag} {value}" if value is not None else f"no {flag}"


def _check_prepared_matches(cfg: TrainConfig, prepared: PreparedCorpus, *,
                            fresh: bool = True) -> None:
    wanted = _vocab_options(cfg)
    # The limit decided the counts only if it pruned. Only a new run is held to it: runs made
    # before the run took the folder's --max-distinct recorded the default, and stay resumable.
    if fresh and prepared.meta.get("pruned"):
        wanted["max_distinct"] = cfg.data.max_distinct
    differ = [f"{_as_flag(k, v)} (prepared with {_as_flag(k, prepared.meta[k])})"
              for k, v in _differences(prepared, wanted).items()]
    if differ:
        source = f" (--preset {cfg.preset} sets some of them)" if cfg.preset else ""
        raise InputError(f"prepared corpus {prepared.root} was built with other vocabulary "
                         f"options: {', '.join(differ)}; drop those flags{source} or re-run "
                         "'embedlab prepare' with them")


# ---- the loop -------------------------------------------------------------------------------

#: the shape of the state save() writes: a re-signed state.json of another shape is one line
#: naming the damaged checkpoint, not a KeyError deep in a resume
TRAIN_STATE = {"cursor": {"epoch": int, "chunk": int, "batch": int}, "words_seen": int,
               "epoch": int, "train_seconds": float, "last_loss": (float, None),
               "window": ({"loss": float, "pairs": int, "words": int}, None), "finished": bool,
               "window_seconds": float, "wall_seconds": float}


class _Window:
    """The open logging window: float64 sums so the reported loss is exact.

    ``seconds``: training time the window had already run in an earlier process (a resumed
    window's words were trained then too); :meth:`start` counts it in, so the first words/s
    after a resume is not the earlier words over only the new seconds.
    """

    def __init__(self, state: dict[str, Any] | None = None, seconds: float = 0.0) -> None:
        state = state or {}
        self.loss = float(state.get("loss", 0.0))
        self.pairs = int(state.get("pairs", 0))
        self.words = int(state.get("words", 0))
        self.seconds = seconds
        self.started = time.perf_counter()

    def start(self) -> None:
        """Training begins (again) now: the time before it (building the model, opening the
        writers, rewriting a resumed run's event files) is not the window's."""
        self.started = time.perf_counter() - self.seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def state(self) -> dict[str, Any]:
        return {"loss": self.loss, "pairs": self.pairs, "words": self.words}


def train(cfg: TrainConfig, run_dir: Path, *, argv: list[str], resume_from: str | None = None,
          out: TextIO | None = None, ahead: PrepareAhead | None = None,
          abandon_newer: bool = False) -> TrainResult:
    """Train (or resume) the run in ``run_dir`` with the resolved ``cfg``.

    ``abandon_newer`` (``--from``): checkpoints newer than ``resume_from`` are moved into
    ``RUN/checkpoints-abandoned-<time>/`` once every check has passed, so that automatic resume
    does not jump back to them.

    A run folder this call created (and any parent it had to create) is removed again when the
    input is refused, or Ctrl-C comes, before anything was trained, so a corrected command
    starts cleanly. ``ahead``: the corpus being tokenised in a child
    (:class:`embedlab.data.ahead.PrepareAhead`); the caller cancels it when this returns or
    raises.
    """
    out = out or sys.stderr  # looked up per call: tests and tools swap sys.stderr
    cfg = cfg.resolve()  # idempotent; library callers may pass threads=0 or engine="auto"
    made = missing_folders(run_dir)  # made[0] is the (absolute) run folder when it is new
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        remove_empty_folders(made)
        raise InputError(f"cannot create the run folder {run_dir} ({exc.strerror or exc}); "
                         "pass --run (or --runs-dir) in a writable location") from None
    # A run another process holds is refused here, before the clean-up below can touch it
    # (two commands racing to create the same new run both see it missing). NumPy's BLAS
    # (evaluation, the neighbour table, PCA) runs on one thread: OpenBLAS sums a product in an
    # order that depends on its thread count, and the metrics evaluated during training (which
    # pick the best checkpoint) must not change with --threads, which a resume may change; its
    # threads would also take the cores from the kernel's (see track.summaries.one_blas_thread).
    with RunLock(run_dir, argv=argv), threadpool_limits(1, user_api="blas"):
        try:
            return _train_locked(cfg, run_dir, argv=argv, resume_from=resume_from, out=out,
                                 ahead=ahead, abandon_newer=abandon_newer)
        except BaseException:
            # Refused, Ctrl-C or SIGTERM before training began (once it has, they save and
            # stop), or a failure (out of memory, a full disk, a bug) before the first
            # checkpoint: nothing of a new run is worth keeping, not even the --runs-dir it was
            # put in, and a half-made folder would make the corrected command a "resume" of
            # different flags. Removed while the lock is held, so no other process can have
            # started in it. (A signal after training began saved a checkpoint: kept.)
            if made and not any((made[0] / "checkpoints").glob("ckpt-*")):
                shutil.rmtree(made[0], ignore_errors=True)
                remove_empty_folders(made[1:])
            raise


def _train_locked(cfg: TrainConfig, run_dir: Path, *, argv: list[str], resume_from: str | None,
                  out: TextIO, ahead: PrepareAhead | None, abandon_newer: bool) -> TrainResult:
    from embedlab.run.status import read_status, write_status
    from embedlab.track.tracker import open_tracker

    check_best_metric(cfg)
    progress = cfg.track.progress and out.isatty()
    manager = CheckpointManager(run_dir, keep=cfg.checkpoint.keep,
                                keep_every=cfg.checkpoint.keep_every,
                                best_metric=cfg.checkpoint.best_name,
                                best_mode=cfg.checkpoint.best_mode)
    manager.check_index()  # a damaged index is refused before anything of the run is written
    manager.remove_stale_tmp()  # a save killed mid-way leaves one; we hold the lock
    ckpt = find_checkpoint(resume_from) if resume_from else _latest(manager, run_dir)
    prepared = open_corpus(cfg, run_dir, progress=progress, ahead=ahead, fresh=ckpt is None)
    vocab = prepared.vocab
    if len(prepared.ids) <= 1:
        raise InputError(f"corpus {cfg.data.corpus} has {len(prepared.ids)} in-vocabulary "
                         "token(s), fewer than a window needs; use a bigger corpus or lower "
                         "--min-count")
    m = cfg.model
    keep = keep_probabilities(vocab.counts, m.sample)
    _check_pairs_possible(prepared, cfg, keep)
    unknown = [w for w in cfg.track.probe_words if w not in vocab.index]
    if unknown:
        raise InputError(f"--probe word(s) not in the vocabulary: {', '.join(unknown)}; pick "
                         f"words the corpus has (the most frequent: {', '.join(vocab.words[:3])})")
    evaluator = _make_evaluator(cfg)
    if evaluator is not None:  # a file that misses the vocabulary: refused now, not mid-run
        evaluator.check(vocab.words)
    noise = NoiseDistribution(vocab.counts, m.noise_exponent)
    plan = step_config(cfg)
    stream = BatchStream(prepared.ids, prepared.sentence_ends, keep, noise, window=m.window,
                         batch_size=cfg.optim.batch_size, group=plan.step.group,
                         noise_per_group=plan.noise_per_group, seed=cfg.seed,
                         epochs=cfg.optim.epochs, pad_to=plan.pad_to,
                         interleave=cfg.optim.interleave)

    # ---- state: fresh, resumed or warm-started ----
    state: dict[str, Any] = {}
    if ckpt is not None:
        tensors, state = load_checkpoint(ckpt, state_spec=TRAIN_STATE)
        _check_tensors(tensors, ckpt, len(vocab), m.dim, nce=m.loss == "nce")
        started = [f"embedlab: resuming {run_dir} from {ckpt.name} (step {state['step']})"]
    with deferred_interrupt():  # the torch engine imports torch here: see deferred_interrupt
        engine = engine_for_config(cfg, noise, stream.rows,
                                   tensors=tensors if ckpt is not None else None)
    if ckpt is None:
        started = [f"embedlab: new run {run_dir}"]
        if cfg.init_from:
            started.append(warm_start(engine, vocab, cfg.init_from))

    # Everything above may refuse the command; nothing of the run was written (or moved) before
    # this point, so a refused resume leaves config.json (and so the next plain re-run) and the
    # checkpoints as they were.
    if ckpt is not None and abandon_newer:
        moved = abandon_after(run_dir, int(state["step"]))
        if moved:  # said at once: a write below may still fail, and the user must know
            print(f"embedlab: --from: moved {len(moved)} newer checkpoint(s) to "
                  f"{moved[0].parent}", file=out, flush=True)
    write_config_json(run_dir, cfg)
    if ckpt is not None:
        manager.protect(int(state["step"]))
        _warn_if_other_step_revision(run_dir, out)
    write_env_json(run_dir, argv=argv, threads=cfg.threads, seed=cfg.seed, streams=STREAMS)
    vocab.save_tsv(run_dir / VOCAB_FILE)
    print("\n".join(started), file=out)

    step = int(state.get("step", 0))
    cursor = Cursor.from_dict(state["cursor"]) if "cursor" in state else Cursor()
    words_seen = int(state.get("words_seen", 0))
    train_seconds = float(state.get("train_seconds", 0.0))
    window = _Window(state.get("window"), float(state.get("window_seconds", 0.0)))
    wall_before = float(state.get("wall_seconds", 0.0))  # earlier invocations, to the checkpoint
    last_loss: float | None = state.get("last_loss")
    metrics: dict[str, float] = dict(state.get("metrics", {}))
    if cursor.epoch >= cfg.optim.epochs:
        # nothing left to train: leave the finished run exactly as it is. Only the final
        # checkpoint reaches the end of the data, and everything it summarises was logged before
        # it was committed; a kill after that commit can only have missed the status line.
        if read_status(run_dir).get("status") != "finished":
            write_status(run_dir, status="finished", step=step, words_seen=words_seen,
                         loss=last_loss, train_seconds=train_seconds)
        print(f"embedlab: {run_dir} already finished at step {step}; pass --epochs N (more) to "
              "continue or --restart to start over", file=out)
        return TrainResult(run_dir, step, words_seen, last_loss, train_seconds, True, vocab,
                           engine.input_vectors)

    n_tokens = len(prepared.ids)
    total_words = cfg.optim.epochs * n_tokens
    raw_per_token = prepared.raw_tokens / max(1, n_tokens)
    started_wall = time.time()

    def wall() -> float:
        """Wall-clock seconds of the invocations that trained the run, this one included (what
        an earlier one did after the checkpoint resumed from is lost, like its training)."""
        return wall_before + time.time() - started_wall

    last_save = time.perf_counter()
    saved_step = step if ckpt is not None else -1

    def save(final: bool = False) -> float:
        """Save step ``step``; return the wall time recorded with it."""
        nonlocal last_save, saved_step
        wall_seconds = wall()
        st = {"cursor": cursor.to_dict(), "words_seen": words_seen, "epoch": cursor.epoch,
              "window": window.state(), "last_loss": last_loss, "train_seconds": train_seconds,
              "finished": final, "window_seconds": window.elapsed(),
              "wall_seconds": wall_seconds}
        began = time.perf_counter()
        release_free_memory()  # the batch producer's freed chunks: summaries allocate next
        # Summaries of step S are written (and flushed) *before* checkpoint S is committed: a
        # resume from S keeps the events up to S and drops later ones, so with this order a kill
        # at any moment leaves neither gaps nor duplicates.
        tracker.log_checkpoint(step, engine.input_vectors, engine.output_vectors)
        if final:
            tracker.log_final(step, engine.input_vectors, engine.output_vectors, cfg.to_dict(),
                              metrics)
        manager.save(step, engine.state_dict(), st, metrics)
        last_save = time.perf_counter()
        window.started += last_save - began  # words/s in the window counts training time only
        saved_step = step
        return wall_seconds

    every_steps = cfg.checkpoint.every_steps
    finished = False
    bar: Any = _NoBar()
    tracker: Any = None
    try:
        # The handlers are in place before status.json says "running": a SIGTERM while the
        # writers open (a resume rewriting its event files can take seconds) used to kill the
        # process silently, leaving "running" and the lock behind.
        with SignalFlag() as flag:
            write_status(run_dir, status="running", pid=os.getpid(), step=step,
                         words_seen=words_seen, started=started_wall,
                         train_seconds=train_seconds, wall_time=wall(), clear=("error",))
            bar = _progress_bar(progress, total_words, words_seen, out)
            tracker = open_tracker(run_dir, cfg, vocab=vocab,
                                   resume_step=step if ckpt else None)
            if flag:  # nothing was trained by this process: the checkpoint is where it stands
                write_status(run_dir, status="interrupted", step=step, wall_time=wall_before)
                assert flag.signum is not None
                raise interrupted(flag.signum, step, saved=ckpt is not None)
            window.start()
            t0 = time.perf_counter()
            for batch in stream.iterate(cursor):
                if cfg.max_steps is not None and step >= cfg.max_steps:
                    break
                done = cursor.epoch * n_tokens + batch.words_done
                # the rate where the batch starts, as word2vec's alpha for the words it reads
                # next: the first step trains at --lr, the last near lr·--min-lr-ratio
                lr = linear_lr(cfg.optim.lr, cfg.optim.min_lr_ratio, words_seen, total_words)
                loss = engine.step(batch, lr)
                step += 1
                advanced = done - words_seen
                words_seen = done
                cursor = batch.cursor_next
                # the last step is saved once, after the loop, together with its final summaries
                last = cursor.epoch >= cfg.optim.epochs
                value = float(loss)
                if not math.isfinite(value):
                    raise _diverged(step, value, cfg, saved_step)
                window.loss += value
                window.pairs += pairs_in(batch, m.model)
                window.words += advanced
                bar.update(advanced)

                if step % cfg.track.log_every == 0:
                    now = time.perf_counter()
                    train_seconds += now - t0
                    t0 = now
                    last_loss = window.loss / max(1, window.pairs)
                    elapsed = max(1e-9, window.elapsed())
                    scalars = {"train/loss": last_loss, "train/lr": lr,
                               "train/words_per_sec": window.words * raw_per_token / elapsed,
                               "train/pairs_per_sec": window.pairs / elapsed,
                               "train/progress": words_seen / total_words}
                    metrics["loss"] = last_loss
                    tracker.log_scalars(step, scalars)
                    bar.set_postfix(loss=f"{last_loss:.4f}", lr=f"{lr:.2e}", refresh=False)
                    window = _Window()
                    write_status(run_dir, step=step, words_seen=words_seen, loss=last_loss,
                                 train_seconds=train_seconds,
                                 raw_words=int(words_seen * raw_per_token), wall_time=wall())
                if cfg.eval.every_steps and step % cfg.eval.every_steps == 0 and evaluator:
                    results = evaluator(vocab.words, engine.input_vectors)
                    metrics.update(results)
                    tracker.log_scalars(step, {f"eval/{k}": v for k, v in results.items()})
                if flag and not last:
                    train_seconds += time.perf_counter() - t0
                    saved_wall = save()  # the status says what the checkpoint holds
                    write_status(run_dir, status="interrupted", step=step,
                                 words_seen=words_seen, loss=last_loss,
                                 train_seconds=train_seconds,
                                 raw_words=int(words_seen * raw_per_token), wall_time=saved_wall)
                    assert flag.signum is not None
                    raise interrupted(flag.signum, step)
                interval = max(cfg.checkpoint.every_secs,
                               SAVE_TIME_FACTOR * (manager.last_save_seconds or 0.0))
                if not last and ((every_steps and step % every_steps == 0)
                                 or time.perf_counter() - last_save >= interval):
                    train_seconds += time.perf_counter() - t0
                    save()
                    t0 = time.perf_counter()
            else:
                finished = True
            train_seconds += time.perf_counter() - t0
            if finished and window.pairs:
                # the last, partial window: logged only at the natural end, so a run sliced by
                # --max-steps logs exactly the steps an uninterrupted run logs
                last_loss = window.loss / window.pairs
                metrics["loss"] = last_loss
                tracker.log_scalars(step, {"train/loss": last_loss,
                                           "train/progress": words_seen / total_words})
                window = _Window()
            if evaluator and finished:
                results = evaluator(vocab.words, engine.input_vectors)
                metrics.update(results)
                tracker.log_scalars(step, {f"eval/{k}": v for k, v in results.items()})
            end_wall = save(final=finished) if saved_step != step else wall()
            write_status(run_dir, status="finished" if finished else "interrupted", step=step,
                         words_seen=words_seen, loss=last_loss, train_seconds=train_seconds,
                         raw_words=int(words_seen * raw_per_token), wall_time=end_wall)
    except TrainingInterrupted:
        raise
    except KeyboardInterrupt:
        # where the handlers could not catch it (raised by code, or they are not ours): nothing
        # was trained since the last checkpoint, which is where a re-run resumes
        write_status(run_dir, status="interrupted", step=step)
        raise
    except BaseException as exc:
        write_status(run_dir, status="failed", step=step, error=str(exc)[:500])
        raise
    finally:
        bar.close()
        if tracker is not None:
            tracker.close()
    return TrainResult(run_dir, step, words_seen, last_loss, train_seconds, finished, vocab,
                       engine.input_vectors)


def _warn_if_other_step_revision(run_dir: Path, out: TextIO) -> None:
    """A run started by an embedlab whose step arithmetic differs resumes with this one's."""
    from embedlab.engines import STEP_CHANGES, STEP_REVISION

    started = started_step_revision(run_dir)
    if started is not None and started != STEP_REVISION:
        changes = "; ".join(STEP_CHANGES[r] for r in sorted(STEP_CHANGES)
                            if started < r <= STEP_REVISION) or "an older step"
        print(f"embedlab: warning: {run_dir} was started by an embedlab with training-step "
              f"revision {started}, this is revision {STEP_REVISION} ({changes}); it resumes "
              "with this revision's step, so its result will differ from an uninterrupted run "
              "of the old version — pass --restart for a run of one revision", file=out)


def _diverged(step: int, loss: float, cfg: TrainConfig, saved_step: int) -> InputError:
    return diverged(step, loss, saved_step, "Start over with a lower learning rate, e.g. "
                    f"--restart --lr {cfg.optim.lr / 4:g}")


def _check_tensors(tensors: dict[str, np.ndarray], ckpt: Path, vocab_size: int, dim: int, *,
                   nce: bool) -> None:
    """Refuse a checkpoint that lacks a tensor of the model, or whose tensors do not fit the run:
    another vocabulary or --dim, or files altered behind a re-signed manifest. The native kernel
    indexes rows without bounds checks, so this must hold before the first step. Dtypes are the
    stored ones: a NumPy load would widen bfloat16 to float32 and hide it."""
    needed = ["input_embeddings", "output_embeddings", *(["output_bias"] if nce else [])]
    missing = [n for n in needed if n not in tensors]
    if missing:
        raise InputError(f"checkpoint {ckpt} has no {', '.join(missing)} (it holds "
                         f"{', '.join(sorted(tensors)) or 'none'}); resume from another "
                         "checkpoint ('embedlab ckpt RUN' lists them) or pass --restart to start "
                         "over")
    stored = {name: dtype for name, _, dtype in tensor_specs(ckpt)}
    wanted = {"input_embeddings": (vocab_size, dim), "output_embeddings": (vocab_size, dim),
              "output_bias": (vocab_size,)}
    for name in needed:
        array = tensors[name]
        if array.shape != wanted[name] or stored.get(name) != "F32":
            raise InputError(f"checkpoint {ckpt} holds {name} of shape {tuple(array.shape)} and "
                             f"dtype {stored.get(name)}, but the run's vocabulary × dim needs "
                             f"{wanted[name]} F32; resume from another checkpoint ('embedlab "
                             "ckpt RUN' lists them) or pass --restart to start over")


def _check_pairs_possible(prepared: PreparedCorpus, cfg: TrainConfig,
                          keep: np.ndarray | None) -> None:
    """Refuse a corpus that cannot give a single (centre, context) pair: the run would
    "finish" with its vectors at their random start and the loss n/a. ``keep``: the words'
    subsampling keep probabilities (None: no subsampling)."""
    if prepared.longest_sentence() < 2:
        raise InputError(f"corpus {cfg.data.corpus} has no sentence (line) with two "
                         "in-vocabulary words, and contexts never cross a line end; put more "
                         "than one word per line, or lower --min-count")
    if keep is not None:
        kept = float(np.dot(np.asarray(prepared.vocab.counts, dtype=np.float64), keep))
        if kept < 2:
            raise InputError(f"subsampling (--sample {cfg.model.sample:g}) keeps about "
                             f"{kept:.1f} of the corpus's {len(prepared.ids):,} tokens per "
                             "epoch, too few to form a pair; pass --sample 0 (off) or use a "
                             "bigger corpus")


def _latest(manager: CheckpointManager, run_dir: Path) -> Path | None:
    """The checkpoint to resume from; None for a run that has none yet.

    A run whose checkpoints all fail verification is refused rather than started over: a
    fresh start in the same folder would overwrite the damaged checkpoints' evidence and mix
    two runs' histories.
    """
    latest = manager.latest()  # warns about each damaged one it skips
    if latest is None and manager.list(check=False):
        raise InputError(f"run {run_dir} has checkpoints but none of them is intact (see the "
                         "warnings above); restore them from a backup, or pass --restart to "
                         "start over (the old folder is moved aside)")
    return latest


def _make_evaluator(cfg: TrainConfig) -> Any:
    if not (cfg.eval.analogies or cfg.eval.similarity):
        if cfg.eval.every_steps:
            raise InputError("--eval-every needs --eval-analogies FILE and/or "
                             "--eval-similarity FILE")
        return None
    from embedlab.eval import make_evaluator

    return make_evaluator(cfg.eval)


def warm_start(engine: Engine, vocab: Vocab, source: str) -> str:
    """Copy the rows of words present in both vocabularies from another run or checkpoint into
    ``engine``'s parameters; return the message that says what was copied."""
    from embedlab.vectors import check_vocab_fits

    ckpt = find_checkpoint(source)
    tensors, _ = load_checkpoint(ckpt)
    # a subset written by `ckpt --export-subset` may hold only some tensors, or renamed ones
    missing = [n for n in ("input_embeddings", "output_embeddings") if n not in tensors]
    if missing:
        raise InputError(f"--init-from {source}: checkpoint {ckpt} has no "
                         f"{' or '.join(missing)} (it holds {', '.join(sorted(tensors)) or 'none'})"
                         "; pass a run or a full checkpoint, or export a subset with both "
                         "(embedlab ckpt RUN --export-subset OUT --names "
                         "input_embeddings,output_embeddings)")
    vocab_file = _vocab_of(ckpt)
    src_vocab = Vocab.load_tsv(vocab_file)
    w_in = tensors["input_embeddings"]
    check_vocab_fits(vocab_file, len(src_vocab), ckpt, w_in)
    if tuple(tensors["output_embeddings"].shape) != tuple(w_in.shape):
        raise InputError(f"--init-from {source}: checkpoint {ckpt} holds output embeddings of "
                         f"shape {tuple(tensors['output_embeddings'].shape)} but input "
                         f"embeddings of shape {tuple(w_in.shape)}; pass another checkpoint "
                         "('embedlab ckpt RUN' lists them)")
    params = engine.state_dict()
    dim = params["input_embeddings"].shape[1]
    if w_in.shape[1] != dim:
        raise InputError(f"--init-from {source} has dim {w_in.shape[1]}, this run {dim}; pass a "
                         "matching --dim")
    index = src_vocab.index
    pairs = [(i, index[w]) for i, w in enumerate(vocab.words) if w in index]
    if pairs:
        dst = np.array([p[0] for p in pairs], dtype=np.int64)
        src = np.array([p[1] for p in pairs], dtype=np.int64)
        for name in params:  # the output bias only where both runs have one (NCE)
            if name in tensors:
                params[name][dst] = tensors[name][src]
        engine.load_state_dict(params)
    return (f"embedlab: warm start from {ckpt}: copied {len(pairs)} of {len(vocab)} words' rows "
            f"(input and output embeddings); {len(vocab) - len(pairs)} new words initialised "
            "as usual")


def _vocab_of(ckpt: Path) -> Path:
    for parent in (ckpt, *ckpt.parents[:3]):
        if (parent / VOCAB_FILE).is_file():
            return parent / VOCAB_FILE
    raise InputError(f"no {VOCAB_FILE} found next to {ckpt}; pass a run folder to --init-from")


class _NoBar:
    def update(self, n: int) -> None: ...
    def set_postfix(self, **kw: Any) -> None: ...
    def close(self) -> None: ...


def _progress_bar(enabled: bool, total: int, initial: int, out: TextIO) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="w", unit_scale=True, file=out,
                dynamic_ncols=True, smoothing=0.1, desc="train")
