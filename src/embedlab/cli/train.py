"""``embedlab train``: parse flags, pick the run folder, call the trainer."""

from __future__ import annotations

import errno
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from embedlab.errors import InputError
from embedlab.fsutil import missing_folders, remove_empty_folders

if TYPE_CHECKING:
    from embedlab.data.tokenise_child import PrepareAhead
    from embedlab.run.lock import RunLock

# flag name -> (config section or None for top level, config key)
_FIELDS: dict[str, tuple[str | None, str]] = {
    "corpus": ("data", "corpus"), "lowercase": ("data", "lowercase"),
    "min_count": ("data", "min_count"), "max_vocab": ("data", "max_vocab"), "unk": ("data", "unk"),
    "max_distinct": ("data", "max_distinct"),
    "model": ("model", "model"), "loss": ("model", "loss"), "dim": ("model", "dim"),
    "window": ("model", "window"), "negative": ("model", "negative"),
    "shared_negatives": ("model", "shared_negatives"),
    "negative_group": ("model", "negative_group"),
    "noise_exponent": ("model", "noise_exponent"), "sample": ("model", "sample"),
    "init": ("model", "init"), "init_scale": ("model", "init_scale"),
    "lr": ("optim", "lr"), "min_lr_ratio": ("optim", "min_lr_ratio"),
    "epochs": ("optim", "epochs"), "batch_size": ("optim", "batch_size"),
    "interleave": ("optim", "interleave"),
    "checkpoint_every": ("checkpoint", "every_steps"),
    "checkpoint_secs": ("checkpoint", "every_secs"), "keep": ("checkpoint", "keep"),
    "keep_every": ("checkpoint", "keep_every"), "best_metric": ("checkpoint", "best_metric"),
    "log_every": ("track", "log_every"), "tensorboard": ("track", "tensorboard"),
    "probe": ("track", "probe_words"), "projector_words": ("track", "projector_words"),
    "projector_each_checkpoint": ("track", "projector_each_checkpoint"),
    "progress": ("track", "progress"),
    "eval_every": ("eval", "every_steps"), "eval_analogies": ("eval", "analogies"),
    "eval_similarity": ("eval", "similarity"), "eval_restrict_vocab": ("eval", "restrict_vocab"),
    "seed": (None, "seed"), "threads": (None, "threads"), "engine": (None, "engine"),
    "max_steps": (None, "max_steps"),
    "init_from": (None, "init_from"),
}


def _explicit(params: dict[str, Any]) -> dict[str, Any]:
    """Only the flags the user actually gave, nested like TrainConfig.to_dict()."""
    out: dict[str, Any] = {}
    for name, (section, key) in _FIELDS.items():
        value = params.get(name)
        if value is None or value == ():
            continue
        if isinstance(value, tuple):
            value = list(value)
        if section is None:
            out[key] = value
        else:
            out.setdefault(section, {})[key] = value
    return out


@click.command(context_settings={"show_default": True})
@click.option("--corpus", help="demo (built in), text8 (downloaded), a file/folder (.gz/.bz2/.xz "
              "ok) or a folder made by 'embedlab prepare'.  [default: demo]")
@click.option("--run", "run", type=click.Path(path_type=Path),
              help="Run folder: created, or resumed from its latest verified checkpoint.")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"),
              help="Parent of auto-named run folders (used without --run).")
@click.option("--preset", type=click.Choice(["cs20"]), help="A named configuration (cs20: the "
              "CS20 lecture's word2vec); explicit flags override it.")
@click.option("--model", type=click.Choice(["skipgram", "cbow"]), help="[default: skipgram]")
@click.option("--loss", type=click.Choice(["neg", "nce"]),
              help="Negative sampling (a noise word equal to the pair's target is skipped, "
              "as in word2vec) or noise-contrastive estimation (kept, as in TensorFlow's "
              "nce_loss).  [default: neg]")
@click.option("--dim", type=int, help="Embedding size.  [default: 100]")
@click.option("--window", type=int, help="Maximum window; each centre draws 1..window.  "
              "[default: 5]")
@click.option("--negative", type=int, help="Noise words per positive pair (K).  [default: 5]")
@click.option("--shared-negatives", type=int, help="Noise words drawn per group of centres and "
              "shared by it (0 = ⌈4/3·K·(window+1)⌉, a third more than word2vec draws per "
              "centre).  [default: 0]")
@click.option("--negative-group", type=int, help="Centres sharing one set of noise words "
              "(smaller is closer to word2vec, slower; the group is gcd(this, --batch-size); "
              "--loss nce with an explicit --shared-negatives shares them across the whole "
              "batch, as TensorFlow's nce_loss).  [default: 32]")
