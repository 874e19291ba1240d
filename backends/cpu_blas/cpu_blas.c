/* backends/cpu_blas/cpu_blas.c — "cpu_blas": attention through a vendor SGEMM, the "vendor-native"
 * CPU path. Fast version; the oracle is backends/reference.
 *
 * Per work item (b, query head, block of QB query rows):
 *   S = scale * Q_blk . K^T       SGEMM   [QB x Dk] . [Dk x n]   n = keys any row of the block sees
 *   P = softmax(cap(S) - ALiBi + mask) over the keys each row sees (causal, window, kv_lens), LSE
 *   O_blk = P . V                 SGEMM   [QB x n] . [n x Dv]
 * Keys no row of the block can see (causal future, right of a window, kv_lens padding) are left
 * out of both GEMMs; keys left of a window are computed and hidden (-inf) before the softmax:
 * cpu_flash is the path that skips them.
 * The scores block S lives in the workspace (QB x Sk floats per thread, QB chosen so it stays
 * under SCORES_BUDGET); run() allocates nothing itself.
 *
 * Threads: work items go over exec->parallel_for, and each SGEMM runs single-threaded on the
 * calling thread (oneDNN: its OpenMP team size is set to 1 for the duration of our call and put
 * back after; OpenBLAS: openblas_set_num_threads(1), process-wide). One pool, no BLAS threads
 * spinning against it.
 *
 * Which BLAS (measured on this project's machine, AMD EPYC Zen 4, 1 thread, OPENBLAS_CORETYPE=Haswell
 * as the environment sets it; bench/blas_choice.c, median GFLOP/s):
 *     shape                          OpenBLAS 0.3.21   oneDNN 2.6.3
 *     S = Q.K^T  M=256 N=1024 K=64        76.5            91.1
 *     O = P.V    M=256 N=64   K=1024      91.2           100.2
 *     S = Q.K^T  M=256 N=1024 K=128       78.5            87.4
 *     O = P.V    M=256 N=128  K=1024      84.9           104.6
 *     S = Q.K^T  M=128 N=2048 K=64        76.0            88.5
 *     S = Q.K^T  M=64  N=512  K=64        79.9            94.6
 * oneDNN is 10-25% faster on every attention shape but the smallest (PV M=128 N=32 K=128: 107 vs
 * 103). End to end (this backend, 1 thread, GFLOP/s per CPU-second, B,H,S,D): oneDNN 76 / 87 / 61
 * / 58 against OpenBLAS 68 / 76 / 57 / 50 on 1,4,1024,64 / 1,4,1024,128 / the same causal /
 * 8,12,256,32. So oneDNN is the default; -DMODATTN_CPU_BLAS=openblas builds this file on cblas_sgemm.
 * Memory inside the BLAS (counted with an LD_PRELOAD malloc counter): oneDNN's sgemm mallocs and
 * frees a packing buffer on every call, ~74 KB per call on these shapes (7.1 MB over the 96 calls of
 * one B=1 H=12 S=1024 D=64 attention), bounded by its blocking and never kept; OpenBLAS allocates
 * nothing per call (it works in buffers mapped once). Neither grows with the number of calls
 * (tests/backends/test_kernel_memory.c checks the process RSS). */
#include "modattn/backend/impl.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#if defined(MODATTN_CPU_BLAS_ONEDNN)
#include "core/signals.h"
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#define BLAS_NAME "oneDNN sgemm"
#elif defined(MODATTN_CPU_BLAS_OPENBLAS)
#include <cblas.h>
#define BLAS_NAME "OpenBLAS sgemm"
#else
#error "backends/cpu_blas needs MODATTN_CPU_BLAS_ONEDNN or MODATTN_CPU_BLAS_OPENBLAS"
#endif

#include "backends/cpu_blas/softmax.h"

#define SCORES_BUDGET (INT64_C(2) << 20) /* floats of scores per thread: 8 MiB */
#define QB_MAX 256                       /* query rows per block: M of both GEMMs */
#define KCHUNK 256                       /* keys per packed K/V chunk (odd layouts only) */
#define MAX_DIM 65536
#define MAX_SEQ (INT64_C(1) << 30)

/* ------------------------------------------------------------------ the BLAS */

