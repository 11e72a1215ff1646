"""Train (or resume) one run: hold its folder, set it up, run the loop.

:func:`train` is the library's training call for a resolved config and a run folder; choosing
the folder and the config from flags (a new run, a resume, ``--restart``) is
:mod:`embedlab.training.api`'s. The pieces: :mod:`~embedlab.training.setup` (checks and
set-up), :mod:`~embedlab.training.loop` (the loop), :mod:`~embedlab.training.state` (what a
checkpoint stores).
"""

from __future__ import annotations

import contextlib
import sys
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from threadpoolctl import threadpool_limits

from embedlab.config import TrainConfig
from embedlab.errors import InputError, spell, spell_name, warn
from embedlab.fsutil import missing_folders, remove_all_but, remove_empty_folders
from embedlab.run.lock import LOCK_FILE, RunLock
from embedlab.training.loop import train_loop
from embedlab.training.setup import set_up
from embedlab.training.state import TrainResult

if TYPE_CHECKING:
    from embedlab.data.tokenise_child import PrepareAhead


#: the run folder this call created (absolute), for ``--restart`` to tell its own new run from
#: one another command started in its place (embedlab.training.restart)
CREATED_RUN: ContextVar[Path | None] = ContextVar("embedlab_created_run", default=None)


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
    (:class:`embedlab.data.tokenise_child.PrepareAhead`); the caller cancels it when this
    returns or raises.
    """
    out = out or sys.stderr  # looked up per call: tests and tools swap sys.stderr
    cfg = cfg.resolve()  # idempotent; library callers may pass threads=0 or engine="auto"
    _warn_about_threads(cfg.threads, cfg.engine)
    made = missing_folders(run_dir)  # made[0] is the (absolute) run folder when it is new
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        remove_empty_folders(made)
        raise InputError(f"cannot create the run folder {run_dir} ({exc.strerror or exc}); "
                         f"pass {spell_name('--run')} (or {spell_name('--runs-dir')}) in a "
                         "writable location") from None
    # A run another process holds is refused here, before the clean-up below can touch it
    # (two commands racing to create the same new run both see it missing). NumPy's BLAS
    # (evaluation, the neighbour table, PCA) runs on one thread: OpenBLAS sums a product in an
    # order that depends on its thread count, and the metrics evaluated during training (which
    # pick the best checkpoint) must not change with --threads, which a resume may change; its
    # threads would also take the cores from the kernel's (see
    # embedlab.track.tensorboard.one_blas_thread).
    lock = RunLock(run_dir, argv=argv)
    try:
        lock.acquire()
    except BaseException:  # held by another process, or its record not written (a full disk)
        remove_empty_folders(made)  # only what this call made and is still empty
        raise
    if made:
        CREATED_RUN.set(made[0])
    discard: list[Path] = []  # the new run's folders, removed once the lock is released
    with contextlib.ExitStack() as held:
        held.callback(lambda: remove_empty_folders(discard))  # runs after the release below
        held.callback(lock.release)
        held.enter_context(threadpool_limits(1, user_api="blas"))
        run = None
        try:
            run = set_up(cfg, run_dir, argv=argv, resume_from=resume_from, out=out, ahead=ahead,
                         abandon_newer=abandon_newer)
            return train_loop(run, out)
        except BaseException:
            if run is not None:  # a stop before the loop's own handling: nothing was saved
                run.forget_this_call()
            # Refused, Ctrl-C or SIGTERM before training began (once it has, they save and
            # stop), or a failure (out of memory, a full disk, a bug) before the first
            # checkpoint: nothing of a new run is worth keeping, not even the --runs-dir it was
            # put in, and a half-made folder would make the corrected command a "resume" of
            # different flags. Emptied while the lock is held, so no other process can have
            # started in it, all but the lock file itself: the folder goes once it is released
            # and empty. (A signal after training began saved a checkpoint: kept.)
            if made and not _saved_any(made[0]):
                remove_all_but(made[0], LOCK_FILE)
                discard.extend(made)
            raise


def _saved_any(run_dir: Path) -> bool:
    """Whether a save of the run was committed: a checkpoint folder, or the index every save
    rewrites (a checkpoints/ folder deleted by hand while the run trained leaves it)."""
    from embedlab.checkpoint import CKPT_DIR, INDEX_FILE

    return any((run_dir / CKPT_DIR).glob("ckpt-*")) or (run_dir / INDEX_FILE).exists()


def _warn_about_threads(threads: int, engine: str) -> None:
    """One warning (from process 0) for more threads than this process may run on: they wait
    for each other's turn on a core (the native engine's vectors are the same with fewer)."""
    import os

    from embedlab.training.distributed import launched_rank

    cores = len(os.sched_getaffinity(0))
    try:  # the processes torchrun (or --nproc) started on this machine share its cores
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    if threads * local > cores and launched_rank() == 0:
        fits = max(1, cores // local)
        same = f"; the vectors are the same with {spell('--threads', fits)}" \
            if engine == "native" else ""
        if local > cores:  # one thread each is already too many: fewer threads cannot help
            warn(f"the {local} processes on this machine are more than its {cores} cores: they "
                 "take turns on them, which is slower; start at most "
                 f"{cores} processes per machine")
        elif local > 1:
            warn(f"{spell('--threads', threads)} in each of the {local} processes on this "
                 f"machine is {threads * local} threads, more than its {cores} cores: the "
                 f"threads take turns on them, which is slower{same}")
        else:
            warn(f"{spell('--threads', threads)} is more than the {cores} cores this process "
                 f"may use: the threads take turns on them, which is slower{same}")
