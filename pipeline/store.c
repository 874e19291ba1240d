/* pipeline/store.c — the document store on SQLite (schema and guarantees in modattn/store.h).
 *
 * SQLite's own memory goes through modattn__malloc (category "other"), so that --stats and
 * --mem-budget see it, only when the program asks (modattn__store_account_sqlite_memory: it is
 * process-wide, and a library must not change the allocator of an SQLite that others in the
 * process use, e.g. Python's sqlite3 module). Statements
 * are prepared once per store and reset after each use. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/model.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/internal_store.h"
#include "pipeline/pipeline_internal.h"
#include "pipeline/store_ext.h"

/* ------------------------------------------------------------------ SQLite memory */

static void *sq_malloc(int n) { return modattn__malloc((size_t)(n > 0 ? n : 1), MODATTN_MEM_OTHER); }
static void sq_free(void *p) { modattn_free(p); }
static void *sq_realloc(void *p, int n) {
    return modattn__realloc(p, (size_t)(n > 0 ? n : 1), MODATTN_MEM_OTHER);
}
static int sq_size(void *p) { return (int)modattn__mem_block_size(p); }
static int sq_roundup(int n) { return (n + 7) & ~7; }
static int sq_init(void *ud) { (void)ud; return SQLITE_OK; }
static void sq_shutdown(void *ud) { (void)ud; }

static pthread_once_t g_sqlite_once = PTHREAD_ONCE_INIT;
static int g_sqlite_status; /* what the first modattn__store_account_sqlite_memory() found */
static void sqlite_setup(void) {
    static const sqlite3_mem_methods mm = {sq_malloc, sq_free, sq_realloc, sq_size,
                                           sq_roundup, sq_init, sq_shutdown, NULL};
    /* SQLITE_MISUSE when something else in the process initialised SQLite first */
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &mm) != SQLITE_OK) g_sqlite_status = MODATTN_EUNSUPPORTED;
    else if (sqlite3_initialize() != SQLITE_OK) g_sqlite_status = MODATTN_EIO;
}

int modattn__store_account_sqlite_memory(void) {
    pthread_once(&g_sqlite_once, sqlite_setup);
    if (g_sqlite_status == MODATTN_EUNSUPPORTED)
        return modattn__error(g_sqlite_status, "SQLite's memory cannot be counted: SQLite was initialised "
                             "in this process before modattn__store_account_sqlite_memory()");
    if (g_sqlite_status) return modattn__error(g_sqlite_status, "SQLite failed to initialise");
    return 0;
}

/* ------------------------------------------------------------------ the store */

enum {
    ST_FIND_DOC,
    ST_TOUCH_DOC,
    ST_DEL_EMB,
    ST_DEL_CHUNKS,
    ST_DEL_DOC,
    ST_PUT_DOC,
    ST_PUT_CHUNK,
    ST_PUT_EMB,
    ST_GET_CHUNK,
    ST_COUNT
};

static const char *const k_sql[ST_COUNT] = {
    [ST_FIND_DOC] = "SELECT id, hash, mtime_ns, size, chunk_tokens, overlap, nchunks "
                    "FROM documents WHERE path = ?1",
    [ST_TOUCH_DOC] = "UPDATE documents SET mtime_ns = ?2, size = ?3 WHERE id = ?1",
    [ST_DEL_EMB] = "DELETE FROM embeddings WHERE chunk IN "
                   "(SELECT id FROM chunks WHERE document = ?1)",
    [ST_DEL_CHUNKS] = "DELETE FROM chunks WHERE document = ?1",
    [ST_DEL_DOC] = "DELETE FROM documents WHERE id = ?1",
    [ST_PUT_DOC] = "INSERT INTO documents(path, hash, mtime_ns, size, kind, chunk_tokens, overlap, "
                   "nchunks, indexed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [ST_PUT_CHUNK] = "INSERT INTO chunks(document, seq, start_byte, end_byte, line, page, ntokens, "
                     "text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_PUT_EMB] = "INSERT INTO embeddings(chunk, model, vector, generation) VALUES (?1, ?2, ?3, ?4)",
    [ST_GET_CHUNK] = "SELECT c.id, c.document, d.path, d.kind, c.seq, c.start_byte, c.end_byte, "
                     "c.line, c.page, c.ntokens, c.text FROM chunks c JOIN documents d "
                     "ON d.id = c.document WHERE c.id = ?1",
};

static const char k_schema[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;\n"
    "CREATE TABLE models(id INTEGER PRIMARY KEY, name TEXT NOT NULL, weights_hash TEXT NOT NULL,\n"
    "  dim INTEGER NOT NULL, UNIQUE(name, weights_hash, dim));\n"
    "CREATE TABLE documents(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE,\n"
    "  hash TEXT NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, kind TEXT NOT NULL,\n"
    "  chunk_tokens INTEGER NOT NULL, overlap INTEGER NOT NULL, nchunks INTEGER NOT NULL,\n"
    "  indexed_at INTEGER NOT NULL);\n"
    "CREATE TABLE chunks(id INTEGER PRIMARY KEY,\n"
    "  document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL, start_byte INTEGER NOT NULL, end_byte INTEGER NOT NULL,\n"
    "  line INTEGER NOT NULL, page INTEGER NOT NULL, ntokens INTEGER NOT NULL, text TEXT NOT NULL,\n"
    "  UNIQUE(document, seq));\n"
    "CREATE TABLE embeddings(chunk INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,\n"
    "  model INTEGER NOT NULL REFERENCES models(id), vector BLOB NOT NULL,\n"
    "  generation INTEGER NOT NULL DEFAULT 0);\n"
    "CREATE INDEX embeddings_generation ON embeddings(generation, chunk);\n";

/* Schema 3: the keyword index, FTS5 over every chunk's text and its file's name (the path's last
 * component: folder names would match every chunk under them), rowid = the chunk's id, kept by
 * triggers in the same transaction as the chunk rows, so that a kill leaves the two consistent.
 * unicode61 with diacritics removed: "café" is found by "cafe". A regular (contentful) FTS5 table:
 * it keeps its own copy of the text, which costs about the text again, but needs no old values to
 * delete a row (an external-content table would, and a document's path is gone when its chunks
 * cascade). Made only where SQLite has FTS5; a store without it stays at schema 2 (vector search). */
static const char k_keywords[] =
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, name, tokenize = 'unicode61 remove_diacritics 2');\n"
    "INSERT INTO chunks_fts(rowid, text, name)\n"
    "  SELECT c.id, c.text, substr(d.path, length(rtrim(d.path, replace(d.path, '/', ''))) + 1)\n"
    "  FROM chunks c JOIN documents d ON d.id = c.document;\n"
    "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN\n"
    "  INSERT INTO chunks_fts(rowid, text, name)\n"
    "    SELECT new.id, new.text, substr(d.path, length(rtrim(d.path, replace(d.path, '/', ''))) + 1)\n"
    "    FROM documents d WHERE d.id = new.document;\n"
    "END;\n"
    "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN\n"
    "  DELETE FROM chunks_fts WHERE rowid = old.id;\n"
    "END;\n";

/* Schema 1 -> 2: embeddings learn the generation that wrote them (vecfile.c appends only rows
 * written after its file). Rows from before keep 0: a vector file of schema 1's day has format
 * version 1, which is never appended to, only rewritten. */
static const char k_migrate_1_2[] =
    "ALTER TABLE embeddings ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE INDEX embeddings_generation ON embeddings(generation, chunk);\n"
    "PRAGMA user_version = 2;\n";

struct modattn_store {
    sqlite3 *db;
    char *path;
    bool readonly;
    bool in_tx;
    bool gen_bumped;  /* this transaction has raised the generation */
    uint64_t gen_cur; /* the generation it raised it to */
    int schema;       /* user_version as opened (a read-only schema-1 store stays 1) */
    int64_t model_id; /* models.id of the bound model, 0 if none */
    size_t dim;       /* of the bound model */
    int64_t last_chunk; /* the chunk id the last put_chunk wrote */
    sqlite3_stmt *st[ST_COUNT];
    /* waiting for another writer's lock (modattn_store_set_wait) */
    double wait_s;
    void (*on_wait)(void *ud, const char *msg);
    void *wait_ud;
    uint64_t busy_t0;
    bool busy_told;
    char note[256]; /* modattn_store_note: how it was opened, when that matters to the reader */
    /* the extensions' state on this connection (store_ext.h: keywords.c's FTS5 functions and
     * chunk sizes), released with it */
    struct {
        const modattn__store_ext *ext;
        void *state;
    } ext[MODATTN__STORE_MAX_EXT];
    int next;
};

/* Frees what the extensions keep on the connection (store_ext.h); they make it again on next use. */
static void release_extensions(modattn_store *s) {
    for (int i = 0; i < s->next; i++) {
        if (s->ext[i].state) s->ext[i].ext->release(s->ext[i].state);
        s->ext[i].state = NULL;
    }
}

static int reopen_readonly_folder(modattn_store *s, int st);

static int map_rc(int rc) {
    if (rc == SQLITE_IOERR_NOMEM) return MODATTN_ENOMEM;
    switch (rc & 0xff) {
    case SQLITE_NOMEM: return MODATTN_ENOMEM;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_FORMAT: return MODATTN_EFORMAT;
    case SQLITE_CANTOPEN: return MODATTN_ENOTFOUND;
    case SQLITE_RANGE:
    case SQLITE_MISUSE: return MODATTN_EINTERNAL;
    default: return MODATTN_EIO;
    }
}

/* Error with the store's path, what was being done and SQLite's message. */
static int sq_err(modattn_store *s, int rc, const char *what) {
    const char *msg = s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if ((rc & 0xff) == SQLITE_BUSY && s && s->path)
        return modattn__error(MODATTN_EIO, "%s: %s: another process held the store's write lock for "
                             "more than %g s (another `modattn index`?); run again when it is done, "
                             "or wait longer with --wait SECONDS", s->path, what, s->wait_s);
    return modattn__error(map_rc(rc), "%s: %s: %s", s && s->path ? s->path : "store", what, msg);
}

/* SQLite's busy handler: the lock is another connection's (in WAL mode only writers and
 * checkpoints take it, for one document's transaction at a time). Waits up to wait_s in steps of
 * at most 50 ms, telling on_wait once when the wait passes half a second. */
static int busy_wait(void *p, int count) {
    modattn_store *s = p;
    uint64_t now = modattn__now_ns();
    if (count == 0) {
        s->busy_t0 = now;
        s->busy_told = false;
    }
    double waited = (double)(now - s->busy_t0) * 1e-9;
    if (waited >= s->wait_s) return 0;
    if (!s->busy_told && waited >= 0.5 && s->on_wait) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s: waiting for another writer to finish (up to %g s; --wait)",
                 s->path, s->wait_s);
        s->on_wait(s->wait_ud, msg);
        s->busy_told = true;
    }
    unsigned ms = count < 6 ? 1u << count : 50u; /* 1, 2, 4 ... 32, then 50 ms */
    double left = s->wait_s - waited;
    if ((double)ms * 1e-3 > left) ms = (unsigned)(left * 1e3) + 1;
    sqlite3_sleep((int)ms);
    return 1;
}

