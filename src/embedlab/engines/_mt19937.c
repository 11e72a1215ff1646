/* The initial vectors' draw: MT19937's 32-bit words turned into float32 values, in one pass.
 *
 * Built with _kernel.c into one library (embedlab/engines/native.py). The words are those of
 * NumPy's RandomState (and of torch's CPU generator) from a given state: the classic
 * genrand_int32, regenerating the 624 words of the state at a time. Each word w becomes
 * (w mod 2^24) · 2^-24, torch.rand's float32 value, and with `centred` that value u becomes
 * ((u − 0.5) · scale) / dim, the float32 operations embedlab.engines.params.init_params applies.
 * Every step is exact or one float32 rounding in the same order as the NumPy version
 * (embedlab.seeding.uniform_float32), so the bits agree; only the passes over memory are fewer.
 */
#include <stdint.h>

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
