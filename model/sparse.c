/* model/sparse.c — SPLADE (modattn/sparse.h): a *ForMaskedLM directory's encoder
 * (modattn__model_load_head) run with a token head (modattn__model_embed_tokens: each text's last
 * hidden states, no pooling), then on the host per token the MLM head's transform (dense, the
 * activation, LayerNorm) and the decoder's logits, pooled over the text's tokens as
 * sentence-transformers' SpladePooling does, then pruned. Per text one vocabulary-sized row is
 * pooled into, a block of 16 tokens at a time (the decoder's rows read once per block, the 16 sums
 * of a row in vector registers, each in order: measured 3.2x faster than one token at a time); the
 * vocabulary is split among the model's host threads in fixed ranges, so the result does not
 * depend on the thread count or on the other texts of the call. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/encoder_internal.h"
#include "modattn/sparse.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

enum { TOK_BLOCK = 16, VOCAB_CHUNK = 1024 }; /* TOK_BLOCK: dot_block's four vectors of four */

struct modattn_sparse_encoder {
    modattn_model *m;
    modattn_sparse_info info;
    char *name, *dir, *architecture;
    int H;
    size_t V;
    bool pool_sum;     /* SpladePooling "sum" (else "max") */
    bool log1p_twice;  /* "log1p_relu" */
    modattn__act act;  /* the transform's activation */
    double eps;
    const float *dense_w, *dense_b; /* [H, H], [H] */
    const float *ln_g, *ln_b;       /* [H] */
    const float *dec_w, *dec_b;     /* [V, H], [V] */
};

/* config.json's architectures must name a masked-language model. */
static int read_arch(modattn_sparse_encoder *e, const char *dir) {
    char F[MODATTN__PATH_MAX];
    json_t *j = NULL;
    int st = modattn__head_config_load(dir, "ForMaskedLM",
                                       "not a SPLADE model (a *ForMaskedLM model with its masked-language-model head "
                                       "is needed)",
                                       F, &j, &e->architecture);
    json_decref(j);
    return st;
}

/* A JSON file of dir, or NULL (*st 0) when it is absent. */
static json_t *load_opt(const char *dir, const char *name, int *st) {
    char F[MODATTN__PATH_MAX];
    *st = modattn__path_join(F, sizeof F, dir, name);
    if (*st) return NULL;
    FILE *f = fopen(F, "rb");
    if (!f) return NULL;
    fclose(f);
    json_t *j = NULL;
    json_error_t jerr;
    if ((*st = modattn__json_load_file(F, 0, &j, &jerr))) {
        if (*st == MODATTN_EFORMAT) *st = modattn__error(*st, "%s: not valid JSON: %s", F, jerr.text);
        return NULL;
    }
    return j;
}

/* sentence-transformers' layout (modules.json): an MLMTransformer at the directory itself, then a
 * SpladePooling; its pooling_strategy and activation_function. No modules.json: the defaults. */