void modattn_store_set_wait(modattn_store *s, double seconds, void (*on_wait)(void *ud, const char *msg),
                            void *ud) {
    if (!s) return;
    s->wait_s = seconds >= 0 ? seconds : MODATTN_STORE_DEFAULT_WAIT_S;
    s->on_wait = on_wait;
    s->wait_ud = ud;
}

static int exec_sql(modattn_store *s, const char *sql, const char *what) {
    char *msg = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_BUSY) {
            sqlite3_free(msg);
            return sq_err(s, rc, what);
        }
        int st = modattn__error(map_rc(rc), "%s: %s: %s", s->path, what,
                               msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return st;
    }
    return 0;
}

/* Ends a transaction that wrote nothing (or whose writes we give up): COMMIT, else ROLLBACK, so
 * that the connection is never left inside a transaction (an allocation failure in COMMIT leaves
 * it open). */
static int end_read_tx(modattn_store *s) {
    if (sqlite3_get_autocommit(s->db)) return 0;
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return 0;
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    if (sqlite3_get_autocommit(s->db)) return 0;
    return modattn__error(MODATTN_EIO, "%s: cannot end a read transaction: %s", s->path,
                         sqlite3_errmsg(s->db));
}

static int stmt(modattn_store *s, int which, sqlite3_stmt **out) {
    if (!s->st[which]) {
        int rc = sqlite3_prepare_v3(s->db, k_sql[which], -1, SQLITE_PREPARE_PERSISTENT,
                                    &s->st[which], NULL);
        if (rc != SQLITE_OK) return sq_err(s, rc, "preparing a statement");
    }
    *out = s->st[which];
    return 0;
}

/* Runs a single-row query returning one integer (or -1 when no row). */
static int query_int(modattn_store *s, const char *sql, int64_t *out) {
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, sql);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(q, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        *out = -1;
        rc = SQLITE_OK;
    }
    int st = rc == SQLITE_OK ? 0 : sq_err(s, rc, sql);
    sqlite3_finalize(q);
    return st;
}

/* Reads user_version and the table list; creates the schema in an empty writable database. */
/* Whether this SQLite has FTS5 (MODATTN_TEST_NO_FTS5=1 says no, for the tests of that case). */
bool modattn__sqlite_has_fts5(void) {
    const char *e = getenv("MODATTN_TEST_NO_FTS5");
    if (e && strcmp(e, "1") == 0) return false;
    return sqlite3_compileoption_used("ENABLE_FTS5") != 0;
}

static bool have_fts5(void) { return modattn__sqlite_has_fts5(); }

/* Inside the writer's transaction: a store of schema 2 gains its keyword index (schema 3), or, where
 * SQLite has no FTS5, stays at 2 with a note. */
static int add_keywords(modattn_store *s) {
    if (!have_fts5()) {
        snprintf(s->note, sizeof s->note,
                 "this SQLite has no FTS5: the store has no keyword index (search by meaning only)");
        return 0;
    }
    int st = exec_sql(s, k_keywords, "adding the keyword index (FTS5)");
    if (st) return st;
    return exec_sql(s, "PRAGMA user_version = 3", "setting the schema version");
}

