"""``embedlab prepare``: tokenise a corpus once into a prepared folder (ids + vocab + meta)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from embedlab.config import DataConfig

_D = DataConfig()


@click.command("prepare")
@click.argument("corpus")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Folder to create (new, empty, or a prepared corpus with --force).")
@click.option("--lowercase", is_flag=True, help="Lowercase every token.")
@click.option("--min-count", type=int, default=_D.min_count, show_default=True,
              help="Drop words seen fewer times.")
@click.option("--max-vocab", type=int, default=None,
              help="Keep only the N most frequent words (UNK counts among them).")
@click.option("--unk", default=None,
              help="Map out-of-vocabulary words to this token (id 0) instead of dropping them.")
@click.option("--max-distinct", type=int, default=_D.max_distinct, show_default=True,
              help="Prune rare words while counting when more distinct words than this.")
@click.option("--force", is_flag=True, help="Replace an existing prepared corpus in --out.")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show progress bars on stderr.")
def prepare(corpus: str, out: Path, lowercase: bool, min_count: int, max_vocab: int | None,
            unk: str | None, max_distinct: int, force: bool, progress: bool) -> None:
    """Tokenise CORPUS into --out so that training can skip tokenising.

    CORPUS is a text file (text8's single line or one sentence per line), a .gz/.bz2/.xz file,
    a folder of such files, 'text8' (downloaded and cached) or 'demo'. Use ./text8 for a local
    file called text8.

    \b
    Example:
      embedlab prepare text8 --out data/text8-prepared --min-count 5
      embedlab train --corpus data/text8-prepared
    """
    from embedlab.data.preparing import prepare as run_prepare

    start = time.perf_counter()
    pc = run_prepare(corpus, out, lowercase=lowercase, min_count=min_count, max_vocab=max_vocab,
                     unk=unk, max_distinct=max_distinct, progress=progress, force=force)
    seconds = time.perf_counter() - start
    meta = pc.meta
    click.echo(f"prepared {out}: {meta['raw_tokens']:,} tokens read, {meta['tokens']:,} kept, "
               f"{meta['sentences']:,} sentence{'s' if meta['sentences'] != 1 else ''} "
               f"(lines), {len(pc.vocab):,} words in the vocabulary "
               f"({seconds:.1f} s)")
