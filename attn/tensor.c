/* attn/tensor.c — validation of an attention call against the contract in
 * include/modattn/attention.h. Every check names the tensor and the dimension at fault. (The
 * tensor, dtype and device-kind helpers themselves are core's: core/types.c.) */
#include "modattn/attention.h"
#include "modattn/core.h"
#include "core/internal_status.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int64_t numel(const modattn_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < 4; i++) {
        if (__builtin_mul_overflow(n, t->shape[i], &n)) return -1;
    }
    return n;
}

/* Largest element index the view reaches (-1 for an empty view); -2 on overflow. */
static int64_t max_index(const modattn_tensor *t) {
    int64_t m = 0;
    for (int i = 0; i < 4; i++) {
        if (t->shape[i] == 0) return -1;
        int64_t term;
        if (__builtin_mul_overflow(t->shape[i] - 1, t->stride[i], &term)) return -2;
        if (__builtin_add_overflow(m, term, &m)) return -2;
    }
    return m;
}

static int check_view(const char *name, const modattn_tensor *t, const int64_t want[4],
                      const char *const dims[4], bool optional_broadcast01) {
    for (int i = 0; i < 4; i++) {
        if (t->shape[i] < 0)
            return modattn__error(MODATTN_EINVAL, "%s: shape[%d] (%s) is negative (%lld)", name, i, dims[i],
                                 (long long)t->shape[i]);
        if (t->stride[i] < 0)
            return modattn__error(MODATTN_EINVAL, "%s: stride[%d] is negative (%lld); strides must be >= 0",
                                 name, i, (long long)t->stride[i]);
    }
    for (int i = 0; i < 4; i++) {
        if (want[i] < 0) continue;
        bool ok = t->shape[i] == want[i] || (optional_broadcast01 && i < 2 && t->shape[i] == 1);
        if (!ok)
            return modattn__error(MODATTN_EINVAL, "%s: shape[%d] (%s) is %lld, expected %lld%s", name, i,
                                 dims[i], (long long)t->shape[i], (long long)want[i],
                                 optional_broadcast01 && i < 2 ? " or 1" : "");
    }
    if ((unsigned)t->dtype >= MODATTN_DTYPE_COUNT)
        return modattn__error(MODATTN_EINVAL, "%s: unknown dtype %d", name, (int)t->dtype);
    if ((unsigned)t->device.kind >= MODATTN_DEVICE_KIND_COUNT)
        return modattn__error(MODATTN_EINVAL, "%s: unknown device kind %d", name, (int)t->device.kind);
    int64_t n = numel(t);
    if (n < 0) return modattn__error(MODATTN_EINVAL, "%s: element count overflows", name);
    if (n == 0) return 0;
    if (!modattn_tensor_present(t)) return modattn__error(MODATTN_EINVAL, "%s: data is NULL", name);
    int64_t m = max_index(t);
    if (m == -2) return modattn__error(MODATTN_EINVAL, "%s: strides overflow the address range", name);
    size_t es = modattn_dtype_size(t->dtype);
    if ((uint64_t)m + 1 > (uint64_t)INT64_MAX / es)
        return modattn__error(MODATTN_EINVAL, "%s: byte size overflows", name);
    if (t->buffer) {
        const modattn_buffer *b = t->buffer;
        if (b->device.kind != t->device.kind || b->device.index != t->device.index)
            return modattn__error(MODATTN_EINVAL, "%s: the view says %s:%d but its buffer is on %s:%d", name,
                                 modattn_device_kind_name(t->device.kind), t->device.index,
                                 modattn_device_kind_name(b->device.kind), b->device.index);
        if (t->offset < 0 || (uint64_t)t->offset % es != 0)
            return modattn__error(MODATTN_EINVAL, "%s: offset %lld bytes is negative or not a multiple of the %zu-byte element",
                                 name, (long long)t->offset, es);
        uint64_t end = (uint64_t)t->offset + ((uint64_t)m + 1) * es;
        if (end > b->bytes)
            return modattn__error(MODATTN_EINVAL,
                                 "%s: strides reach byte %llu of a %zu-byte buffer (offset %lld, shape "
                                 "[%lld,%lld,%lld,%lld], strides [%lld,%lld,%lld,%lld])",
                                 name, (unsigned long long)end, b->bytes, (long long)t->offset, (long long)t->shape[0],
                                 (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3],
                                 (long long)t->stride[0], (long long)t->stride[1], (long long)t->stride[2],
                                 (long long)t->stride[3]);
        void *want = b->host ? (char *)b->host + t->offset : NULL;
        if (t->data != want)
            return modattn__error(MODATTN_EINVAL, "%s: data must be %s for a view on a %s buffer", name,
                                 b->host ? "the buffer's host address + offset" : "NULL",
                                 b->host ? "host-addressable" : "device");
        return 0;
    }
    if (t->device.kind != MODATTN_DEVICE_CPU)
        return modattn__error(MODATTN_EINVAL, "%s: a tensor on %s must refer to a device buffer (tensor.buffer)", name,
                             modattn_device_kind_name(t->device.kind));
    if (m >= t->capacity)
        return modattn__error(MODATTN_EINVAL,
                             "%s: strides reach element %lld but the buffer holds %lld elements "
                             "(shape [%lld,%lld,%lld,%lld], strides [%lld,%lld,%lld,%lld])",
                             name, (long long)m, (long long)t->capacity, (long long)t->shape[0],
                             (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3],
                             (long long)t->stride[0], (long long)t->stride[1], (long long)t->stride[2],
                             (long long)t->stride[3]);
    return 0;
}

