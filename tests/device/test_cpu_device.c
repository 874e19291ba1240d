/* tests/device/test_cpu_device.c — the CPU device behind the same table as every other device:
 * its encoder ops (linear with each epilogue, with and without a prepared weight, padding rows;
 * embed; pooling; norm, rotary and glu) against plain fp64 loops, the row block, borrowed host buffers, and the host
 * fallback's refusal on the host itself. */
#include <math.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "modattn/backend/device.h"
#include "modattn/model.h"
#include "core/internal_core.h"
#include "device/internal_device.h"
#include "test_util.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static modattn_buffer *buf(const modattn_device_iface *cpu, size_t floats, bool random) {
    modattn_buffer *b = NULL;
    CHECK(modattn__buffer_alloc(cpu, floats * 4, MODATTN_MEM_ACTIVATIONS, "test", &b) == 0);
    if (!b) return NULL;
    float *p = b->host;
    for (size_t i = 0; i < floats; i++) p[i] = random ? rnd() : 0.0f;
    return b;
}

/* y = (acc ? y0 : 0) + a w^T + bias, act, LN; padding rows zero */
static double linear_err(const modattn_device_iface *cpu, int64_t rows, int64_t S, int64_t N, int64_t K, bool acc,
                         modattn_act act, bool ln, bool prepared) {
    const int64_t rb = modattn__device_row_block(cpu), cap = (rows + rb - 1) / rb * rb;
    modattn_buffer *a = buf(cpu, (size_t)(cap * K), true), *w = buf(cpu, (size_t)(N * K), true);
    modattn_buffer *bias = buf(cpu, (size_t)N, true), *y = buf(cpu, (size_t)(cap * N), true);
    modattn_buffer *g = buf(cpu, (size_t)N, true), *be = buf(cpu, (size_t)N, true), *lens = NULL;
    const int64_t B = (rows + S - 1) / S;
    CHECK(modattn__buffer_alloc(cpu, (size_t)B * 4, MODATTN_MEM_ACTIVATIONS, "lens", &lens) == 0);
    for (int64_t b = 0; b < B; b++) ((int32_t *)lens->host)[b] = (int32_t)(S - 1 - b % 3); /* some padding */
    float *A = a->host, *Y = y->host;
    for (int64_t r = rows; r < cap; r++) memset(A + r * K, 0, (size_t)K * 4); /* the zero rows past `rows` */
    double *ref = calloc((size_t)(rows * N), sizeof *ref);
    const float *W = w->host, *bi = bias->host, *G = g->host, *Be = be->host;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t n = 0; n < N; n++) {
            double s = acc ? Y[r * N + n] : 0.0;
            for (int64_t k = 0; k < K; k++) s += (double)A[r * K + k] * W[n * K + k];
            s += bi[n];
            if (act == MODATTN_ACT_GELU_ERF) s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            else if (act == MODATTN_ACT_RELU) s = s > 0 ? s : 0;
            ref[r * N + n] = s;
        }
        if (ln) {
            double m = 0, v = 0;
            for (int64_t n = 0; n < N; n++) m += ref[r * N + n];
            m /= (double)N;
            for (int64_t n = 0; n < N; n++) v += (ref[r * N + n] - m) * (ref[r * N + n] - m);
            v /= (double)N;
            for (int64_t n = 0; n < N; n++) ref[r * N + n] = (ref[r * N + n] - m) / sqrt(v + 1e-12) * G[n] + Be[n];
        }
        if (r % S >= ((int32_t *)lens->host)[r / S])
            for (int64_t n = 0; n < N; n++) ref[r * N + n] = 0;
    }
    modattn_op_linear_args l = {.a = a, .lda = K, .w = w, .bias = bias, .y = y, .ldy = N, .rows = rows, .N = N, .K = K,
                                .accumulate = acc, .act = act, .gamma = ln ? g : NULL, .beta = ln ? be : NULL,
                                .eps = 1e-12, .lens = lens, .S = S};
    modattn_linear_plan *plan = NULL;
    if (prepared) {
        CHECK(modattn__device_linear_prepare(cpu, &l, &plan) == 0);
        l.plan = plan;
    }
    int st = modattn__device_linear(cpu, &l);
    CHECK_MSG(st == 0, "linear: %s", modattn_last_error());
    double err = 0;
    for (int64_t i = 0; i < rows * N; i++) {
        double e = fabs(Y[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (e > err || isnan(Y[i])) err = isnan(Y[i]) ? INFINITY : e;
    }
    modattn__linear_plan_free(plan);
    free(ref);
    modattn_buffer *all[] = {a, w, bias, y, g, be, lens};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) modattn__buffer_free(all[i]);
    return err;
}

