/* modattn/attention.h — the attention contract: one operator, many interchangeable implementations.
 *
 *   O[b,h,i,:] = softmax_j( cap(scale * Q[b,h,i,:] . K[b,h/G,j,:]) - slope[h] * |i' - j| + mask[b,h,i,j] )
 *                . V[b,h/G,j,:]        over the keys j visible to (b, i) (below)
 *
 * Shapes (strides are in elements, any order, may be views into a larger buffer):
 *   q:    [B, Hq,  Sq, D]
 *   k:    [B, Hkv, Sk, D]
 *   v:    [B, Hkv, Sk, Dv]
 *   o:    [B, Hq,  Sq, Dv]          written
 *   mask: [B|1, Hq|1, Sq, Sk]       optional, additive; entries finite or -INFINITY
 *   lse:  [B, Hq, Sq, 1]            optional, written: log-sum-exp of the visible scaled scores
 *   kv_lens: int32[B]               optional: keys j >= kv_lens[b] are padding, invisible
 * Hq must be a multiple of Hkv (G = Hq / Hkv: GQA, MQA when Hkv = 1).
 * scale: 0 means 1/sqrt(D).
 * Visibility. With L_b = kv_lens[b] (or Sk) and i' = i + (L_b - Sq), query i's position aligned
 *   to the bottom-right corner of its batch's keys (FlashAttention >= 2.1), key j is visible to
 *   query i of batch b iff all of
 *     0 <= j < L_b                                        (kv_lens: keys past L_b are padding)
 *     j <= i'                                             (causal only)
 *     i' - window_left <= j                               (window, window_left  >= 0 only)
 *     j <= i' + window_right                              (window, window_right >= 0 only)
 *   This is FlashAttention 2's window_size = (window_left, window_right): -1 on a side is unbounded
 *   there, and a side >= Sk reads as -1 (FA2's interface clips it so: it matters only to the right
 *   side when Sq > Sk); causal is window_right = 0 intersected with the window (causal with window
 *   (w, -1) is FA2's (w, 0)); (0, 0) is the diagonal alone; with kv_lens each batch uses its own
 *   L_b in i' (FA2's varlen seqlen_k). The window applies only when call.window is true, so a
 *   zero-initialised call has none. A query that sees no key follows the edge case below.
 *   Note the alignment: for self-attention over a right-padded batch (query i at position i,
 *   Sq = max length > L_b) i' = i + L_b - Sq is not i; such a caller passes the window as a mask
 *   (or one call per text), exactly as with causal.
 * ALiBi (alibi_slopes, [Hq] on the host): the bias -slope[h] * |i' - j| with the same i'. With
 *   causal every visible key has j <= i' and the bias is the one-sided -slope[h] * (i' - j).
 *   (Under causal FlashAttention 2 adds +slope * j instead, which differs from -slope * (i' - j) by
 *   the per-row constant slope * i': softmax removes it, so O is the same, but its LSE is off by
 *   that constant. Ours is -slope * |i' - j| as written, LSE included.)
 * cap (softcap > 0): s -> softcap * tanh(s / softcap), applied to the scaled score before the
 *   ALiBi bias and the mask (Gemma 2's and FlashAttention's order); softcap = 0: none.
 *
 * Defined edge cases:
 *   - a query row that sees no key (causal, a window, kv_lens[b] = 0, a fully -inf mask row) gives
 *     O = 0 and LSE = -INFINITY;
 *   - Sq = 0 or Sk = 0 (or B = 0) is a valid no-op (with Sk = 0 every row sees no key:
 *     O = 0, LSE = -inf);
 *   - finite inputs never produce NaN.
 * Outputs must not overlap the inputs or themselves. Inputs are never written.
 * fp32 today; the dtype field is there so fp16/bf16 follow without an API change.
 * Tensors may live on a device (modattn/backend/device.h): all of a call's tensors on the same one.
 * The tensor, dtype and device types are in modattn/types.h (core: the device layer uses them too). */
