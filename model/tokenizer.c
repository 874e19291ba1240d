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
 * punctuation (places nothing in the pipeline looks across; Unigram tokenizers: before a space
 * after a letter or digit, modattn__tk_unigram_cut), so scratch memory stays bounded
 * and work stops as soon as the id budget is full. The vocabulary is one string slab with a
 * hash table (string -> id) and a byte trie, in which WordPiece finds each longest match in a
 * single forward walk. Time is linear in the text.
 *
 * This file is the run time; model/tokenizer_load.c builds the tables from tokenizer.json. */
#include "modattn/tokenizer.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/internal_tokenize.h"
#include "model/tokenizer_internal.h"

/* ------------------------------------------------------------------ Unicode classes */

static bool is_cjk(uint32_t cp) {
    /* The ranges tokenizers' BertNormalizer uses (note 0x2B920, not BERT's 0x2B820). */
    if (cp < 0x3400) return false;
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
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

/* ------------------------------------------------------------------ UTF-8 decoding */

/* Decode bytes [b, e) of s into out, as Python's bytes.decode("utf-8", errors="replace"):
 * each maximal ill-formed subpart becomes one U+FFFD. Offsets are relative to b. */
static int decode_utf8(const uint8_t *s, size_t b, size_t e, tk_vec *out) {
    int rc = modattn__tk_vec_reserve(out, out->n + (e - b));
    if (rc) return rc;
    size_t i = b;
    while (i < e) {
        tk_char *d = &out->v[out->n++];
        size_t k = modattn__tk_utf8_one(s, i, e, &d->cp);
        d->ccc = 0;
        d->s = (uint32_t)(i - b);
        d->len = (uint8_t)k;
        i += k;
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
            int rc = modattn__tk_vec_reserve(tmp, len);
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
    if (!t->lowercase) return modattn__tk_vec_push(out, cp, s, e);
    uint32_t l[2];
    int k = modattn__tk_lower_cp(cp, l);
    for (int j = 0; j < k; j++) {
        int rc = modattn__tk_vec_push(out, l[j], s, e);
        if (rc) return rc;
    }
    return 0;
}

/* BertNormalizer over in[a, b) -> out (cleared first). mid and tmp are scratch. */
int modattn__tk_normalize(const modattn_tokenizer *t, const tk_char *in, size_t a, size_t b, tk_vec *out, tk_vec *mid,
                          tk_vec *tmp) {
    out->n = 0;
    int rc = modattn__tk_vec_reserve(out, b - a);
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
                if ((rc = modattn__tk_vec_push(dst, ' ', s, e)) || (rc = modattn__tk_vec_push(dst, cp, s, e)) ||
                    (rc = modattn__tk_vec_push(dst, ' ', s, e)))
                    return rc;
            } else if ((rc = modattn__tk_vec_push(dst, cp, s, e))) {
                return rc;
            }
        } else if (t->cjk && is_cjk(cp)) {
            if ((rc = modattn__tk_vec_push(dst, ' ', s, e)) || (rc = push_lower(t, dst, cp, s, e)) ||
                (rc = modattn__tk_vec_push(dst, ' ', s, e)))
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
            if ((rc = modattn__tk_vec_push(tmp, cp, s, e))) return rc;
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
            if ((rc = modattn__tk_vec_push(tmp, (uint32_t)d[k], s, e))) return rc;
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
    tk_vec cn, cm, ct; /* scratch for classifying single characters (find_cut) */
    tk_uscratch *us;   /* the Unigram path's scratch (tokenizer_unigram.c) */
    tk_bscratch *bs;   /* the BPE path's (tokenizer_bpe.c) */
    size_t len;        /* the text's length (trim_offsets steps over its characters) */
    size_t index0;     /* index of the first token in the encoding trim_offsets sees */
    size_t seg_orig;   /* first byte of the current raw segment in the text (Metaspace "first") */
    uint32_t seg_start; /* the same, in the block */
    modattn__tk_pieces *grow; /* modattn__tokenize_pieces: the output, grown inside a long block */
    bool growing;             /* in such a block: the budget does not stop it */
    int err;                  /* growing failed */
} tk_run;

/* ByteLevel's (and RobertaProcessing's) trim_offsets, as HF's process_offsets: a token's leading
 * and trailing spaces ("\u0120", the byte-level space, or White_Space) are taken off its offsets,
 * counted in characters of the text (the offsets HF trims are character offsets); the first
 * token (index 0 or offset 0) keeps one leading space that add_prefix_space put there. The
 * index is the token's in the encoding HF trims (after a template's specials when the template
 * ran first). The spaces are counted in the token's string, which for an added token is the
 * text it matched (lstrip/rstrip whitespace included), as HF's token value. */
static bool tk_trim_space(uint32_t cp) { return cp == 0x120 || modattn__tk_bpe_is_space(cp); }

static size_t edge_spaces(const char *s, bool rev) {
    size_t n = strlen(s), count = 0;
    utf8proc_ssize_t pos = 0;
    if (!rev) {
        while ((size_t)pos < n) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s + pos, (utf8proc_ssize_t)n - pos, &cp);
            if (m <= 0 || !(cp == 0x120 || modattn__tk_bpe_is_space((uint32_t)cp))) break;
            count++;
            pos += m;
        }
        return count;
    }
    /* from the end: the run of spaces the token ends with */
    while ((size_t)pos < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)s + pos, (utf8proc_ssize_t)n - pos, &cp);
        if (m <= 0) break;
        count = cp == 0x120 || modattn__tk_bpe_is_space((uint32_t)cp) ? count + 1 : 0;
        pos += m;
    }
    return count;
}

