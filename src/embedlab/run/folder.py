"""The run folder: which config applies (new run or resume), run naming, restart and branch moves.

A run is ``(config, run_dir)``. A new run takes the defaults, the preset and the explicit flags; a
resumed run takes the *stored* config and only the explicit flags on top, refusing any that would
change the result (:func:`embedlab.config.diff_for_resume`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from embedlab.config import (
    LEGACY_VALUES,
    PRESETS,
    TrackConfig,
    TrainConfig,
    apply_preset,
    check_new_run,
    diff_for_resume,
    diff_settings,
    fill_legacy_keys,
    flatten,
    overlay,
)
from embedlab.data.corpus import SPECIAL_CORPORA as _LABELS  # corpus names that are not paths
from embedlab.errors import (
    InputError,
    note,
    python_caller,
    spell,
    spell_metavar,
    spell_name,
    warn,
)
from embedlab.fsutil import name_stamp
from embedlab.run.naming import earlier_run_names, run_name

CONFIG_FILE = "config.json"



def check_run_dir(run_dir: Path) -> None:
    """Refuse a --run that is a file, lies below a file, or is a folder of someone else's files.

    The last case matters because the run would be written among those files, and a later
    --restart would move the whole folder aside.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(f"{spell('--run', run_dir)} is a file, not a folder; pass a folder "
                         "path (it is created if missing)")
    if run_dir.is_symlink() and not run_dir.exists():  # mkdir would say "File exists"
        raise InputError(f"{spell('--run', run_dir)} is a symbolic link to "
                         f"{os.readlink(run_dir)}, which does not exist; create that folder, "
                         f"or pass another {spell_name('--run')}")
    _check_parents(run_dir, "--run")
    # hidden entries do not count: a .DS_Store, or a temporary folder of embedlab's own that a
    # killed attempt left (they start with a dot), do not make a folder someone else's
    if (run_dir.is_dir() and not is_a_run(run_dir)
            and any(not p.name.startswith(".") for p in run_dir.iterdir())):
        raise InputError(f"{spell('--run', run_dir)} is a folder holding other files, not an "
                         "embedlab run; pass a new or empty folder (it is created if missing)")


def is_a_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run of embedlab's, by what only embedlab writes: its
    checkpoints/ or prepared/ folder, or a config.json, status.json or env.json in embedlab's
    form, or its lock file. A metrics.jsonl, vocab.tsv or config.json of another program's is
    no sign: a run written among such files would overwrite them."""
    if (run_dir / "checkpoints").is_dir() or (run_dir / "prepared" / "meta.json").is_file() \
            or (run_dir / ".lock").exists():  # the lock: a run being made, maybe by another
        return True
    for name, keys in ((CONFIG_FILE, ("data", "model", "optim")), ("status.json", ("status",)),
                       ("env.json", ("argv", "step_revision"))):
        try:
            record = json.loads((run_dir / name).read_text(encoding="utf-8"))
        except OSError:
            continue
        except ValueError:  # a damaged config.json of a run: resolve_config says what is wrong
            if name == CONFIG_FILE:
                return True
            continue
        if isinstance(record, dict) and (any(k in record for k in keys) or
                                         record.get("model") == "linreg"):
            return True
    return False


def check_runs_dir(runs_dir: Path) -> None:
    """--runs-dir must be (or become) a folder."""
    if runs_dir.exists() and not runs_dir.is_dir():
        raise InputError(f"{spell('--runs-dir', runs_dir)} is a file, not a folder; pass a "
                         "folder path (it is created if missing)")
    _check_parents(runs_dir, "--runs-dir")


def _check_parents(path: Path, flag: str) -> None:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{spell(flag, path)} lies below {parent}, which is a file; "
                                 "pass a path whose parents are folders")
            return


def stored_config(run_dir: Path) -> TrainConfig | None:
    return _stored(run_dir)[0]


def stored_config_from_here(run_dir: Path) -> TrainConfig | None:
    """:func:`stored_config` with the relative paths that name nothing from here read from the
    folder the run was created in, where they still are (as a resume reads them)."""
    stored = stored_config(run_dir)
    return None if stored is None else _anchored(stored, creation_folder(run_dir))


def _stored(run_dir: Path) -> tuple[TrainConfig | None, set[str]]:
    """The stored config, and the keys that hold a value of a version before them
    (:data:`embedlab.config.LEGACY_VALUES`): those it lacked (written before they existed, read
    with the value runs of that time had), and those a resume of such a run has since written
    with that value (a run that chose the value is named for it, so a name lookup does not
    reach it, and optim.micro_order has no flag at all)."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        return None, set()
    try:  # read once: the checks below and the config are made from the same values
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise _invalid_config(path, exc) from None
    if _is_linreg(raw):
        raise InputError(f"{run_dir} is a run of 'embedlab linreg', not of word2vec; pass "
                         f"another {spell('--run')}")
    _check_recorded_keys(raw, path)
    try:
        cfg, filled = _config_of(raw)
    except InputError as exc:  # a value of the wrong type or range, written by hand
        raise InputError(f"{path} holds a value embedlab cannot use ({exc}); fix that key in "
                         f"the file, or pass {spell('--restart', True)} to start over") from None
    except (ValueError, TypeError) as exc:
        raise _invalid_config(path, exc) from None
    flat = flatten(cfg.to_dict())
    return cfg, filled | {key for key, value in LEGACY_VALUES.items() if flat.get(key) == value}


