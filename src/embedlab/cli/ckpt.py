"""``embedlab ckpt RUN``: list checkpoints (roles, verified), show tensors, export a subset."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from embedlab.cli.output import echo


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _parse_map(pairs: tuple[str, ...]) -> dict[str, str]:
    from embedlab.errors import InputError

    out: dict[str, str] = {}
    for pair in pairs:
        new, sep, old = pair.partition("=")
        if not sep or not new or not old:
            raise InputError(f"--map expects NEW=STORED, got {pair!r}; "
                             "e.g. --map embed_matrix=input_embeddings")
        if new in out and out[new] != old:  # click would keep the last; one name, one tensor
            raise InputError(f"--map gives {new!r} twice ({new}={out[new]}, {pair}); map each "
                             "new name once")
        out[new] = old
    return out


def _parse_names(names: str | None) -> list[str] | None:
    from embedlab.errors import InputError

    if names is None:
        return None
    wanted = [n.strip() for n in names.split(",")]
    if not all(wanted):
        # an empty list would export a checkpoint with no tensors, and a stray comma is a typo
        raise InputError(f"--names expects comma-separated tensor names, got {names!r} (an "
                         "empty name); e.g. --names input_embeddings,output_embeddings, or "
                         "leave --names out to export all")
    return wanted


def _check_out_place(export: Path, src: Path) -> None:
    """Refuse an OUT inside a run's checkpoint area (retention there deletes folders and the
    next save rewrites what it lists), or anywhere in the source run but its exports/."""
    from embedlab.checkpoint import CKPT_DIR, INDEX_FILE, MANIFEST_FILE, parse_step
    from embedlab.errors import InputError

    out = export.resolve()
    src = src.resolve()
    # RUN of RUN/checkpoints/ckpt-N; a checkpoint folder passed on its own has no run
    source = src.parent.parent if src.parent.name == CKPT_DIR else None
    suggest = (source or src).parent / f"{(source or src).name}-subset"

    def holds_checkpoints(folder: Path) -> bool:
        with contextlib.suppress(OSError):
            return any(parse_step(c.name) is not None for c in folder.iterdir())
        return False

    for folder in (out, *out.parents):
        is_ckpt = parse_step(folder.name) is not None and (folder / MANIFEST_FILE).is_file()
        is_area = (folder.name == CKPT_DIR or folder.name.startswith(f"{CKPT_DIR}-abandoned-")) \
            and (folder.parent == source or (folder.parent / INDEX_FILE).is_file()
                 or holds_checkpoints(folder))
        if is_ckpt or is_area:
            raise InputError(f"--export-subset {export} is inside {folder}, where only the run's "
                             "own checkpoints belong (its retention would delete the subset); "
                             f"pick a folder outside it, e.g. --export-subset {suggest}")
    if source is not None and (out == source or source in out.parents) and not (
            out == source / "exports" or source / "exports" in out.parents):
        raise InputError(f"--export-subset {export} is inside the source run {source}; pick a "
                         f"folder outside it (e.g. --export-subset {suggest}) or under its "
                         "exports/")
    # the subset is a run folder of its own: written among other files, it would take their
    # folder for a run (and a folder of runs for one run)
    others = sorted(p.name for p in export.iterdir() if not p.name.startswith(".")) \
        if export.is_dir() else []
    if others:
        shown = ", ".join(others[:3]) + (" and more" if len(others) > 3 else "")
        raise InputError(f"--export-subset {export} is a folder holding other files ({shown}); "
                         f"pick a new or empty folder, e.g. --export-subset {suggest}")


def _check_vocabulary(vocab_src: Path, ckpt: Path, state: dict[str, Any]) -> None:
    """The run's vocab.tsv is copied into the subset only when it is the vocabulary the
    checkpoint was trained with, as every reader checks it: a file edited, replaced, or linked
    to another file (a run folder from someone else) would give the vectors other words'
    names, or carry that file's text into a subset to be shared."""
    from embedlab.data.vocab import Vocab
    from embedlab.vectors import check_recorded_words

    check_recorded_words(vocab_src, Vocab.load_tsv(vocab_src).words, ckpt,
                         state.get("vocabulary"))


