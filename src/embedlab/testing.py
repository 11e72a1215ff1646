"""Helpers for tests of embedlab and of code built on it (like ``numpy.testing``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def write_zipf_corpus(path: Path, *, lines: int = 400, vocab: int = 200, seed: int = 0,
                      prefix: str = "w") -> Path:
    """Write sentences of 5-14 words drawn from a Zipf(1.1) vocabulary ``<prefix>0..``.

    Small, deterministic and fast: a corpus for one-second training runs.
    """
    rng = np.random.default_rng(seed)
    words = [f"{prefix}{i}" for i in range(vocab)]
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    text = "".join(" ".join(words[i] for i in rng.choice(vocab, rng.integers(5, 15), p=p)) + "\n"
                   for _ in range(lines))
    path.write_text(text, encoding="utf-8")
    return path


def zipf_ids(n: int, vocab: int, n_sentences: int,
             seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A prepared corpus in memory: ``n`` token ids (uint32, Zipf-distributed over ``vocab``
    words) and the end offsets of ``n_sentences`` + 1 sentences at random places (the last is
    ``n``), for tests of batch generators."""
    rng = np.random.default_rng(seed)
    ids = (rng.zipf(1.3, n) % vocab).astype(np.uint32)
    inner = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, n_sentences), replace=False))
    return ids, np.append(inner, n)


def spec_batch_stream(ids: np.ndarray, ends: np.ndarray, **kw: Any) -> Any:
    """The batch specification's stream (:class:`embedlab.data.batchspec.SpecBatchStream`) over
    ``ids``/``ends``, with small defaults (window 3, batches of 64, groups of 8 sharing 10 noise
    words, subsampling 1e-2, chunks of 2048, 2 epochs, seed 5); ``kw`` overrides them, and
    ``vocab``/``sample`` set the vocabulary size and the subsampling threshold."""
    from embedlab.data.batchspec import SpecBatchStream
    from embedlab.data.noise import NoiseDistribution
    from embedlab.data.pairs import keep_probabilities

    vocab = int(kw.pop("vocab", int(ids.max()) + 1))
    counts = np.bincount(ids, minlength=vocab) + 1
    keep = keep_probabilities(counts, kw.pop("sample", 1e-2))
    args: dict[str, Any] = {"window": 3, "batch_size": 64, "group": 8, "noise_per_group": 10,
                            "seed": 5, "epochs": 2, "chunk_tokens": 2048} | kw
    return SpecBatchStream(ids, ends, keep, NoiseDistribution(counts), **args)


def run_cli(argv: Sequence[str], capsys: Any) -> tuple[int, str, str]:
    """Run ``embedlab ARGV`` in this process: (exit code, stdout, stderr).

    ``capsys`` is pytest's capture fixture; exit codes come from ``SystemExit`` as in a shell.
    """
    from embedlab.cli import main

    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def signal_while_writers_open(monkeypatch: Any, signum: int) -> None:
    """Make the trainer receive ``signum`` while it opens its writers (metrics, TensorBoard):
    after status.json says "running", before the first step."""
    import os

    import embedlab.track.tracker as summaries

    real = summaries.open_tracker

    def signalled(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signum)
        return real(*args, **kwargs)

    monkeypatch.setattr(summaries, "open_tracker", signalled)


def wrap_steps(monkeypatch: Any, wrap: Any) -> None:
    """Make every engine a run builds train through ``wrap(engine.step)`` (``monkeypatch``:
    pytest's fixture), e.g. to fail or signal at a chosen step. The engine then trains one
    step per call (:class:`~embedlab.engines.stepping.BatchByBatch`, on the same batches), so
    that ``wrap`` sees every step."""
    from embedlab.engines.stepping import BatchByBatch
    from embedlab.training import setup

    real = setup.engine_for_config

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        engine = real(*args, **kwargs)
        engine.step = wrap(engine.step)  # type: ignore[method-assign]
        engine.runner = lambda stream, schedule, model: BatchByBatch(  # type: ignore[method-assign]
            stream, engine, schedule, model)
        return engine

    monkeypatch.setattr(setup, "engine_for_config", wrapped)
