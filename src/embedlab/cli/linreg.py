"""``embedlab linreg``: the lecture's birth-rate → life-expectancy regression, resumable."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command()
@click.argument("table", type=click.Path(path_type=Path))
@click.option("--run", "run_dir", required=True, type=click.Path(path_type=Path),
              help="Run folder; resumes automatically when it holds a checkpoint.")
@click.option("--steps", default=2000, show_default=True, help="Total SGD updates.")
@click.option("--lr", default=0.01, show_default=True, help="Learning rate.")
@click.option("--batch-size", default=16, show_default=True, help="Rows per update.")
@click.option("--seed", default=1, show_default=True, help="Master seed (init, shuffle).")
@click.option("--max-steps", type=int, default=None,
              help="Stop (with a checkpoint) at this global step; re-run to continue.")
@click.option("--checkpoint-every", default=500, show_default=True, help="Steps between saves.")
@click.option("--checkpoint-secs", default=120.0, show_default=True,
              help="Seconds between saves (whichever comes first).")
@click.option("--keep", default=5, show_default=True, help="Latest checkpoints to keep.")
def linreg(table: Path, run_dir: Path, steps: int, lr: float, batch_size: int, seed: int,
           max_steps: int | None, checkpoint_every: int, checkpoint_secs: float,
           keep: int) -> None:
    """Fit y = w·x + b on TABLE (tab-separated, header line, last two columns x and y).

    \b
    Example (the lecture's data):
      embedlab linreg birth_life_2010.txt --run runs/linreg --steps 2000
    """
    # torch is the optional extra: without it this import is the one-line error naming it
    from embedlab.linreg.train import LinRegConfig, train_linreg

    cfg = LinRegConfig(steps=steps, lr=lr, batch_size=batch_size, seed=seed,
                       checkpoint_every=checkpoint_every, checkpoint_secs=checkpoint_secs,
                       keep=keep)
    result = train_linreg(table, run_dir, cfg, argv=sys.argv, max_steps=max_steps)
    click.echo(f"step {result.step}: w={result.w:.6g} b={result.b:.6g} mse={result.loss:.6g}")
    click.echo(f"checkpoint: {result.checkpoint}")
