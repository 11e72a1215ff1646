"""The run's ``checkpoint`` index: which checkpoint folders are ours, and in which roles.

A human-readable text file (like TensorFlow's), rewritten atomically after each save::

    latest: ckpt-00012000
    kept: ckpt-00012000
    best: ckpt-00008000 loss=0.41 (min)
    archive: ckpt-00010000

Retention deletes only folders that the index lists; deleting the file is always safe (the
next save rebuilds it from the checkpoint folders).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from embedlab.checkpoint.format import CheckpointError, ckpt_name, parse_step
from embedlab.fsutil import read_record

INDEX_FILE = "checkpoint"

Role = Literal["latest", "kept", "best", "archive"]


@dataclass(frozen=True)
class Index:
    """The parsed ``RUN/checkpoint`` file (steps, not names)."""

    latest: int | None = None
    kept: tuple[int, ...] = ()
    archive: tuple[int, ...] = ()
    best: int | None = None
    best_metric: str | None = None
    best_value: float | None = None
    best_mode: str | None = None

    def ours(self) -> set[int]:
        steps = set(self.kept) | set(self.archive)
        steps |= {s for s in (self.latest, self.best) if s is not None}
        return steps

    def roles(self, step: int) -> tuple[Role, ...]:
        out: list[Role] = []
        if step == self.latest:
            out.append("latest")
        if step in self.kept:
            out.append("kept")
        if step == self.best:
            out.append("best")
        if step in self.archive:
            out.append("archive")
        return tuple(out)

    def render(self) -> str:
        lines = ["# embedlab checkpoint index: rewritten atomically after each save.",
                 "# Roles: latest (resume point), kept (--keep), best, archive (--keep-every)."]
        if self.latest is not None:
            lines.append(f"latest: {ckpt_name(self.latest)}")
        lines += [f"kept: {ckpt_name(s)}" for s in sorted(self.kept, reverse=True)]
        if self.best is not None:
            lines.append(f"best: {ckpt_name(self.best)} {self.best_metric}={self.best_value!r} "
                         f"({self.best_mode})")
        lines += [f"archive: {ckpt_name(s)}" for s in sorted(self.archive)]
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str) -> Index:
        latest: int | None = None
        best: int | None = None
        metric = mode = None
        value: float | None = None
        kept: list[int] = []
        archive: list[int] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            role, _, rest = line.partition(":")
            fields = rest.split()
            step = parse_step(fields[0]) if fields else None
            if step is None:
                continue  # tolerate hand edits: an unparsable line names nothing of ours
            if role == "latest":
                latest = step
            elif role == "kept":
                kept.append(step)
            elif role == "archive":
                archive.append(step)
            elif role == "best":
                best = step
                # "NAME=VALUE (MODE)": NAME may hold "=" and spaces (similarity/a=b, the stem of
                # "word sim.tsv"); the value and the mode never do
                described = rest.split(maxsplit=1)[1] if len(fields) > 1 else ""
                pair, _, tail = described.rpartition(" (") if described.endswith(")") else \
                    (described, "", "")
                if "=" in pair:
                    metric, _, v = pair.rpartition("=")
                    with contextlib.suppress(ValueError):
                        value = float(v)
                if tail:
                    mode = tail.strip("()")
        return cls(latest, tuple(kept), tuple(archive), best, metric, value, mode)


def read_index(run_dir: Path) -> Index:
    """The run's index (empty when there is none); :class:`CheckpointError` when unreadable.

    Lines that name no checkpoint are skipped (hand edits), so only bytes that are not UTF-8
    text or a file that cannot be opened are refused. Deleting the file is always a fix: the
    next save rebuilds it from the checkpoint folders (see :meth:`CheckpointManager.save`).
    """
    path = Path(run_dir) / INDEX_FILE
    try:
        return Index.parse(read_record(path).decode("utf-8"))
    except FileNotFoundError:
        return Index()
    except UnicodeDecodeError:
        raise CheckpointError(f"{path} is damaged (not UTF-8 text); delete it (it is rebuilt "
                              "from the checkpoint folders at the next save)") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read {path} ({exc.strerror or exc}); fix its "
                              "permissions or delete it (it is rebuilt at the next save)") from None
