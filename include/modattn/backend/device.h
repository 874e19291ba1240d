/* modattn/backend/device.h — the device layer: where tensors live and who computes on them.
 *
 * A device is one table of function pointers (modattn_device_iface) plus a context pointer, in
 * the manner of SQLite's sqlite3_io_methods and ggml's backend interface: versioned, slots only
 * ever appended, every optional slot defaulted in one place (device/device.c). Callers never use
 * a slot directly; they call the modattn_device_* / modattn_buffer_* wrappers below, which add
 * the defaults, the memory accounting, tracing and argument checks.
 *
 * Devices are found once per process (modattn__devices_init): the CPU always, then every device
 * of every backend built in (OpenCL: each platform's devices, in platform order). A device is
 * named "KIND" or "KIND:N" ("cpu", "opencl:0", "cuda:1"); "KIND" alone is "KIND:0".
 *
 * Buffers: memory on one device, allocated through modattn's accounting (category, per-device
 * current/peak, the --mem-budget applies to each device's total on its own). A buffer may or
 * may not be addressable from the host: `host` is its address when it is (the CPU device), NULL
 * when it is not (an OpenCL cl_mem, a CUDA pointer). Tensors refer to a buffer and a byte offset
 * (modattn_tensor.buffer / .offset), so a device tensor is a tensor like any other.
 *
 * Ordering: every device has one in-order queue. Writes, reads, copies and computations are
 * executed in the order they are issued; reads return when the bytes are on the host. */
#ifndef MODATTN_DEVICE_H
#define MODATTN_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "modattn/types.h"
#include "modattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODATTN_DEVICE_API_VERSION 5u /* 3: the graph slot; 4: the norm, rotary and glu ops and slots; 5: rotary_interleaved, rms_norm, embed_plain and the args fields that carry them (interleaved, rms, group, plain) */

/* The encoder's coarse operations. A device says which it runs (supports_op) and why not. */
#define MODATTN_OP_MAP(X)                                                   \
    X(EMBED_GATHER, "embed_gather")   /* token/position/type rows -> sum */ \
    X(LINEAR, "linear")               /* GEMM + bias                     */ \
    X(LINEAR_GELU, "linear_gelu")     /* GEMM + bias + GELU epilogue     */ \
    X(LINEAR_RESIDUAL, "linear_residual") /* GEMM + bias + residual add  */ \
    X(LAYERNORM, "layernorm")                                               \
    X(ATTENTION, "attention")         /* through the dispatcher          */ \
    X(POOL_MEAN, "pool_mean")                                               \
    X(POOL_CLS, "pool_cls")                                                 \
    X(POOL_MAX, "pool_max")                                                 \
    X(L2_NORMALIZE, "l2_normalize")                                         \
    X(LINEAR_BF16, "linear_bf16")     /* the linear ops in bf16 (fp32 sums) */ \
    X(LINEAR_INT8, "linear_int8")     /* the linear ops in int8 (int32 sums)  */ \
    X(LINEAR_BF16X3, "linear_bf16x3") /* the linear ops as 3 bf16 products (fp32 sums) */ \
    X(EMBED_POSITIONS, "embed_positions") /* embed_gather with a position id per token (pos_ids) */ \
    X(NORM, "norm")                   /* LayerNorm of rows into another buffer (pre-LN layers) */ \
    X(ROTARY, "rotary")               /* rotary position embedding of Q and K, in place (NeoX) */ \
    X(GLU, "glu")                     /* gated FFN: act(first half) * second half, in place */ \
    X(ROTARY_INTERLEAVED, "rotary_interleaved") /* rotary in GPT-J's layout: the op 'rotary' with interleaved */ \
    X(RMS_NORM, "rms_norm")           /* norm with rms or group set (decoders' RMSNorm, QK-norm) */ \
    X(EMBED_PLAIN, "embed_plain")     /* embed with plain set: the rows summed, no LayerNorm */

