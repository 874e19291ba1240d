/* backends/xla/xla_attn.c — attention alone through the contract on the xla device: the call's
 * views (the device's buffers are host arrays, see xla_device.c) are gathered into contiguous
 * arrays in the workspace, uploaded, run by one compiled program per shape (kept in memory, the
 * last XLA_ATTN_CACHE of them), and the result scattered into o's (and lse's) views. Everything the
 * contract defines runs: GQA, D != Dv, causal, kv_lens, an additive mask with broadcast, lse,
 * strided views, sliding windows, ALiBi (the slopes an argument, so one program serves any slopes)
 * and softcapping; fp32 only. Each call pays an upload and a launch: this is the contract's proof
 * on XLA and the reference for the encoder's program, not a fast path. */
#define _GNU_SOURCE
#include "backends/xla/xla.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/backend/impl.h"
#include "core/internal_core.h"
#include "device/internal_device.h"

#define XLA_ATTN_CACHE 64

typedef struct attn_entry {
    xla_attn_shape s;
    xla_exe *e;
} attn_entry;

/* each device's programs, read and written under that device's lock (modattn__xla_lock) */
static attn_entry g_cache[XLA_MAX_DEVICES][XLA_ATTN_CACHE];
static int g_ncache[XLA_MAX_DEVICES];

static void attn_drop(int device, xla_plugin *p) {
    if (device < 0 || device >= XLA_MAX_DEVICES) return;
    for (int i = 0; i < g_ncache[device]; i++) xla_exe_free(p, g_cache[device][i].e);
    g_ncache[device] = 0;
}

static bool xla_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx;
    if (d->device.index < 0 || d->device.index >= XLA_MAX_DEVICES) {
        snprintf(reason, len, "no xla device %d", d->device.index);
        return false;
    }
    if (d->dtype != MODATTN_DTYPE_F32) {
        snprintf(reason, len, "dtype %s: the xla implementation runs fp32 only", modattn_dtype_name(d->dtype));
        return false;
    }
    if (d->device.kind != MODATTN_DEVICE_XLA) {
        snprintf(reason, len, "its tensors must be on an xla device");
        return false;
    }
    if (d->Hkv < 1 || d->Hq % d->Hkv) {
        snprintf(reason, len, "Hq %lld is not a multiple of Hkv %lld", (long long)d->Hq, (long long)d->Hkv);
        return false;
    }
    return true;
}

static size_t elems(const modattn_attn_desc *d, int which) {
    switch (which) {
    case 0: return (size_t)(d->B * d->Hq * d->Sq * d->D);
    case 1: return (size_t)(d->B * d->Hkv * d->Sk * d->D);
    case 2: return (size_t)(d->B * d->Hkv * d->Sk * d->Dv);
    case 3: return (size_t)(d->B * d->Hq * d->Sq * d->Dv);
    case 4: return d->has_mask ? (size_t)(d->mask_b * d->mask_h * d->Sq * d->Sk) : 0;
    case 5: return d->has_lse ? (size_t)(d->B * d->Hq * d->Sq) : 0;
    default: return (size_t)d->B; /* kv_lens, as int32 */
    }
}

static size_t xla_workspace(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx, (void)nthreads;
    size_t n = 0;
    for (int i = 0; i < 7; i++) n += (elems(d, i) + 16) * 4;
    return n;
}

/* the view's element (i0, i1, i2, i3) in the device's host array */
static float *at(const modattn_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    char *base = (char *)t->buffer->handle + t->offset;
    return (float *)(void *)base + i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2] + i3 * t->stride[3];
}

static void gather(const modattn_tensor *t, float *dst) {
    size_t o = 0;
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                for (int64_t e = 0; e < t->shape[3]; e++) dst[o++] = *at(t, a, b, c, e);
}

static void scatter(const modattn_tensor *t, const float *src) {
    size_t o = 0;
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                for (int64_t e = 0; e < t->shape[3]; e++) *at(t, a, b, c, e) = src[o++];
}

static bool same_shape(const xla_attn_shape *a, const xla_attn_shape *b) {
    return a->B == b->B && a->Hq == b->Hq && a->Hkv == b->Hkv && a->Sq == b->Sq && a->Sk == b->Sk && a->D == b->D &&
           a->Dv == b->Dv && a->scale == b->scale && a->causal == b->causal && a->has_mask == b->has_mask &&
           a->has_lse == b->has_lse && a->mask_b == b->mask_b && a->mask_h == b->mask_h && a->wl == b->wl &&
           a->wr == b->wr && a->softcap == b->softcap && a->has_alibi == b->has_alibi;
}

static int program(xla_plugin *p, int device, const xla_attn_shape *s, xla_exe **out, char *reason, size_t len) {
    attn_entry *c = g_cache[device];
    for (int i = 0; i < g_ncache[device]; i++)
        if (same_shape(&c[i].s, s)) return *out = c[i].e, 0;
    xla_text t;
    int st = xla_hlo_attention(s, &t);
    if (st) {
        snprintf(reason, len, "out of memory writing the program");
        return st;
    }
    uint64_t t0 = modattn__trace_begin();
    st = xla_compile(p, t.s, t.n, out, reason, len);
    modattn__trace_end(t0, "xla.compile", "xla", "attention", 0, 0);
    xla_text_free(&t);
    if (st) return st;
    if (g_ncache[device] == XLA_ATTN_CACHE) { /* the oldest goes */
        xla_exe_free(p, c[0].e);
        memmove(&c[0], &c[1], sizeof c[0] * (XLA_ATTN_CACHE - 1));
        g_ncache[device]--;
    }
    c[g_ncache[device]++] = (attn_entry){*s, *out};
    return 0;
}

