/* pipeline/ann_hnsw.c — the search over an HNSW graph (FAISS builds it and keeps it in its
 * file; the walk is ours): a greedy descent through the upper levels, then a beam of ef nodes at
 * the bottom one, the textbook algorithm (Malkov & Yashunin, 2016). Why not FAISS's own search:
 * Debian's FAISS 1.7.3 is built without SIMD and reaches each distance through two virtual calls
 * with no prefetch; here each expanded node's unseen neighbours are gathered first, their rows
 * prefetched, then scored by the scan's own kernel (so a row's score is the exact scan's bit for
 * bit), and removed rows are walked through but never returned (the vector file's mask). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "core/internal_core.h"
#include "pipeline/ann_hnsw.h"

typedef struct hnsw_item {
    float s;
    int32_t id;
} hnsw_item;

/* a better than b: higher score, then lower row */
static inline int better(hnsw_item a, hnsw_item b) { return a.s > b.s || (a.s == b.s && a.id < b.id); }

/* max-heap of candidates (best on top) */
static void cand_push(hnsw_item *h, size_t *n, hnsw_item x) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!better(x, h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}
static hnsw_item cand_pop(hnsw_item *h, size_t *n) {
    hnsw_item top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && better(h[c + 1], h[c])) c++;
        if (!better(h[c], x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}
/* min-heap of results (worst on top) */
static void res_push(hnsw_item *h, size_t *n, hnsw_item x) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!better(h[p], x)) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}
static void res_replace_top(hnsw_item *h, size_t n, hnsw_item x) {
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && better(h[c], h[c + 1])) c++;
        if (!better(x, h[c])) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}
static int item_order(const void *a, const void *b) {
    const hnsw_item *x = a, *y = b;
    return better(*x, *y) ? -1 : better(*y, *x) ? 1 : 0;
}

void modattn__hnsw_check(const modattn__hnsw_view *g, char *why, size_t len) {
    why[0] = '\0';
    if (g->n == 0) return;
    if (g->n > INT32_MAX || g->ncum < 2 || g->max_level < 0 || (size_t)g->max_level + 1 >= g->ncum ||
        g->entry < 0 || (size_t)g->entry >= g->n || g->offsets[0] != 0) {
        snprintf(why, len, "the HNSW graph's header is out of bounds");
        return;
    }
    for (size_t l = 0; l + 1 < g->ncum; l++)
        if (g->cum[l] < 0 || g->cum[l + 1] < g->cum[l]) {
            snprintf(why, len, "the HNSW graph's level sizes are malformed");
            return;
        }
    for (size_t i = 0; i < g->n; i++) {
        const int lv = g->levels[i];
        if (lv < 1 || lv > g->max_level + 1 || g->offsets[i + 1] < g->offsets[i] ||
            g->offsets[i + 1] - g->offsets[i] < (size_t)g->cum[lv]) {
            snprintf(why, len, "the HNSW graph's node %zu is malformed", i);
            return;
        }
    }
    const size_t total = g->offsets[g->n];
    for (size_t j = 0; j < total; j++)
        if (g->neighbors[j] < -1 || g->neighbors[j] >= (int32_t)g->n) {
            snprintf(why, len, "the HNSW graph links to a node that does not exist");
            return;
        }
}

int modattn__hnsw_scratch_fit(modattn__hnsw_scratch *s, const modattn__hnsw_view *g, size_t ef) {
    if (s->n != g->n || !s->visited) {
        modattn_free(s->visited);
        s->visited = modattn__calloc(g->n ? g->n : 1, 1, MODATTN_MEM_WORKSPACE);
        if (!s->visited) return modattn__mem_last_status();
        s->n = g->n;
        s->tag = 0;
    }
    /* candidates: at most every neighbour of every expanded node; bounded by the nodes */
    size_t maxdeg = g->ncum >= 2 ? (size_t)g->cum[1] : 0;
    for (size_t l = 1; l + 1 < g->ncum; l++)
        if ((size_t)(g->cum[l + 1] - g->cum[l]) > maxdeg) maxdeg = (size_t)(g->cum[l + 1] - g->cum[l]);
    const size_t need = ef + 1 + g->n;
    if (s->cap < need || !s->cand) {
        modattn_free(s->cand);
        modattn_free(s->res);
        s->cand = modattn__malloc(need * sizeof *s->cand, MODATTN_MEM_WORKSPACE);
        s->res = modattn__malloc((ef + 1) * sizeof *s->res, MODATTN_MEM_WORKSPACE);
        s->cap = s->cand && s->res ? need : 0;
        if (!s->cap) return modattn__mem_last_status();
    }
    if (s->bufcap < maxdeg + 1 || !s->buf) {
        modattn_free(s->buf);
        s->buf = modattn__malloc((maxdeg + 1) * sizeof *s->buf, MODATTN_MEM_WORKSPACE);
        if (!s->buf) return modattn__mem_last_status();
        s->bufcap = maxdeg + 1;
    }
    return 0;
}

