/* model/tokenizer_load.c — building a tokenizer from tokenizer.json: normaliser and
 * pre-tokenizer settings, the WordPiece vocabulary (one string slab, a hash table and a byte
 * trie), added and special tokens, the post-processor's specials. Every malformed field is an
 * error naming it. The run time is model/tokenizer.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/tokenizer_internal.h"

/* ------------------------------------------------------------------ loading */


static int ferr(const tk_load *L, int status, const char *field, const char *what) {
    return modattn__error(status, "tokenizer %s: field \"%s\": %s", L->path, field, what);
}

static int get_bool(const tk_load *L, json_t *obj, const char *key, const char *field, bool dflt,
                    bool *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) return ferr(L, MODATTN_EFORMAT, field, "expected true or false");
    *out = json_is_true(v);
    return 0;
}

static int load_normalizer(tk_load *L) {
    modattn_tokenizer *t = L->t;
    json_t *n = json_object_get(L->root, "normalizer");
    if (!n || json_is_null(n)) {
        t->has_norm = false;
        return 0;
    }
    if (!json_is_object(n)) return ferr(L, MODATTN_EFORMAT, "normalizer", "expected an object");
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) return ferr(L, MODATTN_EFORMAT, "normalizer.type", "missing");
    if (strcmp(type, "BertNormalizer") != 0) {
        return modattn__error(MODATTN_EUNSUPPORTED,
                             "tokenizer %s: field \"normalizer.type\": \"%s\" is not supported "
                             "(only BertNormalizer)",
                             L->path, type);
    }
    t->has_norm = true;
    int rc;
    if ((rc = get_bool(L, n, "clean_text", "normalizer.clean_text", true, &t->clean_text)) ||
        (rc = get_bool(L, n, "handle_chinese_chars", "normalizer.handle_chinese_chars", true,
                       &t->cjk)) ||
        (rc = get_bool(L, n, "lowercase", "normalizer.lowercase", true, &t->lowercase)))
        return rc;
    json_t *sa = json_object_get(n, "strip_accents");
    if (!sa || json_is_null(sa)) {
        t->strip_accents = t->lowercase; /* null: follow lowercase */
    } else if (json_is_boolean(sa)) {
        t->strip_accents = json_is_true(sa);
    } else {
        return ferr(L, MODATTN_EFORMAT, "normalizer.strip_accents", "expected true, false or null");
    }
    return 0;
}

static int load_pretokenizer(tk_load *L) {
    json_t *p = json_object_get(L->root, "pre_tokenizer");
    if (!p || json_is_null(p)) {
        L->t->has_pretok = false;
        return 0;
    }
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return ferr(L, MODATTN_EFORMAT, "pre_tokenizer.type", "missing");
    if (strcmp(type, "BertPreTokenizer") != 0)
        return modattn__error(MODATTN_EUNSUPPORTED,
                             "tokenizer %s: field \"pre_tokenizer.type\": \"%s\" is not supported "
                             "(only BertPreTokenizer)",
                             L->path, type);
    L->t->has_pretok = true;
    return 0;
}

static int id_from_json(const tk_load *L, json_t *v, const char *field, int32_t *out) {
    if (!json_is_integer(v)) return ferr(L, MODATTN_EFORMAT, field, "expected an integer id");
    json_int_t id = json_integer_value(v);
    if (id < 0 || id >= TK_MAX_ID) {
        char msg[96];
        snprintf(msg, sizeof msg, "id %lld out of range [0, %d)", (long long)id, TK_MAX_ID);
        return ferr(L, MODATTN_ERANGE, field, msg);
    }
    *out = (int32_t)id;
    return 0;
}


static int load_added(tk_load *L, size_t off);

