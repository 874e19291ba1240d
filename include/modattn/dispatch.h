/* modattn/dispatch.h — the registry of attention implementations and the dispatcher.
 *
 * A modattn_ctx holds the built-in implementations, any plugins found on MODATTN_PLUGIN_PATH,
 * a thread pool and a policy:
 *   "auto"              implementations on the tensors' device, highest priority first, the
 *                       first capable one runs (a tuned choice, once measured, comes first);
 *   "tune"              as auto, but the first call of each shape class times every capable
 *                       implementation (priority > 0 ones; the reference only if nothing else
 *                       can run) and remembers the fastest per machine in a cache file
 *                       ($MODATTN_CACHE_DIR, else $XDG_CACHE_HOME/modattn, else
 *                       ~/.cache/modattn: tune-v1.tsv); `auto` then puts that winner first;
 *   "NAME"              only that implementation; if it refuses, the call fails with its reason;
 *   "NAME1,NAME2,..."   that preference order, first capable runs, the next on run-time failure.
 * If the chosen implementation fails at run time, the next capable one runs and the fallback is
 * counted (never a silently wrong result). */
#ifndef MODATTN_DISPATCH_H
#define MODATTN_DISPATCH_H

#include "modattn/attention.h"
#include "modattn/backend/impl.h"
#include "modattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modattn_ctx modattn_ctx;

typedef struct modattn_ctx_options {
    int threads;              /* <= 0: one per online CPU */
    const char *policy;       /* NULL: "auto" */
    const char *plugin_path;  /* NULL: $MODATTN_PLUGIN_PATH; "" : no plugins */
    bool no_builtins;         /* register no built-in implementation (tests) */
    modattn_pool *pool;       /* borrowed (must outlive the context): implementations run their
                               * threads on it, and `threads` is ignored; NULL: the context makes
                               * its own pool of `threads` threads. Share one pool between a
                               * context and the models that use it (modattn_model_options.pool). */
} modattn_ctx_options;

/* Ownership: free with modattn_ctx_free(). Plugins that fail to load do not fail the creation:
 * they are listed by modattn_ctx_plugin_errors() and `modattn backends`. */
int modattn_ctx_create(const modattn_ctx_options *opt, modattn_ctx **out);
void modattn_ctx_free(modattn_ctx *ctx);

int modattn_ctx_set_policy(modattn_ctx *ctx, const char *policy); /* EINVAL on an unknown name */
const char *modattn_ctx_policy(const modattn_ctx *ctx);
int modattn_ctx_threads(const modattn_ctx *ctx);
/* Register an implementation in-process (kernel authors, tests). The table must outlive ctx.
 * Refused (EVERSION / EINVAL) like a plugin: wrong api_version, missing slots, duplicate name,
 * failing init is registered as unavailable with the reason. */
int modattn_ctx_register(modattn_ctx *ctx, const modattn_attn_impl *impl);
/* Load one plugin file; refused with a message (never half-loaded). */
int modattn_ctx_load_plugin(modattn_ctx *ctx, const char *path);

/* Registered implementations, in registration order. */
typedef struct modattn_impl_info {
    const char *name;
    const char *description;
    modattn_device_kind device;
    int priority;
    bool available;
    char reason[256];   /* why unavailable */
    const char *origin; /* "builtin", "registered" or the plugin's path */
} modattn_impl_info;
size_t modattn_ctx_impl_count(const modattn_ctx *ctx);
int modattn_ctx_impl_info(const modattn_ctx *ctx, size_t i, modattn_impl_info *out);
/* Index of an implementation by name, or -1. */
long modattn_ctx_find(const modattn_ctx *ctx, const char *name);

/* Plugin files that were refused: count, and "path: reason" for each. */
size_t modattn_ctx_plugin_error_count(const modattn_ctx *ctx);
const char *modattn_ctx_plugin_error(const modattn_ctx *ctx, size_t i);

/* ---- explain */
typedef enum modattn_verdict {
    MODATTN_VERDICT_CHOSEN = 0,
    MODATTN_VERDICT_CAPABLE,     /* could run; not first in the order */
    MODATTN_VERDICT_REFUSED,     /* supports() said no: reason */
    MODATTN_VERDICT_UNAVAILABLE, /* init failed on this machine: reason */
    MODATTN_VERDICT_EXCLUDED,    /* not named by the policy */
} modattn_verdict;
const char *modattn_verdict_name(modattn_verdict v);

typedef struct modattn_explain_entry {
    const char *name;
    modattn_verdict verdict;
    int rank;               /* order in which capable ones would be tried (0 = chosen), -1 */
    char reason[256];
    double measured_ms;     /* from tuning, or < 0 if never measured */
} modattn_explain_entry;

/* Fills up to `max` entries (one per registered implementation) and sets *count. Under auto and
 * tune, measured_ms gives the tuned median time of each implementation for desc's shape class.
 * Returns MODATTN_EUNSUPPORTED (with every refusal in the message) if nothing can run desc. */
int modattn_explain(modattn_ctx *ctx, const modattn_attn_desc *desc, modattn_explain_entry *out,
                    size_t max, size_t *count);


/* ---- run */
/* Validates the call, picks an implementation by the policy, runs it (falling back on run-time
 * failure). On error the message names the tensor, the implementation or the refusals. */
int modattn_attention(modattn_ctx *ctx, const modattn_attn_call *call);
/* Run one named implementation, no policy, no fallback (conformance, benchmarks). */
int modattn_attention_with(modattn_ctx *ctx, size_t impl_index, const modattn_attn_call *call);

/* modattn_attention uses the context's own workspace and thread pool: one thread at a time.
 * Threads that run attention (or a model, modattn/model.h) at the same time each use a session. */

/* ---- sessions: one per worker thread
 * A session is a worker's own state for running calls while other workers share the context:
 * its thread pool, its workspaces (grown on demand, kept between calls) and its exec. What the
 * sessions of one context share is read-only (the registry, the policy: set them up before
 * creating sessions) or guarded by the context's mutex, held for a few instructions per call and
 * never while a kernel runs (the counters behind modattn__ctx_impl_stats, the tuning cache). A
 * session is used by one thread at a time; free every session before its context. */
typedef struct modattn_session modattn_session;
typedef struct modattn_session_options {
    int threads;        /* <= 0: one per online CPU */
    modattn_pool *pool; /* borrowed (must outlive the session), or NULL: its own of `threads` */
} modattn_session_options;
/* Ownership: free with modattn_session_free(). opt may be NULL (defaults). */
int modattn_session_create(modattn_ctx *ctx, const modattn_session_options *opt, modattn_session **out);
void modattn_session_free(modattn_session *s); /* NULL is fine */
/* modattn_attention, in the session: its workspace and threads, the context's policy. */
int modattn_session_attention(modattn_session *s, const modattn_attn_call *call);

/* ---- counters */
typedef struct modattn_impl_stats {
    uint64_t calls;      /* runs attempted */
    uint64_t failures;   /* runs that returned an error */
    uint64_t fallbacks;  /* times this one ran because an earlier choice failed */
    double total_ms;
    double median_ms;    /* median time of a successful call (from a uniform sample of 2048) */
    double flops;        /* summed over successful calls */
    char last_failure[200]; /* the reason of the last failed run ("" if none) */
} modattn_impl_stats;

/* The host services (the context's thread pool) as handed to implementations; also what the
 * searcher (modattn_searcher_search, modattn/search.h) takes to spread its scan over threads. */
const modattn_exec *modattn_ctx_exec(modattn_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
