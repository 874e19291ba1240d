/* pipeline/store_sparse.c — the store's sparse (SPLADE) vectors: an inverted index in SQLite.
 *
 * Layout: sparse(term, chunk, weight), a WITHOUT ROWID table keyed (term, chunk): SQLite keeps a
 * term's postings together in one b-tree range, ordered by chunk, so a query reads exactly its own
 * terms' postings (one range scan each) and nothing else. An index on chunk serves the deletes.
 * Measured on the demo corpus with splade-tiny (223 chunks, 63,829 rows, 3.3 MB with the rest of the
 * store): the plan is "SEARCH p USING PRIMARY KEY (term=?)" per query term, and a query of 10, 50 and
 * 200 of the 400 most frequent terms took 0.34, 1.16 and 13.6 ms (median of 20, SQLite alone). A
 * per-term blob of postings would save the rows' keys but need a read-modify-write of every term's
 * blob per chunk written, and deletes by rewriting them; the table keeps writes and deletes to the
 * chunk's own rows, inside its transaction.
 * Rows are written by modattn__store_put_sparse inside the chunk's own transaction and removed by
 * a trigger on chunks (every path that deletes a chunk: re-index, rm, prune), so a kill or an
 * error leaves a chunk with all of its rows or none. The model that made them is recorded in meta
 * (sparse_model_name, sparse_model_identity, sparse_model_dir, sparse_top_k, sparse_threshold):
 * a store with another model's (or other pruning's) sparse vectors is refused, like a dense one. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "modattn/core.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/pipeline_internal.h"

static const char k_sparse_schema[] =
    "CREATE TABLE IF NOT EXISTS sparse(term INTEGER NOT NULL, chunk INTEGER NOT NULL, weight REAL NOT NULL,\n"
    "  PRIMARY KEY(term, chunk)) WITHOUT ROWID;\n"
    "CREATE INDEX IF NOT EXISTS sparse_chunk ON sparse(chunk);\n"
    "CREATE TRIGGER IF NOT EXISTS sparse_delete AFTER DELETE ON chunks BEGIN\n"
    "  DELETE FROM sparse WHERE chunk = old.id;\n"
    "END;\n";

static int sq(modattn_store *s, int rc, const char *what) {
    sqlite3 *db = modattn__store_db(s);
    const int code = rc == SQLITE_NOMEM ? MODATTN_ENOMEM : MODATTN_EIO;
    return modattn__error(code, "%s: %s: %s", modattn_store_path(s), what, db ? sqlite3_errmsg(db) : "no database");
}

static int meta_text(modattn_store *s, const char *key, char *buf, size_t len, bool *found) {
    sqlite3_stmt *q = NULL;
    *found = false;
    buf[0] = '\0';
    int rc = sqlite3_prepare_v2(modattn__store_db(s), "SELECT value FROM meta WHERE key = ?1", -1, &q, NULL);
    if (rc != SQLITE_OK) return sq(s, rc, "reading the sparse model");
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        snprintf(buf, len, "%s", (const char *)sqlite3_column_text(q, 0));
        *found = true;
        rc = SQLITE_DONE;
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : sq(s, rc, "reading the sparse model");
}

int modattn__store_sparse_get(modattn_store *s, modattn__sparse_ident *out, bool *found) {
    memset(out, 0, sizeof *out);
    *found = false;
    bool f1 = false, f2 = false, f3 = false, f4 = false, f5 = false;
    char num[64];
    int st;
    if ((st = meta_text(s, "sparse_model_identity", out->identity, sizeof out->identity, &f1))) return st;
    if (!f1) return 0;
    if ((st = meta_text(s, "sparse_model_name", out->name, sizeof out->name, &f2))) return st;
    if ((st = meta_text(s, "sparse_model_dir", out->dir, sizeof out->dir, &f3))) return st;
    if ((st = meta_text(s, "sparse_top_k", num, sizeof num, &f4))) return st;
    out->top_k = f4 ? (size_t)strtoull(num, NULL, 10) : 0;
    if ((st = meta_text(s, "sparse_threshold", num, sizeof num, &f5))) return st;
    out->threshold = f5 ? strtof(num, NULL) : 0.0f;
    *found = true;
    return 0;
}

bool modattn__store_has_sparse(modattn_store *s) {
    modattn__sparse_ident id;
    bool found = false;
    return s && modattn__store_sparse_get(s, &id, &found) == 0 && found;
}

int modattn__store_sparse_check(modattn_store *s, const modattn__sparse_ident *want, bool *recorded) {
    modattn__sparse_ident have;
    int st = modattn__store_sparse_get(s, &have, recorded);
    if (st || !*recorded) return st;
    if (strcmp(have.identity, want->identity) != 0)
        return modattn__error(MODATTN_EVERSION,
                              "%s: the store's sparse vectors were made by another sparse model (%s, identity %s; "
                              "this is %s, identity %s): give --sparse the store's model (%s), or index into a new "
                              "store",
                              modattn_store_path(s), have.name, have.identity, want->name, want->identity,
                              have.dir[0] ? have.dir : have.name);
    if (have.top_k != want->top_k || fabsf(have.threshold - want->threshold) > 0.0f)
        return modattn__error(MODATTN_EVERSION,
                              "%s: the store's sparse vectors were pruned with --top-k %zu --threshold %g, not "
                              "--top-k %zu --threshold %g: use the store's, or index into a new store",
                              modattn_store_path(s), have.top_k, (double)have.threshold, want->top_k,
                              (double)want->threshold);
    return 0;
}

int modattn__store_sparse_bind(modattn_store *s, const modattn__sparse_ident *want) {
    bool recorded = false;
    int st = modattn__store_sparse_check(s, want, &recorded);
    if (st || recorded) return st;
    sqlite3 *db = modattn__store_db(s);
    char *err = NULL;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) return sq(s, rc, "recording the sparse model");
    /* somebody may have bound one meanwhile */
    if ((st = modattn__store_sparse_check(s, want, &recorded)) || recorded) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    /* the chunks stored before would have no sparse vectors: sparse search would never find them */
    sqlite3_stmt *q = NULL;
    int64_t chunks = 0;
    rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM chunks", -1, &q, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) chunks = sqlite3_column_int64(q, 0), rc = SQLITE_OK;
    sqlite3_finalize(q);
    if (rc != SQLITE_OK) {
        st = sq(s, rc, "counting the chunks");
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    if (chunks > 0) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return modattn__error(MODATTN_EINVAL,
                              "%s: the store already holds %" PRId64 " chunks without sparse vectors: sparse vectors "
                              "are kept from a store's first document on (index with --sparse into a new store)",
                              modattn_store_path(s), chunks);
    }
    rc = sqlite3_exec(db, k_sparse_schema, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db,
                                "INSERT OR REPLACE INTO meta(key, value) VALUES ('sparse_model_identity', ?1), "
                                "('sparse_model_name', ?2), ('sparse_model_dir', ?3), ('sparse_top_k', ?4), "
                                "('sparse_threshold', ?5)",
                                -1, &q, NULL);
    if (rc == SQLITE_OK) {
        char k[32], t[32];
        snprintf(k, sizeof k, "%zu", want->top_k);
        snprintf(t, sizeof t, "%.9g", (double)want->threshold);
        sqlite3_bind_text(q, 1, want->identity, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, want->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, want->dir, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 4, k, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(q, 5, t, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(q);
        if (rc == SQLITE_DONE) rc = SQLITE_OK;
        sqlite3_finalize(q);
    }
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        st = sq(s, rc, "recording the sparse model");
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    return 0;
}

/* MODATTN_TEST_SPARSE_FAIL_AT=N: the Nth call since it was set to N fails (a fault inside a document's transaction, for
 * the tests of what a failed write leaves) */
static int fail_hook(void) {
    static long calls;      /* since the variable took its value */
    static char last[32];
    const char *e = getenv("MODATTN_TEST_SPARSE_FAIL_AT");
    if (!e || !*e) return 0;
    if (strncmp(e, last, sizeof last) != 0) {
        snprintf(last, sizeof last, "%s", e);
        calls = 0;
    }
    return ++calls == strtol(e, NULL, 10);
}

int modattn__store_put_sparse(modattn_store *s, int64_t chunk, const int32_t *terms, const float *weights, size_t n) {
    if (n && (!terms || !weights)) return modattn__error(MODATTN_EINVAL, "modattn__store_put_sparse: NULL argument");
    if (fail_hook()) return modattn__error(MODATTN_EIO, "%s: storing a sparse vector: injected fault", modattn_store_path(s));
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(modattn__store_db(s), "INSERT INTO sparse(term, chunk, weight) VALUES (?1, ?2, ?3)", -1,
                                &q, NULL);
    if (rc != SQLITE_OK) return sq(s, rc, "storing a sparse vector");
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        if (!(weights[i] > 0.0f) || !isfinite(weights[i])) continue; /* SPLADE weights are positive */
        sqlite3_bind_int64(q, 1, terms[i]);
        sqlite3_bind_int64(q, 2, chunk);
        sqlite3_bind_double(q, 3, (double)weights[i]);
        rc = sqlite3_step(q);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_OK ? 0 : sq(s, rc, "storing a sparse vector");
}

/* (term, weight) pairs of the query, heaviest first, for the cut at MODATTN__SPARSE_QUERY_TERMS */
typedef struct qterm {
    int32_t term;
    float w;
} qterm;

static int by_weight(const void *a, const void *b) {
    const qterm *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    return (x->term > y->term) - (x->term < y->term);
}

int modattn__store_sparse_topk(modattn_store *s, const int32_t *terms, const float *weights, size_t n, size_t k,
                               const char *path_prefix, int64_t *ids, double *scores, size_t *nout) {
    *nout = 0;
    if (!modattn__store_has_sparse(s))
        return modattn__error(MODATTN_EUNSUPPORTED,
                              "%s: the store has no sparse vectors: index it with `modattn index --sparse DIR` "
                              "(into a new store), or search with --mode hybrid, vector or keyword",
                              modattn_store_path(s));
    if (k == 0 || n == 0) return 0;
    if (n > 1u << 20) return modattn__error(MODATTN_ERANGE, "sparse query of %zu terms", n);
    /* the query's heaviest terms only: its time and memory stay bounded whatever its length */
    qterm *qt = modattn__malloc(n * sizeof *qt, MODATTN_MEM_OTHER);
    if (!qt) return modattn__mem_last_status();
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (weights[i] > 0.0f && isfinite(weights[i])) qt[m++] = (qterm){terms[i], weights[i]};
    qsort(qt, m, sizeof *qt, by_weight);
    if (m > MODATTN__SPARSE_QUERY_TERMS) m = MODATTN__SPARSE_QUERY_TERMS;
    /* the query as JSON ({"term": weight, ...}) joined with each term's postings: only its terms
     * are read; SQLite sums per chunk */
    size_t cap = m * 40 + 4;
    char *js = modattn__malloc(cap, MODATTN_MEM_OTHER);
    if (!js) {
        modattn_free(qt);
        return modattn__mem_last_status();
    }
    size_t o = 0;
    js[o++] = '{';
    for (size_t i = 0; i < m; i++)
        o += (size_t)snprintf(js + o, cap - o, "%s\"%" PRId32 "\":%.9g", i ? "," : "", qt[i].term, (double)qt[i].w);
    js[o++] = '}';
    js[o] = '\0';
    modattn_free(qt);
    const char *sql = path_prefix
                          ? "SELECT p.chunk, sum(p.weight * q.value) AS sc FROM json_each(?1) q "
                            "JOIN sparse p ON p.term = CAST(q.key AS INTEGER) "
                            "JOIN chunks c ON c.id = p.chunk JOIN documents d ON d.id = c.document "
                            "WHERE substr(CAST(d.path AS BLOB), 1, ?3) = CAST(?4 AS BLOB) "
                            "GROUP BY p.chunk ORDER BY sc DESC, p.chunk LIMIT ?2"
                          : "SELECT p.chunk, sum(p.weight * q.value) AS sc FROM json_each(?1) q "
                            "JOIN sparse p ON p.term = CAST(q.key AS INTEGER) "
                            "GROUP BY p.chunk ORDER BY sc DESC, p.chunk LIMIT ?2";
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(modattn__store_db(s), sql, -1, &q, NULL);
    if (rc != SQLITE_OK) {
        modattn_free(js);
        return sq(s, rc, "sparse search");
    }
    sqlite3_bind_text(q, 1, js, (int)o, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, k > (size_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)k);
    if (path_prefix) {
        sqlite3_bind_int64(q, 3, (sqlite3_int64)strlen(path_prefix));
        sqlite3_bind_blob(q, 4, path_prefix, (int)strlen(path_prefix), SQLITE_STATIC);
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && *nout < k) {
        ids[*nout] = sqlite3_column_int64(q, 0);
        scores[*nout] = sqlite3_column_double(q, 1);
        (*nout)++;
    }
    int st = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sq(s, rc, "sparse search");
    sqlite3_finalize(q);
    modattn_free(js);
    if (st) *nout = 0;
    return st;
}

int modattn__store_sparse_count(modattn_store *s, int64_t *rows, int64_t *chunks) {
    *rows = *chunks = 0;
    if (!modattn__store_has_sparse(s)) return 0;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(modattn__store_db(s), "SELECT count(*), count(DISTINCT chunk) FROM sparse", -1, &q, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        *rows = sqlite3_column_int64(q, 0);
        *chunks = sqlite3_column_int64(q, 1);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return rc == SQLITE_OK ? 0 : sq(s, rc, "counting sparse vectors");
}
