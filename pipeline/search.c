/* pipeline/search.c — `modattn search`: embed the query, map the store's vector file (or, when it
 * is missing or not current, load the vectors from the store), scan them all (scan.c) and fetch
 * the k best chunks with their documents. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "modattn/ann.h"
#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/search.h"
#include "modattn/sparse.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ann.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "pipeline/keywords_internal.h"
#include "pipeline/pipeline_internal.h"

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

int modattn__store_vectors_topk(const modattn_store_vectors *v, const float *q, size_t k,
                               const modattn_exec *exec, int64_t *ids, float *scores, size_t *nout) {
    return modattn__store_vectors_topk_among(v, q, k, exec, NULL, 0, ids, scores, nout);
}

int modattn__store_vectors_topk_among(const modattn_store_vectors *v, const float *q, size_t k,
                                     const modattn_exec *exec, const int64_t *allow, size_t nallow,
                                     int64_t *ids, float *scores, size_t *nout) {
    if (!nout) return modattn__error(MODATTN_EINVAL, "vectors_topk: nout is NULL");
    *nout = 0;
    if (!v || !q || (k && (!ids || !scores)) || (nallow && !allow))
        return modattn__error(MODATTN_EINVAL, "vectors_topk: NULL argument");
    if (k == 0 || v->n == 0 || (allow && nallow == 0)) return 0;
    if (k > v->n) k = v->n;
    /* rows to leave out: the masked ones, and with `allow` every row of another chunk */
    uint8_t *skip = NULL;
    const uint8_t *mask = v->mask;
    if (allow) {
        skip = modattn__calloc((v->rows + 7) / 8 + 1, 1, MODATTN_MEM_WORKSPACE);
        if (!skip) return modattn__mem_last_status();
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
        return modattn__error(MODATTN_ERANGE, "vectors_topk: k = %zu is too large", k);
    }
    /* each segment's best k (masked rows left out), then the best k of those */
    modattn_hit *hits = modattn__malloc(v->nseg * k * sizeof *hits, MODATTN_MEM_WORKSPACE);
    cand *cands = modattn__malloc(v->nseg * k * sizeof *cands, MODATTN_MEM_WORKSPACE);
    int st = 0;
    size_t nh = 0;
    if (!hits || !cands) st = modattn__mem_last_status();
    for (size_t g = 0; !st && g < v->nseg; g++) {
        size_t got = 0;
        const modattn_store_vector_segment *sg = &v->seg[g];
        st = modattn__topk_masked(sg->data, sg->n, v->dim, v->ld, q, k, exec, MODATTN_SCAN_AUTO,
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

int modattn__store_vectors_topk_batch(const modattn_store_vectors *v, const float *queries, size_t nq,
                                     size_t k, const modattn_exec *exec, int64_t *ids, float *scores,
                                     size_t *nout) {
    if (nq && !nout) return modattn__error(MODATTN_EINVAL, "vectors_topk_batch: nout is NULL");
    for (size_t q = 0; q < nq; q++) nout[q] = 0;
    if (!v || (nq && (!queries || (k && (!ids || !scores)))))
        return modattn__error(MODATTN_EINVAL, "vectors_topk_batch: NULL argument");
    if (k == 0 || nq == 0 || v->n == 0) return 0;
    const size_t kk = k > v->n ? v->n : k;
    if (v->nseg > MODATTN_VEC_MAX_SEGMENTS || kk > SIZE_MAX / sizeof(cand) / MODATTN_VEC_MAX_SEGMENTS / nq)
        return modattn__error(MODATTN_ERANGE, "vectors_topk_batch: %zu queries x k = %zu is too large", nq, k);
    /* each segment's best kk per query, then per query the best kk of those */
    modattn_hit *hits = modattn__malloc(nq * kk * sizeof *hits, MODATTN_MEM_WORKSPACE);
    size_t *got = modattn__malloc(nq * sizeof *got, MODATTN_MEM_WORKSPACE);
    cand *cands = modattn__malloc(nq * v->nseg * kk * sizeof *cands, MODATTN_MEM_WORKSPACE);
    size_t *nc = modattn__calloc(nq, sizeof *nc, MODATTN_MEM_WORKSPACE);
    int st = 0;
    if (!hits || !got || !cands || !nc) st = modattn__mem_last_status();
    for (size_t g = 0; !st && g < v->nseg; g++) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        st = modattn__topk_batch(sg->data, sg->n, v->dim, v->ld, queries, nq, v->dim, kk, exec, v->mask,
                                sg->row0, hits, got);
        for (size_t q = 0; !st && q < nq; q++) {
            cand *c = cands + q * v->nseg * kk;
            for (size_t i = 0; i < got[q]; i++)
                c[nc[q]++] = (cand){hits[q * kk + i].score, sg->chunk_ids[hits[q * kk + i].row]};
        }
    }
    for (size_t q = 0; !st && q < nq; q++) {
        cand *c = cands + q * v->nseg * kk;
        if (v->nseg > 1) qsort(c, nc[q], sizeof *c, cand_cmp);
        nout[q] = nc[q] < kk ? nc[q] : kk;
        for (size_t i = 0; i < nout[q]; i++) ids[q * k + i] = c[i].id, scores[q * k + i] = c[i].score;
    }
    modattn_free(hits);
    modattn_free(got);
    modattn_free(cands);
    modattn_free(nc);
    return st;
}

int modattn__search(modattn_store *store, modattn_model *model, const char *query, size_t k,
                   const modattn_exec *exec, modattn_search_result **out, size_t *nout) {
    return modattn__search_ex(store, model, query, k, exec, out, nout, NULL);
}

const char *modattn_search_mode_name(modattn_search_mode m) {
    switch (m) {
    case MODATTN_SEARCH_HYBRID: return "hybrid";
    case MODATTN_SEARCH_VECTOR: return "vector";
    case MODATTN_SEARCH_KEYWORD: return "keyword";
    case MODATTN_SEARCH_SPARSE: return "sparse";
    }
    return "unknown";
}

const char *modattn__search_found_by(const modattn_search_result *r) {
    const bool v = r->vector_rank > 0, k = r->keyword_rank > 0, s = r->sparse_rank > 0;
    if (!s) return v && k ? "both" : v ? "meaning" : k ? "words" : "none";
    return v && k ? "meaning+words+sparse" : v ? "meaning+sparse" : k ? "words+sparse" : "sparse";
}

/* The sparse ranking: the query's sparse vector by p->sparse (the store's encoder: checked, and
 * pruned as the store's were) dotted with every chunk's over the inverted index, the best cand. */
static int sparse_ranking(modattn_store *store, const modattn_search_params *p, const char *text, size_t len,
                          const char *path_prefix, size_t cand, int64_t *ids, double *scores, size_t *n) {
    *n = 0;
    if (!p->sparse)
        return modattn__error(MODATTN_EINVAL, "sparse search needs the store's sparse model (--sparse DIR)");
    modattn__sparse_ident have, want;
    bool found = false;
    int st = modattn__store_sparse_get(store, &have, &found);
    if (st) return st;
    if (!found) return modattn__store_sparse_topk(store, NULL, NULL, 0, cand, path_prefix, ids, scores, n); /* says why */
    memset(&want, 0, sizeof want);
    const modattn_sparse_info *si = modattn_sparse_get_info(p->sparse);
    snprintf(want.name, sizeof want.name, "%s", si->name ? si->name : "");
    snprintf(want.identity, sizeof want.identity, "%s",
             modattn_model_get_info(modattn_sparse_model(p->sparse))->identity);
    want.top_k = have.top_k;
    want.threshold = have.threshold;
    if ((st = modattn__store_sparse_check(store, &want, &found))) return st;
    modattn_sparse_options o = {have.top_k, have.threshold};
    modattn_sparse_vec qv = {0, NULL, NULL};
    const char *texts[1] = {text ? text : ""};
    const size_t lens[1] = {text ? len : 0};
    if ((st = modattn_sparse_encode(p->sparse, p->sparse_session, texts, lens, 1, &o, &qv, NULL)))
        return modattn__error_prefix(st, "the query's sparse vector");
    st = modattn__store_sparse_topk(store, qv.ids, qv.weights, qv.n, cand, path_prefix, ids, scores, n);
    modattn_sparse_vec_free(&qv, 1);
    return st;
}

int modattn__search_vectors(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                          size_t k, const char *path_prefix, const modattn_exec *exec,
                          modattn_search_result **out, size_t *nout) {
    modattn_search_params p = {.mode = MODATTN_SEARCH_VECTOR, .k = k, .path_prefix = path_prefix};
    return modattn__search_run(store, v, query_vec, NULL, 0, &p, exec, out, nout, NULL);
}

const float *modattn__store_vectors_find(const modattn_store_vectors *v, int64_t chunk_id) {
    for (size_t g = v ? v->nseg : 0; g-- > 0;) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        size_t lo = 0, hi = sg->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (sg->chunk_ids[mid] < chunk_id) lo = mid + 1;
            else hi = mid;
        }
        if (lo == sg->n || sg->chunk_ids[lo] != chunk_id) continue;
        const size_t row = sg->row0 + lo;
        if (v->mask && (v->mask[row / 8] >> (row % 8) & 1)) continue;
        return sg->data + lo * v->ld;
    }
    return NULL;
}

