"""``embedlab runs``, ``embedlab tensorboard`` and ``embedlab visualize``: watching runs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click

from embedlab.cli.output import echo
from embedlab.errors import InputError, printable, warn


@click.command()
@click.argument("directory", default="runs", type=click.Path(path_type=Path))
@click.option("--all", "all_hparams", is_flag=True,
              help="Show every stored config key (per-invocation settings such as --max-steps "
                   "too), not only the hyperparameters that differ between runs.")
@click.option("--sort", "sort_key", default=None, metavar="COLUMN",
              help="Order the runs by a column (run, status, step, saved, words, loss, wall; "
                   "best: the best first; --json's names name, words_seen, wall_time too) or a "
                   "hyperparameter (optim.lr); runs without a value last.")
@click.option("--reverse", is_flag=True, help="With --sort: the other way round.")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice(["running", "finished", "interrupted", "failed", "unknown"]),
              help="List only the runs with this status (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON instead of tables: a list of the runs, each with its columns "
                   "(the best as metric, value and step) and all its stored settings.")
def runs(directory: Path, all_hparams: bool, sort_key: str | None, reverse: bool,
         statuses: tuple[str, ...], as_json: bool) -> None:
    """Table of the runs under DIRECTORY (default: runs/).

    Columns: run (its folder; "name" in --json), kind (when not all are word2vec runs: linreg
    runs are listed too), status
    (running / finished / interrupted / failed / unknown), step, saved (the newest checkpoint's
    step, where a resume starts; - when there is none), words seen, latest loss, the best
    checkpoint (its value of the run's --best-metric @ its step; before a run's first
    checkpoint, its best logged value), wall time, and the
    hyperparameters that differ between the listed runs (settings that do not change the
    result, such as --max-steps or --progress, are left out).
    """
    from embedlab.cli.output import table_console
    from embedlab.track.runs import check_sort_key, find_runs, run_info, runs_tables, sort_runs

    if reverse and sort_key is None:
        raise InputError("--reverse orders by --sort; pass e.g. --sort loss --reverse")

    infos = []
    found = find_runs(directory)
    for lost in _runs_without_config(directory, found):
        warn(f"skipped {lost}: it has checkpoints but no config.json, which holds its "
             "settings; restore config.json from a backup")
    for run in found:
        try:
            infos.append(run_info(run, directory))
        except InputError as exc:  # one broken run must not hide the others
            if found == [directory]:  # ... but the one run asked for is the error itself
                raise
            warn(f"skipped {run}: {exc}")
    if not infos and (directory / "checkpoints").is_dir() and \
            not (directory / "config.json").exists():
        if _is_subset(directory):
            raise InputError(f"{directory} is a subset of a run's checkpoint (written by "
                             "'embedlab ckpt --export-subset'), which keeps no training record "
                             f"to list; query it (embedlab neighbors {shlex.quote(str(directory))} "
                             f"WORD), or list its checkpoint with "
                             f"'embedlab ckpt {shlex.quote(str(directory))}'")
        raise InputError(f"run {directory} has checkpoints but no config.json, which holds its "
                         "settings; restore config.json from a backup")
    if not infos and as_json:
        echo("[]")
        return
    if not infos:
        echo(f"no runs under {directory} (a run folder holds config.json); "
                   "start one with: embedlab train --corpus demo")
        return
    if sort_key is not None:
        check_sort_key(infos, sort_key)  # before the filter: a bad key is said whatever is left
    if statuses:
        infos = [i for i in infos if i.status in statuses]
        if not infos and as_json:
            echo("[]")
            return
        if not infos:
            echo(f"no {' or '.join(statuses)} runs under {directory}")
            return
    if sort_key is not None:
        infos = sort_runs(infos, sort_key, reverse=reverse)
    if as_json:
        echo(json.dumps([info.to_json() for info in infos]))
        return
    console = table_console()
    console.print(*runs_tables(infos, all_hparams=all_hparams))


def _runs_without_config(directory: Path, runs: list[Path]) -> list[Path]:
    """Folders under ``directory`` (outside the runs found) that hold a run's checkpoints/ with
    its index but no config.json: listed by none, and not to be passed over in silence."""
    from embedlab.checkpoint.index import INDEX_FILE

    if not directory.is_dir() or (directory / "config.json").is_file():
        return []
    lost = []
    for index in sorted(directory.rglob(INDEX_FILE)):
        folder = index.parent
        # DIRECTORY itself is not skipped: the command says what it lacks, once
        if folder != directory and index.is_file() and (folder / "checkpoints").is_dir() and \
                not (folder / "config.json").exists() and not _is_subset(folder) and \
                not any(run == folder or run in folder.parents for run in runs):
            lost.append(folder)
    return lost


def _is_subset(folder: Path) -> bool:
    """A folder ``embedlab ckpt --export-subset`` wrote: checkpoints without a config, by
    design (its checkpoint's state names the one it came from)."""
    import json

    for state in folder.glob("checkpoints/ckpt-*/state.json"):
        try:
            if "exported_from" in json.loads(state.read_text(encoding="utf-8")):
                return True
        except (OSError, ValueError, TypeError):
            continue
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_port(port: int) -> None:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise InputError(f"port {port} on 127.0.0.1 is not available ({exc.strerror}); "
                             "pass another --port or leave it out to pick a free one") from exc


@click.command()
@click.argument("directory", default="runs", type=click.Path(path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port to listen on (default, or 0: a free one).")
def tensorboard(directory: Path, port: int | None) -> None:
    """Start TensorBoard on 127.0.0.1 for the runs under DIRECTORY and print its URL.

    Runs until Ctrl-C. Each run folder is one TensorBoard run, so runs compare side by side.
    The HParams table's columns are the hyperparameters that differ between the finished runs
    (written to DIRECTORY/.hparams-table-*, a run without data, while it serves).
    """
    from embedlab.track.hparams_table import REFRESH_SECONDS, HParamsTable

    if directory.exists() and not directory.is_dir():
        raise InputError(f"{directory} is not a folder; pass the folder that holds your runs "
                         "(e.g. embedlab tensorboard runs/)")
    if not directory.is_dir():
        from embedlab.track.runs import no_such_runs_folder

        raise no_such_runs_folder(directory, "tensorboard")
    try:  # TensorBoard's loader (Rust) panics on such a path and serves an empty page
        os.fsencode(directory.resolve()).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"the path of {printable(os.fsdecode(directory))} is not valid UTF-8, "
                         "which TensorBoard needs; rename the folder (or a folder above it) "
                         "to a UTF-8 name") from None
    if not port:  # none, or 0 as many servers read it: a free one
        port = free_port()
    else:
        _check_port(port)
    _drop_old_experiment_summaries(directory)
    # the HParams table's default columns: the hyperparameters that differ between the runs
    table = HParamsTable(directory)
    table.remove_leftovers()
    table.refresh()
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(directory),
           "--host", "127.0.0.1", "--port", str(port)]
    try:
        code = serve(cmd, f"TensorBoard for {directory}: http://127.0.0.1:{port}/  "
                          "(Ctrl-C stops it)", every=(REFRESH_SECONDS, table.refresh))
    finally:
        table.close()
    if code != 0:
        raise click.ClickException(f"tensorboard exited with status {code}; see its messages "
                                   "above")


def _drop_old_experiment_summaries(directory: Path) -> None:
    """Runs finished by an embedlab before 2026-11-24 carry an HParams experiment summary, which
    TensorBoard takes for the whole logdir's (hiding the other runs' metrics): removed, under
    each run's lock; a run in training is left alone."""
    from embedlab.run.lock import RunLock
    from embedlab.track.events import drop_experiment_summaries
    from embedlab.track.runs import find_runs

    fixed = 0
    for run in find_runs(directory):
        if not any(run.glob("events.out.tfevents.*")):
            continue
        try:
            lock = RunLock(run, argv=["embedlab", "tensorboard"]).acquire()
        except (InputError, OSError):
            continue  # in training (the lock is held), or not ours to write: served as it is
        try:
            fixed += drop_experiment_summaries(run)
        except OSError:
            continue  # read-only: served as it is
        finally:
            lock.release()
    if fixed:
        echo(f"embedlab: removed the HParams experiment summary an older embedlab wrote "
                   f"from {fixed} run(s), so the table shows every run's metrics", err=True)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, frame: object) -> None:
    raise _Stopped(signum)