def _check_word_rows(tensors: dict[str, Any], rename: dict[str, str],
                     vocabulary: bytes | None, stored: list[str]) -> None:
    """Refuse a tensor mapped to ``input_embeddings`` that has no row per word: every reader
    takes that name for the word vectors, and hierarchical softmax's ``hs_nodes`` (V - 1 inner
    nodes of the Huffman tree) or NCE's ``output_bias`` (one number a word) made a subset that
    each of them then refused with a wrong cause."""
    from embedlab.errors import InputError

    source = rename.get("input_embeddings")
    if source is None or source == "input_embeddings" or "input_embeddings" not in tensors:
        return
    shape = tuple(tensors["input_embeddings"].shape)
    words = None if vocabulary is None else len(vocabulary.splitlines())
    if len(shape) == 2 and (words is None or shape[0] == words):
        return
    what = "the inner nodes of the Huffman tree, one fewer than the words" \
        if source == "hs_nodes" else "not a words × dims matrix"
    counted = "" if words is None else f" for {words} words"
    raise InputError(f"--map input_embeddings={source}: {source} has shape {shape}{counted} "
                     f"({what}), and the readers take input_embeddings as the word vectors, a "
                     f"row per word; export {source} under its own name (drop the --map)"
                     + (", or map output_embeddings" if "output_embeddings" in stored else ""))


def _export_subset(run: Path, export: Path, step: int | None, best: bool, names: str | None,
                   rename: dict[str, str]) -> None:
    """A new run folder: one verified checkpoint with the chosen tensors, plus the source run's
    vocab.tsv, so that neighbors/analogy/eval/export/visualize work on it as on the source."""
    from embedlab.checkpoint import (
        NOT_NUMPY_DTYPES,
        CheckpointError,
        CheckpointManager,
        find_checkpoint,
        load_checkpoint,
        read_picked,
        tensor_specs,
    )
    from embedlab.errors import InputError
    from embedlab.fsutil import (
        atomic_write_bytes,
        current_umask,
        fsync_dir,
        hidden_prefix,
        missing_folders,
        remove_dead_leftovers,
        remove_empty_folders,
        write_error,
    )

    wanted = _parse_names(names)
    src = find_checkpoint(run, step=step, best=best)
    if export.exists() and not export.is_dir():
        raise InputError(f"--export-subset {export} is a file, not a folder; pick a new folder")
    _check_out_place(export, src)

    def read(ckpt: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        # the subset keeps the stored dtypes: torch tensors where NumPy has no type
        # (bfloat16), which it would widen to float32
        exact = any(dtype in NOT_NUMPY_DTYPES for _, _, dtype in tensor_specs(ckpt))
        return load_checkpoint(ckpt, names=wanted, rename=rename,
                               framework="pt" if exact else "numpy")

    # a run in training deletes its older checkpoints: the pick is made again
    src, (tensors, state) = read_picked(run, read, step=step, best=best)
    vocab_src, vocab_out = src.parent.parent / "vocab.tsv", export / "vocab.tsv"
    src_step = int(state["step"])
    original = _original_names(state.get("original_names"), rename, tensors)
    state = {k: v for k, v in state.items() if k not in ("step", "metrics", "original_names")}
    state["exported_from"] = str(src)
    if original:
        # how loaders find a renamed tensor, e.g. the input embeddings stored as embed_matrix
        state["original_names"] = original
    vocabulary = None
    if vocab_src.is_file():  # read first: a source that cannot be read is no write failure
        try:
            vocabulary = vocab_src.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {vocab_src} ({exc.strerror or exc}); make it "
                             "readable, then re-run the export (nothing was written)") from None
    if vocabulary is not None:
        _check_vocabulary(vocab_src, src, state)
    _check_word_rows(tensors, rename, vocabulary, [name for name, _, _ in tensor_specs(src)])
    # built in a hidden sibling and renamed into place whole: a subset killed outright (which
    # no clean-up reaches) leaves no half-made OUT that its own re-run would refuse as taken
    made = missing_folders(export.parent)
    try:
        export.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_leftovers(export)  # a build killed outright
        building = Path(tempfile.mkdtemp(prefix=hidden_prefix(export.name, "tmp"),
                                         dir=export.parent))
        # mkdtemp's mode is 0700: the subset gets the umask's, as a run folder does
        os.chmod(building, 0o777 & ~current_umask())
    except OSError as exc:
        remove_empty_folders(made)
        raise write_error(export, exc, "--export-subset") from None
    try:
        if vocabulary is not None:
            try:
                atomic_write_bytes(building / "vocab.tsv", vocabulary)
            except OSError as exc:
                raise write_error(vocab_out, exc, "--export-subset") from None
        try:
            saved = CheckpointManager(building).save(src_step, tensors, state, {})
        except CheckpointError as exc:
            if exc.os_error is None:
                raise
            # the save's own wording is training's ("re-run ... to resume"); an export is
            # redone (by now what it wrote is removed, so OUT is as it was before the command)
            raise write_error(f"the subset to {export}", exc.os_error, "--export-subset",
                              retry=", then re-run the export",
                              note=f" ({export} is left as it was)") from None
        try:
            os.rename(building, export)  # replaces an empty OUT; refused one is checked above
        except OSError as exc:
            raise write_error(export, exc, "--export-subset") from None
        fsync_dir(export.parent)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        remove_empty_folders(made)
        raise
    out = export / saved.relative_to(building)
    copied = vocabulary is not None
    echo(f"exported {', '.join(sorted(tensors))} to {out}")
    if not copied:
        echo(f"note: {vocab_src} does not exist, so {export} holds tensors only; "
                   "neighbors/analogy/eval/export need a vocab.tsv beside its checkpoints/")


