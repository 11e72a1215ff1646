"""Finding a verified checkpoint and loading its tensors and state, without unpickling.

Tensors come back as NumPy arrays unless torch tensors are asked for (``framework="pt"``); the
state is checked for the shape its readers expect, so a damaged or re-signed checkpoint is a
one-line :class:`InputError` naming the fix rather than a traceback deep in a resume.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import safetensors.numpy
from safetensors import safe_open

from embedlab.checkpoint.format import (
    CKPT_DIR,
    MANIFEST_FILE,
    NOT_NUMPY_DTYPES,
    STATE_FILE,
    TENSORS_FILE,
    CheckpointError,
    Framework,
    ckpt_name,
    committed_folders,
    has_manifest,
    parse_step,
    verify,
)
from embedlab.checkpoint.index import INDEX_FILE, read_index
from embedlab.checkpoint.manager import RELISTS, CheckpointInfo, CheckpointManager
from embedlab.errors import (
    InputError,
    MissingFileError,
    checked_bool,
    checked_step,
    import_torch,
    python_caller,
    python_entry,
    spell,
    spell_name,
)
from embedlab.fsutil import checked_path, clip

_T = TypeVar("_T")


def is_checkpoint_folder(path: Path) -> bool:
    """Whether ``path`` is (or is named as) one checkpoint's folder, ``RUN/checkpoints/ckpt-N``,
    rather than a run folder: it holds a manifest, or its name is a checkpoint's."""
    return (path / MANIFEST_FILE).exists() or parse_step(path.name) is not None


@python_entry
def find_checkpoint(path: Path | str, *, step: int | None = None, best: bool = False) -> Path:
    """A verified checkpoint folder from a run folder or a checkpoint folder.

    For a run folder: ``step`` (an integer >= 0, NumPy's too) picks that step, ``best`` (a
    bool) the index's best, otherwise the newest verified one (skipping bad ones with a
    warning). Raises :class:`InputError` naming the fix.
    """
    p = Path(checked_path("path", path, "a run folder or a checkpoint folder"))
    step, best = checked_step("step", step, p), checked_bool("best", best)
    if not p.exists():
        raise InputError(f"{p} does not exist; pass a run folder or a checkpoint folder")
    if step is not None and best:
        raise InputError(f"{spell('--step')} and {spell('--best')} are mutually exclusive; "
                         "pass one of them")
    if is_checkpoint_folder(p):
        own = parse_step(p.name)
        run = p.parent.parent if p.parent.name == CKPT_DIR else None
        pick = f"pass its run folder {run}" if run is not None else "pass the run folder"
        if best:
            raise InputError(f"{p} is one checkpoint, and {spell('--best', True)} picks among a "
                             f"run's; {pick}, or drop {spell('--best', True)}")
        if step is not None and own is not None and step != own:
            raise InputError(f"{p} is the checkpoint of step {own}, not {step}; {pick} with "
                             f"{spell('--step', step)}, or drop {spell('--step', step)}")
        return _verified_or_fail(p)
    root = p / CKPT_DIR
    if p.is_file():  # a vectors file given where a run is wanted (--init-from vectors.bin)
        raise InputError(f"{p} is a file, not a run or checkpoint folder; pass a run folder or "
                         f"one of its {CKPT_DIR}/ckpt-* folders")
    if not root.is_dir():
        if p.name == CKPT_DIR and p.is_dir() and \
                any(parse_step(c.name) is not None for c in p.iterdir()):
            raise InputError(f"{p} is a run's {CKPT_DIR}/ folder; pass the run folder "
                             f"{p.parent}, or one of the checkpoint folders in it")
        if (being_trained := _being_trained(p)) is not None:
            raise being_trained
        if (holds_runs := _holds_runs(p)) is not None:
            raise holds_runs
        with contextlib.suppress(CheckpointError):
            if read_index(p).ours():  # checkpoints/ deleted or moved: what every command says
                raise no_checkpoint(p)
        raise InputError(f"{p} holds no checkpoints (no {CKPT_DIR}/ folder); pass a run folder "
                         "that has been trained, or a checkpoint folder")
    if step is not None:
        target = root / ckpt_name(step)
        if not target.is_dir():
            have = ", ".join(str(s) for s in sorted(committed_folders(root))) or "none"
            pick = "pass one of them as step=" if python_caller() else \
                "pass one of them to --step"
            raise InputError(f"{p} has no checkpoint at step {step} (available: {have}); {pick}")
        return _verified_or_fail(target)
    if best:
        for reading in range(RELISTS + 1):
            index = read_index(p)
            if index.best is None:
                raise InputError(f"{p} has no best checkpoint recorded in {p / INDEX_FILE}; "
                                 f"use the latest one (drop {spell('--best', True)}) or pick "
                                 f"one with {spell('--step')}")
            target = root / ckpt_name(index.best)
            if target.is_dir() or reading == RELISTS or \
                    not any(s > index.best for s in committed_folders(root)):
                try:
                    return _verified_or_fail(target)
                except InputError:
                    # deleted since the check above: a better one was committed meanwhile
                    if target.exists() or reading == RELISTS:
                        raise
            # a run in training deletes its old best once a better one is committed, then
            # names that one in the index: read the index again
            time.sleep(0.01)
    return _newest_of(p)