static int check_schema(modattn_store *s) {
    int64_t version = 0, tables = 0;
    int st = query_int(s, "PRAGMA user_version", &version);
    if (st) return st;
    if (version > MODATTN_STORE_SCHEMA_VERSION)
        return modattn__error(MODATTN_EVERSION,
                             "%s: store schema version %" PRId64 " is newer than this modattn "
                             "knows (%d): use a newer modattn",
                             s->path, version, MODATTN_STORE_SCHEMA_VERSION);
    s->schema = (int)version;
    if (version == MODATTN_STORE_SCHEMA_VERSION) return 0;
    if (version == 1 || version == 2) {
        if (s->readonly) return 0; /* read as it is; the next writer migrates it */
        if (version == 2 && !have_fts5()) return add_keywords(s); /* stays at 2, with a note */
        /* one transaction: never half-migrated (a kill leaves the old schema whole) */
        if ((st = exec_sql(s, "BEGIN IMMEDIATE", "starting the schema migration"))) return st;
        if ((st = query_int(s, "PRAGMA user_version", &version))) goto fail;
        if (version == 1 && (st = exec_sql(s, k_migrate_1_2, "migrating the schema from version 1")))
            goto fail;
        if (version <= 2 && (st = add_keywords(s))) goto fail;
        if ((st = exec_sql(s, "COMMIT", "committing the schema migration"))) goto fail;
        if ((st = query_int(s, "PRAGMA user_version", &version))) return st;
        s->schema = (int)version;
        return 0;
    }
    if (version != 0)
        return modattn__error(MODATTN_EVERSION, "%s: store schema version %" PRId64 " is not %d",
                             s->path, version, MODATTN_STORE_SCHEMA_VERSION);
    if (s->readonly) {
        /* a store never written has no tables; one with tables is somebody else's database */
        if ((st = query_int(s, "SELECT count(*) FROM sqlite_master", &tables))) return st;
        if (tables > 0)
            return modattn__error(MODATTN_EFORMAT,
                                 "%s: an SQLite database that is not a modattn store (it has %" PRId64
                                 " objects and no modattn schema version)", s->path, tables);
        return modattn__error(MODATTN_ENOTFOUND, "%s: empty store (nothing indexed)", s->path);
    }
    /* version 0: a new file, or somebody else's database */
    if ((st = exec_sql(s, "BEGIN IMMEDIATE", "starting the schema transaction"))) return st;
    if ((st = query_int(s, "PRAGMA user_version", &version))) goto fail;
    if (version == MODATTN_STORE_SCHEMA_VERSION) {
        s->schema = (int)version;
        return end_read_tx(s);
    }
    if ((st = query_int(s, "SELECT count(*) FROM sqlite_master", &tables))) goto fail;
    if (tables > 0) {
        st = modattn__error(MODATTN_EFORMAT,
                           "%s: an SQLite database that is not a modattn store (it has %" PRId64
                           " objects and no modattn schema version)",
                           s->path, tables);
        goto fail;
    }
    if ((st = exec_sql(s, k_schema, "creating the schema"))) goto fail;
    if ((st = exec_sql(s, "PRAGMA user_version = 2", "setting the schema version"))) goto fail;
    if ((st = add_keywords(s))) goto fail;
    if ((st = exec_sql(s, "COMMIT", "committing the schema"))) goto fail;
    if ((st = query_int(s, "PRAGMA user_version", &version))) return st;
    s->schema = (int)version;
    return 0;
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

int modattn_store_open(const char *path, unsigned flags, modattn_store **out) {
    if (!out) return modattn__error(MODATTN_EINVAL, "modattn_store_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return modattn__error(MODATTN_EINVAL, "modattn_store_open: no path");
    bool readonly = (flags & MODATTN_STORE_READONLY) != 0;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT && !(flags & MODATTN_STORE_CREATE) )
            return modattn__error(MODATTN_ENOTFOUND, "%s: no such store (run `modattn index` first)",
                                 path);
        if (errno != ENOENT)
            return modattn__error(MODATTN_EIO, "%s: %s", path, strerror(errno));
        /* to be created: its folder must be there (else SQLite's "unable to open database file") */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
        else snprintf(dir, sizeof dir, ".");
        struct stat db;
        if (stat(dir, &db) != 0 || !S_ISDIR(db.st_mode))
            return modattn__error(MODATTN_ENOTFOUND, "%s: the folder '%s' %s", path, dir,
                                 stat(dir, &db) != 0 ? "does not exist" : "is not a folder");
        if (access(dir, W_OK) != 0)
            return modattn__error(MODATTN_EIO, "%s: cannot create the store in the folder '%s': %s", path, dir,
                                 strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        return modattn__error(MODATTN_EINVAL, "%s: not a regular file", path);
    } else if (!readonly && access(path, W_OK) != 0 && (errno == EROFS || errno == EACCES)) {
        /* said as what it is, before SQLite's "unable to open database file" or "attempt to write
         * a readonly database" on the first change */
        return modattn__error(MODATTN_EIO, errno == EROFS ? "%s: the store is on a read-only file system: it can be "
                                                           "searched, not changed"
                                                         : "%s: this user may not write the store (permission "
                                                           "denied): it can be searched, not changed", path);
    }
    modattn_store *s = modattn__calloc(1, sizeof *s, MODATTN_MEM_OTHER);
    if (!s) return modattn__mem_last_status();
    s->readonly = readonly;
    s->path = modattn__strdup(path, MODATTN_MEM_OTHER);
    if (!s->path) {
        modattn_free(s);
        return modattn__mem_last_status();
    }
    int oflags = readonly ? SQLITE_OPEN_READONLY
                          : SQLITE_OPEN_READWRITE | ((flags & MODATTN_STORE_CREATE) ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path, &s->db, oflags | SQLITE_OPEN_NOMUTEX, NULL);
    int st = 0;
    if (rc != SQLITE_OK) {
        st = sq_err(s, rc, "opening");
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    s->wait_s = MODATTN_STORE_DEFAULT_WAIT_S;
    sqlite3_busy_handler(s->db, busy_wait, s);
    if (!readonly) {
        /* WAL first: it is what makes a killed writer leave a consistent file. */
        sqlite3_stmt *q = NULL;
        rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &q, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            const char *mode = (const char *)sqlite3_column_text(q, 0);
            if (!mode || strcmp(mode, "wal") != 0) {
                st = modattn__error(MODATTN_EIO, "%s: cannot switch to WAL mode (journal mode is "
                                   "'%s'; is the file on a network file system?)",
                                   path, mode ? mode : "?");
                sqlite3_finalize(q);
                goto fail;
            }
            rc = SQLITE_OK;
        }
        sqlite3_finalize(q);
        if (rc != SQLITE_OK) {
            st = sq_err(s, rc, "setting WAL mode");
            goto fail;
        }
        if ((st = exec_sql(s, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON",
                           "setting pragmas")))
            goto fail;
    }
    if ((st = check_schema(s))) {
        /* a reader in a folder it cannot write to gets one more try (reopen_readonly_folder) */
        if (!readonly || st == MODATTN_ENOMEM || (st = reopen_readonly_folder(s, st))) goto fail;
        if ((st = check_schema(s))) goto fail;
    }
    /* the bound model, if any */
    {
        char name[256], hash[17];
        size_t dim = 0;
        st = modattn_store_get_model(s, name, sizeof name, hash, &dim);
        if (st == 0) {
            sqlite3_stmt *q = NULL;
            rc = sqlite3_prepare_v2(s->db,
                                    "SELECT id FROM models WHERE name = ?1 AND weights_hash = ?2 "
                                    "AND dim = ?3", -1, &q, NULL);
            if (rc == SQLITE_OK) {
                sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
                sqlite3_bind_text(q, 2, hash, -1, SQLITE_STATIC);
                sqlite3_bind_int64(q, 3, (sqlite3_int64)dim);
                rc = sqlite3_step(q);
                if (rc == SQLITE_ROW) {
                    s->model_id = sqlite3_column_int64(q, 0);
                    s->dim = dim;
                    rc = SQLITE_OK;
                } else if (rc == SQLITE_DONE) {
                    rc = SQLITE_CORRUPT;
                }
            }
            sqlite3_finalize(q);
            if (rc != SQLITE_OK) {
                st = rc == SQLITE_CORRUPT
                         ? modattn__error(MODATTN_EFORMAT, "%s: the recorded model is missing from "
                                         "the models table", path)
                         : sq_err(s, rc, "reading the model");
                goto fail;
            }
        } else if (st != MODATTN_ENOTFOUND) {
            goto fail;
        }
        st = 0;
    }
    *out = s;
    return 0;
fail:
    modattn_store_close(s);
    return st;
}

/* A WAL store that a reader cannot open: SQLite must create DB-shm (and may need DB-wal) beside it,
 * which a folder the user may not write to forbids. If the folder is not writable and no write-ahead
 * log holds changes, the file alone is the whole store: read it as immutable (no locks, no -shm).
 * If the log holds changes only a writer can fold them in: say so. Otherwise the first error
 * stands (st). */
static int reopen_readonly_folder(modattn_store *s, int st) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", s->path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK) == 0 || (errno != EACCES && errno != EROFS)) return st; /* EROFS: a read-only mount */
    char wal[4096 + 8];
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    struct stat wb;
    bool has_wal = stat(wal, &wb) == 0;
    if (has_wal && wb.st_size > 0)
        return modattn__error(MODATTN_EIO,
                             "%s: cannot read the store: its write-ahead log (%s, %lld bytes) holds "
                             "changes, reading them needs %s-shm, and this user cannot create it in "
                             "the folder '%s'; run `modattn index` on the store once as a user who may "
                             "write there (that folds the log in), or give this user write access to "
                             "the folder", s->path, wal, (long long)wb.st_size, s->path, dir);
    /* file:PATH?immutable=1, the path percent-encoded */
    size_t n = strlen(s->path);
    char *uri = modattn__malloc(n * 3 + 32, MODATTN_MEM_OTHER);
    if (!uri) return modattn__mem_last_status();
    size_t o = (size_t)sprintf(uri, "file:");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s->path[i];
        if (isalnum(c) || strchr("/._-~", c)) uri[o++] = (char)c;
        else o += (size_t)sprintf(uri + o, "%%%02X", c);
    }
    strcpy(uri + o, "?immutable=1");
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(s->st[i]);
        s->st[i] = NULL;
    }
    sqlite3_close_v2(s->db);
    s->db = NULL;
    release_extensions(s); /* their functions were registered on the connection closed */
    int rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    modattn_free(uri);
    if (rc != SQLITE_OK) return sq_err(s, rc, "opening read-only in a folder it cannot write to");
    sqlite3_extended_result_codes(s->db, 1);
    snprintf(s->note, sizeof s->note,
             "the store's folder is not writable by this user: read without locks (an `index` "
             "running now by another user may go unseen until it ends)");
    return 0;
}

