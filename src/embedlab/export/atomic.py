"""Atomic, no-clobber file writes.

A reader never sees a half-written export: data goes to a temporary file in the destination's
folder (same filesystem, so the final rename is atomic), is flushed and fsynced, then renamed
over the destination. An existing destination is refused unless ``force`` is set, so an export
never silently replaces something the user saved.
"""

from __future__ import annotations

from pathlib import Path

from embedlab.errors import InputError
from embedlab.fsutil import atomic_open


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


__all__ = ["atomic_open", "check_writable"]
