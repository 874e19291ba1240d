/* pipeline/search.c — `modattn search`: embed the query, map the store's vector file (or, when it
 * is missing or not current, load the vectors from the store), scan them all (scan.c) and fetch
 * the k best chunks with their documents. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/search.h"
#include "modattn/store.h"

/* A candidate of the merge: score first, then chunk id (the order one scan of every row in
 * chunk order gives, which is what the store's path does). */
typedef struct cand {
    float score;
    int64_t id;
} cand;
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool allowed(int64_t id, const int64_t *allow, size_t nallow) {
    size_t lo = 0, hi = nallow;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (allow[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < nallow && allow[lo] == id;
}

int modattn_store_vectors_topk(const modattn_store_vectors *v, const float *q, size_t k,
                               const modattn_exec *exec, int64_t *ids, float *scores, size_t *nout) {
    return modattn_store_vectors_topk_among(v, q, k, exec, NULL, 0, ids, scores, nout);
}

int modattn_store_vectors_topk_among(const modattn_store_vectors *v, const float *q, size_t k,
                                     const modattn_exec *exec, const int64_t *allow, size_t nallow,
                                     int64_t *ids, float *scores, size_t *nout) {
    if (!nout) return modattn_error(MODATTN_EINVAL, "vectors_topk: nout is NULL");
    *nout = 0;
    if (!v || !q || (k && (!ids || !scores)) || (nallow && !allow))
        return modattn_error(MODATTN_EINVAL, "vectors_topk: NULL argument");
    if (k == 0 || v->n == 0 || (allow && nallow == 0)) return 0;
    if (k > v->n) k = v->n;
    /* rows to leave out: the masked ones, and with `allow` every row of another chunk */
    uint8_t *skip = NULL;
    const uint8_t *mask = v->mask;
    if (allow) {
        skip = modattn_calloc((v->rows + 7) / 8 + 1, 1, MODATTN_MEM_WORKSPACE);
        if (!skip) return modattn_mem_last_status();
        for (size_t g = 0; g < v->nseg; g++) {
            const modattn_store_vector_segment *sg = &v->seg[g];
            for (size_t r = 0; r < sg->n; r++) {
                const size_t row = sg->row0 + r;
                const bool masked = v->mask && (v->mask[row / 8] >> (row % 8) & 1);
                if (masked || !allowed(sg->chunk_ids[r], allow, nallow)) skip[row / 8] |= (uint8_t)(1u << (row % 8));
            }
        }
        mask = skip;
    }
    if (v->nseg > MODATTN_VEC_MAX_SEGMENTS || k > SIZE_MAX / sizeof(cand) / MODATTN_VEC_MAX_SEGMENTS) {
        modattn_free(skip);
        return modattn_error(MODATTN_ERANGE, "vectors_topk: k = %zu is too large", k);
    }
    /* each segment's best k (masked rows left out), then the best k of those */
    modattn_hit *hits = modattn_malloc(v->nseg * k * sizeof *hits, MODATTN_MEM_WORKSPACE);
    cand *cands = modattn_malloc(v->nseg * k * sizeof *cands, MODATTN_MEM_WORKSPACE);
    int st = 0;
    size_t nh = 0;
    if (!hits || !cands) st = modattn_mem_last_status();
    for (size_t g = 0; !st && g < v->nseg; g++) {
        size_t got = 0;
        const modattn_store_vector_segment *sg = &v->seg[g];
        st = modattn_topk_masked(sg->data, sg->n, v->dim, v->ld, q, k, exec, MODATTN_SCAN_AUTO,
                                 mask, sg->row0, hits + nh, &got);
        for (size_t i = 0; !st && i < got; i++)
            cands[nh + i] = (cand){hits[nh + i].score, sg->chunk_ids[hits[nh + i].row]};
        nh += got;
    }
    if (!st) {
        if (v->nseg > 1) qsort(cands, nh, sizeof *cands, cand_cmp);
        if (nh > k) nh = k;
        for (size_t i = 0; i < nh; i++) ids[i] = cands[i].id, scores[i] = cands[i].score;
        *nout = nh;
    }
    modattn_free(hits);
    modattn_free(cands);
    modattn_free(skip);
    return st;
}

int modattn_search(modattn_store *store, modattn_model *model, const char *query, size_t k,
                   const modattn_exec *exec, modattn_search_result **out, size_t *nout) {
    return modattn_search_ex(store, model, query, k, exec, out, nout, NULL);
}

int modattn_search_vectors(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                          size_t k, const char *path_prefix, const modattn_exec *exec,
                          modattn_search_result **out, size_t *nout) {
    if (!out || !nout) return modattn_error(MODATTN_EINVAL, "modattn_search_vectors: NULL argument");
    *out = NULL;
    *nout = 0;
    if (!store || !v || !query_vec) return modattn_error(MODATTN_EINVAL, "modattn_search_vectors: NULL argument");
    if (k == 0 || v->n == 0) return 0;
    if (k > v->n) k = v->n;
    const size_t dim = v->dim;
    float *q = modattn_malloc(dim * sizeof(float), MODATTN_MEM_OTHER);
    modattn_search_result *res = modattn_calloc(k, sizeof *res, MODATTN_MEM_OTHER);
    int64_t *ids = modattn_malloc(k * sizeof *ids, MODATTN_MEM_OTHER), *allow = NULL;
    float *scores = modattn_malloc(k * sizeof *scores, MODATTN_MEM_OTHER);
    size_t nh = 0, nallow = 0;
    int st = 0;
    if (!q || !res || !ids || !scores) {
        st = modattn_mem_last_status();
        goto done;
    }
    memcpy(q, query_vec, dim * sizeof(float));
    modattn_vec_normalize(q, dim);
    if (path_prefix && (st = modattn_store_chunk_ids_under(store, path_prefix, &allow, &nallow))) goto done;
    uint64_t tr = modattn_trace_begin();
    if (path_prefix) st = modattn_store_vectors_topk_among(v, q, k, exec, allow ? allow : ids, nallow, ids, scores, &nh);
    else st = modattn_store_vectors_topk(v, q, k, exec, ids, scores, &nh);
    if (st) goto done;
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "n=%zu dim=%zu k=%zu", v->n, dim, k);
        modattn_trace_end(tr, "search.scan", "topk", shape, (double)v->n * (double)dim * 4.0,
                          2.0 * (double)v->n * (double)dim);
    }
    tr = modattn_trace_begin();
    for (size_t i = 0; i < nh; i++) {
        res[i].rank = (int)i + 1;
        res[i].score = scores[i];
        if ((st = modattn_store_get_chunk(store, ids[i], &res[i].chunk))) {
            nh = i;
            goto done;
        }
    }
    modattn_trace_end(tr, "search.fetch_chunks", "sqlite", "", 0, 0);
done:
    if (st || nh == 0) {
        modattn_search_results_free(res, nh);
        res = NULL;
        nh = 0;
    }
    modattn_free(allow);
    modattn_free(ids);
    modattn_free(scores);
    modattn_free(q);
    *out = res;
    *nout = nh;
    return st;
}

