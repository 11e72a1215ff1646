"""``RUN/metrics.jsonl``: every scalar a run reports, one JSON object per line.

Each call is a line ``{"step": N, "<tag>": value, ...}``; the final metrics of a run are a line
of ``final/<name>`` tags at its last step. On resume from step ``S`` the file is rewritten
atomically keeping the lines with ``step <= S``, so curves continue without duplicates.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from embedlab.fsutil import atomic_write_text, name_disk_error, name_stamp

METRICS_FILE = "metrics.jsonl"
FINAL_PREFIX = "final/"


def final_metric_tag(name: str) -> str:
    """Tag under which a final metric is written (and which the hparams table shows)."""
    return f"{FINAL_PREFIX}{name}"


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Parse ``metrics.jsonl``; a torn last line (a SIGKILL mid-write) or junk lines are skipped."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
    return rows


def truncate_metrics(path: Path, resume_step: int) -> None:
    """Keep only rows with ``step <= resume_step`` (atomic rewrite; a missing file stays so).

    The ``final/*`` row of ``resume_step`` goes too: training goes on from there (a finished
    run given more --epochs), so the end of the run moves, and the new end writes its own.
    """
    if not path.exists():
        return
    bad = _bad_line_numbers(path, resume_step)
    if bad:  # the rewrite drops them: the file as it was is kept beside it, and said
        import shutil

        from embedlab.errors import warn

        stamp = name_stamp()
        copy, n = path.with_name(f"{path.name}.damaged-{stamp}"), 1
        while copy.exists():  # one per resume that found damage, in the same second too
            n += 1
            copy = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        shutil.copyfile(path, copy)  # byte for byte
        warn(f"{path} has {len(bad)} line(s) that are not metrics rows (the first is line "
             f"{bad[0]}); the rewrite at this resume drops them, and the file as it was is "
             f"kept in {copy}")
    kept = [r for r in read_metrics(path)
            if r["step"] < resume_step or (r["step"] == resume_step and not _is_final_row(r))]
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def _bad_line_numbers(path: Path, resume_step: int) -> list[int]:
    """The lines of ``path`` that are no metrics row, a last line without its newline apart
    where it is a row after ``resume_step`` (torn by a kill mid-write: dropped without a word;
    a row of the resumed checkpoint's steps was complete before the checkpoint, so its tear is
    damage done since)."""
    bad = []
    with path.open(encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        if number == len(lines) and not line.endswith("\n"):
            step = _TORN_STEP.match(line)
            if step is not None and int(step.group(1)) <= resume_step:
                bad.append(number)
            break
        if not line.strip():  # a blank line holds nothing to lose
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad.append(number)
            continue
        if not (isinstance(row, dict) and isinstance(row.get("step"), int)):
            bad.append(number)
    return bad


#: the step at the start of a row, read from a row cut short
_TORN_STEP = re.compile(r'\{"step": (\d+)[,}]')


def _is_final_row(row: Mapping[str, Any]) -> bool:
    keys = [k for k in row if k != "step"]
    return bool(keys) and all(k.startswith(FINAL_PREFIX) for k in keys)


def _json_number(v: float) -> float | str:
    # JSON has no NaN/inf; keep the information as a string rather than writing invalid JSON.
    f = float(v)
    return f if math.isfinite(f) else str(f)


class JsonlSink:
    """Appends one JSON object per scalar call to ``RUN/metrics.jsonl`` (line-buffered)."""

    def __init__(self, run_dir: Path) -> None:
        self._path = run_dir / METRICS_FILE
        self._f = self._path.open("a", encoding="utf-8")

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        row: dict[str, Any] = {"step": int(step)}
        row.update({k: _json_number(v) for k, v in values.items()})
        try:
            self._f.write(json.dumps(row) + "\n")
            self._f.flush()
        except OSError as exc:  # a full disk: said with the file's name
            name_disk_error(exc, self._path)
            raise

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray, *,
                       projector: bool = False) -> None:
        return None

    def log_final(self, step: int, w_in: np.ndarray, hparams: Mapping[str, Any],
                  metrics: Mapping[str, float]) -> None:
        if metrics:
            self.log_scalars(step, {final_metric_tag(k): v for k, v in metrics.items()})

    def close(self) -> None:
        self._f.close()
