/* tests/pipeline/test_search_trust.c — issue 40's "results people trust", piece by piece: the
 * stop-word lists (per language, folded as the keyword index folds its words) and the language a
 * query is taken to be in; a store's keyword query (pipeline/keywords.c) leaving out stop words and
 * words most chunks hold when the query has words that carry information, keeping them when it has
 * none (and saying so), searching a word no chunk holds as a prefix ("recurs" finds "recursion")
 * or, when nothing else matches, as its nearest word in the store ("recursivly" finds
 * "recursively"), never a code's digits, and a right word the store lacks not taken for its
 * neighbour while other words match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/store.h"
#include "pipeline/internal_store.h"
#include "pipeline/keywords_internal.h"
#include "pipeline/pipeline_internal.h"
#include <sqlite3.h>
#include <stdint.h>
#include "test_util.h"

static int lang_of(const char *code) {
    for (int l = 0; l < 32; l++)
        if (strcmp(modattn__stopword_lang(l), code) == 0) return l;
    return -2;
}

static void test_lists(void) {
    const int en = lang_of("en"), de = lang_of("de"), fr = lang_of("fr");
    CHECK(en >= 0 && de >= 0 && fr >= 0);
    CHECK(strstr(modattn__stopword_source(), "Snowball") != NULL);
    CHECK(modattn__is_stopword(en, "the") && modattn__is_stopword(en, "The") && modattn__is_stopword(en, "on"));
    CHECK(modattn__is_stopword(en, "does") && modattn__is_stopword(en, "when"));
    CHECK(!modattn__is_stopword(en, "coffee") && !modattn__is_stopword(en, "close") && !modattn__is_stopword(-1, "the"));
    /* folded as the index's tokens are: "für" is found as "fur", "FÜR" as well */
    CHECK(modattn__is_stopword(de, "fur") && modattn__is_stopword(de, "FÜR") && modattn__is_stopword(fr, "ete"));
    const char *q1[] = {"when", "does", "the", "coffee", "shop", "close", "on", "sunday"};
    CHECK(modattn__stopword_language(q1, 8) == en);
    const char *q2[] = {"wann", "schliesst", "der", "laden", "am", "sonntag", "und", "warum"};
    CHECK(modattn__stopword_language(q2, 8) == de);
    /* one word on another language's list is not enough ("die" in "die hard") */
    const char *q3[] = {"die", "hard"};
    CHECK(modattn__stopword_language(q3, 2) == -1);
    const char *q4[] = {"recursivly"};
    CHECK(modattn__stopword_language(q4, 1) == -1);
}

static modattn_store *make_store(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/trust.db", dir);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(path, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return NULL;
    modattn_store_model m = {"m", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &m) == 0);
    static const char *const texts[] = {
        "This licence applies on the day when it is granted, and on every day after that when the work is used, "
        "as it does on the days before.",
        "The café on Main Street closes at three on Sundays; the coffee is roasted in the shop.",
        "Walk the tree recursively: each node visits its children before itself.",
        "A toffee recipe: sugar, butter and cream, boiled until golden.",
        "Error E4021: the connection pool is exhausted.",
        "The lighthouse keeper lit the lamp at dusk.",
        "The harbour master logged every ship in the ledger.",
        "The recursion depth limit stops runaway functions.",
        "The garden holds roses, tulips and the old apple tree.",
        "The river floods the meadow in the spring.",
    };
    float vec[4] = {1, 0, 0, 0};
    for (int i = 0; i < (int)(sizeof texts / sizeof *texts); i++) {
        char p[64];
        snprintf(p, sizeof p, "/t/doc%d.txt", i);
        modattn_store_doc d = {.path = p, .hash = (uint64_t)i, .kind = "text", .nchunks = 1};
        CHECK(modattn__store_begin(s) == 0 && modattn__store_put_document(s, &d) == 0);
        modattn_store_chunk_in c = {0, 0, (int64_t)strlen(texts[i]), 1, 0, 5, texts[i], strlen(texts[i])};
        CHECK(modattn__store_put_chunk(s, d.id, &c, vec, 4) == 0 && modattn__store_commit(s) == 0);
    }
    return s;
}

