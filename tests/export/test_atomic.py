"""The checks before an export writes: one line each, naming ``--out``/``--force`` for the
command and ``path=``/``force=True`` for a Python call."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from embedlab.errors import InputError, messages_for
from embedlab.export.atomic import atomic_export, check_writable


def message(caller: str | None, path: Path, **kwargs: object) -> str:
    with pytest.raises(InputError) as e:
        if caller is None:  # the library called directly: flags, as the command prints
            check_writable(path, example="vectors.txt", **kwargs)  # type: ignore[arg-type]
        else:
            with messages_for(caller):  # type: ignore[arg-type]
                check_writable(path, example="vectors.txt", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("caller", [None, "cli"])
def test_the_command_is_told_its_flags(tmp_path: Path, caller: str | None) -> None:
    (tmp_path / "v.txt").write_text("old")
    assert message(caller, tmp_path / "v.txt", force=False) == \
        f"{tmp_path / 'v.txt'} already exists; pass --force to overwrite it or choose another --out"
    assert message(caller, tmp_path, force=True) == \
        f"--out {tmp_path} is a folder; pass a file path, e.g. --out {tmp_path / 'vectors.txt'}"
    assert message(caller, tmp_path / "v.txt" / "x.txt", force=True) == \
        f"cannot write {tmp_path / 'v.txt' / 'x.txt'} ({tmp_path / 'v.txt'} is a file, not a " \
        "folder); pass --out in a folder"


def test_python_is_told_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "v.txt").write_text("old")
    assert message("python", tmp_path / "v.txt", force=False) == \
        f"{tmp_path / 'v.txt'} already exists; pass force=True to overwrite it or choose " \
        "another path"
    assert message("python", tmp_path, force=True) == \
        f"path={str(tmp_path)!r} is a folder; pass a file path, e.g. " \
        f"path={str(tmp_path / 'vectors.txt')!r}"
    (tmp_path / "v.vocab.tsv").mkdir()
    assert message("python", tmp_path / "v.vocab.tsv", force=True, beside=tmp_path / "v.npy"
                   ) == f"{tmp_path / 'v.vocab.tsv'} is a folder, but the vocabulary of " \
                        f"path={str(tmp_path / 'v.npy')!r} is written there; move or rename " \
                        "that folder, or pass another path"


def test_a_failed_write_names_the_argument(tmp_path: Path) -> None:
    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    for caller, where in [("cli", "--out"), ("python", "path=")]:
        with pytest.raises(InputError) as e, messages_for(caller), \
                atomic_export(tmp_path / "v.txt"):
            full()
        assert str(e.value) == (f"cannot write {tmp_path / 'v.txt'} (No space left on device); "
                                f"free disk space or pass {where} on another disk")
