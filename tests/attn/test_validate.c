/* tests/attn/test_validate.c — every kind of bad call is refused with a message naming the fault,
 * nothing is written to the outputs, nothing crashes. Also the defined edge cases. */
#include "modattn/modattn.h"
#include "test_util.h"

#include <math.h>

enum { B = 2, H = 4, HKV = 2, S = 8, D = 16 };
static float q[B * H * S * D], k[B * HKV * S * D], v[B * HKV * S * D], o[B * H * S * D + 16], lse[B * H * S];
static float mask[B * H * S * S];

static modattn_attn_call good(void) {
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, HKV, S, D);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, HKV, S, D);
    c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, H, S, D);
    return c;
}

static bool o_untouched(void) {
    for (size_t i = 0; i < sizeof o / sizeof *o; i++)
        if (o[i] != 12345.0f) return false;
    return true;
}

static void expect_invalid(modattn_ctx *ctx, modattn_attn_call c, const char *needle, int line) {
    for (size_t i = 0; i < sizeof o / sizeof *o; i++) o[i] = 12345.0f;
    int st = modattn_attention(ctx, &c);
    const char *m = modattn_last_error();
    if (st == MODATTN_EINVAL && strstr(m, needle) && o_untouched()) t_pass++;
    else {
        t_fail++;
        fprintf(stderr, "line %d: expected EINVAL mentioning '%s', got %d '%s'%s\n", line, needle, st, m,
                o_untouched() ? "" : " and o was written");
    }
}
#define INVALID(c, needle) expect_invalid(ctx, c, needle, __LINE__)

int main(void) {
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) k[i] = (float)((i * 11) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) v[i] = (float)((i * 7) % 19) / 19.0f - 0.5f;
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 2, .plugin_path = ""};
    CHECK(modattn_ctx_create(&opt, &ctx) == 0);

    modattn_attn_call c = good();
    CHECK(modattn_attention(ctx, &c) == 0);

    c = good(); c.k.shape[3] = 8; c.k.capacity = B * HKV * S * 8; INVALID(c, "k: shape[3] (D)");
    c = good(); c.v.shape[2] = 7; INVALID(c, "v: shape[2] (Sk)");
    c = good(); c.o.shape[3] = 8; INVALID(c, "o: shape[3] (Dv)");
    c = good(); c.q.data = NULL; INVALID(c, "q: data is NULL");
    c = good(); c.v.data = NULL; INVALID(c, "v: data is NULL");
    c = good(); c.q.capacity -= 1; INVALID(c, "q: strides reach element");
    c = good(); c.o.stride[2] = D + 1; INVALID(c, "o: strides reach element");
    c = good(); c.k.stride[0] = -1; INVALID(c, "k: stride[0] is negative");
    c = good(); c.q.shape[2] = -3; INVALID(c, "negative");
    c = good(); c.k.stride[1] = INT64_MAX; c.k.stride[0] = INT64_MAX; INVALID(c, "overflow");
    c = good(); c.k.shape[1] = 3; c.v.shape[1] = 3; c.k.capacity = c.v.capacity = 1 << 20;
    INVALID(c, "not a multiple");
    c = good(); c.q.dtype = (modattn_dtype)42; INVALID(c, "unknown dtype");
    c = good(); c.k.dtype = MODATTN_DTYPE_F16; INVALID(c, "dtypes differ");
    c = good(); c.v.device.kind = MODATTN_DEVICE_CUDA; INVALID(c, "v: a tensor on cuda must refer to a device buffer");
    c = good(); c.v.device.index = 1; INVALID(c, "different devices");
    c = good(); c.o.stride[2] = 0; INVALID(c, "overlaps itself");
    c = good(); c.o.data = q; INVALID(c, "o overlaps q");
    c = good(); c.scale = NAN; INVALID(c, "scale is not finite");
    int32_t lens[B] = {3, 9};
    c = good(); c.kv_lens = lens; INVALID(c, "kv_lens[1] = 9");
    c = good(); c.mask = modattn_tensor_contiguous(mask, MODATTN_DTYPE_F32, B, 3, S, S); INVALID(c, "mask: shape[1]");
    c = good(); c.mask = modattn_tensor_contiguous(mask, MODATTN_DTYPE_F32, 1, 1, S, S + 1); INVALID(c, "mask: shape[3]");
    c = good(); c.lse = modattn_tensor_contiguous(lse, MODATTN_DTYPE_F32, B, H, S, 2); INVALID(c, "lse: shape[3]");
    c = good(); c.lse = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, H, S, 1); INVALID(c, "lse overlaps o");
    CHECK_ERR(modattn_attention(ctx, NULL), MODATTN_EINVAL, "NULL");
    CHECK_ERR(modattn_attention(NULL, &c), MODATTN_EINVAL, "context is NULL");

    /* edge cases: Sq = 0 is a no-op; Sk = 0 gives O = 0 and LSE = -inf; kv_lens 0 likewise */
    c = good(); c.q.shape[2] = 0; c.o.shape[2] = 0;
    for (size_t i = 0; i < sizeof o / sizeof *o; i++) o[i] = 12345.0f;
    CHECK(modattn_attention(ctx, &c) == 0 && o_untouched());
    c = good(); c.k.shape[2] = 0; c.v.shape[2] = 0;
    c.lse = modattn_tensor_contiguous(lse, MODATTN_DTYPE_F32, B, H, S, 1);
    CHECK(modattn_attention(ctx, &c) == 0);
    bool zero = true;
    for (int i = 0; i < B * H * S * D; i++) zero &= o[i] == 0.0f;
    for (int i = 0; i < B * H * S; i++) zero &= lse[i] == -INFINITY;
    CHECK(zero);
    int32_t lens0[B] = {0, S};
    c = good(); c.kv_lens = lens0; c.lse = modattn_tensor_contiguous(lse, MODATTN_DTYPE_F32, B, H, S, 1);
    CHECK(modattn_attention(ctx, &c) == 0);
    CHECK(o[0] == 0.0f && lse[0] == -INFINITY && isfinite(lse[H * S]));

    /* a fully -inf mask row gives 0 / -inf, never NaN */
    for (int i = 0; i < B * H * S * S; i++) mask[i] = 0.0f;
    for (int j = 0; j < S; j++) mask[j] = -INFINITY; /* row 0 of batch 0, head 0 */
    c = good(); c.mask = modattn_tensor_contiguous(mask, MODATTN_DTYPE_F32, B, H, S, S);
    c.lse = modattn_tensor_contiguous(lse, MODATTN_DTYPE_F32, B, H, S, 1);
    CHECK(modattn_attention(ctx, &c) == 0);
    bool nan = false;
    for (int i = 0; i < B * H * S * D; i++) nan |= isnan(o[i]);
    CHECK(!nan && o[0] == 0.0f && lse[0] == -INFINITY);

    /* large finite scores: no NaN, no inf */
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] *= 1e4f;
    c = good();
    CHECK(modattn_attention(ctx, &c) == 0);
    nan = false;
    for (int i = 0; i < B * H * S * D; i++) nan |= !isfinite(o[i]);
    CHECK(!nan);

    modattn_ctx_free(ctx);
    return test_finish("test_validate");
}
