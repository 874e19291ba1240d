/* tests/attn/test_alloc_sweep.c — fail every allocation in turn through context creation (with a
 * plugin), a dispatched attention call and a short conformance run: clean errors, no leaks. */
#include "sweep.h"

static float q[2 * 4 * 33 * 16], k[2 * 2 * 40 * 16], v[2 * 2 * 40 * 16], o[2 * 4 * 33 * 16];

static int op_ctx(void *arg) {
    (void)arg;
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 2, .plugin_path = MODATTN_TEST_PLUGIN_DIR "/good:" MODATTN_TEST_PLUGIN_DIR "/bad"};
    int st = modattn_ctx_create(&opt, &ctx);
    if (st) return st;
    modattn_ctx_free(ctx);
    return 0;
}

static int op_attention(void *arg) {
    const char *policy = arg;
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 2, .plugin_path = "", .policy = policy};
    int st = modattn_ctx_create(&opt, &ctx);
    if (st) return st;
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, 2, 4, 33, 16);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, 2, 2, 40, 16);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, 2, 2, 40, 16);
    c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, 2, 4, 33, 16);
    c.causal = true;
    st = modattn_attention(ctx, &c);
    modattn_ctx_free(ctx);
    return st;
}

static int op_conformance(void *arg) {
    (void)arg;
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 1, .plugin_path = ""};
    int st = modattn_ctx_create(&opt, &ctx);
    if (st) return st;
    modattn_conformance_options co = {.max_configs = 3};
    modattn_conformance_result r[8];
    size_t n;
    st = modattn_conformance_run(ctx, &co, r, 8, &n);
    modattn_ctx_free(ctx);
    return st;
}

int main(void) {
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = (float)(i % 9) * 0.1f;
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) k[i] = (float)(i % 7) * 0.1f, v[i] = (float)(i % 5);
    CHECK(sweep_allocations("context with plugins", op_ctx, NULL, 10000) > 0);
    CHECK(sweep_allocations("attention (auto)", op_attention, "auto", 10000) > 0);
    CHECK(sweep_allocations("attention (reference)", op_attention, "reference", 10000) > 0);
    CHECK(sweep_allocations("conformance", op_conformance, NULL, 10000) > 0);
    return test_finish("test_alloc_sweep");
}
