/* model/tokenizer.c — Hugging Face BERT tokenizer (tokenizer.json), exact to `tokenizers`.
 *
 * Pipeline for one text, as HF runs it for a single sequence:
 *   UTF-8 decode (invalid bytes -> U+FFFD, Python's "replace": one per maximal ill-formed subpart)
 *   -> added tokens matched in the raw text (leftmost-longest; single_word/lstrip/rstrip)
 *   -> each remaining segment normalised (BertNormalizer: clean_text, CJK spacing, NFD + drop
 *      non-spacing marks, lowercase), then normalised added tokens matched in it
 *   -> BertPreTokenizer (split on whitespace, isolate punctuation)
 *   -> WordPiece (greedy longest match first, continuing-subword prefix, [UNK] for words over
 *      max_input_chars_per_word characters or with no decomposition)
 *   -> truncation to the caller's budget, then the post_processor's specials around it.
 * Every character carries the byte range it came from in the input, so each piece has offsets.
 *
 * Character classes come from model/tokenizer_unicode.h, measured from the `tokenizers` package
 * itself (its Unicode data is older than utf8proc's); NFD and case mapping come from utf8proc.
 *
 * Long texts are processed in blocks of about 8 KiB, cut after ASCII whitespace or before ASCII
 * punctuation (places nothing in the pipeline looks across), so scratch memory stays bounded
 * and work stops as soon as the id budget is full. The vocabulary is one string slab with a
 * hash table (string -> id) and a byte trie, in which WordPiece finds each longest match in a
 * single forward walk. Time is linear in the text. */
#include "modattn/tokenizer.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "modattn/core.h"
#include "modattn/status.h"
#include "model/tokenizer_unicode.h"

#define TK_BLOCK_BYTES 8192u      /* target raw bytes per processing block */
#define TK_MAX_PREFIX 64u         /* longest continuing_subword_prefix accepted */
#define TK_MAX_ID (1 << 24)       /* ids above this are refused (the id table is dense) */
#define TK_NONE 0xFFFFFFFFu

/* ------------------------------------------------------------------ types */

typedef struct tk_added {
    uint32_t *cps; /* content as code points (normalised for `normalized` tokens) */
    uint32_t ncps;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized;
} tk_added;

/* One set of added tokens to match (raw or normalised): indices into added[], sorted by first
 * code point, then longest first, so the first hit at a position is the longest. */
typedef struct tk_match_set {
    uint32_t *order;
    uint32_t n;
    uint64_t ascii_first[2]; /* bitmap of first code points < 128 */
    uint32_t min_first, max_first;
    bool has_space; /* some token contains whitespace */
} tk_match_set;

/* Trie node; the children of a node are contiguous, sorted by label. Node 0 is the root.
 * Nodes with many children (the root, "##", first bytes of scripts) also get a dense 256-entry
 * table; the others are found by scanning their labels, kept in a byte array of their own. */
typedef struct tk_node {
    int32_t id;     /* vocab id of the key ending here, -1 if none */
    uint32_t first; /* index of the first child */
    uint32_t dense; /* index of its 256-entry child table, or TK_NONE */
    uint16_t n;     /* number of children */
} tk_node;

#define TK_DENSE_MIN 9 /* children from which a node gets a dense table */

typedef struct tk_slot {
    uint32_t id1; /* id + 1; 0 = empty */
    uint32_t tag; /* upper hash bits */
} tk_slot;

struct modattn_tokenizer {
    /* vocabulary (model.vocab) */
    char *slab;           /* all token strings, NUL-terminated */
    uint32_t *tok_off;    /* [nids] offset in slab or TK_NONE */
    uint32_t *tok_len;    /* [nids] */
    size_t nids;          /* 1 + largest id */
    tk_slot *slots;       /* vocab hash table: string -> id */
    size_t slot_mask;
    size_t max_key_len;   /* longest vocab key in bytes */
    tk_node *trie;        /* byte trie of the vocab: WordPiece's longest match in one walk */
    uint8_t *trie_label;  /* [nodes] byte on the edge into each node */
    uint32_t *trie_dense; /* 256 child indices (0 = none) per dense node */
    uint32_t cont_root;   /* trie node of continuing_subword_prefix, or TK_NONE */
    /* normalizer */
    bool has_norm, clean_text, cjk, strip_accents, lowercase;
    bool has_pretok;
    /* WordPiece */
    char prefix[TK_MAX_PREFIX + 1];
    size_t prefix_len;
    size_t max_chars;
    int32_t unk_id;
    /* added tokens */
    tk_added *added;
    uint32_t nadded;
    uint32_t *added_cps; /* slab for all added token code points */
    tk_match_set raw, norm;
    bool can_block;
    bool strip_ws_tokens; /* some added token has lstrip or rstrip */
    uint8_t ascii_cut[128]; /* whitespace / punctuation in no added token: blocks end there */
    /* post processor */
    int32_t pre_ids[8], post_ids[8];
    size_t npre, npost;
    int32_t cls_id, sep_id, pad_id;
    uint8_t ascii_cls[128];
};

enum { C_DROP = 1, C_SPACE = 2, C_WS = 4, C_PUNCT = 8 };

/* ------------------------------------------------------------------ Unicode classes */

static bool in_ranges(const modattn__cp_range *r, size_t n, uint32_t cp) {
    if (n == 0 || cp < r[0].lo || cp > r[n - 1].hi) return false;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo)
            hi = mid;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}