@click.option("--noise-exponent", type=float, help="Noise ∝ count^alpha.  [default: 0.75]")
@click.option("--sample", type=float, help="Subsampling threshold t (0 = off).  [default: 0.001]")
@click.option("--init", type=click.Choice(["centered", "uniform"]),
              help="Input-vector initialisation.  [default: centered]")
@click.option("--init-scale", type=float, help="Centred initialisation U(-S/2, S/2)/dim "
              "(1: word2vec.c's, 2: gensim's; 0: 8 for skip-gram, 12 for CBOW).  [default: 0]")
@click.option("--min-count", type=int, help="Drop words rarer than this.  [default: 5]")
@click.option("--max-vocab", type=int, help="Keep the N most frequent words (incl. --unk).")
@click.option("--unk", help="Map out-of-vocabulary words to this token (id 0).")
@click.option("--lowercase/--no-lowercase", default=None, help="Lowercase tokens.")
@click.option("--max-distinct", type=int, help="Prune rare words while counting beyond this "
              "many distinct words.  [default: 10000000]")
@click.option("--epochs", type=int, help="[default: 5]")
@click.option("--lr", type=float, help="Initial learning rate; decays linearly to "
              "lr * --min-lr-ratio.  [default: 0.025]")
@click.option("--min-lr-ratio", type=float, help="Final lr as a fraction of --lr.  "
              "[default: 0.0001]")
@click.option("--batch-size", type=int, help="Centre words per step.  [default: 2048]")
@click.option("--interleave", type=int, help="Read the corpus as N interleaved parts, 4,096 "
              "tokens from each in turn, as word2vec's threads read it (1 = in order; a run "
              "started before this option keeps 1).  [default: 2]")
@click.option("--seed", type=int, help="Master seed for every random stream.  [default: 1]")
@click.option("--threads", type=int, help="CPU threads (0 = all cores).  [default: 0]")
@click.option("--engine", type=click.Choice(["auto", "native", "torch"]),
              help="native: the fused C kernel (skip-gram and CBOW; built on first use with the "
              "machine's C compiler); torch: PyTorch ops; auto: native when it builds.  "
              "[default: auto]")
@click.option("--max-steps", type=int, help="Stop at this global step (schedule unchanged); "
              "re-run without it to continue.")
@click.option("--checkpoint-every", type=int, help="Save every N steps (and every "
              "--checkpoint-secs, whichever first).")
@click.option("--checkpoint-secs", type=float, help="Save every this many seconds (stretched "
              "to 50x the last save's duration, so saving big models costs at most ~2%).  "
              "[default: 120]")
@click.option("--keep", type=int, help="Keep the latest N checkpoints.  [default: 5]")
@click.option("--keep-every", type=int, help="Archive (never delete) checkpoints at multiples "
              "of N steps.")
@click.option("--best-metric", help="Keep the best checkpoint by NAME[:min|max] (loss, analogy, "
              "similarity/<file>).  [default: loss:min]")
@click.option("--log-every", type=int, help="Steps per logging window.  [default: 100]")
@click.option("--tensorboard/--no-tensorboard", default=None, help="Write TensorBoard events "
              "(metrics.jsonl is always written).  [default: on]")
@click.option("--probe", multiple=True, help="Probe word whose neighbours are logged (repeat).")
@click.option("--projector-words", type=int, help="Words in the TensorBoard projector.  "
              "[default: 2000]")
@click.option("--projector-each-checkpoint/--no-projector-each-checkpoint", default=None,
              help="Also export the projector at every checkpoint.")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar on a terminal.")
@click.option("--eval-every", type=int, help="Evaluate every N steps (needs --eval-analogies "
              "and/or --eval-similarity).")
@click.option("--eval-analogies", type=click.Path(path_type=str),
              help="questions-words file for evaluation during training.")
@click.option("--eval-similarity", type=click.Path(path_type=str), multiple=True,
              help="word-pair similarity file (repeatable).")
@click.option("--eval-restrict-vocab", type=int, help="Analogies consider the N most frequent "
              "words.  [default: 30000]")
@click.option("--init-from", help="Warm start: copy rows of shared words from this run or "
              "checkpoint.")
@click.option("--restart", is_flag=True, help="Start the run over; the old folder is moved "
              "aside to RUN.old-<time>, never deleted.")
@click.option("--from", "from_ckpt", help="Resume from this checkpoint (folder, or 'best'); "
              "newer checkpoints are moved aside.")
