"""Word vectors: the object behind ``embedlab.load`` and every query command.

>>> import embedlab
>>> vec = embedlab.load("runs/demo-sg")            # run folder (latest checkpoint), checkpoint
>>> vec.most_similar("king", k=5)                  # folder, word2vec text/binary or .npy file
>>> vec.analogy("man", "king", "woman")            # man is to king as woman is to ?
>>> vec.evaluate_analogies("questions-words.txt").accuracy

Invariants:

* ``matrix`` is a read-only float32 array of shape ``(len(words), dim)``; row ``i`` belongs to
  ``words[i]``. Vocabulary order is frequency order for runs (id = row, UNK first when the run
  has one); for word2vec files it is file order (assumed to be frequency order, as gensim does).
  ``restrict_vocab`` options therefore mean "the N most frequent words".
* ``words`` are unique. ``counts`` (int64, one per word) is known only for run folders and npy
  exports that carry them.
* Nothing here modifies the matrix, and nothing draws random numbers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from embedlab.errors import InputError
from embedlab.eval.analogy import AnalogyResult, QuestionSet, evaluate_analogies, read_questions
from embedlab.eval.neighbors import Metric, nearest, suggest
from embedlab.eval.scoring import Method, analogy_scores, row_norms, top_k, unit_rows
from embedlab.eval.similarity import (
    DEFAULT_RESTRICT,
    PairSet,
    SimilarityResult,
    evaluate_similarity,
    read_pairs,
)

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, eq=False)
class Vectors:
    """Words, their vectors (V×D float32, read-only) and, when known, their corpus counts."""

    words: tuple[str, ...]
    matrix: np.ndarray
    counts: np.ndarray | None = None
    source: str = ""
    _index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        words = tuple(self.words)
        matrix = np.array(self.matrix, dtype=np.float32, copy=None, order="C")
        if matrix.ndim != 2 or matrix.shape[0] != len(words):
            raise ValueError(f"matrix shape {matrix.shape} does not match {len(words)} words")
        index = {w: i for i, w in enumerate(words)}
        if len(index) != len(words):
            raise ValueError("words must be unique")
        if self.counts is not None and len(self.counts) != len(words):
            raise ValueError(f"{len(self.counts)} counts for {len(words)} words")
        if matrix.flags.writeable:
            matrix = matrix.view()  # a read-only view; the caller's array stays writable
            matrix.flags.writeable = False
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "matrix", matrix)
        object.__setattr__(self, "_index", index)

    # ---- basics ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def __repr__(self) -> str:
        return f"Vectors({len(self)} words × {self.dim} dims from {self.source or '<memory>'})"

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @cached_property
    def norms(self) -> np.ndarray:
        """Row norms (float32, V), computed once."""
        return row_norms(self.matrix)

    def index(self, word: str) -> int:
        """Row of ``word``; unknown words raise :class:`InputError` with suggestions."""
        i = self._index.get(word)
        if i is None:
            raise InputError(self._unknown_message(word))
        return i

    def vector(self, word: str) -> np.ndarray:
        """The (read-only) vector of ``word``."""
        return self.matrix[self.index(word)]

    def _unknown_message(self, word: str) -> str:
        close = suggest(word, self.words)
        hint = (f"did you mean {', '.join(close)}?" if close
                else "check the spelling or the case; words are matched exactly")
        return f"{word!r} is not in the vocabulary ({len(self)} words); {hint}"

    # ---- queries ---------------------------------------------------------------------------
    def most_similar(self, word: str | Sequence[str], k: int = 10, *,
                     metric: Metric = "cosine") -> list[tuple[str, float]]:
        """The ``k`` nearest words to ``word`` (or to the mean unit vector of several words).

        Scores are cosine similarities (``metric="cosine"``, higher = closer) or Euclidean
        distances on the raw vectors (``metric="euclidean"``, lower = closer). The query
        words are excluded.
        """
        _check_k(k)
        query_words = [word] if isinstance(word, str) else list(word)
        if not query_words:
            raise InputError("no query word given; pass at least one word")
        ids = [self.index(w) for w in query_words]
        if len(ids) == 1 or metric == "euclidean":
            query = self.matrix[ids].mean(axis=0)
        else:
            query = unit_rows(self.matrix, self.norms, np.asarray(ids)).mean(axis=0)
        found = nearest(self.matrix, self.norms, query, k, metric=metric, exclude=ids)
        return [(self.words[i], s) for i, s in found]

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words, in [-1, 1] (0 if either vector is zero)."""
        va, vb = self.vector(a).astype(np.float64), self.vector(b).astype(np.float64)
        den = float(np.linalg.norm(va) * np.linalg.norm(vb))
        return float(va @ vb) / den if den > 0 else 0.0

    def analogy(self, a: str, b: str, c: str, k: int = 10, *,
                method: Method = "3cosadd") -> list[tuple[str, float]]:
        """"``a`` is to ``b`` as ``c`` is to ?": the ``k`` best answers, best first.

        3CosAdd ranks by cos(x, b - a + c) on unit vectors (scores are cosines); 3CosMul by
        Levy & Goldberg's multiplicative objective. ``a``, ``b``, ``c`` are never answers.
        """
        _check_k(k)
        _check_method(method)
        ids = np.array([[self.index(a)], [self.index(b)], [self.index(c)]], dtype=np.int64)
        scores = analogy_scores(self.matrix, self.norms, ids[0], ids[1], ids[2], len(self),
                                method)[0]
        scores[ids[:, 0].tolist()] = float("-inf")
        k = min(k, len(self) - len(set(ids[:, 0].tolist())))
        if k <= 0:
            return []
        return [(self.words[i], float(scores[i])) for i in top_k(scores, k).tolist()]

    # ---- evaluation ------------------------------------------------------------------------
    def evaluate_analogies(self, questions: PathLike | QuestionSet, restrict_vocab: int = 30_000,
                           method: Method = "3cosadd") -> AnalogyResult:
        """Accuracy on a questions-words file, per section and in total (gensim's semantics; see
        :mod:`embedlab.eval.analogy`). Only the ``restrict_vocab`` most frequent words count."""
        _check_method(method)
        qs = questions if isinstance(questions, QuestionSet) else read_questions(questions)
        return evaluate_analogies(self.words, self.matrix, self.norms, qs,
                                  restrict_vocab=restrict_vocab, method=method)

    def evaluate_similarity(self, pairs: PathLike | PairSet,
                            restrict_vocab: int = DEFAULT_RESTRICT) -> SimilarityResult:
        """Spearman/Pearson correlation with human scores (gensim's ``evaluate_word_pairs``;
        see :mod:`embedlab.eval.similarity`)."""
        ps = pairs if isinstance(pairs, PairSet) else read_pairs(pairs)
        return evaluate_similarity(self.words, self.matrix, self.norms, ps,
                                   restrict_vocab=restrict_vocab)

    # ---- export ----------------------------------------------------------------------------
    def to_word2vec(self, path: PathLike, binary: bool = False, *, force: bool = False) -> Path:
        """Write the word2vec text (or binary) format atomically; refuses to overwrite unless
        ``force``. Text values are written with 9 significant digits, so they round-trip exactly."""
        from embedlab.export.word2vec import write_word2vec

        return write_word2vec(Path(path), self.words, self.matrix, binary=binary, force=force)

    def to_npy(self, path: PathLike, *, force: bool = False) -> tuple[Path, Path]:
        """Write ``NAME.npy`` and ``NAME.vocab.tsv`` (with counts when known)."""
        from embedlab.export.npy import write_npy

        return write_npy(Path(path), self.words, self.matrix, self.counts, force=force)


