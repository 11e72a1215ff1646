/* embedlab's batch generator and step loop: the batch specification (docs/batches.md) in C.
 *
 * Built with _kernel.c into one library (embedlab/engines/native.py). Two entry points for
 * training:
 *
 *   w2v_chunk_build: one chunk's batches — subsampling, windows, context masks, noise words —
 *     from the memory-mapped token ids, in parallel. Every random draw is Philox-4x32-10 at a
 *     counter made of the draw's position (embedlab/data/batchspec.py is the reference in
 *     NumPy; the two agree bit for bit), so threads fill disjoint parts with no order between
 *     them and the result does not depend on their number.
 *   w2v_train_batches: several consecutive steps of a built chunk, with the learning-rate
 *     schedule evaluated here, so that Python is entered once per call, not once per step.
 *
 * The only serial work is a prefix sum over the threads' counts and a few scalars per step.
 * At the end of the file, w2v_mt19937_uniform draws a new run's initial input vectors.
 */
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* from _kernel.c */
double w2v_skipgram_step(int, float *, float *, float *, const float *, const int64_t *, int,
                         const int64_t *, int, const uint8_t *, const float *, const int64_t *,
                         int, int, float, float, float, float, float *, float *, float *, int);
double w2v_cbow_step(int, float *, float *, float *, const float *, const int64_t *, int,
                     const int64_t *, int, const uint8_t *, const float *, const int64_t *, int,
                     int, float, float, float, float, float *, float *, float *, int);
double w2v_hs_step(int, int, float *, float *, const int64_t *, const int32_t *,
                   const uint8_t *, int, int64_t, const int64_t *, int, const int64_t *, int,
                   const uint8_t *, const float *, float, float, float, float *, float *,
                   float *, int);

extern double w2v_parallel_seconds;

/* Seconds spent inside w2v_train_batches and w2v_chunk_build, parallel regions included. */
double w2v_call_seconds = 0.0;

#define POSITION_TAG 0u
#define NOISE_TAG 1u

/* Philox-4x32-10 (Random123's philox4x32_R(10, ...)): counter c, key (k0, k1), output c. */
static inline void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        if (r) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        const uint32_t x0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, x2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
        c[0] = x0;
        c[1] = (uint32_t)p1;
        c[2] = x2;
        c[3] = (uint32_t)p0;
    }
}

/* The first two words of Philox at n consecutive counters: (c0, c1) = the low and high 32 bits
 * of base + j (c1 plus `high`), c2, c3 fixed, for j = 0..n−1. The same rounds as philox(), written
 * lane by lane so that the compiler computes 8 or 16 lanes per instruction (32 × 32 → 64-bit
 * multiplies vectorise): a chunk draws half a million of them. */
#define LANES 256
static void philox_lanes(int n, uint64_t base, uint32_t high, uint32_t c2, uint32_t c3,
                         uint32_t k0, uint32_t k1, uint32_t *restrict o0,
                         uint32_t *restrict o1) {
#pragma omp simd
    for (int j = 0; j < n; j++) {
        const uint64_t q = base + (uint64_t)j;
        uint32_t x0 = (uint32_t)q, x1 = (uint32_t)(q >> 32) + high, x2 = c2, x3 = c3;
        uint32_t a0 = k0, a1 = k1;
        for (int r = 0; r < 10; r++) {
            if (r) {
                a0 += 0x9E3779B9u;
                a1 += 0xBB67AE85u;
            }
            const uint64_t p0 = (uint64_t)0xD2511F53u * x0, p1 = (uint64_t)0xCD9E8D57u * x2;
            const uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ a0, y2 = (uint32_t)(p0 >> 32) ^ x3 ^ a1;
            x1 = (uint32_t)p1;
            x3 = (uint32_t)p0;
            x0 = y0;
            x2 = y2;
        }
        o0[j] = x0;
        o1[j] = x1;
    }
}

/* Exposed for the tests: the four words at counter (c0, c1, c2, c3). */
void w2v_philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                uint32_t *out) {
    uint32_t c[4] = {c0, c1, c2, c3};
    philox(c, k0, k1);
    memcpy(out, c, sizeof c);
}

/* Where chunk offset i lies: the run r holding it (runs[2r], runs[2r+1]: physical [start, end)
 * in reading order; off[r]: its first chunk offset). */
static inline int run_of(const int64_t *off, int n_runs, int64_t i) {
    int r = 0;
    while (r + 1 < n_runs && off[r + 1] <= i) r++;
    return r;
}

