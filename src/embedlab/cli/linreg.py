"""``embedlab linreg``: the lecture's birth-rate → life-expectancy regression, resumable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from embedlab.cli.output import echo


@click.command()
@click.argument("table", type=click.Path(path_type=Path))
@click.option("--run", "run_dir", required=True, type=click.Path(path_type=Path),
              help="Run folder; resumes automatically when it holds a checkpoint.")
@click.option("--steps", type=int, help="Total SGD updates.  [default: 2000]")
@click.option("--lr", type=float, help="Learning rate.  [default: 0.01]")
@click.option("--batch-size", type=int, help="Rows per update.  [default: 16]")
@click.option("--seed", type=int, help="Master seed (init, shuffle).  [default: 1]")
@click.option("--max-steps", type=int, default=None,
              help="Stop (with a checkpoint) at this global step; re-run without it (or with "
                   "a larger value) to continue.")
@click.option("--checkpoint-every", type=int, help="Steps between saves.  [default: 500]")
@click.option("--checkpoint-secs", type=float,
              help="Seconds between saves (whichever comes first).  [default: 120]")
@click.option("--keep", type=int, help="Latest checkpoints to keep.  [default: 5]")
def linreg(table: Path, run_dir: Path, steps: int | None, lr: float | None,
           batch_size: int | None, seed: int | None, max_steps: int | None,
           checkpoint_every: int | None, checkpoint_secs: float | None,
           keep: int | None) -> None:
    """Fit y = w·x + b on TABLE (tab-separated, header line, last two columns x and y).

    \b
    Example (the lecture's data):
      embedlab linreg birth_life_2010.txt --run runs/linreg --steps 2000
    """
    # torch is the optional extra: without it this import is the one-line error naming it
    from embedlab.linreg.train import LinRegConfig, train_linreg

    given = {"steps": steps, "lr": lr, "batch_size": batch_size, "seed": seed,
             "checkpoint_every": checkpoint_every, "checkpoint_secs": checkpoint_secs,
             "keep": keep}
    # a flag left out is the default for a new run and the run's own for a resumed one, as
    # 'train' reads it: re-running 'linreg TABLE --run RUN' resumes
    settings: dict[str, Any] = {**_stored_settings(run_dir),
                                **{k: v for k, v in given.items() if v is not None}}
    cfg = LinRegConfig(**settings)
    result = train_linreg(table, run_dir, cfg, argv=sys.argv, max_steps=max_steps)
    echo(f"step {result.step}: w={result.w:.6g} b={result.b:.6g} mse={result.loss:.6g}")
    echo(f"checkpoint: {result.checkpoint}")


def _stored_settings(run_dir: Path) -> dict[str, Any]:
    """The settings of the linreg run in ``run_dir`` that has a checkpoint (none otherwise)."""
    import json
    from dataclasses import fields

    from embedlab.linreg.config import LINREG_MODEL, LinRegConfig

    if not any((run_dir / "checkpoints").glob("ckpt-*")):
        return {}
    try:
        raw = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("model") != LINREG_MODEL:
        return {}  # another model's folder: train_linreg refuses it in its own words
    names = {f.name for f in fields(LinRegConfig)}
    return {k: v for k, v in raw.items() if k in names}
