/* pipeline/ann_search.c — the ANN index opened (every check: ann_file.c) and searched: FAISS's
 * kinds through our HNSW walk or FAISS's own search, the compact kinds by their codes in place,
 * every candidate scored again exactly so that scores are the exact scan's bit for bit. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/search.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ann.h"
#include "pipeline/internal_search.h"
#include "pipeline/ann_internal.h"
#if MODATTN_HAVE_FAISS
#include "core/env.h"
#endif

/* How many candidates a query of k results takes from the index. */
static size_t fetch_for(const ann_header *h, const modattn_ann_params *search, size_t k) {
    size_t r = search && search->rescore > 0 ? (size_t)search->rescore : h->rescore > 0 ? (size_t)h->rescore : 0;
    if (!r) {
        if (h->kind == MODATTN_ANN_HNSW || h->kind == MODATTN_ANN_F16) r = 2 * k > k + 16 ? 2 * k : k + 16;
        else if (h->kind == MODATTN_ANN_INT8) r = 4 * k > k + 32 ? 4 * k : k + 32;
        else if (h->kind == MODATTN_ANN_BINARY) r = 100 * k > 1000 ? 100 * k : 1000;
        else r = 8 * k > 100 ? 8 * k : 100;
    }
    return r < k ? k : r;
}

int modattn__ann_open(modattn_store *s, const modattn_store_vectors *v, modattn_ann **out, char *why, size_t len) {
    if (!out || !why || !len) return modattn__error(MODATTN_EINVAL, "modattn__ann_open: NULL argument");
    *out = NULL;
    why[0] = '\0';
    if (!s || !v) return modattn__error(MODATTN_EINVAL, "modattn__ann_open: NULL argument");
    char path[4200];
    int st = modattn__store_ann_file_path(s, path, sizeof path);
    if (st) return st;
    if (access(path, F_OK) != 0) return 0;
    if (v->nseg > ANN_MAX_SEG) {
        snprintf(why, len, "the vectors have too many segments");
        return 0;
    }
    char model[128] = "", hash[17] = "";
    size_t dim = 0;
    if ((st = modattn_store_get_model(s, model, sizeof model, hash, &dim))) return st;
    ann_file f;
    char bad[512];
    if (modattn__ann_map_file(path, &f, false, bad, sizeof bad) != 1) {
        snprintf(why, len, "%s", bad);
        return 0;
    }
    ann_seg seg[ANN_MAX_SEG];
    modattn__ann_segments_of(v, false, seg);
    modattn__ann_check_fit(&f.h, v, seg, model, hash, bad, sizeof bad);
    if (bad[0]) {
        snprintf(why, len, "%s: %s", path, bad);
        modattn__ann_unmap_file(&f);
        return 0;
    }
    modattn_ann *a = modattn__calloc(1, sizeof *a, MODATTN_MEM_INDEX);
    if (!a) {
        modattn__ann_unmap_file(&f);
        return modattn__mem_last_status();
    }
    a->h = f.h;
    if (ann_is_flat(f.h.kind)) {
        /* searched in place: the mapping is the page cache's, as the vector file's is */
        a->map = f.map;
        a->map_bytes = f.bytes;
        *out = a;
        return 1;
    }
#if !MODATTN_HAVE_FAISS
    modattn__ann_unmap_file(&f);
    modattn_free(a);
    snprintf(why, len, "%s is a %s index but this build has no FAISS (apt-get install libfaiss-dev, build again)", path,
             modattn_ann_kind_name((modattn_ann_kind)f.h.kind));
    return 0;
#else
    /* FAISS allocates with new: its bytes are counted (and budgeted) here as what they are */
    if ((st = modattn__mem_account(MODATTN_MEM_INDEX, (int64_t)f.h.payload_bytes))) {
        modattn__ann_unmap_file(&f);
        modattn_free(a);
        return modattn__error(st, "the ANN index %s (%llu bytes) is over the memory budget", path,
                             (unsigned long long)f.h.payload_bytes);
    }
    a->accounted = (int64_t)f.h.payload_bytes;
    char msg[256] = "";
    st = modattn__faiss_read((const unsigned char *)f.map + ANN_HEADER, f.h.payload_bytes, modattn__scan_best(), &a->f, msg,
                            sizeof msg);
    modattn__ann_unmap_file(&f);
    if (!st && (modattn__faiss_ntotal(a->f) != f.h.rows || !modattn__faiss_is_trained(a->f))) {
        snprintf(msg, sizeof msg, "it holds %zu rows, its header says %llu", modattn__faiss_ntotal(a->f),
                 (unsigned long long)f.h.rows);
        st = MODATTN_EFORMAT;
    }
    if (st == MODATTN_ENOMEM) {
        modattn__ann_close(a);
        return modattn__error(st, "reading the ANN index %s: %s", path, msg);
    }
    if (!st && modattn__faiss_hnsw_view(a->f, &a->g)) {
        /* a graph that is not whole would send the walk outside its arrays: not used */
        modattn__hnsw_check(&a->g, msg, sizeof msg);
        if (msg[0]) st = MODATTN_EFORMAT;
        /* MODATTN_ANN_FAISS_SEARCH=1: FAISS's own search instead of our walk (comparisons) */
        a->walk = !st && !modattn__env_bool("MODATTN_ANN_FAISS_SEARCH", false);
        a->dot = modattn__dot1_best();
    }
    if (st) {
        snprintf(why, len, "%s: %s", path, msg);
        modattn__ann_close(a);
        return 0;
    }
    *out = a;
    return 1;
#endif
}