def _newest_of(run: Path) -> Path:
    """The newest verified checkpoint of run folder ``run`` (see
    :meth:`CheckpointManager.newest`); one that the run's index lists and is gone from its
    folder while none newer is there (deleted by hand) is said in a warning."""
    root = run / CKPT_DIR
    manager = CheckpointManager(run)
    for listing in range(RELISTS + 1):
        found, outpaced = manager.newest()
        if found is None:
            if outpaced:
                raise InputError(f"the checkpoints of {run} were each deleted while they were "
                                 f"read, {RELISTS + 1} times: a run in training there saves "
                                 "newer ones (and its retention deletes the older) faster than "
                                 "they can be read; try again, or train it with a larger "
                                 f"{spell_name('--keep')}")
            raise no_checkpoint(run)
        missing = missing_listed(run)
        # listed after the index was read: a listed checkpoint that a run in training deleted
        # meanwhile has a newer one here (retention deletes only once a newer is committed)
        present = committed_folders(root)
        if not found.exists() and listing < RELISTS:
            continue  # deleted since it was chosen: a newer one is there
        gone = [s for s in missing if s > max(parse_step(found.name) or 0, *present)]
        if gone:
            from embedlab.errors import warn

            # vectors of an older step must not go out (exported, published) unnoticed
            warn(f"the index of {run} lists {ckpt_name(max(gone))}, which is not in {root} "
                 f"(deleted?): reading {found.name}, the newest checkpoint there")
        return found
    raise AssertionError("unreachable")  # the last listing returns or raises


@python_entry
def load_latest(run: Path | str, *, names: Iterable[str] | str | None = None,
                rename: Mapping[str, str] | None = None,
                state_spec: Mapping[str, Any] | None = None,
                framework: FrameworkName = "numpy",
                ) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """``(folder, tensors, state)`` of the newest verified checkpoint of run folder ``run``:
    :func:`find_checkpoint` and :func:`load_checkpoint` in one, for a run that another process
    may be training. Its retention deletes a checkpoint once a newer one is committed, so the
    one found can go before or while it is read: the newer one is then found and read (up to
    :data:`~embedlab.checkpoint.manager.RELISTS` times over). The arguments are
    :func:`load_checkpoint`'s."""
    run = Path(checked_path("run", run, "a run folder"))
    names = _checked_names(names)  # read once, whatever the attempts
    framework = _checked_framework(framework)
    for attempt in range(RELISTS + 1):
        found = find_checkpoint(run)
        try:
            tensors, state = load_checkpoint(found, names=names, rename=rename,
                                             state_spec=state_spec, framework=framework)
        except InputError:
            if found.exists() or attempt == RELISTS:
                raise
            continue  # deleted while read: a newer one was committed
        return found, tensors, state
    raise AssertionError("unreachable")  # the last attempt returns or raises


