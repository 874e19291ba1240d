/* tests/backends/test_flash_neon_cross.c — cpu_flash's NEON kernel (backends/cpu_flash/arch/neon.c)
 * on AArch64, for a project whose machines are x86: tests/backends/CMakeLists.txt cross-compiles
 * this file with aarch64-linux-gnu-gcc -static together with only what the kernels need (the
 * cpu_flash driver, arch/neon.c, arch/scalar.c, core/cpu.c, core/status.c, attn/tensor.c: no
 * oneDNN, SQLite, jansson) and runs it under qemu-aarch64. On an AArch64 host it is built and run
 * natively.
 *
 * Checks, through the backend's own supports / workspace_bytes / run / control slots:
 *   - the driver picks "neon" on AArch64 and both "neon" and "scalar" can be forced;
 *   - the NEON (and scalar) vector exp / exp2: worst ulp error against libm's double exp / exp2
 *     over the normal range (<= 2 ulp, as test_flash_exp asks of the x86 ISAs), the same against
 *     expf, and the special values;
 *   - attention against a double-precision computation written here, on a fixed list of shapes:
 *     B 1..3, MHA / GQA / MQA, Sq and Sk each of 1, 27, 33, 100, 257, D / Dv of 32, 64, 80, 128
 *     (and D != Dv), causal or not (Sq > Sk with rows that see no key too), kv_lens (zeros
 *     included), masks (per-head tile masks, broadcast masks, stride-0 padding rows, -inf rows,
 *     all -FLT_MAX), lse, and four memory layouts (contiguous, BSHD, padded rows, element-strided
 *     which makes the kernel pack K and V). Tolerance as in test_kernels: 2e-6 + 2e-6 * max |score|
 *     per row, absolute on o (v is in [-1, 1]), relative on lse;
 *   - guard regions around o and lse, and bitwise equal results with 1 and 3 workspace slices;
 *   - NEON and scalar agree to within the same tolerance.
 * Exit status 0 when every check passed, 1 otherwise. */
#include "backends/cpu_flash/flash.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "test_util.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

const modattn_attn_impl *modattn__backend_cpu_flash(void);

