/* tests/attn/test_window.c — sliding windows, ALiBi and softcapping against expectations written
 * by hand (not by the oracle, not by the conformance suite's rule): with q = k = 0 every visible
 * key scores the same, and with V the identity ([Sk, Sk]) row i of O is the softmax weights
 * themselves, so O[i][j] = 1 / |visible(i)| shows exactly which keys a row sees. Run on every
 * CPU implementation built in (reference, cpu_flash, cpu_blas where built). Also: the descriptor's
 * FLOP count with a window, invalid windows / slopes / softcaps refused by name, and an
 * implementation table of api_version 2 (which cannot see these fields) loaded but refused every
 * call that uses them, never run on one. */
#include "modattn/backend/impl.h"
#include "modattn/modattn.h"
#include "test_util.h"

#include <math.h>

enum { MAXS = 12 };
static float q[2 * 2 * MAXS * 4], k[2 * 2 * MAXS * 4], v[2 * MAXS * MAXS], o[2 * 2 * MAXS * MAXS];

typedef struct vcase {
    const char *name;
    int B, Sq, Sk;
    bool causal, window;
    int wl, wr;
    int32_t lens[2]; /* kv_lens when lens[0] >= 0 */
    const char *rows; /* per batch, per row: the visible keys as '1'/'0' over Sk, rows separated by '|' */
} vcase;

/* The visibility tables below are written out by hand from attention.h's rule
 * (i' = i + L_b - Sq; i' - wl <= j <= i' + wr; causal j <= i'; j < L_b). */
static const vcase k_cases[] = {
    {"window (1,1) Sq=Sk=5", 1, 5, 5, false, true, 1, 1, {-1, 0},
     "11000|11100|01110|00111|00011"},
    {"window (0,0): the diagonal", 1, 4, 4, false, true, 0, 0, {-1, 0}, "1000|0100|0010|0001"},
    {"window (2,-1): left side only", 1, 5, 5, false, true, 2, -1, {-1, 0},
     "11111|11111|11111|01111|00111"},
    {"causal + window (1,5): causal cuts the right", 1, 4, 4, true, true, 1, 5, {-1, 0},
     "1000|1100|0110|0011"},
    {"Sq < Sk, bottom-right: causal + (1,-1)", 1, 3, 5, true, true, 1, -1, {-1, 0},
     "01100|00110|00011"},
    {"Sq > Sk, window (0,1): early rows see nothing", 1, 5, 3, false, true, 0, 1, {-1, 0},
     "000|100|110|011|001"},
    {"Sq > Sk, window (0,3): a side >= Sk is unbounded (FA2)", 1, 5, 3, false, true, 0, 3, {-1, 0},
     "111|111|111|011|001"},
    {"kv_lens: each batch's own i'", 2, 3, 5, false, true, 1, 0, {5, 3},
     "01100|00110|00011|" /* batch 0: L = 5, i' = i + 2 */
     "10000|11000|01100"}, /* batch 1: L = 3, i' = i; keys 3 and 4 are padding */
    {"window flag off: fields ignored", 1, 3, 3, false, false, 0, 0, {-1, 0}, "111|111|111"},
};

static void set_call(modattn_attn_call *c, int B, int H, int Hkv, int Sq, int Sk, int D) {
    memset(c, 0, sizeof *c);
    c->q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, Sq, D);
    c->k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, Hkv, Sk, D);
    c->v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, Hkv, Sk, Sk);
    c->o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, H, Sq, Sk);
}

static void identity_v(int B, int Sk) {
    for (int b = 0; b < B; b++)
        for (int j = 0; j < Sk; j++)
            for (int e = 0; e < Sk; e++) v[(b * Sk + j) * Sk + e] = j == e ? 1.0f : 0.0f;
}

static void check_visibility(modattn_ctx *ctx, size_t idx, const char *impl) {
    for (size_t c = 0; c < sizeof k_cases / sizeof *k_cases; c++) {
        const vcase *t = &k_cases[c];
        memset(q, 0, sizeof q), memset(k, 0, sizeof k);
        identity_v(t->B, t->Sk);
        modattn_attn_call call;
        set_call(&call, t->B, 1, 1, t->Sq, t->Sk, 4);
        call.causal = t->causal;
        call.window = t->window, call.window_left = t->wl, call.window_right = t->wr;
        if (t->lens[0] >= 0) call.kv_lens = t->lens;
        CHECK_MSG(modattn_attention_with(ctx, idx, &call) == 0, "%s: %s: %s", impl, t->name, modattn_last_error());
        const char *p = t->rows;
        for (int b = 0; b < t->B; b++)
            for (int i = 0; i < t->Sq; i++) {
                int n = 0;
                for (int j = 0; j < t->Sk; j++) n += p[j] == '1';
                for (int j = 0; j < t->Sk; j++) {
                    float want = p[j] == '1' ? 1.0f / (float)n : 0.0f;
                    float got = o[((b * t->Sq) + i) * t->Sk + j];
                    CHECK_MSG(fabsf(got - want) <= 1e-6f, "%s: %s: batch %d row %d key %d: %g, expected %g", impl,
                              t->name, b, i, j, (double)got, (double)want);
                }
                p += t->Sk;
                if (*p == '|') p++;
            }
    }
}