/* The sentence holding physical position p: the number of sentence ends <= p. */
static inline int64_t sentence_of(const int64_t *ends, int64_t n_sentences, int64_t p) {
    int64_t lo = 0, hi = n_sentences;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (ends[mid] <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Builds the batches of one chunk: positions lo .. lo + m of the reading order (m = the runs'
 * total length) of epoch `epoch`. Outputs, in the layout of embedlab.data.pairs.BatchStream's
 * padded chunk arrays (batch i's rows are t = i·batch .. i·batch + rows):
 *   tok_p (total + 2W): the kept ids, W of padding (0) on each side;
 *   sent_p (total + 2W): their sentence keys (a run index and a sentence, −1 for padding);
 *   mask (total × (2W+1)), contexts (total): each row's contexts and their count;
 *   negs (batches × groups × shared): the noise words;
 *   n_pairs, active, words_done (batches): pairs of a batch's first `batch` rows, those rows
 *   with a context, and the in-vocabulary positions the epoch has consumed after the batch.
 * Work arrays: b_pos, b_kept (m int32), kept_at (m int64), counts (threads + 1; on return
 * counts[threads] holds the number of kept tokens).
 * Returns the number of batches, or −1 − p when ids[p] names no word (>= vocab): p is the
 * lowest such position of the chunk; its tokens are then left out of the batches. */
int64_t w2v_chunk_build(
    const uint32_t *restrict ids, const int64_t *restrict runs, int n_runs,
    const int64_t *restrict sentence_ends, int64_t n_sentences,
    const uint64_t *restrict keep, const uint64_t *restrict noise_thr,
    const int64_t *restrict noise_alias, int64_t vocab,
    uint32_t k0, uint32_t k1, int64_t epoch, int64_t chunk, int64_t lo,
    int window, int batch, int rows, int groups, int shared,
    int64_t *restrict tok_p, int64_t *restrict sent_p, uint8_t *restrict mask,
    float *restrict contexts, int64_t *restrict negs, int64_t *restrict n_pairs,
    int64_t *restrict active, int64_t *restrict words_done,
    int32_t *restrict b_pos, int32_t *restrict b_kept, int64_t *restrict kept_at,
    int64_t *restrict counts, int threads) {
    const int W = window, J = 2 * window + 1;
    int64_t off[n_runs + 1];
    off[0] = 0;
    for (int r = 0; r < n_runs; r++) off[r + 1] = off[r] + (runs[2 * r + 1] - runs[2 * r]);
    const int64_t m = off[n_runs];
    int64_t n = 0, n_batches = 1, total = rows, bad = -1;
    const double region_start = omp_get_wtime();

#pragma omp parallel num_threads(threads)
    {
        const int nt = omp_get_num_threads(), me = omp_get_thread_num();
        const int64_t a = m * me / nt, e = m * (me + 1) / nt;
        /* 1: which positions subsampling keeps, and each one's window */
        int64_t kept = 0, bad_at = -1;
        uint32_t x0[LANES], x1[LANES];
        for (int64_t i0 = a, r = run_of(off, n_runs, a); i0 < e; i0 += LANES) {
            const int len = (int)(e - i0 < LANES ? e - i0 : LANES);
            philox_lanes(len, (uint64_t)(lo + i0), 0, (uint32_t)epoch, POSITION_TAG, k0, k1, x0,
                         x1);
            for (int j = 0; j < len; j++) {
                const int64_t i = i0 + j;
                while (off[r + 1] <= i) r++;
                const int64_t at = runs[2 * r] + (i - off[r]);
                const uint32_t w = ids[at];
                /* an id that names no word is reported, not read past the tables with: the
                 * corpus's ids are checked here, as they are read, not before training */
                const int valid = (int64_t)w < vocab;
                if (!valid && (bad_at < 0 || at < bad_at)) bad_at = at;
                const int in = valid && (keep == NULL || (uint64_t)x0[j] < keep[w]);
                b_pos[i] = in ? (int32_t)(1 + (((uint64_t)x1[j] * (uint64_t)W) >> 32)) : 0;
                kept += in;
            }
        }
        counts[me + 1] = kept;
        if (bad_at >= 0) {
#pragma omp critical(w2v_bad_id)
            if (bad < 0 || bad_at < bad) bad = bad_at;
        }
#pragma omp barrier
#pragma omp single
        {
            counts[0] = 0;
            for (int t = 0; t < nt; t++) counts[t + 1] += counts[t];
            n = counts[nt];
            n_batches = n > 0 ? (n + batch - 1) / batch : 1;
            total = (n_batches - 1) * batch + rows;
        }
        /* 2: the kept tokens in order, with their sentence keys */
        int64_t k = counts[me];
        int r = run_of(off, n_runs, a);
        int64_t s = a < e ? sentence_of(sentence_ends, n_sentences, runs[2 * r] + (a - off[r])) : 0;
        for (int64_t i = a; i < e; i++) {
            if (off[r + 1] <= i) {
                while (off[r + 1] <= i) r++;
                s = sentence_of(sentence_ends, n_sentences, runs[2 * r] + (i - off[r]));
            }
            const int64_t p = runs[2 * r] + (i - off[r]);
            while (s < n_sentences && sentence_ends[s] <= p) s++;
            if (!b_pos[i]) continue;
            tok_p[W + k] = ids[p];
            sent_p[W + k] = ((int64_t)r << 40) | s;
            b_kept[k] = b_pos[i];
            kept_at[k] = i;
            k++;
        }
#pragma omp barrier
        /* padding: W on the left, and on the right up to whole batches + W */
#pragma omp single
        {
            for (int j = 0; j < W; j++) tok_p[j] = 0, sent_p[j] = -1;
            for (int64_t j = W + n; j < total + 2 * W; j++) tok_p[j] = 0, sent_p[j] = -1;
        }
        /* 3: each row's contexts: |o| <= b, same sentence key (padding matches nothing) */
#pragma omp for schedule(static)
        for (int64_t t = 0; t < total; t++) {
            uint8_t *mt = mask + t * J;
            const int b = t < n ? b_kept[t] : 0;
            const int64_t key = sent_p[W + t];
            int count = 0;
            for (int j = 0; j < J; j++) {
                const int o = j - W, d = o < 0 ? -o : o;
                const int in = o != 0 && d <= b && sent_p[W + t + o] == key;
                mt[j] = (uint8_t)in;
                count += in;
            }
            contexts[t] = (float)count;
        }
        /* 4: the noise words */
        const int64_t draws = n_batches * groups * (int64_t)shared;
#pragma omp for schedule(static)
        for (int64_t d0 = 0; d0 < draws; d0 += LANES) {
            const int len = (int)(draws - d0 < LANES ? draws - d0 : LANES);
            philox_lanes(len, (uint64_t)d0, (uint32_t)chunk, (uint32_t)epoch, NOISE_TAG, k0, k1,
                         x0, x1);
            for (int j = 0; j < len; j++) {
                const int64_t col = (int64_t)(((uint64_t)x0[j] * (uint64_t)vocab) >> 32);
                negs[d0 + j] = (uint64_t)x1[j] < noise_thr[col] ? col : noise_alias[col];
            }
        }
        /* 5: each batch's counts and where the epoch stands after it */
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n_batches; i++) {
            const int64_t first = i * batch, end = first + batch < n ? first + batch : n;
            int64_t pairs = 0, with = 0;
            for (int64_t t = first; t < first + batch && t < total; t++) {
                pairs += (int64_t)contexts[t];
                with += contexts[t] > 0.0f;
            }
            n_pairs[i] = pairs;
            active[i] = with;
            words_done[i] = i + 1 == n_batches ? lo + m : end > 0 ? lo + kept_at[end - 1] + 1 : lo;
        }
    }
    counts[threads] = n; /* the kept tokens, where the caller finds them (fewer threads may
                          * have run than were asked for) */
    const double region = omp_get_wtime() - region_start;
    w2v_parallel_seconds += region;
    w2v_call_seconds += region;
    return bad >= 0 ? -1 - bad : n_batches;
}

/* Trains `steps` consecutive batches of a chunk built by w2v_chunk_build, from batch `first`.
 * The rate of a step is word2vec's linear decay where the step starts,
 *   lr0 · max(min_ratio, 1 − words_seen / total_words),
 * evaluated in double exactly as embedlab.training.schedule.linear_lr (no fused operations:
 * the same bits as the Python value), then divided by the batch's pairs for the mean reduction.
 * model: 0 skip-gram, 1 CBOW; loss: 0 negative sampling, 1 NCE, 2 hierarchical softmax.
 * mask_tmp and ctx_tmp (rows × (2W+1) bytes, rows floats) hold a batch's rows when rows >
 * batch: the rows past `batch` belong to the next batch and have no contexts in this one.
 * Writes each step's summed loss and rate; returns the steps trained, or −1 when a
 * hierarchical-softmax batch had more terms than its scratch holds. */
int w2v_train_batches(
    int model, int loss, int dim, float *w_in, float *w_out, float *bias, const float *log_kq,
    const int64_t *offsets, const int32_t *points, const uint8_t *codes, int max_len,
    int64_t terms,
    const int64_t *tok_p, const uint8_t *mask, const float *contexts, const int64_t *negs,
    const int64_t *n_pairs, const int64_t *words_done,
    int window, int batch, int rows, int groups, int shared, float noise_weight,
    int64_t first, int steps,
    double lr0, double min_ratio, int64_t words_before, int64_t words_seen, int64_t total_words,
    int mean, double damping, double input_damping, float bias_sq,
    float *scratch, float *h_in, float *h_out, uint8_t *mask_tmp, float *ctx_tmp,
    double *loss_out, double *lr_out, int threads) {
    const int J = 2 * window + 1;
    const double total = (double)(total_words > 1 ? total_words : 1), call_start = omp_get_wtime();
    for (int j = 0; j < steps; j++) {
        const int64_t i = first + j, s = i * batch;
        const uint8_t *m = mask + s * J;
        const float *ctx = contexts + s;
        if (rows != batch) {
            memcpy(mask_tmp, m, (size_t)batch * J);
            memset(mask_tmp + (size_t)batch * J, 0, (size_t)(rows - batch) * J);
            memcpy(ctx_tmp, ctx, sizeof(float) * batch);
            memset(ctx_tmp + batch, 0, sizeof(float) * (rows - batch));
            m = mask_tmp;
            ctx = ctx_tmp;
        }
        const double frac = 1.0 - (double)words_seen / total;
        const double lr = lr0 * (frac > min_ratio ? frac : min_ratio);
        const double step_lr = mean ? lr / (double)(n_pairs[i] > 1 ? n_pairs[i] : 1) : lr;
        const double rate = damping > 0.0 ? step_lr / damping : 0.0;
        double out;
        if (loss == 2) {
            const double rate_in = input_damping > 0.0 ? step_lr / input_damping : 0.0;
            out = w2v_hs_step(model, dim, w_in, w_out, offsets, points, codes, max_len, terms,
                              tok_p + window + s, rows, tok_p + s, window, m, ctx,
                              (float)step_lr, (float)rate, (float)rate_in, scratch, h_in, h_out,
                              threads);
            if (out < 0.0) {
                w2v_call_seconds += omp_get_wtime() - call_start;
                return -1;
            }
        } else {
            out = (model == 1 ? w2v_cbow_step : w2v_skipgram_step)(
                dim, w_in, w_out, loss == 1 ? bias : NULL, loss == 1 ? log_kq : NULL,
                tok_p + window + s, rows, tok_p + s, window, m, ctx,
                negs + i * groups * (int64_t)shared, groups, shared, noise_weight,
                (float)step_lr, (float)rate, bias_sq, scratch, h_in, h_out, threads);
        }
        loss_out[j] = out;
        lr_out[j] = lr;
        words_seen = words_before + words_done[i];
    }
    w2v_call_seconds += omp_get_wtime() - call_start;
    return steps;
}

/* ---- the initial vectors' draw ---------------------------------------------------------------
 * MT19937's 32-bit words turned into float32 values, in one pass. The words are those of NumPy's
 * RandomState (and of torch's CPU generator) from a given state: the classic genrand_int32,
 * regenerating the 624 words of the state at a time. Each word w becomes (w mod 2^24) · 2^-24,
 * torch.rand's float32 value, and with `centred` that value u becomes ((u − 0.5) · scale) / dim,
 * the float32 operations embedlab.engines.params.init_params applies. Every step is exact or one
 * float32 rounding in the same order as the NumPy version (embedlab.seeding.uniform_float32), so
 * the bits agree; only the passes over memory are fewer. */

#define MT_N 624
#define MT_M 397
#define MATRIX_A 0x9908b0dfu
#define UPPER 0x80000000u
#define LOWER 0x7fffffffu

static inline uint32_t twist(uint32_t a, uint32_t b, uint32_t m) {
    const uint32_t y = (a & UPPER) | (b & LOWER);
    return m ^ (y >> 1) ^ ((0u - (y & 1u)) & MATRIX_A);
}

/* The state's next 624 words (NumPy's mt19937_gen). The first loop reads words it has not
 * written yet (i + M > N − M), the second words it wrote 227 places before: both vectorise. */
static void regenerate(uint32_t *restrict key) {
    int i = 0;
    for (; i < MT_N - MT_M; i++) key[i] = twist(key[i], key[i + 1], key[i + MT_M]);
    for (; i < MT_N - 1; i++) key[i] = twist(key[i], key[i + 1], key[i + MT_M - MT_N]);
    key[MT_N - 1] = twist(key[MT_N - 1], key[0], key[MT_M - 1]);
}

static inline uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

static inline float to_value(uint32_t w, int centred, float scale, float dim) {
    float u = (float)(w & 0xFFFFFFu) * 0x1p-24f; /* exact */
    if (centred) {
        u = u - 0.5f; /* exact: u has 24 bits below 1 */
        u = u * scale;
        u = u / dim;
    }
    return u;
}

/* Writes n values into out from the state (key[624], *pos: the next word's index, 624 when the
 * state must be regenerated first), and leaves the state after the n-th word, as RandomState
 * would be after drawing them. */
void w2v_mt19937_uniform(uint32_t *restrict key, int32_t *restrict pos, int64_t n,
                         float *restrict out, int centred, float scale, float dim) {
    int64_t i = 0;
    int p = *pos;
    while (i < n) {
        if (p >= MT_N) {
            regenerate(key);
            p = 0;
        }
        const int64_t take = n - i < MT_N - p ? n - i : MT_N - p;
        const uint32_t *restrict words = key + p;
        float *restrict dst = out + i;
        for (int64_t j = 0; j < take; j++) dst[j] = to_value(temper(words[j]), centred, scale, dim);
        i += take;
        p += (int)take;
    }
    *pos = p;
}

/* ---- the Huffman tree of hierarchical softmax (engines/huffman.py) ---------------------------
 * word2vec.c's two-queue merge: count[0 .. v) holds the words' counts sorted descending, the
 * leaves; inner node v + a is made from the two rarest heads of the leaf queue (from v − 1 down)
 * and of the inner queue (in the order the nodes were made), a leaf taken only when it is
 * strictly rarer (a node not made yet counts as infinite). Writes count[v .. 2v − 1) and each
 * inner node's children: first[a] (bit 0) and second[a] (bit 1). The caller makes sure the sums
 * fit in int64. */
void w2v_huffman_merge(int64_t v, int64_t *restrict count, int64_t *restrict first,
                       int64_t *restrict second) {
    int64_t pos1 = v - 1, pos2 = v;
    for (int64_t node = v; node < 2 * v - 1; node++) {
        int64_t taken[2];
        for (int k = 0; k < 2; k++) {
            if (pos1 >= 0 && (pos2 >= node || count[pos1] < count[pos2]))
                taken[k] = pos1--;
            else
                taken[k] = pos2++;
        }
        count[node] = count[taken[0]] + count[taken[1]];
        first[node - v] = taken[0];
        second[node - v] = taken[1];
    }
}

/* Every word's path, root first: leaf i (of the sorted words; word order[i]) walks up through
 * parent[] to the root 2v − 2, writing from the end of its entries offsets[order[i]] ..
 * offsets[order[i] + 1) the inner node reached, minus v, and the bit taken there (bit[] of the
 * node it came from). */
void w2v_huffman_paths(int64_t v, const int64_t *restrict parent, const uint8_t *restrict bit,
                       const int64_t *restrict order, const int64_t *restrict offsets,
                       int32_t *restrict points, uint8_t *restrict codes) {
    const int64_t root = 2 * v - 2;
    for (int64_t i = 0; i < v; i++) {
        int64_t at = offsets[order[i] + 1] - 1;
        for (int64_t node = i; node != root; at--) {
            const int64_t up = parent[node];
            points[at] = (int32_t)(up - v);
            codes[at] = bit[node];
            node = up;
        }
    }
}

/* ---- Walker's alias table of the noise words (embedlab.data.noise._walk) -------------------
 * The running value of the current large column over the small columns small[0 .. ns) (scaled
 * probabilities, in the order taken), the large ones being large[0 .. nl) (in order), nl ≥ 1:
 * the same double operations, in the same order, as the Python loop, so the same bits. Writes
 * taken[] (for each large column that went small: the small columns taken up to then; last,
 * the number taken in all) and residuals[] (what each of those columns had left); returns the
 * number of entries of taken (residuals has one fewer, or as many when the large columns ran
 * out). */
int64_t w2v_alias_walk(const double *restrict small, int64_t ns, const double *restrict large,
                       int64_t nl, int64_t *restrict taken, double *restrict residuals,
                       int64_t *restrict went) {
    int64_t t = 0, r = 0, j = 0;
    double value = large[0];
    for (int64_t i = 1; i <= ns; i++) {
        value = (value + small[i - 1]) - 1.0;
        while (value < 1.0) {
            taken[t++] = i;
            if (j == nl - 1) {  /* no large column left to alias it to: the loop ends */
                *went = r;
                return t;
            }
            residuals[r++] = value;
            j++;
            value = (large[j] + value) - 1.0;
        }
    }
    taken[t++] = ns;
    *went = r;
    return t;
}