def _original_names(previous: object, rename: dict[str, str],
                    exported: Iterable[str]) -> dict[str, str]:
    """Exported name -> the name the training run gave it, through earlier subset exports."""
    before = ({k: v for k, v in previous.items() if isinstance(k, str) and isinstance(v, str)}
              if isinstance(previous, dict) else {})
    out = {}
    for name in exported:
        stored = rename.get(name, name)
        first = before.get(stored, stored)
        if first != name:
            out[name] = first
    return out


@click.command()
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--tensors", "show_tensors", is_flag=True,
              help="List names, shapes and dtypes of one checkpoint (latest by default).")
@click.option("--step", type=int, default=None,
              help="Pick the checkpoint at this step (alone: list its tensors).")
@click.option("--best", is_flag=True, help="Pick the best checkpoint (by --best-metric).")
@click.option("--export-subset", "export", type=click.Path(path_type=Path), default=None,
              help="Write the picked checkpoint's tensors (see --names/--map) and RUN's "
                   "vocab.tsv as a new run folder OUT with one verified checkpoint; "
                   "neighbors/analogy/eval/export/visualize accept OUT when it holds the input "
                   "embeddings (under any --map name).")
@click.option("--names", default=None, help="Comma-separated stored tensor names to export.")
@click.option("--map", "maps", multiple=True, metavar="NEW=STORED",
              help="Export STORED under the name NEW (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON instead of a table: the checkpoints (step, path, time in Unix "
                   "seconds, size in bytes, roles, verified, problem), or with --tensors the "
                   "tensors (name, shape, dtype).")
@click.option("--verify", "strict", is_flag=True,
              help="Exit with status 1 when a listed checkpoint fails its check or is missing "
                   "(for scripts that receive a run).")
