/* embedlab's native word2vec steps: the mathematics of Word2VecStep._skipgram and _cbow, fused.
 *
 * Built on first use by embedlab/engines/native.py (cc -O3 -march=native -fopenmp) and called
 * through ctypes on the memory of torch tensors. One call is one synchronous SGD step:
 *
 *   A. per group of centres (parallel): positive and noise scores, their gradients, the
 *      gradient of each centre's input vector (CBOW: of each centre's hidden vector and output
 *      row), of each of the group's noise rows, and the curvatures h. The noise terms are three
 *      small GEMMs on packed copies of the rows (group_noise, shared by both steps);
 *   B. per span position (parallel): the gradient of each row in the window halo — output
 *      rows for skip-gram, the context (input) rows for CBOW;
 *   C. updates (parallel by row id): every row's contributions are summed in batch order and
 *      applied with the damped step lr / (1 + lr·H/κ), H the row's summed curvature.
 *
 * Every output element is computed by one thread in a fixed order, so the result does not
 * depend on the number of threads: a run is bit-identical with 1, 2 or 64 threads.
 * exp and log1p are evaluated by the polynomials below (not libm) so that the compiler can
 * vectorise them and the bits do not depend on the C library's version.
 */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VL 8 /* floats per vector */

/* Seconds spent inside the steps' (and the batch generator's) parallel regions, for the
 * benchmark of the serial share (benchmarks/scaling.py); the master thread adds each region's
 * time once it has joined. */
double w2v_parallel_seconds = 0.0;
typedef float v8 __attribute__((vector_size(VL * sizeof(float))));
typedef float v8u __attribute__((vector_size(VL * sizeof(float)), aligned(4)));

static inline v8 load(const float *p) { return *(const v8u *)p; }
static inline void store(float *p, v8 x) { *(v8u *)p = x; }
static inline v8 splat(float a) { return (v8){a, a, a, a, a, a, a, a}; }
static inline float hsum(v8 x) {
    return ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]));
}

/* a·b over d floats (any d; unaligned rows) */
static inline float dot(const float *restrict a, const float *restrict b, int d) {
    v8 acc0 = splat(0.0f), acc1 = splat(0.0f);
    int i = 0;
    for (; i + 2 * VL <= d; i += 2 * VL) {
        acc0 += load(a + i) * load(b + i);
        acc1 += load(a + i + VL) * load(b + i + VL);
    }
    if (i + VL <= d) {
        acc0 += load(a + i) * load(b + i);
        i += VL;
    }
    float s = hsum(acc0 + acc1);
    for (; i < d; i++) s += a[i] * b[i];
    return s;
}

/* y += a·x over d floats */
static inline void axpy(float a, const float *restrict x, float *restrict y, int d) {
    const v8 av = splat(a);
    int i = 0;
    for (; i + VL <= d; i += VL) store(y + i, load(y + i) + av * load(x + i));
    for (; i < d; i++) y[i] += a * x[i];
}

/* asks for a row of d floats to be brought into cache (no effect on results) */
static inline void prefetch_row(const float *p, int d) {
    for (int o = 0; o < d; o += 16) __builtin_prefetch(p + o);
    __builtin_prefetch(p + d - 1);
}

/* exp(x) for x <= 0 (Cody–Waite reduction, degree-6 polynomial; relative error ~2e-7) */
static inline float exp_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    /* round to nearest by the 1.5·2^23 trick: vectorises, unlike roundf */
    const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;
    float p = 1.3888889e-3f;
    p = p * r + 8.3333333e-3f;
    p = p * r + 4.1666667e-2f;
    p = p * r + 1.6666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* log(1 + e) for e in [0, 1]: 2·atanh(z), z = e/(2+e) <= 1/3 (relative error ~1e-7) */
static inline float log1p_unit(float e) {
    const float z = e / (2.0f + e), z2 = z * z;
    float p = 1.0f / 13.0f;
    p = p * z2 + 1.0f / 11.0f;
    p = p * z2 + 1.0f / 9.0f;
    p = p * z2 + 1.0f / 7.0f;
    p = p * z2 + 1.0f / 5.0f;
    p = p * z2 + 1.0f / 3.0f;
    p = p * z2 + 1.0f;
    return 2.0f * z * p;
}

/* One weighted term; sigmoid_terms (float weights, noise words) and mask_terms (0/1 byte
 * weights, positive pairs) share it. */
#define SIGMOID_TERM(x, w, sign, g, c, loss)                                                   \
    do {                                                                                       \
        const float a_ = (x) < 0.0f ? -(x) : (x);                                              \
        const float e_ = exp_neg(-a_);                                                         \
        const float sg_ = (x) >= 0.0f ? 1.0f / (1.0f + e_) : e_ / (1.0f + e_); /* σ(x) */      \
        const float y_ = (sign) * (x); /* −log σ(y) = max(−y, 0) + log(1 + e^−|y|) */          \
        const float nl_ = (y_ < 0.0f ? -y_ : 0.0f) + log1p_unit(e_);                           \
        (loss) += (double)(nl_ * (w));                                                         \
        (g) = ((sign) > 0.0f ? sg_ - 1.0f : sg_) * (w);                                        \
        (c) = ((sign) > 0.0f ? 1.0f - sg_ : sg_) * (w);                                        \
    } while (0)

/* For logits s[0..n) with weights w: out_g[i] = (σ(±s) − [positive])·w, out_c = |out_g| (the
 * damping's curvature, see Word2VecStep), returns Σ −log σ(±s)·w in float64.
 * sign = +1 for positives (target 1), −1 for noise. */
static inline double sigmoid_terms(const float *restrict s, const float *restrict w, int n,
                                   float sign, float *restrict out_g, float *restrict out_c) {
    double loss = 0.0;
#pragma omp simd reduction(+ : loss)
    for (int i = 0; i < n; i++) SIGMOID_TERM(s[i], w[i], sign, out_g[i], out_c[i], loss);
    return loss;
}

/* Positive pairs: σ terms with sign +1, weighted by a 0/1 byte mask. */
static inline double mask_terms(const float *restrict s, const uint8_t *restrict m, int n,
                                float *restrict out_g, float *restrict out_c) {
    double loss = 0.0;
#pragma omp simd reduction(+ : loss)
    for (int i = 0; i < n; i++) {
        const float w = m[i] ? 1.0f : 0.0f;
        SIGMOID_TERM(s[i], w, 1.0f, out_g[i], out_c[i], loss);
    }
    return loss;
}

static inline size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* CBOW, span position r: ds = the whole hidden gradient d_h of every centre t = r − j it is a
 * context of (j descending, so in batch order), as word2vec passes neu1e to each context word;
 * returns its curvature through the mean's weight 1/count (see Word2VecStep._cbow). Shared by
 * the negative-sampling/NCE and the hierarchical-softmax steps. */
static inline float cbow_span_row(int r, int rows, int J, const uint8_t *restrict mask,
                                  const float *restrict d_h, const float *restrict h_h,
                                  const float *restrict contexts, float *restrict ds, int D,
                                  int Dp) {
    memset(ds, 0, sizeof(float) * Dp);
    float h = 0.0f;
    for (int j = J - 1; j >= 0; j--) {
        const int t = r - j;
        if (t < 0 || t >= rows || !mask[(size_t)t * J + j]) continue;
        axpy(1.0f, d_h + (size_t)t * Dp, ds, D);
        h += h_h[t] / contexts[t];
    }
    return h;
}

/* Two rows of a small GEMM: o_x[d] = (o_x[d] if acc else 0) + Σ_k c_x[k·cs] · m[k·Dp + d] for
 * x = a, b, k ascending. Both rows share each load of m, which is what bounds these loops (one
 * row alone does a load per FMA). A single row passes itself as b: the same sums, stored twice. */
