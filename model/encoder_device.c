/* model/encoder_device.c — the BERT encoder's forward pass on a device (the CPU, OpenCL; CUDA
 * next), through the device layer only: this file never learns which kind of device it runs on.
 * Layout (model/encoder.c): token-major [B*S, H] activations, the fused QKV GEMM's output viewed
 * as strided Q/K/V for the dispatcher, padding by kv_lens with padded rows kept at zero by every
 * op. Activation buffers hold rows rounded up to the device's row block, the rows past a batch's
 * last zeroed before each batch (modattn_encoder_ops.row_block). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"
#include "modattn/core.h"
#include "modattn/dispatch.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "device/internal_device.h"

typedef struct dev_layer {
    modattn_buffer *wqkv, *bqkv, *wo, *bo, *ln1_g, *ln1_b, *w1, *b1, *w2, *b2, *ln2_g, *ln2_b;
    modattn_linear_plan *pqkv, *po, *p1, *p2; /* the device's prepared weights, or NULL */
    modattn_buffer *qk_g; /* qwen3: QK-norm's weights over the QKV row's Q and K heads */
} dev_layer;

struct modattn__dev_model {
    const modattn_device_iface *dev;
    modattn__model_config cfg;
    void *graph; /* a device with the graph slot: its loaded encoder (nothing below is used) */
    int64_t row_block;
    modattn_buffer *word, *pos, *type0, *emb_g, *emb_b;
    /* mpnet: the relative position bias as attention's additive mask, [heads, Smax, Smax] for
     * Smax = max_tokens; a batch of S tokens views its top-left [S, S] (it depends on j - i only) */
    modattn_buffer *bias;
    int64_t bias_s;
    /* xlm-roberta, mpnet: the whole position table (pos starts at the first position id's row):
     * a batch holding the padding token itself numbers its positions per token (pos_ids) */
    modattn_buffer *pos_full;
    /* modernbert: final_norm, and the rotary tables [max_tokens, D/2] of the global and local bases */
    modattn_buffer *fin_g, *fin_b, *rope_gc, *rope_gs, *rope_lc, *rope_ls;
    float *alibi; /* jina_bert: the ALiBi slopes [heads] (host memory: the contract's alibi_slopes) */
    dev_layer *layers;
    unsigned host_ops; /* ops run on the host (modattn_device_host_*) */
};

#define HOST_OP(dm, op) (((dm)->host_ops >> (op)) & 1u)
/* which ops a call of linear with these options is (the wrapper's own checks) */
static bool linear_on_host(const modattn__dev_model *dm, const modattn_op_linear_args *g) {
    if (g->gamma) return HOST_OP(dm, MODATTN_OP_LINEAR_RESIDUAL) || HOST_OP(dm, MODATTN_OP_LAYERNORM);
    return HOST_OP(dm, g->act != MODATTN_ACT_NONE ? MODATTN_OP_LINEAR_GELU : MODATTN_OP_LINEAR);
}

static int run_linear(const modattn__dev_model *dm, const modattn_op_linear_args *g) {
    return linear_on_host(dm, g) ? modattn__device_host_linear(dm->dev, g) : modattn__device_linear(dm->dev, g);
}

struct modattn__dev_arena {
    modattn_buffer *x, *big, *att, *ids, *lens, *out;
    modattn_buffer *pos_ids; /* [max_T] (models with pos_offset) */
    int32_t *host_pos_ids;
    int64_t max_T, max_B, cap_rows; /* cap_rows: max_T rounded up to the row block */
    float *host_out; /* [max_B, dim] */
    float *host_x;   /* [cap_rows, H]: the hidden states read back for a token head (a device with its own memory) */
};

static modattn_act model_act(const modattn__model_config *c);

/* The model as the graph slot takes it; weights NULL when only the shape is asked. */
static void graph_of(const modattn__model_config *c, const char *identity, const modattn_graph_layer *layers,
                     modattn_encoder_graph *g) {
    memset(g, 0, sizeof *g);
    g->identity = identity;
    g->layers = c->layers, g->hidden = c->hidden, g->heads = c->heads, g->intermediate = c->intermediate;
    g->vocab = c->vocab, g->max_positions = c->max_positions - c->pos_offset, g->dim = (int64_t)c->dim;
    g->eps = c->ln_eps;
    g->act = model_act(c);
    g->pooling = c->pooling;
    g->normalize = c->normalize;
    g->precision = c->precision;
    g->pad_id = c->pad_id;
    g->layer = layers;
}

static int decoder_check(const modattn_device_iface *dev, modattn_ctx *ctx, const modattn__model_config *c,
                         const char *model_name, const char *name);

