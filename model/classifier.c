/* model/classifier.c — cross-encoders (modattn/rerank.h): a *ForSequenceClassification directory's
 * encoder (modattn__model_load_head: the encoder of any architecture the model layer loads, its
 * [CLS] row out) and its head on the host: dense + tanh (BERT's pooler, RoBERTa's classifier.dense),
 * then the output projection and the activation. Pairs are tokenised here: each side's word pieces,
 * cut by the `tokenizers` library's "longest_first" rule, between the specials of the pair
 * template. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/encoder_internal.h"
#include "modattn/rerank.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

typedef enum { ACT_SIGMOID, ACT_IDENTITY, ACT_TANH } head_act;

struct modattn_reranker {
    modattn_model *m;
    modattn_reranker_info info;
    char *name, *dir, *architecture;
    char **labels;
    size_t nlabels;
    head_act act;
    int H;
    const float *pre_w, *pre_b; /* [H, H], [H]: dense + tanh on the first token's state */
    const float *out_w, *out_b; /* [L, H], [L] */
    bool roberta;               /* <s> a </s></s> b </s>, one token type */
    bool pair_types;            /* ids of side b are + vocab (token type 1) */
    int32_t cls, sep;
    size_t vocab;               /* the tokenizer's ids (before the pair table's doubling) */
};

static int cfg_err(const char *file, const char *what) {
    return modattn__error(MODATTN_EFORMAT, "%s: %s", file, what);
}

/* config.json: architectures, num_labels / id2label, the activation. */
static int read_head_config(modattn_reranker *r, const char *dir) {
    char F[MODATTN__PATH_MAX];
    json_t *j = NULL;
    int st = modattn__head_config_load(dir, "ForSequenceClassification",
                                       "not a cross-encoder (a *ForSequenceClassification model with a classifier "
                                       "head is needed)",
                                       F, &j, &r->architecture);
    if (st) return st;
    /* transformers: num_labels is len(id2label) when id2label is given, else num_labels, else 2 */
    const json_t *id2 = json_object_get(j, "id2label"), *nl = json_object_get(j, "num_labels");
    size_t n = 2;
    if (json_is_object(id2) && json_object_size(id2) > 0) n = json_object_size(id2);
    else if (json_is_integer(nl)) n = (size_t)json_integer_value(nl);
    if (n < 1 || n > 4096) {
        st = cfg_err(F, "field \"num_labels\" / \"id2label\": between 1 and 4096 labels are needed");
        goto out;
    }
    r->nlabels = n;
    r->labels = modattn__calloc(n, sizeof *r->labels, MODATTN_MEM_OTHER);
    if (!r->labels) {
        st = modattn__mem_last_status();
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        char key[24], dflt[32];
        snprintf(key, sizeof key, "%zu", i);
        snprintf(dflt, sizeof dflt, "LABEL_%zu", i);
        const char *v = json_is_object(id2) ? json_string_value(json_object_get(id2, key)) : NULL;
        if (json_is_object(id2) && json_object_size(id2) > 0 && !v) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"id2label\" has no string for label %zu", F, i);
            goto out;
        }
        r->labels[i] = modattn__strdup(v ? v : dflt, MODATTN_MEM_OTHER);
        if (!r->labels[i]) {
            st = modattn__mem_last_status();
            goto out;
        }
    }
    /* sentence-transformers >= 4: config.sentence_transformers.activation_fn; before:
     * sbert_ce_default_activation_function; else sigmoid for one label, identity for more */
    const json_t *stj = json_object_get(j, "sentence_transformers");
    const char *fn = json_string_value(json_object_get(stj, "activation_fn"));
    if (!fn) fn = json_string_value(json_object_get(j, "sbert_ce_default_activation_function"));
    r->act = n == 1 ? ACT_SIGMOID : ACT_IDENTITY;
    if (fn) {
        const char *dot = strrchr(fn, '.');
        const char *cls = dot ? dot + 1 : fn;
        if (strncmp(fn, "torch.", 6) != 0) {
            /* sentence-transformers refuses untrusted paths too and falls back to its default */
        } else if (strcmp(cls, "Sigmoid") == 0) r->act = ACT_SIGMOID;
        else if (strcmp(cls, "Identity") == 0) r->act = ACT_IDENTITY;
        else if (strcmp(cls, "Tanh") == 0) r->act = ACT_TANH;
        else {
            st = modattn__error(MODATTN_EUNSUPPORTED,
                               "%s: field \"sentence_transformers.activation_fn\" = \"%.100s\" is not "
                               "supported (Sigmoid, Identity, Tanh)", F, fn);
            goto out;
        }
    }
