"""embedlab: word2vec with first-class experiment management.

The public Python API is deliberately small: :func:`load` returns a vectors object (see
:mod:`embedlab.vectors`), ``embedlab.train(...)`` trains a run as ``embedlab train`` does
(see :func:`embedlab.training.api.train`), and :func:`checkpoints` lists a run's checkpoints as
``embedlab ckpt RUN`` does. Refusals raise :class:`InputError` (a ``ValueError``), a saved stop
:class:`TrainingInterrupted`; what the user should know but that does not stop the call is an
:class:`EmbedlabWarning` (Python's ``warnings``). Everything else is reached through the
``embedlab`` CLI.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from embedlab.errors import (
    EmbedlabWarning,
    InputError,
    MissingFileError,
    TrainingInterrupted,
    TrainingStoppedByError,
)

# Bitwise reproducibility of MKL, which PyTorch's CPU GEMMs call: without these MKL may choose a
# kernel by memory alignment, or fewer threads under load, per call — and so sum in another
# order. Set before torch first calls MKL; a user's own setting wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
os.environ.setdefault("MKL_DYNAMIC", "FALSE")

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from embedlab.checkpoint.manager import CheckpointInfo
    from embedlab.eval.analogy import AnalogyResult
    from embedlab.eval.similarity import SimilarityResult
    from embedlab.training.api import Corpus
    from embedlab.training.reporting import Progress
    from embedlab.training.state import TrainResult
    from embedlab.vectors import UnknownWordError, Vectors


def load(path: str | os.PathLike[str], *, step: int | np.integer | None = None,
         best: bool = False, limit: int | np.integer | None = None, encoding: str = "utf-8",
         **gensim_options: Any) -> Vectors:
    """Load word vectors from a run folder, a checkpoint folder, a word2vec text or binary file
    (also ``.gz``, ``.bz2``, ``.xz``; text or binary is told from the content) or a ``.npy``
    export with its ``.vocab.tsv``: a :class:`~embedlab.vectors.Vectors`, which answers
    gensim's ``KeyedVectors`` calls. For a run folder, ``step`` picks the checkpoint of that
    step and ``best=True`` the best one (default: the newest verified). ``limit=N`` keeps the
    first N words, as gensim's ``load_word2vec_format(limit=N)`` (a run's N most frequent);
    ``encoding``: a word2vec file's words' encoding (gensim's ``encoding=``); gensim's other
    options (``binary=``...) are refused saying what to do instead. See
    :func:`embedlab.vectors.load`.

    Imported lazily so that ``import embedlab`` stays cheap (no torch import).
    """
    from embedlab.vectors import load as _load

    return _load(path, step=step, best=best, limit=limit, encoding=encoding, **gensim_options)


def checkpoints(run: str | os.PathLike[str]) -> list[CheckpointInfo]:
    """The checkpoints of the run folder ``run``, oldest first, each verified (sha256 of its
    files against its manifest): ``step``, ``path``, ``time`` (Unix seconds), ``size``,
    ``roles`` (``latest``, ``best``, ...) and ``verified`` with the ``problem`` when it is not,
    as ``embedlab ckpt RUN`` lists them. ``embedlab.load(run, step=N)`` loads one."""
    from embedlab.checkpoint.load import list_checkpoints

    return list_checkpoints(run)


def train(corpus: Corpus | None = None, run: str | os.PathLike[str] | None = None,
          runs_dir: str | os.PathLike[str] = "runs", preset: str | None = None,
          restart: bool = False,
          from_checkpoint: str | os.PathLike[str] | int | np.integer | None = None,
          *, device: str | None = None, on_progress: Callable[[Progress], object] | None = None,
          no_eval: bool = False, no_probe: bool = False, **options: Any) -> TrainResult:
    """Train word2vec into a run folder, or resume the run there: ``embedlab train`` in Python.

    ``corpus``: a file or folder of text, a prepared folder, ``"demo"``, ``"text8"``, or an
    iterable of token lists (gensim's ``sentences``). ``from_checkpoint``: a checkpoint of the
    run to resume from (its step, its folder or ``"best"``). ``device``: ``"auto"``, ``"cpu"``
    or ``"cuda"``. ``on_progress``: called with a ``Progress`` at each logging window and once
    at the end. ``no_eval``, ``no_probe``: a resumed run drops its evaluation or probe words.
    Options are the command's flags with underscores (``dim=100``, ``epochs=5``,
    ``threads=2``...). Refusals raise :class:`InputError`; Ctrl-C saves and raises
    :class:`TrainingInterrupted`. See :func:`embedlab.training.api.train`. Imported lazily, so
    that ``import embedlab`` stays cheap.

    The options, each a flag of ``embedlab train`` (``embedlab train --help`` says what it
    does): ``lowercase``, ``min_count``, ``max_vocab``, ``unk``, ``max_distinct``, ``model``,
    ``loss``, ``dim``, ``window``, ``negative``, ``shared_negatives``, ``negative_group``,
    ``noise_exponent``, ``sample``, ``init``, ``init_scale``, ``lr``, ``min_lr_ratio``,
    ``epochs``, ``batch_size``, ``interleave``, ``micro_batches``, ``checkpoint_every``,
    ``checkpoint_secs``, ``keep``, ``keep_every``, ``best_metric``, ``log_every``,
    ``tensorboard``, ``probe``, ``projector_words``, ``projector_each_checkpoint``,
    ``progress``, ``eval_every``, ``eval_analogies``, ``eval_similarity``,
    ``eval_restrict_vocab``, ``seed``, ``threads``, ``engine``, ``max_steps``, ``init_from``.
    """
    from embedlab.training.api import train as _train

    return _train(corpus, run, runs_dir, preset, restart, from_checkpoint,
                  device=device, on_progress=on_progress, no_eval=no_eval, no_probe=no_probe,
                  **options)


#: the classes a caller meets (what :func:`load`, :func:`train` and :func:`checkpoints` return,
#: what they raise), each imported from its module when first asked for: ``import embedlab``
#: stays cheap, and a typed caller names them from here (``embedlab.TrainResult``)
_LAZY = {
    "Vectors": "embedlab.vectors",
    "UnknownWordError": "embedlab.vectors",
    "TrainResult": "embedlab.training.state",
    "Progress": "embedlab.training.reporting",
    "CheckpointInfo": "embedlab.checkpoint.manager",
    "AnalogyResult": "embedlab.eval.analogy",
    "SimilarityResult": "embedlab.eval.similarity",
}


def __getattr__(name: str) -> Any:
    """The classes of :data:`_LAZY`, imported when first asked for."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'embedlab' has no attribute {name!r}")


def __dir__() -> list[str]:  # dir(), help() and a REPL's completion list the lazy names too
    return sorted({*globals(), *_LAZY})


__all__ = ["AnalogyResult", "CheckpointInfo", "EmbedlabWarning", "InputError", "MissingFileError",
           "Progress", "SimilarityResult", "TrainResult", "TrainingInterrupted",
           "TrainingStoppedByError", "UnknownWordError", "Vectors", "__version__", "checkpoints",
           "load", "train"]