int modattn__dev_model_check(const modattn_device_iface *dev, modattn_ctx *ctx, const modattn__model_config *c,
                             const char *model_name, bool fallback, unsigned *host_ops, char (*why)[192]) {
    char name[32], reason[256];
    *host_ops = 0;
    modattn_device_format(dev->id, name, sizeof name);
    if (modattn__device_has_graph(dev)) { /* the whole encoder as one program: the device says */
        if (c->decoder)
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: its encoder graph runs BERT's post-LN "
                                 "layers (model_type \"%s\", a causal decoder, needs ops 'embed_plain', 'rms_norm', "
                                 "'rotary', 'glu' and causal GQA attention)", model_name, name, c->model_type);
        if (c->modern)
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: its encoder graph runs BERT's post-LN "
                                 "layers (model_type \"%s\" needs ops 'norm', 'rotary', 'glu' and windowed attention)",
                                 model_name, name, c->model_type);
        if (c->gte)
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: its encoder graph runs BERT's layers "
                                 "without rotary positions or a gated FFN (model_type \"%s\" needs ops 'rotary' and "
                                 "'glu')", model_name, name, c->model_type);
        if (c->nomic)
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: its encoder graph runs BERT's layers "
                                 "(model_type \"%s\" needs ops 'rotary' and 'glu')", model_name, name, c->model_type);
        if (c->pos_offset > 0) /* the graph numbers positions by index: no position id per token */
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: its encoder graph numbers positions "
                                 "by index (model_type \"%s\" needs op 'embed_positions')", model_name, name,
                                 c->model_type);
        if (c->alibi) /* the graph slot's layers are BERT's: no slopes, no gated FFN */
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: its encoder graph runs BERT's layers "
                                 "with position embeddings (jina_bert needs op 'attention' with ALiBi slopes%s)",
                                 model_name, name, c->jina_glu ? " and op 'glu'" : "");
        if (c->rel_buckets > 0) /* the graph slot has no attention mask to carry mpnet's bias */
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: its encoder graph takes no relative "
                                 "position bias (model_type \"%s\": op 'attention' with a mask)",
                                 model_name, name, c->model_type);
        modattn_encoder_graph g;
        graph_of(c, NULL, NULL, &g);
        if (!modattn__device_graph_supports(dev, &g, reason, sizeof reason))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: %s", model_name, name, reason);
        return 0;
    }
    if (!dev->ops)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: the device computes no encoder ops", model_name,
                             name);
    if (c->decoder) return decoder_check(dev, ctx, c, model_name, name);
    modattn_op need[16];
    int n = 0;
    need[n++] = MODATTN_OP_EMBED_GATHER, need[n++] = MODATTN_OP_LINEAR, need[n++] = MODATTN_OP_LINEAR_GELU;
    need[n++] = MODATTN_OP_LINEAR_RESIDUAL, need[n++] = MODATTN_OP_LAYERNORM, need[n++] = MODATTN_OP_ATTENTION;
    if (c->pooling & MODATTN_POOL_CLS) need[n++] = MODATTN_OP_POOL_CLS;
    if (c->pooling & MODATTN_POOL_MAX) need[n++] = MODATTN_OP_POOL_MAX;
    if (c->pooling & ~(unsigned)(MODATTN_POOL_CLS | MODATTN_POOL_MAX)) need[n++] = MODATTN_OP_POOL_MEAN;
    if (c->normalize) need[n++] = MODATTN_OP_L2_NORMALIZE;
    if (c->pos_offset > 0) need[n++] = MODATTN_OP_EMBED_POSITIONS;
    if (c->modern) need[n++] = MODATTN_OP_NORM, need[n++] = MODATTN_OP_ROTARY, need[n++] = MODATTN_OP_GLU;
    if (c->gte) need[n++] = MODATTN_OP_ROTARY, need[n++] = MODATTN_OP_GLU;
    if (c->nomic) need[n++] = c->rope_interleaved ? MODATTN_OP_ROTARY_INTERLEAVED : MODATTN_OP_ROTARY, need[n++] = MODATTN_OP_GLU;
    if (c->jina_glu) need[n++] = MODATTN_OP_GLU;
    if (c->precision != MODATTN_PRECISION_FP32) {
        /* a precision is the user's choice of arithmetic: never run in another one, nor moved */
        const modattn_op op = c->precision == MODATTN_PRECISION_BF16     ? MODATTN_OP_LINEAR_BF16
                              : c->precision == MODATTN_PRECISION_BF16X3 ? MODATTN_OP_LINEAR_BF16X3
                                                                         : MODATTN_OP_LINEAR_INT8;
        if (!modattn_device_supports_op(dev, op, reason, sizeof reason))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run in %s on %s: %s", model_name,
                                 modattn_precision_name(c->precision), name, reason);
    }
    for (int i = 0; i < n; i++) {
        if (modattn_device_supports_op(dev, need[i], reason, sizeof reason)) continue;
        /* norm, rotary and glu have no host fallback: the device runs them or refuses the model */
        const bool no_fallback = need[i] == MODATTN_OP_ATTENTION || need[i] == MODATTN_OP_NORM ||
                                 need[i] == MODATTN_OP_ROTARY || need[i] == MODATTN_OP_GLU ||
                                 need[i] == MODATTN_OP_ROTARY_INTERLEAVED;
        if (fallback && !no_fallback) {
            *host_ops |= 1u << need[i];
            snprintf(why[need[i]], sizeof why[need[i]], "%s", reason);
            continue;
        }
        return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: the device does not run the op '%s': %s%s",
                             model_name, name, modattn_op_name(need[i]), reason,
                             no_fallback ? "" : " (the host fallback option would run it on the host)");
    }
    /* attention: an implementation on this device must take the model's shape */
    modattn_attn_desc d = modattn_attn_desc_make(1, c->heads, c->heads, (int64_t)c->max_tokens, (int64_t)c->max_tokens,
                                                 c->hidden / c->heads, false);
    d.device = dev->id;
    d.has_kv_lens = true;
    d.inner_contiguous = true;
    if (c->rel_buckets > 0) { /* mpnet: the relative position bias, one [S, S] per head, every row */
        d.has_mask = true;
        d.mask_b = 1;
        d.mask_h = c->heads;
    }
    modattn_explain_entry e[64];
    size_t cnt;
    int st = modattn_explain(ctx, &d, e, 64, &cnt);
    if (st)
        return modattn__error_prefix(st, "%s cannot run on %s: op 'attention'%s", model_name, name,
                                    c->rel_buckets > 0 ? " with an additive mask (mpnet's relative position bias)" : "");
    bool any_local = false;
    for (int l = 0; c->modern && l < c->layers; l++) any_local |= c->local_layer[l];
    if (c->alibi) { /* jina_bert: one text per call (B = 1, no padding), ALiBi slopes */
        d = modattn_attn_desc_make(1, c->heads, c->heads, (int64_t)c->max_tokens, (int64_t)c->max_tokens,
                                   c->hidden / c->heads, false);
        d.device = dev->id;
        d.inner_contiguous = true;
        d.has_alibi = true;
        if ((st = modattn_explain(ctx, &d, e, 64, &cnt)))
            return modattn__error_prefix(st, "%s cannot run on %s: op 'attention' with ALiBi slopes "
                                        "(jina_bert, position_embedding_type \"alibi\")", model_name, name);
    }
    if (any_local) { /* the local layers: one text per call (B = 1, no padding), a window on both sides */
        d = modattn_attn_desc_make(1, c->heads, c->heads, (int64_t)c->max_tokens, (int64_t)c->max_tokens,
                                   c->hidden / c->heads, false);
        d.device = dev->id;
        d.inner_contiguous = true;
        if ((int64_t)c->window < (int64_t)c->max_tokens) {
            d.has_window = true;
            d.window_left = d.window_right = c->window;
        }
        if ((st = modattn_explain(ctx, &d, e, 64, &cnt)))
            return modattn__error_prefix(st, "%s cannot run on %s: op 'attention' with a sliding window of %d on "
                                        "each side (model_type \"%s\", local_attention)", model_name, name, c->window,
                                        c->model_type);
    }
    return 0;
}

static modattn_act model_act(const modattn__model_config *c) {
    return c->act == MODATTN__ACT_GELU_ERF ? MODATTN_ACT_GELU_ERF
           : c->act == MODATTN__ACT_GELU_TANH ? MODATTN_ACT_GELU_TANH
           : c->act == MODATTN__ACT_SILU      ? MODATTN_ACT_SILU
                                              : MODATTN_ACT_RELU;
}

/* A weight on the device: on a device with host memory the host array itself, else a copy. */
static int upload(const modattn_device_iface *dev, const float *src, size_t count, const char *what,
                  modattn_buffer **out) {
    return modattn__buffer_from_host(dev, src, count * sizeof(float), MODATTN_MEM_WEIGHTS, what, out);
}

/* Prepares a linear weight for the arena's strides; a plan holding its own copy replaces the
 * buffer. */
static int prepare(const modattn__dev_model *dm, modattn_buffer **w, int64_t N, int64_t K, int64_t lda, int64_t ldy,
                   bool accumulate, bool ln, modattn_act act, bool few_rows, const modattn_buffer *in_gamma,
                   const modattn_buffer *in_beta, modattn_linear_plan **out) {
    modattn_op_linear_args shape = {.w = *w, .lda = lda, .ldy = ldy, .N = N, .K = K, .accumulate = accumulate,
                                    .act = act, .gamma = ln ? *w : NULL, .few_rows = few_rows,
                                    .precision = dm->cfg.precision, .in_gamma = in_gamma, .in_beta = in_beta};
    *out = NULL;
    if (linear_on_host(dm, &shape)) return 0; /* the host reads the weight as it is */
    shape.gamma = NULL;
    int st = modattn__device_linear_prepare(dm->dev, &shape, out);
    if (st) return st;
    if (*out && (*out)->owns_weight) {
        modattn__buffer_free(*w);
        *w = NULL;
    }
    return 0;
}

bool modattn__dev_model_borrows(const modattn__dev_model *dm, const void *host) {
    if (!dm || !host || dm->graph) return false;
    for (int l = 0; l < dm->cfg.layers; l++) {
        const dev_layer *L = &dm->layers[l];
        const modattn_buffer *all[] = {L->wqkv, L->bqkv, L->wo, L->bo, L->ln1_g, L->ln1_b,
                                       L->w1, L->b1, L->w2, L->b2, L->ln2_g, L->ln2_b};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            if (all[i] && all[i]->borrowed && all[i]->host == host) return true;
    }
    const modattn_buffer *emb[] = {dm->word, dm->pos, dm->type0, dm->emb_g, dm->emb_b};
    for (size_t i = 0; i < sizeof emb / sizeof *emb; i++)
        if (emb[i] && emb[i]->borrowed && emb[i]->host == host) return true;
    return false;
}

bool modattn__dev_model_prepared(const modattn__dev_model *dm) {
    /* a plan, whether it holds a packed copy or reads the weight in place (oneDNN's jit GEMM on
     * AVX2: its row calls are as cheap per row for 64 rows as for 1024): asking for the copy here
     * sent such models back to budget-only batching, +42% CPU time on 300 short sentences */
    return dm && dm->cfg.layers > 0 && dm->layers && dm->layers[0].pqkv != NULL;
}

bool modattn__dev_model_plans_borrow(const modattn__dev_model *dm) {
    return modattn__dev_model_prepared(dm) && !dm->layers[0].pqkv->owns_weight;
}

void modattn__dev_model_free(modattn__dev_model *dm) {
    if (!dm) return;
    modattn__device_graph_unload(dm->dev, dm->graph);
    if (dm->layers)
        for (int l = 0; l < dm->cfg.layers; l++) {
            dev_layer *L = &dm->layers[l];
            modattn_buffer *all[] = {L->wqkv, L->bqkv, L->wo, L->bo, L->ln1_g, L->ln1_b,
                                     L->w1, L->b1, L->w2, L->b2, L->ln2_g, L->ln2_b};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++) modattn__buffer_free(all[i]);
            modattn__linear_plan_free(L->pqkv), modattn__linear_plan_free(L->po);
            modattn__linear_plan_free(L->p1), modattn__linear_plan_free(L->p2);
            modattn__buffer_free(L->qk_g);
        }
    modattn_free(dm->layers);
    modattn__buffer_free(dm->word), modattn__buffer_free(dm->pos), modattn__buffer_free(dm->type0);
    modattn__buffer_free(dm->emb_g), modattn__buffer_free(dm->emb_b), modattn__buffer_free(dm->bias);
    modattn__buffer_free(dm->pos_full);
    modattn__buffer_free(dm->fin_g), modattn__buffer_free(dm->fin_b);
    modattn__buffer_free(dm->rope_gc), modattn__buffer_free(dm->rope_gs);
    modattn__buffer_free(dm->rope_lc), modattn__buffer_free(dm->rope_ls);
    modattn_free(dm->alibi);
    modattn_free(dm);
}

