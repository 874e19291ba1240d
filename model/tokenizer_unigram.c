/* model/tokenizer_unigram.c — SentencePiece Unigram tokenizers from tokenizer.json (XLM-RoBERTa
 * and its family), exact to Hugging Face `tokenizers` 0.23:
 *   normalizers: Precompiled (sentencepiece's charsmap, decoded from the file: a darts-clone
 *     double array of keys and a pool of NUL-terminated replacements), Replace (a literal, or a
 *     Regex that is one character repeated: "X{n,}", "X+"), Strip, Lowercase, and Sequence;
 *   pre-tokenizers: Metaspace (replacement, prepend_scheme always/first/never, split),
 *     WhitespaceSplit, and Sequence;
 *   model: Unigram (Viterbi over the scores, unknown characters fused into one unk_id, byte_fallback
 *     to <0xXX> pieces).
 * Anything else is refused at load, naming the component: an approximation would give other ids.
 *
 * Offsets follow HF's NormalizedString: each character carries the byte range of the original it
 * is aligned with, and every normalizer is applied as HF's `transform` does it, a list of
 * (character, change) pairs walked over the input (change 0 replaces the next input character,
 * -N also eats N more, +1 inserts with the alignment of the previous input character). Precompiled
 * uses HF's own (odd, deliberate) change lists, so its offsets are HF's. A token's offsets are the
 * smallest start and largest end of its characters' alignments.
 * The added-token splitting, truncation and specials are tokenizer.c's, shared with WordPiece. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/tokenizer_internal.h"
#include "model/tokenizer_unicode_nf.h"

#define UNK_PENALTY 10.0 /* HF's K_UNK_PENALTY: an unknown character scores min_score - 10 */

/* ------------------------------------------------------------------ loading helpers */

static int uerr(const tk_load *L, int status, const char *field, const char *what) {
    return modattn__error(status, "tokenizer %s: field \"%s\": %s", L->path, field, what);
}

static int unsupported(const tk_load *L, const char *field, const char *type, const char *supported) {
    return modattn__error(MODATTN_EUNSUPPORTED,
                         "tokenizer %s: field \"%s\": \"%s\" is not supported (with a %s model: %s)",
                         L->path, field, type, L->t->bpe ? "BPE" : "Unigram", supported);
}

/* Decode valid UTF-8 (a JSON string) to code points; *n set. NULL on failure. */
static uint32_t *utf8_to_cps(const char *s, uint32_t *n) {
    size_t len = strlen(s);
    uint32_t *cps = modattn__malloc((len + 1) * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    if (!cps) return NULL;
    size_t pos = 0;
    uint32_t k = 0;
    while (pos < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s + pos, (utf8proc_ssize_t)(len - pos), &cp);
        if (m <= 0) {
            modattn_free(cps);
            return NULL;
        }
        cps[k++] = (uint32_t)cp;
        pos += (size_t)m;
    }
    *n = k;
    return cps;
}

/* ------------------------------------------------------------------ Precompiled charsmap */

static inline bool du_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t du_value(uint32_t u) { return u & 0x7FFFFFFFu; }
static inline uint32_t du_label(uint32_t u) { return u & (0x80000000u | 0xFFu); }
static inline uint32_t du_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

static int b64_val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict standard base64 (with padding), as HF decodes the field. */
static uint8_t *b64_decode(const char *s, size_t *out_len) {
    size_t len = strlen(s);
    if (len % 4) return NULL;
    uint8_t *out = modattn__malloc(len / 4 * 3 + 1, MODATTN_MEM_OTHER);
    if (!out) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64_val((unsigned char)s[i + k])) < 0) {
                modattn_free(out);
                return NULL;
            }
        }
        uint32_t w = ((uint32_t)v[0] << 18) | ((uint32_t)v[1] << 12) | ((uint32_t)v[2] << 6) | (uint32_t)v[3];
        out[n++] = (uint8_t)(w >> 16);
        if (pad < 2) out[n++] = (uint8_t)(w >> 8);
        if (pad < 1) out[n++] = (uint8_t)w;
    }
    *out_len = n;
    return out;
}

/* Walk every node reachable from the root: every child index, every leaf value and every
 * replacement string must lie inside the blob, so that no text can read outside it later. */
static int cm_validate(const tk_load *L, const modattn_tokenizer *t) {
    const char *f = "normalizer.precompiled_charsmap";
    size_t n = t->cm_nunits;
    if (n == 0) return uerr(L, MODATTN_EFORMAT, f, "empty double array");
    uint8_t *seen = modattn__calloc(n, 1, MODATTN_MEM_OTHER);
    uint32_t *stack = modattn__malloc(n * sizeof(uint32_t), MODATTN_MEM_OTHER);
    int rc = 0;
    if (!seen || !stack) {
        rc = modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
        goto done;
    }
    size_t root = du_offset(t->cm_units[0]);
    if (root >= n) {
        rc = uerr(L, MODATTN_EFORMAT, f, "damaged: the root's offset is outside the double array");
        goto done;
    }
    size_t sp = 0;
    stack[sp++] = (uint32_t)root;
    seen[root] = 1;
    while (sp && !rc) {
        size_t node = stack[--sp];
        for (uint32_t c = 1; c < 256; c++) {
            size_t child = node ^ c;
            if (child >= n) {
                rc = uerr(L, MODATTN_EFORMAT, f, "damaged: a child index is outside the double array");
                break;
            }
            uint32_t u = t->cm_units[child];
            if (du_label(u) != c) continue;
            size_t next = child ^ du_offset(u);
            if (next >= n) {
                rc = uerr(L, MODATTN_EFORMAT, f, "damaged: an offset is outside the double array");
                break;
            }
            if (du_leaf(u)) {
                size_t v = du_value(t->cm_units[next]);
                if (v >= t->cm_pool_len || !memchr(t->cm_pool + v, 0, t->cm_pool_len - v)) {
                    rc = uerr(L, MODATTN_EFORMAT, f, "damaged: a replacement is outside the string pool");
                    break;
                }
            }
            if (!seen[next]) {
                seen[next] = 1;
                stack[sp++] = (uint32_t)next;
            }
        }
    }
done:
    modattn_free(seen);
    modattn_free(stack);
    return rc;
}