static uint64_t g_rng = 12345;
static uint64_t rnd(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rint_(int n) { return (int)(rnd() % (uint64_t)n); }
static double runit(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

/* ------------------------------------------------------------------ vector exp / exp2 */

static double ulp_error(float got, double want) {
    int e;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

static void check_exp(const flash_isa *isa) {
    enum { N = 200000 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    if (!x || !y) abort();
    for (int which = 0; which < 2; which++) {
        const char *fn = which ? "exp2" : "exp";
        double lo = which ? -126.0 : -87.3, hi = which ? 127.9 : 88.7, worst = 0, wx = 0, worstf = 0;
        for (int i = 0; i < N; i++) x[i] = (float)(lo + (hi - lo) * i / (N - 1));
        (which ? isa->exp2 : isa->exp)(x, y, N - 3); /* an odd length: the tail path too */
        (which ? isa->exp2 : isa->exp)(x + N - 3, y + N - 3, 3);
        for (int i = 0; i < N; i++) {
            double want = which ? exp2((double)x[i]) : exp((double)x[i]);
            double e = ulp_error(y[i], want);
            if (!(e <= worst)) worst = e, wx = x[i];
            float wf = which ? exp2f(x[i]) : expf(x[i]);
            double ef = ulp_error(y[i], (double)wf);
            if (!(ef <= worstf)) worstf = ef;
        }
        printf("%s %s: worst %.2f ulp vs double %s (at %g), %.2f ulp vs %sf\n", isa->name, fn, worst, fn, wx, worstf,
               fn);
        CHECK_MSG(worst <= 2.0, "%s %s: %.2f ulp at %g", isa->name, fn, worst, wx);
    }
    float sx[7] = {-INFINITY, INFINITY, -1000.0f, 1000.0f, 0.0f, -0.0f, 1.0f}, sy[7];
    isa->exp(sx, sy, 7);
    CHECK_MSG(sy[0] == 0.0f && sy[1] == INFINITY && sy[2] == 0.0f && sy[3] == INFINITY && sy[4] == 1.0f &&
                  sy[5] == 1.0f && fabs(sy[6] - 2.718281828) < 1e-6,
              "%s exp specials: %g %g %g %g %g %g %g", isa->name, sy[0], sy[1], sy[2], sy[3], sy[4], sy[5], sy[6]);
    isa->exp2(sx, sy, 7);
    CHECK_MSG(sy[0] == 0.0f && sy[1] == INFINITY && sy[2] == 0.0f && sy[3] == INFINITY && sy[4] == 1.0f &&
                  sy[5] == 1.0f && sy[6] == 2.0f,
              "%s exp2 specials: %g %g %g %g %g %g %g", isa->name, sy[0], sy[1], sy[2], sy[3], sy[4], sy[5], sy[6]);
    /* underflow through the denormals to 0, overflow to +inf */
    float ux[4] = {-103.0f, -88.0f, 88.8f, 89.5f}, uy[4];
    isa->exp(ux, uy, 4);
    CHECK_MSG(uy[0] >= 0.0f && uy[0] < 1e-44f && uy[1] > 0.0f && uy[1] < FLT_MIN && uy[2] == INFINITY && uy[3] == INFINITY,
              "%s exp under/overflow: %g %g %g %g", isa->name, uy[0], uy[1], uy[2], uy[3]);
    free(x), free(y);
}

/* ------------------------------------------------------------------ attention cases */

#define GUARD 16
static const float SENT = 1234.5f;

typedef struct tbuf {
    float *base; /* GUARD + cap + GUARD floats */
    int64_t cap;
} tbuf;

static float *tb_alloc(tbuf *b, int64_t cap) {
    b->cap = cap;
    b->base = malloc((size_t)(cap + 2 * GUARD) * sizeof(float));
    if (!b->base) abort();
    for (int64_t i = 0; i < cap + 2 * GUARD; i++) b->base[i] = SENT;
    return b->base + GUARD;
}

/* 0 contiguous; 1 BSHD (dims 1 and 2 swapped in memory); 2 padded rows; 3 element-strided. */
static modattn_tensor make_view(tbuf *b, const int64_t s[4], int layout) {
    int64_t st[4];
    switch (layout) {
    case 1: st[3] = 1, st[1] = s[3], st[2] = s[1] * s[3], st[0] = s[2] * s[1] * s[3]; break;
    case 2: st[3] = 1, st[2] = s[3] + 5, st[1] = s[2] * st[2] + 3, st[0] = s[1] * st[1] + 1; break;
    case 3: st[3] = 2, st[2] = 2 * s[3] + 3, st[1] = s[2] * st[2], st[0] = s[1] * st[1] + 7; break;
    default: st[3] = 1, st[2] = s[3], st[1] = s[2] * s[3], st[0] = s[1] * s[2] * s[3];
    }
    int64_t cap = s[0] * st[0];
    if (cap < 1) cap = 1;
    modattn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = tb_alloc(b, cap);
    t.dtype = MODATTN_DTYPE_F32;
    t.device.kind = MODATTN_DEVICE_CPU;
    memcpy(t.shape, s, sizeof t.shape);
    memcpy(t.stride, st, sizeof t.stride);
    t.capacity = cap;
    return t;
}

static float *at(const modattn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return (float *)t->data + a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3];
}

static void fill(const modattn_tensor *t, double mag) {
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                for (int64_t d = 0; d < t->shape[3]; d++) *at(t, a, b, c, d) = (float)((2 * runit() - 1) * mag);
}

typedef struct spec {
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    int causal, kvl, mask, lse, layout;
    double mag;
} spec;

typedef struct tcase {
    spec s;
    modattn_attn_call call;
    tbuf bq, bk, bv, bo, bm, bl;
    int32_t kvl[8];
    double *o64, *lse64, *mag;
    char what[256];
} tcase;

/* Straight from the contract in attention.h, in double. */
static void oracle(tcase *tc) {
    const modattn_attn_call *c = &tc->call;
    const spec *p = &tc->s;
    const int64_t G = p->Hq / p->Hkv;
    double scale = c->scale != 0.0f ? c->scale : 1.0 / sqrt((double)p->D);
    double *s = malloc(sizeof(double) * (size_t)(p->Sk + 1));
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->Hq; h++)
            for (int64_t i = 0; i < p->Sq; i++) {
                int64_t row = (b * p->Hq + h) * p->Sq + i;
                int64_t L = c->kv_lens ? c->kv_lens[b] : p->Sk;
                double mx = -INFINITY, amax = 0;
                for (int64_t j = 0; j < p->Sk; j++) {
                    s[j] = -INFINITY;
                    if (j >= L || (c->causal && j > i + L - p->Sq)) continue;
                    double dot = 0;
                    for (int64_t d = 0; d < p->D; d++) dot += (double)*at(&c->q, b, h, i, d) * *at(&c->k, b, h / G, j, d);
                    s[j] = (float)scale * dot;
                    if (fabs(s[j]) > amax) amax = fabs(s[j]);
                    if (c->mask.data) {
                        float m = *at(&c->mask, c->mask.shape[0] == 1 ? 0 : b, c->mask.shape[1] == 1 ? 0 : h, i, j);
                        s[j] = m == -INFINITY ? -INFINITY : s[j] + m;
                    }
                    if (s[j] > mx) mx = s[j];
                }
                tc->mag[row] = amax;
                double sum = 0;
                for (int64_t j = 0; j < p->Sk; j++) sum += s[j] == -INFINITY ? 0 : (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < p->Dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < p->Sk; j++)
                        if (s[j] != -INFINITY) acc += s[j] * *at(&c->v, b, h / G, j, e);
                    tc->o64[row * p->Dv + e] = mx == -INFINITY ? 0.0 : acc / sum;
                }
                tc->lse64[row] = mx == -INFINITY ? -INFINITY : mx + log(sum);
            }
    free(s);
}

static void tc_make(tcase *tc, const spec *p) {
    memset(tc, 0, sizeof *tc);
    tc->s = *p;
    modattn_attn_call *c = &tc->call;
    const int lay = p->layout, lay_o = (p->layout + 1) % 4;
    c->q = make_view(&tc->bq, (int64_t[4]){p->B, p->Hq, p->Sq, p->D}, lay);
    c->k = make_view(&tc->bk, (int64_t[4]){p->B, p->Hkv, p->Sk, p->D}, lay);
    c->v = make_view(&tc->bv, (int64_t[4]){p->B, p->Hkv, p->Sk, p->Dv}, lay);
    c->o = make_view(&tc->bo, (int64_t[4]){p->B, p->Hq, p->Sq, p->Dv}, lay_o);
    fill(&c->q, p->mag), fill(&c->k, p->mag), fill(&c->v, 1.0);
    c->causal = p->causal;
    c->scale = p->kvl == 1 ? 0.3f : 0.0f; /* an explicit scale now and then */
    if (p->kvl) { /* 1: random in [0, Sk], 2: random with kv_lens[0] = 0, 3: all 0 */
        for (int64_t b = 0; b < p->B; b++) tc->kvl[b] = p->kvl == 3 ? 0 : (int32_t)rint_((int)p->Sk + 1);
        if (p->kvl == 2) tc->kvl[0] = 0;
        c->kv_lens = tc->kvl;
    }
    if (p->mask) {
        /* 1: [B,Hq] (tile mask)  2: [1,Hq]  3: [B,1]  4: [1,1]  5: [B,1] stride 0 over Sq (padding
         * mask: one row per tile)  6: [1,1] all -FLT_MAX.  Some rows entirely -inf (not for 5). */
        const int m = p->mask;
        int64_t mb = (m == 1 || m == 3 || m == 5) ? p->B : 1, mh = (m == 1 || m == 2) ? p->Hq : 1;
        c->mask = make_view(&tc->bm, (int64_t[4]){mb, mh, p->Sq, p->Sk}, 0);
        if (m == 5) c->mask.stride[2] = 0;
        for (int64_t a = 0; a < mb; a++)
            for (int64_t h = 0; h < mh; h++)
                for (int64_t i = 0; i < p->Sq; i++) {
                    bool dead = m != 5 && rint_(5) == 0;
                    for (int64_t j = 0; j < p->Sk; j++)
                        *at(&c->mask, a, h, i, j) = m == 6                      ? -FLT_MAX
                                                    : dead || rint_(4) == 0 ? -INFINITY
                                                                            : (float)(2 * runit() - 1);
                }
    }
    if (p->lse) c->lse = make_view(&tc->bl, (int64_t[4]){p->B, p->Hq, p->Sq, 1}, lay_o == 1 ? 1 : 0);
    int64_t rows = p->B * p->Hq * p->Sq;
    tc->o64 = calloc((size_t)(rows * p->Dv + 1), sizeof(double));
    tc->lse64 = calloc((size_t)(rows + 1), sizeof(double));
    tc->mag = calloc((size_t)(rows + 1), sizeof(double));
    if (!tc->o64 || !tc->lse64 || !tc->mag) abort();
    oracle(tc);
    snprintf(tc->what, sizeof tc->what,
             "B=%lld Hq=%lld Hkv=%lld Sq=%lld Sk=%lld D=%lld Dv=%lld causal=%d kvl=%d mask=%d lse=%d layout=%d mag=%g",
             (long long)p->B, (long long)p->Hq, (long long)p->Hkv, (long long)p->Sq, (long long)p->Sk,
             (long long)p->D, (long long)p->Dv, p->causal, p->kvl, p->mask, p->lse, p->layout, p->mag);
}

static void tc_free(tcase *tc) {
    tbuf *all[6] = {&tc->bq, &tc->bk, &tc->bv, &tc->bo, &tc->bm, &tc->bl};
    for (int i = 0; i < 6; i++) free(all[i]->base);
    free(tc->o64), free(tc->lse64), free(tc->mag);
}

static void reset_outputs(tcase *tc) {
    for (int64_t i = 0; i < tc->bo.cap + 2 * GUARD; i++) tc->bo.base[i] = SENT;
    for (int64_t i = 0; tc->bl.base && i < tc->bl.cap + 2 * GUARD; i++) tc->bl.base[i] = SENT;
}

/* The host side of run(): parallel_for runs the items in order but hands them to `nthreads`
 * workspace slices in turn, so every slice offset is used. */
static void serial_for(const modattn_exec *exec, int64_t n, void (*fn)(void *, int64_t, int), void *ctx) {
    for (int64_t i = 0; i < n; i++) fn(ctx, i, (int)(i % exec->nthreads));
}

static const modattn_attn_impl *g_impl;

/* Forces `isa`, runs the case with `nthreads` slices. */
static int run_case(tcase *tc, const char *isa, int nthreads) {
    if (g_impl->control(g_impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, (void *)isa) != 0) return -100;
    modattn_attn_desc desc;
    int st = modattn_attn_describe(&tc->call, &desc);
    if (st) {
        fprintf(stderr, "describe: %s\n", modattn_last_error());
        return st;
    }
    char why[256] = "";
    if (!g_impl->supports(g_impl->ctx, &desc, why, sizeof why)) {
        fprintf(stderr, "refused: %s\n", why);
        return -101;
    }
    modattn_exec exec = {nthreads, serial_for, NULL};
    size_t ws = g_impl->workspace_bytes(g_impl->ctx, &desc, nthreads);
    void *w = aligned_alloc(64, (ws + 64) & ~(size_t)63);
    if (!w) abort();
    reset_outputs(tc);
    st = g_impl->run(g_impl->ctx, &desc, &tc->call, w, ws, &exec, why, sizeof why);
    if (st) fprintf(stderr, "run: %s\n", why);
    free(w);
    return st;
}

/* Compares o / lse with the oracle (and the guards): one check per case, which fails on the first
 * element out of tolerance, a NaN, or a write outside the outputs. Returns the worst err/tol
 * (INFINITY on a miss). */
static double tc_check(const tcase *tc, const char *isa) {
    const modattn_attn_call *c = &tc->call;
    const spec *p = &tc->s;
    const tbuf *outs[2] = {&tc->bo, &tc->bl};
    char miss[320] = "";
    double worst = 0;
    for (int k = 0; k < 2 && !miss[0]; k++) {
        const tbuf *b = outs[k];
        if (!b->base) continue;
        for (int64_t i = 0; i < GUARD && !miss[0]; i++)
            if (b->base[i] != SENT || b->base[GUARD + b->cap + i] != SENT)
                snprintf(miss, sizeof miss, "wrote outside %s", k ? "lse" : "o");
    }
    for (int64_t b = 0; b < p->B && !miss[0]; b++)
        for (int64_t h = 0; h < p->Hq && !miss[0]; h++)
            for (int64_t i = 0; i < p->Sq && !miss[0]; i++) {
                int64_t row = (b * p->Hq + h) * p->Sq + i;
                double tol = 2e-6 + 2e-6 * tc->mag[row];
                for (int64_t e = 0; e < p->Dv; e++) {
                    double got = *at(&c->o, b, h, i, e), want = tc->o64[row * p->Dv + e];
                    double r = fabs(got - want) / tol;
                    if (!(r <= 1.0)) {
                        snprintf(miss, sizeof miss, "o[%lld,%lld,%lld,%lld] = %.9g, want %.9g", (long long)b,
                                 (long long)h, (long long)i, (long long)e, got, want);
                        break;
                    }
                    if (r > worst) worst = r;
                }
                if (!miss[0] && c->lse.data) {
                    double got = *at(&c->lse, b, h, i, 0), want = tc->lse64[row];
                    bool ok = isinf(want) ? got == want : fabs(got - want) <= tol * (1 + fabs(want));
                    if (!ok)
                        snprintf(miss, sizeof miss, "lse[%lld,%lld,%lld] = %.9g, want %.9g", (long long)b, (long long)h,
                                 (long long)i, got, want);
                    else if (!isinf(want)) {
                        double r = fabs(got - want) / (tol * (1 + fabs(want)));
                        if (r > worst) worst = r;
                    }
                }
            }
    CHECK_MSG(!miss[0], "%s %s: %s", isa, tc->what, miss);
    return miss[0] ? INFINITY : worst;
}

static float *snapshot(const tcase *tc) {
    size_t n = (size_t)(tc->bo.cap + 2 * GUARD) + (tc->bl.base ? (size_t)(tc->bl.cap + 2 * GUARD) : 0);
    float *s = malloc(n * sizeof(float));
    if (!s) abort();
    memcpy(s, tc->bo.base, (size_t)(tc->bo.cap + 2 * GUARD) * sizeof(float));
    if (tc->bl.base) memcpy(s + tc->bo.cap + 2 * GUARD, tc->bl.base, (size_t)(tc->bl.cap + 2 * GUARD) * sizeof(float));
    return s;
}

static bool same_as(const tcase *tc, const float *s) {
    bool same = !memcmp(s, tc->bo.base, (size_t)(tc->bo.cap + 2 * GUARD) * sizeof(float));
    if (tc->bl.base)
        same = same && !memcmp(s + tc->bo.cap + 2 * GUARD, tc->bl.base, (size_t)(tc->bl.cap + 2 * GUARD) * sizeof(float));
    return same;
}

/* test_flash_exp's check_same_bits() case (through the library there, which this build does not
 * have): on an AArch64 host it runs neon and scalar and asks max |neon - scalar| < 2e-6. */
static void check_like_flash_exp(void) {
    const int64_t B = 2, H = 3, Hkv = 1, Sq = 77, Sk = 201, D = 72, Dv = 40;
    size_t nq = (size_t)(B * H * Sq * D), nk = (size_t)(B * Hkv * Sk * D), nv = (size_t)(B * Hkv * Sk * Dv);
    size_t no = (size_t)(B * H * Sq * Dv);
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nv * 4), *out[2], *lse[2];
    if (!q || !k || !v) abort();
    for (size_t i = 0; i < nq; i++) q[i] = (float)((i * 2654435761u) % 2001) / 500.0f - 2.0f;
    for (size_t i = 0; i < nk; i++) k[i] = (float)((i * 40503u) % 1999) / 500.0f - 2.0f;
    for (size_t i = 0; i < nv; i++) v[i] = (float)((i * 9973u) % 997) / 997.0f;
    static const char *names[2] = {"neon", "scalar"};
    for (int t = 0; t < 2; t++) {
        out[t] = calloc(no, 4), lse[t] = calloc((size_t)(B * H * Sq), 4);
        if (!out[t] || !lse[t]) abort();
        CHECK(g_impl->control(g_impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, (void *)names[t]) == 0);
        modattn_attn_call c;
        memset(&c, 0, sizeof c);
        c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, Sq, D);
        c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, Hkv, Sk, D);
        c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, Hkv, Sk, Dv);
        c.o = modattn_tensor_contiguous(out[t], MODATTN_DTYPE_F32, B, H, Sq, Dv);
        c.lse = modattn_tensor_contiguous(lse[t], MODATTN_DTYPE_F32, B, H, Sq, 1);
        c.causal = true;
        modattn_attn_desc desc;
        CHECK(modattn_attn_describe(&c, &desc) == 0);
        modattn_exec exec = {2, serial_for, NULL};
        size_t ws = g_impl->workspace_bytes(g_impl->ctx, &desc, 2);
        void *w = aligned_alloc(64, (ws + 64) & ~(size_t)63);
        char why[256] = "";
        CHECK_MSG(g_impl->run(g_impl->ctx, &desc, &c, w, ws, &exec, why, sizeof why) == 0, "%s: %s", names[t], why);
        free(w);
    }
    double worst = 0;
    for (size_t i = 0; i < no; i++) {
        double e = fabs((double)out[0][i] - out[1][i]);
        if (e > worst) worst = e;
    }
    printf("test_flash_exp's case: max |neon - scalar| = %.3g (test_flash_exp asks < 2e-6)\n", worst);
    CHECK(worst < 2e-6);
    CHECK(g_impl->control(g_impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, NULL) == 0);
    for (int t = 0; t < 2; t++) free(out[t]), free(lse[t]);
    free(q), free(k), free(v);
}