static inline void gemm_rows2(float *oa, float *ob, const float *ca, const float *cb, size_t cs,
                              const float *m, int n, int Dp, int acc) {
    int d = 0;
    for (; d + 4 * VL <= Dp; d += 4 * VL) {
        v8 a0 = acc ? load(oa + d) : splat(0), a1 = acc ? load(oa + d + VL) : splat(0),
           a2 = acc ? load(oa + d + 2 * VL) : splat(0), a3 = acc ? load(oa + d + 3 * VL) : splat(0);
        v8 b0 = acc ? load(ob + d) : splat(0), b1 = acc ? load(ob + d + VL) : splat(0),
           b2 = acc ? load(ob + d + 2 * VL) : splat(0), b3 = acc ? load(ob + d + 3 * VL) : splat(0);
        for (int k = 0; k < n; k++) {
            const float *mk = m + (size_t)k * Dp + d;
            const v8 y0 = load(mk), y1 = load(mk + VL), y2 = load(mk + 2 * VL), y3 = load(mk + 3 * VL);
            const v8 xa = splat(ca[(size_t)k * cs]), xb = splat(cb[(size_t)k * cs]);
            a0 += xa * y0; a1 += xa * y1; a2 += xa * y2; a3 += xa * y3;
            b0 += xb * y0; b1 += xb * y1; b2 += xb * y2; b3 += xb * y3;
        }
        store(oa + d, a0); store(oa + d + VL, a1); store(oa + d + 2 * VL, a2); store(oa + d + 3 * VL, a3);
        store(ob + d, b0); store(ob + d + VL, b1); store(ob + d + 2 * VL, b2); store(ob + d + 3 * VL, b3);
    }
    /* the last vectors row by row: one chain each, as the rounding has always been (gcc forms
     * its FMAs differently for a lone chain than for two) */
    for (; d < Dp; d += VL) {
        v8 a = acc ? load(oa + d) : splat(0), b = acc ? load(ob + d) : splat(0); /* before storing */
        for (int k = 0; k < n; k++) a += splat(ca[(size_t)k * cs]) * load(m + (size_t)k * Dp + d);
        for (int k = 0; k < n; k++) b += splat(cb[(size_t)k * cs]) * load(m + (size_t)k * Dp + d);
        store(oa + d, a);
        store(ob + d, b);
    }
}

/* The damped step of a row whose summed curvature is h (rate = lr/κ; 0 turns damping off). */
static inline float damped_step(float lr, float rate, float h) {
    return rate > 0.0f ? -lr / (1.0f + rate * h) : -lr;
}

/* Phase C's pieces shared by both steps. Rows are partitioned by id across the nt threads:
 * thread `me` owns the rows with row_owner(id, nt) == me, so each row's table entry and vector
 * are written by one thread, its contributions taken in batch order (any fixed partition gives
 * the same bits). Every thread tests every id of the step, several times: a multiplicative
 * hash scaled to [0, nt) costs a multiply where the id modulo nt costs a 64-bit division, and
 * it spreads hierarchical softmax's top of the tree (ids V−2, V−3, ...) over the threads. */
static inline int row_owner(int64_t id, int nt) {
    return (int)(((uint64_t)((uint32_t)id * 2654435761u) * (uint32_t)nt) >> 32);
}

/* table[ids[i]] += vals[i] for the rows this thread owns */
static inline void sum_owned(const int64_t *restrict ids, int n, const float *restrict vals,
                             float *restrict table, int nt, int me) {
    for (int i = 0; i < n; i++)
        if (row_owner(ids[i], nt) == me) table[ids[i]] += vals[i];
}

/* table[ids[i]] = 0 for the rows this thread owns (only touched entries: the table is V long) */
static inline void reset_owned(const int64_t *restrict ids, int n, float *restrict table, int nt,
                               int me) {
    for (int i = 0; i < n; i++)
        if (row_owner(ids[i], nt) == me) table[ids[i]] = 0.0f;
}

/* The damped update of the noise rows this thread owns, in batch order, and their NCE biases
 * (bias != NULL): the summed gradient of noise word k of group g over the group's P centres. */
static inline void update_noise_rows(float *restrict w_out, float *restrict bias,
                                     const int64_t *restrict negs, int n_noise, int S, int P,
                                     const float *restrict d_noise, const float *restrict g_neg,
                                     const float *restrict h_out, float lr, float rate, int D,
                                     int Dp, int nt, int me) {
    for (int k = 0; k < n_noise; k++) {
        const int64_t w = negs[k];
        if (row_owner(w, nt) != me) continue;
        const float step = damped_step(lr, rate, h_out[w]);
        axpy(step, d_noise + (size_t)k * Dp, w_out + w * D, D);
        if (bias) {
            const int g = k / S, kk = k % S;
            float gb = 0.0f;
            for (int t = g * P; t < (g + 1) * P; t++) gb += g_neg[(size_t)t * S + kk];
            bias[w] += step * gb;
        }
    }
}

/* Per-thread scratch floats for groups of P centres sharing S noise words (the carving at the
 * top of the parallel region in w2v_skipgram_step): packed centre rows P × Dp, packed noise
 * rows S × Dp, scores and noise weights P × S each, transposed noise rows D × Sv, one tile's
 * scores 4 × Sv; 64 floats keep the next thread's block from sharing a cache line. */
static inline size_t per_thread_floats(size_t P, size_t S, size_t D) {
    const size_t Dp = round_up(D, VL), Sv = round_up(S, VL);
    return P * Dp + S * Dp + 2 * P * S + D * Sv + 4 * Sv + 64;
}

/* Scratch floats the caller provides for one call, for `threads` threads (see native.py);
 * mirrors the carving at the top of w2v_skipgram_step, plus one rows × Dp block, which makes
 * it enough for w2v_cbow_step too (its carve has that block more and, since J >= 3, less of
 * the rest). */
size_t w2v_scratch_floats(int rows, int window, int groups, int shared, int dim, int threads) {
    const size_t J = 2 * (size_t)window + 1, span = (size_t)rows + 2 * (size_t)window;
    const size_t noise = (size_t)groups * shared, dp = round_up((size_t)dim, VL);
    const size_t per_group = (size_t)rows / (size_t)groups;
    const size_t blocks[] = {(size_t)rows * dp, span * dp, noise * dp, (size_t)rows * J,
                             (size_t)rows * J, (size_t)rows * J, (size_t)rows * shared,
                             (size_t)rows * shared, (size_t)rows, (size_t)rows,
                             span, span, noise, noise, 2 * (size_t)groups,
                             (size_t)rows * dp}; /* the last: CBOW's output-row gradients */
    size_t n = 0;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) n += round_up(blocks[i], 16);
    return n + (size_t)threads * per_thread_floats(per_group, (size_t)shared, (size_t)dim) + 64;
}

/* The noise terms of one group of P centres (or CBOW hidden vectors) sharing S noise words,
 * shared by both architectures. In: Vp (P × Dp) the packed centre-side vectors, Np (S × Dp)
 * the packed noise rows, n_pos (P) each centre's number of positive examples, unit the weight
 * of a noise term per positive (K / S), n_sq / x_sq the squared norms the curvatures use.
 * With tgt (negative sampling), a noise word equal to the target of one of a centre's
 * positives does not count for that positive — word2vec skips such a draw: centre i's
 * targets are tgt[i + j] for j < TJ where tmask[i·TJ + j] (tmask NULL: all). Out: the terms' gradients gn and curvatures cn (P × S),
 * d_x += gn · Np (P × Dp) and h_x += cn · n_sq, d_noise = gnᵀ · Vp (S × Dp) and
 * h_noise = cnᵀ · x_sq; returns the terms' summed loss. Nt, scv, sc, wts: per-thread scratch. */
