/* model/tokenizer_bpe.c — byte-level BPE tokenizers from tokenizer.json (GPT-2, RoBERTa,
 * GPT-NeoX, ModernBERT, Qwen2/Qwen3, Llama 3), exact to Hugging Face `tokenizers` 0.23:
 *   model: BPE (vocab, merges as "a b" strings or [a, b] pairs, ignore_merges, byte_fallback,
 *     unk_token, fuse_unk, continuing_subword_prefix, end_of_word_suffix; dropout refused);
 *   pre-tokenizers: ByteLevel (add_prefix_space, use_regex: GPT-2's pattern), Split with one of
 *     the known patterns (GPT-2's, Qwen2's, Llama 3's; behavior Isolated), and Sequence of them;
 *   normalizer: the sequence tokenizer_unigram.c implements (NFC for Qwen2 and NeoX).
 * There is no regex engine: the patterns are recognised by their exact text and written out as
 * code below (match_gpt2, match_qwen); any other pattern is refused naming it. The character
 * classes \p{L}, \p{N} and \s are Oniguruma's, measured from the package
 * (model/tokenizer_unicode_bpe.h, tools/gen_bpe_tables.py).
 *
 * BPE merges a word as HF's Word::merge_all does: a min-heap of (rank, position) over the pairs
 * of adjacent symbols, stale entries skipped when the pair now there has another result. Time
 * is O(n log n) in the word's length and memory O(n); words are not capped (HF does not cap
 * them, and a cap would change ids), the text's length bounds them.
 *
 * Offsets: every byte-level character carries the byte range of the original character it
 * came from (HF aligns all bytes of a character with the whole character), a token covers the
 * smallest start and largest end of its characters; ByteLevel's trim_offsets is applied in
 * tokenizer.c after the run. */
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
#include "model/tokenizer_unicode_bpe.h"

/* ------------------------------------------------------------------ the known split patterns */

enum { PAT_GPT2, PAT_QWEN2, PAT_LLAMA3 };

static const struct {
    const char *re;
    int id;
} PATTERNS[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", PAT_GPT2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     PAT_QWEN2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     PAT_LLAMA3},
};

typedef enum { BK_SPLIT, BK_BYTELEVEL } tk_bkind;
typedef struct tk_bstep {
    tk_bkind kind;
    int pattern;       /* PAT_* (Split; ByteLevel with use_regex: PAT_GPT2) */
    bool use_regex;    /* ByteLevel */
    bool prefix_space; /* ByteLevel add_prefix_space */
} tk_bstep;

static inline bool is_l(uint32_t cp) {
    if (cp < 128) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    return IN_TABLE(modattn__bpe_letter, cp);
}
static inline bool is_n(uint32_t cp) {
    if (cp < 128) return cp >= '0' && cp <= '9';
    return IN_TABLE(modattn__bpe_number, cp);
}
static inline bool is_s(uint32_t cp) {
    if (cp < 128) return cp == ' ' || (cp >= 9 && cp <= 13);
    return IN_TABLE(modattn__bpe_space, cp);
}
bool modattn__tk_bpe_is_space(uint32_t cp) { return is_s(cp); }
/* [^\s\p{L}\p{N}] */
static inline bool is_o(uint32_t cp) { return !is_s(cp) && !is_l(cp) && !is_n(cp); }

/* 's 't 're 've 'm 'll 'd at c[i] (c[i] == '\''): the match's end, or 0. `fold`: (?i:...), ASCII
 * case and U+017F (long s, which folds to s: the only non-ASCII one, measured) */
static size_t contraction(const tk_char *c, size_t i, size_t n, bool fold) {
    if (i + 1 >= n) return 0;
    uint32_t a = c[i + 1].cp;
    if (fold) {
        if (a < 128 && a >= 'A' && a <= 'Z') a += 32;
        if (a == 0x17F) a = 's';
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n) return 0;
    uint32_t b = c[i + 2].cp;
    if (fold && b < 128 && b >= 'A' && b <= 'Z') b += 32;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

/* \s+(?!\S)|\s+ at a whitespace character c[i] */
static size_t ws_run(const tk_char *c, size_t i, size_t n) {
    size_t k = i;
    while (k < n && is_s(c[k].cp)) k++;
    if (k == n || k - 1 == i) return k;
    return k - 1;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const tk_char *c, size_t i, size_t n) {
    uint32_t x = c[i].cp;
    size_t e;
    if (x == '\'' && (e = contraction(c, i, n, false))) return e;
    size_t j = x == ' ' && i + 1 < n ? i + 1 : i;
    uint32_t y = c[j].cp;
    if (is_l(y)) {
        while (j < n && is_l(c[j].cp)) j++;
        return j;
    }
    if (is_n(y)) {
        while (j < n && is_n(c[j].cp)) j++;
        return j;
    }
    if (is_o(y)) {
        while (j < n && is_o(c[j].cp)) j++;
        return j;
    }
    /* here x is whitespace (a lone space before whitespace, or other whitespace) */
    return ws_run(c, i, n);
}

/* Qwen2 (max_digits 1) and Llama 3 (3):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_qwen(const tk_char *c, size_t i, size_t n, size_t max_digits) {
    uint32_t x = c[i].cp;
    size_t e;
    if (x == '\'' && (e = contraction(c, i, n, true))) return e;
    bool xl = is_l(x), xn = is_n(x);
    if (xl || (!xn && x != '\r' && x != '\n' && i + 1 < n && is_l(c[i + 1].cp))) {
        size_t j = xl ? i : i + 1;
        while (j < n && is_l(c[j].cp)) j++;
        return j;
    }
    if (xn) {
        size_t j = i + 1;
        while (j < n && j - i < max_digits && is_n(c[j].cp)) j++;
        return j;
    }
    size_t j = x == ' ' && i + 1 < n ? i + 1 : i;
    if (is_o(c[j].cp)) {
        while (j < n && is_o(c[j].cp)) j++;
        while (j < n && (c[j].cp == '\r' || c[j].cp == '\n')) j++;
        return j;
    }
    /* x is whitespace: \s*[\r\n]+ ends after the run's last \r or \n */
    size_t k = i, last_nl = 0;
    bool nl = false;
    while (k < n && is_s(c[k].cp)) {
        if (c[k].cp == '\r' || c[k].cp == '\n') {
            nl = true;
            last_nl = k;
        }
        k++;
    }
    if (nl) return last_nl + 1;
    return ws_run(c, i, n);
}

