"""Atomic, no-clobber file writes.

A reader never sees a half-written export: data goes to a temporary file in the destination's
folder (same filesystem, so the final rename is atomic), is flushed and fsynced, then renamed
over the destination. An existing destination is refused unless ``force`` is set, so an export
never silently replaces something the user saved. Something that is not a regular file (a FIFO,
a device, a socket, a dangling link) is refused even with ``force``; a link to a file is written
through, so the link survives. A destination that cannot be written (a read-only folder, a full
disk) is a one-line :class:`InputError` naming ``--out``, or ``path=`` and ``force=True`` for a
Python call (``Vectors.to_word2vec``; see :func:`embedlab.errors.spell`).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from embedlab.errors import InputError, make_folder, python_caller, spell, spell_name
from embedlab.fsutil import atomic_open, output_target, write_error

#: the Python argument ``--out`` is: ``path`` for the export methods of Vectors, ``fname`` for
#: gensim's ``save_word2vec_format``
_ARGUMENT: contextvars.ContextVar[str] = contextvars.ContextVar("out_argument", default="path")


@contextlib.contextmanager
def path_argument(name: str) -> Iterator[None]:
    """Messages raised inside the block name ``--out`` as the Python argument ``name``."""
    token = _ARGUMENT.set(name)
    try:
        yield
    finally:
        _ARGUMENT.reset(token)


def _out(*value: object) -> str:
    """``--out`` as the caller spells it (``path=`` in Python, see :func:`path_argument`)."""
    return spell("--out", *value, python=_ARGUMENT.get())


def _out_name(what: str = "") -> str:
    """``--out`` as a noun: ``--out`` followed by ``what`` (``name``, ``file path``) on the
    command line, the argument's name alone (``path``) in Python."""
    name = spell_name("--out", python=_ARGUMENT.get())
    return name if python_caller() or not what else f"{name} {what}"


def check_writable(path: Path, *, force: bool, example: str, beside: Path | None = None) -> None:
    """Raise :class:`InputError` if ``path`` cannot be (over)written; creates nothing.

    ``example``: a file name the export format accepts (``vectors.npy`` for npy), suggested inside
    a folder given as ``--out``. ``beside``: the ``--out`` that ``path`` is written beside (npy's
    vocabulary file), when ``path`` is not ``--out`` itself.
    """
    refuse_inside_saved(path, _out(beside if beside is not None else path), example)
    if path.is_dir() and beside is not None:
        raise InputError(f"{path} is a folder, but the vocabulary of {_out(beside)} is written "
                         f"there; move or rename that folder, or pass another {_out_name('name')}")
    if path.is_dir():
        raise InputError(f"{_out(path)} is a folder; pass a file path, "
                         f"e.g. {_out(path / example)}")
    # a FIFO, socket, device or dangling link: --force must not turn it into an ordinary file
    if beside is not None:
        output_target(path, f"move it away (the vocabulary of {_out(beside)} is written "
                            f"there), or pass another {_out_name('name')}")
    else:
        output_target(path, f"move it away or pick another {_out_name('file path')}")
    parent = path.parent if str(path.parent) else Path(".")
    if path.exists() and not force:
        if not os.access(parent, os.W_OK):  # a shared run, read-only: --force cannot help
            raise InputError(f"{path} already exists, in a folder this user may not write to; "
                             f"pass {_out_name()} in a writable folder")
        raise InputError(f"{path} already exists; pass {spell('--force', True)} to overwrite it "
                         f"or choose another {_out_name()}")
    if parent.exists() and not parent.is_dir():
        raise InputError(f"cannot write {path} ({parent} is a file, not a folder); "
                         f"pass {_out()} in a folder")
    if not parent.is_dir():
        raise InputError(f"folder {parent} does not exist; create it first "
                         f"({make_folder(parent)})")


