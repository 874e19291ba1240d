/* bench/gemm_plan.c — the encoder's GEMMs two ways, one thread, on the shapes of a BERT layer:
 *   sgemm  modattn__sgemm_nt (dnnl_sgemm) on 1024-row blocks: packs the weights on every call
 *   plan   modattn__gemm_plan_run on 64-row blocks over weights packed once (oneDNN matmul)
 * over T token rows (default 8192, a full batch), A rows streamed as in a real forward pass.
 * Prints GFLOP/s (median of --reps passes over all T rows) and the largest difference.
 *
 *   build/bench/gemm_plan [T] [reps] [hidden] [intermediate]     (defaults 8192 7 384 1536)
 *   build/bench/gemm_plan [T] [reps] qwen3                        (Qwen3-Embedding-0.6B's four GEMMs:
 *       q|k|v 4096x1024, o_proj 1024x2048, gate|up 6144x1024, down 1024x3072)
 * Where the plan has the whole-range path (oneDNN's jit GEMM: AVX2), "plan" runs it as the encoder
 * does (modattn__gemm_plan_run_big on 1024-row blocks); the kernel is printed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_internal.h"
#include "modattn/core.h"
#include "core/internal_core.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int64_t T = argc > 1 ? atol(argv[1]) : 8192;
    const int reps = argc > 2 ? atoi(argv[2]) : 7;
    const bool qwen = argc > 3 && strcmp(argv[3], "qwen3") == 0;
    const int64_t H = qwen ? 1024 : argc > 3 ? atol(argv[3]) : 384, I = qwen ? 3072 : argc > 4 ? atol(argv[4]) : 1536;
    if (T < 64 || T % 64 || reps < 1 || reps > 1000 || H < 1 || I < 1) {
        fprintf(stderr, "usage: gemm_plan [T (multiple of 64)] [reps] [hidden [intermediate] | qwen3]\n");
        return 2;
    }
    const struct { const char *name; int64_t N, K; } shapes[] = {
        {"qkv", qwen ? 4096 : 3 * H, H}, {"attn_out", H, qwen ? 2048 : H}, {"ffn_up", qwen ? 2 * I : I, H}, {"ffn_down", H, I}};
    printf("gemm: %s, one thread, T = %lld rows, median of %d\n", modattn__gemm_name(),
           (long long)T, reps);
    printf("%-9s %6s %6s %14s %14s %10s %12s\n", "op", "N", "K", "sgemm GFLOP/s", "plan GFLOP/s",
           "plan/sgemm", "max |diff|");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t N = shapes[s].N, K = shapes[s].K;
        float *A = modattn__malloc((size_t)(T * K) * sizeof(float), MODATTN_MEM_OTHER);
        float *W = modattn__malloc((size_t)(N * K) * sizeof(float), MODATTN_MEM_OTHER);
        float *C1 = modattn__malloc((size_t)(T * N) * sizeof(float), MODATTN_MEM_OTHER);
        float *C2 = modattn__malloc((size_t)(T * N) * sizeof(float), MODATTN_MEM_OTHER);
        if (!A || !W || !C1 || !C2) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        srand(1 + (unsigned)s);
        for (int64_t i = 0; i < T * K; i++) A[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (int64_t i = 0; i < N * K; i++) W[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 0.1f;
        modattn__gemm_plan *p = NULL;
        int st = modattn__gemm_plan_create(W, N, K, K, N, false, MODATTN_PRECISION_FP32, NULL, NULL, &p);
        if (st) {
            fprintf(stderr, "plan: %s\n", modattn_last_error());
            return 1;
        }
        void *scr = modattn__malloc(modattn__gemm_plan_scratch(p) + 64, MODATTN_MEM_WORKSPACE);
        double t1[1000], t2[1000];
        for (int r = 0; r < reps; r++) {
            double t = now_s();
            for (int64_t r0 = 0; r0 < T; r0 += 1024) {
                const int64_t mb = T - r0 < 1024 ? T - r0 : 1024;
                modattn__sgemm_nt(mb, N, K, 1.0f, A + r0 * K, K, W, K, 0.0f, C1 + r0 * N, N);
            }
            t1[r] = now_s() - t;
            t = now_s();
            if (p && modattn__gemm_plan_big(p)) {
                for (int64_t r0 = 0; r0 < T; r0 += 1024) {
                    const int64_t mb = T - r0 < 1024 ? T - r0 : 1024;
                    if (modattn__gemm_plan_run_big(p, mb, A + r0 * K, C2 + r0 * N)) {
                        fprintf(stderr, "plan run: %s\n", modattn_last_error());
                        return 1;
                    }
                }
            } else if (p)
                for (int64_t r0 = 0; r0 < T; r0 += MODATTN__GEMM_BLOCK)
                    if (modattn__gemm_plan_run(p, A + r0 * K, C2 + r0 * N, scr)) {
                        fprintf(stderr, "plan run: %s\n", modattn_last_error());
                        return 1;
                    }
            t2[r] = now_s() - t;
        }
        qsort(t1, (size_t)reps, sizeof *t1, cmp_d);
        qsort(t2, (size_t)reps, sizeof *t2, cmp_d);
        const double fl = 2.0 * (double)T * (double)N * (double)K;
        const double g1 = fl / t1[reps / 2] / 1e9, g2 = p ? fl / t2[reps / 2] / 1e9 : 0;
        double md = 0;
        for (int64_t i = 0; p && i < T * N; i++) md = fmax(md, fabs((double)C1[i] - C2[i]));
        if (p)
            printf("%-9s %6lld %6lld %14.1f %14.1f %10.2f %12.2e  (%s, %s)\n", shapes[s].name, (long long)N,
                   (long long)K, g1, g2, g2 / g1, md, modattn__gemm_plan_impl(p),
                   modattn__gemm_plan_big(p) ? "1024-row sgemm calls" : "64-row blocks");
        else
            printf("%-9s %6lld %6lld %14.1f %14s %10s %12s\n", shapes[s].name, (long long)N,
                   (long long)K, g1, "no plans", "-", "-");
        modattn__gemm_plan_free(p);
        modattn_free(scr);
        modattn_free(C2);
        modattn_free(C1);
        modattn_free(W);
        modattn_free(A);
    }
    return 0;
}
