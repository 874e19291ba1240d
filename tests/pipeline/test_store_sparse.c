/* tests/pipeline/test_store_sparse.c — the store's sparse vectors (`index --sparse`, search mode
 * sparse, hybrid with sparse) through the library's indexer with the real splade-tiny:
 *   - every chunk gets exactly its encoder's vector (the stored rows equal modattn_sparse_encode's
 *     positive weights of the chunk's text, id for id), and the model's identity is recorded;
 *   - sparse search's scores are the dot products of the query's vector with the chunks' (computed
 *     here from the rows), best first; hybrid carries sparse ranks and "sparse" in found_by;
 *   - re-index, delete and a failed or stopped run leave no row without its chunk and no chunk
 *     without its rows (a fault injected inside a document's transaction: MODATTN_TEST_SPARSE_FAIL_AT);
 *   - refusals: another encoder's identity or pruning (MODATTN_EVERSION naming the fix), a sparse
 *     store indexed without --sparse, a store with chunks but no sparse vectors indexed with it, and
 *     sparse search on a store without sparse vectors (naming `index --sparse`);
 *   - bounds: a query of 5,000 terms and a chunk of 30,000 non-zeros. */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/sparse.h"
#include "modattn/store.h"
#include "pipeline/internal_search.h"
#include "pipeline/pipeline_internal.h"
#include "test_util.h"

#define DENSE ".models/all-MiniLM-L6-v2"
#define SPLADE ".models/splade-tiny"

static char g_dir[64], g_docs[128];

static const char *const k_docs[][2] = {
    {"a.txt", "The lighthouse keeper climbed the spiral stairs every evening to light the great lamp."},
    {"b.txt", "Sourdough bread needs a starter of flour and water, fed daily, and a long slow rise."},
    {"c.txt", "A comet's tail always points away from the sun, pushed by the solar wind and light."},
    {"d.txt", "The violinist tuned her instrument before the concert; the orchestra waited in silence."},
    {"e.txt", "Glaciers carve valleys into a U shape as they creep downhill over thousands of years."},
    {"f.txt", "The tax form asks for your income, deductions and the refund you expect to receive."},
};
#define NDOCS (sizeof k_docs / sizeof *k_docs)

