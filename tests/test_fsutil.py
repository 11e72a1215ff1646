"""File helpers: digests agree with hashlib and stay in bounded memory; atomic writes get the
mode a plain open() gives (umask), not mkstemp's 0600."""

import contextlib
import hashlib
import os
import stat
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedlab import fsutil
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