int modattn_search_ex(modattn_store *store, modattn_model *model, const char *query, size_t k,
                      const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                      modattn_search_info *where) {
    if (where) memset(where, 0, sizeof *where);
    if (!out || !nout) return modattn_error(MODATTN_EINVAL, "modattn_search: NULL argument");
    *out = NULL;
    *nout = 0;
    if (!store || !model || !query)
        return modattn_error(MODATTN_EINVAL, "modattn_search: NULL argument");
    const modattn_model_info *info = modattn_model_get_info(model);
    modattn_store_model sm = {info->name, info->weights_hash, info->dim, info->identity};
    int st = modattn_store_check_model(store, &sm);
    if (st) return st;
    if (k == 0) return 0;
    const size_t dim = info->dim;
    float *q = modattn_malloc(dim * sizeof(float), MODATTN_MEM_OTHER);
    modattn_store_vectors v;
    memset(&v, 0, sizeof v);
    if (!q) return modattn_mem_last_status();
    const char *texts[1] = {query};
    if ((st = modattn_model_embed(model, texts, NULL, 1, q, NULL))) {
        st = modattn_error_prefix(st, "embedding the query");
        goto done;
    }
    uint64_t tr = modattn_trace_begin();
    if ((st = modattn_store_open_vectors(store, &v))) goto done;
    if (where) {
        where->mapped = v.map != NULL;
        snprintf(where->note, sizeof where->note, "%s", v.note);
        where->vectors = v.n;
    }
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "n=%zu dim=%zu", v.n, dim);
        modattn_trace_end(tr, "search.load_vectors", v.map ? "mmap" : "sqlite", shape,
                          v.map ? 0 : (double)v.n * (double)dim * 4.0, 0);
    }
    st = modattn_search_vectors(store, &v, q, k, NULL, exec, out, nout);
done:
    modattn_store_vectors_free(&v);
    modattn_free(q);
    return st;
}

void modattn_search_results_free(modattn_search_result *r, size_t n) {
    if (!r) return;
    for (size_t i = 0; i < n; i++) modattn_store_chunk_clear(&r[i].chunk);
    modattn_free(r);
}
