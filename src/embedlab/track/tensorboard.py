"""What a run shows in TensorBoard: scalars, and at each checkpoint histograms of the
embeddings and their row norms, the probe words' neighbours, a PCA image and the projector;
at the end, the final metrics and the hparams record.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np

from embedlab.config import TrainConfig, flatten, without_unused
from embedlab.eval.neighbors import nearest_to_rows
from embedlab.eval.scoring import row_norms
from embedlab.track.events import EventWriter
from embedlab.track.jsonl import final_metric_tag
from embedlab.track.projector import Projector
from embedlab.track.protos import (
    histogram_summary,
    hparam_values,
    hparams_summaries,
    png_summary,
    scalar_summary,
    text_summary,
)
from embedlab.track.runs import changes_result

PCA_WORDS = 200  # words in the per-checkpoint PCA: enough to see structure, cheap to draw
# words labelled in each PCA image: about as many labels as a card-sized image holds legibly,
# so the 200 words take 4 images, each showing the others as faint dots
PCA_CARD_WORDS = 50
PCA_TAG = "embeddings/pca"
NEIGHBOURS = 8  # neighbours shown per probe word
DEFAULT_PROBES = 8  # probe words chosen when --probe is not given
PATH_KEYS = ("data.corpus", "init_from")  # hyperparameters that name a file or folder


class VocabLike(Protocol):
    """The part of :class:`embedlab.data.vocab.Vocab` the tracker relies on."""

    @property
    def words(self) -> tuple[str, ...]: ...

    @property
    def counts(self) -> np.ndarray: ...

    def __len__(self) -> int: ...


def default_probes(words: Sequence[str], unk: str | None, n: int = DEFAULT_PROBES) -> list[str]:
    """Frequent words at geometrically spaced ranks 10, 20, 40, ... (falling back to the top).

    The very top of a frequency list is function words ("the", "of") whose neighbours say little;
    spacing the ranks shows frequent content words as well.
    """
    # the ranks reach 10·2^(n−1) at most: no pass over a vocabulary of millions
    candidates = list(islice((w for w in words if w != unk), 10 * 2 ** n + n))
    picks: list[str] = []
    rank = 10
    while len(picks) < n and rank < len(candidates):
        picks.append(candidates[rank])
        rank *= 2
    for w in candidates:  # small vocabularies: top up with the most frequent words
        if len(picks) >= n:
            break
        if w not in picks:
            picks.append(w)
    return picks


def word_ids(words: Sequence[str], wanted: Sequence[str]) -> list[int]:
    """The ids of the words of ``wanted`` found in ``words``, in ``wanted``'s order: a scan
    per word (in C), not a table of the whole vocabulary (0.9 s at 2.3M words)."""
    ids = []
    for word in wanted:
        try:
            ids.append(words.index(word))
        except ValueError:
            continue
    return ids


def neighbours_markdown(words: Sequence[str], w: np.ndarray, probes: Sequence[str],
                        k: int = NEIGHBOURS, *, ids: Sequence[int] | None = None,
                        norms: np.ndarray | None = None) -> str:
    """A markdown table: one row per probe word, its neighbours with cosine similarity.
    ``ids``: the probes' ids in ``words``, when known (else looked up); ``norms``: ``w``'s
    ``row_norms(w, low_memory=True)``, when computed already."""
    ids = word_ids(words, probes) if ids is None else list(ids)
    if not ids or w.shape[0] < 2:
        return "(no probe words in the vocabulary)"
    w = np.asarray(w, dtype=np.float32)  # no copy for the trainer's float32 matrices
    if norms is None:
        norms = row_norms(w, low_memory=True)
    neighbours = nearest_to_rows(w, norms, ids, k)
    lines = ["| word | nearest neighbours (cosine) |", "|---|---|"]
    for i, row in zip(ids, neighbours, strict=True):
        cells = ", ".join(f"{markdown_text(words[j])} ({s:.2f})" for j, s in row)
        lines.append(f"| **{markdown_text(words[i])}** | {cells} |")
    return "\n".join(lines)


#: what Markdown (and its tables' cells) would read as markup in a word
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|])")


def markdown_text(word: str) -> str:
    """``word`` as text in TensorBoard's Markdown: ``a|b`` stays one cell, ``**x**``, ``_u_``,
    ``[l](u)`` and ``<b>`` are shown as typed, not as bold, italics, a link or HTML."""
    escaped = word.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", escaped)


def pca_tag(start: int, stop: int) -> str:
    """The image tag of the PCA's words ``start + 1`` to ``stop`` (in frequency order).

    The most frequent words are under ``embeddings/pca``, the tag of the one PCA image of runs
    written before 2026-11-26, so a resumed older run's card goes on; the others are numbered
    to sort in order.
    """
    if start == 0:
        return PCA_TAG
    width = len(str(PCA_WORDS))
    return f"{PCA_TAG}_words_{start + 1:0{width}d}-{stop:0{width}d}"


def table_hparams(config: Mapping[str, Any], run_dir: Path | None = None
                  ) -> dict[str, bool | int | float | str]:
    """A run's values in TensorBoard's HParams table: its hyperparameters only.

    The flattened config keys that change the result (:func:`embedlab.track.runs.
    changes_result`, as ``embedlab runs`` compares runs): not the thread count, checkpoint,
    logging and evaluation settings that a resume may change, nor those its loss does not read
    (:func:`~embedlab.config.without_unused`). Paths are made absolute from the run's creation
    folder (with ``run_dir``: :func:`~embedlab.run.folder.paths_from_creation`) and written
    tail first (:func:`tail_first`).
    """
    from embedlab.run.folder import paths_from_creation

    flat = without_unused(flatten(dict(config)))
    if run_dir is not None:
        flat = paths_from_creation(flat, run_dir)
    values = {k: v for k, v in flat.items() if changes_result(k)}
    for key in PATH_KEYS:
        if isinstance(values.get(key), str):
            values[key] = tail_first(values[key])
    return hparam_values(values)


def tail_first(path: str) -> str:
    """``news/train.txt in /data/corpora`` for ``/data/corpora/news/train.txt``.

    The HParams table shows a value in a cell 10 em wide (15 characters or so), cut at its end:
    a path's first folders, often the same for every run, would be all it shows. Its last two
    parts come first, so the cell shows what tells corpora apart, and the value still names the
    whole path. A path of two parts or fewer is left as it is.
    """
    head = PurePosixPath(path).parent.parent
    if head in (PurePosixPath("."), PurePosixPath("/")):
        return path
    return f"{PurePosixPath(path).relative_to(head)} in {head}"


def one_blas_thread() -> AbstractContextManager[object]:
    """numpy's BLAS (OpenBLAS) on one thread while summaries are computed.

    They run between training steps, right after the native kernel's OpenMP threads. With
    OpenBLAS's own threads on the same cores, a PCA of a few milliseconds can take a large part
    of a second, waiting for cores that are still spinning; on one thread it takes its few
    milliseconds. The products here are small (PCA 200×100, probes 8×D·D×V): one thread loses
    nothing.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


