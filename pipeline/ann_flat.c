/* pipeline/ann_flat.c — compact codes of the vectors and the scan over them (layout and rules:
 * ann_flat.h). The encoders are scalar C so that a file's bytes are the same on every machine; the
 * scan kernels are chosen at run time (ann_flat_avx2.c on AVX2 + FMA + F16C). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/blas.h" /* modattn__sgemm_nt: the host BLAS */
#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/ann_flat.h"
#include "pipeline/hits.h"

#define FLAT_ROWS 2048   /* rows per task: one block's codes stay in L2 while each query reads them */
#define GEMM_ROWS 256    /* with many queries (f16, int8): rows decoded to floats per GEMM (its N) */
#define GEMM_QUERIES 256 /* queries per GEMM (its M) */
#define GEMM_FROM 8      /* queries from which a batch goes through the GEMM */

size_t modattn__flat_stride(modattn__flat_code c, size_t dim) {
    switch (c) {
    case MODATTN__FLAT_F16: return (dim * 2 + 7) & ~(size_t)7;
    case MODATTN__FLAT_INT8: return (dim + 7) & ~(size_t)7;
    case MODATTN__FLAT_BINARY: return (dim + 63) / 64 * 8;
    }
    return 0;
}

uint64_t modattn__flat_bytes(modattn__flat_code c, size_t dim, uint64_t rows) {
    return rows * modattn__flat_stride(c, dim) + (c == MODATTN__FLAT_INT8 ? rows * sizeof(float) : 0);
}

/* IEEE binary32 -> binary16, round to nearest even, subnormals kept (as F16C's vcvtps2ph; a NaN
 * becomes the quiet NaN 0x7e00, its payload dropped). */
uint16_t modattn__f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00u); /* 65536 and above: infinity */
    if (a < 0x38800000u) {                                   /* below 2^-14: a half subnormal */
        if (a < 0x33000000u) return (uint16_t)sign;          /* below 2^-25: zero */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
        uint32_t h = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = (a >> 13) - (112u << 10);
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}