typedef enum modattn_op {
#define MODATTN__OP_ENUM(name, text) MODATTN_OP_##name,
    MODATTN_OP_MAP(MODATTN__OP_ENUM)
#undef MODATTN__OP_ENUM
    MODATTN_OP_COUNT
} modattn_op;
const char *modattn_op_name(modattn_op op);

/* What `modattn devices` prints. */
typedef struct modattn_device_info {
    char name[32];          /* "opencl:0" */
    char platform[128];     /* "Portable Computing Language" ("" for the CPU) */
    char vendor[128];
    char model[128];        /* device name */
    char driver[128];       /* driver / platform version */
    int64_t memory_bytes;   /* global memory */
    int64_t max_alloc_bytes;/* largest single buffer */
    int64_t local_mem_bytes;/* per work-group local memory (0: not applicable) */
    int compute_units;
    bool fp16, fp64;
    bool host_memory;       /* buffers are host pointers */
    char note[512];         /* anything the user should know ("program cache not writable: ...") */
} modattn_device_info;

/* Pooling modes, a bit set (a model's pooling config may enable several; they are concatenated):
 * the pool op's `pooling` (modattn/model.h reads them from the model's config). */
typedef enum modattn_pooling {
    MODATTN_POOL_CLS = 1u << 0,
    MODATTN_POOL_MAX = 1u << 1,
    MODATTN_POOL_MEAN = 1u << 2,
    MODATTN_POOL_MEAN_SQRT_LEN = 1u << 3,
    MODATTN_POOL_WEIGHTED_MEAN = 1u << 4,
    MODATTN_POOL_LAST = 1u << 5,
} modattn_pooling;

/* ---- the encoder's ops on a device (slots of modattn_encoder_ops). Every buffer is on the
 * device that runs the op; activations are token-major [B*S, H] with row b*S+i = token i of
 * batch row b; rows with i >= lens[b] are padding and are written as zeros. */
typedef enum modattn_act {
    MODATTN_ACT_NONE = 0,
    MODATTN_ACT_GELU_ERF,   /* x/2 (1 + erf(x/sqrt 2)) */
    MODATTN_ACT_GELU_TANH,  /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    MODATTN_ACT_RELU,
    MODATTN_ACT_SILU,       /* x / (1 + exp(-x)) (SwiGLU's gate) */
} modattn_act;

/* A weight prepared once for repeated linear calls (modattn__device_linear_prepare): the device's
 * own layout of it (the CPU device: oneDNN's blocked copy), and whether that copy replaces the
 * weight buffer (then linear calls with the plan never read `w`). */
typedef struct modattn_linear_plan {
    const struct modattn_device_iface *iface; /* the device that made it */
    void *impl;                               /* the device's plan */
    bool owns_weight;
} modattn_linear_plan;

/* Every op's args carry `pool`: the host threads an op may use (a device that computes on the
 * host runs its row blocks there; one on its own silicon ignores it). NULL: the calling thread. */

/* x[r] = LayerNorm(word[ids[r]] + pos[p] + type0) * gamma + beta, p = pos_ids[r] when given, else
 * i (token i of its row). pos_ids (op EMBED_POSITIONS): XLM-RoBERTa and MPNet number positions
 * past their padding id, so a text holding the padding token itself skips a position. */
typedef struct modattn_op_embed_args {
    const modattn_buffer *ids, *lens;  /* int32 [B*S], int32 [B] */
    const modattn_buffer *word, *pos, *type0, *gamma, *beta; /* [V,H], [P,H], [H], [H], [H] */
    modattn_buffer *x;                 /* [B*S, H] */
    int64_t B, S, H;
    double eps;
    modattn_pool *pool;
    const modattn_buffer *pos_ids;     /* optional int32 [B*S], each in [0, P) (NULL: none) */
    /* the rows summed only, no LayerNorm (gamma, beta, eps unused): a decoder's token embeddings
     * (op MODATTN_OP_EMBED_PLAIN) */
    bool plain;
} modattn_op_embed_args;