const char *modattn_store_note(const modattn_store *s) { return s && s->note[0] ? s->note : NULL; }

void modattn_store_close(modattn_store *s) {
    if (!s) return;
    if (s->in_tx) modattn__store_rollback(s);
    for (int i = 0; i < ST_COUNT; i++) sqlite3_finalize(s->st[i]);
    if (s->db) sqlite3_close_v2(s->db);
    release_extensions(s);
    modattn_free(s->path);
    modattn_free(s);
}

const char *modattn_store_path(const modattn_store *s) { return s ? s->path : ""; }

/* ------------------------------------------------------------------ the model */

static int meta_get(modattn_store *s, const char *key, char *buf, size_t len, bool *found) {
    sqlite3_stmt *q = NULL;
    *found = false;
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?1", -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "reading meta");
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        snprintf(buf, len, "%s", v ? v : "");
        *found = true;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return rc == SQLITE_OK ? 0 : sq_err(s, rc, "reading meta");
}

int modattn_store_get_model(modattn_store *s, char *name, size_t name_len, char hash[17],
                            size_t *dim) {
    if (!s || !name || !name_len || !hash || !dim)
        return modattn__error(MODATTN_EINVAL, "modattn_store_get_model: NULL argument");
    char dbuf[32];
    bool f1, f2, f3;
    int st;
    if ((st = meta_get(s, "model_name", name, name_len, &f1))) return st;
    if ((st = meta_get(s, "model_weights_hash", hash, 17, &f2))) return st;
    if ((st = meta_get(s, "model_dim", dbuf, sizeof dbuf, &f3))) return st;
    if (!f1 && !f2 && !f3)
        return modattn__error(MODATTN_ENOTFOUND, "%s: the store has no model yet (nothing indexed)",
                             s->path);
    char *end;
    unsigned long long d = f3 ? strtoull(dbuf, &end, 10) : 0;
    if (!f1 || !f2 || !f3 || *end || d == 0 || d > (1u << 20))
        return modattn__error(MODATTN_EFORMAT, "%s: the model record in table meta is incomplete",
                             s->path);
    *dim = (size_t)d;
    return 0;
}

int modattn__store_get_model_dir(modattn_store *s, char *buf, size_t len) {
    if (!s || !buf || !len) return modattn__error(MODATTN_EINVAL, "modattn__store_get_model_dir: bad argument");
    char tmp[4200];
    bool found = false;
    int st = meta_get(s, "model_dir", tmp, sizeof tmp, &found);
    if (st) return st;
    if (!found || !tmp[0]) return modattn__error(MODATTN_ENOTFOUND, "%s: no model folder recorded", s->path);
    if (strlen(tmp) >= len) return modattn__error(MODATTN_ERANGE, "%s: the recorded model folder is too long", s->path);
    snprintf(buf, len, "%s", tmp);
    return 0;
}

int modattn__store_set_model_dir(modattn_store *s, const char *dir) {
    if (!s || !dir || !*dir || strlen(dir) >= 4096)
        return modattn__error(MODATTN_EINVAL, "modattn__store_set_model_dir: bad argument");
    if (s->readonly) return modattn__error(MODATTN_EINVAL, "%s: the store is open read-only", s->path);
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "INSERT INTO meta(key, value) VALUES ('model_dir', ?1) "
                                       "ON CONFLICT(key) DO UPDATE SET value = excluded.value", -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(q, 1, dir, -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE || rc == SQLITE_OK ? 0 : sq_err(s, rc, "recording the model folder");
}

/* the roots as one meta value: paths separated by '\n' (a path holding a newline is not kept) */
int modattn_store_get_roots(modattn_store *s, char ***out, size_t *n) {
    if (!s || !out || !n) return modattn__error(MODATTN_EINVAL, "modattn_store_get_roots: NULL argument");
    *out = NULL, *n = 0;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'index_roots'", -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "reading meta");
    int st = 0;
    if ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        size_t cap = 0;
        for (const char *p = v ? v : ""; *p && !st;) {
            size_t len = strcspn(p, "\n");
            if (len) {
                if (*n == cap) {
                    size_t nc = cap ? 2 * cap : 8;
                    char **nv = modattn__realloc(*out, nc * sizeof *nv, MODATTN_MEM_OTHER);
                    if (!nv) st = modattn__mem_last_status();
                    else *out = nv, cap = nc;
                }
                if (!st && !((*out)[*n] = modattn__strndup(p, len, MODATTN_MEM_OTHER))) st = modattn__mem_last_status();
                if (!st) (*n)++;
            }
            p += len + (p[len] == '\n');
        }
    } else if (rc != SQLITE_DONE) {
        st = sq_err(s, rc, "reading meta");
    }
    sqlite3_finalize(q);
    if (st) {
        for (size_t i = 0; i < *n; i++) modattn_free((*out)[i]);
        modattn_free(*out);
        *out = NULL, *n = 0;
    }
    return st;
}

/* whether path is root or below it */
static bool under(const char *path, const char *root) {
    size_t k = strlen(root);
    return strncmp(path, root, k) == 0 && (path[k] == '\0' || path[k] == '/' || (k == 1 && root[0] == '/'));
}

int modattn__store_add_roots(modattn_store *s, const char *const *paths, size_t n) {
    if (!s || (n && !paths)) return modattn__error(MODATTN_EINVAL, "modattn__store_add_roots: NULL argument");
    if (s->readonly) return modattn__error(MODATTN_EINVAL, "%s: the store is open read-only", s->path);
    char **have = NULL;
    size_t nh = 0;
    int st = modattn_store_get_roots(s, &have, &nh);
    if (st) return st;
    size_t total = 1;
    for (size_t i = 0; i < nh; i++) total += strlen(have[i]) + 1;
    for (size_t i = 0; i < n; i++) total += strlen(paths[i]) + 1;
    char *v = modattn__malloc(total, MODATTN_MEM_OTHER);
    if (!v) st = modattn__mem_last_status();
    size_t o = 0;
    bool changed = false;
    for (size_t i = 0; v && i < nh; i++) { /* a held root under a new one goes */
        bool covered = false;
        for (size_t k = 0; k < n && !covered; k++) covered = paths[k][0] == '/' && !strchr(paths[k], '\n') &&
                                                            strcmp(have[i], paths[k]) != 0 && under(have[i], paths[k]);
        if (covered) {
            changed = true;
            continue;
        }
        o += (size_t)sprintf(v + o, "%s\n", have[i]);
    }
    for (size_t i = 0; v && i < n; i++) {
        if (paths[i][0] != '/' || strchr(paths[i], '\n')) continue;
        bool held = false;
        for (size_t k = 0; k < nh && !held; k++) held = under(paths[i], have[k]);
        for (size_t k = 0; k < i && !held; k++) held = strcmp(paths[k], paths[i]) == 0;
        if (held) continue;
        o += (size_t)sprintf(v + o, "%s\n", paths[i]);
        changed = true;
    }
    if (v && changed) {
        sqlite3_stmt *q = NULL;
        int rc = sqlite3_prepare_v2(s->db, "INSERT INTO meta(key, value) VALUES ('index_roots', ?1) "
                                           "ON CONFLICT(key) DO UPDATE SET value = excluded.value", -1, &q, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(q, 1, v, (int)o, SQLITE_STATIC);
            rc = sqlite3_step(q);
        }
        sqlite3_finalize(q);
        if (rc != SQLITE_DONE && rc != SQLITE_OK) st = sq_err(s, rc, "recording the indexed folders");
    }
    modattn_free(v);
    for (size_t i = 0; i < nh; i++) modattn_free(have[i]);
    modattn_free(have);
    return st;
}

int modattn_store_get_precision(modattn_store *s, char *buf, size_t len) {
    if (!s || !buf || len < 8) return modattn__error(MODATTN_EINVAL, "modattn_store_get_precision: bad argument");
    bool found = false;
    int st = meta_get(s, "model_precision", buf, len, &found);
    if (st) return st;
    if (!found) snprintf(buf, len, "fp32");
    return 0;
}