/* The cosine of chunk id's vector with q (normalised), NaN when v has no live row for it. */
static float cosine_of(const modattn_store_vectors *v, const float *q, int64_t id) {
    const float *x = modattn__store_vectors_find(v, id);
    if (!x) return NAN;
    double d = 0;
    for (size_t c = 0; c < v->dim; c++) d += (double)x[c] * (double)q[c];
    return (float)d;
}

/* a candidate of the fusion */
typedef struct fused {
    int64_t id;
    int vrank, krank, srank;
    float cosine;
    double bm25, sparse, score;
} fused;

static int fused_by_id(const void *a, const void *b) {
    const fused *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int fused_by_score(const void *a, const void *b) {
    const fused *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void note(modattn_search_notes *n, const char *msg) {
    if (n && !n->note[0]) snprintf(n->note, sizeof n->note, "%s", msg);
}

/* modattn__search_run; with pre (modattn__search_batch), the vector ranking's candidates are given
 * (pre_n of them, for the normalised query_vec, without a path prefix) instead of scanned here. */
static int search_run(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                      const char *query_text, size_t query_len, const modattn_search_params *p,
                      const modattn_exec *exec, const int64_t *pre_ids, const float *pre_scores, size_t pre_n,
                      modattn_search_result **out, size_t *nout, modattn_search_notes *notes);

int modattn__search_run(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                       const char *query_text, size_t query_len, const modattn_search_params *p,
                       const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                       modattn_search_notes *notes) {
    return search_run(store, v, query_vec, query_text, query_len, p, exec, NULL, NULL, 0, out, nout, notes);
}

/* how many candidates each ranking brings for p */
static size_t candidates_for(const modattn_search_params *p) {
    const size_t k = p->k;
    return p->mode != MODATTN_SEARCH_HYBRID ? k : p->candidates ? p->candidates : (k > 50 ? k : 50);
}

static int search_run(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                      const char *query_text, size_t query_len, const modattn_search_params *p,
                      const modattn_exec *exec, const int64_t *pre_ids, const float *pre_scores, size_t pre_n,
                      modattn_search_result **out, size_t *nout, modattn_search_notes *notes) {
    if (notes) memset(notes, 0, sizeof *notes);
    if (!out || !nout) return modattn__error(MODATTN_EINVAL, "modattn__search_run: NULL argument");
    *out = NULL;
    *nout = 0;
    if (!store || !v || !query_vec || !p || (!query_text && query_len))
        return modattn__error(MODATTN_EINVAL, "modattn__search_run: NULL argument");
    const modattn_search_mode mode = p->mode;
    const size_t k = p->k;
    if (k == 0) return 0;
    const bool keywords = modattn__store_has_keywords(store);
    if (mode == MODATTN_SEARCH_KEYWORD && !keywords) return modattn__store_keyword_topk(store, "", 0, NULL, NULL, NULL, nout);
    const size_t cand = candidates_for(p);
    if (cand > SIZE_MAX / 16 || k > SIZE_MAX / 16)
        return modattn__error(MODATTN_ERANGE, "modattn__search_run: k %zu or candidates %zu is too large", k, cand);
    const double rrf_k = p->rrf_k > 0 ? p->rrf_k : MODATTN_SEARCH_RRF_K, kw = p->keyword_weight > 0 ? p->keyword_weight : MODATTN_SEARCH_KEYWORD_WEIGHT;
    const double sw = p->sparse_weight > 0 ? p->sparse_weight : MODATTN_SEARCH_SPARSE_WEIGHT;
    const bool dense = mode == MODATTN_SEARCH_HYBRID || mode == MODATTN_SEARCH_VECTOR;
    const bool words = mode == MODATTN_SEARCH_HYBRID || mode == MODATTN_SEARCH_KEYWORD;
    /* the sparse ranking: sparse mode, or hybrid with a sparse encoder on a store with sparse vectors */
    const bool sparse = mode == MODATTN_SEARCH_SPARSE ||
                        (mode == MODATTN_SEARCH_HYBRID && p->sparse && modattn__store_has_sparse(store));
    const size_t dim = v->dim;
    float *q = modattn__malloc((dim ? dim : 1) * sizeof(float), MODATTN_MEM_OTHER);
    int64_t *vids = modattn__malloc(cand * sizeof *vids, MODATTN_MEM_OTHER), *kids = NULL, *allow = NULL, *sids = NULL;
    float *vsc = modattn__malloc(cand * sizeof *vsc, MODATTN_MEM_OTHER);
    double *ksc = NULL, *ssc = NULL;
    fused *f = NULL;
    modattn_search_result *res = NULL;
    char *fts = NULL, *marks = NULL;
    size_t nv = 0, nk = 0, ns = 0, nallow = 0, nf = 0, nres = 0;
    int st = 0;
    if (!q || !vids || !vsc) goto oom;
    memcpy(q, query_vec, dim * sizeof(float));
    modattn__vec_normalize(q, dim);
    modattn__kw_query_info kwi;
    memset(&kwi, 0, sizeof kwi);
    if (keywords && query_text && (st = modattn__store_keyword_query_info(store, query_text, query_len, &fts, &marks, &kwi)))
        goto done;
    if (notes && kwi.fixes[0] && words)
        snprintf(notes->keywords, sizeof notes->keywords, "%s", kwi.fixes);
    /* hybrid: a query made only of stop words and words most chunks hold finds passages by words
     * that carry no information; they never lift one above what meaning finds (nor are marked) */
    const bool weak_only = mode == MODATTN_SEARCH_HYBRID && kwi.weak_only;
    if (weak_only && fts) fts[0] = '\0';
    if (kwi.weak_only && mode != MODATTN_SEARCH_KEYWORD && marks) marks[0] = '\0'; /* (vector mode too) */

    /* the sparse ranking */
    if (sparse) {
        sids = modattn__malloc(cand * sizeof *sids, MODATTN_MEM_OTHER);
        ssc = modattn__malloc(cand * sizeof *ssc, MODATTN_MEM_OTHER);
        if (!sids || !ssc) goto oom;
        uint64_t tr = modattn__trace_begin();
        if ((st = sparse_ranking(store, p, query_text, query_len, p->path_prefix, cand, sids, ssc, &ns))) goto done;
        modattn__trace_end(tr, "search.sparse", "sqlite", "", 0, 0);
    }

    /* the vector ranking */
    if (dense && pre_ids) {
        nv = pre_n < cand ? pre_n : cand;
        memcpy(vids, pre_ids, nv * sizeof *vids);
        memcpy(vsc, pre_scores, nv * sizeof *vsc);
    } else if (dense && v->n > 0) {
        if (p->path_prefix && (st = modattn__store_chunk_ids_under(store, p->path_prefix, &allow, &nallow))) goto done;
        uint64_t tr = modattn__trace_begin();
        st = p->path_prefix ? modattn__store_vectors_topk_among(v, q, cand, exec, allow ? allow : vids, nallow, vids, vsc, &nv)
                            : modattn__store_vectors_topk(v, q, cand, exec, vids, vsc, &nv);
        if (st) goto done;
        if (tr) {
            char shape[64];
            snprintf(shape, sizeof shape, "n=%zu dim=%zu k=%zu", v->n, dim, cand);
            modattn__trace_end(tr, "search.scan", "topk", shape, (double)v->n * (double)dim * 4.0,
                              2.0 * (double)v->n * (double)dim);
        }
    }
    /* the keyword ranking */
    if (words) {
        if (!keywords) {
            note(notes, "the store has no keyword index: by meaning alone (`modattn index` adds it)");
        } else if (weak_only) {
            note(notes, "the query's words are all stop words or held by most chunks: by meaning alone");
        } else if (!fts || !fts[0]) {
            note(notes, "the query has no word to match: by meaning alone");
        } else {
            kids = modattn__malloc(cand * sizeof *kids, MODATTN_MEM_OTHER);
            ksc = modattn__malloc(cand * sizeof *ksc, MODATTN_MEM_OTHER);
            if (!kids || !ksc) goto oom;
            uint64_t tr = modattn__trace_begin();
            if ((st = modattn__store_keyword_topk(store, fts, cand, p->path_prefix, kids, ksc, &nk))) goto done;
            modattn__trace_end(tr, "search.keywords", "fts5", "", 0, 0);
            if (notes) notes->keywords_used = true;
            if (nk == 0) note(notes, "no chunk holds the query's words: by meaning alone");
        }
    }
    /* the fusion: one entry per chunk that either ranking brought */
    if (!(f = modattn__calloc(nv + nk + ns + 1, sizeof *f, MODATTN_MEM_OTHER))) goto oom;
    for (size_t i = 0; i < nv; i++) f[nf++] = (fused){vids[i], (int)i + 1, 0, 0, vsc[i], NAN, NAN, 0};
    for (size_t i = 0; i < nk; i++) f[nf++] = (fused){kids[i], 0, (int)i + 1, 0, NAN, ksc[i], NAN, 0};
    for (size_t i = 0; i < ns; i++) f[nf++] = (fused){sids[i], 0, 0, (int)i + 1, NAN, NAN, ssc[i], 0};
    qsort(f, nf, sizeof *f, fused_by_id);
    size_t w = 0;
    for (size_t i = 0; i < nf; i++) {
        if (w && f[w - 1].id == f[i].id) { /* found by both */
            if (f[i].vrank) f[w - 1].vrank = f[i].vrank, f[w - 1].cosine = f[i].cosine;
            if (f[i].krank) f[w - 1].krank = f[i].krank, f[w - 1].bm25 = f[i].bm25;
            if (f[i].srank) f[w - 1].srank = f[i].srank, f[w - 1].sparse = f[i].sparse;
            continue;
        }
        f[w++] = f[i];
    }
    nf = w;
    for (size_t i = 0; i < nf; i++) {
        fused *x = &f[i];
        x->score = mode == MODATTN_SEARCH_VECTOR    ? (double)x->cosine
                   : mode == MODATTN_SEARCH_KEYWORD ? x->bm25
                   : mode == MODATTN_SEARCH_SPARSE  ? x->sparse
                                                    : (x->vrank ? 1.0 / (rrf_k + x->vrank) : 0) +
                                                          (x->krank ? kw / (rrf_k + x->krank) : 0) +
                                                          (x->srank ? sw / (rrf_k + x->srank) : 0);
    }
    qsort(f, nf, sizeof *f, fused_by_score);
    nres = nf < k ? nf : k;
    if (nres == 0) goto done;
    if (!(res = modattn__calloc(nres, sizeof *res, MODATTN_MEM_OTHER))) goto oom;
    uint64_t tr = modattn__trace_begin();
    for (size_t i = 0; i < nres; i++) {
        modattn_search_result *r = &res[i];
        r->rank = (int)i + 1;
        r->score = (float)f[i].score;
        r->vector_rank = f[i].vrank;
        r->keyword_rank = f[i].krank;
        r->cosine = f[i].vrank ? f[i].cosine : cosine_of(v, q, f[i].id);
        r->bm25 = f[i].bm25;
        r->sparse_rank = f[i].srank;
        r->sparse_score = f[i].sparse;
        if ((st = modattn__store_get_chunk(store, f[i].id, &r->chunk))) {
            nres = i + 1; /* frees what was fetched */
            goto done;
        }
        if (marks && marks[0] && nres <= 1000 &&
            (st = modattn__store_keyword_spans(store, marks, f[i].id, &r->spans, &r->nspans))) {
            nres = i + 1;
            goto done;
        }
        /* a result carries at most MODATTN_CHUNK_MAX_BYTES of text: what chunking stores today; a
         * chunk stored by an older version can be as large as its file (one huge word), and is cut
         * there, on a character boundary (modattn__store_get_chunk gives the whole of it) */
        if (r->chunk.text && strlen(r->chunk.text) > MODATTN_CHUNK_MAX_BYTES) {
            size_t cut = MODATTN_CHUNK_MAX_BYTES;
            while (cut > 0 && ((unsigned char)r->chunk.text[cut] & 0xc0) == 0x80) cut--;
            r->chunk.text[cut] = '\0';
        }
        /* the spans are offsets into the keyword index's copy of the text; a store whose copy is
         * not the chunk's (damaged, or edited by hand) must not send a reader past its end */
        const size_t tlen = r->chunk.text ? strlen(r->chunk.text) : 0;
        size_t inside = 0;
        for (size_t j = 0; j < r->nspans; j++)
            if (r->spans[j].start < r->spans[j].end && r->spans[j].end <= tlen) r->spans[inside++] = r->spans[j];
        r->nspans = inside;
    }
    modattn__trace_end(tr, "search.fetch_chunks", "sqlite", "", 0, 0);
    /* snippets by words alone (whoever holds the model weighs them by meaning: search_with,
     * search_batch_core, the server) */
    st = modattn__search_snippets(NULL, NULL, 0, res, nres);
    goto done;
oom:
    st = modattn__mem_last_status();
done:
    if (st) {
        modattn_search_results_free(res, nres);
        res = NULL;
        nres = 0;
    }
    modattn_free(fts);
    modattn_free(marks);
    modattn_free(f);
    modattn_free(allow);
    modattn_free(vids);
    modattn_free(vsc);
    modattn_free(kids);
    modattn_free(ksc);
    modattn_free(sids);
    modattn_free(ssc);
    modattn_free(q);
    *out = res;
    *nout = nres;
    return st;
}

int modattn__search_run_ann(modattn_store *store, const modattn_store_vectors *v, const modattn_ann *ann,
                           const float *query_vec, const char *query_text, size_t query_len,
                           const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                           size_t *nout, modattn_search_notes *notes) {
    if (!ann || !p || !v || !query_vec || p->path_prefix || p->mode == MODATTN_SEARCH_KEYWORD || p->mode == MODATTN_SEARCH_SPARSE ||
        p->index == MODATTN_SEARCH_INDEX_EXACT || v->n == 0)
        return modattn__search_run(store, v, query_vec, query_text, query_len, p, exec, out, nout, notes);
    if (out) *out = NULL;
    if (nout) *nout = 0;
    if (!out || !nout) return modattn__error(MODATTN_EINVAL, "modattn__search_run_ann: NULL argument");
    /* the vector ranking's candidates from the index (scores exact), then the rest as ever */
    const size_t cand = candidates_for(p), dim = v->dim;
    if (cand > SIZE_MAX / 16) return modattn__error(MODATTN_ERANGE, "modattn__search_run_ann: %zu candidates", cand);
    float *qn = modattn__malloc((dim ? dim : 1) * sizeof(float), MODATTN_MEM_OTHER);
    int64_t *ids = modattn__malloc(cand * sizeof *ids, MODATTN_MEM_OTHER);
    float *sc = modattn__malloc(cand * sizeof *sc, MODATTN_MEM_OTHER);
    size_t nc = 0;
    int st = 0;
    if (!qn || !ids || !sc) st = modattn__mem_last_status();
    if (!st) {
        memcpy(qn, query_vec, dim * sizeof(float));
        modattn__vec_normalize(qn, dim);
        st = modattn__ann_topk_batch(ann, v, qn, 1, cand, p->ann, exec, ids, sc, &nc);
    }
    if (!st) st = search_run(store, v, query_vec, query_text, query_len, p, exec, ids, sc, nc, out, nout, notes);
    modattn_free(qn);
    modattn_free(ids);
    modattn_free(sc);
    return st;
}

int modattn__search_ex(modattn_store *store, modattn_model *model, const char *query, size_t k,
                      const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                      modattn_search_info *where) {
    modattn_search_params p = {.mode = MODATTN_SEARCH_VECTOR, .k = k};
    return modattn__search_with(store, model, query, &p, exec, out, nout, where, NULL);
}

/* what a search read its vectors from (where may be NULL) */
static void tell_where(modattn_search_info *where, const modattn_store_vectors *v) {
    if (!where) return;
    where->mapped = v->map != NULL;
    snprintf(where->note, sizeof where->note, "%s", v->note);
    where->vectors = v->n;
    snprintf(where->index, sizeof where->index, "exact");
}

/* What reading the ANN index costs against scanning, per byte (bench/results/ann.md, this 2-core
 * host: opening 1.8 GB of HNSW took 2.3 s, 0.78 ns a byte; one exact scan of 1.5 GB 84 ms, 0.056 ns
 * a byte), and how much cheaper a query is in a batched scan than alone (10.2 against 84 ms). */
#define ANN_OPEN_BYTE_COST 14.0
#define BATCH_SCAN_SPEEDUP 8.0

/* The store's ANN index for v when p lets it be used and it pays for nq queries: *a, or NULL with
 * where->index_note saying why not (when there is one); an error when p asks for it and it cannot
 * be used. */
static int open_ann_for(modattn_store *store, const modattn_store_vectors *v, const modattn_search_params *p,
                        size_t nq, modattn_ann **a, modattn_search_info *where) {
    *a = NULL;
    if (p->mode == MODATTN_SEARCH_KEYWORD || p->mode == MODATTN_SEARCH_SPARSE || p->index == MODATTN_SEARCH_INDEX_EXACT ||
        v->n == 0)
        return 0;
    char why[512] = "";
    uint64_t bytes = 0;
    /* the header first (4 KiB): a missing, damaged or stale index is said at once */
    int peek = modattn__ann_peek(store, v, &bytes, why, sizeof why);
    if (peek < 0) return peek;
    if (peek == 0) {
        if (p->index == MODATTN_SEARCH_INDEX_ANN)
            return modattn__error(MODATTN_ENOTFOUND, "no usable ANN index: %s",
                                 why[0] ? why : "the store has none (`modattn index --ann hnsw` builds one)");
        if (where) snprintf(where->index_note, sizeof where->index_note, "%s", why);
        return 0;
    }
    if (p->path_prefix) {
        if (p->index == MODATTN_SEARCH_INDEX_ANN)
            return modattn__error(MODATTN_EINVAL, "the ANN index cannot keep to a path prefix: search it exactly");
        if (where) snprintf(where->index_note, sizeof where->index_note, "a path prefix is searched exactly");
        return 0;
    }
    /* a command that searches once reads the whole index first: for a few queries, scanning the
     * vectors is faster than reading it (a long-lived caller opens it once: modattn__ann_open) */
    const double vbytes = (double)v->rows * (double)v->dim * 4.0;
    const double scan = vbytes * (nq <= 1 ? 1.0 : (double)nq / BATCH_SCAN_SPEEDUP);
    if (p->index == MODATTN_SEARCH_INDEX_AUTO && (double)bytes * ANN_OPEN_BYTE_COST > scan) {
        if (where)
            snprintf(where->index_note, sizeof where->index_note,
                     "%zu quer%s: scanning the %.1f MB of vectors is faster than reading the %.1f MB ANN index "
                     "(it pays from about %.0f queries in one batch, or kept open); --ann uses it anyway",
                     nq, nq == 1 ? "y" : "ies", vbytes / 1e6, (double)bytes / 1e6,
                     ceil((double)bytes * ANN_OPEN_BYTE_COST * BATCH_SCAN_SPEEDUP / vbytes));
        return 0;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t tr = modattn__trace_begin();
    int st = modattn__ann_open(store, v, a, why, sizeof why);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st < 0) return st;
    if (*a) {
        if (tr) {
            char shape[64];
            snprintf(shape, sizeof shape, "rows=%zu", modattn__ann_rows(*a));
            modattn__trace_end(tr, "search.ann_open", modattn_ann_kind_name(modattn__ann_get_kind(*a)), shape,
                              (double)modattn__ann_file_bytes(*a), 0);
        }
        if (where) {
            snprintf(where->index, sizeof where->index, "%s", modattn_ann_kind_name(modattn__ann_get_kind(*a)));
            where->index_open_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
        }
        return 0;
    }
    if (p->index == MODATTN_SEARCH_INDEX_ANN)
        return modattn__error(MODATTN_ENOTFOUND, "no usable ANN index: %s",
                             why[0] ? why : "the store has none (`modattn index --ann hnsw` builds one)");
    if (where) snprintf(where->index_note, sizeof where->index_note, "%s", why);
    return 0;
}

int modattn__search_with(modattn_store *store, modattn_model *model, const char *query,
                        const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                        size_t *nout, modattn_search_info *where, modattn_search_notes *notes) {
    if (where) memset(where, 0, sizeof *where);
    if (notes) memset(notes, 0, sizeof *notes);
    if (!out || !nout) return modattn__error(MODATTN_EINVAL, "modattn__search: NULL argument");
    *out = NULL;
    *nout = 0;
    if (!store || !model || !query || !p)
        return modattn__error(MODATTN_EINVAL, "modattn__search: NULL argument");
    modattn_store_model sm;
    modattn_embed_options eo;
    int st = modattn_store_embed_options(store, model, p->embed, true, &eo, &sm);
    if (st || (st = modattn_store_check_model(store, &sm))) return st;
    if (p->k == 0) return 0;
    const size_t dim = sm.dim;
    float *q = modattn__calloc(dim, sizeof(float), MODATTN_MEM_OTHER);
    modattn_store_vectors v;
    memset(&v, 0, sizeof v);
    if (!q) return modattn__mem_last_status();
    const char *texts[1] = {query};
    /* keywords alone need no embedding (nor the vectors: the chunks' cosines stay NaN) */
    const bool dense = p->mode == MODATTN_SEARCH_HYBRID || p->mode == MODATTN_SEARCH_VECTOR;
    if (dense && (st = modattn_model_embed_opt(model, NULL, &eo, texts, NULL, 1, q, NULL))) {
        st = modattn__error_prefix(st, "embedding the query");
        goto done;
    }
    uint64_t tr = modattn__trace_begin();
    if (dense && (st = modattn__store_open_vectors(store, &v))) goto done;
    v.dim = dim;
    tell_where(where, &v);
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "n=%zu dim=%zu", v.n, dim);
        modattn__trace_end(tr, "search.load_vectors", v.map ? "mmap" : "sqlite", shape,
                          v.map ? 0 : (double)v.n * (double)dim * 4.0, 0);
    }
    modattn_ann *ann = NULL;
    if ((st = open_ann_for(store, &v, p, 1, &ann, where))) goto done;
    if (ann) {
        st = modattn__search_run_ann(store, &v, ann, q, query, strlen(query), p, exec, out, nout, notes);
        modattn__ann_close(ann);
        goto done;
    }
    st = modattn__search_run(store, &v, q, query, strlen(query), p, exec, out, nout, notes);
done:
    /* the snippets weighed by meaning (keywords alone: by words) */
    if (!st && *nout && p->mode != MODATTN_SEARCH_KEYWORD &&
        (st = modattn__search_snippets(model, query, strlen(query), *out, *nout))) {
        modattn_search_results_free(*out, *nout);
        *out = NULL;
        *nout = 0;
    }
    modattn__store_vectors_free(&v);
    modattn_free(q);
    return st;
}