static int load_model(tk_load *L) {
    modattn_tokenizer *t = L->t;
    json_t *m = json_object_get(L->root, "model");
    if (!json_is_object(m)) return ferr(L, MODATTN_EFORMAT, "model", "missing or not an object");
    json_t *jt = json_object_get(m, "type");
    const char *type = json_string_value(jt);
    if (jt && !type) return ferr(L, MODATTN_EFORMAT, "model.type", "expected a string");
    if (type && strcmp(type, "WordPiece") != 0)
        return modattn__error(MODATTN_EUNSUPPORTED,
                             "tokenizer %s: field \"model.type\": \"%s\" is not supported (only "
                             "WordPiece)",
                             L->path, type);
    if (!type && !json_object_get(m, "max_input_chars_per_word"))
        return ferr(L, MODATTN_EUNSUPPORTED, "model.type", "missing, and not a WordPiece model");

    /* prefix, limit */
    json_t *pfx = json_object_get(m, "continuing_subword_prefix");
    const char *prefix = "##";
    if (pfx && !json_is_null(pfx)) {
        prefix = json_string_value(pfx);
        if (!prefix) return ferr(L, MODATTN_EFORMAT, "model.continuing_subword_prefix", "expected a string");
    }
    size_t plen = strlen(prefix);
    if (plen > TK_MAX_PREFIX)
        return ferr(L, MODATTN_ERANGE, "model.continuing_subword_prefix", "longer than 64 bytes");
    memcpy(t->prefix, prefix, plen + 1);
    t->prefix_len = plen;
    json_t *mc = json_object_get(m, "max_input_chars_per_word");
    t->max_chars = 100;
    if (mc && !json_is_null(mc)) {
        if (!json_is_integer(mc) || json_integer_value(mc) < 0)
            return ferr(L, MODATTN_EFORMAT, "model.max_input_chars_per_word",
                        "expected a non-negative integer");
        t->max_chars = (size_t)json_integer_value(mc);
    }

    /* vocabulary: sizes first, then one slab */
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab)) return ferr(L, MODATTN_EFORMAT, "model.vocab", "missing or not an object");
    size_t count = json_object_size(vocab);
    if (count == 0) return ferr(L, MODATTN_EFORMAT, "model.vocab", "empty");
    size_t slab_bytes = 0;
    int32_t max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        int32_t id;
        int rc = id_from_json(L, val, "model.vocab", &id);
        if (rc) return modattn__error_prefix(rc, "token \"%.40s\"", key);
        if (id > max_id) max_id = id;
        slab_bytes += strlen(key) + 1;
        if (slab_bytes >= TK_NONE) return ferr(L, MODATTN_ERANGE, "model.vocab", "strings over 4 GiB");
    }
    /* added tokens may use ids past the vocabulary */
    json_t *added = json_object_get(L->root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return ferr(L, MODATTN_EFORMAT, "added_tokens", "expected an array");
    size_t nadded = json_is_array(added) ? json_array_size(added) : 0;
    size_t added_cps = 0;
    for (size_t i = 0; i < nadded; i++) {
        json_t *a = json_array_get(added, i);
        const char *content = json_string_value(json_object_get(a, "content"));
        if (!json_is_object(a) || !content)
            return ferr(L, MODATTN_EFORMAT, "added_tokens[].content", "missing or not a string");
        int32_t id;
        int rc = id_from_json(L, json_object_get(a, "id"), "added_tokens[].id", &id);
        if (rc) return rc;
        if (id > max_id) max_id = id;
        slab_bytes += strlen(content) + 1;
        added_cps += strlen(content) * 3 + 4; /* room for normalisation growth */
        if (slab_bytes >= TK_NONE) return ferr(L, MODATTN_ERANGE, "added_tokens", "strings over 4 GiB");
    }
    t->nids = (size_t)max_id + 1;
    int vst = modattn__tk_vocab_alloc(L, slab_bytes, count);
    if (vst) return vst;
    size_t off = 0;
    json_object_foreach(vocab, key, val) {
        int32_t id = (int32_t)json_integer_value(val);
        size_t kl = strlen(key);
        if (t->tok_off[id] != TK_NONE) {
            char msg[160];
            snprintf(msg, sizeof msg, "id %d is given to both \"%.40s\" and \"%.40s\"", (int)id,
                     t->slab + t->tok_off[id], key);
            return ferr(L, MODATTN_EFORMAT, "model.vocab", msg);
        }
        modattn__tk_vocab_insert(t, id, key, kl, &off);
    }

    int rc = modattn__tk_build_trie(L);
    if (rc) return rc;

    /* unk token */
    json_t *ju = json_object_get(m, "unk_token");
    const char *unk = "[UNK]";
    if (ju && !json_is_null(ju)) {
        unk = json_string_value(ju);
        if (!unk) return ferr(L, MODATTN_EFORMAT, "model.unk_token", "expected a string");
    }
    t->unk_id = modattn__tk_vocab_find(t, unk, strlen(unk));

    return load_added(L, off);
}

