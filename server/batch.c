/* server/batch.c — dynamic batching. Every request's inputs (already tokenized) join one queue
 * of jobs; an executor takes, oldest job first, as many inputs as fit in --max-batch-tokens
 * (always at least one) across however many requests that spans, embeds them in one call in its
 * own session (the model sorts them by length and pads each inner batch only to its longest, as
 * TEI's token-budget batching does), and writes each vector back to its request's slot. A job is
 * done when its last input is: its callback runs on that executor (for a search, after the scan,
 * which runs there too, on the executor's own store connection).
 *
 * A job whose client has gone away (job->gone) is dropped when an executor comes to it, before
 * its first batch or between two of its batches, and one that waited past --max-queue-time for
 * its first batch fails with 503: neither runs for nobody.
 *
 * A text's vector does not depend on what it is batched with (bit for bit: modattn/model.h), so
 * the server's vectors equal `modattn embed`'s. Never blocks a caller: submit only appends. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modattn/backend/device.h"
#include "modattn/rerank.h"
#include "modattn/sparse.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "pipeline/pipeline_internal.h"
#include "server/server.h"

typedef struct executor {
    srv_batcher *b;
    int id;
    pthread_t thread;
    bool started;
    modattn_session *session; /* its own: one CPU slot's threads */
    modattn_session *cur;     /* the session of the batch it runs now (its own, or the wide one) */
    /* search: the store, opened on first use and kept, and the library's searcher on it (its
     * vectors opened again when the store's generation moves; the ANN index in the batcher's
     * share: pipeline/search.c holds the rule for when either is read again) */
    modattn_store *store;
    struct stat store_st; /* the file as opened: another file, size or time opens it again */
    modattn_searcher *searcher;
} executor;

struct srv_batcher {
    size_t rerank_labels; /* the reranker's scores per pair (0: none) */
    srv_batcher_config cfg;
    size_t dim;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job *head, *tail; /* jobs with inputs no executor has taken yet */
    bool stopping;
    bool closed; /* after srv_batcher_stop: a job submitted fails at once (503) */
    executor *ex;
    int nex;
    /* CPU slots (one per executor): an executor runs a batch on its own slot, or, elastic
     * (--workers auto), on all of them through the wide session when it finds every other
     * executor idle and too little queued to share out. Never more threads busy than CPUs given. */
    bool elastic;
    int slots_total, slots_free;
    modattn_session *wide; /* elastic: a session of all the threads (NULL with one thread) */
    size_t queued_tokens;  /* tokens of the inputs no executor has taken */
    char max_queue_text[48]; /* "30 s (--max-queue-time)", for the 503 */
    /* the store's ANN index, one for every executor's searcher (its memory is the store's
     * size): read on the first search of each generation of the store, searched by one executor
     * at a time (modattn_searcher_share) */
    modattn_searcher_share *share;
};

/* one input of a batch: which job, which of its inputs */
typedef struct slot {
    srv_job *job;
    size_t i;
} slot;

static void set_error(srv_job *job, int http, const char *fmt, const char *detail) {
    if (job->http_status) return; /* the first failure tells */
    job->http_status = http;
    snprintf(job->message, sizeof job->message, fmt, detail);
}

static void search_in_snapshot(executor *x, srv_job *job);
static void rerank_results(executor *x, srv_job *job);

