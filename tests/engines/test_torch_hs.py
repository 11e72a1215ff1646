"""Hierarchical softmax's step (both engines): the gradient of the per-pair loss of the paper
(checked by autograd), word2vec.c's update for a single pair, and the damping of the root."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Batch, BatchStream, Cursor
from embedlab.engines import build_engine
from embedlab.engines.huffman import HuffmanTree, build_tree
from embedlab.engines.params import Word2VecParams, init_params
from embedlab.engines.step import StepConfig, TrainStep, band_block_length
from embedlab.seeding import mt19937_rng

V, D, W = 40, 8, 2
COUNTS = (400 / np.arange(1, V + 1)).astype(np.int64) + 1


def hs_step(model: str, params: Word2VecParams, tree: HuffmanTree, rows: int, *, engine: str,
            damping: float = 0.0, threads: int = 1) -> TrainStep:
    cfg = StepConfig(model, "hs", W, 0, 1, damping=damping)
    return build_engine(engine, cfg, params, None, rows, threads=threads, tree=tree).step


def _batches() -> tuple[BatchStream, list[Batch]]:
    rng = np.random.default_rng(0)
    ids = rng.choice(V, size=300, p=COUNTS / COUNTS.sum()).astype(np.uint32)
    ends = np.array([70, 71, 150, 300])  # includes a one-word sentence
    stream = BatchStream(ids, ends, None, NoiseDistribution(COUNTS), window=W, batch_size=32,
                         group=1, noise_per_group=0, seed=5, epochs=1, chunk_tokens=128,
                         pad_to=band_block_length(W))
    return stream, list(stream.iterate(Cursor()))


def _params(seed: int) -> Word2VecParams:
    """Centred input vectors and non-zero node vectors, so that both sides get gradients."""
    p = init_params(V, D, init="centered", nce=False, rng=mt19937_rng(seed, "init"), hs=True,
                    scale=8.0)
    p.w_out[:] = np.random.default_rng(seed).normal(0, 0.3, size=p.w_out.shape)
    return p


def _reference_loss(model: str, batch: Batch, tree: HuffmanTree, w_in: torch.Tensor,
                    nodes: torch.Tensor) -> torch.Tensor:
    """Per-pair loops, straight from the paper: −Σ_l log σ((1 − 2·c_l)·h·u_{n_l})."""
    rows, J = batch.mask.shape

    def path_loss(h: torch.Tensor, word: int) -> torch.Tensor:
        points, codes = tree.path(word)
        total = torch.zeros((), dtype=torch.float64)
        for n, c in zip(points.tolist(), codes.tolist(), strict=True):
            total = total - F.logsigmoid((1 - 2 * c) * (h @ nodes[n])).double()
        return total

    total = torch.zeros((), dtype=torch.float64)
    for t in range(rows):
        ctx = [int(batch.span[t + j]) for j in range(J) if batch.mask[t, j] > 0]
        if not ctx:
            continue
        centre = int(batch.centers[t])
        if model == "skipgram":  # word2vec.c: each context's vector predicts the centre
            for c in ctx:
                total = total + path_loss(w_in[c], centre)
        else:  # the mean forward; each context receives the whole gradient of h backward
            x = torch.stack([w_in[c] for c in ctx])
            total = total + path_loss(x.mean(0).detach() + (x - x.detach()).sum(0), centre)
    return total


@pytest.mark.parametrize("engine", ["torch", "native"])
@pytest.mark.parametrize("model", ["skipgram", "cbow"])
def test_step_matches_autograd(model: str, engine: str) -> None:
    stream, batches = _batches()
    tree = build_tree(COUNTS)
    params = _params(0)
    step = hs_step(model, params, tree, stream.rows, engine=engine, threads=2)
    lr = 0.1
    for batch in batches[:3]:
        leaves = [torch.tensor(a, requires_grad=True) for a in (params.w_in, params.w_out)]
        ref = _reference_loss(model, batch, tree, leaves[0], leaves[1])
        ref.backward()
        assert leaves[0].grad is not None and leaves[1].grad is not None
        expected_in = leaves[0].detach() - lr * leaves[0].grad
        expected_nodes = leaves[1].detach() - lr * leaves[1].grad
        got = step(batch, lr)
        assert got == pytest.approx(float(ref.detach()), rel=1e-5)
        np.testing.assert_allclose(params.w_in, expected_in.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(params.w_out, expected_nodes.numpy(), rtol=1e-5, atol=1e-6)


def word2vec_c_pair(syn0: np.ndarray, syn1: np.ndarray, tree: HuffmanTree, context: int,
                    word: int, alpha: float) -> None:
    """word2vec.c's ``hs`` branch of skip-gram for one pair, in place (σ exact, no ±6 cut)."""
    l1 = syn0[context]
    neu1e = np.zeros_like(l1)
    points, codes = tree.path(word)
    for node, code in zip(points.tolist(), codes.tolist(), strict=True):
        f = 1.0 / (1.0 + np.exp(-float(l1 @ syn1[node])))
        g = (1 - code - f) * alpha
        neu1e += g * syn1[node]
        syn1[node] += g * l1
    syn0[context] += neu1e


@pytest.mark.parametrize("engine", ["torch", "native"])
def test_one_pair_is_word2vec_cs_update(engine: str) -> None:
    tree = build_tree(COUNTS)
    rows, centre, context = band_block_length(W), 30, 7
    span = np.zeros(rows + 2 * W, dtype=np.int64)
    span[W], span[W + 1] = centre, context  # centre slot 0; its context at offset +1
    mask = np.zeros((rows, 2 * W + 1), dtype=np.uint8)
    mask[0, W + 1] = 1
    ctx = mask.sum(1).astype(np.float32)
    batch = Batch(span[W : W + rows].copy(), span, mask, ctx, np.zeros((rows, 0), np.int64), 1,
                  1, 0, Cursor())
    p = _params(4)
    want = p.copy()
    hs_step("skipgram", p, tree, rows, engine=engine)(batch, 0.2)
    word2vec_c_pair(want.w_in, want.w_out, tree, context, centre, 0.2)
    np.testing.assert_allclose(p.w_in, want.w_in, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(p.w_out, want.w_out, rtol=1e-5, atol=1e-7)
    assert not np.array_equal(p.w_out, _params(4).w_out)


@pytest.mark.parametrize("engine", ["torch", "native"])
def test_damping_bounds_the_root_which_every_pair_updates(engine: str) -> None:
    stream, batches = _batches()
    tree = build_tree(COUNTS)
    root = V - 2
    moved = {}
    for kappa in (0.0, 1.0):
        p = _params(1)
        p.w_in *= 50.0  # late-training sized vectors
        before = p.w_out[root].copy()
        hs_step("skipgram", p, tree, stream.rows, engine=engine, damping=kappa)(batches[0], 1.0)
        moved[kappa] = float(np.linalg.norm(p.w_out[root] - before))
    assert 0 < moved[1.0] < moved[0.0] / 5