out:
    json_decref(j);
    return st;
}

/* tokenizer_config.json's model_max_length (what sentence-transformers' CrossEncoder truncates
 * to); 0 when absent or transformers' "no limit" (1e30). */
static size_t read_max_length(const char *dir) {
    char F[MODATTN__PATH_MAX];
    if (modattn__path_join(F, sizeof F, dir, "tokenizer_config.json")) return 0;
    json_t *j = NULL;
    if (modattn__json_load_file(F, 0, &j, NULL)) return 0;
    const json_t *v = json_object_get(j, "model_max_length");
    size_t n = 0;
    if (json_is_integer(v) && json_integer_value(v) >= 4 && json_integer_value(v) < (1 << 20))
        n = (size_t)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) >= 4 && json_real_value(v) < (1 << 20))
        n = (size_t)json_real_value(v);
    json_decref(j);
    return n;
}

static int head_tensors(modattn_reranker *r) {
    const int64_t H = r->H, L = (int64_t)r->nlabels;
    modattn_model *m = r->m;
    static const char *pres[][2] = {{"bert.pooler.dense.weight", "bert.pooler.dense.bias"},
                                    {"pooler.dense.weight", "pooler.dense.bias"},
                                    {"classifier.dense.weight", "classifier.dense.bias"}};
    static const char *outs[][2] = {{"classifier.weight", "classifier.bias"},
                                    {"classifier.out_proj.weight", "classifier.out_proj.bias"}};
    int st;
    for (size_t i = 0; i < sizeof pres / sizeof *pres; i++) {
        if (!modattn__st_find(m->st, pres[i][0])) continue;
        if ((st = modattn__model_tensor(m, pres[i][0], H, H, &r->pre_w)) ||
            (st = modattn__model_tensor(m, pres[i][1], H, 0, &r->pre_b)))
            return st;
        break;
    }
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        if (!modattn__st_find(m->st, outs[i][0])) continue;
        if ((st = modattn__model_tensor(m, outs[i][0], L, H, &r->out_w)) ||
            (st = modattn__model_tensor(m, outs[i][1], L, 0, &r->out_b)))
            return st;
        break;
    }
    if (!r->pre_w)
        return modattn__error(MODATTN_EFORMAT,
                             "%s: the classifier head's first layer is missing (tensor "
                             "'bert.pooler.dense.weight' or 'classifier.dense.weight'): not a cross-encoder",
                             m->st->path);
    if (!r->out_w)
        return modattn__error(MODATTN_EFORMAT,
                             "%s: the classifier is missing (tensor 'classifier.weight' or "
                             "'classifier.out_proj.weight'): not a cross-encoder",
                             m->st->path);
    return 0;
}