/* The search of a job whose query is embedded (job->out): on this executor's store. */
static void run_search(executor *x, srv_job *job) {
    srv_batcher *b = x->b;
    if (!b->cfg.db) {
        set_error(job, 503, "%s", "this server has no store: start it with --db FILE (made by `modattn index`)");
        return;
    }
    int st;
    struct stat sb;
    if (stat(b->cfg.db, &sb) != 0) {
        char msg[400];
        if (errno == ENOENT)
            snprintf(msg, sizeof msg, "no store at %.300s yet: run `modattn index --db %.300s PATH...`", b->cfg.db,
                     b->cfg.db);
        else
            snprintf(msg, sizeof msg, "the store %.300s cannot be read: %s", b->cfg.db, strerror(errno));
        set_error(job, 503, "%s", msg);
        return;
    }
    /* another file in its place (a new store), or one opened without locks that has changed: open
     * it again (a store read from a folder this user cannot write to is opened as immutable) */
    if (x->store && (sb.st_ino != x->store_st.st_ino || sb.st_dev != x->store_st.st_dev ||
                     (modattn_store_note(x->store) && (sb.st_size != x->store_st.st_size ||
                                                      sb.st_mtim.tv_sec != x->store_st.st_mtim.tv_sec ||
                                                      sb.st_mtim.tv_nsec != x->store_st.st_mtim.tv_nsec)))) {
        modattn_searcher_free(x->searcher);
        x->searcher = NULL;
        modattn_store_close(x->store);
        x->store = NULL;
    }
    if (!x->store) {
        if ((st = modattn_store_open(b->cfg.db, MODATTN_STORE_READONLY, &x->store))) {
            set_error(job, 503, "the store cannot be read: %s", modattn_last_error());
            return;
        }
        x->store_st = sb;
        if ((st = modattn__searcher_create_shared(x->store, b->cfg.model, b->share, &x->searcher))) {
            set_error(job, 503, "search: %s", modattn_last_error());
            modattn_store_close(x->store);
            x->store = NULL;
            return;
        }
    }
    /* one snapshot for the check, the vectors, the chunk ids and the chunks: a document that an
     * `index` run replaces meanwhile is seen whole, before or after */
    if ((st = modattn__store_read_begin(x->store))) {
        set_error(job, 503, "the store cannot be read: %s", modattn_last_error());
        return;
    }
    search_in_snapshot(x, job);
    modattn__store_read_end(x->store);
    if (job->rerank && !job->http_status) rerank_results(x, job);
}

