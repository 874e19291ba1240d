/* backends/cpu/cpu_sgemm.c — our fp32 GEMM for AVX2+FMA CPUs, over weights packed once at load.
 *
 * Why: on AVX2 CPUs oneDNN's matmul is its jit GEMM, which packs the weights again on every call
 * (its copy kernels were 5% of a Qwen3-0.6B-shaped forward pass), runs calls under about 288 rows
 * through an older, slower kernel, and gives a row other bits for other row counts unless called
 * in sizes picked by measurement (cpu_gemm.c's run_big_cols). Here the weights are packed once
 * (modattn__sgemm_pack) and every product is
 *
 *     C[i, n] (= or +=) sum over K slices s of (sum over k in s of A[i, k] W[n, k], FMAs in k order)
 *
 * with the slices SGEMM_KC wide, added to C in order. An element's operations do not depend on
 * the row count, on where its row sits in the call, or on which columns the call covers: a text
 * gets the same bits alone or batched, for any split of rows or of 16-column groups over threads,
 * by construction rather than by measurement.
 *
 * Shape (the BLIS/GotoBLAS scheme; Goto & van de Geijn, "Anatomy of high-performance matrix
 * multiplication", 2008; the 6x16 AVX2 micro-tile is BLIS' Haswell choice):
 *   - W [N, K] packed into 16-column panels, each K x 16 floats, k-major (64-byte aligned rows);
 *   - for each K slice, the call's rows packed SGEMM_MC at a time into 6-row groups (kc x 6,
 *     k-major; rows past the end are zeros and never stored);
 *   - the micro-kernel keeps a 6x16 tile of C in 12 ymm registers: per k, two loads of the
 *     panel, six broadcasts of A, twelve FMAs; it prefetches its C tile first (the tile is read
 *     back from memory once per K slice, and a miss there stalled each call: 56 -> 74 GFLOP per
 *     CPU-s on 6144x1024 with 768 rows).
 * Sizes measured on a Zen 3 EPYC (32 KiB L1, 512 KiB L2; one thread, best of 7, interleaved with
 * dnnl_sgemm, % of the FMA peak measured in the same run, 6144x1024 with 768 rows): KC 256 / MC 144
 * (BLIS' Zen sizes) 74%, KC 512 / MC 768 90%, KC 1024 / MC 768 91%, dnnl_sgemm 76%; on 2,272 rows
 * of 2048x1024, 512x3072, 3072x1024, 512x2048: KC 512 / MC 768 86, 80, 74, 74% against
 * dnnl_sgemm's 76, 72, 77, 66% (the host is shared: single readings swing by 10%). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SGEMM_X86 1
#endif

enum { MR = 6, NR = MODATTN__SGEMM_NR, KC = MODATTN__SGEMM_KC, MC = 768 };

#ifndef MODATTN_KERNEL_UNCHECKED /* (the twin, cpu_sgemm_unchecked.c, has only the loops below) */
bool modattn__sgemm_available(char *reason, size_t len) {
#ifdef SGEMM_X86
    const modattn_cpu_features *f = modattn__cpu_get();
    if (f->avx2 && f->fma) return true;
    if (reason && len) snprintf(reason, len, "our fp32 GEMM needs AVX2 and FMA, which this CPU (%s) lacks", f->model_name);
    return false;
#else
    if (reason && len) snprintf(reason, len, "our fp32 GEMM is written for x86-64 (AVX2 and FMA)");
    return false;
#endif
}

size_t modattn__sgemm_packed_bytes(int64_t N, int64_t K) {
    return (size_t)((N + NR - 1) / NR) * (size_t)K * NR * sizeof(float);
}

size_t modattn__sgemm_scratch_bytes(int64_t K) {
    const int64_t kc = K < KC ? K : KC;
    return (size_t)MC * (size_t)kc * sizeof(float);
}

#endif /* !MODATTN_KERNEL_UNCHECKED */

/* W [N, K] into 16-column panels, K x 16 each, k-major, columns past N zeros */
static void pack_w(const float *restrict W, int64_t N, int64_t K, float *restrict out) {
    const int64_t np = (N + NR - 1) / NR;
    for (int64_t q = 0; q < np; q++) {
        float *d = out + q * K * NR;
        const int64_t w = N - q * NR < NR ? N - q * NR : NR;
        for (int64_t k = 0; k < K; k++) {
            for (int64_t j = 0; j < w; j++) d[k * NR + j] = W[(q * NR + j) * K + k];
            for (int64_t j = w; j < NR; j++) d[k * NR + j] = 0.0f;
        }
    }
}