void modattn__hnsw_scratch_free(modattn__hnsw_scratch *s) {
    if (!s) return;
    modattn_free(s->visited);
    modattn_free(s->cand);
    modattn_free(s->res);
    modattn_free(s->buf);
    memset(s, 0, sizeof *s);
}

static inline void prefetch_row(const float *r, size_t d) {
    const char *p = (const char *)r;
    const size_t bytes = d * sizeof(float);
    /* the first lines; the hardware prefetcher follows the rest of a sequential row */
    for (size_t o = 0; o < bytes && o < 256; o += 64) __builtin_prefetch(p + o, 0, 3);
}

void modattn__hnsw_search(const modattn__hnsw_view *g, modattn__dot1_fn dot, const float *q, size_t ef, size_t k,
                          const uint8_t *mask, modattn__hnsw_scratch *s, int64_t *rows, float *scores, size_t *nout) {
    *nout = 0;
    if (g->n == 0 || k == 0) return;
    if (ef < k) ef = k;
    const size_t d = g->d;
    const float *x = g->x;
    /* a new tag for this search; every 255 searches the marks are cleared */
    if (++s->tag == 0) {
        memset(s->visited, 0, s->n);
        s->tag = 1;
    }
    const uint8_t tag = s->tag;
    int32_t cur = g->entry;
    float cur_s = dot(x + (size_t)cur * d, q, d);
    /* greedy descent: move to a better neighbour while there is one */
    for (int level = g->max_level; level > 0; level--) {
        for (int moved = 1; moved;) {
            moved = 0;
            const size_t b = g->offsets[cur] + (size_t)g->cum[level], e = g->offsets[cur] + (size_t)g->cum[level + 1];
            for (size_t j = b; j < e; j++) {
                const int32_t nb = g->neighbors[j];
                if (nb < 0) break;
                prefetch_row(x + (size_t)nb * d, d);
            }
            for (size_t j = b; j < e; j++) {
                const int32_t nb = g->neighbors[j];
                if (nb < 0) break;
                const float sc = dot(x + (size_t)nb * d, q, d);
                if (better((hnsw_item){sc, nb}, (hnsw_item){cur_s, cur})) cur = nb, cur_s = sc, moved = 1;
            }
        }
    }
    /* the beam at level 0 */
    size_t nc = 0, nr = 0;
    hnsw_item *cand = s->cand, *res = s->res;
    s->visited[cur] = tag;
    cand_push(cand, &nc, (hnsw_item){cur_s, cur});
    if (!(mask && (mask[cur / 8] >> (cur % 8) & 1))) res_push(res, &nr, (hnsw_item){cur_s, cur});
    while (nc) {
        const hnsw_item c = cand_pop(cand, &nc);
        if (nr == ef && better(res[0], c)) break; /* nothing left can enter the beam */
        const size_t b = g->offsets[c.id] + (size_t)g->cum[0], e = g->offsets[c.id] + (size_t)g->cum[1];
        size_t nbuf = 0;
        for (size_t j = b; j < e; j++) {
            const int32_t nb = g->neighbors[j];
            if (nb < 0) break;
            if (s->visited[nb] == tag) continue;
            s->visited[nb] = tag;
            s->buf[nbuf++] = nb;
            prefetch_row(x + (size_t)nb * d, d);
        }
        for (size_t j = 0; j < nbuf; j++) {
            const int32_t nb = s->buf[j];
            if (j + 2 < nbuf) prefetch_row(x + (size_t)s->buf[j + 2] * d + 64, d > 64 ? d - 64 : 0);
            const hnsw_item it = {dot(x + (size_t)nb * d, q, d), nb};
            if (nr < ef || better(it, res[0])) {
                if (nc < s->cap) cand_push(cand, &nc, it);
                if (mask && (mask[nb / 8] >> (nb % 8) & 1)) continue; /* removed: a way through, not a result */
                if (nr < ef) res_push(res, &nr, it);
                else res_replace_top(res, nr, it);
            }
        }
    }
    qsort(res, nr, sizeof *res, item_order);
    const size_t n = nr < k ? nr : k;
    for (size_t i = 0; i < n; i++) rows[i] = res[i].id, scores[i] = res[i].s;
    *nout = n;
}
