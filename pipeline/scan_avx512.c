/* pipeline/scan_avx512.c — the fast search scan for AVX-512F: dot products of a query with the rows
 * of a matrix. Memory-bound by design: the rows are read once, in order, one row at a time with
 * four independent accumulators (64 floats per step), the last dim % 16 floats through a masked
 * load. Reading one row after the other keeps a single sequential stream for the hardware
 * prefetcher: interleaving four rows (four streams, the query loaded once per four rows) measured
 * at half the speed on this project's machines, and software prefetching slowed it further.
 * Compiled with -mavx512f -mfma; called only when modattn__cpu_get() reports AVX-512F. */
#include <immintrin.h>

#include "pipeline/pipeline_internal.h"
#include "core/internal_core.h"

void modattn__scan_avx512(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                          float *scores) {
    const size_t tail = dim % 16;
    const __mmask16 tm = (__mmask16)((1u << tail) - 1u);
    for (size_t i = 0; i < n; i++) {
        const float *r = mat + i * ld;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
        size_t j = 0;
        for (; j + 64 <= dim; j += 64) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + j), _mm512_loadu_ps(q + j), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + j + 16), _mm512_loadu_ps(q + j + 16), a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r + j + 32), _mm512_loadu_ps(q + j + 32), a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r + j + 48), _mm512_loadu_ps(q + j + 48), a3);
        }
        for (; j + 16 <= dim; j += 16)
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + j), _mm512_loadu_ps(q + j), a0);
        if (tail)
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, r + j), _mm512_maskz_loadu_ps(tm, q + j), a1);
        scores[i] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
}

float modattn__dot1_avx512(const float *a, const float *b, size_t dim) {
    float s;
    modattn__scan_avx512(a, 1, dim, dim, b, &s);
    return s;
}
