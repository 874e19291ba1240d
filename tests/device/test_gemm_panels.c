/* tests/device/test_gemm_panels.c — the CPU GEMM plans' column panels (cpu_gemm.c), which split a
 * few rows' product over threads by columns (one short query on several threads):
 *   - for the encoder's shapes (all-MiniLM-L6-v2's and BERT-base's, and one of an odd number of
 *     64-column units), with and without accumulate,
 *     with a row stride wider than the product, in every precision this CPU runs: each panel width
 *     that 2 to 8 threads would use is either refused (oneDNN would run another kernel, or its
 *     probe gave other bits: the encoder then keeps the whole product) or ready, and ready panels
 *     together give the whole small-block product's bits exactly (the property that keeps a
 *     text's vector the same alone or batched). fp32 with dense rows on oneDNN's brgemm kernels
 *     (AVX-512) must be ready: that is the one short query's fast path;
 *   - widths that are not whole units, or wider than the product, are refused;
 *   - running a width that was never made ready or was refused, or a range past the product's
 *     columns, is an error that writes nothing, never a wrong answer;
 *   - fp32 with dense rows on oneDNN's brgemm must have panels (the one short query's fast path).
 * Where the build has no panels (OpenBLAS: no plans) or a mode is not run by this CPU, that is
 * printed as "not available here", with why; a build with no panels at all exits 77 (CTest:
 * skipped, with the reason); a oneDNN build must have checked some fp32 shapes' panels. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "modattn/modattn.h"
#include "test_util.h"

static uint32_t rng = 12345u;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)((int32_t)rng) * (1.0f / 2147483648.0f);
}

typedef struct shape {
    int64_t N, K, lda, ldc;
    bool accumulate;
} shape;

static void check_shape(const shape *sh, modattn_precision prec, int *ran) {
    const int64_t R = MODATTN__GEMM_SMALL, N = sh->N, K = sh->K;
    float *W = malloc((size_t)(N * K) * sizeof(float));
    float *g = malloc((size_t)K * sizeof(float)), *b = malloc((size_t)K * sizeof(float));
    float *A = malloc((size_t)(R * sh->lda) * sizeof(float));
    float *C0 = malloc((size_t)(R * sh->ldc) * sizeof(float));
    float *C1 = malloc((size_t)(R * sh->ldc) * sizeof(float));
    float *C2 = malloc((size_t)(R * sh->ldc) * sizeof(float));
    CHECK(W && g && b && A && C0 && C1 && C2);
    for (int64_t i = 0; i < N * K; i++) W[i] = 0.05f * frand();
    for (int64_t k = 0; k < K; k++) g[k] = 1.0f + 0.5f * frand(), b[k] = 0.1f * frand();
    for (int64_t i = 0; i < R * sh->lda; i++) A[i] = frand() * (i % 53 == 0 ? 30.0f : 1.0f); /* BERT's outliers */
    for (int64_t i = 0; i < R * sh->ldc; i++) C0[i] = frand();
    /* int8 also with a folded LayerNorm (the FFN-up GEMM's case) */
    const bool fold = prec == MODATTN_PRECISION_INT8 && !sh->accumulate;
    modattn__gemm_plan *p = NULL;
    int st = modattn__gemm_plan_create(W, N, K, sh->lda, sh->ldc, sh->accumulate, prec, fold ? g : NULL,
                                       fold ? b : NULL, &p);
    if (st == MODATTN_EUNSUPPORTED) { /* the CPU has it, oneDNN (ONEDNN_MAX_CPU_ISA) will not run it */
        printf("panels %lldx%lld %s: not available here: %s\n", (long long)N, (long long)K,
               modattn_precision_name(prec), modattn_last_error());
        modattn_clear_error();
        goto out;
    }
    CHECK_MSG(st == 0, "plan %lldx%lld %s: %s", (long long)N, (long long)K, modattn_precision_name(prec),
              modattn_last_error());
    if (st || !p) goto out;
    const int64_t unit = modattn__gemm_plan_panel_unit(p);
    /* fp32 with dense rows on oneDNN's brgemm: the layout must be recognised (the fast path) */
    const bool must = prec == MODATTN_PRECISION_FP32 && sh->lda == K && sh->ldc == N &&
                      strncmp(modattn__gemm_plan_impl(p), "brg:", 4) == 0;
    CHECK_MSG(unit != 0 || !must, "%lldx%lld fp32 (%s): no panels on brgemm's layout", (long long)N, (long long)K,
              modattn__gemm_plan_impl(p));
    if (unit == 0) {
        printf("panels %lldx%lld %s: not available here (the plan's weight layout has no column ranges)\n",
               (long long)N, (long long)K, modattn_precision_name(prec));
        goto out;
    }
    CHECK(modattn__gemm_plan_has_small(p));
    CHECK(N % unit == 0);
    void *scr = aligned_alloc(MODATTN_ALIGN, (modattn__gemm_plan_scratch(p) + MODATTN_ALIGN) / MODATTN_ALIGN * MODATTN_ALIGN);
    CHECK(scr != NULL);
    memcpy(C1, C0, (size_t)(R * sh->ldc) * sizeof(float));
    CHECK(modattn__gemm_plan_run_rows(p, R, A, C1, scr) == 0);
    /* a width never made ready (this plan is fresh: nothing is), refused widths, ranges past N */
    memcpy(C2, C0, (size_t)(R * sh->ldc) * sizeof(float));
    CHECK(modattn__gemm_plan_run_cols(p, A, C2, 0, unit, scr) != 0);
    CHECK(memcmp(C2, C0, (size_t)(R * sh->ldc) * sizeof(float)) == 0);
    modattn_clear_error();
    CHECK(!modattn__gemm_plan_panel_ready(p, unit + 1));
    CHECK(!modattn__gemm_plan_panel_ready(p, N + unit));
    CHECK(!modattn__gemm_plan_panel_ready(p, 0));
    CHECK(modattn__gemm_plan_run_cols(p, A, C2, 0, unit + 1, scr) != 0);
    modattn_clear_error();
    const int64_t units = N / unit;
    int splits = 0, refused = 0;
    for (int nth = 2; nth <= 8; nth++) {
        const int64_t panels = units < nth ? units : nth;
        if (panels < 2) continue;
        memcpy(C2, C0, (size_t)(R * sh->ldc) * sizeof(float));
        bool ready = true;
        int64_t bad0 = 0, bad1 = 0;
        for (int64_t t = 0; t < panels && ready; t++) {
            const int64_t n0 = t * units / panels * unit, n1 = (t + 1) * units / panels * unit;
            ready = modattn__gemm_plan_panel_ready(p, n1 - n0);
            if (!ready) bad0 = n0, bad1 = n1;
            CHECK_MSG(ready || !must, "%lldx%lld %s (%s): panel of %lld columns not ready", (long long)N, (long long)K,
                      modattn_precision_name(prec), modattn__gemm_plan_impl(p), (long long)(n1 - n0));
            if (ready) CHECK(modattn__gemm_plan_run_cols(p, A, C2, n0, n1, scr) == 0);
        }
        if (!ready) { /* refused: running it anyway is an error that writes nothing, never a wrong answer */
            refused++;
            memcpy(C2, C0, (size_t)(R * sh->ldc) * sizeof(float));
            CHECK(modattn__gemm_plan_run_cols(p, A, C2, bad0, bad1, scr) != 0);
            CHECK(memcmp(C2, C0, (size_t)(R * sh->ldc) * sizeof(float)) == 0);
            modattn_clear_error();
            continue;
        }
        size_t differ = 0;
        for (int64_t r = 0; r < R; r++)
            differ += memcmp(C1 + r * sh->ldc, C2 + r * sh->ldc, (size_t)N * sizeof(float)) != 0;
        /* and nothing past the product's columns is touched */
        for (int64_t r = 0; r < R; r++)
            for (int64_t n = N; n < sh->ldc; n++) differ += C2[r * sh->ldc + n] != C0[r * sh->ldc + n];
        CHECK_MSG(differ == 0, "%lldx%lld %s acc=%d: %zu rows differ with %lld panels", (long long)N,
                  (long long)K, modattn_precision_name(prec), (int)sh->accumulate, differ, (long long)panels);
        /* a ready width over a range past the product's columns: refused, nothing written */
        {
            const int64_t w = units / panels * unit;
            memcpy(C2, C0, (size_t)(R * sh->ldc) * sizeof(float));
            CHECK(modattn__gemm_plan_run_cols(p, A, C2, N - w + unit, N + unit, scr) != 0);
            CHECK(modattn__gemm_plan_run_cols(p, A, C2, -unit, w - unit, scr) != 0);
            CHECK(memcmp(C2, C0, (size_t)(R * sh->ldc) * sizeof(float)) == 0);
            modattn_clear_error();
        }
        splits++;
    }
    printf("panels %lldx%lld lda %lld ldc %lld acc=%d %s (%s): unit %lld, %d splits bit for bit the whole product, "
           "%d refused\n", (long long)N, (long long)K, (long long)sh->lda, (long long)sh->ldc, (int)sh->accumulate,
           modattn_precision_name(prec), modattn__gemm_plan_impl(p), (long long)unit, splits, refused);
    (*ran)++;
    free(scr);
