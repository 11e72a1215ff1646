"""One checkpoint folder: its names, its three files, and their verification.

``ckpt-N/`` holds ``tensors.safetensors`` (never pickled), ``state.json`` (the caller's state
plus ``step`` and ``metrics``) and ``MANIFEST.json`` (sha256 and size of the other two, written
last). A folder whose manifest is missing or does not match its files does not count.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError

from embedlab.checkpoint import tensor_file
from embedlab.errors import InputError
from embedlab.fsutil import current_umask, file_digest, fsync_dir, read_record

TENSORS_FILE = "tensors.safetensors"
STATE_FILE = "state.json"
MANIFEST_FILE = "MANIFEST.json"
CKPT_DIR = "checkpoints"
MANIFEST_FORMAT = "embedlab-checkpoint/1"
_NAME_RE = re.compile(r"^ckpt-(\d+)$")

Framework = Literal["numpy", "pt"]
# safetensors dtypes NumPy has no type for: a NumPy load widens them to float32 (exactly)
NOT_NUMPY_DTYPES = frozenset({"BF16", "F8_E4M3", "F8_E5M2"})


class CheckpointError(InputError):
    """A checkpoint could not be saved or no usable checkpoint exists (message names the fix)."""

    #: the OS error behind a failed save, for callers that word the fix their own way
    os_error: OSError | None = None


# ---- names -----------------------------------------------------------------------------------

def ckpt_name(step: int) -> str:
    """``ckpt-00012000``: zero-padded to 8 digits so names sort by step (more digits if needed)."""
    return f"ckpt-{step:08d}"


def parse_step(name: str) -> int | None:
    """The step a checkpoint folder's name gives, None for any other name: only the name
    :func:`ckpt_name` writes, so that a folder renamed by hand (``ckpt-5000``) is not taken
    for the step's checkpoint, listed beside it, or deleted by retention in its place."""
    m = _NAME_RE.match(name)
    if m is None or len(m.group(1)) > 19:  # int() refuses 4,300 digits; a step fits int64
        return None
    step = int(m.group(1))
    return step if ckpt_name(step) == name and step < 2**63 else None


def committed_folders(ckpt_root: Path) -> dict[int, Path]:
    """Committed checkpoint folders by step (temporary ``*.tmp-*`` folders are not committed)."""
    out: dict[int, Path] = {}
    if not ckpt_root.is_dir():
        return out
    for child in ckpt_root.iterdir():
        step = parse_step(child.name)
        if step is not None and child.is_dir():
            out[step] = child
    return out


# ---- writing ---------------------------------------------------------------------------------

def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def save_tensors(tensors: Mapping[str, Any], filename: str,
                 metadata: dict[str, str]) -> str | None:
    """Write ``tensors`` with safetensors' format: NumPy arrays through
    :mod:`~embedlab.checkpoint.tensor_file` (fsynced, hashed while written) or safetensors'
    NumPy writer (no torch import), anything else as torch tensors (e.g. the linear
    regression's, or bfloat16 ones). Same format, and the same bytes for the same values, every
    way. Returns the file's sha256 (hex) where it was computed while writing, else None."""
    numpy_types = (np.ndarray, np.generic)  # a 0-d array may arrive as a NumPy scalar
    if tensor_file.can_write(tensors, metadata):
        return tensor_file.write(Path(filename), tensors, metadata)
    if all(isinstance(t, numpy_types) for t in tensors.values()):
        safetensors.numpy.save_file({n: np.asarray(t, order="C") for n, t in tensors.items()},
                                    filename, metadata=metadata)
        return None
    import torch
    from safetensors.torch import save_file as save_torch

    save_torch({n: (torch.from_numpy(np.asarray(t, order="C")) if isinstance(t, numpy_types)
                    else t.detach().to("cpu").contiguous()) for n, t in tensors.items()},
               filename, metadata=metadata)
    return None


def write_tensors(folder: Path, step: int, tensors: Mapping[str, Any]) -> str | None:
    """``folder/tensors.safetensors``, fsynced, with the mode the umask gives; its sha256 when
    it was computed while writing (see :func:`save_tensors`)."""
    try:
        digest = save_tensors(tensors, str(folder / TENSORS_FILE),
                              metadata={"step": str(step)})
    except SafetensorError as exc:
        raise _os_error(exc) from None
    if digest is not None:
        return digest
    # safetensors creates the file 0600; a checkpoint is as shareable as the rest of the run
    os.chmod(folder / TENSORS_FILE, 0o666 & ~current_umask())
    with open(folder / TENSORS_FILE, "rb+") as f:
        os.fsync(f.fileno())
    return None


def write_state(folder: Path, step: int, state: Mapping[str, Any],
                metrics: Mapping[str, float]) -> str:
    """``folder/state.json``: ``state`` plus ``step`` and ``metrics``, fsynced; returns its
    sha256 (hex)."""
    state_bytes = json.dumps({**state, "step": step, "metrics": dict(metrics)},
                             indent=1, sort_keys=True).encode("utf-8")
    _write_file(folder / STATE_FILE, state_bytes)
    return hashlib.sha256(state_bytes).hexdigest()