/* GELU (erf) with bias against libm's erf in double: every ISA's path (AVX-512 divides by Newton's
 * reciprocal; MODATTN_CPU_DISABLE=avx512f takes the compiler's clones), lengths that leave a
 * partial vector, values out to |x| = 12 (erf clamped at 4) */
static void check_gelu(void) {
    enum { N = 1000 };
    static float y[N], bias[N];
    double worst = 0;
    for (int len = 1; len <= N; len += 37) {
        for (int i = 0; i < len; i++) {
            y[i] = -12.0f + 24.0f * (float)i / (float)len;
            bias[i] = (i % 3) * 0.125f;
        }
        float guard = y[len < N ? len : 0];
        modattn__gelu_erf_bias(y, bias, len);
        for (int i = 0; i < len; i++) {
            const double x = (double)(-12.0f + 24.0f * (float)i / (float)len) + (i % 3) * 0.125;
            const double want = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
            const double err = fabs((double)y[i] - want) / (1.0 + fabs(want));
            if (err > worst) worst = err;
        }
        if (len < N) CHECK_MSG(y[len] == guard, "GELU wrote past its %d elements", len);
    }
    printf("GELU (erf) vs libm in double: worst error %.2e (relative to 1 + |gelu|)\n", worst);
    CHECK_MSG(worst < 1e-6, "GELU error %.2e", worst);
}

/* e^x, SiLU with bias and SwiGLU's silu(gate) * up against libm in double (the compiler's clone
 * for this CPU), lengths that leave a partial vector, e^x over [-87, 88] densely, SiLU out to
 * |x| = 100 (e^x clamped), NaN kept. Planted: r's second ln2 part dropped -> exp error 3e-2. */
static void check_silu(void) {
    double worst_exp = 0;
    for (int i = 0; i <= 2000000; i++) {
        const float x = -87.0f + 175.0f * (float)i / 2000000.0f;
        const double want = exp((double)x), err = fabs((double)modattn__exp(x) - want) / want;
        if (err > worst_exp) worst_exp = err;
    }
    printf("exp vs libm in double on [-87, 88]: worst relative error %.2e\n", worst_exp);
    CHECK_MSG(worst_exp < 3e-7, "exp error %.2e", worst_exp);
    enum { N = 1000 };
    static float y[2 * N + 1], bias[N];
    double worst = 0, worst_mul = 0;
    for (int len = 1; len <= N; len += 37) {
        for (int i = 0; i < len; i++) {
            y[i] = -100.0f + 200.0f * (float)i / (float)len;
            bias[i] = (i % 3) * 0.125f;
        }
        const float guard = y[len];
        modattn__silu_bias(y, bias, len);
        for (int i = 0; i < len; i++) {
            const double x = (double)(-100.0f + 200.0f * (float)i / (float)len) + (i % 3) * 0.125;
            const double want = x / (1.0 + exp(-x)), err = fabs((double)y[i] - want) / (1.0 + fabs(want));
            if (err > worst) worst = err;
        }
        CHECK_MSG(y[len] == guard, "SiLU wrote past its %d elements", len);
        for (int i = 0; i < len; i++) {
            y[i] = -30.0f + 60.0f * (float)i / (float)len;
            y[len + i] = 0.5f - (float)(i % 7) * 0.25f;
        }
        const float guard2 = y[2 * len];
        modattn__silu_mul(y, len);
        for (int i = 0; i < len; i++) {
            const double g = -30.0f + 60.0f * (float)i / (float)len, u = 0.5f - (float)(i % 7) * 0.25f;
            const double want = g / (1.0 + exp(-g)) * u, err = fabs((double)y[i] - want) / (1.0 + fabs(want));
            if (err > worst_mul) worst_mul = err;
            CHECK_MSG(y[len + i] == (float)u, "SwiGLU changed its up half");
        }
        CHECK_MSG(y[2 * len] == guard2, "SwiGLU wrote past its %d elements", len);
    }
    printf("SiLU vs libm in double: worst error %.2e; silu(gate) * up %.2e (relative to 1 + |result|)\n", worst,
           worst_mul);
    CHECK_MSG(worst < 1e-6, "SiLU error %.2e", worst);
    CHECK_MSG(worst_mul < 1e-6, "SwiGLU error %.2e", worst_mul);
    float nan2[2] = {NAN, 1.0f}, zero = 0.0f;
    modattn__silu_bias(nan2, &zero, 1);
    CHECK_MSG(isnan(nan2[0]), "SiLU(NaN) is %g, not NaN", (double)nan2[0]);
}

