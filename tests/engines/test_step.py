"""The step configuration a run's config gives: shared noise words, groups, damping, padding."""

from __future__ import annotations

import pytest

from embedlab.config import TrainConfig, apply_preset
from embedlab.engines.step import (
    DAMPING_AT_1024,
    StepConfig,
    band_block_length,
    default_shared_negatives,
    step_config,
)


def test_the_defaults() -> None:
    plan = step_config(TrainConfig())
    assert plan.step == StepConfig("skipgram", "neg", 5, 5, 32, "sum", 16.0)
    assert plan.noise_per_group == default_shared_negatives(5, 5) == 40
    assert plan.pad_to == 32  # lcm(band block 16, group 32)
    assert plan.step.damping == DAMPING_AT_1024 * 1024 / 2048


@pytest.mark.parametrize(("negative", "window", "shared"), [(5, 5, 40), (1, 1, 3), (15, 10, 220)])
def test_shared_noise_words_are_a_third_more_than_word2vec_draws(negative: int, window: int,
                                                                 shared: int) -> None:
    assert default_shared_negatives(negative, window) == shared


def test_the_lectures_preset_shares_its_noise_across_the_batch() -> None:
    plan = step_config(TrainConfig.from_dict(apply_preset("cs20", {})))
    assert (plan.step.loss, plan.step.group, plan.step.reduction) == ("nce", 128, "mean")
    assert plan.noise_per_group == 64 and plan.step.damping == DAMPING_AT_1024 * 8
    assert plan.pad_to == 128 and band_block_length(1) == 16


def test_the_group_divides_the_batch_and_the_padding_fits_both() -> None:
    plan = step_config(TrainConfig.from_dict({"model": {"negative_group": 24, "window": 12},
                                              "optim": {"batch_size": 100}}))
    assert plan.step.group == 4 and band_block_length(12) == 32 and plan.pad_to == 32


def test_hierarchical_softmax_draws_no_noise_words_whatever_the_noise_flags() -> None:
    plans = [step_config(TrainConfig.from_dict({"model": {"loss": "hs", **model}}))
             for model in ({}, {"negative": 0}, {"negative_group": 24, "shared_negatives": 9})]
    assert all(p.noise_per_group == 0 and p.step.group == 1 and p.pad_to == 16 for p in plans)
    assert plans[0].step.loss == "hs" and plans[0].step.damping == step_config(
        TrainConfig()).step.damping
