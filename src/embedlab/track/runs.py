"""Runs as ``embedlab runs`` shows them: their status, and the comparison table.

The status comes from ``RUN/status.json`` (:mod:`embedlab.run.status`). A status of ``running``
whose ``pid`` is not alive on this machine is *shown* as ``failed`` (the process was killed
without a chance to say so); the file itself is left alone.

``embedlab runs`` lists every kind of run the experiment core makes: word2vec runs (``embedlab
train``) and linreg runs (``embedlab linreg``), whose ``config.json`` names its model
(``"model": "linreg"``) and which keep no ``status.json``: their status, step and loss come from
the run lock, the checkpoint index and ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from embedlab.checkpoint import CheckpointError, read_index
from embedlab.checkpoint.index import Index
from embedlab.config import (
    MAX_INT,
    MUTABLE_ON_RESUME,
    TrainConfig,
    best_direction,
    fill_legacy_keys,
    flatten,
    split_best_metric,
    without_unused,
)
from embedlab.errors import InputError, warn
from embedlab.linreg.config import LINREG_FIXED_ON_RESUME as LINREG_FIXED
from embedlab.linreg.config import LINREG_MODEL as LINREG
from embedlab.linreg.config import LinRegConfig
from embedlab.run.lock import pid_alive, read_lock
from embedlab.run.status import STATUS_FILE, STATUSES, read_status
from embedlab.track.jsonl import METRICS_FILE, read_metrics

WORD2VEC = "word2vec"  # the kind of a run made by `embedlab train`

# linreg's config keys that do not change its result (checkpoint cadence, retention); its
# hyperparameters are those a resume refuses to change, plus the length of the run
_LINREG_SETTINGS = frozenset(
    f"{LINREG}.{k}" for k in LinRegConfig.__dataclass_fields__
    if k not in (*LINREG_FIXED, "steps"))


def _is_pid(v: Any) -> TypeGuard[int]:
    # os.kill overflows past a C int; no real pid is that large
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**31


def _is_count(v: Any) -> bool:
    # bounded so that the table's arithmetic (format_count) cannot overflow a float
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_INT


def _is_number(v: Any) -> bool:
    return isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool)
                                    and abs(v) <= MAX_INT)


def _is_seconds(v: Any) -> bool:
    return _is_number(v) and math.isfinite(v) and abs(v) < 1e12


# status.json fields that `embedlab runs` shows or acts on: (check, what the value must be)
_STATUS_FIELDS: dict[str, tuple[Any, str]] = {
    "status": (lambda v: v in STATUSES, "one of " + ", ".join(STATUSES)),
    "step": (_is_count, "a whole number >= 0"),
    "words_seen": (_is_count, "a whole number >= 0"),
    "loss": (_is_number, "a number"),
    "wall_time": (_is_seconds, "a finite number of seconds"),
    "pid": (_is_pid, "a process id"),
    "host": (lambda v: isinstance(v, str), "a host name"),
}


def _shown(value: Any) -> str:
    """A stored value for a one-line message: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def checked_status(run_dir: Path) -> dict[str, Any]:
    """:func:`read_status`, with every field the runs table uses type-checked.

    A hand-edited or foreign ``status.json`` must not crash the table: a field of the wrong type
    raises InputError naming the file, the field and the fix (``embedlab runs`` then skips that
    run with a warning). ``null`` counts as absent.
    """
    path = Path(run_dir) / STATUS_FILE
    status = read_status(run_dir)
    if not status and path.exists():
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:  # not damaged: this user may not read it (a shared run)
            raise InputError(f"{path} is unreadable ({exc.strerror or exc}); give your user "
                             "permission to read it") from None
        raise InputError(f"{path} is unreadable (not a JSON object: cut short?); the run's next "
                         "train command rewrites it")
    for key, (ok, must) in _STATUS_FIELDS.items():
        value = status.get(key)
        if value is not None and not ok(value):
            raise InputError(f"{path} is unreadable ({key} is {_shown(value)}, not {must}); "
                             f"fix or remove that field")
    return status


