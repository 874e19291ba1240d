/* model/encoder_load.c — loading a BERT-family model directory: configuration, the mapped
 * weights (validated shapes, QKV concatenated), the tokenizer, and the weights' move to the
 * device the model runs on (encoder_device.c: GEMMs prepared once there); freeing it. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <xxhash.h>

#include "model/encoder_internal.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

/* ------------------------------------------------------------------ loading */

static int own(modattn_model *m, float *p) {
    float **n = modattn__realloc(m->owned, (m->nowned + 1) * sizeof *n, MODATTN_MEM_OTHER);
    if (!n) {
        modattn_free(p);
        return modattn__mem_last_status();
    }
    m->owned = n;
    m->owned[m->nowned++] = p;
    return 0;
}

/* A weight the loader no longer needs (copied into a fused matrix, packed by the device, or widened
 * from bf16): an owned copy is freed, a range of the file's mapping given back
 * (modattn__st_release: read again from the file if anything ever reads it). p may be NULL. */
static void drop(modattn_model *m, const float *p, size_t count) {
    if (!p) return;
    for (size_t i = 0; i < m->nowned; i++)
        if (m->owned[i] == p) {
            modattn_free(m->owned[i]);
            m->owned[i] = NULL;
            return;
        }
    modattn__st_release(m->st, p, count * sizeof(float));
}

/* info.identity: XXH3 over a fixed-layout record of what makes the vectors (see model.h), with
 * tokenizer.json's bytes hashed in. */
static int model_identity(modattn_model *m, const char *tokenizer_path) {
    struct {
        char tag[24];
        uint64_t weights, tokenizer, max_tokens, dim;
        char model_type[32];
        int32_t hidden, layers, heads, intermediate, max_positions, type_vocab, vocab, pad_id, act;
        int32_t lower_case, pooling, normalize;
        double ln_eps;
    } r;
    memset(&r, 0, sizeof r);
    const modattn__model_config *c = &m->cfg;
    snprintf(r.tag, sizeof r.tag, "modattn-identity-1");
    r.weights = m->info.weights_xxh3;
    r.max_tokens = c->max_tokens, r.dim = c->dim;
    snprintf(r.model_type, sizeof r.model_type, "%s", c->model_type);
    r.hidden = c->hidden, r.layers = c->layers, r.heads = c->heads, r.intermediate = c->intermediate;
    r.max_positions = c->max_positions, r.type_vocab = c->type_vocab, r.vocab = c->vocab, r.pad_id = c->pad_id;
    r.act = (int32_t)c->act, r.lower_case = c->lower_case, r.pooling = (int32_t)c->pooling;
    r.normalize = c->normalize, r.ln_eps = c->ln_eps;
    int fd = open(tokenizer_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return modattn__error(MODATTN_EIO, "%s: cannot open: %s", tokenizer_path, strerror(errno));
    XXH3_state_t *h = XXH3_createState();
    int st = h ? 0 : modattn__error(MODATTN_ENOMEM, "hashing %s", tokenizer_path);
    if (!st) XXH3_64bits_reset(h);
    unsigned char buf[1 << 16];
    ssize_t k;
    while (!st && (k = read(fd, buf, sizeof buf)) != 0) {
        if (k < 0) {
            if (errno == EINTR) continue;
            st = modattn__error(MODATTN_EIO, "%s: cannot read: %s", tokenizer_path, strerror(errno));
            break;
        }
        XXH3_64bits_update(h, buf, (size_t)k);
    }
    close(fd);
    if (!st) {
        r.tokenizer = XXH3_64bits_digest(h);
        uint64_t id = XXH3_64bits(&r, sizeof r);
        if (c->modern) { /* what of modernbert's config makes its vectors and the record above lacks */
            char rec[MODATTN__MAX_LAYERS + 160];
            int n = snprintf(rec, sizeof rec, "%016llx modernbert rope %.17g %.17g window %d bias %d%d%d layers ",
                             (unsigned long long)id, c->rope_global, c->rope_local, c->window, (int)c->norm_bias,
                             (int)c->attn_bias, (int)c->mlp_bias);
            for (int l = 0; l < c->layers && n + 1 < (int)sizeof rec; l++) rec[n++] = c->local_layer[l] ? 'l' : 'g';
            id = XXH3_64bits(rec, (size_t)n);
        }
        if (c->gte) { /* gte's rotary positions, which the record above lacks */
            char rec[96];
            int n = snprintf(rec, sizeof rec, "%016llx gte rope %.17g ntk %.17g", (unsigned long long)id,
                             c->rope_global, c->rope_ntk);
            id = XXH3_64bits(rec, (size_t)n);
        }
        if (c->nomic) { /* what of nomic_bert's config makes its vectors and the record above lacks */
            char rec[96];
            int n = snprintf(rec, sizeof rec, "%016llx nomic_bert rope %.17g interleaved %d", (unsigned long long)id,
                             c->rope_global, (int)c->rope_interleaved);
            id = XXH3_64bits(rec, (size_t)n);
        }
        if (c->alibi) { /* jina_bert: what its vectors depend on beyond the record */
            char rec[64];
            int n = snprintf(rec, sizeof rec, "%016llx jina_bert alibi glu %d", (unsigned long long)id, (int)c->jina_glu);
            id = XXH3_64bits(rec, (size_t)n);
        }
        if (c->decoder) { /* what of a qwen config makes its vectors and the record above lacks */
            char rec[160];
            int n = snprintf(rec, sizeof rec, "%016llx %s rope %.17g kv_heads %d head_dim %d qk_norm %d bias %d%d",
                             (unsigned long long)id, c->model_type, c->rope_theta, c->kv_heads, c->head_dim,
                             (int)c->qk_norm, (int)c->qkv_bias, (int)c->attn_bias);
            id = XXH3_64bits(rec, (size_t)(n < (int)sizeof rec ? n : (int)sizeof rec - 1));
        }
        if (c->precision != MODATTN_PRECISION_FP32) { /* fp32's identities stay what they were */
            char rec[48];
            int n = snprintf(rec, sizeof rec, "%016llx precision %s", (unsigned long long)id,
                             modattn_precision_name(c->precision));
            id = XXH3_64bits(rec, (size_t)n);
        }
        snprintf(m->info.identity, sizeof m->info.identity, "%016llx", (unsigned long long)id);
    }
    XXH3_freeState(h);
    return st;
}

/* The index of the first NaN or infinity among the n floats at p (any alignment), or n. Blocks of
 * 256 with a branch-free test per element, so the compiler vectorises it: ~90 MB in a few ms. */
static inline __attribute__((always_inline)) size_t scan_nonfinite(const unsigned char *p, size_t n) {
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        unsigned bad = 0;
        for (size_t j = 0; j < 256; j++) {
            uint32_t u;
            memcpy(&u, p + 4 * (i + j), 4);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (bad) break;
    }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        if ((u & 0x7f800000u) == 0x7f800000u) return i;
    }
    return n;
}

#ifdef MODATTN_KERNEL_TWINS
/* sanitizer builds: the scan's uninstrumented twin (core/internal_core.h: kernel twins; under ASan
 * the scan of every weight was a sixth of a short embed's time) */
