/* pipeline/store_notes.c — notes on files that are not documents (pipeline/store_notes.h). */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/store.h"
#include "core/internal_status.h"
#include "pipeline/internal_store.h"
#include "pipeline/pipeline_internal.h"
#include "pipeline/store_notes.h"

static const char k_table[] =
    "CREATE TABLE IF NOT EXISTS noted_files(path TEXT PRIMARY KEY, size INTEGER NOT NULL,\n"
    "  mtime_ns INTEGER NOT NULL, hash TEXT NOT NULL, what TEXT NOT NULL, reason TEXT NOT NULL) WITHOUT ROWID";

static int sq_fail(struct modattn_store *s, const char *what) {
    sqlite3 *db = modattn__store_db(s);
    return modattn__error(sqlite3_errcode(db) == SQLITE_NOMEM ? MODATTN_ENOMEM : MODATTN_EIO, "%s: %s: %s",
                         modattn_store_path(s), what, sqlite3_errmsg(db));
}

static bool have_table(struct modattn_store *s, int *st) {
    sqlite3_stmt *q = NULL;
    *st = 0;
    if (sqlite3_prepare_v2(modattn__store_db(s), "SELECT 1 FROM sqlite_master WHERE name = 'noted_files'", -1, &q,
                           NULL) != SQLITE_OK) {
        *st = sq_fail(s, "looking for the notes");
        return false;
    }
    int rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) *st = sq_fail(s, "looking for the notes");
    return rc == SQLITE_ROW;
}

int modattn__note_get(struct modattn_store *s, const char *path, modattn__note *out) {
    memset(out, 0, sizeof *out);
    int st;
    if (!have_table(s, &st)) return st;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(modattn__store_db(s),
                           "SELECT size, mtime_ns, hash, what, reason FROM noted_files WHERE path = ?1", -1, &q,
                           NULL) != SQLITE_OK)
        return sq_fail(s, "reading a note");
    sqlite3_bind_text(q, 1, path, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        out->size = sqlite3_column_int64(q, 0);
        out->mtime_ns = sqlite3_column_int64(q, 1);
        const char *h = (const char *)sqlite3_column_text(q, 2);
        if (h) sscanf(h, "%" SCNx64, &out->hash);
        snprintf(out->what, sizeof out->what, "%s", (const char *)sqlite3_column_text(q, 3));
        snprintf(out->reason, sizeof out->reason, "%s", (const char *)sqlite3_column_text(q, 4));
        st = 1;
    } else if (rc != SQLITE_DONE) {
        st = sq_fail(s, "reading a note");
    }
    sqlite3_finalize(q);
    return st;
}

/* Runs fn inside the caller's transaction, or one of its own. */
static int in_tx(struct modattn_store *s, int (*fn)(struct modattn_store *, const void *), const void *arg) {
    bool own = sqlite3_get_autocommit(modattn__store_db(s)) != 0;
    int st;
    if (own && (st = modattn__store_begin(s))) return st;
    st = fn(s, arg);
    if (own) {
        if (st < 0) modattn__store_rollback(s);
        else {
            int c = modattn__store_commit(s);
            if (c) st = c;
        }
    }
    return st;
}

typedef struct put_arg {
    const char *path;
    const modattn__note *n;
} put_arg;

static int do_put(struct modattn_store *s, const void *arg) {
    const put_arg *a = arg;
    sqlite3 *db = modattn__store_db(s);
    if (sqlite3_exec(db, k_table, NULL, NULL, NULL) != SQLITE_OK) return sq_fail(s, "making the notes table");
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db,
                           "INSERT OR REPLACE INTO noted_files(path, size, mtime_ns, hash, what, reason) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, &q, NULL) != SQLITE_OK)
        return sq_fail(s, "writing a note");
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, a->n->hash);
    sqlite3_bind_text(q, 1, a->path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, a->n->size);
    sqlite3_bind_int64(q, 3, a->n->mtime_ns);
    sqlite3_bind_text(q, 4, hex, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 5, a->n->what, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 6, a->n->reason, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : sq_fail(s, "writing a note");
}

int modattn__note_put(struct modattn_store *s, const char *path, const modattn__note *n) {
    put_arg a = {path, n};
    return in_tx(s, do_put, &a);
}

typedef struct del_arg {
    const char *path;
    int under;
    int64_t n;
} del_arg;

static int do_delete(struct modattn_store *s, const void *arg) {
    del_arg *a = (del_arg *)arg;
    sqlite3 *db = modattn__store_db(s);
    sqlite3_stmt *q = NULL;
    /* byte prefixes (a BLOB compare: no LIKE wildcards, no collation) */
    const char *sql = a->under ? "DELETE FROM noted_files WHERE path = ?1 OR substr(CAST(path AS BLOB), 1, ?2) = "
                                 "CAST(?1 || '/' AS BLOB) OR substr(CAST(path AS BLOB), 1, ?2 + 1) = "
                                 "CAST(?1 || '!/' AS BLOB)"
                               : "DELETE FROM noted_files WHERE path = ?1";
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) return sq_fail(s, "removing a note");
    sqlite3_bind_text(q, 1, a->path, -1, SQLITE_STATIC);
    if (a->under) sqlite3_bind_int64(q, 2, (sqlite3_int64)strlen(a->path) + 1);
    int rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) return sq_fail(s, "removing a note");
    a->n = sqlite3_changes(db);
    return 0;
}

int64_t modattn__note_delete(struct modattn_store *s, const char *path, int under) {
    int st;
    if (!have_table(s, &st)) return st;
    del_arg a = {path, under, 0};
    st = in_tx(s, do_delete, &a);
    return st < 0 ? st : a.n;
}

int modattn__note_each(struct modattn_store *s, int (*fn)(void *ud, const char *path, const char *what), void *ud) {
    int st;
    if (!have_table(s, &st)) return st;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(modattn__store_db(s), "SELECT path, what FROM noted_files ORDER BY path", -1, &q, NULL) !=
        SQLITE_OK)
        return sq_fail(s, "listing the notes");
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(q, 0), *w = (const char *)sqlite3_column_text(q, 1);
        if (p && (st = fn(ud, p, w ? w : "")) != 0) break;
    }
    if (!st && rc != SQLITE_DONE) st = sq_fail(s, "listing the notes");
    sqlite3_finalize(q);
    return st;
}