def effective_status(status: dict[str, Any]) -> str:
    """What to show: ``running`` with a dead pid on this host becomes ``failed``."""
    state = str(status.get("status", "unknown"))
    if state != "running":
        return state
    pid, host = status.get("pid"), status.get("host")
    if host not in (None, socket.gethostname()) or not _is_pid(pid):
        return state  # cannot check another machine's processes (nor a pid that is no pid)
    return state if pid_alive(pid) else "failed"


# ---- listing ------------------------------------------------------------------------------


#: a best value: the tag it is logged under, the value, its step
BestPoint = tuple[str, float, int]


@dataclass
class RunInfo:
    """One row of ``embedlab runs``."""

    name: str
    path: Path
    status: str
    step: int | None
    words_seen: int | None
    loss: float | None
    best: str  # "eval/analogy 0.41250 @1200" (the best checkpoint's value and step) or ""
    wall_time: float | None
    hparams: dict[str, Any] = field(default_factory=dict)
    kind: str = WORD2VEC  # "word2vec" or "linreg"
    # the best value, lower is better (an accuracy negated): the order of --sort best
    best_rank: float | None = None
    #: the newest checkpoint's step (by its folder's name, not verified): where a resume
    #: starts; None when the run has none
    saved: int | None = None
    #: ``best`` unrounded: (tag, value, step), None without one
    best_point: BestPoint | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as ``runs --json`` prints it: every stored setting, the best unrounded."""
        best = None if self.best_point is None else dict(
            zip(("metric", "value", "step"), self.best_point, strict=True))
        return {"name": self.name, "path": str(self.path), "kind": self.kind,
                "status": self.status, "step": self.step, "saved": self.saved,
                "words_seen": self.words_seen, "loss": self.loss, "best": best,
                "wall_time": self.wall_time, "hparams": self.hparams}


def no_such_runs_folder(root: Path, command: str) -> InputError:
    """The refusal of a folder of runs that is not there; where it is the default ``runs``,
    the example names another path (``runs/`` would be the very folder that failed)."""
    default = Path(root) == Path("runs")
    example = "path/to/runs" if default else "runs/"
    where = f" in {Path.cwd()}" if default else ""
    return InputError(f"no such folder: {root}{where}; pass the folder that holds your runs "
                      f"(e.g. embedlab {command} {example})")


def _loss_cell(loss: float) -> str:
    """Four decimals, as a loss of 1.9997 must not read "2"; a diverged run's huge loss in
    exponent form, which a fixed-point cell would spell out in 35 digits."""
    return f"{loss:.4f}" if abs(loss) < 1e6 else f"{loss:.4e}"


def find_runs(root: Path) -> list[Path]:
    """Run folders (those holding ``config.json``) at or below ``root``, sorted by path."""
    root = Path(root)
    if not root.exists():
        raise no_such_runs_folder(root, "runs")
    if not root.is_dir():
        raise InputError(f"{root} is not a folder; pass the folder that holds your runs")
    if (root / "config.json").is_file():
        return [root]
    real: dict[str, Path] = {}  # the run's resolved path -> the path it is listed under
    links: list[Path] = []
    # links are not walked into (one to /usr would be searched whole); a link to a run folder
    # (a sweep's folder of links to runs kept elsewhere) is listed, unless the run is listed
    # under its own path or another link to it comes first
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if "config.json" in files and (here / "config.json").is_file():
            real.setdefault(os.path.realpath(here), here)
            dirs[:] = []  # a run's own sub-folders (checkpoints, exports, prepared) hold no runs
            continue
        links += [here / d for d in dirs if (here / d).is_symlink()
                  and (here / d / "config.json").is_file()]
    for link in sorted(links):
        real.setdefault(os.path.realpath(link), link)
    return sorted(real.values())


def _best(rows: list[dict[str, Any]], metric: str,
          index: Index) -> tuple[str, float | None, BestPoint | None]:
    """The "best" cell: the run's best value of ``metric`` (``NAME[:min|max]``) and the step of
    its best checkpoint, e.g. ``train/loss 1.9997 @6420``; and that value as a rank, lower is
    better (negated for a metric to maximise), None without one.

    Both come from the checkpoint index: the best checkpoint is what ``--from best`` and
    ``export --best`` take, and the step of the best logged window may have no checkpoint. A
    run whose index names no best checkpoint for the metric (none saved yet, or the index
    deleted) shows the best logged value and the step it was logged at. Five significant
    digits, as the loss column's four decimals: a loss of 1.9997 must not read "2". Third:
    the same as ``(tag, value, step)``, unrounded, for ``runs --json``.
    """
    name, mode = split_best_metric(metric)
    tags = [name, f"eval/{name}", f"train/{name}"]
    mode = mode or best_direction(name)
    logged = {tag: [(r[tag], r["step"]) for r in rows if _is_number(r.get(tag))] for tag in tags}
    # none logged (the checkpoint evaluated alone): the tag the run logs the metric under
    tag = next((t for t in tags if logged[t]), "train/loss" if name == "loss" else
               name if "/" in name and not name.startswith("similarity/") else f"eval/{name}")
    value = index.best_value
    sign = 1.0 if mode == "min" else -1.0
    if (index.best is not None and index.best_metric == name and index.best_mode == mode
            and value is not None and math.isfinite(value)):
        return f"{tag} {value:#.5g} @{index.best}", sign * value, (tag, value, index.best)
    if not logged[tag]:
        return "", None, None
    value, step = (min if mode == "min" else max)(logged[tag], key=lambda p: p[0])
    return f"{tag} {value:#.5g} @{step}", sign * value, (tag, value, int(step))


def _index(run: Path) -> Index:
    """The run's checkpoint index; a damaged one counts as none (``embedlab ckpt`` says why)."""
    try:
        return read_index(run)
    except CheckpointError:
        return Index()


