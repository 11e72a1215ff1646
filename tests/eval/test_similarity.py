from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gensim.models import KeyedVectors

from embedlab.errors import InputError
from embedlab.eval.scoring import row_norms
from embedlab.eval.similarity import evaluate_similarity, parse_pairs, read_pairs

from .conftest import Planted, make_planted


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("restrict", [120, 300_000])
def test_equals_gensim_evaluate_word_pairs(tmp_path: Path, seed: int, restrict: int) -> None:
    p = make_planted(tmp_path, seed=seed)
    kv = KeyedVectors.load_word2vec_format(str(p.w2v))
    pearson, spearman, oov = kv.evaluate_word_pairs(str(p.pairs), restrict_vocab=restrict)
    ours = evaluate_similarity(p.words, p.matrix, row_norms(p.matrix), read_pairs(p.pairs),
                               restrict_vocab=restrict)
    # the same arithmetic as gensim, so the same numbers (not merely close ones)
    assert ours.spearman == spearman.statistic
    assert ours.pearson == pearson.statistic
    assert ours.oov_ratio == oov
    assert ours.invalid_lines == 2
    assert ours.pairs_oov >= 1


def test_perfect_correlation_when_gold_is_the_cosine(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(30)]
    m = rng.standard_normal((30, 8)).astype(np.float32)
    u = m / np.linalg.norm(m, axis=1, keepdims=True)
    lines = ["# comment"] + [f"w{i} w{i + 1} {float(u[i] @ u[i + 1])!r}" for i in range(29)]
    r = evaluate_similarity(words, m, row_norms(m), parse_pairs(lines))
    assert r.spearman == pytest.approx(1.0) and r.pearson == pytest.approx(1.0)
    assert r.pairs_used == 29 and r.oov_ratio == 0.0


def test_scores_that_are_all_equal_have_no_correlation_and_are_refused() -> None:
    """A correlation with a constant column is undefined (gensim gives NaN); a 0 would read as
    "the vectors do not agree". Only the pairs that are scored count: the OOV pair's 5 does not
    make the scores differ."""
    m = np.eye(3, dtype=np.float32) + 0.1
    with pytest.raises(InputError) as e:
        evaluate_similarity(["a", "b", "c"], m, row_norms(m),
                            parse_pairs(["a b 1", "b c 1", "a zz 5"], "p.tsv"))
    assert str(e.value) == ("the 2 pairs of p.tsv with both words in the vocabulary all have "
                            "the score 1, and a correlation needs scores that differ; use a "
                            "file with more pairs or other scores")


@pytest.mark.parametrize("zero", [True, False], ids=["zero-vectors", "a-pair-and-its-reverse"])
def test_vectors_that_give_every_pair_one_cosine_have_no_correlation(zero: bool) -> None:
    """NaN, as gensim gives (a 0 would read as "unrelated"), and null in JSON."""
    rng = np.random.default_rng(0)
    m = np.zeros((3, 4), dtype=np.float32) if zero else rng.standard_normal((3, 4), np.float32)
    lines = ["a b 1", "b c 2"] if zero else ["a b 8", "b a 5"]
    r = evaluate_similarity(["a", "b", "c"], m, row_norms(m), parse_pairs(lines))
    assert np.isnan(r.spearman) and np.isnan(r.pearson)
    assert r.to_dict()["spearman"] is None and r.to_dict()["pearson"] is None
    if not zero:
        (pearson, _), (spearman, _) = _gensim_pairs(["a", "b", "c"], m, lines)
        assert np.isnan(pearson) and np.isnan(spearman)


def _gensim_pairs(words: list[str], m: np.ndarray, lines: list[str]) -> tuple[Any, Any]:
    import tempfile
    import warnings

    kv = KeyedVectors(m.shape[1])
    kv.add_vectors(words, m)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pairs.tsv"
        path.write_text("\n".join(line.replace(" ", "\t") for line in lines) + "\n")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's ConstantInputWarning
            pearson, spearman, _ = kv.evaluate_word_pairs(str(path))
    return tuple(pearson), tuple(spearman)


@pytest.mark.parametrize("ending", ["\r", "\r\n", "\n"], ids=["CR", "CRLF", "LF"])
def test_every_line_ending_is_read_as_gensim_reads_it(planted: Planted, tmp_path: Path,
                                                      ending: str) -> None:
    """A spreadsheet on a Mac saves tab-separated text with \\r alone, which gensim reads."""
    lines = planted.pairs.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "pairs.tsv"
    path.write_bytes(ending.join(lines).encode("utf-8") + ending.encode())
    ours = evaluate_similarity(planted.words, planted.matrix, row_norms(planted.matrix),
                               read_pairs(path))
    kv = KeyedVectors.load_word2vec_format(str(planted.w2v))
    pearson, spearman, oov = kv.evaluate_word_pairs(str(path))
    assert (ours.spearman, ours.pearson, ours.oov_ratio) == (spearman.statistic,
                                                            pearson.statistic, oov)


