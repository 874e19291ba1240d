/* tests/model/test_sessions.c — one model, many threads: each thread embeds through its own
 * session (modattn_model_embed_with) at the same time as the others, and every vector equals the
 * one modattn_model_embed gives alone, bit for bit. Also: a session of another context is refused;
 * attention in concurrent sessions counts every call once (the context's guarded counters); a pool
 * called from several threads at once runs every job whole (callers take turns), and a call from
 * inside one of its own tasks runs serially instead of waiting for itself. Needs `make model`. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "test_util.h"

#define MODEL_DIR ".models/all-MiniLM-L6-v2"
#define NTEXTS 96
#define NTHREADS 4
#define ROUNDS 3

static char *texts[NTEXTS];

/* sentences of bench/corpus_sentences.txt, cut to varied lengths so batches differ per thread */
static int load_texts(void) {
    FILE *f = fopen("bench/corpus_sentences.txt", "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (n < NTEXTS && fgets(line, sizeof line, f)) {
        size_t L = strcspn(line, "\n");
        if (L == 0) continue;
        size_t cut = 8 + (size_t)(n * 37) % 400;
        if (cut < L) L = cut;
        line[L] = '\0';
        texts[n++] = strdup(line);
    }
    fclose(f);
    return n == NTEXTS ? 0 : -1;
}

typedef struct worker {
    modattn_model *model;
    modattn_session *session;
    int id;
    float *out; /* [ROUNDS][NTEXTS][dim] */
    size_t dim;
    int status;
    char msg[256];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int r = 0; r < ROUNDS && !w->status; r++) {
        /* each thread and round embeds every text in another order: i, i+step, ... (step prime to
         * NTEXTS), so batches are made of other neighbours each time */
        static const int steps[] = {1, 5, 7, 11};
        const int step = steps[(w->id + r) % 4];
        const char *sub[NTEXTS];
        int idx[NTEXTS], n = 0;
        for (int i = (w->id * 7 + r) % NTEXTS, k = 0; k < NTEXTS; k++, i = (i + step) % NTEXTS) {
            bool seen = false;
            for (int j = 0; j < n; j++) seen |= idx[j] == i;
            if (seen) continue;
            idx[n] = i;
            sub[n++] = texts[i];
        }
        float *tmp = malloc((size_t)n * w->dim * sizeof(float));
        w->status = modattn_model_embed_with(w->model, w->session, sub, NULL, (size_t)n, tmp, NULL);
        if (w->status) snprintf(w->msg, sizeof w->msg, "%s", modattn_last_error());
        else
            for (int j = 0; j < n; j++)
                memcpy(w->out + ((size_t)r * NTEXTS + (size_t)idx[j]) * w->dim, tmp + (size_t)j * w->dim,
                       w->dim * sizeof(float));
        free(tmp);
    }
    return NULL;
}

