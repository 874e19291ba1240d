/* pipeline/scan_batch.c — exact top-k for many queries in one pass over the vectors.
 *
 * One query at a time (scan.c) reads every vector once per query: memory-bound, and 200 queries
 * read the matrix 200 times. Here a block of rows is scored against a block of queries by one
 * GEMM (the encoder's library, backends/cpu/cpu_gemm.c: compute-bound, each row read once per
 * block of queries while it is in cache), and each query keeps its best k + MARGIN rows by those
 * scores. The candidates are then scored again with the single-query scan kernel and the k best
 * kept: the scores returned are modattn__topk's bit for bit, and so is the ranking, unless the
 * GEMM's rounding (about 1e-7 on a cosine) moved a row across the cut by more than MARGIN places.
 * Rows are split over the threads by blocks; each thread keeps a heap per query; the heaps are
 * merged at the end, so the answer does not depend on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/blas.h" /* modattn__sgemm_nt: the host BLAS */
#include "modattn/core.h"
#include "modattn/search.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_search.h"
#include "pipeline/hits.h"
#include "pipeline/pipeline_internal.h"

#define BATCH_ROWS 1024   /* rows per task (one GEMM's N) */
#define BATCH_QUERIES 256 /* queries per GEMM (its M): scores of a task fit in 1 MiB */
#define BATCH_MARGIN 8    /* extra candidates per query, re-scored exactly */

typedef struct batch_job {
    const float *mat, *q;
    size_t n, dim, ld, nq, qld, kc; /* kc: candidates kept per query */
    const uint8_t *skip;
    size_t skip_row0;
    float *scores;      /* [threads][BATCH_QUERIES * BATCH_ROWS] */
    modattn_hit *heaps; /* [threads][nq][kc] */
    size_t *heap_n;     /* [threads][nq] */
} batch_job;

static void batch_task(void *arg, int64_t task, int thread) {
    batch_job *j = arg;
    const size_t r0 = (size_t)task * BATCH_ROWS;
    const size_t nr = j->n - r0 < BATCH_ROWS ? j->n - r0 : BATCH_ROWS;
    float *sc = j->scores + (size_t)thread * BATCH_QUERIES * BATCH_ROWS;
    for (size_t q0 = 0; q0 < j->nq; q0 += BATCH_QUERIES) {
        const size_t nqb = j->nq - q0 < BATCH_QUERIES ? j->nq - q0 : BATCH_QUERIES;
        /* sc[qi, r] = dot(query q0 + qi, row r0 + r) */
        modattn__sgemm_nt((int64_t)nqb, (int64_t)nr, (int64_t)j->dim, 1.0f, j->q + q0 * j->qld,
                          (int64_t)j->qld, j->mat + r0 * j->ld, (int64_t)j->ld, 0.0f, sc, (int64_t)nr);
        for (size_t qi = 0; qi < nqb; qi++) {
            const size_t q = q0 + qi;
            modattn_hit *h = j->heaps + ((size_t)thread * j->nq + q) * j->kc;
            size_t *hn = &j->heap_n[(size_t)thread * j->nq + q];
            const float *s = sc + qi * nr;
            float floor_score = *hn == j->kc ? h[0].score : -INFINITY;
            for (size_t i = 0; i < nr; i++) {
                float v = s[i];
                if (v != v) v = -INFINITY;
                if (*hn == j->kc && v < floor_score) continue;
                if (j->skip) {
                    const size_t g = j->skip_row0 + r0 + i;
                    if (j->skip[g >> 3] >> (g & 7) & 1) continue;
                }
                modattn__hit_push(h, hn, j->kc, (modattn_hit){r0 + i, v});
                if (*hn == j->kc) floor_score = h[0].score;
            }
        }
    }
}

