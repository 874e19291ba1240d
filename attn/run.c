/* attn/run.c — one implementation, once: can it run this call (capable), and running it with
 * its workspace (host memory, or a buffer on its device), its counters and its trace span. Used
 * by dispatch.c and tune.c; calls only the registry's data (attn/internal.h). */
#include "attn/internal.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "device/internal_device.h"

#include <stdio.h>
#include <string.h>

bool modattn__impl_sees(const modattn_attn_impl *impl, const modattn_attn_desc *d, char *reason, size_t len) {
    if (impl->api_version >= 3u || !(d->has_window || d->has_alibi || d->softcap > 0.0f)) return true;
    snprintf(reason, len, "built against api_version %u, which predates %s: rebuild it against this modattn/backend/impl.h",
             impl->api_version, d->has_window ? "sliding windows" : d->has_alibi ? "ALiBi" : "softcapping");
    return false;
}

/* Can entry i run d? false with the reason in words. */
bool modattn__capable(const modattn_ctx *ctx, size_t i, const modattn_attn_desc *d, char *reason, size_t len,
                    modattn_verdict *verdict) {
    modattn__entry *e = &ctx->entries[i];
    if (e->impl->device == d->device.kind) modattn__entry_ready(e); /* tensors on its device: start it */
    if (!e->available) {
        snprintf(reason, len, "unavailable on this machine: %s", e->reason);
        *verdict = MODATTN_VERDICT_UNAVAILABLE;
        return false;
    }
    if (e->impl->device != d->device.kind) {
        char where[32];
        modattn_device_format(d->device, where, sizeof where);
        snprintf(reason, len, "runs on %s tensors; the tensors are on %s", modattn_device_kind_name(e->impl->device), where);
        *verdict = MODATTN_VERDICT_REFUSED;
        return false;
    }
    if (!modattn__impl_sees(e->impl, d, reason, len)) {
        *verdict = MODATTN_VERDICT_REFUSED;
        return false;
    }
    reason[0] = '\0';
    if (!e->impl->supports(e->impl->ctx, d, reason, len)) {
        if (!reason[0]) snprintf(reason, len, "refused without a reason");
        *verdict = MODATTN_VERDICT_REFUSED;
        return false;
    }
    return true;
}

static int ensure_workspace(modattn__ws *w, size_t bytes) {
    if (bytes <= w->host_bytes) return 0;
    modattn_free(w->host);
    w->host = NULL;
    w->host_bytes = 0;
    w->host = modattn__malloc(bytes, MODATTN_MEM_WORKSPACE);
    if (!w->host) return modattn__error_prefix(modattn__mem_last_status(), "attention workspace");
    w->host_bytes = bytes;
    return 0;
}

/* A workspace on the tensors' device (not the CPU): one buffer per device, grown on demand. */
static int ensure_device_workspace(modattn__ws *w, modattn_device id, size_t bytes, modattn_buffer **out) {
    *out = NULL;
    if (bytes == 0) return 0;
    size_t slot = w->ndev;
    for (size_t i = 0; i < w->ndev; i++)
        if (w->dev[i]->device.kind == id.kind && w->dev[i]->device.index == id.index) slot = i;
    if (slot < w->ndev && w->dev[slot]->bytes >= bytes) {
        *out = w->dev[slot];
        return 0;
    }
    const modattn_device_iface *dev = modattn_device_find(id);
    if (!dev) {
        char name[32];
        modattn_device_format(id, name, sizeof name);
        return modattn__error(MODATTN_ENOTFOUND, "attention workspace: no device %s in this process", name);
    }
    if (slot == w->ndev && slot == sizeof w->dev / sizeof *w->dev)
        return modattn__error(MODATTN_ERANGE, "attention workspace: more than %zu devices in one context", slot);
    if (slot < w->ndev) { /* grow: free first, so the device need not hold both */
        modattn__buffer_free(w->dev[slot]);
        w->dev[slot] = w->dev[--w->ndev];
        slot = w->ndev;
    }
    modattn_buffer *b;
    int st = modattn__buffer_alloc(dev, bytes, MODATTN_MEM_WORKSPACE, "attention workspace", &b);
    if (st) return st;
    w->dev[w->ndev++] = b;
    *out = b;
    return 0;
}