def _check_text_fields(raw: Any) -> None:
    """Raise ValueError naming a config key whose default is text but whose value is not.

    TrainConfig's checks call str methods on such fields (``best_metric.partition``), which
    would otherwise fail with an AttributeError that names no key.
    """
    if not isinstance(raw, dict):
        return  # from_dict says what is wrong
    stored = flatten(raw)
    for key, default in flatten(TrainConfig().to_dict()).items():
        value = stored.get(key)
        if isinstance(default, str) and value is not None and not isinstance(value, str):
            raise ValueError(f"{key} is {_shown(value)}, not a string")


def run_info(run: Path, root: Path) -> RunInfo:
    """Collect a run's row; raises InputError when its config.json is unreadable."""
    try:
        raw = json.loads((run / "config.json").read_text(encoding="utf-8"))
        if isinstance(raw, dict) and raw.get("model") == LINREG:
            return _linreg_info(run, root, raw)
        if not isinstance(raw, dict) or not all(isinstance(raw.get(k), dict)
                                                for k in ("data", "model", "optim")):
            # another program's run (a config.json of its own) among embedlab's
            raise InputError(f"{run / 'config.json'} is not an embedlab run's (no data, model "
                             "and optim sections): another program's folder needs nothing; "
                             "for a run of embedlab's, restore its config.json from a backup")
        _check_text_fields(raw)
        fill_legacy_keys(raw)  # an older run shows what it trained with, as a resume reads it
        try:
            cfg = TrainConfig.from_dict(raw)
        except InputError as exc:  # a value of the wrong type or range, written by hand
            # the file, and its key as the fix: the flag named inside is train's, not runs'
            raise InputError(f"{run / 'config.json'} holds a value embedlab cannot use ({exc});"
                             " fix that key in the file") from None
    except InputError:  # the checks above name the key and the fix in their own words
        raise
    # AttributeError: a field of the wrong type (best_metric 5) met a str method in the config's
    # checks; RecursionError: absurdly nested JSON
    except OSError as exc:  # not damaged: this user may not read it (a shared run, say)
        raise InputError(f"{run / 'config.json'} is unreadable ({exc.strerror or exc}); give "
                         "your user permission to read it") from exc
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise InputError(f"{run / 'config.json'} is unreadable ({exc}); "
                         "fix or remove that run folder") from exc
    try:
        status = checked_status(run)
    except InputError as exc:  # the run is listed all the same, its state unknown
        warn(f"{exc}; listing {run} with status unknown")
        status = {}
    rows = read_metrics(run / METRICS_FILE)
    losses = [r for r in rows if _is_number(r.get("train/loss"))]
    loss = status.get("loss")
    # the loss of the step the table shows: metrics.jsonl's row of status.json's step (the last
    # row when status.json has none), else status.json's own, where metrics.jsonl is behind it
    # (cut short) or ahead (status.json is written less often; a killed run's)
    step = status.get("step")
    if losses and (not _is_count(step) or not _is_number(loss)):
        loss = losses[-1]["train/loss"]
    elif losses:
        at = [r["train/loss"] for r in losses if r.get("step") == step]
        loss = at[-1] if at else loss
    name = str(run.relative_to(root)) if run != root else run.name
    best, rank, point = _best(rows, cfg.checkpoint.best_metric, _index(run))
    return RunInfo(
        name=name, path=run, status=_held(run, effective_status(status)),
        step=status.get("step"), words_seen=status.get("words_seen"),
        loss=loss if _is_number(loss) else None,
        best=best, best_rank=rank, best_point=point,
        wall_time=status.get("wall_time"), hparams=_hparams(cfg, run), saved=_newest_saved(run),
    )