/* The query fts for text, with what was made of it. */
static char *query(modattn_store *s, const char *text, modattn__kw_query_info *info) {
    char *fts = NULL;
    int st = modattn__store_keyword_query_info(s, text, strlen(text), &fts, NULL, info);
    CHECK_MSG(st == 0 && fts, "keyword query [%s]: %s", text, modattn_last_error());
    return fts;
}

/* The text of the best chunk by words for fts ("" when none). */
static void best(modattn_store *s, const char *fts, char *out, size_t cap) {
    int64_t ids[4];
    double sc[4];
    size_t n = 0;
    out[0] = '\0';
    CHECK(modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n) == 0);
    modattn_store_chunk ch;
    if (n && modattn__store_get_chunk(s, ids[0], &ch) == 0) {
        snprintf(out, cap, "%s", ch.text);
        modattn__store_chunk_clear(&ch);
    }
}

static void test_queries(const char *dir) {
    modattn_store *s = make_store(dir);
    if (!s) return;
    modattn__kw_query_info info;
    char top[512];
    /* the stop words select nothing: the licence, which holds "on", "the", "when" and "does" many
     * times and none of the other words, is not found by words; among the rows the other words
     * find, they still score ("the", in more than half the chunks, weighs nothing: left out).
     * ("close" and "Sunday" are not held as such: found as prefixes, of "closes" and "sundays") */
    char *marks = NULL;
    char *fts = NULL;
    CHECK(modattn__store_keyword_query_info(s, "when does the coffee shop close on Sunday", 41, &fts, &marks, &info) == 0);
    CHECK_MSG(fts && strcmp(fts, "(\"coffee\" OR \"shop\" OR \"close\"* OR \"sunday\"*) AND (\"when\" OR \"does\" OR "
                                 "\"coffee\" OR \"shop\" OR \"close\"* OR \"on\" OR \"sunday\"*)") == 0,
              "[%s]", fts ? fts : "");
    CHECK_MSG(marks && strcmp(marks, "\"coffee\" OR \"shop\" OR \"close\"* OR \"sunday\"*") == 0, "[%s]", marks ? marks : "");
    CHECK(info.words == 8 && info.stop == 4 && info.kept == 7 && !info.weak_only && info.lang == lang_of("en"));
    {
        int64_t ids[16];
        double sc[16];
        size_t n = 0;
        CHECK(fts && modattn__store_keyword_topk(s, fts, 16, NULL, ids, sc, &n) == 0 && n == 1); /* the café alone */
        modattn_store_chunk ch;
        CHECK(n == 1 && modattn__store_get_chunk(s, ids[0], &ch) == 0 && strstr(ch.text, "café") != NULL);
        if (n == 1) modattn__store_chunk_clear(&ch);
        /* the stop words count in its score: above the same query without them */
        char *bare = query(s, "coffee shop close Sunday", &info);
        double sc2[16];
        size_t n2 = 0;
        CHECK(bare && modattn__store_keyword_topk(s, bare, 16, NULL, ids, sc2, &n2) == 0 && n2 == 1 && sc[0] > sc2[0]);
        modattn_free(bare);
    }
    CHECK_MSG(strcmp(info.fixes, "close \xe2\x86\x92 close*, Sunday \xe2\x86\x92 sunday*") == 0, "[%s]", info.fixes);
    modattn_free(fts);
    modattn_free(marks);
    /* only stop words: kept (keyword mode still finds by them) and said */
    fts = query(s, "on the when", &info);
    CHECK(info.weak_only && info.kept >= 1 && fts && fts[0]);
    modattn_free(fts);
    /* a stop word beside a word that carries information */
    fts = query(s, "the tree", &info);
    CHECK_MSG(fts && strcmp(fts, "\"tree\"") == 0, "[%s]", fts ? fts : "");
    modattn_free(fts);
    /* a typo, nothing else in the query: its nearest word in the store */
    fts = query(s, "recursivly", &info);
    CHECK_MSG(fts && strcmp(fts, "\"recursively\"") == 0, "[%s]", fts ? fts : "");
    CHECK_MSG(strcmp(info.fixes, "recursivly \xe2\x86\x92 recursively") == 0, "[%s]", info.fixes);
    best(s, fts, top, sizeof top);
    CHECK(strstr(top, "recursively") != NULL);
    modattn_free(fts);
    /* a prefix of words the store holds, typed or written with a star */
    fts = query(s, "recurs", &info);
    CHECK_MSG(fts && strcmp(fts, "\"recurs\"*") == 0 && strstr(info.fixes, "recurs \xe2\x86\x92 recurs*"), "[%s] [%s]",
              fts ? fts : "", info.fixes);
    int64_t ids[4];
    double sc[4];
    size_t n = 0;
    CHECK(fts && modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n) == 0 && n == 2); /* recursively, recursion */
    modattn_free(fts);
    fts = query(s, "recurs* depth", &info);
    CHECK_MSG(fts && strcmp(fts, "\"recurs\"* OR \"depth\"") == 0, "[%s]", fts ? fts : "");
    best(s, fts, top, sizeof top);
    CHECK(strstr(top, "recursion depth") != NULL);
    modattn_free(fts);
    /* a star after fewer than 3 letters is no prefix (it would read much of the index) */
    fts = query(s, "re*", &info);
    CHECK_MSG(fts && strcmp(fts, "\"re*\"") == 0, "[%s]", fts ? fts : "");
    modattn_free(fts);
    /* codes are not spelt: E4022 is not E4021 */
    fts = query(s, "E4022", &info);
    CHECK(fts && strcmp(fts, "\"E4022\"") == 0 && info.fixes[0] == '\0');
    modattn_free(fts);
    /* the same typo beside a word the store holds: not corrected (the held word finds passages) */
    fts = query(s, "cofee roasted", &info);
    CHECK_MSG(fts && strcmp(fts, "\"cofee\" OR \"roasted\"") == 0 && info.fixes[0] == '\0', "[%s]", fts ? fts : "");
    modattn_free(fts);
    fts = query(s, "cofee", &info); /* alone: its nearest word */
    CHECK_MSG(fts && strcmp(fts, "\"coffee\"") == 0, "[%s]", fts ? fts : "");
    modattn_free(fts);
    /* hostile words: long, starred, quoted, accented typos, invalid UTF-8: a query FTS5 accepts */
    {
        char longw[600];
        memset(longw, 'r', sizeof longw - 1);
        longw[sizeof longw - 1] = '\0';
        static const char *const hostile[] = {"*", "a*", "**recurs**", "\"recurs\"*", "recurs*\"", "caf\xc3\xa9" "e",
                                              "r\xc3\xa9" "cursivly", "\xff\xfe recursivly", "the* on*", "((recurs",
                                              "recurs* AND", "\xe2\x86\x92 \xe2\x86\x92", "NEAR(recurs*"};
        for (size_t i = 0; i <= sizeof hostile / sizeof *hostile; i++) {
            const char *h = i < sizeof hostile / sizeof *hostile ? hostile[i] : longw;
            char *f = NULL;
            int64_t hid[4];
            double hsc[4];
            size_t hn = 0;
            int st = modattn__store_keyword_query_info(s, h, strlen(h), &f, NULL, &info);
            if (!st) st = modattn__store_keyword_topk(s, f, 4, NULL, hid, hsc, &hn);
            CHECK_MSG(st == 0, "hostile [%.40s] -> [%.80s]: %s", h, f ? f : "", modattn_last_error());
            modattn_free(f);
        }
    }
    /* the public form counts what was left out */
    size_t dropped = 0;
    CHECK(modattn__store_keyword_query(s, "when does the coffee shop close on Sunday", 41, &fts, &dropped) == 0 && dropped == 1);
    modattn_free(fts);
    modattn_store_close(s);
}