/* Ties of the cross-encoder's score keep the first stage's order. */
typedef struct scored {
    size_t index;
    float score;
} scored;
static int by_score(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* "rerank": the first rerank_top results re-scored by the cross-encoder (query and chunk read
 * together) on this executor's slot, re-ordered by its score (ties: first-stage order), rank and
 * score replaced, the first stage's kept in first_rank / first_score; as `modattn search --rerank`. */
static void rerank_results(executor *x, srv_job *job) {
    srv_batcher *b = x->b;
    const size_t n = job->nresults < job->rerank_top ? job->nresults : job->rerank_top;
    if (!b->cfg.reranker || n == 0) return;
    const char **q = malloc(n * sizeof *q), **p = malloc(n * sizeof *p);
    float *sc = malloc(n * sizeof *sc);
    scored *order = malloc(n * sizeof *order);
    modattn_search_result *tmp = malloc(n * sizeof *tmp);
    job->first_rank = malloc(n * sizeof *job->first_rank);
    job->first_score = malloc(n * sizeof *job->first_score);
    if (!q || !p || !sc || !order || !tmp || !job->first_rank || !job->first_score) {
        set_error(job, 503, "%s", "reranking: the server is out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        q[i] = job->query ? job->query : "";
        p[i] = job->results[i].chunk.text ? job->results[i].chunk.text : "";
    }
    int st = modattn_reranker_score(b->cfg.reranker, x->cur, q, NULL, p, NULL, n, 0, sc, NULL, NULL);
    if (st) {
        set_error(job, st == MODATTN_ENOMEM || st == MODATTN_EBUDGET ? 503 : 500, "reranking: %s", modattn_last_error());
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(sc[i])) { /* JSON has no NaN */
            set_error(job, 500, "%s", "reranking: the cross-encoder gave a value that is not a finite number");
            goto out;
        }
        order[i] = (scored){i, sc[i]};
    }
    qsort(order, n, sizeof *order, by_score);
    for (size_t i = 0; i < n; i++) tmp[i] = job->results[order[i].index];
    for (size_t i = 0; i < n; i++) {
        job->first_rank[i] = tmp[i].rank;
        job->first_score[i] = tmp[i].score;
        job->results[i] = tmp[i];
        job->results[i].rank = (int)i + 1;
        job->results[i].score = order[i].score;
    }
    job->nreranked = n;
out:
    free(q), free(p), free(sc), free(order), free(tmp);
}

static void search_in_snapshot(executor *x, srv_job *job) {
    srv_batcher *b = x->b;
    int st;
    /* the query's prompt (resolved when the request was read) and the store's dimensions */
    modattn_embed_options asked = {.prompt = job->prompt ? job->prompt : ""}, eo;
    modattn_store_model sm;
    if ((st = modattn_store_embed_options(x->store, b->cfg.model, &asked, true, &eo, &sm)) ||
        (st = modattn_store_check_model(x->store, &sm))) {
        /* a prompt the request named that the store was not indexed for: 409, a conflict with the
         * store (the request itself is well-formed) */
        set_error(job, st == MODATTN_EVERSION && job->prompt_given ? 409 : 503, "%s",
                  st == MODATTN_ENOTFOUND ? "the store is empty: nothing has been indexed yet" : modattn_last_error());
        return;
    }
    if (sm.dim < modattn_model_dim(b->cfg.model)) modattn_model_cut_dims(b->cfg.model, job->out, 1, sm.dim);
    uint64_t gen = 0; /* (read here too so that a store that cannot be read says so, 503) */
    if ((st = modattn_store_generation(x->store, &gen))) {
        set_error(job, 503, "the store cannot be read: %s", modattn_last_error());
        return;
    }
    /* new documents: visible without a restart (the searcher opens the vectors again when the
     * generation has moved) */
    const modattn_store_vectors *vec = NULL;
    if ((st = modattn__searcher_vectors(x->searcher, &vec))) {
        set_error(job, st == MODATTN_ENOMEM || st == MODATTN_EBUDGET ? 503 : 500, "reading the store's vectors: %s",
                  modattn_last_error());
        return;
    }
    job->vectors_mapped = vec->map != NULL;
    modattn_search_params sp = {.mode = (modattn_search_mode)job->mode, .k = job->k, .path_prefix = job->path_prefix,
                                .keyword_weight = job->keyword_weight, .rrf_k = job->rrf_k,
                                .sparse_weight = job->sparse_weight};
    /* the sparse ranking: the server's --sparse-model, in this executor's session (sparse mode, or
     * hybrid on a store with sparse vectors) */
    /* (mode sparse without --sparse-model was refused with the request: 422 no_sparse_model) */
    if (b->cfg.sparse && (sp.mode == MODATTN_SEARCH_SPARSE || modattn__store_has_sparse(x->store))) {
        sp.sparse = b->cfg.sparse;
        sp.sparse_session = x->cur;
    }
    /* through the ANN index when the store has a current one (a server searches often: its reading
     * is paid once per generation), over the mapped vector file only; a path prefix and keywords
     * alone never need it (not even read for them) */
    if (!vec->map || sp.path_prefix) sp.index = MODATTN_SEARCH_INDEX_EXACT;
    const char *qt = job->query ? job->query : "";
    const size_t ql = job->query ? job->query_len : 0;
    const modattn_exec *exec = modattn__session_exec(x->cur);
    modattn_search_info where;
    st = modattn__searcher_search_vector(x->searcher, job->out, qt, ql, &sp, exec, &job->results, &job->nresults, &where,
                                        NULL);
    /* the snippets weighed by meaning (the model's static proxy: no forward pass; the same code as
     * the CLI's and Python's search: pipeline/snippet.c) */
    if (!st && sp.mode != MODATTN_SEARCH_KEYWORD)
        st = modattn__search_snippets(b->cfg.model, qt, ql, job->results, job->nresults);
    modattn_ann_kind kind = MODATTN_ANN_NONE;
    if (!st && strcmp(where.index, "exact") != 0 && modattn_ann_kind_parse(where.index, &kind) == 0)
        job->ann_kind = kind;
    if (st == MODATTN_EVERSION) { /* another sparse model than the store's */
        set_error(job, 409, "%s", modattn_last_error());
        return;
    }
    if (st == MODATTN_EUNSUPPORTED) { /* keyword or sparse mode on a store without its index */
        set_error(job, 400, "%s", modattn_last_error());
        return;
    }
    if (st) set_error(job, st == MODATTN_ENOMEM || st == MODATTN_EBUDGET ? 503 : 500, "search: %s", modattn_last_error());
}

/* Tokens of a job's inputs that no executor has taken. */
static size_t untaken_tokens(const srv_job *j) {
    size_t t = 0;
    for (size_t i = j->next; i < j->n; i++) t += j->counts[i];
    return t;
}

/* Removes a queued job (under the lock; prev: the job before it, NULL for the head) with its
 * untaken inputs: it fails as it is (its done runs once the inputs other executors hold are
 * finished; true: none are, the caller runs done). */
static bool drop_job(srv_batcher *b, srv_job *j, srv_job *prev) {
    if (prev) prev->qnext = j->qnext;
    else b->head = j->qnext;
    if (b->tail == j) b->tail = prev;
    const size_t left = j->n - j->next;
    b->queued_tokens -= untaken_tokens(j);
    j->next = j->n;
    j->pending -= left;
    srv_metrics_queue(-(int64_t)left);
    return j->pending == 0;
}

static bool drop_head(srv_batcher *b, srv_job *j) { return drop_job(b, j, NULL); }

static void list_dropped(srv_batcher *b, srv_job *j, srv_job *prev, srv_job **dropped) {
    if (drop_job(b, j, prev)) {
        j->qnext = *dropped;
        *dropped = j;
    }
}

/* Jobs no executor has started that waited past --max-queue-time: 503 (expired), wherever they
 * are in the queue. Jobs queue in arrival order, so after the started ones at the head, the first
 * that has not waited too long ends the scan. */
static void expire_queued(srv_batcher *b, uint64_t now, srv_job **dropped) {
    if (b->cfg.max_queue_s <= 0) return;
    srv_job *prev = NULL, *j = b->head;
    while (j) {
        srv_job *next = j->qnext;
        if (j->next > 0) { /* started */
            prev = j;
            j = next;
            continue;
        }
        if ((double)(now - j->t_queued) * 1e-9 <= b->cfg.max_queue_s) break;
        j->expired = true;
        set_error(j, 503, "the server is too busy: this request waited longer than %s for an executor; retry later",
                  b->max_queue_text);
        srv_metrics_dropped(false);
        list_dropped(b, j, prev, dropped);
        j = next;
    }
}

/* Takes the next batch under the lock: oldest jobs first, inputs until the token budget. A job
 * whose client has gone (asked before its first batch and between its batches) is dropped on the
 * way, as are jobs that waited too long (expire_queued); those whose done is the caller's to run
 * are listed in *dropped (linked by qnext). */
static size_t take(srv_batcher *b, slot *slots, size_t cap, size_t budget, size_t *tokens, srv_job **dropped) {
    size_t n = 0, tok = 0;
    expire_queued(b, modattn__now_ns(), dropped);
    while (b->head && n < cap) {
        srv_job *j = b->head;
        /* pairs for the reranker, texts for the SPLADE model and texts for the embedding model
         * never share a batch */
        if (n > 0 && ((j->kind == SRV_JOB_RERANK) != (slots[0].job->kind == SRV_JOB_RERANK) ||
                      (j->kind == SRV_JOB_SPARSE) != (slots[0].job->kind == SRV_JOB_SPARSE) ||
                      (j->kind == SRV_JOB_RERANK && j->rerank_flags != slots[0].job->rerank_flags)))
            break;
        if (j->gone && j->gone(j, j->done_ud)) {
            j->abandoned = true;
            set_error(j, 499, "%s", "the client closed its connection");
            srv_metrics_dropped(true);
            list_dropped(b, j, NULL, dropped);
            continue;
        }
        while (j->next < j->n && n < cap) {
            size_t c = j->counts[j->next];
            if (n > 0 && tok + c > budget) goto full;
            slots[n++] = (slot){j, j->next++};
            tok += c;
        }
        if (j->next < j->n) break; /* cap reached: the rest stays queued */
        b->head = j->qnext; /* every input taken */
        if (!b->head) b->tail = NULL;
    }
full:
    b->queued_tokens -= tok;
    *tokens = tok;
    return n;
}

/* Runs done for the dropped jobs (outside the lock). */
static void finish_dropped(srv_job *j) {
    while (j) {
        srv_job *next = j->qnext;
        j->done(j, j->done_ud);
        j = next;
    }
}

static void *executor_main(void *arg) {
    executor *x = arg;
    srv_batcher *b = x->b;
    const size_t dim = b->dim;
    /* at most one input per 2 tokens ([CLS] [SEP]) fits a budget: the slots and buffers for that */
    const size_t cap = b->cfg.max_batch_tokens / 2 + 1;
    slot *slots = NULL;
    const int32_t **ids = NULL;
    size_t *counts = NULL;
    float *out = NULL;
    size_t out_cap = 0;
    for (;;) {
        if (!slots) slots = malloc(cap * sizeof *slots); /* (again after a failure) */
        if (!ids) ids = malloc(cap * sizeof *ids);
        if (!counts) counts = malloc(cap * sizeof *counts);
        pthread_mutex_lock(&b->mu);
        /* work and a free CPU slot; or, stopping, an empty queue */
        while (!(b->head && b->slots_free > 0) && !(b->stopping && !b->head)) pthread_cond_wait(&b->cv, &b->mu);
        if (!b->head) { /* stopping, and nothing left */
            pthread_mutex_unlock(&b->mu);
            break;
        }
        /* Alone with a small queue: all the threads on one batch (a lone request's latency).
         * Else the queue shared out among the idle executors, each on its own slot: batches side
         * by side with no hand-offs between threads are 10-13% more tokens a second than one
         * batch on every thread (bench/results/server.md), and a share smaller than the queue
         * lets the other idle executors start at once. */
        const int idle = b->slots_free;
        const bool wide = b->wide && idle == b->slots_total && b->queued_tokens < (size_t)idle * SRV_SPLIT_MIN_TOKENS;
        size_t budget = b->cfg.max_batch_tokens;
        if (b->elastic && !wide) {
            size_t share = (b->queued_tokens + (size_t)idle - 1) / (size_t)idle;
            if (share < SRV_SPLIT_MIN_TOKENS) share = SRV_SPLIT_MIN_TOKENS;
            if (share < budget) budget = share;
        }
        size_t tokens = 0;
        srv_job *dropped = NULL;
        const bool have_arrays = slots && ids && counts;
        size_t n = have_arrays ? take(b, slots, cap, budget, &tokens, &dropped) : 0;
        if (n == 0 && (have_arrays || !b->head)) { /* every queued job was dropped */
            pthread_mutex_unlock(&b->mu);
            finish_dropped(dropped);
            continue;
        }
        if (n == 0) { /* no memory for the executor's own arrays: fail the oldest job whole */
            srv_job *j = b->head;
            set_error(j, 503, "%s", "the server is out of memory");
            bool last = drop_head(b, j);
            pthread_mutex_unlock(&b->mu);
            if (last) j->done(j, j->done_ud);
            continue;
        }
        const int used = wide ? b->slots_total : 1;
        b->slots_free -= used;
        x->cur = wide ? b->wide : x->session;
        if (b->head && b->slots_free > 0) pthread_cond_broadcast(&b->cv); /* the rest: another executor's */
        pthread_mutex_unlock(&b->mu);
        srv_metrics_queue(-(int64_t)n);
        finish_dropped(dropped);
        const int nthreads = modattn__pool_threads(modattn__session_pool(x->cur));
        srv_metrics_executors(nthreads, wide);
        int st = 0;
        const bool rerank = slots[0].job->kind == SRV_JOB_RERANK, sparse = slots[0].job->kind == SRV_JOB_SPARSE;
        const size_t odim = rerank ? b->rerank_labels : dim;
        if (n > out_cap) {
            float *no = realloc(out, n * (dim > b->rerank_labels ? dim : b->rerank_labels) * sizeof *no);
            if (no) out = no, out_cap = n;
            else st = MODATTN_ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            ids[i] = slots[i].job->ids[slots[i].i];
            counts[i] = slots[i].job->counts[slots[i].i];
        }
        uint64_t t0 = modattn__now_ns();
        modattn_sparse_vec *vecs = NULL;
        if (!st && sparse) {
            vecs = calloc(n, sizeof *vecs);
            if (!vecs) st = MODATTN_ENOMEM;
            else st = modattn_sparse_encode_ids(b->cfg.sparse, x->cur, ids, counts, n, NULL, vecs);
        } else if (!st && rerank) {
            const int32_t **types = malloc(n * sizeof *types);
            if (!types) st = MODATTN_ENOMEM;
            for (size_t i = 0; types && i < n; i++) types[i] = slots[i].job->types[slots[i].i];
            if (!st) st = modattn_reranker_score_ids(b->cfg.reranker, x->cur, ids, types, counts, n,
                                                     slots[0].job->rerank_flags, out);
            free(types);
        } else if (!st) {
            st = modattn_model_embed_ids_with(b->cfg.model, x->cur, ids, counts, n, out);
        }
        double secs = (double)(modattn__now_ns() - t0) * 1e-9;
        if (st == 0) {
            srv_metrics_batch(n, tokens, secs);
            for (size_t i = 0; i < n; i++) {
                if (sparse) { /* handed over: the job's creator frees it */
                    slots[i].job->sparse_out[slots[i].i] = vecs[i];
                    continue;
                }
                memcpy(slots[i].job->out + slots[i].i * odim, out + i * odim, odim * sizeof(float));
            }
        } else {
            /* the memory budget or a device failure: these requests fail, the server goes on */
            const char *msg = st == MODATTN_ENOMEM && !modattn_last_error()[0] ? "out of memory" : modattn_last_error();
            pthread_mutex_lock(&b->mu); /* another executor may hold inputs of the same job */
            for (size_t i = 0; i < n; i++)
                set_error(slots[i].job, st == MODATTN_ENOMEM || st == MODATTN_EBUDGET ? 503 : 500,
                          "embedding failed: %s", msg);
            pthread_mutex_unlock(&b->mu);
        }
        free(vecs); /* (its vectors handed over, or none: a failed call leaves them empty) */
        /* count down each job once per input; the executor that finishes a job completes it */
        for (size_t i = 0; i < n; i++) {
            srv_job *j = slots[i].job;
            pthread_mutex_lock(&b->mu);
            bool last = --j->pending == 0;
            pthread_mutex_unlock(&b->mu);
            if (!last) continue;
            if (j->kind == SRV_JOB_SEARCH && !j->http_status) run_search(x, j);
            j->done(j, j->done_ud);
        }
        /* the slots back (after the searches, which ran on them) */
        pthread_mutex_lock(&b->mu);
        b->slots_free += used;
        x->cur = NULL;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        srv_metrics_executors(-nthreads, false);
    }
    free(out);
    free(counts);
    free(ids);
    free(slots);
    return NULL;
}

void srv_batcher_submit(srv_batcher *b, srv_job *job) {
    job->next = 0;
    job->pending = job->n;
    job->qnext = NULL;
    job->http_status = 0;
    job->message[0] = '\0';
    job->abandoned = job->expired = false;
    job->t_queued = modattn__now_ns();
    if (job->n == 0) { /* nothing to embed */
        job->done(job, job->done_ud);
        return;
    }
    pthread_mutex_lock(&b->mu);
    if (b->closed) { /* shutting down: the executors are gone or going */
        pthread_mutex_unlock(&b->mu);
        set_error(job, 503, "%s", "the server is shutting down");
        job->done(job, job->done_ud);
        return;
    }
    srv_metrics_queue((int64_t)job->n);
    if (b->tail) b->tail->qnext = job;
    else b->head = job;
    b->tail = job;
    b->queued_tokens += untaken_tokens(job);
    pthread_cond_broadcast(&b->cv); /* (an executor without a free slot waits on) */
    pthread_mutex_unlock(&b->mu);
}

void srv_batcher_cancel(srv_batcher *b, const char *message) {
    if (!b) return;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        srv_job *j = b->head;
        if (!j) {
            pthread_mutex_unlock(&b->mu);
            return;
        }
        set_error(j, 503, "%s", message);
        bool last = drop_head(b, j);
        pthread_mutex_unlock(&b->mu);
        if (last) j->done(j, j->done_ud); /* else the executor holding its other inputs finishes it */
    }
}