def _newest_saved(run: Path) -> int | None:
    """The step of the run's newest committed checkpoint folder (named, not hashed: the table
    stays fast), None without one."""
    from embedlab.checkpoint.format import CKPT_DIR, committed_folders

    try:
        steps = committed_folders(run / CKPT_DIR)
    except OSError:
        return None
    return max(steps) if steps else None


def _held(run: Path, state: str) -> str:
    """``running`` only while the run's lock file names a live process (the trainer writes it
    before its ``running`` status and removes it after its last status): a status whose
    process ended without its last word and without its lock file (or whose lock names a dead
    process, or one that no longer holds it) shows ``failed``."""
    if state != "running":
        return state
    return _lock_status(run) or "failed"


def _lock_status(run: Path) -> str | None:
    """``running`` while a process of this host holds the run's lock (its ``flock``, which
    only a live holder keeps: a killed trainer's pid taken by another process is told apart),
    or while the lock names a process on another host; ``failed`` otherwise; None without a
    lock."""
    from embedlab.run.lock import RunLock

    lock = read_lock(run)  # held while a process trains; left behind only by a killed one
    if lock is None:
        return None
    if lock.get("host") in (None, socket.gethostname()):
        return "running" if RunLock.held_by(run) is not None else "failed"
    return effective_status({"status": "running", "pid": lock.get("pid"),
                             "host": lock.get("host")})


def _hparams(cfg: TrainConfig, run: Path) -> dict[str, Any]:
    """The run's flattened settings as the table compares them: without those its loss does not
    read, with its paths named from here as the same file or folder is for every run (a
    resume from another folder writes the absolute path of a corpus typed as relative)."""
    from embedlab.run.folder import PATH_KEYS, paths_from_creation

    flat = paths_from_creation(flatten(cfg.to_dict()), run)
    for key in PATH_KEYS:
        value = flat.get(key)
        if isinstance(value, str) and os.path.isabs(value):
            shown = os.path.relpath(value)
            flat[key] = value if shown.startswith("..") else shown
    return flat


