"""Warm start (``--init-from``): a new run begins with another run's vectors for shared words."""

from __future__ import annotations

import os
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from embedlab.checkpoint import lists_them, load_checkpoint, read_picked
from embedlab.data.vocab import Vocab
from embedlab.errors import InputError, python_caller, spell, warn

if TYPE_CHECKING:
    from embedlab.engines.base import Engine

VOCAB_FILE = "vocab.tsv"

#: inside :func:`embedlab.training.restart.old_run_moved_aside`: the old run's ``init_from``
#: setting and the checkpoint its warm start copied from
EARLIER_WARM_START: ContextVar[tuple[str, Path] | None] = ContextVar(
    "embedlab_earlier_warm_start", default=None)


def recorded_warm_start(run: Path) -> tuple[str, Path] | None:
    """A run's ``init_from`` setting (its config.json's) and the checkpoint its warm start
    copied from, as its env.json's ``command`` names it (made absolute from the folder the run
    was started in); None without one."""
    import json
    import shlex

    try:
        setting = json.loads((run / "config.json").read_text(encoding="utf-8"))["init_from"]
        env = json.loads((run / "env.json").read_text(encoding="utf-8"))
        args = shlex.split(env["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(setting, str) or "--init-from" not in args[:-1]:
        return None
    path = Path(args[args.index("--init-from") + 1])
    cwd = env.get("cwd")
    return setting, path if path.is_absolute() or not isinstance(cwd, str) else Path(cwd) / path


def warn_if_another_warm_start(setting: str, used: Path) -> None:
    """Say so when a ``--restart`` with the old run's ``init_from`` setting (``setting``: this
    one's) copies from another checkpoint than the old run's did: a source run that trained on
    since, or the same words naming another folder from here. The settings are the same; the
    start is not. Another ``--init-from`` given to the restart is the user's choice: no word."""
    recorded = EARLIER_WARM_START.get()
    if recorded is None or recorded[0] != setting:
        return
    earlier = recorded[1]
    if os.path.realpath(earlier) != os.path.realpath(used):
        warn(f"{spell('--restart', True)}: this warm start copies from {used}, the old run's "
             f"copied from {earlier} (a run's latest checkpoint changes as it trains on); pass "
             f"{spell('--init-from', str(earlier))} to start from the same vectors")


def warm_start(engine: Engine, vocab: Vocab, source: str, *,
               used: list[Path] | None = None) -> str:
    """Copy into ``engine`` the rows of the words ``vocab`` shares with the run or checkpoint
    ``source`` (input vectors, and output vectors and biases where this run has them), or with
    the vectors file ``source`` (input vectors only: see :func:`_from_vectors_file`). Other words
    keep their fresh start. Returns the line that says what was copied; ``used`` gets the
    checkpoint folder the rows came from (a run's latest, which changes as it trains on)."""
    from embedlab.vectors import check_recorded_words, check_vocab_fits, recorded_name

    if not Path(source).exists():  # find_checkpoint's words would not name the option
        raise InputError(f"{spell('--init-from', source)}: {source} does not exist; pass a run "
                         "folder, a checkpoint folder or a vectors file to copy vectors from")
    if not Path(source).is_dir():
        return _from_vectors_file(engine, vocab, source, used)
    # a source in training deletes its older checkpoints: the newest is found again
    ckpt, (tensors, state) = read_picked(source, load_checkpoint)
    if used is not None:
        used.append(ckpt)
    # a subset written with --map NEW=input_embeddings: the tensor its record names as first
    # saved under each name, else the one stored under it, as every reader of vectors takes it
    stored = {name: recorded_name(state, name) for name in
              ("input_embeddings", "output_embeddings", "output_bias", "hs_nodes")}
    tensors = {name: tensors[held] for name, held in stored.items() if held in tensors} | \
        {name: t for name, t in tensors.items() if name not in stored.values()}
    params = engine.state_dict()
    # Word rows: input vectors always, output vectors where this run has them. hs_nodes are
    # the inner nodes of a Huffman tree built from the source's own vocabulary: not word rows,
    # and not another vocabulary's, so they are never copied.
    wanted = ["input_embeddings", *(["output_embeddings"] if "output_embeddings" in params else [])]
    # a subset written by `ckpt --export-subset` may hold only some tensors, or renamed ones
    missing = [n for n in wanted if n not in tensors]
    if missing and "hs_nodes" in tensors:
        hs, nce = spell("--loss", "hs"), repr("nce") if python_caller() else "nce"
        raise InputError(f"{_init_from(source)}: checkpoint {ckpt} was trained with {hs}, whose "
                         f"output vectors are Huffman-tree nodes, not words; warm-start a {hs} "
                         f"run from it (its input vectors only: the nodes are never copied), or "
                         f"pass a run trained with {spell('--loss', 'neg')} or "
                         f"{nce}")
    if missing:
        raise InputError(f"{_init_from(source)}: checkpoint {ckpt} has no "
                         f"{' or '.join(missing)} (it holds {', '.join(sorted(tensors)) or 'none'})"
                         "; pass a run or a full checkpoint, or export a subset with both "
                         "(embedlab ckpt RUN --export-subset OUT --names "
                         "input_embeddings,output_embeddings)")
    vocab_file = _vocab_of(ckpt)
    src_vocab = Vocab.load_tsv(vocab_file)
    w_in = tensors["input_embeddings"]
    check_vocab_fits(vocab_file, len(src_vocab), ckpt, w_in)
    # the words the checkpoint recorded, as every reader checks: a vocab.tsv edited or replaced
    # beside the vectors would copy rows to other words
    check_recorded_words(vocab_file, src_vocab.words, ckpt, state.get("vocabulary"))
    copied = list(wanted)
    if "output_embeddings" in copied and \
            tuple(tensors["output_embeddings"].shape) != tuple(w_in.shape):
        raise InputError(f"{_init_from(source)}: checkpoint {ckpt} holds output embeddings of "
                         f"shape {tuple(tensors['output_embeddings'].shape)} but input "
                         f"embeddings of shape {tuple(w_in.shape)}; pass another checkpoint "
                         f"({lists_them(ckpt)})")
    dim = params["input_embeddings"].shape[1]
    if w_in.shape[1] != dim:
        raise InputError(f"{_init_from(source)} has dim {w_in.shape[1]}, this run {dim}; pass "
                         f"a matching {spell('--dim')}")
    if "output_bias" in params and "output_bias" in tensors:
        copied.append("output_bias")
    index = src_vocab.index
    pairs = [(i, index[w]) for i, w in enumerate(vocab.words) if w in index]
    if pairs:
        dst = np.array([p[0] for p in pairs], dtype=np.int64)
        src = np.array([p[1] for p in pairs], dtype=np.int64)
        for name in copied:
            params[name][dst] = tensors[name][src]
        engine.load_state_dict(params)
    what = "input and output embeddings" if "output_embeddings" in copied else \
        "input embeddings"
    return (f"embedlab: warm start from {ckpt}: copied {len(pairs)} of {len(vocab)} words' rows "
            f"({what}); {len(vocab) - len(pairs)} new words initialised as usual")


def _from_vectors_file(engine: Engine, vocab: Vocab, source: str,
                       used: list[Path] | None) -> str:
    """Input vectors from a word2vec text/binary file (plain or compressed) or a ``.npy``
    export, as gensim's ``intersect_word2vec_format`` takes them: such a file has no output
    vectors, so those keep their fresh start (zeros, as word2vec.c's)."""
    from embedlab.vectors import load

    vectors = load(source)
    if used is not None:
        used.append(Path(source))
    params = engine.state_dict()
    dim = params["input_embeddings"].shape[1]
    if vectors.dim != dim:
        raise InputError(f"{_init_from(source)} holds vectors of dim {vectors.dim}, this run "
                         f"{dim}; pass {spell('--dim', vectors.dim)}")
    index = vectors.key_to_index
    pairs = [(i, index[w]) for i, w in enumerate(vocab.words) if w in index]
    if pairs:
        dst = np.array([p[0] for p in pairs], dtype=np.int64)
        src = np.array([p[1] for p in pairs], dtype=np.int64)
        params["input_embeddings"][dst] = vectors.matrix[src]
        engine.load_state_dict(params)
    return (f"embedlab: warm start from {source}: copied {len(pairs)} of {len(vocab)} words' "
            f"input vectors (a vectors file holds no output vectors); "
            f"{len(vocab) - len(pairs)} new words initialised as usual")


def _vocab_of(ckpt: Path) -> Path:
    for parent in (ckpt, *ckpt.parents[:3]):
        if (parent / VOCAB_FILE).is_file():
            return parent / VOCAB_FILE
    raise InputError(f"no {VOCAB_FILE} found next to {ckpt}; pass a run folder to "
                     f"{spell('--init-from')}")


def _init_from(source: str) -> str:
    """``--init-from SOURCE`` as the caller spells it: ``init_from='runs/a'`` in Python."""
    return spell("--init-from", source)