/* C[M x N] = alpha * A[M x K] . op(B) + beta * C, row-major; op(B) = B^T ([N x K]) if bt. */
static void sgemm(bool bt, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
#if defined(MODATTN_CPU_BLAS_ONEDNN)
    /* dnnl_sgemm only fails on invalid arguments: the callers below guarantee them. */
    sigset_t sig; /* oneDNN's JIT GEMMs must not take a signal (core/signals.h) */
    modattn__signals_hold(&sig);
    (void)dnnl_sgemm('N', bt ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    modattn__signals_release(&sig);
#else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, bt ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, (blasint)K,
                alpha, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
#endif
}

static int blas_init(void *ctx, char *reason, size_t len) {
    (void)ctx, (void)reason, (void)len;
#if defined(MODATTN_CPU_BLAS_OPENBLAS)
    openblas_set_num_threads(1); /* process-wide; our pool provides the parallelism */
#endif
    return 0;
}

/* ------------------------------------------------------------------ layout */

typedef struct blas_layout {
    int64_t qb;                     /* query rows per block */
    size_t off_s, off_q, off_o, off_k, off_v, slice; /* floats */
} blas_layout;

static size_t r16(size_t n) { return (n + 15) & ~(size_t)15; }

static void layout(const modattn_attn_desc *d, blas_layout *l) {
    int64_t sk = d->Sk > 0 ? d->Sk : 1;
    int64_t qb = SCORES_BUDGET / sk;
    if (qb > QB_MAX) qb = QB_MAX;
    if (qb > d->Sq) qb = d->Sq;
    if (qb < 1) qb = 1;
    l->qb = qb;
    size_t at = 0;
    l->off_s = at, at += r16((size_t)(qb * sk));
    l->off_q = at, at += r16((size_t)(qb * d->D));      /* Q block, when it can't be used in place */
    l->off_o = at, at += r16((size_t)(qb * d->Dv));     /* O block, likewise */
    l->off_k = at, at += r16((size_t)(KCHUNK * d->D));  /* K chunk, likewise */
    l->off_v = at, at += r16((size_t)(KCHUNK * d->Dv)); /* V chunk, likewise */
    l->slice = at;
}

/* ------------------------------------------------------------------ slots */

static bool blas_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx;
    if (d->device.kind != MODATTN_DEVICE_CPU) {
        snprintf(reason, len, "cpu_blas runs on the CPU; tensors are on %s", modattn_device_kind_name(d->device.kind));
        return false;
    }
    if (d->dtype != MODATTN_DTYPE_F32) {
        snprintf(reason, len, "cpu_blas uses fp32 SGEMM only; dtype is %s", modattn_dtype_name(d->dtype));
        return false;
    }
    if (d->D < 0 || d->D > MAX_DIM || d->Dv < 0 || d->Dv > MAX_DIM) {
        snprintf(reason, len, "cpu_blas needs D, Dv <= %d (D=%lld, Dv=%lld)", MAX_DIM, (long long)d->D,
                 (long long)d->Dv);
        return false;
    }
    if (d->Sq > MAX_SEQ || d->Sk > MAX_SEQ) {
        snprintf(reason, len, "cpu_blas handles Sq, Sk <= 2^30 (Sq=%lld, Sk=%lld)", (long long)d->Sq, (long long)d->Sk);
        return false;
    }
    if (d->has_alibi && (d->Sq > (INT64_C(1) << 24) || d->Sk > (INT64_C(1) << 24))) {
        snprintf(reason, len, "cpu_blas computes ALiBi distances in fp32, exact up to 2^24: Sq=%lld, Sk=%lld",
                 (long long)d->Sq, (long long)d->Sk);
        return false;
    }
    if (d->Hq > 0 && (d->Hkv < 1 || d->Hq % d->Hkv != 0)) {
        snprintf(reason, len, "Hq=%lld is not a multiple of Hkv=%lld", (long long)d->Hq, (long long)d->Hkv);
        return false;
    }
    return true;
}

static size_t blas_workspace_bytes(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx;
    blas_layout l;
    layout(d, &l);
    return (size_t)(nthreads > 0 ? nthreads : 1) * l.slice * sizeof(float);
}

typedef struct blas_job {
    const modattn_attn_desc *d;
    const modattn_attn_call *c;
    blas_layout l;
    int64_t nqb, G;
    float *ws;
    int nthreads;
    atomic_int bad_thread;
} blas_job;

/* A [rows x cols] matrix at p (row stride rs, element stride es) usable by a row-major BLAS as is? */
static bool direct(int64_t rows, int64_t cols, int64_t rs, int64_t es) {
    return (es == 1 || cols <= 1) && (rows <= 1 || rs >= (cols > 1 ? cols : 1));
}

