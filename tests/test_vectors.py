from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gensim.models import KeyedVectors

import embedlab
from embedlab.checkpoint import CheckpointManager
from embedlab.data.vocab import Vocab
from embedlab.errors import InputError
from embedlab.vectors import UnknownWordError, Vectors, load

WORDS = (*(f"w{i}" for i in range(60)), "king", "queen", "man", "woman", "King")


@pytest.fixture
def vec() -> Vectors:
    m = np.random.default_rng(0).standard_normal((len(WORDS), 16)).astype(np.float32)
    return Vectors(WORDS, m, np.arange(len(WORDS), 0, -1), "test")


def _kv(v: Vectors) -> KeyedVectors:
    kv = KeyedVectors(v.dim)
    kv.add_vectors(list(v.words), np.array(v.matrix))
    return kv


def make_run(root: Path, words: tuple[str, ...], steps: dict[int, np.ndarray],
             best: dict[int, float] | None = None) -> Path:
    """A run folder as the trainer writes it: vocab.tsv + verified checkpoints."""
    root.mkdir(parents=True, exist_ok=True)
    Vocab(words, np.arange(len(words), 0, -1, dtype=np.int64)).save_tsv(root / "vocab.tsv")
    mgr = CheckpointManager(root, keep=10, best_metric="analogy", best_mode="max")
    for step, m in steps.items():
        tensors = {"input_embeddings": torch.from_numpy(m),
                   "output_embeddings": torch.zeros_like(torch.from_numpy(m))}
        mgr.save(step, tensors, {"epoch": 0}, {"analogy": (best or {}).get(step, 0.0)})
    return root


# ---- the object ---------------------------------------------------------------------------

def test_matrix_is_read_only_and_caller_array_untouched() -> None:
    m = np.ones((2, 3), np.float32)
    v = Vectors(("a", "b"), m)
    with pytest.raises(ValueError):
        v.matrix[0, 0] = 5
    m[0, 0] = 2  # the caller's array stays writable
    assert v.dim == 3 and len(v) == 2 and "a" in v and "c" not in v


@pytest.mark.parametrize(("words", "matrix", "message"), [
    (("a", "b", "a"), np.zeros((3, 2)), "words[2] 'a' is listed twice (first as words[0]); "
                                        "words must be unique: drop or rename one, with its row"),
    (("a",), np.zeros((2, 2)), "matrix has shape (2, 2) for 1 words; pass one row per word, a "
                               "matrix of shape (1, DIM), row i the vector of words[i]"),
    (("a", "b"), np.zeros(2), "matrix has shape (2,) for 2 words; pass one row per word, a "
                              "matrix of shape (2, DIM), row i the vector of words[i]"),
    ((), np.zeros((0, 3)), "no words given; pass at least one word, with its vector as a row of "
                           "matrix="),
    (("a",), np.zeros((1, 0)), "matrix has shape (1, 0): vectors of no dimension; pass at least "
                               "one column"),
    (("a", 5), np.zeros((2, 2)), "words[1] is int 5, not a str; pass every word as a str (e.g. "
                                 "str(word))"),
    (("a", b"b"), np.zeros((2, 2)), "words[1] is bytes b'b', not a str; pass every word as a str "
                                    "(e.g. str(word))"),
    ("ab", np.zeros((2, 2)), "words= must be a sequence of str, one per row, got the str 'ab'; "
                             "e.g. words=['king', 'queen']"),
    (3, np.zeros((1, 2)), "words= must be a sequence of str, one per row, got int 3; e.g. "
                          "words=['king', 'queen']"),
    (("a", "b"), np.array([[0.5, 1.0], [np.nan, 2.0]]),
     "the vector of words[1] 'b' holds nan, not a finite float32 number (NaN, infinite or beyond "
     "±3.4e38), which would poison every query; fix or drop that row"),
    (("a", "b"), np.array([[0.5, -np.inf], [1.0, 2.0]], np.float32),
     "the vector of words[0] 'a' holds -inf, not a finite float32 number (NaN, infinite or "
     "beyond ±3.4e38), which would poison every query; fix or drop that row"),
    (("a", "b"), np.array([[0.5, 1.0], [1e39, 2.0]]),  # float64, beyond float32
     "the vector of words[1] 'b' holds inf, not a finite float32 number (NaN, infinite or beyond "
     "±3.4e38), which would poison every query; fix or drop that row"),
])
def test_invalid_construction(words: object, matrix: np.ndarray, message: str) -> None:
    """embedlab.Vectors(words, matrix) refuses what loading refuses, in one line: a NaN row
    would rank first in every query and be written to files that load refuses."""
    with pytest.raises(InputError) as info:
        Vectors(words, matrix)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_construction_checks_that_pass() -> None:
    big = np.full((3, 4), 3e38, np.float32)  # finite, though the sum of a row overflows
    assert np.array_equal(Vectors(("a", "b", "c"), big).matrix, big)
    words = Vectors(np.array(["a", "b"]), np.eye(2))  # NumPy's str: Python's in the tuple
    assert words.words == ("a", "b") and all(type(w) is str for w in words.words)
    with pytest.raises(InputError, match=r"^matrix= holds text \(dtype <U1\), not real numbers"):
        Vectors(("a",), [["x", "y"]])
    with pytest.raises(InputError) as info:
        Vectors(("a", "b"), np.eye(2), np.array([1]))
    assert str(info.value) == ("1 counts for 2 words; pass one count per word, in the words' "
                               "order, or counts=None")


def test_most_similar_equals_gensim(vec: Vectors) -> None:
    kv = _kv(vec)
    ours = vec.most_similar("king", k=7)
    theirs = kv.most_similar("king", topn=7)
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], abs=1e-6)
    multi = vec.most_similar(["king", "woman"], k=5)
    assert [w for w, _ in multi] == [w for w, _ in kv.most_similar(["king", "woman"], topn=5)]


def test_euclidean_neighbours_equal_brute_force(vec: Vectors) -> None:
    d = np.linalg.norm(vec.matrix - vec.vector("man"), axis=1)
    d[vec.index("man")] = np.inf
    expect = np.argsort(d)[:6]
    got = vec.most_similar("man", k=6, metric="euclidean")
    assert [w for w, _ in got] == [vec.words[i] for i in expect]
    assert [s for _, s in got] == pytest.approx(d[expect].tolist(), rel=1e-4)


def test_k_larger_than_vocabulary() -> None:
    v = Vectors(("a", "b", "c"), np.eye(3, dtype=np.float32))
    assert len(v.most_similar("a", k=10)) == 2
    assert v.analogy("a", "b", "c", k=10) == []


