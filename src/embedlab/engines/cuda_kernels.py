"""The CUDA engine's Triton kernels: the batch specification's draws and one training step.

A step is two launches, each deterministic by construction (no atomics):

1. ``skipgram_tiles`` or ``cbow_tiles`` (SPLIT programs per tile of TG batch rows, inside one
   group of centres that shares S noise words): the scores of the tile's centres against the
   TG+2W window rows around them — one band of a small matrix product — and against the
   group's noise words, the loss, and every gradient: the centres' (skip-gram) or the centre
   words' output rows (CBOW) whole, and the tile's part of each window row's and each noise
   row's gradient, written as a contribution of its own. Each of a tile's SPLIT programs
   computes the scores (the same way, so the same bits) and writes the gradients of its own
   slices of BDG dimensions: more programs per step at the same batch, where one program per
   tile leaves most of a GPU's multiprocessors waiting on its loads;
2. ``apply_rows``, both matrices in one launch: every contribution a row received in the step,
   summed in one fixed order — the order of a stable sort of the step's row ids, planned per
   chunk — then damped and added to the row by the one program that owns it.

Notation as in :mod:`embedlab.engines.torch`, whose mathematics these kernels follow (agreement
is tested to float32 rounding). Vectors are read in slices of BDK dimensions, so the registers a
program needs do not grow with ``--dim``; the scores are summed over slices of BDK in
ascending order, whatever SPLIT and BDG are. Matrix products are ``tl.dot`` in IEEE float32 (no
TF32), so the GPU's results differ from the CPU engines' only by summation order.
"""

from __future__ import annotations

# first: under $EMBEDLAB_CUDA_INTERPRET it sets TRITON_INTERPRET, which triton reads when it
# defines kernels (its own too), i.e. on import
import embedlab.engines.cuda  # noqa: F401  isort: skip

import triton
import triton.language as tl


@triton.jit
def _log_sigmoid(x):
    return tl.minimum(x, 0.0) - tl.log(1.0 + tl.exp(-tl.abs(x)))


# ---- the batch specification's draws (docs/batches.md) -------------------------------------
@triton.jit
def position_draws(tok_ptr, keep_ptr, kept_ptr, window_ptr, n, lo, key, epoch, W,
                   SUBSAMPLE: tl.constexpr, BLOCK: tl.constexpr):
    """Subsampling's verdict and the window of positions lo..lo+n of the reading order."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    q = (i + lo).to(tl.uint64)
    c0, c1 = (q & 0xFFFFFFFF).to(tl.uint32), (q >> 32).to(tl.uint32)
    c2 = tl.zeros_like(c0) + epoch
    x0, x1, _, _ = tl.philox(key, c0, c1, c2, tl.zeros_like(c0))
    if SUBSAMPLE:
        tok = tl.load(tok_ptr + i, mask=inside, other=0)
        threshold = tl.load(keep_ptr + tok, mask=inside, other=0)
        kept = x0.to(tl.int64) < threshold
    else:
        kept = tl.full((BLOCK,), 1, tl.int1)
    b = 1 + ((x1.to(tl.uint64) * (tl.zeros_like(q) + W)) >> 32)
    tl.store(kept_ptr + i, kept.to(tl.int8), mask=inside)
    tl.store(window_ptr + i, b.to(tl.int32), mask=inside)


@triton.jit
def noise_draws(out_ptr, threshold_ptr, alias_ptr, n, vocab, chunk, epoch, key,
                BLOCK: tl.constexpr):
    """Noise draws d = 0..n-1 of a chunk: Walker's alias table at Philox (d, chunk, epoch, 1)."""
    d = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = d < n
    c0 = d.to(tl.uint32)
    c1 = tl.zeros_like(c0) + chunk
    c2 = tl.zeros_like(c0) + epoch
    y0, y1, _, _ = tl.philox(key, c0, c1, c2, tl.zeros_like(c0) + 1)
    wide = y0.to(tl.uint64)
    column = ((wide * (tl.zeros_like(wide) + vocab)) >> 32).to(tl.int64)
    threshold = tl.load(threshold_ptr + column, mask=inside, other=0)
    alias = tl.load(alias_ptr + column, mask=inside, other=0)
    word = tl.where(y1.to(tl.int64) < threshold, column, alias)
    tl.store(out_ptr + d, word, mask=inside)