static int xla_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *workspace, size_t wbytes,
                   const modattn_exec *exec, char *reason, size_t len) {
    (void)ctx, (void)exec;
    if (d->B == 0 || d->Hq == 0 || d->Sq == 0) return 0;
    if (d->Sk == 0) { /* every row sees no key: o = 0, lse = -inf */
        float *z = calloc(elems(d, 3) ? elems(d, 3) : 1, sizeof *z);
        if (!z) {
            snprintf(reason, len, "out of memory");
            return MODATTN_ENOMEM;
        }
        scatter(&c->o, z);
        if (d->has_lse) {
            for (size_t i = 0; i < elems(d, 5); i++) z[i] = -INFINITY;
            scatter(&c->lse, z);
        }
        free(z);
        return 0;
    }
    if (!workspace || wbytes < xla_workspace(NULL, d, 1)) {
        snprintf(reason, len, "workspace of %zu bytes is smaller than the %zu asked for", wbytes, xla_workspace(NULL, d, 1));
        return MODATTN_EINVAL;
    }
    float *ws = (float *)((modattn_buffer *)workspace)->handle, *part[7];
    for (int i = 0; i < 7; i++) part[i] = ws, ws += elems(d, i) + 16;
    gather(&c->q, part[0]), gather(&c->k, part[1]), gather(&c->v, part[2]);
    if (d->has_mask) gather(&c->mask, part[4]);
    int32_t *lens = (int32_t *)(void *)part[6];
    for (int64_t b = 0; b < d->B; b++) lens[b] = c->kv_lens ? c->kv_lens[b] : (int32_t)d->Sk;
    const xla_attn_shape s = {d->B, d->Hq, d->Hkv, d->Sq, d->Sk, d->D, d->Dv, d->scale, d->causal,
                              d->has_mask, d->has_lse, d->has_mask ? d->mask_b : 0, d->has_mask ? d->mask_h : 0,
                              d->window_left, d->window_right, (double)d->softcap, d->has_alibi};
    xla_plugin *p = modattn__xla_lock(d->device.index, reason, len);
    if (p) modattn__xla_on_close(attn_drop); /* this device's programs go before its plugin does */
    if (!p) return MODATTN_EDEVICE;
    xla_exe *e = NULL;
    xla_buf *in[6] = {NULL}, *out[2] = {NULL};
    size_t nin = 4;
    int st = program(p, d->device.index, &s, &e, reason, len);
    const int64_t dq[4] = {d->B, d->Hq, d->Sq, d->D}, dk[4] = {d->B, d->Hkv, d->Sk, d->D},
                  dv[4] = {d->B, d->Hkv, d->Sk, d->Dv}, dm[4] = {s.mask_b, s.mask_h, d->Sq, d->Sk}, dl[1] = {d->B},
                  dh[1] = {d->Hq};
    uint64_t t0 = modattn__trace_begin();
    if (!st) st = xla_buf_upload(p, part[0], XLA_F32, dq, 4, &in[0], reason, len);
    if (!st) st = xla_buf_upload(p, part[1], XLA_F32, dk, 4, &in[1], reason, len);
    if (!st) st = xla_buf_upload(p, part[2], XLA_F32, dv, 4, &in[2], reason, len);
    if (!st) st = xla_buf_upload(p, lens, XLA_I32, dl, 1, &in[3], reason, len);
    if (!st && d->has_mask) st = xla_buf_upload(p, part[4], XLA_F32, dm, 4, &in[nin++], reason, len);
    if (!st && d->has_alibi) st = xla_buf_upload(p, c->alibi_slopes, XLA_F32, dh, 1, &in[nin++], reason, len);
    modattn__trace_end(t0, "xla.upload", "xla", "attention", 0, 0);
    if (!st) {
        t0 = modattn__trace_begin();
        st = xla_execute(p, e, in, nin, out, d->has_lse ? 2 : 1, reason, len);
        modattn__trace_end(t0, "xla.execute", "xla", "attention", 0, modattn_attn_desc_flops(d));
    }
    if (!st) st = xla_buf_download(p, out[0], part[3], elems(d, 3) * 4, reason, len);
    if (!st && d->has_lse) st = xla_buf_download(p, out[1], part[5], elems(d, 5) * 4, reason, len);
    for (int i = 0; i < 6; i++) xla_buf_free(p, in[i]);
    for (int i = 0; i < 2; i++) xla_buf_free(p, out[i]);
    modattn__xla_unlock(d->device.index);
    if (st) return st;
    scatter(&c->o, part[3]);
    if (d->has_lse) scatter(&c->lse, part[5]);
    return 0;
}

static int xla_init(void *ctx, char *reason, size_t len) {
    (void)ctx;
    modattn__devices_init();
    for (int i = 0; i < modattn_device_count(); i++)
        if (modattn_device_get(i)->id.kind == MODATTN_DEVICE_XLA) return 0;
    snprintf(reason, len, "no xla device: %s", modattn_device_absent_reasons());
    return MODATTN_EUNSUPPORTED;
}

static const modattn_attn_impl k_impl = {
    /* .api_version     = */ MODATTN_IMPL_API_VERSION,
    /* .name            = */ "xla",
    /* .description     = */ "attention as one XLA program per shape through a PJRT plugin (CPU, TPU or GPU)",
    /* .device          = */ MODATTN_DEVICE_XLA,
    /* .priority        = */ 10,
    /* .ctx             = */ NULL,
    /* .init            = */ xla_init,
    /* .shutdown        = */ NULL,
    /* .supports        = */ xla_supports,
    /* .workspace_bytes = */ xla_workspace,
    /* .run             = */ xla_run,
    /* .control         = */ NULL,
};

const modattn_attn_impl *modattn__backend_xla(void) { return &k_impl; }