int modattn__mpnet_bucket(int rel, int num_buckets, int max_distance) {
    /* ret = (n < 0) * half; n = |n|; exact below half / 2, else max_exact + (long)(log(n / max_exact)
     * / log(max_distance / max_exact) * (half - max_exact)), at most half - 1; n = -rel. Each step
     * in float32 as torch does it (the Python float divisor rounded to float32). */
    const int half = num_buckets / 2, max_exact = half / 2;
    const int n = rel < 0 ? -rel : rel;
    int ret = -rel < 0 ? half : 0;
    if (n < max_exact || max_exact < 1) return ret + n;
    const float den = (float)log((double)max_distance / (double)max_exact);
    const float v = logf((float)n / (float)max_exact) / den * (float)(half - max_exact);
    long big = (long)max_exact + (v < 1e9f ? (long)v : 1000000000L);
    if (big > half - 1) big = half - 1;
    return ret + (int)big;
}

/* mpnet: bias[h, i, j] = rel_bias[bucket(j - i), h] for i, j < S, uploaded once. */
static int upload_bias(modattn__dev_model *dm, const float *rel_bias) {
    const modattn__model_config *c = &dm->cfg;
    const int64_t S = (int64_t)c->max_tokens, nh = c->heads;
    float *t = modattn__malloc((size_t)(nh * S * S) * sizeof(float), MODATTN_MEM_WEIGHTS);
    if (!t) return modattn__mem_last_status();
    int *bucket = modattn__malloc((size_t)(2 * S) * sizeof(int), MODATTN_MEM_OTHER);
    if (!bucket) {
        modattn_free(t);
        return modattn__mem_last_status();
    }
    for (int64_t r = -(S - 1); r <= S - 1; r++)
        bucket[r + S - 1] = modattn__mpnet_bucket((int)r, c->rel_buckets, c->rel_max_distance);
    for (int64_t h = 0; h < nh; h++)
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < S; j++) t[(h * S + i) * S + j] = rel_bias[bucket[j - i + S - 1] * nh + h];
    modattn_free(bucket);
    /* a copy even on a device with host memory: the table is the model's own */
    int st = modattn__buffer_alloc(dm->dev, (size_t)(nh * S * S) * sizeof(float), MODATTN_MEM_WEIGHTS,
                                  "relative position bias", &dm->bias);
    if (!st) st = modattn__buffer_write(dm->bias, 0, t, (size_t)(nh * S * S) * sizeof(float));
    modattn_free(t);
    dm->bias_s = S;
    return st;
}

/* Rotary tables for one base: cos and sin of p * inv_freq[j], [max_tokens, D/2], as transformers'
 * ModernBertRotaryEmbedding computes them in float32: inv_freq = 1 / base^(2j / D), then the
 * product with the position and cos / sin of it. A copy on the device. */
static int upload_rope(modattn__dev_model *dm, double base, modattn_buffer **cs, modattn_buffer **sn) {
    const modattn__model_config *c = &dm->cfg;
    const int64_t P = (int64_t)c->max_tokens, D = c->decoder ? c->head_dim : c->hidden / c->heads, half = D / 2;
    const size_t bytes = (size_t)(P * half) * sizeof(float);
    float *tc = modattn__malloc(bytes, MODATTN_MEM_WEIGHTS), *ts = modattn__malloc(bytes, MODATTN_MEM_WEIGHTS);
    int st = tc && ts ? 0 : modattn__mem_last_status();
    /* gte's fixed NTK (the Hub's NTKScalingRotaryEmbedding, applied to every position): the base times
     * the factor, then inv_freq / factor^(2 / D) (a float64 scalar, divided in float32) */
    const double ntk = c->gte && c->rope_ntk > 0.0 ? c->rope_ntk : 1.0;
    const float ntk_div = (float)pow(ntk, 2.0 / (double)D);
    if (ntk != 1.0) base *= ntk;
    for (int64_t j = 0; !st && j < half; j++) {
        float inv = 1.0f / powf((float)base, (float)(2 * j) / (float)D);
        if (ntk != 1.0) inv /= ntk_div;
        for (int64_t p = 0; p < P; p++) {
            const float f = (float)p * inv;
            tc[p * half + j] = cosf(f), ts[p * half + j] = sinf(f);
        }
    }
    if (!st) st = modattn__buffer_alloc(dm->dev, bytes, MODATTN_MEM_WEIGHTS, "rotary cos table", cs);
    if (!st) st = modattn__buffer_write(*cs, 0, tc, bytes);
    if (!st) st = modattn__buffer_alloc(dm->dev, bytes, MODATTN_MEM_WEIGHTS, "rotary sin table", sn);
    if (!st) st = modattn__buffer_write(*sn, 0, ts, bytes);
    modattn_free(tc), modattn_free(ts);
    return st;
}

/* ---- qwen3, qwen2 (model/arch_qwen.c): causal decoder layers */

/* The decoder's ops on `dev`, and attention of its shape: causal, GQA, one text per call. */
static int decoder_check(const modattn_device_iface *dev, modattn_ctx *ctx, const modattn__model_config *c,
                         const char *model_name, const char *name) {
    char reason[256];
    const modattn_op need[] = {MODATTN_OP_EMBED_GATHER, MODATTN_OP_EMBED_PLAIN, MODATTN_OP_LINEAR,
                               MODATTN_OP_LINEAR_RESIDUAL, MODATTN_OP_NORM, MODATTN_OP_RMS_NORM,
                               MODATTN_OP_ROTARY, MODATTN_OP_GLU, MODATTN_OP_POOL_MEAN, MODATTN_OP_L2_NORMALIZE};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        if (need[i] == MODATTN_OP_L2_NORMALIZE && !c->normalize) continue;
        if (!modattn_device_supports_op(dev, need[i], reason, sizeof reason))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: the device does not run the op '%s': %s "
                                 "(model_type \"%s\")", model_name, name, modattn_op_name(need[i]), reason,
                                 c->model_type);
    }
    if (c->precision != MODATTN_PRECISION_FP32)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s cannot run in %s: model_type \"%s\" runs in fp32 only",
                             model_name, modattn_precision_name(c->precision), c->model_type);
    modattn_attn_desc d = modattn_attn_desc_make(1, c->heads, c->kv_heads, (int64_t)c->max_tokens,
                                                 (int64_t)c->max_tokens, c->head_dim, true);
    d.device = dev->id;
    d.inner_contiguous = true;
    modattn_explain_entry e[64];
    size_t cnt;
    int st = modattn_explain(ctx, &d, e, 64, &cnt);
    if (st)
        return modattn__error_prefix(st, "%s cannot run on %s: op 'attention', causal with %d query heads over %d "
                                    "key/value heads (model_type \"%s\")", model_name, name, c->heads, c->kv_heads,
                                    c->model_type);
    return 0;
}

/* One decoder layer's weights on the device: QKV [N, H] (N = (heads + 2 kv_heads) D), o_proj
 * [H, heads D], gate|up [2I, H], down [H, I]; the norms' weights and QK-norm's tiled weights. */