#: settings every run's config.json has recorded: one missing was lost (a hand edit), and a
#: default in its place would resume another run. (Keys that came later, LEGACY_VALUES, are
#: filled with the value runs had before them.)
RECORDED_KEYS = ("data.corpus", "model.dim", "model.window", "optim.lr", "optim.epochs",
                 "optim.batch_size", "seed")


def _invalid_config(path: Path, exc: Exception) -> InputError:
    return InputError(f"{path} is not a valid embedlab config ({exc}); pass another "
                      f"{spell('--run')} or {spell('--restart', True)} to start over")


def _check_recorded_keys(raw: Any, path: Path) -> None:
    if not isinstance(raw, dict) or any(
            not isinstance(raw.get(s, {}), dict) for s in ("data", "model", "optim")):
        return  # not a config's shape: _config_of says so
    flat = flatten(raw)
    missing = [k for k in RECORDED_KEYS if k not in flat]
    if missing:
        raise InputError(f"{path} lacks {', '.join(missing)}, which every run records; "
                         "restore it from a backup, or pass "
                         f"{spell('--restart', True)} to start over")


def is_linreg_run(run_dir: Path) -> bool:
    """Whether ``run_dir``'s config.json is that of an ``embedlab linreg`` run."""
    try:
        return _is_linreg(json.loads((run_dir / CONFIG_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def _is_linreg(raw: Any) -> bool:
    from embedlab.linreg.config import LINREG_MODEL

    return isinstance(raw, dict) and raw.get("model") == LINREG_MODEL


def _read_config(path: Path) -> tuple[TrainConfig, set[str]]:
    """A stored config.json, and the keys it lacked (filled with their legacy values)."""
    return _config_of(json.loads(path.read_text(encoding="utf-8")))


def _config_of(raw: Any) -> tuple[TrainConfig, set[str]]:
    """The config of config.json's values ``raw`` (filled in place with the legacy values of the
    keys it lacks), and those keys."""
    filled = fill_legacy_keys(raw)
    return TrainConfig.from_dict(raw), filled


#: the data options a prepared folder fixes (train refuses others for it)
_VOCABULARY_OPTIONS = ("lowercase", "min_count", "max_vocab", "unk", "max_distinct")


def say_restart_engine(run_dir: Path, explicit: dict[str, Any]) -> None:
    """--restart of a torch run without --engine: the engine is this call's choice (native
    where it builds), said, as the old run's other settings are kept."""
    try:
        stored, _ = _read_config(run_dir / CONFIG_FILE)
    except (OSError, ValueError, TypeError, InputError):
        return
    if recorded_engine(stored) == "torch" and explicit.get("engine") in (None, "auto"):
        note(f"{spell('--restart', True)}: the old run trained with the torch engine; the new "
             f"one takes this machine's choice (pass {spell('--engine', 'torch')} to keep "
             "torch)")


def restart_options(run_dir: Path, explicit: dict[str, Any]) -> dict[str, Any] | None:
    """``--restart``'s options: the run's own settings (its ``config.json``), with the options
    given over them, so that the run starts over as it was set up unless told otherwise; None
    without a readable config (the options given alone then make the new run).

    Not taken from the run: a stop point (``--max-steps``) and this machine's choices (engine,
    threads), which come from this call; values the config holds only because it was written
    before those settings existed (a new run takes today's defaults there); and, when the corpus
    (the one given, or the run's) is a prepared folder, the vocabulary options, which that folder
    fixes.
    """
    try:
        stored, filled = _read_config(run_dir / CONFIG_FILE)
    except (OSError, ValueError, TypeError, InputError):
        return None
    # its relative paths from the folder they were typed in, as a resume reads them
    base = _anchored(stored, creation_folder(run_dir)).to_dict()
    for key in ("max_steps", "preset", "engine", "threads"):
        base.pop(key, None)
    if base.get("model", {}).get("init") == "uniform":  # a scale the uniform start ignored
        base["model"].pop("init_scale", None)
    for dotted in filled:
        section, _, key = dotted.partition(".")
        base.get(section, {}).pop(key, None)
    from embedlab.data.prepared import is_prepared  # here: it imports numpy

    # the run's own corpus too: "--restart" is how its refusal of a folder prepared again with
    # other options says to start over on the folder as it is
    corpus = explicit.get("data", {}).get("corpus", base.get("data", {}).get("corpus"))
    if isinstance(corpus, str) and is_prepared(corpus):
        for key in _VOCABULARY_OPTIONS:
            base.get("data", {}).pop(key, None)
    return overlay(base, explicit)


def renewed_on_restart(run_dir: Path, explicit: dict[str, Any]) -> list[str]:
    """The settings ``--restart`` of ``run_dir`` gives today's defaults where the run had other
    values, as ``--option VALUE`` of the run's: those its config.json lacks (written before
    they existed, its values implied) and ``explicit`` does not give (see
    :func:`restart_options`)."""
    from embedlab.config import LEGACY_VALUES, TrainConfig, option_spelled
    from embedlab.errors import python_caller

    try:
        _, filled = _read_config(run_dir / CONFIG_FILE)
    except (OSError, ValueError, TypeError, InputError):
        return []
    defaults = TrainConfig()
    renewed = []
    for dotted in sorted(filled):
        section, _, key = dotted.partition(".")
        flag = option_spelled(dotted)
        if key in explicit.get(section, {}) or flag == dotted:  # given, or no option sets it
            continue
        if LEGACY_VALUES[dotted] != getattr(getattr(defaults, section), key):
            value = f"{LEGACY_VALUES[dotted]:g}"
            renewed.append(f"{flag}={value}," if python_caller() else f"{flag} {value}")
    return renewed


def _has_checkpoint(run_dir: Path | None) -> bool:
    if run_dir is None:
        return False
    # here, not at the top: checkpoint imports numpy and safetensors, which refusing a flag
    # must not wait for
    from embedlab.checkpoint import CKPT_DIR, parse_step

    return any(parse_step(p.name) is not None for p in (run_dir / CKPT_DIR).glob("ckpt-*"))


def recorded_engine(stored: TrainConfig) -> str:
    """The engine a stored run trained with: a config written before engines existed says
    "auto", and those runs used torch."""
    return "torch" if stored.engine == "auto" else stored.engine


def keeps_engine(request: str | None, engine: str) -> bool:
    """Whether a resume that makes engine ``request`` (None: no --engine or --device) keeps the
    run's ``engine``: a run keeps its engine, since another gives other bits; ``--device cpu``
    keeps a CPU engine too, and moves a GPU run to one."""
    from embedlab.engines import CPU_ENGINES, CPU_REQUEST

    # "auto" given is the default given: the run's engine, as when no --engine is given
    return request in (None, "auto") or (request == CPU_REQUEST and engine in CPU_ENGINES)


def resolve_config(run_dir: Path | None, explicit: dict[str, Any], preset: str | None, *,
                   say: bool = True) -> tuple[TrainConfig, TrainConfig | None]:
    """(config to use, stored config or None). ``explicit`` holds only the flags the user gave.
    ``say``: print the warnings of a resume (False: only the refusals, for a check made early)."""
    stored = stored_config(run_dir) if run_dir is not None else None
    if stored is None and _has_checkpoint(run_dir):
        # the flags given would otherwise be taken for the run's own: another --lr or
        # --batch-size went on silently from its checkpoint
        raise InputError(f"run {run_dir} has checkpoints but no {CONFIG_FILE}, which holds its "
                         f"settings; restore {CONFIG_FILE} from a backup, or pass "
                         f"{spell('--restart', True)} to start over (the old folder is moved "
                         "aside)")
    if stored is None:
        cfg = TrainConfig.from_dict(_with_prepared_vocab(apply_preset(preset, explicit)))
        check_new_run(cfg, explicit)
        return cfg.resolve(), None
    if run_dir is not None:
        from embedlab.run.lock import RunLock

        # a run another process trains: that is the obstacle to name, not the flags that
        # differ from its config (dropping them was then refused as "in use")
        RunLock.refuse_if_held(run_dir)
    made_in = creation_folder(run_dir) if run_dir is not None else None
    stored = _named_there(_anchored(stored, made_in), explicit, made_in)
    explicit = _same_paths_as(explicit, stored, made_in)
    stored, explicit = _moved_corpus(run_dir, stored, explicit, say=say)
    base = stored.to_dict()
    base["max_steps"] = None  # a stop point belongs to one invocation, not to the run
    # so does the display: a --no-progress batch job's run, resumed at a terminal, shows its bar
    base["track"]["progress"] = TrackConfig().progress
    if preset is not None and preset == stored.preset:
        # the same command again (--preset cs20 re-run after a Ctrl-C) stops where it would
        # have without the stop: the preset's own stop (the lecture's 100,000 steps) is part of
        # what it names (it trained on past it); --max-steps N still wins, and train --run
        # alone goes on through the epoch
        base["max_steps"] = PRESETS[preset].get("max_steps")
    if preset is not None and preset != stored.preset:
        made = f"with {spell('--preset', stored.preset)}" if stored.preset else \
            f"without {spell_name('--preset')}"
        raise InputError(f"run {run_dir} was created {made}; drop {spell('--preset', preset)} "
                         f"to resume, or use {spell('--restart', True)} / another "
                         f"{spell('--run')}")
    overlay(base, explicit)
    stored = dataclasses.replace(stored, engine=recorded_engine(stored))
    try:
        requested = TrainConfig.from_dict(base)
        if explicit.get("threads") is None:
            requested = TrainConfig.from_dict({**requested.to_dict(), "threads": stored.threads})
        if keeps_engine(explicit.get("engine"), stored.engine):
            requested = TrainConfig.from_dict({**requested.to_dict(), "engine": stored.engine})
            _check_available(run_dir, stored.engine)
        requested = requested.resolve(say=say)  # --threads 0: all cores, as for a new run
    except InputError:
        # settings the run's engine cannot train (--micro-batches on native): where they are
        # not the run's anyway, that is what to say, not a fix ("pass --engine torch") that
        # the resume would then refuse as another config. A value that is wrong by itself
        # (--dim 0) is refused in its own words, by the config of the flags alone.
        TrainConfig.from_dict(explicit)
        flat = flatten(base)
        if keeps_engine(explicit.get("engine"), stored.engine):
            flat["engine"] = stored.engine
        flat["threads"] = stored.threads if explicit.get("threads") is None else flat["threads"]
        bad = diff_settings(flatten(stored.to_dict()), flat, spelled=True)
        if bad and _has_checkpoint(run_dir):
            raise _other_config(run_dir, bad) from None
        raise
    bad = diff_for_resume(stored, requested, spelled=True)
    if bad and not _has_checkpoint(run_dir):
        # Stopped before its first checkpoint (Ctrl-C while it was set up, in a folder that
        # already existed): nothing was trained, so the stored config only fills in the flags
        # not given, and other flags start the run afresh instead of being refused.
        check_new_run(requested, explicit)
        return requested, None
    if bad:
        raise _other_config(run_dir, bad)
    if not say:
        return requested, stored
    if requested.threads != stored.threads and requested.engine == "torch":
        warn(f"resuming with {spell('--threads', requested.threads)} (the run used "
             f"{stored.threads}); results may differ in the last bits from an uninterrupted run")
    if "cuda" in (stored.engine, requested.engine) and run_dir is not None:
        _warn_if_other_device(run_dir, stored.engine, requested.engine)
    if not requested.track.tensorboard and explicit.get("track", {}).get("tensorboard") is None:
        # an option left out takes the run's stored value: one resume with --no-tensorboard
        # (the disk-full hint's) left every later one writing no events, silently
        off = "tensorboard=False" if python_caller() else "--no-tensorboard"
        note(f"TensorBoard is off for this run ({off} is stored in its {CONFIG_FILE}); pass "
             f"{spell('--tensorboard', True)} to write its events again")
    return requested, stored


def _other_config(run_dir: Path | None, bad: list[str]) -> InputError:
    given = "arguments" if python_caller() else "flags"
    return InputError(f"run {run_dir} was trained with a different config: {'; '.join(bad)}. "
                      f"Drop those {given} to resume, pass {spell('--restart', True)} to start "
                      f"over, or use another {spell('--run')}")


def corpus_not_found(run_dir: Path, corpus: str) -> str:
    """"run RUN's corpus C (as its config.json names it) is not found from HERE[, nor from the
    folder the run was made in]": the start of a refusal that asks for the corpus's path."""
    made_in = creation_folder(run_dir)
    nor = f", nor from {made_in}, where the run was made" if made_in is not None and \
        made_in != Path.cwd() else ""
    return (f"run {run_dir}'s corpus {corpus} (as its config.json names it) is not found from "
            f"{Path.cwd()}{nor}")


def creation_folder(run_dir: Path) -> Path | None:
    """The working folder the run was created in (``cwd`` of ``env.json``'s first record),
    from which the relative paths of its config were typed; None where it is not recorded."""
    try:
        cwd = json.loads((run_dir / "env.json").read_text(encoding="utf-8")).get("cwd")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else None


#: the keys of a flattened config that name a file or folder
PATH_KEYS = ("data.corpus", "init_from", "eval.analogies")


def paths_from_creation(flat: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """A run's flattened config with its relative paths made absolute from the folder they
    were typed in (its creation folder): a run created with ``--corpus corpus.txt`` and one
    resumed from elsewhere, whose config holds the absolute path, then name the same corpus
    alike when runs are compared. Names that are no path (``demo``, sentences given in memory)
    and runs without a recorded folder are left as they are."""
    from embedlab.data.sentences import is_label

    folder = creation_folder(run_dir)
    if folder is None:
        return flat
    out = dict(flat)
    for key in PATH_KEYS:
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value) and \
                value not in _LABELS and not is_label(value):
            out[key] = os.path.normpath(folder / value)
    return out


def typed_in(folder: Path | None, path: str) -> str | None:
    """Where a relative ``path`` of a run's config points from ``folder``, the folder it was
    typed in (:func:`creation_folder`), when something is there; None otherwise (no folder
    recorded, an absolute path, or nothing there)."""
    if folder is None or os.path.isabs(path):
        return None
    there = os.path.normpath(folder / path)
    return there if os.path.exists(there) else None


def _anchored(stored: TrainConfig, folder: Path | None) -> TrainConfig:
    """``stored`` with the relative paths (corpus, evaluation files) that name nothing from
    here made absolute from the folder they were typed in, where they still are: a resume from
    another working folder then reads the run's files (it stopped at "corpus not found"); the
    config written by that resume holds the absolute paths. A path found from here stays as
    typed, so that a resume from the run's own folder, or from a copy of the project, changes
    nothing of the run's records (a corpus there that differs from the run's is refused by
    its fingerprint, :mod:`embedlab.training.setup`)."""
    if folder is None:
        return stored

    def anchor(path: str) -> str:
        if os.path.exists(path):
            return path  # as typed: config.json and the run's records keep their words
        return typed_in(folder, path) or path

    data, ev = stored.data, stored.eval
    corpus = data.corpus if data.corpus in _LABELS else anchor(data.corpus)
    return dataclasses.replace(
        stored, data=dataclasses.replace(data, corpus=corpus),
        eval=dataclasses.replace(ev, analogies=ev.analogies and anchor(ev.analogies),
                                 similarity=tuple(anchor(p) for p in ev.similarity)),
        init_from=stored.init_from and anchor(stored.init_from))


def _named_there(stored: TrainConfig, explicit: dict[str, Any], folder: Path | None
                 ) -> TrainConfig:
    """``stored`` with its relative corpus made absolute from the folder the run was made in,
    where the ``--corpus`` given names it there and the same words name another folder from here
    (a resume from a folder with a ``prep/`` of its own, passing the run's by another path):
    the run's own corpus, not "another config"."""
    given = explicit.get("data", {}).get("corpus")
    old = stored.data.corpus
    there = None if old in _LABELS else typed_in(folder, old)
    if isinstance(given, str) and there and same_file(given, there) and \
            not same_file(given, old):
        return dataclasses.replace(stored, data=dataclasses.replace(stored.data, corpus=there))
    return stored


def _same_paths_as(explicit: dict[str, Any], stored: TrainConfig, folder: Path | None = None
                   ) -> dict[str, Any]:
    """``explicit`` with a ``--corpus`` (or ``--init-from``) that names the stored one's file or
    folder (another spelling: ``./prep/``, an absolute path, a path from another working folder)
    replaced by the stored value, and other relative evaluation files made absolute from here.
    A relative path that names nothing from here is read from ``folder``, the one the run was
    made in (the same command re-run from elsewhere), where something is there."""

    def here_or_there(path: str) -> str:
        return path if os.path.exists(path) else typed_in(folder, path) or path

    out = {section: dict(values) if isinstance(values, dict) else values
           for section, values in explicit.items()}
    corpus = out.get("data", {}).get("corpus")
    if isinstance(corpus, str) and corpus not in _LABELS and stored.data.corpus not in _LABELS \
            and same_file(here_or_there(corpus), stored.data.corpus):
        out["data"]["corpus"] = stored.data.corpus
    warm = out.get("init_from")  # --init-from ./srcA/ is the run's srcA
    if isinstance(warm, str) and stored.init_from and same_file(warm, stored.init_from):
        out["init_from"] = stored.init_from
    ev = out.get("eval", {})
    if isinstance(ev.get("analogies"), str):
        ev["analogies"] = os.path.abspath(here_or_there(ev["analogies"]))
    if isinstance(ev.get("similarity"), list | tuple):
        ev["similarity"] = [os.path.abspath(here_or_there(p)) if isinstance(p, str) else p
                            for p in ev["similarity"]]
    return out


def _moved_corpus(run_dir: Path | None, stored: TrainConfig, explicit: dict[str, Any], *,
                  say: bool) -> tuple[TrainConfig, dict[str, Any]]:
    """``stored`` with the ``--corpus`` given in place of its own where that is found nowhere
    and the run keeps no copy of it (``RUN/prepared``): the corpus was moved, and the refusal
    that says so asks for its new path. The resume then reads the new path (recorded as an
    absolute one: a relative path is read from the folder the run was made in), and the
    checkpoint's fingerprint of the corpus refuses other data (see ``training.setup``); a run
    with a prepared copy reads that, and another --corpus stays another config, as it does for
    a run whose checkpoints hold no fingerprint (made by an earlier version)."""
    from embedlab.data.prepared import is_prepared
    from embedlab.data.sentences import is_label

    given = explicit.get("data", {}).get("corpus")
    old = stored.data.corpus
    if run_dir is None or not isinstance(given, str) or given == old or \
            any(c in _LABELS or is_label(c) for c in (given, old)) or \
            os.path.exists(old) or not os.path.exists(given) or \
            is_prepared(run_dir / "prepared") or not holds_corpus_fingerprints(run_dir):
        return stored, explicit
    if say:
        note(f"run {run_dir}'s corpus {old} is not found; reading {given} in its place (the "
             "checkpoint's fingerprint of the corpus checks that it is the same data)")
    moved = os.path.abspath(given)
    return (dataclasses.replace(stored, data=dataclasses.replace(stored.data, corpus=moved)),
            {**explicit, "data": {**explicit["data"], "corpus": moved}})


def holds_corpus_fingerprints(run_dir: Path) -> bool:
    """Whether every checkpoint of the run records its corpus's fingerprint."""
    from embedlab.checkpoint.format import CKPT_DIR, STATE_FILE, committed_folders

    folders = committed_folders(run_dir / CKPT_DIR).values()
    for folder in folders:
        try:
            state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if not isinstance(state, dict) or not isinstance(state.get("corpus"), str):
            return False
    return bool(folders)


def same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file or folder (spelled alike where either is
    missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (here): the same only if spelled alike
        return os.path.abspath(a) == os.path.abspath(b)


def _check_available(run_dir: Path | None, engine: str) -> None:
    """Refuse to resume a run whose engine cannot train here, naming the fix."""
    if engine == "native":
        from embedlab.engines.native import install_hint, unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            raise InputError(f"run {run_dir} was trained with the native engine, which is "
                             f"unavailable here ({reason}); {install_hint(reason)} to "
                             f"resume it, or pass {spell('--restart', True)}")
    elif engine == "cuda":
        from embedlab.engines import unavailable_reason as engine_unavailable

        reason = engine_unavailable("cuda")
        if reason is not None:
            raise InputError(f"run {run_dir} was trained with the cuda engine, which is "
                             f"unavailable here ({reason}); pass {spell('--engine', 'native')} "
                             "to resume it on the CPU (results may differ in the last bits from "
                             f"an uninterrupted run), or {spell('--restart', True)} to start over")


def _warn_if_other_device(run_dir: Path, stored_engine: str, engine: str) -> None:
    """A run of the cuda engine resumed with a CPU engine, on another GPU model, or the other
    way round goes on with other float32 rounding: allowed (the engines agree to rounding), and
    said in one line. What the run last trained on is read from ``RUN/env.json``."""
    from embedlab.engines import training_device
    from embedlab.run.provenance import recorded_device

    before, now = recorded_device(run_dir), training_device(engine)
    if (engine == stored_engine and before in (None, now)) or not _has_checkpoint(run_dir):
        return  # the same GPU model, or nothing trained yet to differ from

    def where(device: str | None, name: str) -> str:
        on = [] if device is None else ["on the CPU" if device == "cpu" else f"on {device}"]
        return " ".join(on + ([] if engine == stored_engine else [f"with the {name} engine"]))

    warn(f"resuming {where(now, engine)} (the run trained {where(before, stored_engine)}); "
         "results may differ in the last bits from an uninterrupted run")


def _with_prepared_vocab(merged: dict[str, Any]) -> dict[str, Any]:
    """A prepared --corpus fixes the vocabulary: its options fill those no flag or preset set.

    Otherwise the defaults (--min-count 5, ...) would be compared with the folder's options and
    a folder prepared with --min-count 1 could not be trained on without repeating the flag.
    --max-distinct too: the run's config.json then records the pruning limit its counts came
    from. An option that *was* set and differs is still refused
    (trainer._check_prepared_matches).
    """
    from embedlab.data.corpus import SPECIAL_CORPORA, says_prepared

    data = merged.get("data", {})
    corpus = data.get("corpus")
    if corpus is None or corpus in SPECIAL_CORPORA or not says_prepared(Path(corpus) /
                                                                        "meta.json"):
        return merged
    from embedlab.data.prepared import vocab_options

    return {**merged, "data": {**vocab_options(corpus), **data}}


def choose_run_dir(runs_dir: Path, explicit: dict[str, Any], preset: str | None) -> Path:
    """A readable name from the non-default hyperparameters; ``-2``, ``-3``... on a clash.

    A folder with the same name *and* the same result-relevant config is reused, so re-running
    the same command resumes it.
    """
    # the config resolve_config gives a new run, prepared folder's options included: built
    # without them, a run on a folder prepared with e.g. --min-count 1 never matched its stored
    # config, and every re-run made another folder (-2, -3...) instead of resuming
    cfg = TrainConfig.from_dict(_with_prepared_vocab(apply_preset(preset, explicit))).resolve(
        say=False)  # resolve_config says it
    base = run_name(cfg)
    # a run an earlier version named (without the newer tags, by its defaults) resumes there
    for old in earlier_run_names(cfg):
        for candidate in _named(runs_dir, old):
            if _resumes(candidate, cfg, explicit):
                return candidate
    for i in range(1, 10_000):
        candidate = runs_dir / (base if i == 1 else f"{base}-{i}")
        if not candidate.exists() or _resumes(candidate, cfg, explicit):
            _check_outside_corpus(candidate, cfg.data.corpus)
            if i > 1 and not candidate.exists():
                _say_why_numbered(runs_dir / base, cfg, candidate)
            return candidate
    raise InputError(f"too many runs named {base}* in {runs_dir}; pass "
                     f"{spell_metavar('--run', 'DIR')}")


def _say_why_numbered(taken: Path, cfg: TrainConfig, candidate: Path) -> None:
    """A new run named ``NAME-2``: say which settings of the run at ``NAME`` differ (one
    extended with --epochs, say), or the -2 reads as part of the last tag, and the sweep that
    meant to resume it trains a duplicate unseen."""
    from embedlab.config import changed_settings, option_spelled

    with contextlib.suppress(InputError, OSError):
        stored, _ = _stored(taken)
        if stored is None:
            return
        there, here = flatten(stored.to_dict()), flatten(cfg.to_dict())
        keys = changed_settings(there, here)
        if not keys:
            return
        shown = ", ".join(f"{option_spelled(k)} {there.get(k)!r} there, {here.get(k)!r} here"
                          for k in keys[:3]) + (", ..." if len(keys) > 3 else "")
        note(f"{taken} holds a run of other settings ({shown}): this is a new run, {candidate} "
             f"({spell('--run', str(taken))} names that one)")


def _resumes(candidate: Path, cfg: TrainConfig, explicit: dict[str, Any]) -> bool:
    """Whether the run in ``candidate`` is the one ``cfg`` would resume (see resolve_config).

    What a run keeps unless a flag says otherwise is taken from it, as resolve_config does: its
    engine (CBOW runs of earlier versions recorded torch, where auto now gives native), on a
    prepared folder its --max-distinct (runs made before a new run took the folder's recorded
    the default), and the value of an option its version did not have yet (--init-scale 1,
    --interleave 1, consecutive micro-batches: see LEGACY_VALUES), whether the key is missing
    or a resume has since written that value — only for such runs: a run that recorded another
    value than the default is another run.
    """
    from embedlab.data.corpus import SPECIAL_CORPORA, says_prepared

    stored, filled = _stored(candidate) if candidate.is_dir() else (None, set())
    if stored is None:
        return False
    try:
        if keeps_engine(explicit.get("engine"), recorded_engine(stored)):
            cfg = dataclasses.replace(cfg, engine=recorded_engine(stored))
        for key in filled:
            section, name = key.split(".")
            if name not in explicit.get(section, {}):
                old = getattr(stored, section)
                cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(
                    getattr(cfg, section), **{name: getattr(old, name)})})
    except InputError:  # settings the run's engine does not train (--micro-batches on native)
        return False
    # the corpus by its file, as resolve_config compares it: "./corpus.txt" or its absolute
    # path resume the run made with "corpus.txt" rather than name a new "-2"
    stored = _anchored(stored, creation_folder(candidate))
    corpus = cfg.data.corpus
    if corpus not in _LABELS and stored.data.corpus not in _LABELS and \
            same_file(corpus, stored.data.corpus):
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data,
                                                                corpus=stored.data.corpus))
    if cfg.init_from and stored.init_from and same_file(cfg.init_from, stored.init_from):
        cfg = dataclasses.replace(cfg, init_from=stored.init_from)  # --init-from ./src/
    corpus = cfg.data.corpus
    if ("max_distinct" not in explicit.get("data", {}) and corpus not in SPECIAL_CORPORA
            and says_prepared(Path(corpus) / "meta.json")):
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(
            cfg.data, max_distinct=stored.data.max_distinct))
    return not diff_for_resume(stored, cfg)


