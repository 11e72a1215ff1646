"""Reproducibility records of a run: ``RUN/config.json`` and ``RUN/env.json``.

``config.json`` is the resolved config (every default spelled out). ``env.json`` records what
the result may depend on besides the config: package versions, Python, platform, CPU, thread
count, the device the engine trains on (``cpu``, or the GPU's model), the command line, the
project's git commit (when the source is a git checkout) and the seed with its stream names.
Both files are written atomically (tmp + fsync + rename).

On resume ``env.json`` keeps the first record at the top level and appends the new one to
``"resumes"``, so a run restarted on another machine says so.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from embedlab.engines import STEP_REVISION, training_device
from embedlab.fsutil import atomic_write_text

ENV_FILE = "env.json"
CONFIG_FILE = "config.json"
PACKAGES = ("embedlab", "torch", "numpy", "safetensors", "tensorboard", "click", "gensim")


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (None when not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(path: Path | None = None, *, timeout: float = 2.0) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the git checkout holding ``path`` (default: this
    package's source), or None when it is not in a checkout or git is unavailable/slow."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(where), *args], capture_output=True,
                                  text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def as_typed(argv: Sequence[str]) -> list[str]:
    """``argv`` as its command was typed: Python gives ``python -m embedlab ARGS`` (torchrun's
    ``-m embedlab`` too) as the path of embedlab's ``__main__.py``, which runs nothing as
    written. Under torchrun, with the process counts it started (its other options are not
    known to its processes)."""
    args = list(argv)
    if not args or not args[0].endswith(os.path.join("embedlab", "__main__.py")):
        return args
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return ["python", "-m", "embedlab", *args[1:]]
    local = os.environ.get("LOCAL_WORLD_SIZE", "1")
    nodes = int(os.environ.get("WORLD_SIZE", local)) // max(1, int(local))
    where = ["--nnodes", str(nodes)] if nodes > 1 else []
    return ["torchrun", *where, "--nproc-per-node", local, "-m", "embedlab", "--", *args[1:]]


def environment(*, argv: Sequence[str], threads: int, seed: int, streams: Sequence[str],
                device: str = "cpu", processes: int = 1, step: int = 0,
                command: str | None = None,
                kernel: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The provenance record (plain JSON values); ``device``: what the run trains on;
    ``processes``: how many train it together (torchrun's world size); ``step``: where this
    start takes the run up (0 for a new run); ``command``: an ``embedlab train`` line that
    trains the same run from scratch; ``kernel``: what the native kernel was built from
    (:meth:`embedlab.engines.native._Library.identity`)."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        affinity = None
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": as_typed(argv),
        "cwd": os.getcwd(),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "threads": threads,
        "processes": processes,
        "device": device,
        "git": git_commit(),
        "seed": seed,
        "streams": list(streams),
        "step_revision": STEP_REVISION,
        "step": step,
        "executable": sys.executable,
        **({"command": command} if command is not None else {}),
        **({"kernel": dict(kernel)} if kernel is not None else {}),
    }


def last_kernel(run_dir: Path | str) -> dict[str, Any] | None:
    """The native kernel of the run's latest start that recorded one (``env.json``), or None."""
    try:
        env = json.loads((Path(run_dir) / ENV_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(env, dict):
        return None
    records = [env, *_resumes(env)]
    kernels = [r["kernel"] for r in records if isinstance(r.get("kernel"), dict)]
    return kernels[-1] if kernels else None


def _resumes(env: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of ``env``'s resumes; none where ``"resumes"`` was edited into something
    other than a list of them."""
    resumes = env.get("resumes")
    return [r for r in resumes if isinstance(r, dict)] if isinstance(resumes, list) else []


def started_step_revision(run_dir: Path | str) -> int | None:
    """The training-step revision that started the run (1 for records from before revisions
    were recorded); None without a readable ``env.json``."""
    try:
        env = json.loads((Path(run_dir) / ENV_FILE).read_text(encoding="utf-8"))
        return int(env.get("step_revision", 1))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def recorded_device(run_dir: Path | str) -> str | None:
    """What the run trained on when it last started or resumed: ``device`` of the newest record
    in ``env.json`` (``cpu`` for records from before devices were recorded, when every engine
    trained on the CPU); None without a readable ``env.json``."""
    try:
        env = json.loads((Path(run_dir) / ENV_FILE).read_text(encoding="utf-8"))
        latest = (_resumes(env) or [env])[-1]
        return str(latest.get("device", "cpu"))
    except (OSError, ValueError, TypeError, AttributeError, KeyError, IndexError):
        return None


def _config_device(run_dir: Path) -> str:
    """What the engine of the run's config.json trains on here (``cpu`` for a config without
    an engine, such as linreg's)."""
    try:
        engine = json.loads((run_dir / CONFIG_FILE).read_text(encoding="utf-8")).get("engine")
    except (OSError, ValueError, AttributeError):
        engine = None
    return training_device(engine) if isinstance(engine, str) else "cpu"


def write_env_json(run_dir: Path | str, *, argv: Sequence[str], threads: int, seed: int,
                   streams: Sequence[str], processes: int = 1, step: int = 0,
                   command: str | None = None,
                   kernel: Mapping[str, str] | None = None, start: bool = False) -> Path:
    """Write ``RUN/env.json``; when one exists, append this record to its ``"resumes"`` list.

    ``start``: the run starts from nothing (no checkpoint to resume), so this record is its
    first and replaces what a start that saved nothing left: the first record says how the run
    began (its training-step revision among it), which decides how its resumes cut batches.
    The record's ``device`` is taken from the engine of the run's ``config.json``, which is
    written first."""
    path = Path(run_dir) / ENV_FILE
    record = environment(argv=argv, threads=threads, seed=seed, streams=streams,
                         device=_config_device(Path(run_dir)), processes=processes, step=step,
                         command=command, kernel=kernel)
    try:
        existing = None if start else json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        existing = None
    if isinstance(existing, dict):
        # a "resumes" that is no list (edited by hand) is replaced: it cannot be appended to,
        # and this runs after config.json is written
        if not isinstance(existing.get("resumes"), list):
            existing["resumes"] = []
        existing["resumes"].append(record)
        record = existing
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def write_config_json(run_dir: Path | str, cfg: Any) -> Path:
    """Write ``RUN/config.json`` from a config with ``to_dict()`` or a plain mapping."""
    data = cfg.to_dict() if hasattr(cfg, "to_dict") else cfg
    if not isinstance(data, Mapping):
        raise TypeError(f"config must be a mapping or have to_dict(), got {type(cfg).__name__}")
    path = Path(run_dir) / CONFIG_FILE
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(dict(data), indent=2) + "\n")
    return path


def read_config_json(run_dir: Path | str) -> dict[str, Any] | None:
    """The stored config, or None when the run has none yet."""
    path = Path(run_dir) / CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        from embedlab.errors import InputError, spell

        raise InputError(f"{path} is unreadable ({exc}); restore it or start a new "
                         f"{spell('--run')}") from None
    if not isinstance(data, dict):
        from embedlab.errors import InputError, spell

        raise InputError(f"{path} is not a JSON object; restore it or start a new "
                         f"{spell('--run')}")
    return data