/* Added tokens: id -> string for ids the vocabulary lacks (from slab offset `off`), code points
 * for matching. Shared by WordPiece and Unigram (which already placed its strings). */
static int load_added(tk_load *L, size_t off) {
    modattn_tokenizer *t = L->t;
    json_t *added = json_object_get(L->root, "added_tokens");
    size_t nadded = json_is_array(added) ? json_array_size(added) : 0;
    size_t added_cps = 0;
    int rc = 0;
    for (size_t i = 0; i < nadded; i++) {
        const char *content = json_string_value(json_object_get(json_array_get(added, i), "content"));
        if (!content) return ferr(L, MODATTN_EFORMAT, "added_tokens[].content", "missing or not a string");
        added_cps += strlen(content) * 3 + 4;
    }
    if (nadded) {
        t->added = modattn__calloc(nadded, sizeof(tk_added), MODATTN_MEM_WEIGHTS);
        t->added_cps = modattn__calloc(added_cps, sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
        if (!t->added || !t->added_cps)
            return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    }
    size_t cp_off = 0;
    for (size_t i = 0; i < nadded; i++) {
        json_t *a = json_array_get(added, i);
        const char *content = json_string_value(json_object_get(a, "content"));
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        size_t cl = strlen(content);
        bool special = false;
        if ((rc = get_bool(L, a, "special", "added_tokens[].special", false, &special))) return rc;
        if (special) { /* skip_special_tokens drops it when decoding */
            if (!t->special_bits && !(t->special_bits = modattn__calloc(t->nids / 8 + 1, 1, MODATTN_MEM_WEIGHTS)))
                return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
            t->special_bits[(size_t)id / 8] |= (uint8_t)(1u << (id % 8));
        }
        if (t->tok_off[id] == TK_NONE) {
            memcpy(t->slab + off, content, cl + 1);
            t->tok_off[id] = (uint32_t)off;
            t->tok_len[id] = (uint32_t)cl;
            off += cl + 1;
        }
        if (cl == 0) continue; /* HF ignores empty added tokens */
        tk_added *at = &t->added[t->nadded];
        if ((rc = get_bool(L, a, "single_word", "added_tokens[].single_word", false, &at->single_word)) ||
            (rc = get_bool(L, a, "lstrip", "added_tokens[].lstrip", false, &at->lstrip)) ||
            (rc = get_bool(L, a, "rstrip", "added_tokens[].rstrip", false, &at->rstrip)) ||
            (rc = get_bool(L, a, "normalized", "added_tokens[].normalized", true, &at->normalized)))
            return rc;
        bool dup = false;
        for (uint32_t k = 0; k < t->nadded; k++) {
            const char *s = modattn_tokenizer_token(t, t->added[k].id);
            if (t->added[k].id == id && s && strcmp(s, content) == 0) dup = true;
        }
        if (dup) continue;
        at->id = id;
        at->cps = t->added_cps + cp_off;
        /* decode the content (valid UTF-8 by JSON) */
        utf8proc_ssize_t pos = 0;
        uint32_t nc = 0;
        while ((size_t)pos < cl) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k =
                utf8proc_iterate((const utf8proc_uint8_t *)content + pos, (utf8proc_ssize_t)(cl - (size_t)pos), &cp);
            if (k <= 0) return ferr(L, MODATTN_EFORMAT, "added_tokens[].content", "invalid UTF-8");
            at->cps[nc++] = (uint32_t)cp;
            pos += k;
        }
        at->ncps = nc;
        cp_off += cl * 3 + 4;
        t->nadded++;
    }
    return 0;
}