static int read_modules(modattn_sparse_encoder *e, const char *dir, size_t *max_tokens) {
    int st;
    json_t *mods = load_opt(dir, "modules.json", &st);
    if (st || !mods) return st;
    if (!json_is_array(mods)) {
        json_decref(mods);
        return modattn__error(MODATTN_EFORMAT, "%s/modules.json: not a list of modules", dir);
    }
    bool have_mlm = false, have_pool = false;
    size_t i;
    json_t *mod;
    json_array_foreach(mods, i, mod) {
        const char *type = json_string_value(json_object_get(mod, "type"));
        const char *path = json_string_value(json_object_get(mod, "path"));
        if (!type || !path) {
            st = modattn__error(MODATTN_EFORMAT, "%s/modules.json: module %zu has no \"type\" / \"path\"", dir, i);
            break;
        }
        const char *dot = strrchr(type, '.');
        const char *cls = dot ? dot + 1 : type;
        if (strcmp(cls, "MLMTransformer") == 0 && !have_mlm) {
            if (*path) {
                st = modattn__error(MODATTN_EUNSUPPORTED, "%s/modules.json: the MLMTransformer in \"%.100s\": only one "
                                   "at the model directory itself is supported", dir, path);
                break;
            }
            have_mlm = true;
        } else if (strcmp(cls, "SpladePooling") == 0 && have_mlm && !have_pool) {
            have_pool = true;
            char sub[MODATTN__PATH_MAX];
            if ((st = modattn__path_join(sub, sizeof sub, dir, path))) break;
            json_t *pc = load_opt(sub, "config.json", &st);
            if (st) break;
            const char *ps = json_string_value(json_object_get(pc, "pooling_strategy"));
            const char *af = json_string_value(json_object_get(pc, "activation_function"));
            if (ps && strcmp(ps, "max") != 0 && strcmp(ps, "sum") != 0)
                st = modattn__error(MODATTN_EUNSUPPORTED, "%s/config.json: pooling_strategy \"%.40s\" (max, sum)", sub, ps);
            else if (af && strcmp(af, "relu") != 0 && strcmp(af, "log1p_relu") != 0)
                st = modattn__error(MODATTN_EUNSUPPORTED, "%s/config.json: activation_function \"%.40s\" (relu, "
                                   "log1p_relu)", sub, af);
            else {
                e->pool_sum = ps && strcmp(ps, "sum") == 0;
                e->log1p_twice = af && strcmp(af, "log1p_relu") == 0;
            }
            json_decref(pc);
            if (st) break;
        } else {
            st = modattn__error(MODATTN_EUNSUPPORTED, "%s/modules.json: module %zu (%.100s) is not run here (a SPLADE "
                               "model is an MLMTransformer then a SpladePooling)", dir, i, type);
            break;
        }
    }
    json_decref(mods);
    if (!st && (!have_mlm || !have_pool))
        st = modattn__error(MODATTN_EUNSUPPORTED, "%s/modules.json: no %s module (a SPLADE model is an "
                           "MLMTransformer then a SpladePooling)", dir, have_mlm ? "SpladePooling" : "MLMTransformer");
    if (st) return st;
    json_t *sb = load_opt(dir, "sentence_bert_config.json", &st);
    if (st) return st;
    const json_t *ml = json_object_get(sb, "max_seq_length");
    if (json_is_integer(ml) && json_integer_value(ml) >= 3 && json_integer_value(ml) < (1 << 20))
        *max_tokens = (size_t)json_integer_value(ml);
    json_decref(sb);
    return 0;
}

/* tokenizer_config.json's model_max_length; 0 when absent or "no limit". */
static size_t read_max_length(const char *dir) {
    int st;
    json_t *j = load_opt(dir, "tokenizer_config.json", &st);
    if (!j) return 0; /* unreadable: the limit of max_position_embeddings */
    const json_t *v = json_object_get(j, "model_max_length");
    size_t n = 0;
    if (json_is_integer(v) && json_integer_value(v) >= 3 && json_integer_value(v) < (1 << 20))
        n = (size_t)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) >= 3 && json_real_value(v) < (1 << 20))
        n = (size_t)json_real_value(v);
    json_decref(j);
    return n;
}

