"""Model-agnostic checkpoints: a dict of tensors (safetensors) plus a JSON state, saved atomically.

Layout (contract)::

    RUN/checkpoint                         human-readable index (latest, kept, best, archive)
    RUN/checkpoints/ckpt-00012000/
        tensors.safetensors                the tensors, never pickled
        state.json                         plain JSON: the caller's state + "step" + "metrics"
        MANIFEST.json                      sha256 and size of the two files; written last

Invariants:

* A checkpoint folder exists under its final name only once it is complete: files are written
  into ``ckpt-N.tmp-XXXX/``, fsynced, the manifest is written last, then the folder is renamed
  and the parent fsynced. Temporary folders are never read.
* A folder whose manifest is missing or does not match its files does not count: loaders skip it
  (one warning line on stderr) and fall back to the previous verified checkpoint.
* Retention deletes only folders that the index lists as ours (or that this manager committed
  itself); unknown folders are never touched. The checkpoint a run resumed from
  (:meth:`CheckpointManager.protect`) survives until a newer checkpoint is committed.
* Loading never unpickles: safetensors and JSON only, so a stranger's checkpoint cannot run code.
* Tensors are NumPy arrays by default, on both sides: training on the native engine never
  imports torch. Torch tensors are accepted and returned where asked (``framework="pt"``), for
  dtypes NumPy lacks (bfloat16); the file format is the same.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import math
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError, safe_open

from embedlab.errors import InputError
from embedlab.fsutil import atomic_write_text, current_umask, file_digest, fsync_dir

TENSORS_FILE = "tensors.safetensors"
STATE_FILE = "state.json"
MANIFEST_FILE = "MANIFEST.json"
INDEX_FILE = "checkpoint"
CKPT_DIR = "checkpoints"
MANIFEST_FORMAT = "embedlab-checkpoint/1"
_NAME_RE = re.compile(r"^ckpt-(\d+)$")

Role = Literal["latest", "kept", "best", "archive"]
Framework = Literal["numpy", "pt"]
# safetensors dtypes NumPy has no type for: a NumPy load widens them to float32 (exactly)
NOT_NUMPY_DTYPES = frozenset({"BF16", "F8_E4M3", "F8_E5M2"})


class CheckpointError(InputError):
    """A checkpoint could not be saved or no usable checkpoint exists (message names the fix)."""

    #: the OS error behind a failed save, for callers that word the fix their own way
    os_error: OSError | None = None


# ---- files ----------------------------------------------------------------------------------

def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


# ---- naming and verification -----------------------------------------------------------------

def ckpt_name(step: int) -> str:
    """``ckpt-00012000``: zero-padded to 8 digits so names sort by step (more digits if needed)."""
    return f"ckpt-{step:08d}"


def parse_step(name: str) -> int | None:
    m = _NAME_RE.match(name)
    return int(m.group(1)) if m else None


def _sha256_file(path: Path) -> str:
    return file_digest(path, "sha256")


def read_manifest(ckpt_dir: Path) -> dict[str, Any]:
    """The parsed manifest; raises ValueError with a short reason when absent or malformed.

    Every field a reader uses is type-checked here (the manifest is not hashed, so it may hold
    anything): ``format``, and ``files`` mapping plain file names to ``{"sha256": str,
    "size": int >= 0}``. ``created`` is informational; see :func:`_created`.
    """
    path = Path(ckpt_dir) / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError("MANIFEST.json is missing (an incomplete save)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"MANIFEST.json is unreadable ({exc})") from None
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


def _created(manifest: Mapping[str, Any]) -> float | None:
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
            size = path.stat().st_size
            if size != entry["size"]:
                return f"{name} has {size} bytes, the manifest says {entry['size']} (truncated?)"
            if _sha256_file(path) != entry["sha256"]:
                return f"{name} does not match its sha256 in MANIFEST.json (corrupted or modified)"
        except OSError as exc:
            return f"{name} is unreadable ({exc.strerror})"
    if len(_VERIFIED) > 64:
        _VERIFIED.clear()
    _VERIFIED[key] = None
    return None


def _warn(message: str) -> None:
    # One line on stderr; not warnings.warn, which tests turn into errors and users rarely see.
    print(f"embedlab: warning: {message}", file=sys.stderr, flush=True)


# ---- the index -------------------------------------------------------------------------------

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
                if len(fields) > 1 and "=" in fields[1]:
                    metric, _, v = fields[1].partition("=")
                    with contextlib.suppress(ValueError):
                        value = float(v)
                if len(fields) > 2:
                    mode = fields[2].strip("()")
        return cls(latest, tuple(kept), tuple(archive), best, metric, value, mode)


def read_index(run_dir: Path) -> Index:
    """The run's index (empty when there is none); :class:`CheckpointError` when unreadable.

    Lines that name no checkpoint are skipped (hand edits), so only bytes that are not UTF-8
    text or a file that cannot be opened are refused. Deleting the file is always a fix: the
    next save rebuilds it from the checkpoint folders (see :meth:`CheckpointManager.save`).
    """
    path = Path(run_dir) / INDEX_FILE
    try:
        return Index.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Index()
    except UnicodeDecodeError:
        raise CheckpointError(f"{path} is damaged (not UTF-8 text); delete it (it is rebuilt "
                              "from the checkpoint folders at the next save)") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read {path} ({exc.strerror or exc}); fix its "
                              "permissions or delete it (it is rebuilt at the next save)") from None


# ---- listing ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint folder as ``embedlab ckpt`` shows it.

    ``time`` is the save time (Unix seconds, from the manifest; folder mtime if unreadable),
    ``size`` the total bytes of its files, ``roles`` from the index (empty = not ours),
    ``problem`` the reason verification failed (None when verified or not checked).
    """

    step: int
    path: Path
    time: float
    size: int
    roles: tuple[Role, ...]
    verified: bool
    problem: str | None = None


