/* tests/memory/test_sweep_pipeline.c — the allocation-failure sweep end to end: load the model,
 * tokenise, embed one batch, index one document into a store, and search it, with the Nth
 * allocation failing for N = 1, 2, ... Every failure is a clean error with no leak, and after
 * each failed indexing run the store passes PRAGMA integrity_check and holds the document either
 * whole (all its chunks) or not at all. */
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/modattn.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "sweep.h"

#include <sys/stat.h>
#include <unistd.h>

static const char *MODEL = ".models/all-MiniLM-L6-v2";
/* Indexing and search are swept with the small test BERT (the same tokenizer.json, 3 layers of
 * 128): what they sweep is the pipeline's allocations (chunks, batches, the store, the search's
 * steps), and the model's forward pass runs once per failure point there, 4,000 times; with
 * MiniLM's it was most of this test's time under ASan (~0.2 s of each indexing run, ~30 ms of
 * each search). The model's own load and embedding are swept with MiniLM above. */
static const char *const PIPE_MODEL = ".models/tiny-bert-cls";
static modattn_ctx *g_ctx;
static modattn_model *g_model, *g_pipe;
static char g_dir[] = "/tmp/modattn_sweep_XXXXXX";
static char g_doc[600];
static int g_round;
static int g_whole, g_absent;

static int op_load(void *arg) {
    (void)arg;
    modattn_model *m;
    int st = modattn_model_load(g_ctx, MODEL, &m);
    if (st == 0) modattn_model_free(m);
    return st;
}

static int op_tokenize_embed(void *arg) {
    (void)arg;
    const char *texts[3] = {"a first sentence", "and a second, somewhat longer one about memory budgets", "三"};
    float out[3 * 384];
    int32_t ntok[3];
    int32_t ids[64];
    size_t n;
    int st = modattn_model_tokenize(g_model, texts[1], strlen(texts[1]), ids, 64, &n);
    if (st) return st;
    return modattn_model_embed(g_model, texts, NULL, 3, out, ntok);
}

/* After a run (failed or not), the store must be consistent and the document whole or absent. */
static void check_store(const char *db) {
    modattn_store *s;
    if (modattn_store_open(db, MODATTN_STORE_READONLY, &s) != 0) { /* the failure came before creation */
        g_absent++;
        return;
    }
    CHECK_MSG(modattn_store_integrity_check(s) == 0, "%s: %s", db, modattn_last_error());
    char *abs = modattn__path_absolute(g_doc);
    modattn_store_doc d;
    int found = abs ? modattn__store_find_document(s, abs, &d) : -1;
    modattn_free(abs);
    modattn_store_counts c;
    CHECK(modattn_store_get_counts(s, &c) == 0);
    if (found == 1) {
        CHECK_MSG(c.chunks == d.nchunks && c.embeddings == d.nchunks && d.nchunks > 0,
                  "document stored with %lld of %lld chunks", (long long)c.chunks, (long long)d.nchunks);
        g_whole++;
    } else {
        CHECK_MSG(found == 0 && c.chunks == 0 && c.embeddings == 0, "no document but %lld chunks", (long long)c.chunks);
        g_absent++;
    }
    modattn_store_close(s);
}

/* Creating a store: a failure leaves no store, or an empty one that opens and checks clean. */
static int op_create(void *arg) {
    (void)arg;
    char db[700];
    snprintf(db, sizeof db, "%s/store-%d.db", g_dir, g_round++);
    modattn_store *s;
    int st = modattn_store_open(db, MODATTN_STORE_CREATE, &s);
    if (st == 0) modattn_store_close(s);
    sweep_attempts_hint = modattn__mem_fail_counter();
    modattn__mem_fail_nth(0); /* the check itself must not be failed */
    check_store(db);
    return st;
}

/* Indexing one document into a new store, created with no failure injected (creation has its own
 * sweep above: its ~4000 allocation points of SQLite's schema work, each followed by a whole
 * indexing run, were most of this test's time), then the Nth allocation of indexing fails. */
