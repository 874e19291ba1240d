/* tests/device/test_bf16x3.c — a portable reference for bf16x3 (an fp32 GEMM as three bfloat16
 * products, cpu_gemm.c), so that its arithmetic is checked on every machine, not only on AMX:
 *   - the split: hi = bf16(a), lo = bf16(a - hi) (round to nearest even, as VCVTNEPS2BF16 does);
 *     a - hi is exact in fp32 and a - hi - lo is within 2^-16 |a|;
 *   - one term: a_hi w_hi + a_hi w_lo + a_lo w_hi (each product exact in fp32) is within
 *     3.1 * 2^-16 |a w| of a w (the dropped a_lo w_lo and the splits' residues), for 200000 random
 *     pairs over 2^-20 .. 2^20, while plain bf16 (a_hi w_hi) is not (a dropped term is caught);
 *   - a whole GEMM in plain C (the three products summed in fp32, k by k): against fp64, within
 *     the split's 3.1 * 2^-16 plus fp32 summation's gamma(3K) of sum |a w| per element; the same
 *     three products summed in fp64 within the split's bound alone; and against an fp32 GEMM
 *     within both bounds plus gamma(K);
 *   - where this CPU runs bf16x3 (AMX-BF16 and oneDNN's AMX kernels): the plan's product
 *     (modattn__gemm_plan_run) against this reference within 2 gamma(3K) sum |a w| (the same exact
 *     products, another summation order). Elsewhere that one comparison is a visible skip
 *     ("SKIPPED [1] ...: not run: no AMX", listed by tests/skip_summary.py); the rest always runs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "modattn/modattn.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}
/* a value of either sign with magnitude in [2^lo, 2^hi) spread over the exponents */
static float frand_mag(int lo, int hi) {
    const double m = ldexp(1.0 + urand(), lo + (int)(urand() * (hi - lo)));
    return (float)(urand() < 0.5 ? -m : m);
}

/* x rounded to bfloat16, nearest even, as fp32 (NaN kept) */
static float bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}
static void split(float a, float *hi, float *lo) {
    *hi = bf16(a);
    *lo = bf16(a - *hi);
}
/* the three products of one term, each exact in fp32 (8 x 8 significant bits) */
static void x3_terms(float a, float w, float t[3]) {
    float ah, al, wh, wl;
    split(a, &ah, &al);
    split(w, &wh, &wl);
    t[0] = ah * wh, t[1] = ah * wl, t[2] = al * wh;
}

#define U16 (1.0 / 65536.0)              /* 2^-16 */
#define U24 (1.0 / 16777216.0)           /* 2^-24: fp32's unit roundoff */
#define SPLIT_BOUND (3.1 * U16)          /* of |a w|, per term */
static double gamma_n(double n) { return n * U24 / (1.0 - n * U24); }

/* C[M, N] = A[M, K] . W[N, K]^T: bf16x3 summed in fp32 (cx3), its products summed in fp64 (cx3d),
 * fp32 (c32), fp64 (c64) and sum |a w| (s) */
static void gemms(int64_t M, int64_t N, int64_t K, const float *A, const float *W, float *cx3, double *cx3d,
                  float *c32, double *c64, double *s) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const float *a = A + m * K, *w = W + n * K;
            float x3 = 0.0f, f = 0.0f;
            double x3d = 0.0, d = 0.0, ab = 0.0;
            for (int64_t k = 0; k < K; k++) {
                float t[3];
                x3_terms(a[k], w[k], t);
                x3 += t[0], x3 += t[1], x3 += t[2];
                x3d += (double)t[0] + (double)t[1] + (double)t[2];
                f += a[k] * w[k];
                d += (double)a[k] * w[k];
                ab += fabs((double)a[k] * w[k]);
            }
            cx3[m * N + n] = x3, cx3d[m * N + n] = x3d, c32[m * N + n] = f, c64[m * N + n] = d, s[m * N + n] = ab;
        }
}

static void check_split_and_terms(void) {
    size_t bad_split = 0, bad_term = 0, bf16_beyond = 0;
    double worst = 0.0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        const float a = frand_mag(-20, 20), w = frand_mag(-20, 20);
        float ah, al;
        split(a, &ah, &al);
        /* a - hi exact in fp32; the residue after lo within 2^-16 |a| */
        bad_split += (double)a - ah != (double)(a - ah) || fabs((double)a - ah - al) > U16 * fabs(a);
        float t[3];
        x3_terms(a, w, t);
        const double exact = (double)a * w, got = (double)t[0] + t[1] + t[2];
        const double rel = fabs(got - exact) / fabs(exact);
        if (rel > worst) worst = rel;
        bad_term += rel > SPLIT_BOUND;
        bf16_beyond += fabs((double)t[0] - exact) > SPLIT_BOUND * fabs(exact);
    }
    CHECK_MSG(bad_split == 0, "%zu of %d splits: a - hi not exact or a - hi - lo over 2^-16 |a|", bad_split, n);
    CHECK_MSG(bad_term == 0, "%zu of %d terms over 3.1 * 2^-16 |a w| (worst %.3g * 2^-16)", bad_term, n,
              worst / U16);
    /* the check can fail: one bf16 product alone is far outside the bound for most pairs */
    CHECK_MSG(bf16_beyond > (size_t)n / 2, "plain bf16 within the bf16x3 bound for %zu of %d pairs", n - bf16_beyond,
              n);
    printf("bf16x3 terms: %d pairs, worst %.3f * 2^-16 |a w| (bound 3.1); plain bf16 outside it for %zu\n", n,
           worst / U16, bf16_beyond);
}