static size_t match_at(int pattern, const tk_char *c, size_t i, size_t n) {
    size_t e = pattern == PAT_GPT2 ? match_gpt2(c, i, n) : match_qwen(c, i, n, pattern == PAT_LLAMA3 ? 3 : 1);
    return e > i ? e : i + 1; /* every character matches one alternative; never stall */
}

/* ------------------------------------------------------------------ byte-level alphabet */

static uint32_t byte_char(uint8_t b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    /* the others, in byte order, from U+0100 on */
    uint32_t k = 0;
    for (uint32_t x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) k++;
    return 256 + k;
}

/* ------------------------------------------------------------------ loading */

static int berr(const tk_load *L, int status, const char *field, const char *what) {
    return modattn__error(status, "tokenizer %s: field \"%s\": %s", L->path, field, what);
}

static int get_flag(const tk_load *L, json_t *o, const char *key, const char *field, bool dflt, bool *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) return berr(L, MODATTN_EFORMAT, field, "expected true or false");
    *out = json_is_true(v);
    return 0;
}

static int load_bstep(tk_load *L, json_t *p, const char *field, int depth) {
    modattn_tokenizer *t = L->t;
    if (!json_is_object(p)) return berr(L, MODATTN_EFORMAT, field, "expected an object");
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return berr(L, MODATTN_EFORMAT, field, "missing type");
    int rc;
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(p, "pretokenizers");
        if (!json_is_array(arr)) return berr(L, MODATTN_EFORMAT, "pre_tokenizer.pretokenizers", "expected an array");
        if (depth > 4) return berr(L, MODATTN_EUNSUPPORTED, field, "Sequence nested more than 4 deep");
        for (size_t i = 0; i < json_array_size(arr); i++)
            if ((rc = load_bstep(L, json_array_get(arr, i), "pre_tokenizer.pretokenizers[]", depth + 1))) return rc;
        return 0;
    }
    if (t->nbsteps >= 16) return berr(L, MODATTN_EUNSUPPORTED, field, "more than 16 pre-tokenizers");
    tk_bstep *st = &t->bsteps[t->nbsteps];
    memset(st, 0, sizeof *st);
    if (!strcmp(type, "ByteLevel")) {
        st->kind = BK_BYTELEVEL;
        st->pattern = PAT_GPT2;
        if ((rc = get_flag(L, p, "add_prefix_space", "pre_tokenizer.add_prefix_space", true, &st->prefix_space)) ||
            (rc = get_flag(L, p, "use_regex", "pre_tokenizer.use_regex", true, &st->use_regex)))
            return rc;
        json_t *tr = json_object_get(p, "trim_offsets"); /* read by the post-processor only */
        if (tr && !json_is_boolean(tr)) return berr(L, MODATTN_EFORMAT, "pre_tokenizer.trim_offsets", "expected true or false");
    } else if (!strcmp(type, "Split")) {
        st->kind = BK_SPLIT;
        json_t *pat = json_object_get(p, "pattern");
        const char *re = json_string_value(json_object_get(pat, "Regex"));
        const char *lit = json_string_value(json_object_get(pat, "String"));
        if (!re && !lit)
            return berr(L, MODATTN_EFORMAT, "pre_tokenizer.pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
        if (!re)
            return modattn__error(MODATTN_EUNSUPPORTED,
                                  "tokenizer %s: field \"pre_tokenizer.pattern.String\": \"%.80s\" is not supported "
                                  "(only the Regex patterns of GPT-2, Qwen2 and Llama 3)",
                                  L->path, lit);
        st->pattern = -1;
        for (size_t k = 0; k < sizeof PATTERNS / sizeof PATTERNS[0]; k++)
            if (!strcmp(re, PATTERNS[k].re)) st->pattern = PATTERNS[k].id;
        if (st->pattern < 0)
            return modattn__error(MODATTN_EUNSUPPORTED,
                                  "tokenizer %s: field \"pre_tokenizer.pattern.Regex\": \"%.200s\" is not supported "
                                  "(no regex engine here: only the patterns of GPT-2, Qwen2 and Llama 3, exactly)",
                                  L->path, re);
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (!beh || strcmp(beh, "Isolated") != 0)
            return modattn__error(MODATTN_EUNSUPPORTED,
                                  "tokenizer %s: field \"pre_tokenizer.behavior\": \"%s\" is not supported (only Isolated)",
                                  L->path, beh ? beh : "(missing)");
        bool inv = false;
        if ((rc = get_flag(L, p, "invert", "pre_tokenizer.invert", false, &inv))) return rc;
        if (inv) return berr(L, MODATTN_EUNSUPPORTED, "pre_tokenizer.invert", "true is not supported");
    } else {
        return modattn__error(MODATTN_EUNSUPPORTED,
                              "tokenizer %s: field \"pre_tokenizer.type\": \"%s\" is not supported (with a BPE model: "
                              "ByteLevel, Split, Sequence)",
                              L->path, type);
    }
    t->nbsteps++;
    return 0;
}

