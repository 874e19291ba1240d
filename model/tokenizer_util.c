/* model/tokenizer_util.c — the primitives every tokenizer file shares: code point ranges and case
 * mapping, the vocabulary's hash and lookup, its byte trie, and the scratch character vectors.
 * tokenizer.c (WordPiece's run time), tokenizer_unigram.c and tokenizer_load.c all call these and
 * this file calls none of them, so the three do not call each other in a circle. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <utf8proc.h>

#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "model/tokenizer_internal.h"

/* ------------------------------------------------------------------ Unicode classes */

bool modattn__tk_in_ranges(const modattn__cp_range *r, size_t n, uint32_t cp) {
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

int modattn__tk_lower_cp(uint32_t cp, uint32_t out[2]) { return lower_cp(cp, out); }


/* ------------------------------------------------------------------ hashing */

uint64_t modattn__tk_hash(const void *p, size_t n) {
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

void modattn__tk_vocab_insert(modattn_tokenizer *t, int32_t id, const char *key, size_t kl, size_t *off) {
    memcpy(t->slab + *off, key, kl + 1);
    t->tok_off[id] = (uint32_t)*off;
    t->tok_len[id] = (uint32_t)kl;
    *off += kl + 1;
    if (kl > t->max_key_len) t->max_key_len = kl;
    uint64_t h = modattn__tk_hash(key, kl);
    size_t i = (size_t)h & t->slot_mask;
    while (t->slots[i].id1) i = (i + 1) & t->slot_mask;
    t->slots[i].id1 = (uint32_t)id + 1;
    t->slots[i].tag = (uint32_t)(h >> 32);
}

int32_t modattn__tk_vocab_find(const modattn_tokenizer *t, const char *key, size_t len) {
    if (len > t->max_key_len || !t->slots) return -1;
    uint64_t h = modattn__tk_hash(key, len);
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


/* ------------------------------------------------------------------ scratch vectors */


int modattn__tk_vec_reserve(tk_vec *x, size_t need) {
    if (need <= x->cap) return 0;
    size_t cap = x->cap ? x->cap : 256;
    while (cap < need) {
        if (cap > ((size_t)-1) / 2 / sizeof(tk_char))
            return modattn__error(MODATTN_ENOMEM, "tokenizer: text too long");
        cap *= 2;
    }
    tk_char *v = modattn__realloc(x->v, cap * sizeof(tk_char), MODATTN_MEM_OTHER);
    if (!v) return modattn__mem_last_status();
    x->v = v;
    x->cap = cap;
    return 0;
}

int modattn__tk_vec_push(tk_vec *x, uint32_t cp, uint32_t s, uint32_t e) {
    if (x->n == x->cap) {
        int rc = modattn__tk_vec_reserve(x, x->n + 1);
        if (rc) return rc;
    }
    tk_char *c = &x->v[x->n++];
    c->cp = cp;
    c->ccc = 0;
    c->s = s;
    c->len = (uint8_t)(e - s);
    return 0;
}

void modattn__tk_vec_free(tk_vec *x) {
    modattn_free(x->v);
    x->v = NULL;
    x->n = x->cap = 0;
}


/* ------------------------------------------------------------------ the vocabulary trie */

typedef struct tk_key {
    const char *s;
    uint32_t len;
    int32_t id;
    uint64_t pre; /* the first 8 bytes, big-endian, zeros past the end */
} tk_key;

static int cmp_key(const void *x, const void *y) {
    const tk_key *a = x, *b = y;
    size_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, m);
    if (c) return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* keys[0, n) in cmp_key's order, ties kept in their order (as glibc's qsort, a merge sort, keeps
 * them): a stable LSD radix sort on the 8-byte prefixes (a smaller prefix is a smaller key: where
 * they first differ both keys have a byte there, or the shorter one's zero padding meets a
 * non-zero byte), then each run of one prefix by cmp_key. qsort with memcmp was a sixth of loading
 * a 30k-word vocabulary. Without the scratch, qsort. */
static void sort_keys(tk_key *keys, size_t n) {
    tk_key *tmp = n > 1 ? modattn__malloc(n * sizeof *tmp, MODATTN_MEM_OTHER) : NULL;
    if (!tmp) {
        if (n > 1) qsort(keys, n, sizeof *keys, cmp_key);
        return;
    }
    tk_key *src = keys, *dst = tmp;
    for (int b = 0; b < 8; b++) {
        const int sh = 8 * b;
        size_t cnt[256] = {0};
        for (size_t i = 0; i < n; i++) cnt[(src[i].pre >> sh) & 255]++;
        if (cnt[(src[0].pre >> sh) & 255] == n) continue; /* one byte value: already in order */
        size_t sum = 0;
        for (int c = 0; c < 256; c++) {
            const size_t x = cnt[c];
            cnt[c] = sum;
            sum += x;
        }
        for (size_t i = 0; i < n; i++) dst[cnt[(src[i].pre >> sh) & 255]++] = src[i];
        tk_key *t = src;
        src = dst;
        dst = t;
    }
    if (src != keys) memcpy(keys, src, n * sizeof *keys);
    modattn_free(tmp);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && keys[j].pre == keys[i].pre) j++;
        if (j - i > 1) qsort(keys + i, j - i, sizeof *keys, cmp_key);
        i = j;
    }
}

