"""The tracker: metrics.jsonl beside the event files, resume, a disabled TensorBoard, no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from embedlab.track.jsonl import METRICS_FILE, read_metrics
from embedlab.track.tracker import open_tracker

from .fakerun import fake_vocab, load_events, make_config, simulate, summary_events


def test_every_scalar_is_in_metrics_jsonl(fresh_run: Path) -> None:
    run = fresh_run
    ea = load_events(run)
    rows = read_metrics(run / METRICS_FILE)
    for tag in ea.Tags()["scalars"]:
        from_tb = [(e.step, e.value) for e in ea.Scalars(tag)]
        from_json = [(r["step"], r[tag]) for r in rows if tag in r]
        assert [s for s, _ in from_tb] == [s for s, _ in from_json], tag
        np.testing.assert_allclose([v for _, v in from_tb], [v for _, v in from_json],
                                   rtol=1e-6)


def test_resume_continues_curves_without_duplicates(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = make_config(projector_each_checkpoint=True)
    # first process: logs up to 35 but its last checkpoint is at 20, then it is killed
    simulate(run, steps=35, ckpt_every=20, cfg=cfg, final=False)
    assert max(r["step"] for r in read_metrics(run / METRICS_FILE)) == 35
    # second process resumes from the checkpoint at step 20 and runs to the end
    simulate(run, steps=50, ckpt_every=20, start=20, cfg=cfg)
    ea = load_events(run)
    assert [e.step for e in ea.Scalars("train/loss")] == list(range(5, 51, 5))
    assert [e.step for e in ea.Scalars("eval/analogy")] == [20, 40]
    assert [e.step for e in ea.Histograms("embeddings/input")] == [20, 40]
    steps = [r["step"] for r in read_metrics(run / METRICS_FILE) if "train/loss" in r]
    assert steps == list(range(5, 51, 5))
    pbtxt = (run / "projector_config.pbtxt").read_text()
    for step in (20, 40, 50):
        assert pbtxt.count(f'tensor_path: "{step:05d}/input_embeddings/tensors.tsv"') == 1


def test_disabled_tensorboard_still_writes_metrics(tmp_path: Path) -> None:
    run = tmp_path / "run"
    simulate(run, steps=20, ckpt_every=10, cfg=make_config(tensorboard=False))
    assert not list(run.glob("events.out.tfevents.*"))
    assert not (run / "projector_config.pbtxt").exists()
    rows = read_metrics(run / METRICS_FILE)
    assert [r["step"] for r in rows if "train/loss" in r] == [5, 10, 15, 20]
    assert rows[-1] == {"step": 20, "final/loss": 0.6, "final/eval/analogy": 0.5}


def test_a_resume_without_tensorboard_still_drops_the_abandoned_steps(tmp_path: Path) -> None:
    # `--from` an older checkpoint with --no-tensorboard must not leave the abandoned branch's
    # curves (and projector entries) on show beside the new ones
    run = tmp_path / "run"
    simulate(run, steps=35, ckpt_every=10, cfg=make_config(projector_each_checkpoint=True),
             final=False)
    simulate(run, steps=50, ckpt_every=10, start=20, cfg=make_config(tensorboard=False))
    assert max(step for step, _ in summary_events(run)) == 20
    pbtxt = (run / "projector_config.pbtxt").read_text()
    assert "00030/" not in pbtxt and "00020/" in pbtxt
    assert not (run / "00030").exists()


def test_tracker_counts_its_own_time(tmp_path: Path) -> None:

    vocab = fake_vocab()
    with open_tracker(tmp_path, make_config(tensorboard=False), vocab=vocab,
                      resume_step=None) as tracker:
        assert tracker.seconds == 0.0
        tracker.log_scalars(1, {"train/loss": 1.0})
        assert tracker.seconds > 0.0


def test_the_tracker_and_plots_never_import_torch(tmp_path: Path) -> None:
    # `import torch` alone is ~270 MiB of the training process's resident memory; the tracker
    # writes every kind of summary here, so a lazy import inside a method fails this too
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
import embedlab.track.plots, embedlab.track.tracker
from fakerun import make_config, simulate
run = Path({str(tmp_path / "run")!r})
simulate(run, steps=20, ckpt_every=10, cfg=make_config(projector_each_checkpoint=True))
simulate(run, steps=30, ckpt_every=10, start=10)
assert "torch" not in sys.modules, [m for m in sys.modules if m.startswith("torch")][:5]
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert load_events(tmp_path / "run").Tags()["histograms"]
