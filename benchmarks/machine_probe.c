/* What a second thread can gain on this machine right now, apart from embedlab: scaling.py runs
 * this between its training runs so that a thread ratio can be read against the machine's own.
 *
 * Two loads, each timed with 1 and then N threads doing the same work per thread (so perfect
 * scaling gives equal times and a speedup of N):
 *   compute — 16 independent float32 multiply-add chains of 16 lanes per thread, no memory;
 *   rows    — read-modify-write of random 400-byte rows (100 float32, a dim-100 embedding row)
 *             in a table of its own per thread, 128 MiB each: the scattered row updates of a
 *             training step, bound by memory latency.
 * Each load runs about a second per thread count (a short one would catch the machine's
 * bursts). Prints one JSON object: seconds per load and thread count, and the speedups. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LANES 16
#define CHAINS 16
#define ROW 100

static double compute(int threads, long iters) {
    double sink = 0.0;
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
        float acc[CHAINS][LANES];
        for (int c = 0; c < CHAINS; c++)
            for (int l = 0; l < LANES; l++) acc[c][l] = (float)(c + l + omp_get_thread_num());
        const float a = 0.999999f, b = 1e-7f;
        for (long i = 0; i < iters; i++)
            for (int c = 0; c < CHAINS; c++)
#pragma omp simd
                for (int l = 0; l < LANES; l++) acc[c][l] = acc[c][l] * a + b;
        for (int c = 0; c < CHAINS; c++)
            for (int l = 0; l < LANES; l++) sink += acc[c][l];
    }
    const double dt = omp_get_wtime() - t0;
    if (sink == 42.0) puts("");  /* keeps the chains alive */
    return dt;
}

static double rows(int threads, float **tables, size_t n_rows, long updates) {
    const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    {
        float *table = tables[omp_get_thread_num()];
        uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(omp_get_thread_num() + 1);
        for (long i = 0; i < updates; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            float *r = table + (x % n_rows) * ROW;
            for (int d = 0; d < ROW; d++) r[d] += 1e-3f;
        }
    }
    return omp_get_wtime() - t0;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 2;
    const long iters = argc > 2 ? atol(argv[2]) : 60000000L;
    const long updates = argc > 3 ? atol(argv[3]) : 6000000L;
    const size_t bytes = (size_t)128 << 20, n_rows = bytes / (ROW * sizeof(float));
    float **tables = malloc(sizeof(float *) * (size_t)n);
    for (int t = 0; t < n; t++) {
        tables[t] = malloc(n_rows * ROW * sizeof(float));
        for (size_t k = 0; k < n_rows * ROW; k++) tables[t][k] = 0.0f;  /* pages in, untimed */
    }
    const double c1 = compute(1, iters), cn = compute(n, iters);
    const double r1 = rows(1, tables, n_rows, updates), rn = rows(n, tables, n_rows, updates);
    printf("{\"threads\": %d, \"compute_s\": [%.4f, %.4f], \"rows_s\": [%.4f, %.4f], "
           "\"compute_speedup\": %.3f, \"rows_speedup\": %.3f}\n",
           n, c1, cn, r1, rn, n * c1 / cn, n * r1 / rn);
    for (int t = 0; t < n; t++) free(tables[t]);
    free(tables);
    return 0;
}
