/* model/tokenizer_internal.h — what the tokenizer's two halves share: the tokenizer object and
 * its tables (tokenizer_load.c builds them from tokenizer.json; tokenizer.c runs texts through
 * them), the scratch vectors, and the few helpers loading borrows from run time (the
 * normaliser, for normalised added tokens; the vocabulary hash). Not a public header. */
#ifndef MODATTN_TOKENIZER_INTERNAL_H
#define MODATTN_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modattn/tokenizer.h"
#include "model/tokenizer_unicode.h"

#define TK_BLOCK_BYTES 8192u      /* target raw bytes per processing block */
#define TK_MAX_PREFIX 64u         /* longest continuing_subword_prefix accepted */
#define TK_MAX_ID (1 << 24)       /* ids above this are refused (the id table is dense) */
#define TK_NONE 0xFFFFFFFFu

/* tokenizer.json's decoder types (modattn_tokenizer_decode) */
enum { TK_DEC_NONE = 0, TK_DEC_WORDPIECE, TK_DEC_BYTELEVEL, TK_DEC_OTHER, TK_DEC_METASPACE };

/* One character of s at i (i < e), as Python's bytes.decode("utf-8", errors="replace") reads it:
 * *cp (U+FFFD for a maximal ill-formed subpart); returns its length in bytes. A byte below 0x80 or
 * from 0xC0 up always starts one. */
static inline size_t modattn__tk_utf8_one(const uint8_t *s, size_t i, size_t e, uint32_t *cp_out) {
    uint8_t c = s[i];
    if (c < 0x80) {
        *cp_out = c;
        return 1;
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
    if (ok) {
        *cp_out = cp;
        return need + 1;
    }
    *cp_out = 0xFFFD;
    return k; /* the lead byte plus the continuation bytes that were valid */
}

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

/* One normalizer of a Unigram tokenizer's sequence (tokenizer_unigram.c). */
typedef enum tk_nkind { NK_PRECOMPILED, NK_REPLACE, NK_STRIP, NK_LOWERCASE, NK_NFD, NK_NFKD, NK_NFC, NK_NFKC } tk_nkind;
typedef struct tk_nstep {
    tk_nkind kind;
    uint32_t *pat, *rep; /* Replace: literal pattern and content as code points */
    uint32_t npat, nrep;
    uint32_t min_run;    /* Replace with a Regex "X{n,}" / "X+": runs of pat[0] of at least n */
    bool left, right;    /* Strip */
} tk_nstep;

/* One pre-tokenizer of a Unigram tokenizer's sequence. */
typedef enum tk_pkind { PK_METASPACE, PK_WHITESPACE_SPLIT } tk_pkind;
enum { MS_ALWAYS, MS_FIRST, MS_NEVER };
typedef struct tk_pstep {
    tk_pkind kind;
    uint32_t repl; /* Metaspace replacement */
    int prepend;   /* MS_* */
    bool split;
} tk_pstep;

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
    /* Unigram (model.type "Unigram", tokenizer_unigram.c): the same slab, hash and byte trie,
     * a score per id, Viterbi over the trie; the normalizers and pre-tokenizers as sequences */
    bool unigram, byte_fallback;
    double *scores;     /* [nids] */
    double min_score;
    int32_t byte_ids[256]; /* <0xXX> ids for byte_fallback, -1 where missing */
    tk_nstep *nsteps;
    uint32_t nnsteps;
    tk_pstep *psteps;
    uint32_t npsteps;
    uint32_t *cm_units; /* Precompiled charsmap: darts-clone double array */
    size_t cm_nunits;
    char *cm_pool;      /* its replacement strings, NUL-terminated */
    size_t cm_pool_len;
    /* BPE (model.type "BPE", tokenizer_bpe.c): the same slab and hash; merges as a hash of id
     * pairs; pre-tokenizers as a sequence (Split with a known pattern, ByteLevel); the Unigram
     * normalizer sequence (nsteps) */
    bool bpe, ignore_merges, fuse_unk, has_unk_token;
    struct tk_bstep *bsteps;
    uint32_t nbsteps;
    uint64_t *mkey;     /* merges: (left id << 32 | right id) + 1, 0 = empty */
    uint32_t *mrank, *mnew;
    size_t mmask;
    char *bpe_prefix, *bpe_suffix; /* continuing_subword_prefix / end_of_word_suffix, NULL if none */
    /* offsets trimmed as ByteLevel / RobertaProcessing trim_offsets do */
    bool trim_offsets, trim_prefix_space, trim_after_template;
    bool bpe_block; /* long texts may be cut after a "\n" before an ASCII letter (tokenizer_bpe.c) */
    /* decoder (tokenizer_decode.c): the tokenizer.json's `decoder` */
    uint8_t decoder;       /* TK_DEC_* */
    bool dec_cleanup;      /* WordPiece's cleanup */
    char dec_prefix[TK_MAX_PREFIX + 1]; /* WordPiece's prefix ("##"); Metaspace's replacement ("\u2581") */
    bool dec_strip_first;  /* Metaspace: the first token's replacements are dropped (prepend_scheme not "never") */
    char dec_type[32];     /* the type named, for TK_DEC_OTHER's refusal */
    uint8_t *special_bits; /* [nids / 8 + 1]: ids of added tokens with "special": true, NULL if none */
};


