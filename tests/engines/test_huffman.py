"""The Huffman tree of ``--loss hs``: word2vec.c's construction, bit for bit, and the properties
every Huffman code has (prefix-free, Kraft equality, optimal length)."""

from __future__ import annotations

import heapq
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedlab.engines.huffman import HuffmanTree, build_tree

counts_lists = st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=80)
# few distinct values: many ties, where the construction's choices show
tied_lists = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=60)


def word2vec_c(counts: list[int]) -> tuple[list[list[int]], list[list[int]]]:
    """word2vec.c's CreateBinaryTree, line by line (its vocabulary sorted by count, descending):
    every word's code bits and inner-node points, root first."""
    v = len(counts)
    count = counts + [10**15] * v
    binary, parent_node = [0] * (2 * v), [0] * (2 * v)
    pos1, pos2 = v - 1, v
    for a in range(v - 1):
        mins = []
        for _ in range(2):
            if pos1 >= 0 and count[pos1] < count[pos2]:
                mins.append(pos1)
                pos1 -= 1
            else:
                mins.append(pos2)
                pos2 += 1
        count[v + a] = count[mins[0]] + count[mins[1]]
        parent_node[mins[0]] = parent_node[mins[1]] = v + a
        binary[mins[1]] = 1
    codes, points = [], []
    for a in range(v):
        code, point, b = [], [], a
        while v > 1:
            code.append(binary[b])
            point.append(b)
            b = parent_node[b]
            if b == v * 2 - 2:
                break
        # word2vec.c: code[i-b-1] = code[b]; point[0] = root; point[i-b] = point[b] - V
        codes.append(code[::-1])
        points.append([v - 2, *[p - v for p in point[::-1]]][: len(code)])
    return codes, points


def _paths(tree: HuffmanTree) -> tuple[list[list[int]], list[list[int]]]:
    paths = [tree.path(w) for w in range(tree.vocab_size)]
    return [c.tolist() for _, c in paths], [p.tolist() for p, _ in paths]


def huffman_cost(counts: list[int]) -> int:
    """Σ count·length of an optimal prefix code (heapq Huffman), the reference for optimality."""
    if len(counts) < 2:
        return 0
    heap = list(counts)
    heapq.heapify(heap)
    cost = 0
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        cost += merged
        heapq.heappush(heap, merged)
    return cost


@given(st.one_of(counts_lists, tied_lists))
@settings(max_examples=200, deadline=None)
def test_a_sorted_vocabulary_gets_word2vec_cs_tree_exactly(counts: list[int]) -> None:
    counts = sorted(counts, reverse=True)
    assert _paths(build_tree(np.array(counts))) == word2vec_c(counts)


@given(st.one_of(counts_lists, tied_lists))
@settings(max_examples=200, deadline=None)
def test_any_order_is_built_as_sorted_by_count_then_id(counts: list[int]) -> None:
    # ties broken by id: word2vec.c's tree for the stably sorted vocabulary, mapped back
    order = sorted(range(len(counts)), key=lambda i: (-counts[i], i))
    codes, points = word2vec_c([counts[i] for i in order])
    got_codes, got_points = _paths(build_tree(np.array(counts)))
    for rank, word in enumerate(order):
        assert got_codes[word] == codes[rank] and got_points[word] == points[rank]


@given(st.one_of(counts_lists, tied_lists))
@settings(max_examples=200, deadline=None)
def test_codes_are_prefix_free_complete_and_optimal(counts: list[int]) -> None:
    tree = build_tree(np.array(counts))
    words = ["".join(map(str, c)) for c in _paths(tree)[0]]
    lengths = tree.lengths
    if len(counts) > 1:
        ordered = sorted(words)
        assert all(not b.startswith(a) for a, b in itertools.pairwise(ordered))
        assert sum(2.0 ** -int(n) for n in lengths) == 1.0  # Kraft equality: a full tree
    else:
        assert lengths.tolist() == [0]
    assert int((np.array(counts) * lengths).sum()) == huffman_cost(counts)
    # a more frequent word never has a longer code (else swapping the two would be cheaper)
    by_count = np.argsort(-np.array(counts), kind="stable")
    c, n = np.array(counts)[by_count], lengths[by_count]
    assert all(n[i] <= n[j] for i in range(len(c)) for j in range(i + 1, len(c)) if c[i] > c[j])