static int load_charsmap(tk_load *L, json_t *n) {
    modattn_tokenizer *t = L->t;
    const char *f = "normalizer.precompiled_charsmap";
    if (t->cm_units) return unsupported(L, "normalizer", "Precompiled", "one Precompiled normalizer");
    const char *s = json_string_value(json_object_get(n, "precompiled_charsmap"));
    if (!s) return uerr(L, MODATTN_EFORMAT, f, "missing or not a string");
    size_t len = 0;
    uint8_t *blob = b64_decode(s, &len);
    if (!blob) return uerr(L, MODATTN_EFORMAT, f, "not valid base64");
    int rc = 0;
    uint32_t trie_bytes = 0;
    if (len < 4) {
        rc = uerr(L, MODATTN_EFORMAT, f, "truncated: shorter than its 4-byte header");
        goto done;
    }
    trie_bytes = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
    size_t nunits = trie_bytes / 4;
    if (nunits > (len - 4) / 4) {
        rc = uerr(L, MODATTN_EFORMAT, f, "truncated: the double array is longer than the blob");
        goto done;
    }
    size_t pool_off = 4 + nunits * 4, pool_len = len - pool_off;
    /* the pool must be valid UTF-8 (HF reads it as a String) */
    for (size_t p = 0; p < pool_len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t m = utf8proc_iterate(blob + pool_off + p, (utf8proc_ssize_t)(pool_len - p), &cp);
        if (m <= 0) {
            rc = uerr(L, MODATTN_EFORMAT, f, "the replacement pool is not valid UTF-8");
            goto done;
        }
        p += (size_t)m;
    }
    t->cm_units = modattn__malloc((nunits ? nunits : 1) * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    t->cm_pool = modattn__malloc(pool_len + 1, MODATTN_MEM_WEIGHTS);
    if (!t->cm_units || !t->cm_pool) {
        rc = modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
        goto done;
    }
    for (size_t i = 0; i < nunits; i++) {
        const uint8_t *b = blob + 4 + i * 4;
        t->cm_units[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    }
    t->cm_nunits = nunits;
    memcpy(t->cm_pool, blob + pool_off, pool_len);
    t->cm_pool[pool_len] = 0;
    t->cm_pool_len = pool_len;
    rc = cm_validate(L, t);
done:
    modattn_free(blob);
    return rc;
}

/* The replacement for the longest... no: the FIRST (shortest) key that prefixes s[0, len), as
 * spm_precompiled's transform takes results[0]; NULL if none. */
static const char *cm_lookup(const modattn_tokenizer *t, const uint8_t *s, size_t len) {
    const uint32_t *a = t->cm_units;
    size_t n = t->cm_nunits;
    size_t pos = du_offset(a[0]);
    for (size_t i = 0; i < len; i++) {
        uint8_t c = s[i];
        if (c == 0) break;
        pos ^= c;
        if (pos >= n) return NULL; /* unreachable after cm_validate */
        uint32_t u = a[pos];
        if (du_label(u) != c) return NULL;
        pos ^= du_offset(u);
        if (pos >= n) return NULL;
        if (du_leaf(u)) {
            size_t v = du_value(a[pos]);
            return v < t->cm_pool_len ? t->cm_pool + v : NULL;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ loading the components */

static int load_nstep(tk_load *L, json_t *n, const char *field) {
    modattn_tokenizer *t = L->t;
    if (!json_is_object(n)) return uerr(L, MODATTN_EFORMAT, field, "expected an object");
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) return uerr(L, MODATTN_EFORMAT, field, "missing type");
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(n, "normalizers");
        if (!json_is_array(arr)) return uerr(L, MODATTN_EFORMAT, "normalizer.normalizers", "expected an array");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            int rc = load_nstep(L, json_array_get(arr, i), "normalizer.normalizers[]");
            if (rc) return rc;
        }
        return 0;
    }
    if (t->nnsteps >= 32) return uerr(L, MODATTN_EUNSUPPORTED, field, "more than 32 normalizers");
    tk_nstep *st = &t->nsteps[t->nnsteps];
    memset(st, 0, sizeof *st);
    if (!strcmp(type, "Precompiled")) {
        st->kind = NK_PRECOMPILED;
        int rc = load_charsmap(L, n);
        if (rc) return rc;
    } else if (!strcmp(type, "Strip")) {
        st->kind = NK_STRIP;
        json_t *l = json_object_get(n, "strip_left"), *r = json_object_get(n, "strip_right");
        if ((l && !json_is_boolean(l)) || (r && !json_is_boolean(r)))
            return uerr(L, MODATTN_EFORMAT, "normalizer.strip_left/strip_right", "expected true or false");
        st->left = l ? json_is_true(l) : true;
        st->right = r ? json_is_true(r) : true;
    } else if (!strcmp(type, "Lowercase")) {
        st->kind = NK_LOWERCASE;
    } else if (!strcmp(type, "NFD")) {
        st->kind = NK_NFD;
    } else if (!strcmp(type, "NFKD")) {
        st->kind = NK_NFKD;
    } else if (!strcmp(type, "NFC")) {
        st->kind = NK_NFC;
    } else if (!strcmp(type, "NFKC")) {
        st->kind = NK_NFKC;
    } else if (!strcmp(type, "Replace")) {
        st->kind = NK_REPLACE;
        json_t *pat = json_object_get(n, "pattern");
        const char *content = json_string_value(json_object_get(n, "content"));
        if (!json_is_object(pat) || !content)
            return uerr(L, MODATTN_EFORMAT, "normalizer.pattern/content", "missing");
        const char *lit = json_string_value(json_object_get(pat, "String"));
        const char *re = json_string_value(json_object_get(pat, "Regex"));
        uint32_t min_run = 0;
        char *tmp = NULL;
        if (!lit && re) {
            /* one literal character repeated: "X{n,}" or "X+" (what the converters write) */
            uint32_t np = 0;
            uint32_t *cps = utf8_to_cps(re, &np);
            if (!cps) return uerr(L, MODATTN_EFORMAT, "normalizer.pattern.Regex", "invalid UTF-8");
            bool ok = np >= 2 && !strchr("\\.^$|?*+()[]{}", (int)(cps[0] < 128 ? cps[0] : 'a'));
            unsigned long k = 0;
            if (ok && np == 2 && cps[1] == '+') {
                min_run = 1;
            } else if (ok && np >= 4 && cps[1] == '{' && cps[np - 2] == ',' && cps[np - 1] == '}') {
                for (uint32_t i = 2; i + 2 < np && ok; i++) {
                    ok = cps[i] >= '0' && cps[i] <= '9' && k < 100000;
                    k = k * 10 + (cps[i] - '0');
                }
                ok = ok && np > 4 && k >= 1;
                min_run = (uint32_t)k;
            } else {
                ok = false;
            }
            if (ok) {
                char one[8] = {0};
                utf8proc_encode_char((utf8proc_int32_t)cps[0], (utf8proc_uint8_t *)one);
                tmp = strdup(one);
            }
            modattn_free(cps);
            if (!ok || !tmp)
                return modattn__error(MODATTN_EUNSUPPORTED,
                                     "tokenizer %s: field \"normalizer.pattern.Regex\": \"%.60s\" is not supported "
                                     "(only one character repeated, \"X{n,}\" or \"X+\")",
                                     L->path, re);
            lit = tmp;
        }
        if (!lit) {
            return uerr(L, MODATTN_EFORMAT, "normalizer.pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
        }
        st->pat = utf8_to_cps(lit, &st->npat);
        free(tmp);
        st->rep = utf8_to_cps(content, &st->nrep);
        st->min_run = min_run;
        t->nnsteps++; /* owned from here on, freed with the tokenizer */
        if (!st->pat || !st->rep) return modattn__error_prefix(MODATTN_ENOMEM, "loading %s", L->path);
        if (st->npat == 0) return uerr(L, MODATTN_EUNSUPPORTED, "normalizer.pattern", "empty pattern");
        return 0;
    } else {
        return unsupported(L, "normalizer.type", type,
                           "Precompiled, Replace, Strip, Lowercase, NFC, NFKC, NFD, NFKD, Sequence");
    }
    t->nnsteps++;
    return 0;
}

static int load_pstep(tk_load *L, json_t *p, const char *field) {
    modattn_tokenizer *t = L->t;
    if (!json_is_object(p)) return uerr(L, MODATTN_EFORMAT, field, "expected an object");
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return uerr(L, MODATTN_EFORMAT, field, "missing type");
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(p, "pretokenizers");
        if (!json_is_array(arr)) return uerr(L, MODATTN_EFORMAT, "pre_tokenizer.pretokenizers", "expected an array");
        for (size_t i = 0; i < json_array_size(arr); i++) {
            int rc = load_pstep(L, json_array_get(arr, i), "pre_tokenizer.pretokenizers[]");
            if (rc) return rc;
        }
        return 0;
    }
    if (t->npsteps >= 16) return uerr(L, MODATTN_EUNSUPPORTED, field, "more than 16 pre-tokenizers");
    tk_pstep *st = &t->psteps[t->npsteps];
    memset(st, 0, sizeof *st);
    if (!strcmp(type, "WhitespaceSplit")) {
        st->kind = PK_WHITESPACE_SPLIT;
    } else if (!strcmp(type, "Metaspace")) {
        st->kind = PK_METASPACE;
        const char *r = json_string_value(json_object_get(p, "replacement"));
        uint32_t nr = 0;
        uint32_t *cps = r ? utf8_to_cps(r, &nr) : NULL;
        if (!cps || nr != 1) {
            modattn_free(cps);
            return uerr(L, MODATTN_EFORMAT, "pre_tokenizer.replacement", "expected one character");
        }
        st->repl = cps[0];
        modattn_free(cps);
        json_t *ps = json_object_get(p, "prepend_scheme");
        json_t *aps = json_object_get(p, "add_prefix_space");
        st->prepend = MS_ALWAYS;
        if (ps && !json_is_null(ps)) {
            const char *v = json_string_value(ps);
            if (v && !strcmp(v, "always")) st->prepend = MS_ALWAYS;
            else if (v && !strcmp(v, "first")) st->prepend = MS_FIRST;
            else if (v && !strcmp(v, "never")) st->prepend = MS_NEVER;
            else return uerr(L, MODATTN_EFORMAT, "pre_tokenizer.prepend_scheme", "expected always, first or never");
        } else if (aps) {
            if (!json_is_boolean(aps)) return uerr(L, MODATTN_EFORMAT, "pre_tokenizer.add_prefix_space", "expected true or false");
            st->prepend = json_is_true(aps) ? MS_ALWAYS : MS_NEVER;
        }
        json_t *sp = json_object_get(p, "split");
        if (sp && !json_is_boolean(sp)) return uerr(L, MODATTN_EFORMAT, "pre_tokenizer.split", "expected true or false");
        st->split = sp ? json_is_true(sp) : true;
    } else {
        return unsupported(L, "pre_tokenizer.type", type, "Metaspace, WhitespaceSplit, Sequence");
    }
    t->npsteps++;
    return 0;
}

static int load_vocab(tk_load *L, json_t *m) {
    modattn_tokenizer *t = L->t;
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_array(vocab) || json_array_size(vocab) == 0)
        return uerr(L, MODATTN_EFORMAT, "model.vocab", "expected a non-empty array of [piece, score]");
    size_t count = json_array_size(vocab);
    if (count >= TK_MAX_ID) return uerr(L, MODATTN_ERANGE, "model.vocab", "too many pieces");
    json_t *added = json_object_get(L->root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return uerr(L, MODATTN_EFORMAT, "added_tokens", "expected an array");
    size_t nadded = json_is_array(added) ? json_array_size(added) : 0;
    size_t slab_bytes = 0, max_id = count - 1;
    for (size_t i = 0; i < count; i++) {
        json_t *e = json_array_get(vocab, i);
        const char *piece = json_string_value(json_array_get(e, 0));
        json_t *score = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !piece || !json_is_number(score))
            return uerr(L, MODATTN_EFORMAT, "model.vocab[]", "expected [piece, score]");
        slab_bytes += strlen(piece) + 1;
        if (slab_bytes >= TK_NONE) return uerr(L, MODATTN_ERANGE, "model.vocab", "strings over 4 GiB");
    }
    for (size_t i = 0; i < nadded; i++) {
        json_t *a = json_array_get(added, i);
        const char *content = json_string_value(json_object_get(a, "content"));
        json_t *jid = json_object_get(a, "id");
        if (!content) return uerr(L, MODATTN_EFORMAT, "added_tokens[].content", "missing or not a string");
        if (!json_is_integer(jid) || json_integer_value(jid) < 0 || json_integer_value(jid) >= TK_MAX_ID)
            return uerr(L, MODATTN_ERANGE, "added_tokens[].id", "expected an id in [0, 2^24)");
        if ((size_t)json_integer_value(jid) > max_id) max_id = (size_t)json_integer_value(jid);
        slab_bytes += strlen(content) + 1;
    }
    t->nids = max_id + 1;
    int vst = modattn__tk_vocab_alloc(L, slab_bytes + 1, count);
    if (vst) return vst;
    t->scores = modattn__calloc(t->nids, sizeof(double), MODATTN_MEM_WEIGHTS);
    if (!t->scores) return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    size_t off = 0;
    t->min_score = INFINITY;
    for (size_t id = 0; id < count; id++) {
        json_t *e = json_array_get(vocab, id);
        const char *piece = json_string_value(json_array_get(e, 0));
        double score = json_number_value(json_array_get(e, 1));
        size_t kl = strlen(piece);
        if (kl == 0) return uerr(L, MODATTN_EFORMAT, "model.vocab[]", "an empty piece");
        if (modattn__tk_vocab_find(t, piece, kl) >= 0) {
            char msg[120];
            snprintf(msg, sizeof msg, "the piece \"%.40s\" appears twice (not supported)", piece);
            return uerr(L, MODATTN_EUNSUPPORTED, "model.vocab", msg);
        }
        modattn__tk_vocab_insert(t, (int32_t)id, piece, kl, &off);
        t->scores[id] = score;
        if (score < t->min_score) t->min_score = score;
    }
    /* the trie holds the vocabulary only, as HF's; then added tokens past the vocabulary get
     * their strings (id -> token) */
    int rc = modattn__tk_build_trie(L);
    if (rc) return rc;
    modattn__tk_added_strings(t, added, nadded, &off);
    return 0;
}

/* The normalizer of a BPE tokenizer.json (NFC for Qwen2, none for GPT-2): the same sequence. */
int modattn__tk_load_norm_seq(tk_load *L) {
    modattn_tokenizer *t = L->t;
    t->nsteps = modattn__calloc(32, sizeof(tk_nstep), MODATTN_MEM_WEIGHTS);
    if (!t->nsteps) return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    json_t *n = json_object_get(L->root, "normalizer");
    if (n && !json_is_null(n)) return load_nstep(L, n, "normalizer");
    return 0;
}

/* model, normalizer and pre-tokenizer of a tokenizer.json whose model.type is "Unigram". The
 * added tokens and post-processor are loaded by tokenizer_load.c as for WordPiece. */
int modattn__tk_unigram_load(tk_load *L, const char *type) {
    modattn_tokenizer *t = L->t;
    (void)type;
    json_t *m = json_object_get(L->root, "model");
    t->unigram = true;
    t->has_norm = t->has_pretok = false;
    t->nsteps = modattn__calloc(32, sizeof(tk_nstep), MODATTN_MEM_WEIGHTS);
    t->psteps = modattn__calloc(16, sizeof(tk_pstep), MODATTN_MEM_WEIGHTS);
    if (!t->nsteps || !t->psteps) return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    int rc;
    json_t *n = json_object_get(L->root, "normalizer");
    if (n && !json_is_null(n) && (rc = load_nstep(L, n, "normalizer"))) return rc;
    json_t *p = json_object_get(L->root, "pre_tokenizer");
    if (p && !json_is_null(p) && (rc = load_pstep(L, p, "pre_tokenizer"))) return rc;
    json_t *bf = json_object_get(m, "byte_fallback");
    if (bf && !json_is_boolean(bf)) return uerr(L, MODATTN_EFORMAT, "model.byte_fallback", "expected true or false");
    t->byte_fallback = bf && json_is_true(bf);
    if ((rc = load_vocab(L, m))) return rc;
    json_t *ju = json_object_get(m, "unk_id");
    t->unk_id = -1;
    if (ju && !json_is_null(ju)) {
        if (!json_is_integer(ju) || json_integer_value(ju) < 0 ||
            (size_t)json_integer_value(ju) >= json_array_size(json_object_get(m, "vocab")))
            return uerr(L, MODATTN_ERANGE, "model.unk_id", "not an id of model.vocab");
        t->unk_id = (int32_t)json_integer_value(ju);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = modattn__tk_vocab_find(t, name, 6);
    }
    return 0;
}

void modattn__tk_unigram_free(modattn_tokenizer *t) {
    for (uint32_t i = 0; i < t->nnsteps; i++) {
        modattn_free(t->nsteps[i].pat);
        modattn_free(t->nsteps[i].rep);
    }
    modattn_free(t->nsteps);
    modattn_free(t->psteps);
    modattn_free(t->scores);
    modattn_free(t->cm_units);
    modattn_free(t->cm_pool);
}

/* ------------------------------------------------------------------ run time */

typedef struct tk_change {
    uint32_t cp;
    int32_t change;
} tk_change;

typedef struct tk_split {
    size_t a, b;  /* chars [a, b) of the current vector */
    size_t orig;  /* HF's offsets_original().0 of the split, in the text */
} tk_split;

struct tk_uscratch {
    tk_vec v[2];
    tk_change *ch;
    size_t nch, cch;
    tk_split *sp[2];
    size_t nsp[2], csp[2];
    uint8_t *buf;      /* a word as UTF-8 */
    uint32_t *bchar;   /* char index of each byte */
    double *score;     /* Viterbi lattice over byte positions */
    int32_t *from, *id;
    size_t cbuf;
    int32_t *out_id;   /* tokens of one word, in order */
    uint32_t *out_s, *out_e;
    tk_vec cut;        /* modattn__tk_unigram_cut's one-character normalisations */
};

void modattn__tk_uscratch_free(tk_uscratch *us) {
    if (!us) return;
    modattn__tk_vec_free(&us->v[0]);
    modattn__tk_vec_free(&us->v[1]);
    modattn__tk_vec_free(&us->cut);
    modattn_free(us->ch);
    modattn_free(us->sp[0]);
    modattn_free(us->sp[1]);
    modattn_free(us->buf);
    modattn_free(us->bchar);
    modattn_free(us->score);
    modattn_free(us->from);
    modattn_free(us->id);
    modattn_free(us->out_id);
    modattn_free(us->out_s);
    modattn_free(us->out_e);
    modattn_free(us);
}

static int us_get(tk_uscratch **us) {
    if (*us) return 0;
    *us = modattn__calloc(1, sizeof(tk_uscratch), MODATTN_MEM_OTHER);
    return *us ? 0 : modattn__mem_last_status();
}

static int ch_push(tk_uscratch *us, uint32_t cp, int32_t change) {
    if (us->nch == us->cch) {
        size_t cap = us->cch ? us->cch * 2 : 256;
        tk_change *c = modattn__realloc(us->ch, cap * sizeof(tk_change), MODATTN_MEM_OTHER);
        if (!c) return modattn__mem_last_status();
        us->ch = c;
        us->cch = cap;
    }
    us->ch[us->nch++] = (tk_change){cp, change};
    return 0;
}

/* HF's NormalizedString::transform over in[0, n) with the changes in us->ch, initial_offset
 * chars of the input dropped first. seg: the (0, 0) alignment an insertion at the start gets. */
static int apply_changes(tk_uscratch *us, const tk_char *in, size_t n, size_t initial, uint32_t seg, tk_vec *out) {
    out->n = 0;
    size_t i = initial;
    for (size_t k = 0; k < us->nch; k++) {
        tk_change c = us->ch[k];
        uint32_t s, e;
        if (c.change > 0) {
            if (i == 0) {
                s = e = seg;
            } else {
                s = CH_S(in[i - 1]);
                e = CH_E(in[i - 1]);
            }
        } else {
            if (i < n) {
                s = CH_S(in[i]);
                e = CH_E(in[i]);
            } else { /* HF would index past its alignments here; never reached by its normalizers */
                s = e = n ? CH_E(in[n - 1]) : seg;
            }
            i += 1 + (size_t)(c.change < 0 ? -(int64_t)c.change : 0);
        }
        int rc = modattn__tk_vec_push(out, c.cp, s, e);
        if (rc) return rc;
    }
    return 0;
}

/* spm_precompiled + HF's Precompiled::normalize change lists (the `replace` helper of 0.23) */
static int pc_replace(tk_uscratch *us, size_t old_count, const char *norm) {
    size_t base = us->nch, nn = 0;
    for (const char *p = norm; *p;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)p, -1, &cp);
        if (m <= 0) break; /* the pool was checked at load */
        int rc = ch_push(us, (uint32_t)cp, 0);
        if (rc) return rc;
        p += m;
        nn++;
    }
    (void)base;
    int64_t diff = (int64_t)nn - (int64_t)old_count;
    if (diff > 0) {
        for (size_t k = 0; k < (size_t)diff && k < us->nch; k++) us->ch[us->nch - 1 - k].change = 1;
    } else if (diff < 0 && us->nch) {
        us->ch[us->nch - 1].change += (int32_t)diff;
    }
    return 0;
}