int modattn__ann_peek(modattn_store *s, const modattn_store_vectors *v, uint64_t *file_bytes, char *why, size_t len) {
    if (!why || !len) return modattn__error(MODATTN_EINVAL, "modattn__ann_peek: NULL argument");
    why[0] = '\0';
    if (file_bytes) *file_bytes = 0;
    if (!s || !v) return modattn__error(MODATTN_EINVAL, "modattn__ann_peek: NULL argument");
    char path[4200];
    int st = modattn__store_ann_file_path(s, path, sizeof path);
    if (st) return st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) snprintf(why, len, "cannot open %s: %s", path, strerror(errno));
        return 0;
    }
    struct stat sb;
    unsigned char *page = malloc(ANN_HEADER);
    ssize_t got = page && fstat(fd, &sb) == 0 ? pread(fd, page, ANN_HEADER, 0) : -1;
    close(fd);
    if (got != (ssize_t)ANN_HEADER) {
        free(page);
        snprintf(why, len, "%s: %s", path, got < 0 ? "cannot be read" : "shorter than its header (truncated)");
        return 0;
    }
    ann_header h;
    char bad[256];
    modattn__ann_check_header(page, (uint64_t)sb.st_size, &h, bad, sizeof bad);
    free(page);
    if (!bad[0]) {
        char model[128] = "", hash[17] = "";
        size_t dim = 0;
        if ((st = modattn_store_get_model(s, model, sizeof model, hash, &dim))) return st;
        ann_seg seg[ANN_MAX_SEG];
        if (v->nseg > ANN_MAX_SEG) snprintf(bad, sizeof bad, "the vectors have too many segments");
        else {
            modattn__ann_segments_of(v, false, seg);
            modattn__ann_check_fit(&h, v, seg, model, hash, bad, sizeof bad);
        }
    }
    if (bad[0]) {
        snprintf(why, len, "%s: %s", path, bad);
        return 0;
    }
    /* a compact kind is searched in place: opening it reads its header only */
    if (file_bytes) *file_bytes = ann_is_flat(h.kind) ? ANN_HEADER : (uint64_t)sb.st_size;
    return 1;
}

void modattn__ann_close(modattn_ann *a) {
    if (!a) return;
#if MODATTN_HAVE_FAISS
    modattn__faiss_free(a->f);
    for (int t = 0; t < a->nscratch; t++) modattn__hnsw_scratch_free(&a->scratch[t]);
    modattn_free(a->scratch);
#endif
    if (a->accounted) modattn__mem_account(MODATTN_MEM_INDEX, -a->accounted);
    if (a->map) munmap(a->map, a->map_bytes);
    modattn_free(a);
}

modattn_ann_kind modattn__ann_get_kind(const modattn_ann *a) { return a ? (modattn_ann_kind)a->h.kind : MODATTN_ANN_NONE; }
void modattn__ann_get_params(const modattn_ann *a, modattn_ann_params *out) {
    if (a && out) ann_params_of(&a->h, out);
}
size_t modattn__ann_rows(const modattn_ann *a) { return a ? (size_t)a->h.rows : 0; }
uint64_t modattn__ann_file_bytes(const modattn_ann *a) { return a ? a->h.payload_bytes + ANN_HEADER : 0; }

typedef struct rescored {
    float score;
    int64_t id;
} rescored;
static int rescored_cmp(const void *a, const void *b) {
    const rescored *x = a, *y = b;
    /* NaN last, then score descending, then chunk id ascending (the exact scan's order) */
    const bool xn = x->score != x->score, yn = y->score != y->score;
    if (xn != yn) return xn ? 1 : -1;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Bytes of candidate heaps a compact kind's batch holds at once (threads x queries x candidates x
 * 16): a long batch goes through in slices of queries that fit. */