def write_manifest(folder: Path, step: int,
                   digests: Mapping[str, str | None] | None = None) -> None:
    """``folder/MANIFEST.json`` for the two data files already in ``folder``, then fsync the
    folder: the last write of a checkpoint, which makes it count. ``digests``: the files'
    sha256 as computed while they were written; a file without one is read back and hashed."""
    digests = digests or {}
    files = {name: {"sha256": digests.get(name) or file_digest(folder / name, "sha256"),
                    "size": (folder / name).stat().st_size}
             for name in (TENSORS_FILE, STATE_FILE)}
    manifest = {"format": MANIFEST_FORMAT, "step": step, "created": time.time(), "files": files}
    _write_file(folder / MANIFEST_FILE, json.dumps(manifest, indent=1).encode("utf-8"))
    fsync_dir(folder)


def _os_error(exc: Exception) -> OSError:
    """safetensors reports a failed write ("disk full") as its own error type, with the OS
    error only in the text ("... I/O error: No space left on device (os error 28)"); as an
    OSError it gets the one-line save error instead of escaping as a traceback."""
    text = str(exc)
    found = re.search(r"(?:I/O error: )?([^:]*?) \(os error (\d+)\)", text)
    if found:
        return OSError(int(found.group(2)), found.group(1))
    return OSError(errno.EIO, text)


# ---- the manifest and verification -----------------------------------------------------------

def read_manifest(ckpt_dir: Path) -> dict[str, Any]:
    """The parsed manifest; raises ValueError with a short reason when absent or malformed.

    Every field a reader uses is type-checked here (the manifest is not hashed, so it may hold
    anything): ``format``, and ``files`` mapping plain file names to ``{"sha256": str,
    "size": int >= 0}``. ``created`` is informational; see :func:`created_time`.
    """
    path = Path(ckpt_dir) / MANIFEST_FILE
    try:
        manifest = json.loads(read_record(path).decode("utf-8"))
    except FileNotFoundError:
        raise ValueError("MANIFEST.json is missing (an incomplete save)") from None
    except OSError as exc:
        raise ValueError(f"MANIFEST.json is unreadable ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ValueError(f"MANIFEST.json is unreadable ({why})") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT
            or not isinstance(files, dict)):
        raise ValueError("MANIFEST.json is not an embedlab checkpoint manifest")
    for name in (TENSORS_FILE, STATE_FILE):
        if name not in files:
            raise ValueError(f"MANIFEST.json does not list {name}")
    for name, entry in files.items():
        # a name with a separator would make verification read (and hash) files elsewhere
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise ValueError(f"MANIFEST.json lists {name!r}, not a file name")
        size = entry.get("size") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if (not isinstance(digest, str) or not isinstance(size, int) or isinstance(size, bool)
                or size < 0):
            raise ValueError(f"MANIFEST.json has no valid sha256 and size for {name}")
    return manifest


def has_manifest(ckpt_dir: Path) -> bool:
    try:
        read_manifest(ckpt_dir)
    except ValueError:
        return False
    return True


def created_time(manifest: Mapping[str, Any]) -> float | None:
    """The manifest's save time (Unix seconds), or None when it is absent or not a time that
    can be shown (the manifest is not hashed: a hand edit may leave NaN, 1e20 or a list)."""
    value = manifest.get("created")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        datetime.datetime.fromtimestamp(value)
    except (OverflowError, OSError, ValueError):
        return None
    return float(value)


# Verified results, keyed by the files' identity, so latest() + load_checkpoint() hash once.
_VERIFIED: dict[tuple[Any, ...], None] = {}


def _identity(ckpt_dir: Path, names: Iterable[str]) -> tuple[Any, ...]:
    out: list[Any] = [str(Path(ckpt_dir).resolve())]
    for name in (MANIFEST_FILE, *names):
        st = (Path(ckpt_dir) / name).stat()
        out.append((name, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def verify(ckpt_dir: Path) -> str | None:
    """``None`` when the checkpoint's files match its manifest, else a short reason."""
    try:
        manifest = read_manifest(ckpt_dir)
    except ValueError as exc:
        return str(exc)
    files: dict[str, dict[str, Any]] = manifest["files"]
    try:
        key = _identity(ckpt_dir, sorted(files))
    except OSError as exc:
        return f"{Path(exc.filename or '?').name} is missing or unreadable"
    if key in _VERIFIED:
        return None
    for name, entry in sorted(files.items()):
        path = Path(ckpt_dir) / name
        try:
            st = path.stat()
            if not stat.S_ISREG(st.st_mode):  # a FIFO would block the hash for ever
                return f"{name} is not a regular file"
            size = st.st_size
            if size != entry["size"]:
                how = "truncated?" if size < entry["size"] else "appended to?"
                return f"{name} has {size} bytes, the manifest says {entry['size']} ({how})"
            if file_digest(path, "sha256") != entry["sha256"]:
                return f"{name} does not match its sha256 in MANIFEST.json (corrupted or modified)"
        except OSError as exc:
            return f"{name} is unreadable ({exc.strerror})"
    if len(_VERIFIED) > 64:
        _VERIFIED.clear()
    _VERIFIED[key] = None
    return None
