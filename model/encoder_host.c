/* model/encoder_host.c — the host engine: the encoder's forward pass on host memory, as row-block
 * passes on the model's thread pool (GEMM + fused elementwise post-op per block: encoder_ops.c,
 * gemm.c), attention through the dispatcher on strided views of the QKV buffer, and pooling. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/encoder_internal.h"

/* ------------------------------------------------------------------ row-block passes */

/* Every pass of the forward is a loop over blocks of token rows on the ctx's thread pool: an
 * optional GEMM for the block's rows (one single-threaded BLAS call per block: one thread pool
 * in the process, no second runtime spinning against it), then the elementwise post-op on the
 * same rows while they are in cache. Padding rows are zeroed instead of the post-op. */
/* Rows of every GEMM call without a plan (see row_task). */
#define GEMM_MIN_ROWS 16
/* Zero rows past the last token row of a batch, read and written by a short last block. */
#define SPARE_ROWS (MODATTN__GEMM_BLOCK > GEMM_MIN_ROWS ? MODATTN__GEMM_BLOCK : GEMM_MIN_ROWS)

typedef enum row_op {
    ROW_NONE,
    ROW_EMBED,    /* x[r] = LN(word[id] + pos[i] + type0) */
    ROW_BIAS,     /* y[r] += bias (the QKV projection) */
    ROW_RES_LN,   /* x[r] = LN(x[r] + bias): x already holds residual + projection */
    ROW_BIAS_ACT, /* y[r] = act(y[r] + bias) */
} row_op;

typedef struct row_job {
    const modattn_model *m;
    const char *name;      /* trace span: a string literal */
    row_op op;
    int64_t S;             /* padded length */
    const int32_t *lens;   /* [B] real lengths */
    const int32_t *ids;    /* [B*S] (ROW_EMBED) */
    float *y;              /* [B*S, ld] output rows */
    int64_t ld, width;     /* row stride, columns touched */
    const float *bias, *g, *b;
    /* optional GEMM before the post-op: y[rows] = A[rows] . W^T + beta * y[rows] */
    const float *A;        /* [B*S, lda] or NULL */
    int64_t lda, K;
    const float *W;        /* [width, K] */
    float beta;
    const modattn__gemm_plan *plan; /* the prepared GEMM for W, or NULL: sgemm_nt */
    char *scratch;         /* per thread: scratch + thread * m->gemm_scratch */
    int64_t chunk;         /* rows per task */
    int64_t rows;          /* B*S */
    int err;               /* first failure of a task (atomic builtins) */
} row_job;

static void row_task(void *arg, int64_t task, int thread) {
    row_job *j = arg;
    const modattn__model_config *c = &j->m->cfg;
    const int64_t r0 = task * j->chunk;
    const int64_t r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    if (r1 <= r0) return;
    if (j->plan) {
        /* whole blocks; the last may run into the arena's zero spare rows (see arena_bind) */
        void *scr = j->scratch ? j->scratch + (size_t)thread * j->m->gemm_scratch : NULL;
        for (int64_t r = r0; r < r1; r += MODATTN__GEMM_BLOCK) {
            int st = modattn__gemm_plan_run(j->plan, j->A + r * j->lda, j->y + r * j->ld, scr);
            if (st) {
                int zero = 0;
                __atomic_compare_exchange_n(&j->err, &zero, st, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
                return;
            }
        }
    } else if (j->A) {
        /* Never fewer than GEMM_MIN_ROWS rows (the arena's spare zero rows fill a short last
         * block): the BLAS then computes every row with the same kernel and summation order,
         * whatever the batch around it, and a text's embedding is bit for bit the same alone or
         * batched (oneDNN takes another path below 16 rows; measured, see gemm.c). */
        const int64_t mg = r1 - r0 < GEMM_MIN_ROWS ? GEMM_MIN_ROWS : r1 - r0;
        modattn__sgemm_nt(mg, j->width, j->K, 1.0f, j->A + r0 * j->lda, j->lda, j->W, j->K,
                          j->beta, j->y + r0 * j->ld, j->ld);
    }
    if (j->op == ROW_NONE) return;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t b = r / j->S, i = r % j->S;
        float *y = j->y + r * j->ld;
        if (i >= j->lens[b]) {
            /* padding: kept at zero, so nothing in a padded row can grow over the layers (the
             * residual GEMMs add into x) and padded keys and values stay finite */
            memset(y, 0, (size_t)j->width * sizeof *y);
            continue;
        }
        switch (j->op) {
        case ROW_NONE:
            break;
        case ROW_EMBED: {
            const float *w = j->m->word + (int64_t)j->ids[r] * c->hidden;
            const float *p = j->m->pos + i * c->hidden;
            const float *t = j->m->type0;
            for (int64_t k = 0; k < j->width; k++) y[k] = w[k] + p[k] + t[k];
            modattn__bias_layer_norm(y, NULL, j->g, j->b, j->width, c->ln_eps);
            break;
        }
        case ROW_BIAS:
            modattn__bias_add(y, j->bias, j->width);
            break;
        case ROW_RES_LN:
            modattn__bias_layer_norm(y, j->bias, j->g, j->b, j->width, c->ln_eps);
            break;
        case ROW_BIAS_ACT:
            switch (c->act) {
            case MODATTN__ACT_GELU_ERF: modattn__gelu_erf_bias(y, j->bias, j->width); break;
            case MODATTN__ACT_GELU_TANH: modattn__gelu_tanh_bias(y, j->bias, j->width); break;
            case MODATTN__ACT_RELU: modattn__relu_bias(y, j->bias, j->width); break;
            }
            break;
        }
    }
}

