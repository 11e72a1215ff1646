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


BATCHES = (ROOT / "docs" / "batches.md").read_text(encoding="utf-8")


def _table_after(heading: str, text: str) -> list[list[str]]:
    """The rows (cells) of the first Markdown table after the line starting with ``heading``."""
    lines = text[text.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:  # header and separator
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_batch_specifications_test_vectors_are_the_codes() -> None:
    import numpy as np

    from embedlab.data.batchspec import alias_thresholds
    from embedlab.data.noise import NoiseDistribution
    from embedlab.seeding import derive_key, philox4x32, philox_key

    assert f"derive_key(1, \"batches\") = {derive_key(1, 'batches'):#018x}" in BATCHES
    key = philox_key(1, "batches")
    positions = _table_after("Position draws", BATCHES)
    assert len(positions) == 4
    for q, epoch, x0, x1, b in positions:
        words = [int(w) for w in philox4x32(int(q) & 0xFFFF_FFFF, int(q) >> 32, int(epoch), 0,
                                            key=key)]
        assert (f"{words[0]:08x}", f"{words[1]:08x}", 1 + (words[1] * 5 >> 32)) == \
            (x0, x1, int(b))
    thresholds, aliases = alias_thresholds(NoiseDistribution(np.array([5, 1, 0, 9, 3])))
    assert aliases.tolist() == [0, 3, 3, 0, 3]
    assert [int(t) for t in thresholds] == [2**32, 0x6C4C00C4, 0, 0x95E33579, 0xF6DD0F7C]
    noise = _table_after("Noise draws", BATCHES)
    assert len(noise) == 4
    for d, y0, y1, column, word in noise:
        words = [int(w) for w in philox4x32(int(d), 0, 0, 1, key=key)]
        col = words[0] * 5 >> 32
        got = col if words[1] < int(thresholds[col]) else int(aliases[col])
        assert (f"{words[0]:08x}", f"{words[1]:08x}", col, got) == (y0, y1, int(column), int(word))