static double group_noise(const float *restrict Vp, const float *restrict Np, float *restrict Nt,
                          float *restrict scv, float *restrict sc, float *restrict wts,
                          const float *restrict n_pos, float unit,
                          const int64_t *restrict tgt, const uint8_t *restrict tmask, int TJ,
                          const int64_t *restrict gneg,
                          const float *restrict bias, const float *restrict log_kq,
                          float *restrict gn, float *restrict cn, float *restrict d_x,
                          float *restrict h_x, float *restrict d_noise, float *restrict h_noise,
                          const float *restrict n_sq, const float *restrict x_sq,
                          int P, int S, int D, int Dp, int damp) {
    const int Sv = (int)round_up((size_t)S, VL);
    double lg = 0.0;
    /* noise scores: sc = Vp · Npᵀ (P × S). Noise rows transposed to Nt (D × Sv, Sv = S
     * rounded up to the vector width), so that one FMA yields 8 scores and no horizontal
     * sums are needed; tiles of 4 centres × 16 noise words, d ascending. */
    for (int d = 0; d < D; d++)
        for (int k = 0; k < Sv; k++) Nt[(size_t)d * Sv + k] = k < S ? Np[(size_t)k * Dp + d] : 0.0f;
    for (int i0 = 0; i0 < P; i0 += 4) {
        const int ni = P - i0 < 4 ? P - i0 : 4;
        const float *a0 = Vp + (size_t)i0 * Dp, *a1 = a0 + (ni > 1) * Dp,
                            *a2 = a0 + (ni > 2) * 2 * Dp, *a3 = a0 + (ni > 3) * 3 * Dp;
        int k = 0;
        for (; k + 2 * VL <= Sv; k += 2 * VL) {
            v8 s00 = splat(0), s01 = splat(0), s10 = splat(0), s11 = splat(0);
            v8 s20 = splat(0), s21 = splat(0), s30 = splat(0), s31 = splat(0);
            for (int d = 0; d < D; d++) {
                const v8 y0 = load(Nt + (size_t)d * Sv + k), y1 = load(Nt + (size_t)d * Sv + k + VL);
                const v8 x0 = splat(a0[d]), x1 = splat(a1[d]), x2 = splat(a2[d]), x3 = splat(a3[d]);
                s00 += x0 * y0; s01 += x0 * y1; s10 += x1 * y0; s11 += x1 * y1;
                s20 += x2 * y0; s21 += x2 * y1; s30 += x3 * y0; s31 += x3 * y1;
            }
            store(scv + 0 * Sv + k, s00); store(scv + 0 * Sv + k + VL, s01);
            store(scv + 1 * Sv + k, s10); store(scv + 1 * Sv + k + VL, s11);
            store(scv + 2 * Sv + k, s20); store(scv + 2 * Sv + k + VL, s21);
            store(scv + 3 * Sv + k, s30); store(scv + 3 * Sv + k + VL, s31);
        }
        for (; k < Sv; k += VL) {
            v8 s0 = splat(0), s1 = splat(0), s2 = splat(0), s3 = splat(0);
            for (int d = 0; d < D; d++) {
                const v8 y = load(Nt + (size_t)d * Sv + k);
                s0 += splat(a0[d]) * y; s1 += splat(a1[d]) * y;
                s2 += splat(a2[d]) * y; s3 += splat(a3[d]) * y;
            }
            store(scv + 0 * Sv + k, s0); store(scv + 1 * Sv + k, s1);
            store(scv + 2 * Sv + k, s2); store(scv + 3 * Sv + k, s3);
        }
        for (int ii = 0; ii < ni; ii++)
            memcpy(sc + (size_t)(i0 + ii) * S, scv + (size_t)ii * Sv, sizeof(float) * S);
    }
    if (bias)
        for (int i2 = 0; i2 < P; i2++)
            for (int k = 0; k < S; k++)
                sc[(size_t)i2 * S + k] += bias[gneg[k]] - log_kq[gneg[k]];
    for (int i2 = 0; i2 < P; i2++) {
        float *w = wts + (size_t)i2 * S;
        for (int k = 0; k < S; k++) w[k] = n_pos[i2];
        if (tgt) {
            for (int j = 0; j < TJ; j++) {
                if (tmask && !tmask[(size_t)i2 * TJ + j]) continue;
                const int64_t c = tgt[i2 + j];
                for (int k = 0; k < S; k++) w[k] -= gneg[k] == c ? 1.0f : 0.0f;
            }
            for (int k = 0; k < S; k++) w[k] = w[k] > 0.0f ? w[k] : 0.0f;
        }
        for (int k = 0; k < S; k++) w[k] *= unit;
    }
    lg += sigmoid_terms(sc, wts, P * S, -1.0f, gn, cn);
    /* d_x += gn · Np  (P × Dp), two rows at a time; curvature h_x += cn · |n|² */
    for (int i2 = 0; i2 < P; i2 += 2) {
        const int i3 = i2 + 1 < P ? i2 + 1 : i2;
        gemm_rows2(d_x + (size_t)i2 * Dp, d_x + (size_t)i3 * Dp,
                           gn + (size_t)i2 * S, gn + (size_t)i3 * S, 1, Np, S, Dp, 1);
    }
    if (damp)
        for (int i2 = 0; i2 < P; i2++) {
            float h = 0.0f;
            for (int k = 0; k < S; k++) h += cn[(size_t)i2 * S + k] * n_sq[k];
            h_x[i2] += h;
        }
    /* d_noise = gnᵀ · Vp  (S × Dp), two noise words at a time; curvature h_noise = cnᵀ · |x|² */
    for (int k = 0; k < S; k += 2) {
        const int k2 = k + 1 < S ? k + 1 : k;
        gemm_rows2(d_noise + (size_t)k * Dp, d_noise + (size_t)k2 * Dp,
                           gn + k, gn + k2, (size_t)S, Vp, P, Dp, 0);
    }
    for (int k = 0; k < S; k++) {
        float h = 0.0f;
        if (damp)
            for (int i2 = 0; i2 < P; i2++) h += cn[(size_t)i2 * S + k] * x_sq[i2];
        h_noise[k] = h;
    }
    return lg;
}

/* Skip-gram with negative sampling (bias == NULL) or NCE (bias and log_kq given).
 * Returns the summed loss over positive pairs and their noise terms (float64). */