/* Rows per task: one task per thread where that makes tasks of at most 1024 rows, in whole
 * GEMM blocks (64 rows: also the plans' block). Without plans the BLAS packs the weights once per
 * call, so larger blocks amortise that (1024 rows: 7-10% more tokens per CPU-second than 256 on
 * all-MiniLM-L6-v2 with dnnl_sgemm; 4096 no better). */
static int64_t rows_per_task(int64_t rows, int nthreads) {
    const int64_t blk = MODATTN__GEMM_BLOCK;
    int64_t per = (rows + nthreads - 1) / nthreads;
    per = (per + blk - 1) / blk * blk;
    if (per > 1024) per = 1024 / blk * blk;
    return per < blk ? blk : per;
}

static int run_rows(modattn_model *m, row_job *j, char *scratch) {
    uint64_t t0 = modattn_trace_begin();
    j->m = m;
    j->scratch = scratch;
    j->err = 0;
    const int nth = m->pool && modattn_pool_threads(m->pool) > 1 ? modattn_pool_threads(m->pool) : 1;
    j->chunk = rows_per_task(j->rows, nth);
    const int64_t ntasks = (j->rows + j->chunk - 1) / j->chunk;
    if (nth > 1 && ntasks > 1)
        modattn_pool_run(m->pool, ntasks, row_task, j);
    else
        for (int64_t t = 0; t < ntasks; t++) row_task(j, t, 0);
    if (t0) {
        char shape[64];
        if (j->A)
            snprintf(shape, sizeof shape, "[%lld x %lld] x [%lld x %lld]^T", (long long)j->rows,
                     (long long)j->K, (long long)j->width, (long long)j->K);
        else
            snprintf(shape, sizeof shape, "[%lld x %lld]", (long long)j->rows,
                     (long long)j->width);
        const double flops = j->A ? 2.0 * (double)j->rows * (double)j->width * (double)j->K : 0;
        const double bytes = 4.0 * ((double)j->rows * (double)(j->K + j->width) +
                                    (j->A ? (double)j->width * (double)j->K : 0));
        modattn_trace_end(t0, j->name ? j->name : "encoder.rows",
                          j->A ? modattn__gemm_name() : NULL, shape, bytes, flops);
    }
    return __atomic_load_n(&j->err, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ forward */

/* Activation arena of one batch of B rows padded to S: T = B*S token rows, and SPARE_ROWS
 * spare rows past them, kept at zero (see row_task), and the GEMM plans' scratch per thread. */
typedef struct arena {
    float *x;    /* [T + spare, H]  hidden state */
    float *big;  /* [T + spare, max(3H, I)]  QKV, then the FFN's intermediate */
    float *att;  /* [T + spare, H]  attention output */
    char *scratch; /* [threads][m->gemm_scratch] or NULL */
} arena;

size_t modattn__host_arena_floats(const modattn__model_config *c, int64_t T) {
    const int64_t H = c->hidden;
    const int64_t W = 3 * H > c->intermediate ? 3 * H : c->intermediate;
    return (size_t)((T + SPARE_ROWS) * (H + W + H));
}

static void arena_bind(const modattn__model_config *c, float *base, int64_t T, arena *a) {
    const int64_t H = c->hidden;
    const int64_t W = 3 * H > c->intermediate ? 3 * H : c->intermediate;
    const int64_t cap = T + SPARE_ROWS;
    a->x = base;
    a->big = a->x + cap * H;
    a->att = a->big + cap * W;
    /* the spare rows are GEMM inputs (x, att; big's are GEMM outputs of zero rows) */
    memset(a->x + T * H, 0, (size_t)(SPARE_ROWS * H) * sizeof(float));
    memset(a->att + T * H, 0, (size_t)(SPARE_ROWS * H) * sizeof(float));
}

/* Runs B rows of ids (row b: ids[b*S .. b*S+lens[b]-1], the rest padding) through the encoder
 * and pools each into out[b*dim ..]. */
static int forward(modattn_model *m, const arena *a, int64_t B, int64_t S, const int32_t *ids,
                   const int32_t *lens, float *const *outs) {
    const modattn__model_config *c = &m->cfg;
    const int64_t H = c->hidden, I = c->intermediate, T = B * S;
    const int64_t nh = c->heads, dh = H / nh;
    int st;
    uint64_t t0 = modattn_trace_begin();

    row_job j = {.name = "encoder.embeddings", .op = ROW_EMBED, .S = S, .lens = lens, .ids = ids, .y = a->x, .ld = H,
                 .width = H, .g = m->emb_g, .b = m->emb_b, .rows = T};
    if ((st = run_rows(m, &j, a->scratch))) return st;

    for (int l = 0; l < c->layers; l++) {
        const layer_w *L = &m->layers[l];
        /* qkv[T, 3H] = x . Wqkv^T + b */
        j = (row_job){.name = "encoder.qkv", .op = ROW_BIAS, .S = S, .lens = lens, .y = a->big, .ld = 3 * H,
                      .width = 3 * H, .bias = L->bqkv, .rows = T, .A = a->x, .lda = H, .K = H,
                      .W = L->wqkv, .beta = 0.0f, .plan = L->pqkv};
        if ((st = run_rows(m, &j, a->scratch))) return st;

        modattn_attn_call call;
        memset(&call, 0, sizeof call);
        const modattn_device cpu = m->info.device;
        /* q/k/v: [B, nh, S, dh] views of qkv[T, 3H] */
        for (int w = 0; w < 3; w++) {
            modattn_tensor *t = w == 0 ? &call.q : w == 1 ? &call.k : &call.v;
            t->data = a->big + w * H;
            t->device = cpu;
            t->dtype = MODATTN_DTYPE_F32;
            t->shape[0] = B, t->shape[1] = nh, t->shape[2] = S, t->shape[3] = dh;
            t->stride[0] = S * 3 * H, t->stride[1] = dh, t->stride[2] = 3 * H, t->stride[3] = 1;
            t->capacity = T * 3 * H - w * H;
        }
        /* o: [B, nh, S, dh] view of att[T, H] */
        call.o.data = a->att;
        call.o.device = cpu;
        call.o.dtype = MODATTN_DTYPE_F32;
        call.o.shape[0] = B, call.o.shape[1] = nh, call.o.shape[2] = S, call.o.shape[3] = dh;
        call.o.stride[0] = S * H, call.o.stride[1] = dh, call.o.stride[2] = H, call.o.stride[3] = 1;
        call.o.capacity = T * H;
        call.kv_lens = lens;
        call.scale = 0.0f; /* 1/sqrt(dh) */
        st = modattn_attention(m->ctx, &call);
        if (st) return modattn_error_prefix(st, "%s: layer %d attention", m->name, l);

        /* x = LN(x + att . Wo^T + bo) */
        j = (row_job){.name = "encoder.attn_out", .op = ROW_RES_LN, .S = S, .lens = lens, .y = a->x,
                      .ld = H, .width = H, .bias = L->bo, .g = L->ln1_g, .b = L->ln1_b, .rows = T, .A = a->att,
                      .lda = H, .K = H, .W = L->wo, .beta = 1.0f, .plan = L->po};
        if ((st = run_rows(m, &j, a->scratch))) return st;

        /* h = act(x . W1^T + b1); x = LN(x + h . W2^T + b2) */
        j = (row_job){.name = "encoder.ffn_up", .op = ROW_BIAS_ACT, .S = S, .lens = lens, .y = a->big, .ld = I, .width = I,
                      .bias = L->b1, .rows = T, .A = a->x, .lda = H, .K = H, .W = L->w1,
                      .beta = 0.0f, .plan = L->p1};
        if ((st = run_rows(m, &j, a->scratch))) return st;
        j = (row_job){.name = "encoder.ffn_down", .op = ROW_RES_LN, .S = S, .lens = lens, .y = a->x,
                      .ld = H, .width = H, .bias = L->b2, .g = L->ln2_g, .b = L->ln2_b, .rows = T, .A = a->big,
                      .lda = I, .K = I, .W = L->w2, .beta = 1.0f, .plan = L->p2};
        if ((st = run_rows(m, &j, a->scratch))) return st;
    }

    /* pooling, in sentence-transformers' order: cls, max, mean, mean_sqrt_len, weightedmean,
     * lasttoken; then the optional L2 normalisation */
    for (int64_t b = 0; b < B; b++) {
        const float *x = a->x + b * S * H;
        const int64_t n = lens[b];
        float *o = outs[b];
        float *p = o;
        if (c->pooling & MODATTN_POOL_CLS) {
            memcpy(p, x, (size_t)H * sizeof(float));
            p += H;
        }
        if (c->pooling & MODATTN_POOL_MAX) {
            memcpy(p, x, (size_t)H * sizeof(float));
            for (int64_t i = 1; i < n; i++)
                for (int64_t k = 0; k < H; k++)
                    if (x[i * H + k] > p[k]) p[k] = x[i * H + k];
            p += H;
        }
        if (c->pooling & (MODATTN_POOL_MEAN | MODATTN_POOL_MEAN_SQRT_LEN | MODATTN_POOL_WEIGHTED_MEAN)) {
            const bool mean = c->pooling & MODATTN_POOL_MEAN;
            const bool msl = c->pooling & MODATTN_POOL_MEAN_SQRT_LEN;
            const bool wm = c->pooling & MODATTN_POOL_WEIGHTED_MEAN;
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
        if (c->pooling & MODATTN_POOL_LAST) {
            memcpy(p, x + (n > 0 ? n - 1 : 0) * H, (size_t)H * sizeof(float));
            p += H;
        }
        if (c->normalize) {
            double ss = 0;
            for (size_t k = 0; k < c->dim; k++) ss += (double)o[k] * o[k];
            double norm = sqrt(ss);
            const float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
            for (size_t k = 0; k < c->dim; k++) o[k] *= inv;
        }
    }
    if (t0) {
        char shape[64];
        snprintf(shape, sizeof shape, "B=%lld S=%lld", (long long)B, (long long)S);
        const double fl = 2.0 * (double)T * (double)c->layers *
                          ((double)(4 * H * H) + 2.0 * (double)H * (double)I);
        modattn_trace_end(t0, "encoder.forward", modattn__gemm_name(), shape, 0, fl);
    }
    return 0;
}

int modattn__host_forward(modattn_model *m, float *base, char *scratch, int64_t B, int64_t S, const int32_t *ids,
                          const int32_t *lens, float *const *outs) {
    arena a;
    arena_bind(&m->cfg, base, B * S, &a);
    a.scratch = scratch;
    return forward(m, &a, B, S, ids, lens, outs);
}