static void test_model_sessions(void) {
    modattn_ctx_options co = {.threads = 1};
    modattn_ctx *ctx = NULL, *other = NULL;
    CHECK(modattn_ctx_create(&co, &ctx) == 0);
    CHECK(modattn_ctx_create(&co, &other) == 0);
    modattn_model *m = NULL;
    int st = modattn_model_load(ctx, MODEL_DIR, &m);
    CHECK_MSG(st == 0, "%s", modattn_last_error());
    if (st) {
        modattn_ctx_free(ctx);
        modattn_ctx_free(other);
        return;
    }
    const size_t dim = modattn_model_dim(m);
    float *ref = malloc(NTEXTS * dim * sizeof(float));
    CHECK(modattn_model_embed(m, (const char *const *)texts, NULL, NTEXTS, ref, NULL) == 0);

    /* a session of another context */
    modattn_session *foreign = NULL;
    CHECK(modattn_session_create(other, NULL, &foreign) == 0);
    float one[384];
    const char *hello = "hello";
    CHECK_ERR(modattn_model_embed_with(m, foreign, &hello, NULL, 1, one, NULL), MODATTN_EINVAL, "another context");
    CHECK_ERR(modattn_model_embed_with(m, NULL, &hello, NULL, 1, one, NULL), MODATTN_EINVAL, "session is NULL");
    modattn_session_free(foreign);

    worker w[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].model = m;
        w[t].id = t;
        w[t].dim = dim;
        w[t].out = calloc((size_t)ROUNDS * NTEXTS * dim, sizeof(float));
        /* threads 0 and 1: sessions of 2 threads; 2 and 3: of 1 */
        modattn_session_options so = {.threads = t < 2 ? 2 : 1};
        CHECK(modattn_session_create(ctx, &so, &w[t].session) == 0);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_create(&th[t], NULL, work, &w[t]);
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    size_t differ = 0, missing = 0;
    for (int t = 0; t < NTHREADS; t++) {
        CHECK_MSG(w[t].status == 0, "thread %d: %s", t, w[t].msg);
        for (int r = 0; r < ROUNDS; r++)
            for (int i = 0; i < NTEXTS; i++) {
                const float *v = w[t].out + ((size_t)r * NTEXTS + (size_t)i) * dim;
                bool zero = true;
                for (size_t k = 0; k < dim && zero; k++) zero = v[k] == 0.0f;
                missing += zero;
                differ += memcmp(v, ref + (size_t)i * dim, dim * sizeof(float)) != 0;
            }
        modattn_session_free(w[t].session);
        free(w[t].out);
    }
    CHECK_MSG(differ == 0 && missing == 0, "%zu of %d vectors differ from the model's alone, %zu missing", differ,
              NTHREADS * ROUNDS * NTEXTS, missing);
    if (!differ && !missing)
        printf("sessions: %d threads x %d rounds x %d texts, all equal to modattn_model_embed bit for bit\n", NTHREADS,
           ROUNDS, NTEXTS);
    free(ref);
    modattn_model_free(m);
    modattn_ctx_free(ctx);
    modattn_ctx_free(other);
}

/* ---- attention in concurrent sessions: every call counted once */

typedef struct attn_worker {
    modattn_session *s;
    int calls;
    int status;
    float err;
} attn_worker;

enum { AB = 2, AH = 3, AS = 37, AD = 32 };

static void fill(float *x, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

static modattn_tensor tensor(float *p) { return modattn_tensor_contiguous(p, MODATTN_DTYPE_F32, AB, AH, AS, AD); }

static float q_[AB * AH * AS * AD], k_[AB * AH * AS * AD], v_[AB * AH * AS * AD], ref_o[AB * AH * AS * AD];

static void *attn_work(void *arg) {
    attn_worker *w = arg;
    float *o = malloc(sizeof ref_o);
    for (int i = 0; i < w->calls && !w->status; i++) {
        modattn_attn_call c;
        memset(&c, 0, sizeof c);
        c.q = tensor(q_), c.k = tensor(k_), c.v = tensor(v_), c.o = tensor(o);
        w->status = modattn_session_attention(w->s, &c);
        for (size_t j = 0; j < sizeof ref_o / sizeof *ref_o && !w->status; j++) {
            float e = o[j] - ref_o[j];
            if (e < 0) e = -e;
            if (e > w->err) w->err = e;
        }
    }
    free(o);
    return NULL;
}

static void test_attention_sessions(void) {
    fill(q_, sizeof q_ / sizeof *q_, 1), fill(k_, sizeof k_ / sizeof *k_, 2), fill(v_, sizeof v_ / sizeof *v_, 3);
    modattn_ctx_options co = {.threads = 1, .policy = "cpu_flash"};
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(&co, &ctx) == 0);
    if (!ctx) return;
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = tensor(q_), c.k = tensor(k_), c.v = tensor(v_), c.o = tensor(ref_o);
    int st = modattn_attention(ctx, &c);
    CHECK_MSG(st == 0, "%s", modattn_last_error());
    attn_worker w[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].calls = 50 + t;
        modattn_session_options so = {.threads = 1 + t % 2};
        CHECK(modattn_session_create(ctx, &so, &w[t].s) == 0);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_create(&th[t], NULL, attn_work, &w[t]);
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    int total = 1;
    float worst = 0;
    for (int t = 0; t < NTHREADS; t++) {
        CHECK_MSG(w[t].status == 0, "attention in session %d failed", t);
        total += w[t].calls;
        if (w[t].err > worst) worst = w[t].err;
        modattn_session_free(w[t].s);
    }
    /* the same implementation with 1 or 2 threads: each row is computed the same way */
    CHECK_MSG(worst == 0.0f, "max |o - o_alone| = %g", (double)worst);
    modattn_impl_stats s;
    long i = modattn_ctx_find(ctx, "cpu_flash");
    CHECK(i >= 0 && modattn__ctx_impl_stats(ctx, (size_t)i, &s) == 0);
    CHECK_MSG(s.calls == (uint64_t)total && s.failures == 0 && s.median_ms > 0, "calls %llu, want %d",
              (unsigned long long)s.calls, total);
    modattn_ctx_free(ctx);
}