static int decoder_upload(modattn__dev_model *dm, const modattn__layer_weights *w, dev_layer *L, bool prepare_weights) {
    const modattn__model_config *c = &dm->cfg;
    const modattn_device_iface *dev = dm->dev;
    const size_t H = (size_t)c->hidden, I = (size_t)c->intermediate, QD = (size_t)c->heads * (size_t)c->head_dim,
                 N = QD + 2 * (size_t)c->kv_heads * (size_t)c->head_dim;
    const int64_t h = (int64_t)H, i = (int64_t)I, qd = (int64_t)QD, n = (int64_t)N;
    const bool few = !prepare_weights;
    int st;
    if ((st = upload(dev, w->ln1_g, H, "input_layernorm", &L->ln1_g)) ||
        (st = upload(dev, w->ln1_b, H, "input_layernorm (zeros)", &L->ln1_b)) ||
        (st = upload(dev, w->wqkv, N * H, "QKV weight", &L->wqkv)) || (st = upload(dev, w->bqkv, N, "QKV bias", &L->bqkv)) ||
        (st = upload(dev, w->wo, H * QD, "o_proj weight", &L->wo)) || (st = upload(dev, w->bo, H, "o_proj bias", &L->bo)) ||
        (st = upload(dev, w->w1, 2 * I * H, "gate_proj|up_proj weight", &L->w1)) ||
        (st = upload(dev, w->b1, 2 * I, "gate_proj|up_proj bias (zeros)", &L->b1)) ||
        (st = upload(dev, w->w2, H * I, "down_proj weight", &L->w2)) ||
        (st = upload(dev, w->b2, H, "down_proj bias (zeros)", &L->b2)) ||
        (st = upload(dev, w->ln2_g, H, "post_attention_layernorm", &L->ln2_g)) ||
        (st = upload(dev, w->ln2_b, H, "post_attention_layernorm (zeros)", &L->ln2_b)))
        return st;
    if ((st = prepare(dm, &L->wqkv, n, h, h, n, false, false, MODATTN_ACT_NONE, few, NULL, NULL, &L->pqkv)) ||
        (st = prepare(dm, &L->wo, h, qd, qd, h, true, false, MODATTN_ACT_NONE, few, NULL, NULL, &L->po)) ||
        (st = prepare(dm, &L->w1, 2 * i, h, h, 2 * i, false, false, MODATTN_ACT_NONE, few, NULL, NULL, &L->p1)) ||
        (st = prepare(dm, &L->w2, h, i, 2 * i, h, true, false, MODATTN_ACT_NONE, few, NULL, NULL, &L->p2)))
        return modattn__error_prefix(st, "preparing the GEMMs");
    return 0;
}

int modattn__dev_model_decoder_qk_norm(modattn__dev_model *dm, const float *const *qk_g) {
    const modattn__model_config *c = &dm->cfg;
    if (!c->decoder || !c->qk_norm || dm->graph) return 0;
    const size_t n = (size_t)(c->heads + c->kv_heads) * (size_t)c->head_dim;
    for (int l = 0; l < c->layers; l++) {
        if (!qk_g[l]) return modattn__error(MODATTN_EINTERNAL, "layer %d: no QK-norm weights", l);
        int st = upload(dm->dev, qk_g[l], n, "q_norm|k_norm", &dm->layers[l].qk_g);
        if (st) return modattn__error_prefix(st, "layer %d", l);
    }
    return 0;
}

int modattn__dev_model_create(const modattn_device_iface *dev, const modattn__model_config *c, const float *word,
                              const float *pos, const float *type0, const float *emb_g, const float *emb_b,
                              const float *rel_bias, const float *fin_g, const float *fin_b,
                              const modattn__layer_weights *lw, unsigned host_ops,
                              bool prepare_weights, const char *identity,
                              void (*layer_done)(void *arg, const modattn__dev_model *dm, int layer),
                              void *layer_done_arg, modattn__dev_model **out) {
    *out = NULL;
    modattn__dev_model *dm = modattn__calloc(1, sizeof *dm, MODATTN_MEM_OTHER);
    if (!dm) return modattn__mem_last_status();
    dm->dev = dev;
    dm->cfg = *c;
    dm->row_block = modattn__device_row_block(dev);
    dm->host_ops = host_ops; /* (the host copies are rounded to the host's row block there) */
    const size_t H = (size_t)c->hidden, I = (size_t)c->intermediate;
    int st;
    if (modattn__device_has_graph(dev)) { /* the device takes the whole model at once */
        modattn_encoder_graph g;
        graph_of(c, identity, lw, &g);
        g.word = word, g.pos = pos, g.type0 = type0, g.emb_g = emb_g, g.emb_b = emb_b;
        st = modattn__device_graph_load(dev, &g, &dm->graph);
        if (st) {
            modattn_free(dm);
            return st;
        }
        *out = dm;
        return 0;
    }
    if ((st = upload(dev, word, (size_t)c->vocab * H, "word embeddings", &dm->word)) ||
        (st = upload(dev, pos, (c->modern || c->gte || c->nomic || c->alibi || c->decoder ? c->max_tokens : (size_t)(c->max_positions - c->pos_offset)) * H,
                     "position embeddings", &dm->pos)) ||
        (st = upload(dev, type0, H, "token type embedding", &dm->type0)) ||
        (st = upload(dev, emb_g, H, "embeddings LayerNorm", &dm->emb_g)) ||
        (st = upload(dev, emb_b, H, "embeddings LayerNorm", &dm->emb_b)))
        goto fail;
    if (c->pos_offset > 0 &&
        (st = upload(dev, pos - (size_t)c->pos_offset * H, (size_t)c->max_positions * H, "position embeddings",
                     &dm->pos_full)))
        goto fail;
    if (c->decoder && (!fin_g || !fin_b || (st = upload(dev, fin_g, H, "final norm", &dm->fin_g)) ||
                       (st = upload(dev, fin_b, H, "final norm", &dm->fin_b)) ||
                       (st = upload_rope(dm, c->rope_theta, &dm->rope_gc, &dm->rope_gs)))) {
        if (!st) st = modattn__error(MODATTN_EINTERNAL, "no final norm for %s", c->model_type);
        goto fail;
    }
    if (c->modern) {
        if (!fin_g || !fin_b) {
            st = modattn__error(MODATTN_EINTERNAL, "no final norm for %s", c->model_type);
            goto fail;
        }
        if ((st = upload(dev, fin_g, H, "final norm", &dm->fin_g)) || (st = upload(dev, fin_b, H, "final norm", &dm->fin_b)) ||
            (st = upload_rope(dm, c->rope_global, &dm->rope_gc, &dm->rope_gs)) ||
            (st = upload_rope(dm, c->rope_local, &dm->rope_lc, &dm->rope_ls)))
            goto fail;
    }
    if (c->gte && (st = upload_rope(dm, c->rope_global, &dm->rope_gc, &dm->rope_gs))) goto fail;
    if (c->nomic && (st = upload_rope(dm, c->rope_global, &dm->rope_gc, &dm->rope_gs))) goto fail;
    if (c->alibi) {
        dm->alibi = modattn__malloc((size_t)c->heads * sizeof(float), MODATTN_MEM_OTHER);
        if (!dm->alibi) {
            st = modattn__mem_last_status();
            goto fail;
        }
        modattn__jina_slopes(c->heads, dm->alibi);
    }
    if (c->rel_buckets > 0) {
        if (!rel_bias) {
            st = modattn__error(MODATTN_EINTERNAL, "no relative position bias for %s", c->model_type);
            goto fail;
        }
        if ((st = upload_bias(dm, rel_bias))) goto fail;
    }
    dm->layers = modattn__calloc((size_t)c->layers, sizeof *dm->layers, MODATTN_MEM_OTHER);
    if (!dm->layers) {
        st = modattn__mem_last_status();
        goto fail;
    }
    for (int l = 0; l < c->layers; l++) {
        const modattn__layer_weights *w = &lw[l];
        dev_layer *L = &dm->layers[l];
        if (c->decoder) {
            if ((st = decoder_upload(dm, w, L, prepare_weights))) {
                st = modattn__error_prefix(st, "layer %d", l);
                goto fail;
            }
            if (layer_done) layer_done(layer_done_arg, dm, l);
            continue;
        }
        if (c->modern || c->jina_glu || c->gte || c->nomic) {
            /* a gated FFN: Wi is [2I, H] ([gate | up]) for the glu op, and the down GEMM reads lda 2I;
             * modernbert: pre-LN (its residual GEMMs carry no LayerNorm), layer 0 has no attn_norm */
            const int64_t h = (int64_t)H, i = (int64_t)I;
            const bool few = !prepare_weights;
            if ((w->ln1_g && ((st = upload(dev, w->ln1_g, H, "LayerNorm", &L->ln1_g)) ||
                              (st = upload(dev, w->ln1_b, H, "LayerNorm", &L->ln1_b)))) ||
                (st = upload(dev, w->wqkv, 3 * H * H, "QKV weight", &L->wqkv)) ||
                (st = upload(dev, w->bqkv, 3 * H, "QKV bias", &L->bqkv)) ||
                (st = upload(dev, w->wo, H * H, "attention output weight", &L->wo)) ||
                (st = upload(dev, w->bo, H, "attention output bias", &L->bo)) ||
                (st = upload(dev, w->w1, 2 * I * H, "FFN Wi weight", &L->w1)) ||
                (st = upload(dev, w->b1, 2 * I, "FFN Wi bias", &L->b1)) ||
                (st = upload(dev, w->w2, H * I, "FFN Wo weight", &L->w2)) || (st = upload(dev, w->b2, H, "FFN Wo bias", &L->b2)) ||
                (st = upload(dev, w->ln2_g, H, "LayerNorm", &L->ln2_g)) || (st = upload(dev, w->ln2_b, H, "LayerNorm", &L->ln2_b)))
                goto fail;
            if ((st = prepare(dm, &L->wqkv, 3 * h, h, h, 3 * h, false, false, MODATTN_ACT_NONE, few, NULL, NULL, &L->pqkv)) ||
                (st = prepare(dm, &L->wo, h, h, h, h, true, !c->modern, MODATTN_ACT_NONE, few, NULL, NULL, &L->po)) ||
                (st = prepare(dm, &L->w1, 2 * i, h, h, 2 * i, false, false, MODATTN_ACT_NONE, few, NULL, NULL, &L->p1)) ||
                (st = prepare(dm, &L->w2, h, i, 2 * i, h, true, !c->modern, MODATTN_ACT_NONE, few, NULL, NULL, &L->p2))) {
                st = modattn__error_prefix(st, "layer %d: preparing the GEMMs", l);
                goto fail;
            }
            if (layer_done) layer_done(layer_done_arg, dm, l);
            continue;
        }
        if ((st = upload(dev, w->wqkv, 3 * H * H, "QKV weight", &L->wqkv)) ||
            (st = upload(dev, w->bqkv, 3 * H, "QKV bias", &L->bqkv)) ||
            (st = upload(dev, w->wo, H * H, "attention output weight", &L->wo)) ||
            (st = upload(dev, w->bo, H, "attention output bias", &L->bo)) ||
            (st = upload(dev, w->ln1_g, H, "LayerNorm", &L->ln1_g)) || (st = upload(dev, w->ln1_b, H, "LayerNorm", &L->ln1_b)) ||
            (st = upload(dev, w->w1, I * H, "FFN up weight", &L->w1)) || (st = upload(dev, w->b1, I, "FFN up bias", &L->b1)) ||
            (st = upload(dev, w->w2, H * I, "FFN down weight", &L->w2)) || (st = upload(dev, w->b2, H, "FFN down bias", &L->b2)) ||
            (st = upload(dev, w->ln2_g, H, "LayerNorm", &L->ln2_g)) || (st = upload(dev, w->ln2_b, H, "LayerNorm", &L->ln2_b)))
            goto fail;
        /* the strides are the arena's: x and att [.., H], big [.., 3H] for QKV and [.., I] for the FFN */
        const int64_t h = (int64_t)H, i = (int64_t)I;
        const modattn_act act = model_act(c);
        /* packed for throughput, or (few inputs: a query) for no set-up cost */
        const bool few = !prepare_weights;
        /* FFN up reads the output of LayerNorm 1, which int8 folds into the weight (min cosine
         * to fp32 on 400 sentences of bench/corpus_sentences.txt: 0.969 -> 0.977). Folding the
         * previous LayerNorm into QKV the same way measured worse (0.956), so QKV does not. */
        if ((st = prepare(dm, &L->wqkv, 3 * h, h, h, 3 * h, false, false, MODATTN_ACT_NONE, few, NULL, NULL, &L->pqkv)) ||
            (st = prepare(dm, &L->wo, h, h, h, h, true, true, MODATTN_ACT_NONE, few, NULL, NULL, &L->po)) ||
            (st = prepare(dm, &L->w1, i, h, h, i, false, false, act, few, L->ln1_g, L->ln1_b, &L->p1)) ||
            (st = prepare(dm, &L->w2, h, i, i, h, true, true, MODATTN_ACT_NONE, few, NULL, NULL, &L->p2))) {
            st = modattn__error_prefix(st, "layer %d: preparing the GEMMs", l);
            goto fail;
        }
        if (layer_done) layer_done(layer_done_arg, dm, l);
    }
    *out = dm;
    return 0;
fail:
    modattn__dev_model_free(dm);
    return modattn__error_prefix(st, "uploading the weights");
}

