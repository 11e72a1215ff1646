"""The CUDA engine's Triton kernels: the batch specification's draws and one training step.

A step is four launches, each deterministic by construction (no atomics):

1. ``centre_tiles`` (one program per tile of TG batch rows, inside one group of centres that
   shares S noise words): the scores of the tile's centres against their window and the
   group's noise words, the loss, and every gradient the tile can finish alone — the centres'
   (skip-gram) or the centre words' output rows (CBOW), and the tile's part of each noise row's
   gradient, written as a contribution of its own;
2. ``span_rows`` (one program per block of span rows): a window row's contribution, summed over
   the at most 2W+1 centres whose window holds it, in a fixed order;
3. ``apply_rows``, once per matrix: every contribution a row received in the step, summed in
   one fixed order — the order of a stable sort of the step's row ids, planned per chunk — then
   damped and added to the row by the one program that owns it.

Notation as in :mod:`embedlab.engines.torch`, whose mathematics these kernels follow (agreement
is tested to float32 rounding). Vectors are read in slices of BDK dimensions, so the registers a
program needs do not grow with ``--dim``. Matrix products are ``tl.dot`` in IEEE float32 (no
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
def _tile_rows(step_ptr, ctx_ptr, mask_ptr, B, TG: tl.constexpr, J: tl.constexpr,
               JP: tl.constexpr):
    """The tile's batch rows, their chunk rows, contexts and window mask (rows past B: none)."""
    step = tl.load(step_ptr).to(tl.int64)
    rows = tl.program_id(0) * TG + tl.arange(0, TG)
    t = step * B + rows  # the centres' index in the chunk
    valid = rows < B
    ctx = tl.load(ctx_ptr + t, mask=valid, other=0.0)
    jj = tl.arange(0, JP)
    m = tl.load(mask_ptr + t[:, None] * J + jj[None, :],
                mask=valid[:, None] & (jj[None, :] < J), other=0).to(tl.float32)
    return step, rows, t, ctx, jj, m


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
                   loss_ptr, in_d, in_h, out_d, out_h, out_b, gpos_ptr, cpos_ptr, vsq_ptr,
                   D, B, R, S, G, groups, tiles, noise_weight, bias_sq,
                   W: tl.constexpr, J: tl.constexpr, JP: tl.constexpr, TG: tl.constexpr,
                   SP: tl.constexpr, BDK: tl.constexpr, NCE: tl.constexpr,
                   SKIP_HITS: tl.constexpr, USE_DOT: tl.constexpr):
    """Skip-gram: scores, loss and the centre rows' and the tile's noise-row gradients."""
    step, rows, t, ctx, jj, m = _tile_rows(step_ptr, ctx_ptr, mask_ptr, B, TG, J, JP)
    s, s_in, nid = _noise_ids(negs_ptr, step, groups, S, G, TG, SP)
    cent = tl.load(tok_ptr + W + t)
    pos = tl.zeros((TG, JP), tl.float32)
    u_sq = tl.zeros((TG, JP), tl.float32)
    neg = tl.zeros((TG, SP), tl.float32)
    v_sq = tl.zeros((TG,), tl.float32)
    n_sq = tl.zeros((SP,), tl.float32)
    for dk in range(0, D, BDK):  # pass 1: scores and squared norms
        d = dk + tl.arange(0, BDK)
        dm = d < D
        v = tl.load(w_in + cent[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        nr = tl.load(w_out + nid[:, None] * D + d[None, :], mask=s_in[:, None] & dm[None, :],
                     other=0.0)
        neg += _dot(v, tl.trans(nr), USE_DOT)
        v_sq += tl.sum(v * v, axis=1)
        n_sq += tl.sum(nr * nr, axis=1)
        for j in tl.static_range(J):
            sid = tl.load(tok_ptr + t + j)
            u = tl.load(w_out + sid[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
            pos += tl.where(jj[None, :] == j, tl.sum(v * u, axis=1)[:, None], 0.0)
            u_sq += tl.where(jj[None, :] == j, tl.sum(u * u, axis=1)[:, None], 0.0)
    hits = tl.zeros((TG, SP), tl.float32)
    for j in tl.static_range(J):
        sid = tl.load(tok_ptr + t + j)
        m_j = tl.sum(tl.where(jj[None, :] == j, m, 0.0), axis=1)
        if NCE:
            shift = tl.load(b_out + sid) - tl.load(log_kq + sid)
            pos += tl.where(jj[None, :] == j, shift[:, None], 0.0)
        if SKIP_HITS:  # word2vec skips a noise word equal to the pair's context
            hits += tl.where((sid[:, None] == nid[None, :]) & (m_j[:, None] > 0), 1.0, 0.0)
    if NCE:
        neg += (tl.load(b_out + nid, mask=s_in, other=0.0)
                - tl.load(log_kq + nid, mask=s_in, other=0.0))[None, :]
    weight = tl.where(s_in[None, :], (ctx[:, None] - hits) * noise_weight, 0.0)
    sig_pos, sig_neg = tl.sigmoid(pos), tl.sigmoid(neg)
    loss = -tl.sum(tl.sum(_log_sigmoid(pos) * m, axis=1), axis=0)
    loss -= tl.sum(tl.sum(_log_sigmoid(-neg) * weight, axis=1), axis=0)
    g_pos = (sig_pos - 1.0) * m
    g_neg = sig_neg * weight
    c_pos = (1.0 - sig_pos) * m
    v_sq_b = v_sq + bias_sq  # an output row's logits also move with its bias (NCE)
    tl.store(gpos_ptr + rows[:, None] * JP + jj[None, :], g_pos)
    tl.store(cpos_ptr + rows[:, None] * JP + jj[None, :], c_pos)
    tl.store(vsq_ptr + rows, v_sq_b)
    tl.store(in_h + rows, tl.sum(c_pos * u_sq, axis=1) + tl.sum(g_neg * n_sq[None, :], axis=1))
    slot = R + 2 * W + tl.program_id(0) * S + s  # this tile's contribution to its noise rows
    tl.store(out_h + slot, tl.sum(g_neg * v_sq_b[:, None], axis=0), mask=s_in)
    tl.store(out_b + slot, tl.sum(g_neg, axis=0), mask=s_in)
    tl.store(loss_ptr + step * tiles + tl.program_id(0), loss)
    for dk in range(0, D, BDK):  # pass 2: gradients
        d = dk + tl.arange(0, BDK)
        dm = d < D
        v = tl.load(w_in + cent[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        nr = tl.load(w_out + nid[:, None] * D + d[None, :], mask=s_in[:, None] & dm[None, :],
                     other=0.0)
        d_v = _dot(g_neg, nr, USE_DOT)
        for j in tl.static_range(J):
            sid = tl.load(tok_ptr + t + j)
            u = tl.load(w_out + sid[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
            g_j = tl.sum(tl.where(jj[None, :] == j, g_pos, 0.0), axis=1)
            d_v += g_j[:, None] * u
        tl.store(in_d + rows[:, None] * D + d[None, :], d_v, mask=dm[None, :])
        d_n = _dot(tl.trans(g_neg), v, USE_DOT)
        tl.store(out_d + slot[:, None] * D + d[None, :], d_n, mask=s_in[:, None] & dm[None, :])


@triton.jit
def cbow_tiles(step_ptr, tok_ptr, mask_ptr, ctx_ptr, negs_ptr, w_in, w_out, b_out, log_kq,
               loss_ptr, out_d, out_h, out_b, dh_ptr, hh_ptr, hid_ptr,
               D, B, R, S, G, groups, tiles, noise_weight, bias_sq,
               W: tl.constexpr, J: tl.constexpr, JP: tl.constexpr, TG: tl.constexpr,
               SP: tl.constexpr, BDK: tl.constexpr, NCE: tl.constexpr,
               SKIP_HITS: tl.constexpr, USE_DOT: tl.constexpr):
    """CBOW: the context means, scores, loss, the centre words' and the tile's noise-row
    gradients, and the gradient of each mean (for ``cbow_span``)."""
    step, rows, t, ctx, jj, m = _tile_rows(step_ptr, ctx_ptr, mask_ptr, B, TG, J, JP)
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
        h = tl.zeros((TG, BDK), tl.float32)
        for j in tl.static_range(J):
            sid = tl.load(tok_ptr + t + j)
            a_j = tl.sum(tl.where(jj[None, :] == j, avg, 0.0), axis=1)
            x = tl.load(w_in + sid[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
            h += a_j[:, None] * x
        tl.store(hid_ptr + rows[:, None] * D + d[None, :], h, mask=dm[None, :])
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
    tl.store(hh_ptr + rows, c_pos * u_sq + tl.sum(g_neg * n_sq[None, :], axis=1))
    tl.store(out_h + rows, c_pos * h_sq_b)
    tl.store(out_b + rows, g_pos)
    slot = R + tl.program_id(0) * S + s
    tl.store(out_h + slot, tl.sum(g_neg * h_sq_b[:, None], axis=0), mask=s_in)
    tl.store(out_b + slot, tl.sum(g_neg, axis=0), mask=s_in)
    tl.store(loss_ptr + step * tiles + tl.program_id(0), loss)
    for dk in range(0, D, BDK):  # pass 2: gradients
        d = dk + tl.arange(0, BDK)
        dm = d < D
        h = tl.load(hid_ptr + rows[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        u = tl.load(w_out + cent[:, None] * D + d[None, :], mask=dm[None, :], other=0.0)
        nr = tl.load(w_out + nid[:, None] * D + d[None, :], mask=s_in[:, None] & dm[None, :],
                     other=0.0)
        d_h = g_pos[:, None] * u + _dot(g_neg, nr, USE_DOT)
        tl.store(dh_ptr + rows[:, None] * D + d[None, :], d_h, mask=dm[None, :])
        tl.store(out_d + rows[:, None] * D + d[None, :], g_pos[:, None] * h, mask=dm[None, :])
        d_n = _dot(tl.trans(g_neg), h, USE_DOT)
        tl.store(out_d + slot[:, None] * D + d[None, :], d_n, mask=s_in[:, None] & dm[None, :])


# ---- a step: 2. span rows ----------------------------------------------------------------
@triton.jit
def skipgram_span(step_ptr, tok_ptr, w_in, gpos_ptr, cpos_ptr, vsq_ptr, out_d, out_h, out_b,
                  D, B, R, W: tl.constexpr, J: tl.constexpr, JP: tl.constexpr,
                  TR: tl.constexpr, BDK: tl.constexpr):
    """Window row r's output gradient: Σ_j g_pos[r−j, j]·v_{r−j} over the centres r−j."""
    step = tl.load(step_ptr).to(tl.int64)
    r = tl.program_id(0) * TR + tl.arange(0, TR)
    inside = r < R + 2 * W
    h = tl.zeros((TR,), tl.float32)
    b = tl.zeros((TR,), tl.float32)
    for j in tl.static_range(J):
        c = r - j
        ok = inside & (c >= 0) & (c < R)
        h += tl.load(cpos_ptr + c * JP + j, mask=ok, other=0.0) * \
            tl.load(vsq_ptr + c, mask=ok, other=0.0)
        b += tl.load(gpos_ptr + c * JP + j, mask=ok, other=0.0)
    tl.store(out_h + r, h, mask=inside)
    tl.store(out_b + r, b, mask=inside)
    for dk in range(0, D, BDK):
        d = dk + tl.arange(0, BDK)
        dm = d < D
        acc = tl.zeros((TR, BDK), tl.float32)
        for j in tl.static_range(J):
            c = r - j
            ok = inside & (c >= 0) & (c < R)
            g = tl.load(gpos_ptr + c * JP + j, mask=ok, other=0.0)
            cent = tl.load(tok_ptr + W + step * B + c, mask=ok, other=0)
            v = tl.load(w_in + cent[:, None] * D + d[None, :], mask=ok[:, None] & dm[None, :],
                        other=0.0)
            acc += g[:, None] * v
        tl.store(out_d + r[:, None] * D + d[None, :], acc, mask=inside[:, None] & dm[None, :])


@triton.jit
def cbow_span(step_ptr, mask_ptr, ctx_ptr, dh_ptr, hh_ptr, in_d, in_h, D, B, R,
              W: tl.constexpr, J: tl.constexpr, TR: tl.constexpr,
              BDK: tl.constexpr):
    """Window row r's input gradient: the whole gradient of every mean it is part of
    (word2vec's CBOW rule), and its damping curvature through the mean's weight."""
    step = tl.load(step_ptr).to(tl.int64)
    r = tl.program_id(0) * TR + tl.arange(0, TR)
    inside = r < R + 2 * W
    h = tl.zeros((TR,), tl.float32)
    for j in tl.static_range(J):
        c = r - j
        ok = inside & (c >= 0) & (c < B) & (c < R)
        m = tl.load(mask_ptr + (step * B + c) * J + j, mask=ok, other=0).to(tl.float32)
        ctx = tl.load(ctx_ptr + step * B + c, mask=ok, other=1.0)
        h += m / tl.maximum(ctx, 1.0) * tl.load(hh_ptr + c, mask=ok, other=0.0)
    tl.store(in_h + r, h, mask=inside)
    for dk in range(0, D, BDK):
        d = dk + tl.arange(0, BDK)
        dm = d < D
        acc = tl.zeros((TR, BDK), tl.float32)
        for j in tl.static_range(J):
            c = r - j
            ok = inside & (c >= 0) & (c < B) & (c < R)
            m = tl.load(mask_ptr + (step * B + c) * J + j, mask=ok, other=0).to(tl.float32)
            x = tl.load(dh_ptr + c[:, None] * D + d[None, :], mask=ok[:, None] & dm[None, :],
                        other=0.0)
            acc += m[:, None] * x
        tl.store(in_d + r[:, None] * D + d[None, :], acc, mask=inside[:, None] & dm[None, :])


# ---- a step: 3. each row's contributions, summed in one order, damped and applied -----------
@triton.jit
def apply_rows(step_ptr, heads_ptr, ends_ptr, sid_ptr, order_ptr, d_ptr, h_ptr, b_ptr,
               param, bias, lr_ptr, kappa, D, n_occ,
               HAS_BIAS: tl.constexpr, DAMP: tl.constexpr, MB: tl.constexpr,
               BDK: tl.constexpr):
    """Row ``sid[head]``: param += −lr·k·Σ d over its occurrences head..end−1 of the sorted
    order, k = 1/(1 + lr·Σh/κ) (1 undamped); the program is the row's only writer."""
    step = tl.load(step_ptr).to(tl.int64)
    base = step * n_occ
    k = tl.program_id(0)
    start = tl.load(heads_ptr + base + k)
    end = tl.load(ends_ptr + base + k)  # == start for an unused slot: nothing to do
    row = tl.load(sid_ptr + base + start)
    lr = tl.load(lr_ptr + step)
    occ = tl.arange(0, MB)
    h = tl.zeros((MB,), tl.float32)
    g = tl.zeros((MB,), tl.float32)
    for m0 in range(start, end, MB):
        at = m0 + occ
        ok = at < end
        o = tl.load(order_ptr + base + at, mask=ok, other=0)
        h += tl.load(h_ptr + o, mask=ok, other=0.0)
        if HAS_BIAS:
            g += tl.load(b_ptr + o, mask=ok, other=0.0)
    scale = -lr
    if DAMP:
        scale = scale / (1.0 + lr / kappa * tl.sum(h, axis=0))
    used = end > start
    for dk in range(0, D, BDK):
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
        p = tl.load(param + row * D + d, mask=dm, other=0.0)
        tl.store(param + row * D + d, p + scale * acc, mask=dm)
    if HAS_BIAS:
        b_row = tl.load(bias + row, mask=used, other=0.0)
        tl.store(bias + row, b_row + scale * tl.sum(g, axis=0), mask=used)