static int opt_string(const tk_load *L, json_t *m, const char *key, const char *field, char **out) {
    json_t *v = json_object_get(m, key);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    const char *s = json_string_value(v);
    if (!s) return berr(L, MODATTN_EFORMAT, field, "expected a string or null");
    if (!*s) return 0; /* "" adds nothing (Qwen2 writes "") */
    if (strlen(s) > TK_MAX_PREFIX) return berr(L, MODATTN_ERANGE, field, "longer than 64 bytes");
    size_t n = strlen(s);
    *out = modattn__malloc(n + 1, MODATTN_MEM_WEIGHTS);
    if (!*out) return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    memcpy(*out, s, n + 1);
    return 0;
}

static int merge_insert(modattn_tokenizer *t, uint32_t a, uint32_t b, uint32_t rank, uint32_t nid) {
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    size_t i = (size_t)modattn__tk_hash(&key, 8) & t->mmask;
    while (t->mkey[i] && t->mkey[i] != key) i = (i + 1) & t->mmask;
    t->mkey[i] = key; /* a pair given twice: the later merge wins, as HF's map */
    t->mrank[i] = rank;
    t->mnew[i] = nid;
    return 0;
}

static inline bool merge_find(const modattn_tokenizer *t, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *nid) {
    if (!t->mkey) return false;
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    size_t i = (size_t)modattn__tk_hash(&key, 8) & t->mmask;
    for (;;) {
        uint64_t k = t->mkey[i];
        if (!k) return false;
        if (k == key) {
            *rank = t->mrank[i];
            *nid = t->mnew[i];
            return true;
        }
        i = (i + 1) & t->mmask;
    }
}

static int merge_err(const tk_load *L, size_t rank, const char *what, const char *tok) {
    return modattn__error(MODATTN_EFORMAT, "tokenizer %s: field \"model.merges\": merge %zu: %s \"%.80s\"", L->path,
                          rank, what, tok);
}

