/* tests/device/test_gemm_rows.c — the CPU GEMM plans' whole-range path (cpu_gemm.c,
 * modattn__gemm_plan_run_big): where oneDNN's matmul is its jit GEMM (AVX2 CPUs), a plan runs a
 * task's rows in dnnl_sgemm calls of up to 768 rows over W read in place. dnnl_sgemm's rows depend
 * on the call's row count (its K blocking changes near 300 rows, its row blocks and last groups
 * with the count), so the plan uses K steps of 192 and call sizes that keep every row's bits. For
 * the encoder's shapes (Qwen3-0.6B's four, all-MiniLM-L6-v2's four, an odd one), with and without
 * accumulate, dense and with wider row strides, against the plan's 16-row blocks (a short text's
 * path) over the same rows:
 *   - every row count 1..130 (some of them on the large shapes), 250, 300, 350, 400, 560, 600,
 *     736, 777, 1024 (between them every call size the plan uses: 768, 576, 384, 288, 192, 64,
 *     16), and ranges that start mid-block (rows 37.., 5.., 11..): bit for bit, what keeps a text's vector
 *     the same alone or batched wherever its rows sit;
 *   - the plan's 64-row blocks and its column panels: bit for bit;
 *   - column parts (modattn__gemm_plan_run_big_cols) as the encoder splits them over 2-4 threads,
 *     and cut at every fifth unit: bit for bit; parts it cannot run are refused;
 *   - the products equal an fp64 loop (relative error < 1e-5 of the row's magnitude);
 *   - columns past N and rows past the range are not written;
 *   - a plan that reads W in place says so (modattn__gemm_plan_borrows) and counts no packed bytes;
 *   - no rows: an error that writes nothing.
 * Planted: without the K steps (cpu_gemm.c BIG_KSTEP 100000: one dnnl_sgemm call over all of K),
 * 16 checks fail (on Qwen3's shapes the rows of 768-row calls differ from the 16-row blocks').
 * By default (AVX2+FMA) the products are our AVX2 GEMM over weights packed at load (cpu_sgemm.c);
 * test_gemm_rows_onednn runs the same checks with MODATTN_GEMM_OWN=0 (dnnl_sgemm), and each
 * checks that the plans say which. Planted in ours: K slices of 256 for calls under 100 rows:
 * every row of the larger calls differs from the 16-row blocks'.
 * Where no plan here has the path (oneDNN's brgemm kernels on AVX-512 read packed weights; an
 * OpenBLAS build has no plans), the test says why and exits 77 (CTest: skipped). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "modattn/modattn.h"
#include "test_util.h"

static uint32_t rng = 2463534242u;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)((int32_t)rng) * (1.0f / 2147483648.0f);
}

typedef struct shape {
    const char *name;
    int64_t N, K, lda, ldc;
    bool accumulate;
} shape;

enum { ROWS = 1024 };

/* rows [r0, r0 + n) of X and Y (stride ld, N columns) equal bit for bit: the count that differ */
static size_t rows_differ(const float *X, const float *Y, int64_t r0, int64_t n, int64_t ld, int64_t N) {
    size_t d = 0;
    for (int64_t r = r0; r < r0 + n; r++) d += memcmp(X + r * ld, Y + r * ld, (size_t)N * sizeof(float)) != 0;
    return d;
}

