/* tests/pipeline/test_index_overlap.c — the indexer's pipeline (pipeline/indexer.c: a batch embeds
 * on a thread of its own while the run reads, extracts, chunks the next files and writes the
 * documents the batch before completed) makes the store a run without overlap makes, bit for bit:
 *   - a folder of documents of every size (one chunk, many, a document spread over several
 *     batches, batches spread over several documents: --batch 5 with 24-token chunks), an empty
 *     file, a binary file, ill-formed UTF-8 and a small HTML page, indexed in one run, against
 *     the same files indexed one document at a time (a run per file, so no batch is ever shared and
 *     nothing overlaps): the same documents in the same order (ids), the same chunks (ids, byte
 *     ranges, lines, texts, word-piece counts) and every vector's every bit;
 *   - under a memory budget (the run takes turns with the model): the same store;
 *   - a run stopped by opt->cancel part way (at each of several moments; batches of 20 chunks, so
 *     that a stop can cut one between its slices): every document in the store is whole, in the run's order; the next run completes it, and the store is again that
 *     same store;
 *   - no index memory left in use afterwards (the second batch, the queue, the embedder's job).
 * Needs the model of `make model` (all-MiniLM-L6-v2; fails, does not skip, without it). */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/store.h"
#include "test_util.h"

#define MINILM ".models/all-MiniLM-L6-v2"

static char g_dir[64], g_docs[96];

static const char *k_words[] = {"river", "lantern", "granite", "orchard", "compass", "harbor", "meadow", "violin",
                                "thunder", "pepper", "glacier", "library", "saddle", "comet", "basket", "whistle"};

static void write_bytes(const char *name, const char *data, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_docs, name);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* a text of about `words` words, lines of 12, made from seed */
static void write_text(const char *name, int words, unsigned seed) {
    size_t cap = (size_t)words * 12 + 64, o = 0;
    char *t = malloc(cap);
    for (int i = 0; i < words; i++) {
        seed = seed * 1103515245u + 12345u;
        o += (size_t)snprintf(t + o, cap - o, "%s%s", k_words[(seed >> 16) % 16], (i + 1) % 12 ? " " : ".\n");
    }
    write_bytes(name, t, o);
    free(t);
}

static void make_docs(void) {
    write_text("a-one-chunk.txt", 8, 1);
    write_text("b-long.txt", 400, 2); /* ~25 chunks: spread over several batches */
    write_text("c-two.md", 30, 3);
    write_bytes("d-empty.txt", "", 0);
    write_text("e-three.txt", 50, 4);
    static const char bin[] = "\x7f" "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0\x01\0\0\0";
    write_bytes("f-binary.bin", bin, sizeof bin - 1);
    static const char bad[] = "caf\xc3 au lait \xff\xfe near the harbor, then the meadow and the violin.\n";
    write_bytes("g-bad-utf8.txt", bad, sizeof bad - 1);
    static const char html[] = "<html><head><title>Comets</title></head><body><h1>Comets</h1><p>A comet crosses "
                               "the sky over the glacier; the library keeps its records.</p><p>Thunder over the "
                               "orchard, pepper in the basket.</p></body></html>";
    write_bytes("h-page.html", html, sizeof html - 1);
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof name, "i-small-%d.txt", i);
        write_text(name, 10 + 7 * i, 10u + (unsigned)i);
    }
    write_text("j-long.txt", 260, 5);
}

static modattn_index_options options(size_t batch) {
    modattn_index_options o;
    memset(&o, 0, sizeof o);
    o.overlap = 4;
    o.chunk_tokens = 26; /* 24 word pieces a chunk: many chunks from little text */
    o.batch_chunks = batch;
    return o;
}

static int index_into(const char *db, const char *const *paths, size_t n, const modattn_index_options *o,
                      modattn_model *m, modattn_index_stats *stats) {
    modattn_store *s = NULL;
    int rc = modattn_store_open(db, MODATTN_STORE_CREATE, &s);
    CHECK_MSG(rc == 0, "open %s: %s", db, modattn_last_error());
    if (rc) return rc;
    rc = modattn_index_paths(s, m, paths, n, o, stats);
    modattn_store_close(s);
    return rc;
}

/* Every document, chunk and vector of a store, in id order, as bytes (indexed_at left out). */
typedef struct dump {
    char *buf;
    size_t len, cap;
    int docs, chunks;
} dump;