static int norm_precompiled(const modattn_tokenizer *t, tk_uscratch *us, const tk_char *in, size_t n) {
    us->nch = 0;
    utf8proc_int32_t state = 0;
    size_t g = 0;
    while (g < n) {
        /* the extended grapheme cluster [g, h) */
        size_t h = g + 1;
        state = 0;
        while (h < n && !utf8proc_grapheme_break_stateful((utf8proc_int32_t)in[h - 1].cp, (utf8proc_int32_t)in[h].cp, &state))
            h++;
        uint8_t bytes[32];
        size_t nb = 0;
        bool small = true;
        for (size_t k = g; k < h; k++) {
            if (nb + 4 > sizeof bytes) {
                small = false;
                break;
            }
            nb += (size_t)utf8proc_encode_char((utf8proc_int32_t)in[k].cp, bytes + nb);
        }
        const char *norm = small && nb < 6 ? cm_lookup(t, bytes, nb) : NULL;
        int rc;
        if (norm) {
            if ((rc = pc_replace(us, h - g, norm))) return rc;
        } else {
            for (size_t k = g; k < h; k++) {
                uint8_t one[4];
                size_t m = (size_t)utf8proc_encode_char((utf8proc_int32_t)in[k].cp, one);
                const char *r = cm_lookup(t, one, m);
                if ((rc = r ? pc_replace(us, 1, r) : ch_push(us, in[k].cp, 0))) return rc;
            }
        }
        g = h;
    }
    return 0;
}