# ---- a step: 1. centre tiles --------------------------------------------------------------
@triton.jit
def _tile(step_ptr, tok_ptr, ctx_ptr, mask_ptr, B, W: tl.constexpr, J: tl.constexpr,
          TG: tl.constexpr, SW: tl.constexpr):
    """The tile's batch rows and centres, and its window as a band: the tile's TG centres and
    the TG+2W window rows around them (padded to SW), ``m[t, c]`` = 1 where window row c is a
    context of centre t (offset c − t − W)."""
    step = tl.load(step_ptr).to(tl.int64)
    local = tl.arange(0, TG)
    rows = tl.program_id(0) * TG + local
    t = step * B + rows  # the centres' index in the chunk
    valid = rows < B  # rows past B belong to the next batch: no contexts here
    ctx = tl.load(ctx_ptr + t, mask=valid, other=0.0)
    c = tl.arange(0, SW)
    in_span = c < TG + 2 * W
    span = tl.load(tok_ptr + step * B + tl.program_id(0) * TG + c, mask=in_span, other=0)
    j = c[None, :] - local[:, None]
    band = (j >= 0) & (j < J) & valid[:, None] & in_span[None, :]
    m = tl.load(mask_ptr + t[:, None] * J + j, mask=band, other=0).to(tl.float32)
    return step, rows, t, ctx, c, in_span, span, m


@triton.jit
def _noise_ids(negs_ptr, step, groups, S, G, TG: tl.constexpr, SP: tl.constexpr):
    """The S noise words the tile's group shares (padded to SP; ``inside`` marks real ones)."""
    g = (tl.program_id(0) * TG) // G
    s = tl.arange(0, SP)
    inside = s < S
    nid = tl.load(negs_ptr + (step * groups + g) * S + s, mask=inside, other=0)
    return s, inside, nid


@triton.jit
def _dot(a, b, USE_DOT: tl.constexpr):
    """a @ b in IEEE float32; tiles under 16 rows (tl.dot's minimum) by broadcasting."""
    if USE_DOT:
        return tl.dot(a, b, input_precision="ieee")
    return tl.sum(a[:, :, None] * b[None, :, :], axis=1)