void modattn__ws_free(modattn__ws *w) {
    modattn_free(w->host);
    for (size_t i = 0; i < w->ndev; i++) modattn__buffer_free(w->dev[i]);
    memset(w, 0, sizeof *w);
}

static double call_bytes(const modattn_attn_desc *d) {
    double es = (double)modattn_dtype_size(d->dtype);
    return es * ((double)d->B * d->Hq * d->Sq * (d->D + d->Dv) + (double)d->B * d->Hkv * d->Sk * (d->D + d->Dv));
}

/* Run entry i once; on failure the message names the implementation. */
int modattn__run_entry(modattn_ctx *ctx, const modattn__runner *r, size_t i, const modattn_attn_desc *d,
                       const modattn_attn_call *c) {
    modattn__entry *e = &ctx->entries[i];
    const modattn_attn_impl *impl = e->impl;
    size_t ws = impl->workspace_bytes ? impl->workspace_bytes(impl->ctx, d, r->exec->nthreads) : 0;
    void *wsp;
    int st;
    if (impl->device == MODATTN_DEVICE_CPU) {
        st = ensure_workspace(r->ws, ws);
        wsp = r->ws->host;
    } else {
        modattn_buffer *b = NULL;
        st = ensure_device_workspace(r->ws, d->device, ws, &b);
        wsp = b;
    }
    if (st) return st;
    char reason[256] = "";
    uint64_t t0 = modattn__now_ns();
    uint64_t tr = modattn__trace_begin();
    pthread_mutex_lock(&ctx->mu);
    e->stats.calls++;
    pthread_mutex_unlock(&ctx->mu);
    st = impl->run(impl->ctx, d, c, wsp, ws, r->exec, reason, sizeof reason);
    uint64_t t1 = modattn__now_ns();
    if (tr) { /* a failed run is a span of its own name: it never looks like a success */
        char shape[64];
        snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lldx%lldx%lld%s", (long long)d->B, (long long)d->Hq,
                 (long long)d->Hkv, (long long)d->Sq, (long long)d->Sk, (long long)d->D, d->causal ? "c" : "");
        modattn__trace_end(tr, st ? "attention.failed" : "attention", impl->name, shape, call_bytes(d),
                          st ? 0 : modattn_attn_desc_flops(d));
    }
    if (st != 0) {
        const char *why = reason[0] ? reason : modattn_strerror(st);
        pthread_mutex_lock(&ctx->mu);
        const bool first = e->stats.failures++ == 0;
        snprintf(e->stats.last_failure, sizeof e->stats.last_failure, "%s", why);
        pthread_mutex_unlock(&ctx->mu);
        if (first) /* said once per implementation, then counted (--stats: failures, fallbacks, the reason) */
            fprintf(stderr, "modattn: attention implementation '%s' failed: %s (further failures are counted in "
                    "--stats; the next capable implementation runs instead)\n", impl->name, why);
        return modattn__error(st < 0 ? st : MODATTN_ERUNTIME, "implementation '%s' failed: %s", impl->name, why);
    }
    double ms = (double)(t1 - t0) / 1e6;
    pthread_mutex_lock(&ctx->mu);
    uint64_t done = ++e->done; /* this call included (calls still running elsewhere are not) */
    if (done <= MODATTN__SAMPLES) e->samples[done - 1] = (float)ms;
    else { /* reservoir sampling keeps a uniform sample for the median */
        e->rng = e->rng * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t j = (e->rng >> 17) % done;
        if (j < MODATTN__SAMPLES) e->samples[j] = (float)ms;
    }
    e->stats.total_ms += ms;
    e->stats.flops += modattn_attn_desc_flops(d);
    pthread_mutex_unlock(&ctx->mu);
    return 0;
}

