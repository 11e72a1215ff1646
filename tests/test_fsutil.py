"""File helpers: digests agree with hashlib and stay in bounded memory; atomic writes get the
mode a plain open() gives (umask), not mkstemp's 0600."""

import contextlib
import errno
import hashlib
import os
import stat
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from embedlab import fsutil
from embedlab.errors import InputError
from embedlab.fsutil import atomic_write_text, current_umask, file_digest

BUF = 1 << 18  # hashlib.file_digest's buffer: sizes around it exercise the last partial read


@pytest.mark.parametrize("size", [0, 1, BUF - 1, BUF, BUF + 1, 3 * BUF + 5])
@pytest.mark.parametrize("algorithm", ["sha256", "sha1"])
def test_digest_matches_hashlib(tmp_path: Path, size: int, algorithm: str) -> None:
    data = bytes((i * 131 + 7) % 256 for i in range(size))
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_digest(path, algorithm) == hashlib.new(algorithm, data).hexdigest()


def test_digest_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    # A checkpoint's tensors are hashed at every save and every verification; reading the file
    # in fresh multi-MiB pieces kept two alive at once and raised the run's peak memory.
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        for i in range(24):
            f.write(bytes([i]) * (1 << 20))
    tracemalloc.start()
    try:
        file_digest(path, "sha256")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, f"hashing a 24 MiB file allocated {peak / 2**20:.1f} MiB at once"


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002, 0o027])
def test_atomic_write_gets_the_mode_open_would_give(tmp_path: Path, mask: int) -> None:
    # mkstemp creates 0600 files and the rename keeps that mode: exported vectors, config.json
    # and the checkpoint index were unreadable for everyone else under umask 022.
    with umask(mask):
        atomic_write_text(tmp_path / "atomic.txt", "x")
        (tmp_path / "plain.txt").write_text("x")
        atomic_write_text(tmp_path / "plain.txt", "y")  # replacing a file: the same rule
    assert _mode(tmp_path / "atomic.txt") == 0o666 & ~mask
    assert _mode(tmp_path / "plain.txt") == 0o666 & ~mask
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_current_umask_reads_proc_without_touching_the_umask(tmp_path: Path) -> None:
    # os.umask(x); os.umask(old) would race with file creation in other threads
    def no_umask(mask: int) -> int:
        raise AssertionError("os.umask called")

    with umask(0o027), pytest.MonkeyPatch.context() as mp:
        mp.setattr(fsutil.os, "umask", no_umask)
        assert current_umask() == 0o027


def test_current_umask_without_proc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # e.g. macOS, or a kernel before 4.7: the os.umask round trip
    monkeypatch.setattr(fsutil, "_PROC_STATUS", str(tmp_path / "missing"))
    with umask(0o027):
        assert current_umask() == 0o027
        assert current_umask() == 0o027  # the round trip put the umask back


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _socket(path: Path) -> Path:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the socket file stays
    return path


# Never tried on /dev/null or /dev/full: the tests run as root, and a failure would replace them.
@pytest.mark.parametrize(("make", "kind"), [(_fifo, "a FIFO"), (_socket, "a socket"),
                                            (Path.mkdir, "a folder")])
def test_atomic_write_never_replaces_a_non_regular_file(tmp_path: Path,
                                                        make: Callable[[Path], object],
                                                        kind: str) -> None:
    # os.replace renames over anything: `export --out /dev/null --force` left a regular file
    target = tmp_path / "special"
    make(target)
    before = os.lstat(target).st_mode
    with pytest.raises(InputError) as e:
        atomic_write_text(target, "x")
    assert str(e.value) == (f"{target} is not a regular file (it is {kind}); remove it or "
                            "choose another file path")
    assert os.lstat(target).st_mode == before
    assert [p.name for p in tmp_path.iterdir()] == ["special"]  # no temporary file was made


def test_atomic_write_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "file.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["file.txt", "link.txt", "real"]


def test_atomic_write_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "gone.txt")
    with pytest.raises(InputError) as e:
        atomic_write_text(link, "x")
    assert str(e.value) == (f"{link} is a symbolic link to {tmp_path}/gone.txt, which does not "
                            "exist; remove it or choose another file path")
    assert link.is_symlink() and [p.name for p in tmp_path.iterdir()] == ["link.txt"]


