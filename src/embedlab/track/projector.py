"""TensorBoard's embedding projector: ``RUN/projector_config.pbtxt`` and one folder per step,
``RUN/<step:05d>/input_embeddings/{tensors,metadata}.tsv``, in the layout of torch's
``SummaryWriter.add_embedding``.

``projector_config.pbtxt`` never lists a step folder that is missing or half written, whenever
the process is killed: a step's files are complete before the config (rewritten atomically)
names them, and on resume the config stops naming abandoned steps before their folders go.
TensorBoard's projector reads every listed file to answer ``/data/plugin/projector/runs``; one
missing file makes it fail (HTTP 500) for every run in the logdir.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedlab.fsutil import atomic_open, atomic_write_text

PROJECTOR_CONFIG = "projector_config.pbtxt"
PROJECTOR_TAG = "input_embeddings"


class Projector:
    """The run's projector entries, one per step, each written once."""

    def __init__(self, run_dir: Path, resume_step: int) -> None:
        self._run_dir = run_dir
        self._config = trim_projector(run_dir, resume_step)
        self._steps = {projector_step(e.tensor_path) for e in self._config.embeddings}

    def add(self, step: int, words: Sequence[str], counts: np.ndarray,
            vectors: np.ndarray, *, only: bool = False) -> None:
        """The entry of ``step``: ``vectors`` (one row per word) with word and count metadata;
        a step already listed is left as it is. ``only``: this entry replaces the others (the
        end of a run, or of its ``--max-steps`` slice: a run trained in many slices keeps the
        latest, not one folder of text per slice)."""
        if step in self._steps:
            return
        # torch's add_embedding wrote the config in place before it was done with the tensors
        # (a kill left it naming a half-written file, or torn), and the values one
        # `str(x.item())` at a time: the same layout and formats, written here instead.
        subdir = f"{step:05d}/{PROJECTOR_TAG}"
        folder = self._run_dir / subdir
        folder.mkdir(parents=True, exist_ok=True)
        rows = [f"{w}\t{int(c)}" for w, c in zip(words, counts, strict=True)]
        atomic_write_text(folder / "metadata.tsv", "\n".join(["word\tcount", *rows]) + "\n")
        with atomic_open(folder / "tensors.tsv") as f:
            # 9 significant digits: exact for float32
            np.savetxt(f, vectors, fmt="%.9g", delimiter="\t")
        if only:
            del self._config.embeddings[:]
        info = self._config.embeddings.add()
        info.tensor_name = f"{PROJECTOR_TAG}:{step:05d}"
        info.tensor_path = f"{subdir}/tensors.tsv"
        info.metadata_path = f"{subdir}/metadata.tsv"
        _write_config(self._run_dir, self._config)  # last: the files are complete
        if only:  # once the config no longer names them
            for old in self._steps:
                shutil.rmtree(self._run_dir / f"{old:05d}", ignore_errors=True)
            self._steps.clear()
        self._steps.add(step)


def projector_step(tensor_path: str) -> int:
    """The step of an entry (``<zero-padded step>/<tag>/tensors.tsv``), -1 if not a step's."""
    head = tensor_path.split("/", 1)[0]
    return int(head) if head.isdigit() else -1


def has_projector(run_dir: Path) -> bool:
    """True if the run has a projector config or step folders."""
    return (run_dir / PROJECTOR_CONFIG).exists() or any(
        p.name.isdigit() and (p / PROJECTOR_TAG).is_dir() for p in run_dir.glob("[0-9]*"))


def trim_projector(run_dir: Path, resume_step: int) -> Any:
    """Drop the projector entries after ``resume_step``; return the kept ``ProjectorConfig``.

    The trimmed config is written (atomically) *before* the abandoned step folders are removed,
    so a kill in between leaves unlisted folders, never a listed folder that is gone. Step
    folders after ``resume_step`` that the config does not list (a kill after their files were
    written, before the config named them) go too. An unreadable config (written by an older
    embedlab, whose writes were not atomic) is rebuilt from the complete step folders kept.
    """
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    path = run_dir / PROJECTOR_CONFIG
    folders = {int(p.name): p for p in run_dir.glob("[0-9]*")
               if p.name.isdigit() and (p / PROJECTOR_TAG).is_dir()}
    kept = ProjectorConfig()
    old = _read_config(path)
    if old is not None:
        for e in old.embeddings:
            if 0 <= projector_step(e.tensor_path) <= resume_step:
                kept.embeddings.add().CopyFrom(e)
    else:
        for step in sorted(s for s in folders if s <= resume_step):
            subdir = f"{folders[step].name}/{PROJECTOR_TAG}"
            if (run_dir / subdir / "tensors.tsv").is_file() and \
                    (run_dir / subdir / "metadata.tsv").is_file():
                e = kept.embeddings.add()
                e.tensor_name = f"{PROJECTOR_TAG}:{folders[step].name}"
                e.tensor_path = f"{subdir}/tensors.tsv"
                e.metadata_path = f"{subdir}/metadata.tsv"
    if path.exists() and (old is None or kept != old):
        _write_config(run_dir, kept)
    for step, folder in sorted(folders.items()):
        if step > resume_step:
            shutil.rmtree(folder, ignore_errors=True)
    return kept


def _read_config(path: Path) -> Any:
    """The ``ProjectorConfig`` in ``path``; None if there is none or it cannot be parsed."""
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    if not path.exists():
        return None
    try:
        return text_format.Parse(path.read_text(encoding="utf-8"), ProjectorConfig())
    except (text_format.ParseError, UnicodeDecodeError):
        return None


def _write_config(run_dir: Path, config: Any) -> None:
    from google.protobuf import text_format

    atomic_write_text(run_dir / PROJECTOR_CONFIG, text_format.MessageToString(config))