double w2v_skipgram_step(
    int dim, float *restrict w_in, float *restrict w_out, float *restrict bias,
    const float *restrict log_kq,
    const int64_t *restrict centers, int rows, const int64_t *restrict span, int window,
    const uint8_t *restrict mask, const float *restrict contexts,
    const int64_t *restrict negs, int groups, int shared, float noise_weight,
    float lr, float rate, float bias_sq, float *restrict scratch,
    float *restrict h_in, float *restrict h_out, int threads) {
    const int J = 2 * window + 1, n_span = rows + 2 * window, n_noise = groups * shared;
    const int P = rows / groups, S = shared, D = dim, Dp = (int)round_up((size_t)dim, VL);
    const int damp = rate > 0.0f;
    /* carve the scratch: every block starts on a 64-byte boundary */
    size_t at = 0;
#define TAKE(n) (scratch + (at += round_up((size_t)(n), 16)) - round_up((size_t)(n), 16))
    float *d_v = TAKE((size_t)rows * Dp);
    float *d_span = TAKE((size_t)n_span * Dp);
    float *d_noise = TAKE((size_t)n_noise * Dp);
    float *score = TAKE((size_t)rows * J);
    float *g_pos = TAKE((size_t)rows * J);
    float *c_pos = TAKE((size_t)rows * J);
    float *g_neg = TAKE((size_t)rows * S);
    float *c_neg = TAKE((size_t)rows * S);
    float *h_v = TAKE(rows);
    float *v_sq = TAKE(rows);
    float *h_span = TAKE(n_span);
    float *u_sq = TAKE(n_span);
    float *h_noise = TAKE(n_noise);
    float *n_sq = TAKE(n_noise);
    double *loss_g = (double *)(void *)TAKE(2 * (size_t)groups);
    float *per_thread0 = TAKE(0);
#undef TAKE
    const int Sv = (int)round_up((size_t)S, VL);
    const size_t per_thread = per_thread_floats((size_t)P, (size_t)S, (size_t)D);

    const double region_start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    {
        float *mine = per_thread0 + (size_t)omp_get_thread_num() * per_thread;
        float *Vp = mine;                       /* P × Dp packed centre vectors */
        float *Np = Vp + (size_t)P * Dp;        /* S × Dp packed noise vectors */
        float *sc = Np + (size_t)S * Dp;        /* P × S scores */
        float *wts = sc + (size_t)P * S;        /* P × S noise weights */
        float *Nt = wts + (size_t)P * S;        /* D × Sv transposed noise vectors */
        float *scv = Nt + (size_t)D * Sv;       /* 4 × Sv scores of one tile */

        /* squared norms (for the curvature) of the output rows the step reads: partners of
         * input rows, whose logits move with the vector only, so no bias term (bias_sq goes
         * on v_sq, the partner of output rows, which move with their vector and bias) */
        if (damp) {
#pragma omp for schedule(static)
            for (int r = 0; r < n_span; r++)
                u_sq[r] = dot(w_out + span[r] * D, w_out + span[r] * D, D);
        }

        /* A: per group */
        /* dynamic: a thread that loses its core (to another process) does not hold up the
         * step; which thread computes a group does not change the bits */
#pragma omp for schedule(dynamic, 2)
        for (int g = 0; g < groups; g++) {
            const int t0 = g * P;
            const int64_t *gneg = negs + (size_t)g * S;
            double lg = 0.0;
            /* the group's rows lie scattered over the matrices: asking for all of them first
             * lets their cache misses overlap instead of queueing behind each copy (packing
             * 0.118 -> 0.098 ms per step and thread on gcide8) */
            for (int k = 0; k < S; k++) prefetch_row(w_out + gneg[k] * D, D);
            for (int i = 0; i < P; i++) prefetch_row(w_in + centers[t0 + i] * D, D);
            for (int i = 0; i < P; i++) {
                float *dst = Vp + (size_t)i * Dp;
                memcpy(dst, w_in + centers[t0 + i] * D, sizeof(float) * D);
                memset(dst + D, 0, sizeof(float) * (Dp - D));
            }
            for (int k = 0; k < S; k++) {
                float *dst = Np + (size_t)k * Dp;
                memcpy(dst, w_out + gneg[k] * D, sizeof(float) * D);
                memset(dst + D, 0, sizeof(float) * (Dp - D));
                n_sq[(size_t)g * S + k] = damp ? dot(dst, dst, Dp) : 0.0f;
            }
            /* positives: per pair, on the rows in place */
            for (int i = 0; i < P; i++) {
                const int t = t0 + i;
                const float *v = Vp + (size_t)i * Dp;
                float *dv = d_v + (size_t)t * Dp;
                memset(dv, 0, sizeof(float) * Dp);
                v_sq[t] = damp ? dot(v, v, Dp) + bias_sq : 0.0f;
                float *st = score + (size_t)t * J;
                const uint8_t *mt = mask + (size_t)t * J;
                for (int j = 0; j < J; j++) {
                    st[j] = 0.0f;
                    if (!mt[j]) continue;
                    const int64_t w = span[t + j];
                    st[j] = dot(v, w_out + w * D, D) + (bias ? bias[w] - log_kq[w] : 0.0f);
                }
                lg += mask_terms(st, mt, J, g_pos + (size_t)t * J, c_pos + (size_t)t * J);
                float h = 0.0f;
                for (int j = 0; j < J; j++) {
                    const float gr = g_pos[(size_t)t * J + j];
                    if (!mt[j]) continue;
                    axpy(gr, w_out + span[t + j] * D, dv, D);
                    h += c_pos[(size_t)t * J + j] * (damp ? u_sq[t + j] : 0.0f);
                }
                h_v[t] = h;
            }
            /* a centre's targets are its contexts: span[t + j] where mask[t·J + j] */
            lg += group_noise(Vp, Np, Nt, scv, sc, wts, contexts + t0, noise_weight,
                              bias ? NULL : span + t0, mask + (size_t)t0 * J, J, gneg, bias,
                              log_kq,
                              g_neg + (size_t)t0 * S, c_neg + (size_t)t0 * S,
                              d_v + (size_t)t0 * Dp, h_v + t0, d_noise + (size_t)g * S * Dp,
                              h_noise + (size_t)g * S, n_sq + (size_t)g * S, v_sq + t0,
                              P, S, D, Dp, damp);
            loss_g[g] = lg;
        }

        /* B: per span position r, Σ over centres t = r − j of g_pos[t,j]·v_t */
#pragma omp for schedule(dynamic, 64)
        for (int r = 0; r < n_span; r++) {
            float *ds = d_span + (size_t)r * Dp;
            memset(ds, 0, sizeof(float) * Dp);
            float h = 0.0f;
            for (int j = J - 1; j >= 0; j--) {
                const int t = r - j;
                if (t < 0 || t >= rows || !mask[(size_t)t * J + j]) continue;
                axpy(g_pos[(size_t)t * J + j], w_in + centers[t] * D, ds, D);
                h += c_pos[(size_t)t * J + j] * v_sq[t];
            }
            h_span[r] = h;
        }

        /* C: updates, rows partitioned by id across threads; each row's contributions are
         * summed in batch order (input: centres; output: span, then noise) */
        const int nt = omp_get_num_threads(), me = omp_get_thread_num();
        if (damp) {
            sum_owned(centers, rows, h_v, h_in, nt, me);
            sum_owned(span, n_span, h_span, h_out, nt, me);
            sum_owned(negs, n_noise, h_noise, h_out, nt, me);
        }
        for (int t = 0; t < rows; t++) {
            const int64_t w = centers[t];
            if (row_owner(w, nt) != me || contexts[t] == 0.0f) continue;
            const float step = damped_step(lr, rate, h_in[w]);
            axpy(step, d_v + (size_t)t * Dp, w_in + w * D, D);
        }
        for (int r = 0; r < n_span; r++) {
            const int64_t w = span[r];
            if (row_owner(w, nt) != me) continue;
            const float step = damped_step(lr, rate, h_out[w]);
            axpy(step, d_span + (size_t)r * Dp, w_out + w * D, D);
            if (bias) {
                float gb = 0.0f;
                for (int j = J - 1; j >= 0; j--) {
                    const int t = r - j;
                    if (t >= 0 && t < rows) gb += g_pos[(size_t)t * J + j];
                }
                bias[w] += step * gb;
            }
        }
        update_noise_rows(w_out, bias, negs, n_noise, S, P, d_noise, g_neg, h_out, lr, rate, D,
                          Dp, nt, me);
        if (damp) { /* each owner resets the rows it summed */
            reset_owned(centers, rows, h_in, nt, me);
            reset_owned(span, n_span, h_out, nt, me);
            reset_owned(negs, n_noise, h_out, nt, me);
        }
    }
    w2v_parallel_seconds += omp_get_wtime() - region_start;
    double loss = 0.0;
    for (int g = 0; g < groups; g++) loss += loss_g[g];
    return loss;
}

/* CBOW with negative sampling (bias == NULL) or NCE: the mathematics of Word2VecStep._cbow.
 * Each centre's hidden vector h is the mean of its context input vectors; h predicts the
 * centre's output row and scores the group's noise rows. Every context row then receives the
 * whole gradient of h (word2vec's rule), damped by its own curvature. Same arguments as
 * w2v_skipgram_step; contexts[t] = 0 marks a centre that does not train. */
