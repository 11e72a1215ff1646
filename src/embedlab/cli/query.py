"""``embedlab export``, ``neighbors``, ``analogy`` and ``eval``: using trained vectors.

Each command loads vectors with :func:`embedlab.vectors.load` (run folder, checkpoint folder,
word2vec text/binary file or .npy export) and calls one method of the vectors object.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from embedlab.cli.output import echo
from embedlab.errors import InputError, counted, printable, warn

F = TypeVar("F", bound=Callable[..., Any])

_SOURCE_HELP = ("VECTORS is a run folder (newest verified checkpoint), a checkpoint folder, "
                "a word2vec text/binary file or a .npy export.")


def _source_options(func: F) -> F:
    """VECTORS argument + --step/--best, shared by every command here."""
    func = click.option("--best", is_flag=True,
                        help="Use the run's best checkpoint (by its --best-metric).")(func)
    func = click.option("--step", type=int, default=None, metavar="N",
                        help="Use the run's checkpoint at step N.")(func)
    return click.argument("source", metavar="VECTORS", type=click.Path(path_type=Path))(func)


def _load(source: Path, step: int | None, best: bool) -> Any:
    from embedlab.vectors import load

    return load(source, step=step, best=best)


def _console() -> Any:
    from embedlab.cli.output import table_console

    return table_console()


def _table(columns: list[tuple[str, str]]) -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    return table


def _show(title: str, table: Any) -> None:
    console = _console()
    console.print(title)
    console.print(table)
    if not table.row_count:  # an empty table alone reads as a failure to print
        console.print("(no other words: the vocabulary holds only the query's words)")


def _check_k(k: int) -> None:
    if k < 1:
        raise InputError(f"-k must be >= 1, got {k}; e.g. -k 10")
    given = _given("-k", "--topn")
    if len(set(given)) > 1:  # click keeps the last of two spellings of one option
        raise InputError("-k and --topn are one option given twice; pass one of them")


def _given(*names: str) -> list[str]:
    """The spellings of one option in the command's arguments, each time it is given (before a
    ``--``; ``--name=value`` and ``-k5`` count)."""
    from embedlab.cli import invoked_args

    args = invoked_args()
    args = args[:args.index("--")] if "--" in args else args
    return [name for arg in args for name in names
            if arg == name or arg.startswith(name + "=") or
            (len(name) == 2 and arg.startswith(name) and arg[2:].isdigit())]


# ---- export ---------------------------------------------------------------------------------

@click.command()
@_source_options
@click.option("--format", "fmt", type=click.Choice(["word2vec", "word2vec-binary", "npy"]),
              default=None, help="Output format [default: by --out's suffix: .bin "
                                 "word2vec-binary, .npy npy, else word2vec].")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output file (default for a run folder: RUN/exports/vectors.{txt,bin,npy}).")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
def export(source: Path, step: int | None, best: bool, fmt: str | None, out: Path | None,
           force: bool) -> None:
    """Write the input embeddings of VECTORS as word2vec text/binary or npy (+ vocab).

    word2vec files load in gensim's KeyedVectors.load_word2vec_format (binary=True for
    word2vec-binary). npy writes NAME.npy and NAME.vocab.tsv beside it. Without --format the
    format follows --out's suffix. Existing files are never overwritten without --force;
    files are written atomically.
    """
    from embedlab.export import SUFFIX, export_vectors
    from embedlab.export.atomic import in_exports_folder, make_exports_folder

    if not source.exists():  # before naming --out: the source is what is wrong
        _load(source, step, best)
    if out is not None and str(out) == "-":
        raise InputError("--out -: export writes a file (whole, then renamed into place), not "
                         "standard output; pass a file name, e.g. --out vectors.txt")
    fmt = _export_format(fmt, out)
    if out is None:
        from embedlab.checkpoint import is_checkpoint_folder

        if not (source / "checkpoints").is_dir() and source.is_dir() and \
                not is_checkpoint_folder(source):
            # a run with no checkpoint yet, or a folder that is no run: that, not --out, is
            # what is wrong (loading a checkpoint or a word2vec file to say so would cost its
            # reading)
            _load(source, step, best)
        if not (source / "checkpoints").is_dir():
            raise InputError(f"--out is required when exporting from {source}; "
                             f"e.g. --out vectors{SUFFIX[fmt]}")  # type: ignore[index]
        out = source / "exports" / f"vectors{SUFFIX[fmt]}"  # type: ignore[index]
    # RUN/exports/NAME: the run's own exports folder, made if missing (a checkpoint folder has
    # none, and a path there is checked as any other)
    in_exports = (source / "checkpoints").is_dir() and in_exports_folder(out, source)
    if not in_exports:  # a path given: refused before the vectors load
        from embedlab.export.atomic import check_writable

        check_writable(out, force=force, example=f"vectors{SUFFIX[fmt]}")  # type: ignore[index]
    vectors = _load(source, step, best)  # first: a bad source must not leave an exports/ behind
    if in_exports:  # made as RUN/exports, however --out spells the folder
        make_exports_folder(source / "exports" / out.name,
                            f"vectors{SUFFIX[fmt]}")  # type: ignore[index]
    written = export_vectors(vectors, fmt, out, force=force)  # type: ignore[arg-type]
    for i, path in enumerate(written):  # npy: the matrix, then its vocabulary file (words only)
        shape = counted(len(vectors), "word") if i > 0 else \
            f"{counted(len(vectors), 'word')} × {counted(vectors.dim, 'dim')}"
        # from which checkpoint (or file): what the export holds, said where it is made
        echo(printable(f"wrote {path} ({shape}) from {vectors.source}"))


def _export_format(fmt: str | None, out: Path | None) -> str:
    """``--format``, or the one ``--out``'s suffix names (.bin, .npy; else word2vec text); a
    word2vec format whose text/binary kind contradicts the suffix is refused."""
    from embedlab.export.word2vec import (
        COMPRESSED_SUFFIXES,
        format_suffix,
        refuse_other_compression,
    )

    if out is None:
        return fmt or "word2vec"
    refuse_other_compression(out, ".npy" if fmt == "npy" else ".txt/.bin")
    suffix = format_suffix(out)  # .bin for vectors.bin.gz: written compressed
    if out.suffix.lower() in COMPRESSED_SUFFIXES and (fmt == "npy" or (
            fmt is None and suffix == ".npy")):
        raise InputError(f"--out {out}: npy exports are not written compressed (NumPy maps "
                         f"them); pass --out {out.with_suffix('')}")
    if fmt is None:
        return {".bin": "word2vec-binary", ".npy": "npy"}.get(suffix, "word2vec")
    if fmt == "word2vec" and suffix == ".bin":
        raise InputError(f"--out {out} names a binary file, but --format word2vec writes text "
                         "(gensim would read it with binary=True and fail); pass --format "
                         f"word2vec-binary, or --out {_renamed(out, '.txt')}")
    if fmt == "word2vec-binary" and suffix in (".txt", ".vec"):  # .vec: fastText's text
        raise InputError(f"--out {out} names a text file, but --format word2vec-binary writes "
                         f"binary; pass --format word2vec, or --out {_renamed(out, '.bin')}")
    return fmt


def _renamed(out: Path, suffix: str) -> Path:
    """``out`` with its format suffix replaced, a compression suffix kept (x.bin.gz → x.txt.gz)."""
    from embedlab.export.word2vec import COMPRESSED_SUFFIXES

    if out.suffix.lower() in COMPRESSED_SUFFIXES:
        return out.with_suffix("").with_suffix(suffix + out.suffix)
    return out.with_suffix(suffix)


# ---- neighbors / analogy -------------------------------------------------------------------

@click.command()
@_source_options
@click.argument("words", nargs=-1, required=True, metavar="WORD...")
@click.option("-k", "--topn", "k", type=int, default=10, show_default=True,
              help="Number of neighbours (--topn: gensim's name).")
@click.option("--metric", type=click.Choice(["cosine", "euclidean"]), default="cosine",
              show_default=True,
              help="cosine similarity, or Euclidean distance on the raw vectors.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def neighbors(source: Path, step: int | None, best: bool, words: tuple[str, ...], k: int,
              metric: str, as_json: bool) -> None:
    """The K nearest neighbours of WORD in VECTORS; of several words, those of their mean,
    the words themselves excluded: with --metric cosine the mean of their unit vectors
    (word2vec.c's distance given a phrase), with --metric euclidean the mean of their vectors.

    An unknown word exits with status 2 and suggests close words. 'embedlab neighbours' is the
    same command.
    """
    _check_k(k)
    words = tuple(map(typed_word, words))
    vectors = _load(source, step, best)
    found = vectors.most_similar(list(words) if len(words) > 1 else words[0], k, metric=metric)
    shown = " + ".join(words)
    if as_json:
        several = {"words": list(words)} if len(words) > 1 else {}
        echo(json.dumps({"word": shown, **several, "metric": metric,
                               "vectors": vectors.source,
                               "neighbors": [{"word": w, "score": s} for w, s in found]}))
        return
    label = "cosine" if metric == "cosine" else "distance"
    table = _table([("#", "right"), ("word", "left"), (label, "right")])
    for rank, (w, s) in enumerate(found, 1):
        table.add_row(str(rank), w, f"{s:.4f}")
    title = " + ".join(repr(w) for w in words)
    _show(f"nearest to {title} ({metric}, {vectors.source})", table)


def typed_word(word: str) -> str:
    """A word typed on the command line, as the vocabulary holds it: UTF-8. Python decodes the
    arguments in the locale's encoding; in a C locale (ASCII) café's bytes arrive as
    'caf\\udcc3\\udca9', which no UTF-8 vocabulary holds. Bytes that are not UTF-8 stay as
    they came."""
    try:
        return os.fsencode(word).decode("utf-8")
    except UnicodeError:
        return word


@click.command(short_help="A is to B as C is to what? (3CosAdd or 3CosMul)")
@_source_options
@click.argument("a")
@click.argument("b")
@click.argument("c")
@click.option("-k", "--topn", "k", type=int, default=10, show_default=True,
              help="Number of answers (--topn: gensim's name).")
@click.option("--method", type=click.Choice(["3cosadd", "3cosmul"]), default="3cosadd",
              show_default=True, help="Analogy objective (Levy & Goldberg 2014).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def analogy(source: Path, step: int | None, best: bool, a: str, b: str, c: str, k: int,
            method: str, as_json: bool) -> None:
    """A is to B as C is to ?  -- e.g. 'embedlab analogy RUN man king woman'.

    The K best answers (A, B and C excluded) by 3CosAdd (cos with B - A + C) or 3CosMul.
    """
    _check_k(k)
    a, b, c = typed_word(a), typed_word(b), typed_word(c)
    vectors = _load(source, step, best)
    found = vectors.analogy(a, b, c, k, method=method)
    if as_json:
        echo(json.dumps({"a": a, "b": b, "c": c, "method": method, "vectors": vectors.source,
                               "answers": [{"word": w, "score": s} for w, s in found]}))
        return
    table = _table([("#", "right"), ("word", "left"), ("score", "right")])
    for rank, (w, s) in enumerate(found, 1):
        table.add_row(str(rank), w, f"{s:.4f}")
    _show(f"{a} : {b} :: {c} : ?  ({method}, {vectors.source})", table)


# ---- eval -----------------------------------------------------------------------------------

@click.command(name="eval")
@_source_options
@click.option("--analogies", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Analogy questions in the questions-words format (- reads standard input).")
@click.option("--similarity", type=click.Path(path_type=Path), multiple=True, metavar="FILE",
              help="Word pairs with human scores (word<TAB>word<TAB>score); repeatable; - reads "
              "standard input.")
@click.option("--restrict-vocab", type=int, default=30_000, show_default=True, metavar="N",
              help="Analogies consider only the N most frequent words (word2vec's convention; "
                   "300000 is gensim's default).")
@click.option("--method", type=click.Choice(["3cosadd", "3cosmul", "both"]), default="3cosadd",
              show_default=True, help="Analogy objective(s).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def eval_cmd(source: Path, step: int | None, best: bool, analogies: Path | None,
             similarity: tuple[Path, ...], restrict_vocab: int, method: str,
             as_json: bool) -> None:
    """Evaluate VECTORS on analogies and/or word-pair similarity (gensim-compatible numbers).

    Analogies: accuracy per section and in total, questions answered and skipped (a word outside
    the N most frequent words). Similarity: Spearman and Pearson correlation and the share of
    pairs with an unknown word (among the 300,000 most frequent words, gensim's default).
    Matching is case-insensitive.
    """
    from embedlab.eval.analogy import parse_questions, read_questions
    from embedlab.eval.similarity import parse_pairs, read_pairs
    from embedlab.fsutil import text_lines

    if analogies is None and not similarity:
        raise InputError("nothing to evaluate; pass --analogies FILE and/or --similarity FILE "
                         "(- reads standard input: --analogies - < questions-words.txt)")
    for flag, path in (("--analogies", analogies), *(("--similarity", p) for p in similarity)):
        # "$FILE" of an unset variable, which click's Path reads as "."
        if path is not None and str(path) in ("", "."):
            raise InputError(f"{flag} is empty or '.', the current folder (an unset "
                             "variable?); pass a file, or - for standard input")
    if len(_given("--analogies")) > 1:  # click would keep the last file
        raise InputError("--analogies is given more than once, but evaluates one questions file "
                         "a command; run eval once per file (--similarity may be repeated)")
    if restrict_vocab < 1:
        raise InputError(f"--restrict-vocab must be >= 1, got {restrict_vocab}; "
                         "pass e.g. --restrict-vocab 30000")
    # Read (and validate) the evaluation files before the possibly slow vector load.
    # "-": standard input, as compute-accuracy reads its questions (< questions-words.txt)
    dashes = [p for p in (analogies, *similarity) if p is not None and str(p) == "-"
              and not p.exists()]
    if len(dashes) > 1:
        raise InputError("standard input (-) is given for more than one file; it holds one: "
                         "pass the others as files")

    def dash(path: Path) -> bool:
        return str(path) == "-" and not path.exists()

    def stdin_lines() -> list[str]:
        import sys

        try:
            text = sys.stdin.buffer.read().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"cannot read standard input ({exc}); pass UTF-8 text") from None
        return text_lines(text)

    # standard input is named as such in the tables, not as /dev/stdin
    questions = None if analogies is None else \
        parse_questions(stdin_lines(), STDIN) if dash(analogies) else read_questions(analogies)
    pair_sets = [parse_pairs(stdin_lines(), STDIN) if dash(p) else read_pairs(p)
                 for p in similarity]
    vectors = _load(source, step, best)
    methods = ["3cosadd", "3cosmul"] if method == "both" else [method]
    ana = ([vectors.evaluate_analogies(questions, restrict_vocab, m) for m in methods]
           if questions is not None else [])
    sims = [vectors.evaluate_similarity(p) for p in pair_sets]
    for sim in sims:
        if math.isnan(sim.spearman):
            warn(f"the {sim.pairs_used} pairs of {sim.source} with both words in the vocabulary "
                 "all get the same cosine, so no correlation is defined (nan, as gensim gives); "
                 "check the vectors (all zero?) or use a file of other pairs")
    if as_json:
        echo(json.dumps({"vectors": vectors.source, "words": len(vectors), "dim": vectors.dim,
                               "analogies": [r.to_dict() for r in ana],
                               "similarity": [s.to_dict() for s in sims]}))
        return
    _console().print(f"{vectors.source}: {counted(len(vectors), 'word')} × "
                     f"{counted(vectors.dim, 'dim')}")
    for result in ana:
        _show(_analogy_title(result), _analogy_table(result))
    if sims:
        _show("word-pair similarity", _similarity_table(sims))


#: how the tables name standard input (``-``)
STDIN = "standard input"


def _lines(n: int) -> str:
    return f"{n:,} malformed line{'s' if n != 1 else ''}"


def _analogy_title(result: Any) -> str:
    return (f"analogies {result.source} ({result.method}, top {result.restrict_vocab} words"
            + (f", {_lines(result.invalid_lines)} skipped" if result.invalid_lines else "")
            + ")")


def _analogy_table(result: Any) -> Any:
    table = _table([("section", "left"), ("accuracy", "right"), ("correct", "right"),
                           ("answered", "right"), ("skipped (OOV)", "right")])
    for s in (*result.sections, *result.kinds(), result.total):
        # a section none of whose questions could be answered has no accuracy (not 0 %)
        shown = f"{100 * s.accuracy:.1f}%" if s.answered else "n/a"
        table.add_row(s.name, shown, str(s.correct), str(s.answered), str(s.skipped))
    return table


def _similarity_table(results: list[Any]) -> Any:
    table = _table([("file", "left"), ("spearman", "right"),
                                            ("pearson", "right"), ("pairs", "right"),
                                            ("OOV", "right")])
    names = [Path(r.source).name for r in results]
    for r, name in zip(results, names, strict=True):
        # lines that are no pair change the score as much as OOV pairs do: said, as the
        # analogies' title says its skipped lines
        skipped = f" ({_lines(r.invalid_lines)} skipped)" if r.invalid_lines else ""
        shown = str(r.source) if names.count(name) > 1 else name  # a/ws.tsv and b/ws.tsv
        table.add_row(shown + skipped, f"{r.spearman:.4f}", f"{r.pearson:.4f}",
                      str(r.pairs_used), f"{r.oov_ratio:.1f}%")
    return table