/* The ANN index a searcher uses, and what it was opened for: the one rule for when it is read
 * again lives in ann_slot_current. A searcher has its own slot, or shares one (a
 * modattn_searcher_share: a server's executors, each on its own store connection) under the
 * share's lock, held while the index is searched. */
typedef struct ann_slot {
    modattn_ann *ann;
    bool tried;         /* opened (or found unusable) for what follows */
    uint64_t gen;       /* the vectors it was opened for: their generation, rows and segments */
    size_t rows, nseg;
    bool there;         /* the file as last looked at: a new or rebuilt one is read again */
    struct stat st;
    char note[512];     /* why there is none ("" if there is, or the store has none) */
} ann_slot;

struct modattn_searcher_share {
    pthread_mutex_t mu;
    ann_slot slot;
};

/* A store's vectors and ANN index kept open between searches (modattn_searcher_*). */
struct modattn_searcher {
    modattn_store *store;
    modattn_model *model;
    modattn_store_vectors v;
    bool have_v;
    ann_slot own;
    modattn_searcher_share *share; /* NULL: own */
    bool locked;                   /* share->mu held (from searcher_ann to searcher_ann_done) */
};

static void ann_slot_clear(ann_slot *a) {
    modattn__ann_close(a->ann);
    memset(a, 0, sizeof *a);
}