int modattn_reranker_load(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                          modattn_reranker **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_reranker_load: out is NULL");
    *out = NULL;
    if (!ctx || !dir || !*dir) return modattn__error(MODATTN_EINVAL, "modattn_reranker_load: ctx and dir are required");
    modattn_reranker *r = modattn__calloc(1, sizeof *r, MODATTN_MEM_OTHER);
    if (!r) return modattn__mem_last_status();
    int st = read_head_config(r, dir);
    if (st) goto fail;
    if ((st = modattn__model_load_head(ctx, dir, opt, read_max_length(dir), true, &r->m))) goto fail;
    modattn_model *m = r->m;
    r->H = m->cfg.hidden;
    r->pair_types = m->cfg.type_vocab >= 2;
    r->roberta = !r->pair_types;
    r->vocab = (size_t)(r->pair_types ? m->cfg.vocab / 2 : m->cfg.vocab);
    r->cls = modattn_tokenizer_cls_id(m->tok);
    r->sep = modattn_tokenizer_sep_id(m->tok);
    if (r->cls < 0 || r->sep < 0) {
        st = modattn__error(MODATTN_EUNSUPPORTED, "%s/tokenizer.json: no [CLS]/[SEP] (or <s>/</s>) tokens to build a pair with", dir);
        goto fail;
    }
    if ((st = head_tensors(r))) goto fail;
    size_t specials = r->roberta ? 4 : 3;
    if (m->cfg.max_tokens <= specials) {
        st = modattn__error(MODATTN_EFORMAT, "%s: a pair needs more than %zu tokens (model_max_length)", dir, specials);
        goto fail;
    }
    r->name = modattn__strdup(m->name, MODATTN_MEM_OTHER);
    r->dir = modattn__strdup(dir, MODATTN_MEM_OTHER);
    if (!r->name || !r->dir) {
        st = modattn__mem_last_status();
        goto fail;
    }
    modattn_reranker_info *in = &r->info;
    in->name = r->name, in->dir = r->dir, in->architecture = r->architecture;
    in->model_type = m->cfg.model_type;
    in->hidden = m->cfg.hidden, in->layers = m->cfg.layers, in->heads = m->cfg.heads;
    in->num_labels = r->nlabels;
    in->labels = (const char *const *)r->labels;
    in->activation = r->act == ACT_SIGMOID ? "sigmoid" : r->act == ACT_TANH ? "tanh" : "identity";
    in->max_tokens = m->cfg.max_tokens;
    in->specials = specials;
    in->device = m->info.device;
    *out = r;
    return 0;
fail:
    modattn_reranker_free(r);
    return st;
}

void modattn_reranker_free(modattn_reranker *r) {
    if (!r) return;
    modattn_model_free(r->m);
    if (r->labels)
        for (size_t i = 0; i < r->nlabels; i++) modattn_free(r->labels[i]);
    modattn_free(r->labels);
    modattn_free(r->architecture);
    modattn_free(r->name);
    modattn_free(r->dir);
    modattn_free(r);
}

const modattn_reranker_info *modattn_reranker_get_info(const modattn_reranker *r) { return r ? &r->info : NULL; }
modattn_model *modattn_reranker_model(modattn_reranker *r) { return r ? r->m : NULL; }

/* One side's word pieces: at most `cap` into ids (cap + 1 words of room so that "longer than cap"
 * shows), *n the count (<= cap + 1). */
static int side(const modattn_reranker *r, const char *s, size_t len, int32_t *ids, size_t cap, size_t *n) {
    *n = 0;
    if (!len) return 0;
    return modattn_tokenize_ex(r->m->tok, s, len, MODATTN_TOKENIZE_NO_SPECIALS, ids, NULL, cap, n);
}

/* The full count of a side's word pieces (both sides over the budget: which is longer decides who
 * keeps the odd token). A word piece takes at least one byte. */
static int full_count(const modattn_reranker *r, const char *s, size_t len, size_t *n) {
    int32_t *tmp = modattn__malloc((len + 1) * sizeof *tmp, MODATTN_MEM_ACTIVATIONS);
    if (!tmp) return modattn__mem_last_status();
    int st = modattn_tokenize_ex(r->m->tok, s, len, MODATTN_TOKENIZE_NO_SPECIALS, tmp, NULL, len + 1, n);
    modattn_free(tmp);
    return st;
}

/* tokenizers' TruncationStrategy::LongestFirst for a pair: the lengths n1, n2 each side keeps so
 * that n1 + n2 <= budget. */
static void longest_first(size_t n1, size_t n2, size_t budget, size_t *k1, size_t *k2) {
    if (n1 + n2 <= budget) {
        *k1 = n1, *k2 = n2;
        return;
    }
    bool swap = n1 > n2;
    size_t a = swap ? n2 : n1, b = swap ? n1 : n2; /* a <= b */
    size_t ka, kb;
    if (a > budget) kb = a;
    else kb = a > budget - a ? a : budget - a;
    ka = a;
    if (ka + kb > budget) {
        ka = budget / 2;
        kb = ka + budget % 2;
    }
    if (ka > a) ka = a;
    if (kb > b) kb = b;
    *k1 = swap ? kb : ka;
    *k2 = swap ? ka : kb;
}