/* The list of shapes: every (Sq, Sk) pair of {1, 27, 33, 100, 257}, causal and not, the other
 * parameters cycling with co-prime periods so that they meet in many combinations; then some
 * hand-picked edge cases. The largest products are trimmed (B, then the group size) to keep the
 * run short under emulation. */
static int make_specs(spec *out, int cap) {
    static const int64_t seqs[5] = {1, 27, 33, 100, 257};
    static const int64_t dd[7][2] = {{32, 32}, {64, 64}, {80, 80}, {128, 128}, {64, 32}, {80, 128}, {32, 80}};
    static const int64_t heads[5][2] = {{1, 1}, {4, 1}, {6, 2}, {4, 4}, {8, 2}}; /* Hq, Hkv */
    int n = 0, k = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            for (int causal = 0; causal < 2; causal++, k++) {
                spec s;
                memset(&s, 0, sizeof s);
                s.Sq = seqs[a], s.Sk = seqs[b], s.causal = causal;
                s.D = dd[k % 7][0], s.Dv = dd[k % 7][1];
                s.Hq = heads[k % 5][0], s.Hkv = heads[k % 5][1];
                s.B = 1 + k % 3;
                s.kvl = k % 4 == 1 ? 1 : k % 11 == 3 ? 2 : 0;
                s.mask = (int)((k / 2) % 6); /* 0 none, 1..5 as in tc_make */
                s.lse = k % 3 != 1;
                s.layout = (k / 3) % 4;
                s.mag = k % 9 == 4 ? 4.0 : 1.0;
                while (s.B * s.Hq * s.Sq * s.Sk * (s.D + s.Dv) > (int64_t)8000000 && (s.B > 1 || s.Hq > s.Hkv)) {
                    if (s.B > 1) s.B--;
                    else s.Hq = s.Hkv * (s.Hq / s.Hkv / 2 > 0 ? s.Hq / s.Hkv / 2 : 1);
                }
                if (n < cap) out[n++] = s;
            }
    const spec extra[] = {
        /* B  Hq Hkv Sq   Sk   D    Dv  causal kvl mask lse layout mag */
        {1, 8, 1, 1, 100, 64, 64, 0, 0, 0, 1, 0, 1.0},     /* MQA decode: 8 heads fill the 16 lanes */
        {2, 16, 2, 1, 257, 128, 128, 1, 1, 5, 1, 0, 1.0},  /* GQA decode, padding mask (row mode) */
        {2, 4, 2, 27, 33, 64, 64, 1, 3, 0, 1, 0, 1.0},     /* every kv_len 0: o = 0, lse = -inf */
        {1, 2, 2, 100, 27, 80, 80, 1, 0, 0, 1, 2, 1.0},    /* causal Sq > Sk: rows that see nothing */
        {2, 3, 3, 33, 100, 32, 32, 0, 0, 0, 1, 1, 30.0},   /* huge logits: no NaN, no overflow */
        {1, 2, 1, 27, 33, 64, 64, 0, 0, 6, 1, 0, 1.0},     /* -FLT_MAX mask: uniform rows */
        {3, 2, 1, 33, 257, 128, 32, 1, 2, 1, 1, 3, 1.0},   /* element-strided: K, V packed; tile mask */
        {1, 1, 1, 257, 257, 32, 32, 1, 0, 0, 1, 0, 1.0},   /* many tiles, long causal diagonal */
        {1, 1, 1, 64, 64, 1, 1, 0, 0, 0, 1, 0, 1.0},       /* D = 1 */
        {1, 2, 2, 17, 65, 3, 5, 1, 0, 4, 1, 0, 1.0},       /* odd D / Dv, partial last tiles */
        {1, 4, 2, 16, 64, 64, 0, 0, 0, 0, 1, 0, 1.0},      /* Dv = 0: lse only */
    };
    for (size_t i = 0; i < sizeof extra / sizeof *extra && n < cap; i++) out[n++] = extra[i];
    return n;
}

