/* attn/context.c — creating and freeing a context: the thread pool (core's), the registry's
 * implementations and plugins, the policy, the tuning cache and the workspaces. The top of
 * attn/: it calls registry.c, dispatch.c (the policy) and tune.c; nothing calls back up. */
#include "attn/internal.h"

#include <string.h>

static void exec_parallel_for(const modattn_exec *exec, int64_t n, void (*fn)(void *, int64_t, int), void *arg) {
    modattn_pool_run((modattn_pool *)exec->host, n, fn, arg);
}

int modattn_ctx_create(const modattn_ctx_options *opt, modattn_ctx **out) {
    if (!out) return modattn_error(MODATTN_EINVAL, "modattn_ctx_create: out is NULL");
    *out = NULL;
    modattn_ctx_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opt) opt = &defaults;
    modattn_ctx *ctx = modattn_calloc(1, sizeof *ctx, MODATTN_MEM_OTHER);
    if (!ctx) return modattn_mem_last_status();
    int st = 0;
    if (opt->pool) ctx->pool = opt->pool;
    else if ((st = modattn_pool_create(opt->threads, &ctx->pool))) goto fail;
    else ctx->own_pool = true;
    ctx->exec.nthreads = modattn_pool_threads(ctx->pool);
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
    modattn_free(ctx->ws);
    for (size_t i = 0; i < ctx->ndws; i++) modattn_buffer_free(ctx->dws[i]);
    modattn__tune_free(ctx);
    if (ctx->own_pool) modattn_pool_free(ctx->pool);
    modattn_free(ctx);
}