/* ---- the pool: concurrent callers take turns; nested calls run serially */

typedef struct pool_job {
    modattn_pool *pool;
    _Atomic int64_t *cells; /* [n] */
    int64_t n;
    bool nested;
} pool_job;

static void nested_task(void *ctx, int64_t i, int thread) {
    (void)thread;
    pool_job *j = ctx;
    atomic_fetch_add(&j->cells[i], 1);
}

static void outer_task(void *ctx, int64_t i, int thread) {
    (void)thread;
    pool_job *j = ctx;
    atomic_fetch_add(&j->cells[i], 1);
    if (j->nested && i % 16 == 0) {
        pool_job inner = {j->pool, j->cells, j->n, false};
        modattn__pool_run(j->pool, j->n, nested_task, &inner); /* from inside: serial, no deadlock */
    }
}

typedef struct pool_caller {
    modattn_pool *pool;
    int64_t n;
    int rounds;
    bool ok;
} pool_caller;

static void *pool_call(void *arg) {
    pool_caller *c = arg;
    _Atomic int64_t *cells = calloc((size_t)c->n, sizeof *cells);
    c->ok = true;
    for (int r = 0; r < c->rounds; r++) {
        for (int64_t i = 0; i < c->n; i++) atomic_store(&cells[i], 0);
        pool_job j = {c->pool, cells, c->n, r % 2 == 1};
        modattn__pool_run(c->pool, c->n, outer_task, &j);
        const int64_t want_extra = j.nested ? (c->n + 15) / 16 : 0; /* nested runs add 1 to every cell each */
        for (int64_t i = 0; i < c->n; i++) c->ok &= atomic_load(&cells[i]) == 1 + want_extra;
    }
    free(cells);
    return NULL;
}

static void test_pool_callers(void) {
    modattn_pool *pool = NULL;
    CHECK(modattn__pool_create(3, &pool) == 0);
    pool_caller c[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        c[t] = (pool_caller){pool, 1000 + 17 * t, 200, false};
        pthread_create(&th[t], NULL, pool_call, &c[t]);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) CHECK_MSG(c[t].ok, "caller %d saw a job not run whole", t);
    modattn__pool_free(pool);
}

int main(void) {
    if (load_texts() != 0) {
        fprintf(stderr, "test_sessions: cannot read %d lines of bench/corpus_sentences.txt\n", NTEXTS);
        return 1;
    }
    test_pool_callers();
    test_attention_sessions();
    test_model_sessions();
    for (int i = 0; i < NTEXTS; i++) free(texts[i]);
    return test_finish("test_sessions");
}
