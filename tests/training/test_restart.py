"""--restart's move aside and put back (embedlab.training.restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedlab.errors import InputError
from embedlab.training.restart import old_run_moved_aside


def _old_run(run: Path) -> None:
    run.mkdir()
    (run / "config.json").write_text("{}")


def test_a_failed_restart_puts_the_old_run_back(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "r"
    _old_run(run)
    with pytest.raises(InputError), old_run_moved_aside(run) as moved:
        assert moved.is_dir() and not run.exists()
        raise InputError("refused")
    assert (run / "config.json").is_file() and not moved.exists()
    assert f"put the old run back at {run}" in capsys.readouterr().err


def test_a_new_run_another_command_started_meanwhile_is_said_with_the_way_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain resume that found the path free while the old run was aside starts a new run
    there: the restart cannot put the old one back, and says where it is and how."""
    run = tmp_path / "r"
    _old_run(run)
    with pytest.raises(InputError), old_run_moved_aside(run) as moved:
        run.mkdir()  # the other command's new run (finished already: no lock)
        raise InputError("run r is in use by pid 1")
    assert (moved / "config.json").is_file()
    err = capsys.readouterr().err
    assert (f"embedlab: warning: another command started a new run at {run} while --restart "
            f"had moved the old one aside; the old run is at {moved} (to put it back: stop that "
            f"command, then rm -r {run} && mv {moved} {run})") in err


def test_this_calls_own_new_run_kept_after_a_late_failure_is_no_other_commands(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new run that fails after its first checkpoint is kept, the old one stays aside, as
    the first line said: no warning about another command."""
    from embedlab.training.trainer import CREATED_RUN

    run = tmp_path / "r"
    _old_run(run)
    with pytest.raises(InputError), old_run_moved_aside(run):
        run.mkdir()
        CREATED_RUN.set(run.absolute())  # as the trainer records the folder it creates
        raise InputError("out of memory at step 5000")
    assert "another command" not in capsys.readouterr().err
