/* backends/cpu/cpu_encoder.c — the encoder's ops on the CPU device: each op is a loop over blocks
 * of token rows on the caller's thread pool (a->pool): an optional GEMM for the block's rows (one
 * single-threaded BLAS call per block: one thread pool in the process, no second runtime spinning
 * against it), then the elementwise post-op on the same rows while they are in cache
 * (cpu_rowops.c). Padding rows (i >= lens[b]) are zeroed instead of the post-op, so nothing in a
 * padded row can grow over the layers (the residual GEMMs add into x) and padded keys and values
 * stay finite. Weights are prepared once (linear_prepare: oneDNN's blocked copy, cpu_gemm.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "modattn/core.h"
#include "modattn/backend/device.h" /* MODATTN_POOL_* */
#include "core/internal_core.h"

/* Rows of every GEMM call without a plan (see row_task). */
#define GEMM_MIN_ROWS 16

typedef enum row_op {
    ROW_NONE,
    ROW_EMBED,    /* x[r] = LN(word[id] + pos[i] + type0) */
    ROW_BIAS,     /* y[r] += bias */
    ROW_PAD,      /* nothing (a bias of zeros: Qwen3's, Llama-style layers'): only padding rows zeroed */
    ROW_RES_LN,   /* y[r] = LN(y[r] + bias): y already holds residual + projection */
    ROW_BIAS_ACT, /* y[r] = act(y[r] + bias) */
} row_op;

typedef struct row_job {
    row_op op;
    modattn_act act;
    int64_t S;             /* padded length */
    const int32_t *lens;   /* [B] real lengths, or NULL: no padding */
    const int32_t *ids;    /* [B*S] (ROW_EMBED) */
    const int32_t *pos_ids; /* [B*S] or NULL: position i (ROW_EMBED) */
    const float *word, *pos, *type0; /* (ROW_EMBED) */
    float *y;              /* [rows, ld] output rows */
    int64_t ld, width;     /* row stride, columns touched */
    const float *bias, *g, *b;
    double eps;
    /* optional GEMM before the post-op: y[rows] = A[rows] . W^T + beta * y[rows] */
    const float *A;        /* [rows, lda] or NULL */
    int64_t lda, K;
    const float *W;        /* [width, K] */
    float beta;
    const modattn__gemm_plan *plan; /* the prepared GEMM for W, or NULL: sgemm_nt */
    bool direct;           /* a few-rows plan: modattn__gemm_direct on the block's rows */
    char *scratch;         /* per thread: scratch + thread * scratch_each */
    size_t scratch_each;
    int64_t chunk;         /* rows per task */
    int64_t panels, units, unit; /* column panels (panel_task): tasks, column units, columns a unit */
    int64_t rows;
    int err;               /* first failure of a task (atomic builtins) */
    char msg[256];         /* its message (written by the task that set err: messages are per thread) */
} row_job;

/* The elementwise post-op of rows [r0, r1) (a padding row: zeroed instead). */

static void row_ops(const row_job *j, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        const int64_t b = r / j->S, i = r % j->S;
        float *y = j->y + r * j->ld;
        if (j->lens && i >= j->lens[b]) {
            memset(y, 0, (size_t)j->width * sizeof *y);
            continue;
        }
        switch (j->op) {
        case ROW_NONE:
        case ROW_PAD:
            break;
        case ROW_EMBED: {
            const float *w = j->word + (int64_t)j->ids[r] * j->width;
            const float *p = j->pos + (j->pos_ids ? (int64_t)j->pos_ids[r] : i) * j->width;
            const float *t = j->type0;
            for (int64_t k = 0; k < j->width; k++) y[k] = w[k] + p[k] + t[k];
            if (j->g) modattn__bias_layer_norm(y, NULL, j->g, j->b, j->width, j->eps); /* NULL: plain */
            break;
        }
        case ROW_BIAS:
            modattn__bias_add(y, j->bias, j->width);
            break;
        case ROW_RES_LN:
            modattn__bias_layer_norm(y, j->bias, j->g, j->b, j->width, j->eps);
            break;
        case ROW_BIAS_ACT:
            switch (j->act) {
            case MODATTN_ACT_GELU_ERF: modattn__gelu_erf_bias(y, j->bias, j->width); break;
            case MODATTN_ACT_GELU_TANH: modattn__gelu_tanh_bias(y, j->bias, j->width); break;
            case MODATTN_ACT_RELU: modattn__relu_bias(y, j->bias, j->width); break;
            case MODATTN_ACT_SILU: modattn__silu_bias(y, j->bias, j->width); break;
            case MODATTN_ACT_NONE: modattn__bias_add(y, j->bias, j->width); break;
            }
            break;
        }
    }
}