void modattn__dev_arena_free(modattn__dev_arena *a) {
    if (!a) return;
    modattn__buffer_free(a->x), modattn__buffer_free(a->big), modattn__buffer_free(a->att);
    modattn__buffer_free(a->ids), modattn__buffer_free(a->lens), modattn__buffer_free(a->out);
    modattn__buffer_free(a->pos_ids);
    modattn_free(a->host_pos_ids);
    modattn_free(a->host_out);
    modattn_free(a->host_x);
    modattn_free(a);
}

int modattn__dev_arena_create(modattn__dev_model *dm, int64_t max_T, int64_t max_B, modattn__dev_arena **out) {
    *out = NULL;
    const modattn__model_config *c = &dm->cfg;
    const size_t H = (size_t)c->hidden, I = (size_t)c->intermediate * (c->modern || c->gte || c->nomic || c->jina_glu || c->decoder ? 2 : 1); /* Wi's 2I */
    size_t W = 3 * H > I ? 3 * H : I, AW = H; /* big's and att's row widths */
    if (c->decoder) { /* QKV of (heads + 2 kv_heads) D columns; attention's output of heads D */
        const size_t QD = (size_t)c->heads * (size_t)c->head_dim, N = QD + 2 * (size_t)c->kv_heads * (size_t)c->head_dim;
        W = N > I ? N : I;
        AW = QD > H ? QD : H;
    }
    modattn__dev_arena *a = modattn__calloc(1, sizeof *a, MODATTN_MEM_OTHER);
    if (!a) return modattn__mem_last_status();
    a->max_T = max_T, a->max_B = max_B;
    if (dm->graph) { /* the device keeps its own activations: only the pooled vectors come back */
        a->host_out = modattn__malloc((size_t)max_B * c->dim * sizeof(float), MODATTN_MEM_ACTIVATIONS);
        if (!a->host_out) {
            modattn_free(a);
            return modattn__mem_last_status();
        }
        *out = a;
        return 0;
    }
    a->cap_rows = (max_T + dm->row_block - 1) / dm->row_block * dm->row_block;
    const modattn_device_iface *dev = dm->dev;
    const size_t T = (size_t)a->cap_rows;
    int st;
    if ((st = modattn__buffer_alloc(dev, T * H * 4, MODATTN_MEM_ACTIVATIONS, "hidden states", &a->x)) ||
        (st = modattn__buffer_alloc(dev, T * W * 4, MODATTN_MEM_ACTIVATIONS, "QKV / FFN activations", &a->big)) ||
        (st = modattn__buffer_alloc(dev, T * AW * 4, MODATTN_MEM_ACTIVATIONS, "attention output", &a->att)) ||
        (st = modattn__buffer_alloc(dev, T * 4, MODATTN_MEM_ACTIVATIONS, "token ids", &a->ids)) ||
        (st = modattn__buffer_alloc(dev, (size_t)max_B * 4, MODATTN_MEM_ACTIVATIONS, "lengths", &a->lens)) ||
        (st = modattn__buffer_alloc(dev, (size_t)max_B * c->dim * 4, MODATTN_MEM_ACTIVATIONS, "pooled vectors", &a->out)) ||
        (dm->pos_full && (st = modattn__buffer_alloc(dev, T * 4, MODATTN_MEM_ACTIVATIONS, "position ids", &a->pos_ids)))) {
        modattn__dev_arena_free(a);
        return st;
    }
    if (dm->pos_full) {
        a->host_pos_ids = modattn__malloc(T * sizeof(int32_t), MODATTN_MEM_ACTIVATIONS);
        if (!a->host_pos_ids) {
            modattn__dev_arena_free(a);
            return modattn__mem_last_status();
        }
    }
    /* Not zeroed here (it was, whole, on every embed call: 3% of a 50 x 210-token rerank): a
     * batch's rows [0, T) are written before they are read (embeddings, then each op's outputs),
     * and modattn__dev_forward zeroes x's and att's rows [T, Tr) of its last row block, the GEMM
     * inputs past T; big's rows there are only ever GEMM outputs of those zero rows (written, never
     * accumulated into, before any read), and no op reads a row past Tr. Padding rows never reach
     * a real row (a GEMM's rows are independent; attention clips keys by kv_lens). */
    a->host_out = modattn__malloc((size_t)max_B * c->dim * sizeof(float), MODATTN_MEM_ACTIVATIONS);
    if (!a->host_out) {
        modattn__dev_arena_free(a);
        return modattn__mem_last_status();
    }
    *out = a;
    return 0;
}

