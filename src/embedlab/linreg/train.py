"""Linear regression on a two-column table: the second model that proves the experiment core.

The lecture's first TensorFlow example: life expectancy ``y`` from birth rate ``x``, fitted as
``y ≈ w·x + b`` by minibatch SGD on the squared error. It uses, unchanged, what word2vec uses:
counter-based seeding (:mod:`embedlab.seeding`), the checkpoint manager
(:mod:`embedlab.checkpoint`), the run lock (:mod:`embedlab.run.lock`), the signal
flag (:mod:`embedlab.run.signals`), :mod:`embedlab.run.provenance` and the metrics sink
(:mod:`embedlab.track.jsonl`). Unlike a word2vec run it keeps no ``status.json``: `embedlab runs`
reads its state from the checkpoints.

Exact resume: the batch of step ``s`` is a pure function of ``(seed, s)`` (epoch
``s // steps_per_epoch`` is a permutation drawn from the ``shuffle`` stream), so the checkpoint
state is just ``w``, ``b`` and the step; a resumed run is bit-for-bit identical to an
uninterrupted one.

Table format: UTF-8, tab-separated, one header line; ``x`` is the second-to-last column and
``y`` the last (so the lecture's ``Country<TAB>Birth rate<TAB>Life expectancy`` works as is).
"""

from __future__ import annotations

import hashlib
import math
import sys
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.checkpoint import CheckpointManager, ckpt_name, load_checkpoint
from embedlab.errors import InputError, diverged, import_torch, printable
from embedlab.fsutil import missing_folders, remove_all_but, remove_empty_folders, write_error
from embedlab.linreg.config import LINREG_FIXED_ON_RESUME, LINREG_MODEL, LinRegConfig
from embedlab.run import provenance
from embedlab.run.folder import check_run_dir
from embedlab.run.lock import LOCK_FILE, RunLock
from embedlab.run.signals import SignalFlag, interrupted
from embedlab.seeding import numpy_rng, torch_generator
from embedlab.track.jsonl import METRICS_FILE, JsonlSink, truncate_metrics

if TYPE_CHECKING:
    import torch
else:  # PyTorch is optional: without it, `embedlab linreg` is one line naming the extra
    torch = import_torch("embedlab linreg")

STREAMS = ("init", "shuffle")
MODEL = LINREG_MODEL
FIXED_ON_RESUME = LINREG_FIXED_ON_RESUME


@dataclass(frozen=True)
class Table:
    x: torch.Tensor  # (N,) float32
    y: torch.Tensor  # (N,) float32
    sha256: str


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def read_table(path: Path | str) -> Table:
    """Parse a tab-separated table with a header; errors name the line and the fix."""
    p = Path(path)
    try:
        raw = p.read_bytes()
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"table {p} does not exist; pass a tab-separated file "
                         "(header line, then rows ending in x<TAB>y)") from None
    except IsADirectoryError:
        raise InputError(f"table {p} is a folder; pass a tab-separated file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"table {p} is not UTF-8 text (byte {exc.start}); "
                         "save it as UTF-8") from None
    lines = text.splitlines()
    header = lines[0].split("\t") if lines else []
    if len(header) >= 2 and all(_is_number(f) for f in header[-2:]):
        # a row taken for the header would be dropped without a word; a header may name its
        # columns by number (years), so said, not refused
        from embedlab.errors import warn

        warn(f"{p}:1 is read as the table's header, but its last two columns are numbers; if "
             "it is a row of x and y, add a header line (e.g. x<TAB>y) above it")
    xs: list[float] = []
    ys: list[float] = []
    first: tuple[int, int] | None = None  # (line, columns) of the first row
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise InputError(f"{p}:{lineno}: expected at least 2 tab-separated columns, found "
                             f"{len(fields)}; separate columns with tabs")
        first = first or (lineno, len(fields))
        if len(fields) != first[1]:
            # x and y are the last two fields: a row with one more or fewer is read shifted
            raise InputError(f"{p}:{lineno}: {len(fields)} tab-separated columns, but the first "
                             f"row (line {first[0]}) has {first[1]}; give every row the same "
                             "columns (the last two are x and y)")
        if fields[-1] == "" and fields[-2] != "":
            raise InputError(f"{p}:{lineno}: the row ends in a tab, so its last column (y) is "
                             "empty; remove the trailing tabs")
        try:
            x, y = float(fields[-2]), float(fields[-1])
        except ValueError:
            raise InputError(f"{p}:{lineno}: {fields[-2]!r} / {fields[-1]!r} is not a number; "
                             "the last two columns must be numeric (x, y)") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise InputError(f"{p}:{lineno}: values must be finite; fix or remove the row")
        if max(abs(x), abs(y)) > _FLOAT32_MAX:  # the model computes in float32: inf there
            raise InputError(f"{p}:{lineno}: {max(abs(x), abs(y)):g} is beyond float32's range "
                             "(3.4e38), in which the model computes; rescale that column")
        xs.append(x)
        ys.append(y)
    if len(xs) < 2:
        rows = "1 data row" if len(xs) == 1 else f"{len(xs)} data rows"
        raise InputError(f"table {p} has {rows}; it needs a header line and at "
                         "least 2 rows of x<TAB>y")
    return Table(torch.tensor(xs, dtype=torch.float32), torch.tensor(ys, dtype=torch.float32),
                 hashlib.sha256(raw).hexdigest())