def test_a_device_is_refused_without_telling_the_user_to_move_it() -> None:
    with pytest.raises(InputError) as e:
        fsutil.output_target(Path("/dev/null"), "move it away or pick another --out")
    assert str(e.value) == ("/dev/null is not a regular file (it is a character device); pick "
                            "another --out")


@pytest.mark.parametrize(("code", "fix"), [
    (errno.ENOSPC, "free disk space or pass --out on another disk"),
    (errno.EDQUOT, "free space within your disk quota, or pass --out on another disk"),
    (errno.EROFS, "make the disk writable (it is mounted read-only), or pass --out on another "
                  "disk"),
    (errno.EIO, "check the disk (an input/output error: a failing disk, or a network file system "
                "that went away), or pass --out on another disk"),
    (errno.EFBIG, "raise the file size limit (ulimit -f unlimited) or pass --out on a file "
                  "system that takes larger files"),
    (errno.EACCES, "pass --out in a writable folder"),
])
def test_a_write_error_names_the_fix_of_its_cause(code: int, fix: str) -> None:
    from embedlab.fsutil import write_error

    message = str(write_error("v.txt", OSError(code, os.strerror(code)), "--out"))
    assert message == f"cannot write v.txt ({os.strerror(code)}); {fix}"


def test_a_sweeping_write_removes_what_killed_writers_of_that_file_left(tmp_path: Path) -> None:
    # an export killed outright (SIGKILL) leaves .v.bin.tmp-<pid>-*, an export's size, that
    # nothing removed: the next export to that path does, when their process has ended
    import subprocess
    import sys

    from embedlab.fsutil import atomic_open

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    gone = int(dead.stdout)
    left = tmp_path / f".v.bin.tmp-{gone}-abcd1234"
    left.write_bytes(b"half")
    live = tmp_path / f".v.bin.tmp-{os.getpid()}-efgh5678"  # a writer still at work
    live.write_bytes(b"busy")
    other = tmp_path / f".w.bin.tmp-{gone}-abcd1234"  # another file's: not this write's to judge
    other.write_bytes(b"half")
    with atomic_open(tmp_path / "v.bin") as fh:  # without sweep: left alone
        fh.write(b"1")
    assert left.exists()
    with atomic_open(tmp_path / "v.bin", sweep=True) as fh:
        fh.write(b"2")
    assert not left.exists() and live.exists() and other.exists()
    assert (tmp_path / "v.bin").read_bytes() == b"2"


