"""``visualize``: the labelled plot from a run's latest checkpoint, and its input errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.image import imread

from embedlab.checkpoint import CheckpointManager
from embedlab.errors import InputError
from embedlab.track.visualize import read_vocab_words, visualize

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


def test_a_checkpoint_picked_by_step_best_or_its_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_trained_run(run)
    assert visualize(run, words=30, step=10) == run / "exports" / "pca-step10.png"
    folder = run / "checkpoints" / "ckpt-00000010"
    out = visualize(folder, words=30, out=tmp_path / "ten.png")
    assert imread(out).shape == imread(run / "exports" / "pca-step10.png").shape
    assert visualize(folder, words=30, force=True) == run / "exports" / "pca-step10.png"
    with pytest.raises(InputError, match="has no checkpoint at step 15"):
        visualize(run, words=30, step=15)
    with pytest.raises(InputError, match=r"--step/--best choose a checkpoint of a run folder"):
        visualize(out, words=30, step=10, out=tmp_path / "x.png")


@pytest.mark.slow  # t-SNE: seconds on an idle 2-core machine, much more under load
def test_tsne_plot_to_chosen_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    out = visualize(run, method="tsne", words=20, out=tmp_path / "t.png")
    assert out == tmp_path / "t.png" and imread(out).ndim == 3


# each message: the problem, then the fix (matched as plain text, not as a pattern)
@pytest.mark.parametrize(("setup", "kwargs", "message"), [
    ("none", {}, "no such run folder or vectors file: {run}; pass a folder made by embedlab "
                 "train (see embedlab runs), or a word2vec/.npy file"),
    ("file", {}, "{run} is a file, not a run folder: a word2vec/.npy vectors file is plotted "
                 "with --out for the image, e.g. --out pca.png"),
    ("empty", {}, "{run} holds no checkpoints (no checkpoints/ folder); pass a run folder "
                  "that has been trained, or a checkpoint folder"),
    ("vocab-only", {}, "holds no checkpoints (no checkpoints/ folder); pass a run folder that "
                       "has been trained, or a checkpoint folder"),
    ("trained", {"words": 2}, "--words must be >= 3, got 2; e.g. --words 300"),
    ("trained", {"out": Path("plot.jpg2")},
     "plot.jpg2: unsupported file type; use one of .png, .svg, .pdf"),
    ("trained", {"out": Path("missing/plot.png")},
     "folder {tmp}/missing does not exist; create it first"),
    # an existing folder was "an unsupported file type"
    ("trained", {"out": Path(".")}, "--out {tmp} is a folder; pass a file path, e.g. --out "
                                    "{tmp}/pca.png"),
])
def test_input_errors_name_the_fix(tmp_path: Path, setup: str, kwargs: dict,
                                   message: str) -> None:
    run = tmp_path / "run"
    if setup == "empty":
        run.mkdir()
    elif setup == "file":
        run.write_text("1 2\nw 1 2\n")
    elif setup == "vocab-only":
        write_run_files(run, make_config(), fake_vocab())
    elif setup == "trained":
        make_trained_run(run)
    if "out" in kwargs:
        kwargs = {**kwargs, "out": tmp_path / kwargs["out"]}
    with pytest.raises(InputError, match=re.escape(message.format(run=run, tmp=tmp_path))):
        visualize(run, **kwargs)
    if setup == "empty":  # the whole message, nothing after the fix
        with pytest.raises(InputError) as e:
            visualize(run, **kwargs)
        assert str(e.value) == message.format(run=run, tmp=tmp_path)


def test_a_word2vec_file_is_plotted_by_its_first_words(tmp_path: Path) -> None:
    # "no such run folder: vec.bin", though every other query command reads vectors files
    from embedlab.vectors import Vectors

    vocab = fake_vocab()
    matrix = embeddings_at(vocab, 10, 10)
    source = Vectors(tuple(vocab.words), matrix).to_word2vec(tmp_path / "v.bin", binary=True)
    out = visualize(source, words=20, out=tmp_path / "v.png")
    assert out == tmp_path / "v.png" and imread(out).ndim == 3


def test_labels_the_font_lacks_are_one_warning_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """matplotlib warns per missing glyph, with a source line each; the plot says it once."""
    import numpy as np

    from embedlab.vectors import Vectors

    words = ("東京", "大阪", "日本", "cat", "dog")
    matrix = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    source = Vectors(words, matrix).to_word2vec(tmp_path / "v.txt")
    capsys.readouterr()
    import matplotlib

    with matplotlib.rc_context({"font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"]}):
        out = visualize(source, words=5, out=tmp_path / "v.png")  # matplotlib's own font
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Glyph" not in err and "UserWarning" not in err
    assert err.startswith("embedlab: warning: 6 character(s) of the words or the title are not "
                          "in matplotlib's font (京, 大, 日 and 3 more): they are drawn as boxes "
                          f"in {out}")


def test_existing_plot_survives_a_failed_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_trained_run(run)
    out = tmp_path / "keep.png"
    out.write_bytes(b"old plot")
    (run / "vocab.tsv").write_text("broken line without a tab\n")
    with pytest.raises(InputError, match=re.escape("vocab.tsv:1: expected 'word<TAB>count', got "
                                                   "'broken line without a tab'; re-run 'embedlab "
                                                   "prepare' to recreate the vocabulary")):
        visualize(run, out=out, force=True)
    assert out.read_bytes() == b"old plot"


@pytest.mark.parametrize("copy", ["none", "prepared"])
def test_vocab_and_checkpoint_disagree(tmp_path: Path, copy: str) -> None:
    run = tmp_path / "run"
    make_trained_run(run)
    right = (run / "vocab.tsv").read_bytes()
    rows = len(fake_vocab())
    if copy == "prepared":  # the trainer's source of vocab.tsv: named as the one to copy back
        (run / "prepared").mkdir()
        (run / "prepared" / "vocab.tsv").write_bytes(right)
        fix = f"copy {run}/prepared/vocab.tsv, which lists {rows} words, to {run}/vocab.tsv"
    else:
        fix = (f"restore {run}/vocab.tsv (the {rows}-word vocabulary the checkpoint was trained "
               "with) from a backup or from the prepared corpus the run was trained on")
    (run / "vocab.tsv").write_text("a\t3\nb\t2\nc\t1\n")
    with pytest.raises(InputError) as e:
        visualize(run)
    assert str(e.value) == (f"{run}/vocab.tsv lists 3 words but checkpoint "
                            f"{run}/checkpoints/ckpt-00000020 has {rows} rows of input "
                            f"embeddings; {fix}")
    if copy == "prepared":  # the fix works
        (run / "vocab.tsv").write_bytes((run / "prepared" / "vocab.tsv").read_bytes())
        assert imread(visualize(run, words=10)).ndim == 3


def test_read_vocab_words(tmp_path: Path) -> None:
    (tmp_path / "v.tsv").write_text("the\t10\nof\t5\n")
    assert read_vocab_words(tmp_path / "v.tsv") == ["the", "of"]


def test_plot_is_readable_by_others(tmp_path: Path) -> None:
    import os
    import stat

    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    old = os.umask(0o022)
    try:
        out = visualize(run, words=10)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # not mkstemp's 0600


@pytest.mark.parametrize("where", ["parent-is-file", "read-only", "exports-is-file"])
def test_unwritable_out_is_one_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           where: str) -> None:
    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    (tmp_path / "f").write_text("precious")
    out: Path | None = tmp_path / "f" / "plot.png"
    match = r"cannot write .*plot\.png \(.*f is a file, not a folder\); pass --out in a folder"
    if where == "read-only":
        def denied(*args: object, **kwargs: object) -> tuple[int, str]:
            raise PermissionError(13, "Permission denied")  # mkstemp in a read-only folder

        monkeypatch.setattr("embedlab.fsutil.tempfile.mkstemp", denied)
        out = tmp_path / "plot.png"
        match = r"cannot write .*plot\.png \(Permission denied\); pass --out in a writable folder"
    elif where == "exports-is-file":
        (run / "exports").write_text("precious")
        out = None
        exports = run / "exports"
        match = re.escape(f"cannot write {exports}/pca-step5.png ({exports} is a file, not a "
                          f"folder); move or rename {exports}, or pass --out outside it, e.g. "
                          "--out pca-step5.png") + "$"
    with pytest.raises(InputError, match=match):
        visualize(run, words=10, out=out)
    assert (tmp_path / "f").read_text() == "precious"
    assert not (tmp_path / "plot.png").exists()
    if where == "exports-is-file":
        assert (run / "exports").read_text() == "precious"


def test_plot_of_an_exported_subset_with_renamed_embeddings(tmp_path: Path) -> None:
    # 'embedlab ckpt RUN --export-subset OUT --map embed_matrix=input_embeddings'
    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    w = embeddings_at(fake_vocab(), 5, 5)
    CheckpointManager(tmp_path / "sub").save(
        5, {"embed_matrix": w}, {"original_names": {"embed_matrix": "input_embeddings"}})
    (tmp_path / "sub" / "vocab.tsv").write_bytes((run / "vocab.tsv").read_bytes())
    assert imread(visualize(tmp_path / "sub", words=10)).ndim == 3


def test_existing_plot_needs_force_like_export(tmp_path: Path) -> None:
    # visualize --out silently replaced files that export refuses without --force
    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    out = tmp_path / "mine.png"
    out.write_bytes(b"precious")
    with pytest.raises(InputError) as e:
        visualize(run, words=10, out=out)
    assert str(e.value) == (f"{out} already exists; pass --force to replace it or choose "
                            "another --out")
    assert out.read_bytes() == b"precious"
    assert imread(visualize(run, words=10, out=out, force=True)).ndim == 3
    default = visualize(run, words=10)  # the default output follows the same rule
    with pytest.raises(InputError, match=re.escape(f"{default} already exists; pass --force")):
        visualize(run, words=10)
    assert visualize(run, words=10, force=True) == default


def test_a_fifo_is_never_replaced_and_a_link_is_written_through(tmp_path: Path) -> None:
    import os
    import stat

    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as e:
        visualize(run, words=10, out=fifo, force=True)
    assert str(e.value) == (f"{fifo} is not a regular file (it is a FIFO); move it away or pick "
                            "another --out file path")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    target = tmp_path / "real.png"
    target.write_bytes(b"old")
    link = tmp_path / "link.png"
    link.symlink_to(target)
    visualize(run, words=10, out=link, force=True)
    assert link.is_symlink() and imread(target).ndim == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.png", "link.png", "real.png",
                                                          "run"]


@pytest.mark.parametrize("vocab", [
    b"the\t10\n\xff\xfe\t5\n",  # not UTF-8: was a UnicodeDecodeError traceback
    b"the\t10\nthe\t5\n",  # duplicates, blank lines, extra tabs, missing or negative counts:
    b"the\t10\n\nof\t5\n",  # accepted here, refused by neighbors/export/eval
    b"the\t10\nof\t5\t1\n",
    b"the\t10\nof\t\n",
    b"the\t10\nof\t-5\n",
])
def test_vocabulary_is_read_as_neighbors_reads_it(tmp_path: Path, vocab: bytes) -> None:
    from embedlab.vectors import load

    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    (run / "vocab.tsv").write_bytes(vocab)
    with pytest.raises(InputError) as seen_by_load:
        load(run)
    with pytest.raises(InputError) as e:
        visualize(run, words=10)
    assert str(e.value) == str(seen_by_load.value)
    assert not (run / "exports").exists()


def test_a_vocabulary_too_small_to_plot_says_so(tmp_path: Path) -> None:
    # "pass a larger --words" when --words was 300 and the vocabulary held 2 words
    import numpy as np

    from embedlab.data.vocab import Vocab

    run = tmp_path / "run"
    run.mkdir()
    Vocab(("a", "b"), np.array([2, 1])).save_tsv(run / "vocab.tsv")
    w = np.ones((2, 3), np.float32)
    CheckpointManager(run).save(4, {"input_embeddings": w, "output_embeddings": w}, {})
    with pytest.raises(InputError, match=re.escape(
            f"{run} has 2 words to plot, and a 2-D projection needs at least 3; train on a "
            "corpus with more distinct words, or a lower --min-count")):
        visualize(run, words=300)


def test_the_title_names_the_run_given_as_dot(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.figure

    titles: list[str] = []
    real = matplotlib.figure.Figure.savefig

    def keep_title(self: matplotlib.figure.Figure, *args: object, **kwargs: object) -> None:
        titles.append(self.axes[0].get_title())
        real(self, *args, **kwargs)

    run = tmp_path / "run"
    make_trained_run(run)
    monkeypatch.chdir(run)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep_title)
    visualize(Path("."), words=5, out=tmp_path / "dot.png")
    assert titles and "words — run, step 20" in titles[0]


def test_more_words_than_any_vocabulary_plots_all_of_it(tmp_path: Path) -> None:
    # above sys.maxsize, islice raised a ValueError traceback
    run = tmp_path / "run"
    make_trained_run(run)
    assert visualize(run, words=2**63, out=tmp_path / "all.png").is_file()


@pytest.mark.parametrize("spelling", ["as-given", "absolute", "through-a-link", "dot-dot"])
def test_out_in_the_runs_exports_folder_makes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 spelling: str) -> None:
    # --out RUN/exports/x.png, the path that a refused --out RUN/x.png suggests, was refused
    # with "folder RUN/exports does not exist; create it first" (export makes that folder)
    make_trained_run(tmp_path / "run", steps=(5,))
    (tmp_path / "link").symlink_to(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    run = Path("run")
    out = {"as-given": run / "exports" / "x.png",
           "absolute": tmp_path / "run" / "exports" / "x.png",
           "through-a-link": Path("link") / "exports" / "x.png",
           "dot-dot": run / "exports" / ".." / "exports" / "x.png"}[spelling]
    assert visualize(run, words=10, out=out) == out
    assert [p.name for p in (tmp_path / "run" / "exports").iterdir()] == ["x.png"]
    assert imread(tmp_path / "run" / "exports" / "x.png").ndim == 3


def test_out_elsewhere_in_a_missing_folder_is_still_refused(tmp_path: Path) -> None:
    # only the run's own exports/ is made: not a folder under it, nor another run's
    run = tmp_path / "run"
    make_trained_run(run, steps=(5,))
    make_trained_run(tmp_path / "other", steps=(5,))
    for out in (run / "exports" / "sub" / "x.png", tmp_path / "other" / "exports" / "x.png"):
        with pytest.raises(InputError, match=re.escape(f"folder {out.parent} does not exist; "
                                                       "create it first")):
            visualize(run, words=10, out=out)
    assert not (run / "exports").exists() and not (tmp_path / "other" / "exports").exists()


@pytest.mark.parametrize(("vectors", "needle"), [
    ("nan", "holds nan or inf values in the vectors of the words to plot"),
    ("no dim", "holds vectors of no dimension (shape (67, 0))"),
])
def test_vectors_that_cannot_be_projected_are_one_line(tmp_path: Path, vectors: str,
                                                       needle: str) -> None:
    # a diverged or re-signed checkpoint: the SVD "did not converge", or an IndexError
    import numpy as np

    run = tmp_path / "run"
    vocab = fake_vocab()
    write_run_files(run, make_config(), vocab)
    w = embeddings_at(vocab, 10, 10)
    w = np.full_like(w, np.nan) if vectors == "nan" else w[:, :0]
    CheckpointManager(run).save(10, {"input_embeddings": w}, {"step": 10})
    with pytest.raises(InputError, match=re.escape(needle)):
        visualize(run, words=30)


def test_a_run_folder_whose_name_is_not_utf8_is_plotted(tmp_path: Path) -> None:
    # its name, in the title, holds surrogates that matplotlib refuses with a TypeError
    import os

    run = Path(os.fsdecode(os.fsencode(tmp_path) + b"/bad\xff\xfe"))
    make_trained_run(run)
    out = visualize(run, words=30, out=tmp_path / "v.png")
    assert imread(out).shape[0] >= 800