int modattn__topk_batch(const float *mat, size_t n, size_t dim, size_t ld, const float *queries,
                       size_t nq, size_t qld, size_t k, const modattn_exec *exec, const uint8_t *skip,
                       size_t skip_row0, modattn_hit *out, size_t *nout) {
    if (nq && !nout) return modattn__error(MODATTN_EINVAL, "modattn__topk_batch: nout is NULL");
    for (size_t q = 0; q < nq; q++) nout[q] = 0;
    if (k == 0 || n == 0 || nq == 0) return 0;
    if (!mat || !queries || !out || ld < dim || qld < dim || dim == 0)
        return modattn__error(MODATTN_EINVAL, "modattn__topk_batch: NULL argument, dim 0, ld or qld < dim");
    modattn__scan_fn fn = NULL;
    {
        /* the single-query kernel, for the exact scores of the candidates */
        const modattn_scan_isa isa = modattn__scan_isa_auto();
        switch (isa) {
#if defined(MODATTN_SCAN_X86)
        case MODATTN_SCAN_AVX512: fn = modattn__scan_avx512; break;
        case MODATTN_SCAN_AVX2: fn = modattn__scan_avx2; break;
#endif
        default: fn = modattn__scan_scalar; break;
        }
    }
    const size_t kk = k > n ? n : k;
    const size_t kc = kk + BATCH_MARGIN > n ? n : kk + BATCH_MARGIN;
    const size_t ntasks = (n + BATCH_ROWS - 1) / BATCH_ROWS;
    const bool par = exec && exec->parallel_for && exec->nthreads > 1 && ntasks > 1;
    const size_t nthreads = par ? (size_t)exec->nthreads : 1;
    if (kc > SIZE_MAX / sizeof(modattn_hit) / nthreads / nq)
        return modattn__error(MODATTN_ERANGE, "modattn__topk_batch: %zu queries x k = %zu is too large", nq, k);
    batch_job j = {mat, queries, n, dim, ld, nq, qld, kc, skip, skip_row0, NULL, NULL, NULL};
    int st = 0;
    j.scores = modattn__malloc(nthreads * BATCH_QUERIES * BATCH_ROWS * sizeof(float), MODATTN_MEM_WORKSPACE);
    j.heaps = modattn__malloc(nthreads * nq * kc * sizeof(modattn_hit), MODATTN_MEM_WORKSPACE);
    j.heap_n = modattn__calloc(nthreads * nq, sizeof(size_t), MODATTN_MEM_WORKSPACE);
    modattn_hit *merged = modattn__malloc(nthreads * kc * sizeof(modattn_hit), MODATTN_MEM_WORKSPACE);
    if (!j.scores || !j.heaps || !j.heap_n || !merged) {
        st = modattn__mem_last_status();
        goto done;
    }
    if (par) exec->parallel_for(exec, (int64_t)ntasks, batch_task, &j);
    else
        for (size_t t = 0; t < ntasks; t++) batch_task(&j, (int64_t)t, 0);
    for (size_t q = 0; q < nq; q++) {
        size_t m = 0;
        for (size_t t = 0; t < nthreads; t++) {
            const size_t c = j.heap_n[t * nq + q];
            memcpy(merged + m, j.heaps + (t * nq + q) * kc, c * sizeof(modattn_hit));
            m += c;
        }
        /* the exact scores (the single-query kernel's), then the best k of the candidates */
        qsort(merged, m, sizeof *merged, modattn__hit_cmp);
        if (m > kc) m = kc;
        for (size_t i = 0; i < m; i++) {
            float s;
            fn(mat + merged[i].row * ld, 1, dim, ld, queries + q * qld, &s);
            merged[i].score = s != s ? -INFINITY : s;
        }
        qsort(merged, m, sizeof *merged, modattn__hit_cmp);
        nout[q] = m < kk ? m : kk;
        memcpy(out + q * k, merged, nout[q] * sizeof(modattn_hit));
    }
done:
    modattn_free(j.scores);
    modattn_free(j.heaps);
    modattn_free(j.heap_n);
    modattn_free(merged);
    return st;
}