static void blas_item(void *arg, int64_t item, int thread) {
    blas_job *job = arg;
    if (thread < 0 || thread >= job->nthreads) {
        atomic_store(&job->bad_thread, 1);
        return;
    }
    const modattn_attn_desc *d = job->d;
    const modattn_attn_call *c = job->c;
    const int64_t D = d->D, Dv = d->Dv, Sq = d->Sq;
    const int64_t qbi = job->nqb - 1 - item % job->nqb; /* causal: the heavy blocks first */
    const int64_t bh = item / job->nqb, b = bh / d->Hq, h = bh % d->Hq, hk = h / job->G;
    const int64_t i0 = qbi * job->l.qb, m = Sq - i0 < job->l.qb ? Sq - i0 : job->l.qb;
    float *ws = job->ws + (size_t)thread * job->l.slice;
    float *S = ws + job->l.off_s;

    int64_t L = c->kv_lens ? c->kv_lens[b] : d->Sk;
    if (L < 0) L = 0;
    if (L > d->Sk) L = d->Sk;
    const int64_t off = L - Sq; /* i' = i + off: causal row i sees keys j <= i' */
    int64_t n = L; /* keys [0, n): what the block's last row may see (causal, a window's right side) */
    {
        int64_t lo, hi;
        modattn_attn_visible(d, L, i0 + m - 1, &lo, &hi);
        if (hi < n) n = hi;
        if (n < 0) n = 0;
    }

    const float *q = (const float *)c->q.data + b * c->q.stride[0] + h * c->q.stride[1] + i0 * c->q.stride[2];
    const float *k = (const float *)c->k.data + b * c->k.stride[0] + hk * c->k.stride[1];
    const float *v = (const float *)c->v.data + b * c->v.stride[0] + hk * c->v.stride[1];
    float *o = (float *)c->o.data + b * c->o.stride[0] + h * c->o.stride[1] + i0 * c->o.stride[2];
    const int64_t ors = c->o.stride[2], oes = c->o.stride[3];

#if defined(MODATTN_CPU_BLAS_ONEDNN)
    /* oneDNN sizes its OpenMP team from this thread's setting: 1 while we call it. */
    const int omp_prev = omp_get_max_threads();
    if (omp_prev != 1) omp_set_num_threads(1);
#endif

    if (n > 0) {
        /* ---- S = scale * Q . K^T */
        int64_t lda = c->q.stride[2];
        if (!direct(m, D, c->q.stride[2], c->q.stride[3])) {
            float *qp = ws + job->l.off_q;
            for (int64_t r = 0; r < m; r++)
                for (int64_t e = 0; e < D; e++) qp[r * D + e] = q[r * c->q.stride[2] + e * c->q.stride[3]];
            q = qp;
            lda = D;
        }
        if (lda < D) lda = D > 0 ? D : 1; /* m == 1: never stepped over */
        if (D == 0) {
            for (int64_t r = 0; r < m; r++) memset(S + r * n, 0, sizeof(float) * (size_t)n);
        } else if (direct(n, D, c->k.stride[2], c->k.stride[3])) {
            int64_t ldb = c->k.stride[2] < D ? D : c->k.stride[2];
            sgemm(true, m, n, D, d->scale, q, lda, k, ldb, 0.0f, S, n);
        } else {
            float *kp = ws + job->l.off_k;
            for (int64_t j0 = 0; j0 < n; j0 += KCHUNK) {
                int64_t nc = n - j0 < KCHUNK ? n - j0 : KCHUNK;
                for (int64_t j = 0; j < nc; j++)
                    for (int64_t e = 0; e < D; e++)
                        kp[j * D + e] = k[(j0 + j) * c->k.stride[2] + e * c->k.stride[3]];
                sgemm(true, m, nc, D, d->scale, q, lda, kp, D, 0.0f, S + j0, n);
            }
        }
    }

    /* ---- P = softmax(S + mask) per row, LSE; P is normalised so that O = P . V */
    const float *mask = NULL;
    int64_t mrs = 0, mjs = 0;
    if (c->mask.data) {
        mask = (const float *)c->mask.data + (c->mask.shape[0] == 1 ? 0 : b * c->mask.stride[0]) +
               (c->mask.shape[1] == 1 ? 0 : h * c->mask.stride[1]) + i0 * c->mask.stride[2];
        mrs = c->mask.stride[2], mjs = c->mask.stride[3];
    }
    bool any_dead = false;
    for (int64_t r = 0; r < m; r++) {
        const int64_t i = i0 + r;
        int64_t lo, lim; /* keys [lo, lim) visible to this row (attention.h) */
        modattn_attn_visible(d, L, i, &lo, &lim);
        if (lim > n) lim = n;
        if (lo > lim) lo = lim;
        float *sr = S + r * n;
        for (int64_t j = 0; j < lo; j++) sr[j] = -INFINITY; /* left of the window */
        if (d->softcap > 0.0f) {
            const float cap = d->softcap, inv = 1.0f / cap;
            for (int64_t j = lo; j < lim; j++) sr[j] = cap * tanhf(sr[j] * inv);
        }
        if (c->alibi_slopes) { /* - slope * |i' - j| */
            const float sl = c->alibi_slopes[h];
            const int64_t ip = i + off;
            for (int64_t j = lo; j < lim; j++) sr[j] -= sl * (float)(ip > j ? ip - j : j - ip);
        }
        float lse = modattn__cpu_blas_softmax_row(S + r * n, n, lim, mask ? mask + r * mrs : NULL, mjs);
        if (lse == -INFINITY) any_dead = true;
        if (c->lse.data)
            ((float *)c->lse.data)[b * c->lse.stride[0] + h * c->lse.stride[1] + i * c->lse.stride[2]] = lse;
    }
    (void)any_dead; /* dead rows have P = 0, so O = 0 comes out of the GEMM */

    /* ---- O = P . V */
    if (Dv > 0) {
        bool o_direct = direct(m, Dv, ors, oes);
        float *ob = o_direct ? o : ws + job->l.off_o;
        int64_t ldo = o_direct ? (ors < Dv ? Dv : ors) : Dv;
        if (n == 0) {
            for (int64_t r = 0; r < m; r++) memset(ob + r * ldo, 0, sizeof(float) * (size_t)Dv);
        } else if (direct(n, Dv, c->v.stride[2], c->v.stride[3])) {
            int64_t ldv = c->v.stride[2] < Dv ? Dv : c->v.stride[2];
            sgemm(false, m, Dv, n, 1.0f, S, n, v, ldv, 0.0f, ob, ldo);
        } else {
            float *vp = ws + job->l.off_v;
            for (int64_t j0 = 0; j0 < n; j0 += KCHUNK) {
                int64_t nc = n - j0 < KCHUNK ? n - j0 : KCHUNK;
                for (int64_t j = 0; j < nc; j++)
                    for (int64_t e = 0; e < Dv; e++)
                        vp[j * Dv + e] = v[(j0 + j) * c->v.stride[2] + e * c->v.stride[3]];
                sgemm(false, m, Dv, nc, 1.0f, S + j0, n, vp, Dv, j0 ? 1.0f : 0.0f, ob, ldo);
            }
        }
        if (!o_direct)
            for (int64_t r = 0; r < m; r++)
                for (int64_t e = 0; e < Dv; e++) o[r * ors + e * oes] = ob[r * Dv + e];
    }

#if defined(MODATTN_CPU_BLAS_ONEDNN)
    if (omp_prev != 1) omp_set_num_threads(omp_prev);
#endif
}