static int load_merges(tk_load *L, json_t *merges) {
    modattn_tokenizer *t = L->t;
    if (!json_is_array(merges)) return berr(L, MODATTN_EFORMAT, "model.merges", "missing or not an array");
    size_t n = json_array_size(merges);
    if (n >= TK_MAX_ID) return berr(L, MODATTN_ERANGE, "model.merges", "too many merges");
    size_t slots = 16;
    while (slots < n * 2) slots *= 2;
    t->mkey = modattn__calloc(slots, sizeof(uint64_t), MODATTN_MEM_WEIGHTS);
    t->mrank = modattn__malloc(slots * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    t->mnew = modattn__malloc(slots * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    if (!t->mkey || !t->mrank || !t->mnew) return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    t->mmask = slots - 1;
    size_t plen = t->bpe_prefix ? strlen(t->bpe_prefix) : 0;
    char *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    /* the form is decided by the first entry, as HF's untagged enum: all strings or all pairs */
    bool pairs = n && json_is_array(json_array_get(merges, 0));
    size_t rank = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *e = json_array_get(merges, i);
        const char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        if (pairs) {
            if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
                !json_is_string(json_array_get(e, 1))) {
                rc = berr(L, MODATTN_EFORMAT, "model.merges[]", "expected every merge as [left, right] (or all as \"left right\")");
                break;
            }
            a = json_string_value(json_array_get(e, 0));
            al = json_string_length(json_array_get(e, 0));
            b = json_string_value(json_array_get(e, 1));
            bl = json_string_length(json_array_get(e, 1));
        } else {
            const char *s = json_string_value(e);
            if (!s) {
                rc = berr(L, MODATTN_EFORMAT, "model.merges[]", "expected every merge as \"left right\" (or all as [left, right])");
                break;
            }
            if (!strncmp(s, "#version", 8)) continue; /* merges.txt's header line, skipped by HF */
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                char msg[160];
                snprintf(msg, sizeof msg, "merge %zu: \"%.80s\" is not two tokens separated by one space", rank, s);
                rc = berr(L, MODATTN_EFORMAT, "model.merges", msg);
                break;
            }
            a = s;
            al = (size_t)(sp - s);
            b = sp + 1;
            bl = strlen(b);
        }
        int32_t ia = modattn__tk_vocab_find(t, a, al), ib = modattn__tk_vocab_find(t, b, bl);
        char tmp[160];
        if (ia < 0 || ib < 0) {
            snprintf(tmp, sizeof tmp, "%.*s", (int)(ia < 0 ? (al < 80 ? al : 80) : (bl < 80 ? bl : 80)), ia < 0 ? a : b);
            rc = merge_err(L, rank, "references a token not in model.vocab:", tmp);
            break;
        }
        if (bl < plen) {
            rc = merge_err(L, rank, "its right token is shorter than continuing_subword_prefix:", b);
            break;
        }
        size_t ml = al + bl - plen;
        if (ml + 1 > cap) {
            cap = (ml + 1) * 2;
            char *nb = modattn__realloc(buf, cap, MODATTN_MEM_OTHER);
            if (!nb) {
                rc = modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
                break;
            }
            buf = nb;
        }
        memcpy(buf, a, al);
        memcpy(buf + al, b + plen, bl - plen);
        buf[ml] = 0;
        int32_t nid = modattn__tk_vocab_find(t, buf, ml);
        if (nid < 0) {
            rc = merge_err(L, rank, "makes a token not in model.vocab:", buf);
            break;
        }
        merge_insert(t, (uint32_t)ia, (uint32_t)ib, (uint32_t)rank, (uint32_t)nid);
        rank++;
    }
    modattn_free(buf);
    return rc;
}

static int load_vocab(tk_load *L, json_t *m) {
    modattn_tokenizer *t = L->t;
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab) || json_object_size(vocab) == 0)
        return berr(L, MODATTN_EFORMAT, "model.vocab", "expected a non-empty object {token: id}");
    size_t count = json_object_size(vocab);
    if (count >= TK_MAX_ID) return berr(L, MODATTN_ERANGE, "model.vocab", "too many tokens");
    json_t *added = json_object_get(L->root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return berr(L, MODATTN_EFORMAT, "added_tokens", "expected an array");
    size_t nadded = json_is_array(added) ? json_array_size(added) : 0;
    size_t slab_bytes = 1, max_id = 0;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= TK_MAX_ID)
            return berr(L, MODATTN_ERANGE, "model.vocab", "expected ids in [0, 2^24)");
        if ((size_t)json_integer_value(val) > max_id) max_id = (size_t)json_integer_value(val);
        slab_bytes += strlen(key) + 1;
        if (slab_bytes >= TK_NONE) return berr(L, MODATTN_ERANGE, "model.vocab", "strings over 4 GiB");
    }
    for (size_t i = 0; i < nadded; i++) {
        json_t *a = json_array_get(added, i);
        const char *content = json_string_value(json_object_get(a, "content"));
        json_t *jid = json_object_get(a, "id");
        if (!content) return berr(L, MODATTN_EFORMAT, "added_tokens[].content", "missing or not a string");
        if (!json_is_integer(jid) || json_integer_value(jid) < 0 || json_integer_value(jid) >= TK_MAX_ID)
            return berr(L, MODATTN_ERANGE, "added_tokens[].id", "expected an id in [0, 2^24)");
        if ((size_t)json_integer_value(jid) > max_id) max_id = (size_t)json_integer_value(jid);
        slab_bytes += strlen(content) + 1;
        if (slab_bytes >= TK_NONE) return berr(L, MODATTN_ERANGE, "added_tokens", "strings over 4 GiB");
    }
    t->nids = max_id + 1;
    int vst = modattn__tk_vocab_alloc(L, slab_bytes, count);
    if (vst) return vst;
    size_t off = 0;
    json_object_foreach(vocab, key, val) {
        int32_t id = (int32_t)json_integer_value(val);
        if (t->tok_off[id] != TK_NONE) {
            char msg[160];
            snprintf(msg, sizeof msg, "id %d is given to both \"%.40s\" and \"%.40s\"", (int)id, t->slab + t->tok_off[id],
                     key);
            return berr(L, MODATTN_EFORMAT, "model.vocab", msg);
        }
        modattn__tk_vocab_insert(t, id, key, strlen(key), &off);
    }
    /* added tokens past the vocabulary get their strings (id -> token) */
    modattn__tk_added_strings(t, added, nadded, &off);
    return 0;
}

