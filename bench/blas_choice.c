/* bench/blas_choice.c — times the two SGEMMs of one attention block on OpenBLAS and oneDNN, one
 * thread each (the way backends/cpu_blas calls them: single-threaded BLAS inside our own pool),
 * to choose the BLAS for cpu_blas by measurement.
 *
 *   S = Q[M x D] . K[N x D]^T      (M query rows of one block, N keys)
 *   O = P[M x N] . V[N x Dv]
 *
 * Build: cc -O2 bench/blas_choice.c -o blas_choice -lopenblas -ldnnl
 * Run:   OMP_NUM_THREADS=1 ./blas_choice      (OMP_NUM_THREADS only pins oneDNN's OpenMP team here;
 *        the library itself limits it per call, see backends/cpu_blas) */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*gemm_fn)(char ta, char tb, int M, int N, int K, const float *A, int lda, const float *B,
                        int ldb, float *C, int ldc);

static void g_openblas(char ta, char tb, int M, int N, int K, const float *A, int lda, const float *B,
                       int ldb, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans, tb == 'T' ? CblasTrans : CblasNoTrans,
                M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}
static void g_dnnl(char ta, char tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                   float *C, int ldc) {
    dnnl_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

static double time_gemm(gemm_fn f, char ta, char tb, int M, int N, int K, const float *A, int lda,
                        const float *B, int ldb, float *C, int ldc) {
    double t[15];
    f(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
    for (int r = 0; r < 15; r++) {
        int reps = 0;
        double t0 = now_s(), t1;
        do {
            f(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
            reps++;
            t1 = now_s();
        } while (t1 - t0 < 0.01);
        t[r] = (t1 - t0) / reps;
    }
    qsort(t, 15, sizeof t[0], cmp_d);
    return 2.0 * M * N * K / t[7] * 1e-9;
}

int main(void) {
    openblas_set_num_threads(1);
    static const int shapes[][3] = {{256, 1024, 64}, {256, 1024, 128}, {128, 2048, 64},
                                    {128, 128, 32},  {256, 4096, 64}, {64, 512, 64}};
    size_t big = 4096 * 256 + 4096 * 128 + 256 * 4096;
    float *A = malloc(big * sizeof(float)), *B = malloc(big * sizeof(float)), *C = malloc(big * sizeof(float));
    for (size_t i = 0; i < big; i++) A[i] = B[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    printf("%-28s %12s %12s\n", "shape (GFLOP/s, 1 thread)", "openblas", "onednn");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], D = shapes[s][2];
        /* S = Q K^T: A = Q [M x D], B = K [N x D] transposed */
        double a = time_gemm(g_openblas, 'N', 'T', M, N, D, A, D, B, D, C, N);
        double b = time_gemm(g_dnnl, 'N', 'T', M, N, D, A, D, B, D, C, N);
        printf("QK^T M=%-4d N=%-5d K=%-4d %12.1f %12.1f\n", M, N, D, a, b);
        /* O = P V: A = P [M x N], B = V [N x D] */
        a = time_gemm(g_openblas, 'N', 'N', M, D, N, A, N, B, D, C, D);
        b = time_gemm(g_dnnl, 'N', 'N', M, D, N, A, N, B, D, C, D);
        printf("PV   M=%-4d N=%-5d K=%-4d %12.1f %12.1f\n", M, D, N, a, b);
    }
    free(A);
    free(B);
    free(C);
    return 0;
}