/* y[r, 0..N) = (accumulate ? y[r] : 0) + a[r] . w^T + bias, then act, then (if gamma)
 * LayerNorm(y[r]) * gamma + beta; padding rows zero. */
typedef struct modattn_op_linear_args {
    const modattn_buffer *a; int64_t lda;   /* [rows, K] */
    const modattn_buffer *w;                /* [N, K] (a PyTorch Linear's weight) */
    const modattn_buffer *bias;             /* [N] */
    modattn_buffer *y; int64_t ldy;         /* [rows, N] */
    int64_t rows, N, K;
    bool accumulate;                        /* the residual: y already holds it */
    modattn_act act;
    const modattn_buffer *gamma, *beta;     /* LayerNorm after (NULL: none) */
    double eps;
    const modattn_buffer *lens; int64_t S;  /* padding rows: i = r % S >= lens[r / S] */
    const modattn_linear_plan *plan;        /* from linear_prepare for this w and shape, or NULL */
    bool few_rows;                          /* linear_prepare: the caller runs a few rows per call (a
                                               query): a plan with no set-up cost beats a packed one */
    const char *name;                       /* trace span ("encoder.qkv"; a string literal), or NULL */
    modattn_pool *pool;
    /* The GEMM's arithmetic (modattn/core.h). Not fp32: linear_prepare makes a plan of that
     * precision (a device that cannot refuses, and says so in supports_op(MODATTN_OP_LINEAR_BF16 /
     * MODATTN_OP_LINEAR_INT8)),
     * and linear runs only with such a plan: no op falls back to another precision silently. */
    modattn_precision precision;
    /* linear_prepare, optional: the LayerNorm whose output `a` is (a = n * in_gamma + in_beta, n
     * normalised). A low-precision plan may fold it into the weight (W diag(gamma), W beta added
     * after), so that what it quantises is n, free of the per-channel outliers gamma and beta put
     * in BERT's hidden states. */
    const modattn_buffer *in_gamma, *in_beta;
} modattn_op_linear_args;

/* out[b] = the pooling modes' vectors of x's rows 0..lens[b]) concatenated, in
 * sentence-transformers' order (cls, max, mean, mean_sqrt_len, weightedmean, lasttoken; bits
 * as modattn_pooling above), then L2-normalised if `normalize`. */
typedef struct modattn_op_pool_args {
    const modattn_buffer *x, *lens;         /* [B*S, H], int32 [B] */
    int64_t B, S, H;
    unsigned modes;
    bool normalize;
    modattn_buffer *out;                    /* [B, dim] */
    int64_t dim;
    modattn_pool *pool;
} modattn_op_pool_args;

/* y[r] = LayerNorm(x[r]) * gamma + beta over H columns (x and y may be the same rows): the
 * pre-LN layers' norms (ModernBERT's attn_norm, mlp_norm, final_norm); padding rows zero. A
 * LayerNorm without a bias passes beta = zeros. Op MODATTN_OP_NORM. */
typedef struct modattn_op_norm_args {
    const modattn_buffer *x; int64_t ldx;   /* [rows, ldx] */
    modattn_buffer *y; int64_t ldy;         /* [rows, ldy] */
    const modattn_buffer *gamma, *beta;     /* [H], [H] */
    int64_t rows, H;
    double eps;
    const modattn_buffer *lens; int64_t S;  /* padding rows: i = r % S >= lens[r / S] */
    modattn_pool *pool;
    /* op MODATTN_OP_RMS_NORM when either is set: rms, y = x / sqrt(mean(x^2) + eps) * gamma (RMSNorm:
     * beta unused); group > 0, each run of `group` columns normalised on its own (H a multiple of
     * it; gamma still [H]): QK-norm over each head's D of a QKV row */
    bool rms;
    int64_t group;
} modattn_op_norm_args;