/* The slot's index made current for the vectors v: read again when it was never read, when the
 * vectors are others (the store's generation moved: new or removed documents), or when the file
 * is another (created, rebuilt by `index --ann`, removed: its inode, size or time changed). */
static int ann_slot_current(ann_slot *a, modattn_store *store, const modattn_store_vectors *v) {
    char path[4200];
    struct stat st;
    memset(&st, 0, sizeof st);
    const bool there = modattn__store_ann_file_path(store, path, sizeof path) == 0 && stat(path, &st) == 0;
    const bool moved = there != a->there ||
                       (there && (st.st_ino != a->st.st_ino || st.st_dev != a->st.st_dev || st.st_size != a->st.st_size ||
                                  st.st_mtim.tv_sec != a->st.st_mtim.tv_sec || st.st_mtim.tv_nsec != a->st.st_mtim.tv_nsec));
    if (a->tried && !moved && a->gen == v->generation && a->rows == v->rows && a->nseg == v->nseg) return 0;
    ann_slot_clear(a);
    a->tried = true;
    a->there = there;
    a->st = st;
    a->gen = v->generation, a->rows = v->rows, a->nseg = v->nseg;
    /* an error (the index over the memory budget, the store unreadable) leaves it unused, said in
     * the note: searched exactly until the vectors or the file change (a forced --ann fails) */
    if (modattn__ann_open(store, v, &a->ann, a->note, sizeof a->note) < 0) {
        a->ann = NULL;
        snprintf(a->note, sizeof a->note, "%s", modattn_last_error());
    }
    return 0;
}