/* 1: checked; 0: this plan has no whole-range path (nothing to check) */
static int check_shape(const shape *sh, char *impl, size_t impl_len) {
    const int64_t N = sh->N, K = sh->K, lda = sh->lda, ldc = sh->ldc;
    const size_t ab = (size_t)((ROWS + MODATTN__GEMM_BLOCK) * lda), cb = (size_t)((ROWS + MODATTN__GEMM_BLOCK) * ldc);
    float *W = malloc((size_t)(N * K) * sizeof(float)), *A = calloc(ab, sizeof(float));
    float *C0 = malloc(cb * sizeof(float)), *R = malloc(cb * sizeof(float)), *C = malloc(cb * sizeof(float));
    CHECK(W && A && C0 && R && C);
    int done = 0;
    modattn__gemm_plan *p = NULL;
    if (!W || !A || !C0 || !R || !C) goto out;
    for (int64_t i = 0; i < N * K; i++) W[i] = 0.05f * frand();
    for (int64_t r = 0; r < ROWS; r++)
        for (int64_t k = 0; k < lda; k++) A[r * lda + k] = frand() * ((r * lda + k) % 53 == 0 ? 30.0f : 1.0f);
    for (size_t i = 0; i < cb; i++) C0[i] = frand();
    int st = modattn__gemm_plan_create(W, N, K, lda, ldc, sh->accumulate, MODATTN_PRECISION_FP32, NULL, NULL, &p);
    CHECK_MSG(st == 0, "plan %s: %s", sh->name, modattn_last_error());
    if (st || !p) goto out;
    snprintf(impl, impl_len, "%s", modattn__gemm_plan_impl(p));
    if (!modattn__gemm_plan_big(p)) goto out;
    done = 1;
    if (modattn__gemm_plan_borrows(p)) CHECK(modattn__gemm_plan_bytes(p) == 0);
    const size_t cbytes = cb * sizeof(float);
    /* the reference: the plan's 16-row blocks (a short text's path), one after another */
    void *scr = aligned_alloc(MODATTN_ALIGN, (modattn__gemm_plan_scratch(p) + MODATTN_ALIGN) / MODATTN_ALIGN * MODATTN_ALIGN);
    CHECK(scr != NULL);
    if (!scr) goto out;
    memcpy(R, C0, cbytes);
    for (int64_t r = 0; r < ROWS; r += MODATTN__GEMM_SMALL)
        CHECK(modattn__gemm_plan_run_rows(p, MODATTN__GEMM_SMALL, A + r * lda, R + r * ldc, scr) == 0);
    /* against fp64, and nothing past N or past the rows written */
    double worst = 0;
    size_t outside = 0;
    for (int64_t r = 0; r < ROWS; r += 29) {
        double mag = 0;
        for (int64_t k = 0; k < K; k++) mag += fabs((double)A[r * lda + k]) * 0.05;
        for (int64_t n = 0; n < N; n += 13) {
            double want = sh->accumulate ? (double)C0[r * ldc + n] : 0.0;
            for (int64_t k = 0; k < K; k++) want += (double)A[r * lda + k] * (double)W[n * K + k];
            const double e = fabs((double)R[r * ldc + n] - want) / (mag + 1.0);
            if (e > worst) worst = e;
        }
        for (int64_t n = N; n < ldc; n++) outside += R[r * ldc + n] != C0[r * ldc + n];
    }
    for (size_t i = (size_t)(ROWS * ldc); i < cb; i++) outside += R[i] != C0[i];
    CHECK_MSG(worst < 1e-5, "%s: relative error %.3g against fp64", sh->name, worst);
    CHECK_MSG(outside == 0, "%s: %zu values outside the product written", sh->name, outside);
    /* every row count from MODATTN__GEMM_SMALL up, and an offset start */
    const int64_t counts[] = {MODATTN__GEMM_SMALL, MODATTN__GEMM_SMALL + 1, 64, 100, 250, 300, 350, 400, 560, 600, 736, 777};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        memcpy(C, C0, cbytes);
        CHECK(modattn__gemm_plan_run_big(p, counts[i], A, C) == 0);
        const size_t d = rows_differ(R, C, 0, counts[i], ldc, N);
        CHECK_MSG(d == 0, "%s acc=%d: %zu of %lld rows differ from the %d-row call", sh->name, (int)sh->accumulate, d,
                  (long long)counts[i], ROWS);
    }
    /* every row count 1..130 on the smaller shapes, some on the large */
    size_t bad_counts = 0;
    for (int64_t m = 1; m <= 130; m += N * K > 4000000 ? 7 : 1) {
        memcpy(C, C0, cbytes);
        CHECK(modattn__gemm_plan_run_big(p, m, A, C) == 0);
        if (rows_differ(R, C, 0, m, ldc, N)) {
            if (!bad_counts) printf("%s: %lld rows: %zu differ\n", sh->name, (long long)m, rows_differ(R, C, 0, m, ldc, N));
            bad_counts++;
        }
    }
    CHECK_MSG(bad_counts == 0, "%s acc=%d: %zu row counts in 1..130 give other bits", sh->name, (int)sh->accumulate,
              bad_counts);
    /* the whole range, and ranges that start mid-block (a text's rows sit anywhere in a batch) */
    memcpy(C, C0, cbytes);
    CHECK(modattn__gemm_plan_run_big(p, ROWS, A, C) == 0);
    CHECK_MSG(rows_differ(R, C, 0, ROWS, ldc, N) == 0, "%s: the %d-row range differs", sh->name, ROWS);
    const int64_t starts[][2] = {{37, 16}, {37, 800}, {5, 960}, {11, 200}};
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++) {
        const int64_t r0 = starts[i][0], m = starts[i][1];
        memcpy(C, C0, cbytes);
        CHECK(modattn__gemm_plan_run_big(p, m, A + r0 * lda, C + r0 * ldc) == 0);
        CHECK_MSG(rows_differ(R, C, r0, m, ldc, N) == 0, "%s: rows %lld..%lld alone differ", sh->name, (long long)r0,
                  (long long)(r0 + m));
    }
    /* the plan's blocks: 64 rows, and 16 where it has them */
    memcpy(C, C0, cbytes);
    CHECK(modattn__gemm_plan_run_rows(p, MODATTN__GEMM_BLOCK, A, C, scr) == 0);
    CHECK_MSG(rows_differ(R, C, 0, MODATTN__GEMM_BLOCK, ldc, N) == 0, "%s: the 64-row block differs", sh->name);
    if (modattn__gemm_plan_has_small(p)) {
        memcpy(C, C0, cbytes);
        CHECK(modattn__gemm_plan_run_rows(p, MODATTN__GEMM_SMALL, A, C, scr) == 0);
        CHECK_MSG(rows_differ(R, C, 0, MODATTN__GEMM_SMALL, ldc, N) == 0, "%s: the 16-row block differs", sh->name);
    }
    /* column panels as 2 threads split them, where the plan makes them */
    const int64_t unit = modattn__gemm_plan_panel_unit(p);
    if (unit > 0 && N / unit >= 2) {
        const int64_t units = N / unit, cut = units / 2 * unit;
        if (modattn__gemm_plan_panel_ready(p, cut) && modattn__gemm_plan_panel_ready(p, N - cut)) {
            memcpy(C, C0, cbytes);
            CHECK(modattn__gemm_plan_run_cols(p, A, C, 0, cut, scr) == 0);
            CHECK(modattn__gemm_plan_run_cols(p, A, C, cut, N, scr) == 0);
            CHECK_MSG(rows_differ(R, C, 0, MODATTN__GEMM_SMALL, ldc, N) == 0, "%s: the column panels differ", sh->name);
        }
    }
    /* column parts, as the encoder splits them over 2, 3 and 4 threads (cpu_encoder.c
     * use_big_cols) and at other cuts: every row of every part the bits of the whole */
    const int64_t cu = MODATTN__GEMM_BIG_COLS_UNIT, units_c = N / cu;
    size_t parts_checked = 0;
    for (int64_t nparts = 2; nparts <= 4; nparts++) {
        if (units_c / nparts * cu < MODATTN__GEMM_BIG_COLS_MIN) continue;
        const int64_t rows_c[] = {ROWS, 777, 100};
        for (size_t i = 0; i < sizeof rows_c / sizeof *rows_c; i++) {
            memcpy(C, C0, cbytes);
            for (int64_t t = 0; t < nparts; t++) {
                const int64_t n0 = t * units_c / nparts * cu, n1 = t == nparts - 1 ? N : (t + 1) * units_c / nparts * cu;
                CHECK(modattn__gemm_plan_run_big_cols(p, rows_c[i], A, C, n0, n1) == 0);
            }
            const size_t d = rows_differ(R, C, 0, rows_c[i], ldc, N);
            CHECK_MSG(d == 0, "%s: %lld rows in %lld column parts: %zu rows differ", sh->name, (long long)rows_c[i],
                      (long long)nparts, d);
            parts_checked++;
        }
    }
    for (int64_t cut = MODATTN__GEMM_BIG_COLS_MIN; N - cut >= MODATTN__GEMM_BIG_COLS_MIN; cut += 5 * cu) {
        memcpy(C, C0, cbytes);
        CHECK(modattn__gemm_plan_run_big_cols(p, 300, A, C, 0, cut) == 0);
        CHECK(modattn__gemm_plan_run_big_cols(p, 300, A, C, cut, N) == 0);
        CHECK_MSG(rows_differ(R, C, 0, 300, ldc, N) == 0, "%s: columns cut at %lld differ", sh->name, (long long)cut);
        parts_checked++;
    }
    if (N >= 2 * MODATTN__GEMM_BIG_COLS_MIN) CHECK_MSG(parts_checked > 0, "%s: no column parts checked", sh->name);
    /* parts it cannot run (not at a unit, too narrow): an error, nothing written */
    memcpy(C, C0, cbytes);
    if (N > MODATTN__GEMM_BIG_COLS_MIN + 32) CHECK(modattn__gemm_plan_run_big_cols(p, 100, A, C, 32, N) != 0);
    if (N > cu) CHECK(modattn__gemm_plan_run_big_cols(p, 100, A, C, N - cu, N) != 0);
    CHECK(modattn__gemm_plan_run_big_cols(p, 100, A, C, 0, N + 1) != 0);
    CHECK(memcmp(C, C0, cbytes) == 0);
    modattn_clear_error();
    /* no rows: an error, nothing written */
    memcpy(C, C0, cbytes);
    CHECK(modattn__gemm_plan_run_big(p, 0, A, C) != 0);
    CHECK(memcmp(C, C0, cbytes) == 0);
    modattn_clear_error();
    free(scr);
    /* our AVX2 GEMM runs these products where the CPU has it, unless MODATTN_GEMM_OWN=0
     * (test_gemm_rows_onednn): then dnnl_sgemm */
    {
        const char *own = getenv("MODATTN_GEMM_OWN");
        const bool want = !(own && strcmp(own, "0") == 0) && modattn__sgemm_available(NULL, 0);
        CHECK_MSG((strncmp(impl, "own:", 4) == 0) == want, "%s: MODATTN_GEMM_OWN=%s, yet the plan runs '%s'", sh->name,
                  own ? own : "(unset)", impl);
    }
    printf("rows %s %lldx%lld lda %lld ldc %lld acc=%d (%s%s): every row count and block the same bits\n", sh->name,
           (long long)N, (long long)K, (long long)lda, (long long)ldc, (int)sh->accumulate, impl,
           modattn__gemm_plan_borrows(p) ? ", W read in place" : ", W copied");
