"""2-D projections and the labelled scatter plot."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from embedlab.errors import InputError
from embedlab.track.plots import (
    CARD_DPI,
    CARD_FONT,
    CARD_INCHES,
    plot_card,
    plot_words,
    project_2d,
    top_word_ids,
)


def test_pca_matches_scikit_learn_up_to_sign() -> None:
    from sklearn.decomposition import PCA

    x = np.random.default_rng(0).normal(size=(50, 8)) * np.arange(1, 9)
    ours = project_2d(x, "pca")
    ref = PCA(n_components=2).fit_transform(x)
    for k in range(2):
        assert np.allclose(np.abs(ours[:, k]), np.abs(ref[:, k]), atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(3, 20), st.integers(1, 6)),
              elements=st.floats(-100, 100)))
def test_pca_shape_finite_and_centred(x: np.ndarray) -> None:
    pts = project_2d(x, "pca")
    assert pts.shape == (x.shape[0], 2) and np.isfinite(pts).all()
    assert np.allclose(pts.mean(axis=0), 0, atol=1e-6 * (1 + np.abs(x).max()))


def test_tsne_small_input() -> None:
    x = np.random.default_rng(1).normal(size=(12, 5))
    pts = project_2d(x, "tsne")
    assert pts.shape == (12, 2) and np.isfinite(pts).all()


def test_too_few_points_and_bad_method() -> None:
    with pytest.raises(InputError, match="at least 3 words"):
        project_2d(np.zeros((2, 4)), "pca")
    with pytest.raises(InputError, match="unknown --method"):
        project_2d(np.zeros((5, 4)), "umap")  # type: ignore[arg-type]


def test_top_word_ids_skips_unk() -> None:
    assert top_word_ids(["UNK", "the", "of", "a"], "UNK", 2) == [1, 2]
    assert top_word_ids(["the", "of"], None, 5) == [0, 1]


def test_plot_words_labels_every_point_when_labels_fit() -> None:
    words = [f"w{i}" for i in range(40)]
    grid = np.array([(i % 5, i // 5) for i in range(40)], dtype=float)  # well apart
    fig = plot_words(words, grid, title="t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == words
    assert ax.get_title() == "t"
    assert fig.get_size_inches()[0] >= 8


def test_plot_words_leaves_out_colliding_labels_most_frequent_first() -> None:
    words = [f"word{i}" for i in range(30)]
    points = np.zeros((30, 2)) + np.random.default_rng(0).normal(scale=1e-4, size=(30, 2))
    points[0] = (5.0, 5.0)  # one point far from a tight cluster of 29
    fig = plot_words(words, points, title="t")
    shown = [t.get_text() for t in fig.axes[0].texts]
    assert shown[:2] == ["word0", "word1"] and len(shown) < 5
    assert "labelled" in fig.axes[0].get_title()


def test_plot_words_keeps_long_labels_at_the_edges_inside_the_axes() -> None:
    rng = np.random.default_rng(1)
    points = rng.normal(size=(60, 2))
    right, top = int(points[:, 0].argmax()), int(points[:, 1].argmax())
    words = [f"w{i}" for i in range(60)]
    words[right], words[top] = "a" * 40, "b" * 30  # far longer than the axes' margin
    fig = plot_words(words, points, title="t")
    fig.canvas.draw()
    ax = fig.axes[0]
    frame = ax.get_window_extent()
    shown = {t.get_text(): t.get_window_extent() for t in ax.texts}
    assert "a" * 40 in shown and "b" * 30 in shown  # the edge words are labelled, not dropped
    for box in shown.values():
        assert box.x1 <= frame.x1 + 1 and box.y1 <= frame.y1 + 1


def test_plot_card_is_sized_for_a_tensorboard_card() -> None:
    rng = np.random.default_rng(2)
    context = rng.normal(size=(200, 2))
    words = [f"w{i}" for i in range(50, 100)]
    fig = plot_card(words, context[50:100], context, title="PCA t", caption="words 51–100")
    width, height = fig.canvas.get_width_height()
    card = CARD_INCHES * 100  # the pixels of TensorBoard's image card
    assert width == height == 2 * card  # sharp on a high-density screen, never larger
    ax = fig.axes[0]
    shown = [t.get_text() for t in ax.texts]
    assert shown and set(shown) <= set(words)
    # on a card of ``card`` pixels the labels are CARD_FONT points at 100 dots an inch: 11 px
    assert {t.get_fontsize() for t in ax.texts} == {CARD_FONT}
    assert CARD_FONT * 100 / 72 >= 10
    assert ax.get_title() == f"PCA t\nwords 51–100: {len(shown)} of 50 labelled"
    # every point of the projection is drawn, the card's words again on top
    assert [len(c.get_offsets()) for c in ax.collections] == [200, 50]
    fig.canvas.draw()
    frame = ax.get_window_extent()
    for t in ax.texts:  # inside the axes, so inside the image
        box = t.get_window_extent()
        assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1 and box.y1 <= frame.y1 + 1
    assert CARD_DPI == 2 * 100


def test_plot_card_keeps_half_a_character_between_labels_on_a_line() -> None:
    # at the card's size, labels whose estimated widths touch read as one word
    points = np.random.default_rng(3).normal(size=(80, 2))
    words = [f"w{i}" for i in range(80)]
    fig = plot_card(words, points, points, title="t", caption="c")
    ax = fig.axes[0]
    char_w, line_h = (CARD_FONT * k * CARD_DPI / 72 for k in (0.62, 1.3))
    anchors = {t.get_text(): ax.transData.transform(t.xy) for t in ax.texts}
    assert len(anchors) > 10
    for a, (ax_, ay) in anchors.items():
        for b, (bx, by) in anchors.items():
            if a != b and abs(ay - by) < line_h and ax_ <= bx:
                assert bx - ax_ >= char_w * (len(a) + 0.5) - 1e-6, (a, b)


def test_words_that_look_like_mathtext_are_drawn_as_typed() -> None:
    """A corpus from LaTeX or markup has words like $x$ and $\\foo$: read as mathtext, the
    first would be drawn in italics and the second would fail to draw, stopping training at
    its first checkpoint's summaries."""
    import io

    words = ["$x$", "$\\foo$", "$^$", "a$b$c", "$100", "plain"]
    points = np.arange(12, dtype=np.float64).reshape(6, 2) * 10
    for fig in (plot_words(words, points, title="run $name$"),
                plot_card(words, points, points, title="$\\bad$", caption="words 1–6")):
        fig.savefig(io.BytesIO(), format="png")  # drawing the text is where mathtext failed
        shown = sorted(t.get_text() for ax in fig.axes for t in ax.texts)
        assert shown == sorted(words)
