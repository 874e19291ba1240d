/* core/pool.c — a small fork-join thread pool: workers sleep on a condition variable, a job hands
 * out indices through one atomic counter, and the calling thread works too. Callers on several
 * threads take turns (run_mu); a call from inside one of the pool's own tasks runs serially on
 * that thread instead of waiting for itself.
 *
 * Between jobs a worker first spins for a while (MODATTN_POOL_SPIN_US, default 200 us) watching
 * for the next one before it sleeps, and the caller spins as long for the workers to finish before
 * it waits: an encoder's forward pass is a few hundred jobs of 10 us to 1 ms each, and a sleeping
 * worker takes 20-100 us to wake (a VM's futex), so without the spin a small job could end before
 * the worker woke up, and the caller did every task itself and then waited for it anyway
 * (measured on one short query: 4.6 ms with the GEMMs split by columns over 2 threads, against
 * 3.8 ms on one). A long gap (a server between requests) still ends in sleep. */
#define _GNU_SOURCE
#include "core/signals.h"
#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "core/env.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

typedef struct worker_arg worker_arg;

struct modattn_pool {
    int nthreads; /* including the caller */
    pthread_t *threads;
    worker_arg *args; /* [nthreads - 1] */
    pthread_mutex_t mu;
    pthread_mutex_t run_mu; /* one job at a time: concurrent callers take turns */
    pthread_cond_t wake, done;
    _Atomic uint64_t generation; /* written under mu; read without it while spinning */
    _Atomic int busy;            /* workers still on the current job (likewise) */
    _Atomic bool stop;
    int64_t spin_ns;             /* how long to spin before sleeping (0: never spin) */
    /* current job */
    modattn_task_fn fn;
    void *ctx;
    int64_t n;
    _Atomic int64_t next;
};

struct worker_arg {
    modattn_pool *pool;
    int id;
};

/* the pools whose task this thread is running (as a worker, or as the caller of a job), innermost
 * last: a call into any of them from inside runs serially (A's task -> B's run -> B's task -> A's run
 * must not wait for A's caller, which is waiting for this thread) */
#define POOL_NEST 8
static _Thread_local const modattn_pool *tl_pools[POOL_NEST];
static _Thread_local int tl_depth;

static bool inside(const modattn_pool *p) {
    for (int i = 0; i < tl_depth && i < POOL_NEST; i++)
        if (tl_pools[i] == p) return true;
    return false;
}

static void drain(modattn_pool *p, int id) {
    for (;;) {
        int64_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n) break;
        p->fn(p->ctx, i, id);
    }
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins up to spin_ns for *v to differ from old (a generation) or stop; true if it did. */
static bool spin_for_change(const modattn_pool *p, const _Atomic uint64_t *v, uint64_t old) {
    if (p->spin_ns <= 0) return false;
    const int64_t end = now_ns() + p->spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(v, memory_order_acquire) != old || atomic_load_explicit(&p->stop, memory_order_relaxed))
                return true;
            CPU_RELAX();
        }
        if (now_ns() > end) return false;
    }
}

static void *worker_main(void *arg) {
    modattn_pool *p = ((worker_arg *)arg)->pool;
    int id = ((worker_arg *)arg)->id; /* arg lives in the pool (freed with it): the bytes in use
                                       * do not change when a thread happens to start */
    uint64_t seen = 0;
    tl_pools[0] = p; /* a worker: its own pool, for good */
    tl_depth = 1;
    for (;;) {
        spin_for_change(p, &p->generation, seen);
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p, id);
        pthread_mutex_lock(&p->mu);
        if (atomic_fetch_sub(&p->busy, 1) == 1) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

int modattn__pool_create(int nthreads, modattn_pool **out) {
    *out = NULL;
    if (nthreads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = n > 0 ? (int)n : 1;
    }
    if (nthreads > 1024) return modattn__error(MODATTN_EINVAL, "thread count %d is over 1024", nthreads);
    modattn_pool *p = modattn__calloc(1, sizeof *p, MODATTN_MEM_OTHER);
    if (!p) return modattn__mem_last_status();
    p->nthreads = nthreads;
    p->spin_ns = (int64_t)modattn__env_int("MODATTN_POOL_SPIN_US", 200) * 1000;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->run_mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (nthreads > 1) {
        p->threads = modattn__calloc((size_t)nthreads - 1, sizeof(pthread_t), MODATTN_MEM_OTHER);
        p->args = modattn__calloc((size_t)nthreads - 1, sizeof(worker_arg), MODATTN_MEM_OTHER);
        if (!p->threads || !p->args) {
            p->nthreads = 1; /* no worker started: nothing to join */
            goto fail;
        }
        /* the workers are born with asynchronous signals blocked, for good: a process-directed
         * signal goes to one of the program's own threads, never into a kernel running here
         * (core/signals.h says why that matters); the creator's mask is put back */
        sigset_t old_mask;
        modattn__signals_hold(&old_mask);
        for (int t = 1; t < nthreads; t++) {
            worker_arg *a = &p->args[t - 1];
            a->pool = p;
            a->id = t;
            if (pthread_create(&p->threads[t - 1], NULL, worker_main, a) != 0) {
                modattn__signals_release(&old_mask);
                p->nthreads = t;
                modattn__error(MODATTN_ERUNTIME, "could not start thread %d of %d", t, nthreads);
                modattn__pool_free(p);
                return MODATTN_ERUNTIME;
            }
        }
        modattn__signals_release(&old_mask);
    }
    *out = p;
    return 0;
fail: {
    int st = modattn__mem_last_status();
    modattn__pool_free(p);
    return st;
}
}

void modattn__pool_free(modattn_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->nthreads; t++) pthread_join(p->threads[t - 1], NULL);
    modattn_free(p->threads);
    modattn_free(p->args);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    modattn_free(p);
}

int modattn__pool_threads(const modattn_pool *p) { return p ? p->nthreads : 1; }

void modattn__pool_run(modattn_pool *p, int64_t n, modattn_task_fn fn, void *ctx) {
    if (n <= 0) return;
    if (!p || p->nthreads == 1 || n == 1 || inside(p) || tl_depth >= POOL_NEST) {
        for (int64_t i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->run_mu);
    tl_pools[tl_depth++] = p;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->busy = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    if (p->spin_ns > 0 && atomic_load_explicit(&p->busy, memory_order_acquire) > 0) {
        const int64_t end = now_ns() + p->spin_ns;
        for (int i = 1; atomic_load_explicit(&p->busy, memory_order_acquire) > 0; i++) {
            CPU_RELAX();
            if (i % 64 == 0 && now_ns() > end) break;
        }
    }
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    tl_depth--;
    pthread_mutex_unlock(&p->run_mu);
}