out:
    modattn__gemm_plan_free(p);
    free(C), free(R), free(C0), free(A), free(W);
    return done;
}

int main(void) {
    const shape shapes[] = {
        {"qwen3.qkv", 4096, 1024, 1024, 4096, false},   {"qwen3.o_proj", 1024, 2048, 2048, 1024, true},
        {"qwen3.gate|up", 6144, 1024, 1024, 6144, false}, {"qwen3.down", 1024, 3072, 6144, 1024, true},
        {"minilm.qkv", 1152, 384, 384, 1152, false},    {"minilm.out", 384, 384, 384, 384, true},
        {"minilm.up", 1536, 384, 384, 1536, false},     {"minilm.down", 384, 1536, 1536, 384, true},
        {"odd", 200, 72, 80, 216, true},
    };
    int ran = 0;
    char impl[64] = "";
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) ran += check_shape(&shapes[s], impl, sizeof impl);
    printf("test_gemm_rows: %d of %zu shapes have the whole-range path (GEMMs: %s)\n", ran,
           sizeof shapes / sizeof *shapes, modattn__gemm_name());
    if (ran == 0 && t_fail == 0) {
        printf("test_gemm_rows: not available here: %s\n",
               strcmp(modattn__gemm_name(), "onednn") != 0
                   ? "this build's GEMMs have no plans"
                   : "oneDNN's matmul here is not its jit GEMM (its kernel reads packed weights)");
        if (impl[0]) printf("  (oneDNN's kernel: %s)\n", impl);
        return 77;
    }
    return test_finish("test_gemm_rows");
}
