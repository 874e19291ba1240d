/* model/encoder_device.c — the BERT encoder's forward pass on a device with its own memory
 * (OpenCL today; CUDA next), through the device layer only: this file never learns which kind
 * of device it runs on. Same layout as the host engine (model/encoder.c): token-major [B*S, H]
 * activations, the fused QKV GEMM's output viewed as strided Q/K/V for the dispatcher, padding
 * by kv_lens with padded rows kept at zero by every op. */
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"
#include "modattn/core.h"
#include "modattn/dispatch.h"

typedef struct dev_layer {
    modattn_buffer *wqkv, *bqkv, *wo, *bo, *ln1_g, *ln1_b, *w1, *b1, *w2, *b2, *ln2_g, *ln2_b;
} dev_layer;

struct modattn__dev_model {
    const modattn_device_iface *dev;
    modattn__model_config cfg;
    modattn_buffer *word, *pos, *type0, *emb_g, *emb_b;
    dev_layer *layers;
};

struct modattn__dev_arena {
    modattn_buffer *x, *big, *att, *ids, *lens, *out;
    int64_t max_T, max_B;
    float *host_out; /* [max_B, dim] */
};

int modattn__dev_model_check(const modattn_device_iface *dev, modattn_ctx *ctx, const modattn__model_config *c,
                             const char *model_name) {
    char name[32], reason[256];
    modattn_device_format(dev->id, name, sizeof name);
    if (!dev->ops)
        return modattn_error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: the device computes no encoder ops", model_name,
                             name);
    modattn_op need[16];
    int n = 0;
    need[n++] = MODATTN_OP_EMBED_GATHER, need[n++] = MODATTN_OP_LINEAR, need[n++] = MODATTN_OP_LINEAR_GELU;
    need[n++] = MODATTN_OP_LINEAR_RESIDUAL, need[n++] = MODATTN_OP_LAYERNORM, need[n++] = MODATTN_OP_ATTENTION;
    if (c->pooling & MODATTN_POOL_CLS) need[n++] = MODATTN_OP_POOL_CLS;
    if (c->pooling & MODATTN_POOL_MAX) need[n++] = MODATTN_OP_POOL_MAX;
    if (c->pooling & ~(unsigned)(MODATTN_POOL_CLS | MODATTN_POOL_MAX)) need[n++] = MODATTN_OP_POOL_MEAN;
    if (c->normalize) need[n++] = MODATTN_OP_L2_NORMALIZE;
    for (int i = 0; i < n; i++)
        if (!modattn_device_supports_op(dev, need[i], reason, sizeof reason))
            return modattn_error(MODATTN_EUNSUPPORTED, "%s cannot run on %s: the device does not run the op '%s': %s",
                                 model_name, name, modattn_op_name(need[i]), reason);
    /* attention: an implementation on this device must take the model's shape */
    modattn_attn_desc d = modattn_attn_desc_make(1, c->heads, c->heads, (int64_t)c->max_tokens, (int64_t)c->max_tokens,
                                                 c->hidden / c->heads, false);
    d.device = dev->id;
    d.has_kv_lens = true;
    d.inner_contiguous = true;
    modattn_explain_entry e[64];
    size_t cnt;
    int st = modattn_explain(ctx, &d, e, 64, &cnt);
    if (st) return modattn_error_prefix(st, "%s cannot run on %s: op 'attention'", model_name, name);
    return 0;
}

static int upload(const modattn_device_iface *dev, const float *src, size_t count, const char *what,
                  modattn_buffer **out) {
    int st = modattn_buffer_alloc(dev, count * sizeof(float), MODATTN_MEM_WEIGHTS, what, out);
    if (st) return st;
    return modattn_buffer_write(*out, 0, src, count * sizeof(float));
}

void modattn__dev_model_free(modattn__dev_model *dm) {
    if (!dm) return;
    if (dm->layers)
        for (int l = 0; l < dm->cfg.layers; l++) {
            dev_layer *L = &dm->layers[l];
            modattn_buffer *all[] = {L->wqkv, L->bqkv, L->wo, L->bo, L->ln1_g, L->ln1_b,
                                     L->w1, L->b1, L->w2, L->b2, L->ln2_g, L->ln2_b};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++) modattn_buffer_free(all[i]);
        }
    modattn_free(dm->layers);
    modattn_buffer_free(dm->word), modattn_buffer_free(dm->pos), modattn_buffer_free(dm->type0);
    modattn_buffer_free(dm->emb_g), modattn_buffer_free(dm->emb_b);
    modattn_free(dm);
}

