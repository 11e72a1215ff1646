"""2-D pictures of embeddings: PCA or t-SNE of the most frequent words, with readable labels.

Pure functions (arrays in, a matplotlib ``Figure`` out) so the same labelling serves
``embedlab visualize`` (one large figure) and the TensorBoard image summaries (figures sized for
TensorBoard's image cards). Uses the non-interactive Agg canvas, never pyplot's global state, so
it is safe inside a training process and in tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any, Literal

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from embedlab.errors import InputError

Method = Literal["pca", "tsne"]


def top_word_ids(words: Sequence[str], unk: str | None, n: int) -> list[int]:
    """Ids of the ``n`` most frequent words (vocab order is by count), skipping the UNK token
    (the first n + 1 words at most are looked at)."""
    return list(islice((i for i, w in enumerate(words) if w != unk), n))


def project_2d(x: np.ndarray, method: Method, *, seed: int = 0) -> np.ndarray:
    """Project rows of ``x`` (N×D) to N×2: exact PCA (SVD) or scikit-learn's t-SNE.

    t-SNE's perplexity must be below N; it is lowered to ``(N - 1) / 3`` for small N.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 3:
        raise InputError(f"need at least 3 words to project, got {x.shape[0]}; "
                         "pass a larger --words or train a bigger vocabulary")
    if method == "pca":
        return _pca_2d(x)
    if method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = min(30.0, (x.shape[0] - 1) / 3)
        tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", metric="cosine",
                    random_state=seed)
        return np.asarray(tsne.fit_transform(x))
    raise InputError(f"unknown --method {method!r}; use pca or tsne")


def _pca_2d(x: np.ndarray) -> np.ndarray:
    # Exact PCA by SVD of the centred matrix; scikit-learn's import alone takes seconds. In the
    # training process the tracker calls this with numpy's BLAS on one thread: OpenBLAS's
    # threads would fight the native kernel's OpenMP threads for the cores
    # (tensorboard.one_blas_thread).
    centred = x - x.mean(axis=0)
    u, s, _vh = np.linalg.svd(centred, full_matrices=False)
    pts = u[:, :2] * s[:2]
    # fix each axis' sign (largest |coordinate| positive) so pictures do not flip between steps
    signs = np.sign(pts[np.abs(pts).argmax(axis=0), range(pts.shape[1])])
    pts = pts * np.where(signs == 0, 1, signs)
    if pts.shape[1] < 2:  # a 1-D embedding: put everything on a line
        pts = np.column_stack([pts, np.zeros(len(pts))])
    return np.asarray(pts)


def plot_words(words: Sequence[str], points: np.ndarray, *, title: str = "") -> Figure:
    """Scatter ``points`` (N×2) and label the words whose labels do not collide.

    Trained embeddings form tight clusters, where hundreds of overlapping labels read as a black
    smudge. Words are labelled in the given order (most frequent first) and a label that would
    overlap one already placed is left out (its point is still drawn), so every label shown is
    legible. The figure grows with N (8–16 in a side).
    """
    n = len(words)
    side = float(np.clip(8 + n / 50, 8, 16))
    fig, ax = _scatter(points, side, 100, title)
    placed = _label(ax, words, points, 8, 100)
    shown = f" ({len(placed)} of {n} labelled; overlapping labels left out)" \
        if len(placed) < n else ""
    ax.set_title(title + shown, parse_math=False)
    return fig


# TensorBoard shows an image in a card about 350 px wide (the Images dashboard, and the Time
# Series cards at their default width): a figure of 3.5 inches is laid out for those pixels at
# 100 dots an inch and rendered at twice that, sharp on high-density screens. Its 8-point labels
# are then 11 px on screen, as large as TensorBoard's own text. (TensorBoard scales any image to
# the card's width; a card that scrolls sideways does so for its step slider, whose knob at the
# last step reaches 16 px past the card's edge — seen in headless Chromium, whatever the image.)
CARD_INCHES = 3.5
CARD_DPI = 200
CARD_FONT = 8