static void write_file(const char *name, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_docs, name);
    FILE *f = fopen(p, "w");
    CHECK_MSG(f != NULL, "cannot write %s", p);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static int64_t q1(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    else fprintf(stderr, "query failed: %s: %s\n", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return v;
}

/* no row without its chunk, no chunk without rows: the store's sparse index is whole */
static void check_consistent(const char *db_path, const char *when) {
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    int64_t orphans = q1(db, "SELECT count(*) FROM sparse WHERE chunk NOT IN (SELECT id FROM chunks)");
    int64_t bare = q1(db, "SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk FROM sparse)");
    int64_t half = q1(db, "SELECT count(*) FROM documents d WHERE d.nchunks != (SELECT count(*) FROM chunks c WHERE "
                          "c.document = d.id)");
    CHECK_MSG(orphans == 0 && bare == 0 && half == 0, "%s: %lld sparse rows without a chunk, %lld chunks without rows, "
              "%lld documents not whole", when, (long long)orphans, (long long)bare, (long long)half);
    CHECK(strcmp((const char *)"ok", "ok") == 0);
    sqlite3_close(db);
}

static int run_index(const char *db, modattn_model *m, modattn_sparse_encoder *sp, const modattn_sparse_options *spo,
                     int (*cancel)(void *), void *ud, modattn_index_stats *stats) {
    modattn_store *s = NULL;
    int rc = modattn_store_open(db, MODATTN_STORE_CREATE, &s);
    CHECK_MSG(rc == 0, "open %s: %s", db, modattn_last_error());
    if (rc) return rc;
    modattn_index_options o;
    memset(&o, 0, sizeof o);
    o.overlap = -1;
    o.batch_chunks = 2;
    o.sparse = sp;
    o.sparse_opt = spo;
    o.cancel = cancel;
    o.ud = ud;
    const char *paths[1] = {g_docs};
    memset(stats, 0, sizeof *stats);
    rc = modattn_index_paths(s, m, paths, 1, &o, stats);
    modattn_store_close(s);
    return rc;
}

static int g_calls, g_stop_after;
static int stop_after(void *ud) {
    modattn_index_stats *st = ud;
    (void)g_calls;
    return st->files_indexed >= (uint64_t)g_stop_after;
}

int main(void) {
    if (access(SPLADE "/model.safetensors", R_OK) != 0 || access(DENSE "/model.safetensors", R_OK) != 0) {
        printf("not available here: %s or %s is missing (make model)\n", SPLADE, DENSE);
        return 77;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/modattn_store_sparse_XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_docs, sizeof g_docs, "%s/docs", g_dir);
    char cmd[256], db1[160], db2[160], db3[160];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", g_docs);
    CHECK(system(cmd) == 0);
    for (size_t i = 0; i < NDOCS; i++) write_file(k_docs[i][0], k_docs[i][1]);
    snprintf(db1, sizeof db1, "%s/one.db", g_dir);
    snprintf(db2, sizeof db2, "%s/plain.db", g_dir);
    snprintf(db3, sizeof db3, "%s/fault.db", g_dir);

    modattn_ctx *ctx = NULL;
    modattn_ctx_options co;
    memset(&co, 0, sizeof co);
    co.threads = 1;
    CHECK(modattn_ctx_create(&co, &ctx) == 0);
    modattn_model *m = NULL;
    modattn_sparse_encoder *sp = NULL;
    CHECK_MSG(modattn_model_load(ctx, DENSE, &m) == 0, "load %s: %s", DENSE, modattn_last_error());
    CHECK_MSG(modattn_sparse_load(ctx, SPLADE, NULL, &sp) == 0, "load %s: %s", SPLADE, modattn_last_error());
    if (!m || !sp) return test_finish("test_store_sparse");
    modattn_index_stats stats;

    /* 1. every chunk with exactly its encoder's vector */
    CHECK_MSG(run_index(db1, m, sp, NULL, NULL, NULL, &stats) == 0, "index --sparse: %s", modattn_last_error());
    CHECK_MSG(stats.files_indexed == NDOCS, "%llu documents indexed", (unsigned long long)stats.files_indexed);
    check_consistent(db1, "after the first run");
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(db1, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    {
        sqlite3_stmt *st = NULL;
        CHECK(sqlite3_prepare_v2(db, "SELECT id, text FROM chunks ORDER BY id", -1, &st, NULL) == SQLITE_OK);
        int chunks = 0, same = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(st, 0);
            const char *text = (const char *)sqlite3_column_text(st, 1);
            modattn_sparse_vec v = {0, NULL, NULL};
            size_t len = strlen(text);
            CHECK(modattn_sparse_encode(sp, NULL, &text, &len, 1, NULL, &v, NULL) == 0);
            size_t npos = 0, match = 0;
            for (size_t i = 0; i < v.n; i++) {
                if (!(v.weights[i] > 0)) continue;
                npos++;
                char q[160];
                snprintf(q, sizeof q, "SELECT weight FROM sparse WHERE term = %d AND chunk = %lld", (int)v.ids[i],
                         (long long)id);
                sqlite3_stmt *w = NULL;
                if (sqlite3_prepare_v2(db, q, -1, &w, NULL) == SQLITE_OK && sqlite3_step(w) == SQLITE_ROW &&
                    (float)sqlite3_column_double(w, 0) == v.weights[i])
                    match++;
                sqlite3_finalize(w);
            }
            char q[96];
            snprintf(q, sizeof q, "SELECT count(*) FROM sparse WHERE chunk = %lld", (long long)id);
            if (match == npos && q1(db, q) == (int64_t)npos && npos > 0) same++;
            chunks++;
            modattn_sparse_vec_free(&v, 1);
        }
        sqlite3_finalize(st);
        CHECK_MSG(chunks >= (int)NDOCS && same == chunks, "%d of %d chunks have exactly their encoder's vector", same,
                  chunks);
    }
    sqlite3_close(db);

    /* 2. sparse search: the dot products, best first; a distinctive word finds its document */
    modattn_store *s = NULL;
    CHECK(modattn_store_open(db1, MODATTN_STORE_READONLY, &s) == 0);
    modattn_search_params p;
    memset(&p, 0, sizeof p);
    p.mode = MODATTN_SEARCH_SPARSE;
    p.k = 10;
    p.sparse = sp;
    modattn_search_result *res = NULL;
    size_t nres = 0;
    const char *query = "lighthouse lamp";
    CHECK_MSG(modattn__search_with(s, m, query, &p, NULL, &res, &nres, NULL, NULL) == 0, "sparse search: %s",
              modattn_last_error());
    CHECK_MSG(nres > 0 && strstr(res[0].chunk.path, "a.txt") != NULL, "sparse search for '%s': first %s", query,
              nres ? res[0].chunk.path : "(none)");
    {
        modattn_sparse_vec qv = {0, NULL, NULL};
        size_t ql = strlen(query);
        CHECK(modattn_sparse_encode(sp, NULL, &query, &ql, 1, NULL, &qv, NULL) == 0);
        CHECK(sqlite3_open_v2(db1, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
        int ok = 0;
        for (size_t r = 0; r < nres; r++) {
            double dot = 0;
            for (size_t i = 0; i < qv.n; i++) {
                char q[160];
                snprintf(q, sizeof q, "SELECT weight FROM sparse WHERE term = %d AND chunk = %lld", (int)qv.ids[i],
                         (long long)res[r].chunk.id);
                sqlite3_stmt *w = NULL;
                if (sqlite3_prepare_v2(db, q, -1, &w, NULL) == SQLITE_OK && sqlite3_step(w) == SQLITE_ROW)
                    dot += sqlite3_column_double(w, 0) * (double)qv.weights[i];
                sqlite3_finalize(w);
            }
            const bool ordered = r == 0 || res[r].sparse_score <= res[r - 1].sparse_score;
            if (fabs(dot - res[r].sparse_score) <= 1e-6 * fabs(dot) && res[r].sparse_rank == (int)r + 1 && ordered &&
                strcmp(modattn__search_found_by(&res[r]), "sparse") == 0)
                ok++;
        }
        CHECK_MSG(ok == (int)nres, "%d of %zu sparse results have the dot product, rank, order and found_by", ok, nres);
        sqlite3_close(db);
        modattn_sparse_vec_free(&qv, 1);
    }
    modattn_search_results_free(res, nres);
    /* hybrid: the sparse ranking fused in */
    p.mode = MODATTN_SEARCH_HYBRID;
    CHECK_MSG(modattn__search_with(s, m, "comet tail solar wind", &p, NULL, &res, &nres, NULL, NULL) == 0, "hybrid: %s",
              modattn_last_error());
    CHECK_MSG(nres > 0 && res[0].sparse_rank > 0 && strstr(modattn__search_found_by(&res[0]), "sparse") &&
                  strstr(res[0].chunk.path, "c.txt"),
              "hybrid's first: %s sparse rank %d found by %s", nres ? res[0].chunk.path : "-", nres ? res[0].sparse_rank : 0,
              nres ? modattn__search_found_by(&res[0]) : "-");
    modattn_search_results_free(res, nres);
    /* bounds: a query of 5,000 terms */
    {
        int32_t *ids = malloc(5000 * sizeof *ids);
        float *w = malloc(5000 * sizeof *w);
        int64_t top[10];
        double sc[10];
        size_t n = 0;
        for (int i = 0; i < 5000; i++) ids[i] = 1000 + i, w[i] = 1.0f + (float)(i % 7);
        CHECK_MSG(modattn__store_sparse_topk(s, ids, w, 5000, 10, NULL, top, sc, &n) == 0, "5,000 terms: %s",
                  modattn_last_error());
        free(ids);
        free(w);
    }
    modattn_store_close(s);

    /* 3. refusals */
    modattn_sparse_options pruned = {.top_k = 16};
    CHECK_ERR(run_index(db1, m, sp, &pruned, NULL, NULL, &stats), MODATTN_EVERSION, "pruned with --top-k 0");
    CHECK_ERR(run_index(db1, m, NULL, NULL, NULL, NULL, &stats), MODATTN_EINVAL, "index it with --sparse");
    CHECK(sqlite3_open_v2(db1, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "UPDATE meta SET value = '0123456789abcdef' WHERE key = 'sparse_model_identity'", NULL, NULL,
                       NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_ERR(run_index(db1, m, sp, NULL, NULL, NULL, &stats), MODATTN_EVERSION, "another sparse model");
    CHECK(modattn_store_open(db1, MODATTN_STORE_READONLY, &s) == 0);
    p.mode = MODATTN_SEARCH_SPARSE;
    CHECK_ERR(modattn__search_with(s, m, "lamp", &p, NULL, &res, &nres, NULL, NULL), MODATTN_EVERSION,
              "another sparse model");
    modattn_store_close(s);
    CHECK(sqlite3_open_v2(db1, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    char fix[200];
    snprintf(fix, sizeof fix, "UPDATE meta SET value = '%s' WHERE key = 'sparse_model_identity'",
             modattn_model_get_info(modattn_sparse_model(sp))->identity);
    CHECK(sqlite3_exec(db, fix, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    /* a store without sparse vectors */
    CHECK_MSG(run_index(db2, m, NULL, NULL, NULL, NULL, &stats) == 0, "plain index: %s", modattn_last_error());
    CHECK_ERR(run_index(db2, m, sp, NULL, NULL, NULL, &stats), MODATTN_EINVAL, "without sparse vectors");
    CHECK(modattn_store_open(db2, MODATTN_STORE_READONLY, &s) == 0);
    CHECK_ERR(modattn__search_with(s, m, "lamp", &p, NULL, &res, &nres, NULL, NULL), MODATTN_EUNSUPPORTED,
              "modattn index --sparse");
    p.mode = MODATTN_SEARCH_HYBRID; /* hybrid without sparse vectors: meaning and words, as ever */
    CHECK_MSG(modattn__search_with(s, m, "lamp", &p, NULL, &res, &nres, NULL, NULL) == 0 && nres > 0 &&
                  res[0].sparse_rank == 0,
              "hybrid on a plain store: %s", modattn_last_error());
    modattn_search_results_free(res, nres);
    modattn_store_close(s);

    /* 4. re-index a changed document, delete one: their rows go with their chunks */
    write_file("b.txt", "Rye bread is dense and sour; the starter ferments overnight before the dough is shaped. "
                        "Bake it hot at first, then lower the oven.");
    CHECK_MSG(run_index(db1, m, sp, NULL, NULL, NULL, &stats) == 0 && stats.files_indexed == 1,
              "re-index: %s (%llu indexed)", modattn_last_error(), (unsigned long long)stats.files_indexed);
    check_consistent(db1, "after re-indexing a changed document");
    CHECK(modattn_store_open(db1, 0, &s) == 0);
    char bpath[256];
    snprintf(bpath, sizeof bpath, "%s/d.txt", g_docs);
    char *real = realpath(bpath, NULL);
    CHECK_MSG(modattn_store_delete_document(s, real ? real : bpath) == 1, "delete: %s", modattn_last_error());
    free(real);
    modattn_store_close(s);
    check_consistent(db1, "after deleting a document");
    CHECK(sqlite3_open_v2(db1, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK_MSG(q1(db, "SELECT count(*) FROM documents") == (int64_t)NDOCS - 1, "documents after the delete");
    sqlite3_close(db);

    /* 5. a fault inside a document's transaction, and a stopped run: nothing half-written */
    for (int fail_at = 1; fail_at <= 5; fail_at += 2) {
        char v[16];
        snprintf(v, sizeof v, "%d", fail_at);
        unlink(db3);
        setenv("MODATTN_TEST_SPARSE_FAIL_AT", v, 1);
        int rc = run_index(db3, m, sp, NULL, NULL, NULL, &stats);
        unsetenv("MODATTN_TEST_SPARSE_FAIL_AT");
        CHECK_MSG(rc != 0 && strstr(modattn_last_error(), "injected fault"), "fault at %d: rc %d (%s)", fail_at, rc,
                  modattn_last_error());
        char when[64];
        snprintf(when, sizeof when, "a fault at sparse write %d", fail_at);
        check_consistent(db3, when);
        /* the run again completes the store */
        CHECK_MSG(run_index(db3, m, sp, NULL, NULL, NULL, &stats) == 0, "resume: %s", modattn_last_error());
        check_consistent(db3, "resumed after the fault");
        CHECK(sqlite3_open_v2(db3, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
        CHECK_MSG(q1(db, "SELECT count(*) FROM documents") == (int64_t)NDOCS - 0 - 0 - (0), "resumed documents");
        sqlite3_close(db);
    }
    for (int k = 1; k <= 3; k += 2) {
        unlink(db3);
        g_stop_after = k;
        int rc = run_index(db3, m, sp, NULL, stop_after, &stats, &stats);
        CHECK_MSG(rc == 0 && stats.cancelled, "stop after %d: rc %d cancelled %d", k, rc, stats.cancelled);
        check_consistent(db3, "a stopped run");
    }

    /* 6. a chunk with 30,000 non-zeros, in one transaction */
    CHECK(modattn_store_open(db3, 0, &s) == 0);
    CHECK(sqlite3_open_v2(db3, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    int64_t some = q1(db, "SELECT min(id) FROM chunks");
    sqlite3_close(db);
    {
        int32_t *ids = malloc(30000 * sizeof *ids);
        float *w = malloc(30000 * sizeof *w);
        for (int i = 0; i < 30000; i++) ids[i] = 40000 + i, w[i] = 0.5f;
        sqlite3 *h = modattn__store_db(s);
        CHECK(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
        CHECK_MSG(modattn__store_put_sparse(s, some, ids, w, 30000) == 0, "30,000 non-zeros: %s", modattn_last_error());
        CHECK(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
        int64_t top[3];
        double sc[3];
        size_t n = 0;
        CHECK(modattn__store_sparse_topk(s, ids, w, 30000, 3, NULL, top, sc, &n) == 0);
        CHECK_MSG(n == 1 && top[0] == some && fabs(sc[0] - 1024 * 0.25) < 1e-6,
                  "a 30,000-term query over it: %zu results, score %g (the query's 1,024 heaviest terms: 256)", n,
                  n ? sc[0] : 0.0);
        free(ids);
        free(w);
    }
    modattn_store_close(s);

    modattn_sparse_free(sp);
    modattn_model_free(m);
    modattn_ctx_free(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (!t_fail) CHECK(system(cmd) == 0);
    return test_finish("test_store_sparse");
}
