/* pipeline/hits.h — the order of search hits and the k-element min-heap that keeps the best ones,
 * shared by the single-query scan (scan.c) and the batched one (scan_batch.c). A hit ranks before
 * another by a higher score, then by a lower row (scores are never NaN here: callers map NaN to
 * -inf). The heap's root is the worst hit kept. */
#ifndef MODATTN_PIPELINE_HITS_H
#define MODATTN_PIPELINE_HITS_H

#include <stddef.h>

#include "modattn/search.h"

/* a ranks before b */
static inline int modattn__hit_better(modattn_hit a, modattn_hit b) {
    return a.score > b.score || (a.score == b.score && a.row < b.row);
}

static inline void modattn__hit_sift_down(modattn_hit *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && modattn__hit_better(h[w], h[l])) w = l;
        if (r < n && modattn__hit_better(h[w], h[r])) w = r;
        if (w == i) return;
        modattn_hit t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static inline void modattn__hit_sift_up(modattn_hit *h, size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!modattn__hit_better(h[p], h[i])) return;
        modattn_hit t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

/* keep c if it is among the k best seen (*n of them in h so far) */
static inline void modattn__hit_push(modattn_hit *h, size_t *n, size_t k, modattn_hit c) {
    if (*n < k) {
        h[*n] = c;
        modattn__hit_sift_up(h, (*n)++);
    } else if (modattn__hit_better(c, h[0])) {
        h[0] = c;
        modattn__hit_sift_down(h, k, 0);
    }
}

/* qsort order: best first */
static inline int modattn__hit_cmp(const void *a, const void *b) {
    const modattn_hit *x = a, *y = b;
    return modattn__hit_better(*x, *y) ? -1 : modattn__hit_better(*y, *x) ? 1 : 0;
}

#endif