/* Rotary position embedding, GPT-NeoX's layout (transformers' rotate_half), in place on the
 * `heads` heads of D columns that start each row of x (Q then K of a fused QKV row: 2 x the
 * attention heads): for the token at position p = r % S and j < D/2,
 *   x'[j]       = x[j] * cos[p, j] - x[j + D/2] * sin[p, j]
 *   x'[j + D/2] = x[j + D/2] * cos[p, j] + x[j] * sin[p, j]
 * cos, sin: [P, D/2] tables (P >= S) of cos(p * inv_freq[j]), sin(...), the caller's (a per-layer
 * base is a per-layer table). Padding rows are left as they are. Op MODATTN_OP_ROTARY.
 * interleaved: GPT-J's layout instead (nomic_bert's rotary_emb_interleaved), the pairs adjacent:
 *   x'[2j]     = x[2j] * cos[p, j] - x[2j + 1] * sin[p, j]
 *   x'[2j + 1] = x[2j + 1] * cos[p, j] + x[2j] * sin[p, j]
 * asked only of a device that says it runs op MODATTN_OP_ROTARY_INTERLEAVED. */
typedef struct modattn_op_rotary_args {
    modattn_buffer *x; int64_t ldx;         /* [rows, ldx], ldx >= heads * D */
    const modattn_buffer *cos, *sin;        /* [P, D/2] */
    int64_t rows, heads, D;
    const modattn_buffer *lens; int64_t S;
    modattn_pool *pool;
    bool interleaved;                       /* GPT-J's layout (appended; false: NeoX's) */
} modattn_op_rotary_args;

/* Gated FFN (GeGLU, SwiGLU): x[r, j] = act(x[r, j]) * x[r, N + j] for j < N, in place: the one
 * GEMM's [rows, 2N] output becomes the down projection's input in its first N columns (read with
 * lda = ldx). Padding rows zero (their first N columns). Op MODATTN_OP_GLU. */
typedef struct modattn_op_glu_args {
    modattn_buffer *x; int64_t ldx;         /* [rows, ldx], ldx >= 2N */
    int64_t rows, N;
    modattn_act act;                        /* not NONE */
    const modattn_buffer *lens; int64_t S;
    modattn_pool *pool;
} modattn_op_glu_args;

/* A device that computes the encoder's ops fills these in (the CPU device too: backends/cpu).
 * Attention is never here: it goes through the dispatcher. */
typedef struct modattn_encoder_ops {
    /* Rows of activations the linear op processes at once: buffers it reads and writes hold
     * rows rounded up to a multiple of row_block, and the rows past `rows` are zero on entry
     * (the caller keeps them so) and stay finite. 0 or 1: no rounding. */
    int64_t row_block;
    int (*embed)(void *ctx, const modattn_op_embed_args *a, char *reason, size_t len);
    int (*linear)(void *ctx, const modattn_op_linear_args *a, char *reason, size_t len);
    int (*pool)(void *ctx, const modattn_op_pool_args *a, char *reason, size_t len);
    /* Optional: prepares `shape->w` for linear calls of this N, K, lda, ldy and accumulate (the
     * activation buffers and rows of `shape` are unused). *plan = NULL: nothing to prepare.
     * Memory the plan holds is the device's to count (category weights). */
    int (*linear_prepare)(void *ctx, const modattn_op_linear_args *shape, void **plan, bool *owns_weight,
                          char *reason, size_t len);
    void (*linear_release)(void *ctx, void *plan);
    /* Optional (appended for pre-LN, rotary, gated encoders; NULL: the device refuses the op). */
    int (*norm)(void *ctx, const modattn_op_norm_args *a, char *reason, size_t len);
    int (*rotary)(void *ctx, const modattn_op_rotary_args *a, char *reason, size_t len);
    int (*glu)(void *ctx, const modattn_op_glu_args *a, char *reason, size_t len);
} modattn_encoder_ops;