def ckpt(run: Path, show_tensors: bool, step: int | None, best: bool, export: Path | None,
         names: str | None, maps: tuple[str, ...], as_json: bool, strict: bool) -> None:
    """List the checkpoints of RUN: step, time, size, roles, verified.

    \b
    Examples:
      embedlab ckpt runs/demo-sg
      embedlab ckpt runs/demo-sg --tensors --best
      embedlab ckpt runs/demo-sg --export-subset runs/emb-only \\
          --names input_embeddings --map embed_matrix=input_embeddings
    """
    from rich.table import Table

    from embedlab.checkpoint import CheckpointManager, find_checkpoint, tensor_specs
    from embedlab.cli.output import table_console
    from embedlab.errors import InputError

    console = table_console()
    if strict and (export is not None or show_tensors or step is not None or best):
        raise InputError("--verify checks the listing of every checkpoint; drop it, or drop "
                         "--tensors, --step, --best and --export-subset (which verify the "
                         "checkpoint they read and refuse a damaged one)")
    if export is None and (names is not None or maps):
        flag = "--names" if names is not None else "--map"
        raise InputError(f"{flag} applies only with --export-subset (it picks what the subset "
                         f"holds); add --export-subset OUT, or drop {flag}")
    if export is not None and show_tensors:
        raise InputError("--tensors lists one checkpoint, --export-subset writes one; run ckpt "
                         "once for each")
    if export is not None and as_json:
        raise InputError("--json prints a listing, --export-subset writes a subset; drop one")
    if export is not None:
        _export_subset(run, export, step, best, names, _parse_map(maps))
        return
    if show_tensors or step is not None or best:
        path = find_checkpoint(run, step=step, best=best)
        if as_json:
            echo(json.dumps({"checkpoint": str(path), "tensors": [
                {"name": name, "shape": list(shape), "dtype": dtype}
                for name, shape, dtype in tensor_specs(path)]}))
            return
        table = Table(title=str(path))
        for col in ("name", "shape", "dtype"):
            table.add_column(col)
        for name, shape, dtype in tensor_specs(path):
            table.add_row(name, " × ".join(map(str, shape)) or "scalar", dtype)
        console.print(table)
        return
    if not run.is_dir():
        what = "is not a folder" if run.exists() else "does not exist"
        raise InputError(f"{run} {what}; pass a run folder (see 'embedlab runs')")
    from embedlab.checkpoint.load import missing_listed, no_checkpoint

    infos = CheckpointManager(run).list()
    missing = missing_listed(run)
    # none left at all: what to restore, in the words every command uses; --verify lists the
    # missing ones and exits 1, as it does for some missing
    if not infos and not (strict and missing):
        raise no_checkpoint(run)
    if as_json:
        _print_listing(run, infos, missing)
    else:
        _print_table(console, run, infos, missing)
    if strict and (missing or not all(info.verified for info in infos)):
        bad = len(missing) + sum(not info.verified for info in infos)
        echo(f"embedlab: {bad} of {len(infos) + len(missing)} checkpoint(s) of {run} "
                   f"failed the check (see the {'listing' if as_json else 'table'}); restore them "
                   "from a backup or a new copy of the run", err=True)
        raise SystemExit(1)


def _print_table(console: Any, run: Path, infos: list[Any], missing: list[int]) -> None:
    from rich.table import Table

    from embedlab.checkpoint.index import read_index

    table = Table(title=f"checkpoints of {run}")
    for col, justify in (("step", "right"), ("time", "left"), ("size", "right"),
                         ("roles", "left"), ("verified", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    rows: list[tuple[int, tuple[str, ...]]] = []
    for info in infos:
        try:
            # with its offset, as env.json's "created": a time zone's reader knows the hour
            when = dt.datetime.fromtimestamp(info.time).astimezone().strftime(
                "%Y-%m-%d %H:%M:%S %z")
        except (OverflowError, OSError, ValueError):  # a folder mtime set out of range
            when = "?"
        ok = "yes" if info.verified else f"NO: {info.problem}"
        rows.append((info.step, (str(info.step), when, _size(info.size),
                                 ",".join(info.roles) or "-", ok)))
    index = read_index(run)
    for gone in missing:  # listed by the index, deleted by hand: not silently left out
        rows.append((gone, (str(gone), "-", "-", ",".join(index.roles(gone)) or "-",
                            "NO: missing (the index lists it; its folder is gone)")))
    for _, row in sorted(rows):
        table.add_row(*row)
    console.print(table)


def _print_listing(run: Path, infos: list[Any], missing: list[int]) -> None:
    """The listing as JSON, one object a checkpoint, oldest first: what a program reads
    instead of the table (times in Unix seconds, sizes in bytes)."""
    from embedlab.checkpoint import ckpt_name
    from embedlab.checkpoint.index import read_index

    index = read_index(run)
    out = [{"step": i.step, "path": str(i.path), "time": i.time, "size": i.size,
            "roles": list(i.roles), "verified": i.verified, "problem": i.problem}
           for i in infos]
    out += [{"step": gone, "path": str(run / "checkpoints" / ckpt_name(gone)), "time": None,
             "size": None, "roles": list(index.roles(gone)), "verified": False,
             "problem": "missing (the index lists it; its folder is gone)"} for gone in missing]
    echo(json.dumps(sorted(out, key=lambda c: c["step"])))
