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

STREAMS = ("init", "subsample", "window", "negatives", "shuffle", "eval", "demo")


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


def torch_generator(seed: int, stream: str, *counters: int):  # -> torch.Generator
    """A ``torch.Generator`` (CPU) seeded from the derived key (63 bits: torch wants int64)."""
    import torch

    g = torch.Generator(device="cpu")
    g.manual_seed(derive_key(seed, stream, *counters) & 0x7FFF_FFFF_FFFF_FFFF)
    return g