def _check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise InputError(f"-k must be a positive integer, got {k!r}; e.g. -k 10")


def _check_method(method: str) -> None:
    if method not in ("3cosadd", "3cosmul"):
        raise InputError(f"unknown analogy method {method!r}; use 3cosadd or 3cosmul")


# ---- loading --------------------------------------------------------------------------------

def load(path: PathLike, *, step: int | None = None, best: bool = False) -> Vectors:
    """Load vectors from a run folder, a checkpoint folder, a word2vec text/binary file or a
    ``.npy`` export (with its ``.vocab.tsv``).

    For a run folder, ``step`` picks a checkpoint and ``best`` the best one (default: the newest
    verified checkpoint). The input embeddings are used. Never unpickles.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p} does not exist; pass a run folder, a checkpoint folder or a "
                         "word2vec/.npy vectors file")
    if p.is_dir():
        return _load_checkpoint(p, step=step, best=best)
    if step is not None or best:
        raise InputError(f"--step/--best choose a checkpoint of a run folder, but {p} is a file; "
                         "drop them or pass the run folder")
    if p.suffix == ".npy":
        from embedlab.export.npy import read_npy

        words, matrix, counts = read_npy(p)
        return Vectors(tuple(words), matrix, counts, str(p))
    from embedlab.export.word2vec import read_word2vec

    words, matrix = read_word2vec(p)
    return Vectors(tuple(words), matrix, None, str(p))


def _load_checkpoint(path: Path, *, step: int | None, best: bool) -> Vectors:
    from embedlab.checkpoint import find_checkpoint
    from embedlab.data.vocab import Vocab

    ckpt = find_checkpoint(path, step=step, best=best)
    run_dir = ckpt.parent.parent  # RUN/checkpoints/ckpt-N
    vocab_file = run_dir / "vocab.tsv"
    if not vocab_file.is_file():
        raise InputError(f"no vocabulary {vocab_file} for checkpoint {ckpt}; the run folder is "
                         "incomplete - restore vocab.tsv or export vectors from another run")
    vocab = Vocab.load_tsv(vocab_file)
    matrix, _state = load_input_embeddings(ckpt)
    check_vocab_fits(vocab_file, len(vocab), ckpt, matrix)
    return Vectors(vocab.words, matrix, vocab.counts, str(ckpt))


def check_vocab_fits(vocab_file: Path, words: int, ckpt: Path, matrix: np.ndarray) -> None:
    """Raise :class:`InputError` unless ``matrix``, the input embeddings of checkpoint ``ckpt``,
    has one row per word of the run's ``vocab_file`` (which lists ``words`` words).

    A mismatch means vocab.tsv was replaced or edited after training; the message names a
    vocabulary file to copy back when one with the right number of words is at hand.
    """
    if matrix.ndim != 2:
        raise InputError(f"checkpoint {ckpt} holds input embeddings of shape "
                         f"{tuple(matrix.shape)}, not a words × dims matrix; use another "
                         "checkpoint ('embedlab ckpt RUN' lists them)")
    rows = int(matrix.shape[0])
    if rows == words:
        return
    fits = [p for p in _vocab_sources(vocab_file.parent, ckpt) if _words_in(p) == rows]
    fix = (f"copy {fits[0]}, which lists {rows} words, to {vocab_file}" if fits else
           f"restore {vocab_file} (the {rows}-word vocabulary the checkpoint was trained with) "
           "from a backup or from the prepared corpus the run was trained on")
    raise InputError(f"{vocab_file} lists {words} words but checkpoint {ckpt} has {rows} rows "
                     f"of input embeddings; {fix}")


def _vocab_sources(run_dir: Path, ckpt: Path) -> list[Path]:
    """Where a copy of the vocabulary a checkpoint was trained with may be: the prepared corpus
    the trainer read it from (RUN/prepared or the run's --corpus), and for a subset written by
    ``embedlab ckpt --export-subset`` the run it was exported from."""
    from embedlab.checkpoint import STATE_FILE

    found = [run_dir / "prepared" / "vocab.tsv"]
    data = _json_object(run_dir / "config.json").get("data")
    if isinstance(data, dict) and isinstance(data.get("corpus"), str):
        found.append(Path(data["corpus"]) / "vocab.tsv")
    source = _json_object(ckpt / STATE_FILE).get("exported_from")
    if isinstance(source, str):
        found.append(Path(source).parent.parent / "vocab.tsv")  # SRC/checkpoints/ckpt-N
    return found


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _words_in(path: Path) -> int | None:
    from embedlab.data.vocab import Vocab

    try:
        return len(Vocab.load_tsv(path)) if path.is_file() else None
    except (InputError, OSError):  # unreadable: not a file to suggest
        return None


INPUT_EMBEDDINGS = "input_embeddings"


def load_input_embeddings(ckpt: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """``(input embeddings as float32 V×D, state)`` of one (verified) checkpoint folder.

    A subset written by ``embedlab ckpt --export-subset --map NEW=input_embeddings`` stores them
    under NEW and records ``{NEW: "input_embeddings"}`` as ``original_names`` in its state; that
    record, not the tensor names, says which tensor to use.
    """
    from embedlab.checkpoint import load_checkpoint

    name = _stored_name(ckpt, INPUT_EMBEDDINGS)
    tensors, state = load_checkpoint(ckpt, names=[name])
    return np.asarray(tensors[name], dtype=np.float32), state


def _stored_name(ckpt: Path, original: str) -> str:
    from embedlab.checkpoint import STATE_FILE

    try:
        state = json.loads((ckpt / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return original  # load_checkpoint reports the damage, naming the fix
    names = state.get("original_names") if isinstance(state, dict) else None
    if isinstance(names, dict):
        for new, old in names.items():
            if old == original and isinstance(new, str):
                return new
    return original