#define FLAT_HEAP_BYTES ((size_t)64 << 20)

/* A compact kind: each query's best rows by the codes, scored again exactly (the scan's kernel,
 * so that scores are its own bit for bit), the k best kept in the exact scan's order. */
static int flat_batch(const modattn_ann *a, const modattn_store_vectors *v, const float *queries, size_t nq, size_t k,
                      const modattn_ann_params *search, const modattn_exec *exec, int64_t *ids, float *scores,
                      size_t *nout) {
    const size_t want = k > v->n ? v->n : k, dim = v->dim;
    size_t fetch = fetch_for(&a->h, search, k);
    if (fetch > v->rows) fetch = v->rows;
    const size_t threads = exec && exec->parallel_for && exec->nthreads > 1 ? (size_t)exec->nthreads : 1;
    const char *hb = getenv("MODATTN_TEST_FLAT_HEAP_BYTES"); /* tests: small slices */
    size_t slice = (hb ? strtoull(hb, NULL, 10) : FLAT_HEAP_BYTES) / (threads + 1) / (fetch * sizeof(modattn_hit));
    if (slice < 1) slice = 1;
    if (slice > nq) slice = nq;
    if (fetch > SIZE_MAX / sizeof(modattn_hit) / slice)
        return modattn__error(MODATTN_ERANGE, "ann_topk_batch: %zu candidates per query is too many", fetch);
    const modattn__flat_code c = ann_flat_code(a->h.kind);
    const unsigned char *codes = (const unsigned char *)a->map + ANN_HEADER;
    const float *scales =
        c == MODATTN__FLAT_INT8 ? (const float *)(codes + a->h.rows * modattn__flat_stride(c, dim)) : NULL;
    modattn_hit *cand = modattn__malloc(slice * fetch * sizeof *cand, MODATTN_MEM_WORKSPACE);
    size_t *nc = modattn__malloc(slice * sizeof *nc, MODATTN_MEM_WORKSPACE);
    rescored *rs = modattn__malloc(fetch * sizeof *rs, MODATTN_MEM_WORKSPACE);
    int st = 0;
    if (!cand || !nc || !rs) st = modattn__mem_last_status();
    for (size_t q = 0; !st && q < nq; q++) {
        const size_t q0 = q / slice * slice; /* the slice of queries q is in */
        if (q == q0) {
            const size_t m = nq - q0 < slice ? nq - q0 : slice;
            if ((st = modattn__flat_candidates(c, codes, scales, v->rows, dim, v->mask, queries + q0 * dim, m, fetch,
                                               exec, cand, nc)))
                break;
        }
        const size_t qi = q - q0;
        size_t n = 0;
        for (size_t j = 0; j < nc[qi]; j++) {
            int64_t id = 0;
            const float *x = ann_row_at(v, cand[qi * fetch + j].row, &id);
            if (!x) continue;
            float sc = 0;
            if ((st = modattn__scan_scores(x, 1, dim, v->ld, queries + q * dim, MODATTN_SCAN_AUTO, &sc))) break;
            rs[n++] = (rescored){sc, id};
        }
        qsort(rs, n, sizeof *rs, rescored_cmp);
        nout[q] = n < want ? n : want;
        for (size_t j = 0; j < nout[q]; j++) ids[q * k + j] = rs[j].id, scores[q * k + j] = rs[j].score;
    }
    modattn_free(cand);
    modattn_free(nc);
    modattn_free(rs);
    if (st)
        for (size_t q = 0; q < nq; q++) nout[q] = 0;
    return st;
}

#if MODATTN_HAVE_FAISS
typedef struct walk_job {
    modattn_ann *a;
    const modattn_store_vectors *v;
    const float *queries;
    size_t k, ef;
    int64_t *ids;
    float *scores;
    size_t *nout;
} walk_job;

static void walk_one(void *ctx, int64_t i, int thread) {
    walk_job *j = ctx;
    modattn_ann *a = j->a;
    const size_t q = (size_t)i, k = j->k;
    int64_t *ids = j->ids + q * k;
    float *sc = j->scores + q * k;
    modattn__hnsw_search(&a->g, a->dot, j->queries + q * a->g.d, j->ef, k, j->v->mask, &a->scratch[thread], ids, sc,
                         &j->nout[q]);
    /* rows to chunk ids, in the exact scan's order (score, then the lower chunk id) */
    rescored r[64], *rs = k <= 64 ? r : modattn__malloc(k * sizeof *rs, MODATTN_MEM_WORKSPACE);
    for (size_t n = 0; n < j->nout[q]; n++) {
        int64_t id = 0;
        ann_row_at(j->v, (size_t)ids[n], &id);
        ids[n] = id;
        if (rs) rs[n] = (rescored){sc[n], id};
    }
    if (rs) {
        qsort(rs, j->nout[q], sizeof *rs, rescored_cmp);
        for (size_t n = 0; n < j->nout[q]; n++) ids[n] = rs[n].id, sc[n] = rs[n].score;
    }
    if (rs != r) modattn_free(rs); /* (without it, the rare tie keeps the row order) */
}