static void put(dump *d, const void *p, size_t n) {
    if (d->len + n + 8 > d->cap) {
        d->cap = (d->len + n + 8) * 2;
        d->buf = realloc(d->buf, d->cap);
    }
    uint64_t len = n;
    memcpy(d->buf + d->len, &len, 8);
    memcpy(d->buf + d->len + 8, p, n);
    d->len += n + 8;
}

static void dump_query(dump *d, sqlite3 *db, const char *sql, int *count) {
    sqlite3_stmt *st = NULL;
    CHECK_MSG(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        (*count)++;
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const void *p = sqlite3_column_blob(st, i);
            put(d, p ? p : "", (size_t)sqlite3_column_bytes(st, i));
        }
    }
    sqlite3_finalize(st);
}

static dump dump_store(const char *path) {
    dump d = {0};
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    dump_query(&d, db, "SELECT id, path, hash, mtime_ns, size, kind, chunk_tokens, overlap, nchunks FROM documents ORDER BY id",
               &d.docs);
    dump_query(&d, db,
               "SELECT c.id, c.document, c.seq, c.start_byte, c.end_byte, c.line, c.page, c.ntokens, c.text, e.vector "
               "FROM chunks c JOIN embeddings e ON e.chunk = c.id ORDER BY c.id",
               &d.chunks);
    sqlite3_close(db);
    return d;
}

static bool same_dump(const dump *a, const dump *b) {
    return a->docs == b->docs && a->chunks == b->chunks && a->len == b->len && !memcmp(a->buf, b->buf, a->len);
}

/* every document whole (nchunks chunks with a vector each), the documents' paths in the order of
 * the reference's, a prefix of it */