/* RMSNorm against double: lengths that leave partial lane groups, a row of large values (the sum of
 * squares in double), nothing written past n. Planted: the tail's squares dropped -> error 1.7e19. */
static void check_rms(void) {
    enum { N = 300 };
    static float y[N + 1], g[N];
    double worst = 0;
    for (int len = 1; len <= N; len += 13) {
        for (int i = 0; i < len; i++) {
            y[i] = (float)((i * 37 % 101) - 50) * (len % 2 ? 1e15f : 0.01f);
            g[i] = 0.5f + (float)(i % 5) * 0.25f;
        }
        const float guard = y[len];
        double ss = 0;
        for (int i = 0; i < len; i++) ss += (double)y[i] * y[i];
        const double inv = 1.0 / sqrt(ss / len + 1e-6);
        double want[N];
        for (int i = 0; i < len; i++) want[i] = g[i] * (y[i] * inv);
        modattn__rms_norm(y, g, len, 1e-6);
        for (int i = 0; i < len; i++) {
            const double e = fabs(y[i] - want[i]) / (1.0 + fabs(want[i]));
            if (e > worst) worst = e;
        }
        CHECK_MSG(y[len] == guard, "RMSNorm wrote past its %d elements", len);
    }
    printf("RMSNorm vs double: worst error %.2e\n", worst);
    CHECK_MSG(worst < 1e-6, "RMSNorm error %.2e", worst);
}

