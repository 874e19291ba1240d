/* pipeline/ann_hnsw.h — modattn's own search over an HNSW graph that FAISS built and holds
 * (pipeline/ann_hnsw.c). Not a public header. */
#ifndef MODATTN_ANN_HNSW_H
#define MODATTN_ANN_HNSW_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/ann_faiss.h"
#include "pipeline/pipeline_internal.h"

/* What one thread's searches reuse: a visited mark per node, the two heaps, a neighbour buffer. */
typedef struct modattn__hnsw_scratch {
    uint8_t *visited; /* [n]: == tag: seen by the current search */
    uint8_t tag;
    size_t n;
    struct hnsw_item *cand, *res;
    size_t cap;       /* of cand and res */
    int32_t *buf;     /* one node's unseen neighbours */
    size_t bufcap;
} modattn__hnsw_scratch;

/* Whether the graph is whole: every offset, level and neighbour within bounds. "" when it is. */
void modattn__hnsw_check(const modattn__hnsw_view *g, char *why, size_t len);
/* Sized for g and ef (allocates when it must): 0 or an allocation's status. */
int modattn__hnsw_scratch_fit(modattn__hnsw_scratch *s, const modattn__hnsw_view *g, size_t ef);
void modattn__hnsw_scratch_free(modattn__hnsw_scratch *s);
/* The best k rows for q (normalised, [g->d]) by a beam of ef >= k at the bottom level, after a
 * greedy descent from the entry point: rows whose bit is set in mask (NULL: none) are walked
 * through but never returned. Scores are dot(row, q) by `dot`, best first (ties: lower row).
 * *nout = how many were found (at most k). */
void modattn__hnsw_search(const modattn__hnsw_view *g, modattn__dot1_fn dot, const float *q, size_t ef, size_t k,
                          const uint8_t *mask, modattn__hnsw_scratch *s, int64_t *rows, float *scores, size_t *nout);

#endif