static int op_index(void *arg) {
    (void)arg;
    char db[700];
    snprintf(db, sizeof db, "%s/store-%d.db", g_dir, g_round++);
    modattn__mem_fail_nth(0);
    modattn_store *s;
    int st = modattn_store_open(db, MODATTN_STORE_CREATE, &s);
    modattn__mem_fail_nth(sweep_current_n);
    if (st == 0) {
        const char *paths[1] = {g_doc};
        /* ~4 chunks of 64 tokens in 2 model calls: a document committed over several batches,
         * at a quarter of the default window's cost per run */
        modattn_index_options o = {.chunk_tokens = 64, .overlap = 8, .batch_chunks = 2};
        modattn_index_stats stats;
        memset(&stats, 0, sizeof stats);
        st = modattn_index_paths(s, g_pipe, paths, 1, &o, &stats);
        /* a per-file failure is an event, not an error: count it as the failure it is */
        if (st == 0 && stats.files_indexed != 1) st = MODATTN_ENOMEM;
        modattn_store_close(s);
    }
    sweep_attempts_hint = modattn__mem_fail_counter();
    modattn__mem_fail_nth(0); /* the check itself must not be failed */
    check_store(db);
    return st;
}

static char g_db[700];

/* A hybrid search (the query embedded, the vector scan, keywords, fusion, chunks and spans: every
 * step of a search by meaning and more), on a store opened for it: the connection and what SQLite
 * and FTS5 cache in it go with it, so only real leaks count. The store is opened with no failure
 * injected (its ~2600 allocation points of SQLite's schema parsing are the index sweep's, and
 * took 20+ minutes under ASan here), then the Nth allocation of the search fails. */
static int op_search(void *arg) {
    (void)arg;
    modattn__mem_fail_nth(0);
    modattn_store *s = NULL;
    int st = modattn_store_open(g_db, MODATTN_STORE_READONLY, &s);
    modattn_store_counts c; /* a first statement: the schema is read now, unfailed */
    if (!st) st = modattn_store_get_counts(s, &c);
    modattn__mem_fail_nth(sweep_current_n);
    if (st) {
        modattn_store_close(s);
        return st;
    }
    modattn_search_result *r = NULL;
    size_t n = 0;
    modattn_search_params p = {.mode = MODATTN_SEARCH_HYBRID, .k = 3};
    st = modattn__search_with(s, g_pipe, "who keeps the bees and their honey", &p, modattn_ctx_exec(g_ctx), &r, &n, NULL, NULL);
    if (st == 0) modattn_search_results_free(r, n);
    sweep_attempts_hint = modattn__mem_fail_counter();
    modattn__mem_fail_nth(0);
    modattn_store_close(s);
    return st;
}

int main(void) {
    struct stat sb;
    if (stat(MODEL, &sb) != 0 || stat(PIPE_MODEL, &sb) != 0) {
        fprintf(stderr, "test_sweep_pipeline: %s or %s is missing: run `make model`\n", MODEL, PIPE_MODEL);
        return 1;
    }
    /* SQLite's allocations go through modattn's (opt-in, as in the CLI): the sweeps reach them */
    if (modattn__store_account_sqlite_memory() != 0) {
        fprintf(stderr, "test_sweep_pipeline: %s\n", modattn_last_error());
        return 1;
    }
    if (!mkdtemp(g_dir)) return 2;
    snprintf(g_doc, sizeof g_doc, "%s/bees.txt", g_dir);
    FILE *f = fopen(g_doc, "w");
    for (int i = 0; i < 10; i++)
        fprintf(f, "Line %d: the bee keeper tends the hives, and the honey is taken in late summer. ", i);
    fclose(f);
    modattn_ctx_options o = {.threads = 2, .plugin_path = ""};
    CHECK(modattn_ctx_create(&o, &g_ctx) == 0);
    CHECK(sweep_allocations("model load", op_load, NULL, 20000) > 0);
    CHECK(modattn_model_load(g_ctx, MODEL, &g_model) == 0);
    CHECK(modattn_model_load(g_ctx, PIPE_MODEL, &g_pipe) == 0);
    CHECK(sweep_allocations("tokenize + embed", op_tokenize_embed, NULL, 20000) > 0);
    CHECK(sweep_allocations("create a store", op_create, NULL, 20000) > 0);
    CHECK_MSG(g_whole == 0 && g_absent == g_round, "a created store holds a document");
    CHECK(sweep_allocations("index one document", op_index, NULL, 20000) > 0);
    printf("after failed or finished indexing runs: %d stores with the whole document, %d without it\n", g_whole, g_absent);
    CHECK(g_whole >= 1 && g_absent >= 1);
    snprintf(g_db, sizeof g_db, "%s/store-%d.db", g_dir, g_round - 1); /* the last, successful one */
    CHECK(sweep_allocations("search", op_search, NULL, 20000) > 0);
    modattn_model_free(g_model);
    modattn_model_free(g_pipe);
    modattn_ctx_free(g_ctx);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return test_finish("test_sweep_pipeline");
}