/* HNSW through our walk over FAISS's graph: scores are the scan kernel's own, so none is scored
 * twice; removed rows are walked through, never returned. */
static int walk_batch(modattn_ann *a, const modattn_store_vectors *v, const float *queries, size_t nq, size_t k,
                      const modattn_ann_params *search, const modattn_exec *exec, int64_t *ids, float *scores,
                      size_t *nout) {
    const size_t want = k > v->n ? v->n : k;
    size_t ef = search && search->ef_search > 0 ? (size_t)search->ef_search : (size_t)a->h.ef_search;
    if (search && search->rescore > 0 && (size_t)search->rescore > ef) ef = (size_t)search->rescore;
    if (ef < want) ef = want;
    const bool par = exec && exec->parallel_for && exec->nthreads > 1 && nq >= 2;
    const int threads = par ? exec->nthreads : 1;
    if (a->nscratch < threads) {
        modattn__hnsw_scratch *sc = modattn__realloc(a->scratch, (size_t)threads * sizeof *sc, MODATTN_MEM_WORKSPACE);
        if (!sc) return modattn__mem_last_status();
        memset(sc + a->nscratch, 0, (size_t)(threads - a->nscratch) * sizeof *sc);
        a->scratch = sc;
        a->nscratch = threads;
    }
    for (int t = 0; t < threads; t++) {
        int st = modattn__hnsw_scratch_fit(&a->scratch[t], &a->g, ef);
        if (st) return st;
    }
    walk_job j = {a, v, queries, want, ef, ids, scores, nout};
    /* results are written at q * want: spread them to q * k when k > want (fewer rows than k) */
    uint64_t tr = modattn__trace_begin();
    if (want == k) {
        if (par) exec->parallel_for(exec, (int64_t)nq, walk_one, &j);
        else
            for (size_t q = 0; q < nq; q++) walk_one(&j, (int64_t)q, 0);
    } else {
        for (size_t q = 0; q < nq; q++) {
            walk_job one = {a, v, queries + q * a->g.d, want, ef, ids + q * k, scores + q * k, nout + q};
            walk_one(&one, 0, 0);
        }
    }
    if (tr) {
        char shape[96];
        snprintf(shape, sizeof shape, "hnsw rows=%zu queries=%zu ef=%zu", v->rows, nq, ef);
        modattn__trace_end(tr, "search.ann", "walk", shape, 0, 0);
    }
    return 0;
}
#endif