/* An output must not write one element twice: sorted by stride, each dimension must step over
 * the whole span of the smaller ones. (Sufficient, not necessary: exotic interleavings are refused.) */
static int check_no_self_overlap(const char *name, const modattn_tensor *t) {
    if (numel(t) == 0) return 0; /* writes nothing */
    int idx[4], n = 0;
    for (int i = 0; i < 4; i++)
        if (t->shape[i] > 1) idx[n++] = i;
    for (int a = 1; a < n; a++) /* insertion sort by stride */
        for (int b = a; b > 0 && t->stride[idx[b]] < t->stride[idx[b - 1]]; b--) {
            int tmp = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = tmp;
        }
    int64_t span = 1;
    for (int k = 0; k < n; k++) {
        int64_t s = t->stride[idx[k]];
        if (s < span)
            return modattn__error(MODATTN_EINVAL,
                                 "%s: output view overlaps itself (stride[%d] = %lld is smaller than the "
                                 "%lld elements spanned by the smaller dimensions)",
                                 name, idx[k], (long long)s, (long long)span);
        span = s * t->shape[idx[k]];
    }
    return 0;
}

/* Byte range of a view in its address space: the host's, or its device buffer's. */
static void byte_range(const modattn_tensor *t, uintptr_t *lo, uintptr_t *hi) {
    int64_t m = max_index(t);
    *lo = t->data ? (uintptr_t)t->data : (uintptr_t)t->offset;
    *hi = m < 0 ? *lo : *lo + (uintptr_t)(m + 1) * modattn_dtype_size(t->dtype);
}

