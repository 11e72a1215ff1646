/* Summary statistics of a float32 array, for TensorBoard's histograms of the embedding matrices
 * (embedlab/track/protos.py, whose NumPy code gives the same counts and is used where this
 * library is not built).
 *
 * A 1M-word × 300 matrix holds 300M values: NumPy needs five passes over it (min, max, the
 * buckets in blocks, the sums in float64) and ~2 s on one core; here it is two passes on the
 * run's threads.
 *
 *   st_min_max: the smallest and largest value, and how many values are not finite (the caller
 *     takes NumPy's path for those: its min and max propagate NaN).
 *   st_counts_moments: the bucket counts, ⌊(x − lo)·scale⌋ in float32 arithmetic as NumPy
 *     computes it (so the same value lands in the same bucket), and the sum and sum of squares
 *     in float64. The sums are added per block of ST_BLOCK values in a fixed order and the
 *     blocks in index order: the same bits for any number of threads.
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ST_BLOCK 65536
#define ST_LANES 8 /* independent float64 sums per block: a sequential sum waits on each add */
#define ST_COPIES 4 /* copies of the counts, so that neighbouring values in one bucket do not
                       wait on each other's increments */

/* eight floats at a time in GCC's and Clang's vector types: a plain loop's min and max of
 * floats are not vectorised without -ffinite-math-only (NaN's ordering) */
typedef float st_v8f __attribute__((vector_size(32)));
typedef int32_t st_v8i __attribute__((vector_size(32)));

static st_v8f st_pick(st_v8i take, st_v8f a, st_v8f b) {
    return (st_v8f)(((st_v8i)a & take) | ((st_v8i)b & ~take));
}

void st_min_max(const float *x, int64_t n, int threads, float *out, int64_t *not_finite) {
    float lo = x[0], hi = x[0];
    int64_t bad = 0;
#pragma omp parallel num_threads(threads) reduction(min : lo) reduction(max : hi) \
    reduction(+ : bad)
    {
        /* v - v is 0 unless v is NaN or ±inf, and NaN stays in a sum */
        st_v8f l = {0}, h = {0}, z = {0};
        l += x[0];
        h += x[0];
#pragma omp for schedule(static)
        for (int64_t b = 0; b < (n + ST_BLOCK - 1) / ST_BLOCK; b++) {
            int64_t i = b * ST_BLOCK, stop = i + ST_BLOCK < n ? i + ST_BLOCK : n;
            for (; i + 8 <= stop; i += 8) {
                st_v8f v;
                memcpy(&v, x + i, sizeof v);
                l = st_pick(v < l, v, l);
                h = st_pick(v > h, v, h);
                z += v - v;
            }
            for (; i < stop; i++) {
                float v = x[i];
                l[0] = v < l[0] ? v : l[0];
                h[0] = v > h[0] ? v : h[0];
                z[0] += v - v;
            }
        }
        for (int k = 0; k < 8; k++) {
            lo = l[k] < lo ? l[k] : lo;
            hi = h[k] > hi ? h[k] : hi;
            bad += z[k] != 0.0f; /* NaN compares unequal too */
        }
    }
    out[0] = lo;
    out[1] = hi;
    *not_finite = bad;
}

/* 0 on success, -1 when memory for the per-block sums cannot be had (the caller uses NumPy).
 * bins >= 1; (hi - lo) * scale finite in float32 (the caller checks both). */
int st_counts_moments(const float *x, int64_t n, float origin, float scale, int bins,
                      int threads, int64_t *counts, double *moments) {
    int64_t blocks = (n + ST_BLOCK - 1) / ST_BLOCK;
    double *sums = malloc(sizeof(double) * 2 * (size_t)blocks);
    if (sums == NULL)
        return -1;
    int failed = 0;
    memset(counts, 0, sizeof(int64_t) * (size_t)bins);
#pragma omp parallel num_threads(threads)
    {
        /* the counts' copies, then room for one block's buckets */
        int64_t *own = calloc((size_t)bins * ST_COPIES + ST_BLOCK / 2, sizeof(int64_t));
        int32_t last = bins - 1;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t start = b * ST_BLOCK, stop = start + ST_BLOCK < n ? start + ST_BLOCK : n;
            double s[ST_LANES] = {0}, q[ST_LANES] = {0};
            int64_t i = start;
            for (; i + ST_LANES <= stop; i += ST_LANES) {
                for (int k = 0; k < ST_LANES; k++) {
                    double v = x[i + k];
                    s[k] += v;
                    q[k] += v * v;
                }
            }
            for (; i < stop; i++) {
                double v = x[i];
                s[0] += v;
                q[0] += v * v;
            }
            double total = 0.0, squares = 0.0;
            for (int k = 0; k < ST_LANES; k++) {
                total += s[k];
                squares += q[k];
            }
            sums[2 * b] = total;
            sums[2 * b + 1] = squares;
            if (own != NULL) {
                /* the buckets first, in a loop the compiler vectorises; then the counting */
                int32_t *bucket = (int32_t *)(own + (size_t)bins * ST_COPIES);
                int64_t m = stop - start;
                const float *y = x + start;
                for (int64_t k = 0; k < m; k++) {
                    /* clamped before the conversion, which is undefined past int32's range;
                     * the same bucket as NumPy's truncation followed by min(j, bins - 1) */
                    float f = (y[k] - origin) * scale;
                    f = f < (float)last ? f : (float)last;
                    bucket[k] = (int32_t)(f > 0.0f ? f : 0.0f);
                }
                int64_t k = 0;
                for (; k + ST_COPIES <= m; k += ST_COPIES)
                    for (int c = 0; c < ST_COPIES; c++)
                        own[c * bins + bucket[k + c]]++;
                for (; k < m; k++)
                    own[bucket[k]]++;
            }
        }
        if (own == NULL) {
#pragma omp atomic write
            failed = 1;
        } else {
#pragma omp critical
            for (int64_t j = 0; j < (int64_t)bins * ST_COPIES; j++)
                counts[j % bins] += own[j];
            free(own);
        }
    }
    if (failed) {
        free(sums);
        return -1;
    }
    double total = 0.0, squares = 0.0;
    for (int64_t b = 0; b < blocks; b++) {
        total += sums[2 * b];
        squares += sums[2 * b + 1];
    }
    free(sums);
    moments[0] = total;
    moments[1] = squares;
    return 0;
}
