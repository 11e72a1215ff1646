from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from embedlab.config import EvalConfig
from embedlab.errors import InputError
from embedlab.eval import make_evaluator
from embedlab.eval.analogy import evaluate_analogies, read_questions
from embedlab.eval.scoring import row_norms

from .conftest import Planted


def test_metrics_names_and_values(planted: Planted) -> None:
    ev = make_evaluator(EvalConfig(analogies=str(planted.questions),
                                   similarity=(str(planted.pairs),), restrict_vocab=150))
    out = ev(planted.words, planted.matrix)
    assert set(out) == {"analogy", "similarity/pairs"}
    expected = evaluate_analogies(planted.words, planted.matrix, row_norms(planted.matrix),
                                  read_questions(planted.questions), restrict_vocab=150)
    assert out["analogy"] == expected.accuracy
    assert 0.0 < out["analogy"] < 1.0
    assert -1.0 <= out["similarity/pairs"] <= 1.0


def test_reads_files_once_and_touches_nothing(planted: Planted) -> None:
    ev = make_evaluator(EvalConfig(analogies=str(planted.questions),
                                   similarity=(str(planted.pairs),)))
    planted.questions.unlink()  # files are read at construction, not per call
    planted.pairs.unlink()
    weights = torch.from_numpy(planted.matrix.copy())
    before = weights.clone()
    states = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    first = ev(planted.words, weights)  # a torch tensor straight from a model is accepted
    second = ev(planted.words, weights)
    assert first == second
    assert torch.equal(weights, before)
    assert torch.equal(torch.get_rng_state(), states[0])
    assert np.array_equal(np.random.get_state()[1], states[1])
    assert random.getstate() == states[2]


def test_no_files_gives_no_metrics(planted: Planted) -> None:
    assert make_evaluator(EvalConfig())(planted.words, planted.matrix) == {}


def test_bad_files_fail_at_construction(planted: Planted) -> None:
    with pytest.raises(InputError, match="does not exist"):
        make_evaluator(EvalConfig(analogies=str(planted.questions) + ".missing"))
    with pytest.raises(InputError, match="share a file name"):
        make_evaluator(EvalConfig(similarity=(str(planted.pairs), str(planted.pairs))))
