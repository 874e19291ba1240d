/* tests/pipeline/test_search_api.c — the public C search API as a C program uses it (modattn/search.h),
 * on a small store built here with the library's own indexer (modattn_index_paths) and the model
 * of `make model` (all-MiniLM-L6-v2; fails, does not skip, without it):
 *   - modattn__search: the k best chunks, ranked 1..k by descending cosine, the document about the
 *     query's topic first for each of four topics; k larger than the store gives every chunk;
 *   - modattn__search_with / modattn__search_batch: a batch of queries gives each query exactly the
 *     results (chunks, ranks, scores, bit for bit) of that query searched alone, in vector,
 *     keyword and hybrid mode; a path prefix keeps only the documents under it;
 *   - the searcher (modattn_searcher_*): the same results as the batch, and a search after an
 *     index run sees the new document (the store's generation moved);
 *   - errors: an empty store is MODATTN_ENOTFOUND, a store of another model MODATTN_EVERSION
 *     (tiny-bert-cls), NULL arguments MODATTN_EINVAL; every result freed gives back every byte. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_search.h"
#include "test_util.h"

#define MINILM ".models/all-MiniLM-L6-v2"
#define TINY ".models/tiny-bert-cls"

static const struct {
    const char *file, *text, *query;
} k_docs[] = {
    {"cats.txt", "The cat curled up on the warm windowsill and purred while the kitten chased a ball of yarn.",
     "a kitten playing with yarn"},
    {"volcano.txt", "Lava poured from the erupting volcano, and clouds of ash covered the villages below the crater.",
     "an eruption of molten rock"},
    {"bread.txt", "Knead the dough for ten minutes, let it rise, then bake the loaf in a hot oven until golden.",
     "how to bake bread at home"},
    {"chess.txt", "The grandmaster sacrificed her queen, and three moves later the opponent's king was checkmated.",
     "a checkmate in a chess game"},
};
#define NDOCS (sizeof k_docs / sizeof k_docs[0])

static char g_dir[64], g_docs[96];

static void write_file(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_docs, name);
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static int index_dir(modattn_store *s, modattn_model *m, const char *dir) {
    modattn_index_options o;
    memset(&o, 0, sizeof o);
    o.overlap = -1;
    modattn_index_stats st;
    memset(&st, 0, sizeof st);
    const char *paths[1] = {dir};
    int rc = modattn_index_paths(s, m, paths, 1, &o, &st);
    CHECK_MSG(rc == 0, "index %s: %s", dir, modattn_last_error());
    return rc;
}

/* The document (file name) of a result. */
static const char *doc_of(const modattn_search_result *r) {
    const char *slash = r->chunk.path ? strrchr(r->chunk.path, '/') : NULL;
    return slash ? slash + 1 : r->chunk.path ? r->chunk.path : "";
}

static bool same_results(const modattn_search_result *a, size_t na, const modattn_search_result *b, size_t nb) {
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (a[i].chunk.id != b[i].chunk.id || a[i].rank != b[i].rank ||
            memcmp(&a[i].score, &b[i].score, sizeof a[i].score) != 0)
            return false;
    return true;
}

static void test_search(modattn_store *s, modattn_model *m) {
    /* each topic's query finds its document first, ranks 1..k, scores descending */
    for (size_t d = 0; d < NDOCS; d++) {
        modattn_search_result *r = NULL;
        size_t n = 0;
        int st = modattn__search(s, m, k_docs[d].query, 3, NULL, &r, &n);
        CHECK_MSG(st == 0 && n == 3, "search '%s': status %d, %zu results: %s", k_docs[d].query, st, n,
                  modattn_last_error());
        if (st == 0 && n > 0) {
            CHECK_MSG(!strcmp(doc_of(&r[0]), k_docs[d].file), "'%s' found %s first, not %s", k_docs[d].query,
                      doc_of(&r[0]), k_docs[d].file);
            bool ordered = true;
            for (size_t i = 0; i < n; i++) {
                ordered &= r[i].rank == (int)i + 1 && r[i].chunk.text && r[i].chunk.text[0];
                if (i) ordered &= r[i].score <= r[i - 1].score;
            }
            CHECK_MSG(ordered, "'%s': ranks not 1..%zu or scores not descending", k_docs[d].query, n);
            CHECK_MSG(r[0].score > 0.3f && r[0].score <= 1.0001f, "'%s': cosine %g", k_docs[d].query, (double)r[0].score);
            printf("search '%s': %s (%.3f), %s (%.3f), %s (%.3f)\n", k_docs[d].query, doc_of(&r[0]), (double)r[0].score,
                   n > 1 ? doc_of(&r[1]) : "-", n > 1 ? (double)r[1].score : 0.0, n > 2 ? doc_of(&r[2]) : "-",
                   n > 2 ? (double)r[2].score : 0.0);
        }
        modattn_search_results_free(r, n);
    }
    /* k larger than the store: every chunk (one a document here), once each */
    modattn_search_result *r = NULL;
    size_t n = 0;
    CHECK(modattn__search(s, m, "anything", 50, NULL, &r, &n) == 0 && n == NDOCS);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++) CHECK_MSG(r[i].chunk.id != r[j].chunk.id, "chunk %lld twice", (long long)r[i].chunk.id);
    modattn_search_results_free(r, n);
    CHECK_ERR(modattn__search(s, m, NULL, 3, NULL, &r, &n), MODATTN_EINVAL, "");
}

