"""The run's corpus: a corpus too small to train is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.errors import InputError

from .small_runs import make_cfg, run_train


def test_too_few_tokens_is_an_input_error(tmp_path: Path) -> None:
    corpus = tmp_path / "one.txt"
    corpus.write_text("hello\n")
    with pytest.raises(InputError, match="fewer than a window needs"):
        run_train(make_cfg(corpus, data={"min_count": 1}), tmp_path / "r")
