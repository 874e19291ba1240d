/* bench/ann_bench.c — modattn's side of the ANN benchmark (bench/ann_bench.sh): over a store made
 * by make_store from bench/ann_data.py's base vectors (chunk id i + 1 holds row i) with its ANN
 * index built by `modattn index --ann`, for each value of one search parameter: recall@10 against
 * the exact top-10 (gt.i32) and queries/s, all queries in one batched call (median of 3 runs), and
 * one query at a time (p50 ms); and in the same run the exact batched scan's queries/s. One JSON
 * object per line on stdout. Not a test.
 *   ann_bench DB DATA_DIR PARAM V1,V2,... [THREADS]     PARAM: efSearch | nprobe | rescore */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "modattn/ann.h"
#include "modattn/core.h"
#include "modattn/dispatch.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_ann.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *load(const char *dir, const char *name, size_t *bytes) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *bytes = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*bytes);
    if (p && fread(p, 1, *bytes, f) != *bytes) free(p), p = NULL;
    fclose(f);
    return p;
}

#define K 10
#define GTK 100

/* recall@K of ids (chunk ids, [nq, K]) against gt (rows, [nq, GTK], first K) */
static double recall(const int64_t *ids, const size_t *nout, const int32_t *gt, size_t nq) {
    size_t hit = 0;
    for (size_t q = 0; q < nq; q++)
        for (size_t i = 0; i < nout[q]; i++)
            for (size_t j = 0; j < K; j++)
                if (ids[q * K + i] - 1 == gt[q * GTK + j]) {
                    hit++;
                    break;
                }
    return (double)hit / (double)(nq * K);
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: ann_bench DB DATA_DIR efSearch|nprobe|rescore V1,V2,... [THREADS]\n");
        return 2;
    }
    const int threads = argc == 6 ? atoi(argv[5]) : 0;
    modattn_ctx *ctx = NULL;
    modattn_ctx_options co;
    memset(&co, 0, sizeof co);
    co.threads = threads;
    modattn_store *s = NULL;
    if (modattn_ctx_create(&co, &ctx) || modattn_store_open(argv[1], MODATTN_STORE_READONLY, &s)) {
        fprintf(stderr, "ann_bench: %s\n", modattn_last_error());
        return 1;
    }
    const modattn_exec *exec = modattn_ctx_exec(ctx);
    size_t qb = 0, gb = 0;
    float *queries = load(argv[2], "queries.f32", &qb);
    int32_t *gt = load(argv[2], "gt.i32", &gb);
    modattn_store_vectors v;
    if (!queries || !gt || modattn__store_open_vectors(s, &v)) {
        fprintf(stderr, "ann_bench: cannot read %s/queries.f32, gt.i32 or the store's vectors: %s\n", argv[2],
                modattn_last_error());
        return 1;
    }
    const size_t dim = v.dim, nq = qb / (dim * sizeof(float));
    if (gb != nq * GTK * sizeof(int32_t) || v.nseg != 1 || v.seg[0].chunk_ids[0] != 1 ||
        v.seg[0].chunk_ids[v.n - 1] != (int64_t)v.n) {
        fprintf(stderr, "ann_bench: the store is not make_store's of these vectors in order\n");
        return 1;
    }
    int64_t *ids = malloc(nq * K * sizeof *ids);
    float *sc = malloc(nq * K * sizeof *sc);
    size_t *nout = malloc(nq * sizeof *nout);
    double *lat = malloc(nq * sizeof *lat);

    /* the exact batched scan: the anchor */
    double t0 = now();
    if (modattn__store_vectors_topk_batch(&v, queries, nq, K, exec, ids, sc, nout)) {
        fprintf(stderr, "ann_bench: %s\n", modattn_last_error());
        return 1;
    }
    double te = now() - t0;
    const double rex = recall(ids, nout, gt, nq);
    /* and one query per call (the first 100), the anchor of the indexes' p50 */
    const size_t nl = nq < 100 ? nq : 100;
    for (size_t q = 0; q < nl; q++) {
        double t1 = now();
        modattn__store_vectors_topk_batch(&v, queries + q * dim, 1, K, exec, ids + q * K, sc + q * K, nout + q);
        lat[q] = (now() - t1) * 1e3;
    }
    qsort(lat, nl, sizeof *lat, cmp_d);
    printf("{\"system\": \"modattn\", \"index\": \"exact\", \"rows\": %zu, \"queries\": %zu, \"threads\": %d, "
           "\"recall10\": %.4f, \"qps\": %.1f, \"p50_ms\": %.3f}\n",
           v.n, nq, exec->nthreads, rex, (double)nq / te, lat[nl / 2]);
    fflush(stdout);

    modattn_ann *a = NULL;
    char why[512] = "";
    t0 = now();
    if (modattn__ann_open(s, &v, &a, why, sizeof why) != 1) {
        fprintf(stderr, "ann_bench: no usable ANN index: %s %s\n", why, modattn_last_error());
        return 1;
    }
    const double topen = now() - t0;
    modattn_ann_params built;
    modattn__ann_get_params(a, &built);
    char bp[200];
    modattn_ann_params_format(modattn__ann_get_kind(a), &built, bp, sizeof bp);
    char *list = strdup(argv[4]);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        modattn_ann_params sp;
        memset(&sp, 0, sizeof sp);
        char kv[64];
        snprintf(kv, sizeof kv, "%s=%s", argv[3], tok);
        if (modattn_ann_params_parse(kv, &sp)) {
            fprintf(stderr, "ann_bench: %s\n", modattn_last_error());
            return 2;
        }
        double runs[3];
        for (int r = 0; r < 3; r++) {
            t0 = now();
            if (modattn__ann_topk_batch(a, &v, queries, nq, K, &sp, exec, ids, sc, nout)) {
                fprintf(stderr, "ann_bench: %s\n", modattn_last_error());
                return 1;
            }
            runs[r] = now() - t0;
        }
        qsort(runs, 3, sizeof *runs, cmp_d);
        const double rec = recall(ids, nout, gt, nq);
        /* one query per call, as `modattn search` and a server make them */
        for (size_t q = 0; q < nq; q++) {
            t0 = now();
            modattn__ann_topk_batch(a, &v, queries + q * dim, 1, K, &sp, exec, ids + q * K, sc + q * K, nout + q);
            lat[q] = (now() - t0) * 1e3;
        }
        qsort(lat, nq, sizeof *lat, cmp_d);
        printf("{\"system\": \"modattn\", \"index\": \"%s\", \"build_params\": \"%s\", \"%s\": %s, \"rows\": %zu, "
               "\"queries\": %zu, \"threads\": %d, \"recall10\": %.4f, \"qps\": %.1f, \"p50_ms\": %.3f, "
               "\"p99_ms\": %.3f, \"open_s\": %.3f, \"file_bytes\": %llu}\n",
               modattn_ann_kind_name(modattn__ann_get_kind(a)), bp, argv[3], tok, v.n, nq, exec->nthreads, rec,
               (double)nq / runs[1], lat[nq / 2], lat[nq * 99 / 100], topen,
               (unsigned long long)modattn__ann_file_bytes(a));
        fflush(stdout);
    }
    free(list);
    modattn__ann_close(a);
    modattn__store_vectors_free(&v);
    modattn_store_close(s);
    modattn_ctx_free(ctx);
    free(queries), free(gt), free(ids), free(sc), free(nout), free(lat);
    return 0;
}