class TensorBoardSink:
    """Scalars, histograms, text, images, projector and hparams in the run's own event stream."""

    def __init__(self, run_dir: Path, cfg: TrainConfig, vocab: VocabLike,
                 resume_step: int | None) -> None:
        self._run_dir = run_dir
        self._cfg = cfg
        self._words = tuple(vocab.words)
        self._counts = np.asarray(vocab.counts)
        self._unk: str | None = getattr(vocab, "unk", None)
        probes = list(cfg.track.probe_words) or default_probes(self._words, self._unk)
        self._probe_ids = word_ids(self._words, probes)
        purge = None if not resume_step else resume_step + 1
        # A fresh run (no checkpoint) keeps nothing of a process killed before its first
        # checkpoint either: its projector entries would otherwise be shown beside ours.
        self._projector = Projector(run_dir, resume_step or 0)
        self._w = EventWriter(run_dir, purge)

    def log_scalars(self, step: int, values: Mapping[str, float]) -> None:
        for tag, v in values.items():
            self._w.add_summary(step, scalar_summary(tag, v))

    def log_checkpoint(self, step: int, w_in: np.ndarray, w_out: np.ndarray, *,
                       projector: bool = False) -> None:
        with one_blas_thread():
            self._checkpoint_summaries(step, w_in, w_out, projector)
        self._w.flush()

    def _checkpoint_summaries(self, step: int, w_in: np.ndarray, w_out: np.ndarray,
                              projector: bool) -> None:
        threads = max(1, self._cfg.threads)
        norms = {}
        for name, w in (("input", w_in), ("output", w_out)):
            self._w.add_summary(step, histogram_summary(f"embeddings/{name}", w, threads))
            norms[name] = row_norms(w, low_memory=True)
            self._w.add_summary(step, histogram_summary(f"embeddings/{name}_norm",
                                                        norms[name], threads))
        if self._probe_ids:
            # the input norms of the histogram above: a second pass over a 1M × 300 matrix
            # would cost ~0.2 s
            text = neighbours_markdown(self._words, w_in, (), ids=self._probe_ids,
                                       norms=norms["input"] if w_in.dtype == np.float32
                                       else None)
            self._w.add_summary(step, text_summary("neighbours", text))
        self._log_pca(step, w_in)
        if projector or self._cfg.track.projector_each_checkpoint:
            self._log_projector(step, w_in)

    def log_final(self, step: int, w_in: np.ndarray, hparams: Mapping[str, Any],
                  metrics: Mapping[str, float]) -> None:
        self._log_projector(step, w_in)  # no BLAS: only formatting and files
        self.log_scalars(step, {final_metric_tag(k): v for k, v in metrics.items()})
        # The run's hparams summaries in our own file, not in a sub-folder (add_hparams' way, which
        # TensorBoard shows as a second run). Not the experiment summary either: TensorBoard
        # takes the first one it finds as the whole logdir's, so the other runs' metrics and
        # differing hyperparameters would be missing from the table; without one it builds
        # the table from every run's summaries, its metrics being the runs' scalars.
        # `embedlab tensorboard` writes one for the whole logdir (track/hparams_table.py).
        for summary in hparams_summaries(table_hparams(hparams, self._run_dir)):
            self._w.add_summary(step, summary)
        self._w.flush()

    def close(self) -> None:
        self._w.close()

    def _log_pca(self, step: int, w_in: np.ndarray) -> None:
        from embedlab.track.plots import plot_card, project_2d, top_word_ids

        ids = top_word_ids(self._words, self._unk, PCA_WORDS)
        if len(ids) < 3:
            return
        points = project_2d(w_in[ids], "pca")  # one projection: the images share their axes
        title = f"PCA of the {len(ids)} most frequent words, step {step}"
        for start in range(0, len(ids), PCA_CARD_WORDS):
            stop = min(start + PCA_CARD_WORDS, len(ids))
            fig = plot_card([self._words[i] for i in ids[start:stop]], points[start:stop],
                            points, title=title, caption=f"words {start + 1}–{stop}")
            # The PNG straight from matplotlib: torch's add_figure() turned the RGBA pixels
            # into float32 copies first.
            self._w.add_summary(step, png_summary(pca_tag(start, stop), fig))

    def _log_projector(self, step: int, w_in: np.ndarray) -> None:
        n = min(self._cfg.track.projector_words, w_in.shape[0])
        self._projector.add(step, self._words[:n], self._counts[:n], w_in[:n],
                            only=not self._cfg.track.projector_each_checkpoint)