static bool overlaps(const modattn_tensor *a, const modattn_tensor *b) {
    if (!modattn_tensor_present(a) || !modattn_tensor_present(b)) return false;
    /* views on device buffers can only overlap within one buffer */
    if ((!a->data || !b->data) && a->buffer != b->buffer) return false;
    uintptr_t alo, ahi, blo, bhi;
    byte_range(a, &alo, &ahi);
    byte_range(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

int modattn_attn_describe(const modattn_attn_call *c, modattn_attn_desc *d) {
    if (!c || !d) return modattn__error(MODATTN_EINVAL, "attention: call or descriptor is NULL");
    memset(d, 0, sizeof *d);
    static const char *const qdims[4] = {"B", "Hq", "Sq", "D"};
    static const char *const kdims[4] = {"B", "Hkv", "Sk", "D"};
    static const char *const vdims[4] = {"B", "Hkv", "Sk", "Dv"};
    static const char *const odims[4] = {"B", "Hq", "Sq", "Dv"};
    static const char *const mdims[4] = {"B", "Hq", "Sq", "Sk"};
    static const char *const ldims[4] = {"B", "Hq", "Sq", "1"};
    const int64_t none[4] = {-1, -1, -1, -1};
    int st;
    if ((st = check_view("q", &c->q, none, qdims, false))) return st;
    int64_t B = c->q.shape[0], Hq = c->q.shape[1], Sq = c->q.shape[2], D = c->q.shape[3];
    if ((st = check_view("k", &c->k, (int64_t[4]){B, -1, -1, D}, kdims, false))) return st;
    int64_t Hkv = c->k.shape[1], Sk = c->k.shape[2];
    if ((st = check_view("v", &c->v, (int64_t[4]){B, Hkv, Sk, -1}, vdims, false))) return st;
    int64_t Dv = c->v.shape[3];
    if ((st = check_view("o", &c->o, (int64_t[4]){B, Hq, Sq, Dv}, odims, false))) return st;
    if (Hkv == 0 && Hq != 0)
        return modattn__error(MODATTN_EINVAL, "k: Hkv is 0 but q has %lld heads", (long long)Hq);
    if (Hkv != 0 && Hq % Hkv != 0)
        return modattn__error(MODATTN_EINVAL, "q has %lld heads, not a multiple of the %lld key/value heads (GQA needs Hq %% Hkv == 0)",
                             (long long)Hq, (long long)Hkv);
    if (c->q.dtype != c->k.dtype || c->q.dtype != c->v.dtype || c->q.dtype != c->o.dtype)
        return modattn__error(MODATTN_EINVAL, "dtypes differ: q %s, k %s, v %s, o %s", modattn_dtype_name(c->q.dtype),
                             modattn_dtype_name(c->k.dtype), modattn_dtype_name(c->v.dtype),
                             modattn_dtype_name(c->o.dtype));
    const modattn_tensor *all[4] = {&c->q, &c->k, &c->v, &c->o};
    for (int i = 1; i < 4; i++)
        if (all[i]->device.kind != c->q.device.kind || all[i]->device.index != c->q.device.index)
            return modattn__error(MODATTN_EINVAL, "tensors are on different devices (q on %s:%d, %s on %s:%d)",
                                 modattn_device_kind_name(c->q.device.kind), c->q.device.index,
                                 i == 1 ? "k" : i == 2 ? "v" : "o", modattn_device_kind_name(all[i]->device.kind),
                                 all[i]->device.index);
    if ((st = check_no_self_overlap("o", &c->o))) return st;
    bool inner = true;
    for (int i = 0; i < 4; i++)
        if (all[i]->shape[3] > 1 && all[i]->stride[3] != 1) inner = false;
    d->has_mask = modattn_tensor_present(&c->mask);
    if (d->has_mask) {
        if ((st = check_view("mask", &c->mask, (int64_t[4]){B, Hq, Sq, Sk}, mdims, true))) return st;
        if (c->mask.dtype != c->q.dtype)
            return modattn__error(MODATTN_EINVAL, "mask: dtype %s differs from q's %s", modattn_dtype_name(c->mask.dtype),
                                 modattn_dtype_name(c->q.dtype));
        if (c->mask.device.kind != c->q.device.kind || c->mask.device.index != c->q.device.index)
            return modattn__error(MODATTN_EINVAL, "mask: on another device than q");
        if (overlaps(&c->o, &c->mask)) return modattn__error(MODATTN_EINVAL, "o overlaps mask");
        if (c->mask.shape[3] > 1 && c->mask.stride[3] != 1) inner = false;
        d->mask_b = c->mask.shape[0];
        d->mask_h = c->mask.shape[1];
    }
    d->has_lse = modattn_tensor_present(&c->lse);
    if (d->has_lse) {
        if ((st = check_view("lse", &c->lse, (int64_t[4]){B, Hq, Sq, 1}, ldims, false))) return st;
        if (c->lse.dtype != MODATTN_DTYPE_F32 && c->lse.dtype != c->q.dtype)
            return modattn__error(MODATTN_EINVAL, "lse: dtype must be f32 (or q's dtype), got %s",
                                 modattn_dtype_name(c->lse.dtype));
        if (c->lse.device.kind != c->q.device.kind || c->lse.device.index != c->q.device.index)
            return modattn__error(MODATTN_EINVAL, "lse: on another device than q");
        if ((st = check_no_self_overlap("lse", &c->lse))) return st;
        if (overlaps(&c->lse, &c->o)) return modattn__error(MODATTN_EINVAL, "lse overlaps o");
        for (int i = 0; i < 3; i++)
            if (overlaps(&c->lse, all[i]))
                return modattn__error(MODATTN_EINVAL, "lse overlaps %s", i == 0 ? "q" : i == 1 ? "k" : "v");
        if (d->has_mask && overlaps(&c->lse, &c->mask)) return modattn__error(MODATTN_EINVAL, "lse overlaps mask");
    }
    for (int i = 0; i < 3; i++)
        if (overlaps(&c->o, all[i]))
            return modattn__error(MODATTN_EINVAL, "o overlaps %s: outputs must not alias inputs",
                                 i == 0 ? "q" : i == 1 ? "k" : "v");
    d->has_kv_lens = c->kv_lens != NULL;
    if (c->kv_lens)
        for (int64_t b = 0; b < B; b++)
            if (c->kv_lens[b] < 0 || c->kv_lens[b] > Sk)
                return modattn__error(MODATTN_EINVAL, "kv_lens[%lld] = %d is outside [0, Sk = %lld]", (long long)b,
                                     (int)c->kv_lens[b], (long long)Sk);
    if (!isfinite(c->scale))
        return modattn__error(MODATTN_EINVAL, "scale is not finite (%g)", (double)c->scale);
    if (c->window && (c->window_left < -1 || c->window_right < -1))
        return modattn__error(MODATTN_EINVAL, "window: window_left = %d, window_right = %d; each must be >= -1 (-1: unbounded)",
                             (int)c->window_left, (int)c->window_right);
    if (!isfinite(c->softcap) || c->softcap < 0.0f)
        return modattn__error(MODATTN_EINVAL, "softcap is %g; it must be finite and >= 0 (0: none)", (double)c->softcap);
    if (c->alibi_slopes)
        for (int64_t h = 0; h < Hq; h++)
            if (!isfinite(c->alibi_slopes[h]))
                return modattn__error(MODATTN_EINVAL, "alibi_slopes[%lld] is not finite (%g)", (long long)h,
                                     (double)c->alibi_slopes[h]);
    d->B = B, d->Hq = Hq, d->Hkv = Hkv, d->Sq = Sq, d->Sk = Sk, d->D = D, d->Dv = Dv;
    d->dtype = c->q.dtype;
    d->device = c->q.device;
    d->scale = c->scale != 0.0f ? c->scale : (D > 0 ? (float)(1.0 / sqrt((double)D)) : 1.0f);
    d->causal = c->causal;
    d->inner_contiguous = inner;
    d->window_left = d->window_right = -1;
    if (c->window) { /* a side >= Sk reaches every key on that side: FA2's interface reads it as -1 */
        d->window_left = c->window_left >= Sk ? -1 : c->window_left;
        d->window_right = c->window_right >= Sk ? -1 : c->window_right;
        d->has_window = d->window_left >= 0 || d->window_right >= 0;
    }
    d->has_alibi = c->alibi_slopes != NULL;
    d->softcap = c->softcap;
    return 0;
}

modattn_attn_desc modattn_attn_desc_make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Sk,
                                         int64_t D, bool causal) {
    modattn_attn_desc d;
    memset(&d, 0, sizeof d);
    d.B = B, d.Hq = Hq, d.Hkv = Hkv, d.Sq = Sq, d.Sk = Sk, d.D = D, d.Dv = D;
    d.dtype = MODATTN_DTYPE_F32;
    d.device.kind = MODATTN_DEVICE_CPU;
    d.scale = D > 0 ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    d.causal = causal;
    d.inner_contiguous = true;
    d.window_left = d.window_right = -1;
    return d;
}

void modattn_attn_desc_format(const modattn_attn_desc *d, char *buf, size_t len) {
    char win[64] = "", cap[40] = "";
    if (d->has_window) snprintf(win, sizeof win, " window=(%lld,%lld)", (long long)d->window_left, (long long)d->window_right);
    if (d->softcap > 0.0f) snprintf(cap, sizeof cap, " softcap=%g", (double)d->softcap);
    snprintf(buf, len, "B=%lld Hq=%lld Hkv=%lld Sq=%lld Sk=%lld D=%lld Dv=%lld %s%s%s%s%s%s%s%s%s", (long long)d->B,
             (long long)d->Hq, (long long)d->Hkv, (long long)d->Sq, (long long)d->Sk, (long long)d->D,
             (long long)d->Dv, modattn_dtype_name(d->dtype), d->causal ? " causal" : "", win,
             d->has_alibi ? " alibi" : "", cap, d->has_mask ? " mask" : "", d->has_kv_lens ? " kv_lens" : "",
             d->has_lse ? " lse" : "", d->inner_contiguous ? "" : " strided");
}

double modattn_attn_desc_flops(const modattn_attn_desc *d) {
    double f = 2.0 * (double)d->B * (double)d->Hq * (double)d->Sq * (double)d->Sk * (double)(d->D + d->Dv);
    if (!d->has_window) return d->causal ? f / 2 : f;
    /* the pairs the window (and causal) leave visible, row by row: O(Sq) */
    double pairs = 0.0;
    for (int64_t i = 0; i < d->Sq; i++) {
        int64_t lo, hi;
        modattn_attn_visible(d, d->Sk, i, &lo, &hi);
        pairs += (double)(hi - lo);
    }
    return 2.0 * (double)d->B * (double)d->Hq * pairs * (double)(d->D + d->Dv);
}
