"""The linear regression's configuration. Torch-free: `embedlab runs` reads linreg runs'
configs without importing the model."""

from __future__ import annotations

import math
from dataclasses import dataclass

from embedlab.config import MAX_INT
from embedlab.errors import InputError

LINREG_MODEL = "linreg"  # config.json's "model" of a linreg run
# Keys whose change would alter the result of a resumed run (steps may be raised or lowered).
LINREG_FIXED_ON_RESUME = ("lr", "batch_size", "seed")


@dataclass(frozen=True)
class LinRegConfig:
    """Hyperparameters. ``steps`` counts SGD updates (one minibatch each)."""

    steps: int = 2000
    lr: float = 0.01
    batch_size: int = 16
    seed: int = 1
    checkpoint_every: int = 500  # steps; whichever of this and checkpoint_secs comes first
    checkpoint_secs: float = 120.0
    keep: int = 5

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "checkpoint_every", "keep"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= MAX_INT:
                flag = name.replace("_", "-")
                example = {"steps": 2000, "batch_size": 16, "checkpoint_every": 500,
                           "keep": 5}[name]  # the defaults
                raise InputError(f"--{flag} must be an integer from 1 to {MAX_INT}, got "
                                 f"{value!r}; pass e.g. --{flag} {example}")
        for name in ("lr", "checkpoint_secs"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                default = {"lr": 0.01, "checkpoint_secs": 120}[name]
                raise InputError(f"--{name.replace('_', '-')} must be a finite number > 0, "
                                 f"got {value!r}; pass e.g. --{name.replace('_', '-')} "
                                 f"{default}")
        if not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_INT:
            raise InputError(f"--seed must be an integer from 0 to {MAX_INT}, got {self.seed!r}; "
                             "pass e.g. --seed 1")