def _scan(ckpt_root: Path) -> dict[int, Path]:
    """Committed checkpoint folders by step (temporary ``*.tmp-*`` folders are not committed)."""
    out: dict[int, Path] = {}
    if not ckpt_root.is_dir():
        return out
    for child in ckpt_root.iterdir():
        step = parse_step(child.name)
        if step is not None and child.is_dir():
            out[step] = child
    return out


# ---- the manager -----------------------------------------------------------------------------

def _better(value: float, best: float | None, mode: str) -> bool:
    if not math.isfinite(value):
        return False
    if best is None or not math.isfinite(best):
        return True
    return value < best if mode == "min" else value > best


class CheckpointManager:
    """Saves checkpoints of one run folder and applies retention.

    ``keep``: the K most recent checkpoints (the lecture's ``max_to_keep``). ``keep_every``:
    checkpoints whose step is a multiple are archived and never deleted. ``best_metric`` /
    ``best_mode``: the checkpoint with the best value of that metric (as passed to :meth:`save`)
    is kept while it is the best; ties keep the earlier one.
    """

    def __init__(self, run_dir: Path | str, *, keep: int = 5, keep_every: int | None = None,
                 best_metric: str = "loss", best_mode: Literal["min", "max"] = "min") -> None:
        if keep < 1:
            raise InputError(f"--keep must be >= 1, got {keep}; e.g. --keep 5")
        if keep_every is not None and keep_every < 1:
            raise InputError(f"--keep-every must be >= 1, got {keep_every}; e.g. 10000")
        if best_mode not in ("min", "max"):
            raise InputError(f"best mode must be min or max, got {best_mode!r}")
        self.run_dir = Path(run_dir)
        self.root = self.run_dir / CKPT_DIR
        self.keep = keep
        self.keep_every = keep_every
        self.best_metric = best_metric
        self.best_mode = best_mode
        self._protected: int | None = None
        self._committed: set[int] = set()  # folders this manager renamed into place
        # Wall seconds of the last successful save (write + fsync + hash + rename + retention),
        # so a trainer can stretch its cadence to keep checkpointing under a share of its time.
        self.last_save_seconds: float | None = None

    # -- queries --
    def index(self) -> Index:
        return read_index(self.run_dir)

    def check_index(self) -> None:
        """Raise :class:`CheckpointError` now if the index cannot be read, so that a trainer
        refuses a resume before it writes anything (every save reads the index)."""
        read_index(self.run_dir)

    def latest(self) -> Path | None:
        """The newest verified checkpoint; skips bad ones with a one-line warning each."""
        for _step, path in sorted(_scan(self.root).items(), reverse=True):
            problem = verify(path)
            if problem is None:
                return path
            _warn(f"skipping checkpoint {path}: {problem}; falling back to the previous one")
        return None

    def best(self) -> Path | None:
        """The best checkpoint named by the index, if it still verifies."""
        step = self.index().best
        if step is None:
            return None
        path = self.root / ckpt_name(step)
        return path if path.is_dir() and verify(path) is None else None

    def list(self, *, check: bool = True) -> list[CheckpointInfo]:
        """All committed checkpoint folders, oldest first (``check=False`` skips hashing)."""
        index = self.index()
        out = []
        for step, path in sorted(_scan(self.root).items()):
            problem = verify(path) if check else None
            try:
                created = _created(read_manifest(path))
            except ValueError:
                created = None
            # no valid "created" (an unreadable or hand-edited manifest): the folder's mtime,
            # which the rename at commit time set
            saved = created if created is not None else path.stat().st_mtime
            size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
            out.append(CheckpointInfo(step, path, saved, size, index.roles(step),
                                      check and problem is None, problem))
        return out

    def remove_stale_tmp(self) -> tuple[Path, ...]:
        """Delete ``ckpt-N.tmp-*`` folders left by a killed save.

        Call only while holding the run's lock: then no other save can be in flight, and such a
        folder can never become a checkpoint (it was never renamed into place).
        """
        removed = []
        if self.root.is_dir():
            for p in self.root.iterdir():
                if p.is_dir() and ".tmp-" in p.name and p.name.startswith("ckpt-"):
                    shutil.rmtree(p, ignore_errors=True)
                    removed.append(p)
        return tuple(removed)

    def protect(self, step: int) -> None:
        """Never delete checkpoint ``step`` until a checkpoint with a higher step is committed."""
        self._protected = step

    # -- save --
    def save(self, step: int, tensors: Mapping[str, Any], state: Mapping[str, Any],
             metrics: Mapping[str, float] | None = None) -> Path:
        """Commit checkpoint ``step`` atomically, then apply retention and rewrite the index.

        ``tensors``: NumPy arrays or torch tensors (see :func:`save_tensors`).

        Raises :class:`CheckpointError` (one line: cause + fix) when the folder cannot be
        written; earlier checkpoints and the index are then untouched.
        """
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        started = time.perf_counter()
        metrics = dict(metrics or {})
        final = self.root / ckpt_name(step)
        try:
            old_index = self.index()
            self.root.mkdir(parents=True, exist_ok=True)
            # mkdir, not mkdtemp: the folder gets the umask's mode (mkdtemp's is 0700)
            tmp = self.root / f"{final.name}.tmp-{secrets.token_hex(6)}"
            tmp.mkdir()
        except OSError as exc:
            raise self._save_error(step, exc) from None
        try:
            _write_contents(tmp, step, tensors, state, metrics)
            _commit(tmp, final)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise self._save_error(step, exc) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._committed.add(step)
        if self._protected is not None and step > self._protected:
            self._protected = None
        self._retain(step, old_index, metrics)
        self.last_save_seconds = time.perf_counter() - started
        return final

    def _save_error(self, step: int, exc: OSError) -> CheckpointError:
        why = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            fix = "free disk space"
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            fix = f"make {self.root} writable"
        else:
            fix = f"check {self.root}"
        error = CheckpointError(f"could not save checkpoint at step {step} in {self.root}: "
                                f"{why}; {fix}, then re-run the same command to resume from the "
                                "last saved checkpoint (earlier checkpoints are intact)")
        error.os_error = exc
        return error

    def _retain(self, step: int, old: Index, metrics: Mapping[str, float]) -> None:
        present = _scan(self.root)
        ours = {s for s in (old.ours() | self._committed) if s in present}
        # A crash between a commit and the index rewrite leaves a newer, unlisted folder behind;
        # it carries our manifest and is newer than anything listed, so adopt it.
        newest_listed = max(old.ours(), default=-1)
        ours |= {s for s, p in present.items() if s > newest_listed and _has_manifest(p)}
        ours.add(step)
        # The just-saved checkpoint is always the latest, even when its step is lower than an
        # abandoned branch's (a run restarted from an older checkpoint).
        order = [step, *sorted((s for s in ours if s != step), reverse=True)]
        kept = order[: self.keep]
        archive = {s for s in ours if s in old.archive or
                   (self.keep_every is not None and s % self.keep_every == 0)}
        best, value = self._best(step, old, metrics, ours)
        keep_set = set(kept) | archive | ({best} if best is not None else set())
        if self._protected is not None and self._protected in ours:
            keep_set.add(self._protected)
            if self._protected not in kept:
                kept.append(self._protected)
        # Delete before rewriting the index: a crash in between leaves an index that names a
        # missing folder (harmless, verification skips it), never an unlisted orphan of ours.
        for s in sorted(ours - keep_set):
            shutil.rmtree(present[s], ignore_errors=True)
            self._committed.discard(s)
        new = Index(step, tuple(kept), tuple(sorted(archive)), best,
                    self.best_metric if best is not None else None, value,
                    self.best_mode if best is not None else None)
        try:
            atomic_write_text(self.run_dir / INDEX_FILE, new.render())
        except OSError as exc:
            # The checkpoint itself is committed and loadable (latest() scans folders), so this
            # is not fatal; say so once.
            _warn(f"could not rewrite {self.run_dir / INDEX_FILE} ({exc.strerror}); "
                  "the checkpoint itself was saved")

    def _best(self, step: int, old: Index, metrics: Mapping[str, float],
              ours: set[int]) -> tuple[int | None, float | None]:
        same_metric = old.best_metric == self.best_metric and old.best_mode == self.best_mode
        best = old.best if same_metric and old.best in ours else None
        value = old.best_value if best is not None else None
        if not old.ours():
            # No index (a new run, or one deleted because it was damaged): the best of the
            # folders adopted above, by the metrics their state.json recorded, so that deleting
            # a damaged index does not cost the run its best checkpoint at the next save.
            best, value = self._best_on_disk(sorted(ours - {step}))
        new_value = metrics.get(self.best_metric)
        if new_value is not None and _better(float(new_value), value, self.best_mode):
            return step, float(new_value)
        return best, value

    def _best_on_disk(self, steps: Iterable[int]) -> tuple[int | None, float | None]:
        best: int | None = None
        value: float | None = None
        for s in steps:  # ascending: ties keep the earlier one
            path = self.root / ckpt_name(s)
            if verify(path) is not None:
                continue
            try:
                recorded = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            metrics = recorded.get("metrics") if isinstance(recorded, dict) else None
            v = metrics.get(self.best_metric) if isinstance(metrics, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    _better(float(v), value, self.best_mode):
                best, value = s, float(v)
        return best, value


def _has_manifest(ckpt_dir: Path) -> bool:
    try:
        read_manifest(ckpt_dir)
    except ValueError:
        return False
    return True


def save_tensors(tensors: Mapping[str, Any], filename: str, metadata: dict[str, str]) -> None:
    """Write ``tensors`` with safetensors: NumPy arrays through its NumPy writer (no torch
    import), anything else as torch tensors (e.g. the linear regression's, or bfloat16 ones).
    Same format, and the same bytes for the same values, either way."""
    numpy_types = (np.ndarray, np.generic)  # a 0-d array may arrive as a NumPy scalar
    if all(isinstance(t, numpy_types) for t in tensors.values()):
        safetensors.numpy.save_file({n: np.asarray(t, order="C") for n, t in tensors.items()},
                                    filename, metadata=metadata)
        return
    import torch
    from safetensors.torch import save_file as save_torch

    save_torch({n: (torch.from_numpy(np.asarray(t, order="C")) if isinstance(t, numpy_types)
                    else t.detach().to("cpu").contiguous()) for n, t in tensors.items()},
               filename, metadata=metadata)


def _write_contents(tmp: Path, step: int, tensors: Mapping[str, Any],
                    state: Mapping[str, Any], metrics: Mapping[str, float]) -> None:
    """Write the two data files, then the manifest, all fsynced (the folder is not yet visible)."""
    for key in ("step", "metrics"):
        if key in state and state[key] != (step if key == "step" else dict(metrics)):
            raise ValueError(f"state[{key!r}] disagrees with the {key} passed to save()")
    try:
        save_tensors(tensors, str(tmp / TENSORS_FILE), metadata={"step": str(step)})
    except SafetensorError as exc:
        raise _os_error(exc) from None
    # safetensors creates the file 0600; a checkpoint is as shareable as the rest of the run
    os.chmod(tmp / TENSORS_FILE, 0o666 & ~current_umask())
    with open(tmp / TENSORS_FILE, "rb+") as f:
        os.fsync(f.fileno())
    state_bytes = json.dumps({**state, "step": step, "metrics": dict(metrics)},
                             indent=1, sort_keys=True).encode("utf-8")
    _write_file(tmp / STATE_FILE, state_bytes)
    files = {name: {"sha256": _sha256_file(tmp / name), "size": (tmp / name).stat().st_size}
             for name in (TENSORS_FILE, STATE_FILE)}
    manifest = {"format": MANIFEST_FORMAT, "step": step, "created": time.time(), "files": files}
    _write_file(tmp / MANIFEST_FILE, json.dumps(manifest, indent=1).encode("utf-8"))
    fsync_dir(tmp)


def _os_error(exc: Exception) -> OSError:
    """safetensors reports a failed write ("disk full") as its own error type, with the OS
    error only in the text ("... I/O error: No space left on device (os error 28)"); as an
    OSError it gets the one-line save error instead of escaping as a traceback."""
    text = str(exc)
    found = re.search(r"(?:I/O error: )?([^:]*?) \(os error (\d+)\)", text)
    if found:
        return OSError(int(found.group(2)), found.group(1))
    return OSError(errno.EIO, text)


def _commit(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; an existing ``final`` (same step saved again) is replaced."""
    trash = None
    if final.exists():
        trash = final.with_name(f"{final.name}.tmp-old-{os.getpid()}")
        os.replace(final, trash)
    os.replace(tmp, final)
    fsync_dir(final.parent)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


# ---- finding and loading ---------------------------------------------------------------------

def find_checkpoint(path: Path | str, *, step: int | None = None, best: bool = False) -> Path:
    """A verified checkpoint folder from a run folder or a checkpoint folder.

    For a run folder: ``step`` picks that step, ``best`` the index's best, otherwise the newest
    verified one (skipping bad ones with a warning). Raises :class:`InputError` naming the fix.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p} does not exist; pass a run folder or a checkpoint folder")
    if step is not None and best:
        raise InputError("--step and --best are mutually exclusive; pass one of them")
    if (p / MANIFEST_FILE).exists() or parse_step(p.name) is not None:
        return _verified_or_fail(p)
    root = p / CKPT_DIR
    if not root.is_dir():
        raise InputError(f"{p} holds no checkpoints (no {CKPT_DIR}/ folder); pass a run folder "
                         "that has been trained, or a checkpoint folder")
    if step is not None:
        target = root / ckpt_name(step)
        if not target.is_dir():
            have = ", ".join(str(s) for s in sorted(_scan(root))) or "none"
            raise InputError(f"{p} has no checkpoint at step {step} (available: {have}); "
                             "run 'embedlab ckpt RUN' to list them")
        return _verified_or_fail(target)
    if best:
        index = read_index(p)
        if index.best is None:
            raise InputError(f"{p} has no best checkpoint recorded in {INDEX_FILE}; "
                             "use the latest one (drop --best) or pick one with --step")
        return _verified_or_fail(root / ckpt_name(index.best))
    found = CheckpointManager(p).latest()
    if found is None:
        raise InputError(f"no verified checkpoint in {p}; every checkpoint folder is incomplete "
                         "or corrupted - start a new run or restore the folder from a backup")
    return found


def _verified_or_fail(ckpt_dir: Path) -> Path:
    if not ckpt_dir.is_dir():
        raise InputError(f"checkpoint {ckpt_dir} is missing; run 'embedlab ckpt RUN' to list them")
    problem = verify(ckpt_dir)
    if problem is not None:
        raise InputError(f"checkpoint {ckpt_dir} failed verification: {problem}; use another "
                         "checkpoint ('embedlab ckpt RUN' lists them)")
    return ckpt_dir


def _unreadable(ckpt_dir: Path, exc: BaseException) -> InputError:
    """The one line for a checkpoint whose files verify but cannot be parsed (re-signed)."""
    what = str(exc) if isinstance(exc, (OSError, ValueError)) else \
        f"{type(exc).__name__}: {exc}"  # SafetensorError is not a ValueError in every version
    return InputError(f"cannot read checkpoint {ckpt_dir} ({what}); use another checkpoint "
                      "('embedlab ckpt RUN' lists them)")


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
                                 f"{key!r} = {_short(state[key])}, not {problem}; use another "
                                 "checkpoint ('embedlab ckpt RUN' lists them)")


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_own_fields(ckpt_dir: Path, state: dict[str, Any]) -> None:
    """``step`` and ``metrics``, which :meth:`CheckpointManager.save` always writes."""
    if "step" not in state:
        raise InputError(f"checkpoint {ckpt_dir} is damaged: {STATE_FILE} has no 'step'; use "
                         "another checkpoint ('embedlab ckpt RUN' lists them)")
    check_state(ckpt_dir, state, {"step": int})
    metrics = state.get("metrics", {})
    if not isinstance(metrics, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics.values()):
        raise InputError(f"checkpoint {ckpt_dir} is damaged: {STATE_FILE} has 'metrics' = "
                         f"{_short(metrics)}, not an object of numbers; use another checkpoint "
                         "('embedlab ckpt RUN' lists them)")
    named = parse_step(ckpt_dir.name)
    if named is not None and named != state["step"]:
        raise InputError(f"checkpoint {ckpt_dir} is damaged: {STATE_FILE} says step "
                         f"{state['step']}, its folder name step {named}; use another "
                         "checkpoint ('embedlab ckpt RUN' lists them)")


