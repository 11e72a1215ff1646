"""release_free_memory gives a thread's freed malloc memory back (glibc, which CI runs)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


# Run in a fresh interpreter: glibc's thresholds and arenas are process state, and what earlier
# tests allocated (trainings with their own threads) decides whether this one's blocks are kept.
SCENARIO = """
import threading
from pathlib import Path

import numpy as np

from embedlab.train.memory import release_free_memory


def anon_mib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024


def work():
    # What the batch producer does: a big array freed (glibc then raises its mmap threshold),
    # then MiB-sized arrays from the heap of the thread's own arena, freed except the last
    # (which keeps the arena from shrinking at its top).
    first = np.ones(8 << 20, dtype=np.uint8)
    del first
    blocks = [np.ones(1 << 20, dtype=np.uint8) for _ in range(48)]
    held.append(np.ones(1 << 20, dtype=np.uint8))
    blocks.clear()


held = []
t = threading.Thread(target=work)
t.start()
t.join()
before = anon_mib()
released = release_free_memory()
print(released, before - anon_mib())
"""


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's; elsewhere the call is a no-op")
def test_freed_memory_of_another_thread_goes_back_to_the_os() -> None:
    out = subprocess.run([sys.executable, "-c", SCENARIO], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "True"
    assert float(out[1]) >= 24, out  # 48 MiB freed; without the trim nothing goes back


def test_without_malloc_trim_it_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    # where malloc cannot trim (musl, macOS) the trainer must still run: False, no exception
    import ctypes

    import embedlab.train.memory as memory

    class NoTrim:  # a C library without malloc_trim
        pass

    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", lambda *_: NoTrim())
    try:
        assert memory.release_free_memory() is False
    finally:
        memory._malloc_trim.cache_clear()
