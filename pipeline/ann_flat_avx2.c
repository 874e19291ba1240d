/* pipeline/ann_flat_avx2.c — the compact scan's kernels for AVX2 + FMA + F16C (ann_flat.h): f16
 * rows widened by vcvtph2ps, int8 rows by vpmovsxbd + vcvtdq2ps, each into four FMA accumulators;
 * binary rows by popcnt over 64-bit words. Compiled with -mavx2 -mfma -mf16c -mpopcnt; called only
 * when modattn__cpu_get() reports AVX2, FMA and F16C (popcnt comes with them). */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "pipeline/ann_flat.h"
#include "core/internal_core.h"

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* the rows PREFETCH_ROWS ahead, every cache line of one: the scan is a stream, and the hardware
 * prefetcher alone left int8 at half the bandwidth f16 reached (1M rows, 2 cores: 31.6 ms a query,
 * 16.4 with it); f16 went from 30 to 41 ms with it, so it has none */
#define PREFETCH_ROWS 8
static inline void prefetch_row(const unsigned char *row, size_t stride) {
    for (size_t o = 0; o < stride; o += 64) _mm_prefetch((const char *)row + o, _MM_HINT_T0);
}

static inline __m256 f16x8(const unsigned char *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

void modattn__flat_f16_avx2(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                            const void *qv, float *out) {
    (void)scales;
    const float *q = qv;
    for (size_t r = 0; r < n; r++) {
        const unsigned char *c = codes + r * stride; /* (prefetching as int8 does made it slower) */
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        size_t i = 0;
        for (; i + 32 <= dim; i += 32) {
            a0 = _mm256_fmadd_ps(f16x8(c + 2 * i), _mm256_loadu_ps(q + i), a0);
            a1 = _mm256_fmadd_ps(f16x8(c + 2 * i + 16), _mm256_loadu_ps(q + i + 8), a1);
            a2 = _mm256_fmadd_ps(f16x8(c + 2 * i + 32), _mm256_loadu_ps(q + i + 16), a2);
            a3 = _mm256_fmadd_ps(f16x8(c + 2 * i + 48), _mm256_loadu_ps(q + i + 24), a3);
        }
        for (; i + 8 <= dim; i += 8) a0 = _mm256_fmadd_ps(f16x8(c + 2 * i), _mm256_loadu_ps(q + i), a0);
        float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        for (; i < dim; i++) {
            uint16_t h;
            memcpy(&h, c + 2 * i, 2);
            s += q[i] * _cvtsh_ss(h);
        }
        out[r] = s;
    }
}

static inline __m256 i8x8(const unsigned char *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

void modattn__flat_int8_avx2(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                             const void *qv, float *out) {
    const float *q = qv;
    for (size_t r = 0; r < n; r++) {
        const unsigned char *c = codes + r * stride;
        if (r + PREFETCH_ROWS < n) prefetch_row(c + PREFETCH_ROWS * stride, stride);
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        size_t i = 0;
        for (; i + 32 <= dim; i += 32) {
            a0 = _mm256_fmadd_ps(i8x8(c + i), _mm256_loadu_ps(q + i), a0);
            a1 = _mm256_fmadd_ps(i8x8(c + i + 8), _mm256_loadu_ps(q + i + 8), a1);
            a2 = _mm256_fmadd_ps(i8x8(c + i + 16), _mm256_loadu_ps(q + i + 16), a2);
            a3 = _mm256_fmadd_ps(i8x8(c + i + 24), _mm256_loadu_ps(q + i + 24), a3);
        }
        for (; i + 8 <= dim; i += 8) a0 = _mm256_fmadd_ps(i8x8(c + i), _mm256_loadu_ps(q + i), a0);
        float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        for (; i < dim; i++) s += q[i] * (float)(int8_t)c[i];
        out[r] = s * scales[r];
    }
}

/* f16 when scales is NULL, else int8 */
void modattn__flat_decode_avx2(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                               float *out) {
    for (size_t r = 0; r < n; r++) {
        const unsigned char *c = codes + r * stride;
        float *o = out + r * dim;
        size_t i = 0;
        if (!scales) {
            for (; i + 8 <= dim; i += 8) _mm256_storeu_ps(o + i, f16x8(c + 2 * i));
            for (; i < dim; i++) {
                uint16_t h;
                memcpy(&h, c + 2 * i, 2);
                o[i] = _cvtsh_ss(h);
            }
        } else {
            const __m256 s = _mm256_set1_ps(scales[r]);
            for (; i + 8 <= dim; i += 8) _mm256_storeu_ps(o + i, _mm256_mul_ps(i8x8(c + i), s));
            for (; i < dim; i++) o[i] = (float)(int8_t)c[i] * scales[r];
        }
    }
}

void modattn__flat_binary_popcnt(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                                 const void *qv, float *out) {
    (void)scales;
    const size_t words = stride / 8;
    uint64_t q[64];
    const bool small = words <= 64;
    if (small) memcpy(q, qv, stride);
    const uint64_t *qq = small ? q : qv;
    for (size_t r = 0; r < n; r++) {
        const uint64_t *c = (const uint64_t *)(codes + r * stride);
        if (r + 4 * PREFETCH_ROWS < n) _mm_prefetch((const char *)(c) + 4 * PREFETCH_ROWS * stride, _MM_HINT_T0);
        long long ham = 0;
        for (size_t w = 0; w < words; w++) ham += _mm_popcnt_u64(c[w] ^ qq[w]);
        out[r] = (float)dim - 2.0f * (float)ham;
    }
}