/* Normalise the content of `normalized` added tokens, as HF builds its normalised trie. */
static int normalize_added(tk_load *L) {
    modattn_tokenizer *t = L->t;
    tk_vec in = {0}, out = {0}, mid = {0}, tmp = {0};
    int rc = 0;
    for (uint32_t i = 0; i < t->nadded && !rc; i++) {
        tk_added *a = &t->added[i];
        if (!a->normalized) continue;
        in.n = 0;
        for (uint32_t k = 0; k < a->ncps && !rc; k++) rc = modattn__tk_vec_push(&in, a->cps[k], k, k + 1);
        if (rc) break;
        if (t->unigram || t->bpe) {
            tk_uscratch *us = NULL;
            rc = modattn__tk_unorm(t, &us, in.v, 0, in.n, 0, &out);
            modattn__tk_uscratch_free(us);
            if (rc) break;
        } else if ((rc = modattn__tk_normalize(t, in.v, 0, in.n, &out, &mid, &tmp))) {
            break;
        }
        /* the slot holds 3 * bytes + 4 >= 3 * chars + 4 code points */
        if (out.n > (size_t)a->ncps * 3 + 4) {
            rc = ferr(L, MODATTN_EFORMAT, "added_tokens[].content", "normalises to too many characters");
            break;
        }
        for (size_t k = 0; k < out.n; k++) a->cps[k] = out.v[k].cp;
        a->ncps = (uint32_t)out.n; /* may be 0: such a token never matches */
    }
    modattn__tk_vec_free(&in);
    modattn__tk_vec_free(&out);
    modattn__tk_vec_free(&mid);
    modattn__tk_vec_free(&tmp);
    return rc;
}

static int cmp_added(const void *x, const void *y, const modattn_tokenizer *t) {
    const tk_added *a = &t->added[*(const uint32_t *)x], *b = &t->added[*(const uint32_t *)y];
    if (a->cps[0] != b->cps[0]) return a->cps[0] < b->cps[0] ? -1 : 1;
    if (a->ncps != b->ncps) return a->ncps > b->ncps ? -1 : 1;
    return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

/* insertion sort: added tokens are few, and qsort has no context pointer */
static void sort_order(uint32_t *o, uint32_t n, const modattn_tokenizer *t) {
    for (uint32_t i = 1; i < n; i++) {
        uint32_t k = o[i], j = i;
        while (j > 0 && cmp_added(&o[j - 1], &k, t) > 0) {
            o[j] = o[j - 1];
            j--;
        }
        o[j] = k;
    }
}

static int build_match_set(tk_load *L, tk_match_set *m, bool normalized) {
    modattn_tokenizer *t = L->t;
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->nadded; i++)
        if (t->added[i].normalized == normalized && t->added[i].ncps) n++;
    if (!n) return 0;
    m->order = modattn__malloc(n * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    if (!m->order) return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    m->min_first = UINT32_MAX;
    for (uint32_t i = 0; i < t->nadded; i++) {
        const tk_added *a = &t->added[i];
        if (a->normalized != normalized || !a->ncps) continue;
        m->order[m->n++] = i;
        uint32_t f = a->cps[0];
        if (f < 128) m->ascii_first[f >> 6] |= 1ull << (f & 63);
        if (f < m->min_first) m->min_first = f;
        if (f > m->max_first) m->max_first = f;
        for (uint32_t k = 0; k < a->ncps; k++)
            if (tk_is_ws(t, a->cps[k])) m->has_space = true;
    }
    sort_order(m->order, m->n, t);
    return 0;
}

static int special_ids(tk_load *L, json_t *special_tokens, const char *name, int32_t *ids,
                       size_t *nids) {
    json_t *st = json_object_get(special_tokens, name);
    json_t *arr = json_object_get(st, "ids");
    if (!json_is_array(arr))
        return ferr(L, MODATTN_EFORMAT, "post_processor.special_tokens", "a template token has no ids");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (*nids >= 8) return ferr(L, MODATTN_EUNSUPPORTED, "post_processor", "more than 8 special ids");
        int rc = id_from_json(L, json_array_get(arr, i), "post_processor.special_tokens[].ids",
                              &ids[(*nids)++]);
        if (rc) return rc;
    }
    return 0;
}

/* ByteLevel's and RobertaProcessing's trim_offsets and add_prefix_space */
static int load_trim(tk_load *L, json_t *p, bool after_template) {
    modattn_tokenizer *t = L->t;
    int rc;
    bool trim = true, prefix = true;
    if ((rc = get_bool(L, p, "trim_offsets", "post_processor.trim_offsets", true, &trim)) ||
        (rc = get_bool(L, p, "add_prefix_space", "post_processor.add_prefix_space", true, &prefix)))
        return rc;
    if (t->trim_offsets && trim)
        return ferr(L, MODATTN_EUNSUPPORTED, "post_processor", "two processors that trim offsets");
    if (trim) {
        t->trim_offsets = true;
        t->trim_prefix_space = prefix;
        t->trim_after_template = after_template;
    }
    return 0;
}

