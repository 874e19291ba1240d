/* tests/backends/test_flash_exp.c — cpu_flash's ISA kernels one by one: the vector exp / exp2 of
 * every ISA this machine can run (error in ulps against libm's double exp over the whole normal
 * range; -inf -> 0, +inf, overflow, underflow to 0), the ISA the driver picks, and that forcing
 * each ISA (control op MODATTN_CPU_FLASH_CTL_FORCE_ISA) gives the same bits on every SIMD ISA and
 * results within a few ulps on the scalar one. */
#include "backends/cpu_flash/flash.h"
#include "modattn/modattn.h"
#include "attn/internal_dispatch.h"
#include "backends/isa_expect.h"
#include "test_util.h"

#include <math.h>

static double ulp_error(float got, double want) {
    int e;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

static void check_isa(const flash_isa *isa) {
    enum { N = 200000 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (int which = 0; which < 2; which++) {
        double lo = which ? -126.0 : -87.3, hi = which ? 127.9 : 88.7, worst = 0, wx = 0;
        for (int i = 0; i < N; i++) x[i] = (float)(lo + (hi - lo) * i / (N - 1));
        (which ? isa->exp2 : isa->exp)(x, y, N);
        for (int i = 0; i < N; i++) {
            double want = which ? exp2((double)x[i]) : exp((double)x[i]);
            double e = ulp_error(y[i], want);
            if (!(e <= worst)) worst = e, wx = x[i];
        }
        printf("%s %s: worst %.2f ulp (at %g)\n", isa->name, which ? "exp2" : "exp", worst, wx);
        CHECK_MSG(worst <= 2.0, "%s %s: %.2f ulp at %g", isa->name, which ? "exp2" : "exp", worst, wx);
    }
    /* special values; also odd lengths (the tail path) */
    float sx[7] = {-INFINITY, INFINITY, -1000.0f, 1000.0f, 0.0f, -0.0f, 1.0f}, sy[7];
    isa->exp(sx, sy, 7);
    CHECK_MSG(sy[0] == 0.0f && sy[1] == INFINITY && sy[2] == 0.0f && sy[3] == INFINITY && sy[4] == 1.0f &&
                  sy[5] == 1.0f && fabs(sy[6] - 2.718281828) < 1e-6,
              "%s exp specials: %g %g %g %g %g %g %g", isa->name, sy[0], sy[1], sy[2], sy[3], sy[4], sy[5], sy[6]);
    isa->exp2(sx, sy, 7);
    CHECK_MSG(sy[0] == 0.0f && sy[1] == INFINITY && sy[2] == 0.0f && sy[3] == INFINITY && sy[4] == 1.0f &&
                  sy[5] == 1.0f && sy[6] == 2.0f,
              "%s exp2 specials: %g %g %g %g %g %g %g", isa->name, sy[0], sy[1], sy[2], sy[3], sy[4], sy[5], sy[6]);
    free(x), free(y);
}

static void check_same_bits(void) {
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    if (!ctx) return;
    long idx = modattn_ctx_find(ctx, "cpu_flash");
    CHECK(idx >= 0);
    const modattn_attn_impl *impl = modattn__ctx_impl(ctx, (size_t)idx);
    const int64_t B = 2, H = 3, Hkv = 1, Sq = 77, Sk = 201, D = 72, Dv = 40;
    size_t nq = (size_t)(B * H * Sq * D), nk = (size_t)(B * Hkv * Sk * D), nv = (size_t)(B * Hkv * Sk * Dv);
    size_t no = (size_t)(B * H * Sq * Dv);
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nv * 4), *out[4], *lse[4];
    for (size_t i = 0; i < nq; i++) q[i] = (float)((i * 2654435761u) % 2001) / 500.0f - 2.0f;
    for (size_t i = 0; i < nk; i++) k[i] = (float)((i * 40503u) % 1999) / 500.0f - 2.0f;
    for (size_t i = 0; i < nv; i++) v[i] = (float)((i * 9973u) % 997) / 997.0f;
    static const char *names[4] = {"avx512", "avx2", "neon", "scalar"};
    int ran[4] = {0};
    for (int t = 0; t < 4; t++) {
        out[t] = calloc(no, 4), lse[t] = calloc((size_t)(B * H * Sq), 4);
        if (impl->control(impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, (void *)names[t]) != 0) continue;
        const char *now = NULL;
        CHECK(impl->control(impl->ctx, MODATTN_CPU_FLASH_CTL_ISA_NAME, &now) == 0 && now && !strcmp(now, names[t]));
        modattn_attn_call c;
        memset(&c, 0, sizeof c);
        c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, Sq, D);
        c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, Hkv, Sk, D);
        c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, Hkv, Sk, Dv);
        c.o = modattn_tensor_contiguous(out[t], MODATTN_DTYPE_F32, B, H, Sq, Dv);
        c.lse = modattn_tensor_contiguous(lse[t], MODATTN_DTYPE_F32, B, H, Sq, 1);
        c.causal = true;
        CHECK_MSG(modattn_attention_with(ctx, (size_t)idx, &c) == 0, "%s: %s", names[t], modattn_last_error());
        ran[t] = 1;
    }
    CHECK(impl->control(impl->ctx, MODATTN_CPU_FLASH_CTL_FORCE_ISA, NULL) == 0);
    int first = -1;
    for (int t = 0; t < 3; t++) {
        if (!ran[t]) continue;
        if (first < 0) {
            first = t;
            continue;
        }
        CHECK_MSG(!memcmp(out[first], out[t], no * 4) && !memcmp(lse[first], lse[t], (size_t)(B * H * Sq) * 4),
                  "%s and %s give different bits", names[first], names[t]);
    }
    if (first >= 0 && ran[3]) {
        double worst = 0;
        for (size_t i = 0; i < no; i++) {
            double e = fabs((double)out[first][i] - out[3][i]);
            if (e > worst) worst = e;
        }
        printf("max |%s - scalar| = %.3g\n", names[first], worst);
        CHECK(worst < 2e-6);
    }
    for (int t = 0; t < 4; t++) free(out[t]), free(lse[t]);
    free(q), free(k), free(v);
    modattn_ctx_free(ctx);
}

int main(void) {
    static const char *names[] = {"avx512", "avx2", "neon", "scalar"};
    /* which ISAs this CPU must offer (isa_expect.h: the CPU's instructions, MODATTN_CPU_DISABLE
     * applied), decided here rather than taken from the driver: an ISA the CPU has is checked,
     * never passed over as "not available" */
    const isa_expect want = isa_expected();
    const bool expected[] = {want.avx512, want.avx2, want.neon, true};
    int n = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const flash_isa *isa = modattn__flash_isa_by_name(names[i]);
        CHECK_MSG((isa != NULL) == expected[i], "%s: the driver %s it, the CPU %s it", names[i],
                  isa ? "offers" : "does not offer", expected[i] ? "has" : "lacks (or MODATTN_CPU_DISABLE masks)");
        if (!isa) {
            printf("%s: not on this CPU (or masked by MODATTN_CPU_DISABLE)\n", names[i]);
            continue;
        }
        check_isa(isa);
        n++;
    }
    CHECK(n >= 1);
    const flash_isa *sel = modattn__flash_isa_select();
    CHECK(sel != NULL);
    printf("selected: %s (the widest this CPU has: %s)\n", sel ? sel->name : "?", want.widest);
    CHECK_MSG(sel && !strcmp(sel->name, want.widest), "the driver selected %s, the widest ISA of this CPU is %s",
              sel ? sel->name : "?", want.widest);
    check_same_bits();
    return test_finish("test_flash_exp");
}
