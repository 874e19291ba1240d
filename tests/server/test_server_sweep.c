/* tests/server/test_server_sweep.c — the allocation-failure sweep over one request's path through
 * the server: the body parsed and tokenized (api.c), the job batched and embedded on an executor
 * (batch.c), the response written, for an embeddings request and a search. With the Nth
 * allocation failing, for every N until the request goes through: the request fails as the
 * server would answer it (503 with a message, never 400 or 500 blaming something else), nothing
 * leaks, and once it goes through its vectors equal the model's alone bit for bit. Needs
 * `make model`. */
#include <pthread.h>
#include <string.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "server/server.h"
#include "sweep.h"
#include "test_util.h"

#define MODEL_DIR ".models/all-MiniLM-L6-v2"

static const char *k_texts[] = {"the first text of the request", "a second, longer text about rivers and valleys",
                                "naïve café — 東京"};

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} waiter;

static void on_done(srv_job *job, void *ud) {
    (void)job;
    waiter *w = ud;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

typedef struct fixture {
    srv_api api;
    srv_batcher *b;
    float ref[3 * 384];
    const char *db;
    int runs_ok;
} fixture;

/* An HTTP outcome as the sweep's status: 503 is out of memory (the message must say so). */
static int as_status(int http, const char *msg, const char *where) {
    if (http == 0) return 0;
    if (http == 503) return modattn__error(MODATTN_ENOMEM, "%s: 503 %s", where, msg);
    return modattn__error(MODATTN_EINTERNAL, "%s: %d %s (expected 503 for a failed allocation)", where, http, msg);
}

static int run_job(fixture *f, srv_job *job) {
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    job->done = on_done;
    job->done_ud = &w;
    srv_batcher_submit(f->b, job);
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    return 0;
}

static int one_embeddings_request(void *arg) {
    fixture *f = arg;
    const char *body = "{\"input\": [\"the first text of the request\", \"a second, longer text about rivers and "
                       "valleys\", \"naïve café — 東京\"], \"model\": \"all-MiniLM-L6-v2\"}";
    srv_embed_req er;
    srv_bad bad;
    memset(&bad, 0, sizeof bad);
    if (srv_parse_embeddings(&f->api, body, strlen(body), &er, &bad)) return as_status(bad.status, bad.message, "parse");
    float *out = modattn__malloc(er.n * f->api.dim * sizeof(float), MODATTN_MEM_OTHER);
    if (!out) {
        srv_embed_req_free(&er);
        return modattn__mem_last_status();
    }
    srv_job job;
    memset(&job, 0, sizeof job);
    job.kind = SRV_JOB_EMBED;
    job.n = er.n;
    job.ids = er.ids;
    job.counts = er.counts;
    job.out = out;
    run_job(f, &job);
    int st = as_status(job.http_status, job.message, "embed");
    if (!st) {
        if (memcmp(out, f->ref, sizeof f->ref) != 0) st = modattn__error(MODATTN_EINTERNAL, "vectors differ from the model's");
        char *resp = srv_embeddings_body(&f->api, &er, out);
        if (!resp) st = modattn__error(MODATTN_ENOMEM, "writing the response: out of memory (503)");
        else if (!strstr(resp, "\"prompt_tokens\"")) st = modattn__error(MODATTN_EINTERNAL, "a response without usage");
        free(resp);
        if (!st) f->runs_ok++;
    }
    modattn_free(out);
    srv_embed_req_free(&er);
    return st;
}

static int one_search_request(void *arg) {
    fixture *f = arg;
    const char *body = "{\"query\": \"how does write-ahead logging keep the database safe\", \"k\": 3}";
    srv_search_req sr;
    srv_bad bad;
    memset(&bad, 0, sizeof bad);
    if (srv_parse_search(&f->api, body, strlen(body), &sr, &bad)) return as_status(bad.status, bad.message, "parse");
    float *q = modattn__malloc(f->api.dim * sizeof(float), MODATTN_MEM_OTHER);
    if (!q) {
        srv_search_req_free(&sr);
        return modattn__mem_last_status();
    }
    int32_t *ids[1] = {sr.ids};
    size_t counts[1] = {sr.count};
    srv_job job;
    memset(&job, 0, sizeof job);
    job.kind = SRV_JOB_SEARCH;
    job.n = 1;
    job.ids = ids;
    job.counts = counts;
    job.out = q;
    job.k = sr.k;
    run_job(f, &job);
    int st = as_status(job.http_status, job.message, "search");
    if (!st) {
        char *resp = srv_search_body(&f->api, &job);
        if (!resp) st = modattn__error(MODATTN_ENOMEM, "writing the response: out of memory (503)");
        else if (job.nresults != 3 || !strstr(resp, "\"rank\":3")) st = modattn__error(MODATTN_EINTERNAL, "not 3 results");
        free(resp);
    }
    modattn_search_results_free(job.results, job.nresults);
    modattn_free(q);
    srv_search_req_free(&sr);
    return st;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_server_sweep STORE.db (indexed from demo/corpus with the model)\n");
        return 2;
    }
    modattn__json_count_allocations(); /* as the server: jansson's allocations counted and failed too */
    modattn_ctx_options co = {.threads = 1};
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(&co, &ctx) == 0);
    modattn_model *m = NULL;
    int st = ctx ? modattn_model_load(ctx, MODEL_DIR, &m) : -1;
    CHECK_MSG(st == 0, "loading %s: %s", MODEL_DIR, modattn_last_error());
    if (st) return test_finish("test_server_sweep");
    fixture f;
    memset(&f, 0, sizeof f);
    const modattn_model_info *in = modattn_model_get_info(m);
    f.api = (srv_api){.model = m, .model_id = in->name, .dim = in->dim, .max_tokens = in->max_tokens,
                      .vocab = (size_t)in->vocab, .max_inputs = 2048, .truncate = true};
    struct modattn_tokenizer *tok = NULL;
    CHECK(modattn_model_load_tokenizer(m, &tok) == 0);
    f.api.cls_id = modattn_tokenizer_cls_id(tok);
    f.api.sep_id = modattn_tokenizer_sep_id(tok);
    modattn_tokenizer_free(tok);
    CHECK(modattn_model_embed(m, k_texts, NULL, 3, f.ref, NULL) == 0);
    srv_batcher_config bc = {ctx, m, 1, 1, 8192, argv[1], 0, NULL, NULL};
    CHECK(srv_batcher_start(&bc, &f.b) == 0);
    int n1 = sweep_allocations("embeddings request", one_embeddings_request, &f, 4000);
    CHECK_MSG(n1 > 0 && f.runs_ok >= 1, "the embeddings sweep: %d points, %d runs through", n1, f.runs_ok);
    int n2 = sweep_allocations("search request", one_search_request, &f, 4000);
    CHECK_MSG(n2 > 0, "the search sweep: %d points", n2);
    srv_batcher_free(f.b);
    modattn_model_free(m);
    modattn_ctx_free(ctx);
    return test_finish("test_server_sweep");
}
