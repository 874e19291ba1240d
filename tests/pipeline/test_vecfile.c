/* tests/pipeline/test_vecfile.c — the vector file beside a store: written whole, mapped without a
 * copy, equal row for row to the store's vectors; appended to as the store changes (new rows as
 * segments, removed chunks' rows masked, replaced documents whose chunk ids are reused), compacted
 * when a quarter is masked or the segments are used up, always agreeing with the store's own
 * results; every way it can be wrong (missing, truncated, extended by a torn append, bad magic,
 * version, header, id or mask damage, another model, a store changed since, random header bytes)
 * detected at open, the vectors then from the store, a search's results never changed. A schema-1
 * store migrated; a read-only folder: the write fails with the reason, the search reads the store. */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <errno.h>

#include "modattn/core.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "test_util.h"

#define DIM 24
static char g_db[512], g_vec[600];

static uint64_t g_rng = 12345;
static float rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void add_doc(modattn_store *s, const char *path, int nchunks) {
    modattn_store_doc d;
    memset(&d, 0, sizeof d);
    d.path = path, d.kind = "text", d.nchunks = nchunks, d.chunk_tokens = 64, d.overlap = 8;
    CHECK(modattn__store_begin(s) == 0);
    CHECK(modattn__store_put_document(s, &d) == 0);
    for (int c = 0; c < nchunks; c++) {
        float v[DIM];
        for (int k = 0; k < DIM; k++) v[k] = rnd();
        modattn__vec_normalize(v, DIM);
        modattn_store_chunk_in ci = {c, c * 10, c * 10 + 10, c + 1, 0, 5, "chunk", 5};
        CHECK(modattn__store_put_chunk(s, d.id, &ci, v, DIM) == 0);
    }
    CHECK(modattn__store_commit(s) == 0);
}

static float g_q[DIM]; /* the query of top5 */

/* Top 5 of the query g_q over the vectors the store hands a search: the ids and scores. */
static void top5(modattn_store *s, int64_t ids[5], float sc[5], bool *mapped, char *note, size_t nlen) {
    modattn_store_vectors v;
    memset(ids, 0, 5 * sizeof *ids);
    CHECK(modattn__store_open_vectors(s, &v) == 0);
    *mapped = v.map != NULL;
    snprintf(note, nlen, "%s", v.note);
    size_t n = 0;
    CHECK(modattn__store_vectors_topk(&v, g_q, 5, NULL, ids, sc, &n) == 0 && n == 5);
    modattn__store_vectors_free(&v);
}

/* The same from the store itself (the source of truth). */
static void top5_store(modattn_store *s, int64_t ids[5], float sc[5]) {
    modattn_store_vectors v;
    memset(ids, 0, 5 * sizeof *ids);
    CHECK(modattn__store_load_vectors(s, &v) == 0);
    size_t n = 0;
    CHECK(modattn__store_vectors_topk(&v, g_q, 5, NULL, ids, sc, &n) == 0 && n == 5);
    modattn__store_vectors_free(&v);
}

static void fixed_query(void) {
    for (int k = 0; k < DIM; k++) g_q[k] = (float)(k % 5) - 2.0f;
}

/* The file is current, mapped, and gives the store's top 5 for g_q. */
static void check_agrees(modattn_store *s, const char *when) {
    int64_t a[5], b[5];
    float x[5], y[5];
    bool mapped;
    char note[320];
    top5(s, a, x, &mapped, note, sizeof note);
    top5_store(s, b, y);
    CHECK_MSG(mapped, "%s: not mapped: %s", when, note);
    CHECK_MSG(memcmp(a, b, sizeof a) == 0 && memcmp(x, y, sizeof x) == 0, "%s: results differ from the store's", when);
}

/* MODATTN_VECFILE_SEEDS=DIR: copies the file at this point to DIR/name (the fuzz corpus,
 * fuzz/corpus/vecfile, is made this way). */