def read_picked(path: Path | str, read: Callable[[Path], _T], *, step: int | None = None,
                best: bool = False) -> tuple[Path, _T]:
    """``(folder, read(folder))`` of the checkpoint :func:`find_checkpoint` picks, for a run
    that another process may be training: the newest or the best one can be deleted by its
    retention once a newer (or better) one is committed, before or while ``read`` reads it;
    the pick is then made again (up to :data:`~embedlab.checkpoint.manager.RELISTS` times
    over). A checkpoint picked by its step is read once: it goes only when a user deletes it."""
    for attempt in range(RELISTS + 1):
        found = find_checkpoint(path, step=step, best=best)
        try:
            return found, read(found)
        except (InputError, OSError):
            if found.exists() or step is not None or attempt == RELISTS:
                raise
    raise AssertionError("unreachable")  # the last attempt returns or raises


def _newer_than(ckpt_dir: Path) -> Path | None:
    """For a checkpoint folder that is gone, the newest one its run now holds, when it is newer
    (a run in training committed it, then its retention deleted ``ckpt_dir``); else None."""
    if ckpt_dir.exists() or ckpt_dir.parent.name != CKPT_DIR:
        return None
    newer = committed_folders(ckpt_dir.parent)
    step = parse_step(ckpt_dir.name)
    newest = max(newer, default=None)
    if step is None or newest is None or newest <= step:
        return None
    return newer[newest]


def missing_listed(run_dir: Path) -> list[int]:
    """The steps ``RUN/checkpoint`` (the index) lists whose folders are gone from
    ``RUN/checkpoints`` (deleted by hand), sorted; those ``--from`` moved into
    ``checkpoints-abandoned-<time>/`` (an index written before --from rewrote it names them)
    are not missing, nor, where a checkpoint newer than every listed one is there, those its
    save removed before a kill cut short the index's rewrite (retention deletes first, so that
    it never leaves an unlisted folder; the next save rewrites the index)."""
    listed = read_index(run_dir).ours()
    present = committed_folders(run_dir / CKPT_DIR)
    if listed and any(s > max(listed) and has_manifest(p) for s, p in present.items()):
        return []
    moved = {c.name for c in run_dir.glob(f"{CKPT_DIR}-abandoned-*/ckpt-*")}
    return sorted(s for s in listed if ckpt_name(s) not in moved and s not in present
                  and not (run_dir / CKPT_DIR / ckpt_name(s)).exists())


def _holds_runs(folder: Path) -> InputError | None:
    """The error for a folder of runs (a --runs-dir) given where one run is wanted; None for any
    other folder."""
    from embedlab.run.folder import is_a_run

    runs = sorted(c.name for c in folder.iterdir() if c.is_dir() and is_a_run(c)) \
        if folder.is_dir() and not (folder / "config.json").exists() else []
    if not runs:
        return None
    shown = ", ".join(runs[:3]) + (" and more" if len(runs) > 3 else "")
    return InputError(f"{folder} is not a run folder but holds runs ({shown}); pass one of them")


def _being_trained(run: Path) -> InputError | None:
    """The error for a run a process is training before its first checkpoint; None for a run
    no process holds."""
    from embedlab.run.lock import RunLock

    holder = RunLock.held_by(run)
    # this process (--init-from its own run, a query in on_progress): nothing to wait for
    if holder is None or holder.get("pid") == os.getpid():
        return None
    return InputError(f"{run} has no checkpoints yet: pid {holder.get('pid', '?')} is training "
                      f"it now and saves its first after {spell_name('--checkpoint-every')} "
                      f"steps or {spell_name('--checkpoint-secs')} seconds (or when stopped); "
                      "wait for it, or pass another run folder")


