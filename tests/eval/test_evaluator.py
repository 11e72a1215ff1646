from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from gensim.models import KeyedVectors
from scipy import stats

from embedlab.config import EvalConfig
from embedlab.errors import InputError
from embedlab.eval import make_evaluator
from embedlab.eval.analogy import evaluate_analogies, read_questions
from embedlab.eval.scoring import row_norms
from embedlab.eval.similarity import evaluate_similarity, read_pairs

from .conftest import Planted


def _spearman_by_hand(words: list[str], matrix: np.ndarray, pairs: Path) -> float:
    """Spearman of a tab-separated pairs file of known, distinct words, written out here with
    numpy and scipy only (float64 cosines)."""
    row = {w: i for i, w in enumerate(words)}
    unit = matrix.astype(np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    gold, model = [], []
    for line in pairs.read_text(encoding="utf-8").splitlines():
        a, b, score = line.split("\t")
        gold.append(float(score))
        model.append(float(unit[row[a]] @ unit[row[b]]))
    return float(stats.spearmanr(gold, model).statistic)


def test_metrics_names_and_values(planted: Planted, tmp_path: Path) -> None:
    # Two more pairs files over filler words (no case variants, no self-pairs, so no ties that
    # float32 and float64 cosines could order differently): 'shuffled' has random gold scores,
    # 'monotone' gold scores that are a monotone, non-linear function of the cosine -- its
    # Spearman is 1 by definition while its Pearson is clearly not. On the planted pairs the
    # two correlations differ by only 0.005.
    rng = np.random.default_rng(7)
    unit = planted.matrix / np.linalg.norm(planted.matrix, axis=1, keepdims=True)
    row = {w: i for i, w in enumerate(planted.words)}
    fill = [(f"fill{2 * i}", f"fill{2 * i + 1}") for i in range(40)]
    cos = [float(unit[row[a]] @ unit[row[b]]) for a, b in fill]
    shuffled, monotone = tmp_path / "shuffled.tsv", tmp_path / "monotone.tsv"
    for path, gold in ((shuffled, rng.uniform(0, 10, len(fill))),
                       (monotone, np.exp(6 * np.array(cos)))):
        path.write_text("".join(f"{a}\t{b}\t{g:.9g}\n"
                                for (a, b), g in zip(fill, gold, strict=True)), encoding="utf-8")
    ev = make_evaluator(EvalConfig(analogies=str(planted.questions),
                                   similarity=(str(planted.pairs), str(shuffled), str(monotone)),
                                   restrict_vocab=150))
    out = ev(planted.words, planted.matrix)
    assert set(out) == {"analogy", "similarity/pairs", "similarity/shuffled",
                        "similarity/monotone"}

    # analogy: 3CosAdd over the first 150 words, as gensim computes it (restricting changes the
    # accuracy here, and 3CosMul gives another one, so both settings are pinned)
    kv = KeyedVectors.load_word2vec_format(str(planted.w2v))
    gensim_score, _ = kv.evaluate_word_analogies(str(planted.questions), restrict_vocab=150,
                                                 case_insensitive=True)
    assert out["analogy"] == gensim_score
    questions = read_questions(planted.questions)
    norms = row_norms(planted.matrix)
    expected = evaluate_analogies(planted.words, planted.matrix, norms, questions,
                                  restrict_vocab=150)
    assert out["analogy"] == expected.accuracy
    assert 0.0 < out["analogy"] < 1.0
    others = [evaluate_analogies(planted.words, planted.matrix, norms, questions,
                                 restrict_vocab=r, method=m).accuracy  # type: ignore[arg-type]
              for r, m in ((30_000, "3cosadd"), (150, "3cosmul"))]
    assert all(abs(out["analogy"] - other) > 0.05 for other in others)

    # similarity: Spearman, each file under its own name. The planted file (OOV pairs, case
    # variants, self-pairs) gives gensim's number exactly, as evaluate_similarity does.
    pearson, spearman, _ = kv.evaluate_word_pairs(str(planted.pairs))
    assert out["similarity/pairs"] == spearman.statistic
    assert out["similarity/pairs"] == evaluate_similarity(
        planted.words, planted.matrix, norms, read_pairs(planted.pairs)).spearman
    assert abs(spearman.statistic - pearson.statistic) > 1e-3
    assert out["similarity/shuffled"] == pytest.approx(
        _spearman_by_hand(planted.words, planted.matrix, shuffled), abs=1e-12)
    assert abs(out["similarity/shuffled"] - out["similarity/pairs"]) > 0.05
    assert out["similarity/monotone"] == pytest.approx(1.0, abs=1e-12)
    assert stats.pearsonr(np.exp(6 * np.array(cos)), cos).statistic < 0.99


def test_a_compressed_pairs_file_is_named_without_its_suffixes(planted: Planted,
                                                               tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "pairs.tsv.gz"
    packed.write_bytes(gzip.compress(planted.pairs.read_bytes()))
    plain = make_evaluator(EvalConfig(similarity=(str(planted.pairs),)))
    ev = make_evaluator(EvalConfig(analogies=str(planted.questions), similarity=(str(packed),)))
    out = ev(planted.words, planted.matrix)
    assert set(out) == {"analogy", "similarity/pairs"}
    assert out["similarity/pairs"] == plain(planted.words, planted.matrix)["similarity/pairs"]


def test_reads_files_once_and_touches_nothing(planted: Planted) -> None:
    ev = make_evaluator(EvalConfig(analogies=str(planted.questions),
                                   similarity=(str(planted.pairs),)))
    planted.questions.unlink()  # files are read at construction, not per call
    planted.pairs.unlink()
    weights = planted.matrix.copy()  # float32 and writeable, as the trainer's matrix
    states = (np.random.get_state()[1].copy(), random.getstate())
    first = ev(planted.words, weights)
    second = ev(planted.words, weights)
    assert first == second
    assert np.array_equal(weights, planted.matrix) and weights.flags.writeable
    assert np.array_equal(np.random.get_state()[1], states[0])
    assert random.getstate() == states[1]


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_any_float_dtype_is_scored_as_float32(planted: Planted, dtype: type) -> None:
    ev = make_evaluator(EvalConfig(analogies=str(planted.questions),
                                   similarity=(str(planted.pairs),)))
    matrix = planted.matrix.astype(dtype)
    assert ev(planted.words, matrix) == ev(planted.words, matrix.astype(np.float32))


def test_a_torch_tensor_works_through_asarray(planted: Planted) -> None:
    # A library user may still pass a CPU tensor: NumPy reads it through __array__, with no
    # torch import on our side.
    ev = make_evaluator(EvalConfig(analogies=str(planted.questions),
                                   similarity=(str(planted.pairs),)))
    weights = torch.from_numpy(planted.matrix.copy())
    before = weights.clone()
    assert ev(planted.words, weights) == ev(planted.words, planted.matrix)
    assert torch.equal(weights, before)


def test_no_files_gives_no_metrics(planted: Planted) -> None:
    assert make_evaluator(EvalConfig())(planted.words, planted.matrix) == {}


def test_bad_files_fail_at_construction(planted: Planted) -> None:
    with pytest.raises(InputError, match="does not exist"):
        make_evaluator(EvalConfig(analogies=str(planted.questions) + ".missing"))
    with pytest.raises(InputError, match="names one file twice"):
        make_evaluator(EvalConfig(similarity=(str(planted.pairs), str(planted.pairs))))
    spelled = str(planted.pairs.parent / "." / planted.pairs.name)  # one file, two spellings
    with pytest.raises(InputError, match="names one file twice"):
        make_evaluator(EvalConfig(similarity=(str(planted.pairs), spelled)))
    other = planted.pairs.with_suffix(".txt")
    other.write_bytes(planted.pairs.read_bytes())
    with pytest.raises(InputError, match=r"share a name without its suffix .*similarity/NAME"):
        make_evaluator(EvalConfig(similarity=(str(planted.pairs), str(other))))


def test_check_refuses_files_that_miss_the_vocabulary_before_any_vectors(planted: Planted,
                                                                         tmp_path: Path) -> None:
    few = tmp_path / "few.tsv"
    few.write_text("capx1\tcapy1\t5.0\nzz\tyy\t1.0\nxx\tww\t2.0\n", encoding="utf-8")
    ev = make_evaluator(EvalConfig(similarity=(str(few),)))
    with pytest.raises(InputError) as early:
        ev.check(planted.words)  # the vocabulary only: a trainer calls this before step 1
    with pytest.raises(InputError) as late:
        ev(planted.words, planted.matrix)
    assert str(early.value) == str(late.value)  # the same message as at the first evaluation
    assert str(early.value).startswith(f"only 1 of 3 pairs in {few} ")
    foreign = tmp_path / "foreign.txt"
    foreign.write_text(": s\nzz yy xx ww\n", encoding="utf-8")
    with pytest.raises(InputError, match="the 1 question"):
        make_evaluator(EvalConfig(analogies=str(foreign))).check(planted.words)
    # files that fit pass the check
    make_evaluator(EvalConfig(analogies=str(planted.questions),
                              similarity=(str(planted.pairs),))).check(planted.words)
