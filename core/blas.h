/* core/blas.h — the host BLAS (core/blas.c): the one GEMM every layer above core may call on host
 * memory. Internal (modattn__ names, hidden from libmodattn.so). */
#ifndef MODATTN_CORE_BLAS_H
#define MODATTN_CORE_BLAS_H

#include <stdint.h>

/* C[M,N] = alpha * A[M,K] . B[N,K]^T + beta * C, all row-major fp32 with leading dimensions lda,
 * ldb, ldc (the layout of a PyTorch Linear: weight [out, in]). Runs on the calling thread only;
 * safe to call from several threads at once. The CPU device's encoder and exact search call it. */
void modattn__sgemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* "onednn" or "openblas": the library chosen at configure time (MODATTN_GEMM). */
const char *modattn__gemm_name(void);
/* oneDNN builds: set the calling thread's OpenMP threads to 1 for a oneDNN call and give back the
 * previous setting for modattn__blas_single_end (the caller's own setting is restored after). */
int modattn__blas_single_begin(void);
void modattn__blas_single_end(int prev);

#endif