static bool is_ws(const modattn_tokenizer *t, uint32_t cp) { return tk_is_ws(t, cp); }

/* Replace: leftmost non-overlapping matches, each replaced by the content aligned with the
 * match's last character (HF's replace = transform_range(match, content as insertions, all of
 * the match as initial_offset)). */
static int norm_replace(const tk_nstep *st, tk_uscratch *us, const tk_char *in, size_t n, tk_vec *out) {
    out->n = 0;
    size_t i = 0;
    int rc;
    while (i < n) {
        size_t mlen = 0;
        if (st->min_run) {
            size_t j = i;
            while (j < n && in[j].cp == st->pat[0]) j++;
            if (j - i >= st->min_run) mlen = j - i;
        } else if (i + st->npat <= n) {
            size_t k = 0;
            while (k < st->npat && in[i + k].cp == st->pat[k]) k++;
            if (k == st->npat) mlen = k;
        }
        if (!mlen) {
            if ((rc = modattn__tk_vec_push(out, in[i].cp, CH_S(in[i]), CH_E(in[i])))) return rc;
            i++;
            continue;
        }
        const tk_char *last = &in[i + mlen - 1];
        for (uint32_t k = 0; k < st->nrep; k++)
            if ((rc = modattn__tk_vec_push(out, st->rep[k], CH_S(*last), CH_E(*last)))) return rc;
        i += mlen;
    }
    (void)us;
    return 0;
}

