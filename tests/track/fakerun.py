"""A training-like run folder built with the real tracker (no trainer needed).

Embeddings drift from noise towards planted clusters, so neighbours and the PCA picture change
over steps the way a real run's do; the loss falls. Used by the tracker, CLI, server and browser
tests (the browser test loads this file by path, so keep it import-free of test packages).
:func:`load_events` and :func:`summary_events` read a run's event files back.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embedlab.config import TrackConfig, TrainConfig
from embedlab.run.status import write_status
from embedlab.track.tracker import open_tracker

TRAIN_TAGS = ("train/loss", "train/lr", "train/words_per_sec", "train/pairs_per_sec",
              "train/progress")  # the scalars simulate() logs every log_every steps

CLUSTERS = {
    "animal": ["cat", "dog", "horse", "cow", "sheep", "goat"],
    "country": ["france", "germany", "spain", "italy", "england", "japan"],
    "colour": ["red", "green", "blue", "yellow", "black", "white"],
    "number": ["one", "two", "three", "four", "five", "six"],
}


@dataclass(frozen=True)
class FakeVocab:
    words: tuple[str, ...]
    counts: np.ndarray
    unk: str | None = None

    def __len__(self) -> int:
        return len(self.words)


def fake_vocab(extra: int = 40) -> FakeVocab:
    words = ["the", "of", "and"] + [w for ws in CLUSTERS.values() for w in ws]
    words += [f"word{i}" for i in range(extra)]
    counts = np.array(sorted((1000 // (i + 1) + 5 for i in range(len(words))), reverse=True),
                      dtype=np.int64)
    return FakeVocab(tuple(words), counts)


def embeddings_at(vocab: FakeVocab, step: int, total: int, dim: int = 16) -> np.ndarray:
    """Noise at step 0 that moves linearly towards one centre per planted cluster (V×D float32,
    C-contiguous, like the trainer's matrices)."""
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((len(vocab), dim), dtype=np.float32)
    target = noise.copy()
    centres = rng.standard_normal((len(CLUSTERS), dim), dtype=np.float32) * 3
    for c, ws in enumerate(CLUSTERS.values()):
        for w in ws:
            target[vocab.words.index(w)] = centres[c] + 0.1 * noise[vocab.words.index(w)]
    a = np.float32(step / total)
    return (1 - a) * noise + a * target


def make_config(**track: object) -> TrainConfig:
    base = TrainConfig()
    tc = dataclasses.replace(TrackConfig(), **{"log_every": 5, "projector_words": 30, **track})
    return dataclasses.replace(base, track=tc)


def write_run_files(run: Path, cfg: TrainConfig, vocab: FakeVocab) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    (run / "vocab.tsv").write_text("".join(f"{w}\t{c}\n" for w, c in zip(vocab.words,
                                                                         vocab.counts,
                                                                         strict=True)))


def simulate(run: Path, *, steps: int = 50, ckpt_every: int = 10, start: int = 0,
             cfg: TrainConfig | None = None, final: bool = True) -> TrainConfig:
    """Log like a trainer from ``start`` (a resume step, or 0) to ``steps``."""
    cfg = cfg or make_config()
    vocab = fake_vocab()
    write_run_files(run, cfg, vocab)
    if start:
        _next_second(run)
    tracker = open_tracker(run, cfg, vocab=vocab, resume_step=start)
    write_status(run, status="running", step=start, words_seen=start * 1000, pid=None)
    for step in range(start + 1, steps + 1):
        if step % cfg.track.log_every == 0:
            loss = 4 * math.exp(-step / 20) + 0.5
            tracker.log_scalars(step, {"train/loss": loss, "train/lr": 0.025 * (1 - step / steps),
                                       "train/words_per_sec": 1e5, "train/pairs_per_sec": 8e5,
                                       "train/progress": step / steps})
        if step % ckpt_every == 0:
            w = embeddings_at(vocab, step, steps)
            tracker.log_checkpoint(step, w, w * 0.5)
            tracker.log_scalars(step, {"eval/analogy": step / steps / 2})
            write_status(run, step=step, words_seen=step * 1000, loss=loss)
    if final:
        w = embeddings_at(vocab, steps, steps)
        tracker.log_final(steps, w, w * 0.5, hparams=cfg.to_dict(),
                          metrics={"loss": 0.6, "eval/analogy": 0.5})
        write_status(run, status="finished", wall_time=12.5)
    tracker.close()
    return cfg


def _next_second(run: Path) -> None:
    """Wait, if need be, until the resumed writer's event file sorts after the run's others.

    TensorBoard reads a run's event files in name order, and a name begins with the second the
    file was opened. Within one second the files of one process sort by a per-process counter,
    as text: a resume in the second of the slice before it, the counter going from 9 to 10,
    would be read first, and its purge_step would drop nothing. A test resumes in the same
    process, at once.
    """
    files = sorted(run.glob("events.out.tfevents.*"))
    if files:
        opened = int(files[-1].name.split(".")[3])
        while int(time.time()) <= opened:
            time.sleep(0.05)


def add_old_experiment_summary(run: Path, step: int) -> None:
    """Append the ``_hparams_/experiment`` summary an embedlab before 2026-11-24 also wrote at
    the end of a run (TensorBoard takes the first one for the whole logdir's HParams table)."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    experiment = api_pb2.Experiment(
        hparam_infos=[api_pb2.HParamInfo(name="optim.lr", type=api_pb2.DATA_TYPE_FLOAT64)],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag="final/loss"))])
    data = plugin_data_pb2.HParamsPluginData(experiment=experiment)
    exp = Summary(value=[Summary.Value(tag=metadata.EXPERIMENT_TAG,
                                       metadata=metadata.create_summary_metadata(data))])
    (events,) = sorted(run.glob("events.out.tfevents.*"))
    with events.open("ab") as f:
        RecordWriter(f).write(event_pb2.Event(step=step, summary=exp).SerializeToString())


def load_events(run: Path) -> Any:
    """An ``EventAccumulator`` over ``run``, every event kept."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run), size_guidance={"images": 0, "histograms": 0, "tensors": 0,
                                                   "scalars": 0})
    ea.Reload()
    return ea


def summary_events(run: Path) -> list[tuple[int, str]]:
    """(step, tag) of every summary value in the run's event files, as written."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out = []
    for path in sorted(run.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            out += [(event.step, v.tag) for v in event.summary.value]
    return out
