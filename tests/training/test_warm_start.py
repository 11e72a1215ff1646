"""Warm start (--init-from): shared words' rows are copied, new words start fresh."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.data.vocab import Vocab
from embedlab.engines import build_engine
from embedlab.engines.params import init_params
from embedlab.engines.step import StepConfig
from embedlab.errors import InputError
from embedlab.seeding import mt19937_rng
from embedlab.training.warm_start import warm_start

from .small_runs import make_cfg, run_train, write_corpus


def _overlapping_corpus(tmp_path: Path) -> Path:
    """A corpus sharing w0..w99 with the reference's vocabulary and adding x0..x99."""
    other = tmp_path / "other.txt"
    text = write_corpus(tmp_path / "a.txt", lines=300, vocab=100, seed=5).read_text()
    text += write_corpus(tmp_path / "b.txt", lines=300, vocab=100, seed=6, prefix="x").read_text()
    other.write_text(text)
    return other


def _engine(params: Any) -> Any:
    """A native engine training ``params`` (what a run's set-up builds)."""
    return build_engine("native", StepConfig("skipgram", "neg", 5, 5, 16), params, None, 16)


def test_warm_start_copies_shared_rows_only(reference: Path, tmp_path: Path) -> None:
    src_vocab = Vocab.load_tsv(reference / "vocab.tsv")
    src, _ = load_checkpoint(find_checkpoint(reference))
    words = ("w0", "w3", "new1", "w7", "new2")
    vocab = Vocab(words, np.array([9, 8, 7, 6, 5], dtype=np.int64), None)
    params = init_params(len(vocab), 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    fresh_in, fresh_out = params.w_in.copy(), params.w_out.copy()
    message = warm_start(_engine(params), vocab, str(reference))
    assert "copied 3 of 5 words' rows" in message and "2 new words" in message
    for i, w in enumerate(words):
        j = src_vocab.id(w)
        if j is None:
            assert np.array_equal(params.w_in[i], fresh_in[i])
            assert np.array_equal(params.w_out[i], fresh_out[i])
        else:
            assert np.array_equal(params.w_in[i], src["input_embeddings"][j])
            assert np.array_equal(params.w_out[i], src["output_embeddings"][j])


def test_warm_start_refuses_another_dim(reference: Path) -> None:
    vocab = Vocab(("w0",), np.array([5], dtype=np.int64), None)
    params = init_params(1, 4, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    with pytest.raises(InputError, match="has dim 8, this run 4; pass a matching --dim"):
        warm_start(_engine(params), vocab, str(reference))


@pytest.mark.parametrize("name", ["pre.txt", "pre.bin.gz", "pre.npy"])
def test_warm_start_from_a_vectors_file_copies_shared_input_rows(tmp_path: Path,
                                                                 name: str) -> None:
    # gensim's intersect_word2vec_format: pretrained input vectors for the words both have;
    # such a file has no output vectors, which keep their fresh start
    from embedlab.vectors import Vectors

    pretrained = Vectors(["w3", "w0", "zzz"],
                         np.arange(24, dtype=np.float32).reshape(3, 8) / 7)
    path = tmp_path / name
    if name.endswith(".npy"):
        pretrained.to_npy(path)
    else:
        pretrained.to_word2vec(path)
    vocab = Vocab(("w0", "new", "w3"), np.array([9, 8, 7], dtype=np.int64), None)
    params = init_params(len(vocab), 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    fresh_in, fresh_out = params.w_in.copy(), params.w_out.copy()
    used: list[Path] = []
    message = warm_start(_engine(params), vocab, str(path), used=used)
    assert message == (f"embedlab: warm start from {path}: copied 2 of 3 words' input vectors "
                       "(a vectors file holds no output vectors); 1 new words initialised as "
                       "usual")
    assert used == [path]
    assert np.array_equal(params.w_in[0], pretrained.matrix[1])
    assert np.array_equal(params.w_in[2], pretrained.matrix[0])
    assert np.array_equal(params.w_in[1], fresh_in[1])
    assert np.array_equal(params.w_out, fresh_out)
    params = init_params(len(vocab), 4, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    with pytest.raises(InputError, match="holds vectors of dim 8, this run 4; pass --dim 8"):
        warm_start(_engine(params), vocab, str(path))


def test_init_from_says_what_was_copied(reference: Path, tmp_path: Path) -> None:
    other = _overlapping_corpus(tmp_path)
    cfg = make_cfg(other, init_from=str(reference), max_steps=1)
    result, message = run_train(cfg, tmp_path / "warm")
    src_vocab = Vocab.load_tsv(reference / "vocab.tsv")
    expected = sum(1 for w in result.vocab.words if src_vocab.id(w) is not None)
    assert 10 < expected < len(result.vocab)
    assert f"copied {expected} of {len(result.vocab)} words' rows" in message


def test_an_hs_run_takes_the_input_rows_of_a_negative_sampling_run(
        corpus: Path, reference: Path, tmp_path: Path) -> None:
    # hs has no output word vectors (its output rows are Huffman-tree nodes): input rows only
    cfg = make_cfg(corpus, model={"loss": "hs"}, init_from=str(reference), max_steps=1)
    _, said = run_train(cfg, tmp_path / "hs")
    assert "words' rows (input embeddings);" in said


def test_an_hs_run_is_not_a_source_of_output_vectors(corpus: Path, tmp_path: Path) -> None:
    hs = tmp_path / "hs"
    run_train(make_cfg(corpus, model={"loss": "hs"}, max_steps=2), hs)
    with pytest.raises(InputError, match=r"was trained with --loss hs, whose output vectors are "
                                         r"Huffman-tree nodes, not words; warm-start a --loss hs "
                                         r"run from it \(its input vectors only"):
        run_train(make_cfg(corpus, init_from=str(hs), max_steps=1), tmp_path / "neg")
    _, said = run_train(make_cfg(corpus, model={"loss": "hs"}, init_from=str(hs), max_steps=1),
                        tmp_path / "hs2")
    assert "(input embeddings)" in said


def test_a_vocabulary_edited_beside_the_vectors_is_refused(reference: Path,
                                                           tmp_path: Path) -> None:
    """Two words swapped in vocab.tsv: every reader refuses it, and so does a warm start, which
    would copy each one's row to the other."""
    import shutil

    source = tmp_path / "source"
    shutil.copytree(reference, source)
    lines = (source / "vocab.tsv").read_text().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    (source / "vocab.tsv").write_text("".join(lines))
    vocab = Vocab(("w0", "w1"), np.array([9, 8], dtype=np.int64), None)
    params = init_params(2, 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    with pytest.raises(InputError, match=r"is not the vocabulary ckpt-\d+ was trained with"):
        warm_start(_engine(params), vocab, str(source))


def test_a_subset_with_renamed_tensors_is_a_source(reference: Path, tmp_path: Path) -> None:
    """A subset whose input embeddings were exported under another name (--map) records what
    they were; a warm start follows that record, as the readers of vectors do."""
    from embedlab.cli import main

    subset = tmp_path / "subset"
    main(["ckpt", str(reference), "--export-subset", str(subset), "--names",
          "input_embeddings,output_embeddings", "--map", "emb=input_embeddings"])
    src, _ = load_checkpoint(find_checkpoint(reference))
    vocab = Vocab(("w0", "w3"), np.array([9, 8], dtype=np.int64), None)
    params = init_params(2, 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    warm_start(_engine(params), vocab, str(subset))
    src_vocab = Vocab.load_tsv(reference / "vocab.tsv")
    row = src_vocab.id("w3")
    assert np.array_equal(params.w_in[1], src["input_embeddings"][row])
    # swapped names: each tensor is taken by what it was first saved as
    swapped = tmp_path / "swapped"
    main(["ckpt", str(reference), "--export-subset", str(swapped), "--names",
          "input_embeddings,output_embeddings", "--map", "input_embeddings=output_embeddings",
          "--map", "output_embeddings=input_embeddings"])
    params = init_params(2, 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    warm_start(_engine(params), vocab, str(swapped))
    assert np.array_equal(params.w_in[1], src["input_embeddings"][row])
    assert np.array_equal(params.w_out[1], src["output_embeddings"][row])
    # the output vectors written as the vectors (what the readers suggest to read them)
    outputs = tmp_path / "outputs"
    main(["ckpt", str(reference), "--export-subset", str(outputs), "--names",
          "output_embeddings", "--map", "input_embeddings=output_embeddings"])
    params = init_params(2, 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    warm_start(_engine(params), vocab, str(outputs))
    assert np.array_equal(params.w_in[1], src["output_embeddings"][row])


def test_a_restart_says_when_its_warm_start_copies_from_another_checkpoint(
        corpus: Path, tmp_path: Path) -> None:
    """The source run trained on since: the same --init-from now names its newer checkpoint.
    The restart says which checkpoint each start copied from, and how to pin the old one."""
    import embedlab

    fast = {"dim": 8, "batch_size": 32, "threads": 1, "tensorboard": False, "progress": False}
    source, run = tmp_path / "source", tmp_path / "run"
    embedlab.train(corpus=corpus, run=source, **fast, max_steps=3)
    first = find_checkpoint(source)
    embedlab.train(corpus=corpus, run=run, **fast, init_from=str(source), max_steps=2)
    with warnings.catch_warnings(record=True) as same:  # no word while the start is the same
        warnings.simplefilter("always")
        embedlab.train(corpus=corpus, run=run, restart=True, max_steps=2)
    assert not [w for w in same if "warm start copies" in str(w.message)]
    embedlab.train(corpus=corpus, run=source, max_steps=6)
    with pytest.warns(UserWarning, match=(
            rf"restart=True: this warm start copies from {re.escape(str(find_checkpoint(source)))}"
            rf", the old run's copied from {re.escape(str(first))} .*pass "
            rf"init_from='{re.escape(str(first))}' to start from the same vectors")):
        embedlab.train(corpus=corpus, run=run, restart=True, max_steps=2)
    # another source given to the restart is the user's choice: no word
    other = tmp_path / "other"
    embedlab.train(corpus=corpus, run=other, **fast, max_steps=2)
    with warnings.catch_warnings(record=True) as chosen:
        warnings.simplefilter("always")
        embedlab.train(corpus=corpus, run=run, restart=True, init_from=str(other), max_steps=2)
    assert not [w for w in chosen if "warm start copies" in str(w.message)]


def test_output_rows_of_another_shape_than_the_input_rows_are_refused(
        reference: Path, tmp_path: Path) -> None:
    """A checkpoint put together by hand whose output rows do not match its words."""
    import shutil

    from embedlab.checkpoint import CheckpointManager

    source = tmp_path / "odd"
    source.mkdir()
    shutil.copy(reference / "vocab.tsv", source / "vocab.tsv")
    src, state = load_checkpoint(find_checkpoint(reference))
    tensors = {"input_embeddings": src["input_embeddings"],
               "output_embeddings": src["output_embeddings"][:-1]}
    CheckpointManager(source).save(1, tensors, {k: v for k, v in state.items()
                                                if k not in ("step", "metrics")}, {"loss": 1.0})
    vocab = Vocab(("w0",), np.array([5], dtype=np.int64), None)
    params = init_params(1, 8, init="centered", nce=False, rng=mt19937_rng(1, "init"))
    n = len(src["input_embeddings"])
    with pytest.raises(InputError, match=rf"holds output embeddings of shape \({n - 1}, 8\) but "
                                         rf"input embeddings of shape \({n}, 8\)"):
        warm_start(_engine(params), vocab, str(source))
