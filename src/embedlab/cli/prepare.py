"""``embedlab prepare``: tokenise a corpus once into a prepared folder (ids + vocab + meta)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import click

from embedlab.cli.output import echo
from embedlab.config import DataConfig
from embedlab.errors import InputError, counted, printable
from embedlab.run.signals import Terminated

_D = DataConfig()


@click.command("prepare")
@click.argument("corpus")
@click.option("--out", "out", required=True, type=click.Path(path_type=str),
              help="Folder to create (new, empty, or a prepared corpus with --force).")
# --no-lowercase too: a train refused for its vocabulary flags names them as train takes them
@click.option("--lowercase/--no-lowercase", default=False,
              help="Lowercase every token.  [default: off]")
@click.option("--min-count", type=int, default=_D.min_count, show_default=True,
              help="Drop words seen fewer times.")
@click.option("--max-vocab", type=int, default=None,
              help="Keep only the N most frequent words (UNK counts among them).")
@click.option("--unk", default=None,
              help="Map out-of-vocabulary words to this token (id 0) instead of dropping them.")
@click.option("--max-distinct", type=int, default=_D.max_distinct, show_default=True,
              help="Prune rare words while counting when more distinct words than this.")
@click.option("--force", is_flag=True, help="Replace an existing prepared corpus in --out.")
@click.option("--progress/--no-progress", default=True,
              help="Show progress bars on stderr.  [default: on]")
def prepare(corpus: str, out: str | Path, lowercase: bool, min_count: int, max_vocab: int | None,
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
    from embedlab.cli import loading

    with loading():
        from embedlab.data.preparing import prepare_into
    if not out:  # "--out $DIR" of an unset variable: not the working folder
        raise InputError("--out is empty (an unset variable?); pass a new folder, e.g. "
                         "--out data/prepared")
    out = Path(out)
    start, before = time.perf_counter(), _identity(out)
    late = ""
    try:
        # the summary comes from meta.json: opening the folder would read the whole vocabulary
        prepare_into(corpus, out, lowercase=lowercase, min_count=min_count,
                     max_vocab=max_vocab, unk=unk, max_distinct=max_distinct, progress=progress,
                     force=force)
    except KeyboardInterrupt as exc:
        # a Ctrl-C (or SIGTERM, SIGHUP: Terminated) in the moment after the folder was
        # committed: it is complete, and a re-run would be refused as --out already prepared;
        # say so instead of "interrupted"
        after = _identity(out)
        if after is None or after == before:  # nothing committed: the old folder, or none
            raise
        which = signal.Signals(exc.signum).name if isinstance(exc, Terminated) else "Ctrl-C"
        late = f"; {which} came once it was complete, and it is kept"
    seconds = time.perf_counter() - start
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    echo(printable(f"prepared {out}: {counted(meta['raw_tokens'], 'token')} read, "
                   f"{meta['tokens']:,} kept, {counted(meta['sentences'], 'sentence')} (lines), "
                   f"{counted(meta['vocab_size'], 'word')} in the vocabulary ({seconds:.1f} s)"
                   f"{late}"))


def _identity(out: Path) -> tuple[int, int, int] | None:
    """Which ``out/meta.json`` is there (device, inode, mtime in ns), None when none is: a folder
    this command committed has a new one, whatever the file system's clock granularity."""
    try:
        st = (out / "meta.json").stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns
