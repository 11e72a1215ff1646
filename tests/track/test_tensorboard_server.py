"""End to end: a real tiny training run, served by the real TensorBoard (``embedlab tensorboard``).

Trains two runs through the CLI in-process on a small generated demo corpus: ``fresh`` (one
command) and ``sliced`` (stopped by ``--max-steps 50``, then resumed with ``--from`` the step-40
checkpoint, so its first event file holds steps 45-50 that the resumed writer must purge). Then
starts the server on a free 127.0.0.1 port through the CLI and asks its HTTP data API what a
person would see in each dashboard. Expected tags and steps come from the run folder itself
(``metrics.jsonl``, the ``checkpoint`` index, ``vocab.tsv``, the final checkpoint), never from
constants that could drift from what the trainer does.
"""

from __future__ import annotations

import math
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.config import MUTABLE_ON_RESUME
from embedlab.data.demo import write_questions
from embedlab.track.hparams_table import TABLE_PREFIX
from embedlab.track.tensorboard import PCA_CARD_WORDS, PCA_WORDS, default_probes, pca_tag

from .tbserver import (
    TRAIN_TAGS,
    checkpoint_steps,
    get,
    metrics_rows,
    metrics_steps,
    post,
    start_server,
    stop_server,
    train_tiny,
    wait_for_runs,
    write_tiny_corpus,
)

RUNS = ("fresh", "sliced")
# Another learning rate and no evaluation, named to sort first: TensorBoard used the first
# run's experiment summary for the whole logdir, so final/analogy and the differing lr vanished.
OTHER = "a-other-lr"
PROJECTOR_WORDS = 300  # --projector-words in tbserver.TINY_FLAGS
DIM = 16
HISTOGRAM_TAGS = {"embeddings/input", "embeddings/output", "embeddings/input_norm",
                  "embeddings/output_norm"}
TEXT_TAG = "neighbours/text_summary"  # torch's add_text appended "/text_summary"; kept


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:PORT
    root: Path  # the folder TensorBoard serves; one sub-folder per run

    def run(self, name: str) -> Path:
        return self.root / name


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("tb")
    data = tmp / "data"  # outside the served folder, so TensorBoard sees runs only
    data.mkdir()
    corpus = write_tiny_corpus(data / "corpus.txt")
    evals = ("--eval-analogies", str(write_questions(data / "questions.txt")),
             "--eval-every", "40")
    root = tmp / "runs"
    train_tiny(root / "fresh", corpus, *evals)
    train_tiny(root / "sliced", corpus, *evals, "--max-steps", "50")
    # resume from an older checkpoint than the one the slice stopped at: steps 45 and 50 are
    # then in the first event file and must be hidden by the resumed writer's purge_step
    train_tiny(root / "sliced", corpus, "--from", "ckpt-00000040")
    train_tiny(root / OTHER, corpus, "--lr", "0.05", "--checkpoint-every", "1000")
    proc, base = start_server(root)
    try:
        wait_for_runs(base, {*RUNS, OTHER})
        yield Served(base, root)
    finally:
        stop_server(proc)
    assert proc.returncode is not None
    assert not list(root.glob(f"{TABLE_PREFIX}*"))  # the HParams table's summary went with it


def steps_of(points: list[list[float]]) -> list[int]:
    return [int(p[1]) for p in points]  # [wall_time, step, value]


def served_scalars(served: Served, run: str, tag: str) -> list[list[float]]:
    return list(get(served.base, "scalars/scalars", run=run, tag=tag))


def final_step(run: Path) -> int:
    return max(checkpoint_steps(run))


def test_the_runs_are_real_and_big_enough(served: Served) -> None:
    for name in RUNS:
        run = served.run(name)
        assert len(metrics_steps(run, "train/loss")) >= 10, name
        assert len(checkpoint_steps(run)) >= 3, name
        assert (run / "projector_config.pbtxt").is_file(), name
    # the slice really wrote a second event file; its first file logged steps 45 and 50 before
    # the run went back to checkpoint 40, and the resume cut them out of that file at the source
    files = sorted(served.run("sliced").glob("events.out.tfevents.*"))
    assert len(files) == 2
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    first = EventAccumulator(str(files[0]), size_guidance={"scalars": 0}).Reload()
    assert [e.step for e in first.Scalars("train/loss")][-2:] == [35, 40]