out:
    modattn__gemm_plan_free(p);
    free(C2), free(C1), free(C0), free(A), free(b), free(g), free(W);
}

int main(void) {
    const shape shapes[] = {
        {384, 384, 384, 384, true},     {1152, 384, 384, 1152, false}, {1536, 384, 384, 1536, false},
        {384, 1536, 1536, 384, true},   {768, 768, 800, 832, false},   {3072, 768, 768, 3072, false},
        {768, 3072, 3072, 768, true},   {128, 64, 64, 128, false},
        {320, 384, 384, 320, true}, /* 5 units: two panels overlap in the probe (accumulate) */
    };
    const modattn_precision precs[] = {MODATTN_PRECISION_FP32, MODATTN_PRECISION_BF16, MODATTN_PRECISION_INT8,
                                       MODATTN_PRECISION_BF16X3};
    int ran = 0, ran_fp32 = 0;
    char skipped[1024] = "";
    for (size_t m = 0; m < sizeof precs / sizeof precs[0]; m++) {
        char why[256] = "";
        if ((precs[m] == MODATTN_PRECISION_BF16 && !modattn__gemm_bf16_available(why, sizeof why)) ||
            (precs[m] == MODATTN_PRECISION_INT8 && !modattn__gemm_int8_available(why, sizeof why)) ||
            (precs[m] == MODATTN_PRECISION_BF16X3 && !modattn__gemm_bf16x3_available(why, sizeof why))) {
            printf("panels %s: not available here: %s\n", modattn_precision_name(precs[m]), why);
            snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%s: %s", skipped[0] ? "; " : "",
                     modattn_precision_name(precs[m]), why);
            continue;
        }
        if (precs[m] == MODATTN_PRECISION_FP32 && strcmp(modattn__gemm_name(), "onednn") != 0) {
            printf("panels fp32: not available here: this build's GEMMs are %s, which has no plans\n",
                   modattn__gemm_name());
            snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped),
                     "%sfp32: this build's GEMMs are %s, which has no plans", skipped[0] ? "; " : "", modattn__gemm_name());
            continue;
        }
        int before = ran;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) check_shape(&shapes[s], precs[m], &ran);
        if (precs[m] == MODATTN_PRECISION_FP32) ran_fp32 = ran - before;
    }
    printf("test_gemm_panels: %d shape/precision cases checked (fp32: %d of %zu shapes)\n", ran, ran_fp32,
           sizeof shapes / sizeof shapes[0]);
    if (ran == 0 && t_fail == 0 && strcmp(modattn__gemm_name(), "onednn") != 0) {
        /* nothing here has panels: a skip (CTest: SKIP_RETURN_CODE 77), with why, never a pass */
        printf("test_gemm_panels: not available here: %s\n", skipped);
        return 77;
    }
    /* oneDNN builds have fp32 plans on every x86-64 CPU: the panels of some shapes must have run
     * (on oneDNN's brgemm kernels, AVX-512, every dense one must: check_shape asks that) */
    CHECK_MSG(ran_fp32 > 0, "no fp32 shape had its panels checked (GEMMs: %s)", modattn__gemm_name());
    CHECK_MSG(ran > 0, "no shape/precision case ran: %s", skipped);
    return test_finish("test_gemm_panels");
}