int modattn_reranker_tokenize(const modattn_reranker *r, const char *a, size_t alen, const char *b,
                              size_t blen, int32_t *ids, int32_t *types, size_t max, size_t *n,
                              bool *truncated) {
    if (!r || !ids || !n || (alen && !a) || (blen && !b))
        return modattn__error(MODATTN_EINVAL, "modattn_reranker_tokenize: NULL argument");
    *n = 0;
    if (truncated) *truncated = false;
    const size_t sp = r->info.specials;
    if (max > r->info.max_tokens) max = r->info.max_tokens;
    if (max < sp) return modattn__error(MODATTN_EINVAL, "a pair needs room for %zu ids, %zu given", sp, max);
    const size_t budget = max - sp;
    /* each side into its own place in ids: a after [CLS], b at the end (moved down after) */
    int32_t *tmp = modattn__malloc((2 * budget + 2) * sizeof *tmp, MODATTN_MEM_ACTIVATIONS);
    if (!tmp) return modattn__mem_last_status();
    int32_t *ta = tmp, *tb = tmp + budget + 1;
    size_t na, nb, ka, kb;
    int st = side(r, a, alen, ta, budget + 1, &na);
    if (!st) st = side(r, b, blen, tb, budget + 1, &nb);
    if (!st && na > budget && nb > budget && budget % 2 == 1) {
        /* both over: the longer keeps the odd token; their true lengths decide */
        size_t fa, fb;
        if (!(st = full_count(r, a, alen, &fa)) && !(st = full_count(r, b, blen, &fb))) na = fa, nb = fb;
    }
    if (st) {
        modattn_free(tmp);
        return st;
    }
    longest_first(na, nb, budget, &ka, &kb);
    if (truncated) *truncated = ka < na || kb < nb;
    size_t o = 0;
    ids[o++] = r->cls;
    memcpy(ids + o, ta, ka * sizeof *ids), o += ka;
    ids[o++] = r->sep;
    if (r->roberta) ids[o++] = r->sep;
    const size_t bstart = o;
    memcpy(ids + o, tb, kb * sizeof *ids), o += kb;
    ids[o++] = r->sep;
    modattn_free(tmp);
    if (types)
        for (size_t i = 0; i < o; i++) types[i] = !r->roberta && i >= bstart ? 1 : 0;
    *n = o;
    return 0;
}

static float activate(head_act act, float x) {
    switch (act) {
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ACT_TANH: return tanhf(x);
    case ACT_IDENTITY: break;
    }
    return x;
}

/* The head on one [CLS] state h[H]: out[L]. Sums in double, in one fixed order: the same for a
 * pair alone or batched. */
static void head(const modattn_reranker *r, const float *h, float *pooled, float *out, bool raw) {
    const int H = r->H;
    for (int i = 0; i < H; i++) {
        const float *w = r->pre_w + (size_t)i * H;
        double s = r->pre_b[i];
        for (int k = 0; k < H; k++) s += (double)w[k] * h[k];
        pooled[i] = tanhf((float)s);
    }
    for (size_t l = 0; l < r->nlabels; l++) {
        const float *w = r->out_w + l * (size_t)H;
        double s = r->out_b[l];
        for (int k = 0; k < H; k++) s += (double)w[k] * pooled[k];
        out[l] = raw ? (float)s : activate(r->act, (float)s);
    }
}

int modattn_reranker_score_ids(modattn_reranker *r, modattn_session *session, const int32_t *const *ids,
                               const int32_t *const *types, const size_t *counts, size_t n, unsigned flags, float *out) {
    if (!r || (n && (!ids || !counts || !out)))
        return modattn__error(MODATTN_EINVAL, "modattn_reranker_score_ids: NULL argument");
    if (flags & ~MODATTN_RERANK_RAW) return modattn__error(MODATTN_EINVAL, "modattn_reranker_score_ids: unknown flags 0x%x", flags);
    if (n == 0) return 0;
    const size_t T = r->info.max_tokens, H = (size_t)r->H;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ids[i] || counts[i] < 1 || counts[i] > T)
            return modattn__error(MODATTN_EINVAL, "modattn_reranker_score_ids: pair %zu: %zu ids (1 to %zu)", i, counts[i], T);
        total += counts[i];
    }
    int32_t *buf = modattn__malloc(total * sizeof *buf, MODATTN_MEM_ACTIVATIONS);
    const int32_t **rows = modattn__malloc(n * sizeof *rows, MODATTN_MEM_ACTIVATIONS);
    float *cls = modattn__malloc((n * H + H) * sizeof *cls, MODATTN_MEM_ACTIVATIONS);
    int st = 0;
    if (!buf || !rows || !cls) {
        st = modattn__mem_last_status();
        goto out;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        rows[i] = buf + o;
        for (size_t t = 0; t < counts[i]; t++) {
            int32_t id = ids[i][t], ty = types ? types[i][t] : 0;
            if (id < 0 || (size_t)id >= r->vocab || ty < 0 || ty > (r->pair_types ? 1 : 0)) {
                st = modattn__error(MODATTN_EINVAL, "modattn_reranker_score_ids: pair %zu, token %zu: id %d / type %d out of range",
                                   i, t, (int)id, (int)ty);
                goto out;
            }
            buf[o++] = ty ? id + (int32_t)r->vocab : id;
        }
    }
    st = session ? modattn_model_embed_ids_with(r->m, session, rows, counts, n, cls)
                 : modattn_model_embed_ids(r->m, rows, counts, n, cls);
    if (st) goto out;
    for (size_t i = 0; i < n; i++)
        head(r, cls + i * H, cls + n * H, out + i * r->nlabels, flags & MODATTN_RERANK_RAW);