@pytest.mark.filterwarnings("ignore:Call to deprecated `init_sims`:DeprecationWarning")
def test_analogy_equals_gensim(vec: Vectors) -> None:
    kv = _kv(vec)
    add = vec.analogy("man", "king", "woman", k=5)
    theirs = kv.most_similar(positive=["king", "woman"], negative=["man"], topn=5)
    assert [w for w, _ in add] == [w for w, _ in theirs]
    assert [s for _, s in add] == pytest.approx([s for _, s in theirs], abs=1e-6)
    mul = vec.analogy("man", "king", "woman", k=5, method="3cosmul")
    theirs = kv.most_similar_cosmul(positive=["king", "woman"], negative=["man"], topn=5)
    assert [w for w, _ in mul] == [w for w, _ in theirs]
    assert [s for _, s in mul] == pytest.approx([s for _, s in theirs], rel=1e-5)


def test_similarity(vec: Vectors) -> None:
    # in [-1, 1] as documented: the float64 rounding of a word with itself may exceed 1
    assert all(-1.0 <= vec.similarity(w, v) <= 1.0 for w in vec.words[:40] for v in vec.words[:40])
    assert vec.similarity("king", "king") == pytest.approx(1.0)
    expected = float(_kv(vec).similarity("king", "queen"))
    assert vec.similarity("king", "queen") == pytest.approx(expected, abs=1e-6)


def test_unknown_word_suggests(vec: Vectors) -> None:
    with pytest.raises(InputError, match=r"'kinq' is not in the vocabulary.*did you mean king"):
        vec.most_similar("kinq")
    with pytest.raises(InputError, match="did you mean king, King"):
        vec.vector("KING")
    with pytest.raises(InputError, match=r"^k must be a positive integer, got 0; e\.g\. k=10$"):
        vec.most_similar("king", k=0)
    with pytest.raises(InputError, match="unknown analogy method"):
        vec.analogy("man", "king", "woman", method="3cosfoo")  # type: ignore[arg-type]


@pytest.mark.parametrize("held, asked", [("NFC", "NFD"), ("NFD", "NFC")])
def test_a_word_in_another_normal_form_is_named_with_it(held: str, asked: str) -> None:
    """The two print alike: "check the spelling or the case" left the user staring at the
    same word."""
    import unicodedata

    word = "r\u00e9sum\u00e9"
    vec = Vectors([unicodedata.normalize(held, word), "x"], np.eye(2, dtype=np.float32))
    query = unicodedata.normalize(asked, word)
    with pytest.raises(InputError) as e:
        vec.most_similar(query)
    other = unicodedata.normalize(held, word)
    assert str(e.value) == (f"{query!a} is not in the vocabulary (2 words), but "
                            f"{other!a}, the same text in Unicode's {held} form, is: words "
                            f"are matched exactly, not normalised; pass "
                            f"unicodedata.normalize({held!r}, word)")
    assert vec.most_similar(unicodedata.normalize(held, query), 1)[0][0] == "x"


def test_gensim_argument_names_are_aliases(vec: Vectors) -> None:
    # most_similar(word, k) and gensim's most_similar(positive, negative, topn) are one method
    expect = vec.most_similar("king", k=4)
    assert vec.most_similar("king", 4) == vec.most_similar("king", np.int64(4)) == expect
    assert vec.most_similar(word="king", k=4) == expect
    assert vec.most_similar(positive="king", topn=4) == expect
    assert vec.most_similar(["king"], None, 4) == expect
    assert vec.most_similar("king", topn=0) == []  # gensim's answer; k=0 stays an error
    assert vec.similarity(w1="king", w2="queen") == vec.similarity("king", "queen")
    with pytest.raises(TypeError, match="pass positive or word, not both"):
        vec.most_similar("king", word="queen")
    with pytest.raises(TypeError, match="pass k or a second positional argument, not both"):
        vec.most_similar("king", 3, k=4)
    with pytest.raises(TypeError, match="pass a or w1, not both"):
        vec.similarity("king", "queen", w1="man")
    with pytest.raises(InputError, match="negative words, weights and vectors need "
                                         "metric='cosine'"):
        vec.most_similar("king", "man", metric="euclidean")


def test_unknown_word_is_an_input_error_and_a_key_error(vec: Vectors) -> None:
    with pytest.raises(UnknownWordError) as e:
        vec.index("kinq")
    assert isinstance(e.value, InputError) and isinstance(e.value, KeyError)
    assert str(e.value) == "'kinq' is not in the vocabulary (65 words); did you mean king?"


def test_errors_name_python_arguments(vec: Vectors, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"restrict_vocab must be None or an integer >= 1, got 0"):
        vec.evaluate_analogies(tmp_path / "q.txt", restrict_vocab=0)
    with pytest.raises(InputError, match=r"restrict_vocab must be None or an integer >= 1, got -1"):
        vec.most_similar("king", restrict_vocab=-1)
    with pytest.raises(InputError, match=r"does not exist; pass the path of a questions-words "
                                         "file$"):
        vec.evaluate_analogies(tmp_path / "q.txt")
    with pytest.raises(InputError, match=r"does not exist; pass the path of a 'word1<TAB>word2"
                                         "<TAB>score' file$"):
        vec.evaluate_similarity(tmp_path / "p.tsv")


def test_evaluate_without_restriction(vec: Vectors, tmp_path: Path) -> None:
    questions = tmp_path / "q.txt"
    questions.write_text(": s\nman king woman queen\nw1 w2 w3 w64\n")
    everything = vec.evaluate_analogies(questions, restrict_vocab=None)
    assert everything.total.answered == 1 and everything.restrict_vocab == len(vec)
    assert vec.evaluate_analogies(questions).restrict_vocab == 30_000


# ---- loading ------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix, binary", [(".txt", False), (".bin", True), (".w2v", True)])
def test_load_word2vec_files(vec: Vectors, tmp_path: Path, suffix: str, binary: bool) -> None:
    path = vec.to_word2vec(tmp_path / f"v{suffix}", binary=binary)
    got = embedlab.load(path)
    assert got.words == vec.words and np.array_equal(got.matrix, vec.matrix)
    assert got.counts is None


def test_load_npy_keeps_counts(vec: Vectors, tmp_path: Path) -> None:
    path, _ = vec.to_npy(tmp_path / "v.npy")
    got = load(path)
    assert got.words == vec.words and np.array_equal(got.matrix, vec.matrix)
    assert got.counts is not None and np.array_equal(got.counts, vec.counts)