static int blas_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *call, void *workspace,
                    size_t workspace_bytes, const modattn_exec *exec, char *reason, size_t len) {
    (void)ctx;
    if (!blas_supports(NULL, d, reason, len)) return MODATTN_EUNSUPPORTED;
    if (d->B == 0 || d->Hq == 0 || d->Sq == 0) return 0;
    if (d->Dv == 0 && !d->has_lse) return 0;
    blas_job job;
    memset(&job, 0, sizeof job);
    layout(d, &job.l);
    job.nthreads = exec && exec->parallel_for && exec->nthreads > 0 ? exec->nthreads : 1;
    size_t need = (size_t)job.nthreads * job.l.slice * sizeof(float);
    if (!workspace || workspace_bytes < need || ((uintptr_t)workspace % 64) != 0) {
        snprintf(reason, len, "cpu_blas needs %zu bytes of 64-byte aligned workspace for %d threads, got %zu", need,
                 job.nthreads, workspace ? workspace_bytes : (size_t)0);
        return MODATTN_EINVAL;
    }
    job.d = d, job.c = call;
    job.G = d->Hq / d->Hkv;
    job.nqb = (d->Sq + job.l.qb - 1) / job.l.qb;
    job.ws = workspace;
    atomic_init(&job.bad_thread, 0);
    const int64_t items = d->B * d->Hq * job.nqb;
    if (exec && exec->parallel_for)
        exec->parallel_for(exec, items, blas_item, &job);
    else
        for (int64_t i = 0; i < items; i++) blas_item(&job, i, 0);
    if (atomic_load(&job.bad_thread)) {
        snprintf(reason, len, "cpu_blas: the host ran a task with a thread id outside [0, %d)", job.nthreads);
        return MODATTN_ERUNTIME;
    }
    return 0;
}

static const modattn_attn_impl cpu_blas_impl = {
    /* .api_version = */ MODATTN_IMPL_API_VERSION,
    /* .name = */ "cpu_blas",
    /* .description = */ "blocked attention on " BLAS_NAME " (single-threaded BLAS inside the pool) + softmax",
    /* .device = */ MODATTN_DEVICE_CPU,
    /* .priority = */ 90,
    /* .ctx = */ NULL,
    /* .init = */ blas_init,
    /* .shutdown = */ NULL,
    /* .supports = */ blas_supports,
    /* .workspace_bytes = */ blas_workspace_bytes,
    /* .run = */ blas_run,
    /* .control = */ NULL,
};

const modattn_attn_impl *modattn__backend_cpu_blas(void) { return &cpu_blas_impl; }