double w2v_cbow_step(
    int dim, float *restrict w_in, float *restrict w_out, float *restrict bias,
    const float *restrict log_kq,
    const int64_t *restrict centers, int rows, const int64_t *restrict span, int window,
    const uint8_t *restrict mask, const float *restrict contexts,
    const int64_t *restrict negs, int groups, int shared, float noise_weight,
    float lr, float rate, float bias_sq, float *restrict scratch,
    float *restrict h_in, float *restrict h_out, int threads) {
    const int J = 2 * window + 1, n_span = rows + 2 * window, n_noise = groups * shared;
    const int P = rows / groups, S = shared, D = dim, Dp = (int)round_up((size_t)dim, VL);
    const int damp = rate > 0.0f;
    size_t at = 0;
#define TAKE(n) (scratch + (at += round_up((size_t)(n), 16)) - round_up((size_t)(n), 16))
    float *d_h = TAKE((size_t)rows * Dp);       /* gradient of each hidden vector */
    float *d_u = TAKE((size_t)rows * Dp);       /* gradient of each centre's output row */
    float *d_span = TAKE((size_t)n_span * Dp);  /* summed gradient of each context position */
    float *d_noise = TAKE((size_t)n_noise * Dp);
    float *g_pos = TAKE(rows);
    float *c_pos = TAKE(rows);
    float *g_neg = TAKE((size_t)rows * S);
    float *c_neg = TAKE((size_t)rows * S);
    float *h_h = TAKE(rows);                    /* curvature w.r.t. h */
    float *h_u = TAKE(rows);
    float *h_sq = TAKE(rows);
    float *n_pos = TAKE(rows);                  /* 1 for a centre that trains, else 0 */
    float *h_span = TAKE(n_span);
    float *h_noise = TAKE(n_noise);
    float *n_sq = TAKE(n_noise);
    double *loss_g = (double *)(void *)TAKE(2 * (size_t)groups);
    float *per_thread0 = TAKE(0);
#undef TAKE
    const int Sv = (int)round_up((size_t)S, VL);
    const size_t per_thread = per_thread_floats((size_t)P, (size_t)S, (size_t)D);

    const double region_start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    {
        float *mine = per_thread0 + (size_t)omp_get_thread_num() * per_thread;
        float *Vp = mine;                       /* P × Dp hidden vectors */
        float *Np = Vp + (size_t)P * Dp;        /* S × Dp packed noise vectors */
        float *sc = Np + (size_t)S * Dp;        /* P × S scores */
        float *wts = sc + (size_t)P * S;        /* P × S noise weights */
        float *Nt = wts + (size_t)P * S;        /* D × Sv transposed noise vectors */
        float *scv = Nt + (size_t)D * Sv;       /* 4 × Sv scores of one tile */

        /* A: per group */
#pragma omp for schedule(dynamic, 2)
        for (int g = 0; g < groups; g++) {
            const int t0 = g * P;
            const int64_t *gneg = negs + (size_t)g * S;
            double lg = 0.0;
            for (int k = 0; k < S; k++) prefetch_row(w_out + gneg[k] * D, D);
            for (int i = 0; i < P; i++) prefetch_row(w_out + centers[t0 + i] * D, D);
            for (int k = 0; k < S; k++) {
                float *dst = Np + (size_t)k * Dp;
                memcpy(dst, w_out + gneg[k] * D, sizeof(float) * D);
                memset(dst + D, 0, sizeof(float) * (Dp - D));
                n_sq[(size_t)g * S + k] = damp ? dot(dst, dst, Dp) : 0.0f;
            }
            for (int i = 0; i < P; i++) {
                const int t = t0 + i;
                float *h = Vp + (size_t)i * Dp;
                memset(h, 0, sizeof(float) * Dp);
                const uint8_t *mt = mask + (size_t)t * J;
                for (int j = 0; j < J; j++)
                    if (mt[j]) axpy(1.0f, w_in + span[t + j] * D, h, D);
                const float has = contexts[t] > 0.0f ? 1.0f : 0.0f;
                if (has > 0.0f) {
                    const float inv = 1.0f / contexts[t];
                    for (int d = 0; d < D; d++) h[d] *= inv;
                }
                h_sq[t] = damp ? dot(h, h, Dp) + bias_sq : 0.0f;
                const int64_t c = centers[t];
                const float *u = w_out + c * D;
                float s = dot(h, u, D) + (bias ? bias[c] - log_kq[c] : 0.0f);
                lg += sigmoid_terms(&s, &has, 1, 1.0f, g_pos + t, c_pos + t);
                float *dh = d_h + (size_t)t * Dp, *du = d_u + (size_t)t * Dp;
                memset(dh, 0, sizeof(float) * Dp);
                memset(du, 0, sizeof(float) * Dp);
                axpy(g_pos[t], u, dh, D);
                axpy(g_pos[t], h, du, D);
                h_h[t] = damp ? c_pos[t] * dot(u, u, D) : 0.0f;
                h_u[t] = c_pos[t] * h_sq[t];
                n_pos[t] = has;
            }
            /* a centre's one target is itself */
            lg += group_noise(Vp, Np, Nt, scv, sc, wts, n_pos + t0, noise_weight,
                              bias ? NULL : centers + t0, NULL, 1, gneg, bias, log_kq,
                              g_neg + (size_t)t0 * S, c_neg + (size_t)t0 * S,
                              d_h + (size_t)t0 * Dp, h_h + t0, d_noise + (size_t)g * S * Dp,
                              h_noise + (size_t)g * S, n_sq + (size_t)g * S, h_sq + t0,
                              P, S, D, Dp, damp);
            loss_g[g] = lg;
        }

        /* B: per span position r, the whole d_h of every centre t = r − j it is a context of;
         * its curvature through the mean's weight 1/count (see Word2VecStep._cbow) */
#pragma omp for schedule(dynamic, 64)
        for (int r = 0; r < n_span; r++)
            h_span[r] = cbow_span_row(r, rows, J, mask, d_h, h_h, contexts,
                                      d_span + (size_t)r * Dp, D, Dp);

        /* C: updates, rows partitioned by id across threads; each row's contributions are
         * summed in batch order (input: span; output: centres, then noise) */
        const int nt = omp_get_num_threads(), me = omp_get_thread_num();
        if (damp) {
            sum_owned(span, n_span, h_span, h_in, nt, me);
            sum_owned(centers, rows, h_u, h_out, nt, me);
            sum_owned(negs, n_noise, h_noise, h_out, nt, me);
        }
        for (int r = 0; r < n_span; r++) {
            const int64_t w = span[r];
            if (row_owner(w, nt) != me) continue;
            axpy(damped_step(lr, rate, h_in[w]), d_span + (size_t)r * Dp, w_in + w * D, D);
        }
        for (int t = 0; t < rows; t++) {
            const int64_t w = centers[t];
            if (row_owner(w, nt) != me || contexts[t] == 0.0f) continue;
            const float step = damped_step(lr, rate, h_out[w]);
            axpy(step, d_u + (size_t)t * Dp, w_out + w * D, D);
            if (bias) bias[w] += step * g_pos[t];
        }
        update_noise_rows(w_out, bias, negs, n_noise, S, P, d_noise, g_neg, h_out, lr, rate, D,
                          Dp, nt, me);
        if (damp) { /* each owner resets the rows it summed */
            reset_owned(span, n_span, h_in, nt, me);
            reset_owned(centers, rows, h_out, nt, me);
            reset_owned(negs, n_noise, h_out, nt, me);
        }
    }
    w2v_parallel_seconds += omp_get_wtime() - region_start;
    double loss = 0.0;
    for (int g = 0; g < groups; g++) loss += loss_g[g];
    return loss;
}

/* ---- hierarchical softmax ---------------------------------------------------------------------
 * The mathematics of HierarchicalSoftmaxStep (torch_hs.py): word2vec.c's hs=1 branch, one
 * synchronous step. Centre t's path in the Huffman tree is points/codes[offsets[c] ..
 * offsets[c + 1]), c = centers[t]; a centre without contexts (padding) has no terms. The
 * batch's (centre, node) terms are numbered in batch order: centre t's are first[t] ..
 * first[t + 1], their nodes path_all[first[t] ..], copied there in phase A so that phase C
 * reads the batch's paths in order rather than each from the tree. Phases as in the other
 * steps:
 *   A. per centre (parallel): its path's L node rows packed once and scored against every h of
 *      the centre — its n context rows (skip-gram: the contexts predict the centre, as in
 *      word2vec.c) or their mean (CBOW): the scores S = H·Nᵀ (n × L) and the gradient of each
 *      h (neu1e) G·N as small GEMMs; the gradients G of the scores kept for phase C; the
 *      damping's curvatures;
 *   B. (CBOW) per span position (parallel): the whole neu1e of every centre it is a context of;
 *   C. updates, rows partitioned across threads, each row's contributions in batch order: the
 *      node rows by term, each adding Σ_i g[i,l]·h_i formed there from G and the centre's rows
 *      h, read before any input row changes; then (after a barrier) the input rows (skip-gram:
 *      by pair, centre by centre; CBOW: by span position).
 * Like the other steps, the bits do not depend on the number of threads. */

#if defined(__clang__)
#define SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int32_t v8i __attribute__((vector_size(VL * sizeof(int32_t))));
#define SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (v8i){__VA_ARGS__})
#endif

/* The eight horizontal sums of a0..a7, as one vector (lane j: the sum of a_j's lanes). */
static inline v8 hsum8(v8 a0, v8 a1, v8 a2, v8 a3, v8 a4, v8 a5, v8 a6, v8 a7) {
#define PAIRS(a, b) (SHUFFLE(a, b, 0, 8, 2, 10, 4, 12, 6, 14) + SHUFFLE(a, b, 1, 9, 3, 11, 5, 13, 7, 15))
#define QUADS(a, b) (SHUFFLE(a, b, 0, 1, 8, 9, 4, 5, 12, 13) + SHUFFLE(a, b, 2, 3, 10, 11, 6, 7, 14, 15))
    const v8 q0 = QUADS(PAIRS(a0, a1), PAIRS(a2, a3)), q1 = QUADS(PAIRS(a4, a5), PAIRS(a6, a7));
#undef PAIRS
#undef QUADS
    return SHUFFLE(q0, q1, 0, 1, 2, 3, 8, 9, 10, 11) + SHUFFLE(q0, q1, 4, 5, 6, 7, 12, 13, 14, 15);
}

/* Scores S[i·L + l] = H_i · N_l for n rows H and L rows N (both packed, Dp floats, zero padded),
 * in tiles of 2 × 4 (eight independent chains; a lone last row or node is computed twice and
 * stored once). */
static void hs_scores(float *restrict S, const float *restrict H, int n,
                      const float *restrict N, int L, int Dp) {
    for (int i0 = 0; i0 < n; i0 += 2) {
        const float *h0 = H + (size_t)i0 * Dp, *h1 = H + (size_t)(i0 + 1 < n ? i0 + 1 : i0) * Dp;
        for (int l0 = 0; l0 < L; l0 += 4) {
            const float *n0 = N + (size_t)l0 * Dp;
            const float *n1 = N + (size_t)(l0 + 1 < L ? l0 + 1 : l0) * Dp;
            const float *n2 = N + (size_t)(l0 + 2 < L ? l0 + 2 : l0) * Dp;
            const float *n3 = N + (size_t)(l0 + 3 < L ? l0 + 3 : l0) * Dp;
            v8 a0 = splat(0), a1 = splat(0), a2 = splat(0), a3 = splat(0);
            v8 b0 = splat(0), b1 = splat(0), b2 = splat(0), b3 = splat(0);
            for (int d = 0; d < Dp; d += VL) {
                const v8 x0 = load(h0 + d), x1 = load(h1 + d);
                const v8 y0 = load(n0 + d), y1 = load(n1 + d), y2 = load(n2 + d), y3 = load(n3 + d);
                a0 += x0 * y0; a1 += x0 * y1; a2 += x0 * y2; a3 += x0 * y3;
                b0 += x1 * y0; b1 += x1 * y1; b2 += x1 * y2; b3 += x1 * y3;
            }
            const v8 r = hsum8(a0, a1, a2, a3, b0, b1, b2, b3);
            for (int k = 0; k < 4 && l0 + k < L; k++) {
                S[(size_t)i0 * L + l0 + k] = r[k];
                if (i0 + 1 < n) S[(size_t)(i0 + 1) * L + l0 + k] = r[4 + k];
            }
        }
    }
}