/* The held vectors, opened again when the store's generation has moved. */
static int searcher_refresh(modattn_searcher *h) {
    uint64_t gen = 0;
    int st = modattn_store_generation(h->store, &gen);
    if (st) return st;
    if (h->have_v && h->v.generation == gen) return 0;
    if (!h->share) ann_slot_clear(&h->own); /* (a shared one checks the vectors it was opened for) */
    if (h->have_v) modattn__store_vectors_free(&h->v);
    h->have_v = false;
    memset(&h->v, 0, sizeof h->v);
    if ((st = modattn__store_open_vectors(h->store, &h->v))) return st;
    h->have_v = true;
    return 0;
}

/* Ends the use of the index searcher_ann gave (a shared one's lock). */
static void searcher_ann_done(modattn_searcher *h) {
    if (h->locked) pthread_mutex_unlock(&h->share->mu);
    h->locked = false;
}

/* The held ANN index for p (read once per generation, or when its file changes: a holder pays its
 * reading once). With *a set and a share, the share's lock is held until searcher_ann_done. */
static int searcher_ann(modattn_searcher *h, const modattn_search_params *p, modattn_ann **a, modattn_search_info *where) {
    *a = NULL;
    if (p->mode == MODATTN_SEARCH_KEYWORD || p->mode == MODATTN_SEARCH_SPARSE || p->index == MODATTN_SEARCH_INDEX_EXACT ||
        h->v.n == 0)
        return 0;
    ann_slot *slot = &h->own;
    if (h->share) {
        pthread_mutex_lock(&h->share->mu);
        h->locked = true;
        slot = &h->share->slot;
    }
    int st = ann_slot_current(slot, h->store, &h->v);
    if (!st && p->path_prefix) {
        if (p->index == MODATTN_SEARCH_INDEX_ANN)
            st = modattn__error(MODATTN_EINVAL, "the ANN index cannot keep to a path prefix: search it exactly");
        else if (slot->ann && where)
            snprintf(where->index_note, sizeof where->index_note, "a path prefix is searched exactly");
    } else if (!st && !slot->ann) {
        if (p->index == MODATTN_SEARCH_INDEX_ANN)
            st = modattn__error(MODATTN_ENOTFOUND, "no usable ANN index: %s",
                               slot->note[0] ? slot->note : "the store has none (`modattn index --ann hnsw` builds one)");
        else if (where) snprintf(where->index_note, sizeof where->index_note, "%s", slot->note);
    } else if (!st) {
        if (where) snprintf(where->index, sizeof where->index, "%s", modattn_ann_kind_name(modattn__ann_get_kind(slot->ann)));
        *a = slot->ann;
        return 0; /* (locked while it is searched) */
    }
    searcher_ann_done(h);
    return st;
}

