/* tests/attn/faulty.h — deliberately faulty, test-only attention implementations. Each wraps the
 * reference implementation and then breaks the contract in one way, so the tests can prove that
 * the dispatcher falls back and that the conformance suite catches each kind of fault. */
#ifndef MODATTN_TEST_FAULTY_H
#define MODATTN_TEST_FAULTY_H
#include "modattn/modattn.h"
#include "attn/internal_dispatch.h"

#include <math.h>
#include <stdio.h>

typedef enum fault_kind {
    FAULT_RUN_FAILS,   /* run() returns an error */
    FAULT_REFUSES,     /* supports() says no */
    FAULT_GUARD,       /* writes one element past o's view */
    FAULT_INPUT,       /* modifies q */
    FAULT_ACCURACY,    /* adds 1e-4 to one output */
    FAULT_NAN,         /* writes one NaN */
    FAULT_LSE_SIGN,    /* writes +inf instead of -inf for rows with no key */
    FAULT_INIT,        /* init() fails */
    FAULT_COUNT
} fault_kind;

static const modattn_attn_impl *g_faulty_ref; /* set by faulty_setup() */
static int g_faulty_calls[FAULT_COUNT];

static int64_t faulty_max_index(const modattn_tensor *t) {
    int64_t m = 0;
    for (int i = 0; i < 4; i++) m += (t->shape[i] - 1) * t->stride[i];
    return m;
}

static bool faulty_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    fault_kind k = (fault_kind)(intptr_t)ctx;
    if (k == FAULT_REFUSES) {
        snprintf(reason, len, "refuses every call on purpose (test)");
        return false;
    }
    return g_faulty_ref->supports(g_faulty_ref->ctx, d, reason, len);
}

static size_t faulty_ws(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx;
    return g_faulty_ref->workspace_bytes(g_faulty_ref->ctx, d, nthreads);
}

static int faulty_init(void *ctx, char *reason, size_t len) {
    if ((fault_kind)(intptr_t)ctx == FAULT_INIT) {
        snprintf(reason, len, "no such device here (test)");
        return MODATTN_EUNSUPPORTED;
    }
    return 0;
}

static int faulty_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *ws, size_t wsb,
                      const modattn_exec *exec, char *reason, size_t len) {
    fault_kind k = (fault_kind)(intptr_t)ctx;
    g_faulty_calls[k]++;
    if (k == FAULT_RUN_FAILS) {
        snprintf(reason, len, "simulated failure (test)");
        return MODATTN_ERUNTIME;
    }
    int st = g_faulty_ref->run(g_faulty_ref->ctx, d, c, ws, wsb, exec, reason, len);
    if (st) return st;
    float *o = c->o.data;
    switch (k) {
    case FAULT_GUARD: o[faulty_max_index(&c->o) + 1] = 0.0f; break;
    case FAULT_INPUT: ((float *)c->q.data)[0] += 1.0f; break;
    case FAULT_ACCURACY: o[0] += 1e-4f; break;
    case FAULT_NAN: o[faulty_max_index(&c->o)] = NAN; break;
    case FAULT_LSE_SIGN:
        if (c->lse.data) {
            float *l = c->lse.data;
            int64_t m = faulty_max_index(&c->lse);
            for (int64_t i = 0; i <= m; i++)
                if (l[i] == -INFINITY) l[i] = INFINITY;
        }
        break;
    default: break;
    }
    return 0;
}

static const char *const g_faulty_names[FAULT_COUNT] = {"faulty_fails", "faulty_refuses", "faulty_guard", "faulty_input",
                                                        "faulty_accuracy", "faulty_nan", "faulty_lse_sign", "faulty_init"};
static modattn_attn_impl g_faulty[FAULT_COUNT];

/* Fills the tables; priority 100000 so that `auto` prefers them over the built-ins. */
static void faulty_setup(modattn_ctx *ctx) {
    g_faulty_ref = modattn__ctx_impl(ctx, (size_t)modattn_ctx_find(ctx, "reference"));
    for (int k = 0; k < FAULT_COUNT; k++) {
        modattn_attn_impl t = {
            /* .api_version = */ MODATTN_IMPL_API_VERSION,
            /* .name = */ g_faulty_names[k],
            /* .description = */ "deliberately faulty (test only)",
            /* .device = */ MODATTN_DEVICE_CPU,
            /* .priority = */ 100000,
            /* .ctx = */ (void *)(intptr_t)k,
            /* .init = */ faulty_init,
            /* .shutdown = */ NULL,
            /* .supports = */ faulty_supports,
            /* .workspace_bytes = */ faulty_ws,
            /* .run = */ faulty_run,
            /* .control = */ NULL,
        };
        g_faulty[k] = t;
    }
}
#endif