def train(run: Path | None, runs_dir: Path, preset: str | None, restart: bool,
          from_ckpt: str | None, **params: Any) -> None:
    """Train word2vec; re-running the same command resumes exactly where it stopped."""
    # embedlab.run.folder is torch-free: a torch-engine run imports torch only after the corpus
    # child started
    from embedlab.run.folder import check_run_dir, check_runs_dir, choose_run_dir, move_aside

    explicit = _explicit(params)
    if run is None:
        check_runs_dir(runs_dir)
        run = choose_run_dir(runs_dir, explicit, preset)
    check_run_dir(run)
    if restart and from_ckpt:
        raise InputError("--restart and --from exclude each other; pass one")
    if restart:
        # absolute: "--run . --restart" must name a sibling folder, not fail in with_name
        run = Path(os.path.abspath(run))
    moved: Path | None = None
    old_lock: RunLock | None = None
    made = missing_folders(run.parent)  # the child's folder beside the run creates them
    ahead = None
    refused = False
    try:
        if restart and run.exists():
            old_lock = _lock_for_restart(run)
            try:
                moved = move_aside(run)
            except OSError as exc:
                raise InputError(f"--restart: cannot move {run} aside ({exc.strerror or exc}); "
                                 "check the permissions of its parent folder") from None
            if old_lock is not None:
                old_lock.moved_to(moved)
            click.echo(f"embedlab: --restart: moved the old run to {moved}", err=True)
        if not run.exists():
            ahead = _prepare_ahead(run, explicit, preset)  # refuses bad flags of a new run
        _train(run, explicit, preset, from_ckpt, ahead)
    except BaseException:
        # refused, Ctrl-C/SIGTERM, or a failure: what to undo depends on whether the new run
        # exists (a signal after training began saved it; before, the trainer removed it)
        refused = True
        raise
    finally:
        if ahead is not None:
            ahead.cancel()
        # A --restart that ends before the new run's first checkpoint (a bad flag, corpus or
        # --probe word, divergence, Ctrl-C before training began, out of memory, a full disk,
        # a bug) puts the old run back: the trainer has removed the new folder it made. Still
        # under the old run's lock.
        if refused and moved is not None and not run.exists():
            try:
                moved.rename(run)
            except OSError as exc:
                click.echo(f"embedlab: warning: could not put the old run back "
                           f"({exc.strerror or exc}); it is at {moved}: mv {moved} {run}",
                           err=True)
            else:
                if old_lock is not None:
                    old_lock.moved_to(run)
                click.echo(f"embedlab: --restart: put the old run back at {run}", err=True)
        if old_lock is not None:
            old_lock.release()
        if refused:  # e.g. an offline --corpus text8 with a new --runs-dir: leave no empty one
            remove_empty_folders(made)


def _lock_for_restart(run: Path) -> RunLock | None:
    """The old run's lock, so that a run another process is training is refused before
    anything moves (moving it pulled the folder from under that process). None for a folder
    this user cannot write into: no trainer can hold it either, since the lock is a file in it,
    and renaming it needs only its parent to be writable."""
    from embedlab.run.lock import RunLock

    try:
        return RunLock(run, argv=sys.argv).acquire()
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return None
        raise


def _prepare_ahead(run: Path, explicit: dict[str, Any], preset: str | None
                   ) -> PrepareAhead | None:
    """A new torch-engine run on a big raw corpus: tokenise it in a child while this process
    imports torch."""
    from embedlab.config import TrainConfig, apply_preset
    from embedlab.data.tokenise_child import PrepareAhead, should_prepare_ahead

    cfg = TrainConfig.from_dict(apply_preset(preset, explicit))
    if not should_prepare_ahead(cfg.data, engine=cfg.engine_for()):
        return None
    return PrepareAhead.start(cfg.data, run, progress=cfg.track.progress and sys.stderr.isatty())