static void seed(const char *name) {
    const char *dir = getenv("MODATTN_VECFILE_SEEDS");
    if (!dir) return;
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/%s'", g_vec, dir, name);
    CHECK(system(cmd) == 0);
}

static void patch(uint64_t off, const void *bytes, size_t n) {
    int fd = open(g_vec, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, bytes, n, (off_t)off) == (ssize_t)n);
    if (fd >= 0) close(fd);
}

static char *slurp(size_t *len) {
    FILE *f = fopen(g_vec, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*len);
    if (b && fread(b, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return b;
}

static void restore(const char *b, size_t len) {
    FILE *f = fopen(g_vec, "wb");
    CHECK(f && fwrite(b, 1, len, f) == len);
    if (f) fclose(f);
}

/* Random high bytes at random offsets in [span/2, span) of the header's fields, one at a time over
 * the file held in good: never mapped unless the header is whole, never other results. */
static void random_header_bytes(modattn_store *s, const char *good, size_t len, double span, int iters,
                                const int64_t ref_ids[5], const float ref_sc[5], const char *what) {
    int64_t ids[5];
    float sc[5];
    bool mapped;
    char note[320];
    for (int it = 0; it < iters; it++) {
        restore(good, len);
        unsigned char b = (unsigned char)(rnd() * 127 + 128);
        uint64_t off = (uint64_t)((rnd() * 0.5 + 0.5) * span);
        patch(off, &b, 1);
        top5(s, ids, sc, &mapped, note, sizeof note);
        CHECK_MSG(memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0,
                  "%s, header byte %llu = %u: results changed (mapped %d)", what, (unsigned long long)off, b, mapped);
        if (mapped && good[off] != (char)b) CHECK_MSG(0, "%s: header byte %llu changed and still mapped", what, (unsigned long long)off);
    }
    restore(good, len);
}


int main(void) {
    char dir[] = "/tmp/modattn-vecfile-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    snprintf(g_db, sizeof g_db, "%s/v.db", dir);
    snprintf(g_vec, sizeof g_vec, "%s.vec", g_db);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(g_db, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return test_finish("test_vecfile");
    modattn_store_model m = {"vec-model", "00112233445566aa", DIM, NULL, NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &m) == 0);
    uint64_t g0 = 99, g1 = 0;
    CHECK(modattn_store_generation(s, &g0) == 0 && g0 == 0);
    /* an empty store's file: current, no rows */
    CHECK(modattn__store_write_vector_file(s) == 0);
    {
        modattn_store_vectors v;
        CHECK(modattn__store_open_vectors(s, &v) == 0 && v.map && v.n == 0 && v.nseg == 0);
        modattn__store_vectors_free(&v);
    }
    seed("empty");
    CHECK(unlink(g_vec) == 0);
    for (int d = 0; d < 40; d++) {
        char p[64];
        snprintf(p, sizeof p, "/docs/d%02d.txt", d);
        add_doc(s, p, 1 + d % 7);
    }
    CHECK(modattn_store_generation(s, &g1) == 0 && g1 == 40); /* one per changing transaction */

    /* no file yet: the store, and why */
    char why[320];
    CHECK(modattn__store_vector_file_current(s, why, sizeof why) == 0 && strstr(why, "No such file"));
    int64_t ref_ids[5], ids[5];
    float ref_sc[5], sc[5];
    bool mapped;
    char note[320];
    fixed_query();
    top5(s, ref_ids, ref_sc, &mapped, note, sizeof note);
    CHECK(!mapped && strstr(note, "No such file"));

    /* written: mapped, the same rows as the store's, the same top 5 */
    CHECK(modattn__store_write_vector_file(s) == 0);
    CHECK(modattn__store_vector_file_current(s, why, sizeof why) == 1);
    seed("one_segment");
    {
        modattn_store_vectors a, b;
        CHECK(modattn__store_open_vectors(s, &a) == 0 && a.map && !a.note[0]);
        CHECK(modattn__store_load_vectors(s, &b) == 0 && !b.map);
        CHECK(a.n == b.n && a.n == 155 && a.dim == DIM && a.ld == b.ld && ((uintptr_t)a.data % 64) == 0);
        CHECK(memcmp(a.chunk_ids, b.chunk_ids, a.n * 8) == 0 && memcmp(a.data, b.data, a.n * a.ld * 4) == 0);
        modattn__store_vectors_free(&a);
        modattn__store_vectors_free(&b);
    }
    top5(s, ids, sc, &mapped, note, sizeof note);
    CHECK(mapped && memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0);

    /* every damage: detected, the store's vectors used, the same results */
    size_t len = 0;
    char *good = slurp(&len);
    CHECK(good && len > 4096);
    struct { const char *what, *needle; uint64_t off; const char *bytes; size_t n; int trunc; } cases[] = {
        {"bad magic", "bad magic", 0, "X", 1, 0},
        {"version", "version 9", 8, "\x09", 1, 0},
        {"header byte", "checksum", 200, "\x7f", 1, 0},
        {"chunk id", "chunk ids are damaged", 4096 + 155 * 32 * 4 + 8 * 3, "\x55", 1, 0},
        {"truncated", "truncated", 0, NULL, 0, -7},
        {"extended", "truncated or extended", 0, NULL, 0, 64},
        {"too short", "shorter than its header", 0, NULL, 0, -100000},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        restore(good, len);
        if (cases[c].bytes) patch(cases[c].off, cases[c].bytes, cases[c].n);
        if (cases[c].trunc) {
            long nl = (long)len + cases[c].trunc;
            CHECK(truncate(g_vec, nl < 100 ? 100 : nl) == 0);
        }
        top5(s, ids, sc, &mapped, note, sizeof note);
        CHECK_MSG(!mapped && strstr(note, cases[c].needle), "%s: mapped %d, note '%s'", cases[c].what, mapped, note);
        CHECK_MSG(memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0, "%s: results changed",
                  cases[c].what);
    }
    random_header_bytes(s, good, len, 511, 300, ref_ids, ref_sc, "whole file");
    CHECK(modattn__store_vector_file_current(s, why, sizeof why) == 1);

    /* the store changes: the file is stale until brought up to date; by an append that masks a
     * deleted document's rows, which never show */
    CHECK(modattn_store_delete_document(s, "/docs/d00.txt") == 1);
    top5(s, ids, sc, &mapped, note, sizeof note);
    CHECK(!mapped && strstr(note, "stale"));
    {
        modattn_store_vectors v;
        CHECK(modattn__store_open_vectors(s, &v) == 0 && v.n == 154); /* d00 had 1 chunk */
        modattn__store_vectors_free(&v);
    }
    modattn_vecfile_update u;
    CHECK(modattn_store_update_vector_file(s, &u) == 0 && u.action == MODATTN_VECFILE_APPENDED &&
          u.rows_added == 0 && u.rows_masked == 1);
    {
        modattn_store_vectors v;
        CHECK(modattn__store_open_vectors(s, &v) == 0 && v.map && v.n == 154 && v.rows == 155 && v.masked == 1 &&
              v.mask && v.nseg == 1);
        /* the deleted chunk's own vector as the query: the store no longer has it, nor does the file */
        for (size_t r = 0; r < v.rows; r++)
            if (v.mask[r >> 3] >> (r & 7) & 1) memcpy(g_q, v.data + r * v.ld, sizeof g_q);
        modattn__store_vectors_free(&v);
    }
    check_agrees(s, "after a deletion");
    seed("masked");
    fixed_query();
    CHECK(modattn_store_update_vector_file(s, &u) == 0 && u.action == MODATTN_VECFILE_CURRENT);

    /* appends: new documents, a changed one (its chunk ids reused: it had the highest), a
     * deleted one; each time the file is appended to and agrees with the store */
    for (int round = 0; round < 6; round++) {
        char p[64];
        snprintf(p, sizeof p, "/docs/new%02d.txt", round);
        add_doc(s, p, 3 + round);
        add_doc(s, p, 2 + round); /* replaced at once: the same ids again, other vectors */
        if (round % 2) {
            snprintf(p, sizeof p, "/docs/d%02d.txt", 10 + round);
            CHECK(modattn_store_delete_document(s, p) == 1);
        }
        CHECK_MSG(modattn_store_update_vector_file(s, &u) == 0 && u.action == MODATTN_VECFILE_APPENDED &&
                  u.rows_added == (size_t)(2 + round), "round %d: action %d, added %zu, reason '%s'", round,
                  (int)u.action, u.rows_added, u.reason);
        char when[64];
        snprintf(when, sizeof when, "append round %d", round);
        check_agrees(s, when);
        /* query with each new row's own vector: it is found first */
        modattn_store_vectors v;
        CHECK(modattn__store_open_vectors(s, &v) == 0 && v.nseg == (size_t)round + 2);
        const modattn_store_vector_segment *g = &v.seg[v.nseg - 1];
        memcpy(g_q, g->data, sizeof g_q);
        int64_t top[5];
        float tsc[5];
        size_t n = 0;
        CHECK(modattn__store_vectors_topk(&v, g_q, 5, NULL, top, tsc, &n) == 0 && n == 5 && top[0] == g->chunk_ids[0]);
        modattn__store_vectors_free(&v);
        check_agrees(s, "own-vector query");
        fixed_query();
    }
    /* damage to an appended file: each part detected */
    {
        size_t alen = 0;
        char *app = slurp(&alen);
        seed("seven_segments");
        modattn_store_vectors v;
        CHECK(modattn__store_open_vectors(s, &v) == 0 && v.map && v.masked > 0);
        const uint64_t mask_off = (uint64_t)((const unsigned char *)v.mask - (const unsigned char *)v.map);
        const uint64_t ids2 = (uint64_t)((const char *)(const void *)v.seg[2].chunk_ids - (const char *)v.map);
        modattn__store_vectors_free(&v);
        struct { const char *what, *needle; uint64_t off; } dmg[] = {
            {"mask byte", "mask is damaged", mask_off},
            {"segment 2 id", "chunk ids are damaged", ids2 + 3},
        };
        for (size_t c = 0; c < 2; c++) {
            restore(app, alen);
            unsigned char b = (unsigned char)(app[dmg[c].off] ^ 0x10);
            patch(dmg[c].off, &b, 1);
            top5(s, ids, sc, &mapped, note, sizeof note);
            top5_store(s, ref_ids, ref_sc);
            CHECK_MSG(!mapped && strstr(note, dmg[c].needle), "%s: mapped %d, note '%s'", dmg[c].what, mapped, note);
            CHECK(memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0);
        }
        random_header_bytes(s, app, alen, 799, 400, ref_ids, ref_sc, "appended file");
        /* a kill in the middle of an append: bytes past what the header names */
        restore(app, alen);
        {
            int fd = open(g_vec, O_WRONLY | O_APPEND);
            CHECK(fd >= 0 && write(fd, app + 4096, 1000) == 1000);
            if (fd >= 0) close(fd);
        }
        top5(s, ids, sc, &mapped, note, sizeof note);
        CHECK(!mapped && strstr(note, "extended"));
        add_doc(s, "/docs/after-kill.txt", 2);
        CHECK(modattn_store_update_vector_file(s, &u) == 0 && u.action == MODATTN_VECFILE_REWRITTEN &&
              strstr(u.reason, "extended"));
        check_agrees(s, "after a torn append");
        /* a file of format version 1 (before masks): rewritten, never appended to */
        add_doc(s, "/docs/v1.txt", 2);
        patch(8, "\x01", 1);
        CHECK(modattn_store_update_vector_file(s, &u) == 0 && u.action == MODATTN_VECFILE_REWRITTEN &&
              strstr(u.reason, "version 1"));
        check_agrees(s, "after a version-1 file");
        free(app);
    }
    /* compaction: more than a quarter of the rows removed, or the segments all used */
    {
        for (int d = 1; d < 30; d++) {
            char p[64];
            snprintf(p, sizeof p, "/docs/d%02d.txt", d);
            modattn_store_delete_document(s, p);
            if (d == 3) {
                CHECK(modattn_store_update_vector_file(s, &u) == 0 && u.action == MODATTN_VECFILE_APPENDED);
                check_agrees(s, "a few deletions");
            }
        }
        CHECK(modattn_store_update_vector_file(s, &u) == 0 && u.action == MODATTN_VECFILE_REWRITTEN &&
              strstr(u.reason, "compacting") && strstr(u.reason, "removed"));
        modattn_store_vectors v;
        CHECK(modattn__store_open_vectors(s, &v) == 0 && v.map && v.nseg == 1 && v.masked == 0 && !v.mask);
        modattn__store_vectors_free(&v);
        check_agrees(s, "after compaction");
        int rewrites = 0, appends = 0;
        for (int i = 0; i < MODATTN_VEC_MAX_SEGMENTS + 2; i++) {
            char p[64];
            snprintf(p, sizeof p, "/docs/seg%02d.txt", i);
            add_doc(s, p, 1);
            CHECK(modattn_store_update_vector_file(s, &u) == 0);
            if (u.action == MODATTN_VECFILE_REWRITTEN) {
                rewrites++;
                CHECK_MSG(strstr(u.reason, "appends"), "reason '%s'", u.reason);
            } else if (u.action == MODATTN_VECFILE_APPENDED) {
                appends++;
            }
            check_agrees(s, "segments");
        }
        CHECK_MSG(rewrites == 1 && appends == MODATTN_VEC_MAX_SEGMENTS + 1, "%d rewrites, %d appends", rewrites, appends);
    }

    /* another model's file */
    {
        char other[512];
        snprintf(other, sizeof other, "%s/w.db", dir);
        modattn_store *o = NULL;
        CHECK(modattn_store_open(other, MODATTN_STORE_CREATE, &o) == 0);
        modattn_store_model om = {"other-model", "ffeeddccbbaa9988", DIM, NULL, NULL, NULL, NULL};
        if (o) {
            CHECK(modattn__store_bind_model(o, &om) == 0);
            add_doc(o, "/o.txt", 2);
            CHECK(modattn__store_write_vector_file(o) == 0);
            modattn_store_close(o);
        }
        char ov[600];
        snprintf(ov, sizeof ov, "%s.vec", other);
        CHECK(rename(ov, g_vec) == 0);
        CHECK(modattn__store_vector_file_current(s, why, sizeof why) == 0 && strstr(why, "other-model"));
    }

    /* a schema-1 store (before embeddings carried their generation, before the keyword index): read
     * as it is when opened read-only, migrated to 3 when opened for writing, its old-format file
     * rewritten, then appended to */
    {
        char old[512];
        snprintf(old, sizeof old, "%s/old.db", dir);
        modattn_store *o = NULL;
        CHECK(modattn_store_open(old, MODATTN_STORE_CREATE, &o) == 0);
        if (o) {
            CHECK(modattn__store_bind_model(o, &m) == 0);
            add_doc(o, "/old/a.txt", 3);
            add_doc(o, "/old/b.txt", 4);
            add_doc(o, "/old/b2.txt", 5);
            add_doc(o, "/old/b3.txt", 6);
            modattn_store_close(o);
        }
        sqlite3 *db = NULL;
        CHECK(sqlite3_open(old, &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db, "DROP TRIGGER chunks_fts_insert; DROP TRIGGER chunks_fts_delete; DROP TABLE chunks_fts; "
                           "DROP INDEX embeddings_generation; ALTER TABLE embeddings DROP COLUMN generation; "
                           "PRAGMA user_version = 1", NULL, NULL, NULL) == SQLITE_OK);
        sqlite3_close(db);
        o = NULL;
        CHECK(modattn_store_open(old, MODATTN_STORE_READONLY, &o) == 0);
        if (o) {
            modattn_store_vectors v;
            CHECK(modattn__store_load_vectors(o, &v) == 0 && v.n == 18);
            modattn__store_vectors_free(&v);
            modattn_store_close(o);
        }
        o = NULL;
        CHECK(modattn_store_open(old, 0, &o) == 0);
        if (o) {
            db = NULL;
            sqlite3_stmt *q = NULL;
            CHECK(sqlite3_open(old, &db) == SQLITE_OK &&
                  sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK &&
                  sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 3);
            sqlite3_finalize(q);
            q = NULL; /* migrated in one step to 3: the keyword index holds every chunk */
            CHECK(sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM chunks_fts) = (SELECT count(*) FROM chunks)",
                                     -1, &q, NULL) == SQLITE_OK &&
                  sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 1);
            sqlite3_finalize(q);
            sqlite3_close(db);
            modattn_vecfile_update ou;
            CHECK(modattn_store_update_vector_file(o, &ou) == 0 && ou.action == MODATTN_VECFILE_REWRITTEN);
            add_doc(o, "/old/c.txt", 2);
            CHECK(modattn_store_delete_document(o, "/old/a.txt") == 1);
            CHECK(modattn_store_update_vector_file(o, &ou) == 0 && ou.action == MODATTN_VECFILE_APPENDED &&
                  ou.rows_added == 2 && ou.rows_masked == 3);
            int64_t a[5], b[5];
            float x[5], y[5];
            bool mp;
            char nt[320];
            top5(o, a, x, &mp, nt, sizeof nt);
            top5_store(o, b, y);
            CHECK(mp && memcmp(a, b, sizeof a) == 0 && memcmp(x, y, sizeof x) == 0);
            modattn_store_close(o);
        }
    }

    /* a read-only folder: the write fails and says why; the search reads the store. As root,
     * permissions do not apply: the checks run in a child that drops to user nobody. */
    CHECK(modattn__store_write_vector_file(s) == 0);
    add_doc(s, "/docs/ro.txt", 2); /* the file is now stale */
    top5_store(s, ref_ids, ref_sc);
    {
        char f[700];
        static const char *const sfx[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            snprintf(f, sizeof f, "%s%s", g_db, sfx[i]);
            CHECK(chmod(f, 0666) == 0);
        }
        CHECK(chmod(g_vec, 0644) == 0 && chmod(dir, 0555) == 0);
        pid_t pid = geteuid() == 0 ? fork() : 0;
        if (pid == 0) {
            if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(100);
            modattn_store *r = NULL;
            CHECK(modattn_store_open(g_db, 0, &r) == 0);
            if (r) {
                CHECK_ERR(modattn__store_write_vector_file(r), MODATTN_EIO, "cannot write the vector file");
                CHECK(strstr(modattn_last_error(), "Permission denied") != NULL);
                modattn_vecfile_update ru;
                CHECK_ERR(modattn_store_update_vector_file(r, &ru), MODATTN_EIO, "Permission denied");
                top5(r, ids, sc, &mapped, note, sizeof note);
                CHECK(!mapped && strstr(note, "stale"));
                CHECK(memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0);
                modattn_store_close(r);
            }
            if (geteuid() != 0 && getuid() == 65534) _exit(t_fail > 100 ? 100 : t_fail);
        } else if (pid > 0) {
            int wst = 0;
            CHECK(waitpid(pid, &wst, 0) == pid);
            /* the child's checks ran as nobody and it exits with how many failed: one check here */
            CHECK_MSG(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "read-only folder (as nobody): status %d", wst);
        } else {
            CHECK_MSG(0, "fork: %s", strerror(errno));
        }
        CHECK(chmod(dir, 0755) == 0);
    }
    free(good);
    modattn_store_close(s);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return test_finish("test_vecfile");
}
