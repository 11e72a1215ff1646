"""What a run shows in TensorBoard: every kind of summary, hparams, probe neighbours, one BLAS
thread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from embedlab.config import MUTABLE_ON_RESUME
from embedlab.track.plots import CARD_INCHES
from embedlab.track.tensorboard import (
    PCA_CARD_WORDS,
    default_probes,
    neighbours_markdown,
    pca_tag,
    table_hparams,
    tail_first,
    word_ids,
)

from .fakerun import (
    CLUSTERS,
    TRAIN_TAGS,
    embeddings_at,
    fake_vocab,
    load_events,
    make_config,
    simulate,
)


def test_fresh_run_writes_every_kind_of_summary(fresh_run: Path) -> None:
    run = fresh_run
    ea = load_events(run)
    tags = ea.Tags()
    assert set(TRAIN_TAGS) | {"eval/analogy", "final/loss", "final/eval/analogy"} \
        <= set(tags["scalars"])
    assert [e.step for e in ea.Scalars("train/loss")] == list(range(5, 51, 5))
    assert sorted(tags["histograms"]) == ["embeddings/input", "embeddings/input_norm",
                                         "embeddings/output", "embeddings/output_norm"]
    assert [e.step for e in ea.Histograms("embeddings/input_norm")] == [25, 50]
    # the PCA of the fake vocabulary's 67 words: 50 words labelled in one image, 17 in another
    assert sorted(tags["images"]) == ["embeddings/pca", "embeddings/pca_words_051-067"]
    for tag in tags["images"]:
        assert [e.step for e in ea.Images(tag)] == [25, 50]
        png = ea.Images(tag)[-1]
        assert png.encoded_image_string[:4] == b"\x89PNG"
        # the summary's size is the encoded image's (IHDR: width, height at bytes 16-24)
        ihdr = png.encoded_image_string[16:24]
        assert (png.width, png.height) == (int.from_bytes(ihdr[:4], "big"),
                                           int.from_bytes(ihdr[4:], "big"))
        # sized for TensorBoard's card (~350 px): at most twice its pixels, sharp on a
        # high-density screen, and not shrunk past reading on a plain one
        assert CARD_INCHES * 100 <= png.width <= 2 * CARD_INCHES * 100
    text = ea.Tensors("neighbours/text_summary")
    assert [e.step for e in text] == [25, 50]
    # no sub-folders (add_hparams' pitfall): the only folder is the projector's step folder
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == ["00050"]


def test_hparams_are_in_the_runs_own_event_file(fresh_run: Path) -> None:
    from tensorboard.plugins.hparams import plugin_data_pb2

    run = fresh_run
    content = load_events(run).PluginTagToContent("hparams")
    # No "_hparams_/experiment": TensorBoard takes the first run's as the whole logdir's, which
    # hides the metrics and differing hyperparameters of every other run from the table.
    assert set(content) == {"_hparams_/session_start_info", "_hparams_/session_end_info"}
    data = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hp = data.session_start_info.hparams
    assert hp["optim.lr"].number_value == pytest.approx(0.025)
    assert hp["model.loss"].string_value == "neg"
    # hyperparameters only: not the settings a resume may change (threads, track.*, eval.*, ...)
    assert not [k for k in hp if k.startswith(MUTABLE_ON_RESUME)]
    assert set(hp) == set(table_hparams(make_config().to_dict()))
    assert {"final/loss", "final/eval/analogy"} <= set(load_events(run).Tags()["scalars"])
    assert len(list(run.glob("events.out.tfevents.*"))) == 1


def test_table_hparams_are_the_hyperparameters_that_change_the_result() -> None:
    hp = table_hparams(make_config().to_dict())
    assert {"optim.lr", "model.dim", "data.corpus", "seed", "optim.epochs"} <= set(hp)
    assert {"threads", "max_steps", "preset", "track.progress", "checkpoint.keep",
            "eval.similarity"}.isdisjoint(hp)
    assert hp["init_from"] == "none"


def test_paths_in_the_hparams_table_come_tail_first() -> None:
    # the table cuts a value at its end: the part that tells corpora apart comes first
    cfg = make_config().to_dict()
    cfg["data"]["corpus"] = "/data/corpora/news-2026/train.txt"
    cfg["init_from"] = "runs/base/checkpoints/ckpt-00001000"
    hp = table_hparams(cfg)
    assert hp["data.corpus"] == "news-2026/train.txt in /data/corpora"
    assert hp["init_from"] == "checkpoints/ckpt-00001000 in runs/base"


@pytest.mark.parametrize("path", ["demo", "text8", "corpus.txt", "data/c.txt", "/c.txt", "/a/b"])
def test_short_paths_are_shown_as_they_are(path: str) -> None:
    assert tail_first(path) == path


def test_pca_tags_sort_in_word_order() -> None:
    tags = [pca_tag(start, min(start + PCA_CARD_WORDS, 200))
            for start in range(0, 200, PCA_CARD_WORDS)]
    # the most frequent words keep the tag of older runs' single PCA image
    assert tags == ["embeddings/pca", "embeddings/pca_words_051-100",
                    "embeddings/pca_words_101-150", "embeddings/pca_words_151-200"]
    assert sorted(tags) == tags


def test_neighbours_show_the_planted_clusters() -> None:
    vocab = fake_vocab()
    w = embeddings_at(vocab, 50, 50)
    text = neighbours_markdown(vocab.words, w, ["cat", "france"], k=5)
    rows = text.splitlines()
    assert rows[0].startswith("| word |") and len(rows) == 4
    for row, cluster in ((rows[2], CLUSTERS["animal"]), (rows[3], CLUSTERS["country"])):
        names = [cell.split(" (")[0] for cell in row.split("|")[2].strip().split(", ")]
        assert set(names) <= set(cluster), row


def test_word_ids_keep_the_order_asked_and_skip_unknown_words() -> None:
    words = ("the", "of", "cat", "france", "dog")
    assert word_ids(words, ["dog", "zebra", "the", "france"]) == [4, 0, 3]
    assert word_ids(words, []) == []
    vocab = fake_vocab()
    w = embeddings_at(vocab, 50, 50)
    by_ids = neighbours_markdown(vocab.words, w, (), ids=word_ids(vocab.words, ["cat"]))
    assert by_ids == neighbours_markdown(vocab.words, w, ["cat"])


def test_neighbours_without_known_probe_words() -> None:
    vocab = fake_vocab()
    assert "no probe words" in neighbours_markdown(vocab.words,
                                                   np.zeros((len(vocab), 4), np.float32),
                                                   ["zebra"])


@given(st.integers(1, 3000), st.integers(1, 12))
def test_default_probes_are_distinct_frequent_words(v: int, n: int) -> None:
    words = [f"w{i}" for i in range(v)]
    probes = default_probes(words, "w0", n)
    assert len(probes) == min(n, v - 1)
    assert len(set(probes)) == len(probes) and "w0" not in probes
    assert all(int(p[1:]) <= max(11 * 2 ** n, n + 1) for p in probes)


def test_summaries_use_one_blas_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenBLAS's threads would fight the training kernel's OpenMP threads for the cores (see
    # tensorboard.one_blas_thread)
    from threadpoolctl import threadpool_info

    from embedlab.track import plots

    seen: list[int] = []
    real = plots.project_2d

    def recording(x: np.ndarray, method: plots.Method) -> np.ndarray:
        seen.extend(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")
        return real(x, method)

    monkeypatch.setattr(plots, "project_2d", recording)
    simulate(tmp_path / "run", steps=10, ckpt_every=10)
    assert seen and set(seen) == {1}


def test_the_neighbours_table_shows_words_as_typed_whatever_markdown_they_hold() -> None:
    """Rendered as TensorBoard's text dashboard renders it: a|b stays one cell, and **x**,
    _u_, `t`, [l](u), <b> and & are shown as typed, not as markup."""
    import html
    import re

    from tensorboard.plugin_util import markdown_to_safe_html

    from embedlab.track.tensorboard import neighbours_markdown

    words = ["a|b", "**bold**", "_u_", "`tick`", "[l](http://x)", "<b>x</b>", "na&me",
             "back\\slash", "1.5"]
    vectors = np.random.default_rng(0).standard_normal((len(words), 4)).astype(np.float32)
    rendered = markdown_to_safe_html(neighbours_markdown(words, vectors, words, k=3))
    rows = re.findall(r"<tr>(.*?)</tr>", rendered, re.S)[1:]  # the header row first
    assert len(rows) == len(words)
    for word, row in zip(words, rows, strict=True):
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)
        assert len(cells) == 2, row
        probe = re.fullmatch(r"<strong>(.*)</strong>", cells[0], re.S)
        assert probe is not None and html.unescape(probe.group(1)) == word
        shown = re.findall(r"(.+?) \((-?\d\.\d\d)\)(?:, |$)", cells[1])
        assert len(shown) == 3 and all(html.unescape(name) in words for name, _ in shown)