int modattn__dev_model_create(const modattn_device_iface *dev, const modattn__model_config *c, const float *word,
                              const float *pos, const float *type0, const float *emb_g, const float *emb_b,
                              const modattn__layer_weights *lw, modattn__dev_model **out) {
    *out = NULL;
    modattn__dev_model *dm = modattn_calloc(1, sizeof *dm, MODATTN_MEM_OTHER);
    if (!dm) return modattn_mem_last_status();
    dm->dev = dev;
    dm->cfg = *c;
    const size_t H = (size_t)c->hidden, I = (size_t)c->intermediate;
    int st;
    if ((st = upload(dev, word, (size_t)c->vocab * H, "word embeddings", &dm->word)) ||
        (st = upload(dev, pos, (size_t)c->max_positions * H, "position embeddings", &dm->pos)) ||
        (st = upload(dev, type0, H, "token type embedding", &dm->type0)) ||
        (st = upload(dev, emb_g, H, "embeddings LayerNorm", &dm->emb_g)) ||
        (st = upload(dev, emb_b, H, "embeddings LayerNorm", &dm->emb_b)))
        goto fail;
    dm->layers = modattn_calloc((size_t)c->layers, sizeof *dm->layers, MODATTN_MEM_OTHER);
    if (!dm->layers) {
        st = modattn_mem_last_status();
        goto fail;
    }
    for (int l = 0; l < c->layers; l++) {
        const modattn__layer_weights *w = &lw[l];
        dev_layer *L = &dm->layers[l];
        if ((st = upload(dev, w->wqkv, 3 * H * H, "QKV weight", &L->wqkv)) ||
            (st = upload(dev, w->bqkv, 3 * H, "QKV bias", &L->bqkv)) ||
            (st = upload(dev, w->wo, H * H, "attention output weight", &L->wo)) ||
            (st = upload(dev, w->bo, H, "attention output bias", &L->bo)) ||
            (st = upload(dev, w->ln1_g, H, "LayerNorm", &L->ln1_g)) || (st = upload(dev, w->ln1_b, H, "LayerNorm", &L->ln1_b)) ||
            (st = upload(dev, w->w1, I * H, "FFN up weight", &L->w1)) || (st = upload(dev, w->b1, I, "FFN up bias", &L->b1)) ||
            (st = upload(dev, w->w2, H * I, "FFN down weight", &L->w2)) || (st = upload(dev, w->b2, H, "FFN down bias", &L->b2)) ||
            (st = upload(dev, w->ln2_g, H, "LayerNorm", &L->ln2_g)) || (st = upload(dev, w->ln2_b, H, "LayerNorm", &L->ln2_b)))
            goto fail;
    }
    *out = dm;
    return 0;
fail:
    modattn__dev_model_free(dm);
    return modattn_error_prefix(st, "uploading the weights");
}

void modattn__dev_arena_free(modattn__dev_arena *a) {
    if (!a) return;
    modattn_buffer_free(a->x), modattn_buffer_free(a->big), modattn_buffer_free(a->att);
    modattn_buffer_free(a->ids), modattn_buffer_free(a->lens), modattn_buffer_free(a->out);
    modattn_free(a->host_out);
    modattn_free(a);
}