#ifndef MODATTN_ATTENTION_H
#define MODATTN_ATTENTION_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "modattn/status.h"
#include "modattn/types.h" /* tensors, dtypes, devices: the core layer's */

#ifdef __cplusplus
extern "C" {
#endif

/* One attention call. Zero-initialise, then fill in. */
typedef struct modattn_attn_call {
    modattn_tensor q, k, v, o;   /* required */
    modattn_tensor mask;         /* optional (data == NULL: none) */
    modattn_tensor lse;          /* optional (data == NULL: none) */
    const int32_t *kv_lens;      /* optional [B]; each in [0, Sk] */
    float scale;                 /* 0: 1/sqrt(D) */
    bool causal;
    /* appended (impl api_version 3); zero: none of them */
    bool window;                 /* sliding window: window_left/window_right apply */
    int32_t window_left, window_right; /* each >= -1; -1: unbounded on that side */
    const float *alibi_slopes;   /* optional [Hq] on the host, finite: ALiBi bias per head */
    float softcap;               /* 0: none; > 0: logit softcapping */
} modattn_attn_call;

/* What an implementation needs to know to decide support and workspace: the call without data. */
typedef struct modattn_attn_desc {
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    modattn_dtype dtype;
    modattn_device device;
    float scale;            /* resolved: never 0 */
    bool causal;
    bool has_mask, has_lse, has_kv_lens;
    int64_t mask_b, mask_h; /* 1 or B / 1 or Hq (broadcast) */
    bool inner_contiguous;  /* q, k, v, o (and mask, lse if present) have stride 1 on their last dim */
    /* appended (impl api_version 3) */
    bool has_window;        /* a window bounds at least one side (false when both sides are -1) */
    int64_t window_left, window_right; /* -1: unbounded (a side >= Sk reads as -1; both -1 when !has_window) */
    bool has_alibi;         /* call.alibi_slopes given */
    float softcap;          /* 0: none */
} modattn_attn_desc;

/* The keys [*lo, *hi) visible to query row i of a batch whose key length is L (kv_lens[b] or
 * Sk), before the mask: the visibility rule above (an empty range has *lo >= *hi). */
static inline void modattn_attn_visible(const modattn_attn_desc *d, int64_t L, int64_t i, int64_t *lo, int64_t *hi) {
    const int64_t ip = i + L - d->Sq;
    int64_t a = 0, b = L;
    if (d->causal && ip + 1 < b) b = ip + 1;
    if (d->has_window) {
        if (d->window_left >= 0 && ip - d->window_left > a) a = ip - d->window_left;
        if (d->window_right >= 0 && ip + d->window_right + 1 < b) b = ip + d->window_right + 1;
    }
    *lo = a;
    *hi = b > a ? b : a;
}

/* Validate a call (shapes, dtypes, devices, strides inside capacity, no output overlap, kv_lens
 * range) and fill `desc`. Returns MODATTN_EINVAL with a message naming the tensor and dimension. */
int modattn_attn_describe(const modattn_attn_call *call, modattn_attn_desc *desc);

/* A shape-only descriptor, for explain and benchmarks (no data): contiguous fp32 on the CPU. */
modattn_attn_desc modattn_attn_desc_make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Sk,
                                         int64_t D, bool causal);

/* "B=1 Hq=12 Hkv=12 Sq=128 Sk=128 D=32 Dv=32 causal window=(128,128) alibi" */
void modattn_attn_desc_format(const modattn_attn_desc *d, char *buf, size_t len);
/* 2*B*Hq*(D+Dv) per visible (query, key) pair: Sq*Sk pairs, halved when causal; with a window
 * the pairs the window leaves visible (counted with L_b = Sk). */
double modattn_attn_desc_flops(const modattn_attn_desc *d);

#ifdef __cplusplus
}
#endif
#endif
