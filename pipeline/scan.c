/* pipeline/scan.c — exact top-k by dot product over a contiguous matrix: the portable scan
 * kernel, the choice of kernel by CPU features, and the threaded selection.
 *
 * The rows are cut into blocks; a task scores one block into a per-thread buffer with the chosen
 * kernel (scan_avx512.c, scan_avx2.c or the portable one below) and pushes the scores into that
 * thread's k-element min-heap; the heaps are merged at the end. Every row is scored, ties go to
 * the lower row and NaN counts as -inf, so the answer does not depend on the thread count or the
 * kernel (up to float rounding of the scores themselves). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/search.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_search.h"
#include "pipeline/hits.h"
#include "pipeline/pipeline_internal.h"

#define SCAN_BLOCK_ROWS 1024

void modattn__scan_scalar(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                          float *scores) {
    for (size_t i = 0; i < n; i++) {
        const float *r = mat + i * ld;
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        size_t j = 0;
        for (; j + 4 <= dim; j += 4) {
            a0 += r[j] * q[j];
            a1 += r[j + 1] * q[j + 1];
            a2 += r[j + 2] * q[j + 2];
            a3 += r[j + 3] * q[j + 3];
        }
        for (; j < dim; j++) a0 += r[j] * q[j];
        scores[i] = (a0 + a1) + (a2 + a3);
    }
}

const char *modattn__scan_isa_name(modattn_scan_isa isa) {
    switch (isa) {
    case MODATTN_SCAN_AUTO: return "auto";
    case MODATTN_SCAN_SCALAR: return "scalar";
    case MODATTN_SCAN_AVX2: return "avx2";
    case MODATTN_SCAN_AVX512: return "avx512";
    }
    return "unknown";
}

int modattn__scan_isa_available(modattn_scan_isa isa) {
    const modattn_cpu_features *f = modattn__cpu_get();
    switch (isa) {
    case MODATTN_SCAN_AUTO:
    case MODATTN_SCAN_SCALAR: return 0;
#if defined(MODATTN_SCAN_X86)
    case MODATTN_SCAN_AVX2:
        if (f->avx2 && f->fma) return 0;
        return modattn__error(MODATTN_EUNSUPPORTED, "scan avx2: this CPU (or MODATTN_CPU_DISABLE) "
                             "has no AVX2+FMA");
    case MODATTN_SCAN_AVX512:
        if (f->avx512f) return 0;
        return modattn__error(MODATTN_EUNSUPPORTED, "scan avx512: this CPU (or "
                             "MODATTN_CPU_DISABLE) has no AVX-512F");
#else
    case MODATTN_SCAN_AVX2:
    case MODATTN_SCAN_AVX512:
        (void)f;
        return modattn__error(MODATTN_EUNSUPPORTED, "scan %s: not built for this architecture",
                             modattn__scan_isa_name(isa));
#endif
    }
    return modattn__error(MODATTN_EINVAL, "unknown scan kernel %d", (int)isa);
}

modattn_scan_isa modattn__scan_isa_auto(void) {
    if (modattn__scan_isa_available(MODATTN_SCAN_AVX512) == 0) return MODATTN_SCAN_AVX512;
    if (modattn__scan_isa_available(MODATTN_SCAN_AVX2) == 0) return MODATTN_SCAN_AVX2;
    modattn_clear_error();
    return MODATTN_SCAN_SCALAR;
}

static int pick(modattn_scan_isa isa, modattn__scan_fn *fn) {
    if (isa == MODATTN_SCAN_AUTO) isa = modattn__scan_isa_auto();
    int st = modattn__scan_isa_available(isa);
    if (st) return st;
    switch (isa) {
#if defined(MODATTN_SCAN_X86)
    case MODATTN_SCAN_AVX512: *fn = modattn__scan_avx512; return 0;
    case MODATTN_SCAN_AVX2: *fn = modattn__scan_avx2; return 0;
#endif
    default: *fn = modattn__scan_scalar; return 0;
    }
}

modattn__scan_fn modattn__scan_best(void) {
    modattn__scan_fn fn = modattn__scan_scalar;
    (void)pick(MODATTN_SCAN_AUTO, &fn);
    return fn;
}

static float dot1_scalar(const float *row, const float *q, size_t dim) {
    float s;
    modattn__scan_scalar(row, 1, dim, dim, q, &s);
    return s;
}

modattn__dot1_fn modattn__dot1_best(void) {
    switch (modattn__scan_isa_auto()) {
#if defined(MODATTN_SCAN_X86)
    case MODATTN_SCAN_AVX512: return modattn__dot1_avx512;
    case MODATTN_SCAN_AVX2: return modattn__dot1_avx2;
#endif
    default: return dot1_scalar;
    }
}

int modattn__scan_scores(const float *mat, size_t n, size_t dim, size_t ld, const float *query,
                        modattn_scan_isa isa, float *scores) {
    if (n == 0) return 0;
    if (!mat || !query || !scores || ld < dim)
        return modattn__error(MODATTN_EINVAL, "modattn__scan_scores: NULL argument or ld < dim");
    modattn__scan_fn fn;
    int st = pick(isa, &fn);
    if (st) return st;
    fn(mat, n, dim, ld, query, scores);
    return 0;
}

void modattn__vec_normalize(float *v, size_t dim) {
    double ss = 0;
    for (size_t i = 0; i < dim; i++) ss += (double)v[i] * v[i];
    if (!(ss > 0) || !isfinite(ss)) return;
    float inv = (float)(1.0 / sqrt(ss));
    for (size_t i = 0; i < dim; i++) v[i] *= inv;
}

/* ------------------------------------------------------------------ selection */