static int head_tensors(modattn_sparse_encoder *e) {
    modattn_model *m = e->m;
    const int64_t H = e->H;
    /* {dense, LayerNorm, decoder weight, decoder bias, bias}: BERT's cls.predictions, RoBERTa's lm_head */
    static const char *sets[][8] = {
        {"cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
         "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
         "cls.predictions.decoder.weight", "cls.predictions.bias", "cls.predictions.decoder.bias", "bert"},
        {"lm_head.dense.weight", "lm_head.dense.bias", "lm_head.layer_norm.weight", "lm_head.layer_norm.bias",
         "lm_head.decoder.weight", "lm_head.bias", "lm_head.decoder.bias", "roberta"},
    };
    int st;
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        const char *const *n = sets[s];
        if (!modattn__st_find(m->st, n[0])) continue;
        if ((st = modattn__model_tensor(m, n[0], H, H, &e->dense_w)) ||
            (st = modattn__model_tensor(m, n[1], H, 0, &e->dense_b)) ||
            (st = modattn__model_tensor(m, n[2], H, 0, &e->ln_g)) || (st = modattn__model_tensor(m, n[3], H, 0, &e->ln_b)))
            return st;
        /* the decoder: its own weight, else tied to the word embeddings */
        if (modattn__st_find(m->st, n[4])) {
            if ((st = modattn__model_tensor(m, n[4], (int64_t)e->V, H, &e->dec_w))) return st;
        } else {
            e->dec_w = m->word;
        }
        const char *bias = modattn__st_find(m->st, n[5]) ? n[5] : modattn__st_find(m->st, n[6]) ? n[6] : NULL;
        if (!bias)
            return modattn__error(MODATTN_EFORMAT, "%s: the MLM decoder's bias is missing (tensor '%s' or '%s')",
                                 m->st->path, n[5], n[6]);
        if ((st = modattn__model_tensor(m, bias, (int64_t)e->V, 0, &e->dec_b))) return st;
        /* BERT: the transform's activation is hidden_act; RoBERTa's lm_head: gelu */
        e->act = strcmp(n[7], "roberta") == 0 ? MODATTN__ACT_GELU_ERF : m->cfg.act;
        return 0;
    }
    return modattn__error(MODATTN_EFORMAT,
                         "%s: the masked-language-model head is missing (tensor "
                         "'cls.predictions.transform.dense.weight' or 'lm_head.dense.weight'): not a SPLADE model",
                         m->st->path);
}

int modattn_sparse_load(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                        modattn_sparse_encoder **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_sparse_load: out is NULL");
    *out = NULL;
    if (!ctx || !dir || !*dir) return modattn__error(MODATTN_EINVAL, "modattn_sparse_load: ctx and dir are required");
    modattn_sparse_encoder *e = modattn__calloc(1, sizeof *e, MODATTN_MEM_OTHER);
    if (!e) return modattn__mem_last_status();
    size_t max_tokens = 0;
    int st = read_arch(e, dir);
    if (!st) st = read_modules(e, dir, &max_tokens);
    if (st) goto fail;
    if (!max_tokens) max_tokens = read_max_length(dir);
    if ((st = modattn__model_load_head(ctx, dir, opt, max_tokens, false, &e->m))) goto fail;
    modattn_model *m = e->m;
    e->H = m->cfg.hidden;
    e->V = (size_t)m->cfg.vocab;
    e->eps = m->cfg.ln_eps;
    if ((st = head_tensors(e))) goto fail;
    e->name = modattn__strdup(m->name, MODATTN_MEM_OTHER);
    e->dir = modattn__strdup(dir, MODATTN_MEM_OTHER);
    if (!e->name || !e->dir) {
        st = modattn__mem_last_status();
        goto fail;
    }
    modattn_sparse_info *in = &e->info;
    in->name = e->name, in->dir = e->dir, in->architecture = e->architecture;
    in->model_type = m->cfg.model_type;
    in->hidden = m->cfg.hidden, in->layers = m->cfg.layers, in->heads = m->cfg.heads;
    in->vocab = e->V;
    in->max_tokens = m->cfg.max_tokens;
    in->pooling = e->pool_sum ? "sum" : "max";
    in->activation = e->log1p_twice ? "log1p_relu" : "relu";
    in->device = m->info.device;
    *out = e;
    return 0;
fail:
    modattn_sparse_free(e);
    return st;
}

void modattn_sparse_free(modattn_sparse_encoder *e) {
    if (!e) return;
    modattn_model_free(e->m);
    modattn_free(e->architecture);
    modattn_free(e->name);
    modattn_free(e->dir);
    modattn_free(e);
}

const modattn_sparse_info *modattn_sparse_get_info(const modattn_sparse_encoder *e) { return e ? &e->info : NULL; }
modattn_model *modattn_sparse_model(modattn_sparse_encoder *e) { return e ? e->m : NULL; }

