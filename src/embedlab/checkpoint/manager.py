"""Saving a run's checkpoints and deciding which ones to keep.

A save writes ``ckpt-N.tmp-XXXX/`` (data files, then the manifest, all fsynced), renames it to
``ckpt-N/``, deletes what retention lets go, then rewrites the index. Retention keeps the latest
K, the best by a named metric, the archived ones (every N steps), and the checkpoint a run
resumed from until a newer one is committed; it deletes only folders that are ours.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import numbers
import os
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from embedlab.checkpoint.format import (
    CKPT_DIR,
    STATE_FILE,
    TENSORS_FILE,
    CheckpointError,
    ckpt_name,
    committed_folders,
    created_time,
    has_manifest,
    read_manifest,
    verify,
    write_manifest,
    write_state,
    write_tensors,
)
from embedlab.checkpoint.index import INDEX_FILE, Index, Role, read_index
from embedlab.errors import (
    InputError,
    collecting_warnings,
    numpy_bool,
    python_entry,
    rerun,
    resume_how,
    spell,
    spell_name,
    step_number,
    warn,
)
from embedlab.fsutil import atomic_write_text, checked_path, clip, commit_folder, limit_fix

#: how many times a reader lists a run's checkpoints again when the one it chose is deleted
#: before it is read: a run in training deletes each (its retention) once a newer one is
#: committed, so every new listing holds a newer one
RELISTS = 20


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint folder as ``embedlab ckpt`` shows it.

    ``time`` is the save time (Unix seconds, from the manifest; folder mtime if unreadable),
    ``size`` the total bytes of its files, ``roles`` from the index (empty = not ours),
    ``problem`` the reason verification failed (None when verified or not checked).
    """

    step: int
    path: Path
    time: float
    size: int
    roles: tuple[Role, ...]
    verified: bool
    problem: str | None = None


def _better(value: float, best: float | None, mode: str) -> bool:
    if not math.isfinite(value):
        return False
    if best is None or not math.isfinite(best):
        return True
    return value < best if mode == "min" else value > best


def checked_metrics(metrics: Any) -> dict[str, int | float]:
    """``metrics`` for :meth:`CheckpointManager.save`: a dict of names (str) to finite numbers
    (int or float, NumPy's too, not bool), as plain ints and floats; anything else is one line
    of :class:`InputError`, raised before a save writes anything (a value the best checkpoint
    cannot be chosen by, or that a load would call damage, is never committed)."""
    example = "e.g. {'loss': 0.5}"
    if metrics is None:
        return {}
    if not isinstance(metrics, Mapping):
        raise InputError(f"metrics must be a dict of names to numbers, not "
                         f"{type(metrics).__name__}; pass {example}")
    out: dict[str, int | float] = {}
    for name, value in metrics.items():
        if not isinstance(name, str):
            raise InputError(f"metrics has the key {clip(repr(name))}, not a str; name each "
                             f"metric by a str, {example}")
        if isinstance(value, bool) or numpy_bool(value) or not isinstance(value, numbers.Real):
            raise InputError(f"metrics[{name!r}] = {clip(repr(value))} is not a number; pass "
                             f"an int or a float (NumPy's too), {example}")
        number = int(value) if isinstance(value, numbers.Integral) else float(value)
        try:
            finite = math.isfinite(number)
        except OverflowError:  # an int beyond float's range
            finite = False
        if not finite:
            shown = clip(repr(number if isinstance(number, float) else value))
            raise InputError(f"metrics[{name!r}] = {shown} is not a finite number (the best "
                             f"checkpoint is chosen by it); pass a finite value, {example}, "
                             "or leave the metric out")
        out[name] = number
    return out


