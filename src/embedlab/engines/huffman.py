"""The Huffman tree of a vocabulary, built as word2vec.c's ``CreateBinaryTree`` builds it, for
hierarchical softmax (``--loss hs``).

Each word is a leaf; its path from the root passes ``codelen`` inner nodes. Inner node ``n``
(0 ≤ n < V−1, the root is V−2) has a vector ``hs_nodes[n]``, and at each node the path goes to
the child its code bit names. Hierarchical softmax predicts a word by the product over its path
of σ(±h·node): bit 0 is the sign +, bit 1 the sign − (word2vec.c's ``g = (1 − code − f)·lr``).

Construction (word2vec.c): the words sorted by count, descending; two queues — the leaves from
the rarest up, and the inner nodes in the order they are made (their counts never decrease) —
and V−1 times the two smallest heads merge into a new inner node, the leaf queue's head taken
only when its count is strictly smaller (ties go to the inner node); the second node taken is
the child of bit 1. word2vec.c expects its vocabulary sorted; here the words are ordered by
(count descending, id ascending) first, which is the identity for an embedlab vocabulary (ids
follow counts) and keeps ties deterministic for any other (``--unk`` puts UNK at id 0 whatever
its count).

Where the native library builds (``_batches.c``: ``w2v_huffman_merge``, ``w2v_huffman_paths``)
the merge and the paths are written there, in one pass each (0.2 s for 2.3M words; see
:func:`build_tree` for when). Without it,
NumPy gives the same arrays: the merge goes in long runs — leaves paired with leaves, inner
nodes with inner nodes — that are array operations (:func:`merge_order`), only the steps between
runs one at a time, and the paths are read out of the parent links one level of the tree at a
time (2 s for 2.3M words).
"""

from __future__ import annotations

import array
from dataclasses import dataclass
from typing import Any

import numpy as np

from embedlab.engines.native import NATIVE_VOCAB_WORDS