def test_load_run_folder_step_best_and_checkpoint(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    mats = {s: rng.standard_normal((4, 3)).astype(np.float32) for s in (10, 20, 30)}
    run = make_run(tmp_path / "run", ("UNK", "a", "b", "c"), mats, best={10: 0.1, 20: 0.9, 30: 0.5})
    latest = load(run)
    assert latest.words == ("UNK", "a", "b", "c")
    assert np.array_equal(latest.matrix, mats[30])
    assert latest.counts is not None and latest.counts.tolist() == [4, 3, 2, 1]
    assert np.array_equal(load(run, step=10).matrix, mats[10])
    assert np.array_equal(load(run, best=True).matrix, mats[20])
    ckpt = run / "checkpoints" / "ckpt-00000020"
    assert ckpt.is_dir()
    assert np.array_equal(load(ckpt).matrix, mats[20])


def test_checkpoints_lists_a_run_as_the_ckpt_command_does(tmp_path: Path) -> None:
    import embedlab

    mats = {s: np.full((2, 2), s, np.float32) for s in (10, 20)}
    run = make_run(tmp_path / "run", ("a", "b"), mats, best={10: 0.9, 20: 0.5})
    listed = embedlab.checkpoints(run)
    assert [c.step for c in listed] == [10, 20]
    assert [c.path for c in listed] == [run / "checkpoints" / "ckpt-00000010",
                                        run / "checkpoints" / "ckpt-00000020"]
    assert "best" in listed[0].roles and "latest" in listed[1].roles
    assert all(c.verified and c.problem is None and c.size > 0 for c in listed)
    assert np.array_equal(load(run, step=listed[0].step).matrix, mats[10])
    (listed[1].path / "tensors.safetensors").write_bytes(b"damaged")
    damaged = embedlab.checkpoints(str(run))[1]
    assert not damaged.verified and damaged.problem
    with pytest.raises(InputError) as info:
        embedlab.checkpoints(tmp_path / "nope")
    assert str(info.value) == f"{tmp_path / 'nope'} does not exist; pass a run folder"
    with pytest.raises(InputError, match=r"is not a run folder but holds runs \(run\); pass one"):
        embedlab.checkpoints(tmp_path)
    (tmp_path / "other").mkdir()
    with pytest.raises(InputError, match="holds no checkpoints"):
        embedlab.checkpoints(tmp_path / "other")
    with pytest.raises(InputError) as info:
        embedlab.checkpoints(listed[0].path)
    assert str(info.value) == f"{listed[0].path} is a checkpoint folder; pass its run folder {run}"


@pytest.mark.parametrize("name", ["v.txt", "v.bin", "v.npy"])
def test_load_limit_reads_the_first_words_as_gensim(vec: Vectors, tmp_path: Path,
                                                    name: str) -> None:
    path = tmp_path / name
    vec.to_npy(path) if name.endswith(".npy") else vec.to_word2vec(path)
    first = load(path, limit=7)
    assert first.words == vec.words[:7] and np.array_equal(first.matrix, vec.matrix[:7])
    assert first.matrix.base is None or first.matrix.base.shape[0] == 7  # not a view of all
    if name.endswith(".npy"):
        assert first.counts is not None and first.counts.tolist() == vec.counts[:7].tolist()
    else:
        theirs = KeyedVectors.load_word2vec_format(path, binary=name.endswith(".bin"), limit=7)
        assert list(first.words) == theirs.index_to_key
        np.testing.assert_array_equal(first.matrix, theirs.vectors)
    assert load(path, limit=len(vec) + 10).words == vec.words
    assert load(path, limit=np.int64(2)).words == vec.words[:2]


def test_load_limit_of_a_run_is_its_most_frequent_words(tmp_path: Path) -> None:
    m = np.arange(12, dtype=np.float32).reshape(4, 3)
    run = make_run(tmp_path / "run", ("UNK", "a", "b", "c"), {10: m})
    first = load(run, limit=2)
    assert first.words == ("UNK", "a") and np.array_equal(first.matrix, m[:2])
    assert first.counts is not None and first.counts.tolist() == [4, 3]
    assert load(run, step=10, limit=3).words == ("UNK", "a", "b")


def test_load_says_what_to_do_with_gensims_options(vec: Vectors, tmp_path: Path) -> None:
    path = vec.to_word2vec(tmp_path / "v.bin")
    for kwargs, message in [
            ({"binary": True}, "binary= is not needed: load tells a binary word2vec file from a "
                               "text one by its content (and gzip, bzip2 or xz by their first "
                               "bytes); drop binary="),
            ({"binary": False, "encoding": "utf8"},
             "binary= is not needed: load tells a binary word2vec file from a text one by its "
             "content (and gzip, bzip2 or xz by their first bytes); drop binary="),
            ({"fvocab": "vocab.txt"}, "fvocab=: load reads no separate vocabulary file; drop "
                                      "fvocab= (a run folder, or an .npy export with its "
                                      ".vocab.tsv, carries the words' counts)"),
            ({"no_header": True}, "no_header=: a word2vec file starts with its 'VOCAB_SIZE DIM' "
                                  "line; drop no_header= and add that line (the number of words "
                                  "and of values per word)"),
            ({"datatype": np.float16}, "datatype=: vectors load as float32; drop datatype= "
                                       "(vec.matrix.astype(...) is a copy of another type)"),
            ({"unicode_errors": "ignore"}, "unicode_errors=: bytes that are not UTF-8 in a word "
                                           "read as U+FFFD, with a warning (gensim's "
                                           "unicode_errors='replace'); drop unicode_errors="),
            ({"stpe": 3}, "load() takes no stpe=; its arguments are path, step=, best=, "
                          "limit= and encoding="),
            ({"limit": 0}, "limit must be None (every word) or an integer >= 1 (the first N "
                           "words), got 0; e.g. limit=100000"),
            ({"limit": True}, "limit must be None (every word) or an integer >= 1 (the first N "
                              "words), got True; e.g. limit=100000")]:
        for loader in (load, embedlab.load):  # the package's load passes them on
            with pytest.raises(InputError) as info:
                loader(path, **kwargs)
            assert str(info.value) == message
    assert embedlab.load(path, limit=2).words == vec.words[:2]


def test_a_gensim_pickle_is_refused_naming_gensims_export(tmp_path: Path) -> None:
    kv = KeyedVectors(3)
    kv.add_vectors(["a", "b"], np.eye(2, 3, dtype=np.float32))
    for name in ("g.model", "g.kv"):
        kv.save(str(tmp_path / name))
        with pytest.raises(InputError) as info:
            load(tmp_path / name)
        out = str(tmp_path / "g.bin")
        assert str(info.value) == (
            f"{tmp_path / name} is a pickle (gensim's model.save() or kv.save() writes one), "
            "which embedlab never loads (unpickling can run any code); in gensim, save the "
            f"vectors as word2vec: model.wv.save_word2vec_format({out!r}, binary=True) "
            "(kv.save_word2vec_format for KeyedVectors), and load that file")
    kv.save_word2vec_format(str(tmp_path / "g.bin"), binary=True)  # the fix works
    assert load(tmp_path / "g.bin").words == ("a", "b")


def test_load_errors(vec: Vectors, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load(tmp_path / "nope")
    junk = tmp_path / "notes.txt"
    junk.write_text("just some text\n")
    with pytest.raises(InputError, match="not a word2vec file"):
        load(junk)
    path = vec.to_word2vec(tmp_path / "v.txt")
    with pytest.raises(InputError, match=r"^step=/best= choose a checkpoint of a run folder"):
        load(path, step=3)
    with pytest.raises(InputError, match="no checkpoints"):
        load(tmp_path)
    run = make_run(tmp_path / "run", ("a", "b"), {5: np.zeros((2, 2), np.float32)})
    with pytest.raises(InputError) as info:
        load(run, step=7)
    assert str(info.value) == (f"{run} has no checkpoint at step 7 (available: 5); pass one of "
                               "them as step=")
    with pytest.raises(InputError) as info:  # the run's checkpoints/ folder, not the run
        load(run / "checkpoints")
    assert str(info.value) == (f"{run / 'checkpoints'} is a run's checkpoints/ folder; pass the "
                               f"run folder {run}, or one of the checkpoint folders in it")
    (run / "vocab.tsv").unlink()
    with pytest.raises(InputError, match="no vocabulary"):
        load(run)


def test_vocab_checkpoint_mismatch(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", ("a", "b"), {5: np.zeros((3, 2), np.float32)})
    ckpt = run / "checkpoints" / "ckpt-00000005"
    with pytest.raises(InputError) as e:
        load(run)
    assert str(e.value) == (f"{run}/vocab.tsv lists 2 words but checkpoint {ckpt} has 3 rows of "
                            f"input embeddings; restore {run}/vocab.tsv (the 3-word vocabulary "
                            "the checkpoint was trained with) from a backup or from the prepared "
                            "corpus the run was trained on")


def test_vocab_checkpoint_mismatch_names_the_vocabulary_to_copy(tmp_path: Path) -> None:
    # a subset from 'embedlab ckpt SRC --export-subset OUT' records the checkpoint it came from;
    # the source run's vocab.tsv fits, so the message says to copy it
    src = make_run(tmp_path / "src", ("a", "b", "c"), {5: np.eye(3, dtype=np.float32)})
    sub = make_run(tmp_path / "sub", ("a", "b"), {})
    CheckpointManager(sub).save(5, {"input_embeddings": torch.eye(3)},
                                {"exported_from": str(src / "checkpoints" / "ckpt-00000005")})
    # RUN/prepared/vocab.tsv (the trainer's source), when it fits, is named just the same
    (sub / "prepared").mkdir()
    (sub / "prepared" / "vocab.tsv").write_text("x\t1\n")  # does not fit: not suggested
    with pytest.raises(InputError) as e:
        load(sub)
    assert str(e.value) == (f"{sub}/vocab.tsv lists 2 words but checkpoint "
                            f"{sub}/checkpoints/ckpt-00000005 has 3 rows of input embeddings; "
                            f"copy {src}/vocab.tsv, which lists 3 words, to {sub}/vocab.tsv")
    (sub / "vocab.tsv").write_bytes((src / "vocab.tsv").read_bytes())  # the fix works
    assert load(sub).words == ("a", "b", "c")


def test_a_reordered_vocabulary_is_refused_against_the_run_s_prepared_copy(
        tmp_path: Path) -> None:
    """Two lines of RUN/vocab.tsv swapped by hand keep the row count and would put every vector
    under another word's name; RUN/prepared/vocab.tsv lists the words the run trained with."""
    run = make_run(tmp_path / "run", ("a", "b", "c"), {5: np.eye(3, dtype=np.float32)})
    (run / "prepared").mkdir()
    (run / "prepared" / "vocab.tsv").write_bytes((run / "vocab.tsv").read_bytes())
    assert load(run).words == ("a", "b", "c")
    lines = (run / "vocab.tsv").read_text().splitlines(keepends=True)
    (run / "vocab.tsv").write_text(lines[1] + lines[0] + lines[2])
    with pytest.raises(InputError) as e:
        load(run)
    assert str(e.value) == (f"{run}/vocab.tsv does not list the words the run was trained with, "
                            f"in their order (line 1: 'b', where {run}/prepared/vocab.tsv has "
                            f"'a'); copy {run}/prepared/vocab.tsv to {run}/vocab.tsv")
    # a run trained on a prepared folder reads that folder: a RUN/prepared beside it (left by
    # an attempt on raw text in the same folder) is no copy of its vocabulary
    prep = tmp_path / "prep"
    prep.mkdir()
    (prep / "meta.json").write_text(json.dumps({"format": "embedlab-prepared"}))
    from embedlab.data.corpus import says_prepared

    assert says_prepared(prep / "meta.json")
    (run / "config.json").write_text(json.dumps({"data": {"corpus": str(prep)}}))
    assert load(run).words == ("b", "a", "c")


def test_input_embeddings_that_are_not_a_matrix(tmp_path: Path) -> None:
    # e.g. a subset exported with --map input_embeddings=<a 1-D tensor>: no vocabulary fixes it
    run = make_run(tmp_path / "run", ("a", "b"), {})
    CheckpointManager(run).save(5, {"input_embeddings": torch.zeros(2)}, {})
    with pytest.raises(InputError) as e:
        load(run)
    assert str(e.value) == (f"checkpoint {run}/checkpoints/ckpt-00000005 holds input embeddings "
                            "of shape (2,), not a words × dims matrix; use another checkpoint "
                            f"(embedlab.checkpoints({str(run)!r}) lists them)")


def test_export_refuses_overwrite(vec: Vectors, tmp_path: Path) -> None:
    path = vec.to_word2vec(tmp_path / "v.txt")
    before = path.read_bytes()
    with pytest.raises(InputError, match="already exists"):
        vec.to_word2vec(path)
    for write in (vec.to_word2vec, vec.to_npy):  # "no" is a truthy str: refused, not obeyed
        with pytest.raises(InputError, match=r"^force= must be True or False, got the str 'no'"):
            write(path, force="no")  # type: ignore[operator]
    assert path.read_bytes() == before


def test_to_word2vec_writes_the_format_its_name_says(vec: Vectors, tmp_path: Path) -> None:
    """As ``embedlab export``: ``.bin`` (also compressed) is binary, other names text; a name
    and a ``binary=`` that contradict each other are refused, and nothing is written."""
    from gensim.models import KeyedVectors

    for name, binary in [("a.bin", True), ("a.bin.gz", True), ("a.txt", False), ("a.vec", False)]:
        path = vec.to_word2vec(tmp_path / name)
        got = KeyedVectors.load_word2vec_format(path, binary=binary)
        assert list(got.index_to_key) == list(vec.words)
    for name, binary, message in [
            ("b.bin", False, "names a binary file, but binary=False writes text (gensim would "
                             "read it with binary=True and fail); pass binary=True, or a name "
                             "ending in .txt"),
            ("b.txt", True, "names a text file, but binary=True writes binary; pass "
                            "binary=False, or a name ending in .bin"),
            ("b.vec", True, "names a text file, but binary=True writes binary; pass "
                            "binary=False, or a name ending in .bin")]:
        with pytest.raises(InputError) as e:
            vec.to_word2vec(tmp_path / name, binary=binary)
        assert str(e.value) == f"path={str(tmp_path / name)!r} {message}"
        assert not (tmp_path / name).exists()
    with pytest.raises(InputError, match=r"^binary= must be True or False"):
        vec.to_word2vec(tmp_path / "c.bin", binary="yes")  # type: ignore[arg-type]
    # gensim's spelling writes what it is told, as gensim does
    vec.save_word2vec_format(tmp_path / "d.bin", binary=False)
    assert (tmp_path / "d.bin").read_bytes().split(b"\n")[0] == f"{len(vec)} {vec.dim}".encode()


def test_writers_make_the_exports_folder_the_refusal_inside_a_run_suggests(
        vec: Vectors, tmp_path: Path) -> None:
    """A path among a run's own files is refused with RUN/exports/NAME as the example; that
    path is written, its folder made as 'embedlab export' makes it."""
    import shutil

    run = make_run(tmp_path / "run", vec.words, {5: np.array(vec.matrix)})
    with pytest.raises(InputError) as info:
        vec.save_word2vec_format(run / "vectors.bin", binary=True)
    suggested = run / "exports" / "vectors.bin"
    assert str(info.value).endswith(f"e.g. fname={str(suggested)!r}")
    assert not (run / "exports").exists()
    vec.save_word2vec_format(suggested, binary=True)
    assert load(suggested).words == vec.words
    for name, write in (("vectors.txt", vec.to_word2vec), ("vectors.npy", vec.to_npy)):
        (run / "exports").rename(tmp_path / f"before-{name}")
        write(run / "exports" / name)
        assert load(run / "exports" / name).words == vec.words
    shutil.rmtree(run / "exports")
    with pytest.raises(InputError, match=r"must end in \.npy"):  # refused: nothing is left
        vec.to_npy(run / "exports" / "v.bin")
    assert not (run / "exports").exists()
    other = tmp_path / "other"  # not a run: its exports/ is the caller's to make
    other.mkdir()
    with pytest.raises(InputError, match=r"folder .*other/exports does not exist; create it"):
        vec.to_word2vec(other / "exports" / "v.txt")
    with pytest.raises(InputError, match=r"folder .*run/exports/sub does not exist; create it"):
        vec.to_word2vec(run / "exports" / "sub" / "v.txt")  # that one folder only
    assert not (other / "exports").exists() and not (run / "exports").exists()


def test_to_npy_names_its_own_argument(vec: Vectors, tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        vec.to_npy(tmp_path / "v.bin")
    assert str(info.value) == (f"path={str(tmp_path / 'v.bin')!r} must end in .npy; e.g. "
                               f"path={str(tmp_path / 'v.npy')!r}")
    with pytest.raises(InputError) as info:
        vec.to_npy(tmp_path / "v.npy.gz")
    assert str(info.value) == (f"path={str(tmp_path / 'v.npy.gz')!r}: npy exports are not "
                               "written compressed (NumPy maps them); pass "
                               f"path={str(tmp_path / 'v.npy')!r}")
    assert list(tmp_path.iterdir()) == []
    vec.to_npy(tmp_path / "V.NPY")  # the suffix in any case, as load reads it
    assert embedlab.load(tmp_path / "V.NPY").words == vec.words


def test_load_renamed_input_embeddings(tmp_path: Path) -> None:
    # a subset exported with --map embed_matrix=input_embeddings: the state's original_names,
    # not a guess from the tensor names, says which tensor holds the input embeddings
    run = tmp_path / "sub"
    run.mkdir()
    Vocab(("a", "b"), np.array([2, 1], dtype=np.int64)).save_tsv(run / "vocab.tsv")
    m = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    CheckpointManager(run).save(3, {"embed_matrix": m, "input_embeddings": torch.zeros(2, 2)},
                                {"original_names": {"embed_matrix": "input_embeddings",
                                                    "input_embeddings": "output_embeddings"}})
    assert np.array_equal(load(run).matrix, m.numpy())


def test_npy_with_duplicate_words_is_an_input_error(tmp_path: Path) -> None:
    # the vocabulary reader let duplicates through, and Vectors raised a ValueError traceback
    path = tmp_path / "v.npy"
    np.save(path, np.eye(2, dtype=np.float32))
    (tmp_path / "v.vocab.tsv").write_text("a\t2\na\t1\n")
    with pytest.raises(InputError, match=r"line 2: word 'a' is listed twice \(first on line 1\)"):
        load(path)


def test_a_checkpoint_deleted_by_retention_while_it_is_read_gives_way_to_the_newer_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query of a run in training with --keep 1: the newest checkpoint may go between being
    found and being read; the one that replaced it is read, not "checkpoint ... is missing"."""
    import shutil

    import embedlab.checkpoint as ckpt_module

    run = tmp_path / "run"
    manager = CheckpointManager(run, keep=1)
    for step in (1, 2):
        manager.save(step, {"input_embeddings": torch.full((2, 3), float(step))}, {}, {})
    (run / "vocab.tsv").write_text("a\t5\nb\t3\n")
    real = ckpt_module.load_checkpoint
    calls = []

    def trainer_saves_meanwhile(path: Path, *args: object, **kwargs: object) -> object:
        if not calls:
            manager.save(3, {"input_embeddings": torch.full((2, 3), 3.0)}, {}, {})
            shutil.rmtree(path, ignore_errors=True)  # --keep 1 drops ckpt-2 for ckpt-3
        calls.append(Path(path).name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt_module, "load_checkpoint", trainer_saves_meanwhile)
    assert (load(run).matrix == 3.0).all()
    assert calls == ["ckpt-00000002", "ckpt-00000003"]

    def gone_while_read(path: Path, *args: object, **kwargs: object) -> object:
        if Path(path).name == "ckpt-00000003":  # verified, then deleted under the reader
            manager.save(4, {"input_embeddings": torch.full((2, 3), 4.0)}, {}, {})
            raise FileNotFoundError(2, "No such file or directory")
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt_module, "load_checkpoint", gone_while_read)
    assert (load(run).matrix == 4.0).all()

    def five_saves_while_read(path: Path, *args: object, **kwargs: object) -> object:
        step = int(Path(path).name.removeprefix("ckpt-"))
        if step < 9:  # each read loses its checkpoint to a newer one, five times over
            manager.save(step + 1, {"input_embeddings": torch.full((2, 3), step + 1.0)}, {}, {})
            raise FileNotFoundError(2, "No such file or directory")
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt_module, "load_checkpoint", five_saves_while_read)
    assert (load(run).matrix == 9.0).all()


def test_a_vocabulary_reordered_with_its_copy_is_refused_by_the_checkpoints_record(
        tmp_path: Path) -> None:
    """Both vocab.tsv files of a run swapped alike: only the checkpoint's record of its words
    tells the vectors would go out under other words' names."""
    from embedlab.testing import write_zipf_corpus
    from embedlab.training.state import vocabulary_sha256

    corpus = write_zipf_corpus(tmp_path / "c.txt", lines=200)
    run = tmp_path / "run"
    embedlab.train(corpus=corpus, run=run, dim=4, epochs=1, batch_size=32, threads=1,
                   max_steps=2, tensorboard=False, progress=False)
    words = load(run).words
    state = json.loads(next((run / "checkpoints").iterdir()).joinpath("state.json").read_text())
    assert state["vocabulary"] == vocabulary_sha256(words)
    for vocab in (run / "vocab.tsv", run / "prepared" / "vocab.tsv"):
        lines = vocab.read_text().splitlines(keepends=True)
        vocab.write_text(lines[1] + lines[0] + "".join(lines[2:]))
    with pytest.raises(InputError) as e:
        load(run)
    assert str(e.value) == (f"{run / 'vocab.tsv'} is not the vocabulary ckpt-00000002 was "
                            "trained with (its words or their order differ: edited, or "
                            "replaced?); restore it from the run's prepared corpus (its "
                            "vocab.tsv) or a backup")


def test_vectors_do_not_change_with_the_array_they_were_given() -> None:
    # a view of the caller's writable array changed under the cached norms: cosine -7.07
    m = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    v = Vectors(("a", "b", "c"), m)
    v.most_similar("a", topn=2)
    m[2] = [-10, 0]
    assert v["c"].tolist() == [1, 1]
    assert v.most_similar("a", topn=1)[0][0] == "c"
    assert v.similarity("a", "c") == pytest.approx(2 ** -0.5)
    frozen = np.array(m)
    frozen.flags.writeable = False  # read-only: shared, not copied
    assert np.shares_memory(Vectors(("a", "b", "c"), frozen).matrix, frozen)



@pytest.mark.parametrize("copy_of", [lambda v: pickle.loads(pickle.dumps(v)),
                                     lambda v: pickle.loads(pickle.dumps(v, protocol=5)),
                                     copy.deepcopy, copy.copy],
                         ids=["pickle", "pickle-protocol-5", "deepcopy", "copy"])
def test_a_copy_of_vectors_is_as_read_only_as_the_vectors(copy_of: Any) -> None:
    """Writable arrays in a copy gave cosines above 1 once edited: the norms stayed cached."""
    v = Vectors(("a", "b", "c"), np.array([[1, 0], [0, 1], [1, 1]], np.float32),
                np.array([3, 2, 1]))
    v.most_similar("a", topn=1)  # the norms cached, and copied with the rest
    other = copy_of(v)
    for name in ("matrix", "norms", "counts"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(other, name)[0] = 7
    assert other.words == v.words and other.most_similar("a", topn=2) == v.most_similar(
        "a", topn=2)
    assert np.array_equal(other.counts, [3, 2, 1]) and other.key_to_index == v.key_to_index


_COUNT_FIX = "pass each word's count (how often it occurs) as an integer, or counts=None"
_SHAPE_FIX = ("pass a list or 1-D array of the words' counts, in the words' order, or "
              "counts=None")


@pytest.mark.parametrize(("counts", "message"), [
    (["x", "y"], f"counts[0] is str 'x', not a whole number >= 0; {_COUNT_FIX}"),
    ([-3, 2], f"counts[0] is int -3, not a whole number >= 0; {_COUNT_FIX}"),
    ([1.5, 2.0], f"counts[0] is float 1.5, not a whole number >= 0; {_COUNT_FIX}"),
    (np.array([4.0, np.nan]), f"counts[1] is float nan, not a whole number >= 0; {_COUNT_FIX}"),
    ([1, None], f"counts[1] is NoneType None, not a whole number >= 0; {_COUNT_FIX}"),
    (np.array([True, False]), f"counts[0] is bool True, not a whole number >= 0; {_COUNT_FIX}"),
    (np.zeros((2, 3)), "counts= must be one whole number >= 0 per word (2 of them), got an "
                       f"array of shape (2, 3); {_SHAPE_FIX}"),
    (5, f"counts= must be one whole number >= 0 per word (2 of them), got int 5; {_SHAPE_FIX}"),
    ("ab", "counts= must be one whole number >= 0 per word (2 of them), got str 'ab'; "
           f"{_SHAPE_FIX}"),
    ([3], "1 counts for 2 words; pass one count per word, in the words' order, or counts=None"),
])
def test_counts_are_refused_unless_a_whole_number_per_word(counts: object, message: str) -> None:
    """Counts were kept as given: a list of text, a negative count (exported to a vocab.tsv
    that load refuses), 1.5 cut to 1 when written, a 2-D array, and a raw TypeError for 5."""
    with pytest.raises(InputError) as info:
        Vectors(("a", "b"), np.eye(2), counts)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_counts_are_a_read_only_int64_copy(tmp_path: Path) -> None:
    given = np.array([5, 3])
    v = Vectors(["a", "b"], [[1.0, 0.0], [0.0, 1.0]], given)
    given[0] = -1  # the caller's array is theirs to change
    assert v.counts is not None and v.counts.tolist() == [5, 3]
    assert v.counts.dtype == np.int64 and not v.counts.flags.writeable
    for whole in ([5.0, 3.0], (5, np.int64(3)), np.array([5, 3], np.uint8)):
        counts = Vectors(("a", "b"), np.eye(2), whole).counts
        assert counts is not None and counts.tolist() == [5, 3] and counts.dtype == np.int64
    v.to_npy(tmp_path / "v.npy")
    assert load(tmp_path / "v.npy").counts.tolist() == [5, 3]  # type: ignore[union-attr]


@pytest.mark.parametrize(("call", "message"), [
    (lambda v: v.to_word2vec(5), "path= must be the path of the word2vec file to write (a str "
                                 "or os.PathLike), got int 5"),
    (lambda v: v.to_npy(5), "path= must be the path of the .npy file to write (a str or "
                            "os.PathLike), got int 5"),
    (lambda v: v.evaluate_analogies(5), "questions= must be the path of a questions-words file "
                                        "(a str or os.PathLike) or a QuestionSet, got int 5"),
    (lambda v: v.evaluate_similarity(5.0), "pairs= must be the path of a "
                                           "'word1<TAB>word2<TAB>score' file (a str or "
                                           "os.PathLike) or a PairSet, got float 5.0"),
    (lambda v: v.to_word2vec(b"v.txt"), "path= is bytes (b'v.txt'); pass the path as a str "
                                        "(path='v.txt')"),
], ids=["to_word2vec", "to_npy", "evaluate_analogies", "evaluate_similarity", "bytes"])
def test_a_path_that_is_no_path_is_one_line_naming_the_argument(vec: Vectors,
                                                                call: Any, message: str) -> None:
    """These were Python's "expected str, bytes or os.PathLike object, not int"."""
    with pytest.raises(InputError) as info:
        call(vec)
    assert str(info.value) == message


def test_an_unknown_metric_is_an_input_error_naming_the_metrics(vec: Vectors) -> None:
    from embedlab.eval.neighbors import nearest

    for query in ("the", "king", ["king", "man"]):
        with pytest.raises(InputError) as info:
            vec.most_similar(query, metric="manhattan")  # type: ignore[call-overload]
        assert str(info.value) == "unknown metric 'manhattan'; use 'cosine' or 'euclidean'"
    with pytest.raises(InputError, match=r"^unknown metric 'l1'; use 'cosine' or 'euclidean'$"):
        nearest(vec.matrix, vec.norms, vec.matrix[0], 3, metric="l1")  # type: ignore[arg-type]


def test_every_public_member_of_vectors_says_what_it_is() -> None:
    """help(vec.dim) and help(vec.vector_size) said nothing."""
    import inspect

    for name in dir(Vectors):
        member = inspect.getattr_static(Vectors, name)
        function = member.fget if isinstance(member, property) else getattr(
            member, "func", getattr(member, "__func__", member))
        if not name.startswith("_") and callable(function):
            assert (function.__doc__ or "").strip(), name


def test_a_pipe_or_fifo_is_refused_in_one_line_before_it_is_opened(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO without a writer would block for ever when opened; a pipe cannot be mapped or
    read twice (it ended in a traceback). Both are refused before opening."""
    import os

    from embedlab.testing import run_cli

    fifo = tmp_path / "v.txt"
    os.mkfifo(fifo)
    message = (f"{fifo} is not a regular file (a pipe, FIFO or device); save the vectors to a "
               "file first and pass its path")
    with pytest.raises(InputError) as e:
        load(fifo)
    assert str(e.value) == message
    for argv in (["neighbors", str(fifo), "the"], ["export", str(fifo), "--out",
                                                   str(tmp_path / "q.txt")]):
        code, out, err = run_cli(argv, capsys)
        assert (code, out, err) == (2, "", f"embedlab: error: {message}\n")
    read, write = os.pipe()  # what <(...) and /dev/stdin are
    try:
        with pytest.raises(InputError, match="is not a regular file"):
            load(f"/dev/fd/{read}")
    finally:
        os.close(read)
        os.close(write)


def test_evaluation_files_with_lone_carriage_returns_are_read(tmp_path: Path) -> None:
    """As the command's readers and gensim read them: a spreadsheet on a Mac ends its lines
    with \\r alone."""
    rng = np.random.default_rng(0)
    words = ["king", "queen", "man", "woman", "paris", "france", "berlin", "germany"]
    v = Vectors(words, rng.standard_normal((len(words), 8)).astype(np.float32))
    pairs, questions = tmp_path / "pairs.tsv", tmp_path / "q.txt"
    results = []
    for ending in ("\n", "\r"):
        pairs.write_text(ending.join(["king\tqueen\t8", "man\twoman\t7", "paris\tfrance\t3",
                                      "king\tman\t5"]) + ending)
        questions.write_text(ending.join([": capitals", "paris france berlin germany",
                                          ": gender", "man woman king queen"]) + ending)
        results.append((v.evaluate_similarity(pairs).spearman,
                        v.evaluate_analogies(questions).total))
    assert results[0] == results[1]


def test_load_reads_a_word2vec_file_in_another_encoding(tmp_path: Path) -> None:
    path = tmp_path / "cp.txt"
    path.write_bytes("3 2\nкот 1 2\nдом 3 4\nthe 1 1\n".encode("cp1251"))
    assert load(path, encoding="cp1251").words == ("кот", "дом", "the")
    with pytest.raises(InputError, match=r"different words became one .* pass its "
                                         r"encoding= \(e\.g\. 'cp1251'"):
        load(path)
    with pytest.raises(InputError, match=r"^encoding='nope' is not an encoding Python knows"):
        load(path, encoding="nope")


def test_vectors_too_long_for_float32_are_refused_at_their_first_query(tmp_path: Path) -> None:
    # their squares overflow: every cosine with them read 0, with a dozen NumPy warnings
    vec = Vectors(["x", "y", "z"], np.array([[3e19, 1], [1, 2], [2, 1]], np.float32))
    assert vec.similarity("y", "z") == pytest.approx(0.8)
    with pytest.raises(InputError, match=r"^the vector of 'x' is too long for float32 "
                                         r"arithmetic \(it holds 3e\+19"):
        vec.most_similar("y")


def test_an_encoding_that_decodes_no_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.txt"
    path.write_text("1 2\na 1 2\n")
    with pytest.raises(InputError, match=r"^encoding='hex' is not an encoding Python knows"):
        load(path, encoding="hex")


# ---- arguments a typed caller gets wrong ------------------------------------------------------

def _many() -> Vectors:
    """300 words: b"w1"'s bytes, 119 and 49, are rows that exist."""
    rng = np.random.default_rng(0)
    return Vectors([f"w{i}" for i in range(300)], rng.standard_normal((300, 4)).astype(np.float32))


@pytest.mark.parametrize("call", [
    lambda v: v.most_similar(b"w1", topn=2),
    lambda v: v.most_similar("w1", negative=b"w2"),
    lambda v: v.most_similar_cosmul(b"w1"),
    lambda v: v.doesnt_match(b"w12"),
    lambda v: v.distances("w1", b"w2"),
    lambda v: v.distances(b"w1"),
    lambda v: v.n_similarity(b"w1", ["w2"]),
    lambda v: v.n_similarity(["w1"], bytearray(b"w2")),
    lambda v: v.most_similar_to_given("w1", b"w2"),
])
def test_bytes_are_refused_where_words_are_not_read_as_rows_per_byte(call: Any) -> None:
    # iterated, b"w1" is rows 119 and 49: a query of two unrelated words, answered silently
    with pytest.raises(UnknownWordError, match=r"^(bytearray\()?b'w\d+'\)? is not a word or a "
                                                r"row number; pass a str \(or an int row\)$"):
        call(_many())


@pytest.mark.parametrize("call", [
    lambda v: v.most_similar(np.full(4, np.nan, np.float32), topn=2),
    lambda v: v.most_similar(np.array([1.0, np.inf, 0.0, 0.0])),
    lambda v: v.similar_by_vector(np.full(4, np.nan, np.float32)),
    lambda v: v.most_similar_cosmul(positive=[np.full(4, np.nan, np.float32)]),
    lambda v: v.distances(np.full(4, np.inf, np.float32)),
])
def test_a_query_vector_of_nan_or_inf_is_refused(call: Any) -> None:
    with pytest.raises(InputError, match=r"^a query vector holds nan or inf values"):
        call(_many())


@pytest.mark.parametrize("weight", [float("inf"), float("nan"), -np.inf])
def test_a_weight_of_nan_or_inf_is_refused(weight: float) -> None:
    with pytest.raises(InputError, match=r"^a \(word, weight\) pair needs a finite weight"):
        _many().most_similar([("w1", weight)])


def test_k_and_topn_together_are_refused_even_topn_10() -> None:
    v = _many()
    with pytest.raises(TypeError, match=r"pass k or topn, not both \(got k=2, topn=10\)"):
        v.most_similar("w1", k=2, topn=10)
    with pytest.raises(TypeError, match="a second positional integer is the count k"):
        v.most_similar("w1", 3, topn=10)
    assert v.most_similar("w1", k=2) == v.most_similar("w1", topn=2) == v.most_similar("w1", 2)
    assert v.most_similar("w1", topn=np.int64(0)) == []  # as topn=0: gensim's nothing


@pytest.mark.parametrize(("matrix", "said"), [
    (np.ones((2, 2), complex), "complex numbers"),
    ([[1, 2], [3, 1j]], "complex numbers"),
    ([["1", "2"], ["3", "4"]], "text"),
    (np.array([[b"1", b"2"], [b"3", b"4"]]), "text"),
    ([[1, 2], [3, None]], "NoneType None"),
    ([[1.0, 2.0], [3.0, "x"]], "text"),
])
def test_a_matrix_of_what_is_not_real_numbers_is_refused(matrix: Any, said: str) -> None:
    # NumPy would drop the imaginary parts, parse the text, read None as NaN
    with pytest.raises(InputError, match=f"^matrix= holds {said} "):
        Vectors(["a", "b"], matrix)
    assert Vectors(["a", "b"], np.array([[1, 2], [3, 4.5]], dtype=object)).matrix[1, 1] == 4.5


def test_a_count_beyond_int64_says_so() -> None:
    with pytest.raises(InputError, match=r"^counts\[0\] is 1180591620717411303424, more than a "
                                         r"count holds \(at most 9,223,372,036,854,775,807"):
        Vectors(["a", "b"], np.eye(2), [2**70, 1])


def test_evaluations_name_python_arguments(tmp_path: Path) -> None:
    v = Vectors(list("abcdef"), np.random.default_rng(0).standard_normal((6, 4)))
    questions = tmp_path / "q.txt"
    questions.write_text(": s\na b c d\nb c d e\n")
    with pytest.raises(InputError, match=r"or raise restrict_vocab=$"):
        v.evaluate_analogies(questions, restrict_vocab=2)
    pairs = tmp_path / "p.tsv"
    pairs.write_text("a\tb\t1\nc\td\t2\ne\tf\t3\n")
    for kwargs, message in [({"delimiter": ""}, r"^delimiter='' must be a non-empty str"),
                            ({"delimiter": b"\t"}, r"^delimiter=b'\\t' must be a non-empty str"),
                            ({"encoding": b"utf8"}, r"^encoding=b'utf8' must be a str")]:
        with pytest.raises(InputError, match=message):
            v.evaluate_word_pairs(pairs, **kwargs)
    spaced = tmp_path / "s.txt"
    spaced.write_text("a b 1\nc  d 2\ne f 3\n")
    assert v.evaluate_word_pairs(spaced, delimiter=None, case_insensitive=False)[2] == 0.0


def test_numbers_of_any_size_or_kind_get_one_line_or_are_taken() -> None:
    from decimal import Decimal

    for count in (10**400, -(10**400)):
        with pytest.raises(InputError, match=r"^counts\[0\] is "):
            Vectors(["a", "b"], np.eye(2), [count, 1])
    v = Vectors(["a", "b"], [[Decimal("1.5"), Decimal(2)], [Decimal(3), Decimal(4)]])
    assert v.matrix.tolist() == [[1.5, 2.0], [3.0, 4.0]]  # Decimals are real numbers
    with pytest.raises(InputError, match=r"needs a finite weight"):
        v.most_similar([("a", 10**400)])
    # a buffer is a vector, not bytes
    assert v.distances(memoryview(np.asarray(v["a"]))).shape == (2,)


def test_a_word_pairs_file_in_utf16_without_a_bom_is_one_line(tmp_path: Path) -> None:
    v = Vectors(list("abcdef"), np.random.default_rng(0).standard_normal((6, 4)))
    pairs = tmp_path / "p.tsv"
    pairs.write_text("a\tb\t1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"^cannot read word-pairs file .* \(UTF-16 stream "):
        v.evaluate_word_pairs(pairs, encoding="utf-16")