#ifdef MODATTN_KERNEL_UNCHECKED
void modattn__sgemm_pack_unchecked(const float *W, int64_t N, int64_t K, float *out);
void modattn__sgemm_pack_unchecked(const float *W, int64_t N, int64_t K, float *out) { pack_w(W, N, K, out); }
#else
#ifdef MODATTN_KERNEL_TWINS
void modattn__sgemm_pack_unchecked(const float *W, int64_t N, int64_t K, float *out);
#endif

void modattn__sgemm_pack(const float *restrict W, int64_t N, int64_t K, float *restrict out) {
#ifdef MODATTN_KERNEL_TWINS
    if (modattn__kernel_twins_on()) { /* the twin, its ranges checked first (core/internal_core.h) */
        modattn__asan_check_region(W, (size_t)(N * K) * sizeof(float), false, "sgemm pack: W");
        modattn__asan_check_region(out, modattn__sgemm_packed_bytes(N, K), true, "sgemm pack: panels");
        modattn__sgemm_pack_unchecked(W, N, K, out);
        return;
    }
#endif
    pack_w(W, N, K, out);
}

#endif /* !MODATTN_KERNEL_UNCHECKED */

#ifdef SGEMM_X86
/* rows [0, m) of A's columns [0, kc) into 6-row groups, kc x 6 each, k-major; a last group's
 * missing rows are zeros */
static void pack_a(const float *restrict A, int64_t lda, int64_t m, int64_t kc, float *restrict Ap) {
    for (int64_t g = 0; g < m; g += MR) {
        const int64_t mr = m - g < MR ? m - g : MR;
        float *d = Ap + g * kc;
        if (mr == MR) {
            const float *a0 = A + g * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda, *a4 = a3 + lda,
                        *a5 = a4 + lda;
            for (int64_t k = 0; k < kc; k++) {
                float *e = d + k * MR;
                e[0] = a0[k], e[1] = a1[k], e[2] = a2[k], e[3] = a3[k], e[4] = a4[k], e[5] = a5[k];
            }
        } else {
            for (int64_t k = 0; k < kc; k++)
                for (int64_t r = 0; r < MR; r++) d[k * MR + r] = r < mr ? A[(g + r) * lda + k] : 0.0f;
        }
    }
}

/* C[0..mr, 0..nr) (= if first, else +=) the 6x16 tile a . b over kc; nr < 16 only for a last
 * panel of a width that is not a multiple of 16 */
__attribute__((target("avx2,fma"))) static void kernel(int64_t kc, const float *restrict a, const float *restrict b,
                                                       float *restrict c, int64_t ldc, int mr, int nr, bool first) {
    for (int r = 0; r < mr; r++) {
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + r * ldc + NR - 1), _MM_HINT_T0);
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_load_ps(b + k * NR), b1 = _mm256_load_ps(b + k * NR + 8);
        __m256 x = _mm256_broadcast_ss(a + k * MR + 0);
        c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + k * MR + 1);
        c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + k * MR + 2);
        c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + k * MR + 3);
        c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + k * MR + 4);
        c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + k * MR + 5);
        c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    const __m256 acc[2 * MR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    if (nr == NR) {
        for (int r = 0; r < mr; r++) {
            float *cr = c + r * ldc;
            if (first) {
                _mm256_storeu_ps(cr, acc[2 * r]), _mm256_storeu_ps(cr + 8, acc[2 * r + 1]);
            } else {
                _mm256_storeu_ps(cr, _mm256_add_ps(_mm256_loadu_ps(cr), acc[2 * r]));
                _mm256_storeu_ps(cr + 8, _mm256_add_ps(_mm256_loadu_ps(cr + 8), acc[2 * r + 1]));
            }
        }
        return;
    }
    /* a narrow last panel: the same sums, added one by one (the same single rounding as above) */
    float t[MR][NR];
    for (int r = 0; r < MR; r++) _mm256_storeu_ps(t[r], acc[2 * r]), _mm256_storeu_ps(t[r] + 8, acc[2 * r + 1]);
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++) c[r * ldc + j] = first ? t[r][j] : c[r * ldc + j] + t[r][j];
}