static void test_batch_and_searcher(modattn_store *s, modattn_model *m) {
    const char *queries[NDOCS];
    for (size_t d = 0; d < NDOCS; d++) queries[d] = k_docs[d].query;
    static const modattn_search_mode modes[] = {MODATTN_SEARCH_VECTOR, MODATTN_SEARCH_KEYWORD, MODATTN_SEARCH_HYBRID};
    modattn_searcher *h = NULL;
    CHECK_MSG(modattn_searcher_create(s, m, &h) == 0 && h, "searcher: %s", modattn_last_error());
    for (size_t mi = 0; mi < sizeof modes / sizeof *modes; mi++) {
        modattn_search_params p;
        memset(&p, 0, sizeof p);
        p.mode = modes[mi];
        p.k = 2;
        modattn_search_result *out[NDOCS] = {0}, *hout[NDOCS] = {0};
        size_t nout[NDOCS] = {0}, hn[NDOCS] = {0};
        int st = modattn__search_batch(s, m, queries, NDOCS, &p, NULL, out, nout, NULL, NULL);
        CHECK_MSG(st == 0, "%s batch: %s", modattn_search_mode_name(modes[mi]), modattn_last_error());
        int hst = h ? modattn_searcher_search(h, queries, NDOCS, &p, NULL, hout, hn, NULL, NULL) : -1;
        CHECK_MSG(hst == 0, "%s searcher: %s", modattn_search_mode_name(modes[mi]), modattn_last_error());
        size_t same = 0, same_h = 0, found = 0;
        for (size_t q = 0; st == 0 && q < NDOCS; q++) {
            modattn_search_result *one = NULL;
            size_t n1 = 0;
            CHECK(modattn__search_with(s, m, queries[q], &p, NULL, &one, &n1, NULL, NULL) == 0);
            same += same_results(out[q], nout[q], one, n1);
            same_h += hst == 0 && same_results(hout[q], hn[q], one, n1);
            found += nout[q] > 0 && !strcmp(doc_of(&out[q][0]), k_docs[q].file);
            modattn_search_results_free(one, n1);
        }
        printf("%s: %zu queries in one batch: %zu the same as alone, the searcher %zu; %zu found their document first\n",
               modattn_search_mode_name(modes[mi]), NDOCS, same, same_h, found);
        CHECK_MSG(same == NDOCS && same_h == NDOCS, "%s: %zu (batch) and %zu (searcher) of %zu queries as alone",
                  modattn_search_mode_name(modes[mi]), same, same_h, NDOCS);
        /* keyword mode only finds what shares a word ("a", "in", "of" do, so no claim on the first) */
        if (modes[mi] != MODATTN_SEARCH_KEYWORD)
            CHECK_MSG(found == NDOCS, "%s: %zu of %zu queries found their document first",
                      modattn_search_mode_name(modes[mi]), found, NDOCS);
        for (size_t q = 0; q < NDOCS; q++) {
            modattn_search_results_free(out[q], nout[q]);
            modattn_search_results_free(hout[q], hn[q]);
        }
    }
    /* a path prefix: only the documents under it */
    modattn_search_params p;
    memset(&p, 0, sizeof p);
    p.mode = MODATTN_SEARCH_VECTOR;
    p.k = 10;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/b", g_docs); /* bread.txt */
    p.path_prefix = prefix;
    modattn_search_result *r = NULL;
    size_t n = 0;
    CHECK(modattn__search_with(s, m, "a kitten playing with yarn", &p, NULL, &r, &n, NULL, NULL) == 0);
    CHECK_MSG(n == 1 && !strcmp(doc_of(&r[0]), "bread.txt"), "prefix %s: %zu results, first %s", prefix, n,
              n ? doc_of(&r[0]) : "-");
    modattn_search_results_free(r, n);

    /* the searcher after an index run: the new document is found */
    write_file("comet.txt", "A comet with a glowing tail of ice and dust swept past the sun and out of the solar system.");
    index_dir(s, m, g_docs);
    p.path_prefix = NULL;
    p.k = 1;
    const char *q1[1] = {"an icy comet near the sun"};
    modattn_search_result *o1[1] = {0};
    size_t n1[1] = {0};
    CHECK(h && modattn_searcher_search(h, q1, 1, &p, NULL, o1, n1, NULL, NULL) == 0);
    CHECK_MSG(n1[0] == 1 && !strcmp(doc_of(&o1[0][0]), "comet.txt"), "after indexing comet.txt the searcher found %s",
              n1[0] ? doc_of(&o1[0][0]) : "nothing");
    modattn_search_results_free(o1[0], n1[0]);
    CHECK_ERR(modattn_searcher_search(h, NULL, 1, &p, NULL, o1, n1, NULL, NULL), MODATTN_EINVAL, "");
    modattn_searcher_free(h);
}