def _nothing() -> None:
    return None


def serve(cmd: list[str], banner: str,
          every: tuple[float, Callable[[], None]] | None = None) -> int:
    """Run the server ``cmd`` (``cmd[0]`` a path to a program) as a child process, print
    ``banner``, wait until it exits, calling ``every = (seconds, task)``'s task every so many
    seconds meanwhile.

    Returns the child's exit status, or 0 after Ctrl-C. SIGTERM and SIGHUP stop the child
    too, then exit with 128 + the signal: ``kill PID`` (or a closed ssh connection, when the
    hang-up reaches only this process) would otherwise end this process at once — Python's
    default action — and leave the child, re-parented to pid 1, serving and holding the port.
    Ctrl-C reaches the child from the terminal as well. A SIGKILL, which no handler sees, ends
    the child through the kernel (``PR_SET_PDEATHSIG``, asked for by the child itself).
    """
    stop = (*STOP_SIGNALS, signal.SIGINT)
    previous = {sig: signal.getsignal(sig) for sig in stop}
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stopped)
    proc: subprocess.Popen[bytes] | None = None
    try:
        try:
            proc = subprocess.Popen([sys.executable, "-c", _ENDS_WITH_PARENT, str(os.getpid()),
                                     *cmd])
            echo(banner)
            sys.stdout.flush()
            seconds, task = every or (None, _nothing)
            while True:
                try:
                    return proc.wait(timeout=seconds)
                except subprocess.TimeoutExpired:
                    task()
        except (KeyboardInterrupt, _Stopped) as exc:
            # a second signal must not cut the clean-up short and leave the child behind
            for sig in stop:
                signal.signal(sig, signal.SIG_IGN)
            if proc is not None:
                _stop(proc)
            if isinstance(exc, _Stopped):
                raise SystemExit(128 + exc.signum) from None
            return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