/* ---- NFD / NFKD / NFC / NFKC as HF's unicode-normalization-alignments crate yields them:
 * decomposition gives each character's first code point change 0 and the others +1, canonical
 * ordering moves the pairs, composition gives a composed pair k.change + change - 1; the
 * tables of model/tokenizer_unicode_nf.h bring utf8proc's data back to the crate's. */

static const modattn__nf_over *nf_over(const modattn__nf_over *tab, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tab[mid].cp == cp) return &tab[mid];
        if (tab[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static int nf_decompose(uint32_t cp, bool compat, uint32_t *out) {
    const modattn__nf_over *o = compat ? nf_over(modattn__tok_nfkd_over, MODATTN__TOK_NFKD_OVER_COUNT, cp)
                                       : nf_over(modattn__tok_nfd_over, MODATTN__TOK_NFD_OVER_COUNT, cp);
    if (o) {
        for (int i = 0; i < o->n; i++) out[i] = o->d[i];
        return o->n;
    }
    utf8proc_int32_t d[32];
    int last = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, d, 32,
                                                 UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0), &last);
    if (n < 1 || n > 32) {
        out[0] = cp;
        return 1;
    }
    for (utf8proc_ssize_t i = 0; i < n; i++) out[i] = (uint32_t)d[i];
    return (int)n;
}

static uint8_t nf_ccc(uint32_t cp) { return (uint8_t)utf8proc_get_property((utf8proc_int32_t)cp)->combining_class; }

static bool nf_compose(uint32_t a, uint32_t b, uint32_t *r) {
    for (size_t i = 0; i < MODATTN__TOK_NFC_EXCL_COUNT; i++)
        if (modattn__tok_nfc_excl[i][0] == a && modattn__tok_nfc_excl[i][1] == b) return false;
    utf8proc_int32_t buf[2] = {(utf8proc_int32_t)a, (utf8proc_int32_t)b};
    if (utf8proc_normalize_utf32(buf, 2, UTF8PROC_COMPOSE) != 1) return false;
    *r = (uint32_t)buf[0];
    return true;
}