typedef struct topk_job {
    const float *mat;
    size_t n, dim, ld, k, block;
    const float *q;
    modattn__scan_fn fn;
    const uint8_t *skip; /* bit (skip_row0 + row) set: leave the row out */
    size_t skip_row0;
    float *scores;      /* [threads][block] */
    modattn_hit *heaps; /* [threads][k] */
    size_t *heap_n;     /* [threads] */
} topk_job;

static void topk_task(void *arg, int64_t task, int thread) {
    topk_job *j = arg;
    const size_t r0 = (size_t)task * j->block;
    const size_t nr = j->n - r0 < j->block ? j->n - r0 : j->block;
    float *sc = j->scores + (size_t)thread * j->block;
    modattn_hit *h = j->heaps + (size_t)thread * j->k;
    size_t *hn = &j->heap_n[thread];
    j->fn(j->mat + r0 * j->ld, nr, j->dim, j->ld, j->q, sc);
    /* the heap's worst score, to skip most rows with one comparison */
    float floor_score = *hn == j->k ? h[0].score : -INFINITY;
    for (size_t i = 0; i < nr; i++) {
        float s = sc[i];
        if (s != s) s = -INFINITY;
        if (*hn == j->k && s < floor_score) continue;
        if (j->skip) {
            const size_t g = j->skip_row0 + r0 + i;
            if (j->skip[g >> 3] >> (g & 7) & 1) continue;
        }
        modattn__hit_push(h, hn, j->k, (modattn_hit){r0 + i, s});
        if (*hn == j->k) floor_score = h[0].score;
    }
}


int modattn__topk(const float *mat, size_t n, size_t dim, size_t ld, const float *query, size_t k,
                 const modattn_exec *exec, modattn_scan_isa isa, modattn_hit *out, size_t *nout) {
    return modattn__topk_masked(mat, n, dim, ld, query, k, exec, isa, NULL, 0, out, nout);
}

int modattn__topk_masked(const float *mat, size_t n, size_t dim, size_t ld, const float *query,
                        size_t k, const modattn_exec *exec, modattn_scan_isa isa,
                        const uint8_t *skip, size_t skip_row0, modattn_hit *out, size_t *nout) {
    if (!nout) return modattn__error(MODATTN_EINVAL, "modattn__topk: nout is NULL");
    *nout = 0;
    if (k == 0 || n == 0) return 0;
    if (!mat || !query || !out || ld < dim || dim == 0)
        return modattn__error(MODATTN_EINVAL, "modattn__topk: NULL argument, dim 0 or ld < dim");
    if (k > n) k = n;
    topk_job j;
    memset(&j, 0, sizeof j);
    int st = pick(isa, &j.fn);
    if (st) return st;
    const bool par = exec && exec->parallel_for && exec->nthreads > 1 &&
                     n >= MODATTN_TOPK_PARALLEL_ROWS;
    const size_t nthreads = par ? (size_t)exec->nthreads : 1;
    j.mat = mat;
    j.n = n;
    j.dim = dim;
    j.ld = ld;
    j.k = k;
    j.q = query;
    j.skip = skip;
    j.skip_row0 = skip_row0;
    j.block = SCAN_BLOCK_ROWS;
    const size_t ntasks = (n + j.block - 1) / j.block;
    if (k > SIZE_MAX / sizeof(modattn_hit) / nthreads)
        return modattn__error(MODATTN_ERANGE, "modattn__topk: k = %zu is too large", k);
    j.scores = modattn__malloc(nthreads * j.block * sizeof(float), MODATTN_MEM_WORKSPACE);
    j.heaps = modattn__malloc(nthreads * k * sizeof(modattn_hit), MODATTN_MEM_WORKSPACE);
    j.heap_n = modattn__calloc(nthreads, sizeof(size_t), MODATTN_MEM_WORKSPACE);
    if (!j.scores || !j.heaps || !j.heap_n) {
        st = modattn__mem_last_status();
        goto done;
    }
    if (par) exec->parallel_for(exec, (int64_t)ntasks, topk_task, &j);
    else
        for (size_t t = 0; t < ntasks; t++) topk_task(&j, (int64_t)t, 0);
    /* merge: the per-thread heaps hold every candidate of the global top k */
    size_t m = 0;
    for (size_t t = 0; t < nthreads; t++) {
        memmove(j.heaps + m, j.heaps + t * k, j.heap_n[t] * sizeof(modattn_hit));
        m += j.heap_n[t];
    }
    qsort(j.heaps, m, sizeof(modattn_hit), modattn__hit_cmp);
    *nout = m < k ? m : k;
    memcpy(out, j.heaps, *nout * sizeof(modattn_hit));
done:
    modattn_free(j.scores);
    modattn_free(j.heaps);
    modattn_free(j.heap_n);
    return st;
}
