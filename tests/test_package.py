"""The package's own names: what ``import embedlab`` offers a caller, and that it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import embedlab


def test_every_public_name_resolves_and_is_listed() -> None:
    """A typed caller names the classes it meets from the package (``embedlab.TrainResult``);
    ``dir()``, ``help()`` and a REPL's completion list them, though they load lazily."""
    from embedlab.checkpoint.manager import CheckpointInfo
    from embedlab.eval.analogy import AnalogyResult
    from embedlab.eval.similarity import SimilarityResult
    from embedlab.training.reporting import Progress
    from embedlab.training.state import TrainResult
    from embedlab.vectors import UnknownWordError, Vectors
    from embedlab.vectors_gensim import MissingFileError

    for cls in (CheckpointInfo, AnalogyResult, SimilarityResult, Progress, TrainResult,
                UnknownWordError, Vectors, MissingFileError):
        assert getattr(embedlab, cls.__name__) is cls
    assert set(embedlab.__all__) <= set(dir(embedlab))
    assert all(getattr(embedlab, name) is not None for name in embedlab.__all__)


def test_import_embedlab_loads_none_of_the_lazy_modules() -> None:
    probe = ("import sys, embedlab; print(sorted(m for m in sys.modules if m in "
             "set(embedlab._LAZY.values()) or m in ('numpy', 'torch')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out == "[]\n"