/* the portable GEMM against fp64 and fp32 (every machine), and against the AMX plan where it runs */
static void check_gemm(int64_t N, int64_t K, bool *amx_ran, char *amx_why, size_t why_len) {
    const int64_t M = MODATTN__GEMM_BLOCK;
    float *A = malloc((size_t)(M * K) * sizeof *A), *W = malloc((size_t)(N * K) * sizeof *W);
    float *cx3 = malloc((size_t)(M * N) * sizeof *cx3), *c32 = malloc((size_t)(M * N) * sizeof *c32);
    float *camx = malloc((size_t)(M * N) * sizeof *camx);
    double *cx3d = malloc((size_t)(M * N) * sizeof *cx3d), *c64 = malloc((size_t)(M * N) * sizeof *c64);
    double *s = malloc((size_t)(M * N) * sizeof *s);
    CHECK(A && W && cx3 && c32 && camx && cx3d && c64 && s);
    if (!(A && W && cx3 && c32 && camx && cx3d && c64 && s)) goto out;
    /* activations with BERT-like outliers, small weights: normal numbers only (AMX flushes subnormals) */
    for (int64_t i = 0; i < M * K; i++) A[i] = frand_mag(-6, i % 53 == 0 ? 5 : 1);
    for (int64_t i = 0; i < N * K; i++) W[i] = frand_mag(-10, -3);
    gemms(M, N, K, A, W, cx3, cx3d, c32, c64, s);
    const double g3 = gamma_n(3.0 * (double)K), g1 = gamma_n((double)K);
    size_t bad64 = 0, badd = 0, bad32 = 0;
    double w64 = 0.0, w32 = 0.0;
    for (int64_t i = 0; i < M * N; i++) {
        const double e64 = fabs((double)cx3[i] - c64[i]) / s[i], ed = fabs(cx3d[i] - c64[i]) / s[i];
        const double e32 = fabs((double)cx3[i] - c32[i]) / s[i];
        bad64 += e64 > SPLIT_BOUND + g3;
        badd += ed > SPLIT_BOUND;
        bad32 += e32 > SPLIT_BOUND + g3 + g1;
        if (e64 > w64) w64 = e64;
        if (e32 > w32) w32 = e32;
    }
    CHECK_MSG(badd == 0, "%lldx%lld: %zu elements' three products (fp64 sum) over 3.1 * 2^-16 sum|aw| from fp64",
              (long long)N, (long long)K, badd);
    CHECK_MSG(bad64 == 0, "%lldx%lld: %zu elements of bf16x3 over 3.1 * 2^-16 + gamma(3K) sum|aw| from fp64",
              (long long)N, (long long)K, bad64);
    CHECK_MSG(bad32 == 0, "%lldx%lld: %zu elements of bf16x3 over the bound from fp32", (long long)N, (long long)K,
              bad32);
    printf("bf16x3 reference %lldx%lldx%lld: worst error / sum|aw|: %.3g from fp64, %.3g from fp32 (bound %.3g)\n",
           (long long)M, (long long)N, (long long)K, w64, w32, SPLIT_BOUND + g3 + g1);

    if (!modattn__gemm_bf16x3_available(amx_why, why_len)) goto out;
    modattn__gemm_plan *p = NULL;
    int st = modattn__gemm_plan_create(W, N, K, K, N, false, MODATTN_PRECISION_BF16X3, NULL, NULL, &p);
    CHECK_MSG(st == 0 && p, "bf16x3 plan %lldx%lld where the CPU runs it: %s", (long long)N, (long long)K,
              modattn_last_error());
    if (st == 0 && p) {
        CHECK(modattn__gemm_plan_precision(p) == MODATTN_PRECISION_BF16X3);
        const size_t sb = (modattn__gemm_plan_scratch(p) + MODATTN_ALIGN) / MODATTN_ALIGN * MODATTN_ALIGN;
        void *scr = aligned_alloc(MODATTN_ALIGN, sb);
        CHECK(scr != NULL);
        if (scr && modattn__gemm_plan_run(p, A, camx, scr) == 0) {
            size_t bad = 0;
            double worst = 0.0;
            for (int64_t i = 0; i < M * N; i++) {
                const double e = fabs((double)camx[i] - cx3[i]) / s[i];
                bad += !(e <= 2.0 * g3);
                if (e > worst) worst = e;
            }
            CHECK_MSG(bad == 0, "%lldx%lld: %zu elements of the AMX bf16x3 plan (%s) over 2 gamma(3K) sum|aw| from "
                      "the portable reference (worst %.3g)", (long long)N, (long long)K, bad,
                      modattn__gemm_plan_impl(p), worst);
            printf("bf16x3 on AMX (%s) %lldx%lld: worst %.3g sum|aw| from the portable reference (bound %.3g)\n",
                   modattn__gemm_plan_impl(p), (long long)N, (long long)K, worst, 2.0 * g3);
            *amx_ran = true;
        } else {
            CHECK_MSG(0, "bf16x3 plan run %lldx%lld: %s", (long long)N, (long long)K, modattn_last_error());
        }
        free(scr);
    }
    modattn__gemm_plan_free(p);
out:
    free(A), free(W), free(cx3), free(c32), free(camx), free(cx3d), free(c64), free(s);
}

int main(void) {
    check_split_and_terms();
    const int64_t shapes[][2] = {{64, 1}, {96, 7}, {384, 384}, {128, 1536}};
    bool amx_ran = false;
    char why[512] = "";
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_gemm(shapes[i][0], shapes[i][1], &amx_ran, why, sizeof why);
    if (!amx_ran) /* the AMX comparison only; everything above ran */
        printf("SKIPPED [1] test_bf16x3: the AMX comparison: not run: no AMX (%s)\n", why);
    return test_finish("test_bf16x3");
}
