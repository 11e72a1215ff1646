"""Warm start (``--init-from``): a new run begins with another run's vectors for shared words."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from embedlab.checkpoint import find_checkpoint, load_checkpoint
from embedlab.data.vocab import Vocab
from embedlab.errors import InputError

if TYPE_CHECKING:
    from embedlab.engines.base import Engine

VOCAB_FILE = "vocab.tsv"


def warm_start(engine: Engine, vocab: Vocab, source: str) -> str:
    """Copy into ``engine`` the rows of the words ``vocab`` shares with the run or checkpoint
    ``source`` (input and output vectors; output biases where both have them). Other words
    keep their fresh start. Returns the line that says what was copied."""
    from embedlab.vectors import check_vocab_fits

    ckpt = find_checkpoint(source)
    tensors, _ = load_checkpoint(ckpt)
    # a subset written by `ckpt --export-subset` may hold only some tensors, or renamed ones
    missing = [n for n in ("input_embeddings", "output_embeddings") if n not in tensors]
    if missing:
        raise InputError(f"--init-from {source}: checkpoint {ckpt} has no "
                         f"{' or '.join(missing)} (it holds {', '.join(sorted(tensors)) or 'none'})"
                         "; pass a run or a full checkpoint, or export a subset with both "
                         "(embedlab ckpt RUN --export-subset OUT --names "
                         "input_embeddings,output_embeddings)")
    vocab_file = _vocab_of(ckpt)
    src_vocab = Vocab.load_tsv(vocab_file)
    w_in = tensors["input_embeddings"]
    check_vocab_fits(vocab_file, len(src_vocab), ckpt, w_in)
    if tuple(tensors["output_embeddings"].shape) != tuple(w_in.shape):
        raise InputError(f"--init-from {source}: checkpoint {ckpt} holds output embeddings of "
                         f"shape {tuple(tensors['output_embeddings'].shape)} but input "
                         f"embeddings of shape {tuple(w_in.shape)}; pass another checkpoint "
                         "('embedlab ckpt RUN' lists them)")
    params = engine.state_dict()
    dim = params["input_embeddings"].shape[1]
    if w_in.shape[1] != dim:
        raise InputError(f"--init-from {source} has dim {w_in.shape[1]}, this run {dim}; pass a "
                         "matching --dim")
    index = src_vocab.index
    pairs = [(i, index[w]) for i, w in enumerate(vocab.words) if w in index]
    if pairs:
        dst = np.array([p[0] for p in pairs], dtype=np.int64)
        src = np.array([p[1] for p in pairs], dtype=np.int64)
        for name, array in params.items():
            if name in tensors:
                array[dst] = tensors[name][src]
        engine.load_state_dict(params)
    return (f"embedlab: warm start from {ckpt}: copied {len(pairs)} of {len(vocab)} words' rows "
            f"(input and output embeddings); {len(vocab) - len(pairs)} new words initialised "
            "as usual")


def _vocab_of(ckpt: Path) -> Path:
    for parent in (ckpt, *ckpt.parents[:3]):
        if (parent / VOCAB_FILE).is_file():
            return parent / VOCAB_FILE
    raise InputError(f"no {VOCAB_FILE} found next to {ckpt}; pass a run folder to --init-from")