static int nf_changes(tk_uscratch *us, const tk_char *in, size_t n, bool compat, bool compose) {
    us->nch = 0;
    int rc;
    for (size_t i = 0; i < n; i++) {
        uint32_t d[32];
        int nd = nf_decompose(in[i].cp, compat, d);
        for (int k = 0; k < nd; k++)
            if ((rc = ch_push(us, d[k], k ? 1 : 0))) return rc;
    }
    /* canonical ordering: a stable sort of each run of non-starters by class */
    for (size_t i = 0; i < us->nch;) {
        if (nf_ccc(us->ch[i].cp) == 0) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < us->nch && nf_ccc(us->ch[j].cp) != 0) j++;
        for (size_t a = i + 1; a < j; a++) {
            tk_change key = us->ch[a];
            uint8_t kc = nf_ccc(key.cp);
            size_t b = a;
            while (b > i && nf_ccc(us->ch[b - 1].cp) > kc) {
                us->ch[b] = us->ch[b - 1];
                b--;
            }
            us->ch[b] = key;
        }
        i = j;
    }
    if (!compose) return 0;
    /* the crate's Recompositions: input copied aside, output written over us->ch (never longer) */
    size_t nin = us->nch;
    tk_change *in2 = modattn__malloc((2 * nin + 1) * sizeof(tk_change), MODATTN_MEM_OTHER);
    if (!in2) return modattn__mem_last_status();
    memcpy(in2, us->ch, nin * sizeof(tk_change));
    tk_change *pend = in2 + nin; /* marks held back behind the composee */
    tk_change *c = us->ch;
    size_t w = 0, np = 0;
    bool have = false;
    tk_change k = {0, 0};
    int last_ccc = -1;
    for (size_t i = 0; i < nin; i++) {
        tk_change x = in2[i];
        int xc = nf_ccc(x.cp);
        uint32_t r;
        if (!have) {
            if (xc != 0) c[w++] = x;
            else k = x, have = true;
            continue;
        }
        if (last_ccc < 0) {
            if (nf_compose(k.cp, x.cp, &r)) {
                k = (tk_change){r, k.change + x.change - 1};
            } else if (xc == 0) {
                c[w++] = k;
                k = x;
            } else {
                pend[np++] = x;
                last_ccc = xc;
            }
            continue;
        }
        if (last_ccc >= xc) { /* x is blocked from the composee */
            if (xc == 0) {
                c[w++] = k;
                for (size_t q = 0; q < np; q++) c[w++] = pend[q];
                np = 0;
                k = x;
                last_ccc = -1;
            } else {
                pend[np++] = x;
                last_ccc = xc;
            }
            continue;
        }
        if (nf_compose(k.cp, x.cp, &r)) {
            k = (tk_change){r, k.change + x.change - 1};
        } else {
            pend[np++] = x;
            last_ccc = xc;
        }
    }
    if (have) c[w++] = k;
    for (size_t q = 0; q < np; q++) c[w++] = pend[q];
    us->nch = w;
    modattn_free(in2);
    return 0;
}

int modattn__tk_lower_cp(uint32_t cp, uint32_t out[2]);

int modattn__tk_unorm(const modattn_tokenizer *t, tk_uscratch **usp, const tk_char *in, size_t a, size_t b,
                      uint32_t seg, tk_vec *out) {
    int rc = us_get(usp);
    if (rc) return rc;
    tk_uscratch *us = *usp;
    /* ping-pong between the scratch vectors; the last step writes `out` */
    tk_vec *cur = &us->v[0];
    cur->n = 0;
    for (size_t i = a; i < b; i++)
        if ((rc = modattn__tk_vec_push(cur, in[i].cp, CH_S(in[i]), CH_E(in[i])))) return rc;
    for (uint32_t k = 0; k < t->nnsteps; k++) {
        const tk_nstep *st = &t->nsteps[k];
        tk_vec *dst = cur == &us->v[0] ? &us->v[1] : &us->v[0];
        dst->n = 0;
        switch (st->kind) {
        case NK_PRECOMPILED:
            if ((rc = norm_precompiled(t, us, cur->v, cur->n))) return rc;
            if ((rc = apply_changes(us, cur->v, cur->n, 0, seg, dst))) return rc;
            break;
        case NK_REPLACE:
            if ((rc = norm_replace(st, us, cur->v, cur->n, dst))) return rc;
            break;
        case NK_STRIP: {
            size_t lo = 0, hi = cur->n;
            if (st->left)
                while (lo < hi && is_ws(t, cur->v[lo].cp)) lo++;
            if (st->right)
                while (hi > lo && is_ws(t, cur->v[hi - 1].cp)) hi--;
            for (size_t i = lo; i < hi; i++)
                if ((rc = modattn__tk_vec_push(dst, cur->v[i].cp, CH_S(cur->v[i]), CH_E(cur->v[i])))) return rc;
            break;
        }
        case NK_NFD:
        case NK_NFKD:
        case NK_NFC:
        case NK_NFKC: {
            bool compat = st->kind == NK_NFKD || st->kind == NK_NFKC;
            bool compose = st->kind == NK_NFC || st->kind == NK_NFKC;
            if ((rc = nf_changes(us, cur->v, cur->n, compat, compose))) return rc;
            if ((rc = apply_changes(us, cur->v, cur->n, 0, seg, dst))) return rc;
            break;
        }
        case NK_LOWERCASE:
            for (size_t i = 0; i < cur->n; i++) {
                uint32_t l[2];
                int m = modattn__tk_lower_cp(cur->v[i].cp, l);
                for (int j = 0; j < m; j++)
                    if ((rc = modattn__tk_vec_push(dst, l[j], CH_S(cur->v[i]), CH_E(cur->v[i])))) return rc;
            }
            break;
        }
        cur = dst;
    }
    out->n = 0;
    for (size_t i = 0; i < cur->n; i++)
        if ((rc = modattn__tk_vec_push(out, cur->v[i].cp, CH_S(cur->v[i]), CH_E(cur->v[i])))) return rc;
    return 0;
}

/* ---- pre-tokenizers: a list of splits over a vector of characters */

static int sp_push(tk_uscratch *us, int w, size_t a, size_t b, size_t orig) {
    if (us->nsp[w] == us->csp[w]) {
        size_t cap = us->csp[w] ? us->csp[w] * 2 : 64;
        tk_split *s = modattn__realloc(us->sp[w], cap * sizeof(tk_split), MODATTN_MEM_OTHER);
        if (!s) return modattn__mem_last_status();
        us->sp[w] = s;
        us->csp[w] = cap;
    }
    us->sp[w][us->nsp[w]++] = (tk_split){a, b, orig};
    return 0;
}

/* HF's offsets_original().0 of a sub-split: where its first alignment starts */
static size_t split_orig(const tk_char *c, size_t a, size_t b, size_t base, size_t dflt) {
    if (a >= b) return dflt;
    size_t m = CH_S(c[a]);
    for (size_t i = a + 1; i < b; i++)
        if (CH_S(c[i]) < m) m = CH_S(c[i]);
    return base + m;
}

