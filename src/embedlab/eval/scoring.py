"""Dense scoring kernels shared by neighbours, analogies and similarity.

All functions take the raw matrix (V×D float32) plus its row norms and never modify either.
Rows with norm 0 are treated as having cosine 0 with everything (instead of NaN).
Scores are computed with torch because its GEMM and ``topk`` use every core; arrays are
wrapped, not copied.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import torch

Method = Literal["3cosadd", "3cosmul"]
METHODS: tuple[Method, ...] = ("3cosadd", "3cosmul")

# Levy & Goldberg (2014) add this to the 3CosMul denominator; gensim uses the same value.
COSMUL_EPS = 1e-6


def as_tensor(array: np.ndarray) -> torch.Tensor:
    """A zero-copy tensor view. Read-only arrays are fine: callers never write through it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def row_norms(matrix: np.ndarray) -> np.ndarray:
    """Euclidean norm of each row (float32, V), as gensim's ``fill_norms``."""
    return np.linalg.norm(matrix, axis=1).astype(np.float32)


def safe(norms: np.ndarray) -> np.ndarray:
    """Norms with zeros replaced by 1, so zero rows score 0 instead of NaN."""
    return np.where(norms > 0, norms, np.float32(1.0)).astype(np.float32)


def unit_rows(matrix: np.ndarray, norms: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Unit-normalised copies of the rows ``ids`` (len(ids)×D)."""
    return matrix[ids] / safe(norms[ids])[:, None]


def cosine_to_all(matrix: np.ndarray, norms: np.ndarray, queries: np.ndarray,
                  n: int | None = None) -> torch.Tensor:
    """Cosine of each query row (B×D, any norm > 0) with the first ``n`` rows: a B×n tensor."""
    n = matrix.shape[0] if n is None else n
    q = queries / safe(row_norms(queries))[:, None]
    scores = as_tensor(np.ascontiguousarray(q, dtype=np.float32)) @ as_tensor(matrix[:n]).T
    return scores.div_(as_tensor(safe(norms[:n])))


def analogy_scores(matrix: np.ndarray, norms: np.ndarray, a: np.ndarray, b: np.ndarray,
                   c: np.ndarray, n: int, method: Method) -> torch.Tensor:
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
    cos = cosine_to_all(matrix, norms, np.concatenate([ua, ub, uc]), n)
    return cosmul(*cos.chunk(3))


def cosmul(cos_a: torch.Tensor, cos_b: torch.Tensor, cos_c: torch.Tensor) -> torch.Tensor:
    """3CosMul from the three cosine tensors (modified in place)."""
    sa, sb, sc = (t.add_(1.0).mul_(0.5) for t in (cos_a, cos_b, cos_c))
    return sb.mul_(sc).div_(sa.add_(COSMUL_EPS))