int modattn__tk_bpe_load(tk_load *L) {
    modattn_tokenizer *t = L->t;
    json_t *m = json_object_get(L->root, "model");
    t->bpe = true;
    t->has_norm = t->has_pretok = false;
    int rc;
    json_t *dr = json_object_get(m, "dropout");
    if (dr && !json_is_null(dr) && !(json_is_number(dr) && json_number_value(dr) == 0.0))
        return berr(L, MODATTN_EUNSUPPORTED, "model.dropout", "BPE dropout is random at every call: not supported");
    if ((rc = get_flag(L, m, "ignore_merges", "model.ignore_merges", false, &t->ignore_merges)) ||
        (rc = get_flag(L, m, "fuse_unk", "model.fuse_unk", false, &t->fuse_unk)) ||
        (rc = get_flag(L, m, "byte_fallback", "model.byte_fallback", false, &t->byte_fallback)) ||
        (rc = opt_string(L, m, "continuing_subword_prefix", "model.continuing_subword_prefix", &t->bpe_prefix)) ||
        (rc = opt_string(L, m, "end_of_word_suffix", "model.end_of_word_suffix", &t->bpe_suffix)))
        return rc;
    if ((rc = modattn__tk_load_norm_seq(L))) return rc;
    t->bsteps = modattn__calloc(16, sizeof(tk_bstep), MODATTN_MEM_WEIGHTS);
    if (!t->bsteps) return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    json_t *p = json_object_get(L->root, "pre_tokenizer");
    if (p && !json_is_null(p) && (rc = load_bstep(L, p, "pre_tokenizer", 0))) return rc;
    if ((rc = load_vocab(L, m))) return rc;
    json_t *merges = json_object_get(m, "merges");
    if (!merges) return berr(L, MODATTN_EFORMAT, "model.merges", "missing (a BPE model needs its merges)");
    if ((rc = load_merges(L, merges))) return rc;
    json_t *ju = json_object_get(m, "unk_token");
    t->unk_id = -1;
    if (ju && !json_is_null(ju)) {
        const char *u = json_string_value(ju);
        if (!u) return berr(L, MODATTN_EFORMAT, "model.unk_token", "expected a string or null");
        t->has_unk_token = true;
        t->unk_id = modattn__tk_vocab_find(t, u, strlen(u)); /* missing: an error when needed, as HF */
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = modattn__tk_vocab_find(t, name, 6);
    }
    return 0;
}

/* A cut after a lone "\n" (behind a visible ASCII character) and before an ASCII letter is a split
 * boundary of every known pattern, at a block's end too (the match holding the "\n" is that
 * "\n" alone, or Qwen2's [\r\n]* tail, and ends at the letter; a letter after "\n" starts a
 * match; a longer whitespace run would not do: \s+(?!\S) takes all of it at the end of a text
 * and all but its last character elsewhere), so blocks cut there give the same tokens when: the
 * first pre-tokenizer splits (Split, or ByteLevel with use_regex), none adds a prefix space (it
 * would be added to each block), the normalizers work character by character (NFC/NFD/NFKC/NFKD,
 * Lowercase: the letter is a starter that composes with nothing before it), and no added token
 * holds a "\n" or a space, strips on its right, or strips on its left and begins with a letter. */
bool modattn__tk_bpe_can_block(const modattn_tokenizer *t) {
    if (!t->bpe || t->nbsteps == 0) return false;
    const tk_bstep *f = &t->bsteps[0];
    if (!(f->kind == BK_SPLIT || f->use_regex)) return false;
    for (uint32_t k = 0; k < t->nbsteps; k++)
        if (t->bsteps[k].kind == BK_BYTELEVEL && t->bsteps[k].prefix_space) return false;
    for (uint32_t k = 0; k < t->nnsteps; k++) {
        tk_nkind n = t->nsteps[k].kind;
        if (n != NK_NFC && n != NK_NFD && n != NK_NFKC && n != NK_NFKD && n != NK_LOWERCASE) return false;
    }
    for (uint32_t i = 0; i < t->nadded; i++) {
        const tk_added *a = &t->added[i];
        if (a->rstrip) return false;
        if (a->lstrip && a->ncps && a->cps[0] < 128 && is_l(a->cps[0])) return false;
        for (uint32_t k = 0; k < a->ncps; k++)
            if (a->cps[k] == '\n' || a->cps[k] == ' ') return false;
    }
    return true;
}

void modattn__tk_bpe_free(modattn_tokenizer *t) {
    modattn_free(t->bsteps);
    modattn_free(t->mkey);
    modattn_free(t->mrank);
    modattn_free(t->mnew);
    modattn_free(t->bpe_prefix);
    modattn_free(t->bpe_suffix);
}

/* ------------------------------------------------------------------ run time */

typedef struct tk_bsplit {
    size_t a, b; /* chars [a, b) of the current vector */
} tk_bsplit;

typedef struct tk_sym {
    int32_t c;          /* id */
    int32_t prev, next; /* -1: none */
    uint32_t len;       /* bytes of the word (HF's), 0: merged away */
} tk_sym;

typedef struct tk_merge {
    uint32_t rank, pos, nid;
} tk_merge;