static void trim_one(const modattn_tokenizer *t, const uint8_t *text, size_t len, size_t index, size_t lead,
                     size_t trail, size_t *sp, size_t *ep) {
    size_t s = *sp, e = *ep;
    if (lead) {
        bool first = index == 0 || s == 0;
        if (first && t->trim_prefix_space && lead == 1) lead = 0;
        for (size_t k = 0; k < lead && s < e; k++) {
            uint32_t cp;
            s += modattn__tk_utf8_one(text, s, len, &cp);
        }
        if (s > e) s = e;
    }
    if (trail) {
        size_t cnt = 0;
        for (size_t q = s; q < e; cnt++) {
            uint32_t cp;
            q += modattn__tk_utf8_one(text, q, len, &cp);
        }
        if (cnt >= trail) {
            size_t q = s;
            for (size_t k = 0; k < cnt - trail; k++) {
                uint32_t cp;
                q += modattn__tk_utf8_one(text, q, len, &cp);
            }
            e = q;
        } else {
            /* fewer characters than trailing spaces after s: HF's end - trail, if the text
             * has that many characters before e, is at or before s */
            size_t before = 0;
            for (size_t z = 0; z < e && before < trail; before++) {
                uint32_t cp;
                z += modattn__tk_utf8_one(text, z, len, &cp);
            }
            if (before >= trail) e = s;
        }
    }
    *sp = s;
    *ep = e;
}

/* Room for more pieces inside a long block (modattn__tokenize_pieces): false, with r->err set,
 * when memory runs out. */
static bool grow_output(tk_run *r) {
    modattn__tk_pieces *p = r->grow;
    size_t cap = p->cap * 2;
    int32_t *ids = modattn__realloc(p->ids, cap * sizeof *ids, MODATTN_MEM_OTHER);
    if (!ids) {
        r->err = modattn__mem_last_status();
        return false;
    }
    p->ids = r->ids = ids;
    modattn_token_offset *offs = modattn__realloc(p->offs, cap * sizeof *offs, MODATTN_MEM_OTHER);
    if (!offs) {
        r->err = modattn__mem_last_status();
        return false;
    }
    p->offs = r->offs = offs;
    p->cap = r->cap = cap;
    return true;
}

/* lead, trail: the token's leading and trailing spaces for trim_offsets (SIZE_MAX: count them in
 * the id's string) */