#define IN_TABLE(tab, cp) in_ranges(tab, sizeof(tab) / sizeof(tab[0]), cp)

static bool is_cjk(uint32_t cp) {
    /* The ranges tokenizers' BertNormalizer uses (note 0x2B920, not BERT's 0x2B820). */
    if (cp < 0x3400) return false;
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static inline bool tk_is_ws(const modattn_tokenizer *t, uint32_t cp) {
    return cp < 128 ? (t->ascii_cls[cp] & C_WS) != 0 : IN_TABLE(modattn__tok_white, cp);
}
static inline bool tk_is_punct(const modattn_tokenizer *t, uint32_t cp) {
    return cp < 128 ? (t->ascii_cls[cp] & C_PUNCT) != 0 : IN_TABLE(modattn__tok_punct, cp);
}

/* Regex `\w` as the added-token single_word check uses it (letters, marks, digits, connector
 * punctuation, joiners). */
static bool is_word_char(uint32_t cp) {
    if (cp < 128)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    if (cp == 0x200C || cp == 0x200D) return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

/* Rust's char::to_lowercase: utf8proc's simple mapping, HF's newer mappings, and the one
 * unconditional multi-character lowercase (U+0130 -> i + U+0307). */
static int lower_cp(uint32_t cp, uint32_t out[2]) {
    if (cp < 128) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    if (cp == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    size_t lo = 0, hi = MODATTN__TOK_LOWER_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (modattn__tok_lower[mid].from == cp) {
            out[0] = modattn__tok_lower[mid].to;
            return 1;
        }
        if (modattn__tok_lower[mid].from < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    return 1;
}

/* ------------------------------------------------------------------ hashing */

static uint64_t tk_hash(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    }
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
    return h;
}

static int32_t vocab_find(const modattn_tokenizer *t, const char *key, size_t len) {
    if (len > t->max_key_len || !t->slots) return -1;
    uint64_t h = tk_hash(key, len);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = (size_t)h & t->slot_mask;
    for (;;) {
        const tk_slot *s = &t->slots[i];
        if (s->id1 == 0) return -1;
        uint32_t id = s->id1 - 1;
        if (s->tag == tag && t->tok_len[id] == len && memcmp(t->slab + t->tok_off[id], key, len) == 0)
            return (int32_t)id;
        i = (i + 1) & t->slot_mask;
    }
}

/* Child of `node` along byte b, or 0 (the root is nobody's child). */
static inline uint32_t trie_child(const modattn_tokenizer *t, uint32_t node, uint8_t b) {
    const tk_node *nd = &t->trie[node];
    if (nd->dense != TK_NONE) return t->trie_dense[(size_t)nd->dense * 256 + b];
    const uint8_t *lab = t->trie_label + nd->first;
    for (uint32_t i = 0; i < nd->n; i++)
        if (lab[i] == b) return nd->first + i;
    return 0;
}

/* ------------------------------------------------------------------ scratch vectors */

/* A character and the bytes [s, s + len) of the current block it came from (12 bytes: long
 * texts without a place to cut cost memory per character). */
typedef struct tk_char {
    uint32_t cp;
    uint32_t s;
    uint8_t len;
    uint8_t ccc; /* canonical combining class while reordering */
} tk_char;
#define CH_S(c) ((c).s)
#define CH_E(c) ((c).s + (uint32_t)(c).len)

typedef struct tk_vec {
    tk_char *v;
    size_t n, cap;
} tk_vec;

static int vec_reserve(tk_vec *x, size_t need) {
    if (need <= x->cap) return 0;
    size_t cap = x->cap ? x->cap : 256;
    while (cap < need) {
        if (cap > ((size_t)-1) / 2 / sizeof(tk_char))
            return modattn_error(MODATTN_ENOMEM, "tokenizer: text too long");
        cap *= 2;
    }
    tk_char *v = modattn_realloc(x->v, cap * sizeof(tk_char), MODATTN_MEM_OTHER);
    if (!v) return modattn_mem_last_status();
    x->v = v;
    x->cap = cap;
    return 0;
}

static inline int vec_push(tk_vec *x, uint32_t cp, uint32_t s, uint32_t e) {
    if (x->n == x->cap) {
        int rc = vec_reserve(x, x->n + 1);
        if (rc) return rc;
    }
    tk_char *c = &x->v[x->n++];
    c->cp = cp;
    c->ccc = 0;
    c->s = s;
    c->len = (uint8_t)(e - s);
    return 0;
}

static void vec_free(tk_vec *x) {
    modattn_free(x->v);
    x->v = NULL;
    x->n = x->cap = 0;
}

/* ------------------------------------------------------------------ UTF-8 decoding */

/* Decode bytes [b, e) of s into out, as Python's bytes.decode("utf-8", errors="replace"):
 * each maximal ill-formed subpart becomes one U+FFFD. Offsets are relative to b. */
static int decode_utf8(const uint8_t *s, size_t b, size_t e, tk_vec *out) {
    int rc = vec_reserve(out, out->n + (e - b));
    if (rc) return rc;
    size_t i = b;
    while (i < e) {
        uint8_t c = s[i];
        if (c < 0x80) {
            tk_char *d = &out->v[out->n++];
            d->cp = c;
            d->ccc = 0;
            d->s = (uint32_t)(i - b);
            d->len = 1;
            i++;
            continue;
        }
        uint32_t cp;
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            need = 0;
            cp = 0xFFFD;
        }
        size_t k = 1;
        bool ok = need > 0;
        for (; ok && k <= need; k++) {
            if (i + k >= e) {
                ok = false;
                break;
            }
            uint8_t cc = s[i + k];
            uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
            if (cc < l || cc > h) {
                ok = false;
                break;
            }
            cp = (cp << 6) | (cc & 0x3F);
        }
        tk_char *d = &out->v[out->n++];
        d->ccc = 0;
        d->s = (uint32_t)(i - b);
        size_t i0 = i;
        if (ok) {
            d->cp = cp;
            i += need + 1;
        } else {
            d->cp = 0xFFFD;
            i += k; /* the lead byte plus the continuation bytes that were valid */
        }
        d->len = (uint8_t)(i - i0);
    }
    return 0;
}

/* ------------------------------------------------------------------ normaliser */

/* Canonical ordering of combining marks: stable sort of each run of non-starters by class. */
static int canonical_reorder(tk_vec *x, tk_vec *tmp) {
    size_t i = 0, n = x->n;
    while (i < n) {
        if (x->v[i].ccc == 0) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && x->v[j].ccc != 0) j++;
        size_t len = j - i;
        tk_char *r = x->v + i;
        if (len <= 32) {
            for (size_t a = 1; a < len; a++) {
                tk_char key = r[a];
                size_t b = a;
                while (b > 0 && r[b - 1].ccc > key.ccc) {
                    r[b] = r[b - 1];
                    b--;
                }
                r[b] = key;
            }
        } else { /* long runs: counting sort, linear */
            int rc = vec_reserve(tmp, len);
            if (rc) return rc;
            size_t count[257] = {0};
            for (size_t a = 0; a < len; a++) count[r[a].ccc + 1]++;
            for (size_t c = 1; c < 257; c++) count[c] += count[c - 1];
            for (size_t a = 0; a < len; a++) tmp->v[count[r[a].ccc]++] = r[a];
            memcpy(r, tmp->v, len * sizeof(tk_char));
        }
        i = j;
    }
    return 0;
}

static inline int push_lower(const modattn_tokenizer *t, tk_vec *out, uint32_t cp, uint32_t s,
                             uint32_t e) {
    if (!t->lowercase) return vec_push(out, cp, s, e);
    uint32_t l[2];
    int k = lower_cp(cp, l);
    for (int j = 0; j < k; j++) {
        int rc = vec_push(out, l[j], s, e);
        if (rc) return rc;
    }
    return 0;
}

/* BertNormalizer over in[a, b) -> out (cleared first). mid and tmp are scratch. */
static int normalize(const modattn_tokenizer *t, const tk_char *in, size_t a, size_t b,
                     tk_vec *out, tk_vec *mid, tk_vec *tmp) {
    out->n = 0;
    int rc = vec_reserve(out, b - a);
    if (rc) return rc;
    if (!t->has_norm) {
        memcpy(out->v, in + a, (b - a) * sizeof(tk_char));
        out->n = b - a;
        return 0;
    }
    /* clean_text + CJK spacing, then (without accent stripping) lowercase, straight to out */
    tk_vec *dst = t->strip_accents ? mid : out;
    dst->n = 0;
    for (size_t i = a; i < b; i++) {
        uint32_t cp = in[i].cp;
        uint32_t s = CH_S(in[i]), e = CH_E(in[i]);
        if (t->clean_text) {
            if (cp < 128) {
                uint8_t c = t->ascii_cls[cp];
                if (c & C_DROP) continue;
                if (c & C_SPACE) cp = ' ';
            } else if (IN_TABLE(modattn__tok_drop, cp)) {
                continue;
            } else if (IN_TABLE(modattn__tok_space, cp)) {
                cp = ' ';
            }
        }
        if (t->strip_accents) {
            if (t->cjk && is_cjk(cp)) {
                if ((rc = vec_push(dst, ' ', s, e)) || (rc = vec_push(dst, cp, s, e)) ||
                    (rc = vec_push(dst, ' ', s, e)))
                    return rc;
            } else if ((rc = vec_push(dst, cp, s, e))) {
                return rc;
            }
        } else if (t->cjk && is_cjk(cp)) {
            if ((rc = vec_push(dst, ' ', s, e)) || (rc = push_lower(t, dst, cp, s, e)) ||
                (rc = vec_push(dst, ' ', s, e)))
                return rc;
        } else if ((rc = push_lower(t, dst, cp, s, e))) {
            return rc;
        }
    }
    if (!t->strip_accents) return 0;

    /* NFD (decompose + canonical order), drop non-spacing marks, lowercase */
    tmp->n = 0;
    bool any_ccc = false;
    for (size_t i = 0; i < mid->n; i++) {
        uint32_t cp = mid->v[i].cp;
        uint32_t s = CH_S(mid->v[i]), e = CH_E(mid->v[i]);
        if (cp < 0xC0) { /* nothing below U+00C0 decomposes or combines */
            if ((rc = vec_push(tmp, cp, s, e))) return rc;
            continue;
        }
        utf8proc_int32_t d[32];
        utf8proc_ssize_t nd = 1;
        d[0] = (utf8proc_int32_t)cp;
        if (!IN_TABLE(modattn__tok_nfd_keep, cp)) {
            int last = 0;
            nd = utf8proc_decompose_char((utf8proc_int32_t)cp, d, 32, UTF8PROC_DECOMPOSE, &last);
            if (nd < 1 || nd > 32) {
                nd = 1;
                d[0] = (utf8proc_int32_t)cp;
            }
        }
        for (utf8proc_ssize_t k = 0; k < nd; k++) {
            if ((rc = vec_push(tmp, (uint32_t)d[k], s, e))) return rc;
            uint8_t ccc = (uint8_t)utf8proc_get_property(d[k])->combining_class;
            tmp->v[tmp->n - 1].ccc = ccc;
            any_ccc |= ccc != 0;
        }
    }
    if (any_ccc && (rc = canonical_reorder(tmp, mid))) return rc;
    for (size_t i = 0; i < tmp->n; i++) {
        uint32_t cp = tmp->v[i].cp;
        if (cp >= 0x300 && IN_TABLE(modattn__tok_mn, cp)) continue;
        if ((rc = push_lower(t, out, cp, CH_S(tmp->v[i]), CH_E(tmp->v[i])))) return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ tokenising */

typedef struct tk_piece {
    int32_t id;
    uint32_t s, e;
} tk_piece;

typedef struct tk_run {
    const modattn_tokenizer *t;
    const uint8_t *text;
    int32_t *ids;
    modattn_token_offset *offs;
    size_t cap, n; /* room for word pieces, pieces written */
    size_t base;   /* byte offset of the current block in the text */
    bool full;
    tk_vec dec, norm, mid, tmp;
    unsigned char *wbuf; /* the word as UTF-8 */
    size_t wcap;
    size_t *bpos; /* byte offset of each character of the word, +1 */
    tk_piece *pieces;
    size_t pcap;
} tk_run;

static void emit(tk_run *r, int32_t id, uint32_t s, uint32_t e) {
    if (r->n >= r->cap) {
        r->full = true;
        return;
    }
    r->ids[r->n] = id;
    if (r->offs) {
        r->offs[r->n].start = r->base + s;
        r->offs[r->n].end = r->base + e;
    }
    if (++r->n >= r->cap) r->full = true;
}

static int grow_word(tk_run *r, size_t nchars, size_t nbytes) {
    size_t need = nbytes + 1;
    if (need > r->wcap) {
        size_t cap = need < 1024 ? 1024 : need * 2;
        unsigned char *w = modattn_realloc(r->wbuf, cap, MODATTN_MEM_OTHER);
        if (!w) return modattn_mem_last_status();
        r->wbuf = w;
        r->wcap = cap;
    }
    if (nchars + 1 > r->pcap) {
        size_t cap = nchars + 1 < 256 ? 256 : (nchars + 1) * 2;
        size_t *b = modattn_realloc(r->bpos, cap * sizeof(size_t), MODATTN_MEM_OTHER);
        if (!b) return modattn_mem_last_status();
        r->bpos = b;
        tk_piece *p = modattn_realloc(r->pieces, cap * sizeof(tk_piece), MODATTN_MEM_OTHER);
        if (!p) return modattn_mem_last_status();
        r->pieces = p;
        r->pcap = cap;
    }
    return 0;
}

static int unk(tk_run *r, uint32_t s, uint32_t e) {
    if (r->t->unk_id < 0)
        return modattn_error(MODATTN_EFORMAT,
                             "tokenizer: a word needs the unk_token, which is not in model.vocab");
    emit(r, r->t->unk_id, s, e);
    return 0;
}

/* WordPiece on the normalised characters w[0, n). */
static int wordpiece(tk_run *r, const tk_char *w, size_t n) {
    const modattn_tokenizer *t = r->t;
    uint32_t ws = CH_S(w[0]), we = CH_E(w[n - 1]);
    if (n > t->max_chars) return unk(r, ws, we);
    int rc = grow_word(r, n, 4 * n);
    if (rc) return rc;
    unsigned char *buf = r->wbuf;
    size_t *bp = r->bpos;
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        bp[i] = nb;
        uint32_t cp = w[i].cp;
        if (cp < 0x80) {
            buf[nb++] = (unsigned char)cp;
        } else {
            nb += (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, buf + nb);
        }
    }
    bp[n] = nb;

    /* Greedy longest match first: HF tries the longest candidate and shortens it; walking the
     * trie forward and keeping the last key seen finds the same piece in one pass. */
    const tk_node *trie = t->trie;
    size_t np = 0, start = 0;
    while (start < n) {
        uint32_t node = start > 0 ? t->cont_root : 0;
        int32_t id = -1;
        size_t best = 0, end = start;
        if (node != TK_NONE) {
            for (size_t i = bp[start]; i < nb; i++) {
                node = trie_child(t, node, buf[i]);
                if (!node) break;
                if (trie[node].id >= 0) {
                    id = trie[node].id;
                    best = i + 1; /* keys are whole UTF-8 characters: a character boundary */
                }
            }
        }
        if (id >= 0)
            while (bp[end] < best) end++;
        if (id < 0) return unk(r, ws, we);
        r->pieces[np].id = id;
        r->pieces[np].s = CH_S(w[start]);
        r->pieces[np].e = CH_E(w[end - 1]);
        np++;
        start = end;
    }
    for (size_t i = 0; i < np && !r->full; i++) emit(r, r->pieces[i].id, r->pieces[i].s, r->pieces[i].e);
    return 0;
}

/* BertPreTokenizer + WordPiece over normalised characters c[a, b). */
static int pretok_and_model(tk_run *r, const tk_char *c, size_t a, size_t b) {
    const modattn_tokenizer *t = r->t;
    if (!t->has_pretok) return a < b ? wordpiece(r, c + a, b - a) : 0;
    size_t i = a;
    while (i < b && !r->full) {
        uint32_t cp = c[i].cp;
        if (tk_is_ws(t, cp)) {
            i++;
            continue;
        }
        if (tk_is_punct(t, cp)) {
            int rc = wordpiece(r, c + i, 1);
            if (rc) return rc;
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < b && !tk_is_ws(t, c[j].cp) && !tk_is_punct(t, c[j].cp)) j++;
        int rc = wordpiece(r, c + i, j - i);
        if (rc) return rc;
        i = j;
    }
    return 0;
}

/* Longest added token of set m matching at c[p] (c[p, b) available), or -1. */
static int match_at(const modattn_tokenizer *t, const tk_match_set *m, const tk_char *c, size_t p,
                    size_t b) {
    uint32_t cp = c[p].cp;
    if (cp < 128) {
        if (!((m->ascii_first[cp >> 6] >> (cp & 63)) & 1)) return -1;
    } else if (cp < m->min_first || cp > m->max_first) {
        return -1;
    }
    /* first index with first code point >= cp */
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->added[m->order[mid]].cps[0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < m->n; k++) {
        const tk_added *a = &t->added[m->order[k]];
        if (a->cps[0] != cp) break;
        if (a->ncps > b - p) continue;
        uint32_t q = 1;
        while (q < a->ncps && c[p + q].cp == a->cps[q]) q++;
        if (q == a->ncps) return (int)m->order[k];
    }
    return -1;
}

typedef int (*tk_gap_fn)(tk_run *r, const tk_char *c, size_t a, size_t b);

/* HF's AddedVocabulary::find_matches over c[a, b): gaps go to gap(), matches are emitted. */
static int split_added(tk_run *r, const tk_match_set *m, const tk_char *c, size_t a, size_t b,
                       tk_gap_fn gap) {
    const modattn_tokenizer *t = r->t;
    if (m->n == 0) return gap(r, c, a, b);
    size_t start_offset = a, p = a;
    while (p < b && !r->full) {
        int k = match_at(t, m, c, p, b);
        if (k < 0) {
            p++;
            continue;
        }
        const tk_added *at = &t->added[k];
        size_t start = p, stop = p + at->ncps;
        p = stop; /* matching goes on after the match, kept or not */
        if (at->single_word) {
            bool start_space = start == a || !is_word_char(c[start - 1].cp);
            bool stop_space = stop == b || !is_word_char(c[stop].cp);
            if (!start_space || !stop_space) continue;
        }
        if (at->lstrip) {
            size_t ns = start;
            while (ns > a && tk_is_ws(t, c[ns - 1].cp)) ns--;
            start = ns > start_offset ? ns : start_offset;
        }
        if (at->rstrip)
            while (stop < b && tk_is_ws(t, c[stop].cp)) stop++;
        if (start_offset < start) {
            int rc = gap(r, c, start_offset, start);
            if (rc) return rc;
            if (r->full) return 0;
        }
        emit(r, at->id, CH_S(c[start]), CH_E(c[stop - 1]));
        start_offset = stop;
    }
    if (start_offset < b && !r->full) return gap(r, c, start_offset, b);
    return 0;
}

static int normalized_gap(tk_run *r, const tk_char *c, size_t a, size_t b) {
    return pretok_and_model(r, c, a, b);
}

/* A segment of the raw text between raw added tokens: normalise it, then split on the
 * normalised added tokens, then pre-tokenise and run the model. */
static int raw_gap(tk_run *r, const tk_char *c, size_t a, size_t b) {
    if (a >= b) return 0;
    int rc = normalize(r->t, c, a, b, &r->norm, &r->mid, &r->tmp);
    if (rc) return rc;
    return split_added(r, &r->t->norm, r->norm.v, 0, r->norm.n, normalized_gap);
}

static bool ascii_ws_byte(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }

int modattn_tokenize_ex(const modattn_tokenizer *t, const char *text, size_t len, unsigned flags,
                        int32_t *ids, modattn_token_offset *offsets, size_t max_tokens,
                        size_t *n) {
    if (n) *n = 0;
    if (!t || !n || (!text && len) || (!ids && max_tokens))
        return modattn_error(MODATTN_EINVAL, "modattn_tokenize: NULL argument");
    if (flags & ~MODATTN_TOKENIZE_NO_SPECIALS)
        return modattn_error(MODATTN_EINVAL, "modattn_tokenize: unknown flags 0x%x", flags);
    bool specials = !(flags & MODATTN_TOKENIZE_NO_SPECIALS);
    size_t nspec = specials ? t->npre + t->npost : 0;
    if (max_tokens < nspec || (specials && max_tokens < 2))
        return modattn_error(MODATTN_EINVAL,
                             "modattn_tokenize: max_tokens %zu is less than the %zu special tokens",
                             max_tokens, specials && nspec < 2 ? (size_t)2 : nspec);

    tk_run r;
    memset(&r, 0, sizeof r);
    r.t = t;
    r.text = (const uint8_t *)text;
    r.cap = max_tokens - nspec;
    size_t base = specials ? t->npre : 0;
    r.ids = ids + base;
    r.offs = offsets ? offsets + base : NULL;
    r.full = r.cap == 0;

    int rc = 0;
    size_t pos = 0;
    while (pos < len && !r.full) {
        size_t end = len;
        if (t->can_block && len - pos > 2 * TK_BLOCK_BYTES) {
            /* cut just after an ASCII whitespace byte or just before an ASCII punctuation
             * byte that no added token contains: no word, added token or run of combining
             * marks spans such a place. With lstrip/rstrip tokens, after a whole run of
             * whitespace (their offsets may still miss whitespace across a cut). */
            size_t q = pos + TK_BLOCK_BYTES;
            while (q < len && !(r.text[q] < 128 && t->ascii_cut[r.text[q]])) q++;
            if (q < len && ascii_ws_byte(r.text[q])) {
                q++;
                if (t->strip_ws_tokens)
                    while (q < len && ascii_ws_byte(r.text[q])) q++;
            }
            end = q;
        }
        if (end - pos > UINT32_MAX - 8) {
            rc = modattn_error(MODATTN_ERANGE,
                               "modattn_tokenize: over 4 GiB of text without whitespace or punctuation");
            break;
        }
        r.base = pos;
        r.dec.n = 0;
        if ((rc = decode_utf8(r.text, pos, end, &r.dec))) break;
        if ((rc = split_added(&r, &t->raw, r.dec.v, 0, r.dec.n, raw_gap))) break;
        pos = end;
    }

    vec_free(&r.dec);
    vec_free(&r.norm);
    vec_free(&r.mid);
    vec_free(&r.tmp);
    modattn_free(r.wbuf);
    modattn_free(r.bpos);
    modattn_free(r.pieces);
    if (rc) return rc;

    size_t total = r.n;
    if (specials) {
        for (size_t i = 0; i < t->npre; i++) {
            ids[i] = t->pre_ids[i];
            if (offsets) offsets[i].start = offsets[i].end = 0;
        }
        for (size_t i = 0; i < t->npost; i++) {
            size_t k = t->npre + r.n + i;
            ids[k] = t->post_ids[i];
            if (offsets) offsets[k].start = offsets[k].end = 0;
        }
        total += nspec;
    }
    *n = total;
    return 0;
}

int modattn_tokenize(const modattn_tokenizer *t, const char *text, size_t len, int32_t *ids,
                     size_t max_tokens, size_t *n) {
    return modattn_tokenize_ex(t, text, len, 0, ids, NULL, max_tokens, n);
}

int modattn_tokenize_offsets(const modattn_tokenizer *t, const char *text, size_t len,
                             int32_t *ids, modattn_token_offset *offsets, size_t max_tokens,
                             size_t *n) {
    return modattn_tokenize_ex(t, text, len, 0, ids, offsets, max_tokens, n);
}

/* ------------------------------------------------------------------ accessors */

int32_t modattn_tokenizer_cls_id(const modattn_tokenizer *t) { return t ? t->cls_id : -1; }
int32_t modattn_tokenizer_sep_id(const modattn_tokenizer *t) { return t ? t->sep_id : -1; }
int32_t modattn_tokenizer_pad_id(const modattn_tokenizer *t) { return t ? t->pad_id : -1; }
int32_t modattn_tokenizer_unk_id(const modattn_tokenizer *t) { return t ? t->unk_id : -1; }
size_t modattn_tokenizer_vocab_size(const modattn_tokenizer *t) { return t ? t->nids : 0; }
size_t modattn_tokenizer_num_specials(const modattn_tokenizer *t) {
    return t ? t->npre + t->npost : 0;
}

const char *modattn_tokenizer_token(const modattn_tokenizer *t, int32_t id) {
    if (!t || id < 0 || (size_t)id >= t->nids || t->tok_off[id] == TK_NONE) return NULL;
    return t->slab + t->tok_off[id];
}

int32_t modattn_tokenizer_find(const modattn_tokenizer *t, const char *token, size_t len) {
    if (!t || !token) return -1;
    int32_t id = vocab_find(t, token, len);
    if (id >= 0) return id;
    for (uint32_t i = 0; i < t->nadded; i++) { /* added tokens outside the vocabulary */
        const char *s = modattn_tokenizer_token(t, t->added[i].id);
        if (s && t->tok_len[t->added[i].id] == len && memcmp(s, token, len) == 0) return t->added[i].id;
    }
    return -1;
}

void modattn_tokenizer_free(modattn_tokenizer *t) {
    if (!t) return;
    modattn_free(t->slab);
    modattn_free(t->tok_off);
    modattn_free(t->tok_len);
    modattn_free(t->slots);
    modattn_free(t->trie);
    modattn_free(t->trie_label);
    modattn_free(t->trie_dense);
    modattn_free(t->added);
    modattn_free(t->added_cps);
    modattn_free(t->raw.order);
    modattn_free(t->norm.order);
    modattn_free(t);
}

/* ------------------------------------------------------------------ loading */

typedef struct tk_load {
    const char *path;
    modattn_tokenizer *t;
    json_t *root;
} tk_load;

static int ferr(const tk_load *L, int status, const char *field, const char *what) {
    return modattn_error(status, "tokenizer %s: field \"%s\": %s", L->path, field, what);
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
        return modattn_error(MODATTN_EUNSUPPORTED,
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
        return modattn_error(MODATTN_EUNSUPPORTED,
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

typedef struct tk_key {
    const char *s;
    uint32_t len;
    int32_t id;
} tk_key;

static int cmp_key(const void *x, const void *y) {
    const tk_key *a = x, *b = y;
    size_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, m);
    if (c) return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* The vocab trie, built breadth-first over the sorted keys so each node's children are
 * contiguous; iterative, so a long key cannot exhaust the stack. */
static int build_trie(tk_load *L) {
    modattn_tokenizer *t = L->t;
    size_t nkeys = 0, bytes = 0;
    for (size_t id = 0; id < t->nids; id++)
        if (t->tok_off[id] != TK_NONE) {
            nkeys++;
            bytes += t->tok_len[id];
        }
    if (bytes + 1 >= TK_NONE) return ferr(L, MODATTN_ERANGE, "model.vocab", "too many bytes");
    tk_key *keys = modattn_malloc(nkeys * sizeof(tk_key), MODATTN_MEM_OTHER);
    /* work items: node, key range [lo, hi), depth */
    typedef struct { uint32_t node, lo, hi, depth; } item;
    item *work = modattn_malloc((bytes + 1) * sizeof(item), MODATTN_MEM_OTHER);
    t->trie = modattn_malloc((bytes + 1) * sizeof(tk_node), MODATTN_MEM_WEIGHTS);
    t->trie_label = modattn_malloc(bytes + 1, MODATTN_MEM_WEIGHTS);
    int rc = 0;
    if (!keys || !work || !t->trie || !t->trie_label) {
        rc = modattn_error_prefix(modattn_mem_last_status(), "loading %s", L->path);
        goto done;
    }
    size_t k = 0;
    for (size_t id = 0; id < t->nids; id++)
        if (t->tok_off[id] != TK_NONE) {
            keys[k].s = t->slab + t->tok_off[id];
            keys[k].len = t->tok_len[id];
            keys[k].id = (int32_t)id;
            k++;
        }
    qsort(keys, nkeys, sizeof(tk_key), cmp_key);
    uint32_t nnodes = 1, ndense = 0;
    t->trie[0] = (tk_node){-1, 0, TK_NONE, 0};
    t->trie_label[0] = 0;
    size_t head = 0, tail = 0;
    work[tail++] = (item){0, 0, (uint32_t)nkeys, 0};
    while (head < tail) {
        item w = work[head++];
        uint32_t lo = w.lo;
        if (lo < w.hi && keys[lo].len == w.depth) t->trie[w.node].id = keys[lo++].id;
        t->trie[w.node].first = nnodes;
        while (lo < w.hi) {
            unsigned char b = (unsigned char)keys[lo].s[w.depth];
            uint32_t hi = lo + 1;
            while (hi < w.hi && (unsigned char)keys[hi].s[w.depth] == b) hi++;
            t->trie[nnodes] = (tk_node){-1, 0, TK_NONE, 0};
            t->trie_label[nnodes] = b;
            t->trie[w.node].n++;
            work[tail++] = (item){nnodes, lo, hi, w.depth + 1};
            nnodes++;
            lo = hi;
        }
        if (t->trie[w.node].n >= TK_DENSE_MIN) t->trie[w.node].dense = ndense++;
    }
    /* give back the unused tail, then fill the dense tables */
    tk_node *shrunk = modattn_realloc(t->trie, nnodes * sizeof(tk_node), MODATTN_MEM_WEIGHTS);
    if (shrunk) t->trie = shrunk;
    if (ndense) {
        t->trie_dense = modattn_calloc((size_t)ndense * 256, sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
        if (!t->trie_dense) {
            rc = modattn_error_prefix(modattn_mem_last_status(), "loading %s", L->path);
            goto done;
        }
        for (uint32_t i = 0; i < nnodes; i++) {
            const tk_node *nd = &t->trie[i];
            if (nd->dense == TK_NONE) continue;
            for (uint32_t c = nd->first; c < nd->first + nd->n; c++)
                t->trie_dense[(size_t)nd->dense * 256 + t->trie_label[c]] = c;
        }
    }
    t->cont_root = 0;
    for (size_t i = 0; i < t->prefix_len && t->cont_root != TK_NONE; i++) {
        uint32_t c = trie_child(t, t->cont_root, (uint8_t)t->prefix[i]);
        t->cont_root = c ? c : TK_NONE;
    }
done:
    modattn_free(keys);
    modattn_free(work);
    return rc;
}

static int load_model(tk_load *L) {
    modattn_tokenizer *t = L->t;
    json_t *m = json_object_get(L->root, "model");
    if (!json_is_object(m)) return ferr(L, MODATTN_EFORMAT, "model", "missing or not an object");
    json_t *jt = json_object_get(m, "type");
    const char *type = json_string_value(jt);
    if (jt && !type) return ferr(L, MODATTN_EFORMAT, "model.type", "expected a string");
    if (type && strcmp(type, "WordPiece") != 0)
        return modattn_error(MODATTN_EUNSUPPORTED,
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
        if (rc) return modattn_error_prefix(rc, "token \"%.40s\"", key);
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
    t->slab = modattn_malloc(slab_bytes, MODATTN_MEM_WEIGHTS);
    t->tok_off = modattn_malloc(t->nids * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    t->tok_len = modattn_calloc(t->nids, sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    size_t nslots = 16;
    while (nslots < count * 2) nslots *= 2;
    t->slots = modattn_calloc(nslots, sizeof(tk_slot), MODATTN_MEM_WEIGHTS);
    if (!t->slab || !t->tok_off || !t->tok_len || !t->slots)
        return modattn_error_prefix(modattn_mem_last_status(), "loading %s", L->path);
    t->slot_mask = nslots - 1;
    memset(t->tok_off, 0xFF, t->nids * sizeof(uint32_t));
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
        memcpy(t->slab + off, key, kl + 1);
        t->tok_off[id] = (uint32_t)off;
        t->tok_len[id] = (uint32_t)kl;
        off += kl + 1;
        if (kl > t->max_key_len) t->max_key_len = kl;
        uint64_t h = tk_hash(key, kl);
        size_t i = (size_t)h & t->slot_mask;
        while (t->slots[i].id1) i = (i + 1) & t->slot_mask;
        t->slots[i].id1 = (uint32_t)id + 1;
        t->slots[i].tag = (uint32_t)(h >> 32);
    }

    int rc = build_trie(L);
    if (rc) return rc;

    /* unk token */
    json_t *ju = json_object_get(m, "unk_token");
    const char *unk = "[UNK]";
    if (ju && !json_is_null(ju)) {
        unk = json_string_value(ju);
        if (!unk) return ferr(L, MODATTN_EFORMAT, "model.unk_token", "expected a string");
    }
    t->unk_id = vocab_find(t, unk, strlen(unk));

    /* added tokens: id -> string for ids the vocabulary lacks, code points for matching */
    if (nadded) {
        t->added = modattn_calloc(nadded, sizeof(tk_added), MODATTN_MEM_WEIGHTS);
        t->added_cps = modattn_calloc(added_cps, sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
        if (!t->added || !t->added_cps)
            return modattn_error_prefix(modattn_mem_last_status(), "loading %s", L->path);
    }
    size_t cp_off = 0;
    for (size_t i = 0; i < nadded; i++) {
        json_t *a = json_array_get(added, i);
        const char *content = json_string_value(json_object_get(a, "content"));
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        size_t cl = strlen(content);
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
        for (uint32_t k = 0; k < a->ncps && !rc; k++) rc = vec_push(&in, a->cps[k], k, k + 1);
        if (rc) break;
        if ((rc = normalize(t, in.v, 0, in.n, &out, &mid, &tmp))) break;
        /* the slot holds 3 * bytes + 4 >= 3 * chars + 4 code points */
        if (out.n > (size_t)a->ncps * 3 + 4) {
            rc = ferr(L, MODATTN_EFORMAT, "added_tokens[].content", "normalises to too many characters");
            break;
        }
        for (size_t k = 0; k < out.n; k++) a->cps[k] = out.v[k].cp;
        a->ncps = (uint32_t)out.n; /* may be 0: such a token never matches */
    }
    vec_free(&in);
    vec_free(&out);
    vec_free(&mid);
    vec_free(&tmp);
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
    m->order = modattn_malloc(n * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    if (!m->order) return modattn_error_prefix(modattn_mem_last_status(), "loading %s", L->path);
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

static int load_post(tk_load *L) {
    modattn_tokenizer *t = L->t;
    json_t *p = json_object_get(L->root, "post_processor");
    if (!p || json_is_null(p)) return 0;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return ferr(L, MODATTN_EFORMAT, "post_processor.type", "missing");
    int rc;
    if (strcmp(type, "TemplateProcessing") == 0) {
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
    } else {
        return modattn_error(MODATTN_EUNSUPPORTED,
                             "tokenizer %s: field \"post_processor.type\": \"%s\" is not supported "
                             "(TemplateProcessing, BertProcessing, RobertaProcessing or null)",
                             L->path, type);
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

int modattn_tokenizer_load(const char *path, modattn_tokenizer **out) {
    if (!path || !out) return modattn_error(MODATTN_EINVAL, "modattn_tokenizer_load: NULL argument");
    *out = NULL;
    json_error_t jerr;
    json_t *root = NULL;
    int st = modattn_json_load_file(path, 0, &root, &jerr);
    if (st == MODATTN_EIO)
        return modattn_error(MODATTN_EIO, "tokenizer %s: cannot open: %s", path, jerr.text);
    if (st == MODATTN_EFORMAT)
        return modattn_error(MODATTN_EFORMAT, "tokenizer %s: line %d column %d: %s", path, jerr.line,
                             jerr.column, jerr.text);
    if (st) return modattn_error_prefix(st, "tokenizer %s: reading the JSON", path);
    modattn_tokenizer *t = modattn_calloc(1, sizeof *t, MODATTN_MEM_WEIGHTS);
    if (!t) {
        json_decref(root);
        return modattn_error_prefix(modattn_mem_last_status(), "loading %s", path);
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
    if (!rc) rc = load_normalizer(&L);
    if (!rc) rc = load_pretokenizer(&L);
    if (!rc) rc = load_model(&L);
    if (!rc) rc = normalize_added(&L);
    if (!rc) rc = build_match_set(&L, &t->raw, false);
    if (!rc) rc = build_match_set(&L, &t->norm, true);
    if (!rc) rc = load_post(&L);
    if (!rc) {
        t->can_block = t->has_pretok;
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
