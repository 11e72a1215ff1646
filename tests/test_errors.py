"""Messages name what the caller passed: flags for the command line, arguments for Python."""

from __future__ import annotations

from pathlib import Path

from embedlab.errors import messages_for, python_entry, spell


def test_flags_unless_a_python_entry_point_was_called() -> None:
    assert (spell("--dim"), spell("--dim", 100), spell("--force", True)) == \
        ("--dim", "--dim 100", "--force")
    with messages_for("python"):
        assert (spell("--dim"), spell("--dim", 100), spell("--force", True)) == \
            ("dim=", "dim=100", "force=True")
        assert spell("--best-metric", "loss:min") == "best_metric='loss:min'"
        assert spell("--out", Path("runs/a"), python="path") == "path='runs/a'"
        assert spell("--from", python="from_checkpoint") == "from_checkpoint="
    assert spell("--dim") == "--dim"


def test_the_command_line_keeps_its_spelling_through_python_entry_points() -> None:
    @python_entry
    def entry() -> str:
        return spell("--dim", 3)

    assert entry() == "dim=3"
    with messages_for("cli"):
        assert entry() == "--dim 3"
        with messages_for("python"):
            assert spell("--dim") == "--dim"
    assert entry.__name__ == "entry"