struct tk_bscratch {
    tk_vec v[2];
    tk_bsplit *sp[2];
    size_t nsp[2], csp[2];
    tk_sym *sym;
    size_t csym;
    tk_merge *heap;
    size_t nheap, cheap;
    char *buf; /* a word as UTF-8 */
    size_t cbuf;
    uint32_t *bchar; /* the character of each byte of buf */
    size_t cbch;
};

void modattn__tk_bscratch_free(tk_bscratch *bs) {
    if (!bs) return;
    for (int k = 0; k < 2; k++) {
        modattn__tk_vec_free(&bs->v[k]);
        modattn_free(bs->sp[k]);
    }
    modattn_free(bs->sym);
    modattn_free(bs->heap);
    modattn_free(bs->buf);
    modattn_free(bs->bchar);
    modattn_free(bs);
}

static int sp_push(tk_bscratch *bs, int w, size_t a, size_t b) {
    if (a >= b) return 0;
    if (bs->nsp[w] == bs->csp[w]) {
        size_t cap = bs->csp[w] ? bs->csp[w] * 2 : 64;
        tk_bsplit *s = modattn__realloc(bs->sp[w], cap * sizeof(tk_bsplit), MODATTN_MEM_OTHER);
        if (!s) return modattn__mem_last_status();
        bs->sp[w] = s;
        bs->csp[w] = cap;
    }
    bs->sp[w][bs->nsp[w]++] = (tk_bsplit){a, b};
    return 0;
}

static int buf_reserve(tk_bscratch *bs, size_t n) {
    if (n <= bs->cbuf) return 0;
    size_t cap = n < 1024 ? 1024 : n * 2;
    char *p = modattn__realloc(bs->buf, cap, MODATTN_MEM_OTHER);
    if (!p) return modattn__mem_last_status();
    bs->buf = p;
    bs->cbuf = cap;
    return 0;
}

static int bch_reserve(tk_bscratch *bs, size_t n) {
    if (n <= bs->cbch) return 0;
    size_t cap = n < 1024 ? 1024 : n * 2;
    uint32_t *p = modattn__realloc(bs->bchar, cap * sizeof(uint32_t), MODATTN_MEM_OTHER);
    if (!p) return modattn__mem_last_status();
    bs->bchar = p;
    bs->cbch = cap;
    return 0;
}

/* A token of the word's bytes [s, e): the smallest start and largest end of the characters
 * holding them (a range past the word, which only prefix or suffix bytes of byte_fallback
 * can make, is clamped to its last character) */
static void emit_bytes(const tk_bscratch *bs, const tk_char *w, size_t nb, size_t s, size_t e, int32_t id,
                       tk_emit_fn emit, void *ctx) {
    if (e > nb) e = nb;
    if (s >= e) s = e ? e - 1 : 0;
    uint32_t c0 = bs->bchar[s], c1 = bs->bchar[e ? e - 1 : 0];
    uint32_t os = CH_S(w[c0]), oe = CH_E(w[c0]);
    for (uint32_t k = c0 + 1; k <= c1; k++) {
        if (CH_S(w[k]) < os) os = CH_S(w[k]);
        if (CH_E(w[k]) > oe) oe = CH_E(w[k]);
    }
    emit(ctx, id, os, oe);
}

/* one pre-tokenizer over the splits of vector ri into vector 1 - ri */
static int bstep(const tk_bstep *st, tk_bscratch *bs, int ri) {
    tk_vec *src = &bs->v[ri], *dst = &bs->v[1 - ri];
    int wo = 1 - ri;
    dst->n = 0;
    bs->nsp[wo] = 0;
    int rc;
    for (size_t k = 0; k < bs->nsp[ri]; k++) {
        tk_bsplit s = bs->sp[ri][k];
        const tk_char *c = src->v;
        if (st->kind == BK_SPLIT) { /* Isolated: every match is a split (every character matches) */
            size_t a0 = dst->n;
            for (size_t q = s.a; q < s.b; q++)
                if ((rc = modattn__tk_vec_push(dst, c[q].cp, CH_S(c[q]), CH_E(c[q])))) return rc;
            const tk_char *d = dst->v + a0;
            size_t n = s.b - s.a, i = 0;
            while (i < n) {
                size_t e = match_at(st->pattern, d, i, n);
                if ((rc = sp_push(bs, wo, a0 + i, a0 + e))) return rc;
                i = e;
            }
            continue;
        }
        /* ByteLevel: a space before a split that does not begin with one (aligned with its first
         * character), GPT-2's split, then every character as its UTF-8 bytes' characters */
        size_t t0 = dst->n; /* the split's characters first, then its byte characters after */
        if (st->prefix_space && s.a < s.b && c[s.a].cp != ' ')
            if ((rc = modattn__tk_vec_push(dst, ' ', CH_S(c[s.a]), CH_E(c[s.a])))) return rc;
        for (size_t q = s.a; q < s.b; q++)
            if ((rc = modattn__tk_vec_push(dst, c[q].cp, CH_S(c[q]), CH_E(c[q])))) return rc;
        size_t t1 = dst->n, n = t1 - t0;
        /* split positions first (over the characters), then bytes; the byte characters are
         * written after [t0, t1) and moved down over it at the end */
        size_t i = 0;
        while (i < n) {
            size_t e = st->use_regex ? match_at(PAT_GPT2, dst->v + t0, i, n) : n;
            size_t b0 = dst->n;
            for (size_t q = t0 + i; q < t0 + e; q++) {
                uint8_t u[4];
                tk_char ch = dst->v[q];
                utf8proc_ssize_t m = utf8proc_encode_char((utf8proc_int32_t)ch.cp, u);
                for (utf8proc_ssize_t z = 0; z < m; z++)
                    if ((rc = modattn__tk_vec_push(dst, byte_char(u[z]), CH_S(ch), CH_E(ch)))) return rc;
            }
            if ((rc = sp_push(bs, wo, b0 - (t1 - t0), dst->n - (t1 - t0)))) return rc;
            i = e;
        }
        memmove(dst->v + t0, dst->v + t1, (dst->n - t1) * sizeof(tk_char));
        dst->n -= t1 - t0;
    }
    return 0;
}