/* the products of modattn__sgemm_run, its arguments checked */
static void run_loops(const float *restrict Wp, int64_t K, int64_t M, const float *restrict A, int64_t lda,
                      float *restrict C, int64_t ldc, int64_t n0, int64_t n1, bool accumulate, float *restrict scratch) {
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        const bool first = k0 == 0 && !accumulate;
        for (int64_t i0 = 0; i0 < M; i0 += MC) {
            const int64_t m = M - i0 < MC ? M - i0 : MC;
            pack_a(A + i0 * lda + k0, lda, m, kc, scratch);
            for (int64_t n = n0; n < n1; n += NR) {
                const float *b = Wp + (n / NR * K + k0) * NR;
                const int nr = n1 - n < NR ? (int)(n1 - n) : NR;
                for (int64_t g = 0; g < m; g += MR)
                    kernel(kc, scratch + g * kc, b, C + (i0 + g) * ldc + n, ldc, m - g < MR ? (int)(m - g) : MR, nr,
                           first);
            }
        }
    }
}
#endif

#ifdef MODATTN_KERNEL_UNCHECKED
#ifdef SGEMM_X86
void modattn__sgemm_run_unchecked(const float *Wp, int64_t K, int64_t M, const float *A, int64_t lda, float *C,
                                  int64_t ldc, int64_t n0, int64_t n1, bool accumulate, float *scratch);
void modattn__sgemm_run_unchecked(const float *Wp, int64_t K, int64_t M, const float *A, int64_t lda, float *C,
                                  int64_t ldc, int64_t n0, int64_t n1, bool accumulate, float *scratch) {
    run_loops(Wp, K, M, A, lda, C, ldc, n0, n1, accumulate, scratch);
}
#endif
#else
#if defined(SGEMM_X86) && defined(MODATTN_KERNEL_TWINS)
void modattn__sgemm_run_unchecked(const float *Wp, int64_t K, int64_t M, const float *A, int64_t lda, float *C,
                                  int64_t ldc, int64_t n0, int64_t n1, bool accumulate, float *scratch);

/* the twin's call, after checking every range it reads and writes (core/internal_core.h) */
static void run_twin(const float *Wp, int64_t K, int64_t M, const float *A, int64_t lda, float *C, int64_t ldc,
                     int64_t n0, int64_t n1, bool accumulate, float *scratch) {
    if (M > 0 && K > 0 && n1 > n0) {
        const int64_t p0 = n0 / NR, p1 = (n1 + NR - 1) / NR, mp = (M + MR - 1) / MR * MR;
        const int64_t kc = K < KC ? K : KC;
        modattn__asan_check_region(Wp + p0 * K * NR, (size_t)((p1 - p0) * K * NR) * sizeof(float), false,
                                   "sgemm: the packed weights' panels");
        modattn__asan_check_region(A, (size_t)((M - 1) * lda + K) * sizeof(float), false, "sgemm: A");
        modattn__asan_check_region(C + n0, (size_t)((M - 1) * ldc + (n1 - n0)) * sizeof(float), true, "sgemm: C");
        modattn__asan_check_region(scratch, (size_t)((mp < MC ? mp : MC) * kc) * sizeof(float), true, "sgemm: scratch");
    }
    modattn__sgemm_run_unchecked(Wp, K, M, A, lda, C, ldc, n0, n1, accumulate, scratch);
}
#endif

int modattn__sgemm_run(const float *restrict Wp, int64_t N, int64_t K, int64_t M, const float *restrict A, int64_t lda,
                       float *restrict C, int64_t ldc, int64_t n0, int64_t n1, bool accumulate, float *restrict scratch) {
#ifdef SGEMM_X86
    if (M < 0 || n0 < 0 || n0 % NR || n1 > N || n1 < n0 || !scratch)
        return modattn__error(MODATTN_EINTERNAL, "sgemm: columns %lld..%lld of %lld, %lld rows: not a call it can run",
                              (long long)n0, (long long)n1, (long long)N, (long long)M);
#ifdef MODATTN_KERNEL_TWINS
    if (modattn__kernel_twins_on()) {
        run_twin(Wp, K, M, A, lda, C, ldc, n0, n1, accumulate, scratch);
        return 0;
    }
#endif
    run_loops(Wp, K, M, A, lda, C, ldc, n0, n1, accumulate, scratch);
    return 0;
#else
    (void)Wp, (void)N, (void)K, (void)M, (void)A, (void)lda, (void)C, (void)ldc, (void)n0, (void)n1, (void)accumulate,
        (void)scratch;
    return modattn__error(MODATTN_EUNSUPPORTED, "sgemm: not built for this architecture");
#endif
}
#endif /* !MODATTN_KERNEL_UNCHECKED */
