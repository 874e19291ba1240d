/* attn/internal.h — the context's insides, shared by the files of attn/ only. From the top down:
 * context.c (create/free) -> dispatch.c (policy, explain, run with fallback) -> tune.c (the
 * tuning cache) -> run.c (one implementation once) -> registry.c (the implementations). */
#ifndef MODATTN_ATTN_INTERNAL_H
#define MODATTN_ATTN_INTERNAL_H

#include <pthread.h>

/* the attention layer's headers and those below it: not modattn/modattn.h, which includes the
 * layers above (docs/ARCHITECTURE.md) */
#include "modattn/core.h"
#include "modattn/backend/device.h"
#include "modattn/backend/impl.h"
#include "modattn/dispatch.h"
#include "modattn/backend/conformance.h"

typedef struct modattn__entry {
    const modattn_attn_impl *impl;
    bool available;
    bool inited; /* init succeeded (or was NULL): shutdown is owed */
    bool deferred; /* a built-in of a device other than the CPU whose init has not run yet: it runs
                    * when tensors on its device first reach it, or its info is asked
                    * (modattn__entry_ready), so CPU-only work never starts other devices' drivers */
    char reason[256];
    char *origin; /* "builtin", "registered" or a plugin path */
    void *dl;     /* dlopen handle for plugins */
    modattn_impl_stats stats;
    uint64_t done;      /* successful runs whose time is in samples' reservoir */
    float *samples;     /* reservoir of call times (ms) for the median; MODATTN__SAMPLES of them */
    uint64_t rng;
} modattn__entry;

#define MODATTN__SAMPLES 2048

#define MODATTN__MAX_POLICY 32

/* One remembered tuning result: the winner for a shape bucket on this machine, and the median
 * time of every implementation measured ("name=ms,name=ms"). */
typedef struct modattn__tune_entry {
    char key[192];
    char winner[64];
    char times[512];
} modattn__tune_entry;

/* Where a call runs: the workspaces it may grow and the threads it may use. The context has one
 * (its own, for modattn_attention); every session (modattn_session_create) has its own, so calls
 * in different sessions share nothing but the context's guarded counters and tuning cache. */
typedef struct modattn__ws {
    void *host;            /* host workspace, grown on demand */
    size_t host_bytes;
    modattn_buffer *dev[8]; /* workspaces on other devices than the CPU, one per device */
    size_t ndev;
} modattn__ws;

typedef struct modattn__runner {
    modattn__ws *ws;
    const modattn_exec *exec;
} modattn__runner;

void modattn__ws_free(modattn__ws *ws);

struct modattn_session {
    modattn_ctx *ctx; /* borrowed: shared, read-only but for its guarded counters and cache */
    modattn_pool *pool;
    bool own_pool;
    modattn_exec exec;
    modattn__ws ws;
};

struct modattn_ctx {
    modattn__entry *entries;
    size_t n, cap;
    char **plugin_errors;
    size_t nerrors;
    modattn_pool *pool;
    bool own_pool;                      /* created here (else borrowed from the options) */
    modattn_exec exec;
    char *policy;                       /* as given */
    bool policy_auto;
    long order[MODATTN__MAX_POLICY];    /* explicit preference list (indices) */
    size_t norder;
    modattn__ws ws;                     /* modattn_attention's workspaces (sessions have their own) */
    /* guards what calls in several sessions share: every entry's stats, samples and rng, the
     * fallback count, and the tuning cache (held for a few instructions, never while a kernel runs) */
    pthread_mutex_t mu;
    uint64_t fallbacks;
    bool policy_tune;
    /* tuning cache (attn/tune.c) */
    modattn__tune_entry *tune;
    size_t ntune, captune;
    bool tune_loaded;
    char tune_path[1024]; /* "" if no cache directory could be found: tuning stays in memory */
    char tune_note[600];  /* why entries of the cache file were ignored ("" if none was) */
    /* the plugins loaded, as a hash of each file's path, size, time and first MiB: part of the
     * tuning cache's key, so a rebuilt plugin is measured again (0: none) */
    uint64_t plugin_sig;
};

/* Validate and append an implementation; for plugins `dl` is its handle (closed on refusal by
 * the caller). `refuse_on_init_failure`: plugins are refused, built-ins listed as unavailable. */
int modattn__ctx_add(modattn_ctx *ctx, const modattn_attn_impl *impl, const char *origin, void *dl,
                     bool refuse_on_init_failure);

/* attn/registry.c: built-ins and plugins into a new context; release them */
int modattn__registry_fill(modattn_ctx *ctx, const modattn_ctx_options *opt);
void modattn__registry_free(modattn_ctx *ctx);

/* attn/tune.c */
/* The shape class key of d for calls run with `nthreads` threads. */
void modattn__tune_key(const modattn_ctx *ctx, int nthreads, const modattn_attn_desc *d, char *key, size_t len);
/* The remembered entry for d with nthreads threads, copied into *out (under ctx->mu): true if
 * there is one. */
bool modattn__tune_lookup(modattn_ctx *ctx, int nthreads, const modattn_attn_desc *d, modattn__tune_entry *out);
/* Time the capable candidates (order[0..n)) on this call, remember and save the winner; the
 * call's outputs hold a correct result afterwards. Returns 0 or the error of the last failure. */
int modattn__tune_measure(modattn_ctx *ctx, const modattn__runner *r, const modattn_attn_desc *d,
                          const modattn_attn_call *c, const long *order, size_t n);
/* Median time of `name` in an entry, or -1. */
double modattn__tune_time(const modattn__tune_entry *e, const char *name);
void modattn__tune_free(modattn_ctx *ctx);
/* attn/run.c: false (with the reason) when `impl` was built against an api_version that cannot see
 * a feature d uses (a version 2 table knows no window, ALiBi or softcap). */
bool modattn__impl_sees(const modattn_attn_impl *impl, const modattn_attn_desc *d, char *reason, size_t len);
/* attn/run.c: run entry i once (workspace, stats, trace); the message names it on failure. */
int modattn__run_entry(modattn_ctx *ctx, const modattn__runner *r, size_t i, const modattn_attn_desc *d,
                       const modattn_attn_call *c);
/* attn/dispatch.c: modattn_attention and modattn_session_attention */
int modattn__attention(modattn_ctx *ctx, const modattn__runner *r, const modattn_attn_call *call);
/* Runs a deferred init (once, thread-safe). */
void modattn__entry_ready(modattn__entry *e);
bool modattn__capable(const modattn_ctx *ctx, size_t i, const modattn_attn_desc *d, char *reason, size_t len,
                      modattn_verdict *verdict);

#endif
