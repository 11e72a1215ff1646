"""The hand-written gradients must equal autograd on a plain per-pair reference loss.

(CBOW's reference passes each context the whole gradient of the hidden mean: word2vec's rule.
With negative sampling a noise word equal to the pair's target is skipped, as word2vec.c and
gensim skip it; NCE keeps it, as TensorFlow's nce_loss does by default.)
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from embedlab.data.noise import NoiseDistribution
from embedlab.data.pairs import Batch, BatchStream, Cursor
from embedlab.engines import build_engine
from embedlab.engines.base import Engine
from embedlab.engines.params import Word2VecParams, init_params
from embedlab.engines.step import StepConfig, TrainStep, band_block_length
from embedlab.engines.torch import Band
from embedlab.seeding import mt19937_rng

V, D, W = 40, 8, 2


def make_step(cfg: StepConfig, params: Word2VecParams, log_kq: np.ndarray | None, rows: int, *,
              engine: str, threads: int = 1) -> TrainStep:
    """The step of engine ``engine`` (built by name) on ``params``."""
    built: Engine = build_engine(engine, cfg, params, log_kq, rows, threads=threads)
    return built.step


def _batches(group: int, rows_pad: int) -> tuple[BatchStream, list[Batch]]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, V, size=300).astype(np.uint32)
    counts = np.bincount(ids, minlength=V) + 1
    ends = np.array([70, 71, 150, 300])  # includes a one-word sentence
    stream = BatchStream(ids, ends, None, NoiseDistribution(counts), window=W, batch_size=32,
                         group=group, noise_per_group=3, seed=5, epochs=1, chunk_tokens=128,
                         pad_to=rows_pad)
    return stream, list(stream.iterate(Cursor()))


def _params(seed: int, *, nce: bool, out_std: float) -> Word2VecParams:
    """Centred input vectors and non-zero output vectors (and biases), so that both sides get
    gradients."""
    p = init_params(V, D, init="centered", nce=nce, rng=mt19937_rng(seed, "init"))
    rng = np.random.default_rng(seed)
    p.w_out[:] = rng.normal(0, out_std, size=p.w_out.shape)
    if p.b_out is not None:
        p.b_out[:] = rng.normal(0, 0.1, size=p.b_out.shape)
    return p


def _reference_loss(model: str, batch: Batch, w_in: torch.Tensor, w_out: torch.Tensor,
                    b_out: torch.Tensor | None, log_kq: torch.Tensor | None,
                    k: int) -> tuple[torch.Tensor, int]:
    """Per-pair loops, straight from the paper; slow but obviously right. Also returns how
    many noise terms were skipped as accidental hits."""
    rows, J = batch.mask.shape
    n_groups, s = batch.negatives.shape
    per_group = rows // n_groups

    def logit(h: torch.Tensor, word: int) -> torch.Tensor:
        z = h @ w_out[word]
        if b_out is not None and log_kq is not None:
            z = z + b_out[word] - log_kq[word]
        return z

    skip_hits = b_out is None  # negative sampling
    skipped = 0

    total = torch.zeros((), dtype=torch.float64)
    for t in range(rows):
        ctx = [int(batch.span[t + j]) for j in range(J) if batch.mask[t, j] > 0]
        if not ctx:
            continue
        noise = [int(n) for n in batch.negatives[t // per_group]]
        if model == "skipgram":
            h = w_in[int(batch.centers[t])]
            for c in ctx:
                total = total - F.logsigmoid(logit(h, c)).double()
                for n in noise:
                    if skip_hits and n == c:
                        skipped += 1
                        continue
                    total = total - (k / s) * F.logsigmoid(-logit(h, n)).double()
        else:
            # forward: the mean of the contexts; backward: each context receives the whole
            # gradient of h, as in word2vec.c and gensim (cbow_mean=1), not the mean's 1/count
            x = torch.stack([w_in[c] for c in ctx])
            h = x.mean(0).detach() + (x - x.detach()).sum(0)
            target = int(batch.centers[t])
            total = total - F.logsigmoid(logit(h, target)).double()
            for n in noise:
                if skip_hits and n == target:
                    skipped += 1
                    continue
                total = total - (k / s) * F.logsigmoid(-logit(h, n)).double()
    return total, skipped


@pytest.mark.parametrize(("model", "engine"), [("skipgram", "torch"), ("cbow", "torch"),
                                               ("skipgram", "native"), ("cbow", "native")])
@pytest.mark.parametrize("loss", ["neg", "nce"])
def test_step_matches_autograd(model: str, loss: str, engine: str) -> None:
    stream, batches = _batches(group=8, rows_pad=band_block_length(W))
    params = _params(0, nce=loss == "nce", out_std=0.3)
    counts = np.arange(1, V + 1)
    log_kq = NoiseDistribution(counts).log_expected_count(5) if loss == "nce" else None
    step = make_step(StepConfig(model, loss, W, 5, 8, damping=0.0), params, log_kq,
                     stream.rows, engine=engine, threads=2)
    lr = 0.1
    # the last batch draws its noise from its own targets: many accidental hits
    rich = batches[2]
    rich.negatives = (rich.centers if model == "cbow" else rich.span[W:-W]).reshape(
        rich.negatives.shape[0], -1)[:, : rich.negatives.shape[1]].copy()
    skipped_total = 0
    for batch in batches[:3]:
        leaves = [torch.tensor(a, requires_grad=True) for a in (params.w_in, params.w_out)]
        b_leaf = torch.tensor(params.b_out, requires_grad=True) \
            if params.b_out is not None else None
        ref, skipped = _reference_loss(model, batch, leaves[0], leaves[1], b_leaf,
                                       None if log_kq is None else torch.from_numpy(log_kq), 5)
        skipped_total += skipped
        ref.backward()
        assert leaves[0].grad is not None and leaves[1].grad is not None
        expected_in = leaves[0].detach() - lr * leaves[0].grad
        expected_out = leaves[1].detach() - lr * leaves[1].grad
        got = step(batch, lr)
        assert got == pytest.approx(float(ref.detach()), rel=1e-5)
        np.testing.assert_allclose(params.w_in, expected_in.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(params.w_out, expected_out.numpy(), rtol=1e-5, atol=1e-6)
        if b_leaf is not None:
            assert params.b_out is not None and b_leaf.grad is not None
            np.testing.assert_allclose(params.b_out, (b_leaf.detach() - lr * b_leaf.grad).numpy(),
                                       rtol=1e-5, atol=1e-6)
    assert (skipped_total > 0) == (loss == "neg")  # the skip was exercised, for neg only


def test_mean_reduction_scales_by_pairs() -> None:
    stream, batches = _batches(group=8, rows_pad=band_block_length(W))
    a = init_params(V, D, init="centered", nce=False, rng=mt19937_rng(0, "init"))
    b = a.copy()
    batch = batches[0]
    make_step(StepConfig("skipgram", "neg", W, 5, 8), a, None, stream.rows,
              engine="torch")(batch, 0.5)
    make_step(StepConfig("skipgram", "neg", W, 5, 8, "mean"), b, None, stream.rows,
              engine="torch")(batch, 0.5 * batch.n_pairs)
    np.testing.assert_allclose(a.w_in, b.w_in, rtol=1.3e-6, atol=1e-5)


def test_band_rejects_rows_not_multiple_of_block() -> None:
    with pytest.raises(ValueError):
        Band(rows=20, window=2)


def test_damping_scales_each_rows_summed_update_by_one_factor() -> None:
    stream, batches = _batches(group=8, rows_pad=band_block_length(W))
    base = _params(3, nce=False, out_std=0.5)
    runs = {}
    for kappa in (0.0, 1.0):
        p = base.copy()
        make_step(StepConfig("skipgram", "neg", W, 5, 8, damping=kappa), p, None,
                  stream.rows, engine="torch")(batches[0], 0.5)
        runs[kappa] = (torch.from_numpy(p.w_in - base.w_in), torch.from_numpy(p.w_out - base.w_out))
    for plain, damped in zip(runs[0.0], runs[1.0], strict=True):
        touched = plain.abs().sum(1) > 0
        ratio = damped[touched] / plain[touched]
        # one factor per row, in (0, 1]: the direction of the summed gradient is kept
        finite = torch.isfinite(ratio) & (plain[touched].abs() > 1e-6)
        per_row = torch.where(finite, ratio, torch.nan)
        lo = torch.nan_to_num(per_row, nan=float("inf")).min(1).values
        hi = torch.nan_to_num(per_row, nan=float("-inf")).max(1).values
        assert torch.allclose(lo, hi, rtol=1e-3, atol=1e-5)
        assert (hi <= 1.0 + 1e-6).all() and (lo > 0).all()
        assert (hi < 0.999).any()  # some row was actually damped


def test_damping_keeps_a_row_hit_by_every_centre_bounded() -> None:
    """All centres share one noise word: the undamped sum overshoots, the damped step does not."""
    stream, batches = _batches(group=32, rows_pad=band_block_length(W))
    batch = batches[0]
    batch.negatives = np.zeros_like(batch.negatives)  # every group draws word 0 only
    norms = {}
    for kappa in (0.0, 1.0):
        p = init_params(V, D, init="centered", nce=False, rng=mt19937_rng(0, "init"))
        p.w_in *= 200.0  # late-training sized vectors
        step = make_step(StepConfig("skipgram", "neg", W, 5, 32, damping=kappa), p, None,
                         stream.rows, engine="torch")
        for _ in range(5):
            step(batch, 1.0)
        norms[kappa] = float(np.linalg.norm(p.w_out[0]))
    assert norms[1.0] < norms[0.0] / 5


def test_band_scalar_helpers_match_the_gemm_forms() -> None:
    band = Band(rows=32, window=3)
    g = torch.Generator().manual_seed(0)
    c = torch.rand(32, band.J, generator=g)
    col = torch.rand(32 + 6, generator=g)
    x = torch.rand(32, generator=g)
    torch.testing.assert_close(band.diag_dot(c, col),
                               band.gather(band.band(c), col.unsqueeze(1)).view(-1))
    torch.testing.assert_close(band.diag_scatter(c, x),
                               band.scatter(band.band(c), x.unsqueeze(1)).view(-1))


@pytest.mark.parametrize("engine", ["torch", "native"])
def test_nce_damping_of_an_input_row_uses_its_partners_norms_only(engine: str) -> None:
    """An input row's NCE logit v·u + b − log kQ moves by lr·g·|u|²: no +1 for the bias.

    (The +1 belongs to output rows, whose logits move with their vector and their bias.)
    Small output vectors make the difference large: with |u|² + 1 the step was ~28× smaller.
    """
    v_n, d, w, r, k, lr, kappa = 10, 4, 1, 16, 2, 0.5, 1.0
    g = torch.Generator().manual_seed(0)
    w_in, w_out = torch.randn(v_n, d, generator=g), torch.randn(v_n, d, generator=g) * 0.01
    log_kq = torch.from_numpy(NoiseDistribution(np.arange(1, v_n + 1)).log_expected_count(k))
    span = np.array([1] + [0] * r + [2])  # word 0 is every centre
    mask = np.ones((r, 2 * w + 1), dtype=np.uint8)
    mask[:, w] = 0
    ctx = mask.sum(1).astype(np.float32)
    negs = np.array([[3, 4]])  # one group of all 16 centres, S = 2 noise words
    batch = Batch(span[w : w + r].copy(), span, mask, ctx, negs, int(ctx.sum()), r, 0, Cursor())

    def step(damping: float) -> torch.Tensor:
        p = Word2VecParams(w_in.numpy().copy(), w_out.numpy().copy(),
                           np.zeros(v_n, dtype=np.float32))
        make_step(StepConfig("skipgram", "nce", w, k, r, damping=damping), p,
                  log_kq.numpy().copy(), r, engine=engine, threads=2)(batch, lr)
        return torch.from_numpy(p.w_in[0]) - w_in[0]

    h = 0.0  # Σ |∂L/∂s| · |u|² over row 0's terms: its contexts and its noise words
    for t in range(r):
        for c in (int(span[t]), int(span[t + 2 * w])):  # offsets −1 and +1
            s = w_in[0] @ w_out[c] - log_kq[c]
            h += float(1 - torch.sigmoid(s)) * float(w_out[c] @ w_out[c])
        for n in negs[0].tolist():  # weight K/S per context: 2 · 2/2
            s = w_in[0] @ w_out[n] - log_kq[n]
            h += 2.0 * float(torch.sigmoid(s)) * float(w_out[n] @ w_out[n])
    ratio = step(kappa) / step(0.0)
    torch.testing.assert_close(ratio, torch.full_like(ratio, 1 / (1 + lr / kappa * h)),
                               rtol=1e-3, atol=0)


@pytest.mark.parametrize("engine", ["torch", "native"])
def test_cbow_damping_of_a_context_row_follows_the_mean_weight(engine: str) -> None:
    """A context row takes the whole d_h of each centre but moves h by 1/count of its step, so
    its curvature is Σ_t (1/count_t)·h_t with h_t = Σ |∂L/∂s|·|partner|² (no bias for NCE)."""
    v_n, d, w, r, k, lr, kappa = 10, 4, 1, 16, 2, 0.5, 1.0
    g = torch.Generator().manual_seed(1)
    w_in, w_out = torch.randn(v_n, d, generator=g), torch.randn(v_n, d, generator=g)
    span = np.array([5] + [0, 1] * (r // 2) + [5])  # contexts alternate; word 0 and 1 rows
    mask = np.ones((r, 2 * w + 1), dtype=np.uint8)
    mask[:, w] = 0
    ctx = mask.sum(1).astype(np.float32)  # two contexts per centre
    negs = np.array([[3, 4]])
    batch = Batch(span[w : w + r].copy(), span, mask, ctx, negs, int(ctx.sum()), r, 0, Cursor())

    def step(damping: float) -> torch.Tensor:
        p = Word2VecParams(w_in.numpy().copy(), w_out.numpy().copy())
        make_step(StepConfig("cbow", "neg", w, k, r, damping=damping), p, None, r,
                  engine=engine, threads=2)(batch, lr)
        # word 5 is a context of the first and last centres only
        return torch.from_numpy(p.w_in[5]) - w_in[5]

    h = 0.0
    for t in (0, r - 1):
        ids = [int(span[t]), int(span[t + 2 * w])]
        hid = (w_in[ids[0]] + w_in[ids[1]]) / 2
        c = int(span[t + w])
        h_t = float(1 - torch.sigmoid(hid @ w_out[c])) * float(w_out[c] @ w_out[c])
        for n in negs[0].tolist():
            h_t += k / 2 * float(torch.sigmoid(hid @ w_out[n])) * float(w_out[n] @ w_out[n])
        h += h_t / 2  # the mean's weight 1/count
    ratio = step(kappa) / step(0.0)
    torch.testing.assert_close(ratio, torch.full_like(ratio, 1 / (1 + lr / kappa * h)),
                               rtol=1e-3, atol=0)
