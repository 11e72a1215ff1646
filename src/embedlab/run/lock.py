"""One trainer per run folder: ``RUN/.lock``.

The lock is an ``flock`` on ``RUN/.lock``; the file also records who holds it (JSON: pid, host,
start time, command line) so a refusal can name the holder. The kernel drops an ``flock`` when
its process dies, so a lock file left by a killed process is *stale*: the next trainer takes it
over with a one-line warning. A lock recorded by another host is never taken over (its pid
cannot be checked from here); the message says to delete the file once that process is gone.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from embedlab.errors import InputError, python_caller, spell_name, warn
from embedlab.fsutil import read_record

LOCK_FILE = ".lock"


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists on this host (it may belong to another user)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_lock(run_dir: Path | str) -> dict[str, Any] | None:
    """The holder recorded in ``RUN/.lock`` (None when absent or unreadable)."""
    try:
        # a regular file only: a FIFO .lock (a run folder from someone else) blocks for ever
        data = json.loads(read_record(Path(run_dir) / LOCK_FILE).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


#: tries, and seconds between them, of an exclusive lock another process holds: a reader's
#: probe (:meth:`RunLock.held_by`, ``embedlab runs``) holds a shared one for microseconds, a
#: trainer for the whole run
_LOCK_TRIES, _LOCK_WAIT = 20, 0.005


def _lock_exclusive(fd: int) -> None:
    """flock(LOCK_EX) without blocking, tried again for a moment: a probe's shared lock is
    not a holder."""
    for attempt in range(_LOCK_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK) or \
                    attempt == _LOCK_TRIES - 1:
                raise
            time.sleep(_LOCK_WAIT)


class RunInUse(InputError):
    """The run is locked by another live process (or another call of this one)."""


class RunLock:
    """Context manager holding ``RUN/.lock`` for the lifetime of a trainer.

    Raises :class:`InputError` ("run DIR is in use by pid N; ...") when another live process
    holds it. On exit the file is removed, so a lock file that outlives its process is stale.
    """

    def __init__(self, run_dir: Path | str, *, argv: list[str] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.argv = list(argv if argv is not None else sys.argv)
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                # O_NOFOLLOW: a .lock that is a symbolic link (a run folder received from
                # someone) would have this process truncate and write the file it points to
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise InputError(f"{self.path} is a symbolic link, not the run's lock file "
                                     "(which would write through it to the file it points "
                                     f"to); remove the link (rm {shlex.quote(str(self.path))}) "
                                     "and re-run") from None
                if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                    raise
                # a read-only run folder: training writes into it; reading it does not
                raise InputError(f"run {self.run_dir} is not writable ({exc.strerror}: "
                                 f"{self.path}), and a run is written while it trains; make "
                                 "it writable, or copy it somewhere writable (eval, export and "
                                 "neighbors read it as it is)") from None
            try:
                _lock_exclusive(fd)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise self._busy() from None
            # The holder may have unlinked the file between our open and flock; then we hold a
            # lock on a dead inode. Retry until the locked inode is the one at the path.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._fd = fd
        try:
            self._take_over_if_stale()
            self._write_record()
        except BaseException:
            # a full disk, or a signal, while the record is written: __exit__ never runs for
            # a failed __enter__, so the lock (and a new run's folder with it) would stay
            self.release()
            raise
        return self

    @staticmethod
    def held_by(run_dir: Path | str) -> dict[str, Any] | None:
        """The record of the process that holds the run's lock now (a trainer), or None; takes
        nothing: a shared lock asked for and given back at once, which only a trainer's
        exclusive one refuses."""
        try:
            fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return read_lock(run_dir) or {}
            return None
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    @staticmethod
    def refuse_if_held(run_dir: Path | str) -> None:
        """Raise the "in use" :class:`InputError` when a live process holds the run's lock, so
        that a command refused for another reason first (a ``--from`` step that is not there)
        names the real obstacle; nothing is taken (see :meth:`held_by`)."""
        if RunLock.held_by(run_dir) is not None:
            raise RunLock(run_dir)._busy()

    def _busy(self) -> RunInUse:
        holder = read_lock(self.run_dir) or {}
        pid = holder.get("pid", "?")
        host = holder.get("host", "?")
        where = "" if host == socket.gethostname() else f" on host {host}"
        if pid == os.getpid() and not where and python_caller():
            # another thread of the program calling embedlab.train (a notebook's)
            return RunInUse(f"run {self.run_dir} is in use by another call in this process "
                              f"(pid {pid}); wait for that call to return, or use another "
                              f"{spell_name('--run')}")
        return RunInUse(f"run {self.run_dir} is in use by pid {pid}{where}; wait for it to "
                          "finish or stop it (Ctrl-C saves and exits), or use another "
                          f"{spell_name('--run')}")

    def _take_over_if_stale(self) -> None:
        old = read_lock(self.run_dir)
        if not old or old.get("pid") == os.getpid():
            return
        pid, host = old.get("pid"), old.get("host")
        if host != socket.gethostname():
            assert self._fd is not None
            os.close(self._fd)  # keep the other host's record: do not unlink
            self._fd = None
            raise InputError(f"run {self.run_dir} is locked by pid {pid} on host {host}; if that "
                             f"process is gone, delete {self.path} and re-run")
        # a pid that is alive without the lock: reused by another process, or an exited
        # trainer no parent has reaped yet (a zombie keeps its pid but no open files)
        state = "is no longer running" if not (isinstance(pid, int) and pid_alive(pid)) else (
            "no longer holds the lock (it has exited, or its pid was reused)")
        warn(f"taking over the stale lock of {self.run_dir} from pid {pid} (started "
             f"{old.get('started', '?')}), which {state}")

    def _write_record(self) -> None:
        assert self._fd is not None
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": self.argv}
        data = json.dumps(record).encode("utf-8")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)

    def release(self) -> None:
        if self._fd is None:
            return
        # Unlink while still holding the flock, so nobody can lock the old inode afterwards.
        # One that cannot go (a folder made read-only while the run trained) stays: unlocked,
        # the next trainer takes it over; raised here, it would hide the error that ended the
        # run (a failed write of status.json, say) behind one about the lock file.
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None

    def moved_to(self, run_dir: Path | str) -> None:
        """The held run folder was renamed (``--restart``): the lock file, and so the flock,
        went with it; point at its new path, so that :meth:`release` unlinks that file and not
        whatever a new run later puts at the old path."""
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