/* Rows c[0..nr) (nr = 1, 2 or 4; a constant where inlined) of C = A·B: c_r[d] = Σ_q
 * a_r[q·acs] · B[q·Dp + d], q < k ascending, B packed (k × Dp). Four vectors of each row per
 * pass (then two, then one), so each broadcast of a coefficient serves four loads of B and each
 * load of B serves nr rows. */
static inline void gemm_tile(int nr, float *const c[4], const float *const a[4], size_t acs,
                             const float *restrict B, int k, int Dp) {
    int d = 0;
    for (; d + 4 * VL <= Dp; d += 4 * VL) {
        v8 p[4][4];
        for (int r = 0; r < nr; r++)
            for (int v = 0; v < 4; v++) p[r][v] = splat(0);
        for (int j = 0; j < k; j++) {
            const float *bj = B + (size_t)j * Dp + d;
            const v8 y0 = load(bj), y1 = load(bj + VL), y2 = load(bj + 2 * VL), y3 = load(bj + 3 * VL);
            for (int r = 0; r < nr; r++) {
                const v8 x = splat(a[r][(size_t)j * acs]);
                p[r][0] += x * y0;
                p[r][1] += x * y1;
                p[r][2] += x * y2;
                p[r][3] += x * y3;
            }
        }
        for (int r = 0; r < nr; r++)
            for (int v = 0; v < 4; v++) store(c[r] + d + v * VL, p[r][v]);
    }
    for (; d < Dp; d += VL) {
        v8 p[4];
        for (int r = 0; r < nr; r++) p[r] = splat(0);
        for (int j = 0; j < k; j++) {
            const v8 y = load(B + (size_t)j * Dp + d);
            for (int r = 0; r < nr; r++) p[r] += splat(a[r][(size_t)j * acs]) * y;
        }
        for (int r = 0; r < nr; r++) store(c[r] + d, p[r]);
    }
}

/* C (m × Dp, rows contiguous) = A·B: row r's coefficients a[r·ars + q·acs], q < k. */
static void small_gemm(float *restrict C, const float *restrict A, size_t ars, size_t acs,
                       const float *restrict B, int m, int k, int Dp) {
    int r = 0;
    for (; r + 4 <= m; r += 4) {
        float *const c[4] = {C + (size_t)r * Dp, C + (size_t)(r + 1) * Dp,
                             C + (size_t)(r + 2) * Dp, C + (size_t)(r + 3) * Dp};
        const float *const a[4] = {A + r * ars, A + (r + 1) * ars, A + (r + 2) * ars,
                                   A + (r + 3) * ars};
        gemm_tile(4, c, a, acs, B, k, Dp);
    }
    for (; r + 2 <= m; r += 2) {
        float *const c[4] = {C + (size_t)r * Dp, C + (size_t)(r + 1) * Dp, NULL, NULL};
        const float *const a[4] = {A + r * ars, A + (r + 1) * ars, NULL, NULL};
        gemm_tile(2, c, a, acs, B, k, Dp);
    }
    if (r < m) {
        float *const c[4] = {C + (size_t)r * Dp, NULL, NULL, NULL};
        const float *const a[4] = {A + r * ars, NULL, NULL, NULL};
        gemm_tile(1, c, a, acs, B, k, Dp);
    }
}

/* Half vectors, and a product rounded on its own: the compiler may not fuse it into the add
 * that follows (where a loop's bits are those of separate roundings, written out so that the
 * loop can be arranged for speed). */
typedef float v4 __attribute__((vector_size(VL / 2 * sizeof(float))));
typedef float v4u __attribute__((vector_size(VL / 2 * sizeof(float)), aligned(4)));
static inline v4 load4(const float *p) { return *(const v4u *)p; }
static inline void store4(float *p, v4 x) { *(v4u *)p = x; }
static inline v4 splat4(float a) { return (v4){a, a, a, a}; }
#if defined(__AVX__) || defined(__aarch64__)
#if defined(__aarch64__)
#define ROUNDED(p) __asm__("" : "+w"(p)) /* p is computed (rounded) before it is used */
#else
#define ROUNDED(p) __asm__("" : "+x"(p))
#endif
static inline float unfused(float p) { ROUNDED(p); return p; }
static inline v4 unfused4(v4 p) { ROUNDED(p); return p; }
#undef ROUNDED
#else
static inline float unfused(float p) { volatile float q = p; return q; }
static inline v4 unfused4(v4 p) { volatile v4 q = p; return q; }
#endif

/* Hierarchical softmax's terms: sign +1 for code bit 0, −1 for bit 1 (σ(±s) is the probability
 * of the bit taken), 0 for padding up to a whole vector (weight 0). Vectorised like
 * sigmoid_terms. */
static inline double signed_terms(const float *restrict s, const float *restrict sign, int n,
                                  float *restrict out_g, float *restrict out_c) {
    double loss = 0.0;
#pragma omp simd reduction(+ : loss)
    for (int i = 0; i < n; i++) {
        const float w = sign[i] != 0.0f ? 1.0f : 0.0f;
        SIGMOID_TERM(s[i], w, sign[i], out_g[i], out_c[i], loss);
    }
    return loss;
}

/* per-thread floats: packed path rows (max_len × Dp), packed h rows (J × Dp), scores,
 * gradients, curvatures and signs (J × max_len each, rounded up to whole vectors), node and h
 * squared norms */
static inline size_t hs_per_thread_floats(size_t J, size_t max_len, size_t D) {
    const size_t Dp = round_up(D, VL), terms = round_up(J * max_len, VL);
    return round_up(max_len * Dp + J * Dp + 4 * terms + max_len + J, 16) + 64;
}

/* Scratch floats one w2v_hs_step call needs for `terms` (centre, node) terms (the path lengths
 * of the batch's centres that have contexts) and paths of at most max_len nodes. */
size_t w2v_hs_scratch_floats(int rows, int window, int64_t terms, int max_len, int dim,
                             int threads) {
    const size_t J = 2 * (size_t)window + 1, span = (size_t)rows + 2 * (size_t)window;
    const size_t dp = round_up((size_t)dim, VL), R = (size_t)rows, T = (size_t)terms;
    const size_t blocks[] = {2 * (R + 1), T * J, T, 2 * R,  /* first, g_all, h_term, loss */
                             R * J * dp, R * J,             /* skip-gram: d_pair, h_pair */
                             R * dp, R * dp, R,             /* CBOW: hidden, d_h, h_h */
                             span * dp, span, T};           /* CBOW: d_span, h_span; nodes */
    size_t n = 0;
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) n += round_up(blocks[i], 16);
    return n + (size_t)threads * hs_per_thread_floats(J, (size_t)max_len, (size_t)dim) + 64;
}

/* Per-thread buffers of phase A. */
typedef struct {
    float *Np, *X, *sc, *g, *c, *sgn, *n_sq, *x_sq;
} hs_buffers;

/* The signs of the n × L terms (row i: code bits of the path), padded with 0 to whole vectors;
 * returns the padded count. The padding's scores are set to 0 (finite). */
static inline int hs_signs(float *restrict sgn, float *restrict sc, const uint8_t *restrict code,
                           int n, int L) {
    for (int l = 0; l < L; l++) sgn[l] = code[l] ? -1.0f : 1.0f;
    for (int i = 1; i < n; i++) memcpy(sgn + (size_t)i * L, sgn, sizeof(float) * L);
    const int m = (int)round_up((size_t)(n * L), VL);
    for (int k = n * L; k < m; k++) sgn[k] = sc[k] = 0.0f;
    return m;
}

/* A, both architectures, centre t: its n rows h (b->X: the contexts for skip-gram, their mean
 * for CBOW; squared norms b->x_sq) against its L path rows b->Np. Writes each h's neu1e d_h[i]
 * and curvature h_h[i], the terms' gradients g (n × L) and each node's curvature h_term[l];
 * returns the loss. A node's gradient Σ_i g[i,l]·h_i is formed where it is applied (phase C),
 * from g and the rows h, not stored: a row per term written and read back again cost more
 * than the products. */
static double hs_centre(const hs_buffers *b, int n, const uint8_t *restrict code, int L,
                        float *restrict d_h, float *restrict h_h, float *restrict g,
                        float *restrict h_term, int Dp, int damp) {
    hs_scores(b->sc, b->X, n, b->Np, L, Dp);
    const int m = hs_signs(b->sgn, b->sc, code, n, L);
    const double loss = signed_terms(b->sc, b->sgn, m, b->g, b->c);
    small_gemm(d_h, b->g, (size_t)L, 1, b->Np, n, L, Dp);  /* neu1e_i = Σ_l g[i,l]·N_l */
    memcpy(g, b->g, sizeof(float) * (size_t)(n * L));
    for (int i = 0; i < n; i++) {
        float h = 0.0f;
        if (damp)
            for (int l = 0; l < L; l++) h += b->c[i * L + l] * b->n_sq[l];
        h_h[i] = h;
    }
    for (int l = 0; l < L; l++) {
        float h = 0.0f;
        if (damp)
            for (int i = 0; i < n; i++) h += b->c[i * L + l] * b->x_sq[i];
        h_term[l] = h;
    }
    return loss;
}

