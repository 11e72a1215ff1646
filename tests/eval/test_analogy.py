from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors

import embedlab
from embedlab.errors import InputError
from embedlab.eval.analogy import (
    QUESTIONS_WORDS_URL,
    evaluate_analogies,
    parse_questions,
    read_questions,
)
from embedlab.eval.scoring import row_norms

from .conftest import Planted, make_planted


def _ours(p: Planted, restrict: int, method: str = "3cosadd"):
    return evaluate_analogies(p.words, p.matrix, row_norms(p.matrix), read_questions(p.questions),
                              restrict_vocab=restrict, method=method)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("restrict", [120, 170, 30_000])
def test_3cosadd_equals_gensim_per_section(tmp_path: Path, seed: int, restrict: int) -> None:
    p = make_planted(tmp_path, seed=seed)
    kv = KeyedVectors.load_word2vec_format(str(p.w2v))
    assert np.array_equal(kv.vectors, p.matrix)
    score, sections = kv.evaluate_word_analogies(str(p.questions), restrict_vocab=restrict,
                                                 case_insensitive=True)
    ours = _ours(p, restrict)
    theirs = [(s["section"], len(s["correct"]), len(s["correct"]) + len(s["incorrect"]))
              for s in sections]
    mine = [(s.name, s.correct, s.answered) for s in (*ours.sections, ours.total)]
    assert mine == theirs
    assert ours.accuracy == score
    if restrict == 30_000:  # the planted structure is found, but not perfectly
        assert 0.2 < ours.accuracy < 0.98


def test_counts_skipped_and_invalid(planted: Planted) -> None:
    ours = _ours(planted, 30_000)
    assert [s.skipped for s in ours.sections] == [1, 1, 1, 0]
    assert ours.total.skipped == 3
    assert ours.invalid_lines == 3
    assert ours.sections[-1].answered == 0 and ours.sections[-1].accuracy == 0.0
    assert ours.total.answered == 3 * 12 * 11


