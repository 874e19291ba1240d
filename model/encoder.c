/* model/encoder.c — the BERT-family encoder and the sentence-embedding pipeline around it:
 * tokenize -> sort by length -> batches under a token budget -> embeddings + LayerNorm ->
 * N x [fused QKV GEMM, attention through the dispatcher, output projection + residual + LayerNorm,
 * FFN (GELU) + residual + LayerNorm] -> pooling -> L2 normalisation -> outputs in input order.
 *
 * Layout: activations are token-major [B*S, H] (row b*S+i is token i of batch row b, padded to
 * the batch's longest text S). The QKV projection writes [B*S, 3H]; Q, K and V are strided views
 * of it ([B, heads, S, dh] with strides [S*3H, dh, 3H, 1]), and the attention output is written
 * as a view [B, heads, S, dh] of a [B*S, H] buffer, so no transpose or copy happens around
 * attention. Padding is handled by kv_lens alone; padded rows are zeroed by every pass, so
 * whatever an implementation does with them stays finite, and they never reach the pooling.
 *
 * Weights are used in place from the safetensors mapping (fp32, [out, in]: the GEMM takes them
 * transposed); only Q/K/V are concatenated once into one [3H, H] matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "model/model_internal.h"
#include "model/safetensors.h"
#include "modattn/core.h"
#include "modattn/dispatch.h"
#include "modattn/model.h"
#include "modattn/status.h"
#include "modattn/tokenizer.h"

typedef struct layer_w {
    float *wqkv;        /* [3H, H], owned */
    float *bqkv;        /* [3H], owned */
    const float *wo, *bo;       /* [H, H], [H] */
    const float *ln1_g, *ln1_b; /* [H] */
    const float *w1, *b1;       /* [I, H], [I] */
    const float *w2, *b2;       /* [H, I], [H] */
    const float *ln2_g, *ln2_b; /* [H] */
    /* prepared GEMMs (NULL with a BLAS that has none): qkv, output, FFN up, FFN down */
    modattn__gemm_plan *pqkv, *po, *p1, *p2;
} layer_w;

struct modattn_model {
    modattn_ctx *ctx; /* borrowed */
    modattn__model_config cfg;
    modattn_model_info info;
    char *dir, *name;
    modattn_st_file *st;
    modattn_tokenizer *tok;
    const float *word;   /* [vocab, H] */
    const float *pos;    /* [max_positions, H] */
    const float *type0;  /* [H]: token type 0 (single-sentence inputs) */
    const float *emb_g, *emb_b;
    layer_w *layers;
    float **owned;       /* weight copies (unaligned tensors), freed at close */
    size_t nowned;
    size_t batch_tokens;
    size_t gemm_scratch; /* largest scratch of any plan, rounded up to MODATTN_ALIGN */
    /* a device with its own memory (modattn_model_load_ex): the weights live there and every
     * batch runs there (encoder_device.c); NULL: the host engine below */
    const modattn_device_iface *dev;
    modattn__dev_model *dm;
    /* the host engine's threads: borrowed (options) or its own; never the ctx's */
    modattn_pool *pool;
    bool own_pool;
};

/* ------------------------------------------------------------------ loading */

static int own(modattn_model *m, float *p) {
    float **n = modattn_realloc(m->owned, (m->nowned + 1) * sizeof *n, MODATTN_MEM_OTHER);
    if (!n) {
        modattn_free(p);
        return modattn_mem_last_status();
    }
    m->owned = n;
    m->owned[m->nowned++] = p;
    return 0;
}

/* The fp32 tensor prefix+name with exactly the shape [d0] or [d0, d1] (d1 = 0: 1-D). Errors name
 * the file and the tensor. A tensor not 4-byte aligned in the file is copied. */
static int get_f32(modattn_model *m, const char *prefix, const char *name, int64_t d0, int64_t d1,
                   const float **out) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const modattn_st_tensor *t = modattn__st_find(m->st, full);
    if (!t)
        return modattn_error(MODATTN_EFORMAT, "%s: tensor '%s' is missing", m->st->path, full);
    if (t->dtype != MODATTN_ST_F32)
        return modattn_error(MODATTN_EFORMAT, "%s: tensor '%s': dtype %s, expected F32",
                             m->st->path, full, modattn__st_dtype_name(t->dtype));
    int nd = d1 ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != d0 || (nd == 2 && t->shape[1] != d1)) {
        char got[128] = "[";
        for (int d = 0; d < t->ndim; d++) {
            size_t o = strlen(got);
            snprintf(got + o, sizeof got - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        }
        strncat(got, "]", sizeof got - strlen(got) - 1);
        if (nd == 2)
            return modattn_error(MODATTN_EFORMAT, "%s: tensor '%s': shape %s, expected [%lld, %lld]",
                                 m->st->path, full, got, (long long)d0, (long long)d1);
        return modattn_error(MODATTN_EFORMAT, "%s: tensor '%s': shape %s, expected [%lld]",
                             m->st->path, full, got, (long long)d0);
    }
    if (((uintptr_t)t->data & 3u) == 0) {
        *out = t->data;
        return 0;
    }
    float *copy = modattn_malloc(t->end - t->begin, MODATTN_MEM_WEIGHTS);
    if (!copy) return modattn_mem_last_status();
    memcpy(copy, t->data, t->end - t->begin);
    int st = own(m, copy);
    if (st) return st;
    *out = copy;
    return 0;
}