static int heap_push(tk_bscratch *bs, tk_merge m) {
    if (bs->nheap == bs->cheap) {
        size_t cap = bs->cheap ? bs->cheap * 2 : 64;
        tk_merge *h = modattn__realloc(bs->heap, cap * sizeof(tk_merge), MODATTN_MEM_OTHER);
        if (!h) return modattn__mem_last_status();
        bs->heap = h;
        bs->cheap = cap;
    }
    /* min-heap on (rank, pos) */
    size_t i = bs->nheap++;
    tk_merge *h = bs->heap;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].rank < m.rank || (h[p].rank == m.rank && h[p].pos <= m.pos)) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = m;
    return 0;
}

static tk_merge heap_pop(tk_bscratch *bs) {
    tk_merge *h = bs->heap;
    tk_merge top = h[0], last = h[--bs->nheap];
    size_t n = bs->nheap, i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t r = l + 1, m = l;
        if (r < n && (h[r].rank < h[l].rank || (h[r].rank == h[l].rank && h[r].pos < h[l].pos))) m = r;
        if (last.rank < h[m].rank || (last.rank == h[m].rank && last.pos <= h[m].pos)) break;
        h[i] = h[m];
        i = m;
    }
    if (n) h[i] = last;
    return top;
}

static int add_sym(tk_bscratch *bs, size_t *ns, int32_t id, uint32_t len) {
    if (*ns == bs->csym) {
        size_t cap = bs->csym ? bs->csym * 2 : 256;
        tk_sym *p = modattn__realloc(bs->sym, cap * sizeof(tk_sym), MODATTN_MEM_OTHER);
        if (!p) return modattn__mem_last_status();
        bs->sym = p;
        bs->csym = cap;
    }
    tk_sym *y = &bs->sym[*ns];
    y->c = id;
    y->len = len;
    y->prev = *ns ? (int32_t)(*ns - 1) : -1;
    y->next = -1;
    if (*ns) bs->sym[*ns - 1].next = (int32_t)*ns;
    (*ns)++;
    return 0;
}

static int unk_missing(void) {
    return modattn__error(MODATTN_EFORMAT, "tokenizer: a character is not in the BPE vocabulary and model.unk_token "
                                           "is not in model.vocab");
}

/* BPE on the word w[0, n) (byte-level characters, or code points without ByteLevel), as HF's
 * merge_word + merge_all. Symbols carry HF's byte lengths and a token's offsets are HF's too:
 * the cumulative byte range in the word, mapped to the characters holding those bytes. */