def batch_indices(seed: int, n: int, batch_size: int, step: int) -> np.ndarray:
    """Row indices of the minibatch for update ``step`` (0-based): a pure function.

    Each epoch is a fresh permutation of the rows; the last batch of an epoch may be short.
    """
    per_epoch = -(-n // batch_size)
    epoch, k = divmod(step, per_epoch)
    perm = numpy_rng(seed, "shuffle", epoch).permutation(n)
    return perm[k * batch_size:(k + 1) * batch_size]


def init_params(seed: int) -> dict[str, torch.Tensor]:
    g = torch_generator(seed, "init")
    return {"w": torch.randn(1, generator=g) * 0.01, "b": torch.zeros(1)}


def sgd_step(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
             lr: float) -> dict[str, torch.Tensor]:
    """One update on the mean squared error ``mean((w·x + b - y)^2)`` (gradient by hand)."""
    err = params["w"] * x + params["b"] - y  # (B,)
    grad_w = 2.0 * (err * x).mean()
    grad_b = 2.0 * err.mean()
    return {"w": params["w"] - lr * grad_w, "b": params["b"] - lr * grad_b}


def mse(params: dict[str, torch.Tensor], table: Table) -> float:
    return float(((params["w"] * table.x + params["b"] - table.y) ** 2).mean())


@dataclass(frozen=True)
class LinRegResult:
    w: float
    b: float
    loss: float  # mean squared error on the whole table
    step: int
    resumed_from: int | None
    checkpoint: Path


def train_linreg(table_path: Path | str, run_dir: Path | str, cfg: LinRegConfig, *,
                 argv: Sequence[str], max_steps: int | None = None) -> LinRegResult:
    """Train (or resume) until ``cfg.steps`` or ``max_steps`` updates; checkpoint on the way.

    Raises :class:`~embedlab.errors.TrainingInterrupted` (exit 130/143) after saving when
    SIGINT/SIGTERM arrives.
    """
    if max_steps is not None and max_steps < 1:
        raise InputError(f"--max-steps must be >= 1, got {max_steps}; pass e.g. --max-steps "
                         f"{min(cfg.steps, 500)}, or leave it out to train --steps")
    run = Path(run_dir)
    table = read_table(table_path)
    check_run_dir(run)  # a file, or a folder of someone else's files, as train refuses them
    made = missing_folders(run)  # made[0] is the run folder when this call creates it
    try:
        lock = RunLock(run, argv=list(argv))
        try:
            lock.acquire()
        except BaseException:  # another process's run, or none made: only empty folders go
            remove_empty_folders(made)
            raise
        discard: list[Path] = []  # the new run's folders, removed once the lock is released
        try:
            with SignalFlag() as flag:
                manager = CheckpointManager(run, keep=cfg.keep, best_metric="loss",
                                            best_mode="min")
                stop = min(cfg.steps, max_steps) if max_steps is not None else cfg.steps
                params, step, resumed = _start(run, cfg, table, manager, argv, stop)
                if step >= stop and stop == max_steps:
                    print(f"embedlab: {run} is at step {step} already, not before --max-steps "
                          f"{stop}; nothing to train (re-run without --max-steps, or with a "
                          "larger value, to continue)", file=sys.stderr)
                elif step >= stop:
                    print(f"embedlab: {run} is at step {step}, at or past --steps {stop}; nothing "
                          "to train (a larger --steps trains it further)", file=sys.stderr)
                params, step, path = _train_steps(manager, flag, params, step, stop, table, cfg)
        except BaseException:
            # a new run refused or stopped before its first checkpoint (diverged, say) leaves
            # no folder, so the corrected command starts it afresh; emptied while the lock is
            # held, so no other process can have started in it, all but the lock file, and
            # removed once the lock is released
            if made and not any((made[0] / "checkpoints").glob("ckpt-*")):
                remove_all_but(made[0], LOCK_FILE)
                discard.extend(made)
            raise
        finally:
            lock.release()
            remove_empty_folders(discard)
    except OSError as exc:
        # The run lock, config.json/env.json and metrics.jsonl are plain files in the run
        # folder (checkpoint saves report their own CheckpointError): a folder that cannot be
        # created or written (read-only, under a regular file, disk full) is the user's.
        raise write_error(run, exc, "--run") from None
    return LinRegResult(float(params["w"]), float(params["b"]), mse(params, table), step,
                        resumed, path)


def _train_steps(manager: CheckpointManager, flag: SignalFlag, params: dict[str, torch.Tensor],
                 step: int, stop: int, table: Table, cfg: LinRegConfig
                 ) -> tuple[dict[str, torch.Tensor], int, Path]:
    """SGD updates from ``step`` to ``stop``: a checkpoint every ``checkpoint_every`` steps or
    ``checkpoint_secs`` seconds, whichever comes first, at a signal (then
    :class:`~embedlab.errors.TrainingInterrupted`) and at the end. Returns the parameters, the
    step and the checkpoint of that step."""
    last_save, saved_at = time.monotonic(), step
    n = len(table.x)
    while step < stop:
        idx = torch.from_numpy(batch_indices(cfg.seed, n, cfg.batch_size, step))
        params = sgd_step(params, table.x[idx], table.y[idx], cfg.lr)
        step += 1
        if not _finite(params):
            raise _diverged(step, mse(params, table), cfg, saved_at)
        due = step % cfg.checkpoint_every == 0
        due = due or time.monotonic() - last_save >= cfg.checkpoint_secs
        if flag or due:
            _save(manager, params, step, table, cfg, saved_at)
            last_save, saved_at = time.monotonic(), step
        if flag.signum is not None:
            raise interrupted(flag.signum, step)
    if saved_at != step:  # the final checkpoint
        return params, step, _save(manager, params, step, table, cfg, saved_at)
    return params, step, manager.root / ckpt_name(step)


def _start(run: Path, cfg: LinRegConfig, table: Table, manager: CheckpointManager,
           argv: Sequence[str], stop: int) -> tuple[dict[str, torch.Tensor], int, int | None]:
    """Fresh parameters, or the newest verified checkpoint's (after checking the config). A
    resume already at ``stop`` trains nothing and leaves config.json and env.json as they are
    (a smaller --steps recorded by it would cap the next command's --max-steps)."""
    stored = provenance.read_config_json(run)
    requested = {"model": MODEL, **asdict(cfg), "table_sha256": table.sha256}
    if stored is not None and stored.get("model") != MODEL:
        raise _not_linreg(run, stored)
    # a folder with a config but no checkpoint trained nothing: other settings start it afresh,
    # without the rows an earlier attempt logged
    fresh = not manager.list(check=False)
    if stored is not None and not fresh:
        _check_resume(run, stored, requested)
    if fresh:
        (run / METRICS_FILE).unlink(missing_ok=True)
    latest = _resume_point(run, manager)
    manager.check_index()  # a damaged index is refused before anything of the run is written
    # loaded (and its state checked) before config.json and env.json are rewritten: a damaged
    # checkpoint must leave the run as it was
    loaded = load_checkpoint(latest, names=["w", "b"], framework="pt") if latest is not None \
        else None
    if loaded is None or int(loaded[1]["step"]) < stop:
        provenance.write_config_json(run, requested)
        provenance.write_env_json(run, argv=argv, threads=torch.get_num_threads(),
                                  seed=cfg.seed, streams=STREAMS)
    manager.remove_stale_tmp()  # a save killed mid-way leaves one; we hold the lock
    if loaded is None:
        return init_params(cfg.seed), 0, None
    tensors, state = loaded
    step = int(state["step"])
    print(printable(f"embedlab: resuming {run} from {ckpt_name(step)} (step {step})"),
          file=sys.stderr)
    manager.protect(step)
    # metric lines past the resumed step are work lost with the interrupted process
    truncate_metrics(run / METRICS_FILE, step)
    return tensors, step, step


def _resume_point(run: Path, manager: CheckpointManager) -> Path | None:
    """The newest verified checkpoint; None for a run without checkpoints.

    A run whose checkpoints all fail verification is refused rather than started over, which
    would overwrite the evidence and mix two runs' histories.
    """
    latest = manager.latest()  # warns about each damaged one it skips
    if latest is None and manager.list(check=False):
        raise InputError(f"no verified checkpoint in {run}; every checkpoint is incomplete or "
                         "corrupted - use a new --run (or restore the folder from a backup)")
    return latest


def _not_linreg(run: Path, stored: dict[str, Any]) -> InputError:
    """The refusal of a run folder another model made (a word2vec run's model is a dict)."""
    model = stored.get("model")
    what = "a word2vec run" if isinstance(model, dict) else \
        f"not a linreg run (its config.json names model {model!r})"
    return InputError(f"{run} is {what}; pass another --run folder for linreg")


def _check_resume(run: Path, stored: dict[str, Any], requested: dict[str, Any]) -> None:
    if stored.get("model") != MODEL:
        raise _not_linreg(run, stored)
    if stored.get("table_sha256") != requested["table_sha256"]:
        raise InputError(f"the table differs from the one {run} was trained on; pass the "
                         "original table or use a new --run folder")
    bad = [f"--{k.replace('_', '-')} (stored {stored.get(k)!r}, requested {requested[k]!r})"
           for k in FIXED_ON_RESUME if stored.get(k) != requested[k]]
    if bad:
        raise InputError(f"cannot resume {run} with different settings: {', '.join(bad)}; "
                         "drop those flags or use a new --run folder")


def _finite(params: dict[str, torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in params.values())


def _diverged(step: int, loss: float, cfg: LinRegConfig, saved_step: int) -> InputError:
    # the learning rate is fixed for the run's lifetime (FIXED_ON_RESUME): a run with a
    # checkpoint starts over in a new --run; a new one is removed, so the same --run will do
    where = "in a new --run folder" if saved_step else "(the same --run: nothing was kept)"
    return diverged(step, loss, saved_step, f"Start over with a lower learning rate {where}, "
                    f"e.g. --lr {cfg.lr / 10:g} or lower")


def _save(manager: CheckpointManager, params: dict[str, torch.Tensor], step: int, table: Table,
          cfg: LinRegConfig, saved_step: int) -> Path:
    loss = mse(params, table)
    if not math.isfinite(loss):  # finite w and b can still overflow the float32 squared error
        raise _diverged(step, loss, cfg, saved_step)
    # The line of step S is written before checkpoint S is committed, as the trainer does: a
    # kill in between leaves a line past the newest checkpoint, which the resume drops, and
    # never a checkpoint without its line.
    with closing(JsonlSink(manager.run_dir)) as metrics:
        metrics.log_scalars(step, {"loss": loss})
    return manager.save(step, params, {"model": MODEL, "cursor": step}, {"loss": loss})