# The server's process, first thing: asks the kernel for SIGTERM when this process dies, even
# by SIGKILL (which no handler here sees), then becomes the server (the request survives exec).
# Done in the child rather than between fork and exec, where Python code is unsafe.
_ENDS_WITH_PARENT = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)
os.execv(sys.argv[2], sys.argv[2:])
"""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@click.command()
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--method", type=click.Choice(["pca", "tsne"]), default="pca", show_default=True,
              help="2-D projection: PCA (fast) or t-SNE (scikit-learn; slower, local clusters).")
@click.option("--words", type=int, default=300, show_default=True,
              help="Plot this many of the most frequent words.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output image (.png, .svg or .pdf). Default: RUN/exports/<method>-step<N>.png")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--step", type=int, default=None, metavar="N",
              help="Plot the run's checkpoint at step N.")
@click.option("--best", is_flag=True, help="Plot the run's best checkpoint (by its --best-metric).")
def visualize(run: Path, method: str, words: int, out: Path | None, force: bool,
              step: int | None, best: bool) -> None:
    """Plot RUN's latest input embeddings in 2-D, labelling the points whose labels fit.

    RUN may also be one of its checkpoint folders (or --step/--best pick one), or a word2vec or
    .npy vectors file (its first words are plotted; --out is then needed)."""
    from embedlab.track.visualize import visualize as draw

    path = draw(run, method="tsne" if method == "tsne" else "pca", words=words, out=out,
                force=force, step=step, best=best)
    echo(printable(f"wrote {path}"))