def _named(runs_dir: Path, base: str) -> list[Path]:
    """The folders in ``runs_dir`` named ``base`` or ``base-N``, in the order N."""
    pattern = re.compile(re.escape(base) + r"(?:-(\d+))?")
    found = []
    if runs_dir.is_dir():
        for p in runs_dir.iterdir():
            if m := pattern.fullmatch(p.name):
                found.append((int(m.group(1) or 1), p))
    return [p for _, p in sorted(found)]


def _check_outside_corpus(run_dir: Path, corpus: str) -> None:
    """``train --corpus .``: the runs folder lands inside the corpus folder. Refused here, naming
    the run folder, before prepare refuses it naming --out, a flag train does not have."""
    from embedlab.data.corpus import SPECIAL_CORPORA, says_prepared

    source = Path(corpus)
    if corpus in SPECIAL_CORPORA or not source.is_dir() or says_prepared(source / "meta.json"):
        return
    from embedlab.data.prepared import check_not_inside

    check_not_inside(run_dir, source, run_dir)


def move_aside(run_dir: Path) -> Path:
    """--restart: keep the old run's files in a sibling folder instead of deleting anything."""
    stamp = name_stamp()
    target = run_dir.with_name(f"{run_dir.name}.old-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = run_dir.with_name(f"{run_dir.name}.old-{stamp}-{n}")
    run_dir.rename(target)
    return target


#: where this call's ``--from`` moved the checkpoints newer than the step it resumes from
#: (step, folder): a stop before training began must say so, not that nothing moved
ABANDONED: ContextVar[tuple[int, Path] | None] = ContextVar("embedlab_abandoned", default=None)


def abandon_after(run_dir: Path, step: int) -> list[Path]:
    """--from CKPT: checkpoints newer than ``step`` belong to the branch being abandoned.

    They are moved (never deleted) into ``RUN/checkpoints-abandoned-<time>/`` so that automatic
    resume does not jump back to them (recorded in :data:`ABANDONED`).
    """
    from embedlab.checkpoint import CKPT_DIR, parse_step  # numpy: imported when needed

    root = run_dir / CKPT_DIR
    newer = [p for p in root.iterdir() if (s := parse_step(p.name)) is not None and s > step] \
        if root.is_dir() else []
    if not newer:
        return []
    stamp = name_stamp()
    dest = run_dir / f"checkpoints-abandoned-{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = run_dir / f"checkpoints-abandoned-{stamp}-{n}"
    dest.mkdir()
    ABANDONED.set((step, dest))
    moved = []
    for p in sorted(newer):
        target = dest / p.name
        shutil.move(str(p), target)
        moved.append(target)
    return moved