def test_all_oov_says_so(planted: Planted) -> None:
    with pytest.raises(InputError, match="only 0 of 2 pairs"):
        evaluate_similarity(planted.words, planted.matrix, row_norms(planted.matrix),
                            parse_pairs(["zz yy 1", "xx ww 2"], "p.tsv"))


@pytest.mark.parametrize("restrict", [0, -5])
def test_restrict_vocab_must_be_positive(planted: Planted, restrict: int) -> None:
    p = planted
    pairs = read_pairs(p.pairs)
    with pytest.raises(InputError) as e:
        evaluate_similarity(p.words, p.matrix, row_norms(p.matrix), pairs,
                            restrict_vocab=restrict)
    assert str(e.value) == (f"--restrict-vocab must be >= 1, got {restrict}; "
                            "pass e.g. --restrict-vocab 300000")
    # the fix works (300000 is the default, gensim's)
    fixed = evaluate_similarity(p.words, p.matrix, row_norms(p.matrix), pairs,
                                restrict_vocab=300000)
    assert fixed.to_dict() == evaluate_similarity(p.words, p.matrix, row_norms(p.matrix),
                                                  pairs).to_dict()


def test_missing_and_empty_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match="does not exist; pass the path of an existing "):
        read_pairs(tmp_path / "nope.tsv")
    monkeypatch.chdir(tmp_path)  # a relative path: the message says where it was looked for
    with pytest.raises(InputError, match=f"nope.tsv does not exist; looked for "
                                         f"{re.escape(str(Path.cwd() / 'nope.tsv'))}; pass "):
        read_pairs("nope.tsv")
    f = tmp_path / "p.tsv"
    f.write_text("# only a comment\n\n")
    with pytest.raises(InputError, match="no word pairs"):
        read_pairs(f)


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity", "1e400"])
def test_non_finite_scores_are_refused_naming_file_and_line(tmp_path: Path, score: str) -> None:
    # a NaN gold score made every correlation NaN, which `eval --json` printed as invalid JSON
    f = tmp_path / "p.tsv"
    f.write_text(f"# w1\tw2\tscore\na\tb\t1.5\nb\tc\t{score}\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_pairs(f)
    assert str(e.value) == (f"{f}:3: score {score!r} is not a finite number; "
                            "fix or remove that line")


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path: Path) -> None:
    f = tmp_path / "men.txt"
    f.write_bytes("king queen 8\nman woman 7\n".encode("utf-8-sig"))
    assert read_pairs(f).pairs == (("KING", "QUEEN"), ("MAN", "WOMAN"))


def test_a_file_of_more_columns_says_which_to_keep(tmp_path: Path) -> None:
    """SimLex-999 keeps ten columns (the score in the fourth): the refusal says so."""
    f = tmp_path / "SimLex-999.txt"
    f.write_text("word1\tword2\tPOS\tSimLex999\tconc(w1)\n"
                 "old\tnew\tA\t1.58\t2.72\nsmart\tintelligent\tA\t9.2\t1.75\n")
    with pytest.raises(InputError) as e:
        read_pairs(f)
    assert str(e.value) == (
        f"{f} holds no word pairs: its lines have more than 3 columns (line 1 has 5), and a "
        "pair is 'word1<TAB>word2<TAB>score'; keep the two words and the score, e.g. cut "
        "-f1,2,4 for SimLex-999's")
    # one line of three columns among them: still no file of pairs, and the columns are the
    # reason named (not a header, nor the one pair alone)
    f.write_text("old\tnew\tA\t1.58\nsmart\tintelligent\tA\t9.2\nking\tqueen\t8\n")
    with pytest.raises(InputError) as e:
        read_pairs(f)
    assert str(e.value) == (
        f"{f} holds 1 word pair, and line 1 has 4 columns, and a pair is "
        "'word1<TAB>word2<TAB>score'; keep the two words and the score, e.g. cut -f1,2,4 for "
        "SimLex-999's")


def test_a_header_line_is_no_malformed_line() -> None:
    """SimLex-999's first three columns (cut -f1,2,4) and MEN's files start with a header."""
    pairs = parse_pairs(["word1\tword2\tSimLex999", "old\tnew\t1.58", "smart\tbright\t9.2",
                         "bad line", "a\tb\tnot-a-number"], "sl.txt")
    assert pairs.pairs == (("OLD", "NEW"), ("SMART", "BRIGHT")) and pairs.invalid_lines == 2


@pytest.mark.parametrize("first", ["king\tprince\t7,5", "king\tprince\t3 # note",
                                   "king\tprince\t-", "king prince .5x"])
def test_a_malformed_first_pair_is_counted_not_taken_for_a_header(first: str) -> None:
    """A first line whose score starts as a number does (a decimal comma, a note after it) is
    a pair that could not be read, counted like any other, not a header skipped unsaid."""
    pairs = parse_pairs([first, "man\twoman\t8", "the\ta\t1"], "p.tsv")
    assert pairs.pairs == (("MAN", "WOMAN"), ("THE", "A")) and pairs.invalid_lines == 1