int modattn_store_get_prompt(modattn_store *s, bool query, char *buf, size_t len) {
    if (!s || !buf || !len) return modattn__error(MODATTN_EINVAL, "modattn_store_get_prompt: bad argument");
    sqlite3_stmt *q = NULL;
    buf[0] = '\0';
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?1", -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "reading meta");
    sqlite3_bind_text(q, 1, query ? "model_query_prompt" : "model_document_prompt", -1, SQLITE_STATIC);
    int st = 0;
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        size_t n = (size_t)sqlite3_column_bytes(q, 0);
        if (n >= len) st = modattn__error(MODATTN_ERANGE, "%s: the %s prompt is %zu bytes", s->path,
                                         query ? "query" : "document", n);
        else if (v) memcpy(buf, v, n + 1);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return rc == SQLITE_OK ? st : sq_err(s, rc, "reading meta");
}

/* Whether the store's recorded prompt (none recorded: "") equals p (NULL: not compared). */
static int prompt_same(modattn_store *s, bool query, const char *p, bool *same) {
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT coalesce((SELECT value FROM meta WHERE key = ?1), '') = ?2", -1, &q,
                                NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "reading meta");
    sqlite3_bind_text(q, 1, query ? "model_query_prompt" : "model_document_prompt", -1, SQLITE_STATIC);
    if (!p) { /* not compared */
        sqlite3_finalize(q);
        *same = true;
        return 0;
    }
    sqlite3_bind_text(q, 2, p, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *same = sqlite3_column_int(q, 0) != 0, rc = SQLITE_OK;
    sqlite3_finalize(q);
    return rc == SQLITE_OK ? 0 : sq_err(s, rc, "reading meta");
}

/* A prompt for a message: quoted, its first 120 bytes, or "none". */
static void prompt_shown(const char *p, char *buf, size_t len) {
    if (!p || !*p) snprintf(buf, len, "none");
    else snprintf(buf, len, "\"%.120s%s\"", p, strlen(p) > 120 ? "..." : "");
}

static int prompt_mismatch(modattn_store *s, const modattn_store_model *m, const char *name) {
    char sd[4096], sq[4096], a[160], b[160], c[160], d[160];
    if (modattn_store_get_prompt(s, false, sd, sizeof sd)) snprintf(sd, sizeof sd, "(long)");
    if (modattn_store_get_prompt(s, true, sq, sizeof sq)) snprintf(sq, sizeof sq, "(long)");
    prompt_shown(sd, a, sizeof a);
    prompt_shown(sq, b, sizeof b);
    prompt_shown(m->document_prompt, c, sizeof c);
    prompt_shown(m->query_prompt, d, sizeof d);
    return modattn__error(MODATTN_EVERSION,
                         "%s holds embeddings of model %s made with the document prompt %s, for queries with the "
                         "prompt %s; here the document prompt is %s and the query prompt %s: vectors embedded "
                         "with other prompts are not compared. Use the store's prompts (--prompt TEXT or "
                         "--prompt-name NAME as when it was indexed), or another --db for these",
                         s->path, name, a, b, c, d);
}

static int model_mismatch(modattn_store *s, const modattn_store_model *m, const char *name,
                          const char *hash, const char *ident, size_t dim) {
    const bool same_weights = strcmp(hash, m->weights_hash) == 0 && dim == m->dim;
    const bool same_model = strcmp(hash, m->weights_hash) == 0 && (!m->identity || !ident[0] ||
                                                                   strcmp(ident, m->identity) == 0);
    if (same_model && dim != m->dim)
        return modattn__error(MODATTN_EVERSION,
                             "%s holds %zu-dimension embeddings of model %s, and %zu dimensions are asked for "
                             "here: vectors cut to other sizes are not compared. Use --dimensions %zu (as when "
                             "it was indexed), or another --db for these",
                             s->path, dim, name, m->dim, dim);
    char prec[16] = "fp32";
    bool found = false;
    const char *mine = m->precision ? m->precision : "fp32";
    if (meta_get(s, "model_precision", prec, sizeof prec, &found) != 0 || !found) snprintf(prec, sizeof prec, "fp32");
    if (same_weights && strcmp(prec, mine) != 0)
        return modattn__error(MODATTN_EVERSION,
                             "%s holds %s embeddings of model %s, and the model in use runs in %s: vectors of "
                             "different precisions are not compared. Use --precision %s (as when it was indexed), "
                             "or another --db for this one",
                             s->path, prec, name, mine, prec);
    return modattn__error(MODATTN_EVERSION,
                         "%s holds embeddings of model %s (weights %s, identity %s, %zu dimensions), not of "
                         "the model in use, %s (weights %s, identity %s, %zu dimensions)%s: vectors of different "
                         "models cannot be compared. Use --model with the store's model, or "
                         "another --db for this one",
                         s->path, name, hash, ident[0] ? ident : "not recorded", dim, m->name, m->weights_hash,
                         m->identity ? m->identity : "?", m->dim,
                         same_weights ? " (the same weights, but a configuration, pooling, normalisation, "
                                        "sequence length or tokenizer that changes the vectors)" : "");
}

/* Compares by identity (and dim) when the store has one recorded, else by weights and dim; the
 * name never counts. *recorded: the store has an identity. */
static int check_model(modattn_store *s, const modattn_store_model *m, bool *recorded) {
    if (!s || !m || !m->name || !m->weights_hash || !m->dim)
        return modattn__error(MODATTN_EINVAL, "modattn_store_check_model: NULL argument");
    char name[256], hash[17], ident[32] = "";
    size_t dim = 0;
    int st = modattn_store_get_model(s, name, sizeof name, hash, &dim);
    if (st) return st;
    bool found = false;
    if ((st = meta_get(s, "model_identity", ident, sizeof ident, &found))) return st;
    if (!found) ident[0] = '\0';
    *recorded = found;
    bool same = dim == m->dim && (found && m->identity ? strcmp(ident, m->identity) == 0
                                                       : strcmp(hash, m->weights_hash) == 0);
    /* the precision always: a store from before identities is compared by weights, which a
     * bf16 or int8 model of the same weights shares (none recorded: fp32) */
    char prec[16];
    if (same && (st = modattn_store_get_precision(s, prec, sizeof prec))) return st;
    if (same && strcmp(prec, m->precision ? m->precision : "fp32") != 0) same = false;
    if (!same) return model_mismatch(s, m, name, hash, ident, dim);
    bool sd = true, sq = true;
    if ((st = prompt_same(s, false, m->document_prompt, &sd)) || (st = prompt_same(s, true, m->query_prompt, &sq)))
        return st;
    return sd && sq ? 0 : prompt_mismatch(s, m, name);
}

modattn_store_model modattn_store_model_of(const modattn_model_info *info) {
    return (modattn_store_model){info->name, info->weights_hash,
                                 info->truncate_dim ? info->truncate_dim : info->dim, info->identity,
                                 modattn_precision_name(info->precision),
                                 info->document_prompt ? info->document_prompt : "",
                                 info->query_prompt ? info->query_prompt : ""};
}

int modattn_store_check_model(modattn_store *s, const modattn_store_model *m) {
    bool recorded;
    return check_model(s, m, &recorded);
}

