/* attn/dispatch.c — the dispatcher: orders the implementations by the policy, asks each whether
 * it supports the call, runs the first capable one, falls back to the next on run-time failure,
 * and explains every choice and refusal. Above tune.c (which it asks for remembered winners)
 * and run.c (which runs one implementation once). */
#include "attn/internal.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *modattn_verdict_name(modattn_verdict v) {
    switch (v) {
    case MODATTN_VERDICT_CHOSEN: return "chosen";
    case MODATTN_VERDICT_CAPABLE: return "capable";
    case MODATTN_VERDICT_REFUSED: return "refused";
    case MODATTN_VERDICT_UNAVAILABLE: return "unavailable";
    case MODATTN_VERDICT_EXCLUDED: return "excluded";
    default: return "unknown";
    }
}

static void known_names(const modattn_ctx *ctx, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ctx->n && used < len; i++) {
        int k = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", ctx->entries[i].impl->name);
        if (k > 0) used += (size_t)k;
    }
}

int modattn_ctx_set_policy(modattn_ctx *ctx, const char *policy) {
    if (!policy || !*policy) policy = "auto";
    long order[MODATTN__MAX_POLICY];
    size_t norder = 0;
    bool is_tune = strcmp(policy, "tune") == 0;
    bool is_auto = is_tune || strcmp(policy, "auto") == 0;
    if (!is_auto) {
        const char *p = policy;
        while (*p) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            char name[64];
            if (len == 0 || len >= sizeof name)
                return modattn__error(MODATTN_EINVAL, "attention policy '%s': empty or over-long name", policy);
            memcpy(name, p, len);
            name[len] = '\0';
            long idx = modattn_ctx_find(ctx, name);
            if (idx < 0) {
                char known[512], refused[600] = "";
                known_names(ctx, known, sizeof known);
                /* a plugin refused at load is named, with why: it is the likely one */
                for (size_t k = 0, used = 0; k < modattn_ctx_plugin_error_count(ctx) && used < sizeof refused; k++) {
                    int w = snprintf(refused + used, sizeof refused - used, "%s%s", k ? "; " : "; plugins refused at load: ",
                                     modattn_ctx_plugin_error(ctx, k));
                    if (w > 0) used += (size_t)w;
                }
                return modattn__error(MODATTN_EINVAL,
                                     "attention policy '%s': no implementation named '%s' (known: auto, tune, %s)%s",
                                     policy, name, known, refused);
            }
            for (size_t k = 0; k < norder; k++)
                if (order[k] == idx)
                    return modattn__error(MODATTN_EINVAL, "attention policy '%s' names '%s' twice", policy, name);
            if (norder == MODATTN__MAX_POLICY)
                return modattn__error(MODATTN_EINVAL, "attention policy '%s' names more than %d implementations",
                                     policy, MODATTN__MAX_POLICY);
            order[norder++] = idx;
            if (end && end[1] == '\0')
                return modattn__error(MODATTN_EINVAL, "attention policy '%s': empty name after the last comma", policy);
            p = end ? end + 1 : p + len;
        }
    }
    char *copy = modattn__strdup(policy, MODATTN_MEM_OTHER);
    if (!copy) return modattn__mem_last_status();
    modattn_free(ctx->policy);
    ctx->policy = copy;
    ctx->policy_auto = is_auto;
    ctx->policy_tune = is_tune;
    memcpy(ctx->order, order, norder * sizeof *order);
    ctx->norder = norder;
    return 0;
}

const char *modattn_ctx_policy(const modattn_ctx *ctx) { return ctx->policy; }

/* The order in which implementations are considered for `d` (before asking supports()):
 * explicit lists as given; auto and tune by priority, with a remembered tuned winner first. */
static size_t candidate_order(modattn_ctx *ctx, int nthreads, const modattn_attn_desc *d, long *out) {
    size_t n = 0;
    if (!ctx->policy_auto) {
        for (size_t k = 0; k < ctx->norder; k++) out[n++] = ctx->order[k];
        return n;
    }
    for (size_t i = 0; i < ctx->n; i++)
        if (ctx->entries[i].impl->device == d->device.kind) out[n++] = (long)i;
    /* stable insertion sort by priority, highest first */
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && ctx->entries[out[b]].impl->priority > ctx->entries[out[b - 1]].impl->priority; b--) {
            long t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    modattn__tune_entry te;
    if (modattn__tune_lookup(ctx, nthreads, d, &te))
        for (size_t k = 1; k < n; k++)
            if (strcmp(ctx->entries[out[k]].impl->name, te.winner) == 0) {
                long w = out[k];
                memmove(out + 1, out, k * sizeof *out);
                out[0] = w;
                break;
            }
    return n;
}