@dataclass(frozen=True)
class HuffmanTree:
    """Every word's path as ragged arrays: word ``w``'s path is entries
    ``offsets[w] : offsets[w + 1]`` of ``points`` (inner node ids, root first) and ``codes``
    (the bit taken at each of those nodes).

    word2vec.c keeps 40 entries per word; ragged arrays keep what the paths need (about 20
    entries per word for a vocabulary of millions) and put no bound on a path's length.
    """

    offsets: np.ndarray  # (V+1,) int64
    points: np.ndarray  # (T,) int32: inner node ids 0..V-2
    codes: np.ndarray  # (T,) uint8: 0 or 1

    @property
    def vocab_size(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_nodes(self) -> int:
        """Inner nodes: V − 1 (0 for a vocabulary of one word, which has an empty path)."""
        return max(0, self.vocab_size - 1)

    @property
    def lengths(self) -> np.ndarray:
        """(V,) int64: each word's code length."""
        return np.diff(self.offsets)

    @property
    def max_length(self) -> int:
        return int(self.lengths.max(initial=0))

    def path(self, word: int) -> tuple[np.ndarray, np.ndarray]:
        """Word ``word``'s inner nodes (root first) and code bits."""
        lo, hi = int(self.offsets[word]), int(self.offsets[word + 1])
        return self.points[lo:hi], self.codes[lo:hi]

    def padded(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The paths of ``words`` (n,) as (n, L) arrays, L the longest of them: node ids
        (int64, 0 where a path is shorter), code bits (float32) and a 0/1 float32 mask."""
        words = np.asarray(words, dtype=np.int64)
        starts, lengths = self.offsets[words], self.lengths[words]
        width = int(lengths.max(initial=0))
        step = np.arange(width, dtype=np.int64)
        mask = step[None, :] < lengths[:, None]
        at = np.where(mask, starts[:, None] + step[None, :], 0)
        if len(self.points) == 0:  # a one-word vocabulary: nothing to gather from
            zeros = np.zeros(mask.shape, dtype=np.int64)
            return zeros, zeros.astype(np.float32), mask.astype(np.float32)
        nodes = np.where(mask, self.points[at], 0).astype(np.int64)
        codes = np.where(mask, self.codes[at], 0).astype(np.float32)
        return nodes, codes, mask.astype(np.float32)


def merge_order(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """word2vec.c's two-queue merge on ``counts`` sorted descending (V ≥ 1).

    Tree nodes: leaves 0..V−1 (the sorted words), inner nodes V..2V−2 in the order they were
    made (2V−2 is the root). Returns, for each inner node V+a, its children: ``first[a]`` (the
    smaller, bit 0) and ``second[a]`` (bit 1), int64 arrays of length V−1.

    The merges of :func:`_merge_order_loop`, with its long runs done as array operations: while
    the two rarest leaves are both rarer than the inner queue's head, they are merged with each
    other (the head is not taken, so it stays the bound), and while the two oldest inner nodes
    made so far are both no more frequent than the rarest leaf, they are (new nodes join the
    queue behind them). Between runs, single steps as in the loop.
    """
    v = len(counts)
    if float(np.sum(counts, dtype=np.float64)) >= 2.0**62:  # a sum might overflow int64
        return _merge_order_loop(counts)
    count = np.full(2 * v - 1, _NOT_MADE, dtype=np.int64)
    count[:v] = counts
    descending = -count[:v]  # ascending, for searchsorted
    first = np.empty(max(0, v - 1), dtype=np.int64)
    second = np.empty(max(0, v - 1), dtype=np.int64)
    pos1, pos2, node = v - 1, v, v  # rarest unmerged leaf, oldest unmerged inner node, next one
    while node < 2 * v - 1:
        if pos2 < node and pos1 >= 1:  # leaves rarer than the queue's head pair up
            frequent = int(np.searchsorted(descending, -int(count[pos2]), side="right"))
            pairs = (pos1 + 1 - frequent) // 2
            if pairs > 0:
                a = pos1 - 2 * np.arange(pairs)
                _merge(count, first, second, node - v, a, a - 1)
                pos1, node = pos1 - 2 * pairs, node + pairs
                continue
        rarest_leaf = int(count[pos1]) if pos1 >= 0 else _NOT_MADE
        pairs = int(np.searchsorted(count[pos2:node], rarest_leaf, side="right")) // 2
        if pairs > 0:  # inner nodes as frequent as the rarest leaf or rarer (ties: inner first)
            a = pos2 + 2 * np.arange(pairs)
            _merge(count, first, second, node - v, a, a + 1)
            pos2, node = pos2 + 2 * pairs, node + pairs
            continue
        taken = []
        for _ in range(2):
            head = int(count[pos2]) if pos2 < node else _NOT_MADE
            if pos1 >= 0 and int(count[pos1]) < head:
                taken.append(pos1)
                pos1 -= 1
            else:
                taken.append(pos2)
                pos2 += 1
        first[node - v], second[node - v] = taken
        count[node] = count[taken[0]] + count[taken[1]]
        node += 1
    return first, second


_NOT_MADE = np.iinfo(np.int64).max  # word2vec.c's 1e15 for an inner node not made yet


def _merge(count: np.ndarray, first: np.ndarray, second: np.ndarray, at: int, a: np.ndarray,
           b: np.ndarray) -> None:
    """Make inner nodes V+at, V+at+1, ... with children ``a`` (bit 0) and ``b`` (bit 1)."""
    n, v = len(a), len(first) + 1
    first[at:at + n], second[at:at + n] = a, b
    count[v + at:v + at + n] = count[a] + count[b]


def _merge_order_loop(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """word2vec.c's two-queue merge on ``counts`` sorted descending (V ≥ 1), one Python
    iteration per inner node: the specification of :func:`merge_order`, and its way for counts
    whose sums may not fit int64.

    Tree nodes: leaves 0..V−1 (the sorted words), inner nodes V..2V−2 in the order they were
    made (2V−2 is the root). Returns, for each inner node V+a, its children: ``first[a]`` (the
    smaller, bit 0) and ``second[a]`` (bit 1), int64 arrays of length V−1.
    """
    v = len(counts)
    # Python integers: counts up to int64 and their sums cannot overflow; word2vec.c's 1e15
    # sentinel for "not made yet" is an infinity here
    count: list[float] = [*counts.tolist(), *[float("inf")] * max(0, v - 1)]
    first: array.array[int] = array.array("q")
    second: array.array[int] = array.array("q")
    pos1, pos2 = v - 1, v  # the rarest leaf not merged yet; the oldest inner node not merged
    for node in range(v, 2 * v - 1):
        if pos1 >= 0 and count[pos1] < count[pos2]:
            min1, pos1 = pos1, pos1 - 1
        else:
            min1, pos2 = pos2, pos2 + 1
        if pos1 >= 0 and count[pos1] < count[pos2]:
            min2, pos1 = pos1, pos1 - 1
        else:
            min2, pos2 = pos2, pos2 + 1
        count[node] = count[min1] + count[min2]
        first.append(min1)
        second.append(min2)
    return (np.frombuffer(first, dtype=np.int64).copy(),
            np.frombuffer(second, dtype=np.int64).copy())


#: vocabularies from this size build their tree with the native library even if it must be
#: compiled first (:data:`embedlab.engines.native.NATIVE_VOCAB_WORDS`)
NATIVE_TREE_WORDS = NATIVE_VOCAB_WORDS


def build_tree(counts: np.ndarray, *, native: bool | None = None) -> HuffmanTree:
    """The Huffman tree of a vocabulary with word counts ``counts`` (V,), V ≥ 1.

    ``native``: None chooses (the native library when loaded, or for
    :data:`NATIVE_TREE_WORDS` words and more), True uses it wherever it builds, False builds
    the tree with NumPy alone — the same arrays whichever way.
    """
    counts = np.asarray(counts, dtype=np.int64)
    v = len(counts)
    if v == 0:
        raise ValueError("a Huffman tree needs at least one word")
    order = np.lexsort((np.arange(v), -counts))  # count descending, then id ascending
    lib = None if native is False else _library(build=native or v >= NATIVE_TREE_WORDS)
    if lib is not None and float(np.sum(counts, dtype=np.float64)) < 2.0**62:
        count = np.empty(2 * v - 1, dtype=np.int64)
        count[:v] = counts[order]
        first = np.empty(v - 1, dtype=np.int64)
        second = np.empty(v - 1, dtype=np.int64)
        lib.w2v_huffman_merge(v, count.ctypes.data, first.ctypes.data, second.ctypes.data)
    else:  # sums that may not fit int64 take merge_order's Python-integer loop
        first, second = merge_order(counts[order])
    made = np.arange(v, 2 * v - 1, dtype=np.int64)
    parent = np.full(2 * v - 1, -1, dtype=np.int64)
    parent[first], parent[second] = made, made
    bit = np.zeros(2 * v - 1, dtype=np.uint8)
    bit[second] = 1
    depth = _depths(first, second, v)
    lengths = np.empty(v, dtype=np.int64)
    lengths[order] = depth[:v]
    offsets = np.zeros(v + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    points = np.empty(int(offsets[-1]), dtype=np.int32)
    codes = np.empty(int(offsets[-1]), dtype=np.uint8)
    if lib is not None:
        lib.w2v_huffman_paths(v, parent.ctypes.data, bit.ctypes.data, order.ctypes.data,
                              offsets.ctypes.data, points.ctypes.data, codes.ctypes.data)
        return HuffmanTree(offsets, points, codes)
    # walk every leaf up to the root at once, filling each path from its end: the entry for
    # node n on the way up is (parent(n), bit(n)), i.e. the bit taken at the parent
    node = np.arange(v, dtype=np.int64)  # leaves in sorted order
    at = offsets[order + 1] - 1  # the last entry of each of their paths
    live = depth[:v] > 0
    node, at = node[live], at[live]
    while len(node):
        up = parent[node]
        points[at] = up - v
        codes[at] = bit[node]
        going = up != 2 * v - 2
        node, at = up[going], at[going] - 1
    return HuffmanTree(offsets, points, codes)


def _library(*, build: bool = True) -> Any:
    """The native library, or None where it cannot be built (NumPy builds the tree then);
    ``build`` False: only if this process has loaded it already."""
    from embedlab.engines.native import library_if

    return library_if(build)


def _depths(first: np.ndarray, second: np.ndarray, v: int) -> np.ndarray:
    """Each of the 2V−1 nodes' distance to the root, one level of the tree at a time."""
    depth = np.zeros(2 * v - 1, dtype=np.int64)
    level, inner = 0, np.array([v - 2] if v > 1 else [], dtype=np.int64)  # the root's index a
    while len(inner):
        level += 1
        kids = np.concatenate((first[inner], second[inner]))
        depth[kids] = level
        inner = kids[kids >= v] - v
    return depth