__attribute__((no_sanitize("address", "undefined"))) static size_t scan_nonfinite_unchecked(const unsigned char *p, size_t n) {
    return scan_nonfinite(p, n);
}
#endif

static size_t first_nonfinite(const unsigned char *p, size_t n) {
#ifdef MODATTN_KERNEL_TWINS
    if (modattn__kernel_twins_on()) {
        modattn__asan_check_region(p, 4 * n, false, "model load: a tensor's values");
        return scan_nonfinite_unchecked(p, n);
    }
#endif
    return scan_nonfinite(p, n);
}

/* The fp32 tensor prefix+name with exactly the shape [d0] or [d0, d1] (d1 = 0: 1-D), every value
 * finite. Errors name the file and the tensor (and the index of a NaN or infinity). A tensor not
 * 4-byte aligned in the file is copied. */
static int get_f32(modattn_model *m, const char *prefix, const char *name, int64_t d0, int64_t d1,
                   const float **out) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const modattn_st_tensor *t = modattn__st_find(m->st, full);
    if (!t)
        return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s' is missing", m->st->path, full);
    if (t->dtype != MODATTN_ST_F32)
        return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s': dtype %s, expected F32",
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
            return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s': shape %s, expected [%lld, %lld]",
                                 m->st->path, full, got, (long long)d0, (long long)d1);
        return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s': shape %s, expected [%lld]",
                             m->st->path, full, got, (long long)d0);
    }
    const size_t count = (size_t)(t->end - t->begin) / 4;
    const size_t bad = t->scanned ? (size_t)t->first_nonfinite : first_nonfinite(t->data, count);
    if (bad < count) {
        float v;
        memcpy(&v, (const unsigned char *)t->data + 4 * bad, 4);
        const size_t cols = nd == 2 ? (size_t)d1 : 1;
        if (nd == 2)
            return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s': element [%zu, %zu] is %s: the weights are damaged",
                                 m->st->path, full, bad / cols, bad % cols, v != v ? "NaN" : v > 0 ? "+inf" : "-inf");
        return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s': element [%zu] is %s: the weights are damaged",
                             m->st->path, full, bad, v != v ? "NaN" : v > 0 ? "+inf" : "-inf");
    }
    if (((uintptr_t)t->data & 3u) == 0) {
        *out = t->data;
        return 0;
    }
    float *copy = modattn__malloc(t->end - t->begin, MODATTN_MEM_WEIGHTS);
    if (!copy) return modattn__mem_last_status();
    memcpy(copy, t->data, t->end - t->begin);
    int st = own(m, copy);
    if (st) return st;
    *out = copy;
    return 0;
}

/* Where a family keeps a layer's tensors (transformers' module names). */
typedef struct layer_names {
    const char *layer; /* "encoder.layer.%d." */
    const char *q, *k, *v, *o, *ln1, *up, *down, *ln2; /* "<name>.weight" / "<name>.bias" follow */
} layer_names;

static const layer_names k_bert_names = {"encoder.layer.%d.", "attention.self.query", "attention.self.key",
                                         "attention.self.value", "attention.output.dense",
                                         "attention.output.LayerNorm", "intermediate.dense", "output.dense",
                                         "output.LayerNorm"};
static const layer_names k_mpnet_names = {"encoder.layer.%d.", "attention.attn.q", "attention.attn.k",
                                          "attention.attn.v", "attention.attn.o", "attention.LayerNorm",
                                          "intermediate.dense", "output.dense", "output.LayerNorm"};
static const layer_names k_distil_names = {"transformer.layer.%d.", "attention.q_lin", "attention.k_lin",
                                           "attention.v_lin", "attention.out_lin", "sa_layer_norm", "ffn.lin1",
                                           "ffn.lin2", "output_layer_norm"};

static int get_wb(modattn_model *m, const char *p, const char *mod, int64_t d0, int64_t d1, const float **w,
                  const float **b) {
    char nw[160], nb[160];
    snprintf(nw, sizeof nw, "%s.weight", mod);
    snprintf(nb, sizeof nb, "%s.bias", mod);
    int st = get_f32(m, p, nw, d0, d1, w);
    return st ? st : get_f32(m, p, nb, d0, 0, b);
}

/* DistilBERT's create_sinusoidal_embeddings (float64, then float32): the table of a checkpoint
 * that says sinusoidal_pos_embds and does not store it. */
