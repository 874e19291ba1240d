/* model/gemm.c — the encoder's one door to a BLAS: C = alpha * A . B^T + beta * C, row-major
 * fp32, B being a PyTorch Linear weight [out, in] used in place from the weight mapping.
 *
 * Each call runs on the calling thread only: the encoder splits its GEMMs into row blocks on the
 * ctx's thread pool, so the process has one set of worker threads (a BLAS's own pool would spin
 * against ours between calls) and the thread count is the ctx's. Any number of threads may call
 * at once.
 *
 * Which library is chosen at configure time (MODATTN_GEMM=onednn|openblas, see
 * model/CMakeLists.txt, where the measurements that decided the default are written down).
 * oneDNN computes each row identically for any M >= 16 (not below: encoder.c never asks for
 * fewer rows); OpenBLAS with the Haswell kernels does not (rows change with M by ~1e-7). */
#include "model/model_internal.h"

#if defined(MODATTN_GEMM_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

void modattn__sgemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    /* oneDNN parallelises with OpenMP over omp_get_max_threads(), a per-thread setting: 1 here. */
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    /* dnnl_sgemm is row-major; it only fails on invalid arguments, which are ours to get right. */
    (void)dnnl_sgemm('N', 'T', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
