"""Atomic, no-clobber file writes.

A reader never sees a half-written export: data goes to a temporary file in the destination's
folder (same filesystem, so the final rename is atomic), is flushed and fsynced, then renamed
over the destination. An existing destination is refused unless ``force`` is set, so an export
never silently replaces something the user saved.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from embedlab.errors import InputError


def check_writable(path: Path, *, force: bool) -> None:
    """Raise :class:`InputError` if ``path`` cannot be (over)written; creates nothing."""
    if path.is_dir():
        raise InputError(f"--out {path} is a folder; pass a file path, "
                         f"e.g. --out {path}/vectors.txt")
    if path.exists() and not force:
        raise InputError(f"{path} already exists; pass --force to overwrite it "
                         "or choose another --out")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"folder {parent} does not exist; create it first (mkdir -p {parent})")


@contextlib.contextmanager
def atomic_open(path: Path) -> Iterator[IO[bytes]]:
    """Open a temporary file beside ``path`` for binary writing; rename it into place on success.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(parent)


def _fsync_dir(folder: Path) -> None:
    # Make the rename itself durable; not all platforms allow opening a folder.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
