/* attn/internal.h — the context's insides, shared by registry.c and dispatch.c only. */
#ifndef MODATTN_ATTN_INTERNAL_H
#define MODATTN_ATTN_INTERNAL_H

#include "modattn/modattn.h"

typedef struct modattn__entry {
    const modattn_attn_impl *impl;
    bool available;
    bool inited; /* init succeeded (or was NULL): shutdown is owed */
    char reason[256];
    char *origin; /* "builtin", "registered" or a plugin path */
    void *dl;     /* dlopen handle for plugins */
    modattn_impl_stats stats;
} modattn__entry;

#define MODATTN__MAX_POLICY 32

struct modattn_ctx {
    modattn__entry *entries;
    size_t n, cap;
    char **plugin_errors;
    size_t nerrors;
    modattn_pool *pool;
    modattn_exec exec;
    char *policy;                       /* as given */
    bool policy_auto;
    long order[MODATTN__MAX_POLICY];    /* explicit preference list (indices) */
    size_t norder;
    void *ws;                           /* workspace, grown on demand */
    size_t ws_bytes;
    uint64_t fallbacks;
};

/* Validate and append an implementation; for plugins `dl` is its handle (closed on refusal by
 * the caller). `refuse_on_init_failure`: plugins are refused, built-ins listed as unavailable. */
int modattn__ctx_add(modattn_ctx *ctx, const modattn_attn_impl *impl, const char *origin, void *dl,
                     bool refuse_on_init_failure);

#endif
