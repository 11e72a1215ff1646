"""Dense scoring kernels shared by neighbours, analogies and similarity.

All functions take the raw matrix (V×D float32) plus its row norms and never modify either.
Rows with norm 0 are treated as having cosine 0 with everything (instead of NaN).
Scores are NumPy float32 arrays computed with NumPy's BLAS (its GEMM uses every core); no torch,
so that evaluating inside the training process does not load it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Method = Literal["3cosadd", "3cosmul"]
METHODS: tuple[Method, ...] = ("3cosadd", "3cosmul")

# Levy & Goldberg (2014) add this to the 3CosMul denominator; gensim uses the same value.
COSMUL_EPS = 1e-6


def row_norms(matrix: np.ndarray, *, low_memory: bool = False) -> np.ndarray:
    """Euclidean norm of each row (V).

    By default ``np.linalg.norm(matrix, axis=1)`` as float32, as gensim's ``fill_norms``: the
    norms of evaluation and queries. ``low_memory=True`` sums the squares with ``einsum``
    instead, without ``linalg.norm``'s V×D temporary, in the matrix's own dtype: the norms of
    the training summaries, computed beside the matrices being trained, where that temporary
    would set the process's peak of memory. The two differ in the last bit of some rows.
    """
    if low_memory:
        return np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    return np.linalg.norm(matrix, axis=1).astype(np.float32)


def safe(norms: np.ndarray) -> np.ndarray:
    """Norms with zeros replaced by 1, so zero rows score 0 instead of NaN."""
    return np.where(norms > 0, norms, np.float32(1.0)).astype(np.float32)


def unit_rows(matrix: np.ndarray, norms: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Unit-normalised copies of the rows ``ids`` (len(ids)×D)."""
    return matrix[ids] / safe(norms[ids])[:, None]


def cosine_to_all(matrix: np.ndarray, norms: np.ndarray, queries: np.ndarray,
                  n: int | None = None) -> np.ndarray:
    """Cosine of each query row (B×D, any norm > 0) with the first ``n`` rows: B×n float32."""
    n = matrix.shape[0] if n is None else n
    q = np.ascontiguousarray(queries / safe(row_norms(queries))[:, None], dtype=np.float32)
    scores = q @ matrix[:n].T  # a transposed view: BLAS reads it in place, no copy
    scores /= safe(norms[:n])
    return scores


def analogy_scores(matrix: np.ndarray, norms: np.ndarray, a: np.ndarray, b: np.ndarray,
                   c: np.ndarray, n: int, method: Method) -> np.ndarray:
    """Scores (B×n) of every candidate among the first ``n`` rows for "a is to b as c is to ?".

    3CosAdd: cos(x, u_b + u_c - u_a), as gensim's ``most_similar`` (scores are cosines).
    3CosMul: cos'(x,b)·cos'(x,c) / (cos'(x,a) + 1e-6) with cos' = (1 + cos)/2, as gensim's
    ``most_similar_cosmul`` (Levy & Goldberg 2014, eq. 4 and footnote 7).
    The question rows themselves are not masked here.
    """
    ua, ub, uc = (unit_rows(matrix, norms, ids) for ids in (a, b, c))
    if method == "3cosadd":
        return cosine_to_all(matrix, norms, ub + uc - ua, n)
    if method != "3cosmul":
        raise ValueError(f"unknown analogy method {method!r}")
    cos_a, cos_b, cos_c = np.split(cosine_to_all(matrix, norms, np.concatenate([ua, ub, uc]), n), 3)
    return cosmul(cos_a, cos_b, cos_c)


def cosmul(cos_a: np.ndarray, cos_b: np.ndarray, cos_c: np.ndarray) -> np.ndarray:
    """3CosMul from the three float32 cosine arrays, computed in place (all three are
    overwritten; the result is ``cos_b``'s memory), so a batch needs no further B×n buffer."""
    for cos in (cos_a, cos_b, cos_c):
        cos += 1.0
        cos *= 0.5
    cos_b *= cos_c
    cos_a += COSMUL_EPS
    cos_b /= cos_a
    return cos_b


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest of ``scores`` (1-D, ``1 <= k <= len(scores)``), best first.

    Deterministic order: by score descending, ties by index ascending -- also at the cut, where
    the lowest tied indices are kept. NaN ranks as +inf, above every finite score (as with
    ``torch.topk`` and ``np.argmax``); -inf (a masked entry) below every finite score.
    O(n + k log k) via ``argpartition`` (plus the sort of the tied entries when a tie straddles
    the cut), so asking for 10 of 3 million words does not sort them all.
    """
    key = -scores  # ascending key = descending score
    if np.isnan(key.min()):  # rare (a diverged model), so detected by one cheap reduction
        key[np.isnan(key)] = -np.inf
    if k < len(key):
        part = np.argpartition(key, k)  # the k smallest keys first, then the next smallest
        cand = part[:k]
        if key[part[k]] == key[cand].max():  # a tie straddles the cut: take all tied entries
            cand = np.flatnonzero(key <= key[part[k]])
    else:
        cand = np.arange(len(key))
    return cand[np.lexsort((cand, key[cand]))[:k]]
