"""Randomness is state: every random draw is a pure function of (master seed, stream, counters).

Each consumer asks for a generator keyed by a *stream name* (``"init"``, ``"subsample"``,
``"window"``, ``"negatives"``, ``"shuffle"``...) and integer counters (epoch, chunk, step).
Because the key fully determines the draws:

* resume needs no RNG snapshot and no fast-forward — recompute the key and continue;
* streams are independent: drawing more negatives never shifts the initialisation;
* the recorded provenance is just ``(seed, stream names)``.

Keys are derived with SHA-256 so that neighbouring counters give unrelated streams.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from embedlab.errors import import_torch

STREAMS = ("init", "subsample", "window", "negatives", "shuffle", "eval", "demo")
#: the streams a run started before the batch specification draws from (its generator's); a
#: run of the specification draws from ``init`` and the specification's one key
LEGACY_STREAMS = ("init", "subsample", "window", "negatives")


def derive_key(seed: int, stream: str, *counters: int) -> int:
    """A 64-bit key for ``(seed, stream, counters)``; stable across platforms and versions."""
    h = hashlib.sha256()
    h.update(struct.pack("<q", int(seed)))
    h.update(stream.encode("utf-8"))
    for c in counters:
        h.update(struct.pack("<q", int(c)))
    return int.from_bytes(h.digest()[:8], "little")


def numpy_rng(seed: int, stream: str, *counters: int) -> np.random.Generator:
    """A counter-based NumPy generator (Philox) for one stream position."""
    return np.random.Generator(np.random.Philox(key=derive_key(seed, stream, *counters)))


def mt19937_rng(seed: int, stream: str, *counters: int) -> np.random.RandomState:
    """A Mersenne Twister in the state :func:`torch_generator` starts from, without torch.

    torch's CPU generator seeds MT19937 with the low 32 bits of its seed (the classic
    ``init_genrand``), as NumPy's legacy ``RandomState`` does with a 32-bit seed, so both yield
    the same stream of 32-bit words. The initial vectors are drawn from it
    (:func:`uniform_float32`): runs started by embedlab versions that drew them with torch
    restart from the same vectors, and the training process needs no torch import.
    """
    return np.random.RandomState(derive_key(seed, stream, *counters) & 0xFFFF_FFFF)


def uniform_float32(rng: np.random.RandomState, shape: tuple[int, ...],
                    rows_per_draw: int = 4096) -> np.ndarray:
    """U[0, 1) float32 values with the bits of ``torch.rand(shape, generator=g)`` for the
    generator ``rng`` mirrors (:func:`mt19937_rng`).

    torch turns each 32-bit word w into (w mod 2^24) · 2^-24 (exact in float32), one word per
    value in row-major order. Drawn a block of rows at a time, so the 32-bit words never exist
    for the whole matrix at once.
    """
    out = np.empty(shape, dtype=np.float32)
    flat = out.reshape(-1)
    step = max(1, rows_per_draw * int(np.prod(shape[1:])))
    for start in range(0, flat.size, step):
        words = rng.randint(0, 1 << 32, size=min(step, flat.size - start), dtype=np.uint32)
        words &= (1 << 24) - 1
        np.multiply(words, np.float32(2.0**-24), out=flat[start:start + len(words)],
                    casting="unsafe")
    return out


def torch_generator(seed: int, stream: str, *counters: int):  # -> torch.Generator
    """A ``torch.Generator`` (CPU) seeded from the derived key (63 bits: torch wants int64).

    PyTorch is optional; without it this is a one-line error naming the extra.
    """
    torch = import_torch("embedlab.seeding.torch_generator")
    g = torch.Generator(device="cpu")
    g.manual_seed(derive_key(seed, stream, *counters) & 0x7FFF_FFFF_FFFF_FFFF)
    return g


# Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
# counter-based generator, the one of Random123, cuRAND and Triton's tl.philox. Its output is a
# pure function of a 128-bit counter and a 64-bit key, so any thread, process or GPU computes
# the draw of any position directly (the batch specification, docs/batches.md).
PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # round multipliers
PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # key schedule increments (golden ratio, sqrt(3) - 1)
_LOW32 = np.uint64(0xFFFF_FFFF)


def philox4x32(c0: np.ndarray | int, c1: np.ndarray | int, c2: np.ndarray | int,
               c3: np.ndarray | int, key: tuple[int, int], rounds: int = 10
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four 32-bit words (uint32 arrays) of Philox-4x32 at counters ``(c0, c1, c2, c3)``
    (arrays broadcast together, or integers < 2^32) with key ``(k0, k1)``."""
    x = [np.asarray(c, dtype=np.uint64) & _LOW32 for c in np.broadcast_arrays(c0, c1, c2, c3)]
    k0, k1 = key[0] & 0xFFFF_FFFF, key[1] & 0xFFFF_FFFF
    m0, m1 = np.uint64(PHILOX_M[0]), np.uint64(PHILOX_M[1])
    for r in range(rounds):
        if r:  # the key is bumped before every round but the first
            k0, k1 = (k0 + PHILOX_W[0]) & 0xFFFF_FFFF, (k1 + PHILOX_W[1]) & 0xFFFF_FFFF
        p0, p1 = m0 * x[0], m1 * x[2]  # 32 x 32 -> 64-bit products
        x = [(p1 >> np.uint64(32)) ^ x[1] ^ np.uint64(k0), p1 & _LOW32,
             (p0 >> np.uint64(32)) ^ x[3] ^ np.uint64(k1), p0 & _LOW32]
    return tuple(w.astype(np.uint32) for w in x)  # type: ignore[return-value]


def philox_key(seed: int, stream: str) -> tuple[int, int]:
    """The Philox key of ``(seed, stream)``: :func:`derive_key`'s 64 bits as (low, high) words."""
    k = derive_key(seed, stream)
    return k & 0xFFFF_FFFF, k >> 32