static int bpe_word(const modattn_tokenizer *t, tk_bscratch *bs, const tk_char *w, size_t n, tk_emit_fn emit,
                    void *ctx, const bool *stop) {
    if (n == 0) return 0;
    int rc;
    if (n > UINT32_MAX / 8) return modattn__error(MODATTN_ERANGE, "tokenizer: a word over 512 M characters");
    size_t plen = t->bpe_prefix ? strlen(t->bpe_prefix) : 0, slen = t->bpe_suffix ? strlen(t->bpe_suffix) : 0;
    if ((rc = buf_reserve(bs, 4 * n + 1)) || (rc = bch_reserve(bs, 4 * n + 1))) return rc;
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        size_t m = (size_t)utf8proc_encode_char((utf8proc_int32_t)w[i].cp, (uint8_t *)bs->buf + nb);
        for (size_t k = 0; k < m; k++) bs->bchar[nb + k] = (uint32_t)i;
        nb += m;
    }
    if (t->ignore_merges) {
        int32_t id = modattn__tk_vocab_find(t, bs->buf, nb);
        if (id >= 0) {
            emit_bytes(bs, w, nb, 0, nb, id, emit, ctx);
            return 0;
        }
    }
    size_t ns = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    bool have_unk = false;
    char key[2 * TK_MAX_PREFIX + 8];
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t cl = (size_t)utf8proc_encode_char((utf8proc_int32_t)w[i].cp, (uint8_t *)key + plen);
        size_t ko = plen, kl = cl;
        if (i > 0 && plen) {
            memcpy(key, t->bpe_prefix, plen);
            ko = 0;
            kl += plen;
        }
        if (i + 1 == n && slen) {
            memcpy(key + plen + cl, t->bpe_suffix, slen);
            kl += slen;
        }
        pos += cl;
        int32_t id = modattn__tk_vocab_find(t, key + ko, kl);
        if (id >= 0) {
            if (have_unk && (rc = add_sym(bs, &ns, unk_id, unk_len))) return rc;
            have_unk = false;
            if ((rc = add_sym(bs, &ns, id, (uint32_t)cl))) return rc;
            continue;
        }
        if (t->byte_fallback) {
            bool all = true;
            for (size_t q = 0; q < kl; q++) all &= t->byte_ids[(uint8_t)key[ko + q]] >= 0;
            if (all) { /* one symbol of length 1 per byte (prefix and suffix bytes too, as HF) */
                for (size_t q = 0; q < kl; q++)
                    if ((rc = add_sym(bs, &ns, t->byte_ids[(uint8_t)key[ko + q]], 1))) return rc;
                continue; /* a pending unk stays pending, as HF's */
            }
        }
        if (t->has_unk_token) {
            if (t->unk_id < 0) return unk_missing();
            if (have_unk && t->fuse_unk) {
                unk_len += (uint32_t)cl;
            } else {
                if (have_unk && (rc = add_sym(bs, &ns, unk_id, unk_len))) return rc;
                have_unk = true;
                unk_id = t->unk_id;
                unk_len = (uint32_t)cl;
            }
        }
        /* no unk_token: the character is dropped, as HF drops it */
    }
    (void)pos;
    if (have_unk && (rc = add_sym(bs, &ns, unk_id, unk_len))) return rc;
    tk_sym *y = bs->sym;
    bs->nheap = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        uint32_t rank, nid;
        if (merge_find(t, (uint32_t)y[i].c, (uint32_t)y[i + 1].c, &rank, &nid) &&
            (rc = heap_push(bs, (tk_merge){rank, (uint32_t)i, nid})))
            return rc;
    }
    while (bs->nheap) {
        tk_merge top = heap_pop(bs);
        tk_sym *cur = &y[top.pos];
        if (cur->len == 0 || cur->next < 0) continue;
        tk_sym *right = &y[cur->next];
        uint32_t rank, nid;
        if (!merge_find(t, (uint32_t)cur->c, (uint32_t)right->c, &rank, &nid) || nid != top.nid) continue;
        cur->c = (int32_t)top.nid;
        cur->len += right->len;
        cur->next = right->next;
        right->len = 0;
        if (cur->next >= 0) y[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && merge_find(t, (uint32_t)y[cur->prev].c, (uint32_t)cur->c, &rank, &nid) &&
            (rc = heap_push(bs, (tk_merge){rank, (uint32_t)cur->prev, nid})))
            return rc;
        if (cur->next >= 0 && merge_find(t, (uint32_t)cur->c, (uint32_t)y[cur->next].c, &rank, &nid) &&
            (rc = heap_push(bs, (tk_merge){rank, top.pos, nid})))
            return rc;
    }
    size_t at = 0;
    for (size_t i = 0; i < ns && !*stop; i++) {
        if (y[i].len == 0) continue;
        emit_bytes(bs, w, nb, at, at + y[i].len, y[i].c, emit, ctx);
        at += y[i].len;
    }
    return 0;
}

static int bs_get(tk_bscratch **bs) {
    if (*bs) return 0;
    *bs = modattn__calloc(1, sizeof(tk_bscratch), MODATTN_MEM_OTHER);
    return *bs ? 0 : modattn__mem_last_status();
}

int modattn__tk_bpe_run(const modattn_tokenizer *t, tk_bscratch **bsp, const tk_char *c, size_t a, size_t b,
                        tk_emit_fn emit, void *ctx, const bool *stop) {
    if (a >= b) return 0;
    int rc = bs_get(bsp);
    if (rc) return rc;
    tk_bscratch *bs = *bsp;
    tk_vec *v0 = &bs->v[0];
    v0->n = 0;
    for (size_t i = a; i < b; i++)
        if ((rc = modattn__tk_vec_push(v0, c[i].cp, CH_S(c[i]), CH_E(c[i])))) return rc;
    bs->nsp[0] = 0;
    if ((rc = sp_push(bs, 0, 0, v0->n))) return rc;
    int cur = 0;
    for (uint32_t k = 0; k < t->nbsteps; k++) {
        if ((rc = bstep(&t->bsteps[k], bs, cur))) return rc;
        cur = 1 - cur;
    }
    for (size_t k = 0; k < bs->nsp[cur] && !*stop; k++) {
        tk_bsplit s = bs->sp[cur][k];
        if ((rc = bpe_word(t, bs, bs->v[cur].v + s.a, s.b - s.a, emit, ctx, stop))) return rc;
    }
    return 0;
}