def load_checkpoint(ckpt_dir: Path | str, *, verify: bool = True,
                    names: Iterable[str] | None = None,
                    rename: Mapping[str, str] | None = None,
                    state_spec: Mapping[str, Any] | None = None,
                    framework: Framework = "numpy",
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load tensors and state of one checkpoint folder (no unpickling anywhere).

    ``framework``: ``"numpy"`` gives NumPy arrays (and imports no torch, unless a tensor has a
    dtype NumPy lacks: bfloat16 and float8 come back widened to float32); ``"pt"`` gives torch
    tensors of the stored dtypes.

    ``names``: stored tensor names to load (default: all). ``rename``: ``{new_name: stored_name}``
    (the CLI's ``--map new=old``); stored names not mentioned keep their names, and a stored
    name in ``rename`` is loaded even when ``names`` omits it. Raises :class:`InputError` naming
    missing tensors and the available ones. The state always has ``step`` (an int >= 0, that of
    the folder's name) and ``metrics`` (numbers); ``state_spec`` checks the caller's own fields
    (:func:`check_state`). A state of the wrong shape is a one-line :class:`InputError`.
    """
    ckpt_dir = Path(ckpt_dir)
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
                raise InputError(f"checkpoint {ckpt_dir} has no tensor named "
                                 f"{', '.join(missing)}; it has: {', '.join(sorted(stored))}")
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
    if everything:  # one pass for the full set
        if framework == "numpy":
            return safetensors.numpy.load_file(str(path))
        from safetensors.torch import load_file

        return load_file(str(path))
    with safe_open(str(path), framework=framework) as f:
        return {n: f.get_tensor(n) for n in names}


def _output_names(wanted: list[str], rename: Mapping[str, str]) -> dict[str, str]:
    """stored name -> output name; refuses two tensors ending up under one name."""
    reverse: dict[str, str] = {}
    for new, old in rename.items():
        if old in reverse:
            raise InputError(f"--map names {old!r} twice ({reverse[old]!r} and {new!r}); "
                             "map each stored tensor once")
        reverse[old] = new
    out = {n: reverse.get(n, n) for n in wanted}
    seen: dict[str, str] = {}
    for old, new in out.items():
        if new in seen:
            raise InputError(f"--map would give two tensors the name {new!r} ({seen[new]!r} and "
                             f"{old!r}); pick another new name")
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
