"""``embedlab visualize``: the labelled 2-D plot of a run's latest input embeddings.

Loads the latest *verified* checkpoint with :func:`embedlab.checkpoint.find_checkpoint` /
``load_checkpoint`` (safetensors + JSON, never pickle) and the words from ``RUN/vocab.tsv``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from embedlab.errors import InputError
from embedlab.export.atomic import in_exports_folder, make_exports_folder, refuse_inside_saved
from embedlab.fsutil import atomic_open, output_target, write_error
from embedlab.track.plots import Method, plot_words, project_2d, top_word_ids

FORMATS = (".png", ".svg", ".pdf")


def read_vocab_words(path: Path) -> list[str]:
    """Words of ``vocab.tsv`` (word<TAB>count, id = line number).

    Read by :meth:`Vocab.load_tsv`, as neighbors/export/eval read a run's vocabulary, so every
    command accepts and refuses the same files with the same one-line message.
    """
    from embedlab.data.vocab import Vocab

    if not path.is_file():
        raise InputError(f"{path} not found; pass a run folder made by 'embedlab train' "
                         "(see 'embedlab runs'), or restore the run's vocab.tsv")
    return list(Vocab.load_tsv(path).words)


def load_input_embeddings(run_dir: Path) -> tuple[np.ndarray, int | None]:
    """``(input_embeddings V×D float32, step)`` of the run's latest verified checkpoint."""
    _ckpt, matrix, step = _embeddings(run_dir, None, False)
    return matrix, step


def _embeddings(path: Path, step: int | None, best: bool
                ) -> tuple[Path, np.ndarray, int | None]:
    """The checkpoint that ``path`` (a run folder or a checkpoint folder), ``step`` and
    ``best`` pick, as ``embedlab export`` picks it; its input embeddings and its step."""
    from embedlab.checkpoint import read_picked
    from embedlab.run.folder import is_linreg_run
    from embedlab.vectors import load_input_embeddings as load_matrix

    def read(ckpt: Path) -> tuple[np.ndarray, dict[str, Any]]:
        if is_linreg_run(ckpt.parent.parent):  # RUN/checkpoints/ckpt-N
            raise InputError(f"{ckpt.parent.parent} is a run of 'embedlab linreg' (a line's w "
                             "and b), not word vectors; pass a run of 'embedlab train'")
        return load_matrix(ckpt)

    # a run in training deletes its older checkpoints: the pick is made again
    ckpt, (matrix, state) = read_picked(path, read, step=step, best=best)
    step = state.get("step")
    return ckpt, matrix, step if isinstance(step, int) else None