/* One pre-tokenizer over the splits of vector `r` (index ri) into vector 1 - ri. */
static int pretok_step(const modattn_tokenizer *t, const tk_pstep *st, tk_uscratch *us, int ri, size_t base) {
    tk_vec *src = &us->v[ri], *dst = &us->v[1 - ri];
    int wo = 1 - ri;
    dst->n = 0;
    us->nsp[wo] = 0;
    int rc;
    for (size_t k = 0; k < us->nsp[ri]; k++) {
        tk_split s = us->sp[ri][k];
        const tk_char *c = src->v;
        if (st->kind == PK_WHITESPACE_SPLIT) {
            size_t i = s.a;
            while (i < s.b) {
                if (is_ws(t, c[i].cp)) {
                    i++;
                    continue;
                }
                size_t j = i;
                while (j < s.b && !is_ws(t, c[j].cp)) j++;
                size_t a0 = dst->n;
                for (size_t q = i; q < j; q++)
                    if ((rc = modattn__tk_vec_push(dst, c[q].cp, CH_S(c[q]), CH_E(c[q])))) return rc;
                if ((rc = sp_push(us, wo, a0, dst->n, split_orig(c, i, j, base, s.orig)))) return rc;
                i = j;
            }
            continue;
        }
        /* Metaspace: ' ' -> replacement (same alignment); prepend one aligned with the first
         * character; then split before every replacement (MergedWithNext) */
        size_t a0 = dst->n;
        if (s.a < s.b) {
            bool starts = c[s.a].cp == st->repl || c[s.a].cp == ' ';
            bool pre = st->prepend == MS_ALWAYS ? !starts : st->prepend == MS_FIRST ? (!starts && s.orig == 0) : false;
            if (pre && (rc = modattn__tk_vec_push(dst, st->repl, CH_S(c[s.a]), CH_E(c[s.a])))) return rc;
        }
        for (size_t q = s.a; q < s.b; q++)
            if ((rc = modattn__tk_vec_push(dst, c[q].cp == ' ' ? st->repl : c[q].cp, CH_S(c[q]), CH_E(c[q])))) return rc;
        size_t a1 = dst->n;
        if (!st->split) {
            if (a1 > a0 && (rc = sp_push(us, wo, a0, a1, s.orig))) return rc;
            continue;
        }
        size_t p = a0;
        while (p < a1) {
            size_t q = p + 1;
            while (q < a1 && dst->v[q].cp != st->repl) q++;
            if ((rc = sp_push(us, wo, p, q, p == a0 ? s.orig : split_orig(dst->v, p, q, base, s.orig)))) return rc;
            p = q;
        }
    }
    return 0;
}

/* ---- the Unigram model on one split */

static int grow_word(tk_uscratch *us, size_t nbytes) {
    if (nbytes + 1 <= us->cbuf) return 0;
    size_t cap = nbytes + 1 < 1024 ? 1024 : (nbytes + 1) * 2;
    void *p;
#define GROW(f, sz)                                                      \
    if (!(p = modattn__realloc(us->f, cap * (sz), MODATTN_MEM_OTHER))) \
        return modattn__mem_last_status();                                \
    us->f = p;
    GROW(buf, 1)
    GROW(bchar, sizeof(uint32_t))
    GROW(score, sizeof(double))
    GROW(from, sizeof(int32_t))
    GROW(id, sizeof(int32_t))
    GROW(out_id, sizeof(int32_t))
    GROW(out_s, sizeof(uint32_t))
    GROW(out_e, sizeof(uint32_t))
#undef GROW
    us->cbuf = cap;
    return 0;
}

static int unigram_word(const modattn_tokenizer *t, tk_uscratch *us, const tk_char *w, size_t n,
                        tk_emit_fn emit, void *ctx, const bool *stop) {
    if (n == 0) return 0;
    size_t need = 0;
    for (size_t i = 0; i < n; i++) need += w[i].cp < 0x80 ? 1 : w[i].cp < 0x800 ? 2 : w[i].cp < 0x10000 ? 3 : 4;
    int rc = grow_word(us, need);
    if (rc) return rc;
    uint8_t *buf = us->buf;
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        size_t m = (size_t)utf8proc_encode_char((utf8proc_int32_t)w[i].cp, buf + nb);
        for (size_t k = 0; k < m; k++) us->bchar[nb + k] = (uint32_t)i;
        nb += m;
    }
    us->bchar[nb] = (uint32_t)n;
    double *score = us->score;
    int32_t *from = us->from, *bid = us->id;
    for (size_t i = 0; i <= nb; i++) from[i] = -1;
    score[0] = 0;
    const double unk_score = t->min_score - UNK_PENALTY;
    size_t pos = 0;
    while (pos < nb) {
        size_t ci = us->bchar[pos], next = pos + 1;
        while (next < nb && us->bchar[next] == ci) next++;
        size_t mblen = next - pos;
        double here = score[pos];
        bool single = false;
        uint32_t node = 0;
        for (size_t i = pos; i < nb; i++) {
            node = trie_child(t, node, buf[i]);
            if (!node) break;
            int32_t id = t->trie[node].id;
            if (id < 0) continue;
            size_t end = i + 1;
            double cand = t->scores[id] + here;
            if (from[end] < 0 || cand > score[end]) {
                score[end] = cand;
                from[end] = (int32_t)pos;
                bid[end] = id;
            }
            if (end - pos == mblen) single = true;
        }
        if (!single) {
            if (t->unk_id < 0)
                return modattn__error(MODATTN_EFORMAT,
                                     "tokenizer: a character is in no piece and the model has no unk_id");
            double cand = unk_score + here;
            if (from[next] < 0 || cand > score[next]) {
                score[next] = cand;
                from[next] = (int32_t)pos;
                bid[next] = t->unk_id;
            }
        }
        pos = next;
    }
    /* back from the end; unknown pieces next to each other fuse into one */
    size_t nt = 0, end = nb;
    while (end > 0) {
        size_t start = (size_t)from[end];
        int32_t id = bid[end];
        if (id == t->unk_id && nt > 0 && us->out_id[nt - 1] == -2) {
            us->out_s[nt - 1] = (uint32_t)start; /* extend the fused run leftwards */
        } else {
            us->out_id[nt] = id == t->unk_id ? -2 : id;
            us->out_s[nt] = (uint32_t)start;
            us->out_e[nt] = (uint32_t)end;
            nt++;
        }
        end = start;
    }
    for (size_t k = nt; k-- > 0 && !*stop;) {
        uint32_t bs = us->out_s[k], be = us->out_e[k];
        /* offsets: the smallest start and largest end over the token's characters */
        size_t c0 = us->bchar[bs], c1 = us->bchar[be - 1] + 1;
        uint32_t os = CH_S(w[c0]), oe = CH_E(w[c0]);
        for (size_t c = c0 + 1; c < c1; c++) {
            if (CH_S(w[c]) < os) os = CH_S(w[c]);
            if (CH_E(w[c]) > oe) oe = CH_E(w[c]);
        }
        int32_t id = us->out_id[k];
        if (id == -2) { /* a fused unknown: its string may still be a piece */
            id = modattn__tk_vocab_find(t, (const char *)buf + bs, be - bs);
            if (id < 0 && t->byte_fallback) {
                bool all = true;
                for (uint32_t q = bs; q < be; q++) all &= t->byte_ids[buf[q]] >= 0;
                if (all) {
                    for (uint32_t q = bs; q < be && !*stop; q++) emit(ctx, t->byte_ids[buf[q]], os, oe);
                    continue;
                }
            }
            if (id < 0) id = t->unk_id;
        }
        emit(ctx, id, os, oe);
    }
    return 0;
}

