/* backends/reference/reference.c — the REFERENCE attention implementation: the oracle.
 *
 * Plain portable C, one query row at a time, every product and sum accumulated in double.
 * Accepts f32 and f64 tensors; with f64 tensors it is the fp64 oracle the conformance suite
 * measures every other implementation against. Written for clarity, not speed: every feature of
 * the contract (windows, ALiBi, softcapping included), each key's visibility tested on its own.
 *
 * It depends only on modattn/backend/impl.h and libm, so the very same file also builds as a plugin
 * (-DMODATTN_REFERENCE_PLUGIN: exports modattn_plugin_entry, named "reference_plugin"). */
#include "modattn/backend/impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct ref_job {
    const modattn_attn_desc *d;
    const modattn_attn_call *c;
    double *ws; /* per thread: Sk scores + Dv accumulators */
    int64_t per_thread;
} ref_job;

static inline double load(const modattn_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int64_t off = i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2] + i3 * t->stride[3];
    if (t->dtype == MODATTN_DTYPE_F64) return ((const double *)t->data)[off];
    return (double)((const float *)t->data)[off];
}

static inline void store(const modattn_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v) {
    int64_t off = i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2] + i3 * t->stride[3];
    if (t->dtype == MODATTN_DTYPE_F64) ((double *)t->data)[off] = v;
    else ((float *)t->data)[off] = (float)v;
}

/* One query row: item = ((b * Hq) + h) * Sq + i. */
static void ref_row(void *arg, int64_t item, int thread) {
    const ref_job *job = arg;
    const modattn_attn_desc *d = job->d;
    const modattn_attn_call *c = job->c;
    int64_t i = item % d->Sq;
    int64_t h = (item / d->Sq) % d->Hq;
    int64_t b = item / (d->Sq * d->Hq);
    int64_t hk = h / (d->Hq / d->Hkv);
    double *s = job->ws + (int64_t)thread * job->per_thread;
    double *acc = s + d->Sk;

    int64_t L = c->kv_lens ? c->kv_lens[b] : d->Sk;
    int64_t lim = L; /* keys [0, lim) may be visible; each is tested by the rule below */
    const int64_t ip = i + L - d->Sq; /* the query's position, aligned to the bottom-right corner */
    double mx = -INFINITY;
    int64_t mb = d->has_mask ? (d->mask_b == 1 ? 0 : b) : 0;
    int64_t mh = d->has_mask ? (d->mask_h == 1 ? 0 : h) : 0;
    const double slope = d->has_alibi ? (double)c->alibi_slopes[h] : 0.0;
    for (int64_t j = 0; j < lim; j++) {
        /* the visibility rule of attention.h, written out key by key */
        bool visible = !(d->causal && j > ip);
        if (d->has_window && d->window_left >= 0 && j < ip - d->window_left) visible = false;
        if (d->has_window && d->window_right >= 0 && j > ip + d->window_right) visible = false;
        if (!visible) {
            s[j] = -INFINITY;
            continue;
        }
        double dot = 0.0;
        for (int64_t e = 0; e < d->D; e++) dot += load(&c->q, b, h, i, e) * load(&c->k, b, hk, j, e);
        double v = (double)d->scale * dot;
        if (d->softcap > 0.0f) v = (double)d->softcap * tanh(v / (double)d->softcap);
        if (d->has_alibi) v -= slope * fabs((double)(ip - j));
        if (d->has_mask) {
            double m = load(&c->mask, mb, mh, i, j);
            v = (m == -INFINITY) ? -INFINITY : v + m;
        }
        s[j] = v;
        if (v > mx) mx = v;
    }
    if (mx == -INFINITY) { /* no visible key: O = 0, LSE = -inf */
        for (int64_t e = 0; e < d->Dv; e++) store(&c->o, b, h, i, e, 0.0);
        if (d->has_lse) store(&c->lse, b, h, i, 0, -INFINITY);
        return;
    }
    double sum = 0.0;
    for (int64_t e = 0; e < d->Dv; e++) acc[e] = 0.0;
    for (int64_t j = 0; j < lim; j++) {
        if (s[j] == -INFINITY) continue;
        double p = exp(s[j] - mx);
        sum += p;
        for (int64_t e = 0; e < d->Dv; e++) acc[e] += p * load(&c->v, b, hk, j, e);
    }
    for (int64_t e = 0; e < d->Dv; e++) store(&c->o, b, h, i, e, acc[e] / sum);
    if (d->has_lse) store(&c->lse, b, h, i, 0, mx + log(sum));
}

/* Local names: the file must not call into the host library (it also builds as a plugin). */
static const char *dtype_text(modattn_dtype t) {
    static const char *names[] = {"f32", "f16", "bf16", "f64"};
    return (unsigned)t < MODATTN_DTYPE_COUNT ? names[t] : "unknown";
}

static bool ref_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx;
    if (d->device.kind != MODATTN_DEVICE_CPU) {
        snprintf(reason, len, "runs on CPU memory only (tensors are on device kind %d)", (int)d->device.kind);
        return false;
    }
    if (d->dtype != MODATTN_DTYPE_F32 && d->dtype != MODATTN_DTYPE_F64) {
        snprintf(reason, len, "supports f32 and f64 only, not %s", dtype_text(d->dtype));
        return false;
    }
    return true;
}

static size_t ref_workspace(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx;
    return (size_t)nthreads * (size_t)(d->Sk + d->Dv) * sizeof(double);
}

static int ref_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *ws,
                   size_t ws_bytes, const modattn_exec *exec, char *reason, size_t len) {
    (void)ctx;
    if (ws_bytes < ref_workspace(ctx, d, exec->nthreads)) {
        snprintf(reason, len, "workspace of %zu bytes is smaller than the %zu asked for", ws_bytes,
                 ref_workspace(ctx, d, exec->nthreads));
        return MODATTN_EINVAL;
    }
    ref_job job = {d, c, ws, d->Sk + d->Dv};
    int64_t rows = d->B * d->Hq * d->Sq;
    if (rows == 0) return 0;
    exec->parallel_for(exec, rows, ref_row, &job);
    return 0;
}

#ifndef MODATTN_REFERENCE_PLUGIN
#define REF_NAME "reference"
#define REF_DESC "portable C, one row at a time, fp64 accumulation: the oracle"
#else
#define REF_NAME "reference_plugin"
#define REF_DESC "the reference implementation built as a plugin (test)"
#endif

static const modattn_attn_impl ref_impl = {
    /* .api_version = */ MODATTN_IMPL_API_VERSION,
    /* .name = */ REF_NAME,
    /* .description = */ REF_DESC,
    /* .device = */ MODATTN_DEVICE_CPU,
    /* .priority = */ 0,
    /* .ctx = */ NULL,
    /* .init = */ NULL,
    /* .shutdown = */ NULL,
    /* .supports = */ ref_supports,
    /* .workspace_bytes = */ ref_workspace,
    /* .run = */ ref_run,
    /* .control = */ NULL,
};

#ifndef MODATTN_REFERENCE_PLUGIN
const modattn_attn_impl *modattn__backend_reference(void) { return &ref_impl; }
#else
__attribute__((visibility("default"))) const modattn_attn_impl *modattn_plugin_entry(void) { return &ref_impl; }
#endif