static void emit_ex(tk_run *r, int32_t id, uint32_t s, uint32_t e, size_t lead, size_t trail) {
    if (r->n >= r->cap && !(r->growing && grow_output(r))) {
        r->full = true;
        return;
    }
    r->ids[r->n] = id;
    if (r->offs) {
        size_t as = r->base + s, ae = r->base + e;
        if (r->t->trim_offsets) {
            const char *tok = lead == SIZE_MAX ? modattn_tokenizer_token(r->t, id) : NULL;
            if (lead == SIZE_MAX) {
                lead = tok ? edge_spaces(tok, false) : 0;
                trail = tok ? edge_spaces(tok, true) : 0;
            }
            if (lead || trail) trim_one(r->t, r->text, r->len, r->n + r->index0, lead, trail, &as, &ae);
        }
        r->offs[r->n].start = as;
        r->offs[r->n].end = ae;
    }
    if (++r->n >= r->cap && !r->growing) r->full = true;
}

static void emit(tk_run *r, int32_t id, uint32_t s, uint32_t e) { emit_ex(r, id, s, e, SIZE_MAX, SIZE_MAX); }


static int grow_word(tk_run *r, size_t nchars, size_t nbytes) {
    size_t need = nbytes + 1;
    if (need > r->wcap) {
        size_t cap = need < 1024 ? 1024 : need * 2;
        unsigned char *w = modattn__realloc(r->wbuf, cap, MODATTN_MEM_OTHER);
        if (!w) return modattn__mem_last_status();
        r->wbuf = w;
        r->wcap = cap;
    }
    if (nchars + 1 > r->pcap) {
        size_t cap = nchars + 1 < 256 ? 256 : (nchars + 1) * 2;
        size_t *b = modattn__realloc(r->bpos, cap * sizeof(size_t), MODATTN_MEM_OTHER);
        if (!b) return modattn__mem_last_status();
        r->bpos = b;
        tk_piece *p = modattn__realloc(r->pieces, cap * sizeof(tk_piece), MODATTN_MEM_OTHER);
        if (!p) return modattn__mem_last_status();
        r->pieces = p;
        r->pcap = cap;
    }
    return 0;
}

