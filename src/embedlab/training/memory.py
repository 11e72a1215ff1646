"""Give memory that malloc keeps, free but resident, back to the operating system.

The producer of NumPy batches (the torch engine's, and those of runs started before the batch
specification) builds each chunk's arrays (a few MiB each) in its own thread, so glibc serves
them from that thread's arena, and its dynamic mmap threshold soon serves them from the heap
rather than from mmap. When a chunk is done the memory is free but stays resident: the main
thread, which writes checkpoint summaries, cannot reuse another arena's free space, so the final
checkpoint's summaries would set the run's peak memory (docs/performance.md).

Not done with ``mallopt`` (a fixed 128 KiB mmap threshold): that returns every chunk's arrays at
once, but mapping them afresh multiplies the page faults.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None)  # the C library this process already uses
    except OSError:
        return None
    fn = getattr(libc, "malloc_trim", None)  # glibc only; musl and macOS have none
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def release_free_memory() -> bool:
    """Return freed heap memory of every malloc arena to the OS; False where malloc cannot.

    Cheap (a walk over the free lists and a few ``madvise`` calls); pages given back are faulted
    in again only if malloc reuses them.
    """
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
