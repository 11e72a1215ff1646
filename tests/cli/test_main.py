"""embedlab.cli.main's error handling: what reaches the user as one line, what stays a bug."""

from __future__ import annotations

import errno

import pytest

from embedlab.cli import main


def test_an_unusable_path_anywhere_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # the net under the specific messages: an OSError naming a path the user can fix
    import embedlab.cli.query as query

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "/some/where")

    monkeypatch.setattr(query, "_load", denied)
    with pytest.raises(SystemExit) as exit_info:
        main(["neighbors", "runs/x", "king"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "embedlab: error: cannot use /some/where (Permission denied); check that the path")


def test_an_oserror_without_a_path_stays_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab.cli.query as query

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("something internal")

    monkeypatch.setattr(query, "_load", broken)
    with pytest.raises(OSError, match="something internal"):
        main(["neighbors", "runs/x", "king"])