static int unk(tk_run *r, uint32_t s, uint32_t e) {
    if (r->t->unk_id < 0)
        return modattn__error(MODATTN_EFORMAT,
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

static void emit_cb(void *ctx, int32_t id, uint32_t s, uint32_t e) { emit((tk_run *)ctx, id, s, e); }

/* BertPreTokenizer + WordPiece over normalised characters c[a, b) (or the Unigram path's
 * pre-tokenizers and model). */
static int pretok_and_model(tk_run *r, const tk_char *c, size_t a, size_t b) {
    const modattn_tokenizer *t = r->t;
    if (t->unigram) {
        /* a split after a normalised added token starts where its first character came from */
        size_t orig = a == 0 ? r->seg_orig : r->base + CH_S(c[a]);
        return modattn__tk_unigram_run(t, &r->us, c, a, b, orig, r->base, emit_cb, r, &r->full);
    }
    if (t->bpe) return modattn__tk_bpe_run(t, &r->bs, c, a, b, emit_cb, r, &r->full);
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
        size_t lead = 0, trail = 0;
        while (start + lead < stop && tk_trim_space(c[start + lead].cp)) lead++;
        while (trail < stop - start && tk_trim_space(c[stop - 1 - trail].cp)) trail++;
        emit_ex(r, at->id, CH_S(c[start]), CH_E(c[stop - 1]), lead, trail);
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
    int rc;
    if (r->t->unigram || r->t->bpe) {
        r->seg_start = CH_S(c[a]);
        r->seg_orig = r->base + r->seg_start;
        rc = modattn__tk_unorm(r->t, &r->us, c, a, b, r->seg_start, &r->norm);
    } else {
        rc = modattn__tk_normalize(r->t, c, a, b, &r->norm, &r->mid, &r->tmp);
    }
    if (rc) return rc;
    return split_added(r, &r->t->norm, r->norm.v, 0, r->norm.n, normalized_gap);
}

static bool ascii_ws_byte(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }

/* ---- where a long text may be cut into blocks
 *
 * A block is decoded, normalised and pre-tokenised as a whole (about 50 bytes of scratch per
 * byte), so blocks must stay short. A cut between characters A and B gives the same pieces and
 * offsets as no cut when: neither normalises to nothing; B's normalisation begins with a starter
 * (canonical reordering never crosses it); A's normalisation ends or B's begins with whitespace
 * or punctuation (no word spans the cut: BertPreTokenizer splits there); no added token holds
 * A then B (raw tokens: the characters; normalised ones: A's last and B's first normalised
 * character); no single_word token ends with A or begins with B (its word-boundary test would
 * look across); no rstrip
 * token ends with A, no lstrip token begins with B, and not whitespace on both sides when
 * strip tokens exist (stripping would cross). ASCII whitespace and punctuation in no added token
 * are the fast case (t->ascii_cut).
 *
 * A text with no such place for a long way (one 10 MB "word", a line of letters without spaces)
 * would still make one huge block. When every character from the block's target end on is
 * "plain" (its normalisation holds no whitespace or punctuation, and it begins no added token)
 * that whole stretch is part of one word longer than WordPiece's cap, which becomes one [UNK]
 * from the word's start to its end: the block then keeps the stretch's first characters (enough
 * to pass the cap and to finish any added token begun before it) and its last ones (from the
 * last starter on, so the word's end offset is exact), and drops the middle unread. */
typedef struct tk_cls {
    uint32_t first, last; /* first and last normalised characters (when !empty) */
    bool empty, starter, sep_first, sep_last, ws_last, ws_all, plain, raw_ws;
} tk_cls;

static bool set_pair(const modattn_tokenizer *t, const tk_match_set *m, uint32_t x, uint32_t y) {
    for (uint32_t k = 0; k < m->n; k++) {
        const tk_added *a = &t->added[m->order[k]];
        for (uint32_t i = 0; i + 1 < a->ncps; i++)
            if (a->cps[i] == x && a->cps[i + 1] == y) return true;
    }
    return false;
}

/* some token of m begins (end = false) or ends with x; with `flags` 1 single_word, 2 lstrip,
 * 4 rstrip: only such tokens; 0: any */
static bool set_edge(const modattn_tokenizer *t, const tk_match_set *m, uint32_t x, bool end, unsigned flags) {
    for (uint32_t k = 0; k < m->n; k++) {
        const tk_added *a = &t->added[m->order[k]];
        if (!a->ncps || a->cps[end ? a->ncps - 1 : 0] != x) continue;
        if (!flags || ((flags & 1) && a->single_word) || ((flags & 2) && a->lstrip) || ((flags & 4) && a->rstrip))
            return true;
    }
    return false;
}

static int classify(tk_run *r, uint32_t cp, tk_cls *c) {
    const modattn_tokenizer *t = r->t;
    tk_char one = {cp, 0, 1, 0};
    int rc = modattn__tk_normalize(t, &one, 0, 1, &r->cn, &r->cm, &r->ct);
    if (rc) return rc;
    memset(c, 0, sizeof *c);
    c->raw_ws = tk_is_ws(t, cp);
    c->empty = r->cn.n == 0;
    c->ws_all = !c->empty;
    bool sep_any = false, starts_norm = false;
    for (size_t i = 0; i < r->cn.n; i++) {
        uint32_t x = r->cn.v[i].cp;
        bool ws = tk_is_ws(t, x), sep = ws || tk_is_punct(t, x);
        sep_any |= sep;
        c->ws_all &= ws;
        if (set_edge(t, &t->norm, x, false, 0)) starts_norm = true;
        if (i == 0) {
            c->first = x;
            c->sep_first = sep;
            c->starter = !t->strip_accents || utf8proc_get_property((utf8proc_int32_t)x)->combining_class == 0;
        }
        if (i + 1 == r->cn.n) {
            c->last = x;
            c->sep_last = sep;
            c->ws_last = ws;
        }
    }
    c->ws_last |= c->raw_ws;
    c->ws_all &= c->raw_ws || !c->empty;
    c->plain = !sep_any && !c->raw_ws && !starts_norm && !set_edge(t, &t->raw, cp, false, 0);
    return 0;
}

static bool any_flag(const modattn_tokenizer *t, unsigned flag) {
    for (uint32_t i = 0; i < t->nadded; i++)
        if (((flag & 1) && t->added[i].single_word) || ((flag & 6) && (t->added[i].lstrip || t->added[i].rstrip)))
            return true;
    return false;
}

static bool cut_between(const modattn_tokenizer *t, uint32_t a, const tk_cls *ca, uint32_t b, const tk_cls *cb,
                        bool single, bool strip) {
    if (ca->empty || cb->empty || !cb->starter) return false;
    if (!ca->sep_last && !cb->sep_first) return false;
    if (set_pair(t, &t->raw, a, b) || set_pair(t, &t->norm, ca->last, cb->first)) return false;
    if (single && (set_edge(t, &t->raw, a, true, 1) ||
                   set_edge(t, &t->norm, ca->last, true, 1) || set_edge(t, &t->raw, b, false, 1) ||
                   set_edge(t, &t->norm, cb->first, false, 1)))
        return false;
    if (strip && ((ca->ws_last && cb->ws_all) || set_edge(t, &t->raw, a, true, 4) ||
                  set_edge(t, &t->norm, ca->last, true, 4) || set_edge(t, &t->raw, b, false, 2) ||
                  set_edge(t, &t->norm, cb->first, false, 2)))
        return false;
    return true;
}

#define TK_LONG_RUN (8u * TK_BLOCK_BYTES) /* a block longer than this is worth eliding */

/* The end of the block that starts at pos (len - pos > 2 blocks), and, when its middle may be
 * dropped, [*head_end, *tail_start) to drop (else both 0). */
static int find_cut(tk_run *r, size_t pos, size_t len, size_t *end, size_t *head_end, size_t *tail_start) {
    const modattn_tokenizer *t = r->t;
    const uint8_t *x = r->text;
    *head_end = *tail_start = 0;
    size_t q = pos + TK_BLOCK_BYTES;
    while (q < len && (x[q] & 0xC0) == 0x80) q++; /* to a character's first byte */
    const size_t q0 = q;
    bool single = any_flag(t, 1), strip = t->strip_ws_tokens && any_flag(t, 6);
    size_t longest = t->max_chars;
    for (uint32_t i = 0; i < t->nadded; i++)
        if (t->added[i].ncps > longest) longest = t->added[i].ncps;
    tk_cls ascii[128], prev_cls = {0}, cur;
    uint8_t have_ascii[128] = {0};
    uint32_t prev = 0, cached_cp = TK_NONE;
    tk_cls cached = {0};
    bool have_prev = false, plain = true;
    size_t nonempty = 0, head = 0, last_starter = 0;
    while (q < len) {
        uint8_t b = x[q];
        if (b < 128 && t->ascii_cut[b]) {
            /* the fast case: just before ASCII punctuation, just after ASCII whitespace (after
             * the whole run of it when strip tokens exist) */
            if (ascii_ws_byte(b)) {
                q++;
                if (t->strip_ws_tokens)
                    while (q < len && ascii_ws_byte(x[q])) q++;
            }
            break;
        }
        uint32_t cp;
        size_t k = modattn__tk_utf8_one(x, q, len, &cp);
        const tk_cls *c;
        if (cp < 128) {
            if (!have_ascii[cp]) {
                int rc = classify(r, cp, &ascii[cp]);
                if (rc) return rc;
                have_ascii[cp] = 1;
            }
            c = &ascii[cp];
        } else {
            if (cp != cached_cp) {
                int rc = classify(r, cp, &cached);
                if (rc) return rc;
                cached_cp = cp;
            }
            c = &cached;
        }
        cur = *c;
        if (have_prev && cut_between(t, prev, &prev_cls, cp, &cur, single, strip)) break;
        /* the elision's bookkeeping */
        if (plain && !cur.plain) plain = false;
        if (plain && !cur.empty) {
            if (cur.starter) {
                if (!head && nonempty > longest) head = q;
                last_starter = q;
            }
            nonempty++;
        }
        prev = cp;
        prev_cls = cur;
        have_prev = true;
        q += k;
    }
    *end = q;
    if (plain && head && last_starter > head && q - pos > TK_LONG_RUN && q0 < head) {
        *head_end = head;
        *tail_start = last_starter;
    }
    return 0;
}

static _Atomic uint64_t g_bytes_decoded; /* modattn__tokenize_bytes_decoded */

uint64_t modattn__tokenize_bytes_decoded(void) { return atomic_load_explicit(&g_bytes_decoded, memory_order_relaxed); }

size_t modattn__tk_long_block(const modattn_tokenizer *t) {
    return t && t->unigram ? MODATTN_TK_LONG_BLOCK_UNIGRAM : MODATTN_TK_LONG_BLOCK;
}

/* r's text, block after block from its start, until the budget (r->cap) is full or the text ends;
 * *reach: the end of the last block processed. With r->grow (modattn__tokenize_pieces), a block of
 * modattn__tk_long_block(t) bytes or more is finished whatever the budget, and the run stops after
 * it once the budget is full. */
static int run_blocks(tk_run *r, size_t len, size_t *reach) {
    const modattn_tokenizer *t = r->t;
    const size_t want = r->cap;
    int rc = 0;
    size_t pos = 0;
    while (pos < len && !r->full) {
        size_t end = len, head_end = 0, tail_start = 0;
        if (t->unigram) {
            if (len - pos > 2 * TK_BLOCK_BYTES && (rc = modattn__tk_unigram_cut(t, &r->us, r->text, pos, len, &end)))
                break;
        } else if (t->can_block && len - pos > 2 * TK_BLOCK_BYTES &&
                   (rc = find_cut(r, pos, len, &end, &head_end, &tail_start))) {
            break;
        }
        if (t->bpe_block && len - pos > 2 * TK_BLOCK_BYTES) {
            /* byte-level BPE: after a lone "\n" (behind a visible ASCII character) before an
             * ASCII letter (modattn__tk_bpe_can_block); a longer whitespace run would be split
             * differently at a block's end, where \s+(?!\S) takes all of it */
            size_t q = pos + TK_BLOCK_BYTES;
            const uint8_t *x = r->text;
            while (q < len && !(x[q - 1] == '\n' && x[q - 2] > ' ' && x[q - 2] < 0x7F &&
                                (((x[q] | 32) >= 'a' && (x[q] | 32) <= 'z'))))
                q++;
            end = q;
        }
        if (end - pos > UINT32_MAX - 8) {
            rc = modattn__error(MODATTN_ERANGE,
                               "modattn_tokenize: over 4 GiB of text without whitespace or punctuation");
            break;
        }
        if (r->grow) {
            r->growing = end - pos >= modattn__tk_long_block(t);
            r->cap = r->growing ? r->grow->cap : want;
        }
        r->base = pos;
        r->dec.n = 0;
        if (tail_start) {
            /* the middle of one long word, dropped unread (find_cut) */
            if ((rc = decode_utf8(r->text, pos, head_end, &r->dec))) break;
            size_t n0 = r->dec.n;
            if ((rc = decode_utf8(r->text, tail_start, end, &r->dec))) break;
            for (size_t i = n0; i < r->dec.n; i++) r->dec.v[i].s += (uint32_t)(tail_start - pos);
            atomic_fetch_add_explicit(&g_bytes_decoded, (head_end - pos) + (end - tail_start), memory_order_relaxed);
        } else if ((rc = decode_utf8(r->text, pos, end, &r->dec))) {
            break;
        } else {
            atomic_fetch_add_explicit(&g_bytes_decoded, end - pos, memory_order_relaxed);
        }
        if ((rc = split_added(r, &t->raw, r->dec.v, 0, r->dec.n, raw_gap))) break;
        if ((rc = r->err)) break;
        pos = end;
        if (r->growing && r->n >= want) break; /* a long block finished past the budget */
    }
    if (reach) *reach = pos;
    modattn__tk_vec_free(&r->dec);
    modattn__tk_vec_free(&r->norm);
    modattn__tk_vec_free(&r->mid);
    modattn__tk_vec_free(&r->tmp);
    modattn__tk_vec_free(&r->cn);
    modattn__tk_vec_free(&r->cm);
    modattn__tk_vec_free(&r->ct);
    modattn_free(r->wbuf);
    modattn_free(r->bpos);
    modattn_free(r->pieces);
    modattn__tk_uscratch_free(r->us);
    modattn__tk_bscratch_free(r->bs);
    return rc;
}

int modattn_tokenize_ex(const modattn_tokenizer *t, const char *text, size_t len, unsigned flags,
                        int32_t *ids, modattn_token_offset *offsets, size_t max_tokens,
                        size_t *n) {
    if (n) *n = 0;
    if (!t || !n || (!text && len) || (!ids && max_tokens))
        return modattn__error(MODATTN_EINVAL, "modattn_tokenize: NULL argument");
    if (flags & ~MODATTN_TOKENIZE_NO_SPECIALS)
        return modattn__error(MODATTN_EINVAL, "modattn_tokenize: unknown flags 0x%x", flags);
    bool specials = !(flags & MODATTN_TOKENIZE_NO_SPECIALS);
    size_t nspec = specials ? t->npre + t->npost : 0;
    if (max_tokens < nspec || (specials && max_tokens < 2))
        return modattn__error(MODATTN_EINVAL,
                             "modattn_tokenize: max_tokens %zu is less than the %zu special tokens",
                             max_tokens, specials && nspec < 2 ? (size_t)2 : nspec);

    tk_run r;
    memset(&r, 0, sizeof r);
    r.t = t;
    r.text = (const uint8_t *)text;
    r.len = len;
    r.index0 = specials && t->trim_after_template ? t->npre : 0;
    r.cap = max_tokens - nspec;
    size_t base = specials ? t->npre : 0;
    r.ids = ids + base;
    r.offs = offsets ? offsets + base : NULL;
    r.full = r.cap == 0;

    int rc = run_blocks(&r, len, NULL);
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

int modattn__tokenize_pieces(const modattn_tokenizer *t, const char *text, size_t len, size_t want,
                             modattn__tk_pieces *out, size_t *reach) {
    if (reach) *reach = 0;
    if (!t || !out || (!text && len) || want == 0)
        return modattn__error(MODATTN_EINVAL, "modattn__tokenize_pieces: NULL argument");
    out->n = 0;
    if (out->cap < want) {
        int32_t *ids = modattn__realloc(out->ids, want * sizeof *ids, MODATTN_MEM_OTHER);
        if (!ids) return modattn__mem_last_status();
        out->ids = ids;
        modattn_token_offset *offs = modattn__realloc(out->offs, want * sizeof *offs, MODATTN_MEM_OTHER);
        if (!offs) return modattn__mem_last_status();
        out->offs = offs;
        out->cap = want;
    }
    tk_run r;
    memset(&r, 0, sizeof r);
    r.t = t;
    r.text = (const uint8_t *)text;
    r.len = len;
    r.cap = want;
    r.ids = out->ids;
    r.offs = out->offs;
    r.grow = out;
    int rc = run_blocks(&r, len, reach);
    out->n = rc ? 0 : r.n;
    return rc;
}

void modattn__tk_pieces_free(modattn__tk_pieces *p) {
    if (!p) return;
    modattn_free(p->ids);
    modattn_free(p->offs);
    memset(p, 0, sizeof *p);
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
    int32_t id = modattn__tk_vocab_find(t, token, len);
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
    modattn__tk_unigram_free(t);
    modattn__tk_bpe_free(t);
    modattn_free(t->special_bits);
    modattn_free(t);
}