def checked_contents(tensors: Any, state: Any) -> None:
    """``tensors`` and ``state`` for :meth:`CheckpointManager.save`, refused in one line of
    :class:`InputError` before anything is written: a dict of str names to NumPy arrays or torch
    tensors, and a dict that JSON can write (state.json)."""
    example = "e.g. {'input_embeddings': matrix}"
    if not isinstance(tensors, Mapping):
        raise InputError(f"tensors must be a dict of names to arrays, not "
                         f"{type(tensors).__name__}; pass {example}")
    for name, value in tensors.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"tensors has the key {clip(repr(name))}, not a name (a non-empty "
                             f"str); name each array, {example}")
        if not (isinstance(value, np.ndarray | np.generic) or _is_torch_tensor(value)):
            raise InputError(f"tensors[{name!r}] is a {type(value).__name__}, not a NumPy "
                             "array or a torch tensor; pass np.asarray(...) of it")
    if not isinstance(state, Mapping):
        raise InputError(f"state must be a dict (written as state.json), not "
                         f"{type(state).__name__}; pass e.g. {{'epoch': 1}}")
    try:  # step and metrics are written as save()'s own arguments (checked apart)
        json.dumps({k: v for k, v in state.items() if k not in ("step", "metrics")},
                   sort_keys=True)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(f"state cannot be written as JSON ({exc}); pass a dict of numbers, "
                         "str, bools, None, lists and dicts of them") from None


def _is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor, without importing torch (a run may not have it)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _is_leftover(name: str) -> bool:
    """A folder name that only an unfinished save leaves in ``checkpoints/``."""
    return ((name.startswith("ckpt-") and ".tmp-" in name)
            or (name.startswith(".ckpt-") and ".old-" in name))


