"""Sample checkpoints for the checkpoint tests: small tensors, a save, a re-signed manifest."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck

from embedlab.checkpoint import CheckpointManager
from embedlab.checkpoint import format as ckpt_format
from embedlab.fsutil import file_digest

FIXTURE_OK = [HealthCheck.function_scoped_fixture]


def sample_tensors(step: int) -> dict[str, np.ndarray]:
    g = np.random.default_rng(step)
    return {"input_embeddings": g.standard_normal((7, 3), dtype=np.float32),
            "output_embeddings": g.standard_normal((7, 3), dtype=np.float32),
            "output_bias": np.arange(7, dtype=np.float32) + step}


def save_sample(m: CheckpointManager, step: int, loss: float | None = None) -> Path:
    metrics = {"loss": loss if loss is not None else 1.0 / (step + 1)}
    return m.save(step, sample_tensors(step), {"epoch": 0, "cursor": step * 10}, metrics)


def resign(ckpt_dir: Path, **fields: object) -> None:
    """Rewrite MANIFEST.json so that it matches the folder's files again (as a hand edit with a
    re-signed manifest would), with ``fields`` replaced."""
    manifest = json.loads((ckpt_dir / "MANIFEST.json").read_text())
    for name in manifest["files"]:
        manifest["files"][name] = {"sha256": file_digest(ckpt_dir / name, "sha256"),
                                   "size": (ckpt_dir / name).stat().st_size}
    manifest.update(fields)
    (ckpt_dir / "MANIFEST.json").write_text(json.dumps(manifest))
    ckpt_format._VERIFIED.clear()
