"""Tokenise a raw corpus in a child process while a torch-engine trainer imports PyTorch.

A fresh ``embedlab train --engine torch`` on a raw corpus starts with two independent,
single-threaded jobs of similar length: importing torch, TensorBoard and matplotlib, and
tokenising the corpus. Run one after the other they take both; run side by side on two cores
they take the longer of the two. :class:`PrepareAhead` starts a child Python process on the
corpus before the parent imports torch; the trainer then adopts the finished folder
(:meth:`PrepareAhead.take`), which is byte-for-byte what
:func:`embedlab.data.preparing.prepare` would have written in-process (the child calls it).

The native engine's process imports no torch, and what it does import is quick: there a child
saves no wall time and costs CPU and memory at once, so native runs tokenise in-process.

Safety: the child writes only inside a private hidden folder beside the run folder
(``.<run>.prepare-<parent pid>-<random>``), never into the run, and the parent moves the result
into ``RUN/prepared`` only after it holds the run's lock. The child ignores Ctrl-C (the parent owns
the terminal and kills the child when it stops early); if the parent dies, the child removes its
folder when it finishes, and folders left by dead parents are swept by the next start.
A child that fails with a bad-input error hands its one-line message to the parent; a child that
fails otherwise is ignored and the parent prepares in-process, as without this module.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from embedlab.config import DataConfig
from embedlab.errors import InputError, python_caller, warn
from embedlab.fsutil import atomic_write_text, fsync_dir
from embedlab.run.lock import pid_alive

#: below this many bytes of corpus, tokenising takes less than starting a child costs
MIN_BYTES = 1 << 20
SPEC_FILE, RESULT_FILE, STDERR_FILE, OUT_DIR = "spec.json", "result.json", "stderr.txt", "prepared"


def should_prepare_ahead(data: DataConfig, *, engine: str, min_bytes: int = MIN_BYTES) -> bool:
    """Whether tokenising ``data.corpus`` in a child is worth it.

    Only for the engines that import torch (torch and cuda; ``engine``: the one the run will
    use), when the parent has not imported torch yet (there is nothing to overlap otherwise),
    the corpus is raw text (not a prepared folder, not the small generated demo) and, for a
    path, at least ``min_bytes`` on disk. Problems with the path are left to the in-process
    code, which reports them.
    """
    if engine not in ("torch", "cuda") or "torch" in sys.modules or data.corpus == "demo":
        return False
    if data.corpus == "text8":
        return True
    from embedlab.data.corpus import total_source_bytes
    from embedlab.data.prepared import is_prepared

    try:
        return not is_prepared(data.corpus) and total_source_bytes(data.corpus) >= min_bytes
    except (InputError, OSError):
        return False


class PrepareAhead:
    """A child process preparing ``data`` into a private folder beside the run folder."""

    def __init__(self, data: DataConfig, folder: Path, proc: subprocess.Popen[bytes],
                 relay_stderr: bool) -> None:
        self.data = data
        self.folder = folder
        self._proc = proc
        self._relay = relay_stderr
        self._done = False

    @classmethod
    def start(cls, data: DataConfig, run_dir: Path, *, progress: bool) -> PrepareAhead | None:
        """Start the child, or return None where the folder beside ``run_dir`` can't be made.

        ``progress``: the child draws its progress bars on this process's stderr (a terminal);
        otherwise its stderr (warnings) is kept in a file and replayed by :meth:`take`.
        """
        parent = run_dir.absolute().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _sweep_orphans(parent, run_dir.name)
            folder = parent / f".{run_dir.name}.prepare-{os.getpid()}-{secrets.token_hex(4)}"
            folder.mkdir()
        except OSError:
            return None
        spec = {"data": asdict(data), "out": str(folder / OUT_DIR), "progress": progress,
                "parent_pid": os.getpid(), "run_dir": str(run_dir),
                # the child's messages name the inputs as this process's caller passed them
                "caller": "python" if python_caller() else "cli"}
        atomic_write_text(folder / SPEC_FILE, json.dumps(spec))
        try:
            with open(folder / STDERR_FILE, "wb") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-c", _CHILD_CODE, str(folder), _package_root()],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=None if progress else err)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return cls(data, folder, proc, relay_stderr=not progress)

    def take(self, dest: Path) -> bool:
        """Wait for the child; move its prepared folder to ``dest`` (absent) and return True.

        Raises the child's :class:`InputError` (the corpus is bad: same message as in-process).
        Returns False, having cleaned up, when the child failed otherwise or ``dest`` exists;
        the caller then prepares in-process.
        """
        try:
            self._proc.wait()
            self._replay_stderr()
            result = _read_result(self.folder / RESULT_FILE)
            said = result.get("warnings")
            for message in said if isinstance(said, list) else ():
                warn(str(message))
            if "error" in result:
                # the child wrote into its private folder, which is gone by now: the message
                # names the folder the prepared corpus goes to, as in-process preparation does
                error = str(result["error"]).replace(str(self.folder / OUT_DIR), str(dest))
                raise InputError(error)
            if self._proc.returncode != 0 or not result.get("ok") or dest.exists():
                return False
            os.replace(self.folder / OUT_DIR, dest)
            fsync_dir(dest.parent)
            return True
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stop the child (if running) and remove the private folder. Idempotent."""
        if self._done:
            return
        self._done = True
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _replay_stderr(self) -> None:
        if not self._relay:
            return
        try:
            text = (self.folder / STDERR_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()


# The child imports embedlab as the parent did; the folder holding this package is *appended*
# to its path, so an uninstalled source checkout works too, while an installed embedlab (and
# the standard library) keep precedence — prepending it via PYTHONPATH could shadow stdlib
# modules with same-named packages from site-packages.
_CHILD_CODE = ("import sys; sys.path.append(sys.argv[2]); from pathlib import Path; "
               "from embedlab.data.tokenise_child import _child; "
               "sys.exit(_child(Path(sys.argv[1])))")


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _read_result(path: Path) -> dict[str, object]:
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return result if isinstance(result, dict) else {}


def _sweep_orphans(parent: Path, run_name: str) -> None:
    """Remove private folders of parents that died (SIGKILL) together with their child."""
    for folder in parent.glob(f".{run_name}.prepare-*"):
        pid_text = folder.name.rsplit(".prepare-", 1)[1].split("-", 1)[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)):
            shutil.rmtree(folder, ignore_errors=True)