def no_checkpoint(run: Path) -> InputError:
    """The error for a run folder without a verified checkpoint, by what it holds: none yet,
    none left of those its index lists (checkpoints/ emptied or moved), or only damaged ones."""
    from embedlab.run.folder import is_a_run

    if (holds_runs := _holds_runs(run)) is not None:
        return holds_runs
    if (run / MANIFEST_FILE).is_file():
        owner = f"its run folder {run.parent.parent}" if run.parent.name == CKPT_DIR else \
            "the run folder that holds it"
        return InputError(f"{run} is a checkpoint folder, not a run; pass {owner}")
    # an empty folder may be a run to come ("train it first" below); one of other files is not
    if run.is_dir() and not is_a_run(run) and not (run / INDEX_FILE).is_file() and \
            any(not p.name.startswith(".") for p in run.iterdir()):
        return InputError(f"{run} is not an embedlab run (it has no {CKPT_DIR}/ folder and no "
                          "config.json of embedlab's); pass a run folder (see 'embedlab runs')")
    listed = CheckpointManager(run).index().ours()
    if committed_folders(run / CKPT_DIR):
        return InputError(f"no verified checkpoint in {run}; every checkpoint folder is "
                          "incomplete or corrupted - start a new run or restore the folder from "
                          "a backup")
    if listed:
        return InputError(f"{run} has no checkpoints, but its index ({run / INDEX_FILE}) lists "
                          f"{len(listed)} up to step {max(listed)}: the {CKPT_DIR}/ folder was "
                          "emptied or moved; restore it")
    if (being_trained := _being_trained(run)) is not None:
        return being_trained
    train = (f"embedlab.train(run={str(run)!r})" if python_caller() else
             f"embedlab train --run {shlex.quote(str(run))}")
    return InputError(f"{run} has no checkpoints yet; train it first ({train}) or pass another "
                      "run folder")


@python_entry
def list_checkpoints(run: str | os.PathLike[str]) -> list[CheckpointInfo]:
    """:func:`embedlab.checkpoints`: the committed checkpoints of run folder ``run``, oldest
    first, verified; :class:`InputError` for a path that is no run folder."""
    if not isinstance(run, str | os.PathLike):
        raise InputError(f"run= must be the path of a run folder (a str or os.PathLike), got "
                         f"{type(run).__name__} {run!r}")
    p = Path(run)
    if not p.is_dir():
        if not p.exists():  # also a FileNotFoundError, for a Python caller's except OSError
            raise MissingFileError(f"{p} does not exist; pass a run folder", p)
        raise InputError(f"{p} is not a folder; pass a run folder")
    if is_checkpoint_folder(p):
        run = f"its run folder {p.parent.parent}" if p.parent.name == CKPT_DIR else \
            "the run folder that holds it"
        raise InputError(f"{p} is a checkpoint folder; pass {run}")
    if not (p / CKPT_DIR).is_dir():
        if (holds_runs := _holds_runs(p)) is not None:
            raise holds_runs
        raise InputError(f"{p} holds no checkpoints (no {CKPT_DIR}/ folder); pass a run folder "
                         "that has been trained")
    return CheckpointManager(p).list()


def _verified_or_fail(ckpt_dir: Path) -> Path:
    if not ckpt_dir.is_dir():
        raise InputError(f"checkpoint {ckpt_dir} is missing; {_list_them(ckpt_dir)}")
    problem = verify(ckpt_dir)
    if problem is not None:
        raise InputError(f"checkpoint {ckpt_dir} failed verification: {problem}; use another "
                         f"checkpoint ({_list_them(ckpt_dir, lists=True)})")
    return ckpt_dir


def lists_them(ckpt_dir: Path) -> str:
    """What lists the checkpoints of the run ``ckpt_dir`` belongs to, for the caller, as the
    words in parentheses after "use another checkpoint"."""
    return _list_them(ckpt_dir, lists=True)


def _list_them(ckpt_dir: Path, *, lists: bool = False) -> str:
    """How the caller finds the checkpoints of the run ``ckpt_dir`` belongs to: the ``ckpt``
    command, or from Python the run folder's own listing (``embedlab.checkpoints``)."""
    run = ckpt_dir.parent.parent if ckpt_dir.parent.name == CKPT_DIR else None
    listing = listing_command(run)
    if python_caller():
        return f"{listing} lists them" if lists else f"{listing} lists them; pass one as step="
    return f"'{listing}' lists them" if lists else f"run '{listing}' to list them"


def listing_command(run: Path | None) -> str:
    """What lists the checkpoints of ``run`` for the caller: ``embedlab ckpt RUN`` in a shell,
    ``embedlab.checkpoints('RUN')`` in Python (``RUN``/``run`` where none is known)."""
    if python_caller():
        return f"embedlab.checkpoints({os.fspath(run)!r})" if run else "embedlab.checkpoints(run)"
    return f"embedlab ckpt {shlex.quote(str(run))}" if run else "embedlab ckpt RUN"