/* Copies rows (ids[k]·D of `from`, k < count) into `to` (count × Dp, zero padded), with their
 * squared norms when sq != NULL, summed in the same pass. */
static inline void pack_rows(float *restrict to, const float *restrict from,
                             const int64_t *restrict ids, int count, float *restrict sq, int D,
                             int Dp) {
    for (int k = 0; k < count; k++) {
        float *dst = to + (size_t)k * Dp;
        const float *src = from + ids[k] * D;
        v8 acc0 = splat(0.0f), acc1 = splat(0.0f);
        int d = 0;
        for (; d + 2 * VL <= D; d += 2 * VL) {
            const v8 x0 = load(src + d), x1 = load(src + d + VL);
            store(dst + d, x0);
            store(dst + d + VL, x1);
            acc0 += x0 * x0;
            acc1 += x1 * x1;
        }
        for (; d + VL <= D; d += VL) {
            const v8 x0 = load(src + d);
            store(dst + d, x0);
            acc0 += x0 * x0;
        }
        float tail = 0.0f;
        for (; d < D; d++) {
            dst[d] = src[d];
            tail += src[d] * src[d];
        }
        for (; d < Dp; d++) dst[d] = 0.0f;
        if (sq) sq[k] = hsum(acc0 + acc1) + tail;
    }
}

/* Asks for the rows centre t will read: its path's nodes and its contexts' input rows. */
static inline void hs_prefetch(int t, const int64_t *restrict first, const int64_t *restrict centers,
                               const int64_t *restrict offsets, const int32_t *restrict points,
                               const float *nodes, const float *w_in, const int64_t *restrict span,
                               const uint8_t *restrict mask, int J, int D) {
    const int64_t lo = offsets[centers[t]], L = first[t + 1] - first[t];
    for (int64_t l = 0; l < L; l++) prefetch_row(nodes + (size_t)points[lo + l] * D, D);
    for (int j = 0; j < J && L > 0; j++)
        if (mask[(size_t)t * J + j]) prefetch_row(w_in + span[t + j] * D, D);
}

/* y_r += Σ_i a_r[i]·x_i over d floats for the nr rows y_0, y_1 (nr = 1 or 2; rows unaligned),
 * i < n ascending for each element: each load of x serves both rows. */
static inline void add_combinations(int nr, float *const y[2], const float *const *x,
                                    const float *const a[2], int n, int d) {
    int k = 0;
    for (; k + 4 * VL <= d; k += 4 * VL) {
        v8 acc[2][4];
        for (int r = 0; r < nr; r++)
            for (int v = 0; v < 4; v++) acc[r][v] = load(y[r] + k + v * VL);
        for (int i = 0; i < n; i++) {
            const v8 x0 = load(x[i] + k), x1 = load(x[i] + k + VL), x2 = load(x[i] + k + 2 * VL),
                     x3 = load(x[i] + k + 3 * VL);
            for (int r = 0; r < nr; r++) {
                const v8 ai = splat(a[r][i]);
                acc[r][0] += ai * x0;
                acc[r][1] += ai * x1;
                acc[r][2] += ai * x2;
                acc[r][3] += ai * x3;
            }
        }
        for (int r = 0; r < nr; r++)
            for (int v = 0; v < 4; v++) store(y[r] + k + v * VL, acc[r][v]);
    }
    for (; k + VL <= d; k += VL) {
        v8 acc[2];
        for (int r = 0; r < nr; r++) acc[r] = load(y[r] + k);
        for (int i = 0; i < n; i++) {
            const v8 xi = load(x[i] + k);
            for (int r = 0; r < nr; r++) acc[r] += splat(a[r][i]) * xi;
        }
        for (int r = 0; r < nr; r++) store(y[r] + k, acc[r]);
    }
    /* the tail: each product rounded on its own, each element's sum kept in a register */
    if (k + VL / 2 <= d) {
        v4 acc[2];
        for (int r = 0; r < nr; r++) acc[r] = load4(y[r] + k);
        for (int i = 0; i < n; i++) {
            const v4 xi = load4(x[i] + k);
            for (int r = 0; r < nr; r++) acc[r] += unfused4(splat4(a[r][i]) * xi);
        }
        for (int r = 0; r < nr; r++) store4(y[r] + k, acc[r]);
        k += VL / 2;
    }
    for (; k < d; k++)
        for (int r = 0; r < nr; r++) {
            float acc = y[r][k];
            for (int i = 0; i < n; i++) acc += unfused(a[r][i] * x[i][k]);
            y[r][k] = acc;
        }
}

/* Asks for the rows phase C reads for centre t on this thread: its owned nodes' rows and, for
 * skip-gram, its contexts' input rows. */
static inline void hs_prefetch_owned(int t, int cbow, const int64_t *restrict first,
                                     const int32_t *restrict path_all, const float *nodes,
                                     const float *w_in, const int64_t *restrict span,
                                     const uint8_t *restrict mask, int J, int D, int nt, int me) {
    const int32_t *path = path_all + first[t];
    const int L = (int)(first[t + 1] - first[t]);
    for (int l = 0; l < L; l++)
        if (row_owner(path[l], nt) == me) prefetch_row(nodes + (size_t)path[l] * D, D);
    if (!cbow && L > 0)
        for (int j = 0; j < J; j++)
            if (mask[(size_t)t * J + j]) prefetch_row(w_in + span[t + j] * D, D);
}

/* C for the node rows this thread owns: term (t, l) of node p adds step_p · Σ_i g[i,l]·h_i, its
 * centre's rows h (skip-gram: the context rows of w_in, read before any input row changes;
 * CBOW: the stored hidden vector), terms in batch order, step_p damped by the node's summed
 * curvature. */
static void hs_update_nodes(int cbow, float *restrict nodes, const float *restrict w_in,
                            const float *restrict hidden, int rows,
                            const int64_t *restrict span, const uint8_t *restrict mask, int J,
                            const int32_t *restrict path_all,
                            const int64_t *restrict first, const float *restrict g_all,
                            const float *restrict h_term, float *restrict h_node, float lr,
                            float rate, int D, int Dp, int nt, int me) {
    if (rate > 0.0f)
        for (int64_t k = 0; k < first[rows]; k++)
            if (row_owner(path_all[k], nt) == me) h_node[path_all[k]] += h_term[k];
    float spare[D];
    memset(spare, 0, sizeof spare);
    for (int t = 0; t < rows; t++) {
        const int L = (int)(first[t + 1] - first[t]);
        if (t + 2 < rows) /* the rows two centres ahead: their misses overlap this centre's work */
            hs_prefetch_owned(t + 2, cbow, first, path_all, nodes, w_in, span, mask, J, D, nt, me);
        if (L == 0) continue;
        const int32_t *path = path_all + first[t];
        const float *g = g_all + (size_t)first[t] * J;  /* n × L */
        const float *x[J];
        int n = 0;
        if (cbow) {
            x[n++] = hidden + (size_t)t * Dp;
        } else {
            for (int j = 0; j < J; j++)
                if (mask[(size_t)t * J + j]) x[n++] = w_in + span[t + j] * D;
        }
        /* the centre's owned terms two at a time: each is another node (a path visits a node
         * once), so every node row still takes its terms in batch order */
        float coef[2][J];
        float *y[2];
        int held = 0;
        for (int l = 0; l < L; l++) {
            const int32_t p = path[l];
            if (row_owner(p, nt) != me) continue;
            const float step = damped_step(lr, rate, h_node[p]);
            for (int i = 0; i < n; i++) coef[held][i] = step * g[i * L + l];
            y[held++] = nodes + (size_t)p * D;
            if (held == 2) {
                add_combinations(2, y, x, (const float *const[2]){coef[0], coef[1]}, n, D);
                held = 0;
            }
        }
        if (held) { /* the same code as a pair (its rounding too), beside a row thrown away */
            y[1] = spare;
            add_combinations(2, y, x, (const float *const[2]){coef[0], coef[0]}, n, D);
        }
    }
    if (rate > 0.0f)
        for (int64_t k = 0; k < first[rows]; k++)
            if (row_owner(path_all[k], nt) == me) h_node[path_all[k]] = 0.0f;
}

