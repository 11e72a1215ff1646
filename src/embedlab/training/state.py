"""What a run carries from one step to the next, in the form a checkpoint stores it.

Everything the future of a run depends on is either a pure function of the config and the data
position (batches, noise words, learning rate: see :mod:`embedlab.data.pairs`) or part of a
checkpoint: the parameters (the engine's ``state_dict``) and :class:`TrainState` — global step,
data cursor, words seen, the open logging window's float64 sums, the metrics. Resuming from any
checkpoint therefore replays the same steps with the same bits as an uninterrupted run, on the
same machine and thread count.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embedlab.data.pairs import Cursor

if TYPE_CHECKING:
    from embedlab.config import TrainConfig
    from embedlab.data.vocab import Vocab
    from embedlab.vectors import Vectors

#: the shape of the state :meth:`TrainState.state_dict` gives: a re-signed state.json of another
#: shape is one line naming the damaged checkpoint, not a KeyError deep in a resume. Keys may be
#: missing (state.json of earlier versions): :meth:`TrainState.load_state_dict` has defaults.
TRAIN_STATE = {"cursor": {"epoch": int, "chunk": int, "batch": int}, "words_seen": int,
               "epoch": int, "train_seconds": float, "last_loss": (float, None),
               "window": ({"loss": float, "pairs": int, "words": int}, None), "finished": bool,
               "window_seconds": float, "wall_seconds": float, "corpus": (str, None),
               "vocabulary": (str, None), "settings": (str, None)}


def vocabulary_sha256(words: Sequence[str]) -> str:
    """The SHA-256 of the words in row order (UTF-8, one per line): a checkpoint records it, so
    that vectors are never read under a vocabulary.tsv reordered or replaced beside them."""
    import hashlib

    return hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()


class LogWindow:
    """The open logging window (the steps since the last logged loss): float64 sums, so the
    reported loss is exact.

    ``seconds``: training time the window had already run in an earlier process (a resumed
    window's words were trained then too); :meth:`start` counts it in, so the first words/s
    after a resume is not the earlier words over only the new seconds. Until then,
    :meth:`elapsed` is those seconds.
    """

    def __init__(self, sums: Mapping[str, Any] | None = None, seconds: float = 0.0) -> None:
        sums = sums or {}
        self.loss = float(sums.get("loss", 0.0))
        self.pairs = int(sums.get("pairs", 0))
        self.words = int(sums.get("words", 0))
        self.seconds = seconds
        self.started: float | None = None

    @classmethod
    def opening_now(cls) -> LogWindow:
        """A new, empty window whose time runs from now."""
        window = cls()
        window.start()
        return window

    def start(self) -> None:
        """Training begins (again) now: the time before it (building the model, opening the
        writers, rewriting a resumed run's event files) is not the window's."""
        self.started = time.perf_counter() - self.seconds

    def pause(self, seconds: float) -> None:
        """Leave ``seconds`` (a checkpoint's save) out of the window's training time."""
        if self.started is not None:
            self.started += seconds

    def elapsed(self) -> float:
        if self.started is None:
            return self.seconds
        return time.perf_counter() - self.started

    def add_steps(self, losses: np.ndarray, pairs: int, words: int) -> None:
        """Count consecutive steps: their summed losses (float64, added in step order, so the
        sum has the bits of adding them one by one), positive examples and corpus words."""
        if len(losses):
            self.loss = float(np.add.accumulate(np.concatenate(([self.loss], losses)))[-1])
        self.pairs += pairs
        self.words += words

    def mean_loss(self) -> float:
        """The loss per positive example over the window."""
        return self.loss / max(1, self.pairs)

    def sums(self) -> dict[str, Any]:
        return {"loss": self.loss, "pairs": self.pairs, "words": self.words}


@dataclass
class TrainState:
    """The training loop's position and bookkeeping; :meth:`state_dict` is a checkpoint's
    ``state.json``.

    ``wall_seconds``: wall-clock seconds of the invocations that trained the run up to
    ``step`` (what an invocation did after the checkpoint a later one resumed from is lost, like
    its training). ``finished``: the run reached the end of its data.
    """

    step: int = 0
    cursor: Cursor = field(default_factory=Cursor)
    words_seen: int = 0
    train_seconds: float = 0.0
    wall_seconds: float = 0.0
    last_loss: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    window: LogWindow = field(default_factory=LogWindow)
    finished: bool = False
    #: the fingerprint of the prepared corpus trained on (training.handshake.corpus_fingerprint;
    #: None in checkpoints of earlier versions)
    corpus: str | None = None
    #: :func:`vocabulary_sha256` of the words the rows belong to (None in checkpoints of
    #: earlier versions): what a reader of the checkpoint checks RUN/vocab.tsv against
    vocabulary: str | None = None
    #: :func:`embedlab.config.recorded_settings` of the config the step was trained with (None
    #: in checkpoints of earlier versions): a resume refuses a config.json edited since
    settings: str | None = None

    def advance_to(self, words_done: int, cursor: Cursor, n_tokens: int, steps: int = 1) -> int:
        """Count ``steps`` steps of one epoch as trained, given where the last left the epoch
        (``words_done``) and the data (``cursor``); return the corpus words they advanced the
        position by.

        Positions count in-vocabulary corpus words across epochs (``n_tokens`` per epoch),
        subsampled ones included, as word2vec's ``word_count_actual``.
        """
        done = self.cursor.epoch * n_tokens + int(words_done)
        advanced = done - self.words_seen
        self.step += steps
        self.words_seen = done
        self.cursor = cursor
        return advanced

    def state_dict(self) -> dict[str, Any]:
        """Plain JSON values under the keys of :data:`TRAIN_STATE`, plus ``step`` and
        ``metrics`` (which the checkpoint manager records too)."""
        return {"cursor": self.cursor.to_dict(), "words_seen": self.words_seen,
                "epoch": self.cursor.epoch, "window": self.window.sums(),
                "last_loss": self.last_loss, "train_seconds": self.train_seconds,
                "finished": self.finished, "window_seconds": self.window.elapsed(),
                "wall_seconds": self.wall_seconds, "step": self.step,
                "metrics": dict(self.metrics), "corpus": self.corpus,
                "vocabulary": self.vocabulary, "settings": self.settings}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take the values of a checkpoint's state (its shape checked against
        :data:`TRAIN_STATE`); keys older checkpoints lack keep a new run's values."""
        self.step = int(state.get("step", 0))
        self.cursor = Cursor.from_dict(state["cursor"]) if "cursor" in state else Cursor()
        self.words_seen = int(state.get("words_seen", 0))
        self.train_seconds = float(state.get("train_seconds", 0.0))
        self.wall_seconds = float(state.get("wall_seconds", 0.0))
        self.last_loss = state.get("last_loss")
        self.metrics = dict(state.get("metrics", {}))
        self.window = LogWindow(state.get("window"), float(state.get("window_seconds", 0.0)))
        self.finished = bool(state.get("finished", False))
        self.corpus = state.get("corpus")
        self.vocabulary = state.get("vocabulary")
        self.settings = state.get("settings")

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> TrainState:
        out = cls()
        out.load_state_dict(state)
        return out


@dataclass(frozen=True, repr=False)
class TrainResult:
    """Where a call to train left the run: its folder, position, last logged loss, the input
    vectors with their vocabulary, and the run's config. Frozen, as the run it describes is.

    ``w_in`` is the engine's array, not a copy, and read-only: :attr:`vectors` answers queries
    from the same memory and keeps each row's norm, which a change in place would leave stale.
    ``w_in.copy()`` gives an array to change. A pickled and unpickled result is the same: its
    ``w_in`` read-only, its :attr:`vectors` made again from it."""

    run_dir: Path
    step: int
    words_seen: int
    loss: float | None
    train_seconds: float
    finished: bool
    vocab: Vocab
    w_in: np.ndarray
    config: TrainConfig

    def __post_init__(self) -> None:
        if self.w_in.flags.writeable:
            view = self.w_in.view()
            view.flags.writeable = False
            object.__setattr__(self, "w_in", view)  # frozen: set once, here

    def __getstate__(self) -> dict[str, Any]:
        # the fields only: `vectors`, made once from w_in, is made again from the copy
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)  # unpickled arrays are writable: read-only again
        self.__post_init__()

    def __repr__(self) -> str:  # not the dataclass's: it would print every word and vector
        state = "finished" if self.finished else "stopped"
        loss = "n/a" if self.loss is None else f"{self.loss:.4f}"
        return (f"TrainResult({state} at step {self.step:,}, {self.words_seen:,} words, loss "
                f"{loss}; {len(self.vocab):,} words × {self.w_in.shape[1]} dims in "
                f"{self.run_dir})")

    @functools.cached_property
    def vectors(self) -> Vectors:
        """The trained vectors as a query object (:class:`embedlab.vectors.Vectors`, a
        read-only view of :attr:`w_in`), made once."""
        from embedlab.vectors import Vectors

        return Vectors(self.vocab.words, self.w_in, self.vocab.counts)

    @property
    def wv(self) -> Vectors:
        """:attr:`vectors` by gensim's name (``model.wv.most_similar('king')``)."""
        return self.vectors