def _unreadable(ckpt_dir: Path, exc: BaseException) -> InputError:
    """The one line for a checkpoint whose files verify but cannot be parsed (re-signed)."""
    what = str(exc) if isinstance(exc, (OSError, ValueError)) else \
        f"{type(exc).__name__}: {exc}"  # SafetensorError is not a ValueError in every version
    return InputError(f"cannot read checkpoint {ckpt_dir} ({what}); use another checkpoint "
                      f"({_list_them(ckpt_dir, lists=True)})")


# ---- the state's shape -----------------------------------------------------------------------

def _spec_problem(value: Any, spec: Any) -> str | None:
    """None when ``value`` fits ``spec`` (see :func:`check_state`), else what it should be."""
    if isinstance(spec, tuple):
        problems = [_spec_problem(value, s) for s in spec]
        return None if None in problems else " or ".join(p for p in problems if p)
    if spec is None:
        return None if value is None else "null"
    if isinstance(spec, Mapping):
        if not isinstance(value, dict):
            return f"an object with {', '.join(spec)}"
        for key, sub in spec.items():
            problem = "present" if key not in value else _spec_problem(value[key], sub)
            if problem is not None:
                return f"an object whose {key!r} is {problem}"
        return None
    if spec is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return None if ok else "a whole number >= 0"
    if spec is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "a number"
    return None if isinstance(value, spec) else f"a {spec.__name__}"


def _checked_spec(spec: Any, where: str = "state_spec") -> None:
    """A ``state_spec`` of :func:`load_checkpoint` (its shapes as :func:`check_state` reads
    them), refused in one line: a wrong spec would otherwise fail while a checkpoint is read."""
    if isinstance(spec, tuple):
        for i, sub in enumerate(spec):
            _checked_spec(sub, f"{where}[{i}]")
    elif isinstance(spec, Mapping):
        for key, sub in spec.items():
            _checked_spec(sub, f"{where}[{key!r}]")
    elif spec is not None and not any(spec is t for t in (int, float, str, bool, list, dict,
                                                          type(None))):
        raise InputError(f"{where} is {clip(repr(spec))}; a field's shape is int, float, str, "
                         "bool, list, dict, None, a tuple of them or a dict of fields, e.g. "
                         "state_spec={'epoch': int}")