int modattn__ann_topk_batch(const modattn_ann *a, const modattn_store_vectors *v, const float *queries, size_t nq,
                           size_t k, const modattn_ann_params *search, const modattn_exec *exec, int64_t *ids,
                           float *scores, size_t *nout) {
    if (nq && !nout) return modattn__error(MODATTN_EINVAL, "ann_topk_batch: nout is NULL");
    for (size_t q = 0; q < nq; q++) nout[q] = 0;
    if (!a || !v || (nq && (!queries || (k && (!ids || !scores)))))
        return modattn__error(MODATTN_EINVAL, "ann_topk_batch: NULL argument");
    if (k == 0 || nq == 0 || v->n == 0) return 0;
    bool same = v->rows == a->h.rows && v->dim == a->h.dim && v->nseg == a->h.nseg;
    for (size_t g = 0; same && g < v->nseg; g++) same = v->seg[g].n == a->h.seg[g].n && v->seg[g].row0 == (g ? v->seg[g - 1].row0 + v->seg[g - 1].n : 0);
    if (!same) return modattn__error(MODATTN_EINVAL, "ann_topk_batch: the vectors are not those the index was opened for");
    if (ann_is_flat(a->h.kind)) return flat_batch(a, v, queries, nq, k, search, exec, ids, scores, nout);
#if !MODATTN_HAVE_FAISS
    (void)search, (void)exec;
    return modattn_ann_available();
#else
    if (a->walk) return walk_batch((modattn_ann *)a, v, queries, nq, k, search, exec, ids, scores, nout);
    const size_t want = k > v->n ? v->n : k;
    size_t fetch = fetch_for(&a->h, search, k);
    if (fetch > v->rows) fetch = v->rows;
    const int ef = search && search->ef_search > 0 ? search->ef_search : a->h.ef_search;
    const int nprobe = search && search->nprobe > 0 ? search->nprobe : a->h.nprobe;
    /* FAISS spreads queries over OpenMP threads: for a few queries the others would only spin */
    const int threads = exec && exec->nthreads > 0 && nq >= 4 * (size_t)exec->nthreads ? exec->nthreads : 1;
    int st = 0;
    /* queries whose candidates, masked rows left out, were fewer than k: asked again for more */
    size_t *todo = modattn__malloc(nq * sizeof *todo, MODATTN_MEM_WORKSPACE);
    size_t ntodo = nq;
    if (!todo) return modattn__mem_last_status();
    for (size_t q = 0; q < nq; q++) todo[q] = q;
    float *qbuf = NULL, *dist = NULL;
    int64_t *lab = NULL;
    rescored *rs = NULL;
    for (;;) {
        const size_t dim = v->dim;
        if (fetch > SIZE_MAX / sizeof(float) / ntodo) {
            st = modattn__error(MODATTN_ERANGE, "ann_topk_batch: %zu queries x %zu candidates is too large", ntodo, fetch);
            break;
        }
        modattn_free(qbuf), modattn_free(dist), modattn_free(lab), modattn_free(rs);
        qbuf = modattn__malloc(ntodo * dim * sizeof(float), MODATTN_MEM_WORKSPACE);
        dist = modattn__malloc(ntodo * fetch * sizeof(float), MODATTN_MEM_WORKSPACE);
        lab = modattn__malloc(ntodo * fetch * sizeof(int64_t), MODATTN_MEM_WORKSPACE);
        rs = modattn__malloc(fetch * sizeof *rs, MODATTN_MEM_WORKSPACE);
        if (!qbuf || !dist || !lab || !rs) {
            st = modattn__mem_last_status();
            break;
        }
        for (size_t i = 0; i < ntodo; i++) memcpy(qbuf + i * dim, queries + todo[i] * dim, dim * sizeof(float));
        char msg[256] = "";
        uint64_t tr = modattn__trace_begin();
        if ((st = modattn__faiss_search(a->f, ntodo, qbuf, fetch, ef, nprobe, threads, dist, lab, msg, sizeof msg))) {
            st = modattn__error(st, "searching the ANN index: %s", msg);
            break;
        }
        if (tr) {
            char shape[96];
            snprintf(shape, sizeof shape, "%s rows=%zu queries=%zu fetch=%zu", modattn_ann_kind_name(a->h.kind),
                     v->rows, ntodo, fetch);
            modattn__trace_end(tr, "search.ann", "faiss", shape, 0, 0);
        }
        size_t again = 0;
        for (size_t i = 0; i < ntodo; i++) {
            const size_t q = todo[i];
            const float *qv = queries + q * dim;
            size_t n = 0;
            for (size_t j = 0; j < fetch; j++) {
                const int64_t row = lab[i * fetch + j];
                if (row < 0 || (uint64_t)row >= v->rows) continue;
                if (v->mask && (v->mask[row / 8] >> (row % 8) & 1)) continue;
                int64_t id = 0;
                const float *x = ann_row_at(v, (size_t)row, &id);
                if (!x) continue;
                float sc = 0;
                /* the exact scan's kernel, so that scores are its own bit for bit */
                if ((st = modattn__scan_scores(x, 1, dim, v->ld, qv, MODATTN_SCAN_AUTO, &sc))) break;
                rs[n++] = (rescored){sc, id};
            }
            if (st) break;
            qsort(rs, n, sizeof *rs, rescored_cmp);
            /* the same row may come twice from FAISS only if the index is damaged: keep one */
            size_t w = 0;
            for (size_t j = 0; j < n; j++)
                if (!w || rs[w - 1].id != rs[j].id || rs[w - 1].score != rs[j].score) rs[w++] = rs[j];
            n = w;
            if (n < want && fetch < v->rows) {
                todo[again++] = q;
                continue;
            }
            nout[q] = n < want ? n : want;
            for (size_t j = 0; j < nout[q]; j++) ids[q * k + j] = rs[j].id, scores[q * k + j] = rs[j].score;
        }
        if (st || again == 0) break;
        ntodo = again;
        fetch = fetch * 4 < v->rows ? fetch * 4 : v->rows;
    }
    modattn_free(todo);
    modattn_free(qbuf);
    modattn_free(dist);
    modattn_free(lab);
    modattn_free(rs);
    if (st)
        for (size_t q = 0; q < nq; q++) nout[q] = 0;
    return st;
#endif
}