float modattn__f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
    else if (e) x = sign | ((e + 112u) << 23) | (m << 13);
    else if (!m) x = sign;
    else {
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

void modattn__flat_encode(modattn__flat_code c, const float *x, size_t n, size_t dim, size_t ld, unsigned char *codes,
                          float *scales) {
    const size_t stride = modattn__flat_stride(c, dim);
    for (size_t r = 0; r < n; r++) {
        const float *row = x + r * ld;
        unsigned char *out = codes + r * stride;
        memset(out, 0, stride);
        if (c == MODATTN__FLAT_F16) {
            for (size_t i = 0; i < dim; i++) {
                const uint16_t h = modattn__f32_to_f16(row[i]);
                memcpy(out + 2 * i, &h, 2);
            }
        } else if (c == MODATTN__FLAT_INT8) {
            float m = 0;
            for (size_t i = 0; i < dim; i++) m = fabsf(row[i]) > m ? fabsf(row[i]) : m;
            /* (dividing by the scale: 127 / m overflows for rows of tiny values) */
            const float scale = m > 0 && isfinite(m) ? m / 127.0f : 0.0f;
            for (size_t i = 0; i < dim; i++) {
                long v = scale > 0 && isfinite(row[i]) ? lrintf(row[i] / scale) : 0;
                out[i] = (unsigned char)(int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
            }
            scales[r] = scale;
        } else {
            for (size_t i = 0; i < dim; i++)
                if (row[i] > 0) out[i / 8] |= (unsigned char)(1u << (i % 8));
        }
    }
}

/* ---------------------------------------------------------------- scalar kernels */

static void f16_scalar(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                       const void *qv, float *out) {
    (void)scales;
    const float *q = qv;
    for (size_t r = 0; r < n; r++) {
        const unsigned char *c = codes + r * stride;
        float s = 0;
        for (size_t i = 0; i < dim; i++) {
            uint16_t h;
            memcpy(&h, c + 2 * i, 2);
            s += q[i] * modattn__f16_to_f32(h);
        }
        out[r] = s;
    }
}

static void int8_scalar(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                        const void *qv, float *out) {
    const float *q = qv;
    for (size_t r = 0; r < n; r++) {
        const int8_t *c = (const int8_t *)(codes + r * stride);
        float s = 0;
        for (size_t i = 0; i < dim; i++) s += q[i] * (float)c[i];
        out[r] = s * scales[r];
    }
}

static void binary_scalar(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                          const void *qv, float *out) {
    (void)scales;
    const size_t words = stride / 8;
    const unsigned char *q = qv;
    for (size_t r = 0; r < n; r++) {
        const unsigned char *c = codes + r * stride;
        unsigned ham = 0;
        for (size_t w = 0; w < words; w++) {
            uint64_t a, b;
            memcpy(&a, c + 8 * w, 8);
            memcpy(&b, q + 8 * w, 8);
            uint64_t x = a ^ b;
            while (x) x &= x - 1, ham++;
        }
        out[r] = (float)dim - 2.0f * (float)ham;
    }
}

static void decode_scalar(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                          float *out) {
    for (size_t r = 0; r < n; r++) {
        const unsigned char *c = codes + r * stride;
        for (size_t i = 0; i < dim; i++) {
            if (scales) {
                out[r * dim + i] = (float)(int8_t)c[i] * scales[r];
            } else {
                uint16_t h;
                memcpy(&h, c + 2 * i, 2);
                out[r * dim + i] = modattn__f16_to_f32(h);
            }
        }
    }
}

static modattn__flat_decode_fn decoder(void) {
#if defined(MODATTN_SCAN_X86)
    const modattn_cpu_features *f = modattn__cpu_get();
    if (f->avx2 && f->fma && f->f16c) return modattn__flat_decode_avx2;
#endif
    return decode_scalar;
}

static modattn__flat_fn kernel_for(modattn__flat_code c) {
#if defined(MODATTN_SCAN_X86)
    const modattn_cpu_features *f = modattn__cpu_get();
    if (f->avx2 && f->fma && f->f16c) {
        if (c == MODATTN__FLAT_F16) return modattn__flat_f16_avx2;
        if (c == MODATTN__FLAT_INT8) return modattn__flat_int8_avx2;
        return modattn__flat_binary_popcnt;
    }
#endif
    return c == MODATTN__FLAT_F16 ? f16_scalar : c == MODATTN__FLAT_INT8 ? int8_scalar : binary_scalar;
}

/* ---------------------------------------------------------------- the scan */

typedef struct flat_job {
    modattn__flat_fn fn;
    modattn__flat_decode_fn decode; /* non-NULL: the GEMM path (rows decoded, then one product) */
    const unsigned char *codes;
    const float *scales;
    size_t rows, dim, stride, nq, fetch, qbytes;
    const unsigned char *q; /* the queries as the kernel takes them, qbytes apart */
    const uint8_t *mask;
    float *scores;          /* [threads][FLAT_ROWS], or the GEMM path's [threads][GEMM_QUERIES x GEMM_ROWS] */
    float *rows_f32;        /* the GEMM path's [threads][GEMM_ROWS x dim] */
    modattn_hit *heaps;     /* [threads][nq][fetch] */
    size_t *heap_n;         /* [threads][nq] */
} flat_job;

/* keeps row r0 + i (score s[i]) in the heap h when it is among the best and not masked */
static void push_block(const flat_job *j, modattn_hit *h, size_t *hn, size_t r0, const float *s, size_t nr) {
    float floor_score = *hn == j->fetch ? h[0].score : -INFINITY;
    for (size_t i = 0; i < nr; i++) {
        float v = s[i];
        if (v != v) v = -INFINITY;
        if (*hn == j->fetch && v < floor_score) continue;
        const size_t row = r0 + i;
        if (j->mask && (j->mask[row >> 3] >> (row & 7) & 1)) continue;
        modattn__hit_push(h, hn, j->fetch, (modattn_hit){row, v});
        if (*hn == j->fetch) floor_score = h[0].score;
    }
}

/* many queries: GEMM_ROWS rows at a time decoded to floats, scored against blocks of queries by
 * one GEMM each (compute-bound, as the exact batched scan) */
static void gemm_task(void *arg, int64_t task, int thread) {
    flat_job *j = arg;
    const size_t r0 = (size_t)task * GEMM_ROWS, nr = j->rows - r0 < GEMM_ROWS ? j->rows - r0 : GEMM_ROWS;
    float *x = j->rows_f32 + (size_t)thread * GEMM_ROWS * j->dim;
    float *sc = j->scores + (size_t)thread * GEMM_QUERIES * GEMM_ROWS;
    j->decode(j->codes + r0 * j->stride, j->stride, j->scales ? j->scales + r0 : NULL, nr, j->dim, x);
    const float *q = (const float *)j->q;
    for (size_t q0 = 0; q0 < j->nq; q0 += GEMM_QUERIES) {
        const size_t nqb = j->nq - q0 < GEMM_QUERIES ? j->nq - q0 : GEMM_QUERIES;
        modattn__sgemm_nt((int64_t)nqb, (int64_t)nr, (int64_t)j->dim, 1.0f, q + q0 * j->dim, (int64_t)j->dim, x,
                          (int64_t)j->dim, 0.0f, sc, (int64_t)nr);
        for (size_t qi = 0; qi < nqb; qi++) {
            const size_t qq = q0 + qi;
            push_block(j, j->heaps + ((size_t)thread * j->nq + qq) * j->fetch, &j->heap_n[(size_t)thread * j->nq + qq],
                       r0, sc + qi * nr, nr);
        }
    }
}

static void flat_task(void *arg, int64_t task, int thread) {
    flat_job *j = arg;
    const size_t r0 = (size_t)task * FLAT_ROWS, nr = j->rows - r0 < FLAT_ROWS ? j->rows - r0 : FLAT_ROWS;
    float *sc = j->scores + (size_t)thread * FLAT_ROWS;
    const unsigned char *blk = j->codes + r0 * j->stride;
    const float *scl = j->scales ? j->scales + r0 : NULL;
    for (size_t q = 0; q < j->nq; q++) {
        j->fn(blk, j->stride, scl, nr, j->dim, j->q + q * j->qbytes, sc);
        push_block(j, j->heaps + ((size_t)thread * j->nq + q) * j->fetch, &j->heap_n[(size_t)thread * j->nq + q], r0,
                   sc, nr);
    }
}

int modattn__flat_candidates(modattn__flat_code c, const unsigned char *codes, const float *scales, size_t rows,
                             size_t dim, const uint8_t *mask, const float *queries, size_t nq, size_t fetch,
                             const modattn_exec *exec, modattn_hit *out, size_t *nout) {
    for (size_t q = 0; q < nq; q++) nout[q] = 0;
    if (!rows || !nq || !fetch) return 0;
    if (fetch > rows) fetch = rows;
    const bool gemm = c != MODATTN__FLAT_BINARY && nq >= GEMM_FROM;
    const size_t block = gemm ? GEMM_ROWS : FLAT_ROWS, ntasks = (rows + block - 1) / block;
    const bool par = exec && exec->parallel_for && exec->nthreads > 1 && ntasks > 1;
    const size_t nthreads = par ? (size_t)exec->nthreads : 1;
    if (fetch > SIZE_MAX / sizeof(modattn_hit) / nthreads / nq)
        return modattn__error(MODATTN_ERANGE, "compact scan: %zu queries x %zu candidates is too large", nq, fetch);
    flat_job j = {kernel_for(c), gemm ? decoder() : NULL, codes, scales, rows, dim, modattn__flat_stride(c, dim), nq, fetch, 0, NULL, mask,
                  NULL, NULL, NULL, NULL};
    j.qbytes = c == MODATTN__FLAT_BINARY ? j.stride : dim * sizeof(float);
    int st = 0;
    unsigned char *qb = NULL;
    if (c == MODATTN__FLAT_BINARY) {
        /* the queries' sign bits: the same encoder as the rows' */
        if (!(qb = modattn__calloc(nq, j.stride, MODATTN_MEM_WORKSPACE))) return modattn__mem_last_status();
        modattn__flat_encode(c, queries, nq, dim, dim, qb, NULL);
        j.q = qb;
    } else {
        j.q = (const unsigned char *)queries;
    }
    j.scores = modattn__malloc(nthreads * (gemm ? GEMM_QUERIES * GEMM_ROWS : FLAT_ROWS) * sizeof(float),
                              MODATTN_MEM_WORKSPACE);
    if (gemm) j.rows_f32 = modattn__malloc(nthreads * GEMM_ROWS * dim * sizeof(float), MODATTN_MEM_WORKSPACE);
    j.heaps = modattn__malloc(nthreads * nq * fetch * sizeof(modattn_hit), MODATTN_MEM_WORKSPACE);
    j.heap_n = modattn__calloc(nthreads * nq, sizeof(size_t), MODATTN_MEM_WORKSPACE);
    if (!j.scores || !j.heaps || !j.heap_n || (gemm && !j.rows_f32)) {
        st = modattn__mem_last_status();
        goto done;
    }
    uint64_t tr = modattn__trace_begin();
    void (*task)(void *, int64_t, int) = gemm ? gemm_task : flat_task;
    if (par) exec->parallel_for(exec, (int64_t)ntasks, task, &j);
    else
        for (size_t t = 0; t < ntasks; t++) task(&j, (int64_t)t, 0);
    if (tr) {
        char shape[96];
        snprintf(shape, sizeof shape, "rows=%zu queries=%zu fetch=%zu", rows, nq, fetch);
        modattn__trace_end(tr, "search.ann",
                          c == MODATTN__FLAT_F16    ? "scan f16"
                          : c == MODATTN__FLAT_INT8 ? "scan int8"
                                                    : "scan binary",
                          shape, (double)modattn__flat_bytes(c, dim, rows) * (double)nq, 0);
    }
    for (size_t q = 0; q < nq; q++) {
        modattn_hit *o = out + q * fetch;
        size_t m = 0;
        /* thread 0's heap is at most fetch; the others' are merged in through the same heap */
        for (size_t t = 0; t < nthreads; t++) {
            const modattn_hit *h = j.heaps + (t * nq + q) * fetch;
            const size_t hn = j.heap_n[t * nq + q];
            for (size_t i = 0; i < hn; i++) modattn__hit_push(o, &m, fetch, h[i]);
        }
        qsort(o, m, sizeof *o, modattn__hit_cmp);
        nout[q] = m;
    }
done:
    modattn_free(qb);
    modattn_free(j.scores);
    modattn_free(j.rows_f32);
    modattn_free(j.heaps);
    modattn_free(j.heap_n);
    return st;
}
