"""Run status (``RUN/status.json``): what a run is doing, for `embedlab runs` and for people.

``status.json`` is rewritten atomically (temp file + fsync + rename), so a reader sees the old or
the new status, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from embedlab.fsutil import atomic_write_text, read_record

STATUS_FILE = "status.json"
STATUSES = ("running", "finished", "interrupted", "failed")


def write_status(run_dir: Path, *, clear: Iterable[str] = (), durable: bool = True,
                 **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into ``RUN/status.json`` (atomically) and return the new status.

    ``durable``: fsynced (see :func:`embedlab.fsutil.atomic_open`); the progress written at
    every log window is not, as an fsync costs milliseconds a window and a progress report lost
    to a power cut costs nothing (the next one, or the checkpoint, says where the run stands).

    ``updated`` (unix seconds) and ``host`` are filled in on every write; ``status`` must be one
    of :data:`STATUSES` when given. ``clear``: fields to remove (a new attempt drops the
    ``error`` of a failed one). An unreadable old file is replaced, not merged.
    """
    if "status" in fields and fields["status"] not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {fields['status']!r}")
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    for key in clear:
        status.pop(key, None)
    status.update(fields)
    status["updated"] = time.time()
    status.setdefault("host", socket.gethostname())
    atomic_write_text(run_dir / STATUS_FILE, json.dumps(status, indent=1, sort_keys=True) + "\n",
                      durable=durable)
    return status


def note_status(run_dir: Path, **fields: Any) -> None:
    """:func:`write_status` where another error is already on its way to the user: a status
    that cannot be written (the disk that failed the save is full) must not replace that error,
    which names the problem and its fix, with its own."""
    with contextlib.suppress(OSError):
        write_status(run_dir, **fields)


def read_status(run_dir: Path) -> dict[str, Any]:
    """The stored status dict; ``{}`` when the file is missing or unreadable."""
    try:
        # a regular file only: a FIFO there (a run folder from someone else) blocks for ever
        data = json.loads(read_record(Path(run_dir) / STATUS_FILE).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}