int modattn__dev_arena_create(modattn__dev_model *dm, int64_t max_T, int64_t max_B, modattn__dev_arena **out) {
    *out = NULL;
    const modattn__model_config *c = &dm->cfg;
    const size_t H = (size_t)c->hidden, W = 3 * H > (size_t)c->intermediate ? 3 * H : (size_t)c->intermediate;
    modattn__dev_arena *a = modattn_calloc(1, sizeof *a, MODATTN_MEM_OTHER);
    if (!a) return modattn_mem_last_status();
    a->max_T = max_T, a->max_B = max_B;
    const modattn_device_iface *dev = dm->dev;
    const size_t T = (size_t)max_T;
    int st;
    if ((st = modattn_buffer_alloc(dev, T * H * 4, MODATTN_MEM_ACTIVATIONS, "hidden states", &a->x)) ||
        (st = modattn_buffer_alloc(dev, T * W * 4, MODATTN_MEM_ACTIVATIONS, "QKV / FFN activations", &a->big)) ||
        (st = modattn_buffer_alloc(dev, T * H * 4, MODATTN_MEM_ACTIVATIONS, "attention output", &a->att)) ||
        (st = modattn_buffer_alloc(dev, T * 4, MODATTN_MEM_ACTIVATIONS, "token ids", &a->ids)) ||
        (st = modattn_buffer_alloc(dev, (size_t)max_B * 4, MODATTN_MEM_ACTIVATIONS, "lengths", &a->lens)) ||
        (st = modattn_buffer_alloc(dev, (size_t)max_B * c->dim * 4, MODATTN_MEM_ACTIVATIONS, "pooled vectors", &a->out))) {
        modattn__dev_arena_free(a);
        return st;
    }
    a->host_out = modattn_malloc((size_t)max_B * c->dim * sizeof(float), MODATTN_MEM_ACTIVATIONS);
    if (!a->host_out) {
        modattn__dev_arena_free(a);
        return modattn_mem_last_status();
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

int modattn__dev_forward(modattn__dev_model *dm, modattn_ctx *ctx, modattn__dev_arena *a, int64_t B, int64_t S,
                         const int32_t *ids, const int32_t *lens, float *const *outs, const char *model_name) {
    const modattn__model_config *c = &dm->cfg;
    const modattn_device_iface *dev = dm->dev;
    const int64_t H = c->hidden, I = c->intermediate, T = B * S, nh = c->heads, dh = H / nh;
    if (T > a->max_T || B > a->max_B) return modattn_error(MODATTN_EINTERNAL, "device batch larger than its arena");
    uint64_t t0 = modattn_trace_begin();
    int st;
    if ((st = modattn_buffer_write(a->ids, 0, ids, (size_t)T * 4)) || (st = modattn_buffer_write(a->lens, 0, lens, (size_t)B * 4)))
        return st;
    modattn_op_embed_args e = {.ids = a->ids, .lens = a->lens, .word = dm->word, .pos = dm->pos, .type0 = dm->type0,
                               .gamma = dm->emb_g, .beta = dm->emb_b, .x = a->x, .B = B, .S = S, .H = H,
                               .eps = (float)c->ln_eps};
    if ((st = modattn_device_embed(dev, &e))) return st;
    const modattn_act act = c->act == MODATTN__ACT_GELU_ERF ? MODATTN_ACT_GELU_ERF
                            : c->act == MODATTN__ACT_GELU_TANH ? MODATTN_ACT_GELU_TANH
                                                               : MODATTN_ACT_RELU;
    for (int l = 0; l < c->layers; l++) {
        const dev_layer *L = &dm->layers[l];
        modattn_op_linear_args g = {.a = a->x, .lda = H, .w = L->wqkv, .bias = L->bqkv, .y = a->big, .ldy = 3 * H,
                                    .rows = T, .N = 3 * H, .K = H, .lens = a->lens, .S = S};
        if ((st = modattn_device_linear(dev, &g))) return modattn_error_prefix(st, "%s: layer %d QKV", model_name, l);
        modattn_attn_call call;
        memset(&call, 0, sizeof call);
        call.q = view(a->big, 0, B, nh, S, dh, 3 * H);
        call.k = view(a->big, H, B, nh, S, dh, 3 * H);
        call.v = view(a->big, 2 * H, B, nh, S, dh, 3 * H);
        call.o = view(a->att, 0, B, nh, S, dh, H);
        call.kv_lens = lens;
        if ((st = modattn_attention(ctx, &call))) return modattn_error_prefix(st, "%s: layer %d attention", model_name, l);
        g = (modattn_op_linear_args){.a = a->att, .lda = H, .w = L->wo, .bias = L->bo, .y = a->x, .ldy = H, .rows = T,
                                     .N = H, .K = H, .accumulate = true, .gamma = L->ln1_g, .beta = L->ln1_b,
                                     .eps = (float)c->ln_eps, .lens = a->lens, .S = S};
        if ((st = modattn_device_linear(dev, &g))) return modattn_error_prefix(st, "%s: layer %d attention output", model_name, l);
        g = (modattn_op_linear_args){.a = a->x, .lda = H, .w = L->w1, .bias = L->b1, .y = a->big, .ldy = I, .rows = T,
                                     .N = I, .K = H, .act = act, .lens = a->lens, .S = S};
        if ((st = modattn_device_linear(dev, &g))) return modattn_error_prefix(st, "%s: layer %d FFN up", model_name, l);
        g = (modattn_op_linear_args){.a = a->big, .lda = I, .w = L->w2, .bias = L->b2, .y = a->x, .ldy = H, .rows = T,
                                     .N = H, .K = I, .accumulate = true, .gamma = L->ln2_g, .beta = L->ln2_b,
                                     .eps = (float)c->ln_eps, .lens = a->lens, .S = S};
        if ((st = modattn_device_linear(dev, &g))) return modattn_error_prefix(st, "%s: layer %d FFN down", model_name, l);
    }
    modattn_op_pool_args p = {.x = a->x, .lens = a->lens, .B = B, .S = S, .H = H, .modes = c->pooling,
                              .normalize = c->normalize, .out = a->out, .dim = (int64_t)c->dim};
    if ((st = modattn_device_pool(dev, &p))) return st;
    if ((st = modattn_buffer_read(a->out, 0, a->host_out, (size_t)B * c->dim * sizeof(float)))) return st;
    for (int64_t b = 0; b < B; b++) memcpy(outs[b], a->host_out + b * (int64_t)c->dim, c->dim * sizeof(float));
    if (t0) {
        char shape[64];
        snprintf(shape, sizeof shape, "B=%lld S=%lld", (long long)B, (long long)S);
        const double fl = 2.0 * (double)T * (double)c->layers * ((double)(4 * H * H) + 2.0 * (double)H * (double)I);
        modattn_trace_end(t0, "encoder.forward", "device", shape, 0, fl);
    }
    return 0;
}
