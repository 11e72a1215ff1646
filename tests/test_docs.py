"""Every command has help and is documented in the README (in the spirit of sqlite-utils'
test_docs.py), and every `embedlab train` flag is documented in docs/training.md."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from embedlab.cli import COMMANDS, LazyGroup, cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TRAINING = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_has_help_and_is_documented(name: str) -> None:
    command = LazyGroup._load(name)
    assert command is not None, f"command {name} does not load"
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert f"embedlab {name}" in README


def test_every_train_flag_is_in_the_training_doc() -> None:
    command = LazyGroup._load("train")
    assert isinstance(command, click.Command)
    missing = []
    for param in command.params:
        for opt in (*param.opts, *param.secondary_opts):
            if opt.startswith("--") and opt not in ("--help",) and opt not in TRAINING:
                missing.append(opt)
    assert not missing, f"train flags missing from docs/training.md: {missing}"