/* ---- the coarse slot: the whole encoder as one program, for a device whose compiler wants the
 * whole graph (XLA through PJRT: buffers are immutable whole arrays and every launch has a fixed
 * cost, so op by op does not fit). The model hands over its configuration and host weights once
 * (load: the device copies what it keeps; the host arrays may go after), then per batch only ids
 * and lengths go in and the pooled vectors come out. A device without the slot (the CPU, OpenCL)
 * runs the encoder op by op through modattn_encoder_ops: modattn__device_has_graph() is the one
 * place that decides. */
typedef struct modattn_graph_layer {
    const float *wqkv, *bqkv;   /* [3H, H], [3H] */
    const float *wo, *bo;       /* [H, H], [H] */
    const float *ln1_g, *ln1_b; /* [H] */
    const float *w1, *b1;       /* [I, H], [I] */
    const float *w2, *b2;       /* [H, I], [H] */
    const float *ln2_g, *ln2_b; /* [H] */
} modattn_graph_layer;

typedef struct modattn_encoder_graph {
    const char *identity;   /* the model's name and weights hash: part of a compile cache's key */
    int64_t layers, hidden, heads, intermediate, vocab, max_positions, dim;
    double eps;
    modattn_act act;
    unsigned pooling;       /* modattn_pooling bits, as modattn_op_pool_args */
    bool normalize;
    modattn_precision precision;
    int32_t pad_id;
    const float *word, *pos, *type0, *emb_g, *emb_b; /* [V,H], [P,H], [H], [H], [H] */
    const modattn_graph_layer *layer;                /* [layers] */
} modattn_encoder_graph;

typedef struct modattn_graph_ops {
    /* Whether the device runs this encoder (a pooling mode, a precision it lacks: false and why). */
    bool (*supports)(void *ctx, const modattn_encoder_graph *g, char *reason, size_t len);
    /* Takes the weights onto the device: *model is the device's handle. */
    int (*load)(void *ctx, const modattn_encoder_graph *g, void **model, char *reason, size_t len);
    /* One batch: ids [B*S] (row b's tokens at b*S, padded with pad_id), lens [B] (>= 1), all on the
     * host; out [B, dim] on the host. */
    int (*forward)(void *ctx, void *model, int64_t B, int64_t S, const int32_t *ids, const int32_t *lens, float *out,
                   char *reason, size_t len);
    void (*unload)(void *ctx, void *model);
} modattn_graph_ops;

/* The table a device fills in. `ctx` is passed back to every slot; `reason` buffers receive a
 * message in words when a slot fails or refuses. Return values are 0 or a negative
 * modattn_status. */
