/* bench/search_bench.c — search latency of modattn's exact top-k scan (modattn__topk, the code
 * `modattn search` runs) on synthetic L2-normalised vectors, with this machine's memory bandwidth
 * measured in the same run by a streaming-read probe over the same matrix.
 *
 * Validate, then benchmark: for every size the first query's top k is checked against the portable
 * scalar kernel run serially (same rows, scores within rounding) before anything is timed.
 *
 * usage: search_bench [--sizes 10000,100000,1000000] [--dim 384] [--queries 200] [--k 10]
 *                     [--threads N] [--json FILE]
 * Prints one line per size and configuration; --json writes the figures for the report script. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "modattn/core.h"
#include "modattn/dispatch.h"
#include "modattn/search.h"
#include "core/internal_core.h"
#include "pipeline/internal_search.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static inline uint64_t next_u64(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static inline float next_f(void) { return (float)((double)(next_u64() >> 40) / 16777216.0 - 0.5); }

/* ---- memory bandwidth: each thread sums its slice of the buffer with wide loads */

typedef struct probe_job {
    const float *data;
    size_t nfloats, slices;
    double *sink;
} probe_job;

#if defined(__x86_64__)
__attribute__((target("avx2"))) static double sum_avx2(const float *p, size_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    double s = 0;
    for (int k = 0; k < 8; k++) s += t[k];
    for (; i < n; i++) s += p[i];
    return s;
}
#endif

static double sum_scalar(const float *p, size_t n) {
    float a[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) a[k] += p[i + k];
    double s = 0;
    for (int k = 0; k < 8; k++) s += a[k];
    for (; i < n; i++) s += p[i];
    return s;
}

static void probe_task(void *arg, int64_t i, int thread) {
    probe_job *j = arg;
    (void)thread;
    size_t per = (j->nfloats + j->slices - 1) / j->slices;
    size_t a = (size_t)i * per, b = a + per < j->nfloats ? a + per : j->nfloats;
    double s;
#if defined(__x86_64__)
    if (modattn__cpu_get()->avx2) s = sum_avx2(j->data + a, b - a);
    else
#endif
        s = sum_scalar(j->data + a, b - a);
    j->sink[i] = s;
}