/* C for the input rows this thread owns: skip-gram adds each pair's neu1e (centre by centre,
 * contexts in window order), CBOW each span position's summed neu1e; each step damped by the
 * row's summed curvature. */
static void hs_update_inputs(int cbow, float *restrict w_in, const int64_t *restrict span,
                             int n_span, int rows, int J, const uint8_t *restrict mask,
                             const float *restrict d_pair, const float *restrict h_pair,
                             const float *restrict d_span, const float *restrict h_span,
                             float *restrict h_in, float lr, float rate, int D, int Dp, int nt,
                             int me) {
    const int damp = rate > 0.0f;
    if (cbow) {
        for (int pass = damp ? 0 : 1; pass < (damp ? 3 : 2); pass++) /* sum, apply, reset */
            for (int r = 0; r < n_span; r++) {
                const int64_t w = span[r];
                if (row_owner(w, nt) != me) continue;
                if (pass == 0)
                    h_in[w] += h_span[r];
                else if (pass == 1)
                    axpy(damped_step(lr, rate, h_in[w]), d_span + (size_t)r * Dp, w_in + w * D,
                         D);
                else
                    h_in[w] = 0.0f;
            }
        return;
    }
    for (int pass = damp ? 0 : 1; pass < (damp ? 3 : 2); pass++) /* sum, apply, reset */
        for (int t = 0; t < rows; t++) {
            const uint8_t *mt = mask + (size_t)t * J;
            for (int j = 0, i = 0; j < J; j++) {
                if (!mt[j]) continue;
                const int64_t w = span[t + j];
                const size_t k = (size_t)t * J + i++;
                if (row_owner(w, nt) != me) continue;
                if (pass == 0)
                    h_in[w] += h_pair[k];
                else if (pass == 1)
                    axpy(damped_step(lr, rate, h_in[w]), d_pair + k * Dp, w_in + w * D, D);
                else
                    h_in[w] = 0.0f;
            }
        }
}

/* Hierarchical softmax, skip-gram (cbow = 0) or CBOW (cbow = 1). nodes: (V−1) × dim; h_in (V)
 * and h_node (V−1): the damping's sums, zero on entry and on return; rate and rate_in: lr/κ of
 * the node rows and of the input rows (0: undamped). Returns the summed loss (float64), or −1
 * when the batch has more terms than the scratch was sized for. */
double w2v_hs_step(
    int cbow, int dim, float *restrict w_in, float *restrict nodes,
    const int64_t *restrict offsets, const int32_t *restrict points,
    const uint8_t *restrict codes, int max_len, int64_t terms,
    const int64_t *restrict centers, int rows, const int64_t *restrict span, int window,
    const uint8_t *restrict mask, const float *restrict contexts,
    float lr, float rate, float rate_in, float *restrict scratch,
    float *restrict h_in, float *restrict h_node, int threads) {
    const int J = 2 * window + 1, n_span = rows + 2 * window;
    const int D = dim, Dp = (int)round_up((size_t)dim, VL);
    const int damp = rate > 0.0f || rate_in > 0.0f;  /* the curvatures are wanted */
    size_t at = 0;
#define TAKE(n) (scratch + (at += round_up((size_t)(n), 16)) - round_up((size_t)(n), 16))
    int64_t *first = (int64_t *)(void *)TAKE(2 * ((size_t)rows + 1));
    float *g_all = TAKE((size_t)terms * J);      /* centre t's n × L gradients at first[t]·J */
    float *h_term = TAKE((size_t)terms);
    double *loss_t = (double *)(void *)TAKE(2 * (size_t)rows);
    float *d_pair = TAKE((size_t)rows * J * Dp);  /* centre t's i-th pair at t·J + i */
    float *h_pair = TAKE((size_t)rows * J);
    float *hidden = TAKE((size_t)rows * Dp);
    float *d_h = TAKE((size_t)rows * Dp);
    float *h_h = TAKE(rows);
    float *d_span = TAKE((size_t)n_span * Dp);
    float *h_span = TAKE(n_span);
    int32_t *path_all = (int32_t *)(void *)TAKE((size_t)terms);  /* the terms' nodes */
    float *per_thread0 = TAKE(0);
#undef TAKE
    first[0] = 0;
    for (int t = 0; t < rows; t++) {
        const int64_t c = centers[t];
        first[t + 1] = first[t] + (contexts[t] > 0.0f ? offsets[c + 1] - offsets[c] : 0);
    }
    if (first[rows] > terms) return -1.0;
    const size_t per_thread = hs_per_thread_floats((size_t)J, (size_t)max_len, (size_t)D);
    const size_t cells = round_up((size_t)J * max_len, VL);

    const double region_start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    {
        float *mine = per_thread0 + (size_t)omp_get_thread_num() * per_thread;
        hs_buffers b;
        b.Np = mine;                                /* max_len × Dp path rows */
        b.X = b.Np + (size_t)max_len * Dp;          /* J × Dp h rows */
        b.sc = b.X + (size_t)J * Dp;                /* scores, J × max_len */
        b.g = b.sc + cells;                         /* gradients ∂L/∂s */
        b.c = b.g + cells;                          /* curvatures |∂L/∂s| */
        b.sgn = b.c + cells;                        /* signs ±1 of the terms */
        b.n_sq = b.sgn + cells;                     /* max_len */
        b.x_sq = b.n_sq + max_len;                  /* J */

        /* A: per centre; dynamic, as in the other steps (which thread takes a centre does not
         * change the bits). The next centre's rows are asked for before this one's are read. */
#pragma omp for schedule(dynamic, 8)
        for (int t = 0; t < rows; t++) {
            const int L = (int)(first[t + 1] - first[t]);
            loss_t[t] = 0.0;
            if (t + 1 < rows)
                hs_prefetch(t + 1, first, centers, offsets, points, nodes, w_in, span, mask, J,
                            D);
            if (L == 0) continue;
            const int64_t lo = offsets[centers[t]];
            int64_t path[L];
            for (int l = 0; l < L; l++)  /* also in term order, for phase C's passes */
                path_all[first[t] + l] = (int32_t)(path[l] = points[lo + l]);
            pack_rows(b.Np, nodes, path, L, damp ? b.n_sq : NULL, D, Dp);
            const uint8_t *mt = mask + (size_t)t * J;
            float *g = g_all + (size_t)first[t] * J, *ht = h_term + first[t];
            if (!cbow) {
                int64_t ctx[J];
                int n = 0;
                for (int j = 0; j < J; j++)
                    if (mt[j]) ctx[n++] = span[t + j];
                pack_rows(b.X, w_in, ctx, n, damp ? b.x_sq : NULL, D, Dp);
                loss_t[t] = hs_centre(&b, n, codes + lo, L, d_pair + (size_t)t * J * Dp,
                                      h_pair + (size_t)t * J, g, ht, Dp, damp);
            } else {
                memset(b.X, 0, sizeof(float) * Dp);
                for (int j = 0; j < J; j++)
                    if (mt[j]) axpy(1.0f, w_in + span[t + j] * D, b.X, D);
                const float inv = 1.0f / contexts[t];
                for (int d = 0; d < D; d++) b.X[d] *= inv;
                b.x_sq[0] = damp ? dot(b.X, b.X, Dp) : 0.0f;
                memcpy(hidden + (size_t)t * Dp, b.X, sizeof(float) * Dp);
                loss_t[t] = hs_centre(&b, 1, codes + lo, L, d_h + (size_t)t * Dp, h_h + t, g, ht,
                                      Dp, damp);
            }
        }

        /* B (CBOW): per span position r, the whole neu1e of every centre t = r − j it is a
         * context of; its curvature through the mean's weight 1/count */
        if (cbow) {
#pragma omp for schedule(dynamic, 64)
            for (int r = 0; r < n_span; r++)
                h_span[r] = cbow_span_row(r, rows, J, mask, d_h, h_h, contexts,
                                          d_span + (size_t)r * Dp, D, Dp);
        }

        /* C: updates by row id, each row's contributions in batch order; the node rows first,
         * whose gradients read the input rows as they were */
        const int nt = omp_get_num_threads(), me = omp_get_thread_num();
        hs_update_nodes(cbow, nodes, w_in, hidden, rows, span, mask, J, path_all, first, g_all,
                        h_term, h_node, lr, rate, D, Dp, nt, me);
#pragma omp barrier
        hs_update_inputs(cbow, w_in, span, n_span, rows, J, mask, d_pair, h_pair, d_span, h_span,
                         h_in, lr, rate_in, D, Dp, nt, me);
    }
    w2v_parallel_seconds += omp_get_wtime() - region_start;
    double loss = 0.0;
    for (int t = 0; t < rows; t++) loss += loss_t[t];
    return loss;
}