void modattn_sparse_vec_free(modattn_sparse_vec *v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) {
        modattn_free(v[i].ids);
        modattn_free(v[i].weights);
        v[i] = (modattn_sparse_vec){0, NULL, NULL};
    }
}

/* ------------------------------------------------------------------ the head */

typedef struct encode_job {
    const modattn_sparse_encoder *e;
    modattn_sparse_options opt;
    modattn_sparse_vec *out;
    float *row;      /* [V]: the text's pooled logits (max) or weights (sum) */
    double *t;       /* [H, TOK_BLOCK]: the block's transformed states (fp32 values), transposed (unused columns 0) */
    float *tk;       /* [H]: one token's */
    double *u;       /* [H] */
    int32_t *order;  /* [V]: the kept ids, for pruning */
    size_t nt;       /* tokens in the block */
    bool first;      /* the text's first block */
} encode_job;

static double act_of(modattn__act a, double x) {
    switch (a) {
    case MODATTN__ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case MODATTN__ACT_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case MODATTN__ACT_SILU: return x / (1.0 + exp(-x));
    case MODATTN__ACT_RELU: break;
    }
    return x > 0 ? x : 0;
}

/* dense + activation + LayerNorm on one hidden state h[H]: t[H] */
static void transform(const modattn_sparse_encoder *e, const float *h, double *u, float *t) {
    const int H = e->H;
    double mean = 0;
    for (int i = 0; i < H; i++) {
        const float *w = e->dense_w + (size_t)i * H;
        double s = e->dense_b[i];
        for (int k = 0; k < H; k++) s += (double)w[k] * h[k];
        u[i] = act_of(e->act, s);
        mean += u[i];
    }
    mean /= H;
    double var = 0;
    for (int i = 0; i < H; i++) var += (u[i] - mean) * (u[i] - mean);
    var /= H;
    const double inv = 1.0 / sqrt(var + e->eps);
    for (int i = 0; i < H; i++) t[i] = (float)((u[i] - mean) * inv * e->ln_g[i] + e->ln_b[i]);
}

static inline float relu_log1p(float x, bool twice) {
    float w = x > 0 ? log1pf(x) : 0.0f;
    return twice ? log1pf(w) : w;
}

/* s[k] = sum over i in order of w[i] * t[i][k], in double: built for AVX-512 and AVX2 too and
 * picked at load (as backends/cpu/cpu_rowops.c), the same sums in the same order on each */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void dot_block(const float *restrict w,
                                                                                   const double *restrict t, size_t H,
                                                                                   double *restrict s) {
    /* four vectors of four sums in registers (GCC's vector extension: each lane its own sum) */
    typedef double v4d __attribute__((vector_size(32)));
    v4d a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (size_t i = 0; i < H; i++) {
        const v4d wi = {w[i], w[i], w[i], w[i]};
        v4d t0, t1, t2, t3;
        memcpy(&t0, t + i * TOK_BLOCK, sizeof t0), memcpy(&t1, t + i * TOK_BLOCK + 4, sizeof t1);
        memcpy(&t2, t + i * TOK_BLOCK + 8, sizeof t2), memcpy(&t3, t + i * TOK_BLOCK + 12, sizeof t3);
        a0 += wi * t0, a1 += wi * t1, a2 += wi * t2, a3 += wi * t3;
    }
    memcpy(s, &a0, sizeof a0), memcpy(s + 4, &a1, sizeof a1), memcpy(s + 8, &a2, sizeof a2), memcpy(s + 12, &a3, sizeof a3);
}

/* one chunk of the vocabulary against the block's tokens: each logit a sum over i in order, in
 * double; the block's tokens side by side (t transposed), so the compiler vectorises across tokens
 * and no sum is reordered */