/* "(S) AND (ALL)" (stop words scoring among the rows the other words select) through the pruned
 * passes equals the whole query scored row by row (inside a write transaction nothing is pruned),
 * and each score equals FTS5's own bm25() of the row over ALL: the required copies only select. */
static void test_required_pruned(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/req.db", dir);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(path, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return;
    modattn_store_model m = {"m", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &m) == 0);
    float vec[4] = {1, 0, 0, 0};
    uint64_t x = 88172645463325252ull;
    static const char *const stop[] = {"the", "on", "when"};
    CHECK(modattn__store_begin(s) == 0);
    for (int d = 0; d < 40; d++) {
        char p[64];
        snprintf(p, sizeof p, "/r/doc%02d.txt", d);
        modattn_store_doc doc = {.path = p, .hash = (uint64_t)d, .kind = "text", .nchunks = 100};
        CHECK(modattn__store_put_document(s, &doc) == 0);
        for (int c = 0; c < 100; c++) {
            char text[1024];
            size_t o = 0;
            const int words = 10 + c % 30;
            for (int w = 0; w < words; w++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                const unsigned r = (unsigned)(x % 1000);
                if (r < 15) o += (size_t)snprintf(text + o, sizeof text - o, "%s ", stop[(x >> 20) % 3]);
                else if (r < 600) o += (size_t)snprintf(text + o, sizeof text - o, "common%u ", r % 8);
                else if (r < 900) o += (size_t)snprintf(text + o, sizeof text - o, "mid%u ", (unsigned)(x >> 20) % 40);
                else o += (size_t)snprintf(text + o, sizeof text - o, "rare%u ", (unsigned)(x >> 20) % 700);
            }
            modattn_store_chunk_in ch = {c, 0, (int64_t)o, 1, 0, words, text, o};
            CHECK(modattn__store_put_chunk(s, doc.id, &ch, vec, 4) == 0);
        }
    }
    CHECK(modattn__store_commit(s) == 0);
    static const char *const qs[] = {"rare5 the mid3 on common1 when", "when rare17 mid8 mid9 the"};
    for (size_t qi = 0; qi < 2; qi++) {
        char *fts = NULL, *all = NULL;
        modattn__kw_query_info info;
        CHECK(modattn__store_keyword_query_info(s, qs[qi], strlen(qs[qi]), &fts, NULL, &info) == 0 && fts);
        CHECK_MSG(fts && fts[0] == '(' && info.stop == (qi == 0 ? 3u : 2u), "[%s] stop %zu", fts ? fts : "", info.stop);
        if (!fts || fts[0] != '(') continue;
        all = strstr(fts, ") AND (") + 7; /* ALL, with its closing parenthesis */
        const size_t pruned = modattn__store_kw_pruned(s);
        int64_t ids[10], ids2[10];
        double sc[10], sc2[10];
        size_t n = 0, n2 = 0;
        CHECK(modattn__store_keyword_topk(s, fts, 10, NULL, ids, sc, &n) == 0 && n == 10);
        CHECK_MSG(modattn__store_kw_pruned(s) > pruned, "query %zu was not pruned", qi);
        CHECK(modattn__store_begin(s) == 0);
        CHECK(modattn__store_keyword_topk(s, fts, 10, NULL, ids2, sc2, &n2) == 0 && n2 == n);
        modattn__store_rollback(s);
        sqlite3_stmt *q = NULL;
        CHECK(sqlite3_prepare_v2(modattn__store_db(s), "SELECT -bm25(chunks_fts, 1.0, 0.5) FROM chunks_fts WHERE chunks_fts "
                                 "MATCH ?1 AND rowid = ?2", -1, &q, NULL) == SQLITE_OK);
        char allq[2048];
        snprintf(allq, sizeof allq, "%.*s", (int)(strlen(all) - 1), all);
        for (size_t j = 0; j < n && j < n2; j++) {
            CHECK_MSG(ids[j] == ids2[j] && sc[j] == sc2[j], "query %zu #%zu: pruned %lld %.17g, whole %lld %.17g", qi, j,
                      (long long)ids[j], sc[j], (long long)ids2[j], sc2[j]);
            sqlite3_reset(q);
            sqlite3_bind_text(q, 1, allq, -1, SQLITE_STATIC);
            sqlite3_bind_int64(q, 2, ids[j]);
            CHECK(sqlite3_step(q) == SQLITE_ROW && sqlite3_column_double(q, 0) == sc[j]);
        }
        sqlite3_finalize(q);
        modattn_free(fts);
    }
    modattn_store_close(s);
}

int main(void) {
    if (modattn__stopword_languages() == 0) {
        printf("not available here: built without stop-word lists (liblingua-stopwords-perl: make deps)\n");
        return 77;
    }
    char dir[] = "/tmp/modattn-search-trust-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_lists();
    test_queries(dir);
    test_required_pruned(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_search_trust");
}
