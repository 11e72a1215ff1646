"""Training word2vec: set-up, the loop, and the state a checkpoint keeps.

Calling the package trains: ``embedlab.train(corpus="text8", dim=200, epochs=3)`` is
:func:`embedlab.train.api.train`, ``embedlab train`` in Python::

    embedlab.train(corpus=None, run=None, runs_dir="runs", preset=None, restart=False,
                   from_checkpoint=None, **options) -> TrainResult

The package and the function share the name ``embedlab.train``, so the package is a callable
module; its modules import as usual. Importing it imports nothing else.
"""

from __future__ import annotations

import os
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from embedlab.train.state import TrainResult


class _TrainPackage(types.ModuleType):
    def __call__(self, corpus: str | os.PathLike[str] | None = None,
                 run: str | os.PathLike[str] | None = None,
                 runs_dir: str | os.PathLike[str] = "runs", preset: str | None = None,
                 restart: bool = False, from_checkpoint: str | os.PathLike[str] | None = None,
                 **options: Any) -> TrainResult:
        """Train word2vec into a run folder, or resume it: see
        :func:`embedlab.train.api.train`."""
        from embedlab.train.api import train

        return train(corpus, run, runs_dir, preset, restart, from_checkpoint, **options)


sys.modules[__name__].__class__ = _TrainPackage
