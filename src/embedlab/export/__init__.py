"""Exporting vectors: word2vec text/binary and npy (+ vocabulary), written atomically.

:func:`export_vectors` is what ``embedlab export`` calls; the format modules hold the details.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from embedlab.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from embedlab.vectors import Vectors

Format = Literal["word2vec", "word2vec-binary", "npy"]
FORMATS: tuple[Format, ...] = ("word2vec", "word2vec-binary", "npy")
SUFFIX: dict[Format, str] = {"word2vec": ".txt", "word2vec-binary": ".bin", "npy": ".npy"}


def export_vectors(vectors: Vectors, fmt: Format, out: Path, *, force: bool = False) -> list[Path]:
    """Write ``vectors`` in ``fmt`` to ``out``; returns the files written (npy writes two).

    Refuses to overwrite existing files unless ``force``; a failed export leaves existing
    files untouched.
    """
    if fmt == "word2vec":
        return [vectors.to_word2vec(out, binary=False, force=force)]
    if fmt == "word2vec-binary":
        return [vectors.to_word2vec(out, binary=True, force=force)]
    if fmt == "npy":
        return list(vectors.to_npy(out, force=force))
    raise InputError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "SUFFIX", "Format", "export_vectors"]
