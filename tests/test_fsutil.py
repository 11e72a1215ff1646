"""File helpers: digests agree with hashlib and stay in bounded memory."""

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from embedlab.fsutil import file_digest

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