static void vocab_chunk(void *ctx, int64_t c, int thread) {
    (void)thread;
    encode_job *j = ctx;
    const modattn_sparse_encoder *e = j->e;
    const size_t H = (size_t)e->H;
    const size_t v0 = (size_t)c * VOCAB_CHUNK, v1 = v0 + VOCAB_CHUNK < e->V ? v0 + VOCAB_CHUNK : e->V;
    for (size_t v = v0; v < v1; v++) {
        const float *w = e->dec_w + v * H;
        double s[TOK_BLOCK];
        dot_block(w, j->t, H, s);
        float acc = j->row[v];
        for (size_t k = 0; k < j->nt; k++) {
            const float logit = (float)(s[k] + e->dec_b[v]);
            if (e->pool_sum) acc += relu_log1p(logit, e->log1p_twice);
            else if ((j->first && k == 0) || logit > acc) acc = logit;
        }
        j->row[v] = acc;
    }
}

/* keeps the k largest of ids[0..n) by row[] (ties: smaller id), ids ascending after: a selection
 * by a binary search on the weight's bits (weights are >= 0: their bits order as they do) */
static size_t top_k(const float *row, int32_t *ids, size_t n, size_t k) {
    if (n <= k) return n;
    /* the k-th largest weight: the largest bit pattern p with count(bits >= p) >= k */
    uint32_t lo = 0, hi = 0x7f800000u;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &row[ids[i]], sizeof b);
            cnt += b >= mid;
        }
        if (cnt >= k) lo = mid;
        else hi = mid - 1;
    }
    /* all above the k-th, then those equal to it by ascending id (ids are ascending) */
    size_t above = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &row[ids[i]], sizeof b);
        above += b > lo;
    }
    size_t o = 0, ties = k - above;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &row[ids[i]], sizeof b);
        if (b > lo || (b == lo && ties > 0 && ties--)) ids[o++] = ids[i];
    }
    return o;
}

static int finish_row(encode_job *j, size_t input) {
    const modattn_sparse_encoder *e = j->e;
    float *row = j->row;
    size_t n = 0;
    for (size_t v = 0; v < e->V; v++) {
        const float w = e->pool_sum ? row[v] : relu_log1p(row[v], e->log1p_twice);
        row[v] = w;
        if (w > 0 && !(j->opt.threshold > 0 && w < j->opt.threshold)) j->order[n++] = (int32_t)v;
    }
    if (j->opt.top_k > 0) n = top_k(row, j->order, n, j->opt.top_k);
    modattn_sparse_vec *o = &j->out[input];
    o->n = 0;
    o->ids = modattn__malloc((n ? n : 1) * sizeof *o->ids, MODATTN_MEM_OTHER);
    o->weights = modattn__malloc((n ? n : 1) * sizeof *o->weights, MODATTN_MEM_OTHER);
    if (!o->ids || !o->weights) return modattn__mem_last_status();
    for (size_t i = 0; i < n; i++) o->ids[i] = j->order[i], o->weights[i] = row[j->order[i]];
    o->n = n;
    return 0;
}

static int head_row(void *ud, size_t input, const float *h, size_t len, modattn_pool *pool) {
    encode_job *j = ud;
    const modattn_sparse_encoder *e = j->e;
    const size_t H = (size_t)e->H;
    if (e->pool_sum) memset(j->row, 0, e->V * sizeof *j->row);
    j->first = true;
    for (size_t t0 = 0; t0 < len; t0 += TOK_BLOCK) {
        j->nt = len - t0 < TOK_BLOCK ? len - t0 : TOK_BLOCK;
        memset(j->t, 0, H * TOK_BLOCK * sizeof *j->t);
        for (size_t k = 0; k < j->nt; k++) {
            transform(e, h + (t0 + k) * H, j->u, j->tk);
            for (size_t i = 0; i < H; i++) j->t[i * TOK_BLOCK + k] = j->tk[i];
        }
        modattn__pool_run(pool, (int64_t)((e->V + VOCAB_CHUNK - 1) / VOCAB_CHUNK), vocab_chunk, j);
        j->first = false;
    }
    return finish_row(j, input);
}

static int check_opt(const modattn_sparse_options *opt, const char *fn) {
    if (opt && (!(opt->threshold >= 0) || isinf(opt->threshold)))
        return modattn__error(MODATTN_EINVAL, "%s: threshold %g: a finite weight >= 0 is needed", fn, (double)opt->threshold);
    return 0;
}