static int load_post_one(tk_load *L, json_t *p, bool *template_seen);

static int load_post(tk_load *L) {
    modattn_tokenizer *t = L->t;
    json_t *p = json_object_get(L->root, "post_processor");
    if (!p || json_is_null(p)) return 0;
    bool template_seen = false;
    int rc;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (type && strcmp(type, "Sequence") == 0) {
        json_t *arr = json_object_get(p, "processors");
        if (!json_is_array(arr)) return ferr(L, MODATTN_EFORMAT, "post_processor.processors", "expected an array");
        for (size_t i = 0; i < json_array_size(arr); i++)
            if ((rc = load_post_one(L, json_array_get(arr, i), &template_seen))) return rc;
    } else if ((rc = load_post_one(L, p, &template_seen))) {
        return rc;
    }
    for (size_t i = 0; i < t->npre + t->npost; i++) {
        int32_t id = i < t->npre ? t->pre_ids[i] : t->post_ids[i - t->npre];
        if ((size_t)id >= t->nids) {
            char msg[96];
            snprintf(msg, sizeof msg, "special id %d is outside the vocabulary (%zu ids)", (int)id, t->nids);
            return ferr(L, MODATTN_ERANGE, "post_processor", msg);
        }
    }
    return 0;
}

static int load_post_one(tk_load *L, json_t *p, bool *template_seen) {
    modattn_tokenizer *t = L->t;
    if (!json_is_object(p)) return ferr(L, MODATTN_EFORMAT, "post_processor", "expected an object");
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return ferr(L, MODATTN_EFORMAT, "post_processor.type", "missing");
    int rc;
    if (t->npre + t->npost && strcmp(type, "ByteLevel") != 0)
        return ferr(L, MODATTN_EUNSUPPORTED, "post_processor", "two processors that add special tokens");
    if (strcmp(type, "ByteLevel") == 0) {
        return load_trim(L, p, *template_seen);
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        *template_seen = true;
        json_t *single = json_object_get(p, "single");
        json_t *sp = json_object_get(p, "special_tokens");
        if (!json_is_array(single))
            return ferr(L, MODATTN_EFORMAT, "post_processor.single", "expected an array");
        bool seen_seq = false;
        for (size_t i = 0; i < json_array_size(single); i++) {
            json_t *item = json_array_get(single, i);
            json_t *s = json_object_get(item, "SpecialToken");
            json_t *q = json_object_get(item, "Sequence");
            if (s) {
                const char *name = json_string_value(json_object_get(s, "id"));
                if (!name) return ferr(L, MODATTN_EFORMAT, "post_processor.single[].SpecialToken.id", "missing");
                if ((rc = seen_seq ? special_ids(L, sp, name, t->post_ids, &t->npost)
                                   : special_ids(L, sp, name, t->pre_ids, &t->npre)))
                    return rc;
            } else if (q) {
                const char *sid = json_string_value(json_object_get(q, "id"));
                if (seen_seq || !sid || strcmp(sid, "A") != 0)
                    return ferr(L, MODATTN_EUNSUPPORTED, "post_processor.single",
                                "only one Sequence A is supported");
                seen_seq = true;
            } else {
                return ferr(L, MODATTN_EFORMAT, "post_processor.single[]", "neither SpecialToken nor Sequence");
            }
        }
        if (!seen_seq) return ferr(L, MODATTN_EFORMAT, "post_processor.single", "no Sequence A");
    } else if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        json_t *cls = json_object_get(p, "cls"), *sep = json_object_get(p, "sep");
        if (!json_is_array(cls) || !json_is_array(sep) || json_array_size(cls) != 2 ||
            json_array_size(sep) != 2)
            return ferr(L, MODATTN_EFORMAT, "post_processor.cls/sep", "expected [token, id] pairs");
        if ((rc = id_from_json(L, json_array_get(cls, 1), "post_processor.cls", &t->pre_ids[0])) ||
            (rc = id_from_json(L, json_array_get(sep, 1), "post_processor.sep", &t->post_ids[0])))
            return rc;
        t->npre = t->npost = 1;
        if (strcmp(type, "RobertaProcessing") == 0 && (rc = load_trim(L, p, false))) return rc;
    } else {
        return modattn__error(MODATTN_EUNSUPPORTED,
                             "tokenizer %s: field \"post_processor.type\": \"%s\" is not supported "
                             "(TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, a Sequence of "
                             "them, or null)",
                             L->path, type);
    }
    return 0;
}