static void row_task(void *arg, int64_t task, int thread) {
    row_job *j = arg;
    const int64_t r0 = task * j->chunk;
    const int64_t r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    if (r1 <= r0) return;
    if (j->plan && modattn__gemm_plan_big(j->plan)) {
        /* oneDNN's jit GEMM (AVX2): the task's rows in calls of up to 768 rows (it packs the
         * weights on every call: 768 rows pay that once, 64-row blocks 12 times); whole blocks,
         * the last may run into the buffers' zero rows past `rows`, as below */
        int st = modattn__gemm_plan_run_big(j->plan, r1 - r0, j->A + r0 * j->lda, j->y + r0 * j->ld);
        if (st) {
            int zero = 0;
            if (__atomic_compare_exchange_n(&j->err, &zero, st, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                snprintf(j->msg, sizeof j->msg, "%s", modattn_last_error());
            return;
        }
    } else if (j->plan) {
        /* whole blocks; the last may run into the buffers' zero rows past `rows` (row_block) */
        void *scr = j->scratch ? j->scratch + (size_t)thread * j->scratch_each : NULL;
        /* the last rows of a short task in blocks of MODATTN__GEMM_SMALL where the plan can */
        const bool small = modattn__gemm_plan_has_small(j->plan);
        for (int64_t r = r0, step; r < r1; r += step) {
            step = small && r1 - r < MODATTN__GEMM_BLOCK ? MODATTN__GEMM_SMALL : MODATTN__GEMM_BLOCK;
            int st = modattn__gemm_plan_run_rows(j->plan, step, j->A + r * j->lda, j->y + r * j->ld, scr);
            if (st) {
                int zero = 0;
                if (__atomic_compare_exchange_n(&j->err, &zero, st, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                    snprintf(j->msg, sizeof j->msg, "%s", modattn_last_error());
                return;
            }
            /* the block's post-op while its rows are in L2 (a task's 1024 rows of FFN-up output
             * are 6 MB: a pass after all of them read them back from L3) */
            if (j->op != ROW_NONE) row_ops(j, r, r + step < r1 ? r + step : r1);
        }
        return;
    } else if (j->A && j->direct) {
        modattn__gemm_direct(r1 - r0, j->width, j->K, j->A + r0 * j->lda, j->lda, j->W, j->beta,
                             j->y + r0 * j->ld, j->ld);
    } else if (j->A) {
        /* Never fewer than GEMM_MIN_ROWS rows (the buffers' zero rows fill a short last block):
         * the BLAS then computes every row with the same kernel and summation order, whatever the
         * batch around it, and a text's embedding is bit for bit the same alone or batched
         * (oneDNN takes another path below 16 rows; measured, see cpu_gemm.c). */
        const int64_t mg = r1 - r0 < GEMM_MIN_ROWS ? GEMM_MIN_ROWS : r1 - r0;
        modattn__sgemm_nt(mg, j->width, j->K, 1.0f, j->A + r0 * j->lda, j->lda, j->W, j->K, j->beta,
                          j->y + r0 * j->ld, j->ld);
    }
    if (j->op != ROW_NONE) row_ops(j, r0, r1);
}

/* Rows per task: one task per thread where that makes tasks of at most 1024 rows, in whole
 * GEMM blocks (64 rows: also the plans' block). Without plans the BLAS packs the weights once per
 * call, so larger blocks amortise that (1024 rows: 7-10% more tokens per CPU-second than 256 on
 * all-MiniLM-L6-v2 with dnnl_sgemm; 4096 no better). */
static int64_t rows_per_task(int64_t rows, int nthreads) {
    const int64_t blk = MODATTN__GEMM_BLOCK;
    /* as many tasks as it takes for at most 1024 rows each, a multiple of the threads, so that
     * no thread is left with one task more than the others (4,608 rows on 2 threads: 6 tasks of
     * 768, not 4 of 1024 and one of 512, which had one thread do 2,560 rows while the other did
     * 2,048) */
    int64_t tasks = (rows + 1023) / 1024;
    tasks = (tasks + nthreads - 1) / nthreads * nthreads;
    int64_t per = (rows + tasks - 1) / tasks;
    per = (per + blk - 1) / blk * blk;
    if (per > 1024) per = 1024 / blk * blk;
    return per < blk ? blk : per;
}

/* A few-rows plan's GEMM over the pool's threads by columns: a few rows are one row block, one
 * thread's work, while their columns split evenly (multiples of 4: the direct kernel's group; a
 * column's result does not depend on the split, so neither does the answer on the thread count). */
static void direct_cols_task(void *arg, int64_t task, int thread) {
    (void)thread;
    row_job *j = arg;
    const int64_t per = j->chunk, n0 = task * per, n1 = n0 + per < j->width ? n0 + per : j->width;
    if (n1 > n0)
        modattn__gemm_direct(j->rows, n1 - n0, j->K, j->A, j->lda, j->W + n0 * j->K, j->beta, j->y + n0, j->ld);
}

/* A plan's GEMM for a few rows by column panels: task t computes columns [n0, n1) of every
 * row, in MODATTN__GEMM_SMALL-row blocks (the last may run into the buffers' zero rows, as
 * row_task's). The split depends on the thread count, the bits do not (panel_ready). */
static void panel_task(void *arg, int64_t task, int thread) {
    row_job *j = arg;
    const int64_t n0 = task * j->units / j->panels * j->unit, n1 = (task + 1) * j->units / j->panels * j->unit;
    void *scr = j->scratch ? j->scratch + (size_t)thread * j->scratch_each : NULL;
    for (int64_t r = 0; r < j->rows && n1 > n0; r += MODATTN__GEMM_SMALL) {
        int st = modattn__gemm_plan_run_cols(j->plan, j->A + r * j->lda, j->y + r * j->ld, n0, n1, scr);
        if (st) {
            int zero = 0;
            if (__atomic_compare_exchange_n(&j->err, &zero, st, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                snprintf(j->msg, sizeof j->msg, "%s", modattn_last_error());
            return;
        }
    }
}

/* Whether the plan's GEMM of these few rows runs by column panels over nth threads, and how. */
static bool use_panels(row_job *j, int nth) {
    if (!j->plan || !j->A || nth < 2 || j->rows > MODATTN__GEMM_BLOCK || !modattn__gemm_plan_has_small(j->plan))
        return false;
    const int64_t unit = modattn__gemm_plan_panel_unit(j->plan);
    if (unit <= 0 || j->width % unit) return false;
    const int64_t units = j->width / unit, panels = units < nth ? units : nth;
    const int64_t lo = units / panels * unit, hi = (units + panels - 1) / panels * unit;
    if (panels < 2 || !modattn__gemm_plan_panel_ready(j->plan, lo) || (hi != lo && !modattn__gemm_plan_panel_ready(j->plan, hi)))
        return false;
    j->unit = unit, j->units = units, j->panels = panels;
    return true;
}

/* A big plan's GEMM by column parts: task t computes columns [n0, n1) of every row, the rows in
 * calls of up to 768 (modattn__gemm_plan_run_big_cols; its bits are the whole product's). */
static void big_cols_task(void *arg, int64_t task, int thread) {
    (void)thread;
    row_job *j = arg;
    const int64_t n0 = task * j->units / j->panels * j->unit;
    const int64_t n1 = task == j->panels - 1 ? j->width : (task + 1) * j->units / j->panels * j->unit;
    int st = modattn__gemm_plan_run_big_cols(j->plan, j->rows, j->A, j->y, n0, n1);
    if (st) {
        int zero = 0;
        if (__atomic_compare_exchange_n(&j->err, &zero, st, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            snprintf(j->msg, sizeof j->msg, "%s", modattn_last_error());
    }
}

static int64_t rows_per_task(int64_t rows, int nthreads);

/* Whether a big plan's GEMM runs by columns over nth threads (big_cols_task), and how: where a
 * split by rows would give each thread calls of fewer than 768 rows (2,272 rows on 2 threads:
 * tasks of 576, three 192-row calls each, on oneDNN's slower kernel), while every thread can have
 * a part of the columns at least MODATTN__GEMM_BIG_COLS_MIN wide. The post-op is then a pass of
 * its own (row_pass). Fewer than 768 rows: by rows (the same calls either way, and the post-op
 * while the rows are in cache). */
static bool use_big_cols(row_job *j, int nth) {
    if (!j->plan || !j->A || nth < 2 || !modattn__gemm_plan_big(j->plan) || j->rows < 768 ||
        rows_per_task(j->rows, nth) % 768 == 0)
        return false;
    const int64_t unit = MODATTN__GEMM_BIG_COLS_UNIT, units = j->width / unit;
    if (units / nth * unit < MODATTN__GEMM_BIG_COLS_MIN) return false;
    j->unit = unit, j->units = units, j->panels = nth;
    return true;
}

static int run_rows(row_job *j, modattn_pool *pool, char *reason, size_t len);

/* After a GEMM split by columns (the direct kernel's or the plan's panels): the row pass alone. */
static int row_pass(row_job *j, modattn_pool *pool, char *reason, size_t len) {
    if (j->op == ROW_NONE) return 0;
    const float *A = j->A;
    const modattn__gemm_plan *plan = j->plan;
    j->A = NULL, j->plan = NULL;
    const int st = run_rows(j, pool, reason, len);
    j->A = A, j->plan = plan;
    return st;
}

static int run_rows(row_job *j, modattn_pool *pool, char *reason, size_t len) {
    j->err = 0;
    const int nth = pool && modattn__pool_threads(pool) > 1 ? modattn__pool_threads(pool) : 1;
    if (j->A && j->direct && nth > 1 && j->rows <= MODATTN__GEMM_BLOCK && j->width >= 8 * nth) {
        /* the GEMM by columns on every thread, then the row pass (post-ops) alone */
        j->chunk = ((j->width + nth - 1) / nth + 3) / 4 * 4;
        modattn__pool_run(pool, (j->width + j->chunk - 1) / j->chunk, direct_cols_task, j);
        return row_pass(j, pool, reason, len);
    }
    if (use_big_cols(j, nth)) {
        modattn__pool_run(pool, j->panels, big_cols_task, j);
        int st = __atomic_load_n(&j->err, __ATOMIC_ACQUIRE);
        if (st) {
            snprintf(reason, len, "%s", j->msg);
            return st;
        }
        return row_pass(j, pool, reason, len);
    }
    const bool panels = use_panels(j, nth);
    j->chunk = rows_per_task(j->rows, nth);
    const int64_t ntasks = panels ? j->panels : (j->rows + j->chunk - 1) / j->chunk;
    char *scratch = NULL;
    /* (the whole-range path needs no scratch: dnnl_sgemm keeps its own) */
    const bool scratch_used = j->plan && (panels || !modattn__gemm_plan_big(j->plan));
    if (scratch_used && (j->scratch_each = modattn__gemm_plan_scratch(j->plan)) > 0) {
        j->scratch_each = (j->scratch_each + MODATTN_ALIGN - 1) / MODATTN_ALIGN * MODATTN_ALIGN;
        scratch = modattn__malloc((size_t)nth * j->scratch_each, MODATTN_MEM_WORKSPACE);
        if (!scratch) {
            snprintf(reason, len, "GEMM scratch: %s", modattn_last_error());
            return modattn__mem_last_status();
        }
    }
    j->scratch = scratch;
    if (panels) {
        /* the GEMM by columns on every thread, then the row pass (post-ops) */
        modattn__pool_run(pool, ntasks, panel_task, j);
        modattn_free(scratch);
        j->scratch = NULL;
        int st = __atomic_load_n(&j->err, __ATOMIC_ACQUIRE);
        if (st) {
            snprintf(reason, len, "%s", j->msg);
            return st;
        }
        return row_pass(j, pool, reason, len);
    }
    if (nth > 1 && ntasks > 1)
        modattn__pool_run(pool, ntasks, row_task, j);
    else
        for (int64_t t = 0; t < ntasks; t++) row_task(j, t, 0);
    modattn_free(scratch);
    int st = __atomic_load_n(&j->err, __ATOMIC_ACQUIRE);
    if (st) snprintf(reason, len, "%s", j->msg); /* the pool's run has returned: every task is done */
    return st;
}

/* ------------------------------------------------------------------ the ops */

#define HOST(buf, type) ((type)(buf)->host)

int modattn__cpu_embed(void *ctx, const modattn_op_embed_args *a, char *reason, size_t len) {
    (void)ctx;
    row_job j = {.op = ROW_EMBED, .S = a->S, .lens = HOST(a->lens, const int32_t *), .ids = HOST(a->ids, const int32_t *),
                 .word = HOST(a->word, const float *), .pos = HOST(a->pos, const float *),
                 .type0 = HOST(a->type0, const float *), .y = HOST(a->x, float *), .ld = a->H, .width = a->H,
                 .pos_ids = a->pos_ids ? HOST(a->pos_ids, const int32_t *) : NULL,
                 .g = a->plain ? NULL : HOST(a->gamma, const float *), .b = a->plain ? NULL : HOST(a->beta, const float *),
                 .eps = a->eps, .rows = a->B * a->S};
    return run_rows(&j, a->pool, reason, len);
}

/* The plan of a few-rows weight (linear_prepare with few_rows): the weight as it is, read by
 * modattn__gemm_direct. One sentinel for all of them: it holds nothing. */
static const char g_direct_plan = 'd';

int modattn__cpu_linear(void *ctx, const modattn_op_linear_args *a, char *reason, size_t len) {
    (void)ctx;
    if (!a->bias) {
        snprintf(reason, len, "linear without a bias is not implemented on the CPU device");
        return MODATTN_EUNSUPPORTED;
    }
    const bool direct = a->plan && a->plan->impl == &g_direct_plan;
    const modattn__gemm_plan *plan = a->plan && !direct ? a->plan->impl : NULL;
    if (a->precision != MODATTN_PRECISION_FP32 && (!plan || modattn__gemm_plan_precision(plan) != a->precision)) {
        /* a product in another precision is only ever run by a plan made for it */
        snprintf(reason, len, "a %s linear needs a weight prepared in %s (linear_prepare)",
                 modattn_precision_name(a->precision), modattn_precision_name(a->precision));
        return MODATTN_EUNSUPPORTED;
    }
    row_job j = {.op = a->gamma ? ROW_RES_LN : a->act != MODATTN_ACT_NONE ? ROW_BIAS_ACT : ROW_BIAS, .act = a->act,
                 .S = a->S > 0 ? a->S : a->rows, .lens = a->lens ? HOST(a->lens, const int32_t *) : NULL,
                 .y = HOST(a->y, float *), .ld = a->ldy, .width = a->N, .bias = HOST(a->bias, const float *),
                 .g = a->gamma ? HOST(a->gamma, const float *) : NULL, .b = a->beta ? HOST(a->beta, const float *) : NULL,
                 .eps = a->eps, .A = HOST(a->a, const float *), .lda = a->lda, .K = a->K,
                 .W = a->w ? HOST(a->w, const float *) : NULL, .beta = a->accumulate ? 1.0f : 0.0f, .plan = plan,
                 .direct = direct, .rows = a->rows};
    if (j.op == ROW_BIAS) { /* a bias of zeros (a checkpoint without biases): no pass over the rows to add it */
        int64_t n = 0;
        while (n < a->N && j.bias[n] == 0.0f) n++;
        if (n == a->N) j.op = ROW_PAD;
    }
    return run_rows(&j, a->pool, reason, len);
}

int modattn__cpu_linear_prepare(void *ctx, const modattn_op_linear_args *a, void **plan, bool *owns_weight, char *reason,
                                size_t len) {
    (void)ctx;
    const bool lowp = a->precision != MODATTN_PRECISION_FP32;
    if (a->few_rows && !lowp) { /* no packing, no set-up: the direct kernel reads the weight in place */
        *plan = (void *)&g_direct_plan;
        *owns_weight = false;
        return 0;
    }
    modattn__gemm_plan *p = NULL;
    int st = modattn__gemm_plan_create(HOST(a->w, const float *), a->N, a->K, a->lda, a->ldy, a->accumulate, a->precision,
                                       a->in_gamma && a->in_beta ? HOST(a->in_gamma, const float *) : NULL,
                                       a->in_gamma && a->in_beta ? HOST(a->in_beta, const float *) : NULL, &p);
    if (st) {
        snprintf(reason, len, "%s", modattn_last_error());
        return st;
    }
    *plan = p;
    /* the packed copy replaces the weight, unless the plan reads the weight in place */
    *owns_weight = p != NULL && !modattn__gemm_plan_borrows(p);
    return 0;
}

void modattn__cpu_linear_release(void *ctx, void *plan) {
    (void)ctx;
    if (plan != &g_direct_plan) modattn__gemm_plan_free(plan);
}

/* Pooling, in sentence-transformers' order: cls, max, mean, mean_sqrt_len, weightedmean,
 * lasttoken; then the optional L2 normalisation. */
int modattn__cpu_pool(void *ctx, const modattn_op_pool_args *a, char *reason, size_t len) {
    (void)ctx, (void)reason, (void)len;
    const float *X = HOST(a->x, const float *);
    const int32_t *lens = HOST(a->lens, const int32_t *);
    float *out = HOST(a->out, float *);
    const int64_t B = a->B, S = a->S, H = a->H, dim = a->dim;
    const unsigned modes = a->modes;
    for (int64_t b = 0; b < B; b++) {
        const float *x = X + b * S * H;
        const int64_t n = lens[b];
        float *o = out + b * dim;
        float *p = o;
        if (modes & MODATTN_POOL_CLS) {
            memcpy(p, x, (size_t)H * sizeof(float));
            p += H;
        }
        if (modes & MODATTN_POOL_MAX) {
            memcpy(p, x, (size_t)H * sizeof(float));
            for (int64_t i = 1; i < n; i++)
                for (int64_t k = 0; k < H; k++)
                    if (x[i * H + k] > p[k]) p[k] = x[i * H + k];
            p += H;
        }
        if (modes & (MODATTN_POOL_MEAN | MODATTN_POOL_MEAN_SQRT_LEN | MODATTN_POOL_WEIGHTED_MEAN)) {
            const bool mean = modes & MODATTN_POOL_MEAN;
            const bool msl = modes & MODATTN_POOL_MEAN_SQRT_LEN;
            const bool wm = modes & MODATTN_POOL_WEIGHTED_MEAN;
            for (int64_t k = 0; k < H; k++) {
                double s = 0, ws = 0;
                for (int64_t i = 0; i < n; i++) {
                    s += x[i * H + k];
                    ws += (double)(i + 1) * x[i * H + k];
                }
                const double cnt = n > 0 ? (double)n : 1e-9;
                float *q = p;
                if (mean) *q = (float)(s / cnt), q += H;
                if (msl) *q = (float)(s / sqrt(cnt)), q += H;
                if (wm) *q = (float)(ws / ((double)n * (double)(n + 1) / 2.0));
                p++;
            }
            p -= H;
            p += H * ((mean ? 1 : 0) + (msl ? 1 : 0) + (wm ? 1 : 0));
        }
        if (modes & MODATTN_POOL_LAST) {
            memcpy(p, x + (n > 0 ? n - 1 : 0) * H, (size_t)H * sizeof(float));
            p += H;
        }
        if (a->normalize) {
            double ss = 0;
            for (size_t k = 0; k < (size_t)dim; k++) ss += (double)o[k] * o[k];
            double norm = sqrt(ss);
            const float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
            for (size_t k = 0; k < (size_t)dim; k++) o[k] *= inv;
        }
    }
    return 0;
}

/* ------------------------------------------------ pre-LN, rotary and gated encoders' ops */

typedef struct misc_job {
    const modattn_op_norm_args *n;
    const modattn_op_rotary_args *r;
    const modattn_op_glu_args *g;
    const int32_t *lens;
    int64_t S, rows, chunk;
    const float *zeros; /* [N] (glu: the activations' bias) */
} misc_job;

static bool is_pad(const misc_job *j, int64_t r) { return j->lens && r % j->S >= j->lens[r / j->S]; }

static void norm_task(void *arg, int64_t task, int thread) {
    (void)thread;
    const misc_job *j = arg;
    const modattn_op_norm_args *a = j->n;
    const float *X = HOST(a->x, const float *), *g = HOST(a->gamma, const float *), *b = a->beta ? HOST(a->beta, const float *) : NULL;
    float *Y = HOST(a->y, float *);
    const int64_t r1 = (task + 1) * j->chunk < j->rows ? (task + 1) * j->chunk : j->rows;
    for (int64_t r = task * j->chunk; r < r1; r++) {
        float *y = Y + r * a->ldy;
        if (is_pad(j, r)) {
            memset(y, 0, (size_t)a->H * sizeof *y);
            continue;
        }
        if (y != X + r * a->ldx) memmove(y, X + r * a->ldx, (size_t)a->H * sizeof *y);
        const int64_t G = a->group > 0 ? a->group : a->H;
        for (int64_t c0 = 0; c0 < a->H; c0 += G) {
            if (!a->rms) {
                modattn__bias_layer_norm(y + c0, NULL, g + c0, b + c0, G, a->eps);
                continue;
            }
            modattn__rms_norm(y + c0, g + c0, G, a->eps);
        }
    }
}

static void rotary_task(void *arg, int64_t task, int thread) {
    (void)thread;
    const misc_job *j = arg;
    const modattn_op_rotary_args *a = j->r;
    float *X = HOST(a->x, float *);
    const float *C = HOST(a->cos, const float *), *Sn = HOST(a->sin, const float *);
    const int64_t half = a->D / 2, r1 = (task + 1) * j->chunk < j->rows ? (task + 1) * j->chunk : j->rows;
    for (int64_t r = task * j->chunk; r < r1; r++) {
        if (is_pad(j, r)) continue;
        const int64_t p = r % j->S;
        const float *c = C + p * half, *s = Sn + p * half;
        for (int64_t h = 0; h < a->heads; h++) {
            float *x = X + r * a->ldx + h * a->D;
            if (a->interleaved) { /* GPT-J: the pairs (2k, 2k + 1) */
                for (int64_t k = 0; k < half; k++) {
                    const float x1 = x[2 * k], x2 = x[2 * k + 1];
                    x[2 * k] = x1 * c[k] - x2 * s[k];
                    x[2 * k + 1] = x2 * c[k] + x1 * s[k];
                }
                continue;
            }
            for (int64_t k = 0; k < half; k++) {
                const float x1 = x[k], x2 = x[k + half];
                x[k] = x1 * c[k] - x2 * s[k];
                x[k + half] = x2 * c[k] + x1 * s[k];
            }
        }
    }
}

static void glu_task(void *arg, int64_t task, int thread) {
    (void)thread;
    const misc_job *j = arg;
    const modattn_op_glu_args *a = j->g;
    float *X = HOST(a->x, float *);
    const int64_t r1 = (task + 1) * j->chunk < j->rows ? (task + 1) * j->chunk : j->rows;
    for (int64_t r = task * j->chunk; r < r1; r++) {
        float *x = X + r * a->ldx;
        if (is_pad(j, r)) {
            memset(x, 0, (size_t)a->N * sizeof *x);
            continue;
        }
        if (a->act == MODATTN_ACT_SILU) { /* one pass: silu(gate) * up */
            modattn__silu_mul(x, a->N);
            continue;
        }
        switch (a->act) {
        case MODATTN_ACT_GELU_ERF: modattn__gelu_erf_bias(x, j->zeros, a->N); break;
        case MODATTN_ACT_GELU_TANH: modattn__gelu_tanh_bias(x, j->zeros, a->N); break;
        case MODATTN_ACT_RELU: modattn__relu_bias(x, j->zeros, a->N); break;
        case MODATTN_ACT_SILU: case MODATTN_ACT_NONE: break;
        }
        for (int64_t k = 0; k < a->N; k++) x[k] *= x[a->N + k];
    }
}

/* Row by row: a row's result depends on that row alone, whatever the split. */
static void run_misc(misc_job *j, modattn_pool *pool, void (*fn)(void *, int64_t, int)) {
    const int nth = pool && modattn__pool_threads(pool) > 1 ? modattn__pool_threads(pool) : 1;
    j->chunk = (j->rows + nth - 1) / nth;
    if (j->chunk < 16) j->chunk = 16;
    const int64_t ntasks = (j->rows + j->chunk - 1) / j->chunk;
    if (nth > 1 && ntasks > 1)
        modattn__pool_run(pool, ntasks, fn, j);
    else
        for (int64_t t = 0; t < ntasks; t++) fn(j, t, 0);
}

int modattn__cpu_norm(void *ctx, const modattn_op_norm_args *a, char *reason, size_t len) {
    (void)ctx, (void)reason, (void)len;
    misc_job j = {.n = a, .lens = a->lens ? HOST(a->lens, const int32_t *) : NULL, .S = a->S > 0 ? a->S : a->rows,
                  .rows = a->rows};
    run_misc(&j, a->pool, norm_task);
    return 0;
}

int modattn__cpu_rotary(void *ctx, const modattn_op_rotary_args *a, char *reason, size_t len) {
    (void)ctx, (void)reason, (void)len;
    misc_job j = {.r = a, .lens = a->lens ? HOST(a->lens, const int32_t *) : NULL, .S = a->S > 0 ? a->S : a->rows,
                  .rows = a->rows};
    run_misc(&j, a->pool, rotary_task);
    return 0;
}

int modattn__cpu_glu(void *ctx, const modattn_op_glu_args *a, char *reason, size_t len) {
    (void)ctx;
    float *zeros = modattn__calloc((size_t)a->N, sizeof *zeros, MODATTN_MEM_WORKSPACE);
    if (!zeros) {
        snprintf(reason, len, "glu: %s", modattn_last_error());
        return modattn__mem_last_status();
    }
    misc_job j = {.g = a, .lens = a->lens ? HOST(a->lens, const int32_t *) : NULL, .S = a->S > 0 ? a->S : a->rows,
                  .rows = a->rows, .zeros = zeros};
    run_misc(&j, a->pool, glu_task);
    modattn_free(zeros);
    return 0;
}