/* ALiBi with q = k = 0: row i's weights are softmax_j(-slope_h |i' - j|), two heads of different
 * slopes sharing one kv head (GQA), with and without causal (one-sided). */
static void check_alibi(modattn_ctx *ctx, size_t idx, const char *impl) {
    enum { S = 6 };
    const float slopes[2] = {0.5f, 0.125f};
    memset(q, 0, sizeof q), memset(k, 0, sizeof k);
    identity_v(1, S);
    for (int causal = 0; causal < 2; causal++) {
        modattn_attn_call call;
        set_call(&call, 1, 2, 1, S, S, 4);
        call.alibi_slopes = slopes;
        call.causal = causal;
        CHECK_MSG(modattn_attention_with(ctx, idx, &call) == 0, "%s: alibi: %s", impl, modattn_last_error());
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < S; i++) {
                double w[S], sum = 0;
                for (int j = 0; j < S; j++) {
                    w[j] = causal && j > i ? 0.0 : exp(-(double)slopes[h] * fabs((double)(i - j)));
                    sum += w[j];
                }
                for (int j = 0; j < S; j++) {
                    double got = o[(h * S + i) * S + j];
                    CHECK_MSG(fabs(got - w[j] / sum) <= 2e-6, "%s: alibi causal=%d head %d row %d key %d: %g, expected %g",
                              impl, causal, h, i, j, got, w[j] / sum);
                }
            }
    }
}

/* Softcapping with one-dimensional heads: q = [a], keys [1] and [0] score a and 0; capped,
 * key 0's weight is 1 / (1 + e^-(cap tanh(a / cap))). */
static void check_softcap(modattn_ctx *ctx, size_t idx, const char *impl) {
    memset(q, 0, sizeof q), memset(k, 0, sizeof k);
    identity_v(1, 2);
    q[0] = 6.0f;
    k[0] = 1.0f, k[1] = 0.0f;
    modattn_attn_call call;
    set_call(&call, 1, 1, 1, 1, 2, 1);
    call.scale = 1.0f;
    call.softcap = 2.0f;
    CHECK_MSG(modattn_attention_with(ctx, idx, &call) == 0, "%s: softcap: %s", impl, modattn_last_error());
    double capped = 2.0 * tanh(6.0 / 2.0), p0 = 1.0 / (1.0 + exp(-capped));
    CHECK_MSG(fabs(o[0] - p0) <= 2e-6 && fabs(o[1] - (1.0 - p0)) <= 2e-6, "%s: softcap: %g %g, expected %g %g", impl,
              (double)o[0], (double)o[1], p0, 1.0 - p0);
}

/* An implementation built against api_version 2: accepts everything it can see. */
static int g_v2_runs;
static bool v2_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx, (void)d, (void)reason, (void)len;
    return true;
}
static int v2_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *ws, size_t wsb,
                  const modattn_exec *ex, char *reason, size_t len) {
    (void)ctx, (void)d, (void)c, (void)ws, (void)wsb, (void)ex, (void)reason, (void)len;
    g_v2_runs++;
    return 0;
}

