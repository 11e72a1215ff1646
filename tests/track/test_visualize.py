"""``visualize``: the labelled plot from a run's latest checkpoint, and its input errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.image import imread

from embedlab.errors import InputError
from embedlab.track.visualize import read_vocab_words, visualize
from embedlab.train.checkpoint import CheckpointManager

from .fakerun import embeddings_at, fake_vocab, make_config, write_run_files


def make_trained_run(run: Path, steps: tuple[int, ...] = (10, 20)) -> None:
    vocab = fake_vocab()
    write_run_files(run, make_config(), vocab)
    mgr = CheckpointManager(run)
    for step in steps:
        w = embeddings_at(vocab, step, steps[-1])
        mgr.save(step, {"input_embeddings": w, "output_embeddings": w * 0}, {"step": step})


def test_pca_plot_from_latest_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_trained_run(run)
    out = visualize(run, words=30)
    assert out == run / "exports" / "pca-step20.png"
    img = imread(out)
    assert img.shape[0] >= 800 and img.shape[1] >= 800
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp files


@pytest.mark.slow  # t-SNE: seconds on an idle 2-core machine, much more under load
def test_tsne_plot_to_chosen_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    out = visualize(run, method="tsne", words=20, out=tmp_path / "t.png")
    assert out == tmp_path / "t.png" and imread(out).ndim == 3


@pytest.mark.parametrize(("setup", "kwargs", "message"), [
    ("none", {}, "no such run folder"),
    ("empty", {}, "vocab.tsv not found"),
    ("vocab-only", {}, "holds no checkpoints"),
    ("trained", {"words": 2}, "--words must be >= 3"),
    ("trained", {"out": Path("plot.jpg2")}, "unsupported file type"),
    ("trained", {"out": Path("missing/plot.png")}, "does not exist"),
])
def test_input_errors_name_the_fix(tmp_path: Path, setup: str, kwargs: dict,
                                   message: str) -> None:
    run = tmp_path / "run"
    if setup == "empty":
        run.mkdir()
    elif setup == "vocab-only":
        write_run_files(run, make_config(), fake_vocab())
    elif setup == "trained":
        make_trained_run(run)
    if "out" in kwargs:
        kwargs = {**kwargs, "out": tmp_path / kwargs["out"]}
    with pytest.raises(InputError, match=message):
        visualize(run, **kwargs)


def test_existing_plot_survives_a_failed_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_trained_run(run)
    out = tmp_path / "keep.png"
    out.write_bytes(b"old plot")
    (run / "vocab.tsv").write_text("broken line without a tab\n")
    with pytest.raises(InputError, match="not word<TAB>count"):
        visualize(run, out=out)
    assert out.read_bytes() == b"old plot"


def test_vocab_and_checkpoint_disagree(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_trained_run(run)
    (run / "vocab.tsv").write_text("a\t3\nb\t2\nc\t1\n")
    with pytest.raises(InputError, match="inconsistent"):
        visualize(run)


def test_read_vocab_words(tmp_path: Path) -> None:
    (tmp_path / "v.tsv").write_text("the\t10\nof\t5\n")
    assert read_vocab_words(tmp_path / "v.tsv") == ["the", "of"]