def _linreg_info(run: Path, root: Path, raw: dict[str, Any]) -> RunInfo:
    index = read_index(run)
    rows = read_metrics(run / METRICS_FILE)
    step = index.latest  # metrics.jsonl may lag it by one save (a kill in between)
    if step is None and rows:
        step = rows[-1]["step"]
    losses = [r["loss"] for r in rows if r["step"] == step and _is_number(r.get("loss"))]
    status = _lock_status(run)
    if status is None:
        steps = raw.get("steps")
        status = "unknown" if step is None else \
            "finished" if isinstance(steps, int) and step >= steps else "interrupted"
    hparams = {f"{LINREG}.{k}": v for k, v in raw.items() if k not in ("model", "table_sha256")}
    if isinstance(raw.get("table_sha256"), str):  # which table: a prefix tells tables apart
        hparams[f"{LINREG}.table_sha256"] = raw["table_sha256"][:12]
    metric = f"{index.best_metric}:{index.best_mode}" if index.best_metric else "loss:min"
    best, rank, point = _best(rows, metric, index)
    return RunInfo(
        name=str(run.relative_to(root)) if run != root else run.name, path=run, status=status,
        step=step, words_seen=None, loss=losses[-1] if losses else None,
        best=best, best_rank=rank, wall_time=None, hparams=hparams, kind=LINREG,
        saved=_newest_saved(run), best_point=point)


def changes_result(key: str) -> bool:
    """False for per-invocation settings (``max_steps``, threads, checkpoint, logging and
    evaluation flags): those a resume may change, since the trained numbers do not depend on
    them. ``optim.epochs`` may be raised on resume but does change the result."""
    return not key.startswith(MUTABLE_ON_RESUME) and key not in _LINREG_SETTINGS


def differing_keys(infos: Sequence[RunInfo]) -> list[str]:
    """Hyperparameter keys whose values differ between the listed runs that have them.

    Per-invocation settings (:func:`changes_result`) are not hyperparameters. A key of one kind
    of run (``optim.lr``, ``linreg.lr``) is compared among the runs of that kind only, and one
    that a run's training does not read (the noise words' of ``--loss hs``) among the runs that
    read it: its value would look like a difference that changed nothing.
    """
    used = [without_unused(i.hparams) for i in infos]
    keys = sorted({k for u in used for k in u if changes_result(k)})
    return [k for k in keys if len({json.dumps(u[k]) for u in used if k in u}) > 1]


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = max(0, int(seconds))  # a clock set back during the run can make it negative
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def format_count(n: int | None) -> str:
    if n is None:
        return ""
    # a count that rounds up to the next unit is shown in it: 999,999 reads 1.0M, not 1000.0k
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size * (1 - 5e-5):
            return f"{n / size:.1f}{unit}"
    return str(n)


MAX_INLINE_HPARAMS = 6  # more differing keys than this go to a separate, transposed table


def _settings(info: RunInfo, all_hparams: bool) -> dict[str, Any]:
    """The settings of ``info`` the table shows: every stored one with ``--all``, else those its
    training reads (an hs run's noise settings are left blank beside runs that use theirs)."""
    return info.hparams if all_hparams else without_unused(info.hparams)


def _hparam_cell(v: Any) -> str:
    return "" if v is None else str(v)


#: the columns ``embedlab runs --sort`` takes besides the hyperparameters' keys
SORT_COLUMNS = ("run", "status", "step", "saved", "words", "loss", "best", "wall")
#: ``runs --json``'s names of those columns, taken by ``--sort`` as well
SORT_ALIASES = {"name": "run", "words_seen": "words", "wall_time": "wall"}
#: runs side by side in one hyperparameters table: more are split over several tables
RUNS_PER_TABLE = 6