/* modattn__search_batch; with h, on its held vectors and ANN index (refreshed first). */
static int search_batch_core(modattn_store *store, modattn_model *model, const char *const *queries, size_t nq,
                             const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                             size_t *nout, modattn_search_info *where, modattn_search_notes *notes,
                             modattn_searcher *h) {
    if (where) memset(where, 0, sizeof *where);
    if (!out || !nout || (nq && !queries)) return modattn__error(MODATTN_EINVAL, "modattn__search_batch: NULL argument");
    for (size_t i = 0; i < nq; i++) {
        out[i] = NULL;
        nout[i] = 0;
        if (notes) memset(&notes[i], 0, sizeof notes[i]);
    }
    if (!store || !model || !p) return modattn__error(MODATTN_EINVAL, "modattn__search_batch: NULL argument");
    for (size_t i = 0; i < nq; i++)
        if (!queries[i]) return modattn__error(MODATTN_EINVAL, "modattn__search_batch: query %zu is NULL", i);
    modattn_store_model sm;
    modattn_embed_options eo;
    int st = modattn_store_embed_options(store, model, p->embed, true, &eo, &sm);
    if (st || (st = modattn_store_check_model(store, &sm)) || p->k == 0 || nq == 0) return st;
    const size_t dim = sm.dim, cand = candidates_for(p);
    const bool vectors = p->mode == MODATTN_SEARCH_HYBRID || p->mode == MODATTN_SEARCH_VECTOR;
    if (nq > SIZE_MAX / sizeof(float) / dim || cand > SIZE_MAX / 16 / nq)
        return modattn__error(MODATTN_ERANGE, "modattn__search_batch: %zu queries x %zu candidates is too large", nq, cand);
    /* keyword mode embeds nothing: zero vectors, as modattn__search_with passes */
    float *q = modattn__calloc(nq * dim, sizeof(float), MODATTN_MEM_OTHER);
    int64_t *ids = vectors && !p->path_prefix ? modattn__malloc(nq * cand * sizeof *ids, MODATTN_MEM_OTHER) : NULL;
    float *sc = ids ? modattn__malloc(nq * cand * sizeof *sc, MODATTN_MEM_OTHER) : NULL;
    size_t *nc = ids ? modattn__calloc(nq, sizeof *nc, MODATTN_MEM_OTHER) : NULL;
    modattn_store_vectors own;
    memset(&own, 0, sizeof own);
    modattn_store_vectors *vp = h && vectors ? &h->v : &own; /* keywords alone: no vectors, as ever */
    if (!q || (ids && (!sc || !nc)) || (vectors && !p->path_prefix && !ids)) {
        st = modattn__mem_last_status();
        goto done;
    }
    /* every query embedded in one call (a query's vector does not depend on the others) */
    if (vectors && (st = modattn_model_embed_opt(model, NULL, &eo, queries, NULL, nq, q, NULL))) {
        st = modattn__error_prefix(st, "embedding the queries");
        goto done;
    }
    if (vectors && (st = h ? searcher_refresh(h) : modattn__store_open_vectors(store, vp))) goto done;
    vp->dim = dim;
    tell_where(where, vp);
    if (vectors && p->path_prefix) { /* scanned exactly per query: says so, or refuses a forced ANN */
        modattn_ann *none = NULL;
        st = h ? searcher_ann(h, p, &none, where) : open_ann_for(store, vp, p, nq, &none, where);
        if (h) searcher_ann_done(h);
        if (st) goto done;
    }
    if (ids) {
        /* the vector ranking of every query in one pass over the vectors */
        /* normalised as search_run normalises its copy (which gets the raw vector, as one query would) */
        float *qn = modattn__malloc(nq * dim * sizeof(float), MODATTN_MEM_OTHER);
        if (!qn) {
            st = modattn__mem_last_status();
            goto done;
        }
        memcpy(qn, q, nq * dim * sizeof(float));
        for (size_t i = 0; i < nq; i++) modattn__vec_normalize(qn + i * dim, dim);
        modattn_ann *ann = NULL;
        if ((st = h ? searcher_ann(h, p, &ann, where) : open_ann_for(store, vp, p, nq, &ann, where))) {
            modattn_free(qn);
            goto done;
        }
        uint64_t tr = ann ? 0 : modattn__trace_begin();
        st = ann ? modattn__ann_topk_batch(ann, vp, qn, nq, cand, p->ann, exec, ids, sc, nc)
                 : modattn__store_vectors_topk_batch(vp, qn, nq, cand, exec, ids, sc, nc);
        if (h) searcher_ann_done(h);
        else modattn__ann_close(ann);
        modattn_free(qn);
        if (st) goto done;
        if (tr) {
            char shape[80];
            snprintf(shape, sizeof shape, "n=%zu dim=%zu queries=%zu k=%zu", vp->n, dim, nq, cand);
            modattn__trace_end(tr, "search.scan_batch", "topk_batch", shape, (double)vp->n * (double)dim * 4.0,
                              2.0 * (double)vp->n * (double)dim * (double)nq);
        }
    }
    for (size_t i = 0; i < nq && !st; i++) {
        st = search_run(store, vp, q + i * dim, queries[i], strlen(queries[i]), p, exec,
                        ids ? ids + i * cand : NULL, sc ? sc + i * cand : NULL, nc ? nc[i] : 0, &out[i], &nout[i],
                        notes ? &notes[i] : NULL);
        if (!st && vectors) st = modattn__search_snippets(model, queries[i], strlen(queries[i]), out[i], nout[i]);
        if (st) st = modattn__error_prefix(st, "query %zu", i + 1);
    }
    if (st)
        for (size_t i = 0; i < nq; i++) {
            modattn_search_results_free(out[i], nout[i]);
            out[i] = NULL;
            nout[i] = 0;
        }
done:
    modattn__store_vectors_free(&own);
    modattn_free(q);
    modattn_free(ids);
    modattn_free(sc);
    modattn_free(nc);
    return st;
}