int modattn__store_bind_model(modattn_store *s, const modattn_store_model *m) {
    bool recorded = false;
    int st = check_model(s, m, &recorded);
    if (st == 0 && !recorded && m->identity && !s->readonly) {
        /* a store from before identities, matched by weights and dim: record this one's */
        if ((st = exec_sql(s, "BEGIN IMMEDIATE", "recording the model's identity"))) return st;
        sqlite3_stmt *q = NULL;
        int rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta(key, value) VALUES ('model_identity', ?1), "
                                    "('model_precision', ?2)", -1, &q, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(q, 1, m->identity, -1, SQLITE_STATIC);
            sqlite3_bind_text(q, 2, m->precision ? m->precision : "fp32", -1, SQLITE_STATIC);
            rc = sqlite3_step(q);
            if (rc == SQLITE_DONE) rc = SQLITE_OK;
        }
        sqlite3_finalize(q);
        if (rc != SQLITE_OK) {
            st = sq_err(s, rc, "recording the model's identity");
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return st;
        }
        return exec_sql(s, "COMMIT", "recording the model's identity");
    }
    if (st != MODATTN_ENOTFOUND) return st;
    if (s->readonly) return modattn__error(MODATTN_EINVAL, "%s: opened read-only", s->path);
    if ((st = exec_sql(s, "BEGIN IMMEDIATE", "recording the model"))) return st;
    /* somebody may have bound it meanwhile */
    st = check_model(s, m, &recorded);
    if (st != MODATTN_ENOTFOUND) {
        int e = end_read_tx(s);
        return st ? st : e;
    }
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "INSERT INTO models(name, weights_hash, dim) VALUES "
                                "(?1, ?2, ?3)", -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(q, 1, m->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, m->weights_hash, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 3, (sqlite3_int64)m->dim);
        rc = sqlite3_step(q);
        if (rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    int64_t id = sqlite3_last_insert_rowid(s->db);
    if (rc == SQLITE_OK) {
        rc = sqlite3_prepare_v2(s->db, m->identity ? "INSERT INTO meta(key, value) VALUES ('model_name', ?1), "
                                "('model_weights_hash', ?2), ('model_dim', ?3), ('model_identity', ?4), "
                                "('model_precision', ?5)"
                                : "INSERT INTO meta(key, value) VALUES ('model_name', ?1), "
                                "('model_weights_hash', ?2), ('model_dim', ?3), ('model_precision', ?5)", -1, &q, NULL);
        if (rc == SQLITE_OK) {
            char dbuf[32];
            snprintf(dbuf, sizeof dbuf, "%zu", m->dim);
            sqlite3_bind_text(q, 1, m->name, -1, SQLITE_STATIC);
            sqlite3_bind_text(q, 2, m->weights_hash, -1, SQLITE_STATIC);
            sqlite3_bind_text(q, 3, dbuf, -1, SQLITE_STATIC);
            if (m->identity) sqlite3_bind_text(q, 4, m->identity, -1, SQLITE_STATIC);
            sqlite3_bind_text(q, 5, m->precision ? m->precision : "fp32", -1, SQLITE_STATIC);
            rc = sqlite3_step(q);
            if (rc == SQLITE_DONE) rc = SQLITE_OK;
        }
        sqlite3_finalize(q);
    }
    for (int k = 0; k < 2 && rc == SQLITE_OK; k++) {
        const char *p = k ? m->query_prompt : m->document_prompt;
        if (!p || !*p) continue; /* none recorded: none */
        rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", -1, &q, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(q, 1, k ? "model_query_prompt" : "model_document_prompt", -1, SQLITE_STATIC);
            sqlite3_bind_text(q, 2, p, -1, SQLITE_STATIC);
            rc = sqlite3_step(q);
            if (rc == SQLITE_DONE) rc = SQLITE_OK;
        }
        sqlite3_finalize(q);
    }
    if (rc != SQLITE_OK) {
        st = sq_err(s, rc, "recording the model");
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    if ((st = exec_sql(s, "COMMIT", "committing the model"))) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    s->model_id = id;
    s->dim = m->dim;
    return 0;
}

/* ------------------------------------------------------------------ documents */

int modattn__store_find_document(modattn_store *s, const char *path, modattn_store_doc *out) {
    if (!s || !path || !out) return modattn__error(MODATTN_EINVAL, "find_document: NULL argument");
    memset(out, 0, sizeof *out);
    sqlite3_stmt *q;
    int st = stmt(s, ST_FIND_DOC, &q);
    if (st) return st;
    sqlite3_bind_text(q, 1, path, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    int found = 0;
    if (rc == SQLITE_ROW) {
        out->id = sqlite3_column_int64(q, 0);
        const char *h = (const char *)sqlite3_column_text(q, 1);
        out->hash = h ? strtoull(h, NULL, 16) : 0;
        out->mtime_ns = sqlite3_column_int64(q, 2);
        out->size = sqlite3_column_int64(q, 3);
        out->chunk_tokens = sqlite3_column_int(q, 4);
        out->overlap = sqlite3_column_int(q, 5);
        out->nchunks = sqlite3_column_int64(q, 6);
        found = 1;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    return rc == SQLITE_OK ? found : sq_err(s, rc, "looking up a document");
}

static int step_done(modattn_store *s, sqlite3_stmt *q, const char *what) {
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc != SQLITE_DONE) return sq_err(s, rc, what);
    return 0;
}

int modattn__store_touch_document(modattn_store *s, int64_t id, int64_t mtime_ns, int64_t size) {
    sqlite3_stmt *q;
    int st = stmt(s, ST_TOUCH_DOC, &q);
    if (st) return st;
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, mtime_ns);
    sqlite3_bind_int64(q, 3, size);
    return step_done(s, q, "updating a document's mtime");
}

int modattn__store_begin(modattn_store *s) {
    if (s->in_tx) return modattn__error(MODATTN_EINTERNAL, "%s: transaction already open", s->path);
    int st = exec_sql(s, "BEGIN IMMEDIATE", "starting a transaction");
    if (!st) s->in_tx = true, s->gen_bumped = false;
    return st;
}

/* Every transaction that changes documents, chunks or embeddings raises meta.generation by one,
 * in the same transaction: the vector file (vecfile.c) is stamped with the generation it was
 * written from, so a store changed since is detected, whatever killed what in between. */
static int bump_generation(modattn_store *s) {
    if (s->gen_bumped) return 0;
    int st = exec_sql(s, "INSERT INTO meta(key, value) VALUES ('generation', '1') ON CONFLICT(key) DO UPDATE "
                      "SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)", "raising the store's generation");
    if (!st) st = modattn_store_generation(s, &s->gen_cur);
    if (!st) s->gen_bumped = true;
    return st;
}

int modattn__store_read_begin(modattn_store *s) {
    if (!s) return modattn__error(MODATTN_EINVAL, "read_begin: NULL store");
    if (!sqlite3_get_autocommit(s->db))
        return modattn__error(MODATTN_EINTERNAL, "%s: a read snapshot inside another transaction", s->path);
    int st = exec_sql(s, "BEGIN", "starting a read snapshot");
    if (st) return st;
    int64_t v = 0; /* a deferred transaction takes its snapshot at its first read: now */
    if ((st = query_int(s, "PRAGMA user_version", &v))) end_read_tx(s);
    return st;
}

void modattn__store_read_end(modattn_store *s) {
    if (s) end_read_tx(s);
}

int modattn_store_generation(modattn_store *s, uint64_t *out) {
    char buf[32];
    bool found = false;
    *out = 0;
    int st = meta_get(s, "generation", buf, sizeof buf, &found);
    if (st) return st;
    if (found) *out = strtoull(buf, NULL, 10);
    return 0;
}

int modattn__store_commit(modattn_store *s) {
    if (!s->in_tx) return modattn__error(MODATTN_EINTERNAL, "%s: no transaction to commit", s->path);
    int st = exec_sql(s, "COMMIT", "committing");
    if (st) modattn__store_rollback(s);
    s->in_tx = false;
    return st;
}

void modattn__store_rollback(modattn_store *s) {
    if (!s || !s->in_tx) return;
    for (int i = 0; i < ST_COUNT; i++)
        if (s->st[i]) sqlite3_reset(s->st[i]);
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_tx = false;
}

static int delete_by_id(modattn_store *s, int64_t id) {
    static const int order[] = {ST_DEL_EMB, ST_DEL_CHUNKS, ST_DEL_DOC};
    int gst = bump_generation(s);
    if (gst) return gst;
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        sqlite3_stmt *q;
        int st = stmt(s, order[i], &q);
        if (st) return st;
        sqlite3_bind_int64(q, 1, id);
        if ((st = step_done(s, q, "deleting a document"))) return st;
    }
    return 0;
}

