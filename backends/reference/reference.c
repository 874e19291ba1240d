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

/* The offset of t[i0, i1, i2, 0]: the rows below step along the last axis from there. */
static inline int64_t row_off(const modattn_tensor *t, int64_t i0, int64_t i1, int64_t i2) {
    return i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2];
}

/* sum over e of q[e] * t[.., e] from the row at off: the products and the order of the sums are
 * load()'s element by element, with the dtype's branch and the index arithmetic out of the loop
 * (that was most of the oracle's time: it embeds whole golden sets in the model tests) */
static inline double dot_row(const double *q, const modattn_tensor *t, int64_t off, int64_t D) {
    const int64_t st = t->stride[3];
    double dot = 0.0;
    if (t->dtype == MODATTN_DTYPE_F64) {
        const double *r = (const double *)t->data + off;
        for (int64_t e = 0; e < D; e++) dot += q[e] * r[e * st];
    } else {
        const float *r = (const float *)t->data + off;
        for (int64_t e = 0; e < D; e++) dot += q[e] * (double)r[e * st];
    }
    return dot;
}

/* dot_row for four rows at once: each sum runs over e in order, as dot_row's (the same bits), the
 * four chains side by side (one at a time, the adds' latency bounded the oracle) */
static inline void dot_rows4(const double *q, const modattn_tensor *t, const int64_t off[4], int64_t D, double out[4]) {
    const int64_t st = t->stride[3];
    double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
    if (t->dtype == MODATTN_DTYPE_F64) {
        const double *r0 = (const double *)t->data + off[0], *r1 = (const double *)t->data + off[1];
        const double *r2 = (const double *)t->data + off[2], *r3 = (const double *)t->data + off[3];
        for (int64_t e = 0; e < D; e++) {
            d0 += q[e] * r0[e * st];
            d1 += q[e] * r1[e * st];
            d2 += q[e] * r2[e * st];
            d3 += q[e] * r3[e * st];
        }
    } else {
        const float *r0 = (const float *)t->data + off[0], *r1 = (const float *)t->data + off[1];
        const float *r2 = (const float *)t->data + off[2], *r3 = (const float *)t->data + off[3];
        for (int64_t e = 0; e < D; e++) {
            d0 += q[e] * (double)r0[e * st];
            d1 += q[e] * (double)r1[e * st];
            d2 += q[e] * (double)r2[e * st];
            d3 += q[e] * (double)r3[e * st];
        }
    }
    out[0] = d0, out[1] = d1, out[2] = d2, out[3] = d3;
}

/* the visibility rule of attention.h for key j of a query at position ip, written out */
static inline bool key_visible(const modattn_attn_desc *d, int64_t j, int64_t ip) {
    bool visible = !(d->causal && j > ip);
    if (d->has_window && d->window_left >= 0 && j < ip - d->window_left) visible = false;
    if (d->has_window && d->window_right >= 0 && j > ip + d->window_right) visible = false;
    return visible;
}

/* acc[e] += p * t[.., e] for the row at off */
static inline void axpy_row(double *acc, double p, const modattn_tensor *t, int64_t off, int64_t Dv) {
    const int64_t st = t->stride[3];
    if (t->dtype == MODATTN_DTYPE_F64) {
        const double *r = (const double *)t->data + off;
        for (int64_t e = 0; e < Dv; e++) acc[e] += p * r[e * st];
    } else {
        const float *r = (const float *)t->data + off;
        for (int64_t e = 0; e < Dv; e++) acc[e] += p * (double)r[e * st];
    }
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
    double *q = acc + d->Dv; /* the query row, in double */
    for (int64_t e = 0; e < d->D; e++) q[e] = load(&c->q, b, h, i, e);

    int64_t L = c->kv_lens ? c->kv_lens[b] : d->Sk;
    int64_t lim = L; /* keys [0, lim) may be visible; each is tested by the rule below */
    const int64_t ip = i + L - d->Sq; /* the query's position, aligned to the bottom-right corner */
    double mx = -INFINITY;
    int64_t mb = d->has_mask ? (d->mask_b == 1 ? 0 : b) : 0;
    int64_t mh = d->has_mask ? (d->mask_h == 1 ? 0 : h) : 0;
    const double slope = d->has_alibi ? (double)c->alibi_slopes[h] : 0.0;
    /* the dot products of the visible keys into s, four at a time */
    int64_t vis[4], off[4];
    int nv = 0;
    for (int64_t j = 0; j < lim; j++) {
        if (!key_visible(d, j, ip)) continue;
        vis[nv] = j, off[nv] = row_off(&c->k, b, hk, j);
        if (++nv == 4) {
            double dots[4];
            dot_rows4(q, &c->k, off, d->D, dots);
            for (int t = 0; t < 4; t++) s[vis[t]] = dots[t];
            nv = 0;
        }
    }
    for (int t = 0; t < nv; t++) s[vis[t]] = dot_row(q, &c->k, off[t], d->D);
    /* then each key's score, key by key */
    for (int64_t j = 0; j < lim; j++) {
        if (!key_visible(d, j, ip)) {
            s[j] = -INFINITY;
            continue;
        }
        double v = (double)d->scale * s[j];
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
        axpy_row(acc, p, &c->v, row_off(&c->v, b, hk, j), d->Dv);
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
    return (size_t)nthreads * (size_t)(d->Sk + d->Dv + d->D) * sizeof(double);
}

static int ref_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *ws,
                   size_t ws_bytes, const modattn_exec *exec, char *reason, size_t len) {
    (void)ctx;
    if (ws_bytes < ref_workspace(ctx, d, exec->nthreads)) {
        snprintf(reason, len, "workspace of %zu bytes is smaller than the %zu asked for", ws_bytes,
                 ref_workspace(ctx, d, exec->nthreads));
        return MODATTN_EINVAL;
    }
    ref_job job = {d, c, ws, d->Sk + d->Dv + d->D};
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
