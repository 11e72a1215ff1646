"""``embedlab runs``, ``embedlab tensorboard`` and ``embedlab visualize``: watching runs."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import click

from embedlab.errors import InputError


@click.command()
@click.argument("directory", default="runs", type=click.Path(path_type=Path))
@click.option("--all", "all_hparams", is_flag=True,
              help="Show every hyperparameter, not only those that differ between runs.")
def runs(directory: Path, all_hparams: bool) -> None:
    """Table of the runs under DIRECTORY (default: runs/).

    Columns: name, status (running / finished / interrupted / failed), step, words seen, latest
    loss, best value of the run's --best-metric, wall time, and the hyperparameters that differ
    between the listed runs.
    """
    from rich.console import Console

    from embedlab.track.runs import find_runs, run_info, runs_tables

    infos = []
    for run in find_runs(directory):
        try:
            infos.append(run_info(run, directory))
        except InputError as exc:  # one broken run must not hide the others
            click.echo(f"embedlab: warning: skipped {run}: {exc}", err=True)
    if not infos:
        click.echo(f"no runs under {directory} (a run folder holds config.json); "
                   "start one with: embedlab train --corpus demo")
        return
    # Piped output (grep, files) must not be wrapped at rich's default 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 1000)
    console.print(*runs_tables(infos, all_hparams=all_hparams))


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
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Port to listen on (default: a free one).")
def tensorboard(directory: Path, port: int | None) -> None:
    """Start TensorBoard on 127.0.0.1 for the runs under DIRECTORY and print its URL.

    Runs until Ctrl-C. Each run folder is one TensorBoard run, so runs compare side by side.
    """
    if not directory.is_dir():
        raise InputError(f"no such folder: {directory}; pass the folder that holds your runs "
                         "(e.g. embedlab tensorboard runs/)")
    if port is None:
        port = free_port()
    else:
        _check_port(port)
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(directory),
           "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd)
    click.echo(f"TensorBoard for {directory}: http://127.0.0.1:{port}/  (Ctrl-C stops it)",
               nl=True)
    sys.stdout.flush()
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return
    if code != 0:
        raise click.ClickException(f"tensorboard exited with status {code}; see its messages "
                                   "above")


@click.command()
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--method", type=click.Choice(["pca", "tsne"]), default="pca", show_default=True,
              help="2-D projection: PCA (fast) or t-SNE (scikit-learn; slower, local clusters).")
@click.option("--words", type=int, default=300, show_default=True,
              help="Plot this many of the most frequent words.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output image (.png, .svg or .pdf). Default: RUN/exports/<method>-step<N>.png")
def visualize(run: Path, method: str, words: int, out: Path | None) -> None:
    """Plot RUN's latest input embeddings in 2-D, each point labelled with its word."""
    from embedlab.track.visualize import visualize as draw

    path = draw(run, method="tsne" if method == "tsne" else "pca", words=words, out=out)
    click.echo(f"wrote {path}")
