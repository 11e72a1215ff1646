"""Run names: the corpus, the model and the hyperparameters that differ from the defaults."""

from __future__ import annotations

import pytest

from embedlab.config import (
    CheckpointConfig,
    DataConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
    apply_preset,
)
from embedlab.run.naming import corpus_tag, run_name


@pytest.mark.parametrize(("cfg", "name"), [
    (TrainConfig(), "demo-sg"),
    (TrainConfig(data=DataConfig(corpus="text8"), optim=OptimConfig(lr=0.5)), "text8-sg-lr0.5"),
    (TrainConfig(data=DataConfig(corpus="text8"),
                 model=ModelConfig(model="cbow", loss="nce", dim=128)), "text8-cbow-nce-d128"),
    (TrainConfig(data=DataConfig(corpus="/x/my corpus.txt.gz", lowercase=True), seed=3),
     "my_corpus-sg-s3-lc"),
    (TrainConfig(model=ModelConfig(window=2, negative=10), optim=OptimConfig(epochs=1)),
     "demo-sg-w2-n10-e1"),
    (TrainConfig(threads=7, max_steps=10, checkpoint=CheckpointConfig(keep=1)), "demo-sg"),
    (TrainConfig.from_dict(apply_preset("cs20", {})), "demo-sg-cs20"),
    (TrainConfig.from_dict(apply_preset("cs20", {"model": {"dim": 64}})), "demo-sg-cs20-d64"),
    (TrainConfig(model=ModelConfig(init_scale=2.0)), "demo-sg-is2"),
    (TrainConfig(optim=OptimConfig(min_lr_ratio=0.01)), "demo-sg-mlr0.01"),
    (TrainConfig.from_dict(apply_preset("cs20", {"optim": {"min_lr_ratio": 0.001}})),
     "demo-sg-cs20-mlr0.001"),
    (TrainConfig(optim=OptimConfig(interleave=1)), "demo-sg-il1"),
    (TrainConfig.from_dict(apply_preset("cs20", {"optim": {"interleave": 2}})), "demo-sg-cs20-il2"),
])
def test_run_name_examples(cfg: TrainConfig, name: str) -> None:
    assert run_name(cfg) == name


def test_corpus_tag() -> None:
    assert corpus_tag("demo") == "demo" and corpus_tag("text8") == "text8"
    assert corpus_tag("/data/wiki.txt.bz2") == "wiki" and corpus_tag("/data/folder/") == "folder"


def test_sentences_given_in_memory_are_named_by_their_hash() -> None:
    assert corpus_tag("<iterable sha256:0123456789abcdef>") == "iterable-0123456789abcdef"
    cfg = TrainConfig(data=DataConfig(corpus="<iterable sha256:0123456789abcdef>"))
    assert run_name(cfg) == "iterable-0123456789abcdef-sg"


def test_corpus_tag_keeps_letters_of_every_script() -> None:
    assert corpus_tag("/data/Корпус ü.txt") == "Корпус_ü"
    assert corpus_tag("日本語.xz") == "日本語"
    assert corpus_tag("cafe\u0301.txt") == "cafe\u0301"  # a combining accent stays with its letter
    assert corpus_tag("x\u202ey\x1b.txt") == "x_y_"  # controls are not kept
    assert corpus_tag("/data/Корпус ü.txt", ascii_only=True) == "_"