/* Best of `reps` full read passes over the buffer, in GB/s. */
static double probe_bandwidth(const float *data, size_t nfloats, const modattn_exec *ex, int reps) {
    probe_job j = {data, nfloats, (size_t)(ex ? ex->nthreads : 1) * 8, NULL};
    j.sink = calloc(j.slices, sizeof(double));
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (ex) ex->parallel_for(ex, (int64_t)j.slices, probe_task, &j);
        else
            for (size_t i = 0; i < j.slices; i++) probe_task(&j, (int64_t)i, 0);
        double t = now_s() - t0;
        double gbs = (double)nfloats * sizeof(float) / t * 1e-9;
        if (gbs > best) best = gbs;
    }
    free(j.sink);
    return best;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, size_t n, double p) {
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

typedef struct result {
    size_t n;
    const char *config;
    double p50_ms, p99_ms, mean_ms, gbs;
} result;

int main(int argc, char **argv) {
    size_t sizes[8] = {10000, 100000, 1000000}, nsizes = 3;
    size_t dim = 384, queries = 200, k = 10;
    int threads = 0;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--sizes") && v) {
            nsizes = 0;
            char *dup = strdup(v), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t && nsizes < 8; t = strtok_r(NULL, ",", &save))
                sizes[nsizes++] = (size_t)strtoull(t, NULL, 10);
            free(dup);
            i++;
        } else if (!strcmp(a, "--dim") && v) dim = (size_t)atol(v), i++;
        else if (!strcmp(a, "--queries") && v) queries = (size_t)atol(v), i++;
        else if (!strcmp(a, "--k") && v) k = (size_t)atol(v), i++;
        else if (!strcmp(a, "--threads") && v) threads = atoi(v), i++;
        else if (!strcmp(a, "--json") && v) json = v, i++;
        else {
            fprintf(stderr, "usage: search_bench [--sizes N,N,...] [--dim D] [--queries Q] [--k K] "
                            "[--threads T] [--json FILE]\n");
            return 2;
        }
    }
    if (!dim || !queries || !k || !nsizes) return 2;
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.plugin_path = "";
    if (modattn_ctx_create(&o, &ctx)) {
        fprintf(stderr, "search_bench: %s\n", modattn_last_error());
        return 1;
    }
    const modattn_exec *ex = modattn_ctx_exec(ctx);
    char cpu[256];
    modattn__cpu_describe(cpu, sizeof cpu);
    modattn_scan_isa isa = modattn__scan_isa_auto();
    printf("search_bench: dim %zu, k %zu, %zu queries per size, %d threads, scan kernel %s (cpu: %s)\n",
           dim, k, queries, ex->nthreads, modattn__scan_isa_name(isa), cpu);

    size_t maxn = 0;
    for (size_t s = 0; s < nsizes; s++)
        if (sizes[s] > maxn) maxn = sizes[s];
    /* one matrix for every size (the first n rows), rows packed: ld = dim */
    float *mat = modattn__malloc(maxn * dim * sizeof(float), MODATTN_MEM_INDEX);
    float *qs = malloc(queries * dim * sizeof(float));
    double *lat = malloc(queries * sizeof(double));
    modattn_hit *hits = malloc(k * sizeof *hits), *ref = malloc(k * sizeof *ref);
    result res[64];
    size_t nres = 0;
    if (!mat || !qs || !lat || !hits || !ref) {
        fprintf(stderr, "search_bench: out of memory for %zu x %zu vectors\n", maxn, dim);
        return 1;
    }
    double t0 = now_s();
    for (size_t i = 0; i < maxn; i++) {
        float *r = mat + i * dim;
        for (size_t j = 0; j < dim; j++) r[j] = next_f();
        modattn__vec_normalize(r, dim);
    }
    for (size_t q = 0; q < queries; q++) {
        for (size_t j = 0; j < dim; j++) qs[q * dim + j] = next_f();
        modattn__vec_normalize(qs + q * dim, dim);
    }
    printf("search_bench: generated %zu normalised vectors in %.1f s\n", maxn, now_s() - t0);

    /* memory bandwidth over the largest matrix, same threads */
    double bw = probe_bandwidth(mat, maxn * dim, ex, 5);
    double bw1 = probe_bandwidth(mat, maxn * dim, NULL, 3);
    printf("memory bandwidth (streaming read of %.2f GB): %.1f GB/s with %d threads, %.1f GB/s with 1\n",
           (double)maxn * dim * 4 * 1e-9, bw, ex->nthreads, bw1);

    int failed = 0;
    for (size_t s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        /* validate */
        size_t nh = 0, nr = 0;
        modattn__topk(mat, n, dim, dim, qs, k, NULL, MODATTN_SCAN_SCALAR, ref, &nr);
        if (modattn__topk(mat, n, dim, dim, qs, k, ex, MODATTN_SCAN_AUTO, hits, &nh) || nh != nr) {
            fprintf(stderr, "search_bench: topk failed: %s\n", modattn_last_error());
            return 1;
        }
        for (size_t i = 0; i < nh; i++)
            if (hits[i].row != ref[i].row && fabsf(hits[i].score - ref[i].score) > 1e-5f) {
                fprintf(stderr, "search_bench: n=%zu: rank %zu differs from the scalar scan "
                        "(row %zu %.7f vs row %zu %.7f)\n", n, i, hits[i].row, hits[i].score,
                        ref[i].row, ref[i].score);
                failed = 1;
            }
        struct {
            const char *name;
            const modattn_exec *ex;
            modattn_scan_isa isa;
        } configs[] = {{"modattn (all threads)", ex, MODATTN_SCAN_AUTO},
                       {"modattn (1 thread)", NULL, MODATTN_SCAN_AUTO}};
        for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
            /* warm-up */
            modattn__topk(mat, n, dim, dim, qs, k, configs[c].ex, configs[c].isa, hits, &nh);
            size_t nq = n >= 1000000 && configs[c].ex == NULL ? queries / 4 : queries;
            if (nq < 8) nq = queries;
            double total = 0;
            for (size_t q = 0; q < nq; q++) {
                double a = now_s();
                modattn__topk(mat, n, dim, dim, qs + q * dim, k, configs[c].ex, configs[c].isa, hits, &nh);
                lat[q] = now_s() - a;
                total += lat[q];
            }
            qsort(lat, nq, sizeof *lat, cmp_double);
            result r = {n, configs[c].name, pct(lat, nq, 0.5) * 1e3, pct(lat, nq, 0.99) * 1e3,
                        total / (double)nq * 1e3, 0};
            r.gbs = (double)n * dim * 4 / (r.p50_ms * 1e-3) * 1e-9;
            res[nres++] = r;
            printf("n=%-8zu %-22s p50 %8.3f ms  p99 %8.3f ms  mean %8.3f ms  %6.1f GB/s  (%.0f%% of "
                   "the bandwidth probe)\n",
                   n, r.config, r.p50_ms, r.p99_ms, r.mean_ms, r.gbs,
                   100.0 * r.gbs / (configs[c].ex ? bw : bw1));
        }
        /* every query in one call (modattn__topk_batch, what `search --queries` runs): validated
         * query by query against the single-query scan, then timed as the per-query share of the
         * call, as FAISS's batched figure is (median of 3 calls) */
        {
            modattn_hit *bh = malloc(queries * k * sizeof *bh);
            size_t *bn = malloc(queries * sizeof *bn);
            if (!bh || !bn) return 1;
            if (modattn__topk_batch(mat, n, dim, dim, qs, queries, dim, k, ex, NULL, 0, bh, bn)) {
                fprintf(stderr, "search_bench: topk_batch failed: %s\n", modattn_last_error());
                return 1;
            }
            size_t differ = 0;
            for (size_t q = 0; q < queries; q++) {
                modattn__topk(mat, n, dim, dim, qs + q * dim, k, ex, MODATTN_SCAN_AUTO, hits, &nh);
                for (size_t i = 0; i < nh; i++)
                    if (bn[q] != nh || hits[i].row != bh[q * k + i].row || hits[i].score != bh[q * k + i].score)
                        differ++;
            }
            if (differ) {
                fprintf(stderr, "search_bench: n=%zu: the batched call differs from one query at a time in %zu "
                        "hits\n", n, differ);
                failed = 1;
            }
            double tb[3];
            for (int r = 0; r < 3; r++) {
                double a = now_s();
                modattn__topk_batch(mat, n, dim, dim, qs, queries, dim, k, ex, NULL, 0, bh, bn);
                tb[r] = now_s() - a;
            }
            qsort(tb, 3, sizeof *tb, cmp_double);
            static char name[64];
            snprintf(name, sizeof name, "modattn batch (%zu queries per call)", queries);
            const double per = tb[1] / (double)queries * 1e3;
            result r = {n, name, per, -1, per, -1}; /* p99, GB/s: none for one call */
            res[nres++] = r;
            printf("n=%-8zu %-38s %8.3f ms per query (%.1f ms the call, %.1f GFLOP/s; same hits as one "
                   "query at a time: %s)\n", n, name, per, tb[1] * 1e3,
                   2.0 * (double)n * (double)dim * (double)queries / tb[1] * 1e-9, differ ? "NO" : "yes");
            free(bh);
            free(bn);
        }
    }
    /* On a shared machine the bandwidth moves with the other jobs: at the largest size, time a
     * probe pass and a query back to back, many times, and take the median of the ratios. */
    size_t npairs = queries < 60 ? queries : 60;
    double *ratio = malloc(npairs * sizeof(double));
    double paired = 0;
    if (ratio) {
        probe_job pj = {mat, maxn * dim, (size_t)ex->nthreads * 8, NULL};
        pj.sink = calloc(pj.slices, sizeof(double));
        for (size_t q = 0; q < npairs && pj.sink; q++) {
            double a = now_s();
            ex->parallel_for(ex, (int64_t)pj.slices, probe_task, &pj);
            double tp = now_s() - a;
            size_t nh = 0;
            a = now_s();
            modattn__topk(mat, maxn, dim, dim, qs + q * dim, k, ex, MODATTN_SCAN_AUTO, hits, &nh);
            double tq = now_s() - a;
            ratio[q] = tp / tq;
        }
        free(pj.sink);
        qsort(ratio, npairs, sizeof *ratio, cmp_double);
        paired = pct(ratio, npairs, 0.5);
        printf("n=%-8zu paired with the probe (%zu pairs): the scan runs at %.0f%% of the streaming "
               "read bandwidth (median of the ratios)\n", maxn, npairs, 100.0 * paired);
        free(ratio);
    }
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            perror(json);
            return 1;
        }
        fprintf(f, "{\"dim\": %zu, \"k\": %zu, \"queries\": %zu, \"threads\": %d, \"kernel\": \"%s\", "
                   "\"cpu\": \"%s\", \"bandwidth_gbs\": %.3f, \"bandwidth_1t_gbs\": %.3f, "
                   "\"paired_n\": %zu, \"paired_fraction\": %.4f, \"results\": [",
                dim, k, queries, ex->nthreads, modattn__scan_isa_name(isa), cpu, bw, bw1, maxn, paired);
        for (size_t i = 0; i < nres; i++)
        {
            char p99[32] = "null", gbs[32] = "null";
            if (res[i].p99_ms >= 0) snprintf(p99, sizeof p99, "%.4f", res[i].p99_ms);
            if (res[i].gbs >= 0) snprintf(gbs, sizeof gbs, "%.3f", res[i].gbs);
            fprintf(f, "%s{\"n\": %zu, \"config\": \"%s\", \"p50_ms\": %.4f, \"p99_ms\": %s, "
                       "\"mean_ms\": %.4f, \"gbs\": %s}",
                    i ? ", " : "", res[i].n, res[i].config, res[i].p50_ms, p99, res[i].mean_ms, gbs);
        }
        fprintf(f, "]}\n");
        fclose(f);
    }
    modattn_free(mat);
    free(qs);
    free(lat);
    free(hits);
    free(ref);
    modattn_ctx_free(ctx);
    return failed;
}
