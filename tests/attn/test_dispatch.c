/* tests/attn/test_dispatch.c — policies, explain, refusal messages and run-time fallback, with
 * deliberately faulty implementations; registration checks. */
#include "attn/faulty.h"
#include "modattn/modattn.h"
#include "attn/internal_dispatch.h"
#include "test_util.h"

#include <math.h>

enum { B = 1, H = 2, S = 5, D = 8 };
static float q[B * H * S * D], k[B * H * S * D], v[B * H * S * D], o[B * H * S * D], o_ref[B * H * S * D];

static modattn_attn_call call(float *out) {
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
    c.o = modattn_tensor_contiguous(out, MODATTN_DTYPE_F32, B, H, S, D);
    return c;
}

static const modattn_explain_entry *find(const modattn_explain_entry *e, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].name, name) == 0) return &e[i];
    return NULL;
}

int main(void) {
    for (int i = 0; i < B * H * S * D; i++) q[i] = (float)(i % 7) * 0.1f, k[i] = (float)(i % 5) * 0.2f, v[i] = (float)(i % 3);
    modattn_mem_stats m0;
    modattn_mem_get_stats(&m0);
    modattn_ctx *ctx;
    modattn_ctx_options opt = {.threads = 2, .plugin_path = ""};
    CHECK(modattn_ctx_create(&opt, &ctx) == 0);
    CHECK(strcmp(modattn_ctx_policy(ctx), "auto") == 0);
    modattn_attn_call c = call(o_ref);
    CHECK(modattn_ctx_set_policy(ctx, "reference") == 0);
    CHECK(modattn_attention(ctx, &c) == 0);
    CHECK(modattn_ctx_set_policy(ctx, "auto") == 0);

    faulty_setup(ctx);
    CHECK(modattn_ctx_register(ctx, &g_faulty[FAULT_RUN_FAILS]) == 0);
    CHECK(modattn_ctx_register(ctx, &g_faulty[FAULT_REFUSES]) == 0);
    CHECK(modattn_ctx_register(ctx, &g_faulty[FAULT_INIT]) == 0);

    /* registration checks */
    CHECK_ERR(modattn_ctx_register(ctx, &g_faulty[FAULT_REFUSES]), MODATTN_EINVAL, "already registered");
    modattn_attn_impl bad = g_faulty[FAULT_GUARD];
    bad.api_version = 7;
    CHECK_ERR(modattn_ctx_register(ctx, &bad), MODATTN_EVERSION, "api_version 7");
    bad = g_faulty[FAULT_GUARD];
    bad.run = NULL;
    CHECK_ERR(modattn_ctx_register(ctx, &bad), MODATTN_EINVAL, "'run'");
    bad = g_faulty[FAULT_GUARD];
    bad.name = "Bad Name";
    CHECK_ERR(modattn_ctx_register(ctx, &bad), MODATTN_EINVAL, "[a-z0-9_]");
    modattn_impl_info info;
    long ii = modattn_ctx_find(ctx, "faulty_init");
    CHECK(ii >= 0 && modattn_ctx_impl_info(ctx, (size_t)ii, &info) == 0 && !info.available &&
          strstr(info.reason, "no such device"));

    /* policies */
    CHECK_ERR(modattn_ctx_set_policy(ctx, "nope"), MODATTN_EINVAL, "no implementation named 'nope'");
    CHECK_ERR(modattn_ctx_set_policy(ctx, "reference,reference"), MODATTN_EINVAL, "twice");
    CHECK_ERR(modattn_ctx_set_policy(ctx, "reference,"), MODATTN_EINVAL, "empty");
    CHECK(strcmp(modattn_ctx_policy(ctx), "auto") == 0); /* a refused policy changes nothing */

    /* auto: faulty_fails has the highest priority, fails at run time, reference takes over */
    modattn_attn_desc d = modattn_attn_desc_make(B, H, H, S, S, D, false);
    modattn_explain_entry e[16];
    size_t n;
    CHECK(modattn_explain(ctx, &d, e, 16, &n) == 0 && n == modattn_ctx_impl_count(ctx));
    CHECK(find(e, n, "faulty_fails")->verdict == MODATTN_VERDICT_CHOSEN);
    CHECK(find(e, n, "reference")->verdict == MODATTN_VERDICT_CAPABLE);
    const char *second = NULL; /* whichever capable built-in ranks next */
    for (size_t i = 0; i < n; i++)
        if (e[i].rank == 1) second = e[i].name;
    CHECK(second != NULL);
    CHECK(find(e, n, "faulty_refuses")->verdict == MODATTN_VERDICT_REFUSED &&
          strstr(find(e, n, "faulty_refuses")->reason, "on purpose"));
    CHECK(find(e, n, "faulty_init")->verdict == MODATTN_VERDICT_UNAVAILABLE &&
          strstr(find(e, n, "faulty_init")->reason, "no such device"));
    memset(o, 0, sizeof o);
    c = call(o);
    CHECK(modattn_attention(ctx, &c) == 0);
    float maxerr = 0;
    for (int i = 0; i < B * H * S * D; i++) maxerr = fmaxf(maxerr, fabsf(o[i] - o_ref[i]));
    CHECK_MSG(maxerr < 1e-5f, "fallback result differs from the reference by %g", (double)maxerr);
    CHECK(modattn__ctx_fallbacks(ctx) == 1);
    modattn_impl_stats st;
    CHECK(modattn__ctx_impl_stats(ctx, (size_t)modattn_ctx_find(ctx, "faulty_fails"), &st) == 0 && st.calls == 1 &&
          st.failures == 1);
    CHECK(second && modattn__ctx_impl_stats(ctx, (size_t)modattn_ctx_find(ctx, second), &st) == 0 && st.fallbacks == 1);

    /* an explicit name that refuses: the call fails with its reason */
    CHECK(modattn_ctx_set_policy(ctx, "faulty_refuses") == 0);
    CHECK_ERR(modattn_attention(ctx, &c), MODATTN_EUNSUPPORTED, "refuses every call on purpose");
    CHECK(modattn_explain(ctx, &d, e, 16, &n) == MODATTN_EUNSUPPORTED);
    CHECK(find(e, n, "reference")->verdict == MODATTN_VERDICT_EXCLUDED);
    /* an explicit list: the refusing one is skipped, the next runs */
    CHECK(modattn_ctx_set_policy(ctx, "faulty_refuses,reference") == 0);
    memset(o, 0, sizeof o);
    CHECK(modattn_attention(ctx, &c) == 0 && memcmp(o, o_ref, sizeof o) == 0);
    /* the only capable one fails: the error says which and why */
    CHECK(modattn_ctx_set_policy(ctx, "faulty_fails") == 0);
    CHECK_ERR(modattn_attention(ctx, &c), MODATTN_ERUNTIME, "simulated failure");
    /* nothing capable: every refusal is in the message */
    CHECK(modattn_ctx_set_policy(ctx, "faulty_refuses,faulty_init") == 0);
    int s2 = modattn_attention(ctx, &c);
    CHECK_MSG(s2 == MODATTN_EUNSUPPORTED && strstr(modattn_last_error(), "on purpose") &&
                  strstr(modattn_last_error(), "no such device"),
              "%s", modattn_last_error());
    /* a device mismatch is refused by the dispatcher itself */
    modattn_attn_desc dc = d;
    dc.device.kind = MODATTN_DEVICE_CUDA;
    CHECK(modattn_ctx_set_policy(ctx, "auto") == 0);
    CHECK(modattn_explain(ctx, &dc, e, 16, &n) == MODATTN_EUNSUPPORTED);
    CHECK(find(e, n, "reference")->verdict == MODATTN_VERDICT_REFUSED &&
          strstr(find(e, n, "reference")->reason, "the tensors are on cuda:0"));

    /* memory: the workspace is accounted, and everything is returned at teardown */
    modattn_mem_stats m1;
    modattn_mem_get_stats(&m1);
    CHECK(m1.peak[MODATTN_MEM_WORKSPACE] > 0);
    modattn_ctx_free(ctx);
    modattn_mem_get_stats(&m1);
    CHECK_MSG(m1.current_total == m0.current_total, "%lld bytes still in use", (long long)(m1.current_total - m0.current_total));
    return test_finish("test_dispatch");
}