def test_scalars_match_metrics_jsonl(served: Served) -> None:
    tags = get(served.base, "scalars/tags")
    for name in RUNS:
        run = served.run(name)
        assert {*TRAIN_TAGS, "eval/analogy", "final/loss", "final/analogy"} <= set(tags[name])
        last = final_step(run)
        for tag in (*TRAIN_TAGS, "eval/analogy", "final/loss"):
            points = served_scalars(served, name, tag)
            steps = steps_of(points)
            assert steps == metrics_steps(run, tag), (name, tag)
            assert steps == sorted(set(steps)), (name, tag)  # no duplicate, no overlap
            expected = [row[tag] for row in metrics_rows(run) if tag in row]
            # TensorBoard stores scalars as float32
            assert [p[2] for p in points] == pytest.approx(expected, rel=1e-6), (name, tag)
        # logged every --log-every 5 steps, plus the partial window at the natural end
        windows = list(range(5, last + 1, 5))
        assert steps_of(served_scalars(served, name, "train/loss")) == \
            windows + ([last] if last % 5 else [])
        assert steps_of(served_scalars(served, name, "train/lr")) == \
            windows + ([last] if last % 5 else [])  # the lr curve ends where the loss does
        assert steps_of(served_scalars(served, name, "final/loss")) == [last]


def test_sliced_run_shows_the_same_curve_as_the_fresh_run(served: Served) -> None:
    for tag in (*TRAIN_TAGS, "eval/analogy", "final/loss"):
        fresh, sliced = (served_scalars(served, run, tag) for run in RUNS)
        assert steps_of(sliced) == steps_of(fresh), tag
    # resume is exact (same machine, same --threads), so the losses are the same numbers
    fresh_loss, sliced_loss = (
        [p[2] for p in served_scalars(served, run, "train/loss")] for run in RUNS)
    assert sliced_loss == fresh_loss
    loss = fresh_loss
    assert loss[-1] < loss[0]  # it learns, even in one tiny epoch


def pca_tags(run: Path) -> list[str]:
    """The PCA image tags of ``run``: its most frequent words, 50 labelled in each image."""
    n = min(PCA_WORDS, len((run / "vocab.tsv").read_text(encoding="utf-8").splitlines()))
    return [pca_tag(start, min(start + PCA_CARD_WORDS, n))
            for start in range(0, n, PCA_CARD_WORDS)]


def checkpoint_summary_steps(served: Served, run: str) -> dict[str, list[int]]:
    """Steps the server shows for each checkpoint-cadence summary of ``run``."""
    base = served.base
    out = {tag: [int(d[1]) for d in get(base, "histograms/histograms", run=run, tag=tag)]
           for tag in sorted(HISTOGRAM_TAGS)}
    for tag in pca_tags(served.run(run)):
        out[tag] = [m["step"] for m in get(base, "images/images", run=run, tag=tag, sample="0")]
    out[TEXT_TAG] = [t["step"] for t in get(base, "text/text", run=run, tag=TEXT_TAG)]
    return out


def test_checkpoint_summaries_at_every_checkpoint(served: Served) -> None:
    for name in RUNS:
        assert set(get(served.base, "histograms/tags")[name]) == HISTOGRAM_TAGS
        tags = pca_tags(served.run(name))
        assert len(tags) == 4  # the tiny corpus has 200 words to show
        assert sorted(get(served.base, "images/tags")[name]) == tags
        assert get(served.base, "text/tags")[name] == [TEXT_TAG]
    expected = checkpoint_steps(served.run("fresh"))
    assert checkpoint_summary_steps(served, "fresh") == {
        tag: expected for tag in (*sorted(HISTOGRAM_TAGS), *pca_tags(served.run("fresh")),
                                  TEXT_TAG)}


def test_sliced_run_hides_the_abandoned_checkpoint_summaries(served: Served) -> None:
    expected = checkpoint_steps(served.run("sliced"))
    assert expected == checkpoint_steps(served.run("fresh"))
    assert checkpoint_summary_steps(served, "sliced") == {
        tag: expected for tag in (*sorted(HISTOGRAM_TAGS), *pca_tags(served.run("sliced")),
                                  TEXT_TAG)}


