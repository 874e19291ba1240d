/* core/blas.c — the host's one door to a BLAS: C = alpha * A . B^T + beta * C, row-major fp32 on
 * the calling thread (declared in core/blas.h). The CPU device's encoder (backends/cpu) and exact
 * search (pipeline/scan_batch.c, pipeline/ann_flat.c) both call it: search needs no device, and
 * goes through no backend's private header. Which library is chosen at configure time
 * (MODATTN_GEMM=onednn|openblas, core/CMakeLists.txt; the measurements that decided the default are
 * in backends/cpu/CMakeLists.txt). oneDNN computes each row identically for any M >= 16;
 * OpenBLAS with the Haswell kernels does not (rows change with M by ~1e-7). */
#include "core/blas.h"

#if defined(MODATTN_GEMM_ONEDNN)
#include "core/signals.h"
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

/* oneDNN parallelises with OpenMP over omp_get_max_threads(), a setting of the calling thread: 1
 * while oneDNN runs, and the caller's own setting back after (the caller may be a program's main
 * thread, e.g. Python's, whose OpenMP users must not find it changed). */
int modattn__blas_single_begin(void) {
    const int prev = omp_get_max_threads();
    if (prev != 1) omp_set_num_threads(1);
    return prev;
}
void modattn__blas_single_end(int prev) {
    if (prev != 1) omp_set_num_threads(prev);
}

void modattn__sgemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    const int omp_prev = modattn__blas_single_begin();
    sigset_t sig; /* oneDNN's JIT GEMMs must not take a signal (core/signals.h) */
    modattn__signals_hold(&sig);
    /* dnnl_sgemm is row-major; it only fails on invalid arguments, which are ours to get right. */
    (void)dnnl_sgemm('N', 'T', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    modattn__signals_release(&sig);
    modattn__blas_single_end(omp_prev);
}

const char *modattn__gemm_name(void) { return "onednn"; }

#else
#include <cblas.h>
#include <stdatomic.h>

void modattn__sgemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    static atomic_int single;
    if (M <= 0 || N <= 0) return;
    if (!atomic_load_explicit(&single, memory_order_relaxed)) {
        openblas_set_num_threads(1); /* process-wide in OpenBLAS */
        atomic_store(&single, 1);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, alpha,
                A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

const char *modattn__gemm_name(void) { return "openblas"; }
#endif