def plot_card(words: Sequence[str], points: np.ndarray, context: np.ndarray, *, title: str,
              caption: str) -> Figure:
    """A TensorBoard card: ``context`` (M×2) as faint dots, ``points`` (N×2) labelled on top.

    The same labelling as :func:`plot_words`, on a figure sized for the card so that labels are
    legible without "Show actual image size". The axes span ``context`` (which holds the
    points), so cards of the same projection share their scale. Two title lines: ``title``,
    then ``caption`` with how many of the words are labelled.
    """
    fig, ax = _scatter(context, CARD_INCHES, CARD_DPI, title, color="0.8", font=CARD_FONT,
                       lines=2)
    ax.scatter(points[:, 0], points[:, 1], s=6, c="tab:blue", alpha=0.8)
    # half a character between labels on a line: at this size, estimated widths that touch
    # read as one word
    placed = _label(ax, words, points, CARD_FONT, CARD_DPI, space=0.5)
    ax.set_title(f"{title}\n{caption}: {len(placed)} of {len(words)} labelled",
                 fontsize=CARD_FONT, parse_math=False)
    return fig


def _scatter(points: np.ndarray, side: float, dpi: int, title: str, *, color: str = "tab:blue",
             font: float | None = None, lines: int = 1) -> tuple[Figure, Any]:
    """A square figure with ``points`` drawn and the layout done for a title of ``lines``."""
    fig = Figure(figsize=(side, side), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.scatter(points[:, 0], points[:, 1], s=6, c=color, alpha=0.6)
    ax.set_xticks([])
    ax.set_yticks([])
    # the final title has as many lines: the layout keeps its height
    size: dict[str, Any] = {} if font is None else {"fontsize": font}
    ax.set_title("\n".join([title or " "] * lines), parse_math=False, **size)
    fig.tight_layout()
    return fig, ax


def _label(ax: Any, words: Sequence[str], points: np.ndarray, font: int, dpi: int,
           space: float = 0.0) -> list[tuple[str, tuple[float, float]]]:
    """Annotate the words :func:`_fit_labels` places; return them."""
    placed = _fit_labels(ax, words, points, font, dpi, space)
    for w, (x, y) in placed:
        # words are text, never mathtext: "$x$" is drawn as typed, and "$\foo$" is no error
        label = ax.annotate(w, (x, y), xytext=(2, 2), textcoords="offset points", fontsize=font,
                            alpha=0.9, parse_math=False)
        # _fit_labels already keeps labels inside the axes; measuring each label's extent for
        # the layout would take most of the figure's time
        label.set_in_layout(False)
    return placed


def _fit_labels(ax: Any, words: Sequence[str], points: np.ndarray, font: int, dpi: int,
                space: float = 0.0) -> list[tuple[str, tuple[float, float]]]:
    """Labels to draw, most frequent first, none overlapping, none past the axes' right or top.

    Labels sit up and to the right of their point, ``space`` characters apart at least; when the
    ones placed would cross the axes' edge, the data limits are widened by the overshoot and the
    placement is redone (once more is enough: widening only moves points closer together).
    """
    char_w, line_h = font * 0.62 * dpi / 72, font * 1.3 * dpi / 72
    offset = 2 * dpi / 72  # the labels' xytext, 2 points
    placed: list[tuple[str, tuple[float, float]]] = []
    for _attempt in range(3):
        frame = ax.get_window_extent()
        pixels = ax.transData.transform(points[:, :2]) if len(points) else np.zeros((0, 2))
        boxes: list[tuple[float, float, float, float]] = []
        placed = []
        for (px, py), (x, y), w in zip(pixels, points, words, strict=True):
            box = (px + offset, py + offset, px + offset + char_w * (len(w) + space),
                   py + offset + line_h)
            if any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                   for b in boxes):
                continue
            boxes.append(box)
            placed.append((w, (float(x), float(y))))
        # widths are estimates (0.62 em a character); allow 15 % more at the edges
        right = max((b[0] + 1.15 * (b[2] - b[0]) for b in boxes), default=0.0) - frame.x1
        top = max((b[3] for b in boxes), default=0.0) - frame.y1
        if right <= 0 and top <= 0:
            break
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        if right > 0:  # pixels -> data units at the current scale, plus a small gap
            ax.set_xlim(x0, x1 + (right + 4) * (x1 - x0) / frame.width)
        if top > 0:
            ax.set_ylim(y0, y1 + (top + 4) * (y1 - y0) / frame.height)
    return placed
