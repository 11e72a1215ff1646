from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors

from embedlab.testing import run_cli
from embedlab.vectors import Vectors, load

WORDS = ("the", "king", "queen", "man", "woman", "paris", "france", "berlin", "germany", "of")


@pytest.fixture
def vecfile(tmp_path: Path) -> Path:
    m = np.random.default_rng(0).standard_normal((len(WORDS), 8)).astype(np.float32)
    return Vectors(WORDS, m).to_word2vec(tmp_path / "v.txt")


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    f = tmp_path / "q.txt"
    f.write_text(": capitals\nparis france berlin germany\nberlin germany paris france\n"
                 ": gender\nman woman king queen\nman woman king OOVWORD\n")
    return f


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    f = tmp_path / "ws.tsv"
    f.write_text("# w1\tw2\tscore\nking\tqueen\t8\nman\twoman\t7\nparis\tthe\t1\nof\tzzz\t2\n")
    return f


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(argv, capsys)


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("embedlab: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("export", "neighbors", "analogy", "eval"):
        code, out, _ = run([cmd, "--help"], capsys)
        assert code == 0 and "VECTORS" in out and "--step" in out


def test_neighbors_table_and_json(vecfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["neighbors", str(vecfile), "king", "-k", "3"], capsys)
    assert code == 0 and "nearest to 'king'" in out
    code, out, _ = run(["neighbors", str(vecfile), "king", "-k", "3", "--json"], capsys)
    got = json.loads(out)
    expect = load(vecfile).most_similar("king", 3)
    assert [(n["word"], n["score"]) for n in got["neighbors"]] == expect
    code, out, _ = run(["neighbors", str(vecfile), "king", "--metric", "euclidean", "--json"],
                       capsys)
    assert code == 0 and len(json.loads(out)["neighbors"]) == 9


def test_a_word_that_starts_with_a_dash_is_asked_for_after_two_dashes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    vec = Vectors(["-ly", "-re", "un-", "x"], m).to_word2vec(tmp_path / "v.txt")
    code, out, _ = run(["neighbors", str(vec), "-k", "1", "--json", "--", "-ly"], capsys)
    assert code == 0 and json.loads(out)["neighbors"][0]["word"] == \
        load(vec).most_similar("-ly", 1)[0][0]
    code, out, _ = run(["analogy", str(vec), "--json", "--", "-ly", "-re", "un-"], capsys)
    assert code == 0 and [a["word"] for a in json.loads(out)["answers"]] == ["x"]


def test_a_word_in_another_normal_form_is_told_which_form_to_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vec = Vectors(["caf\u00e9", "x"], np.eye(2, dtype=np.float32)).to_word2vec(tmp_path / "v.txt")
    code, _, err = run(["neighbors", str(vec), "cafe\u0301"], capsys)
    assert_one_line_error(code, err, "'cafe\\u0301' is not in the vocabulary (2 words), but "
                                     "'caf\\xe9', the same text in Unicode's NFC form, is: words "
                                     "are matched exactly, not normalised; pass the word in NFC "
                                     "form")


def test_euclidean_neighbors_of_several_words_are_by_distance_to_their_raw_mean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the help and the docs said "the mean of their unit vectors" for every metric; euclidean
    # ranks by the distance to the mean of the raw vectors, which is what they now say
    words = ("a", "b", "raw-mean", "unit-mean", "far")
    m = np.array([[10, 0], [0, 1], [5, 0.5], [0.5, 0.5], [-3, -3]], dtype=np.float32)
    vecfile = Vectors(words, m).to_word2vec(tmp_path / "v.txt")
    code, out, err = run(["neighbors", str(vecfile), "a", "b", "--metric", "euclidean",
                          "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)["neighbors"]
    d = np.linalg.norm(m[2:] - m[:2].mean(axis=0), axis=1)
    assert [n["word"] for n in got] == ["raw-mean", "unit-mean", "far"]
    assert [n["score"] for n in got] == pytest.approx(sorted(d.tolist()), abs=1e-5)
    code, out, _ = run(["neighbors", str(vecfile), "a", "b", "-k", "1", "--json"], capsys)
    assert code == 0 and json.loads(out)["neighbors"][0]["word"] == "unit-mean"  # cosine
    code, out, _ = run(["neighbors", "--help"], capsys)
    shown = " ".join(out.split())
    assert code == 0
    assert "with --metric cosine the mean of their unit vectors" in shown
    assert "with --metric euclidean the mean of their vectors" in shown


def test_neighbors_of_several_words_is_the_mean_query(vecfile: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # word2vec.c's distance takes a phrase; "king queen" was refused as an extra argument
    code, out, _ = run(["neighbors", str(vecfile), "king", "queen", "-k", "4", "--json"], capsys)
    got = json.loads(out)
    assert code == 0 and got["word"] == "king + queen" and got["words"] == ["king", "queen"]
    kv = KeyedVectors.load_word2vec_format(str(vecfile))
    expect = kv.most_similar(positive=["king", "queen"], topn=4)
    assert [n["word"] for n in got["neighbors"]] == [w for w, _ in expect]
    assert [n["score"] for n in got["neighbors"]] == pytest.approx([s for _, s in expect],
                                                                   abs=1e-6)
    code, out, _ = run(["neighbors", str(vecfile), "king", "queen", "-k", "2"], capsys)
    assert code == 0 and "nearest to 'king' + 'queen'" in out
    code, _, err = run(["neighbors", str(vecfile), "king", "kingg"], capsys)
    assert_one_line_error(code, err, "'kingg' is not in the vocabulary")


def test_neighbours_is_neighbors_under_another_spelling(
        vecfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spelled = [run([name, str(vecfile), "king", "-k", "3", "--json"], capsys)
               for name in ("neighbors", "neighbours")]
    assert spelled[0] == spelled[1] and spelled[0][0] == 0
    code, out, _ = run(["--help"], capsys)
    listed = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line]
    assert code == 0 and "neighbors" in listed and "neighbours" not in listed  # listed once


def test_topn_is_k_under_gensims_name(vecfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["neighbors", str(vecfile), "king"], ["analogy", str(vecfile), "man",
                                                           "king", "woman"]):
        assert run([*command, "--topn", "3", "--json"], capsys)[1] == \
            run([*command, "-k", "3", "--json"], capsys)[1]


def test_analogy(vecfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["analogy", str(vecfile), "man", "king", "woman", "-k", "4", "--json"],
                       capsys)
    assert code == 0
    got = [a["word"] for a in json.loads(out)["answers"]]
    assert got == [w for w, _ in load(vecfile).analogy("man", "king", "woman", 4)]
    assert not {"man", "king", "woman"} & set(got)
    code, out, _ = run(["analogy", str(vecfile), "man", "king", "woman"], capsys)
    assert code == 0 and "man : king :: woman : ?" in out


def test_eval_json_equals_gensim(vecfile: Path, questions: Path, pairs: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    second = pairs.with_name("b.tsv")
    second.write_bytes(pairs.read_bytes())
    code, out, _ = run(["eval", str(vecfile), "--analogies", str(questions), "--similarity",
                        str(pairs), "--similarity", str(second), "--json", "--method", "both"],
                       capsys)
    assert code == 0
    got = json.loads(out)
    kv = KeyedVectors.load_word2vec_format(str(vecfile))
    score, sections = kv.evaluate_word_analogies(str(questions), restrict_vocab=30000)
    add = got["analogies"][0]
    assert add["method"] == "3cosadd" and add["accuracy"] == score
    assert [s["correct"] for s in add["sections"]] == [len(s["correct"]) for s in sections[:-1]]
    assert add["total"]["answered"] == 3 and add["total"]["skipped"] == 1
    assert got["analogies"][1]["method"] == "3cosmul"
    pearson, spearman, oov = kv.evaluate_word_pairs(str(second))
    assert len(got["similarity"]) == 2
    sim = got["similarity"][1]
    assert (sim["spearman"], sim["pearson"], sim["oov_ratio"]) == (
        spearman.statistic, pearson.statistic, oov)


def test_eval_human_output(vecfile: Path, questions: Path, pairs: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["eval", str(vecfile), "--analogies", str(questions), "--similarity",
                        str(pairs)], capsys)
    assert code == 0
    for needle in ("capitals", "gender", "Total accuracy", "spearman", "ws.tsv"):
        assert needle in out


def test_eval_says_the_similarity_lines_it_skipped(vecfile: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Lines that are no pair leave the score to the others, as OOV pairs do: the table says
    how many, as the analogies' title does."""
    f = tmp_path / "half.tsv"
    f.write_text("king\tqueen\t8\tx\nman\twoman\t7\nparis\tthe\t1\nof\tthe\t2\tx\n")
    code, out, _ = run(["eval", str(vecfile), "--similarity", str(f)], capsys)
    assert code == 0 and "half.tsv (2 malformed lines skipped)" in out
    f.write_text("king\tqueen\t8\nman\twoman\t7\nparis\tthe\t1\nof\tthe\t2\tx\n")
    code, out, _ = run(["eval", str(vecfile), "--similarity", str(f)], capsys)
    assert code == 0 and "half.tsv (1 malformed line skipped)" in out


def test_eval_of_pairs_that_all_get_one_cosine_says_no_correlation_is_defined(
        vecfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pair and its reverse: one cosine for both, no ranking; nan as gensim gives, a warning,
    and null in JSON (NaN is no JSON)."""
    f = tmp_path / "sym.tsv"
    f.write_text("king\tqueen\t8\nqueen\tking\t5\n")
    code, out, err = run(["eval", str(vecfile), "--similarity", str(f)], capsys)
    assert code == 0 and "nan" in out
    assert "all get the same cosine, so no correlation is defined" in err
    code, out, _ = run(["eval", str(vecfile), "--similarity", str(f), "--json"], capsys)
    result = json.loads(out)["similarity"][0]
    assert code == 0 and result["spearman"] is None and result["pearson"] is None


def test_eval_reads_files_with_carriage_returns_alone(vecfile: Path, questions: Path,
                                                     pairs: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Tab-separated text from a spreadsheet on a Mac ends its lines with \\r alone."""
    answers = []
    for ending in ("\n", "\r"):
        for f in (questions, pairs):
            f.write_bytes(f.read_bytes().replace(b"\r", b"\n").replace(b"\n", ending.encode()))
        code, out, _ = run(["eval", str(vecfile), "--analogies", str(questions),
                            "--similarity", str(pairs), "--json"], capsys)
        assert code == 0
        answers.append({k: v for k, v in json.loads(out).items() if k != "vectors"})
    assert answers[0] == answers[1]


def test_eval_kinds_of_sections_and_unanswered_ones(vecfile: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # a section with no answerable question showed 0.0%; compute-accuracy's semantic and
    # syntactic sums were missing
    q = tmp_path / "q.txt"
    q.write_text(": capitals\nparis france berlin germany\n: unknown\nzzz yyy xxx www\n"
                 ": gram1-gender\nman woman king queen\n")
    code, out, _ = run(["eval", str(vecfile), "--analogies", str(q)], capsys)
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.split() and line.split()[0] in {"unknown", "semantic", "syntactic"}}
    assert rows["unknown"] == ["n/a", "0", "0", "1"]
    code, out, _ = run(["eval", str(vecfile), "--analogies", str(q), "--json"], capsys)
    got = json.loads(out)["analogies"][0]
    by_name = {s["section"]: s for s in got["sections"]}
    assert got["semantic"]["answered"] == by_name["capitals"]["answered"] == 1
    assert got["semantic"]["skipped"] == 1
    assert got["semantic"]["correct"] == by_name["capitals"]["correct"]
    assert got["syntactic"] == {**by_name["gram1-gender"], "section": "syntactic"}
    assert rows["semantic"][1:] == [str(got["semantic"]["correct"]), "1", "1"]
    assert rows["syntactic"][1:] == [str(got["syntactic"]["correct"]), "1", "0"]


@pytest.mark.parametrize("fmt, name", [("word2vec", "o.txt"), ("word2vec-binary", "o.bin"),
                                       ("npy", "o.npy"),
                                       # word2vec text under a .tsv name: its line said no dims
                                       ("word2vec", "o.tsv")])
def test_export_round_trips(vecfile: Path, tmp_path: Path, fmt: str, name: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
    out_path = tmp_path / name
    code, out, _ = run(["export", str(vecfile), "--format", fmt, "--out", str(out_path)], capsys)
    src, got = load(vecfile), load(out_path)
    shape = f"({len(src.words)} words × {src.dim} dims)"
    expected = [f"wrote {out_path} {shape} from {vecfile}"]
    if fmt == "npy":  # the vocabulary file has no dims
        expected.append(f"wrote {tmp_path / 'o.vocab.tsv'} ({len(src.words)} words) from {vecfile}")
    assert code == 0 and out.splitlines() == expected
    assert got.words == src.words and np.array_equal(got.matrix, src.matrix)
    before = out_path.read_bytes()
    code, _, err = run(["export", str(vecfile), "--format", fmt, "--out", str(out_path)], capsys)
    assert_one_line_error(code, err, "already exists; pass --force to overwrite it or choose "
                                     "another --out")
    assert out_path.read_bytes() == before
    one = Vectors(["w"], np.ones((1, 1), np.float32)).to_word2vec(tmp_path / "one.txt")
    code, out, _ = run(["export", str(one), "--format", fmt, "--out",
                        str(tmp_path / f"one-{name}")], capsys)
    assert code == 0 and f" (1 word × 1 dim) from {one}" in out.splitlines()[0]
    code, _, _ = run(["export", str(vecfile), "--format", fmt, "--out", str(out_path),
                      "--force"], capsys)
    assert code == 0


def test_an_existing_export_in_a_folder_not_writable_names_another_out(
        vecfile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a shared, read-only run: --force cannot help there (root may write: access is faked)
    import os

    out_path = tmp_path / "v.txt"
    out_path.write_text("taken")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if mode == os.W_OK and
                        Path(p) == tmp_path else real(p, mode, **kw))
    for command in (["export", str(vecfile), "--out", str(out_path)],):
        code, _, err = run(command, capsys)
        assert_one_line_error(code, err, "already exists, in a folder this user may not write "
                                         "to; pass --out in a writable folder")
    assert out_path.read_text() == "taken"


@pytest.mark.parametrize(("name", "binary"), [
    ("o.bin", True), ("o.BIN", True), ("o.txt", False), ("o.vec", False),
    # written compressed (o.bin.gz held uncompressed text, which gensim could not read)
    ("o.bin.gz", True), ("o.txt.bz2", False), ("o.vec.xz", False)])
def test_export_without_format_follows_the_out_suffix(vecfile: Path, tmp_path: Path, name: str,
                                                      binary: bool,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["export", str(vecfile), "--out", str(tmp_path / name)], capsys)
    assert code == 0, err
    kv = KeyedVectors.load_word2vec_format(str(tmp_path / name), binary=binary)
    assert kv.index_to_key == list(load(vecfile).words)
    assert np.array_equal(load(tmp_path / name).matrix, load(vecfile).matrix)
    code, _, err = run(["export", str(vecfile), "--out", str(tmp_path / "m.npy")], capsys)
    assert code == 0 and np.array_equal(load(tmp_path / "m.npy").matrix, load(vecfile).matrix)


@pytest.mark.parametrize(("argv", "message"), [
    (["--out", "o.npy.gz"], "--out o.npy.gz: npy exports are not written compressed (NumPy maps "
                            "them); pass --out o.npy"),
    (["--format", "npy", "--out", "o.gz"], "--out o.gz: npy exports are not written compressed"),
    (["--format", "word2vec", "--out", "o.bin.gz"], "pass --format word2vec-binary, or --out "
                                                    "o.txt.gz"),
    # plain text under an archive's name: refused, not written
    (["--out", "v.zip"], "--out v.zip: embedlab does not write .zip files; it compresses for a "
                         "name ending in .gz, .bz2 or .xz (e.g. --out v.gz), or writes plain "
                         ".txt/.bin"),
])
def test_export_compressed_names_that_contradict_the_format(
        vecfile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str],
        message: str, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["export", str(vecfile), *argv], capsys)
    assert_one_line_error(code, err, message)
    assert [p.name for p in tmp_path.iterdir()] == [vecfile.name]  # nothing written


def test_export_run_folder_default_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from embedlab.checkpoint import CheckpointManager
    from embedlab.data.vocab import Vocab

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    Vocab(("a", "b"), np.array([2, 1])).save_tsv(run_dir / "vocab.tsv")
    m = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    CheckpointManager(run_dir).save(7, {"input_embeddings": m}, {})
    code, _, _ = run(["export", str(run_dir), "--format", "word2vec-binary", "--step", "7"], capsys)
    assert code == 0
    kv = KeyedVectors.load_word2vec_format(str(run_dir / "exports" / "vectors.bin"), binary=True)
    assert kv.index_to_key == ["a", "b"] and np.array_equal(kv.vectors, m.numpy())


# each case's needles name the problem and the fix
@pytest.mark.parametrize("argv, needles", [
    (["neighbors", "{v}", "kinq"], ["'kinq' is not in the vocabulary", "did you mean king"]),
    (["neighbors", "{v}", "king", "-k", "0"], ["-k must be >= 1, got 0; e.g. -k 10"]),
    (["neighbors", "{tmp}/missing.txt", "king"],
     ["missing.txt does not exist; pass a run folder, a checkpoint folder or a word2vec/.npy "
      "vectors file"]),
    (["neighbors", "{tmp}/junk.txt", "king"],
     ["not a word2vec file", "; pass a word2vec text/binary file, a .npy export, a run folder "
      "or a checkpoint folder"]),
    (["analogy", "{v}", "man", "king", "womn"],
     ["'womn' is not in the vocabulary", "did you mean woman"]),
    (["analogy", "{v}", "man", "king", "woman", "-k", "-1"],
     ["-k must be >= 1, got -1; e.g. -k 10"]),
    (["eval", "{v}"], ["nothing to evaluate; pass --analogies FILE and/or --similarity FILE "
                       "(- reads standard input: --analogies - < questions-words.txt)\n"]),
    # one option given twice would keep the last without a word
    (["eval", "{v}", "--analogies", "{tmp}/a.txt", "--analogies={tmp}/b.txt"],
     ["--analogies is given more than once, but evaluates one questions file a command; run "
      "eval once per file (--similarity may be repeated)\n"]),
    (["neighbors", "{v}", "king", "-k", "3", "--topn", "4"],
     ["-k and --topn are one option given twice; pass one of them\n"]),
    (["analogy", "{v}", "man", "king", "woman", "--topn=3", "-k4"],
     ["-k and --topn are one option given twice; pass one of them\n"]),
    (["eval", "{v}", "--analogies", "{tmp}/nope.txt"],
     ["nope.txt does not exist; download word2vec's questions-words.txt (https://", ") or "
      "pass the path of an existing questions-words file"]),
    (["eval", "{v}", "--similarity", "{tmp}/nope.tsv"],
     ["nope.tsv does not exist; pass the path of an existing 'word1<TAB>word2<TAB>score' "
      "file"]),
    (["eval", "{v}", "--analogies", "{tmp}/oov.txt"],  # the limit is past the vocabulary
     ["the 1 question", "outside the vocabulary (10 words); check the file's language/case, or "
                         "train on a corpus that holds its words\n"]),
    (["eval", "{v}", "--analogies", "{tmp}/oov.txt", "--restrict-vocab", "3"],
     ["the 1 question", "outside the first 3 words of the vocabulary; check the file's "
                         "language/case or raise --restrict-vocab\n"]),
    (["eval", "{v}", "--similarity", "{tmp}/oov.txt"],
     ["no word pairs; expected 'word1<TAB>word2<TAB>score' lines"]),
    (["eval", "{v}", "--analogies", "{tmp}/oov.txt", "--restrict-vocab", "0"],
     ["--restrict-vocab must be >= 1, got 0; pass e.g. --restrict-vocab 30000\n"]),
    (["export", "{v}"], ["--out is required", "; e.g. --out vectors.txt"]),
    (["export", "{v}", "--out", "{tmp}/nodir/x.txt"],
     ["nodir does not exist; create it first (mkdir -p "]),
    (["export", "{v}", "--format", "npy", "--out", "{tmp}/x.txt"],
     ["must end in .npy for --format npy; e.g. --out vectors.npy"]),
    (["export", "{v}", "--step", "3", "--out", "{tmp}/x.txt"],
     ["--step/--best", "; drop them or pass the run folder"]),
    # a regular file as the parent folder: NotADirectoryError (no chmod needed as root)
    (["export", "{v}", "--out", "{v}/x.txt"], ["cannot write",
                                               "is a file, not a folder); pass --out in a folder"]),
    (["export", "{v}", "--format", "npy", "--out", "{v}/x.npy"],
     ["cannot write", "is a file, not a folder); pass --out in a folder"]),
    # a .npy name would be read back as an npy export, and fail
    (["export", "{v}", "--format", "word2vec", "--out", "{tmp}/x.npy"],
     ["ends in .npy", "; pass --format npy, or an --out name ending in .txt"]),
    # a .bin name is read with binary=True, a .txt name as text
    (["export", "{v}", "--format", "word2vec", "--out", "{tmp}/x.bin"],
     ["x.bin names a binary file, but --format word2vec writes text", "; pass --format "
      "word2vec-binary, or --out ", "x.txt"]),
    (["export", "{v}", "--format", "word2vec-binary", "--out", "{tmp}/x.txt"],
     ["x.txt names a text file, but --format word2vec-binary writes binary; pass --format "
      "word2vec, or --out ", "x.bin"]),
    # fastText's .vec is text too: gensim read it with binary=False and failed
    (["export", "{v}", "--format", "word2vec-binary", "--out", "{tmp}/x.vec"],
     ["x.vec names a text file, but --format word2vec-binary writes binary; pass --format "
      "word2vec, or --out ", "x.bin"]),
    (["export", "{tmp}/nosuch", "--out", "{tmp}/x.txt"],
     ["nosuch does not exist; pass a run folder, a checkpoint folder or a word2vec/.npy "
      "vectors file"]),
    (["export", "{tmp}/nosuch"], ["nosuch does not exist; pass a run folder"]),
    (["export", "{v}", "--format", "word2vec-binary", "--out", "{tmp}/x.npy"],
     ["ends in .npy", "; pass --format npy, or an --out name ending in .bin"]),
    # word2vec.c's and compute-accuracy's habits
    (["export", "{v}", "--out", "-"],
     ["--out -: export writes a file (whole, then renamed into place), not standard output; "
      "pass a file name, e.g. --out vectors.txt\n"]),
    (["export", "{v}", "--out", "{tmp}/x.txt", "-binary", "1"],
     ["-binary is word2vec.c's flag: the --out name picks it (vectors.bin: binary, "
      "vectors.txt: text), or --format word2vec-binary (see 'embedlab export --help')\n"]),
    (["eval", "{v}", "30000"],
     ["Got unexpected extra argument (30000): compute-accuracy's threshold is "
      "--restrict-vocab 30000, and the questions come with --analogies FILE (- reads standard "
      "input) (see 'embedlab eval --help')\n"]),
    (["eval", "{v}", "--analogies", "{tmp}/junk.txt", "30000"],
     ["Got unexpected extra argument (30000): compute-accuracy's threshold is "
      "--restrict-vocab 30000 (see 'embedlab eval --help')\n"]),
    (["eval", "{v}", "--analogies", "-", "--similarity", "-"],
     ["standard input (-) is given for more than one file; it holds one: pass the others as "
      "files\n"]),
    (["export", "{v}", "-output", "{tmp}/x.txt"],
     ["-output is word2vec.c's flag; did you mean --out? "]),
])
def test_bad_input_is_one_line_exit_2(vecfile: Path, tmp_path: Path, argv: list[str],
                                      needles: list[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.txt").write_text("hello\n")
    (tmp_path / "oov.txt").write_text(": s\nzz1 zz2 zz3 zz4\n")
    before = vecfile.read_bytes()
    code, out, err = run([a.format(v=vecfile, tmp=tmp_path) for a in argv], capsys)
    assert_one_line_error(code, err, *needles)
    assert out == ""
    assert vecfile.read_bytes() == before


@pytest.mark.parametrize("fmt, name", [("word2vec", "o.txt"), ("word2vec-binary", "o.bin"),
                                       ("npy", "o.npy")])
def test_export_to_read_only_folder(vecfile: Path, tmp_path: Path, fmt: str, name: str,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    def denied(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")  # mkstemp in a read-only folder

    monkeypatch.setattr("embedlab.fsutil.tempfile.mkstemp", denied)
    code, out, err = run(["export", str(vecfile), "--format", fmt, "--out",
                          str(tmp_path / name)], capsys)
    assert_one_line_error(code, err, "cannot write", "Permission denied",
                          "pass --out in a writable folder")
    assert out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.txt"]


def _tiny_run(run_dir: Path) -> None:
    import torch

    from embedlab.checkpoint import CheckpointManager
    from embedlab.data.vocab import Vocab

    run_dir.mkdir()
    Vocab(("a", "b"), np.array([2, 1])).save_tsv(run_dir / "vocab.tsv")
    CheckpointManager(run_dir).save(7, {"input_embeddings": torch.ones(2, 2)}, {})


@pytest.mark.parametrize("fmt, name", [("word2vec", "vectors.txt"),
                                       ("word2vec-binary", "vectors.bin"), ("npy", "vectors.npy")])
def test_export_default_out_where_exports_is_a_file(tmp_path: Path, fmt: str, name: str,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # the problem is RUN/exports being a file, not "File exists" on the file to write
    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    (run_dir / "exports").write_text("precious")
    code, out, err = run(["export", str(run_dir), "--format", fmt], capsys)
    exports = run_dir / "exports"
    assert_one_line_error(code, err)
    assert err == (f"embedlab: error: cannot write {exports / name} ({exports} is a file, not a "
                   f"folder); move or rename {exports}, or pass --out outside it, e.g. "
                   f"--out {name}\n")
    assert out == "" and exports.read_text() == "precious"
    monkeypatch.chdir(tmp_path)  # the suggested fix works
    code, out, _ = run(["export", str(run_dir), "--format", fmt, "--out", name], capsys)
    assert code == 0 and (tmp_path / name).is_file()


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("fmt, name", [("word2vec", "vectors.txt"),
                                       ("word2vec-binary", "vectors.bin"), ("npy", "vectors.npy")])
def test_export_out_is_an_existing_folder(tmp_path: Path, force: list[str], fmt: str, name: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # --force overwrites a file, never a folder; the suggested name fits the format
    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    folder = tmp_path / ("mine.npy" if fmt == "npy" else "mine")  # npy checks the suffix first
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, out, err = run(["export", str(run_dir), "--format", fmt, "--out", str(folder),
                          *force], capsys)
    assert_one_line_error(code, err)
    assert err == (f"embedlab: error: --out {folder} is a folder; pass a file path, "
                   f"e.g. --out {folder}/{name}\n")
    assert out == ""
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert (folder / "notes.txt").read_text() == "precious"
    # the suggested fix works
    code, _, _ = run(["export", str(run_dir), "--format", fmt, "--out", f"{folder}/{name}"],
                     capsys)
    assert code == 0 and (folder / name).is_file()


def test_npy_vocabulary_path_is_an_existing_folder(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # the folder is in the way of the vocabulary written beside --out, not --out itself
    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    (tmp_path / "v.vocab.tsv").mkdir()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, out, err = run(["export", str(run_dir), "--format", "npy", "--out",
                          str(tmp_path / "v.npy")], capsys)
    assert_one_line_error(code, err)
    assert err == (f"embedlab: error: {tmp_path}/v.vocab.tsv is a folder, but the vocabulary of "
                   f"--out {tmp_path}/v.npy is written there; move or rename that folder, or "
                   "pass another --out name\n")
    assert out == ""
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_exports_are_readable_by_others(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import stat

    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    old = os.umask(0o022)
    try:
        for fmt in ("word2vec", "word2vec-binary", "npy"):
            assert run(["export", str(run_dir), "--format", fmt], capsys)[0] == 0
    finally:
        os.umask(old)
    files = sorted((run_dir / "exports").iterdir())
    assert [p.name for p in files] == ["vectors.bin", "vectors.npy", "vectors.txt",
                                       "vectors.vocab.tsv"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o644}


@pytest.mark.parametrize(("name", "content", "needles"), [
    ("nan.txt", b"2 2\na 1 nan\nb 1 2\n",
     ["line 2: the vector of 'a' holds nan, not a finite float32 number; fix or remove"]),
    ("huge.bin", b"100000000000 3\na 1 2 3\n",
     ["has 23 bytes, too few for the 100,000,000,000 words × 3 dims its header promises: the "
      "file is cut short, or the header's count is wrong"]),
    ("hex.txt", b"2 3\na 1 2 3\nb 0x10 2 3\n", ["line 3: word 'b' has a non-number value '0x10'"]),
    ("text.npy", b"1 2\na 1 2\n", ["is not a .npy array file", "give a word2vec file a .txt"]),
])
def test_bad_vectors_file_is_one_line_exit_2(tmp_path: Path, name: str, content: bytes,
                                             needles: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    (tmp_path / "text.vocab.tsv").write_text("a\n")
    for argv in (["neighbors", str(path), "a"], ["export", str(path), "--out",
                                                 str(tmp_path / "o.txt")]):
        code, out, err = run(argv, capsys)
        assert_one_line_error(code, err, *needles)
        assert out == ""
    assert not (tmp_path / "o.txt").exists()


def test_duplicate_words_warn_in_one_prefixed_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dup.txt"
    path.write_text("3 2\na 1 0\nb 0 1\na 1 1\n")
    code, out, err = run(["neighbors", str(path), "a", "-k", "1"], capsys)
    assert code == 0 and "b" in out
    assert err == (f"embedlab: warning: {path}: 1 duplicate words; keeping the first vector of "
                   "each (as gensim does)\n")


def test_export_force_never_replaces_a_fifo(vecfile: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # the audit's `export --out /dev/null --force` (not tried on /dev/null: tests run as root)
    import os
    import stat

    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    code, out, err = run(["export", str(vecfile), "--out", str(fifo), "--force"], capsys)
    assert_one_line_error(code, err, f"{fifo} is not a regular file (it is a FIFO); move it "
                                     "away or pick another --out file path")
    assert out == "" and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_export_refuses_its_out_before_loading_the_vectors(
        vecfile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An existing file or a missing folder is refused before the vectors are read, which can
    take seconds and GiBs for a big vocabulary."""
    from embedlab.cli import query

    def no_load(*args: object) -> None:
        raise AssertionError("the vectors were loaded before --out was checked")

    (tmp_path / "exists.txt").write_text("precious")
    monkeypatch.setattr(query, "_load", no_load)
    code, _, err = run(["export", str(vecfile), "--out", str(tmp_path / "exists.txt")], capsys)
    assert_one_line_error(code, err, "exists.txt already exists; pass --force")
    code, _, err = run(["export", str(vecfile), "--out", str(tmp_path / "nodir" / "v.txt")],
                       capsys)
    assert_one_line_error(code, err, f"folder {tmp_path / 'nodir'} does not exist")
    assert (tmp_path / "exists.txt").read_text() == "precious"


def test_eval_reads_questions_from_standard_input_for_a_dash(vecfile: Path, questions: Path
                                                             ) -> None:
    """compute-accuracy's habit: ``eval VECTORS --analogies - < questions-words.txt``."""
    import subprocess
    import sys

    args = [sys.executable, "-m", "embedlab", "eval", str(vecfile), "--json"]
    piped = subprocess.run([*args, "--analogies", "-"], input=questions.read_text(),
                           capture_output=True, text=True, timeout=120)
    named = subprocess.run([*args, "--analogies", str(questions)], capture_output=True,
                           text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["analogies"][0]["total"] == \
        json.loads(named.stdout)["analogies"][0]["total"]
    assert json.loads(piped.stdout)["analogies"][0]["file"] == "standard input"  # not /dev/stdin
    table = subprocess.run([*args[:-1], "--similarity", "-"],
                           input="king queen 8\nof the 2\nman woman 6\n",
                           capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    assert "standard input" in table.stdout and "stdin" not in table.stdout


@pytest.mark.parametrize("inside", ["vocab.tsv", "checkpoints/ckpt-00000007/tensors.safetensors",
                                    "vectors.txt", "prepared/vocab.tsv"])
def test_export_never_writes_among_a_runs_own_files(tmp_path: Path, inside: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # --force replaced the run's vocabulary or its checkpoint's tensors, breaking every query
    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    (run_dir / "prepared").mkdir()
    (run_dir / "prepared" / "vocab.tsv").write_text("a\t2\n")
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    out = run_dir / inside
    picture = out.with_suffix(".png")
    for command, given in ((["export", str(run_dir), "--out", str(out), "--force"], out),
                           (["visualize", str(run_dir), "--out", str(picture), "--force"],
                            picture)):
        code, _, err = run(command, capsys)
        assert_one_line_error(code, err, f"--out {given} is inside the run {run_dir}",
                              f"pick a file under {run_dir / 'exports'} or outside the run")
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before
    code, _, _ = run(["export", str(run_dir), "--out", str(run_dir / "exports" / "v.txt")],
                            capsys)
    assert code == 0 and (run_dir / "exports" / "v.txt").is_file()


@pytest.mark.parametrize("spelling", ["absolute", "through-a-link", "dot-dot"])
def test_export_makes_the_runs_exports_folder_however_out_spells_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    # --out $PWD/RUN/exports/v.txt was "folder ... does not exist; create it first", while
    # --out RUN/exports/v.txt made the folder: the paths were compared as spelled
    _tiny_run(tmp_path / "run")
    (tmp_path / "link").symlink_to(tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    out = {"absolute": tmp_path / "run" / "exports" / "v.txt",
           "through-a-link": Path("link") / "exports" / "v.txt",
           "dot-dot": Path("run") / "exports" / ".." / "exports" / "v.txt"}[spelling]
    code, printed, err = run(["export", "run", "--out", str(out)], capsys)
    assert code == 0, err
    assert printed.startswith(f"wrote {out} ")
    assert [p.name for p in (tmp_path / "run" / "exports").iterdir()] == ["v.txt"]
    code, _, err = run(["export", "run", "--out", str(out)], capsys)  # the same rules apply there
    assert_one_line_error(code, err, "already exists; pass --force")
    # a folder under exports/ is not made
    deeper = tmp_path / "run" / "exports" / "a" / "v.txt"
    code, _, err = run(["export", "run", "--out", str(deeper)], capsys)
    assert_one_line_error(code, err, "does not exist; create it first")


def test_a_prepared_corpus_and_a_lone_checkpoint_are_protected_too(
        tmp_path: Path, vecfile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from embedlab.export.atomic import saved_folder_of

    prepared = tmp_path / "prep"
    prepared.mkdir()
    for name in ("meta.json", "ids.u32"):
        (prepared / name).write_text("{}")
    code, _, err = run(["export", str(vecfile), "--out", str(prepared / "vocab.tsv"), "--force"],
                       capsys)
    assert_one_line_error(code, err, f"is inside the prepared corpus {prepared}",
                          f"e.g. --out {tmp_path / 'vectors.txt'}")
    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    ckpt = run_dir / "checkpoints" / "ckpt-00000007"
    lone = tmp_path / "ckpt-00000007"
    ckpt.rename(lone)
    assert saved_folder_of(lone / "x.txt") == (lone, "checkpoint")
    assert saved_folder_of(ckpt / "x.txt") == (run_dir, "run")  # the outermost
    assert saved_folder_of(run_dir / "exports" / "x.txt") is None
    assert saved_folder_of(tmp_path / "x.txt") is None
    for name in ("config.json", "env.json"):  # another program's: not a run
        (tmp_path / name).write_text("{}")
    assert saved_folder_of(tmp_path / "x.txt") is None
    # a subset kept under a run's exports/ is a run of its own: protected, not "an export"
    subset = run_dir / "exports" / "sub"
    subset.parent.mkdir()
    _tiny_run(subset)
    assert saved_folder_of(subset / "vocab.tsv") == (subset, "run")
    assert saved_folder_of(subset.parent / "v.txt") is None
    # a checkpoint folder's own exports/ is no run's: nothing is made there
    code, _, err = run(["export", str(lone), "--out", str(lone / "exports" / "vectors.txt")],
                       capsys)
    assert_one_line_error(code, err, f"is inside the checkpoint {lone}")
    assert not (lone / "exports").exists()


def test_a_checkpoint_folder_refuses_another_step_and_best(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    # both were ignored: the folder's own checkpoint was read whatever --step asked for
    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    ckpt = run_dir / "checkpoints" / "ckpt-00000007"
    code, _, err = run(["neighbors", str(ckpt), "--step", "5", "a"], capsys)
    assert_one_line_error(code, err, f"{ckpt} is the checkpoint of step 7, not 5; pass its run "
                                     f"folder {run_dir} with --step 5, or drop --step 5")
    code, _, err = run(["export", str(ckpt), "--best", "--out", str(tmp_path / "v.txt")], capsys)
    assert_one_line_error(code, err, "is one checkpoint, and --best picks among a run's")
    assert not (tmp_path / "v.txt").exists()
    code, out, _ = run(["neighbors", str(ckpt), "--step", "7", "a", "-k", "1"], capsys)
    assert code == 0 and "b" in out


def test_a_negative_step_is_told_in_the_commands_words(vecfile: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    # the option's spelling, not Python's step=, and the hint names the run given, not "RUN"
    run_dir = tmp_path / "run"
    _tiny_run(run_dir)
    code, _, err = run(["neighbors", str(run_dir), "a", "--step", "-1"], capsys)
    assert_one_line_error(code, err, "--step must be a checkpoint's step, an integer >= 0, got "
                                     f"-1; pass e.g. --step 1000 (list them: embedlab ckpt "
                                     f"{run_dir})")


def test_eval_similarity_files_of_one_name_and_a_file_of_one_pair(
        vecfile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # two rows both labelled ws.tsv; and one known pair was told to find a larger vocabulary
    monkeypatch.chdir(tmp_path)  # short paths: the table is not wide enough for long ones
    paths = [Path("a") / "ws.tsv", Path("b") / "ws.tsv"]
    for path in paths:
        path.parent.mkdir()
        path.write_text("king\tqueen\t8\nman\twoman\t7\nparis\tthe\t1\n")
    code, out, _ = run(["eval", str(vecfile), "--similarity", str(paths[0]), "--similarity",
                        str(paths[1])], capsys)
    assert code == 0 and "a/ws.tsv" in out and "b/ws.tsv" in out
    one = tmp_path / "one.tsv"
    one.write_text("king\tqueen\t8\n")
    code, _, err = run(["eval", str(vecfile), "--similarity", str(one)], capsys)
    assert_one_line_error(code, err, f"{one} holds 1 word pair, and a correlation needs at "
                                     "least 2; use a file with more pairs")


@pytest.mark.parametrize("flag", ["--analogies", "--similarity"])
def test_eval_an_empty_file_argument_is_named_so(vecfile: Path, flag: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # "cannot read analogy file . ([Errno 21] Is a directory: '.')"
    code, _, err = run(["eval", str(vecfile), flag, ""], capsys)
    assert_one_line_error(code, err, f"{flag} is empty or '.', the current folder (an unset "
                                     "variable?); pass a file")


def test_a_vocabulary_of_the_query_words_alone_says_so(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    # an empty table and exit 0, which read as something that went wrong
    f = tmp_path / "v.txt"
    f.write_text("3 2\na 1 0\nb 0 1\nc 1 1\n")
    for argv in (["analogy", str(f), "a", "b", "c"], ["neighbors", str(f), "a", "b", "c"]):
        code, out, _ = run(argv, capsys)
        assert code == 0 and out.splitlines()[-1] == ("(no other words: the vocabulary holds "
                                                      "only the query's words)")
    code, out, _ = run(["neighbors", str(f), "a"], capsys)
    assert code == 0 and "no other words" not in out


def test_export_of_a_folder_that_is_no_run_names_the_folder_not_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Asking for --out first sent the user round: with it, the folder was refused."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    code, _, err = run(["export", str(tmp_path / "notes")], capsys)
    assert_one_line_error(code, err, f"{tmp_path / 'notes'} holds no checkpoints")
    assert "--out" not in err


def test_export_of_a_checkpoint_folder_without_out_asks_for_it_before_reading_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint folder has no exports/ of its own: --out is asked for at once, without
    reading its tensors (seconds for a big model) first."""
    import embedlab.cli.query as query

    run_dir = tmp_path / "run"
    _tiny_run(run_dir)

    def unread(*args: object, **kwargs: object) -> None:
        raise AssertionError("the checkpoint was read")

    monkeypatch.setattr(query, "_load", unread)
    code, _, err = run(["export", str(run_dir / "checkpoints" / "ckpt-00000007")], capsys)
    assert_one_line_error(code, err, "--out is required when exporting from ")