int modattn__search_batch(modattn_store *store, modattn_model *model, const char *const *queries, size_t nq,
                         const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                         size_t *nout, modattn_search_info *where, modattn_search_notes *notes) {
    return search_batch_core(store, model, queries, nq, p, exec, out, nout, where, notes, NULL);
}

int modattn_searcher_create(modattn_store *store, modattn_model *model, modattn_searcher **out) {
    return modattn__searcher_create_shared(store, model, NULL, out);
}

int modattn__searcher_create_shared(modattn_store *store, modattn_model *model, modattn_searcher_share *share,
                                   modattn_searcher **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_searcher_create: NULL argument");
    *out = NULL;
    if (!store || !model) return modattn__error(MODATTN_EINVAL, "modattn_searcher_create: NULL argument");
    modattn_searcher *h = modattn__calloc(1, sizeof *h, MODATTN_MEM_INDEX);
    if (!h) return modattn__mem_last_status();
    h->store = store;
    h->model = model;
    h->share = share;
    *out = h;
    return 0;
}

void modattn_searcher_free(modattn_searcher *h) {
    if (!h) return;
    ann_slot_clear(&h->own);
    if (h->have_v) modattn__store_vectors_free(&h->v);
    modattn_free(h);
}

int modattn__searcher_share_create(modattn_searcher_share **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn__searcher_share_create: NULL argument");
    *out = modattn__calloc(1, sizeof **out, MODATTN_MEM_INDEX);
    if (!*out) return modattn__mem_last_status();
    pthread_mutex_init(&(*out)->mu, NULL);
    return 0;
}