int modattn__tk_unigram_run(const modattn_tokenizer *t, tk_uscratch **usp, const tk_char *c, size_t a, size_t b,
                            size_t orig, size_t base, tk_emit_fn emit, void *ctx, const bool *stop) {
    if (a >= b) return 0;
    int rc = us_get(usp);
    if (rc) return rc;
    tk_uscratch *us = *usp;
    /* the input may be one of our own vectors (normalised text): copy into v[0] first */
    tk_vec *v0 = &us->v[0];
    if (c != v0->v) {
        v0->n = 0;
        for (size_t i = a; i < b; i++)
            if ((rc = modattn__tk_vec_push(v0, c[i].cp, CH_S(c[i]), CH_E(c[i])))) return rc;
    } else {
        memmove(v0->v, v0->v + a, (b - a) * sizeof(tk_char));
        v0->n = b - a;
    }
    us->nsp[0] = 0;
    if ((rc = sp_push(us, 0, 0, v0->n, orig))) return rc;
    int cur = 0;
    for (uint32_t k = 0; k < t->npsteps; k++) {
        if ((rc = pretok_step(t, &t->psteps[k], us, cur, base))) return rc;
        cur = 1 - cur;
    }
    for (size_t k = 0; k < us->nsp[cur] && !*stop; k++) {
        tk_split s = us->sp[cur][k];
        if ((rc = unigram_word(t, us, us->v[cur].v + s.a, s.b - s.a, emit, ctx, stop))) return rc;
    }
    return 0;
}

/* ---- where a long text may be cut into blocks (the Unigram path)
 *
 * tokenizer.c decodes, normalises and pre-tokenises a text block by block so that its scratch
 * stays bounded; this says where a block may end. A cut just before an ASCII space that follows
 * a letter or digit A gives the same ids and offsets as no cut when:
 *   - the normalizers act on characters or grapheme clusters only (Precompiled, Lowercase, the NF
 *     forms) or are Replaces that cannot match across the cut (a literal with a space after its
 *     first character could; a run of one character cannot, since A's normalisation holds no
 *     whitespace), Strip on the right only (a block ends with A, which it leaves; on the left it
 *     would strip the next block's space), and a space normalises to itself;
 *   - grapheme clusters break on both sides of A and after the space (so Precompiled sees the
 *     same clusters), and A's normalisation is not empty and holds no whitespace;
 *   - the first pre-tokenizer splits at spaces (WhitespaceSplit, or Metaspace with split): every
 *     piece then ends at A or begins at the space in both cases, and the space after the cut
 *     keeps Metaspace from prepending a replacement to the next block (its "first" scheme looks
 *     at the segment's place in the text, which is unchanged);
 *   - no added token holds whitespace (none can span the cut) and none strips on its right.
 * Otherwise (or with no such place after the target end) the block runs to the end of the text.
 * The Viterbi lattice is per pre-tokenised piece, so scratch is O(block + longest piece). */
static bool unigram_blockable(const modattn_tokenizer *t, tk_uscratch **usp) {
    if (t->npsteps == 0) return false;
    const tk_pstep *p0 = &t->psteps[0];
    if (!(p0->kind == PK_WHITESPACE_SPLIT || (p0->kind == PK_METASPACE && p0->split))) return false;
    for (uint32_t k = 0; k < t->nnsteps; k++) {
        const tk_nstep *st = &t->nsteps[k];
        if (st->kind == NK_STRIP && st->left) return false; /* it would strip the next block's space */
        if (st->kind == NK_REPLACE && !st->min_run)
            for (uint32_t i = 1; i < st->npat; i++)
                if (is_ws(t, st->pat[i])) return false;
    }
    for (uint32_t i = 0; i < t->nadded; i++) {
        const tk_added *a = &t->added[i];
        if (a->rstrip) return false;
        for (uint32_t k = 0; k < a->ncps; k++)
            if (is_ws(t, a->cps[k])) return false;
    }
    /* " a": the space stays one space (a right Strip would drop it alone) */
    tk_char sp[2] = {{' ', 0, 1, 0}, {'a', 1, 1, 0}};
    const tk_vec *o = &(*usp)->cut; /* *usp exists: the caller made it */
    if (modattn__tk_unorm(t, usp, sp, 0, 2, 0, &(*usp)->cut)) return false;
    return o->n >= 2 && o->v[0].cp == ' ' && CH_S(o->v[0]) == 0 && CH_E(o->v[0]) == 1 && CH_S(o->v[1]) == 1;
}

/* the character that ends at byte e (> lo) of x, or U+FFFD where those bytes are not one
 * well-formed character (decode_utf8 reads them as U+FFFD too) */
static uint32_t char_before(const uint8_t *x, size_t lo, size_t e, size_t *start) {
    size_t b = e - 1;
    while (b > lo && e - b < 4 && (x[b] & 0xC0) == 0x80) b--;
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t m = utf8proc_iterate(x + b, (utf8proc_ssize_t)(e - b), &cp);
    *start = b;
    return m == (utf8proc_ssize_t)(e - b) && cp >= 0 ? (uint32_t)cp : 0xFFFD;
}

static bool letter_or_digit(uint32_t cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

static bool gbreak(uint32_t a, uint32_t b) {
    utf8proc_int32_t state = 0;
    return utf8proc_grapheme_break_stateful((utf8proc_int32_t)a, (utf8proc_int32_t)b, &state);
}

int modattn__tk_unigram_cut(const modattn_tokenizer *t, tk_uscratch **usp, const uint8_t *x, size_t pos, size_t len,
                            size_t *end) {
    *end = len;
    int rc = us_get(usp);
    if (rc) return rc;
    if (!unigram_blockable(t, usp)) return 0;
    tk_uscratch *us = *usp;
    size_t q = pos + TK_BLOCK_BYTES;
    while (q + 1 < len) {
        const uint8_t *hit = memchr(x + q, ' ', len - 1 - q);
        if (!hit) break;
        q = (size_t)(hit - x);
        size_t a0, p0;
        uint32_t a = char_before(x, pos, q, &a0);
        if (a0 > pos + 1 && letter_or_digit(a)) {
            uint32_t p = char_before(x, pos, a0, &p0);
            utf8proc_int32_t c = -1;
            utf8proc_ssize_t m = utf8proc_iterate(x + q + 1, (utf8proc_ssize_t)(len - q - 1), &c);
            uint32_t cc = m > 0 && c >= 0 ? (uint32_t)c : 0xFFFD;
            if (gbreak(p, a) && gbreak(a, ' ') && gbreak(' ', cc)) {
                tk_char one = {a, 0, (uint8_t)(q - a0), 0};
                if ((rc = modattn__tk_unorm(t, usp, &one, 0, 1, 0, &us->cut))) return rc;
                bool ok = us->cut.n > 0;
                for (size_t i = 0; i < us->cut.n && ok; i++) ok = !is_ws(t, us->cut.v[i].cp);
                if (ok) {
                    *end = q;
                    return 0;
                }
            }
        }
        q++;
    }
    return 0;
}