int main(void) {
    check_gelu();
    check_silu();
    check_rms();
    const modattn_device_iface *cpu = NULL;
    CHECK(modattn_device_lookup("cpu", &cpu) == 0 && cpu);
    if (!cpu) return test_finish("test_cpu_device");
    /* the CPU device computes the encoder's ops itself, in 64-row blocks */
    CHECK(cpu->ops && cpu->ops->embed && cpu->ops->linear && cpu->ops->pool && cpu->ops->linear_prepare);
    CHECK(modattn__device_row_block(cpu) == 64);
    for (int op = 0; op < MODATTN_OP_COUNT; op++) {
        char why[256];
        const bool ok = modattn_device_supports_op(cpu, (modattn_op)op, why, sizeof why);
        if (op == MODATTN_OP_LINEAR_BF16 || op == MODATTN_OP_LINEAR_INT8 || op == MODATTN_OP_LINEAR_BF16X3) {
            /* only where the CPU has bf16 (int8) dot products (bf16x3: AMX tiles too), else why */
            const modattn_cpu_features *f = modattn__cpu_get();
            const bool bf = op == MODATTN_OP_LINEAR_BF16, x3 = op == MODATTN_OP_LINEAR_BF16X3;
            const bool has = (bf ? f->avx512_bf16 : x3 ? f->avx512_bf16 && f->amx_bf16 : f->avx512_vnni) &&
                             f->avx512bw && f->avx512vl;
            CHECK_MSG(ok == has || (!ok && strstr(why, "oneDNN")), "%s: %s", modattn_op_name((modattn_op)op),
                      ok ? "supported" : why);
            CHECK_MSG(ok || strstr(why, bf ? "AVX512_BF16" : x3 ? "AMX-BF16" : "AVX512_VNNI") || strstr(why, "oneDNN") ||
                          strstr(why, "x86"),
                      "reason: %s", why);
            if (!ok) printf("%s not available here: %s\n", modattn_op_name((modattn_op)op), why);
            continue;
        }
        CHECK_MSG(ok, "op %s: %s", modattn_op_name((modattn_op)op), why);
    }

    /* host data as a buffer: borrowed on the host (no copy, nothing counted, not freed with it) */
    float host[64];
    for (int i = 0; i < 64; i++) host[i] = (float)i;
    modattn_mem_stats m0, m1;
    modattn_mem_get_stats(&m0);
    modattn_buffer *hb = NULL;
    CHECK(modattn__buffer_from_host(cpu, host, sizeof host, MODATTN_MEM_WEIGHTS, "borrowed", &hb) == 0);
    modattn_mem_get_stats(&m1);
    CHECK(hb && hb->host == (void *)host && hb->borrowed && hb->bytes == sizeof host);
    CHECK(m1.current[MODATTN_MEM_WEIGHTS] == m0.current[MODATTN_MEM_WEIGHTS]);
    float back[64];
    CHECK(modattn__buffer_read(hb, 0, back, sizeof back) == 0 && back[63] == 63.0f);
    modattn__buffer_free(hb);
    CHECK(host[63] == 63.0f); /* still ours */

    /* linear, every epilogue, with and without the prepared (packed) weight */
    struct { int64_t rows, S, N, K; bool acc; modattn_act act; bool ln; } cases[] = {
        {130, 13, 96, 64, false, MODATTN_ACT_NONE, false},   {64, 16, 64, 32, true, MODATTN_ACT_NONE, true},
        {7, 7, 48, 40, false, MODATTN_ACT_GELU_ERF, false},  {200, 25, 32, 96, true, MODATTN_ACT_NONE, true},
        {65, 65, 40, 24, false, MODATTN_ACT_RELU, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int p = 0; p < 2; p++) {
            double e = linear_err(cpu, cases[c].rows, cases[c].S, cases[c].N, cases[c].K, cases[c].acc, cases[c].act,
                                  cases[c].ln, p == 1);
            CHECK_MSG(e < 2e-5, "linear case %zu (%s): relative error %.3g", c, p ? "prepared" : "plain", e);
        }

    /* a prepared weight holds its own copy (the call needs no w), or says that it reads w in place
     * (oneDNN's jit GEMM takes w's own layout: no copy); another device's plan is refused */
    {
        modattn_buffer *w = buf(cpu, 64 * 32, true);
        modattn_op_linear_args shape = {.w = w, .lda = 32, .ldy = 64, .N = 64, .K = 32};
        modattn_linear_plan *plan = NULL;
        CHECK(modattn__device_linear_prepare(cpu, &shape, &plan) == 0);
        if (plan) CHECK(plan->owns_weight != modattn__gemm_plan_borrows(plan->impl) && plan->iface == cpu);
        modattn__linear_plan_free(plan);
        modattn__buffer_free(w);
    }

    /* norm, rotary, glu (pre-LN, rotary and gated encoders) against fp64 loops; padding rows:
     * norm and glu write zeros, rotary leaves them */
    {
        const int64_t B = 2, S = 6, T = B * S, H = 24, heads = 3, D = 8, half = D / 2, ld = 40, N = 12;
        int32_t L[2] = {6, 4};
        modattn_buffer *lens = NULL;
        CHECK(modattn__buffer_alloc(cpu, (size_t)B * 4, MODATTN_MEM_ACTIVATIONS, "lens", &lens) == 0);
        if (lens) memcpy(lens->host, L, sizeof L);
        modattn_buffer *x = buf(cpu, (size_t)(T * ld), true), *y = buf(cpu, (size_t)(T * H), true);
        modattn_buffer *g = buf(cpu, (size_t)H, true), *bt = buf(cpu, (size_t)H, true);
        modattn_buffer *cs = buf(cpu, (size_t)(S * half), true), *sn = buf(cpu, (size_t)(S * half), true);
        modattn_buffer *x0 = buf(cpu, (size_t)(T * ld), false);
        double e_norm = 0, e_rot = 0, e_glu = 0;
        size_t pad_bad = 0;
        if (lens && x && y && g && bt && cs && sn && x0) {
            memcpy(x0->host, x->host, (size_t)(T * ld) * 4);
            const float *X = x0->host, *G = g->host, *Bt = bt->host, *C = cs->host, *Sn = sn->host;
            modattn_op_norm_args na = {.x = x, .ldx = ld, .y = y, .ldy = H, .gamma = g, .beta = bt, .rows = T, .H = H,
                                       .eps = 1e-5, .lens = lens, .S = S};
            CHECK(modattn__device_norm(cpu, &na) == 0);
            const float *Y = y->host;
            for (int64_t r = 0; r < T; r++) {
                const bool pad = r % S >= L[r / S];
                double m = 0, v = 0;
                for (int64_t k = 0; k < H; k++) m += X[r * ld + k];
                m /= (double)H;
                for (int64_t k = 0; k < H; k++) v += (X[r * ld + k] - m) * (X[r * ld + k] - m);
                const double inv = 1.0 / sqrt(v / (double)H + 1e-5);
                for (int64_t k = 0; k < H; k++) {
                    const double want = pad ? 0.0 : (X[r * ld + k] - m) * inv * G[k] + Bt[k];
                    if (pad) pad_bad += Y[r * H + k] != 0.0f;
                    else if (fabs(Y[r * H + k] - want) > e_norm) e_norm = fabs(Y[r * H + k] - want);
                }
            }
            modattn_op_rotary_args ra = {.x = x, .ldx = ld, .cos = cs, .sin = sn, .rows = T, .heads = heads, .D = D,
                                         .lens = lens, .S = S};
            CHECK(modattn__device_rotary(cpu, &ra) == 0);
            const float *R = x->host;
            for (int64_t r = 0; r < T; r++) {
                const bool pad = r % S >= L[r / S];
                const int64_t p = r % S;
                for (int64_t h = 0; h < heads; h++)
                    for (int64_t j = 0; j < half; j++) {
                        const int64_t o = r * ld + h * D + j;
                        const double a = X[o], b = X[o + half], c = C[p * half + j], s_ = Sn[p * half + j];
                        const double w1 = pad ? a : a * c - b * s_, w2 = pad ? b : b * c + a * s_;
                        const double d = fmax(fabs(R[o] - w1), fabs(R[o + half] - w2));
                        if (pad) pad_bad += d != 0.0;
                        else if (d > e_rot) e_rot = d;
                    }
                for (int64_t k = heads * D; k < ld; k++) pad_bad += R[r * ld + k] != X[r * ld + k]; /* V: untouched */
            }
            memcpy(x->host, x0->host, (size_t)(T * ld) * 4);
            modattn_op_glu_args ga = {.x = x, .ldx = ld, .rows = T, .N = N, .act = MODATTN_ACT_GELU_ERF, .lens = lens, .S = S};
            CHECK(modattn__device_glu(cpu, &ga) == 0);
            for (int64_t r = 0; r < T; r++) {
                const bool pad = r % S >= L[r / S];
                for (int64_t k = 0; k < N; k++) {
                    const double u = X[r * ld + k], want = pad ? 0.0 : 0.5 * u * (1.0 + erf(u / sqrt(2.0))) * X[r * ld + N + k];
                    const double d = fabs(R[r * ld + k] - want);
                    if (pad) pad_bad += d != 0.0;
                    else if (d > e_glu) e_glu = d;
                }
            }
            /* GPT-J's layout (nomic_bert's rotary_emb_interleaved): the pairs (2j, 2j + 1) */
            memcpy(x->host, x0->host, (size_t)(T * ld) * 4);
            modattn_op_rotary_args ri = ra;
            ri.interleaved = true;
            CHECK(modattn__device_rotary(cpu, &ri) == 0);
            for (int64_t r = 0; r < T; r++) {
                const bool pad = r % S >= L[r / S];
                const int64_t p = r % S;
                for (int64_t h = 0; h < heads; h++)
                    for (int64_t j = 0; j < half; j++) {
                        const int64_t o = r * ld + h * D + 2 * j;
                        const double a = X[o], b = X[o + 1], c = C[p * half + j], s_ = Sn[p * half + j];
                        const double w1 = pad ? a : a * c - b * s_, w2 = pad ? b : b * c + a * s_;
                        const double d = fmax(fabs(R[o] - w1), fabs(R[o + 1] - w2));
                        if (pad) pad_bad += d != 0.0;
                        else if (d > e_rot) e_rot = d;
                    }
            }
            /* SwiGLU: silu(x) = x / (1 + exp(-x)) */
            memcpy(x->host, x0->host, (size_t)(T * ld) * 4);
            modattn_op_glu_args gs = ga;
            gs.act = MODATTN_ACT_SILU;
            CHECK(modattn__device_glu(cpu, &gs) == 0);
            for (int64_t r = 0; r < T; r++) {
                const bool pad = r % S >= L[r / S];
                for (int64_t k = 0; k < N; k++) {
                    const double u = X[r * ld + k], want = pad ? 0.0 : u / (1.0 + exp(-u)) * X[r * ld + N + k];
                    const double d = fabs(R[r * ld + k] - want);
                    if (pad) pad_bad += d != 0.0;
                    else if (d > e_glu) e_glu = d;
                }
            }
            /* arguments the op cannot take: refused before the device sees them */
            modattn_op_rotary_args odd = ra;
            odd.D = 7;
            CHECK(modattn__device_rotary(cpu, &odd) == MODATTN_EINVAL);
            modattn_op_glu_args narrow = ga;
            narrow.ldx = N;
            CHECK(modattn__device_glu(cpu, &narrow) == MODATTN_EINVAL);
        }
        CHECK_MSG(e_norm < 2e-5 && e_rot < 1e-6 && e_glu < 2e-6 && pad_bad == 0,
                  "norm %.3g, rotary %.3g, glu %.3g max error; %zu padding values changed", e_norm, e_rot, e_glu, pad_bad);
        modattn_buffer *all[] = {lens, x, y, g, bt, cs, sn, x0};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) modattn__buffer_free(all[i]);
    }

    /* pooling: mean, cls, max, normalised, against loops */
    {
        const int64_t B = 3, S = 5, H = 8, dim = 3 * H;
        modattn_buffer *x = buf(cpu, (size_t)(B * S * H), true), *out = buf(cpu, (size_t)(B * dim), false), *lens = NULL;
        CHECK(modattn__buffer_alloc(cpu, (size_t)B * 4, MODATTN_MEM_ACTIVATIONS, "lens", &lens) == 0);
        int32_t L[3] = {5, 1, 3};
        memcpy(lens->host, L, sizeof L);
        modattn_op_pool_args pa = {.x = x, .lens = lens, .B = B, .S = S, .H = H,
                                   .modes = MODATTN_POOL_CLS | MODATTN_POOL_MAX | MODATTN_POOL_MEAN, .normalize = true,
                                   .out = out, .dim = dim};
        CHECK(modattn__device_pool(cpu, &pa) == 0);
        const float *X = x->host, *O = out->host;
        double worst = 0;
        for (int64_t b = 0; b < B; b++) {
            double r[24], ss = 0;
            for (int64_t k = 0; k < H; k++) {
                double mx = X[b * S * H + k], sum = 0;
                for (int64_t i = 0; i < L[b]; i++) {
                    double v = X[(b * S + i) * H + k];
                    mx = v > mx ? v : mx, sum += v;
                }
                r[k] = X[b * S * H + k], r[H + k] = mx, r[2 * H + k] = sum / L[b];
            }
            for (int k = 0; k < dim; k++) ss += r[k] * r[k];
            for (int k = 0; k < dim; k++) worst = fmax(worst, fabs(O[b * dim + k] - r[k] / sqrt(ss)));
        }
        CHECK_MSG(worst < 1e-6, "pool: max abs error %.3g", worst);
        modattn__buffer_free(x), modattn__buffer_free(out), modattn__buffer_free(lens);
    }

    /* the host fallback is for other devices: on the host itself it is refused */
    {
        modattn_op_pool_args pa;
        memset(&pa, 0, sizeof pa);
        CHECK_ERR(modattn__device_host_pool(cpu, &pa), MODATTN_EINVAL, "the device is the host");
    }
    return test_finish("test_cpu_device");
}