enum { C_DROP = 1, C_SPACE = 2, C_WS = 4, C_PUNCT = 8 };


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

bool modattn__tk_in_ranges(const modattn__cp_range *r, size_t n, uint32_t cp);
#define IN_TABLE(tab, cp) modattn__tk_in_ranges(tab, sizeof(tab) / sizeof(tab[0]), cp)

static inline bool tk_is_ws(const modattn_tokenizer *t, uint32_t cp) {
    return cp < 128 ? (t->ascii_cls[cp] & C_WS) != 0 : IN_TABLE(modattn__tok_white, cp);
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

uint64_t modattn__tk_hash(const void *p, size_t n);
/* The id of a vocabulary string, or -1. */
int32_t modattn__tk_vocab_find(const modattn_tokenizer *t, const char *key, size_t len);
/* tokenizer_util.c: key (kl bytes, NUL-terminated) as id's string: into the slab at *off (moved past
 * it), and into the hash table; the caller sized both */
void modattn__tk_vocab_insert(modattn_tokenizer *t, int32_t id, const char *key, size_t kl, size_t *off);
int modattn__tk_vec_reserve(tk_vec *x, size_t need); /* tokenizer_util.c: room for need characters */
int modattn__tk_vec_push(tk_vec *x, uint32_t cp, uint32_t s, uint32_t e);
void modattn__tk_vec_free(tk_vec *x);
/* BertNormalizer over in[a, b) -> out (cleared first); mid and tmp are scratch (tokenizer.c). */
int modattn__tk_normalize(const modattn_tokenizer *t, const tk_char *in, size_t a, size_t b, tk_vec *out, tk_vec *mid,
                          tk_vec *tmp);

/* Scratch of the Unigram path, kept across the segments of one call. */
typedef struct tk_uscratch tk_uscratch;
typedef void (*tk_emit_fn)(void *ctx, int32_t id, uint32_t s, uint32_t e);
/* what loading carries (tokenizer_load.c) */
typedef struct tk_load {
    const char *path;
    modattn_tokenizer *t;
    struct json_t *root;
} tk_load;
int modattn__tk_build_trie(tk_load *L);
/* The vocabulary's tables for nids ids (t->nids set first): the string slab (slab_bytes), id ->
 * string offsets (all TK_NONE) and lengths, and the string -> id hash of count entries. */
int modattn__tk_vocab_alloc(tk_load *L, size_t slab_bytes, size_t count);
/* The strings of added tokens past the vocabulary (id -> token), appended to the slab at *off. */
void modattn__tk_added_strings(modattn_tokenizer *t, struct json_t *added, size_t nadded, size_t *off);
/* tokenizer_unigram.c */
int modattn__tk_unigram_load(struct tk_load *L, const char *type);
void modattn__tk_unigram_free(modattn_tokenizer *t);
/* the normalizer sequence over in[a, b) -> out; seg is the segment's first byte (what HF's
 * (0, 0) alignment of an inserted first character means) */
int modattn__tk_unorm(const modattn_tokenizer *t, tk_uscratch **us, const tk_char *in, size_t a, size_t b,
                      uint32_t seg, tk_vec *out);
/* pre-tokenizers + Unigram over normalised c[a, b); orig is the segment's first byte in the text
 * (Metaspace's prepend_scheme "first"), base the block's; *stop is polled (the id budget is full) */
int modattn__tk_unigram_run(const modattn_tokenizer *t, tk_uscratch **us, const tk_char *c, size_t a, size_t b,
                            size_t orig, size_t base, tk_emit_fn emit, void *ctx, const bool *stop);
void modattn__tk_uscratch_free(tk_uscratch *us);
/* where the block of a long text that starts at byte pos may end (*end = len: no safe place) */
int modattn__tk_unigram_cut(const modattn_tokenizer *t, tk_uscratch **us, const uint8_t *x, size_t pos, size_t len,
                            size_t *end);
int modattn__tk_lower_cp(uint32_t cp, uint32_t out[2]);
/* tokenizer_unigram.c: the `normalizer` (a sequence of NFC, Lowercase, ...) into t->nsteps, for BPE */
int modattn__tk_load_norm_seq(struct tk_load *L);
/* tokenizer_bpe.c */
typedef struct tk_bscratch tk_bscratch;
int modattn__tk_bpe_load(struct tk_load *L);
void modattn__tk_bpe_free(modattn_tokenizer *t);
/* pre-tokenizers + BPE over normalised c[a, b) */
int modattn__tk_bpe_run(const modattn_tokenizer *t, tk_bscratch **bs, const tk_char *c, size_t a, size_t b,
                        tk_emit_fn emit, void *ctx, const bool *stop);
void modattn__tk_bscratch_free(tk_bscratch *bs);
/* whether cutting a text after "\n" before an ASCII letter gives the same tokens (once the
 * added tokens are loaded) */
bool modattn__tk_bpe_can_block(const modattn_tokenizer *t);
/* White_Space, as Rust's char::is_whitespace and the regex engine's \s (tokenizer_bpe.c) */
bool modattn__tk_bpe_is_space(uint32_t cp);

#endif