def _write_contents(tmp: Path, step: int, tensors: Mapping[str, Any],
                    state: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
    """Write the two data files, then the manifest, all fsynced (the folder is not yet visible)."""
    for key in ("step", "metrics"):
        if key in state and state[key] != (step if key == "step" else dict(metrics)):
            raise ValueError(f"state[{key!r}] disagrees with the {key} passed to save()")
    digests = {TENSORS_FILE: write_tensors(tmp, step, tensors),
               STATE_FILE: write_state(tmp, step, state, metrics)}
    write_manifest(tmp, step, digests)


class _AlongsideError(Exception):
    """An OSError of the work done alongside a save (a summary's file, say): raised as itself,
    not as the checkpoint folder's :class:`CheckpointError`."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _write_alongside(tmp: Path, step: int, tensors: Mapping[str, Any], state: Mapping[str, Any],
                     metrics: Mapping[str, float], alongside: Callable[[], None]) -> None:
    """:func:`_write_contents` on a worker thread while ``alongside`` runs on this one (hashing,
    writing and fsync release the GIL); both have finished, or failed, when this returns (an
    error of ``alongside`` first: the writing's, if any, then is only a consequence)."""
    failed: list[BaseException] = []

    def write() -> None:
        try:
            _write_contents(tmp, step, tensors, state, metrics)
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=write, name="embedlab-checkpoint-write", daemon=True)
    worker.start()
    try:
        alongside()
    except OSError as exc:
        raise _AlongsideError(exc) from exc
    finally:
        worker.join()  # never leave the folder being written while the caller cleans it up
    if failed:
        raise failed[0]


class CheckpointManager:
    """Saves checkpoints of one run folder and applies retention.

    ``keep``: the K most recent checkpoints (TensorFlow's ``max_to_keep``). ``keep_every``:
    checkpoints whose step is a multiple are archived and never deleted. ``best_metric`` /
    ``best_mode``: the checkpoint with the best value of that metric (as passed to :meth:`save`)
    is kept while it is the best; ties keep the earlier one.
    """

    @python_entry
    def __init__(self, run_dir: Path | str, *, keep: int = 5, keep_every: int | None = None,
                 best_metric: str = "loss", best_mode: Literal["min", "max"] = "min") -> None:
        if step_number(keep) is None or keep < 1:
            raise InputError(f"{spell_name('--keep')} must be a whole number >= 1, got "
                             f"{clip(repr(keep))}; e.g. {spell('--keep', 5)}")
        if keep_every is not None and (step_number(keep_every) is None or keep_every < 1):
            raise InputError(f"{spell_name('--keep-every')} must be a whole number >= 1 or "
                             f"None, got {clip(repr(keep_every))}; e.g. "
                             f"{spell('--keep-every', 10000)}")
        if not isinstance(best_metric, str) or not best_metric:
            raise InputError(f"best_metric must be the name of a metric passed to save() (a "
                             f"str), got {clip(repr(best_metric))}; e.g. best_metric='loss'")
        if best_mode not in ("min", "max"):
            raise InputError(f"best mode must be min or max, got {best_mode!r}")
        keep, keep_every = int(keep), None if keep_every is None else int(keep_every)
        self.run_dir = Path(checked_path("run_dir", run_dir, "a run folder"))
        self.root = self.run_dir / CKPT_DIR
        self.keep = keep
        self.keep_every = keep_every
        self.best_metric = best_metric
        self.best_mode = best_mode
        self._protected: int | None = None
        self._committed: set[int] = set()  # folders this manager renamed into place
        # Wall seconds of the last successful save (write + fsync + hash + rename + retention),
        # so a trainer can stretch its cadence to keep checkpointing under a share of its time.
        self.last_save_seconds: float | None = None

    # -- queries --
    def index(self) -> Index:
        return read_index(self.run_dir)

    def check_index(self) -> None:
        """Raise :class:`CheckpointError` now if the index cannot be read, so that a trainer
        refuses a resume before it writes anything (every save reads the index)."""
        read_index(self.run_dir)

    def latest(self) -> Path | None:
        """The newest verified checkpoint; skips bad ones with a one-line warning each."""
        return self.newest()[0]

    def newest(self) -> tuple[Path | None, bool]:
        """:meth:`latest`, and whether the checkpoints chosen were deleted while they were read
        :data:`RELISTS` times over (a run in training saving faster than they can be read),
        which is why it found none when it finds none for that reason.

        Retention deletes a checkpoint only once a newer one is committed, so one chosen and
        then gone has a newer one beside it: the folders are listed again and that one is read,
        not an older one (nor none at all, when every folder listed is gone)."""
        warned: set[Path] = set()
        for listing in range(RELISTS + 1):
            folders = sorted(committed_folders(self.root).items(), reverse=True)
            deleted = False
            for n, (_step, path) in enumerate(folders):
                problem = verify(path)
                if problem is None:
                    return path, False
                if not path.exists():  # deleted by a training run's retention while read
                    deleted = True
                    if listing < RELISTS:
                        break  # list again: a newer one was committed
                    continue
                if path not in warned:
                    warned.add(path)
                    then = "falling back to the previous one" if n + 1 < len(folders) else \
                        "no earlier checkpoint is left"
                    warn(f"skipping checkpoint {path}: {problem}; {then}")
            if not deleted:
                return None, False
        return None, True

    def best(self) -> Path | None:
        """The best checkpoint named by the index, if it still verifies."""
        step = self.index().best
        if step is None:
            return None
        path = self.root / ckpt_name(step)
        return path if path.is_dir() and verify(path) is None else None

    def list(self, *, check: bool = True) -> list[CheckpointInfo]:
        """All committed checkpoint folders, oldest first (``check=False`` skips hashing)."""
        index = self.index()
        out = []
        for step, path in sorted(committed_folders(self.root).items()):
            problem = verify(path) if check else None
            try:
                created = created_time(read_manifest(path))
            except ValueError:
                created = None
            try:
                # no valid "created" (an unreadable or hand-edited manifest): the folder's
                # mtime, which the rename at commit time set
                saved = created if created is not None else path.stat().st_mtime
                size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
            except FileNotFoundError:
                continue  # deleted by a training run's retention while listed
            except OSError as exc:  # a folder this user may not enter: listed, as failing
                saved = created if created is not None else 0.0
                size = 0
                problem = problem or f"cannot be read ({exc.strerror or exc})"
            if problem is not None and not path.exists():
                continue
            out.append(CheckpointInfo(step, path, saved, size, index.roles(step),
                                      check and problem is None, problem))
        return out

    @python_entry
    def check_writable(self) -> None:
        """Refuse, before training, a checkpoints folder that a save could not write into (read
        only, on a read-only file system): found only at the first save, it cost the steps
        trained until then. A file is made and removed there, as a save would; the folder
        itself is not created (a new run makes it at its first save)."""
        folder = self.root if self.root.is_dir() else self.root.parent
        for left in folder.glob(".write-test-*"):  # a process killed between the two steps
            left.unlink(missing_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        try:
            probe.touch()
            probe.unlink()
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise InputError(f"cannot write checkpoints into {folder} ({why}); make it "
                             f"writable (or pass another {spell('--run')}), then {rerun()}"
                             ) from None

    def remove_stale_tmp(self) -> tuple[Path, ...]:
        """Delete ``ckpt-N.tmp-*`` folders left by a killed save, and ``.ckpt-N.old-*`` ones
        (a replaced checkpoint that :func:`~embedlab.fsutil.commit_folder` had moved aside when
        a killed save wrote the same step again).

        Call only while holding the run's lock: then no other save can be in flight, so no such
        folder will ever be renamed into place.
        """
        removed = []
        if self.root.is_dir():
            for p in self.root.iterdir():
                if p.is_dir() and _is_leftover(p.name):
                    shutil.rmtree(p, ignore_errors=True)
                    removed.append(p)
        return tuple(removed)

    def protect(self, step: int) -> None:
        """Never delete checkpoint ``step`` until a checkpoint with a higher step is committed."""
        number = step_number(step)
        if number is None:
            raise InputError(f"step must be a whole number >= 0, got {clip(repr(step))}; pass "
                             "the step of a checkpoint of the run, e.g. 2000")
        self._protected = number

    # -- save --
    @python_entry
    def save(self, step: int, tensors: Mapping[str, Any], state: Mapping[str, Any],
             metrics: Mapping[str, float] | None = None, *,
             alongside: Callable[[], None] | None = None) -> Path:
        """Commit checkpoint ``step`` atomically, then apply retention and rewrite the index.

        ``tensors``: NumPy arrays or torch tensors (see :func:`save_tensors`); they must not
        change until this returns. ``alongside``: work that must be done before the commit
        (a trainer's summaries of the step), run in this thread while the files are written
        in another; if it raises, nothing is committed and the exception propagates.

        Raises :class:`CheckpointError` (one line: cause + fix) when the folder cannot be
        written; earlier checkpoints and the index are then untouched.
        """
        number = step_number(step)
        if number is None:
            raise InputError(f"step must be a whole number >= 0, got {clip(repr(step))}; pass "
                             "the number of steps trained, e.g. 2000")
        step = number
        metrics = checked_metrics(metrics)  # before anything is written
        checked_contents(tensors, state)
        started = time.perf_counter()
        final = self.root / ckpt_name(step)
        try:
            old_index = self.index()
            self.root.mkdir(parents=True, exist_ok=True)
            # mkdir, not mkdtemp: the folder gets the umask's mode (mkdtemp's is 0700)
            tmp = self.root / f"{final.name}.tmp-{secrets.token_hex(6)}"
            tmp.mkdir()
        except OSError as exc:
            raise self._save_error(step, exc) from None
        try:
            if alongside is None:
                _write_contents(tmp, step, tensors, state, metrics)
            else:
                _write_alongside(tmp, step, tensors, state, metrics, alongside)
            commit_folder(tmp, final)
        except _AlongsideError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise exc.error from None
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise self._save_error(step, exc) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._committed.add(step)
        if self._protected is not None and step > self._protected:
            self._protected = None
        # Retention's warnings are said once the index is rewritten: a program that makes
        # EmbedlabWarning an error then stops on a whole save, not one that deleted nothing yet.
        with collecting_warnings() as said:
            self._retain(step, old_index, metrics)
        self.last_save_seconds = time.perf_counter() - started
        for message in said:
            warn(message)
        return final

    def _save_error(self, step: int, exc: OSError) -> CheckpointError:
        why = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            fix = "free disk space"
        elif exc.errno == errno.EDQUOT:  # a shared disk's usual limit
            fix = "free space within your disk quota"
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            fix = f"make {self.root} writable"
        else:
            fix = limit_fix(exc) or f"check {self.root}"
        with contextlib.suppress(Exception):  # an unreadable index: the words below stay true
            if not self.list(check=False):  # nothing saved yet: nothing to resume from
                # the same command: the new run is removed, or --restart's old one put back
                error = CheckpointError(f"could not save checkpoint at step {step} in "
                                        f"{self.root}: {why}; {fix}, then {rerun()}")
                error.os_error = exc
                return error
        error = CheckpointError(f"could not save checkpoint at step {step} in {self.root}: "
                                f"{why}; {fix}, then {resume_how()} to resume from the "
                                "last saved checkpoint (earlier checkpoints are intact)")
        error.os_error = exc
        return error

    # -- retention --
    def _remove(self, folder: Path) -> None:
        """Delete a checkpoint retention no longer keeps; one that cannot be deleted (its
        folder made read-only) is said, since the index stops listing it and it would take
        disk space unseen."""
        # Renamed out of sight first: a reader (ckpt --verify, an export) sees the checkpoint
        # whole or not at all, never half deleted, which it would report as damaged. A kill
        # before the rmtree leaves a leftover that the next start removes (remove_stale_tmp).
        hidden = folder.with_name(f".{folder.name}.old-{os.getpid()}-{time.time_ns()}")
        try:
            folder.rename(hidden)
        except FileNotFoundError:
            return
        except OSError:
            hidden = folder  # deleted where it is, as far as it can be
        try:
            shutil.rmtree(hidden)
        except FileNotFoundError:
            pass
        except OSError as exc:
            shutil.rmtree(hidden, ignore_errors=True)  # what can go, goes
            with contextlib.suppress(OSError):  # what is left, back under its name
                hidden.rename(folder)
            warn(f"could not delete {folder}, which {spell('--keep', self.keep)} no longer keeps "
                 f"({exc.strerror or exc}); delete it by hand to free its space")

    def _retain(self, step: int, old: Index, metrics: Mapping[str, float]) -> None:
        present = committed_folders(self.root)
        ours = {s for s in (old.ours() | self._committed) if s in present}
        # A crash between a commit and the index rewrite leaves a newer, unlisted folder behind;
        # it carries our manifest and is newer than anything listed, so adopt it.
        newest_listed = max(old.ours(), default=-1)
        ours |= {s for s, p in present.items() if s > newest_listed and has_manifest(p)}
        ours.add(step)
        # The just-saved checkpoint is always the latest, even when its step is lower than an
        # abandoned branch's (a run restarted from an older checkpoint).
        order = [step, *sorted((s for s in ours if s != step), reverse=True)]
        kept = order[: self.keep]
        archive = {s for s in ours if s in old.archive or
                   (self.keep_every is not None and s % self.keep_every == 0)}
        best, value = self._best(step, old, metrics, ours)
        keep_set = set(kept) | archive | ({best} if best is not None else set())
        if self._protected is not None and self._protected in ours:
            keep_set.add(self._protected)
            if self._protected not in kept:
                kept.append(self._protected)
        # Delete before rewriting the index: a crash in between leaves an index that names a
        # missing folder (harmless, verification skips it), never an unlisted orphan of ours.
        for s in sorted(ours - keep_set):
            self._remove(present[s])
            self._committed.discard(s)
        new = Index(step, tuple(kept), tuple(sorted(archive)), best,
                    self.best_metric if best is not None else None, value,
                    self.best_mode if best is not None else None)
        try:
            atomic_write_text(self.run_dir / INDEX_FILE, new.render())
        except OSError as exc:
            # The checkpoint itself is committed and loadable (latest() scans folders), so this
            # is not fatal; say so once.
            warn(f"could not rewrite {self.run_dir / INDEX_FILE} ({exc.strerror}); "
                 "the checkpoint itself was saved")

    def _best(self, step: int, old: Index, metrics: Mapping[str, float],
              ours: set[int]) -> tuple[int | None, float | None]:
        same_metric = old.best_metric == self.best_metric and old.best_mode == self.best_mode
        best = old.best if same_metric and old.best in ours else None
        value = old.best_value if best is not None else None
        changed = old.best_metric is not None and not same_metric  # --best-metric on resume
        # the best checkpoint the index names is gone (deleted by hand, moved aside by --from):
        # the new one is not the best merely by being there
        lost = same_metric and old.best is not None and old.best not in ours
        if not old.ours() or changed or lost:
            # No index (a new run, or one deleted because it was damaged), one whose best was
            # chosen by another metric, or whose best is gone: the best of the checkpoints kept,
            # by the metrics their state.json recorded, so that neither a deleted index nor a
            # changed --best-metric costs the run its best checkpoint by the metric it now names.
            best, value = self._best_on_disk(sorted(ours - {step}))
        else:
            # committed by a process killed before it rewrote the index (adopted by _retain):
            # never ranked at its own save, so ranked now, by what its state.json recorded
            adopted = sorted(s for s in ours - old.ours() - self._committed if s != step)
            found, at = self._best_on_disk(adopted) if adopted else (None, None)
            if found is not None and at is not None and _better(at, value, self.best_mode):
                best, value = found, at
        new_value = metrics.get(self.best_metric)
        if new_value is not None and _better(float(new_value), value, self.best_mode):
            best, value = step, float(new_value)
        if changed and old.best is not None and old.best != best:
            now = (f"{ckpt_name(best)} ({self.best_metric} {value:.6g})" if best is not None
                   else f"none yet (no checkpoint kept has recorded {self.best_metric})")
            warn(f"{spell('--best-metric')} is now {self.best_metric}:{self.best_mode} (was "
                 f"{old.best_metric}:{old.best_mode}): the best checkpoint is {now}; "
                 f"{ckpt_name(old.best)}, the best by {old.best_metric}, stays only while "
                 f"{spell_name('--keep')} or {spell_name('--keep-every')} keeps it")
        return best, value

    def finish_save(self, step: int) -> None:
        """What a save of ``step`` does after its commit — retention and the index rewrite — for
        a checkpoint committed by a process killed before it rewrote the index (the run's
        final one, say, which no later save of the run adopts). Nothing when the index lists
        ``step`` as the latest already."""
        old = self.index()
        path = self.root / ckpt_name(step)
        if old.latest == step or not path.is_dir():
            return
        try:
            recorded = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
            metrics = checked_metrics(recorded.get("metrics") or {})
        except (OSError, ValueError, AttributeError, InputError):
            metrics = {}
        self._committed.add(step)
        with collecting_warnings() as said:
            self._retain(step, old, metrics)
        for message in said:
            warn(message)

    def forget_after(self, step: int) -> None:
        """Rewrite the index without the checkpoints newer than ``step``, which ``--from`` moved
        aside: ``step`` is the latest (the resume point), and a best among those moved is chosen
        again from those left. Until the next save, the listing, ``--best`` and ``--from best``
        read this, not checkpoints that are gone (a --from that saves nothing: --max-steps at
        its step, a kill)."""
        old = self.index()
        if not old.ours():  # no index (deleted): the next save rebuilds it from the folders
            return
        present = committed_folders(self.root)
        left = {s for s in old.ours() | {step} if s <= step and s in present}
        best, value, metric, mode = old.best, old.best_value, old.best_metric, old.best_mode
        if best is not None and best not in left:
            best, value = self._best_on_disk(sorted(left))
            metric, mode = (self.best_metric, self.best_mode) if best is not None else (None, None)
        new = Index(step, tuple(s for s in old.kept if s in left), tuple(
            s for s in old.archive if s in left), best, metric, value, mode)
        try:
            atomic_write_text(self.run_dir / INDEX_FILE, new.render())
        except OSError as exc:  # the next save rewrites it; the move was said already
            warn(f"could not update {self.run_dir / INDEX_FILE} after the move "
                 f"({exc.strerror or exc}); the next checkpoint rewrites it")

    def _best_on_disk(self, steps: Iterable[int]) -> tuple[int | None, float | None]:
        best: int | None = None
        value: float | None = None
        for s in steps:  # ascending: ties keep the earlier one
            path = self.root / ckpt_name(s)
            if verify(path) is not None:
                continue
            try:
                recorded = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            metrics = recorded.get("metrics") if isinstance(recorded, dict) else None
            v = metrics.get(self.best_metric) if isinstance(metrics, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    _better(float(v), value, self.best_mode):
                best, value = s, float(v)
        return best, value