/* The `decoder` (modattn_tokenizer_decode): ByteLevel, WordPiece, Metaspace or none are decoded; any other
 * type loads (encoding does not need it) and decoding refuses it, naming the type. */
static int load_decoder(tk_load *L) {
    modattn_tokenizer *t = L->t;
    json_t *d = json_object_get(L->root, "decoder");
    t->decoder = TK_DEC_NONE;
    if (!d || json_is_null(d)) return 0;
    if (!json_is_object(d)) return ferr(L, MODATTN_EFORMAT, "decoder", "expected an object or null");
    const char *type = json_string_value(json_object_get(d, "type"));
    if (!type) return ferr(L, MODATTN_EFORMAT, "decoder.type", "missing or not a string");
    snprintf(t->dec_type, sizeof t->dec_type, "%s", type);
    if (strcmp(type, "ByteLevel") == 0) {
        t->decoder = TK_DEC_BYTELEVEL;
    } else if (strcmp(type, "WordPiece") == 0) {
        t->decoder = TK_DEC_WORDPIECE;
        int rc = get_bool(L, d, "cleanup", "decoder.cleanup", true, &t->dec_cleanup);
        if (rc) return rc;
        json_t *p = json_object_get(d, "prefix");
        const char *prefix = p ? json_string_value(p) : "##";
        if (!prefix) return ferr(L, MODATTN_EFORMAT, "decoder.prefix", "not a string");
        if (strlen(prefix) > TK_MAX_PREFIX) return ferr(L, MODATTN_EUNSUPPORTED, "decoder.prefix", "longer than 64 bytes");
        snprintf(t->dec_prefix, sizeof t->dec_prefix, "%s", prefix);
    } else if (strcmp(type, "Metaspace") == 0) {
        /* tokenizers' Metaspace decoder: each replacement character becomes a space, except in the
         * first token kept, where it is dropped unless prepend_scheme is "never" (older files:
         * add_prefix_space) */
        t->decoder = TK_DEC_METASPACE;
        json_t *r = json_object_get(d, "replacement");
        const char *rep = r ? json_string_value(r) : "\xE2\x96\x81";
        if (!rep || !*rep || strlen(rep) > TK_MAX_PREFIX)
            return ferr(L, MODATTN_EFORMAT, "decoder.replacement", "not a non-empty string of at most 64 bytes");
        snprintf(t->dec_prefix, sizeof t->dec_prefix, "%s", rep);
        t->dec_strip_first = true;
        json_t *ps = json_object_get(d, "prepend_scheme");
        if (ps && !json_is_null(ps)) {
            const char *v = json_string_value(ps);
            if (!v || (strcmp(v, "always") && strcmp(v, "first") && strcmp(v, "never")))
                return ferr(L, MODATTN_EFORMAT, "decoder.prepend_scheme", "not \"always\", \"first\" or \"never\"");
            t->dec_strip_first = strcmp(v, "never") != 0;
        } else {
            int rc = get_bool(L, d, "add_prefix_space", "decoder.add_prefix_space", true, &t->dec_strip_first);
            if (rc) return rc;
        }
    } else {
        t->decoder = TK_DEC_OTHER;
    }
    return 0;
}