static modattn_tensor view(modattn_buffer *b, int64_t off_elems, int64_t B, int64_t nh, int64_t S, int64_t dh,
                           int64_t row_stride) {
    modattn_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = b;
    t.offset = off_elems * (int64_t)sizeof(float);
    t.data = b->host ? (char *)b->host + t.offset : NULL;
    t.device = b->device;
    t.dtype = MODATTN_DTYPE_F32;
    t.shape[0] = B, t.shape[1] = nh, t.shape[2] = S, t.shape[3] = dh;
    t.stride[0] = S * row_stride, t.stride[1] = dh, t.stride[2] = row_stride, t.stride[3] = 1;
    return t;
}

/* ModernBERT's layers (transformers' ModernBertEncoderLayer), x the embeddings' output:
 *   n = attn_norm(x) (layer 0: x itself); qkv = n Wqkv^T; rotary on q, k (the layer's base);
 *   x += Wo(attention(q, k, v)) (a local layer: within |i - j| <= window);
 *   n = mlp_norm(x); [u | g] = n Wi^T; x += Wo(act(u) * g);
 * then att = final_norm(x), which the pooling reads. att holds n between the ops. A local layer's
 * attention runs one text per call (B = 1, S = its length): the contract aligns a window to the
 * bottom-right of each row's keys (i' = i + L - Sq), which is position i only without padding; so
 * a text's call is the same alone or batched, and whole key tiles outside the window are skipped. */