out:
    modattn_free(buf), modattn_free(rows), modattn_free(cls);
    return st;
}

int modattn_reranker_score(modattn_reranker *r, modattn_session *session, const char *const *a,
                           const size_t *alens, const char *const *b, const size_t *blens, size_t n,
                           unsigned flags, float *out, int32_t *ntokens, bool *truncated) {
    if (!r || (n && (!a || !b || !out)))
        return modattn__error(MODATTN_EINVAL, "modattn_reranker_score: NULL argument");
    if (flags & ~MODATTN_RERANK_RAW) return modattn__error(MODATTN_EINVAL, "modattn_reranker_score: unknown flags 0x%x", flags);
    if (n == 0) return 0;
    const size_t T = r->info.max_tokens, H = (size_t)r->H;
    if (n > SIZE_MAX / (T * sizeof(int32_t) * 2 + H * sizeof(float) * 2))
        return modattn__error(MODATTN_ERANGE, "modattn_reranker_score: %zu pairs is too many", n);
    int32_t *ids = modattn__malloc(n * T * sizeof *ids, MODATTN_MEM_ACTIVATIONS);
    int32_t *types = modattn__malloc(T * sizeof *types, MODATTN_MEM_ACTIVATIONS);
    const int32_t **rows = modattn__malloc(n * sizeof *rows, MODATTN_MEM_ACTIVATIONS);
    size_t *counts = modattn__malloc(n * sizeof *counts, MODATTN_MEM_ACTIVATIONS);
    float *cls = modattn__malloc((n * H + H) * sizeof *cls, MODATTN_MEM_ACTIVATIONS);
    int st = 0;
    if (!ids || !types || !rows || !counts || !cls) {
        st = modattn__mem_last_status();
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *ai = a[i] ? a[i] : "", *bi = b[i] ? b[i] : "";
        size_t al = alens ? alens[i] : strlen(ai), bl = blens ? blens[i] : strlen(bi);
        if ((alens && al && !a[i]) || (blens && bl && !b[i])) {
            st = modattn__error(MODATTN_EINVAL, "modattn_reranker_score: pair %zu: a NULL text with a length", i);
            goto out;
        }
        int32_t *row = ids + i * T;
        size_t k;
        if ((st = modattn_reranker_tokenize(r, ai, al, bi, bl, row, types, T, &k, truncated ? &truncated[i] : NULL))) {
            st = modattn__error_prefix(st, "pair %zu", i);
            goto out;
        }
        if (r->pair_types)
            for (size_t t = 0; t < k; t++)
                if (types[t]) row[t] += (int32_t)r->vocab;
        rows[i] = row, counts[i] = k;
        if (ntokens) ntokens[i] = (int32_t)k;
    }
    st = session ? modattn_model_embed_ids_with(r->m, session, rows, counts, n, cls)
                 : modattn_model_embed_ids(r->m, rows, counts, n, cls);
    if (st) goto out;
    for (size_t i = 0; i < n; i++)
        head(r, cls + i * H, cls + n * H, out + i * r->nlabels, flags & MODATTN_RERANK_RAW);
out:
    modattn_free(ids), modattn_free(types), modattn_free(rows), modattn_free(counts), modattn_free(cls);
    return st;
}