void srv_batcher_stop(srv_batcher *b) {
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    b->stopping = true;
    b->closed = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    for (int i = 0; i < b->nex; i++) {
        executor *x = &b->ex[i];
        if (x->started) pthread_join(x->thread, NULL);
        x->started = false;
    }
}

void srv_batcher_free(srv_batcher *b) {
    if (!b) return;
    srv_batcher_stop(b);
    for (int i = 0; i < b->nex; i++) {
        executor *x = &b->ex[i];
        modattn_searcher_free(x->searcher);
        modattn_store_close(x->store);
        modattn_session_free(x->session);
    }
    modattn_session_free(b->wide);
    free(b->ex);
    modattn__searcher_share_free(b->share);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
}

int srv_batcher_start(const srv_batcher_config *cfg, srv_batcher **out) {
    *out = NULL;
    srv_batcher *b = calloc(1, sizeof *b);
    if (!b) return modattn__error(MODATTN_ENOMEM, "starting the executors: out of memory");
    b->cfg = *cfg;
    snprintf(b->max_queue_text, sizeof b->max_queue_text, "%g s (--max-queue-time)", cfg->max_queue_s);
    b->dim = modattn_model_dim(cfg->model);
    b->rerank_labels = cfg->reranker ? modattn_reranker_get_info(cfg->reranker)->num_labels : 0;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    /* the model threads, shared out: --threads 4 --workers 2 gives each executor 2; --workers
     * auto (0) one executor per thread, and the wide session of them all */
    int total = cfg->threads;
    if (total <= 0) total = modattn_ctx_threads(cfg->ctx);
    if (total <= 0) total = 1;
    /* a model on a device with its own memory runs one batch at a time (model.c serialises them):
     * there auto is one executor with every thread, filling whole batches */
    modattn_device_info dinfo;
    memset(&dinfo, 0, sizeof dinfo);
    const modattn_device_iface *dev = modattn_device_find(modattn_model_get_info(cfg->model)->device);
    if (dev) modattn_device_info_get(dev, &dinfo);
    const bool host = !dev || dinfo.host_memory;
    b->elastic = cfg->workers <= 0 && host;
    const int nex = b->elastic ? total : cfg->workers > 0 ? cfg->workers : 1;
    b->ex = calloc((size_t)nex, sizeof *b->ex);
    if (!b->ex || modattn__searcher_share_create(&b->share) != 0) {
        srv_batcher_free(b);
        return modattn__error(MODATTN_ENOMEM, "starting the executors: out of memory");
    }
    b->nex = nex;
    b->slots_total = b->slots_free = nex;
    /* Each executor's batch may hold --max-batch-tokens, so under load the activations in flight
     * are up to one such batch per thread. Capping the shares at --max-batch-tokens / threads, so
     * that all of them together hold about one batch, cost 6-8% of the throughput at 32 inputs x
     * 64 clients on 2 CPUs (8192 -> 4096 tokens a batch: 303-319 against 320-344 requests in 40 s,
     * three runs each, alternating); a machine short of memory lowers --max-batch-tokens or sets
     * --mem-budget (a batch that would pass it fails with 503, the server goes on). */
    if (b->elastic && total > 1) {
        modattn_session_options so = {.threads = total};
        int st = modattn_session_create(cfg->ctx, &so, &b->wide);
        if (st) {
            srv_batcher_free(b);
            return st;
        }
    }
    for (int i = 0; i < b->nex; i++) {
        executor *x = &b->ex[i];
        x->b = b;
        x->id = i;
        int mine = total / b->nex + (i < total % b->nex ? 1 : 0);
        modattn_session_options so = {.threads = mine > 0 ? mine : 1};
        int st = modattn_session_create(cfg->ctx, &so, &x->session);
        if (st) {
            srv_batcher_free(b);
            return st;
        }
        if (pthread_create(&x->thread, NULL, executor_main, x) != 0) {
            srv_batcher_free(b);
            return modattn__error(MODATTN_ERUNTIME, "could not start executor %d", i);
        }
        x->started = true;
    }
    *out = b;
    return 0;
}

void srv_batcher_describe(const srv_batcher *b, char *buf, size_t len) {
    if (b->elastic && b->wide)
        snprintf(buf, len, "%d executors of 1 thread, elastic (one alone with a short queue runs on all %d)", b->nex,
                 b->slots_total);
    else
        snprintf(buf, len, "%d executor%s", b->nex, b->nex == 1 ? "" : "s");
}
