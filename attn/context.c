/* attn/context.c — creating and freeing a context: the thread pool (core's), the registry's
 * implementations and plugins, the policy, the tuning cache and the workspaces. The top of
 * attn/: it calls registry.c, dispatch.c (the policy) and tune.c; nothing calls back up. */
#include "attn/internal.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#include <string.h>

static void exec_parallel_for(const modattn_exec *exec, int64_t n, void (*fn)(void *, int64_t, int), void *arg) {
    modattn__pool_run((modattn_pool *)exec->host, n, fn, arg);
}

int modattn_ctx_create(const modattn_ctx_options *opt, modattn_ctx **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_ctx_create: out is NULL");
    *out = NULL;
    modattn_ctx_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opt) opt = &defaults;
    int est = modattn__env_check(); /* a bad MODATTN_* value is refused, never half-read */
    if (est) return est;
    modattn_ctx *ctx = modattn__calloc(1, sizeof *ctx, MODATTN_MEM_OTHER);
    if (!ctx) return modattn__mem_last_status();
    pthread_mutex_init(&ctx->mu, NULL);
    int st = 0;
    if (opt->pool) ctx->pool = opt->pool;
    else if ((st = modattn__pool_create(opt->threads, &ctx->pool))) goto fail;
    else ctx->own_pool = true;
    ctx->exec.nthreads = modattn__pool_threads(ctx->pool);
    ctx->exec.parallel_for = exec_parallel_for;
    ctx->exec.host = ctx->pool;
    if ((st = modattn__registry_fill(ctx, opt))) goto fail;
    if ((st = modattn_ctx_set_policy(ctx, opt->policy ? opt->policy : "auto"))) goto fail;
    *out = ctx;
    return 0;
fail:
    modattn_ctx_free(ctx);
    return st;
}

void modattn_ctx_free(modattn_ctx *ctx) {
    if (!ctx) return;
    modattn__registry_free(ctx);
    modattn_free(ctx->policy);
    modattn__ws_free(&ctx->ws);
    modattn__tune_free(ctx);
    if (ctx->own_pool) modattn__pool_free(ctx->pool);
    pthread_mutex_destroy(&ctx->mu);
    modattn_free(ctx);
}

/* ---- sessions */

int modattn_session_create(modattn_ctx *ctx, const modattn_session_options *opt, modattn_session **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_session_create: out is NULL");
    *out = NULL;
    if (!ctx) return modattn__error(MODATTN_EINVAL, "modattn_session_create: context is NULL");
    modattn_session_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opt) opt = &defaults;
    modattn_session *s = modattn__calloc(1, sizeof *s, MODATTN_MEM_OTHER);
    if (!s) return modattn__mem_last_status();
    s->ctx = ctx;
    int st = 0;
    if (opt->pool) s->pool = opt->pool;
    else if ((st = modattn__pool_create(opt->threads, &s->pool))) {
        modattn_free(s);
        return st;
    } else s->own_pool = true;
    s->exec.nthreads = modattn__pool_threads(s->pool);
    s->exec.parallel_for = exec_parallel_for;
    s->exec.host = s->pool;
    *out = s;
    return 0;
}

void modattn_session_free(modattn_session *s) {
    if (!s) return;
    modattn__ws_free(&s->ws);
    if (s->own_pool) modattn__pool_free(s->pool);
    modattn_free(s);
}

modattn_ctx *modattn__session_ctx(const modattn_session *s) { return s ? s->ctx : NULL; }
modattn_pool *modattn__session_pool(modattn_session *s) { return s ? s->pool : NULL; }
const modattn_exec *modattn__session_exec(modattn_session *s) { return s ? &s->exec : NULL; }

int modattn_session_attention(modattn_session *s, const modattn_attn_call *call) {
    if (!s) return modattn__error(MODATTN_EINVAL, "attention: session is NULL");
    modattn__runner r = {&s->ws, &s->exec};
    return modattn__attention(s->ctx, &r, call);
}