@given(counts_lists)
@settings(max_examples=100, deadline=None)
def test_points_name_the_inner_nodes_along_each_code(counts: list[int]) -> None:
    tree = build_tree(np.array(counts))
    v = len(counts)
    child: dict[tuple[int, int], int] = {}  # (inner node, bit) -> the next inner node
    for points, codes in (tree.path(w) for w in range(v)):
        if len(points):
            assert points[0] == v - 2  # every path starts at the root
        assert all(0 <= p < v - 1 for p in points)
        for here, bit, nxt in zip(points[:-1], codes[:-1], points[1:], strict=True):
            assert child.setdefault((int(here), int(bit)), int(nxt)) == int(nxt)
    used = {int(p) for p in tree.points}
    assert used == set(range(v - 1))  # V−1 inner nodes, every one on some path


def test_the_same_counts_give_the_same_tree_and_ties_follow_ids() -> None:
    counts = np.array([5, 3, 3, 3, 3, 1, 1, 9])
    a, b = build_tree(counts), build_tree(counts.copy())
    for name in ("offsets", "points", "codes"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
    # equal counts: the lower id comes first in the sorted order, so it is merged later and
    # never gets a longer code than a higher id of the same count
    lengths = a.lengths
    assert lengths[1] <= lengths[2] <= lengths[3] <= lengths[4] and lengths[5] <= lengths[6]


def test_padded_paths_line_up_with_the_ragged_ones() -> None:
    tree = build_tree(np.array([50, 20, 20, 7, 3, 1]))
    words = np.array([0, 5, 3, 3])
    nodes, codes, mask = tree.padded(words)
    assert nodes.shape == (4, tree.lengths[words].max())
    for row, w in enumerate(words):
        points, bits = tree.path(int(w))
        n = len(points)
        assert nodes[row, :n].tolist() == points.tolist()
        assert codes[row, :n].tolist() == bits.tolist()
        assert mask[row].tolist() == [1.0] * n + [0.0] * (nodes.shape[1] - n)


def test_one_word_has_an_empty_path_and_no_inner_node() -> None:
    tree = build_tree(np.array([7]))
    assert tree.n_nodes == 0 and tree.max_length == 0 and tree.lengths.tolist() == [0]
    nodes, _, mask = tree.padded(np.array([0, 0]))
    assert nodes.shape == (2, 0) and mask.shape == (2, 0)


@given(st.one_of(counts_lists, tied_lists,
                 st.lists(st.integers(0, 3), min_size=1, max_size=300)))
@settings(max_examples=300, deadline=None)
def test_the_merge_in_runs_is_the_loops(counts: list[int]) -> None:
    from embedlab.engines.huffman import _merge_order_loop, merge_order

    ordered = np.array(sorted(counts, reverse=True), dtype=np.int64)
    ours, loops = merge_order(ordered), _merge_order_loop(ordered)
    assert np.array_equal(ours[0], loops[0]) and np.array_equal(ours[1], loops[1])


def test_the_merge_of_a_zipf_vocabulary_and_of_huge_counts() -> None:
    from embedlab.engines.huffman import _merge_order_loop, merge_order

    zipf = np.maximum(5, 10**7 // np.arange(1, 30_001)).astype(np.int64)
    huge = np.array([2**62, 2**61, 3, 1], dtype=np.int64)  # sums beyond int64: the loop's way
    for counts in (zipf, huge):
        ours, loops = merge_order(counts), _merge_order_loop(counts)
        assert np.array_equal(ours[0], loops[0]) and np.array_equal(ours[1], loops[1])


class _Spy:
    """The native library, counting the calls of its Huffman functions."""

    def __init__(self, lib: Any) -> None:
        self.lib, self.calls = lib, {"w2v_huffman_merge": 0, "w2v_huffman_paths": 0}

    def __getattr__(self, name: str) -> Any:
        if name in self.calls:
            self.calls[name] += 1
        return getattr(self.lib, name)


@pytest.fixture(scope="module")
def native_library() -> Any:
    from embedlab.engines.huffman import _library

    lib = _library()
    if lib is None:
        pytest.skip("the native library does not build here")
    return lib


@given(st.one_of(counts_lists, tied_lists,
                 st.lists(st.integers(0, 3), min_size=1, max_size=300)))
@settings(max_examples=200, deadline=None)
def test_the_native_build_gives_numpys_arrays(native_library: Any, counts: list[int]) -> None:
    """The tree is built by the native library where it loads, by NumPy alone elsewhere: the
    same arrays, in any order of the words."""
    import embedlab.engines.huffman as huffman

    spy = _Spy(native_library)
    real = huffman._library
    huffman._library = lambda build=True: spy
    try:
        native = build_tree(np.array(counts), native=True)
    finally:
        huffman._library = real
    assert spy.calls == {"w2v_huffman_merge": 1, "w2v_huffman_paths": 1}
    numpy = build_tree(np.array(counts), native=False)
    for field in ("offsets", "points", "codes"):
        got, want = getattr(native, field), getattr(numpy, field)
        assert got.dtype == want.dtype and np.array_equal(got, want), field


def test_the_native_build_of_a_zipf_vocabulary_and_of_huge_counts(
        native_library: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import embedlab.engines.huffman as huffman

    spy = _Spy(native_library)
    monkeypatch.setattr(huffman, "_library", lambda build=True: spy)
    zipf = np.maximum(5, 10**7 // np.arange(1, 30_001)).astype(np.int64)
    huge = np.array([2**62, 2**61, 3, 1], dtype=np.int64)  # sums beyond int64: merge_order's loop
    for counts, merged in ((zipf, 1), (zipf[::-1].copy(), 1), (huge, 0)):
        spy.calls = dict.fromkeys(spy.calls, 0)
        native, numpy = build_tree(counts, native=True), build_tree(counts, native=False)
        assert spy.calls == {"w2v_huffman_merge": merged, "w2v_huffman_paths": 1}
        assert all(np.array_equal(getattr(native, f), getattr(numpy, f))
                   for f in ("offsets", "points", "codes"))


def test_a_small_vocabulary_does_not_build_the_library_for_its_tree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch engine's hierarchical softmax needs no C compiler: below NATIVE_TREE_WORDS the
    tree is NumPy's unless the process has loaded the library already."""
    import embedlab.engines.huffman as huffman
    from embedlab.engines import native

    asked: list[bool] = []
    monkeypatch.setattr(native, "library", _Unbuildable(asked))
    build_tree(np.array([5, 3, 2, 1]))
    assert asked == [False]  # asked whether loaded; nothing built
    build_tree(np.ones(huffman.NATIVE_TREE_WORDS, dtype=np.int64))
    assert asked == [False, True]  # a big vocabulary builds it


class _Unbuildable:
    """``native.library`` that records a build instead of building."""

    def __init__(self, asked: list[bool]) -> None:
        self.asked = asked

    def loaded(self) -> Any:
        self.asked.append(False)
        return None

    def __call__(self) -> Any:
        self.asked.append(True)
        from embedlab.engines.native import NativeUnavailable

        raise NativeUnavailable("not built in this test")

    def optional(self) -> Any:  # as _Library.optional: a failed build is None
        from embedlab.engines.native import NativeUnavailable

        try:
            return self()
        except NativeUnavailable:
            return None