int modattn_explain(modattn_ctx *ctx, const modattn_attn_desc *d, modattn_explain_entry *out, size_t max,
                    size_t *count) {
    long order[256];
    size_t n = candidate_order(ctx, ctx->exec.nthreads, d, order);
    if (n > 256) n = 256;
    size_t filled = ctx->n < max ? ctx->n : max;
    for (size_t i = 0; i < filled; i++) {
        out[i].name = ctx->entries[i].impl->name;
        out[i].verdict = ctx->policy_auto ? MODATTN_VERDICT_REFUSED : MODATTN_VERDICT_EXCLUDED;
        out[i].rank = -1;
        out[i].measured_ms = -1;
        if (ctx->policy_auto) {
            char where[32];
            modattn_device_format(d->device, where, sizeof where);
            snprintf(out[i].reason, sizeof out[i].reason, "runs on %s; the tensors are on %s",
                     modattn_device_kind_name(ctx->entries[i].impl->device), where);
        }
        else
            snprintf(out[i].reason, sizeof out[i].reason, "not named by the policy '%s'", ctx->policy);
    }
    modattn__tune_entry tuned;
    const modattn__tune_entry *te =
        ctx->policy_auto && modattn__tune_lookup(ctx, ctx->exec.nthreads, d, &tuned) ? &tuned : NULL;
    if (te)
        for (size_t i = 0; i < filled; i++) out[i].measured_ms = modattn__tune_time(te, out[i].name);
    int rank = 0;
    char refusals[1024] = "";
    size_t used = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = (size_t)order[k];
        char reason[256];
        modattn_verdict v;
        bool ok = modattn__capable(ctx, i, d, reason, sizeof reason, &v);
        if (!ok && used < sizeof refusals) {
            int w = snprintf(refusals + used, sizeof refusals - used, "%s%s: %s", used ? "; " : "",
                             ctx->entries[i].impl->name, reason);
            if (w > 0) used += (size_t)w;
        }
        if (i >= filled) {
            if (ok) rank++;
            continue;
        }
        if (ok) {
            out[i].verdict = rank == 0 ? MODATTN_VERDICT_CHOSEN : MODATTN_VERDICT_CAPABLE;
            out[i].rank = rank++;
            bool won = te && strcmp(te->winner, out[i].name) == 0;
            snprintf(out[i].reason, sizeof out[i].reason, "%s",
                     out[i].rank == 0 ? (won ? "fastest when tuned on this shape class" : "first capable in the policy's order")
                     : out[i].measured_ms >= 0 ? "capable; slower when tuned; tried if the ones before it fail"
                                               : "capable; tried if the ones before it fail");
        } else {
            out[i].verdict = v;
            snprintf(out[i].reason, sizeof out[i].reason, "%s", reason);
        }
    }
    if (count) *count = filled;
    if (rank == 0) {
        char shape[200];
        modattn_attn_desc_format(d, shape, sizeof shape);
        return modattn__error(MODATTN_EUNSUPPORTED, "no attention implementation can run %s under policy '%s'%s%s",
                             shape, ctx->policy, used ? ": " : "", refusals);
    }
    return 0;
}

static bool nothing_to_do(const modattn_attn_desc *d) { return d->B == 0 || d->Hq == 0 || d->Sq == 0; }

int modattn_attention(modattn_ctx *ctx, const modattn_attn_call *call) {
    if (!ctx) return modattn__error(MODATTN_EINVAL, "attention: context is NULL");
    modattn__runner r = {&ctx->ws, &ctx->exec};
    return modattn__attention(ctx, &r, call);
}

int modattn__attention(modattn_ctx *ctx, const modattn__runner *r, const modattn_attn_call *call) {
    modattn_attn_desc d;
    int st = modattn_attn_describe(call, &d);
    if (st) return st;
    if (nothing_to_do(&d)) return 0;
    long order[256];
    size_t n = candidate_order(ctx, r->exec->nthreads, &d, order);
    if (n > 256) n = 256;
    modattn__tune_entry known;
    if (ctx->policy_tune && !modattn__tune_lookup(ctx, r->exec->nthreads, &d, &known)) {
        st = modattn__tune_measure(ctx, r, &d, call, order, n);
        if (st != MODATTN_EUNSUPPORTED) return st;
        /* nothing capable: fall through for the message that lists the refusals */
    }
    char errors[1024] = "";
    size_t used = 0;
    int tried = 0, last = MODATTN_EUNSUPPORTED;
    for (size_t k = 0; k < n && k < 256; k++) {
        size_t i = (size_t)order[k];
        char reason[256];
        modattn_verdict v;
        if (!modattn__capable(ctx, i, &d, reason, sizeof reason, &v)) {
            if (!ctx->policy_auto && ctx->norder == 1) {
                char shape[200];
                modattn_attn_desc_format(&d, shape, sizeof shape);
                return modattn__error(MODATTN_EUNSUPPORTED, "implementation '%s' cannot run %s: %s",
                                     ctx->entries[i].impl->name, shape, reason);
            }
            continue;
        }
        if (tried > 0) {
            pthread_mutex_lock(&ctx->mu);
            ctx->entries[i].stats.fallbacks++;
            ctx->fallbacks++;
            pthread_mutex_unlock(&ctx->mu);
        }
        tried++;
        st = modattn__run_entry(ctx, r, i, &d, call);
        if (st == 0) return 0;
        last = st;
        if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) return st; /* memory: the next one won't fare better */
        if (used < sizeof errors) {
            int w = snprintf(errors + used, sizeof errors - used, "%s%s", used ? "; " : "", modattn_last_error());
            if (w > 0) used += (size_t)w;
        }
    }
    if (tried == 0) {
        modattn_explain_entry tmp[1];
        size_t cnt;
        return modattn_explain(ctx, &d, tmp, 0, &cnt); /* builds the message listing every refusal */
    }
    return modattn__error(last, "every capable attention implementation failed (%d tried): %s", tried, errors);
}

int modattn_attention_with(modattn_ctx *ctx, size_t i, const modattn_attn_call *call) {
    if (!ctx) return modattn__error(MODATTN_EINVAL, "attention: context is NULL");
    if (i >= ctx->n) return modattn__error(MODATTN_ERANGE, "implementation index %zu out of range", i);
    modattn_attn_desc d;
    int st = modattn_attn_describe(call, &d);
    if (st) return st;
    if (nothing_to_do(&d)) return 0;
    char reason[256];
    modattn_verdict v;
    if (!modattn__capable(ctx, i, &d, reason, sizeof reason, &v))
        return modattn__error(MODATTN_EUNSUPPORTED, "implementation '%s' cannot run this call: %s",
                             ctx->entries[i].impl->name, reason);
    modattn__runner r = {&ctx->ws, &ctx->exec};
    return modattn__run_entry(ctx, &r, i, &d, call);
}