static void check_whole_prefix(const char *path, const char *ref) {
    sqlite3 *db = NULL, *rdb = NULL;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK(sqlite3_open_v2(ref, &rdb, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *st = NULL, *rs = NULL;
    CHECK(sqlite3_prepare_v2(db,
                             "SELECT d.path, d.nchunks, (SELECT count(*) FROM chunks c JOIN embeddings e ON e.chunk = "
                             "c.id WHERE c.document = d.id) FROM documents d ORDER BY d.id",
                             -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(rdb, "SELECT path FROM documents ORDER BY id", -1, &rs, NULL) == SQLITE_OK);
    while (st && rs && sqlite3_step(st) == SQLITE_ROW) {
        CHECK_MSG(sqlite3_column_int64(st, 1) == sqlite3_column_int64(st, 2), "%s: %lld chunks of %lld",
                  (const char *)sqlite3_column_text(st, 0), (long long)sqlite3_column_int64(st, 2),
                  (long long)sqlite3_column_int64(st, 1));
        bool more = sqlite3_step(rs) == SQLITE_ROW;
        CHECK_MSG(more && !strcmp((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(rs, 0)),
                  "%s out of the run's order", (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_finalize(rs);
    sqlite3_close(db);
    sqlite3_close(rdb);
}

/* a stop asked for once the run has written g_stop_at documents (at the next time the run asks:
 * between files, or while a batch embeds) */
static int g_written, g_stop_at;
static int cancel_at(void *ud) {
    (void)ud;
    return g_written >= g_stop_at;
}
static void count_written(void *ud, modattn_index_event ev, const char *path, const char *msg) {
    (void)ud, (void)path, (void)msg;
    if (ev == MODATTN_INDEX_INDEXED) g_written++;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/modattn_index_overlap_XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_docs, sizeof g_docs, "%s/docs", g_dir);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", g_docs);
    CHECK(system(cmd) == 0);
    make_docs();

    modattn_ctx *ctx = NULL;
    modattn_ctx_options co;
    memset(&co, 0, sizeof co);
    co.threads = 2;
    CHECK(modattn_ctx_create(&co, &ctx) == 0);
    modattn_model *m = NULL;
    CHECK_MSG(ctx && modattn_model_load(ctx, MINILM, &m) == 0, "load %s: %s", MINILM, modattn_last_error());
    if (!m) return test_finish("test_index_overlap");

    /* the files, in the run's (path) order */
    const char *names[] = {"a-one-chunk.txt", "b-long.txt", "c-two.md", "d-empty.txt", "e-three.txt", "f-binary.bin",
                           "g-bad-utf8.txt", "h-page.html", "i-small-0.txt", "i-small-1.txt", "i-small-2.txt",
                           "i-small-3.txt", "i-small-4.txt", "i-small-5.txt", "j-long.txt"};
    const size_t nfiles = sizeof names / sizeof *names;
    char *files[32];
    for (size_t i = 0; i < nfiles; i++) {
        files[i] = malloc(200);
        snprintf(files[i], 200, "%s/%s", g_docs, names[i]);
    }
    qsort(files, nfiles, sizeof *files, cmp_str);

    char one[128], piped[128], budget[128], stopped[128];
    snprintf(one, sizeof one, "%s/one.db", g_dir);
    snprintf(piped, sizeof piped, "%s/piped.db", g_dir);
    snprintf(budget, sizeof budget, "%s/budget.db", g_dir);
    const char *docs[1] = {g_docs};
    modattn_index_stats stats;

    /* one document at a time: a run per file */
    modattn_index_options o1 = options(0);
    for (size_t i = 0; i < nfiles; i++) {
        const char *p[1] = {files[i]};
        CHECK_MSG(index_into(one, p, 1, &o1, m, &stats) == 0, "%s: %s", files[i], modattn_last_error());
    }
    dump ref = dump_store(one);
    CHECK_MSG(ref.docs == 13 && ref.chunks > 40, "one at a time: %d documents, %d chunks", ref.docs, ref.chunks);

    /* the folder in one run, batches of 5 across documents */
    modattn_index_options o5 = options(5);
    CHECK_MSG(index_into(piped, docs, 1, &o5, m, &stats) == 0, "%s", modattn_last_error());
    CHECK_MSG(stats.files_indexed == 13 && stats.files_skipped == 2 && stats.chunks_embedded == (uint64_t)ref.chunks,
              "indexed %llu, skipped %llu, chunks %llu", (unsigned long long)stats.files_indexed,
              (unsigned long long)stats.files_skipped, (unsigned long long)stats.chunks_embedded);
    dump dp = dump_store(piped);
    CHECK_MSG(same_dump(&ref, &dp), "the pipelined run's store differs from one document at a time's "
              "(%d/%d documents, %d/%d chunks)", dp.docs, ref.docs, dp.chunks, ref.chunks);
    free(dp.buf);

    /* under a memory budget (taking turns with the model) */
    modattn_mem_set_budget((int64_t)8 << 30);
    CHECK_MSG(index_into(budget, docs, 1, &o5, m, &stats) == 0, "%s", modattn_last_error());
    modattn_mem_set_budget(0);
    dump db = dump_store(budget);
    CHECK_MSG(same_dump(&ref, &db), "under a memory budget: the store differs");
    free(db.buf);

    /* stopped part way, then resumed */
    const int stops[] = {1, 2, 5, 9};
    for (size_t k = 0; k < sizeof stops / sizeof *stops; k++) {
        snprintf(stopped, sizeof stopped, "%s/stopped-%zu.db", g_dir, k);
        modattn_index_options oc = options(20); /* three slices a batch: a stop can cut one */
        oc.cancel = cancel_at;
        oc.on_event = count_written;
        g_written = 0;
        g_stop_at = stops[k];
        int rc = index_into(stopped, docs, 1, &oc, m, &stats);
        CHECK_MSG(rc == 0 && stats.cancelled, "stop after %d: rc %d, cancelled %d", stops[k], rc, stats.cancelled);
        CHECK_MSG(stats.files_indexed >= (uint64_t)stops[k] && stats.files_indexed < 13, "stop after %d: %llu documents indexed", stops[k],
                  (unsigned long long)stats.files_indexed);
        check_whole_prefix(stopped, one);
        CHECK_MSG(index_into(stopped, docs, 1, &o5, m, &stats) == 0, "%s", modattn_last_error());
        dump ds = dump_store(stopped);
        CHECK_MSG(same_dump(&ref, &ds), "stopped after %d documents and resumed: the store differs", stops[k]);
        free(ds.buf);
    }
    free(ref.buf);

    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    CHECK_MSG(ms.current[MODATTN_MEM_INDEX] == 0, "%lld bytes of index memory still in use",
              (long long)ms.current[MODATTN_MEM_INDEX]);
    CHECK_MSG(ms.current[MODATTN_MEM_ACTIVATIONS] == 0, "%lld bytes of activations still in use",
              (long long)ms.current[MODATTN_MEM_ACTIVATIONS]);
    modattn_model_free(m);
    modattn_ctx_free(ctx);
    for (size_t i = 0; i < nfiles; i++) free(files[i]);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_finish("test_index_overlap");
}