def test_pca_images_are_pngs(served: Served) -> None:
    for tag in pca_tags(served.run("fresh")):
        meta = get(served.base, "images/images", run="fresh", tag=tag, sample="0")
        url = f"{served.base}/data/plugin/images/individualImage?{meta[-1]['query']}"
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.read()[:4] == b"\x89PNG"


def test_neighbours_text_shows_every_probe_word(served: Served) -> None:
    for name in RUNS:
        run = served.run(name)
        text = get(served.base, "text/text", run=name, tag=TEXT_TAG)
        words = [line.split("\t")[0] for line in
                 (run / "vocab.tsv").read_text(encoding="utf-8").splitlines()]
        probes = default_probes(words, None)
        assert len(probes) == 8
        for probe in probes:  # each default probe word has its row of neighbours
            assert f"<strong>{probe}</strong>" in text[-1]["text"], (name, probe)


def test_projector_serves_the_final_input_embeddings(served: Served) -> None:
    assert set(get(served.base, "projector/runs")) >= set(RUNS)
    for name in RUNS:
        run = served.run(name)
        last = final_step(run)
        info = get(served.base, "projector/info", run=name)
        names = [e["tensorName"] for e in info["embeddings"]]
        assert names == [f"input_embeddings:{last:05d}"], name
        meta = get(served.base, "projector/metadata", run=name, name=names[0]).decode()
        vocab_rows = (run / "vocab.tsv").read_text(encoding="utf-8").splitlines()
        assert meta.splitlines() == ["word\tcount", *vocab_rows[:PROJECTOR_WORDS]]
        raw = get(served.base, "projector/tensor", run=name, name=names[0])
        served_w = np.frombuffer(raw, dtype=np.float32).reshape(PROJECTOR_WORDS, DIM)
        tensors, _ = load_checkpoint(find_checkpoint(run))
        np.testing.assert_array_equal(served_w,
                                      np.asarray(tensors["input_embeddings"][:PROJECTOR_WORDS]))


def _session_groups(served: Served) -> list[dict[str, Any]]:
    statuses = ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]
    body = post(served.base, "hparams/session_groups",
                {"experimentName": "", "allowedStatuses": statuses, "colParams": [],
                 "startIndex": 0, "sliceSize": 100})
    return list(body["sessionGroups"])


def test_hparams(served: Served) -> None:
    exp = post(served.base, "hparams/experiment", {"experimentName": ""})
    # the table's columns: the one hyperparameter that differs between the runs
    assert [(h["name"], h.get("differs")) for h in exp["hparamInfos"]] == [("optim.lr", True)]
    metric_tags = [m["name"]["tag"] for m in exp["metricInfos"]]
    assert metric_tags[:2] == ["final/analogy", "final/loss"]  # final/<evaluator name> first
    groups = _session_groups(served)
    rows = {s["name"]: (g, s) for g in groups for s in g["sessions"]}  # the API's word for a row
    assert set(rows) == {*RUNS, OTHER}  # one row per run folder, no sub-folder runs
    other = {m["name"]["tag"] for m in rows[OTHER][1]["metricValues"]}
    assert "final/loss" in other and "final/analogy" not in other
    for name, (group, entry) in rows.items():
        # each run's hparams record: its hyperparameters only, not the settings a resume may
        # change
        assert not [k for k in group["hparams"] if k.startswith(MUTABLE_ON_RESUME)]
        assert group["hparams"]["model.dim"] == DIM
        assert group["hparams"]["optim.batch_size"] == 128
        # the table cuts a value at its end: a corpus path shows its last parts first
        assert group["hparams"]["data.corpus"].startswith("data/corpus.txt in /")
        final_loss = [row["final/loss"] for row in metrics_rows(served.run(name))
                      if "final/loss" in row]
        values = {m["name"]["tag"]: m["value"] for m in entry["metricValues"]}
        assert math.isclose(values["final/loss"], final_loss[-1], rel_tol=1e-6)
