/* modattn/attention.h — the attention contract: one operator, many interchangeable implementations.
 *
 *   O[b,h,i,:] = softmax_j( scale * Q[b,h,i,:] . K[b,h/G,j,:] + mask[b,h,i,j] ) V[b,h/G,j,:]
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
 * causal: query i sees key j iff j <= i + (L_b - Sq), where L_b = kv_lens[b] (or Sk): the
 *   diagonal is aligned to the bottom-right corner of the visible keys (FlashAttention >= 2.1).
 *
 * Defined edge cases:
 *   - a query row that sees no key (causal, kv_lens[b] = 0, a fully -inf mask row) gives
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
} modattn_attn_desc;

/* Validate a call (shapes, dtypes, devices, strides inside capacity, no output overlap, kv_lens
 * range) and fill `desc`. Returns MODATTN_EINVAL with a message naming the tensor and dimension. */
int modattn_attn_describe(const modattn_attn_call *call, modattn_attn_desc *desc);

/* A shape-only descriptor, for explain and benchmarks (no data): contiguous fp32 on the CPU. */
modattn_attn_desc modattn_attn_desc_make(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Sk,
                                         int64_t D, bool causal);

/* "B=1 Hq=12 Hkv=12 Sq=128 Sk=128 D=32 Dv=32 causal" */
void modattn_attn_desc_format(const modattn_attn_desc *d, char *buf, size_t len);
/* 4*B*Hq*Sq*Sk*D (D+Dv over 2 each), halved when causal. */
double modattn_attn_desc_flops(const modattn_attn_desc *d);

#ifdef __cplusplus
}
#endif
#endif