int main(void) {
    clock_t t0 = clock();
#if !defined(__aarch64__)
    printf("warning: built for a non-AArch64 target: the NEON checks below must fail\n");
#endif
    g_impl = modattn__backend_cpu_flash();
    const flash_isa *neon = modattn__flash_isa_by_name("neon"), *scalar = modattn__flash_isa_by_name("scalar");
    CHECK_MSG(neon != NULL, "the neon ISA is not compiled in or not detected (modattn__cpu_get()->neon)");
    CHECK(scalar != NULL);
    const flash_isa *sel = modattn__flash_isa_select();
    printf("selected ISA: %s (lanes %d, key tile %d)\n", sel->name, sel->lanes, sel->bk);
    CHECK_MSG(!strcmp(sel->name, "neon"), "the driver picked %s, not neon", sel->name);
    if (!neon || !scalar) return test_finish("test_flash_neon_cross");

    check_exp(neon);
    check_exp(scalar);

    spec specs[80];
    const int n = make_specs(specs, 80);
    double worst_neon = 0, worst_scalar = 0, worst_diff = 0;
    char worst_what[256] = "";
    int ran = 0;
    for (int i = 0; i < n; i++) {
        tcase tc;
        tc_make(&tc, &specs[i]);
        int st = run_case(&tc, "neon", 3);
        CHECK_MSG(st == 0, "neon %s: status %d", tc.what, st);
        if (st == 0) {
            double r = tc_check(&tc, "neon");
            if (r > worst_neon) worst_neon = r, snprintf(worst_what, sizeof worst_what, "%s", tc.what);
            ran++;
            float *o3 = snapshot(&tc);
            st = run_case(&tc, "neon", 1);
            CHECK_MSG(st == 0 && same_as(&tc, o3), "neon %s: 1 and 3 workspace slices differ", tc.what);
            st = run_case(&tc, "scalar", 2);
            CHECK_MSG(st == 0, "scalar %s: status %d", tc.what, st);
            if (st == 0) {
                double rs = tc_check(&tc, "scalar");
                if (rs > worst_scalar) worst_scalar = rs;
                /* NEON against scalar, on o */
                const spec *p = &tc.s;
                for (int64_t b = 0; b < p->B; b++)
                    for (int64_t h = 0; h < p->Hq; h++)
                        for (int64_t q = 0; q < p->Sq; q++)
                            for (int64_t e = 0; e < p->Dv; e++) {
                                float got = *at(&tc.call.o, b, h, q, e);
                                const modattn_tensor *o = &tc.call.o;
                                float nv = o3[GUARD + b * o->stride[0] + h * o->stride[1] + q * o->stride[2] + e * o->stride[3]];
                                int64_t row = (b * p->Hq + h) * p->Sq + q;
                                double dlt = fabs((double)got - nv) / (2e-6 + 2e-6 * tc.mag[row]);
                                if (dlt > worst_diff) worst_diff = dlt;
                            }
            }
            free(o3);
        }
        tc_free(&tc);
    }
    CHECK(g_impl->control(g_impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, NULL) == 0);
    printf("attention: %d shapes run; worst err/tol neon %.3f, scalar %.3f (tol = 2e-6 + 2e-6 * max|score|)\n", ran,
           worst_neon, worst_scalar);
    printf("  worst neon case: %s\n", worst_what);
    printf("  max |neon - scalar| / tol on o = %.3f\n", worst_diff);
    CHECK_MSG(ran == n, "%d of %d shapes ran", ran, n);
    CHECK_MSG(worst_diff <= 1.0, "neon and scalar differ by %.3f tol", worst_diff);
    check_like_flash_exp();
    printf("cpu time %.1f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return test_finish("test_flash_neon_cross");
}