def visualize(run_dir: Path, *, method: Method = "pca", words: int = 300,
              out: Path | None = None, force: bool = False, step: int | None = None,
              best: bool = False) -> Path:
    """Draw the ``words`` most frequent words of the run (or the first ``words`` of a word2vec
    or .npy file, which needs ``out``) and save the figure; returns the path.

    The run's newest verified checkpoint, or the one ``step`` or ``best`` picks; ``run_dir``
    may also be one of the run's checkpoint folders.

    The default output is ``RUN/exports/<method>-step<N>.png``. Like ``embedlab export``, an
    existing file is replaced only with ``force``; the file is written to a temporary name and
    renamed, so an existing plot is never left half-written. Something that is not a regular
    file (a FIFO, a device) is never replaced; a symbolic link is written through.
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise InputError(f"no such run folder or vectors file: {run_dir}; pass a folder made "
                         "by embedlab train (see embedlab runs), or a word2vec/.npy file")
    if not run_dir.is_dir() and (step is not None or best):
        raise InputError(f"--step/--best choose a checkpoint of a run folder, but {run_dir} is a "
                         "file; drop them or pass the run folder")
    if not run_dir.is_dir() and out is None:  # a file has no exports/ folder to write into
        raise InputError(f"{run_dir} is a file, not a run folder: a word2vec/.npy vectors file "
                         f"is plotted with --out for the image, e.g. --out {method}.png")
    if words < 3:
        raise InputError(f"--words must be >= 3, got {words}; e.g. --words 300")
    words = min(words, sys.maxsize)  # more than any vocabulary: all of it (islice's limit)
    if out is not None and out.is_dir():
        raise InputError(f"--out {out} is a folder; pass a file path, e.g. --out "
                         f"{out / f'{method}.png'}")
    if out is not None and out.suffix.lower() not in FORMATS:
        raise InputError(f"--out {out}: unsupported file type; use one of {', '.join(FORMATS)}")
    if out is not None and out.parent.exists() and not out.parent.is_dir():
        raise InputError(f"cannot write {out} ({out.parent} is a file, not a folder); "
                         "pass --out in a folder")
    # RUN/exports/NAME, however spelled: the run's own exports folder, made if missing as for
    # the default output (a checkpoint folder or a vectors file has none)
    in_exports = out is not None and (run_dir / "checkpoints").is_dir() and \
        in_exports_folder(out, run_dir)
    if out is not None and not in_exports and not out.parent.is_dir():
        raise InputError(f"--out {out}: folder {out.parent} does not exist; create it first")
    if out is not None:
        _check_replaceable(out, force)
    from embedlab.vectors import check_vocab_fits, load

    vectors = None
    if run_dir.is_dir():
        ckpt, emb, step = _embeddings(run_dir, step, best)
        run_dir = ckpt.parent.parent  # RUN/checkpoints/ckpt-N: the run, when given the folder
        vocab = read_vocab_words(run_dir / "vocab.tsv")
        check_vocab_fits(run_dir / "vocab.tsv", len(vocab), ckpt, emb)
        unk = _unk_of(run_dir)
    else:  # word2vec or .npy: words in file order, which is frequency order as written
        vectors = load(run_dir)
        vocab, emb, step, unk = list(vectors.words), vectors.matrix, None, None
    default_out = out is None
    if out is None:
        out = run_dir / "exports" / f"{method}-step{step if step is not None else 'last'}.png"
        _check_replaceable(out, force)
    ids = top_word_ids(vocab, unk, words)
    if len(ids) < 3:  # --words is not what is short
        kept = " (the unknown-word token left out)" if unk is not None else ""
        raise InputError(f"{run_dir} has {len(ids)} word{'s' if len(ids) != 1 else ''} to "
                         f"plot{kept}, and a 2-D projection needs at least 3; train on a "
                         "corpus with more distinct words, or a lower --min-count")
    chosen = np.asarray(emb[ids], dtype=np.float32)
    source = f"checkpoint {ckpt}" if vectors is None else str(run_dir)
    if chosen.shape[1] < 1:  # a checkpoint's state re-signed by hand, say: IndexError
        raise InputError(f"{source} holds vectors of no dimension (shape {tuple(emb.shape)}); "
                         "pick another checkpoint (--step N) or vectors file")
    if not np.isfinite(chosen).all():  # the SVD "did not converge": a traceback
        raise InputError(f"{source} holds nan or inf values in the vectors of the words to plot "
                         "(a run that diverged, or a damaged file); pick another checkpoint "
                         "(--step N) or vectors file")
    points = project_2d(chosen, method)
    label = "t-SNE" if method == "tsne" else "PCA"
    at = f", step {step}" if step is not None else ""
    # "." has no name of its own; a name's bytes as UTF-8 (in a C locale too), those that are
    # not UTF-8 as \xff: matplotlib refuses the surrogates Python decodes them to
    name = os.fsencode(run_dir.resolve().name).decode("utf-8", "backslashreplace")
    fig = plot_words([vocab[i] for i in ids], points,
                     title=f"{label} of the {len(ids)} most frequent words — {name}{at}")
    if default_out:
        make_exports_folder(out, out.name)
    elif in_exports:  # made as RUN/exports, however --out spells the folder
        make_exports_folder(run_dir / "exports" / out.name, out.name)
    _save_atomic(fig, out, force)
    return out


def _check_replaceable(out: Path, force: bool) -> None:
    """Refuse ``out`` before the (possibly slow) projection, as export does: anything but a
    regular file always, an existing file unless ``force``."""
    refuse_inside_saved(out, f"--out {out}", out.name)
    output_target(out, "move it away or pick another --out file path")
    if out.exists() and not force and not os.access(out.parent, os.W_OK):
        raise InputError(f"{out} already exists, in a folder this user may not write to; pass "
                         "--out in a writable folder")
    if out.exists() and not force:
        raise InputError(f"{out} already exists; pass --force to replace it or choose "
                         "another --out")


def _unk_of(run_dir: Path) -> str | None:
    import json

    try:
        cfg = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        unk = cfg.get("data", {}).get("unk")
    except (OSError, ValueError, AttributeError):
        return None
    return unk if isinstance(unk, str) else None


def _save_atomic(fig: object, out: Path, force: bool) -> None:
    # through fsutil's atomic_open: readers never see half a plot, and the file gets the umask's
    # mode like any other export (mkstemp alone leaves it private, 0600)
    import re
    import warnings

    try:
        # without force, a plot another command made there meanwhile is not replaced
        with atomic_open(out, sweep=True, replace=force) as fh, \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig.savefig(fh, format=out.suffix.lower().lstrip("."))  # type: ignore[attr-defined]
    except OSError as exc:
        raise write_error(out, exc, "--out") from None
    # matplotlib warns once per missing glyph, with a line of source each: said once here
    missing = sorted({chr(int(m.group(1))) for w in caught
                      if (m := re.search(r"Glyph (\d+) .*missing from", str(w.message)))})
    for w in caught:  # the others, through the caller's filters as if never caught
        if not re.search(r"Glyph \d+ .*missing from", str(w.message)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        from embedlab.errors import warn

        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3
                                          else "")
        warn(f"{len(missing)} character(s) of the words or the title are not in matplotlib's "
             f"font ({shown}): "
             f"they are drawn as boxes in {out}; a font that has them (matplotlibrc's "
             "font.family) draws them")