static int sinusoidal_table(modattn_model *m, int64_t P, int64_t H, const float **out) {
    float *t = modattn__malloc((size_t)(P * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
    if (!t) return modattn__mem_last_status();
    for (int64_t p = 0; p < P; p++)
        for (int64_t j = 0; j < H; j++) {
            const double a = (double)p / pow(10000.0, 2.0 * (double)(j / 2) / (double)H);
            t[p * H + j] = (float)(j % 2 ? cos(a) : sin(a));
        }
    int st = own(m, t);
    if (st) return st;
    *out = t;
    return 0;
}

/* A zero vector of n floats the model owns (a bias or LayerNorm beta the checkpoint does not have:
 * adding 0 changes nothing). */
static int zeros(modattn_model *m, size_t n, const float **out) {
    float *z = modattn__calloc(n ? n : 1, sizeof(float), MODATTN_MEM_WEIGHTS);
    if (!z) return modattn__mem_last_status();
    int st = own(m, z);
    if (st) return st;
    *out = z;
    return 0;
}

/* name.weight [d0] (or [d0, d1]) and name.bias, or zeros where the config says there is none */
static int get_opt_wb(modattn_model *m, const char *p, const char *mod, int64_t d0, int64_t d1, bool has_bias,
                      const float *zero, const float **w, const float **b) {
    char nw[160], nb[160];
    snprintf(nw, sizeof nw, "%s.weight", mod);
    snprintf(nb, sizeof nb, "%s.bias", mod);
    int st = get_f32(m, p, nw, d0, d1, w);
    if (st) return st;
    if (has_bias) return get_f32(m, p, nb, d0, 0, b);
    *b = zero;
    return 0;
}

/* ModernBertModel's weights (bare, or under "model." in a *ForMaskedLM checkpoint). */
static int load_modern_weights(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate;
    const char *prefix = modattn__st_find(m->st, "embeddings.tok_embeddings.weight")         ? ""
                         : modattn__st_find(m->st, "model.embeddings.tok_embeddings.weight") ? "model."
                                                                                               : NULL;
    if (!prefix)
        return modattn__error(MODATTN_EFORMAT, "%s: tensor 'embeddings.tok_embeddings.weight' is missing (also under "
                             "'model.'): not a ModernBERT checkpoint", m->st->path);
    const size_t zn = (size_t)(2 * I > 3 * H ? 2 * I : 3 * H);
    const float *zero = NULL, *pos_zero = NULL;
    int st;
    if ((st = zeros(m, zn, &zero))) return st;
    /* no position table: rotary positions act in attention; the embedding op adds rows of zeros */
    if ((st = zeros(m, c->max_tokens * (size_t)H, &pos_zero))) return st;
    m->pos = pos_zero, m->type0 = zero;
    if ((st = get_f32(m, prefix, "embeddings.tok_embeddings.weight", c->vocab, H, &m->word)) ||
        (st = get_opt_wb(m, prefix, "embeddings.norm", H, 0, c->norm_bias, zero, &m->emb_g, &m->emb_b)) ||
        (st = get_opt_wb(m, prefix, "final_norm", H, 0, c->norm_bias, zero, &m->fin_g, &m->fin_b)))
        return st;
    m->layers = modattn__calloc((size_t)c->layers, sizeof *m->layers, MODATTN_MEM_OTHER);
    if (!m->layers) return modattn__mem_last_status();
    for (int l = 0; l < c->layers; l++) {
        layer_w *L = &m->layers[l];
        char p[96];
        snprintf(p, sizeof p, "%slayers.%d.", prefix, l);
        const float *wqkv, *bqkv;
        if ((l > 0 && (st = get_opt_wb(m, p, "attn_norm", H, 0, c->norm_bias, zero, &L->ln1_g, &L->ln1_b))) ||
            (st = get_opt_wb(m, p, "attn.Wqkv", 3 * H, H, c->attn_bias, zero, &wqkv, &bqkv)) ||
            (st = get_opt_wb(m, p, "attn.Wo", H, H, c->attn_bias, zero, &L->wo, &L->bo)) ||
            (st = get_opt_wb(m, p, "mlp_norm", H, 0, c->norm_bias, zero, &L->ln2_g, &L->ln2_b)) ||
            (st = get_opt_wb(m, p, "mlp.Wi", 2 * I, H, c->mlp_bias, zero, &L->w1, &L->b1)) ||
            (st = get_opt_wb(m, p, "mlp.Wo", H, I, c->mlp_bias, zero, &L->w2, &L->b2)))
            return st;
        if (l == 0) { /* attn_norm is nn.Identity in layer 0: a checkpoint holding one is not this model */
            char nm[160];
            snprintf(nm, sizeof nm, "%sattn_norm.weight", p);
            if (modattn__st_find(m->st, nm))
                return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s' is present: ModernBERT's first layer has no "
                                     "attn_norm", m->st->path, nm);
        }
        /* owned copies, as the other families' fused QKV (freed once the device holds its own) */
        L->wqkv = modattn__malloc((size_t)(3 * H * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        L->bqkv = modattn__malloc((size_t)(3 * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!L->wqkv || !L->bqkv) return modattn__mem_last_status();
        memcpy(L->wqkv, wqkv, (size_t)(3 * H * H) * sizeof(float));
        memcpy(L->bqkv, bqkv, (size_t)(3 * H) * sizeof(float));
    }
    return 0;
}

/* A GTE v1.5 encoder's weights: the Hub's NewModel names (encoder.layer.N.attention.qkv_proj, o_proj,
 * attn_ln, mlp.up_gate_proj, mlp.down_proj, mlp_ln; bare or under "new.") or transformers' GteModel
 * names (layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, post_attention_layernorm,
 * post_mlp_layernorm; bare or under "gte."). up_gate_proj is [up | gate] (transformers'
 * conversion_mapping chunks it into up_proj, gate_proj; NewGatedMLP: act(gate) * up): w1 is stored
 * [gate | up] for the glu op, which gates its first half. Neither gated half has a bias. */
static int load_gte_weights(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate;
    static const char *const prefixes[] = {"", "new.", "gte."};
    const char *prefix = NULL;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !prefix; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%sembeddings.word_embeddings.weight", prefixes[i]);
        if (modattn__st_find(m->st, nm)) prefix = prefixes[i];
    }
    if (!prefix)
        return modattn__error(MODATTN_EFORMAT, "%s: tensor 'embeddings.word_embeddings.weight' is missing (also under "
                             "'new.' or 'gte.'): not a GTE checkpoint", m->st->path);
    char nm[160];
    snprintf(nm, sizeof nm, "%sencoder.layer.0.attention.qkv_proj.weight", prefix);
    const bool hub = modattn__st_find(m->st, nm) != NULL;
    const size_t zn = (size_t)(2 * I > 3 * H ? 2 * I : 3 * H);
    const float *zero = NULL, *pos_zero = NULL;
    int st;
    if ((st = zeros(m, zn, &zero))) return st;
    /* no position table: rotary positions act in attention; the embedding op adds rows of zeros */
    if ((st = zeros(m, c->max_tokens * (size_t)H, &pos_zero))) return st;
    m->pos = pos_zero, m->type0 = zero;
    if ((st = get_f32(m, prefix, "embeddings.word_embeddings.weight", c->vocab, H, &m->word)) ||
        (st = get_wb(m, prefix, "embeddings.LayerNorm", H, 0, &m->emb_g, &m->emb_b)) ||
        (c->type_vocab > 0 &&
         (st = get_f32(m, prefix, "embeddings.token_type_embeddings.weight", c->type_vocab, H, &m->type0))))
        return st;
    m->layers = modattn__calloc((size_t)c->layers, sizeof *m->layers, MODATTN_MEM_OTHER);
    if (!m->layers) return modattn__mem_last_status();
    for (int l = 0; l < c->layers; l++) {
        layer_w *L = &m->layers[l];
        char p[96];
        snprintf(p, sizeof p, hub ? "%sencoder.layer.%d." : "%slayers.%d.", prefix, l);
        L->wqkv = modattn__malloc((size_t)(3 * H * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        L->bqkv = modattn__malloc((size_t)(3 * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        float *w1 = modattn__malloc((size_t)(2 * I * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!w1) return modattn__mem_last_status();
        if ((st = own(m, w1))) return st;
        if (!L->wqkv || !L->bqkv) return modattn__mem_last_status();
        const float *up, *gate;
        if (hub) {
            const float *wqkv, *bqkv, *ug;
            if ((st = get_wb(m, p, "attention.qkv_proj", 3 * H, H, &wqkv, &bqkv)) ||
                (st = get_wb(m, p, "attention.o_proj", H, H, &L->wo, &L->bo)) ||
                (st = get_wb(m, p, "attn_ln", H, 0, &L->ln1_g, &L->ln1_b)) ||
                (st = get_f32(m, p, "mlp.up_gate_proj.weight", 2 * I, H, &ug)) ||
                (st = get_wb(m, p, "mlp.down_proj", H, I, &L->w2, &L->b2)) ||
                (st = get_wb(m, p, "mlp_ln", H, 0, &L->ln2_g, &L->ln2_b)))
                return st;
            memcpy(L->wqkv, wqkv, (size_t)(3 * H * H) * sizeof(float));
            memcpy(L->bqkv, bqkv, (size_t)(3 * H) * sizeof(float));
            up = ug, gate = ug + I * H;
        } else {
            const float *wq, *wk, *wv, *bq, *bk, *bv;
            if ((st = get_wb(m, p, "self_attn.q_proj", H, H, &wq, &bq)) ||
                (st = get_wb(m, p, "self_attn.k_proj", H, H, &wk, &bk)) ||
                (st = get_wb(m, p, "self_attn.v_proj", H, H, &wv, &bv)) ||
                (st = get_wb(m, p, "self_attn.o_proj", H, H, &L->wo, &L->bo)) ||
                (st = get_wb(m, p, "post_attention_layernorm", H, 0, &L->ln1_g, &L->ln1_b)) ||
                (st = get_f32(m, p, "mlp.up_proj.weight", I, H, &up)) ||
                (st = get_f32(m, p, "mlp.gate_proj.weight", I, H, &gate)) ||
                (st = get_wb(m, p, "mlp.down_proj", H, I, &L->w2, &L->b2)) ||
                (st = get_wb(m, p, "post_mlp_layernorm", H, 0, &L->ln2_g, &L->ln2_b)))
                return st;
            memcpy(L->wqkv, wq, (size_t)(H * H) * sizeof(float));
            memcpy(L->wqkv + H * H, wk, (size_t)(H * H) * sizeof(float));
            memcpy(L->wqkv + 2 * H * H, wv, (size_t)(H * H) * sizeof(float));
            memcpy(L->bqkv, bq, (size_t)H * sizeof(float));
            memcpy(L->bqkv + H, bk, (size_t)H * sizeof(float));
            memcpy(L->bqkv + 2 * H, bv, (size_t)H * sizeof(float));
        }
        memcpy(w1, gate, (size_t)(I * H) * sizeof(float));
        memcpy(w1 + I * H, up, (size_t)(I * H) * sizeof(float));
        L->w1 = w1, L->b1 = zero;
    }
    return 0;
}

/* nomic-ai's NomicBertModel weights (nomic-embed-text-v1 / v1.5; bare, or under "bert." in a
 * NomicBertForPreTraining checkpoint): emb_ln, encoder.layers.N.{attn.Wqkv, attn.out_proj,
 * norm1, mlp.fc11, mlp.fc12, mlp.fc2, norm2}, no biases on the linear layers (the config refuses
 * them), no position table. The FFN's one weight is [fc12; fc11]: the glu op's act(first half) *
 * second half is nomic's fc11(x) * act(fc12(x)). */
static int load_nomic_weights(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate;
    const char *prefix = modattn__st_find(m->st, "embeddings.word_embeddings.weight")        ? ""
                         : modattn__st_find(m->st, "bert.embeddings.word_embeddings.weight") ? "bert."
                                                                                             : NULL;
    if (!prefix)
        return modattn__error(MODATTN_EFORMAT, "%s: tensor 'embeddings.word_embeddings.weight' is missing (also under "
                             "'bert.'): not a nomic_bert checkpoint", m->st->path);
    char pn[96];
    snprintf(pn, sizeof pn, "%sembeddings.position_embeddings.weight", prefix);
    if (modattn__st_find(m->st, pn)) /* nomic's rotary_emb_fraction 0: absolute positions, not run here */
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: tensor '%s' is present: a nomic_bert with absolute position "
                             "embeddings is not supported (rotary positions only)", m->st->path, pn);
    const size_t zn = (size_t)(2 * I > 3 * H ? 2 * I : 3 * H);
    const float *zero = NULL, *pos_zero = NULL;
    int st;
    if ((st = zeros(m, zn, &zero))) return st;
    /* no position table: rotary positions act in attention; the embedding op adds rows of zeros */
    if ((st = zeros(m, c->max_tokens * (size_t)H, &pos_zero))) return st;
    m->pos = pos_zero, m->type0 = zero;
    if ((st = get_f32(m, prefix, "embeddings.word_embeddings.weight", c->vocab, H, &m->word)) ||
        (c->type_vocab > 0 &&
         (st = get_f32(m, prefix, "embeddings.token_type_embeddings.weight", c->type_vocab, H, &m->type0))) ||
        (st = get_wb(m, prefix, "emb_ln", H, 0, &m->emb_g, &m->emb_b)))
        return st;
    m->layers = modattn__calloc((size_t)c->layers, sizeof *m->layers, MODATTN_MEM_OTHER);
    if (!m->layers) return modattn__mem_last_status();
    for (int l = 0; l < c->layers; l++) {
        layer_w *L = &m->layers[l];
        char p[96];
        snprintf(p, sizeof p, "%sencoder.layers.%d.", prefix, l);
        const float *wqkv, *bqkv, *up, *gate, *bup, *bgate;
        if ((st = get_opt_wb(m, p, "attn.Wqkv", 3 * H, H, false, zero, &wqkv, &bqkv)) ||
            (st = get_opt_wb(m, p, "attn.out_proj", H, H, false, zero, &L->wo, &L->bo)) ||
            (st = get_wb(m, p, "norm1", H, 0, &L->ln1_g, &L->ln1_b)) ||
            (st = get_opt_wb(m, p, "mlp.fc11", I, H, false, zero, &up, &bup)) ||
            (st = get_opt_wb(m, p, "mlp.fc12", I, H, false, zero, &gate, &bgate)) ||
            (st = get_opt_wb(m, p, "mlp.fc2", H, I, false, zero, &L->w2, &L->b2)) ||
            (st = get_wb(m, p, "norm2", H, 0, &L->ln2_g, &L->ln2_b)))
            return st;
        L->b1 = zero;
        float *w1 = modattn__malloc((size_t)(2 * I * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!w1) return modattn__mem_last_status();
        if ((st = own(m, w1))) return st;
        memcpy(w1, gate, (size_t)(I * H) * sizeof(float));
        memcpy(w1 + I * H, up, (size_t)(I * H) * sizeof(float));
        L->w1 = w1;
        /* owned copies, as the other families' fused QKV (freed once the device holds its own) */
        L->wqkv = modattn__malloc((size_t)(3 * H * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        L->bqkv = modattn__calloc((size_t)(3 * H), sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!L->wqkv || !L->bqkv) return modattn__mem_last_status();
        memcpy(L->wqkv, wqkv, (size_t)(3 * H * H) * sizeof(float));
    }
    return 0;
}

/* A weight the model owns (freed at close): n floats, or an error */
static float *owned_array(modattn_model *m, size_t n, int *st) {
    float *p = modattn__malloc(n * sizeof(float), MODATTN_MEM_WEIGHTS);
    *st = p ? own(m, p) : modattn__mem_last_status();
    return *st ? NULL : p;
}

/* A weight as get_f32, or stored as bf16 (Qwen3-Embedding ships bf16 weights): widened exactly to
 * fp32 (the 16 bits are the float's top half), an owned copy; every value finite. */
static int get_w(modattn_model *m, const char *prefix, const char *name, int64_t d0, int64_t d1, const float **out) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const modattn_st_tensor *t = modattn__st_find(m->st, full);
    if (!t || t->dtype != MODATTN_ST_BF16) return get_f32(m, prefix, name, d0, d1, out);
    const int nd = d1 ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != d0 || (nd == 2 && t->shape[1] != d1) ||
        t->end - t->begin != (uint64_t)(d0 * (d1 ? d1 : 1)) * 2u)
        return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s' (BF16): shape is not [%lld%s%lld]", m->st->path, full,
                             (long long)d0, d1 ? ", " : "", (long long)(d1 ? d1 : 0));
    const size_t n = (size_t)(t->end - t->begin) / 2;
    int st;
    float *w = owned_array(m, n, &st);
    if (!w) return st;
    const unsigned char *src = t->data;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        const uint32_t u = (uint32_t)h << 16;
        if ((u & 0x7f800000u) == 0x7f800000u)
            return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s': element %zu is %s: the weights are damaged",
                                 m->st->path, full, i, (u & 0x007fffffu) ? "NaN" : (u >> 31) ? "-inf" : "+inf");
        memcpy(w + i, &u, 4);
    }
    modattn__st_release(m->st, t->data, (size_t)(t->end - t->begin)); /* widened: the bf16 pages are not read again */
    *out = w;
    return 0;
}

/* Qwen3Model / Qwen2Model's weights (bare, or under "model." in a *ForCausalLM checkpoint): QKV
 * concatenated to [(heads + 2 kv_heads) D, H], gate_proj and up_proj to one [2I, H] (act(gate) * up
 * by the glu op), QK-norm's weights tiled to the QKV row's Q and K heads (one grouped norm call). */
static int load_qwen_weights(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate, D = c->head_dim, QD = (int64_t)c->heads * D,
                  KD = (int64_t)c->kv_heads * D, N = QD + 2 * KD;
    const char *prefix = modattn__st_find(m->st, "embed_tokens.weight")         ? ""
                         : modattn__st_find(m->st, "model.embed_tokens.weight") ? "model."
                                                                                : NULL;
    if (!prefix)
        return modattn__error(MODATTN_EFORMAT, "%s: tensor 'embed_tokens.weight' is missing (also under 'model.'): not "
                             "a %s checkpoint", m->st->path, c->arch == MODATTN__ARCH_QWEN3 ? "Qwen3" : "Qwen2");
    const int64_t zmax = N > H ? N : H;
    const size_t zn = (size_t)(zmax > 2 * I ? zmax : 2 * I); /* every bias the checkpoint lacks */
    const float *zero = NULL, *pos_zero = NULL;
    int st;
    if ((st = zeros(m, zn, &zero))) return st;
    /* no position table: rotary positions act in attention; the plain embedding adds rows of zeros */
    if ((st = zeros(m, c->max_tokens * (size_t)H, &pos_zero))) return st;
    m->pos = pos_zero, m->type0 = zero, m->emb_g = zero, m->emb_b = zero, m->fin_b = zero;
    if ((st = get_w(m, prefix, "embed_tokens.weight", c->vocab, H, &m->word)) ||
        (st = get_w(m, prefix, "norm.weight", H, 0, &m->fin_g)))
        return st;
    m->layers = modattn__calloc((size_t)c->layers, sizeof *m->layers, MODATTN_MEM_OTHER);
    if (!m->layers) return modattn__mem_last_status();
    for (int l = 0; l < c->layers; l++) {
        layer_w *L = &m->layers[l];
        char p[96];
        snprintf(p, sizeof p, "%slayers.%d.", prefix, l);
        const float *wq, *wk, *wv, *bq = zero, *bk = zero, *bv = zero, *gate, *up, *qn = NULL, *kn = NULL;
        L->bo = L->ln1_b = L->ln2_b = L->b2 = zero;
        if ((st = get_w(m, p, "input_layernorm.weight", H, 0, &L->ln1_g)) ||
            (st = get_w(m, p, "self_attn.q_proj.weight", QD, H, &wq)) ||
            (st = get_w(m, p, "self_attn.k_proj.weight", KD, H, &wk)) ||
            (st = get_w(m, p, "self_attn.v_proj.weight", KD, H, &wv)) ||
            (st = get_w(m, p, "self_attn.o_proj.weight", H, QD, &L->wo)) ||
            (st = get_w(m, p, "post_attention_layernorm.weight", H, 0, &L->ln2_g)) ||
            (st = get_w(m, p, "mlp.gate_proj.weight", I, H, &gate)) || (st = get_w(m, p, "mlp.up_proj.weight", I, H, &up)) ||
            (st = get_w(m, p, "mlp.down_proj.weight", H, I, &L->w2)))
            return st;
        if (c->qkv_bias && ((st = get_w(m, p, "self_attn.q_proj.bias", QD, 0, &bq)) ||
                            (st = get_w(m, p, "self_attn.k_proj.bias", KD, 0, &bk)) ||
                            (st = get_w(m, p, "self_attn.v_proj.bias", KD, 0, &bv))))
            return st;
        if (c->attn_bias && (st = get_w(m, p, "self_attn.o_proj.bias", H, 0, &L->bo))) return st;
        if (c->qk_norm && ((st = get_w(m, p, "self_attn.q_norm.weight", D, 0, &qn)) ||
                           (st = get_w(m, p, "self_attn.k_norm.weight", D, 0, &kn))))
            return st;
        L->wqkv = modattn__malloc((size_t)(N * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        L->bqkv = modattn__malloc((size_t)N * sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!L->wqkv || !L->bqkv) return modattn__mem_last_status();
        memcpy(L->wqkv, wq, (size_t)(QD * H) * sizeof(float));
        memcpy(L->wqkv + QD * H, wk, (size_t)(KD * H) * sizeof(float));
        memcpy(L->wqkv + (QD + KD) * H, wv, (size_t)(KD * H) * sizeof(float));
        memcpy(L->bqkv, bq, (size_t)QD * sizeof(float));
        memcpy(L->bqkv + QD, bk, (size_t)KD * sizeof(float));
        memcpy(L->bqkv + QD + KD, bv, (size_t)KD * sizeof(float));
        /* the fused copies hold them now: q, k, v off the file's pages (or freed, widened from bf16) */
        drop(m, wq, (size_t)(QD * H)), drop(m, wk, (size_t)(KD * H)), drop(m, wv, (size_t)(KD * H));
        float *w1 = owned_array(m, (size_t)(2 * I * H), &st);
        if (!w1) return st;
        memcpy(w1, gate, (size_t)(I * H) * sizeof(float));
        memcpy(w1 + I * H, up, (size_t)(I * H) * sizeof(float));
        drop(m, gate, (size_t)(I * H)), drop(m, up, (size_t)(I * H));
        L->w1 = w1, L->b1 = zero;
        if (c->qk_norm) {
            float *g = owned_array(m, (size_t)(QD + KD), &st);
            if (!g) return st;
            for (int64_t h = 0; h < c->heads + c->kv_heads; h++)
                memcpy(g + h * D, h < c->heads ? qn : kn, (size_t)D * sizeof(float));
            L->qk_g = g;
        }
    }
    return 0;
}

static int load_weights(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    if (c->decoder) return load_qwen_weights(m);
    if (c->modern) return load_modern_weights(m);
    if (c->gte) return load_gte_weights(m);
    if (c->nomic) return load_nomic_weights(m);
    const int64_t H = c->hidden, I = c->intermediate;
    const char *prefix = NULL;
    /* the bare model's names, or under the task model's base ("bert.", "roberta.", ...) */
    static const char *prefixes[] = {"", "bert.", "roberta.", "distilbert.", "mpnet.", "model."};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !prefix; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%sembeddings.word_embeddings.weight", prefixes[i]);
        if (modattn__st_find(m->st, nm)) prefix = prefixes[i];
    }
    if (!prefix)
        return modattn__error(MODATTN_EFORMAT,
                             "%s: tensor 'embeddings.word_embeddings.weight' is missing (also "
                             "under 'bert.', 'roberta.', 'distilbert.', 'mpnet.' or 'model.'): not a %s checkpoint",
                             m->st->path,
                             c->arch == MODATTN__ARCH_XLM_ROBERTA ? "XLM-RoBERTa"
                             : c->arch == MODATTN__ARCH_DISTILBERT ? "DistilBERT"
                             : c->arch == MODATTN__ARCH_MPNET      ? "MPNet"
                                                                   : "BERT");
    const layer_names *nm = c->arch == MODATTN__ARCH_DISTILBERT ? &k_distil_names
                            : c->arch == MODATTN__ARCH_MPNET    ? &k_mpnet_names
                                                                : &k_bert_names;
    int st;
    if ((st = get_f32(m, prefix, "embeddings.word_embeddings.weight", c->vocab, H, &m->word)))
        return st;
    char pos_name[160];
    snprintf(pos_name, sizeof pos_name, "%sembeddings.position_embeddings.weight", prefix);
    if (c->alibi) { /* jina_bert: ALiBi in attention, no position table; the embedding op adds zeros */
        if (modattn__st_find(m->st, pos_name))
            return modattn__error(MODATTN_EFORMAT, "%s: tensor '%s' is present: a jina_bert model "
                                 "(position_embedding_type \"alibi\") has no position embeddings", m->st->path, pos_name);
        st = zeros(m, c->max_tokens * (size_t)H, &m->pos);
    } else if (c->arch == MODATTN__ARCH_DISTILBERT && c->sinusoidal && !modattn__st_find(m->st, pos_name))
        st = sinusoidal_table(m, c->max_positions, H, &m->pos);
    else
        st = get_f32(m, prefix, "embeddings.position_embeddings.weight", c->max_positions, H, &m->pos);
    if (st) return st;
    m->pos += (size_t)c->pos_offset * (size_t)H; /* the row of the first position id */
    if ((st = get_f32(m, prefix, "embeddings.LayerNorm.weight", H, 0, &m->emb_g)) ||
        (st = get_f32(m, prefix, "embeddings.LayerNorm.bias", H, 0, &m->emb_b)))
        return st;
    if (c->type_vocab > 0) {
        if ((st = get_f32(m, prefix, "embeddings.token_type_embeddings.weight", c->type_vocab, H, &m->type0)))
            return st;
    } else { /* no token types: x = word + position (+ 0, exactly) */
        float *zero = modattn__calloc((size_t)H, sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!zero) return modattn__mem_last_status();
        if ((st = own(m, zero))) return st;
        m->type0 = zero;
    }
    if (c->rel_buckets > 0 &&
        (st = get_f32(m, prefix, "encoder.relative_attention_bias.weight", c->rel_buckets, c->heads, &m->rel_bias)))
        return st;
    m->layers = modattn__calloc((size_t)c->layers, sizeof *m->layers, MODATTN_MEM_OTHER);
    if (!m->layers) return modattn__mem_last_status();
    const float *jina_zero = NULL;
    for (int l = 0; l < c->layers; l++) {
        layer_w *L = &m->layers[l];
        char p[96], lay[64];
        snprintf(lay, sizeof lay, nm->layer, l);
        snprintf(p, sizeof p, "%s%s", prefix, lay);
        const float *wq, *wk, *wv, *bq, *bk, *bv;
        if ((st = get_wb(m, p, nm->q, H, H, &wq, &bq)) || (st = get_wb(m, p, nm->k, H, H, &wk, &bk)) ||
            (st = get_wb(m, p, nm->v, H, H, &wv, &bv)) || (st = get_wb(m, p, nm->o, H, H, &L->wo, &L->bo)) ||
            (st = get_wb(m, p, nm->ln1, H, 0, &L->ln1_g, &L->ln1_b)))
            return st;
        if (c->jina_glu) { /* JinaBertGLUMLP: gated_layers [2I, H] without bias, wo, layernorm */
            if (!jina_zero && (st = zeros(m, (size_t)(2 * I), &jina_zero))) return st;
            if ((st = get_f32(m, p, "mlp.gated_layers.weight", 2 * I, H, &L->w1)) ||
                (st = get_wb(m, p, "mlp.wo", H, I, &L->w2, &L->b2)) ||
                (st = get_wb(m, p, "mlp.layernorm", H, 0, &L->ln2_g, &L->ln2_b)))
                return st;
            L->b1 = jina_zero;
        } else if ((st = get_wb(m, p, nm->up, I, H, &L->w1, &L->b1)) ||
                   (st = get_wb(m, p, nm->down, H, I, &L->w2, &L->b2)) ||
                   (st = get_wb(m, p, nm->ln2, H, 0, &L->ln2_g, &L->ln2_b)))
            return st;
        /* One [3H, H] matrix so that Q, K and V come out of one GEMM as one [tokens, 3H] row. */
        L->wqkv = modattn__malloc((size_t)(3 * H * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        L->bqkv = modattn__malloc((size_t)(3 * H) * sizeof(float), MODATTN_MEM_WEIGHTS);
        if (!L->wqkv || !L->bqkv) return modattn__mem_last_status();
        memcpy(L->wqkv, wq, (size_t)(H * H) * sizeof(float));
        memcpy(L->wqkv + H * H, wk, (size_t)(H * H) * sizeof(float));
        memcpy(L->wqkv + 2 * H * H, wv, (size_t)(H * H) * sizeof(float));
        drop(m, wq, (size_t)(H * H)), drop(m, wk, (size_t)(H * H)), drop(m, wv, (size_t)(H * H));
        memcpy(L->bqkv, bq, (size_t)H * sizeof(float));
        memcpy(L->bqkv + H, bk, (size_t)H * sizeof(float));
        memcpy(L->bqkv + 2 * H, bv, (size_t)H * sizeof(float));
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
/* Layer l's host weights that the device holds on its own (copied or packed): freed, or their
 * mapped pages released, as soon as the layer is on the device (modattn__dev_model_create calls
 * this after each layer), so that the packed weights and these are never all resident at once
 * (Qwen3-0.6B-shaped with packed weights: a 3.4 GB peak where 1.9 GB stay). */
static void release_layer(void *arg, const modattn__dev_model *dm, int l) {
    modattn_model *m = arg;
    const modattn__model_config *c = &m->cfg;
    layer_w *L = &m->layers[l];
    if (!modattn__dev_model_borrows(dm, L->wqkv)) modattn_free(L->wqkv), L->wqkv = NULL;
    if (!modattn__dev_model_borrows(dm, L->bqkv)) modattn_free(L->bqkv), L->bqkv = NULL;
    /* the matrices the device packed (or copied): their pages or copies go, so that the packed
     * weights are not resident twice (Qwen3-0.6B-shaped: 4.5 GB peak for 1.8 GB of weights) */
    const int64_t H = c->hidden, I = c->intermediate, QD = c->decoder ? (int64_t)c->heads * c->head_dim : H;
    const int64_t I1 = c->decoder || c->jina_glu ? 2 * I : I;
    if (!c->modern && !c->gte && !c->nomic) {
        if (!modattn__dev_model_borrows(dm, L->wo)) drop(m, L->wo, (size_t)(H * QD)), L->wo = NULL;
        if (!modattn__dev_model_borrows(dm, L->w1)) drop(m, L->w1, (size_t)(I1 * H)), L->w1 = NULL;
        if (!modattn__dev_model_borrows(dm, L->w2)) drop(m, L->w2, (size_t)(H * I)), L->w2 = NULL;
    }
}


/* Moves the weights to the model's device (after load_weights: wqkv are the host copies). */
static int upload_to_device(modattn_model *m) {
    const modattn__model_config *c = &m->cfg;
    modattn__layer_weights *lw = modattn__calloc((size_t)c->layers, sizeof *lw, MODATTN_MEM_OTHER);
    if (!lw) return modattn__mem_last_status();
    for (int l = 0; l < c->layers; l++) {
        const layer_w *L = &m->layers[l];
        lw[l] = (modattn__layer_weights){L->wqkv, L->bqkv, L->wo, L->bo, L->ln1_g, L->ln1_b,
                                         L->w1, L->b1, L->w2, L->b2, L->ln2_g, L->ln2_b};
    }
    char identity[300];
    snprintf(identity, sizeof identity, "%s:%016llx", m->name, (unsigned long long)m->info.weights_xxh3);
    int st = modattn__dev_model_create(m->dev, c, m->word, m->pos, m->type0, m->emb_g, m->emb_b, m->rel_bias, m->fin_g,
                                       m->fin_b, lw,
                                       m->info.host_fallback_ops, !m->few_inputs, identity, release_layer, m, &m->dm);
    modattn_free(lw);
    if (!st && c->decoder && c->qk_norm) {
        const float **qk = modattn__calloc((size_t)c->layers, sizeof *qk, MODATTN_MEM_OTHER);
        if (!qk) return modattn__mem_last_status();
        for (int l = 0; l < c->layers; l++) qk[l] = m->layers[l].qk_g;
        st = modattn__dev_model_decoder_qk_norm(m->dm, qk);
        modattn_free(qk);
    }
    if (st) return modattn__error_prefix(st, "%s", m->st->path);
    /* (again for every layer: a graph device takes the model whole, with no per-layer call) */
    for (int l = 0; l < c->layers; l++) release_layer(m, m->dm, l);
    return 0;
}

/* A pair model's embedding table (modattn__model_load_head): rows v < V are word[v] + type[0], rows
 * V + v are word[v] + type[1], and the type row the device adds is zero, so that the device's
 * (row + pos) + 0 is (word + type) + pos, the order of transformers' BertEmbeddings, bit for bit. */
static int pair_tables(modattn_model *m) {
    const size_t V = (size_t)m->cfg.vocab, H = (size_t)m->cfg.hidden;
    float *w = modattn__malloc(2 * V * H * sizeof *w, MODATTN_MEM_WEIGHTS);
    if (!w) return modattn__mem_last_status();
    int st = own(m, w);
    if (st) return st;
    float *z = modattn__calloc(H, sizeof *z, MODATTN_MEM_WEIGHTS);
    if (!z) return modattn__mem_last_status();
    if ((st = own(m, z))) return st;
    for (size_t t = 0; t < 2; t++) {
        const float *ty = m->type0 + t * H;
        for (size_t v = 0; v < V; v++) {
            const float *src = m->word + v * H;
            float *dst = w + (t * V + v) * H;
            for (size_t k = 0; k < H; k++) dst[k] = src[k] + ty[k];
        }
    }
    m->word = w, m->type0 = z;
    m->cfg.vocab = (int)(2 * V);
    return 0;
}

static int load_model(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                      const modattn__model_config *preset, bool pair_types, modattn_model **out);

/* The model on one named device (opt->device, default cpu; never "auto": modattn_model_load_ex in
 * device_auto.c chooses, then comes here, so the dependency runs one way). */
int modattn__model_load_on_device(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                                  modattn_model **out) {
    return load_model(ctx, dir, opt, NULL, false, out);
}

int modattn__model_load_head(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                             size_t max_tokens, bool pair_types, modattn_model **out) {
    if (out) *out = NULL;
    if (opt && opt->device && strcmp(opt->device, "auto") == 0)
        return modattn__error(MODATTN_EUNSUPPORTED, "device \"auto\" is not supported for this model: name the device");
    modattn__model_config c;
    int st = modattn__config_load_hf(dir, max_tokens, &c);
    if (st) return st;
    if (pair_types && c.type_vocab < 2) pair_types = false;
    return load_model(ctx, dir, opt, &c, pair_types, out);
}

/* The F32 tensors' values whose first byte lies in the file's bytes [a, b): each tensor's first
 * NaN or infinity among them, if it has none yet (a tensor's pieces come in file order). *cur: the
 * first tensor in file order that may still reach [a, b) (the pieces come in order, so the walk
 * is linear in the tensors, however many of them the header lists). */
static void scan_piece(modattn_st_file *f, size_t *cur, size_t a, size_t b) {
    while (*cur < f->ntensors &&
           (size_t)((const uint8_t *)f->by_offset[*cur]->data - f->bytes) + (f->by_offset[*cur]->end - f->by_offset[*cur]->begin) <= a)
        ++*cur;
    for (size_t i = *cur; i < f->ntensors; i++) {
        modattn_st_tensor *t = f->by_offset[i];
        const size_t ta = (size_t)((const uint8_t *)t->data - f->bytes);
        if (ta >= b) break;
        if (t->dtype != MODATTN_ST_F32) continue;
        const size_t count = (size_t)(t->end - t->begin) / 4, tb = ta + 4 * count;
        if (tb <= a) continue;
        if (!t->scanned) t->scanned = true, t->first_nonfinite = count;
        if (t->first_nonfinite < count) continue;
        const size_t e0 = a <= ta ? 0 : (a - ta + 3) / 4, e1 = b >= tb ? count : (b - ta + 3) / 4;
        if (e1 <= e0) continue;
        const size_t bad = first_nonfinite((const unsigned char *)t->data + 4 * e0, e1 - e0);
        if (bad < e1 - e0) t->first_nonfinite = e0 + bad;
    }
}

/* XXH3 of the whole weights file (info.weights_hash), read in 64 MiB pieces, each given back once
 * hashed: the pages the model keeps are read again where it reads them (a 1.8 GB file no longer
 * stays resident in full from here). The same pass checks the F32 tensors for NaN and infinity
 * (1 MiB at a time, while it is in cache), which get_f32 then reads instead of reading every value
 * again: MiniLM's load was 20 ms (an eighth) shorter. */
static int hash_weights(modattn_model *m, uint64_t *out) {
    XXH3_state_t *hs = XXH3_createState();
    if (!hs) return modattn__error(MODATTN_ENOMEM, "%s: cannot hash the weights: out of memory", m->st->path);
    const size_t piece = (size_t)64 << 20, sub = (size_t)1 << 20;
    size_t cur = 0;
    XXH3_64bits_reset(hs);
    for (size_t o = 0; o < m->st->len; o += piece) {
        const size_t n = m->st->len - o < piece ? m->st->len - o : piece;
        for (size_t q = o; q < o + n; q += sub) {
            const size_t k = o + n - q < sub ? o + n - q : sub;
            XXH3_64bits_update(hs, m->st->bytes + q, k);
            if (m->st->by_offset) scan_piece(m->st, &cur, q, q + k);
        }
        modattn__st_release(m->st, m->st->bytes + o, n);
    }
    *out = XXH3_64bits_digest(hs);
    XXH3_freeState(hs);
    return 0;
}

static int load_model(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                      const modattn__model_config *preset, bool pair_types, modattn_model **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_model_load: out is NULL");
    *out = NULL;
    if (!ctx || !dir || !*dir)
        return modattn__error(MODATTN_EINVAL, "modattn_model_load: ctx and dir are required");
    const modattn_device_iface *dev = NULL;
    int dst = modattn_device_lookup(opt && opt->device && *opt->device ? opt->device : "cpu", &dev);
    if (dst) return dst;
    modattn_device_info dinfo;
    memset(&dinfo, 0, sizeof dinfo);
    modattn_device_info_get(dev, &dinfo);
    modattn_model *m = modattn__calloc(1, sizeof *m, MODATTN_MEM_OTHER);
    if (!m) return modattn__mem_last_status();
    m->ctx = ctx;
    m->dev = dev;
    m->device_serial = !dinfo.host_memory;
    pthread_mutex_init(&m->device_mu, NULL);
    m->few_inputs = opt && opt->few_inputs;
    int st = 0;
    if (opt && opt->pool) {
        m->pool = opt->pool;
    } else if (dinfo.host_memory || (opt && opt->host_fallback)) { /* else no host passes */
        if ((st = modattn__pool_create(modattn_ctx_threads(ctx), &m->pool))) {
            modattn_free(m);
            return st;
        }
        m->own_pool = true;
    }
    m->batch_tokens = MODATTN_MODEL_DEFAULT_BATCH_TOKENS;
    m->dir = modattn__strdup(dir, MODATTN_MEM_OTHER);
    if (!m->dir) {
        st = modattn__mem_last_status();
        goto fail;
    }
    {
        /* the name without a trailing slash */
        const char *b = base_name(m->dir);
        size_t n = strlen(b);
        while (n > 1 && b[n - 1] == '/') n--;
        m->name = modattn__strndup(b, n, MODATTN_MEM_OTHER);
        if (!m->name) {
            st = modattn__mem_last_status();
            goto fail;
        }
    }
    if (preset) m->cfg = *preset;
    else if ((st = modattn__config_load(dir, &m->cfg))) goto fail;
    if ((st = modattn__prompts_load(dir, m->cfg.dim, &m->prompts))) goto fail; /* model/prompts.c */
    m->cfg.precision = opt ? opt->precision : MODATTN_PRECISION_FP32;
    if ((unsigned)m->cfg.precision >= MODATTN_PRECISION_COUNT) {
        st = modattn__error(MODATTN_EINVAL, "precision %d is not a modattn_precision", (int)m->cfg.precision);
        goto fail;
    }
    if ((st = modattn__dev_model_check(m->dev, ctx, &m->cfg, m->name, opt && opt->host_fallback,
                                       &m->info.host_fallback_ops, m->host_why)))
        goto fail;
    /* the small files first: a broken tokenizer.json is reported before 90 MB of weights are
     * read, checked and packed */
    char path[MODATTN__PATH_MAX], wpath[MODATTN__PATH_MAX];
    if ((st = modattn__path_join(path, sizeof path, m->cfg.transformer_dir, "tokenizer.json")))
        goto fail;
    if ((st = modattn_tokenizer_load(path, &m->tok))) goto fail;
    size_t tv = modattn_tokenizer_vocab_size(m->tok);
    if (tv > (size_t)m->cfg.vocab) {
        st = modattn__error(MODATTN_EFORMAT,
                           "%s: the vocabulary has %zu tokens but config.json vocab_size is %d: "
                           "ids past the embedding table",
                           path, tv, m->cfg.vocab);
        goto fail;
    }
    if ((st = modattn__path_join(wpath, sizeof wpath, m->cfg.transformer_dir, "model.safetensors")))
        goto fail;
    if ((st = modattn__st_open(wpath, &m->st))) {
        if (st == MODATTN_EIO)
            st = modattn__error_prefix(MODATTN_ENOTFOUND, "model weights (run `make model`?)");
        goto fail;
    }
    modattn_model_info *in = &m->info;
    if ((st = hash_weights(m, &in->weights_xxh3))) goto fail;
    if ((st = load_weights(m))) goto fail;
    if (pair_types && (st = pair_tables(m))) goto fail;
    if ((st = upload_to_device(m))) goto fail;
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
    snprintf(in->weights_hash, sizeof in->weights_hash, "%016llx",
             (unsigned long long)in->weights_xxh3);
    in->weights_bytes = m->st->len;
    if ((st = model_identity(m, path))) goto fail;
    in->device = m->dev->id;
    in->precision = m->cfg.precision;
    in->truncate_dim = m->prompts.truncate_dim;
    modattn_embed_options po = {.task = MODATTN_EMBED_QUERY};
    if ((st = modattn_model_resolve_prompt(m, &po, &in->query_prompt, NULL))) goto fail;
    po.task = MODATTN_EMBED_DOCUMENT;
    if ((st = modattn_model_resolve_prompt(m, &po, &in->document_prompt, NULL))) goto fail;
    *out = m;
    return 0;
fail:
    modattn_model_free(m);
    return st;
}

void modattn_model_free(modattn_model *m) {
    if (!m) return;
    modattn__dev_model_free(m->dm);
    if (m->own_pool) modattn__pool_free(m->pool);
    pthread_mutex_destroy(&m->device_mu);
    if (m->layers) {
        for (int l = 0; l < m->cfg.layers; l++) {
            layer_w *L = &m->layers[l];
            modattn_free(L->wqkv);
            modattn_free(L->bqkv);
        }
        modattn_free(m->layers);
    }
    for (size_t i = 0; i < m->nowned; i++) modattn_free(m->owned[i]);
    modattn_free(m->owned);
    if (m->tok) modattn_tokenizer_free(m->tok);
    modattn__st_close(m->st);
    modattn__prompts_free(&m->prompts);
    modattn_free(m->name);
    modattn_free(m->dir);
    modattn_free(m);
}

const modattn_model_info *modattn_model_get_info(const modattn_model *m) { return &m->info; }
const struct modattn_tokenizer *modattn_model_tokenizer(const modattn_model *m) { return m ? m->tok : NULL; }

const char *modattn_model_fallback_reason(const modattn_model *m, int op) {
    if (!m || op < 0 || op >= MODATTN_OP_COUNT || !((m->info.host_fallback_ops >> op) & 1u)) return NULL;
    return m->host_why[op];
}
size_t modattn_model_dim(const modattn_model *m) { return m->cfg.dim; }
size_t modattn_model_max_tokens(const modattn_model *m) { return m->cfg.max_tokens; }
size_t modattn_model_batch_tokens(const modattn_model *m) { return m->batch_tokens; }

int modattn_model_set_batch_tokens(modattn_model *m, size_t tokens) {
    if (tokens == 0 || tokens > ((size_t)1 << 22))
        return modattn__error(MODATTN_EINVAL, "batch token budget %zu is out of range [1, %zu]",
                             tokens, (size_t)1 << 22);
    m->batch_tokens = tokens;
    return 0;
}

int modattn__model_tensor(modattn_model *m, const char *name, int64_t d0, int64_t d1, const float **out) {
    return get_f32(m, "", name, d0, d1, out);
}