int main(void) {
    struct stat sb;
    if (stat(MINILM, &sb) != 0 || stat(TINY, &sb) != 0) {
        CHECK_MSG(0, "%s or %s is missing: run `make model` (tools/setup_model.sh) first", MINILM, TINY);
        return test_finish("test_search_api");
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/modattn_search_api_XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    modattn_mem_stats m0;
    modattn_mem_get_stats(&m0);
    modattn_ctx *ctx = NULL;
    modattn_ctx_options co;
    memset(&co, 0, sizeof co);
    co.threads = 2;
    CHECK(modattn_ctx_create(&co, &ctx) == 0);
    modattn_model *m = NULL, *tiny = NULL;
    CHECK_MSG(ctx && modattn_model_load(ctx, MINILM, &m) == 0, "load %s: %s", MINILM, modattn_last_error());
    CHECK_MSG(ctx && modattn_model_load(ctx, TINY, &tiny) == 0, "load %s: %s", TINY, modattn_last_error());
    if (!m || !tiny) return test_finish("test_search_api");

    char db[128], db2[128], empty[128];
    snprintf(db, sizeof db, "%s/s.db", g_dir);
    snprintf(db2, sizeof db2, "%s/tiny.db", g_dir);
    snprintf(empty, sizeof empty, "%s/empty.db", g_dir);
    snprintf(g_docs, sizeof g_docs, "%s/docs", g_dir);
    CHECK(mkdir(g_docs, 0700) == 0);
    for (size_t d = 0; d < NDOCS; d++) write_file(k_docs[d].file, k_docs[d].text);

    /* an empty store: not found, saying to index */
    modattn_store *s = NULL;
    modattn_search_result *r = NULL;
    size_t n = 0;
    CHECK(modattn_store_open(empty, MODATTN_STORE_CREATE, &s) == 0);
    CHECK_ERR(modattn__search(s, m, "cat", 3, NULL, &r, &n), MODATTN_ENOTFOUND, "");
    modattn_store_close(s);
    unlink(empty);

    /* a store of another model (tiny-bert-cls): refused */
    s = NULL;
    CHECK(modattn_store_open(db2, MODATTN_STORE_CREATE, &s) == 0);
    if (s && index_dir(s, tiny, g_docs) == 0)
        CHECK_ERR(modattn__search(s, m, "cat", 3, NULL, &r, &n), MODATTN_EVERSION, "");
    modattn_store_close(s);
    unlink(db2);

    s = NULL;
    CHECK(modattn_store_open(db, MODATTN_STORE_CREATE, &s) == 0);
    if (s && index_dir(s, m, g_docs) == 0) {
        test_search(s, m);
        test_batch_and_searcher(s, m);
    }
    modattn_store_close(s);
    modattn_model_free(m);
    modattn_model_free(tiny);
    modattn_ctx_free(ctx);
    modattn_mem_stats m1;
    modattn_mem_get_stats(&m1);
    CHECK_MSG(m1.current_total == m0.current_total, "%lld bytes not given back",
              (long long)(m1.current_total - m0.current_total));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return test_finish("test_search_api");
}