def check_sort_key(infos: Sequence[RunInfo], key: str) -> None:
    """Refuse a ``--sort`` key that is no column and no hyperparameter of ``infos``."""
    if key not in SORT_COLUMNS and key not in SORT_ALIASES and not any(
            key in i.hparams for i in infos):
        keys = sorted({k for i in infos for k in i.hparams})
        example = next((k for k in differing_keys(infos)), keys[0] if keys else "optim.lr")
        raise InputError(f"--sort {key}: no such column or hyperparameter; pass one of "
                         f"{', '.join(SORT_COLUMNS)}, or a key such as {example}")


def sort_runs(infos: Sequence[RunInfo], key: str, *, reverse: bool = False) -> list[RunInfo]:
    """``infos`` ordered by a column of the table (:data:`SORT_COLUMNS`) or a hyperparameter's
    key (``optim.lr``); ``best`` puts the best first, each run's value in its metric's own
    direction (a loss low, an accuracy high). Runs without a value, or with one that is not a
    finite number (a diverged loss), come last, in their order."""
    check_sort_key(infos, key)
    key = SORT_ALIASES.get(key, key)

    def value(i: RunInfo) -> Any:
        columns = {"run": i.name, "status": i.status, "step": i.step, "saved": i.saved,
                   "words": i.words_seen,
                   "loss": i.loss, "best": i.best_rank, "wall": i.wall_time}
        v = columns[key] if key in SORT_COLUMNS else i.hparams.get(key)
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v if v is None or isinstance(v, (int, float, str)) else json.dumps(v)

    present = [i for i in infos if value(i) is not None]
    # numbers before text, each in its own order (a key may hold both across kinds of run)
    ordered = sorted(present, key=lambda i: (isinstance(value(i), str), value(i)),
                     reverse=reverse)
    return ordered + [i for i in infos if value(i) is None]


def runs_tables(infos: Sequence[RunInfo], *, all_hparams: bool = False) -> list[Any]:
    """:class:`rich.table.Table` objects to print: the runs, then (if needed) hyperparameters.

    Differing hyperparameters become extra columns of the runs table while they fit
    (:data:`MAX_INLINE_HPARAMS`); with ``all_hparams`` or more keys they go to further tables
    with one row per key and one column per run, :data:`RUNS_PER_TABLE` runs a table so that
    the cells stay readable, each table readable for ~45 keys.
    """
    from rich.table import Table

    keys = sorted({k for i in infos for k in i.hparams}) if all_hparams else differing_keys(infos)
    inline = keys if len(keys) <= MAX_INLINE_HPARAMS and not all_hparams else []
    kinds = any(i.kind != WORD2VEC for i in infos)  # a column only when not all are word2vec
    runs = Table(title=None)
    for col in ("run", *(("kind",) if kinds else ()), "status", "step", "saved", "words", "loss",
                "best", "wall"):
        runs.add_column(col, justify="right" if col in ("step", "saved", "words", "loss", "wall")
                        else "left")
    for k in inline:
        runs.add_column(k)
    for i in infos:
        cells = [i.name, *((i.kind,) if kinds else ()), i.status,
                 "" if i.step is None else str(i.step), "-" if i.saved is None else str(i.saved),
                 format_count(i.words_seen), "" if i.loss is None else _loss_cell(i.loss),
                 i.best, format_duration(i.wall_time)]
        runs.add_row(*cells, *(_hparam_cell(_settings(i, all_hparams).get(k)) for k in inline))
    tables = [runs]
    if keys and not inline:
        title = "hyperparameters" if all_hparams else "differing hyperparameters"
        for start in range(0, len(infos), RUNS_PER_TABLE):
            group = infos[start:start + RUNS_PER_TABLE]
            part = (f" (runs {start + 1}–{start + len(group)} of {len(infos)})"
                    if len(infos) > RUNS_PER_TABLE else "")
            hp = Table(title=title + part)
            hp.add_column("key")
            for i in group:
                hp.add_column(i.name)
            for k in keys:
                hp.add_row(k, *(_hparam_cell(_settings(i, all_hparams).get(k)) for i in group))
            tables.append(hp)
    return tables
