/* pipeline/scan_avx2.c — the search scan for AVX2 + FMA: as scan_avx512.c with 8-float vectors,
 * one row at a time with four accumulators (32 floats per step), the last dim % 8 floats through
 * a masked load. Compiled with -mavx2 -mfma; called only when modattn__cpu_get() reports both. */
#include <immintrin.h>

#include "pipeline/pipeline_internal.h"
#include "core/internal_core.h"

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void modattn__scan_avx2(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                        float *scores) {
    const int tail = (int)(dim % 8);
    const __m256i tm = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (size_t i = 0; i < n; i++) {
        const float *r = mat + i * ld;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        size_t j = 0;
        for (; j + 32 <= dim; j += 32) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + j), _mm256_loadu_ps(q + j), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r + j + 8), _mm256_loadu_ps(q + j + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r + j + 16), _mm256_loadu_ps(q + j + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r + j + 24), _mm256_loadu_ps(q + j + 24), a3);
        }
        for (; j + 8 <= dim; j += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r + j), _mm256_loadu_ps(q + j), a0);
        if (tail)
            a1 = _mm256_fmadd_ps(_mm256_maskload_ps(r + j, tm), _mm256_maskload_ps(q + j, tm), a1);
        scores[i] = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    }
}

float modattn__dot1_avx2(const float *a, const float *b, size_t dim) {
    float s;
    modattn__scan_avx2(a, 1, dim, dim, b, &s);
    return s;
}