void modattn__searcher_share_free(modattn_searcher_share *sh) {
    if (!sh) return;
    ann_slot_clear(&sh->slot);
    pthread_mutex_destroy(&sh->mu);
    modattn_free(sh);
}

int modattn__searcher_vectors(modattn_searcher *h, const modattn_store_vectors **v) {
    if (!h || !v) return modattn__error(MODATTN_EINVAL, "modattn__searcher_vectors: NULL argument");
    *v = NULL;
    int st = searcher_refresh(h);
    if (!st) *v = &h->v;
    return st;
}

int modattn__searcher_search_vector(modattn_searcher *h, const float *query_vec, const char *query, size_t query_len,
                                   const modattn_search_params *p, const modattn_exec *exec,
                                   modattn_search_result **out, size_t *nout, modattn_search_info *info,
                                   modattn_search_notes *notes) {
    if (info) memset(info, 0, sizeof *info);
    if (out) *out = NULL;
    if (nout) *nout = 0;
    if (!h || !query_vec || !p || !out || !nout || (!query && query_len))
        return modattn__error(MODATTN_EINVAL, "modattn__searcher_search_vector: NULL argument");
    if (!query) query = "";
    int st = searcher_refresh(h);
    if (st) return st;
    tell_where(info, &h->v);
    modattn_ann *ann = NULL;
    if ((st = searcher_ann(h, p, &ann, info))) return st;
    if (ann) st = modattn__search_run_ann(h->store, &h->v, ann, query_vec, query, query_len, p, exec, out, nout, notes);
    searcher_ann_done(h);
    if (!ann) st = modattn__search_run(h->store, &h->v, query_vec, query, query_len, p, exec, out, nout, notes);
    return st;
}

int modattn_searcher_search(modattn_searcher *h, const char *const *queries, size_t nq, const modattn_search_params *p,
                            const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                            modattn_search_info *info, modattn_search_notes *notes) {
    if (!h) return modattn__error(MODATTN_EINVAL, "modattn_searcher_search: NULL searcher");
    return search_batch_core(h->store, h->model, queries, nq, p, exec, out, nout, info, notes, h);
}

void modattn_search_results_free(modattn_search_result *r, size_t n) {
    if (!r) return;
    for (size_t i = 0; i < n; i++) {
        modattn__store_chunk_clear(&r[i].chunk);
        modattn_free(r[i].spans);
    }
    modattn_free(r);
}
