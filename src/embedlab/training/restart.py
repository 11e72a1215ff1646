"""``--restart``: the old run is moved aside, never deleted, and comes back if the new one fails.

The old folder goes to a sibling ``RUN.old-<time>`` under the old run's lock, so a run another
process is training is refused before anything moves. If the new run ends before its first
checkpoint (a bad flag, corpus or --probe word, divergence, Ctrl-C before training began, out
of memory, a full disk, a bug), the trainer has removed the new folder it made, and the old run
is put back where it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from embedlab.errors import InputError, spell, warn
from embedlab.run.folder import move_aside
from embedlab.run.lock import RunLock
from embedlab.training.warm_start import EARLIER_WARM_START, recorded_warm_start


@contextlib.contextmanager
def old_run_moved_aside(run: Path, *, same_settings: bool = False,
                        renewed: Sequence[str] = ()) -> Iterator[Path]:
    """Move the run in ``run`` aside for the block (which starts the new run); yields where it
    went. Put back when the block fails and left no new run behind. ``same_settings``: the new
    run takes the old one's settings (said in the line that says where it went), except the
    ``renewed`` ones (``--interleave 1``: the run's values, which it takes today's defaults
    for)."""
    # imported before the move (a third of a second): a Ctrl-C or SIGTERM while it loaded,
    # after the move, left the old run aside for good, and the command re-run trained the demo
    from embedlab.training.trainer import CREATED_RUN

    old_lock = _lock_for_restart(run)
    try:
        try:
            moved = move_aside(run)
        except OSError as exc:
            fix = "check the permissions of its parent folder"
            if exc.errno == errno.ENAMETOOLONG:
                fix = (f"its name with '.old-<time>' added is too long: rename {run} shorter, "
                       f"and pass the new name as {spell('--run')}")
            raise InputError(f"{spell('--restart', True)}: cannot move {run} aside "
                             f"({exc.strerror or exc}); {fix}") from None
        created = CREATED_RUN.set(None)  # the block's trainer records the run it creates
        earlier = EARLIER_WARM_START.set(recorded_warm_start(moved))
        try:  # from the move on, any stop puts the old run back
            if old_lock is not None:
                old_lock.moved_to(moved)
            settings = "; starting over with its settings and the ones given" \
                if same_settings else ""
            if same_settings and renewed:  # its config.json predates them
                settings += (f", and today's defaults for those added since it was made (pass "
                             f"{' '.join(renewed).rstrip(',')} to keep its own)")
            print(f"embedlab: {spell('--restart', True)}: moved the old run to {moved}"
                  f"{settings}", file=sys.stderr)
            yield moved
        except BaseException:
            if not run.exists():  # still under the old run's lock
                _put_back(moved, run, old_lock)
            elif not _made_by_this_call(run):
                # another command (a plain resume) started a new run there in the moment the
                # path was free: the old run cannot go back, and must not be lost from sight
                warn(f"another command started a new run at {run} while {spell('--restart', True)} "
                     f"had moved the old one aside; the old run is at {moved} (to put it back: "
                     f"stop that command, then rm -r {_q(run)} && mv {_q(moved)} {_q(run)})")
            raise
        finally:
            CREATED_RUN.reset(created)
            EARLIER_WARM_START.reset(earlier)
    finally:
        if old_lock is not None:
            old_lock.release()


def _put_back(moved: Path, run: Path, old_lock: RunLock | None) -> None:
    try:
        moved.rename(run)
    except OSError as exc:
        warn(f"could not put the old run back ({exc.strerror or exc}); it is at {moved}: "
             f"mv {_q(moved)} {_q(run)}")
    else:
        if old_lock is not None:
            old_lock.moved_to(run)
        print(f"embedlab: {spell('--restart', True)}: put the old run back at {run}",
              file=sys.stderr)


def _made_by_this_call(run: Path) -> bool:
    """Whether the folder at ``run`` is the new run this call created (kept: it failed after
    its first checkpoint), not one another command started there."""
    from embedlab.training.trainer import CREATED_RUN

    return CREATED_RUN.get() == Path(os.path.abspath(run))


def _lock_for_restart(run: Path) -> RunLock | None:
    """The old run's lock, so that a run another process is training is refused before
    anything moves (moving it pulled the folder from under that process). None for a folder
    this user cannot write into: no trainer can hold it either, since the lock is a file in it,
    and renaming it needs only its parent to be writable."""
    try:
        return RunLock(run, argv=sys.argv).acquire()
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return None
        raise


def _q(path: Path) -> str:
    """``path`` as a shell word: a command to paste works for a name with a space too."""
    import shlex

    return shlex.quote(str(path))