int main(void) {
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 2, .plugin_path = "", .policy = "reference"};
    CHECK(modattn_ctx_create(&opt, &ctx) == 0);

    const char *impls[] = {"reference", "cpu_flash", "cpu_blas"};
    int ran = 0;
    for (size_t n = 0; n < sizeof impls / sizeof *impls; n++) {
        long idx = modattn_ctx_find(ctx, impls[n]);
        if (idx < 0) {
            printf("%s: not built here\n", impls[n]);
            continue;
        }
        check_visibility(ctx, (size_t)idx, impls[n]);
        check_alibi(ctx, (size_t)idx, impls[n]);
        check_softcap(ctx, (size_t)idx, impls[n]);
        printf("%s: windows, ALiBi and softcap as written by hand\n", impls[n]);
        ran++;
    }
    CHECK(ran >= 2); /* the oracle and cpu_flash are always built */

    /* the FLOP count: pairs the window leaves (Sq = Sk = 8, window (1,1): 8 * 3 - 2 = 22 pairs) */
    modattn_attn_desc d = modattn_attn_desc_make(1, 2, 2, 8, 8, 4, false);
    CHECK(modattn_attn_desc_flops(&d) == 2.0 * 2 * 64 * 8);
    d.has_window = true, d.window_left = 1, d.window_right = 1;
    CHECK(modattn_attn_desc_flops(&d) == 2.0 * 2 * 22 * 8);
    d.causal = true; /* causal + (1, 1): rows see 1 + min(i, 1) keys: 15 pairs */
    CHECK(modattn_attn_desc_flops(&d) == 2.0 * 2 * 15 * 8);
    char text[200];
    modattn_attn_desc_format(&d, text, sizeof text);
    CHECK_MSG(strstr(text, "window=(1,1)") != NULL, "%s", text);

    /* invalid inputs are refused naming the field */
    memset(q, 0, sizeof q), memset(k, 0, sizeof k);
    identity_v(1, 4);
    modattn_attn_call call;
    set_call(&call, 1, 2, 1, 4, 4, 4);
    call.window = true, call.window_left = -2;
    CHECK_ERR(modattn_attention(ctx, &call), MODATTN_EINVAL, "window_left = -2");
    call.window_left = 0, call.window_right = -7;
    CHECK_ERR(modattn_attention(ctx, &call), MODATTN_EINVAL, "window_right = -7");
    set_call(&call, 1, 2, 1, 4, 4, 4);
    call.softcap = -1.0f;
    CHECK_ERR(modattn_attention(ctx, &call), MODATTN_EINVAL, "softcap");
    call.softcap = NAN;
    CHECK_ERR(modattn_attention(ctx, &call), MODATTN_EINVAL, "softcap");
    const float bad_slopes[2] = {0.5f, INFINITY};
    set_call(&call, 1, 2, 1, 4, 4, 4);
    call.alibi_slopes = bad_slopes;
    CHECK_ERR(modattn_attention(ctx, &call), MODATTN_EINVAL, "alibi_slopes[1]");

    /* an api_version 2 table: loaded, runs plain calls, refused (with the reason) any call with a
     * window, ALiBi or softcap, never run on one */
    static modattn_attn_impl v2 = {2u, "old_v2_impl", "built against api_version 2 (test)", MODATTN_DEVICE_CPU, 0,
                                   NULL, NULL, NULL, v2_supports, NULL, v2_run, NULL};
    CHECK(modattn_ctx_register(ctx, &v2) == 0);
    long iv2 = modattn_ctx_find(ctx, "old_v2_impl");
    CHECK(iv2 >= 0);
    set_call(&call, 1, 2, 1, 4, 4, 4);
    CHECK(modattn_attention_with(ctx, (size_t)iv2, &call) == 0 && g_v2_runs == 1);
    const float slopes[2] = {0.25f, 0.5f};
    modattn_attn_call w = call;
    w.window = true, w.window_left = 1, w.window_right = 1;
    CHECK_ERR(modattn_attention_with(ctx, (size_t)iv2, &w), MODATTN_EUNSUPPORTED, "api_version 2");
    CHECK_ERR(modattn_attention_with(ctx, (size_t)iv2, &w), MODATTN_EUNSUPPORTED, "sliding windows");
    w = call, w.alibi_slopes = slopes;
    CHECK_ERR(modattn_attention_with(ctx, (size_t)iv2, &w), MODATTN_EUNSUPPORTED, "ALiBi");
    w = call, w.softcap = 30.0f;
    CHECK_ERR(modattn_attention_with(ctx, (size_t)iv2, &w), MODATTN_EUNSUPPORTED, "softcapping");
    CHECK(g_v2_runs == 1);
    /* a window whose sides are both unbounded is no window: the old table may run it */
    w = call, w.window = true, w.window_left = -1, w.window_right = -1;
    CHECK(modattn_attention_with(ctx, (size_t)iv2, &w) == 0 && g_v2_runs == 2);
    /* and the conformance suite counts its windowed configurations as unsupported, for that reason */
    modattn_conformance_options co = {.only = "old_v2_impl", .max_configs = 100}; /* the window rows start at 62 */
    modattn_conformance_result r;
    size_t nr = 0;
    CHECK(modattn_conformance_run(ctx, &co, &r, 1, &nr) == 0 && nr == 1);
    bool said = false;
    for (int i = 0; i < r.nreasons; i++) said |= strstr(r.reasons[i].text, "api_version 2") != NULL;
    CHECK_MSG(r.unsupported > 0 && said, "unsupported %d", r.unsupported);

    modattn_ctx_free(ctx);
    return test_finish("test_window");
}