static int modern_layers(modattn__dev_model *dm, const modattn__fwd_exec *x, modattn__dev_arena *a, int64_t B,
                         int64_t S, const int32_t *lens, const char *model_name) {
    const modattn__model_config *c = &dm->cfg;
    const modattn_device_iface *dev = dm->dev;
    const int64_t H = c->hidden, I = c->intermediate, T = B * S, nh = c->heads, dh = H / nh;
    modattn_pool *pool = x->pool;
    const modattn_act act = model_act(c);
    int st;
    for (int l = 0; l < c->layers; l++) {
        const dev_layer *L = &dm->layers[l];
        const bool local = c->local_layer[l];
        modattn_buffer *qin = a->x;
        if (L->ln1_g) {
            modattn_op_norm_args nr = {.x = a->x, .ldx = H, .y = a->att, .ldy = H, .gamma = L->ln1_g, .beta = L->ln1_b,
                                       .rows = T, .H = H, .eps = c->ln_eps, .lens = a->lens, .S = S, .pool = pool};
            if ((st = modattn__device_norm(dev, &nr))) return modattn__error_prefix(st, "%s: layer %d attn_norm", model_name, l);
            qin = a->att;
        }
        modattn_op_linear_args g = {.a = qin, .lda = H, .w = L->wqkv, .bias = L->bqkv, .y = a->big, .ldy = 3 * H,
                                    .rows = T, .N = 3 * H, .K = H, .lens = a->lens, .S = S, .plan = L->pqkv,
                                    .name = "encoder.qkv", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d Wqkv", model_name, l);
        modattn_op_rotary_args ro = {.x = a->big, .ldx = 3 * H, .cos = local ? dm->rope_lc : dm->rope_gc,
                                     .sin = local ? dm->rope_ls : dm->rope_gs, .rows = T, .heads = 2 * nh, .D = dh,
                                     .lens = a->lens, .S = S, .pool = pool};
        if ((st = modattn__device_rotary(dev, &ro))) return modattn__error_prefix(st, "%s: layer %d rotary", model_name, l);
        for (int64_t b = 0; b < (local ? B : 1); b++) {
            const int64_t Bc = local ? 1 : B, Sc = local ? lens[b] : S, q0 = local ? b * S * 3 * H : 0;
            if (Sc <= 0) continue;
            modattn_attn_call call;
            memset(&call, 0, sizeof call);
            call.q = view(a->big, q0, Bc, nh, Sc, dh, 3 * H);
            call.k = view(a->big, q0 + H, Bc, nh, Sc, dh, 3 * H);
            call.v = view(a->big, q0 + 2 * H, Bc, nh, Sc, dh, 3 * H);
            call.o = view(a->att, local ? b * S * H : 0, Bc, nh, Sc, dh, H);
            if (local) {
                call.window = true;
                call.window_left = call.window_right = c->window;
            } else {
                call.kv_lens = lens;
            }
            if ((st = x->session ? modattn_session_attention(x->session, &call) : modattn_attention(x->ctx, &call)))
                return modattn__error_prefix(st, "%s: layer %d attention", model_name, l);
        }
        g = (modattn_op_linear_args){.a = a->att, .lda = H, .w = L->wo, .bias = L->bo, .y = a->x, .ldy = H, .rows = T,
                                     .N = H, .K = H, .accumulate = true, .lens = a->lens, .S = S, .plan = L->po,
                                     .name = "encoder.attn_out", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d attention Wo", model_name, l);
        modattn_op_norm_args nr = {.x = a->x, .ldx = H, .y = a->att, .ldy = H, .gamma = L->ln2_g, .beta = L->ln2_b,
                                   .rows = T, .H = H, .eps = c->ln_eps, .lens = a->lens, .S = S, .pool = pool};
        if ((st = modattn__device_norm(dev, &nr))) return modattn__error_prefix(st, "%s: layer %d mlp_norm", model_name, l);
        g = (modattn_op_linear_args){.a = a->att, .lda = H, .w = L->w1, .bias = L->b1, .y = a->big, .ldy = 2 * I,
                                     .rows = T, .N = 2 * I, .K = H, .lens = a->lens, .S = S, .plan = L->p1,
                                     .name = "encoder.ffn_up", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d Wi", model_name, l);
        modattn_op_glu_args gl = {.x = a->big, .ldx = 2 * I, .rows = T, .N = I, .act = act, .lens = a->lens, .S = S,
                                  .pool = pool};
        if ((st = modattn__device_glu(dev, &gl))) return modattn__error_prefix(st, "%s: layer %d GLU", model_name, l);
        g = (modattn_op_linear_args){.a = a->big, .lda = 2 * I, .w = L->w2, .bias = L->b2, .y = a->x, .ldy = H,
                                     .rows = T, .N = H, .K = I, .accumulate = true, .lens = a->lens, .S = S,
                                     .plan = L->p2, .name = "encoder.ffn_down", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d mlp Wo", model_name, l);
    }
    modattn_op_norm_args nr = {.x = a->x, .ldx = H, .y = a->att, .ldy = H, .gamma = dm->fin_g, .beta = dm->fin_b,
                               .rows = T, .H = H, .eps = c->ln_eps, .lens = a->lens, .S = S, .pool = pool};
    if ((st = modattn__device_norm(dev, &nr))) return modattn__error_prefix(st, "%s: final_norm", model_name);
    return 0;
}

/* Qwen3's / Qwen2's decoder layers (transformers' Qwen3DecoderLayer), x the token embeddings:
 *   n = input_layernorm(x) (RMSNorm); qkv = n Wqkv^T + b; Q, K = RMSNorm per head (qwen3's q_norm,
 *   k_norm: one grouped norm over the row's Q and K heads); rotary on Q and K (rope_theta);
 *   x += o_proj(causal attention(q, k, v)) (GQA: kv_heads key/value heads);
 *   n = post_attention_layernorm(x); [g | u] = n Wgu^T; x += down_proj(silu(g) * u);
 * then att = norm(x), which the pooling (lasttoken) reads. Attention runs one text per call (B = 1,
 * S = its length): the contract aligns causal masks to the bottom-right of each row's keys, which is
 * position i only without padding; so a text's call is the same alone or batched. */
static int decoder_layers(modattn__dev_model *dm, const modattn__fwd_exec *x, modattn__dev_arena *a, int64_t B,
                          int64_t S, const int32_t *lens, const char *model_name) {
    const modattn__model_config *c = &dm->cfg;
    const modattn_device_iface *dev = dm->dev;
    const int64_t H = c->hidden, I = c->intermediate, T = B * S, nh = c->heads, kvh = c->kv_heads, D = c->head_dim;
    const int64_t QD = nh * D, N = QD + 2 * kvh * D;
    modattn_pool *pool = x->pool;
    int st;
    for (int l = 0; l < c->layers; l++) {
        const dev_layer *L = &dm->layers[l];
        modattn_op_norm_args nr = {.x = a->x, .ldx = H, .y = a->att, .ldy = H, .gamma = L->ln1_g, .beta = L->ln1_b,
                                   .rows = T, .H = H, .eps = c->ln_eps, .lens = a->lens, .S = S, .pool = pool,
                                   .rms = true};
        if ((st = modattn__device_norm(dev, &nr)))
            return modattn__error_prefix(st, "%s: layer %d input_layernorm", model_name, l);
        modattn_op_linear_args g = {.a = a->att, .lda = H, .w = L->wqkv, .bias = L->bqkv, .y = a->big, .ldy = N,
                                    .rows = T, .N = N, .K = H, .lens = a->lens, .S = S, .plan = L->pqkv,
                                    .name = "encoder.qkv", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d q/k/v_proj", model_name, l);
        if (L->qk_g) { /* in place on the row's Q and K heads, each head's D on its own */
            nr = (modattn_op_norm_args){.x = a->big, .ldx = N, .y = a->big, .ldy = N, .gamma = L->qk_g,
                                        .beta = L->bqkv, .rows = T, .H = QD + kvh * D, .eps = c->ln_eps,
                                        .lens = a->lens, .S = S, .pool = pool, .rms = true, .group = D};
            if ((st = modattn__device_norm(dev, &nr)))
                return modattn__error_prefix(st, "%s: layer %d q_norm/k_norm", model_name, l);
        }
        modattn_op_rotary_args ro = {.x = a->big, .ldx = N, .cos = dm->rope_gc, .sin = dm->rope_gs, .rows = T,
                                     .heads = nh + kvh, .D = D, .lens = a->lens, .S = S, .pool = pool};
        if ((st = modattn__device_rotary(dev, &ro))) return modattn__error_prefix(st, "%s: layer %d rotary", model_name, l);
        for (int64_t b = 0; b < B; b++) {
            if (lens[b] <= 0) continue;
            const int64_t q0 = b * S * N;
            modattn_attn_call call;
            memset(&call, 0, sizeof call);
            call.q = view(a->big, q0, 1, nh, lens[b], D, N);
            call.k = view(a->big, q0 + QD, 1, kvh, lens[b], D, N);
            call.v = view(a->big, q0 + QD + kvh * D, 1, kvh, lens[b], D, N);
            call.o = view(a->att, b * S * QD, 1, nh, lens[b], D, QD);
            call.causal = true;
            if ((st = x->session ? modattn_session_attention(x->session, &call) : modattn_attention(x->ctx, &call)))
                return modattn__error_prefix(st, "%s: layer %d attention", model_name, l);
        }
        g = (modattn_op_linear_args){.a = a->att, .lda = QD, .w = L->wo, .bias = L->bo, .y = a->x, .ldy = H, .rows = T,
                                     .N = H, .K = QD, .accumulate = true, .lens = a->lens, .S = S, .plan = L->po,
                                     .name = "encoder.attn_out", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d o_proj", model_name, l);
        nr = (modattn_op_norm_args){.x = a->x, .ldx = H, .y = a->att, .ldy = H, .gamma = L->ln2_g, .beta = L->ln2_b,
                                    .rows = T, .H = H, .eps = c->ln_eps, .lens = a->lens, .S = S, .pool = pool,
                                    .rms = true};
        if ((st = modattn__device_norm(dev, &nr)))
            return modattn__error_prefix(st, "%s: layer %d post_attention_layernorm", model_name, l);
        g = (modattn_op_linear_args){.a = a->att, .lda = H, .w = L->w1, .bias = L->b1, .y = a->big, .ldy = 2 * I,
                                     .rows = T, .N = 2 * I, .K = H, .lens = a->lens, .S = S, .plan = L->p1,
                                     .name = "encoder.ffn_up", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d gate_proj|up_proj", model_name, l);
        modattn_op_glu_args gl = {.x = a->big, .ldx = 2 * I, .rows = T, .N = I, .act = MODATTN_ACT_SILU,
                                  .lens = a->lens, .S = S, .pool = pool};
        if ((st = modattn__device_glu(dev, &gl))) return modattn__error_prefix(st, "%s: layer %d SwiGLU", model_name, l);
        g = (modattn_op_linear_args){.a = a->big, .lda = 2 * I, .w = L->w2, .bias = L->b2, .y = a->x, .ldy = H,
                                     .rows = T, .N = H, .K = I, .accumulate = true, .lens = a->lens, .S = S,
                                     .plan = L->p2, .name = "encoder.ffn_down", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d down_proj", model_name, l);
    }
    modattn_op_norm_args nr = {.x = a->x, .ldx = H, .y = a->att, .ldy = H, .gamma = dm->fin_g, .beta = dm->fin_b,
                               .rows = T, .H = H, .eps = c->ln_eps, .lens = a->lens, .S = S, .pool = pool, .rms = true};
    if ((st = modattn__device_norm(dev, &nr))) return modattn__error_prefix(st, "%s: norm", model_name);
    return 0;
}

/* The last hidden states of each row to the token head (host memory: in place; else read back once). */
static int token_head(modattn__dev_model *dm, const modattn__fwd_exec *x, modattn__dev_arena *a, modattn_buffer *src,
                      int64_t B, int64_t S, const int32_t *lens) {
    const size_t H = (size_t)dm->cfg.hidden, T = (size_t)(B * S);
    const float *h = src->host;
    if (!h) {
        if (!a->host_x) {
            a->host_x = modattn__malloc((size_t)a->cap_rows * H * sizeof(float), MODATTN_MEM_ACTIVATIONS);
            if (!a->host_x) return modattn__mem_last_status();
        }
        int st = modattn__buffer_read(src, 0, a->host_x, T * H * sizeof(float));
        if (st) return st;
        h = a->host_x;
    }
    for (int64_t b = 0; b < B; b++) {
        int st = x->head->row(x->head->ud, x->inputs[b], h + (size_t)(b * S) * H, (size_t)lens[b], x->pool);
        if (st) return st;
    }
    return 0;
}

int modattn__dev_forward(modattn__dev_model *dm, const modattn__fwd_exec *x, modattn__dev_arena *a, int64_t B,
                         int64_t S, const int32_t *ids, const int32_t *lens, float *const *outs, const char *model_name) {
    const modattn__model_config *c = &dm->cfg;
    const modattn_device_iface *dev = dm->dev;
    const int64_t H = c->hidden, I = c->intermediate, T = B * S, nh = c->heads, dh = H / nh;
    if (T > a->max_T || B > a->max_B) return modattn__error(MODATTN_EINTERNAL, "device batch larger than its arena");
    uint64_t t0 = modattn__trace_begin();
    int st;
    if (dm->graph) {
        if (x->head)
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: this device runs the encoder as one graph, which gives "
                                 "pooled vectors only (a token head needs every token's hidden state)", model_name);
        if ((st = modattn__device_graph_forward(dev, dm->graph, B, S, ids, lens, a->host_out)))
            return modattn__error_prefix(st, "%s", model_name);
        for (int64_t b = 0; b < B; b++) memcpy(outs[b], a->host_out + b * (int64_t)c->dim, c->dim * sizeof(float));
        return 0;
    }
    if ((st = modattn__buffer_write(a->ids, 0, ids, (size_t)T * 4)) || (st = modattn__buffer_write(a->lens, 0, lens, (size_t)B * 4)))
        return st;
    /* the rows of the last row block past this batch's T: zero (an earlier, larger batch left its
     * rows there, or nothing yet: the arena is not zeroed); big's are only ever written by GEMMs of
     * these zero rows before they are read */
    const int64_t Tr = (T + dm->row_block - 1) / dm->row_block * dm->row_block;
    if (Tr > T && ((st = modattn__buffer_fill(a->x, (size_t)(T * H) * 4, 0, (size_t)((Tr - T) * H) * 4)) ||
                   (st = modattn__buffer_fill(a->att, (size_t)(T * H) * 4, 0, (size_t)((Tr - T) * H) * 4))))
        return st;
    modattn_pool *pool = x->pool;
    modattn_op_embed_args e = {.ids = a->ids, .lens = a->lens, .word = dm->word, .pos = dm->pos, .type0 = dm->type0,
                               .gamma = dm->emb_g, .beta = dm->emb_b, .x = a->x, .B = B, .S = S, .H = H,
                               .eps = c->ln_eps, .pool = pool, .plain = c->decoder};
    /* XLMRobertaEmbeddings / MPNetEmbeddings: position = pad_id + (real tokens up to and including
     * this one), pad_id itself for the padding token: a text holding that token (it is in the
     * vocabulary) skips a position there. Rare: only such batches carry a position per token. */
    bool pids = false;
    if (dm->pos_full) {
        for (int64_t b = 0; b < B && !pids; b++)
            for (int64_t i = 0; i < lens[b] && !pids; i++) pids = ids[b * S + i] == c->pad_id;
        if (pids) {
            for (int64_t b = 0; b < B; b++) {
                int32_t seen = 0;
                for (int64_t i = 0; i < S; i++) {
                    const bool pad = i >= lens[b] || ids[b * S + i] == c->pad_id;
                    if (!pad) seen++;
                    a->host_pos_ids[b * S + i] = pad ? c->pad_id : c->pad_id + seen;
                }
            }
            if ((st = modattn__buffer_write(a->pos_ids, 0, a->host_pos_ids, (size_t)T * 4))) return st;
            e.pos = dm->pos_full;
            e.pos_ids = a->pos_ids;
        }
    }
    const bool embed_host = HOST_OP(dm, MODATTN_OP_EMBED_GATHER) || HOST_OP(dm, MODATTN_OP_LAYERNORM) || /* its LN */
                            (pids && HOST_OP(dm, MODATTN_OP_EMBED_POSITIONS));
    if ((st = embed_host ? modattn__device_host_embed(dev, &e) : modattn__device_embed(dev, &e)))
        return st;
    const modattn_act act = model_act(c);
    if (c->modern && (st = modern_layers(dm, x, a, B, S, lens, model_name))) return st;
    if (c->decoder && (st = decoder_layers(dm, x, a, B, S, lens, model_name))) return st;
    for (int l = 0; !c->modern && !c->decoder && l < c->layers; l++) {
        const dev_layer *L = &dm->layers[l];
        modattn_op_linear_args g = {.a = a->x, .lda = H, .w = L->wqkv, .bias = L->bqkv, .y = a->big, .ldy = 3 * H,
                                    .rows = T, .N = 3 * H, .K = H, .lens = a->lens, .S = S, .plan = L->pqkv,
                                    .name = "encoder.qkv", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d QKV", model_name, l);
        if (c->gte || c->nomic) { /* rotary on q and k: the first 2 x heads of each QKV row (NeoX, or GPT-J interleaved) */
            modattn_op_rotary_args ro = {.x = a->big, .ldx = 3 * H, .cos = dm->rope_gc, .sin = dm->rope_gs, .rows = T,
                                         .heads = 2 * nh, .D = dh, .lens = a->lens, .S = S, .pool = pool,
                                         .interleaved = c->rope_interleaved};
            if ((st = modattn__device_rotary(dev, &ro))) return modattn__error_prefix(st, "%s: layer %d rotary", model_name, l);
        }
        modattn_attn_call call;
        memset(&call, 0, sizeof call);
        call.q = view(a->big, 0, B, nh, S, dh, 3 * H);
        call.k = view(a->big, H, B, nh, S, dh, 3 * H);
        call.v = view(a->big, 2 * H, B, nh, S, dh, 3 * H);
        call.o = view(a->att, 0, B, nh, S, dh, H);
        call.kv_lens = lens;
        if (dm->alibi) { /* jina_bert: -slope * |i - j|, one text per call (B = 1, S = its length): the
                          * contract aligns ALiBi to i' = i + L - Sq, which is i only without padding */
            for (int64_t b = 0; b < B; b++) {
                if (lens[b] <= 0) continue;
                modattn_attn_call one;
                memset(&one, 0, sizeof one);
                one.q = view(a->big, b * S * 3 * H, 1, nh, lens[b], dh, 3 * H);
                one.k = view(a->big, b * S * 3 * H + H, 1, nh, lens[b], dh, 3 * H);
                one.v = view(a->big, b * S * 3 * H + 2 * H, 1, nh, lens[b], dh, 3 * H);
                one.o = view(a->att, b * S * H, 1, nh, lens[b], dh, H);
                one.alibi_slopes = dm->alibi;
                if ((st = x->session ? modattn_session_attention(x->session, &one) : modattn_attention(x->ctx, &one)))
                    return modattn__error_prefix(st, "%s: layer %d attention", model_name, l);
            }
        } else if (dm->bias) { /* [1, heads, S, S] of the [heads, Smax, Smax] table */
            const int64_t M = dm->bias_s;
            modattn_tensor *t = &call.mask;
            t->buffer = dm->bias;
            t->offset = 0;
            t->data = dm->bias->host;
            t->device = dm->bias->device;
            t->dtype = MODATTN_DTYPE_F32;
            t->shape[0] = 1, t->shape[1] = nh, t->shape[2] = S, t->shape[3] = S;
            t->stride[0] = nh * M * M, t->stride[1] = M * M, t->stride[2] = M, t->stride[3] = 1;
        }
        if (!dm->alibi && (st = x->session ? modattn_session_attention(x->session, &call) : modattn_attention(x->ctx, &call)))
            return modattn__error_prefix(st, "%s: layer %d attention", model_name, l);
        g = (modattn_op_linear_args){.a = a->att, .lda = H, .w = L->wo, .bias = L->bo, .y = a->x, .ldy = H, .rows = T,
                                     .N = H, .K = H, .accumulate = true, .gamma = L->ln1_g, .beta = L->ln1_b,
                                     .eps = c->ln_eps, .lens = a->lens, .S = S, .plan = L->po,
                                     .name = "encoder.attn_out", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d attention output", model_name, l);
        const bool gated = c->gte || c->nomic || c->jina_glu; /* [gate | up] from one GEMM, then the glu op */
        const int64_t I2 = gated ? 2 * I : I;
        g = (modattn_op_linear_args){.a = a->x, .lda = H, .w = L->w1, .bias = L->b1, .y = a->big, .ldy = I2, .rows = T,
                                     .N = I2, .K = H, .act = gated ? MODATTN_ACT_NONE : act, .lens = a->lens, .S = S, .plan = L->p1,
                                     .name = "encoder.ffn_up", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d FFN up", model_name, l);
        if (gated) {
            modattn_op_glu_args gl = {.x = a->big, .ldx = 2 * I, .rows = T, .N = I, .act = act, .lens = a->lens, .S = S,
                                      .pool = pool};
            if ((st = modattn__device_glu(dev, &gl))) return modattn__error_prefix(st, "%s: layer %d GLU", model_name, l);
        }
        g = (modattn_op_linear_args){.a = a->big, .lda = I2, .w = L->w2, .bias = L->b2, .y = a->x, .ldy = H, .rows = T,
                                     .N = H, .K = I, .accumulate = true, .gamma = L->ln2_g, .beta = L->ln2_b,
                                     .eps = c->ln_eps, .lens = a->lens, .S = S, .plan = L->p2,
                                     .name = "encoder.ffn_down", .pool = pool, .precision = c->precision};
        if ((st = run_linear(dm, &g))) return modattn__error_prefix(st, "%s: layer %d FFN down", model_name, l);
    }
    /* modernbert: the final norm's output, in att */
    const bool in_att = c->modern || c->decoder; /* the final norm's output */
    if (x->head) return token_head(dm, x, a, in_att ? a->att : a->x, B, S, lens);
    modattn_op_pool_args p = {.x = in_att ? a->att : a->x, .lens = a->lens, .B = B, .S = S, .H = H, .modes = c->pooling,
                              .normalize = c->normalize, .out = a->out, .dim = (int64_t)c->dim, .pool = pool};
    const bool pool_host = HOST_OP(dm, MODATTN_OP_POOL_MEAN) || HOST_OP(dm, MODATTN_OP_POOL_CLS) ||
                           HOST_OP(dm, MODATTN_OP_POOL_MAX) || HOST_OP(dm, MODATTN_OP_L2_NORMALIZE);
    if ((st = pool_host ? modattn__device_host_pool(dev, &p) : modattn__device_pool(dev, &p))) return st;
    if ((st = modattn__buffer_read(a->out, 0, a->host_out, (size_t)B * c->dim * sizeof(float)))) return st;
    for (int64_t b = 0; b < B; b++) memcpy(outs[b], a->host_out + b * (int64_t)c->dim, c->dim * sizeof(float));
    if (t0) {
        char shape[64];
        snprintf(shape, sizeof shape, "B=%lld S=%lld", (long long)B, (long long)S);
        const double fl = 2.0 * (double)T * (double)c->layers * ((double)(4 * H * H) + 2.0 * (double)H * (double)I);
        modattn__trace_end(t0, "encoder.forward", modattn_device_kind_name(dev->id.kind), shape, 0, fl);
    }
    return 0;
}