int modattn__store_put_document(modattn_store *s, modattn_store_doc *d) {
    if (!s->in_tx) return modattn__error(MODATTN_EINTERNAL, "put_document outside a transaction");
    if (!s->model_id) return modattn__error(MODATTN_EINTERNAL, "put_document before bind_model");
    modattn_store_doc old;
    int f = modattn__store_find_document(s, d->path, &old);
    if (f < 0) return f;
    int st;
    if (f == 1 && (st = delete_by_id(s, old.id))) return st;
    if ((st = bump_generation(s))) return st;
    sqlite3_stmt *q;
    if ((st = stmt(s, ST_PUT_DOC, &q))) return st;
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, d->hash);
    sqlite3_bind_text(q, 1, d->path, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, d->mtime_ns);
    sqlite3_bind_int64(q, 4, d->size);
    sqlite3_bind_text(q, 5, d->kind ? d->kind : "text", -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 6, d->chunk_tokens);
    sqlite3_bind_int(q, 7, d->overlap);
    sqlite3_bind_int64(q, 8, d->nchunks);
    sqlite3_bind_int64(q, 9, (sqlite3_int64)time(NULL));
    if ((st = step_done(s, q, "storing a document"))) return st;
    d->id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int modattn__store_put_chunk(modattn_store *s, int64_t doc_id, const modattn_store_chunk_in *c,
                            const float *vec, size_t dim) {
    if (!s->in_tx) return modattn__error(MODATTN_EINTERNAL, "put_chunk outside a transaction");
    if (dim != s->dim)
        return modattn__error(MODATTN_EINVAL, "%s: vector of %zu dimensions, the store's model has "
                             "%zu", s->path, dim, s->dim);
    if (c->len > (size_t)INT32_MAX / 2)
        return modattn__error(MODATTN_ERANGE, "%s: chunk text of %zu bytes", s->path, c->len);
    char *clean = NULL;
    size_t clen = c->len;
    const char *text = c->text;
    if (!modattn__utf8_valid(c->text, c->len)) {
        clean = modattn__utf8_sanitize(c->text, c->len, &clen);
        if (!clean) return modattn__mem_last_status();
        text = clean;
    }
    sqlite3_stmt *q;
    int st = stmt(s, ST_PUT_CHUNK, &q);
    if (!st) {
        sqlite3_bind_int64(q, 1, doc_id);
        sqlite3_bind_int64(q, 2, c->seq);
        sqlite3_bind_int64(q, 3, c->start);
        sqlite3_bind_int64(q, 4, c->end);
        sqlite3_bind_int64(q, 5, c->line);
        sqlite3_bind_int64(q, 6, c->page);
        sqlite3_bind_int64(q, 7, c->ntokens);
        sqlite3_bind_text(q, 8, text, (int)clen, SQLITE_STATIC);
        st = step_done(s, q, "storing a chunk");
    }
    modattn_free(clean);
    if (st) return st;
    int64_t chunk_id = sqlite3_last_insert_rowid(s->db);
    s->last_chunk = chunk_id;
    if ((st = bump_generation(s))) return st;
    if ((st = stmt(s, ST_PUT_EMB, &q))) return st;
    sqlite3_bind_int64(q, 1, chunk_id);
    sqlite3_bind_int64(q, 2, s->model_id);
    sqlite3_bind_blob(q, 3, vec, (int)(dim * sizeof(float)), SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, (sqlite3_int64)s->gen_cur);
    return step_done(s, q, "storing an embedding");
}

int modattn_store_delete_document(modattn_store *s, const char *path) {
    modattn_store_doc d;
    int f = modattn__store_find_document(s, path, &d);
    if (f <= 0) return f;
    bool own_tx = !s->in_tx;
    int st;
    if (own_tx && (st = modattn__store_begin(s))) return st;
    st = delete_by_id(s, d.id);
    if (own_tx) {
        if (st) modattn__store_rollback(s);
        else st = modattn__store_commit(s);
    }
    return st ? st : 1;
}

int modattn__store_each_path(modattn_store *s, int (*fn)(void *ud, const char *path), void *ud) {
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT path FROM documents ORDER BY path", -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "listing documents");
    int st = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(q, 0);
        if (p && (st = fn(ud, p)) != 0) break;
    }
    if (!st && rc != SQLITE_DONE) st = sq_err(s, rc, "listing documents");
    sqlite3_finalize(q);
    return st;
}

int modattn__store_paths_with_hash(modattn_store *s, uint64_t hash, int64_t size,
                                   int (*fn)(void *ud, const char *path), void *ud) {
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT path FROM documents WHERE hash = ?1 AND size = ?2 ORDER BY path",
                                -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "looking up documents by content");
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, hash);
    sqlite3_bind_text(q, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, size);
    int st = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *p = (const char *)sqlite3_column_text(q, 0);
        if (p && (st = fn(ud, p)) != 0) break;
    }
    if (!st && rc != SQLITE_DONE && rc != SQLITE_ROW) st = sq_err(s, rc, "looking up documents by content");
    sqlite3_finalize(q);
    return st;
}

int modattn_store_get_counts(modattn_store *s, modattn_store_counts *out) {
    memset(out, 0, sizeof *out);
    int st;
    if ((st = query_int(s, "SELECT count(*) FROM documents", &out->documents))) return st;
    if ((st = query_int(s, "SELECT count(*) FROM chunks", &out->chunks))) return st;
    return query_int(s, "SELECT count(*) FROM embeddings", &out->embeddings);
}

/* ------------------------------------------------------------------ search side */

/* The bound model's rows with generation > after (after < 0: all of them), ascending chunk id,
 * one at a time to fn; inside the caller's transaction. (The rows since a generation are found
 * through the (generation, chunk) index by the subquery: with "generation > ?" beside "ORDER BY
 * chunk" SQLite would scan the whole table in rowid order instead, 1.5 GB at 1M chunks.) */
int modattn__store_scan_vectors(modattn_store *s, int64_t after, modattn__vector_fn fn, void *ctx, size_t *n) {
    *n = 0;
    if (!s->model_id)
        return modattn__error(MODATTN_ENOTFOUND, "%s: the store has no model yet (nothing indexed)",
                             s->path);
    if (after >= 0 && s->schema < 2)
        return modattn__error(MODATTN_EINTERNAL, "%s: schema %d has no generations", s->path, s->schema);
    const size_t dim = s->dim;
    sqlite3_stmt *q = NULL;
    int st = 0;
    int rc = sqlite3_prepare_v2(s->db, after < 0 ? "SELECT chunk, vector FROM embeddings WHERE model = ?1 "
                                "ORDER BY chunk" : "SELECT chunk, vector FROM embeddings WHERE model = ?1 "
                                "AND chunk IN (SELECT chunk FROM embeddings WHERE generation > ?2) ORDER BY chunk", -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "reading vectors");
    sqlite3_bind_int64(q, 1, s->model_id);
    if (after >= 0) sqlite3_bind_int64(q, 2, after);
    size_t i = 0;
    while (!st && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(q, 1);
        int bytes = sqlite3_column_bytes(q, 1);
        const int64_t chunk = sqlite3_column_int64(q, 0);
        if (!blob || (size_t)bytes != dim * sizeof(float)) {
            st = modattn__error(MODATTN_EFORMAT, "%s: embedding of chunk %" PRId64 " has %d bytes, "
                               "expected %zu", s->path, chunk, bytes, dim * sizeof(float));
            break;
        }
        st = fn(ctx, chunk, blob, dim);
        i++;
    }
    if (!st && rc != SQLITE_DONE) st = sq_err(s, rc, "reading vectors");
    sqlite3_finalize(q);
    *n = i;
    return st;
}

int modattn__store_count_vectors(modattn_store *s, int64_t after, size_t *n) {
    int64_t c = 0;
    int st;
    if (after < 0) st = query_int(s, "SELECT count(*) FROM embeddings", &c);
    else {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM embeddings WHERE generation > %" PRId64, after);
        st = query_int(s, sql, &c);
    }
    *n = st ? 0 : (size_t)c;
    return st;
}

typedef struct block_sink {
    float *data;
    int64_t *ids;
    size_t n, cap, ld;
    const char *path;
} block_sink;

static int to_block(void *ctx, int64_t chunk, const void *v, size_t dim) {
    block_sink *b = ctx;
    if (b->n >= b->cap) return modattn__error(MODATTN_EFORMAT, "%s: more vectors than counted", b->path);
    b->ids[b->n] = chunk;
    memcpy(b->data + b->n * b->ld, v, dim * sizeof(float));
    b->n++;
    return 0;
}

/* The same rows into one block (rows of ld floats, the tail of each zero), as
 * modattn__store_load_vectors gives them. */