/* The vocab trie, built breadth-first over the sorted keys so each node's children are
 * contiguous; iterative, so a long key cannot exhaust the stack. */
int modattn__tk_build_trie(tk_load *L) {
    modattn_tokenizer *t = L->t;
    size_t nkeys = 0, bytes = 0;
    for (size_t id = 0; id < t->nids; id++)
        if (t->tok_off[id] != TK_NONE) {
            nkeys++;
            bytes += t->tok_len[id];
        }
    if (bytes + 1 >= TK_NONE) return modattn__error(MODATTN_ERANGE, "loading %s: field \"model.vocab\": too many bytes", L->path);
    tk_key *keys = modattn__malloc(nkeys * sizeof(tk_key), MODATTN_MEM_OTHER);
    /* work items: node, key range [lo, hi), depth */
    typedef struct { uint32_t node, lo, hi, depth; } item;
    item *work = modattn__malloc((bytes + 1) * sizeof(item), MODATTN_MEM_OTHER);
    t->trie = modattn__malloc((bytes + 1) * sizeof(tk_node), MODATTN_MEM_WEIGHTS);
    t->trie_label = modattn__malloc(bytes + 1, MODATTN_MEM_WEIGHTS);
    int rc = 0;
    if (!keys || !work || !t->trie || !t->trie_label) {
        rc = modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
        goto done;
    }
    size_t k = 0;
    for (size_t id = 0; id < t->nids; id++)
        if (t->tok_off[id] != TK_NONE) {
            keys[k].s = t->slab + t->tok_off[id];
            keys[k].len = t->tok_len[id];
            keys[k].id = (int32_t)id;
            keys[k].pre = 0;
            for (uint32_t b = 0; b < 8; b++)
                keys[k].pre = keys[k].pre << 8 | (b < keys[k].len ? (unsigned char)keys[k].s[b] : 0u);
            k++;
        }
    sort_keys(keys, nkeys);
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
    tk_node *shrunk = modattn__realloc(t->trie, nnodes * sizeof(tk_node), MODATTN_MEM_WEIGHTS);
    if (shrunk) t->trie = shrunk;
    if (ndense) {
        t->trie_dense = modattn__calloc((size_t)ndense * 256, sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
        if (!t->trie_dense) {
            rc = modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
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

/* ------------------------------------------------------------------ the vocabulary's tables, loaded */

int modattn__tk_vocab_alloc(tk_load *L, size_t slab_bytes, size_t count) {
    modattn_tokenizer *t = L->t;
    t->slab = modattn__malloc(slab_bytes, MODATTN_MEM_WEIGHTS);
    t->tok_off = modattn__malloc(t->nids * sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    t->tok_len = modattn__calloc(t->nids, sizeof(uint32_t), MODATTN_MEM_WEIGHTS);
    size_t nslots = 16;
    while (nslots < count * 2) nslots *= 2;
    t->slots = modattn__calloc(nslots, sizeof(tk_slot), MODATTN_MEM_WEIGHTS);
    if (!t->slab || !t->tok_off || !t->tok_len || !t->slots)
        return modattn__error_prefix(modattn__mem_last_status(), "loading %s", L->path);
    t->slot_mask = nslots - 1;
    memset(t->tok_off, 0xFF, t->nids * sizeof(uint32_t));
    return 0;
}

void modattn__tk_added_strings(modattn_tokenizer *t, struct json_t *added, size_t nadded, size_t *off) {
    for (size_t i = 0; i < nadded; i++) {
        json_t *a = json_array_get(added, i);
        const char *content = json_string_value(json_object_get(a, "content"));
        size_t id = (size_t)json_integer_value(json_object_get(a, "id"));
        if (t->tok_off[id] != TK_NONE) continue;
        size_t cl = strlen(content);
        memcpy(t->slab + *off, content, cl + 1);
        t->tok_off[id] = (uint32_t)*off;
        t->tok_len[id] = (uint32_t)cl;
        *off += cl + 1;
    }
}