def check_state(ckpt_dir: Path | str, state: Mapping[str, Any],
                spec: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` when a field of ``state`` does not have the shape ``spec`` gives.

    The files of a checkpoint are hashed, but a re-signed manifest (or a bug) can still carry a
    state.json of the wrong shape; this turns that into the one line of a damaged checkpoint
    instead of a KeyError deep in a resume. ``spec`` maps a key to ``int`` (a whole number
    >= 0: steps, counts, positions), ``float`` (any number), ``str``, ``bool``, ``None``, a
    tuple of these (any of them) or a mapping (an object whose keys must all be present).
    Top-level keys may be absent (callers have defaults); present ones must fit.
    """
    for key, sub in spec.items():
        if key in state:
            problem = _spec_problem(state[key], sub)
            if problem is not None:
                raise InputError(f"checkpoint {ckpt_dir} is damaged: {STATE_FILE} has "
                                 f"{key!r} = {clip(json.dumps(state[key]))}, not {problem}; use "
                                 f"another checkpoint ({_list_them(Path(ckpt_dir), lists=True)})")


def _check_own_fields(ckpt_dir: Path, state: dict[str, Any]) -> None:
    """``step`` and ``metrics``, which :meth:`CheckpointManager.save` always writes."""
    if "step" not in state:
        raise InputError(f"checkpoint {ckpt_dir} is damaged: {STATE_FILE} has no 'step'; use "
                         f"another checkpoint ({_list_them(Path(ckpt_dir), lists=True)})")
    check_state(ckpt_dir, state, {"step": int})
    metrics = state.get("metrics", {})
    if not isinstance(metrics, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics.values()):
        raise InputError(f"checkpoint {ckpt_dir} is damaged: {STATE_FILE} has 'metrics' = "
                         f"{clip(json.dumps(metrics))}, not an object of numbers; use another "
                         f"checkpoint ({_list_them(Path(ckpt_dir), lists=True)})")
    named = parse_step(ckpt_dir.name)
    if named is not None and named != state["step"]:
        raise InputError(f"checkpoint {ckpt_dir} is damaged: {STATE_FILE} says step "
                         f"{state['step']}, its folder name step {named}; use another "
                         f"checkpoint ({_list_them(Path(ckpt_dir), lists=True)})")


# ---- loading ---------------------------------------------------------------------------------

#: what ``framework=`` takes: ``"numpy"`` or ``"pt"``, or safetensors' other names for them
FrameworkName = Literal["numpy", "np", "pt", "torch"]
_FRAMEWORKS: dict[Any, Framework] = {"numpy": "numpy", "np": "numpy", "pt": "pt", "torch": "pt"}


def _checked_framework(framework: Any) -> Framework:
    try:
        return _FRAMEWORKS[framework]
    except (KeyError, TypeError):  # TypeError: an unhashable value
        raise InputError(f"framework= must be 'numpy' (NumPy arrays) or 'pt' (torch tensors), "
                         f"got {clip(repr(framework))}; pass framework='numpy' or "
                         "framework='pt'") from None


def _checked_names(names: Any) -> list[str] | None:
    """``names=`` as a list: one str is one name (not its letters)."""
    if names is None:
        return None
    if isinstance(names, str):
        return [names]
    listed = list(names) if isinstance(names, Iterable) else None
    if listed is None or not all(isinstance(n, str) for n in listed):
        raise InputError(f"names= must be a tensor's name or a list of names (str), got "
                         f"{clip(repr(names if listed is None else listed))}; e.g. "
                         "names=['input_embeddings']")
    return listed


@python_entry
def load_checkpoint(ckpt_dir: Path | str, *, verify: bool = True,
                    names: Iterable[str] | str | None = None,
                    rename: Mapping[str, str] | None = None,
                    state_spec: Mapping[str, Any] | None = None,
                    framework: FrameworkName = "numpy",
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load tensors and state of one checkpoint folder (no unpickling anywhere).

    ``framework``: ``"numpy"`` (or ``"np"``) gives NumPy arrays (and imports no torch, unless a
    tensor has a dtype NumPy lacks: bfloat16 and float8 come back widened to float32); ``"pt"``
    (or ``"torch"``) gives torch tensors of the stored dtypes; anything else is refused.

    ``names``: stored tensor names to load (a str: that one; default: all). ``rename``:
    ``{new_name: stored_name}`` (the CLI's ``--map new=old``); stored names not mentioned keep
    their names, and a stored name in ``rename`` is loaded even when ``names`` omits it.
    Raises :class:`InputError` naming missing tensors and the available ones. The state always
    has ``step`` (an int >= 0, that of the folder's name) and ``metrics`` (numbers);
    ``state_spec`` checks the caller's own fields (:func:`check_state`). A state of the wrong
    shape is a one-line :class:`InputError`.

    A checkpoint deleted while it is read, while its run has a newer one (a run in training,
    whose retention deletes a checkpoint once a newer one is committed), is a one-line
    :class:`InputError` saying so; :func:`load_latest` reads the newer one instead.
    """
    ckpt_dir = Path(checked_path("ckpt_dir", ckpt_dir, "a checkpoint folder"))
    wanted, chosen = _checked_names(names), _checked_framework(framework)
    verify = checked_bool("verify", verify)
    if state_spec is not None:
        if not isinstance(state_spec, Mapping):
            raise InputError(f"state_spec must be a dict of field names to shapes, got "
                             f"{clip(repr(state_spec))}; e.g. state_spec={{'epoch': int}}")
        _checked_spec(state_spec)
    there = ckpt_dir.is_dir()
    try:
        return _load_one(ckpt_dir, verify=verify, names=wanted, rename=rename,
                         state_spec=state_spec, framework=chosen)
    except InputError:
        newer = _newer_than(ckpt_dir) if there else None
        if newer is None:
            raise
    run = ckpt_dir.parent.parent
    fix = (f"read {newer.name} (embedlab.checkpoint.load_latest({os.fspath(run)!r}) reads the "
           "newest of a run in training)") if python_caller() else \
        "run the command again, which reads the newest"
    raise InputError(f"checkpoint {ckpt_dir} was deleted while it was read: the run training "
                     f"it saved {newer.name}, and its retention let {ckpt_dir.name} go; "
                     f"{fix}") from None


def _load_one(ckpt_dir: Path, *, verify: bool, names: Iterable[str] | None,
              rename: Mapping[str, str] | None, state_spec: Mapping[str, Any] | None,
              framework: Framework) -> tuple[dict[str, Any], dict[str, Any]]:
    if verify:
        _verified_or_fail(ckpt_dir)
    rename = dict(rename or {})
    try:
        with safe_open(str(ckpt_dir / TENSORS_FILE), framework="numpy") as f:
            stored = list(f.keys())
            wanted = list(names) if names is not None else list(stored)
            wanted += [old for old in rename.values() if old not in wanted]
            missing = [n for n in wanted if n not in stored]
            if missing:
                held = f"it has: {', '.join(sorted(stored))}" if stored else \
                    "it holds no tensor at all; use another checkpoint"
                raise InputError(f"checkpoint {ckpt_dir} has no tensor named "
                                 f"{', '.join(missing)}; {held}")
            out_names = _output_names(wanted, rename)
            widen = framework == "numpy" and any(
                f.get_slice(n).get_dtype() in NOT_NUMPY_DTYPES for n in wanted)
        loaded = _read_tensors(ckpt_dir / TENSORS_FILE, wanted, "pt" if widen else framework,
                               everything=len(wanted) == len(stored) and names is None)
        if widen:
            loaded = {n: t.float().numpy() if t.is_floating_point() else t.numpy()
                      for n, t in loaded.items()}
        state = json.loads((ckpt_dir / STATE_FILE).read_text(encoding="utf-8"))
    except InputError:
        raise
    except Exception as exc:  # OSError, ValueError (JSON), SafetensorError
        raise _unreadable(ckpt_dir, exc) from None
    if not isinstance(state, dict):
        raise InputError(f"{ckpt_dir / STATE_FILE} is not a JSON object; use another checkpoint")
    _check_own_fields(ckpt_dir, state)
    if state_spec is not None:
        check_state(ckpt_dir, state, state_spec)
    return {out_names[n]: loaded[n] for n in wanted}, state


def _read_tensors(path: Path, names: list[str], framework: Framework, *,
                  everything: bool) -> dict[str, Any]:
    if framework == "pt":  # bfloat16 or float8 tensors: NumPy has no such dtypes
        import_torch(f"reading the bfloat16/float8 tensors of {path}")
    if everything:  # one pass for the full set
        if framework == "numpy":
            return safetensors.numpy.load_file(str(path))
        from safetensors.torch import load_file

        return load_file(str(path))
    with safe_open(str(path), framework=framework) as f:
        return {n: f.get_tensor(n) for n in names}


def _map_name() -> str:
    return spell_name("--map", python="rename")


def _output_names(wanted: list[str], rename: Mapping[str, str]) -> dict[str, str]:
    """stored name -> output name; refuses two tensors ending up under one name."""
    reverse: dict[str, str] = {}
    for new, old in rename.items():
        if old in reverse:
            raise InputError(f"{_map_name()} names {old!r} twice ({reverse[old]!r} and "
                             f"{new!r}); map each stored tensor once")
        reverse[old] = new
    out = {n: reverse.get(n, n) for n in wanted}
    seen: dict[str, str] = {}
    for old, new in out.items():
        if new in seen:
            raise InputError(f"{_map_name()} would give two tensors the name {new!r} "
                             f"({seen[new]!r} and {old!r}); pick another new name")
        seen[new] = old
    return out


def tensor_specs(ckpt_dir: Path | str) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype) of every stored tensor, read from the header only (no data)."""
    out = []
    try:
        with safe_open(str(Path(ckpt_dir) / TENSORS_FILE), framework="numpy") as f:
            for name in sorted(f.keys()):
                sl = f.get_slice(name)
                out.append((name, tuple(sl.get_shape()), str(sl.get_dtype())))
    except Exception as exc:  # a verified but unparsable file (re-signed): as load_checkpoint
        raise _unreadable(Path(ckpt_dir), exc) from None
    return out