@triton.jit
def skipgram_tiles(step_ptr, tok_ptr, mask_ptr, ctx_ptr, negs_ptr, w_in, w_out, b_out, log_kq,
                   loss_ptr, in_d, in_h, out_d, out_h, out_b,
                   D, B, S, G, groups, tiles, noise_weight, bias_sq,
                   W: tl.constexpr, J: tl.constexpr, TG: tl.constexpr, SW: tl.constexpr,
                   SP: tl.constexpr, BDK: tl.constexpr, NCE: tl.constexpr,
                   SKIP_HITS: tl.constexpr, USE_DOT: tl.constexpr, SPLIT: tl.constexpr,
                   BDG: tl.constexpr):
    """Skip-gram on a tile: scores, loss, the centres' gradients, and the tile's parts of its
    window rows' and its noise rows' gradients (each written as a contribution of its own)."""
    step, rows, t, ctx, c, in_span, span, m = _tile(step_ptr, tok_ptr, ctx_ptr, mask_ptr, B,
                                                    W, J, TG, SW)
    s, s_in, nid = _noise_ids(negs_ptr, step, groups, S, G, TG, SP)
    cent = tl.load(tok_ptr + W + t)
    pos = tl.zeros((TG, SW), tl.float32)
    neg = tl.zeros((TG, SP), tl.float32)
    v_sq = tl.zeros((TG,), tl.float32)
    u_sq = tl.zeros((SW,), tl.float32)
    n_sq = tl.zeros((SP,), tl.float32)
    for dk in range(0, D, BDK):  # pass 1: scores and squared norms
        d = dk + tl.arange(0, BDK)
        dm = d < D
        v = tl.load(w_in + cent[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        u = tl.load(w_out + span[:, None] * D + d[None, :], mask=in_span[:, None] & dm[None, :],
                    other=0.0)
        nr = tl.load(w_out + nid[:, None] * D + d[None, :], mask=s_in[:, None] & dm[None, :],
                     other=0.0)
        pos += _dot(v, tl.trans(u), USE_DOT)
        neg += _dot(v, tl.trans(nr), USE_DOT)
        v_sq += tl.sum(v * v, axis=1)
        u_sq += tl.sum(u * u, axis=1)
        n_sq += tl.sum(nr * nr, axis=1)
    if NCE:
        pos += (tl.load(b_out + span, mask=in_span, other=0.0)
                - tl.load(log_kq + span, mask=in_span, other=0.0))[None, :]
        neg += (tl.load(b_out + nid, mask=s_in, other=0.0)
                - tl.load(log_kq + nid, mask=s_in, other=0.0))[None, :]
    count = tl.zeros((TG, SP), tl.float32) + ctx[:, None]
    if SKIP_HITS:  # word2vec skips a noise word equal to the pair's context
        same = tl.where((span[:, None] == nid[None, :]) & in_span[:, None], 1.0, 0.0)
        count -= _dot(m, same, USE_DOT)  # exact: sums of at most 2W ones
    weight = tl.where(s_in[None, :], count * noise_weight, 0.0)
    sig_pos, sig_neg = tl.sigmoid(pos), tl.sigmoid(neg)
    loss = -tl.sum(tl.sum(_log_sigmoid(pos) * m, axis=1), axis=0)
    loss -= tl.sum(tl.sum(_log_sigmoid(-neg) * weight, axis=1), axis=0)
    g_pos = (sig_pos - 1.0) * m
    g_neg = sig_neg * weight
    c_pos = (1.0 - sig_pos) * m
    v_sq_b = v_sq + bias_sq  # an output row's logits also move with its bias (NCE)
    # the tile's scalars are written by its first part (masks built from blocks, which
    # Triton's interpreter also takes)
    part = tl.program_id(1)
    lead_t = (rows * 0 + part) == 0
    lead_c = in_span & ((c * 0 + part) == 0)
    lead_s = s_in & ((s * 0 + part) == 0)
    tl.store(in_h + rows, tl.sum(c_pos * u_sq[None, :], axis=1)
             + tl.sum(g_neg * n_sq[None, :], axis=1), mask=lead_t)
    span_slot = tl.program_id(0) * (TG + 2 * W) + c
    tl.store(out_h + span_slot, tl.sum(c_pos * v_sq_b[:, None], axis=0), mask=lead_c)
    tl.store(out_b + span_slot, tl.sum(g_pos, axis=0), mask=lead_c)
    noise_slot = tiles * (TG + 2 * W) + tl.program_id(0) * S + s
    tl.store(out_h + noise_slot, tl.sum(g_neg * v_sq_b[:, None], axis=0), mask=lead_s)
    tl.store(out_b + noise_slot, tl.sum(g_neg, axis=0), mask=lead_s)
    tl.store(loss_ptr + step * tiles + tl.program_id(0), loss, mask=part < 1)
    # pass 2: gradients, part p of SPLIT taking the slices p, p + SPLIT, ... of BDG dimensions
    for dk in range(part * BDG, D, SPLIT * BDG):
        d = dk + tl.arange(0, BDG)
        dm = d < D
        v = tl.load(w_in + cent[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        u = tl.load(w_out + span[:, None] * D + d[None, :], mask=in_span[:, None] & dm[None, :],
                    other=0.0)
        nr = tl.load(w_out + nid[:, None] * D + d[None, :], mask=s_in[:, None] & dm[None, :],
                     other=0.0)
        d_v = _dot(g_pos, u, USE_DOT) + _dot(g_neg, nr, USE_DOT)
        tl.store(in_d + rows[:, None] * D + d[None, :], d_v, mask=dm[None, :])
        d_u = _dot(tl.trans(g_pos), v, USE_DOT)
        tl.store(out_d + span_slot[:, None] * D + d[None, :], d_u,
                 mask=in_span[:, None] & dm[None, :])
        d_n = _dot(tl.trans(g_neg), v, USE_DOT)
        tl.store(out_d + noise_slot[:, None] * D + d[None, :], d_n,
                 mask=s_in[:, None] & dm[None, :])


@triton.jit
def cbow_tiles(step_ptr, tok_ptr, mask_ptr, ctx_ptr, negs_ptr, w_in, w_out, b_out, log_kq,
               loss_ptr, in_d, in_h, out_d, out_h, out_b,
               D, B, R, S, G, groups, tiles, noise_weight, bias_sq,
               W: tl.constexpr, J: tl.constexpr, TG: tl.constexpr, SW: tl.constexpr,
               SP: tl.constexpr, BDK: tl.constexpr, NCE: tl.constexpr,
               SKIP_HITS: tl.constexpr, USE_DOT: tl.constexpr, SPLIT: tl.constexpr,
               BDG: tl.constexpr):
    """CBOW on a tile: the context means, scores, loss, the centre words' gradients, and the
    tile's parts of its window rows' and its noise rows' gradients."""
    step, rows, t, ctx, c, in_span, span, m = _tile(step_ptr, tok_ptr, ctx_ptr, mask_ptr, B,
                                                    W, J, TG, SW)
    s, s_in, nid = _noise_ids(negs_ptr, step, groups, S, G, TG, SP)
    cent = tl.load(tok_ptr + W + t)
    avg = m / tl.maximum(ctx, 1.0)[:, None]
    has = tl.where(ctx > 0, 1.0, 0.0)
    pos = tl.zeros((TG,), tl.float32)
    u_sq = tl.zeros((TG,), tl.float32)
    h_sq = tl.zeros((TG,), tl.float32)
    neg = tl.zeros((TG, SP), tl.float32)
    n_sq = tl.zeros((SP,), tl.float32)
    for dk in range(0, D, BDK):  # pass 1: the means, scores and squared norms
        d = dk + tl.arange(0, BDK)
        dm = d < D
        x = tl.load(w_in + span[:, None] * D + d[None, :], mask=in_span[:, None] & dm[None, :],
                    other=0.0)
        h = _dot(avg, x, USE_DOT)
        u = tl.load(w_out + cent[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        nr = tl.load(w_out + nid[:, None] * D + d[None, :], mask=s_in[:, None] & dm[None, :],
                     other=0.0)
        pos += tl.sum(h * u, axis=1)
        u_sq += tl.sum(u * u, axis=1)
        h_sq += tl.sum(h * h, axis=1)
        neg += _dot(h, tl.trans(nr), USE_DOT)
        n_sq += tl.sum(nr * nr, axis=1)
    count = tl.zeros((TG, SP), tl.float32) + has[:, None]
    if SKIP_HITS:  # word2vec skips a noise word equal to the centre (CBOW's target)
        count = tl.maximum(count - tl.where(cent[:, None] == nid[None, :], 1.0, 0.0), 0.0)
    if NCE:
        pos += tl.load(b_out + cent) - tl.load(log_kq + cent)
        neg += (tl.load(b_out + nid, mask=s_in, other=0.0)
                - tl.load(log_kq + nid, mask=s_in, other=0.0))[None, :]
    weight = tl.where(s_in[None, :], count * noise_weight, 0.0)
    sig_pos, sig_neg = tl.sigmoid(pos), tl.sigmoid(neg)
    loss = -tl.sum(_log_sigmoid(pos) * has, axis=0)
    loss -= tl.sum(tl.sum(_log_sigmoid(-neg) * weight, axis=1), axis=0)
    g_pos = (sig_pos - 1.0) * has
    g_neg = sig_neg * weight
    c_pos = (1.0 - sig_pos) * has
    h_sq_b = h_sq + bias_sq
    # a window row moves with the whole step of the mean and shifts it by its weight
    h_h = c_pos * u_sq + tl.sum(g_neg * n_sq[None, :], axis=1)
    # the tile's scalars are written by its first part (masks built from blocks, which
    # Triton's interpreter also takes)
    part = tl.program_id(1)
    lead_t = (rows * 0 + part) == 0
    lead_c = in_span & ((c * 0 + part) == 0)
    lead_s = s_in & ((s * 0 + part) == 0)
    span_slot = tl.program_id(0) * (TG + 2 * W) + c
    tl.store(in_h + span_slot, tl.sum(avg * h_h[:, None], axis=0), mask=lead_c)
    tl.store(out_h + rows, c_pos * h_sq_b, mask=lead_t)
    tl.store(out_b + rows, g_pos, mask=lead_t)
    noise_slot = R + tl.program_id(0) * S + s
    tl.store(out_h + noise_slot, tl.sum(g_neg * h_sq_b[:, None], axis=0), mask=lead_s)
    tl.store(out_b + noise_slot, tl.sum(g_neg, axis=0), mask=lead_s)
    tl.store(loss_ptr + step * tiles + tl.program_id(0), loss, mask=part < 1)
    # pass 2: gradients, part p of SPLIT taking the slices p, p + SPLIT, ... of BDG dimensions
    for dk in range(part * BDG, D, SPLIT * BDG):
        d = dk + tl.arange(0, BDG)
        dm = d < D
        x = tl.load(w_in + span[:, None] * D + d[None, :], mask=in_span[:, None] & dm[None, :],
                    other=0.0)
        h = _dot(avg, x, USE_DOT)
        u = tl.load(w_out + cent[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        nr = tl.load(w_out + nid[:, None] * D + d[None, :], mask=s_in[:, None] & dm[None, :],
                     other=0.0)
        d_h = g_pos[:, None] * u + _dot(g_neg, nr, USE_DOT)
        # word2vec's CBOW rule: every context row receives the whole gradient of its mean
        d_x = _dot(tl.trans(m), d_h, USE_DOT)
        tl.store(in_d + span_slot[:, None] * D + d[None, :], d_x,
                 mask=in_span[:, None] & dm[None, :])
        tl.store(out_d + rows[:, None] * D + d[None, :], g_pos[:, None] * h, mask=dm[None, :])
        d_n = _dot(tl.trans(g_neg), h, USE_DOT)
        tl.store(out_d + noise_slot[:, None] * D + d[None, :], d_n,
                 mask=s_in[:, None] & dm[None, :])


# ---- a step: 2. each row's contributions, summed in one order, damped and applied -----------
@triton.jit
def apply_rows(step_ptr, lr_ptr, D, programs_in,
               in_heads, in_ends, in_sid, in_order, in_d, in_h, w_in, kappa_in, n_in,
               out_heads, out_ends, out_sid, out_order, out_d, out_h, out_b, w_out, b_out,
               kappa_out, n_out,
               DAMP_IN: tl.constexpr, DAMP_OUT: tl.constexpr, BIAS: tl.constexpr,
               MB: tl.constexpr, BDK: tl.constexpr):
    """Both matrices' rows in one launch: programs 0..programs_in−1 own the input rows,
    the others the output rows (independent: they read contributions, write other rows), so
    neither waits for the other's longest row."""
    step = tl.load(step_ptr).to(tl.int64)
    lr = tl.load(lr_ptr + step)
    k = tl.program_id(0)
    if k < programs_in:
        _apply_row(k, step, in_heads, in_ends, in_sid, in_order, in_d, in_h, in_h, w_in, w_in,
                   in_h, lr, kappa_in, D, n_in, False, DAMP_IN, False, MB, BDK)
    else:
        _apply_row(k - programs_in, step, out_heads, out_ends, out_sid, out_order, out_d, out_h,
                   out_b, w_out, b_out, out_h, lr, kappa_out, D, n_out, BIAS, DAMP_OUT, False,
                   MB, BDK)


@triton.jit
def sum_rows(step_ptr, D, programs_in,
             in_heads, in_ends, in_sid, in_order, in_d, in_h, in_sum, in_sum_h, n_in,
             out_heads, out_ends, out_sid, out_order, out_d, out_h, out_b, out_sum, out_sum_h,
             out_sum_b, n_out, BIAS: tl.constexpr, MB: tl.constexpr, BDK: tl.constexpr):
    """As :func:`apply_rows`, but each row's sums are written to slot k of ``*_sum`` (rows),
    ``*_sum_h`` (curvature) and ``out_sum_b`` (bias gradient) instead of applied: a
    micro-batch's contributions summed per row, in the order one step would sum them."""
    step = tl.load(step_ptr).to(tl.int64)
    k = tl.program_id(0)
    if k < programs_in:
        _apply_row(k, step, in_heads, in_ends, in_sid, in_order, in_d, in_h, in_h, in_sum,
                   in_sum, in_sum_h, 0.0, 1.0, D, n_in, False, False, True, MB, BDK)
    else:
        _apply_row(k - programs_in, step, out_heads, out_ends, out_sid, out_order, out_d, out_h,
                   out_b, out_sum, out_sum_b, out_sum_h, 0.0, 1.0, D, n_out, BIAS, False, True,
                   MB, BDK)


@triton.jit
def _apply_row(k, step, heads_ptr, ends_ptr, sid_ptr, order_ptr, d_ptr, h_ptr, b_ptr, param,
               bias, h_sum, lr, kappa, D, n_occ, HAS_BIAS: tl.constexpr, DAMP: tl.constexpr,
               SUM_ONLY: tl.constexpr, MB: tl.constexpr, BDK: tl.constexpr):
    """Row ``sid[head]`` of slot k: param += −lr·s·Σ d over its occurrences head..end−1 of the
    sorted order, s = 1/(1 + lr·Σh/κ) (1 undamped); the program is the row's only writer. One
    pass over the occurrences sums the damping's curvature and the first slice of dimensions
    (the factor scales the finished sum, so the order of the sums is that of two passes).
    ``SUM_ONLY``: row k of ``param`` (and of ``bias``, ``h_sum``) receives the sums instead."""
    base = step * n_occ
    start = tl.load(heads_ptr + base + k)
    end = tl.load(ends_ptr + base + k)  # == start for an unused slot: nothing to do
    row = tl.load(sid_ptr + base + start)
    if SUM_ONLY:
        row = k.to(tl.int64)
    occ = tl.arange(0, MB)
    used = end > start
    d = tl.arange(0, BDK)
    dm = (d < D) & ((tl.zeros((BDK,), tl.int32) + used.to(tl.int32)) > 0)
    h = tl.zeros((MB,), tl.float32)
    g = tl.zeros((MB,), tl.float32)
    acc = tl.zeros((BDK,), tl.float32)
    for m0 in range(start, end, MB):
        at = m0 + occ
        ok = at < end
        o = tl.load(order_ptr + base + at, mask=ok, other=0)
        h += tl.load(h_ptr + o, mask=ok, other=0.0)
        if HAS_BIAS:
            g += tl.load(b_ptr + o, mask=ok, other=0.0)
        x = tl.load(d_ptr + o[:, None] * D + d[None, :], mask=ok[:, None] & dm[None, :],
                    other=0.0)
        acc += tl.sum(x, axis=0)
    scale = -lr
    if DAMP:
        scale = scale / (1.0 + lr / kappa * tl.sum(h, axis=0))
    if SUM_ONLY:
        scale = 1.0
        tl.store(h_sum + row, tl.sum(h, axis=0), mask=used)
        tl.store(param + row * D + d, acc, mask=dm)
    else:
        p = tl.load(param + row * D + d, mask=dm, other=0.0)
        tl.store(param + row * D + d, p + scale * acc, mask=dm)
    for dk in range(BDK, D, BDK):  # the other slices, a pass each
        d = dk + tl.arange(0, BDK)
        dm = (d < D) & ((tl.zeros((BDK,), tl.int32) + used.to(tl.int32)) > 0)
        acc = tl.zeros((BDK,), tl.float32)
        for m0 in range(start, end, MB):
            at = m0 + occ
            ok = at < end
            o = tl.load(order_ptr + base + at, mask=ok, other=0)
            x = tl.load(d_ptr + o[:, None] * D + d[None, :], mask=ok[:, None] & dm[None, :],
                        other=0.0)
            acc += tl.sum(x, axis=0)
        if SUM_ONLY:
            tl.store(param + row * D + d, acc, mask=dm)
        else:
            p = tl.load(param + row * D + d, mask=dm, other=0.0)
            tl.store(param + row * D + d, p + scale * acc, mask=dm)
    if HAS_BIAS:
        if SUM_ONLY:
            tl.store(bias + row, tl.sum(g, axis=0), mask=used)
        else:
            b_row = tl.load(bias + row, mask=used, other=0.0)
            tl.store(bias + row, b_row + scale * tl.sum(g, axis=0), mask=used)