int modattn_sparse_encode_ids(modattn_sparse_encoder *e, modattn_session *session, const int32_t *const *ids,
                              const size_t *counts, size_t n, const modattn_sparse_options *opt,
                              modattn_sparse_vec *out) {
    if (!e || (n && (!ids || !counts || !out)))
        return modattn__error(MODATTN_EINVAL, "modattn_sparse_encode_ids: NULL argument");
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) out[i] = (modattn_sparse_vec){0, NULL, NULL};
    int st = check_opt(opt, "modattn_sparse_encode_ids");
    if (st) return st;
    encode_job j = {.e = e, .out = out};
    if (opt) j.opt = *opt;
    j.row = modattn__malloc(e->V * sizeof *j.row, MODATTN_MEM_ACTIVATIONS);
    j.order = modattn__malloc(e->V * sizeof *j.order, MODATTN_MEM_ACTIVATIONS);
    j.t = modattn__malloc((size_t)TOK_BLOCK * e->H * sizeof *j.t, MODATTN_MEM_ACTIVATIONS);
    j.u = modattn__malloc((size_t)e->H * sizeof *j.u, MODATTN_MEM_ACTIVATIONS);
    j.tk = modattn__malloc((size_t)e->H * sizeof *j.tk, MODATTN_MEM_ACTIVATIONS);
    if (!j.row || !j.order || !j.t || !j.u || !j.tk) {
        st = modattn__mem_last_status();
    } else {
        modattn__token_head head = {.row = head_row, .ud = &j};
        st = modattn__model_embed_tokens(e->m, session, ids, counts, n, &head);
    }
    modattn_free(j.row), modattn_free(j.order), modattn_free(j.t), modattn_free(j.u), modattn_free(j.tk);
    if (st) modattn_sparse_vec_free(out, n);
    return st;
}

int modattn_sparse_encode(modattn_sparse_encoder *e, modattn_session *session, const char *const *texts,
                          const size_t *lens, size_t n, const modattn_sparse_options *opt, modattn_sparse_vec *out,
                          int32_t *ntokens) {
    if (!e || (n && (!texts || !out)))
        return modattn__error(MODATTN_EINVAL, "modattn_sparse_encode: NULL argument");
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) out[i] = (modattn_sparse_vec){0, NULL, NULL};
    int st = check_opt(opt, "modattn_sparse_encode");
    if (st) return st;
    const size_t T = e->info.max_tokens;
    if (n > SIZE_MAX / (T * sizeof(int32_t) + 2 * sizeof(size_t)))
        return modattn__error(MODATTN_ERANGE, "modattn_sparse_encode: %zu texts is too many", n);
    int32_t *ids = modattn__malloc(n * T * sizeof *ids, MODATTN_MEM_ACTIVATIONS);
    const int32_t **rows = modattn__malloc(n * sizeof *rows, MODATTN_MEM_ACTIVATIONS);
    size_t *counts = modattn__malloc(n * sizeof *counts, MODATTN_MEM_ACTIVATIONS);
    if (!ids || !rows || !counts) {
        st = modattn__mem_last_status();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (!texts[i] && lens && lens[i]) {
            st = modattn__error(MODATTN_EINVAL, "modattn_sparse_encode: input %zu: a NULL text with a length", i);
            goto done;
        }
        const char *t = texts[i] ? texts[i] : "";
        const size_t tl = lens && texts[i] ? lens[i] : strlen(t);
        size_t k = 0;
        if ((st = modattn_model_tokenize_ex(e->m, t, tl, ids + i * T, T, &k, NULL))) {
            st = modattn__error_prefix(st, "tokenizing input %zu", i);
            goto done;
        }
        rows[i] = ids + i * T, counts[i] = k;
        if (ntokens) ntokens[i] = (int32_t)k;
    }
    st = modattn_sparse_encode_ids(e, session, rows, counts, n, opt, out);
done:
    modattn_free(ids), modattn_free(rows), modattn_free(counts);
    return st;
}