def _child(folder: Path) -> int:
    # Ctrl-C reaches the whole process group; the parent owns the terminal and decides
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    spec = json.loads((folder / SPEC_FILE).read_text(encoding="utf-8"))
    data = DataConfig(**spec["data"])
    from embedlab.data.preparing import prepare_into
    from embedlab.errors import collecting_warnings, messages_for

    # the parent says the warnings, to its caller: an EmbedlabWarning to a Python caller
    with collecting_warnings() as said, messages_for(spec.get("caller", "cli")):
        try:
            prepare_into(data.corpus, spec["out"], lowercase=data.lowercase,
                         min_count=data.min_count, max_vocab=data.max_vocab, unk=data.unk,
                         max_distinct=data.max_distinct, progress=spec["progress"],
                         run_dir=Path(spec["run_dir"]) if "run_dir" in spec else None)
            result: dict[str, object] = {"ok": True}
        except InputError as exc:
            result = {"error": str(exc)}
        except Exception as exc:  # reported once, by the parent's in-process retry
            # A traceback here would be replayed by the parent before its own attempt fails (or
            # succeeds): the user would read the same error twice, or an error that did not
            # matter. Its warnings too: the retry says them.
            result = {"failed": f"{type(exc).__name__}: {exc}"}
    if "failed" not in result and said:
        result["warnings"] = said
    if os.getppid() != spec["parent_pid"]:  # orphaned: nobody will adopt the folder
        shutil.rmtree(folder, ignore_errors=True)
        return 1
    atomic_write_text(folder / RESULT_FILE, json.dumps(result))
    return 0 if result.get("ok") else 2 if "error" in result else 1


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1])))
