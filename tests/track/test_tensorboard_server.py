"""End to end: the real TensorBoard server, started by ``embedlab tensorboard``, serves our data.

Builds two runs with the tracker (one fresh, one killed and resumed), starts the server on a free
127.0.0.1 port through the CLI, and asks its HTTP data API what a person would see in each
dashboard: scalars, histograms, images, text, projector and hparams, with the right tags and steps.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from .fakerun import make_config, simulate
from .tbserver import get, post, start_server, stop_server, wait_for_runs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("tb") / "runs"
    simulate(root / "fresh", steps=50, ckpt_every=25)
    cfg = make_config()
    simulate(root / "resumed", steps=35, ckpt_every=20, cfg=cfg, final=False)  # killed at 35
    simulate(root / "resumed", steps=50, ckpt_every=20, start=20, cfg=cfg)  # resumed from 20
    proc, base = start_server(root)
    try:
        wait_for_runs(base, {"fresh", "resumed"})
        yield base
    finally:
        stop_server(proc)
    assert proc.returncode is not None


def steps_of(points: list[list[float]]) -> list[int]:
    return [int(p[1]) for p in points]  # [wall_time, step, value]


def test_scalars(server: str) -> None:
    tags = get(server, "scalars/tags")
    for run in ("fresh", "resumed"):
        assert {"train/loss", "train/lr", "train/words_per_sec", "train/pairs_per_sec",
                "train/progress", "eval/analogy", "final/loss"} <= set(tags[run])
        loss = get(server, "scalars/scalars", run=run, tag="train/loss")
        assert steps_of(loss) == list(range(5, 51, 5)), run  # resumed: no overlap, no duplicate
        values = [p[2] for p in loss]
        assert values == sorted(values, reverse=True)  # the simulated loss falls


def test_histograms(server: str) -> None:
    tags = get(server, "histograms/tags")["fresh"]
    assert set(tags) == {"embeddings/input", "embeddings/output", "embeddings/input_norm",
                         "embeddings/output_norm"}
    data = get(server, "histograms/histograms", run="fresh", tag="embeddings/input_norm")
    assert [int(d[1]) for d in data] == [25, 50]
    resumed = get(server, "histograms/histograms", run="resumed", tag="embeddings/input")
    assert [int(d[1]) for d in resumed] == [20, 40]


def test_images(server: str) -> None:
    assert "embeddings/pca" in get(server, "images/tags")["fresh"]
    meta = get(server, "images/images", run="fresh", tag="embeddings/pca", sample="0")
    assert [m["step"] for m in meta] == [25, 50]
    url = f"{server}/data/plugin/images/individualImage?{meta[-1]['query']}"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read()[:4] == b"\x89PNG"


def test_text(server: str) -> None:
    tag = "neighbours/text_summary"  # torch's add_text appends "/text_summary"
    assert get(server, "text/tags")["fresh"] == [tag]
    text = get(server, "text/text", run="fresh", tag=tag)
    assert [t["step"] for t in text] == [25, 50]
    assert "nearest neighbours" in text[-1]["text"]


def test_projector(server: str) -> None:
    runs = get(server, "projector/runs")
    assert set(runs) >= {"fresh", "resumed"}
    info = get(server, "projector/info", run="fresh")
    names = [e["tensorName"] for e in info["embeddings"]]
    assert names == ["input_embeddings:00050"]
    meta = get(server, "projector/metadata", run="fresh", name=names[0]).decode()
    assert meta.splitlines()[0] == "word\tcount" and len(meta.splitlines()) == 31
    tensor = get(server, "projector/tensor", run="fresh", name=names[0])
    assert len(tensor) == 30 * 16 * 4  # float32 bytes


def test_hparams(server: str) -> None:
    exp = post(server, "hparams/experiment", {"experimentName": ""})
    hp_names = {h["name"] for h in exp["hparamInfos"]}
    assert {"optim.lr", "model.dim", "model.loss"} <= hp_names
    metric_tags = {m["name"]["tag"] for m in exp["metricInfos"]}
    assert {"final/loss", "final/eval/analogy"} <= metric_tags
    groups = post(server, "hparams/session_groups",
                  {"experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS",
                                                            "STATUS_FAILURE", "STATUS_RUNNING"],
                   "colParams": [], "startIndex": 0, "sliceSize": 100})
    sessions = {s["name"] for g in groups["sessionGroups"] for s in g["sessions"]}
    assert sessions == {"fresh", "resumed"}  # one session per run folder, no sub-folder runs