def test_a_name_near_the_limit_gets_a_temporary_and_its_sweep(tmp_path: Path) -> None:
    """A 250-byte file name is legal; its temporary (``.NAME.tmp-<pid>-XXXX``) was not, and the
    write failed as "File name too long". The cut name is also what the sweep looks for."""
    import subprocess
    import sys

    from embedlab.fsutil import atomic_open, hidden_prefix

    name = "é" * 60 + "b" * 126 + ".txt"  # 250 bytes
    with atomic_open(tmp_path / name) as fh:
        fh.write(b"1")
    assert (tmp_path / name).read_bytes() == b"1"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    prefix = hidden_prefix(name, "tmp")
    assert len(os.fsencode(prefix)) < 230 and prefix.endswith(f".tmp-{os.getpid()}-")
    left = tmp_path / prefix.replace(f"-{os.getpid()}-", f"-{int(dead.stdout)}-")
    left.write_bytes(b"half")
    with atomic_open(tmp_path / name, sweep=True) as fh:
        fh.write(b"2")
    assert not left.exists() and sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_names_are_stamped_in_utc_whatever_the_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backups made from shells in two time zones sort by when they were made."""
    import re
    import time

    from embedlab.fsutil import name_stamp

    stamps = []
    for zone in ("Pacific/Chatham", "America/St_Johns"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        stamps.append(name_stamp())
    monkeypatch.delenv("TZ")
    time.tzset()
    assert all(re.fullmatch(r"\d{8}-\d{6}Z", s) for s in stamps)
    assert stamps[0] <= stamps[1] <= time.strftime("%Y%m%d-%H%M%SZ", time.gmtime())


@pytest.mark.parametrize("links", [True, False], ids=["hard-links", "no-hard-links"])
def test_a_file_made_meanwhile_is_not_replaced_without_replace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool) -> None:
    """Two exports to one new name: the later one is refused, not both told "wrote"."""
    from embedlab.errors import InputError

    if not links:  # FAT, some FUSE mounts: the check, then the rename
        def no_link(*args: object, **kwargs: object) -> None:
            raise OSError(errno.EPERM, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_link)
    out = tmp_path / "v.txt"
    refused = pytest.raises(InputError, match=r"was made by another command while this one "
                                              r"wrote it, and is left as it is; pass --force")
    with refused, fsutil.atomic_open(out, replace=False) as fh:
        fh.write(b"mine")
        out.write_bytes(b"theirs")  # the other command, done first
    assert out.read_bytes() == b"theirs" and os.listdir(tmp_path) == ["v.txt"]
    with fsutil.atomic_open(tmp_path / "w.txt", replace=False) as fh:  # nothing there: written
        fh.write(b"mine")
    assert (tmp_path / "w.txt").read_bytes() == b"mine"
    assert sorted(os.listdir(tmp_path)) == ["v.txt", "w.txt"]


def test_a_small_record_is_read_without_a_buffer_of_the_limit(tmp_path: Path) -> None:
    # status.json is read at every status write of a run: a buffer of the 16 MiB limit each
    # time would raise the training process's peak RSS by ~18 MiB (glibc keeps such blocks)
    path = tmp_path / "status.json"
    path.write_text('{"status": "running"}')
    tracemalloc.start()
    try:
        data = fsutil.read_record(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == b'{"status": "running"}'
    assert peak < 1 << 20, f"reading 21 bytes allocated {peak / 2**20:.1f} MiB at once"


@pytest.mark.parametrize("size", [0, 1, 1 << 16, (1 << 16) + 1, 200_000])
def test_a_record_up_to_its_limit_is_read_whole_and_one_byte_more_refused(
        tmp_path: Path, size: int) -> None:
    path = tmp_path / "r.json"
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    path.write_bytes(body)
    assert fsutil.read_record(path, limit=size) == body
    assert fsutil.read_record(path, limit=size + 70_000) == body
    if size:
        with pytest.raises(OSError) as exc:
            fsutil.read_record(path, limit=size - 1)
        assert exc.value.errno == errno.EFBIG


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_atomic_open_names_the_file_a_disk_error_hit(tmp_path: Path, code: int) -> None:
    """os.write and fsync name no file: the message names the file, so that an operator with
    several disks knows which one is full."""
    target = tmp_path / "status.json"
    with pytest.raises(OSError) as failed, fsutil.atomic_open(target):
        raise OSError(code, os.strerror(code))
    assert failed.value.filename == str(target) and failed.value.errno == code
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError) as failed, fsutil.atomic_open(target):
        raise OSError(errno.EBADF, "Bad file descriptor")  # not the disk's: left as it is
    assert failed.value.filename is None


def test_a_signal_after_a_folder_is_committed_still_removes_the_old_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C while the new folder's rename is made durable must not leave the old folder (a
    whole prepared corpus) hidden beside it, where nothing would remove it."""
    final, new = tmp_path / "out", tmp_path / ".out.tmp"
    final.mkdir()
    (final / "old.bin").write_bytes(b"old")
    new.mkdir()
    (new / "new.bin").write_bytes(b"new")

    def interrupted(path: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fsutil, "fsync_dir", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fsutil.commit_folder(new, final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (final / "new.bin").read_bytes() == b"new"
    monkeypatch.undo()
    # a signal handled as the rename itself returns: the same
    newer = tmp_path / ".out.tmp2"
    newer.mkdir()
    (newer / "newer.bin").write_bytes(b"newer")
    replace = os.replace

    def replaced_then_interrupted(src: Any, dst: Any) -> None:
        replace(src, dst)
        raise KeyboardInterrupt

    monkeypatch.setattr(fsutil.os, "replace", replaced_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        fsutil.commit_folder(newer, final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (final / "newer.bin").read_bytes() == b"newer"