def _train(run: Path, explicit: dict[str, Any], preset: str | None, from_ckpt: str | None,
           ahead: PrepareAhead | None) -> None:
    from embedlab.run.folder import resolve_config
    from embedlab.run.signals import deferred_interrupt

    with deferred_interrupt():  # numpy: see deferred_interrupt
        from embedlab.train.trainer import train as run_training

    cfg, _stored = resolve_config(run if run.exists() else None, explicit, preset)
    if cfg.engine_for() == "torch":
        # imported now, while a tokenising child works (ahead), not after waiting for it, and
        # before the freeze below; torch's C++ import swallows a Ctrl-C: see deferred_interrupt
        from embedlab.engines import engine_module

        with deferred_interrupt():
            engine_module("torch")  # imports torch, or says in one line how to install it
    # --from: the trainer moves the newer checkpoints aside once it holds the run's lock and
    # every check has passed, so a refused command leaves them where they were
    resume_from = _resolve_from(run, from_ckpt) if from_ckpt else None
    # The objects imported so far outlive training: freezing them keeps the cyclic collector
    # from rescanning them in every full collection (docs/performance.md).
    gc.freeze()
    try:
        result = run_training(cfg, run, argv=sys.argv, resume_from=resume_from, ahead=ahead,
                              abandon_newer=resume_from is not None)
    finally:
        gc.unfreeze()  # in-process callers (tests, notebooks) get their collector back
    loss = f"{result.loss:.4f}" if result.loss is not None else "n/a"
    if result.finished:
        state = "finished"
    elif cfg.max_steps is not None and result.step > cfg.max_steps:  # nothing was trained
        state = f"already past --max-steps {cfg.max_steps}"
    else:
        state = f"stopped at --max-steps {cfg.max_steps}"
    click.echo(f"embedlab: {state}: step {result.step}, {result.words_seen:,} words, loss "
               f"{loss}, {result.train_seconds:.1f} s training; vectors in {run}", err=True)
    if cfg.data.corpus == "demo" and result.finished:
        _demo_report(result)


def _resolve_from(run: Path, from_ckpt: str) -> str:
    from embedlab.checkpoint import CheckpointManager, find_checkpoint

    if from_ckpt == "best":
        return str(find_checkpoint(run, best=True))
    path = Path(from_ckpt)
    if not path.exists() and (run / "checkpoints" / from_ckpt).exists():
        path = run / "checkpoints" / from_ckpt
    if not path.exists():
        # the generic "pass a run folder" of find_checkpoint does not fit --from
        have = [info.path.name for info in CheckpointManager(run).list(check=False)]
        listed = (f"{run} has {', '.join(have[-3:])}{' and older' if len(have) > 3 else ''}"
                  if have else f"{run} has no checkpoints")
        raise InputError(f"--from {from_ckpt}: no such checkpoint ({listed}); pass one of "
                         f"them, 'best' or a checkpoint folder (list them: embedlab ckpt {run})")
    ckpt = find_checkpoint(path)
    # Another run's checkpoint would continue that run's weights under this run's name, config
    # and history; starting from other vectors is what --init-from is for.
    if not ckpt.resolve().is_relative_to(run.resolve()):
        raise InputError(f"--from {from_ckpt}: {ckpt} is not a checkpoint of run {run}; --from "
                         f"takes the run's own checkpoints (list them: embedlab ckpt {run}). To "
                         f"start a new run from its vectors, pass --init-from {from_ckpt} with "
                         "a new --run")
    return str(ckpt)


def _demo_report(result: Any) -> None:
    """What `make demo` shows: planted-analogy accuracy and a few neighbour lists."""
    from embedlab.data.demo import demo_probe_words, write_questions
    from embedlab.vectors import Vectors

    vectors = Vectors(result.vocab.words, result.w_in, result.vocab.counts)
    with tempfile.TemporaryDirectory() as tmp:
        questions = write_questions(Path(tmp) / "questions.txt")
        res = vectors.evaluate_analogies(questions)
    total = res.total
    click.echo(f"\nplanted analogies (3CosAdd): {res.accuracy:.1%} "
               f"({total.correct}/{total.answered} answered, {total.skipped} skipped)")
    for sec in res.sections:
        click.echo(f"  {sec.name:<24} {sec.accuracy:6.1%}  ({sec.correct}/{sec.answered})")
    from embedlab.data.demo import planted_analogies

    click.echo("\nexamples (a : b :: c : ?, best answer):")
    shown: set[str] = set()
    for section, a, b, c, d in planted_analogies():
        if section in shown or not all(w in vectors for w in (a, b, c)):
            continue
        shown.add(section)
        answer = vectors.analogy(a, b, c, k=1)[0][0]
        mark = "✓" if answer == d else f"✗ (expected {d})"
        click.echo(f"  {a} : {b} :: {c} : {answer}  {mark}")
    click.echo("\nnearest neighbours (cosine):")
    for word in demo_probe_words():
        if word in vectors:
            near = ", ".join(f"{w} {s:.2f}" for w, s in vectors.most_similar(word, k=5))
            click.echo(f"  {word:<10} → {near}")
    # the way this process was started (`make demo` runs .venv/bin/embedlab, which need not
    # be on PATH), so the hint can be pasted as it is
    prog = sys.argv[0] if Path(sys.argv[0]).name == "embedlab" else f"{sys.executable} -m embedlab"
    click.echo(f"\nnext: {prog} neighbors {result.run_dir} king   ·   "
               f"{prog} tensorboard {result.run_dir.parent}")
