"""RunLock: one trainer per run folder; stale locks of dead processes are taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from embedlab.errors import InputError
from embedlab.run.lock import LOCK_FILE, RunLock, pid_alive, read_lock


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not pid_alive(proc.pid)
    return proc.pid


def test_records_holder_and_removes_file(tmp_path: Path) -> None:
    with RunLock(tmp_path, argv=["embedlab", "train"]) as lock:
        rec = read_lock(tmp_path)
        assert rec is not None and rec["pid"] == os.getpid()
        assert rec["host"] == socket.gethostname() and rec["argv"] == ["embedlab", "train"]
        assert lock.held
    assert not (tmp_path / ".lock").exists()


def test_live_holder_refused(tmp_path: Path) -> None:
    code = ("import sys, time; from embedlab.run.lock import RunLock\n"
            f"with RunLock({str(tmp_path)!r}):\n    print('ok', flush=True); time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ok"
        with pytest.raises(InputError, match=rf"run {tmp_path} is in use by pid {proc.pid}; wait"):
            RunLock(tmp_path).acquire()
        assert read_lock(tmp_path)["pid"] == proc.pid  # type: ignore[index]
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    # Killed without cleanup: the file stays, the kernel lock is gone -> stale, taken over.
    assert (tmp_path / ".lock").exists()
    with RunLock(tmp_path):
        assert read_lock(tmp_path)["pid"] == os.getpid()  # type: ignore[index]


def test_stale_lock_taken_over_with_warning(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    pid = _dead_pid()
    (tmp_path / ".lock").write_text(json.dumps({"pid": pid, "host": socket.gethostname(),
                                                "started": "2024-01-01T00:00:00"}))
    with RunLock(tmp_path):
        assert read_lock(tmp_path)["pid"] == os.getpid()  # type: ignore[index]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"stale lock of {tmp_path} from pid {pid}" in err
    assert "no longer running" in err


def test_a_lock_recorded_by_a_live_pid_that_holds_no_lock_is_taken_over(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A killed trainer no parent has reaped yet (a zombie) keeps its pid, as does a process
    that got a recycled pid: neither holds the lock, and the warning does not claim which."""
    proc = subprocess.Popen(["sleep", "0"])
    try:
        time.sleep(0.2)  # exited, not reaped: a zombie with a live pid
        (tmp_path / ".lock").write_text(json.dumps({"pid": proc.pid, "host": socket.gethostname(),
                                                    "started": "2024-01-01T00:00:00"}))
        with RunLock(tmp_path):
            pass
    finally:
        proc.wait()
    err = capsys.readouterr().err
    assert f"from pid {proc.pid} (started 2024-01-01T00:00:00), which no longer holds the lock " \
        "(it has exited, or its pid was reused)" in err


def test_other_host_not_taken_over(tmp_path: Path) -> None:
    rec = {"pid": 1, "host": "elsewhere.example", "started": "x"}
    (tmp_path / ".lock").write_text(json.dumps(rec))
    with pytest.raises(InputError, match=r"on host elsewhere\.example; if that process is gone"):
        RunLock(tmp_path).acquire()
    assert json.loads((tmp_path / ".lock").read_text()) == rec  # their record is untouched


def test_garbage_lock_file_is_stale(tmp_path: Path) -> None:
    (tmp_path / ".lock").write_text("{torn")
    with RunLock(tmp_path):
        pass
    t0 = time.monotonic()
    with RunLock(tmp_path), pytest.raises(InputError, match="in use by pid"):
        RunLock(tmp_path).acquire()  # second acquire in the same process is refused too
    assert time.monotonic() - t0 < 5


def test_a_record_that_cannot_be_written_leaves_no_lock_nor_new_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A full disk (or a signal) while the lock's record is written: a failed ``__enter__`` has
    no ``__exit__``, so the lock must release itself, and the new run's folder goes."""
    import errno

    from embedlab.cli import main
    from embedlab.testing import write_zipf_corpus

    def full(self: RunLock) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunLock, "_write_record", full)
    with pytest.raises(OSError):
        RunLock(tmp_path / "a").acquire()
    assert list((tmp_path / "a").iterdir()) == []
    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=50)
    with pytest.raises(SystemExit) as info:
        main(["train", "--corpus", str(corpus), "--run", str(tmp_path / "runs" / "new"),
              "--threads", "1", "--no-tensorboard"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "No space left" in err
    assert not (tmp_path / "runs").exists()


def test_a_read_only_run_folder_is_one_line_naming_what_still_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    real = os.open

    def read_only(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith(".lock"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(InputError) as e:
        RunLock(tmp_path).acquire()
    assert str(e.value) == (f"run {tmp_path} is not writable (Read-only file system: "
                            f"{tmp_path / '.lock'}), and a run is written while it trains; make "
                            "it writable, or copy it somewhere writable (eval, export and "
                            "neighbors read it as it is)")


def test_a_readers_probe_of_the_lock_does_not_refuse_a_trainer(tmp_path: Path) -> None:
    """`embedlab runs` and the queries probe the lock with a shared flock for a moment; a
    trainer starting in that moment waits it out instead of calling the run in use."""
    import fcntl
    import threading

    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text("")
    fd = os.open(run / LOCK_FILE, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # a probe, released 30 ms later
    timer = threading.Timer(0.03, lambda: (fcntl.flock(fd, fcntl.LOCK_UN), os.close(fd)))
    timer.start()
    try:
        with RunLock(run, argv=["test"]) as lock:
            assert lock.held
    finally:
        timer.join()


def test_a_run_held_by_another_call_of_this_process_says_so(tmp_path: Path) -> None:
    """Two threads of one program (a notebook) training one run: the holder is this process,
    which Ctrl-C would stop as a whole; the message names the other call."""
    from embedlab.errors import messages_for

    run = tmp_path / "run"
    with RunLock(run, argv=["test"]), messages_for("python"), pytest.raises(InputError) as e:
        RunLock(run, argv=["test"]).acquire()
    assert str(e.value) == (f"run {run} is in use by another call in this process (pid "
                            f"{os.getpid()}); wait for that call to return, or use another run")


def test_a_lock_file_that_cannot_be_removed_does_not_hide_the_error_that_ended_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run folder made read-only while the run trained: the failed write that stopped it is
    what the caller hears, not the lock file's unlink; the file stays, unlocked, for the next
    trainer to take over."""
    def refused(path: object) -> None:
        raise PermissionError(1, "Operation not permitted", str(path))

    with pytest.raises(ValueError, match="the write that failed"), RunLock(tmp_path):
        monkeypatch.setattr(os, "unlink", refused)
        raise ValueError("the write that failed")
    monkeypatch.undo()
    assert (tmp_path / LOCK_FILE).exists()
    with RunLock(tmp_path) as again:  # not held by anyone: taken
        assert again.held


def test_a_lock_that_is_a_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    # a run folder from someone else with .lock -> ~/.bashrc: acquiring it truncated and
    # rewrote that file
    run = tmp_path / "run"
    run.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / ".lock").symlink_to(victim)
    with pytest.raises(InputError, match=r"\.lock is a symbolic link, not the run's lock file"):
        RunLock(run).acquire()
    assert victim.read_text() == "precious\n"


def test_a_fifo_lock_or_status_is_not_read(tmp_path: Path) -> None:
    # a run folder from someone else: reading the holder's record blocked for ever
    from embedlab.run.status import read_status

    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / LOCK_FILE)
    os.mkfifo(run / "status.json")
    assert read_lock(run) is None and read_status(run) == {}