static int load_weights(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate;
    const char *prefix = NULL;
    static const char *prefixes[] = {"", "bert.", "model."};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !prefix; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%sembeddings.word_embeddings.weight", prefixes[i]);
        if (modattn__st_find(m->st, nm)) prefix = prefixes[i];
    }
    if (!prefix)
        return modattn_error(MODATTN_EFORMAT,
                             "%s: tensor 'embeddings.word_embeddings.weight' is missing (also "
                             "without a 'bert.' prefix): not a BERT checkpoint",
                             m->st->path);
    int st;
    const float *type;
    if ((st = get_f32(m, prefix, "embeddings.word_embeddings.weight", c->vocab, H, &m->word)) ||
        (st = get_f32(m, prefix, "embeddings.position_embeddings.weight", c->max_positions, H,
                      &m->pos)) ||
        (st = get_f32(m, prefix, "embeddings.token_type_embeddings.weight", c->type_vocab, H,
                      &type)) ||
        (st = get_f32(m, prefix, "embeddings.LayerNorm.weight", H, 0, &m->emb_g)) ||
        (st = get_f32(m, prefix, "embeddings.LayerNorm.bias", H, 0, &m->emb_b)))
        return st;
    m->type0 = type;
    m->layers = modattn_calloc((size_t)c->layers, sizeof *m->layers, MODATTN_MEM_OTHER);
    if (!m->layers) return modattn_mem_last_status();
    for (int l = 0; l < c->layers; l++) {
        layer_w *L = &m->layers[l];
        char p[96];
        snprintf(p, sizeof p, "%sencoder.layer.%d.", prefix, l);
        const float *wq, *wk, *wv, *bq, *bk, *bv;
        if ((st = get_f32(m, p, "attention.self.query.weight", H, H, &wq)) ||
            (st = get_f32(m, p, "attention.self.key.weight", H, H, &wk)) ||
            (st = get_f32(m, p, "attention.self.value.weight", H, H, &wv)) ||
            (st = get_f32(m, p, "attention.self.query.bias", H, 0, &bq)) ||
            (st = get_f32(m, p, "attention.self.key.bias", H, 0, &bk)) ||
            (st = get_f32(m, p, "attention.self.value.bias", H, 0, &bv)) ||
            (st = get_f32(m, p, "attention.output.dense.weight", H, H, &L->wo)) ||
            (st = get_f32(m, p, "attention.output.dense.bias", H, 0, &L->bo)) ||
            (st = get_f32(m, p, "attention.output.LayerNorm.weight", H, 0, &L->ln1_g)) ||
            (st = get_f32(m, p, "attention.output.LayerNorm.bias", H, 0, &L->ln1_b)) ||
            (st = get_f32(m, p, "intermediate.dense.weight", I, H, &L->w1)) ||
            (st = get_f32(m, p, "intermediate.dense.bias", I, 0, &L->b1)) ||
            (st = get_f32(m, p, "output.dense.weight", H, I, &L->w2)) ||
            (st = get_f32(m, p, "output.dense.bias", H, 0, &L->b2)) ||
            (st = get_f32(m, p, "output.LayerNorm.weight", H, 0, &L->ln2_g)) ||
            (st = get_f32(m, p, "output.LayerNorm.bias", H, 0, &L->ln2_b)))
            return st;
        /* One [3H, H] matrix so that Q, K and V come out of one GEMM as one [tokens, 3H] row. */
        L->wqkv = modattn_malloc((size_t)(3 * H * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        L->bqkv = modattn_malloc((size_t)(3 * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!L->wqkv || !L->bqkv) return modattn_mem_last_status();
        memcpy(L->wqkv, wq, (size_t)(H * H) * sizeof(float));
        memcpy(L->wqkv + H * H, wk, (size_t)(H * H) * sizeof(float));
        memcpy(L->wqkv + 2 * H * H, wv, (size_t)(H * H) * sizeof(float));
        memcpy(L->bqkv, bq, (size_t)H * sizeof(float));
        memcpy(L->bqkv + H, bk, (size_t)H * sizeof(float));
        memcpy(L->bqkv + 2 * H, bv, (size_t)H * sizeof(float));
        if (m->dev) continue; /* the device's GEMMs take the weights as they are */
        /* the strides are the arena's (see arena_bind): x and att [.., H], big [.., max(3H, I)] */
        if ((st = modattn__gemm_plan_create(L->wqkv, 3 * H, H, H, 3 * H, false, &L->pqkv)) ||
            (st = modattn__gemm_plan_create(L->wo, H, H, H, H, true, &L->po)) ||
            (st = modattn__gemm_plan_create(L->w1, I, H, H, I, false, &L->p1)) ||
            (st = modattn__gemm_plan_create(L->w2, H, I, I, H, true, &L->p2)))
            return modattn_error_prefix(st, "%s: layer %d: preparing the GEMMs", m->st->path, l);
        modattn__gemm_plan *ps[4] = {L->pqkv, L->po, L->p1, L->p2};
        for (int k = 0; k < 4; k++) {
            size_t b = modattn__gemm_plan_scratch(ps[k]);
            b = (b + MODATTN_ALIGN - 1) / MODATTN_ALIGN * MODATTN_ALIGN;
            if (b > m->gemm_scratch) m->gemm_scratch = b;
        }
        if (L->pqkv) { /* the packed copy replaces the concatenated one */
            modattn_free(L->wqkv);
            L->wqkv = NULL;
        }
    }
    return 0;
}

static const char *base_name(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    (void)b;
    return dir + b;
}

int modattn_model_load(modattn_ctx *ctx, const char *dir, modattn_model **out) {
    return modattn_model_load_ex(ctx, dir, NULL, out);
}

/* Uploads the weights to the model's device (after load_weights: wqkv are the host copies). */
static int upload_to_device(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    modattn__layer_weights *lw = modattn_calloc((size_t)c->layers, sizeof *lw, MODATTN_MEM_OTHER);
    if (!lw) return modattn_mem_last_status();
    for (int l = 0; l < c->layers; l++) {
        const layer_w *L = &m->layers[l];
        lw[l] = (modattn__layer_weights){L->wqkv, L->bqkv, L->wo, L->bo, L->ln1_g, L->ln1_b,
                                         L->w1, L->b1, L->w2, L->b2, L->ln2_g, L->ln2_b};
    }
    int st = modattn__dev_model_create(m->dev, c, m->word, m->pos, m->type0, m->emb_g, m->emb_b, lw, &m->dm);
    modattn_free(lw);
    if (st) return st;
    for (int l = 0; l < c->layers; l++) { /* the device holds them now */
        modattn_free(m->layers[l].wqkv);
        modattn_free(m->layers[l].bqkv);
        m->layers[l].wqkv = m->layers[l].bqkv = NULL;
    }
    return 0;
}

int modattn_model_load_ex(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                          modattn_model **out) {
    if (!out) return modattn_error(MODATTN_EINVAL, "modattn_model_load: out is NULL");
    *out = NULL;
    if (!ctx || !dir || !*dir)
        return modattn_error(MODATTN_EINVAL, "modattn_model_load: ctx and dir are required");
    const modattn_device_iface *dev = NULL;
    if (opt && opt->device && *opt->device) {
        int dst = modattn_device_lookup(opt->device, &dev);
        if (dst) return dst;
    }
    modattn_model *m = modattn_calloc(1, sizeof *m, MODATTN_MEM_OTHER);
    if (!m) return modattn_mem_last_status();
    m->ctx = ctx;
    m->dev = dev && dev->ops ? dev : NULL; /* the CPU device is the host engine */
    int st = 0;
    if (opt && opt->pool) {
        m->pool = opt->pool;
    } else if (!m->dev) { /* a device model runs no host passes */
        if ((st = modattn_pool_create(modattn_ctx_threads(ctx), &m->pool))) {
            modattn_free(m);
            return st;
        }
        m->own_pool = true;
    }
    m->batch_tokens = MODATTN_MODEL_DEFAULT_BATCH_TOKENS;
    m->dir = modattn_strdup(dir, MODATTN_MEM_OTHER);
    if (!m->dir) {
        st = modattn_mem_last_status();
        goto fail;
    }
    {
        /* the name without a trailing slash */
        const char *b = base_name(m->dir);
        size_t n = strlen(b);
        while (n > 1 && b[n - 1] == '/') n--;
        m->name = modattn_strndup(b, n, MODATTN_MEM_OTHER);
        if (!m->name) {
            st = modattn_mem_last_status();
            goto fail;
        }
    }
    if ((st = modattn__config_load(dir, &m->cfg))) goto fail;
    if (m->dev && (st = modattn__dev_model_check(m->dev, ctx, &m->cfg, m->name))) goto fail;
    char path[MODATTN__PATH_MAX];
    if ((st = modattn__path_join(path, sizeof path, m->cfg.transformer_dir, "model.safetensors")))
        goto fail;
    if ((st = modattn__st_open(path, &m->st))) {
        if (st == MODATTN_EIO)
            st = modattn_error_prefix(MODATTN_ENOTFOUND, "model weights (run `make model`?)");
        goto fail;
    }
    if ((st = load_weights(m))) goto fail;
    if (m->dev && (st = upload_to_device(m))) goto fail;
    if ((st = modattn__path_join(path, sizeof path, m->cfg.transformer_dir, "tokenizer.json")))
        goto fail;
    if ((st = modattn_tokenizer_load(path, &m->tok))) goto fail;
    size_t tv = modattn_tokenizer_vocab_size(m->tok);
    if (tv > (size_t)m->cfg.vocab) {
        st = modattn_error(MODATTN_EFORMAT,
                           "%s: the vocabulary has %zu tokens but config.json vocab_size is %d: "
                           "ids past the embedding table",
                           path, tv, m->cfg.vocab);
        goto fail;
    }
    modattn_model_info *in = &m->info;
    in->name = m->name;
    in->dir = m->dir;
    in->model_type = m->cfg.model_type;
    in->dim = m->cfg.dim;
    in->hidden = m->cfg.hidden;
    in->layers = m->cfg.layers;
    in->heads = m->cfg.heads;
    in->intermediate = m->cfg.intermediate;
    in->vocab = m->cfg.vocab;
    in->max_tokens = m->cfg.max_tokens;
    in->pooling = m->cfg.pooling;
    in->normalize = m->cfg.normalize;
    in->lower_case = m->cfg.lower_case;
    in->weights_xxh3 = XXH3_64bits(m->st->bytes, m->st->len);
    snprintf(in->weights_hash, sizeof in->weights_hash, "%016llx",
             (unsigned long long)in->weights_xxh3);
    in->weights_bytes = m->st->len;
    in->device = m->dev ? m->dev->id : (modattn_device){MODATTN_DEVICE_CPU, 0};
    *out = m;
    return 0;
fail:
    modattn_model_free(m);
    return st;
}

void modattn_model_free(modattn_model *m) {
    if (!m) return;
    modattn__dev_model_free(m->dm);
    if (m->own_pool) modattn_pool_free(m->pool);
    if (m->layers) {
        for (int l = 0; l < m->cfg.layers; l++) {
            layer_w *L = &m->layers[l];
            modattn_free(L->wqkv);
            modattn_free(L->bqkv);
            modattn__gemm_plan_free(L->pqkv);
            modattn__gemm_plan_free(L->po);
            modattn__gemm_plan_free(L->p1);
            modattn__gemm_plan_free(L->p2);
        }
        modattn_free(m->layers);
    }
    for (size_t i = 0; i < m->nowned; i++) modattn_free(m->owned[i]);
    modattn_free(m->owned);
    if (m->tok) modattn_tokenizer_free(m->tok);
    modattn__st_close(m->st);
    modattn_free(m->name);
    modattn_free(m->dir);
    modattn_free(m);
}

const modattn_model_info *modattn_model_get_info(const modattn_model *m) { return &m->info; }
size_t modattn_model_dim(const modattn_model *m) { return m->cfg.dim; }
size_t modattn_model_max_tokens(const modattn_model *m) { return m->cfg.max_tokens; }
size_t modattn_model_batch_tokens(const modattn_model *m) { return m->batch_tokens; }

int modattn_model_set_batch_tokens(modattn_model *m, size_t tokens) {
    if (tokens == 0 || tokens > ((size_t)1 << 22))
        return modattn_error(MODATTN_EINVAL, "batch token budget %zu is out of range [1, %zu]",
                             tokens, (size_t)1 << 22);
    m->batch_tokens = tokens;
    return 0;
}

/* ------------------------------------------------------------------ row-block passes */

/* Every pass of the forward is a loop over blocks of token rows on the ctx's thread pool: an
 * optional GEMM for the block's rows (one single-threaded BLAS call per block: one thread pool
 * in the process, no second runtime spinning against it), then the elementwise post-op on the
 * same rows while they are in cache. Padding rows are zeroed instead of the post-op. */
/* Rows of every GEMM call without a plan (see row_task). */
#define GEMM_MIN_ROWS 16
/* Zero rows past the last token row of a batch, read and written by a short last block. */
#define SPARE_ROWS (MODATTN__GEMM_BLOCK > GEMM_MIN_ROWS ? MODATTN__GEMM_BLOCK : GEMM_MIN_ROWS)

typedef enum row_op {
    ROW_NONE,
    ROW_EMBED,    /* x[r] = LN(word[id] + pos[i] + type0) */
    ROW_BIAS,     /* y[r] += bias (the QKV projection) */
    ROW_RES_LN,   /* x[r] = LN(x[r] + bias): x already holds residual + projection */
    ROW_BIAS_ACT, /* y[r] = act(y[r] + bias) */
} row_op;

typedef struct row_job {
    const modattn_model *m;
    const char *name;      /* trace span: a string literal */
    row_op op;
    int64_t S;             /* padded length */
    const int32_t *lens;   /* [B] real lengths */
    const int32_t *ids;    /* [B*S] (ROW_EMBED) */
    float *y;              /* [B*S, ld] output rows */
    int64_t ld, width;     /* row stride, columns touched */
    const float *bias, *g, *b;
    /* optional GEMM before the post-op: y[rows] = A[rows] . W^T + beta * y[rows] */
    const float *A;        /* [B*S, lda] or NULL */
    int64_t lda, K;
    const float *W;        /* [width, K] */
    float beta;
    const modattn__gemm_plan *plan; /* the prepared GEMM for W, or NULL: sgemm_nt */
    char *scratch;         /* per thread: scratch + thread * m->gemm_scratch */
    int64_t chunk;         /* rows per task */
    int64_t rows;          /* B*S */
    int err;               /* first failure of a task (atomic builtins) */
} row_job;

static void row_task(void *arg, int64_t task, int thread) {
    row_job *j = arg;
    const modattn__model_config *c = &j->m->cfg;
    const int64_t r0 = task * j->chunk;
    const int64_t r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    if (r1 <= r0) return;
    if (j->plan) {
        /* whole blocks; the last may run into the arena's zero spare rows (see arena_bind) */
        void *scr = j->scratch ? j->scratch + (size_t)thread * j->m->gemm_scratch : NULL;
        for (int64_t r = r0; r < r1; r += MODATTN__GEMM_BLOCK) {
            int st = modattn__gemm_plan_run(j->plan, j->A + r * j->lda, j->y + r * j->ld, scr);
            if (st) {
                int zero = 0;
                __atomic_compare_exchange_n(&j->err, &zero, st, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
                return;
            }
        }
    } else if (j->A) {
        /* Never fewer than GEMM_MIN_ROWS rows (the arena's spare zero rows fill a short last
         * block): the BLAS then computes every row with the same kernel and summation order,
         * whatever the batch around it, and a text's embedding is bit for bit the same alone or
         * batched (oneDNN takes another path below 16 rows; measured, see gemm.c). */
        const int64_t mg = r1 - r0 < GEMM_MIN_ROWS ? GEMM_MIN_ROWS : r1 - r0;
        modattn__sgemm_nt(mg, j->width, j->K, 1.0f, j->A + r0 * j->lda, j->lda, j->W, j->K,
                          j->beta, j->y + r0 * j->ld, j->ld);
    }
    if (j->op == ROW_NONE) return;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t b = r / j->S, i = r % j->S;
        float *y = j->y + r * j->ld;
        if (i >= j->lens[b]) {
            /* padding: kept at zero, so nothing in a padded row can grow over the layers (the
             * residual GEMMs add into x) and padded keys and values stay finite */
            memset(y, 0, (size_t)j->width * sizeof *y);
            continue;
        }
        switch (j->op) {
        case ROW_NONE:
            break;
        case ROW_EMBED: {
            const float *w = j->m->word + (int64_t)j->ids[r] * c->hidden;
            const float *p = j->m->pos + i * c->hidden;
            const float *t = j->m->type0;
            for (int64_t k = 0; k < j->width; k++) y[k] = w[k] + p[k] + t[k];
            modattn__bias_layer_norm(y, NULL, j->g, j->b, j->width, c->ln_eps);
            break;
        }
        case ROW_BIAS:
            modattn__bias_add(y, j->bias, j->width);
            break;
        case ROW_RES_LN:
            modattn__bias_layer_norm(y, j->bias, j->g, j->b, j->width, c->ln_eps);
            break;
        case ROW_BIAS_ACT:
            switch (c->act) {
            case MODATTN__ACT_GELU_ERF: modattn__gelu_erf_bias(y, j->bias, j->width); break;
            case MODATTN__ACT_GELU_TANH: modattn__gelu_tanh_bias(y, j->bias, j->width); break;
            case MODATTN__ACT_RELU: modattn__relu_bias(y, j->bias, j->width); break;
            }
            break;
        }
    }
}

/* Rows per task: one task per thread where that makes tasks of at most 1024 rows, in whole
 * GEMM blocks (64 rows: also the plans' block). Without plans the BLAS packs the weights once per
 * call, so larger blocks amortise that (1024 rows: 7-10% more tokens per CPU-second than 256 on
 * all-MiniLM-L6-v2 with dnnl_sgemm; 4096 no better). */
static int64_t rows_per_task(int64_t rows, int nthreads) {
    const int64_t blk = MODATTN__GEMM_BLOCK;
    int64_t per = (rows + nthreads - 1) / nthreads;
    per = (per + blk - 1) / blk * blk;
    if (per > 1024) per = 1024 / blk * blk;
    return per < blk ? blk : per;
}

static int run_rows(modattn_model *m, row_job *j, char *scratch) {
    uint64_t t0 = modattn_trace_begin();
    j->m = m;
    j->scratch = scratch;
    j->err = 0;
    const int nth = m->pool && modattn_pool_threads(m->pool) > 1 ? modattn_pool_threads(m->pool) : 1;
    j->chunk = rows_per_task(j->rows, nth);
    const int64_t ntasks = (j->rows + j->chunk - 1) / j->chunk;
    if (nth > 1 && ntasks > 1)
        modattn_pool_run(m->pool, ntasks, row_task, j);
    else
        for (int64_t t = 0; t < ntasks; t++) row_task(j, t, 0);
    if (t0) {
        char shape[64];
        if (j->A)
            snprintf(shape, sizeof shape, "[%lld x %lld] x [%lld x %lld]^T", (long long)j->rows,
                     (long long)j->K, (long long)j->width, (long long)j->K);
        else
            snprintf(shape, sizeof shape, "[%lld x %lld]", (long long)j->rows,
                     (long long)j->width);
        const double flops = j->A ? 2.0 * (double)j->rows * (double)j->width * (double)j->K : 0;
        const double bytes = 4.0 * ((double)j->rows * (double)(j->K + j->width) +
                                    (j->A ? (double)j->width * (double)j->K : 0));
        modattn_trace_end(t0, j->name ? j->name : "encoder.rows",
                          j->A ? modattn__gemm_name() : NULL, shape, bytes, flops);
    }
    return __atomic_load_n(&j->err, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ forward */

/* Activation arena of one batch of B rows padded to S: T = B*S token rows, and SPARE_ROWS
 * spare rows past them, kept at zero (see row_task), and the GEMM plans' scratch per thread. */
typedef struct arena {
    float *x;    /* [T + spare, H]  hidden state */
    float *big;  /* [T + spare, max(3H, I)]  QKV, then the FFN's intermediate */
    float *att;  /* [T + spare, H]  attention output */
    char *scratch; /* [threads][m->gemm_scratch] or NULL */
} arena;

static size_t arena_floats(const modattn__model_config *c, int64_t T) {
    const int64_t H = c->hidden;
    const int64_t W = 3 * H > c->intermediate ? 3 * H : c->intermediate;
    return (size_t)((T + SPARE_ROWS) * (H + W + H));
}

static void arena_bind(const modattn__model_config *c, float *base, int64_t T, arena *a) {
    const int64_t H = c->hidden;
    const int64_t W = 3 * H > c->intermediate ? 3 * H : c->intermediate;
    const int64_t cap = T + SPARE_ROWS;
    a->x = base;
    a->big = a->x + cap * H;
    a->att = a->big + cap * W;
    /* the spare rows are GEMM inputs (x, att; big's are GEMM outputs of zero rows) */
    memset(a->x + T * H, 0, (size_t)(SPARE_ROWS * H) * sizeof(float));
    memset(a->att + T * H, 0, (size_t)(SPARE_ROWS * H) * sizeof(float));
}

/* Runs B rows of ids (row b: ids[b*S .. b*S+lens[b]-1], the rest padding) through the encoder
 * and pools each into out[b*dim ..]. */
static int forward(modattn_model *m, const arena *a, int64_t B, int64_t S, const int32_t *ids,
                   const int32_t *lens, float *const *outs) {
    const modattn__model_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate, T = B * S;
    const int64_t nh = c->heads, dh = H / nh;
    int st;
    uint64_t t0 = modattn_trace_begin();

    row_job j = {.name = "encoder.embeddings", .op = ROW_EMBED, .S = S, .lens = lens, .ids = ids, .y = a->x, .ld = H,
                 .width = H, .g = m->emb_g, .b = m->emb_b, .rows = T};
    if ((st = run_rows(m, &j, a->scratch))) return st;

    for (int l = 0; l < c->layers; l++) {
        const layer_w *L = &m->layers[l];
        /* qkv[T, 3H] = x . Wqkv^T + b */
        j = (row_job){.name = "encoder.qkv", .op = ROW_BIAS, .S = S, .lens = lens, .y = a->big, .ld = 3 * H,
                      .width = 3 * H, .bias = L->bqkv, .rows = T, .A = a->x, .lda = H, .K = H,
                      .W = L->wqkv, .beta = 0.0f, .plan = L->pqkv};
        if ((st = run_rows(m, &j, a->scratch))) return st;

        modattn_attn_call call;
        memset(&call, 0, sizeof call);
        const modattn_device cpu = m->info.device;
        /* q/k/v: [B, nh, S, dh] views of qkv[T, 3H] */
        for (int w = 0; w < 3; w++) {
            modattn_tensor *t = w == 0 ? &call.q : w == 1 ? &call.k : &call.v;
            t->data = a->big + w * H;
            t->device = cpu;
            t->dtype = MODATTN_DTYPE_F32;
            t->shape[0] = B, t->shape[1] = nh, t->shape[2] = S, t->shape[3] = dh;
            t->stride[0] = S * 3 * H, t->stride[1] = dh, t->stride[2] = 3 * H, t->stride[3] = 1;
            t->capacity = T * 3 * H - w * H;
        }
        /* o: [B, nh, S, dh] view of att[T, H] */
        call.o.data = a->att;
        call.o.device = cpu;
        call.o.dtype = MODATTN_DTYPE_F32;
        call.o.shape[0] = B, call.o.shape[1] = nh, call.o.shape[2] = S, call.o.shape[3] = dh;
        call.o.stride[0] = S * H, call.o.stride[1] = dh, call.o.stride[2] = H, call.o.stride[3] = 1;
        call.o.capacity = T * H;
        call.kv_lens = lens;
        call.scale = 0.0f; /* 1/sqrt(dh) */
        st = modattn_attention(m->ctx, &call);
        if (st) return modattn_error_prefix(st, "%s: layer %d attention", m->name, l);

        /* x = LN(x + att . Wo^T + bo) */
        j = (row_job){.name = "encoder.attn_out", .op = ROW_RES_LN, .S = S, .lens = lens, .y = a->x,
                      .ld = H, .width = H, .bias = L->bo, .g = L->ln1_g, .b = L->ln1_b, .rows = T, .A = a->att,
                      .lda = H, .K = H, .W = L->wo, .beta = 1.0f, .plan = L->po};
        if ((st = run_rows(m, &j, a->scratch))) return st;

        /* h = act(x . W1^T + b1); x = LN(x + h . W2^T + b2) */
        j = (row_job){.name = "encoder.ffn_up", .op = ROW_BIAS_ACT, .S = S, .lens = lens, .y = a->big, .ld = I, .width = I,
                      .bias = L->b1, .rows = T, .A = a->x, .lda = H, .K = H, .W = L->w1,
                      .beta = 0.0f, .plan = L->p1};
        if ((st = run_rows(m, &j, a->scratch))) return st;
        j = (row_job){.name = "encoder.ffn_down", .op = ROW_RES_LN, .S = S, .lens = lens, .y = a->x,
                      .ld = H, .width = H, .bias = L->b2, .g = L->ln2_g, .b = L->ln2_b, .rows = T, .A = a->big,
                      .lda = I, .K = I, .W = L->w2, .beta = 1.0f, .plan = L->p2};
        if ((st = run_rows(m, &j, a->scratch))) return st;
    }

    /* pooling, in sentence-transformers' order: cls, max, mean, mean_sqrt_len, weightedmean,
     * lasttoken; then the optional L2 normalisation */
    for (int64_t b = 0; b < B; b++) {
        const float *x = a->x + b * S * H;
        const int64_t n = lens[b];
        float *o = outs[b];
        float *p = o;
        if (c->pooling & MODATTN_POOL_CLS) {
            memcpy(p, x, (size_t)H * sizeof(float));
            p += H;
        }
        if (c->pooling & MODATTN_POOL_MAX) {
            memcpy(p, x, (size_t)H * sizeof(float));
            for (int64_t i = 1; i < n; i++)
                for (int64_t k = 0; k < H; k++)
                    if (x[i * H + k] > p[k]) p[k] = x[i * H + k];
            p += H;
        }
        if (c->pooling & (MODATTN_POOL_MEAN | MODATTN_POOL_MEAN_SQRT_LEN | MODATTN_POOL_WEIGHTED_MEAN)) {
            const bool mean = c->pooling & MODATTN_POOL_MEAN;
            const bool msl = c->pooling & MODATTN_POOL_MEAN_SQRT_LEN;
            const bool wm = c->pooling & MODATTN_POOL_WEIGHTED_MEAN;
            for (int64_t k = 0; k < H; k++) {
                double s = 0, ws = 0;
                for (int64_t i = 0; i < n; i++) {
                    s += x[i * H + k];
                    ws += (double)(i + 1) * x[i * H + k];
                }
                const double cnt = n > 0 ? (double)n : 1e-9;
                float *q = p;
                if (mean) *q = (float)(s / cnt), q += H;
                if (msl) *q = (float)(s / sqrt(cnt)), q += H;
                if (wm) *q = (float)(ws / ((double)n * (double)(n + 1) / 2.0));
                p++;
            }
            p -= H;
            p += H * ((mean ? 1 : 0) + (msl ? 1 : 0) + (wm ? 1 : 0));
        }
        if (c->pooling & MODATTN_POOL_LAST) {
            memcpy(p, x + (n > 0 ? n - 1 : 0) * H, (size_t)H * sizeof(float));
            p += H;
        }
        if (c->normalize) {
            double ss = 0;
            for (size_t k = 0; k < c->dim; k++) ss += (double)o[k] * o[k];
            double norm = sqrt(ss);
            const float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
            for (size_t k = 0; k < c->dim; k++) o[k] *= inv;
        }
    }
    if (t0) {
        char shape[64];
        snprintf(shape, sizeof shape, "B=%lld S=%lld", (long long)B, (long long)S);
        const double fl = 2.0 * (double)T * (double)c->layers *
                          ((double)(4 * H * H) + 2.0 * (double)H * (double)I);
        modattn_trace_end(t0, "encoder.forward", modattn__gemm_name(), shape, 0, fl);
    }
    return 0;
}

/* ------------------------------------------------------------------ tokenizing */

/* sentence-transformers lower-cases the text before tokenizing when do_lower_case is set
 * (Python's str.lower: we use the simple Unicode lower-case mapping of utf8proc). Bytes that are
 * not valid UTF-8 are passed through for the tokenizer to judge. */
static int tokenize_one(const modattn_model *m, const char *text, size_t len, int32_t *ids,
                        size_t max, size_t *n) {
    if (!m->cfg.lower_case) return modattn_tokenize(m->tok, text, len, ids, max, n);
    /* a lower-case code point never takes more than twice the bytes of its upper-case one */
    if (len > (SIZE_MAX - 8) / 2) return modattn_error(MODATTN_EINVAL, "text too long");
    char *low = modattn_malloc(2 * len + 8, MODATTN_MEM_OTHER);
    if (!low) return modattn_mem_last_status();
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i,
                                              (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) {
            low[o++] = text[i++];
            continue;
        }
        o += (size_t)utf8proc_encode_char(utf8proc_tolower(cp), (utf8proc_uint8_t *)low + o);
        i += (size_t)k;
    }
    int st = modattn_tokenize(m->tok, low, o, ids, max, n);
    modattn_free(low);
    return st;
}

/* ------------------------------------------------------------------ batching */

typedef struct sort_key {
    int32_t len;
    size_t idx;
} sort_key;

static int cmp_len_desc(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* End of the batch that starts at keys[s] (sorted longest first): rows are added while the
 * padded batch stays within the token budget and the row is at least 16/17 of the batch's
 * longest, so no row is padded by more than 1/16 of its length. With the GEMM plans a batch runs
 * as fast in 64-row blocks as in 1024-row ones, so small batches cost little and padding is pure
 * waste: on bench/corpus_sentences.txt the budget alone padded 88,988 tokens to 101,279 (+13.8%);
 * with this rule 91,988 (+3.4%) in 60 batches. Without plans (OpenBLAS) the budget alone. */
static size_t batch_end(const sort_key *keys, size_t n, size_t s, size_t budget, bool tight) {
    const size_t S = (size_t)keys[s].len;
    size_t e = s + 1;
    while (e < n && (e - s + 1) * S <= budget && (!tight || (size_t)keys[e].len * 17 >= S * 16))
        e++;
    return e;
}

/* n inputs, input i = ids[off[i] .. off[i+1]-1]; writes out[i*dim ..]. */
static int embed_packed(modattn_model *m, const int32_t *ids, const size_t *off, size_t n,
                        float *out) {
    const modattn__model_config *c = &m->cfg;
    int st = 0;
    sort_key *keys = modattn_calloc(n, sizeof *keys, MODATTN_MEM_OTHER);
    if (!keys) return modattn_mem_last_status();
    for (size_t i = 0; i < n; i++) keys[i] = (sort_key){(int32_t)(off[i + 1] - off[i]), i};
    qsort(keys, n, sizeof *keys, cmp_len_desc);

    /* batches: [start, end) in sorted order; the first row is the longest */
    const size_t budget = m->batch_tokens;
    size_t max_T = 0, max_B = 0;
    for (size_t s = 0; s < n;) {
        const size_t S = (size_t)keys[s].len;
        const size_t e = batch_end(keys, n, s, budget, m->layers[0].pqkv != NULL);
        if ((e - s) * S > max_T) max_T = (e - s) * S;
        if (e - s > max_B) max_B = e - s;
        s = e;
    }
    const bool on_dev = m->dm != NULL;
    modattn__dev_arena *da = NULL;
    if (on_dev && (st = modattn__dev_arena_create(m->dm, (int64_t)max_T, (int64_t)max_B, &da))) {
        modattn_free(keys);
        return st;
    }
    const size_t nf = on_dev ? 1 : arena_floats(c, (int64_t)max_T); /* the host arena is the device's there */
    float *base = modattn_calloc(nf, sizeof(float), MODATTN_MEM_ACTIVATIONS);
    int32_t *bids = modattn_calloc(max_T, sizeof(int32_t), MODATTN_MEM_ACTIVATIONS);
    int32_t *blens = modattn_calloc(max_B, sizeof(int32_t), MODATTN_MEM_ACTIVATIONS);
    float **outs = modattn_calloc(max_B, sizeof(float *), MODATTN_MEM_ACTIVATIONS);
    const size_t nth = m->pool && modattn_pool_threads(m->pool) > 1 ? (size_t)modattn_pool_threads(m->pool) : 1;
    char *scratch = m->gemm_scratch && !on_dev
                        ? modattn_malloc(nth * m->gemm_scratch, MODATTN_MEM_WORKSPACE)
                        : NULL;
    if (!base || !bids || !blens || !outs || (m->gemm_scratch && !on_dev && !scratch)) {
        st = modattn_mem_last_status();
        goto done;
    }
    for (size_t s = 0; s < n && st == 0;) {
        const size_t S = (size_t)keys[s].len;
        const size_t e = batch_end(keys, n, s, budget, m->layers[0].pqkv != NULL);
        const size_t B = e - s;
        for (size_t b = 0; b < B; b++) {
            const size_t i = keys[s + b].idx;
            const size_t len = (size_t)keys[s + b].len;
            memcpy(bids + b * S, ids + off[i], len * sizeof(int32_t));
            for (size_t k = len; k < S; k++) bids[b * S + k] = c->pad_id;
            blens[b] = (int32_t)len;
            outs[b] = out + i * c->dim;
        }
        uint64_t tb = modattn_trace_begin(); /* span: one batch, padded to its longest text */
        if (on_dev) {
            st = modattn__dev_forward(m->dm, m->ctx, da, (int64_t)B, (int64_t)S, bids, blens, outs, m->name);
        } else {
            arena a;
            arena_bind(c, base, (int64_t)(B * S), &a);
            a.scratch = scratch;
            st = forward(m, &a, (int64_t)B, (int64_t)S, bids, blens, outs);
        }
        if (tb) {
            char shape[64];
            snprintf(shape, sizeof shape, "B=%zu S=%zu", B, S);
            modattn_trace_end(tb, "batch", "encoder", shape, 0, 0);
        }
        s = e;
    }
done:
    modattn__dev_arena_free(da);
    modattn_free(scratch);
    modattn_free(outs);
    modattn_free(blens);
    modattn_free(bids);
    modattn_free(base);
    modattn_free(keys);
    return st;
}

static int check_ids(const modattn_model *m, const int32_t *ids, size_t count, size_t which) {
    if (count < 1 || count > m->cfg.max_tokens)
        return modattn_error(MODATTN_EINVAL, "input %zu: %zu tokens, expected 1 to %zu", which,
                             count, m->cfg.max_tokens);
    for (size_t k = 0; k < count; k++)
        if (ids[k] < 0 || ids[k] >= m->cfg.vocab)
            return modattn_error(MODATTN_EINVAL, "input %zu: token %zu has id %d, outside the "
                                 "vocabulary [0, %d)", which, k, (int)ids[k], m->cfg.vocab);
    return 0;
}

int modattn_model_embed_ids(modattn_model *m, const int32_t *const *ids, const size_t *counts,
                            size_t n, float *out) {
    if (n == 0) return 0;
    if (!m || !ids || !counts || !out)
        return modattn_error(MODATTN_EINVAL, "modattn_model_embed_ids: NULL argument");
    if (n > SIZE_MAX / 64)
        return modattn_error(MODATTN_EINVAL, "modattn_model_embed_ids: n = %zu", n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int st = check_ids(m, ids[i], counts[i], i);
        if (st) return st;
        total += counts[i];
    }
    int32_t *flat = modattn_calloc(total, sizeof(int32_t), MODATTN_MEM_OTHER);
    size_t *off = modattn_calloc(n + 1, sizeof(size_t), MODATTN_MEM_OTHER);
    int st = 0;
    if (!flat || !off) {
        st = modattn_mem_last_status();
    } else {
        off[0] = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(flat + off[i], ids[i], counts[i] * sizeof(int32_t));
            off[i + 1] = off[i] + counts[i];
        }
        st = embed_packed(m, flat, off, n, out);
    }
    modattn_free(off);
    modattn_free(flat);
    return st;
}

int modattn_model_tokenize(const modattn_model *m, const char *text, size_t len, int32_t *ids,
                           size_t max, size_t *n) {
    if (!m || !ids || !n || (!text && len))
        return modattn_error(MODATTN_EINVAL, "modattn_model_tokenize: NULL argument");
    size_t lim = max < m->cfg.max_tokens ? max : m->cfg.max_tokens;
    return tokenize_one(m, text ? text : "", len, ids, lim, n);
}

int modattn_model_embed(modattn_model *m, const char *const *texts, const size_t *lens, size_t n,
                        float *out, int32_t *ntokens_out) {
    if (n == 0) return 0;
    if (!m || !texts || !out)
        return modattn_error(MODATTN_EINVAL, "modattn_model_embed: NULL argument");
    const size_t maxt = m->cfg.max_tokens;
    int st = 0;
    if (n > SIZE_MAX / 64) return modattn_error(MODATTN_EINVAL, "modattn_model_embed: n = %zu", n);
    size_t *off = modattn_calloc(n + 1, sizeof(size_t), MODATTN_MEM_OTHER);
    int32_t *flat = NULL;
    size_t cap = 0;
    if (!off) return modattn_mem_last_status();
    off[0] = 0;
    uint64_t tr = modattn_trace_begin(); /* span: tokenising the whole call */
    for (size_t i = 0; i < n; i++) {
        if (off[i] + maxt > cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            while (ncap < off[i] + maxt) ncap *= 2;
            int32_t *nf = modattn_realloc(flat, ncap * sizeof(int32_t), MODATTN_MEM_OTHER);
            if (!nf) {
                st = modattn_mem_last_status();
                goto done;
            }
            flat = nf;
            cap = ncap;
        }
        if (!texts[i] && lens && lens[i]) {
            st = modattn_error(MODATTN_EINVAL, "input %zu: NULL text of %zu bytes", i, lens[i]);
            goto done;
        }
        const char *t = texts[i] ? texts[i] : "";
        const size_t tl = lens && texts[i] ? lens[i] : strlen(t);
        size_t cnt = 0;
        st = tokenize_one(m, t, tl, flat + off[i], maxt, &cnt);
        if (st) {
            st = modattn_error_prefix(st, "tokenizing input %zu", i);
            goto done;
        }
        if ((st = check_ids(m, flat + off[i], cnt, i))) goto done;
        off[i + 1] = off[i] + cnt;
        if (ntokens_out) ntokens_out[i] = (int32_t)cnt;
    }
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "texts=%zu tokens=%zu", n, off[n]);
        modattn_trace_end(tr, "tokenize", "wordpiece", shape, 0, 0);
    }
    st = embed_packed(m, flat, off, n, out);
done:
    modattn_free(flat);
    modattn_free(off);
    return st;
}