int modattn_tokenizer_load(const char *path, modattn_tokenizer **out) {
    if (!path || !out) return modattn__error(MODATTN_EINVAL, "modattn_tokenizer_load: NULL argument");
    *out = NULL;
    json_error_t jerr;
    json_t *root = NULL;
    int st = modattn__json_load_file(path, 0, &root, &jerr);
    if (st == MODATTN_EIO)
        return modattn__error(MODATTN_EIO, "tokenizer %s: cannot open: %s", path, jerr.text);
    if (st == MODATTN_EFORMAT)
        return modattn__error(MODATTN_EFORMAT, "tokenizer %s: line %d column %d: %s", path, jerr.line,
                             jerr.column, jerr.text);
    if (st) return modattn__error_prefix(st, "tokenizer %s: reading the JSON", path);
    modattn_tokenizer *t = modattn__calloc(1, sizeof *t, MODATTN_MEM_WEIGHTS);
    if (!t) {
        json_decref(root);
        return modattn__error_prefix(modattn__mem_last_status(), "loading %s", path);
    }
    tk_load L = {path, t, root};
    /* ASCII classes from the generated tables */
    for (uint32_t c = 0; c < 128; c++) {
        uint8_t k = 0;
        if (IN_TABLE(modattn__tok_drop, c)) k |= C_DROP;
        if (IN_TABLE(modattn__tok_space, c)) k |= C_SPACE;
        if (IN_TABLE(modattn__tok_white, c)) k |= C_WS;
        if (IN_TABLE(modattn__tok_punct, c)) k |= C_PUNCT;
        t->ascii_cls[c] = k;
    }
    t->cls_id = t->sep_id = -1;
    int rc = 0;
    if (!json_is_object(root)) rc = ferr(&L, MODATTN_EFORMAT, "(root)", "expected a JSON object");
    const char *mtype = json_string_value(json_object_get(json_object_get(root, "model"), "type"));
    if (!rc && mtype && strcmp(mtype, "Unigram") != 0 && strcmp(mtype, "WordPiece") != 0 &&
        strcmp(mtype, "BPE") != 0) {
        rc = modattn__error(MODATTN_EUNSUPPORTED,
                           "tokenizer %s: field \"model.type\": \"%s\" is not supported (WordPiece, Unigram or BPE)",
                           path, mtype);
    } else if (!rc && mtype && strcmp(mtype, "BPE") == 0) {
        rc = modattn__tk_bpe_load(&L);
        if (!rc) rc = load_added(&L, 0);
    } else if (!rc && mtype && strcmp(mtype, "Unigram") == 0) {
        rc = modattn__tk_unigram_load(&L, mtype);
        if (!rc) rc = load_added(&L, 0);
    } else {
        if (!rc) rc = load_normalizer(&L);
        if (!rc) rc = load_pretokenizer(&L);
        if (!rc) rc = load_model(&L);
    }
    if (!rc) rc = normalize_added(&L);
    if (!rc) rc = build_match_set(&L, &t->raw, false);
    if (!rc) rc = build_match_set(&L, &t->norm, true);
    if (!rc) rc = load_post(&L);
    if (!rc) rc = load_decoder(&L);
    if (!rc) {
        t->can_block = t->has_pretok;
        t->bpe_block = modattn__tk_bpe_can_block(t);
        for (uint32_t c = 0; c < 128; c++)
            t->ascii_cut[c] = (t->ascii_cls[c] & (C_WS | C_PUNCT)) && !(t->ascii_cls[c] & C_DROP);
        for (uint32_t i = 0; i < t->nadded; i++) {
            const tk_added *a = &t->added[i];
            if (a->lstrip || a->rstrip) t->strip_ws_tokens = true;
            for (uint32_t k = 0; k < a->ncps; k++)
                if (a->cps[k] < 128) t->ascii_cut[a->cps[k]] = 0;
        }
        /* clean_text turns tab, CR, LF into spaces that a normalised token may contain */
        if (t->norm.has_space) t->ascii_cut[' '] = t->ascii_cut['\t'] = t->ascii_cut['\n'] = t->ascii_cut['\r'] = 0;
        t->cls_id = t->npre ? t->pre_ids[0] : modattn_tokenizer_find(t, "[CLS]", 5);
        t->sep_id = t->npost ? t->post_ids[0] : modattn_tokenizer_find(t, "[SEP]", 5);
        json_t *pad = json_object_get(json_object_get(root, "padding"), "pad_id");
        if (json_is_integer(pad) && json_integer_value(pad) >= 0 &&
            (size_t)json_integer_value(pad) < t->nids)
            t->pad_id = (int32_t)json_integer_value(pad);
        else {
            int32_t p = modattn_tokenizer_find(t, "[PAD]", 5);
            if (p < 0) p = modattn_tokenizer_find(t, "<pad>", 5); /* SentencePiece models (XLM-R: 1) */
            t->pad_id = p >= 0 ? p : 0;
        }
    }
    json_decref(root);
    if (rc) {
        modattn_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