typedef struct modattn_device_iface {
    uint32_t api_version;   /* MODATTN_DEVICE_API_VERSION */
    modattn_device id;      /* kind and index */
    void *ctx;

    /* Required. Fills the description. */
    void (*get_info)(void *ctx, modattn_device_info *out);
    /* Required. Allocates `bytes` (> 0) of device memory: *handle is the device's own handle
     * (cl_mem, device pointer; the host pointer on the CPU), *host the host address or NULL.
     * The device layer has already counted the bytes against the device's budget (except on the
     * CPU device, whose buffers come from modattn__malloc in category `cat`). */
    int (*buffer_alloc)(void *ctx, size_t bytes, modattn_mem_category cat, void **handle, void **host, char *reason,
                        size_t len);
    /* Required. Releases what buffer_alloc returned. */
    void (*buffer_free)(void *ctx, void *handle);
    /* Required unless every buffer has a host address. Blocking copies host <-> device. */
    int (*buffer_write)(void *ctx, void *handle, size_t offset, const void *src, size_t bytes, char *reason, size_t len);
    int (*buffer_read)(void *ctx, void *handle, size_t offset, void *dst, size_t bytes, char *reason, size_t len);
    /* Optional (default: through the host in 1 MiB pieces). Device-side copy. */
    int (*buffer_copy)(void *ctx, void *dst, size_t dst_offset, void *src, size_t src_offset, size_t bytes,
                       char *reason, size_t len);
    /* Optional (default: writes of a pattern-filled host block). */
    int (*buffer_fill)(void *ctx, void *handle, size_t offset, uint8_t byte, size_t bytes, char *reason, size_t len);
    /* Optional (default: nothing to wait for). Returns when everything queued has finished. */
    int (*synchronize)(void *ctx, char *reason, size_t len);
    /* Optional (default: refuses every op with "not implemented on this device"). */
    bool (*supports_op)(void *ctx, modattn_op op, char *reason, size_t len);
    /* Optional. Called once at process teardown (modattn_devices_shutdown). */
    void (*shutdown)(void *ctx);
    /* Optional escape hatch for device-specific knobs; MODATTN_EUNSUPPORTED if unknown. */
    int (*control)(void *ctx, int op, void *arg);
    /* Optional: the encoder's ops on this device's memory (see modattn_encoder_ops). */
    const modattn_encoder_ops *ops;
    /* Optional (API 3): the whole encoder as one program (see modattn_graph_ops). */
    const modattn_graph_ops *graph;
} modattn_device_iface;

/* control() ops every device may answer. */
enum {
    /* arg: const int *op (a modattn_op): from now on supports_op refuses it, "disabled by
     * request" (tests of the refusal paths). */
    MODATTN_DEVICE_CONTROL_DISABLE_OP = 1,
    /* arg: modattn_device_stats_text *: the device's own counters in words for --stats (the xla
     * device: programs compiled and their time, cache hits and rejects, runs); "" when nothing ran. */
    MODATTN_DEVICE_CONTROL_STATS = 2,
};
typedef struct modattn_device_stats_text {
    char *buf;
    size_t len;
} modattn_device_stats_text;

/* A backend folder that provides devices defines
 *     int modattn__devices_<name>(const modattn_device_iface **out, int max, char *why, size_t len);
 * returning how many it found (0 with `why` filled when there are none: no platform, no
 * driver). The device layer calls it once. */

/* ---- finding devices */

/* Releases every device (their queues and contexts). Buffers must all have been freed. */
void modattn_devices_shutdown(void);
int modattn_device_count(void);
const modattn_device_iface *modattn_device_get(int i);
/* The device with this identity, or NULL. */
const modattn_device_iface *modattn_device_find(modattn_device id);
/* Parse "cpu", "opencl", "opencl:1", "cuda:0" into an identity and look it up. Errors:
 * MODATTN_EINVAL (a name that is no device kind, a bad index) or MODATTN_ENOTFOUND (no such
 * device here: the message says what was found, or why none was). */
int modattn_device_lookup(const char *name, const modattn_device_iface **out);
/* "opencl: no OpenCL platform found (clGetPlatformIDs: -1001 CL_PLATFORM_NOT_FOUND_KHR)" for
 * each built-in backend that found no device; "" if none. */
const char *modattn_device_absent_reasons(void);
/* "cpu", "opencl:0" */
void modattn_device_format(modattn_device id, char *buf, size_t len);
int modattn_device_info_get(const modattn_device_iface *dev, modattn_device_info *out);
/* Does the device run op? false with the reason (the default for an op it does not list). */
bool modattn_device_supports_op(const modattn_device_iface *dev, modattn_op op, char *reason, size_t len);




/* ---- buffers */



/* Memory held on each device, per category, like modattn_mem_get_stats() for the host. */
typedef struct modattn_device_mem_stats {
    int64_t current[MODATTN_MEM_CATEGORY_COUNT];
    int64_t peak[MODATTN_MEM_CATEGORY_COUNT];
    int64_t current_total, peak_total;
    uint64_t allocations, failures;
} modattn_device_mem_stats;

#ifdef __cplusplus
}
#endif
#endif