def saved_folder_of(path: Path) -> tuple[Path, str] | None:
    """The run, checkpoint or prepared corpus whose own files ``path`` would be among, with its
    kind (``run``, ``checkpoint``, ``prepared corpus``); the outermost (the run of a checkpoint),
    spelled as ``path`` spells it. None outside them, and under a run's ``exports/``, where
    exports belong. --force replaces a file, and a run's vocab.tsv, config.json or checkpoint
    tensors replaced by an export would break its resume and every query."""
    from embedlab.checkpoint import CKPT_DIR, INDEX_FILE, MANIFEST_FILE, parse_step
    from embedlab.run.folder import is_a_run

    path = Path(path)
    target = path.resolve()
    found: tuple[Path, str] | None = None
    for level, folder in enumerate(target.parents):
        kind = None
        # a run by what only embedlab writes (another program's config.json is no sign), or a
        # subset made by ckpt --export-subset: checkpoints/ and their index
        if ((folder / "config.json").is_file() and is_a_run(folder)) or (
                (folder / CKPT_DIR).is_dir() and (folder / INDEX_FILE).is_file()):
            if target.is_relative_to(folder / "exports"):
                return found  # exports belong there, but not among a subset's kept there
            kind = "run"
        elif parse_step(folder.name) is not None and (folder / MANIFEST_FILE).is_file():
            kind = "checkpoint"
        elif (folder / "meta.json").is_file() and (folder / "ids.u32").is_file():
            kind = "prepared corpus"
        if kind is not None:
            given = path.parents[level] if level < len(path.parents) else folder
            plain = ".." not in given.parts and given.resolve() == folder
            found = (given if plain else folder), kind
    return found


def refuse_inside_saved(path: Path, given: str, example: str) -> None:
    """Raise :class:`InputError` if ``path`` lies among the files of a run, checkpoint or prepared
    corpus (:func:`saved_folder_of`); ``given``: how the caller named it (``--out x``)."""
    found = saved_folder_of(path)
    if found is None:
        return
    folder, kind = found
    if kind == "run":
        where, suggested = f"under {folder / 'exports'} or outside the run", folder / "exports"
    else:
        where, suggested = f"outside the {kind}", folder.parent
    raise InputError(f"{given} is inside the {kind} {folder}, whose files embedlab reads back "
                     f"(writing there could break it); pick a file {where}, e.g. "
                     f"{_out(suggested / example)}")


def in_exports_folder(out: Path, run: Path) -> bool:
    """Whether ``out`` names a file directly inside ``run``'s ``exports/`` folder, however it is
    spelled (relative or absolute, through a symbolic link, with ``..``), the folder made yet or
    not: the folders are compared resolved, as paths that need not exist (export and visualize
    make that folder for such an ``--out``)."""
    if out.name in ("", ".", ".."):
        return False
    try:
        return out.parent.resolve() == (run / "exports").resolve()
    except (OSError, RuntimeError):  # a loop of links: not the run's folder
        return False


def make_exports_folder(out: Path, example: str) -> None:
    """Create ``out``'s folder (a run's ``exports/``, where export and visualize write by default).

    A file of that name, a read-only run folder or a full disk is a one-line :class:`InputError`
    suggesting ``--out example`` instead; nothing is created then.
    """
    folder = out.parent
    if folder.exists() and not folder.is_dir():
        raise InputError(f"cannot write {out} ({folder} is a file, not a folder); move or rename "
                         f"{folder}, or pass --out outside it, e.g. --out {example}")
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:  # a read-only run folder, a full disk
        raise write_error(out, exc, _out()) from None


@contextlib.contextmanager
def atomic_export(path: Path, *, force: bool = False) -> Iterator[IO[bytes]]:
    """:func:`~embedlab.fsutil.atomic_open` for ``--out``: an OSError (permission denied,
    read-only filesystem, disk full) becomes a one-line InputError; ``path`` is left as it was.
    Without ``force`` a file another command made there meanwhile is not replaced."""
    try:
        # and a killed export's leftovers are swept
        with atomic_open(path, sweep=True, replace=force) as fh:
            yield fh
    except OSError as exc:
        raise write_error(path, exc, _out()) from None


__all__ = ["atomic_export", "atomic_open", "check_writable", "make_exports_folder",
           "refuse_inside_saved", "saved_folder_of"]