def test_case_variant_rules_are_exercised(planted: Planted,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The gensim-equality tests only prove the case-variant rules if the data triggers them:
    # some questions must take the exact top-5 path (>= 5 variants of a question word), and
    # ignoring variants must change the result.
    upper = [w.upper() for w in planted.words]
    assert upper.count("CAPX0") >= 6
    exact_rows = _spy_on_exact_path(monkeypatch)
    with_rule = _ours(planted, 30_000).total.correct
    assert sum(exact_rows) > 0
    monkeypatch.setattr("embedlab.eval.analogy._extra_variants", lambda rows, variants: [])
    assert _ours(planted, 30_000).total.correct != with_rule


def _gensim_cosmul_counts(p: Planted, restrict: int) -> list[tuple[str, int, int]]:
    """gensim's evaluate_word_analogies loop with most_similar_cosmul over the first N words."""
    first = p.words[:restrict]
    kv = KeyedVectors(p.matrix.shape[1])
    kv.add_vectors(first, p.matrix[:restrict])
    ok = {w.upper(): kv.get_index(w) for w in reversed(first)}
    out, name, correct, answered = [], None, 0, 0
    for line in [*p.questions.read_text(encoding="utf-8").splitlines(), ": end"]:
        if line.startswith(": "):
            if name is not None:
                out.append((name, correct, answered))
            name, correct, answered = line[2:].strip(), 0, 0
            continue
        parts = line.upper().split()
        if len(parts) != 4 or any(w not in ok for w in parts):
            continue
        a, b, c, d = parts
        kv_keys = [kv.index_to_key[ok[w]] for w in (a, b, c)]
        sims = kv.most_similar_cosmul(positive=[kv_keys[1], kv_keys[2]], negative=[kv_keys[0]],
                                      topn=5)
        predicted = None
        for word, _ in sims:
            predicted = word.upper()
            if predicted not in {a, b, c}:
                break
        answered += 1
        correct += predicted == d
    out.append(("Total accuracy", sum(c for _, c, _ in out), sum(n for _, _, n in out)))
    return out


@pytest.mark.filterwarnings("ignore:Call to deprecated `init_sims`:DeprecationWarning")
@pytest.mark.parametrize("restrict", [150, 30_000])
def test_3cosmul_equals_gensim_cosmul(planted: Planted, restrict: int) -> None:
    ours = _ours(planted, restrict, "3cosmul")
    mine = [(s.name, s.correct, s.answered) for s in (*ours.sections, ours.total)]
    assert mine == _gensim_cosmul_counts(planted, restrict)
    assert ours.accuracy > 0.2


@pytest.mark.filterwarnings("ignore:Call to deprecated `init_sims`:DeprecationWarning")
def test_3cosadd_and_3cosmul_answer_a_hand_example_differently() -> None:
    # a, b, c orthonormal; x is very close to b but only a little to c, y equally close to both
    # (all orthogonal to a). 3CosAdd ranks by cos(.,b) + cos(.,c) - cos(.,a): x 1.09 > y 1.00.
    # 3CosMul multiplies the shifted cosines (1 + cos)/2 and so favours the balanced y
    # (Levy & Goldberg 2014): x 0.995 * 0.55 / 0.5 = 1.0945 < y 0.75 * 0.75 / 0.5 = 1.125.
    # Five fillers orthogonal to everything score 0 (3CosAdd) and 0.5 (3CosMul), below both,
    # and make the fast (masked argmax) path answer.
    e = np.eye(10)
    x = 0.99 * e[1] + 0.1 * e[2] + np.sqrt(1 - 0.99**2 - 0.1**2) * e[3]
    y = 0.5 * e[1] + 0.5 * e[2] + np.sqrt(0.5) * e[4]
    words = ["a", "b", "c", "x", "y", "f1", "f2", "f3", "f4", "f5"]
    m = np.stack([e[0], e[1], e[2], x, y, *e[5:]]).astype(np.float32)
    # one section per possible answer, so that the counts tell which word was chosen
    qs = parse_questions([": x-is-the-answer", "a b c x", ": y-is-the-answer", "a b c y"])
    add, mul = (evaluate_analogies(words, m, row_norms(m), qs, restrict_vocab=100, method=meth)
                for meth in ("3cosadd", "3cosmul"))
    assert add.method == "3cosadd" and mul.method == "3cosmul"
    assert [s.correct for s in add.sections] == [1, 0]  # 3CosAdd answers x
    assert [s.correct for s in mul.sections] == [0, 1]  # 3CosMul answers y
    # the hand arithmetic above agrees with gensim's implementations of the two methods
    kv = KeyedVectors(10)
    kv.add_vectors(words, m)
    assert kv.most_similar(positive=["b", "c"], negative=["a"], topn=1)[0][0] == "x"
    assert kv.most_similar_cosmul(positive=["b", "c"], negative=["a"], topn=1)[0][0] == "y"


def test_matrix_is_not_modified(planted: Planted) -> None:
    before = planted.matrix.copy()
    planted.matrix.flags.writeable = False  # any in-place write would raise
    _ours(planted, 30_000)
    _ours(planted, 30_000, "3cosmul")
    assert np.array_equal(planted.matrix, before)


@pytest.mark.parametrize("method", ["3cosadd", "3cosmul"])
def test_tiny_vocabulary_uses_exact_path(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # With 5 words only 2 candidates remain besides the question words (fewer than gensim's
    # top 5), so every question takes the exact path (_pick). a, b, c, e are orthonormal and
    # d = unit(b + c - a): 3CosAdd scores d 1 and e 0; 3CosMul scores d
    # (0.789 * 0.789) / 0.211 = 2.95 and e 0.5 * 0.5 / 0.5 = 0.5. Both answer d.
    e = np.eye(4)
    words = ["a", "b", "c", "d", "e"]
    m = np.stack([e[0], e[1], e[2], (e[1] + e[2] - e[0]) / np.sqrt(3), e[3]]).astype(np.float32)
    # one section per possible answer, so that the counts tell which word was chosen
    qs = parse_questions([": d-is-the-answer", "a b c d", ": e-is-the-answer", "a b c e"])
    exact_rows = _spy_on_exact_path(monkeypatch)
    r = evaluate_analogies(words, m, row_norms(m), qs, restrict_vocab=10,
                           method=method)  # type: ignore[arg-type]
    assert sum(exact_rows) == 2  # both questions were decided by the exact path
    assert [(s.correct, s.answered) for s in r.sections] == [(1, 1), (0, 1)]


def test_missing_section_header_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        parse_questions(["a b c d"], "q.txt")
    assert str(info.value) == ("q.txt:1: question before the first ': section' line; start the "
                               "file with a line like ': capital-common-countries'")


@pytest.mark.parametrize("first", [":capitals", ":: capitals"])
def test_a_section_line_without_its_space_is_named(first: str, tmp_path: Path) -> None:
    """':capitals' is no section line (gensim's, too, is ': ' and a name): said so, not taken
    for a question before the first section."""
    with pytest.raises(InputError) as info:
        parse_questions([first, "a b c d"], "q.txt")
    assert str(info.value) == (f"q.txt:1: {first!r} is no section line, which is ': ' and a "
                               "name; write it like ': capital-common-countries'")
    path = tmp_path / "q.txt"
    path.write_text(f"{first}\na b c d\n")
    vec = embedlab.Vectors(("A", "B"), np.eye(2, dtype=np.float32))
    with pytest.raises(InputError, match=f"{first!r} is no section line"):
        vec.evaluate_word_analogies(path)


def test_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match="does not exist; download word2vec's questions-words"):
        read_questions(tmp_path / "nope.txt")
    # a relative path: the message says where it was looked for, and where to get the file
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as e:
        read_questions("questions-words.txt")
    assert str(e.value) == (
        "analogy file questions-words.txt does not exist; looked for "
        f"{Path.cwd() / 'questions-words.txt'}; download word2vec's questions-words.txt "
        f"({QUESTIONS_WORDS_URL}) or pass the path of an existing questions-words file")


def test_empty_file(tmp_path: Path) -> None:
    f = tmp_path / "q.txt"
    f.write_text(": only-a-header\n")
    with pytest.raises(InputError, match="no analogy questions"):
        read_questions(f)


def test_all_oov_says_so(planted: Planted) -> None:
    qs = parse_questions([": s", "zz1 zz2 zz3 zz4"], "q.txt")
    with pytest.raises(InputError, match="the 1 question"):
        evaluate_analogies(planted.words, planted.matrix, row_norms(planted.matrix), qs)


def test_restrict_vocab_must_be_positive(planted: Planted) -> None:
    with pytest.raises(InputError, match="restrict-vocab"):
        _ours(planted, 0)


def _spy_on_exact_path(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record, for every call of the exact top-k path (``_pick``), how many rows it ranked."""
    import embedlab.eval.analogy as mod

    exact_rows: list[int] = []
    real_pick = mod._pick

    def spy(*args):  # type: ignore[no-untyped-def]
        exact_rows.append(len(args[3]))
        return real_pick(*args)

    monkeypatch.setattr(mod, "_pick", spy)
    return exact_rows


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path: Path) -> None:
    """Notepad and spreadsheets start a UTF-8 file with U+FEFF: the section line stays one."""
    f = tmp_path / "q.txt"
    f.write_bytes(b"\xef\xbb\xbf: s\na b c d\n")
    assert read_questions(f).sections == read_questions_text(": s\na b c d\n", tmp_path).sections


def read_questions_text(text: str, folder: Path) -> object:
    f = folder / "plain.txt"
    f.write_text(text)
    return read_questions(f)