int modattn__store_read_vectors(modattn_store *s, int64_t after, modattn_store_vectors *out) {
    memset(out, 0, sizeof *out);
    if (!s->model_id)
        return modattn__error(MODATTN_ENOTFOUND, "%s: the store has no model yet (nothing indexed)",
                             s->path);
    size_t n = 0;
    int st = modattn__store_count_vectors(s, after, &n);
    if (st) return st;
    const size_t dim = s->dim;
    const size_t ld = (dim + 15) & ~(size_t)15; /* whole 64-byte lines per row */
    if (n > SIZE_MAX / sizeof(float) / ld)
        return modattn__error(MODATTN_ERANGE, "%s: %zu vectors do not fit in memory", s->path, n);
    block_sink b = {.cap = n, .ld = ld, .path = s->path};
    out->dim = dim;
    out->ld = ld;
    if (n > 0) {
        b.data = modattn__calloc(n * ld, sizeof(float), MODATTN_MEM_INDEX);
        b.ids = modattn__malloc(n * sizeof(int64_t), MODATTN_MEM_INDEX);
        if (!b.data || !b.ids) st = modattn__mem_last_status();
    }
    size_t got = 0;
    if (!st) st = modattn__store_scan_vectors(s, after, to_block, &b, &got);
    if (!st && got != n)
        st = modattn__error(MODATTN_EFORMAT, "%s: %zu of %zu embeddings belong to the store's model", s->path, got, n);
    if (!st) st = modattn_store_generation(s, &out->generation);
    if (st) { /* (the vector file's free, vecfile.c, handles both forms; this one is ours) */
        modattn_free(b.data);
        modattn_free(b.ids);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->data = b.data, out->chunk_ids = b.ids;
    out->n = out->rows = n;
    out->nseg = n ? 1 : 0;
    out->seg[0].data = b.data, out->seg[0].chunk_ids = b.ids, out->seg[0].n = n, out->seg[0].row0 = 0;
    return 0;
}

int modattn__store_load_vectors(modattn_store *s, modattn_store_vectors *out) {
    if (!s || !out) return modattn__error(MODATTN_EINVAL, "load_vectors: NULL argument");
    memset(out, 0, sizeof *out);
    if (!s->model_id)
        return modattn__error(MODATTN_ENOTFOUND, "%s: the store has no model yet (nothing indexed)",
                             s->path);
    const bool own_tx = sqlite3_get_autocommit(s->db) != 0; /* else inside the caller's snapshot */
    int st = own_tx ? exec_sql(s, "BEGIN", "starting a read transaction") : 0;
    if (st) return st;
    st = modattn__store_read_vectors(s, -1, out);
    int e = own_tx ? end_read_tx(s) : 0;
    if (!st && e) { /* the block modattn__store_read_vectors made (not the vector file's free) */
        modattn_free((void *)out->data);
        modattn_free((void *)out->chunk_ids);
        memset(out, 0, sizeof *out);
        st = e;
    }
    return st;
}

/* Chunk ids of the rows with generation <= upto, in no particular order. */
int modattn__store_ids_upto(modattn_store *s, uint64_t upto, int64_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    if (s->schema < 2 || upto > INT64_MAX)
        return modattn__error(MODATTN_EINTERNAL, "%s: schema %d has no generations", s->path, s->schema);
    int64_t count = 0;
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM embeddings WHERE generation <= %" PRIu64, upto);
    int st = query_int(s, sql, &count);
    if (st) return st;
    int64_t *out = modattn__malloc(((size_t)count + 1) * sizeof *out, MODATTN_MEM_INDEX);
    if (!out) return modattn__mem_last_status();
    sqlite3_stmt *q = NULL;
    /* from the (generation, chunk) index alone; the caller sorts */
    int rc = sqlite3_prepare_v2(s->db, "SELECT chunk FROM embeddings WHERE generation <= ?1", -1, &q, NULL);
    size_t i = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, (sqlite3_int64)upto);
        while ((rc = sqlite3_step(q)) == SQLITE_ROW && i < (size_t)count) out[i++] = sqlite3_column_int64(q, 0);
        if (rc == SQLITE_ROW) rc = SQLITE_CORRUPT;
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        modattn_free(out);
        return rc == SQLITE_CORRUPT ? modattn__error(MODATTN_EFORMAT, "%s: more vectors than counted", s->path)
                                    : sq_err(s, rc, "reading chunk ids");
    }
    *ids = out;
    *n = i;
    return 0;
}

int modattn__store_lock(modattn_store *s) {
    if (s->readonly) return modattn__error(MODATTN_EINVAL, "%s: opened read-only", s->path);
    if (s->in_tx) return modattn__error(MODATTN_EINTERNAL, "%s: transaction already open", s->path);
    return exec_sql(s, "BEGIN IMMEDIATE", "taking the store's write lock");
}

void modattn__store_unlock(modattn_store *s) {
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int modattn__store_schema(const modattn_store *s) { return s->schema; }
int64_t modattn__store_last_chunk(const modattn_store *s) { return s->last_chunk; }
sqlite3 *modattn__store_db(modattn_store *s) { return s->db; }
void **modattn__store_ext_slot(modattn_store *s, const modattn__store_ext *ext) {
    for (int i = 0; i < s->next; i++)
        if (s->ext[i].ext == ext) return &s->ext[i].state;
    if (s->next == MODATTN__STORE_MAX_EXT) return NULL;
    s->ext[s->next].ext = ext;
    s->ext[s->next].state = NULL;
    return &s->ext[s->next++].state;
}

static char *col_dup(sqlite3_stmt *q, int i) {
    const char *t = (const char *)sqlite3_column_text(q, i);
    int n = sqlite3_column_bytes(q, i);
    return modattn__strndup(t ? t : "", (size_t)n, MODATTN_MEM_OTHER);
}

int modattn__store_get_chunk(modattn_store *s, int64_t chunk_id, modattn_store_chunk *out) {
    if (!s || !out) return modattn__error(MODATTN_EINVAL, "get_chunk: NULL argument");
    memset(out, 0, sizeof *out);
    sqlite3_stmt *q;
    int st = stmt(s, ST_GET_CHUNK, &q);
    if (st) return st;
    sqlite3_bind_int64(q, 1, chunk_id);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        out->id = sqlite3_column_int64(q, 0);
        out->document = sqlite3_column_int64(q, 1);
        out->path = col_dup(q, 2);
        out->kind = col_dup(q, 3);
        out->seq = sqlite3_column_int64(q, 4);
        out->start = sqlite3_column_int64(q, 5);
        out->end = sqlite3_column_int64(q, 6);
        out->line = sqlite3_column_int64(q, 7);
        out->page = sqlite3_column_int64(q, 8);
        out->ntokens = sqlite3_column_int64(q, 9);
        out->text = col_dup(q, 10);
        /* stored texts are valid UTF-8 (ingest.h); a damaged file's are made so, never passed on */
        if (out->text && !modattn__utf8_valid(out->text, strlen(out->text))) {
            size_t n = 0;
            char *clean = modattn__utf8_sanitize(out->text, strlen(out->text), &n);
            modattn_free(out->text);
            out->text = clean;
        }
        if (!out->path || !out->kind || !out->text) st = modattn__mem_last_status();
    } else if (rc == SQLITE_DONE) {
        st = modattn__error(MODATTN_ENOTFOUND, "%s: no chunk %" PRId64, s->path, chunk_id);
    } else {
        st = sq_err(s, rc, "reading a chunk");
    }
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (st) modattn__store_chunk_clear(out);
    return st;
}

int modattn__store_chunk_ids_under(modattn_store *s, const char *prefix, int64_t **ids, size_t *n) {
    if (!s || !prefix || !ids || !n) return modattn__error(MODATTN_EINVAL, "chunk_ids_under: NULL argument");
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *q = NULL;
    /* the path's first bytes compared as bytes (a BLOB compare: no collation, any encoding) */
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document "
                                "WHERE substr(CAST(d.path AS BLOB), 1, ?2) = CAST(?1 AS BLOB) ORDER BY c.id",
                                -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "finding the chunks under a path");
    const size_t plen = strlen(prefix);
    sqlite3_bind_blob(q, 1, prefix, (int)plen, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, (sqlite3_int64)plen);
    int st = 0;
    size_t cap = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 1024;
            int64_t *nv = modattn__realloc(*ids, nc * sizeof *nv, MODATTN_MEM_WORKSPACE);
            if (!nv) {
                st = modattn__mem_last_status();
                break;
            }
            *ids = nv;
            cap = nc;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(q, 0);
    }
    if (!st && rc != SQLITE_DONE) st = sq_err(s, rc, "finding the chunks under a path");
    sqlite3_finalize(q);
    if (st) {
        modattn_free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}

void modattn__store_chunk_clear(modattn_store_chunk *c) {
    if (!c) return;
    modattn_free(c->path);
    modattn_free(c->kind);
    modattn_free(c->text);
    memset(c, 0, sizeof *c);
}

int modattn_store_integrity_check(modattn_store *s) {
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_err(s, rc, "integrity_check");
    int st = 0;
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(q, 0);
        if (!r || strcmp(r, "ok") != 0)
            st = modattn__error(MODATTN_EFORMAT, "%s: integrity_check: %s", s->path, r ? r : "?");
    } else {
        st = sq_err(s, rc, "integrity_check");
    }
    sqlite3_finalize(q);
    return st;
}
