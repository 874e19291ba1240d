/* pipeline/keywords.c — keyword search over the store's FTS5 index (schema 3, store.c): the user's
 * text made into a query FTS5 cannot misread, BM25 top-k, and the byte spans a match covers in a
 * chunk's text (an FTS5 auxiliary function of ours, registered on the connection when first
 * needed: FTS5's highlight() gives marked text, not offsets). */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/internal_store.h"
#include "pipeline/keywords_internal.h"
#include "pipeline/pipeline_internal.h"
#include "pipeline/store_ext.h"

/* modattn_bm25 must equal FTS5's bm25() bit for bit: no fused multiply-adds (GCC in ISO C mode,
 * -std=c11, does not contract; clang does unless told) */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define MAX_TERM_BYTES 256

/* A run worth a phrase: it holds a letter or a digit (else FTS5's tokenizer finds no token in it). */
static bool has_word(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x80) {
            if ((p[i] >= '0' && p[i] <= '9') || ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'z')) return true;
            i++;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return false;
        const utf8proc_category_t c = utf8proc_category(cp);
        if (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) return true;
        if (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) return true;
        i += (size_t)k;
    }
    return false;
}

/* The length of p[0..n) cut to at most max bytes at a character boundary. */
static size_t cut_utf8(const unsigned char *p, size_t n, size_t max) {
    if (n <= max) return n;
    size_t k = max;
    while (k > 0 && (p[k] & 0xc0) == 0x80) k--;
    return k;
}

/* The runs of text worth a phrase (see modattn__keyword_query), at most MAX_TERMS, each cut to
 * MAX_TERM_BYTES: starts and lengths into text (valid UTF-8). */
static size_t runs(const char *text, size_t len, size_t *start, size_t *rlen) {
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len && n < MODATTN_KEYWORD_MAX_TERMS;) {
        while (i < len && p[i] <= 0x20) i++; /* spaces, controls and NUL separate runs */
        size_t j = i;
        while (j < len && p[j] > 0x20) j++;
        if (j > i && has_word(p + i, j - i)) {
            start[n] = i;
            rlen[n++] = cut_utf8(p + i, j - i, MAX_TERM_BYTES);
        }
        i = j;
    }
    return n;
}

/* The phrases keep[i] of the runs, quoted and joined with OR, into a new string. */
static int join_runs(const char *text, const size_t *start, const size_t *rlen, const bool *keep, size_t n, char **out) {
    char *q = modattn__malloc((size_t)MODATTN_KEYWORD_MAX_TERMS * (2 * MAX_TERM_BYTES + 6) + 1, MODATTN_MEM_OTHER);
    if (!q) return modattn__mem_last_status();
    size_t o = 0;
    int terms = 0;
    for (size_t r = 0; r < n; r++) {
        if (keep && !keep[r]) continue;
        if (terms++) {
            memcpy(q + o, " OR ", 4);
            o += 4;
        }
        q[o++] = '"';
        for (size_t k = 0; k < rlen[r]; k++) {
            if (text[start[r] + k] == '"') q[o++] = '"';
            q[o++] = text[start[r] + k];
        }
        q[o++] = '"';
    }
    q[o] = '\0';
    *out = q;
    return 0;
}

/* text as valid UTF-8: itself, or a repaired copy in *clean (modattn_free) */
static int valid_text(const char **text, size_t *len, char **clean) {
    *clean = NULL;
    if (*len && !modattn__utf8_valid(*text, *len)) {
        if (!(*clean = modattn__utf8_sanitize(*text, *len, len))) return modattn__mem_last_status();
        *text = *clean;
    }
    return 0;
}

int modattn__keyword_query(const char *text, size_t len, char **out) {
    if (!out || (!text && len)) return modattn__error(MODATTN_EINVAL, "keyword_query: NULL argument");
    *out = NULL;
    char *clean = NULL;
    int st = valid_text(&text, &len, &clean);
    if (st) return st;
    size_t start[MODATTN_KEYWORD_MAX_TERMS], rlen[MODATTN_KEYWORD_MAX_TERMS];
    const size_t n = runs(text ? text : "", len, start, rlen);
    st = join_runs(text ? text : "", start, rlen, NULL, n, out);
    modattn_free(clean);
    return st;
}

/* (a schema-3 store opened by an SQLite without FTS5 is searched by meaning, as one of schema 2) */
bool modattn__store_has_keywords(const modattn_store *s) {
    return s && modattn__store_schema(s) >= 3 && modattn__sqlite_has_fts5();
}

static int no_index(modattn_store *s) {
    return modattn__error(MODATTN_EUNSUPPORTED,
                         "%s: the store has no keyword index (schema %d; `modattn index` adds it, where SQLite has FTS5)",
                         modattn_store_path(s), modattn__store_schema(s));
}

static int sq_fail(modattn_store *s, int rc, const char *what) {
    sqlite3 *db = modattn__store_db(s);
    return modattn__error(rc == SQLITE_NOMEM ? MODATTN_ENOMEM : MODATTN_EIO, "%s: %s: %s", modattn_store_path(s), what,
                         db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

/* ---- keywords.c's state on a connection: our FTS5 functions, and each chunk's size in tokens
 *
 * BM25 needs the length of every row it scores. FTS5's bm25() reads it from the chunks_fts_docsize
 * table, one B-tree lookup per matching row: on a query whose words a third of 100k chunks hold,
 * four fifths of its time (measured: 97 of 120 ms). modattn_bm25() is the same formula, with the
 * sizes read once per store generation into a sorted array (12 bytes a chunk) and found by binary
 * search; a row not there (none should be) is asked of FTS5. Its scores equal bm25()'s bit for bit
 * (test_pipeline_unit). */

typedef struct modattn__kw {
    bool registered;  /* modattn_spans and modattn_bm25 are on the connection */
    bool have_sizes;  /* ids/sz hold the sizes of generation gen */
    uint64_t gen;
    int64_t *ids;     /* ascending */
    uint32_t *sz;     /* tokens in all columns of row ids[i] */
    size_t n, cap;
    size_t pruned;    /* keyword searches answered without scoring every matching row */
    bool use_sizes;   /* this search may use them: not inside a write transaction, whose rows
                       * and generation are not final */
    struct vocab *vocab; /* the index's terms, for prefixes and typos (read when first needed) */
} kw_state;

struct vocab;
static void vocab_free(struct vocab *v);

static void kw_release(void *state) {
    kw_state *kw = state;
    if (!kw) return;
    vocab_free(kw->vocab);
    modattn_free(kw->ids);
    modattn_free(kw->sz);
    modattn_free(kw);
}

/* keywords.c's slot on a store (store_ext.h): released with the connection its functions are on */
static const modattn__store_ext kw_ext = {"keywords", kw_release};

/* FTS5's column sizes: a varint per column (SQLite's varint: 7 bits a byte, big-endian, the high
 * bit set on all but the last; a ninth byte holds 8 bits), summed. -1 if malformed. */
static int64_t sum_varints(const unsigned char *p, int n) {
    int64_t total = 0;
    for (int i = 0; i < n;) {
        uint64_t v = 0;
        int k = 0;
        for (; k < 9 && i < n; k++) {
            const unsigned char c = p[i++];
            if (k == 8) {
                v = (v << 8) | c;
                break;
            }
            v = (v << 7) | (c & 0x7f);
            if (!(c & 0x80)) break;
        }
        if (v > UINT32_MAX) return -1;
        total += (int64_t)v;
    }
    return total > UINT32_MAX ? -1 : total;
}

/* Reads every row's size if the store's generation moved since they were read. Inside the
 * caller's read snapshot, so sizes and query see the same rows. On failure the sizes are
 * dropped (modattn_bm25 then asks FTS5 row by row): slower, never wrong. */
static void load_sizes(modattn_store *s, kw_state *kw) {
    uint64_t gen = 0;
    if (modattn_store_generation(s, &gen)) {
        kw->have_sizes = false;
        return;
    }
    if (kw->have_sizes && kw->gen == gen) return;
    const uint64_t tr = modattn__trace_begin();
    kw->have_sizes = false;
    kw->n = 0;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(modattn__store_db(s), "SELECT id, sz FROM chunks_fts_docsize ORDER BY id", -1, &q, NULL) != SQLITE_OK)
        return;
    int rc;
    bool ok = true;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (kw->n == kw->cap) {
            const size_t nc = kw->cap ? 2 * kw->cap : 4096;
            int64_t *ni = modattn__realloc(kw->ids, nc * sizeof *ni, MODATTN_MEM_OTHER);
            if (ni) kw->ids = ni;
            uint32_t *ns = ni ? modattn__realloc(kw->sz, nc * sizeof *ns, MODATTN_MEM_OTHER) : NULL;
            if (ns) kw->sz = ns;
            if (!ni || !ns) {
                ok = false;
                break;
            }
            kw->cap = nc;
        }
        const int64_t t = sum_varints(sqlite3_column_blob(q, 1), sqlite3_column_bytes(q, 1));
        if (t < 0) continue; /* asked of FTS5 when scored */
        kw->ids[kw->n] = sqlite3_column_int64(q, 0);
        kw->sz[kw->n++] = (uint32_t)t;
    }
    sqlite3_finalize(q);
    if (ok && rc == SQLITE_DONE) {
        kw->have_sizes = true;
        kw->gen = gen;
    } else {
        modattn_clear_error(); /* (an allocation failure above set it; the search goes on) */
    }
    if (tr) {
        char shape[32];
        snprintf(shape, sizeof shape, "rows=%zu", kw->n);
        modattn__trace_end(tr, "search.keyword_sizes", "sqlite", shape, (double)kw->n * 12.0, 0);
    }
}

typedef struct bm25_query {
    int nphrase, skip;
    double avgdl;
    double *idf, *freq;
} bm25_query;

static int count_row(const Fts5ExtensionApi *api, Fts5Context *fts, void *ctx) {
    (void)api, (void)fts;
    (*(int64_t *)ctx)++;
    return SQLITE_OK;
}

/* What is computed once per query: the average row length and each phrase's idf,
 * log((N - n + 0.5) / (n + 0.5)) over N rows of which n hold the phrase, floored at 1e-6. */
static int bm25_prepare(const Fts5ExtensionApi *api, Fts5Context *fts, int skip, bm25_query **out) {
    bm25_query *b = api->xGetAuxdata(fts, 0);
    if (b) {
        *out = b;
        return SQLITE_OK;
    }
    const int np = api->xPhraseCount(fts);
    if (!(b = sqlite3_malloc64(sizeof *b + 2 * (size_t)(np > 0 ? np : 1) * sizeof(double)))) return SQLITE_NOMEM;
    b->nphrase = np;
    b->skip = skip;
    b->idf = (double *)(b + 1);
    b->freq = b->idf + (np > 0 ? np : 1);
    sqlite3_int64 rows = 0, tokens = 0;
    int rc = api->xRowCount(fts, &rows);
    if (rc == SQLITE_OK) rc = api->xColumnTotalSize(fts, -1, &tokens);
    if (rc == SQLITE_OK) b->avgdl = (double)tokens / (double)(rows > 0 ? rows : 1);
    for (int i = skip; rc == SQLITE_OK && i < np; i++) {
        int64_t hits = 0;
        rc = api->xQueryPhrase(fts, i, &hits, count_row);
        double idf = log(((double)rows - (double)hits + 0.5) / ((double)hits + 0.5));
        b->idf[i] = idf > 0 ? idf : 1e-6;
    }
    if (rc == SQLITE_OK) rc = api->xSetAuxdata(fts, b, sqlite3_free);
    else sqlite3_free(b);
    *out = rc == SQLITE_OK ? b : NULL;
    return rc;
}

/* modattn_bm25(chunks_fts, skip, w0, w1, ...): BM25 (k1 1.2, b 0.75) over the query's phrases
 * from the skip-th on (those before only select rows: see modattn__store_keyword_topk), each
 * instance of a phrase in column c counting w_c (1 past the weights given), higher better. */
static void bm25_fn(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nval, sqlite3_value **vals) {
    const double k1 = 1.2, b = 0.75;
    const kw_state *kw = api->xUserData(fts);
    bm25_query *q = NULL;
    const int skip = nval > 0 ? sqlite3_value_int(vals[0]) : 0;
    if (nval > 0) vals++, nval--;
    int rc = bm25_prepare(api, fts, skip < 0 ? 0 : skip, &q), ninst = 0;
    if (rc == SQLITE_OK) {
        memset(q->freq, 0, (size_t)(q->nphrase > 0 ? q->nphrase : 1) * sizeof *q->freq);
        rc = api->xInstCount(fts, &ninst);
    }
    for (int i = 0; rc == SQLITE_OK && i < ninst; i++) {
        int phrase = 0, col = 0, off = 0;
        if ((rc = api->xInst(fts, i, &phrase, &col, &off)) == SQLITE_OK && phrase >= q->skip && phrase < q->nphrase)
            q->freq[phrase] += nval > col ? sqlite3_value_double(vals[col]) : 1.0;
    }
    double len = -1;
    if (rc == SQLITE_OK && kw && kw->use_sizes && kw->have_sizes && kw->n) {
        const int64_t id = api->xRowid(fts);
        size_t lo = 0, hi = kw->n;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (kw->ids[mid] < id) lo = mid + 1;
            else hi = mid;
        }
        if (lo < kw->n && kw->ids[lo] == id) len = kw->sz[lo];
    }
    if (rc == SQLITE_OK && len < 0) {
        int t = 0;
        rc = api->xColumnSize(fts, -1, &t);
        len = t;
    }
    double score = 0;
    for (int i = q ? q->skip : 0; rc == SQLITE_OK && i < q->nphrase; i++) /* (q is set when rc is OK) */
        score += q->idf[i] * ((q->freq[i] * (k1 + 1.0)) / (q->freq[i] + k1 * (1 - b + b * len / q->avgdl)));
    if (rc == SQLITE_OK) sqlite3_result_double(ctx, score);
    else sqlite3_result_error_code(ctx, rc);
}

static void spans_fn(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nval, sqlite3_value **vals);
static fts5_api *fts5_of(sqlite3 *db);

/* The state, with our functions registered on the connection. */
static int kw_of(modattn_store *s, kw_state **out) {
    void **slot = modattn__store_ext_slot(s, &kw_ext);
    if (!slot) return modattn__error(MODATTN_EINVAL, "%s: too many store extensions", modattn_store_path(s));
    if (!*slot && !(*slot = modattn__calloc(1, sizeof(kw_state), MODATTN_MEM_OTHER))) return modattn__mem_last_status();
    kw_state *kw = *slot;
    if (!kw->registered) {
        fts5_api *api = fts5_of(modattn__store_db(s));
        int rc = api ? api->xCreateFunction(api, "modattn_spans", NULL, spans_fn, NULL) : SQLITE_NOMEM;
        if (rc == SQLITE_OK) rc = api->xCreateFunction(api, "modattn_bm25", kw, bm25_fn, NULL);
        if (rc != SQLITE_OK) /* (no api: SQLite could not run the query that gives it: memory) */
            return rc == SQLITE_NOMEM
                       ? modattn__error(MODATTN_ENOMEM, "%s: keyword search: out of memory", modattn_store_path(s))
                       : modattn__error(MODATTN_EIO, "%s: cannot register the keyword functions with FTS5",
                                       modattn_store_path(s));
        kw->registered = true;
    }
    *out = kw;
    return 0;
}

static int topk_pruned(modattn_store *s, kw_state *kw, const char *fts, size_t k, const char *path_prefix, int64_t *ids,
                       double *scores, size_t *n, bool *done);
typedef struct phrase {
    const char *at; /* "…" as written in the query, quotes included */
    size_t len;
    int64_t df;     /* rows that hold it (one-token phrases), -1 unknown */
    double bound;
    bool prefix;    /* "…"* (its rows unknown: never left out) */
} phrase;
static size_t parse_query(const char *fts, phrase *p, size_t cap, size_t *nreq);

/* One pass: the best k rows that `match` selects, by BM25 over its phrases from the skip-th on. */
static int topk_pass(modattn_store *s, const char *match, int skip, size_t k, const char *path_prefix, int64_t *ids,
                     double *scores, size_t *n) {
    sqlite3 *db = modattn__store_db(s);
    sqlite3_stmt *q = NULL;
    *n = 0;
    /* bm25 weights: the text 1, the file's name 0.5 */
    const char *sql = path_prefix
                          ? "SELECT f.rowid, modattn_bm25(chunks_fts, ?5, 1.0, 0.5) AS sc FROM chunks_fts f "
                            "JOIN chunks c ON c.id = f.rowid JOIN documents d ON d.id = c.document "
                            "WHERE chunks_fts MATCH ?1 AND substr(CAST(d.path AS BLOB), 1, ?3) = CAST(?4 AS BLOB) "
                            "ORDER BY sc DESC, f.rowid LIMIT ?2"
                          : "SELECT rowid, modattn_bm25(chunks_fts, ?5, 1.0, 0.5) AS sc FROM chunks_fts "
                            "WHERE chunks_fts MATCH ?1 ORDER BY sc DESC, rowid LIMIT ?2";
    int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_fail(s, rc, "keyword search");
    sqlite3_bind_text(q, 1, match, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, k > (size_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)k);
    if (path_prefix) {
        sqlite3_bind_int64(q, 3, (sqlite3_int64)strlen(path_prefix));
        sqlite3_bind_blob(q, 4, path_prefix, (int)strlen(path_prefix), SQLITE_STATIC);
    }
    sqlite3_bind_int(q, 5, skip);
    const uint64_t tr = modattn__trace_begin();
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && *n < k) {
        ids[*n] = sqlite3_column_int64(q, 0);
        scores[*n] = sqlite3_column_double(q, 1);
        (*n)++;
    }
    int st = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sq_fail(s, rc, "keyword search");
    sqlite3_finalize(q);
    if (st) *n = 0;
    if (tr) {
        char shape[48];
        snprintf(shape, sizeof shape, "skip=%d k=%zu", skip, k);
        modattn__trace_end(tr, "search.keyword_pass", "fts5", shape, 0, 0);
    }
    return st;
}

int modattn__store_keyword_topk(modattn_store *s, const char *fts, size_t k, const char *path_prefix, int64_t *ids,
                               double *scores, size_t *n) {
    if (!s || !fts || !n || (k && (!ids || !scores))) return modattn__error(MODATTN_EINVAL, "keyword_topk: NULL argument");
    *n = 0;
    if (!modattn__store_has_keywords(s)) return no_index(s);
    if (k == 0 || !*fts) return 0;
    sqlite3 *db = modattn__store_db(s);
    kw_state *kw = NULL;
    int st = kw_of(s, &kw);
    if (st) return st;
    /* sizes and query in one snapshot (the caller's, else one of ours); none of the cached sizes
     * nor the pruning (which bounds by them) inside a write transaction, or without a snapshot */
    const bool autocommit = sqlite3_get_autocommit(db) != 0;
    const bool own_tx = autocommit && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    kw->use_sizes = (own_tx || !autocommit) && sqlite3_txn_state(db, "main") != SQLITE_TXN_WRITE;
    if (kw->use_sizes) load_sizes(s, kw);
    bool done = false;
    if (kw->use_sizes) st = topk_pruned(s, kw, fts, k, path_prefix, ids, scores, n, &done);
    if (!st && !done) {
        phrase p[MODATTN_KEYWORD_MAX_TERMS];
        size_t nreq = 0;
        parse_query(fts, p, MODATTN_KEYWORD_MAX_TERMS, &nreq);
        st = topk_pass(s, fts, (int)nreq, k, path_prefix, ids, scores, n);
    }
    if (own_tx && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK && !sqlite3_get_autocommit(db)) {
        /* (a read transaction's COMMIT fails only if SQLite cannot run it: out of memory) */
        const int cst = sq_fail(s, SQLITE_NOMEM, "ending the keyword search's snapshot");
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        if (!st) st = cst, *n = 0;
    }
    return st;
}

size_t modattn__store_kw_pruned(modattn_store *s) {
    void **slot = modattn__store_ext_slot(s, &kw_ext);
    const kw_state *kw = slot ? *slot : NULL;
    return kw ? kw->pruned : 0;
}

/* ---- modattn_spans(chunks_fts): the byte spans of column 0 (text) that the query's phrases match,
 * as int64 pairs in a blob, sorted and merged */

typedef struct tokmap {
    int *start, *end;
    int n, cap;
    bool failed;
} tokmap;

static int on_token(void *ctx, int tflags, const char *token, int ntoken, int start, int end) {
    (void)token, (void)ntoken;
    tokmap *m = ctx;
    if (tflags & FTS5_TOKEN_COLOCATED) return SQLITE_OK;
    if (m->n == m->cap) {
        int nc = m->cap ? m->cap * 2 : 256;
        int *ns = sqlite3_realloc(m->start, (int)(nc * sizeof *ns));
        if (!ns) return SQLITE_NOMEM;
        m->start = ns;
        int *ne = sqlite3_realloc(m->end, (int)(nc * sizeof *ne));
        if (!ne) return SQLITE_NOMEM;
        m->end = ne;
        m->cap = nc;
    }
    m->start[m->n] = start;
    m->end[m->n] = end;
    m->n++;
    return SQLITE_OK;
}

static int cmp_span(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static void spans_fn(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nval,
                     sqlite3_value **vals) {
    (void)nval, (void)vals;
    const char *text = NULL;
    int len = 0, rc = api->xColumnText(fts, 0, &text, &len);
    tokmap m = {0};
    if (rc == SQLITE_OK && text) rc = api->xTokenize(fts, text, len, &m, on_token);
    int ninst = 0;
    if (rc == SQLITE_OK) rc = api->xInstCount(fts, &ninst);
    int64_t *sp = NULL;
    int nsp = 0;
    if (rc == SQLITE_OK && ninst > 0 && !(sp = sqlite3_malloc64((sqlite3_uint64)ninst * 2 * sizeof *sp))) rc = SQLITE_NOMEM;
    for (int i = 0; rc == SQLITE_OK && i < ninst; i++) {
        int phrase = 0, col = 0, off = 0;
        if ((rc = api->xInst(fts, i, &phrase, &col, &off)) != SQLITE_OK) break;
        const int size = api->xPhraseSize(fts, phrase);
        if (col != 0 || off < 0 || size < 1 || off >= m.n || size > m.n - off) continue; /* (a damaged index's offsets) */
        sp[2 * nsp] = m.start[off];
        sp[2 * nsp + 1] = m.end[off + size - 1];
        nsp++;
    }
    if (rc == SQLITE_OK && nsp > 1) { /* sorted, overlaps merged */
        qsort(sp, (size_t)nsp, 2 * sizeof *sp, cmp_span);
        int w = 0;
        for (int i = 1; i < nsp; i++) {
            if (sp[2 * i] <= sp[2 * w + 1]) {
                if (sp[2 * i + 1] > sp[2 * w + 1]) sp[2 * w + 1] = sp[2 * i + 1];
            } else {
                w++;
                sp[2 * w] = sp[2 * i], sp[2 * w + 1] = sp[2 * i + 1];
            }
        }
        nsp = w + 1;
    }
    sqlite3_free(m.start);
    sqlite3_free(m.end);
    if (rc != SQLITE_OK) {
        sqlite3_free(sp);
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    sqlite3_result_blob(ctx, sp ? (const void *)sp : "", (int)(nsp * 2 * sizeof *sp), SQLITE_TRANSIENT);
    sqlite3_free(sp);
}

/* fts5_api of the connection (https://sqlite.org/fts5.html#extending_fts5) */
static fts5_api *fts5_of(sqlite3 *db) {
    fts5_api *api = NULL;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &q, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_pointer(q, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(q);
    sqlite3_finalize(q);
    return api;
}

/* ---- a query for this store: words most chunks hold left out */

typedef struct one_token {
    int count;
    char tok[MAX_TERM_BYTES * 4 + 1];
} one_token;

static int on_query_token(void *ctx, int tflags, const char *token, int ntoken, int start, int end) {
    (void)start, (void)end;
    one_token *t = ctx;
    if (tflags & FTS5_TOKEN_COLOCATED) return SQLITE_OK;
    if (t->count++ == 0 && ntoken > 0 && (size_t)ntoken < sizeof t->tok) {
        memcpy(t->tok, token, (size_t)ntoken);
        t->tok[ntoken] = '\0';
    }
    return SQLITE_OK;
}

/* ---- the store's vocabulary (fts5vocab), for words no chunk holds: a prefix of some, or one
 * edit away from one (typos). Read once per store generation, when a query first needs it, into
 * sorted arrays (its terms, ~10 bytes each, counted against the memory budget); a vocabulary over
 * MAX_VOCAB_BYTES is not read (no corrections then). */

#define MAX_VOCAB_BYTES ((size_t)64 << 20)

typedef struct vocab {
    bool have;
    uint64_t gen;
    char *text;      /* the terms, NUL-terminated, in order */
    uint32_t *off;   /* term i at text + off[i] */
    uint32_t *df;    /* rows that hold it */
    size_t n, bytes;
} vocab;

static vocab *vocab_of(modattn_store *s);

/* Code points of a UTF-8 string (at most cap; -1 if longer or malformed). */
static int to_cps(const char *t, int32_t *cp, int cap) {
    int n = 0;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)t;
    for (utf8proc_ssize_t i = 0; p[i];) {
        utf8proc_int32_t c;
        const utf8proc_ssize_t k = utf8proc_iterate(p + i, -1, &c);
        if (k <= 0 || n == cap) return -1;
        cp[n++] = c;
        i += k;
    }
    return n;
}

/* The optimal-string-alignment distance (insert, delete, substitute, swap two neighbours) of a
 * and b, or max + 1 when over max. */
static int edit_distance(const int32_t *a, int na, const int32_t *b, int nb, int max) {
    if (na - nb > max || nb - na > max) return max + 1;
    int d[3][66]; /* rows i-2, i-1, i (na, nb <= 64) */
    for (int j = 0; j <= nb; j++) d[1][j] = j;
    for (int i = 1; i <= na; i++) {
        int *cur = d[(i + 1) % 3], *prev = d[i % 3], *pp = d[(i + 2) % 3];
        cur[0] = i;
        int best = cur[0];
        for (int j = 1; j <= nb; j++) {
            int v = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < v) v = pp[j - 2] + 1;
            cur[j] = v;
            if (v < best) best = v;
        }
        if (best > max) return max + 1;
    }
    return d[(na + 1) % 3][nb];
}

/* The first vocabulary term >= t. */
static size_t vocab_lower(const vocab *v, const char *t) {
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (strcmp(v->text + v->off[mid], t) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Whether some term begins with t (and is longer). */
static bool vocab_has_prefix(const vocab *v, const char *t) {
    const size_t i = vocab_lower(v, t), n = strlen(t);
    return i < v->n && strncmp(v->text + v->off[i], t, n) == 0 && v->text[v->off[i] + n];
}

/* The term nearest t (1 edit for 4 to 7 characters, 2 from 8), most rows first, else the first in
 * order: its index, or -1. A stop word of lang is never the answer. */
static long vocab_nearest(const vocab *v, const char *t, int lang) {
    int32_t a[64], b[64];
    const int na = to_cps(t, a, 64);
    if (na < 4) return -1;
    const int max = na >= 8 ? 2 : 1;
    long best = -1;
    int bestd = max + 1;
    for (size_t i = 0; i < v->n; i++) {
        const char *w = v->text + v->off[i];
        const size_t wl = strlen(w), tl = strlen(t);
        if (wl + 4 * (size_t)max < tl || tl + 4 * (size_t)max < wl) continue; /* (bytes: up to 4 per character) */
        const int nb = to_cps(w, b, 64);
        if (nb < 0) continue;
        const int d = edit_distance(a, na, b, nb, max);
        if (d > max || d == 0) continue;
        if (d < bestd || (d == bestd && v->df[i] > v->df[best])) {
            if (modattn__is_stopword(lang, w)) continue;
            best = (long)i, bestd = d;
        }
    }
    return best;
}

/* What a run of the query is. */
typedef struct qword {
    char tok[MAX_TERM_BYTES * 4 + 1]; /* its one token ("" when it has several) */
    int64_t df;                       /* rows that hold it (one token), -1 unknown */
    bool stop, common, prefix;        /* prefix: written with a trailing '*', or a prefix found */
    const char *fix;                  /* the word it is taken for (a typo's correction), or NULL */
} qword;

/* The phrases of the runs kept (the text's, or each one's fix), quoted, prefixes starred, joined
 * with OR, into a new string. */
static int join_words(const char *text, const size_t *start, const size_t *rlen, const bool *keep, const qword *w,
                      size_t n, char **out) {
    char *q = modattn__malloc((size_t)MODATTN_KEYWORD_MAX_TERMS * (2 * (MAX_TERM_BYTES * 4 + 1) + 7) + 1, MODATTN_MEM_OTHER);
    if (!q) return modattn__mem_last_status();
    size_t o = 0;
    int terms = 0;
    for (size_t r = 0; r < n; r++) {
        if (!keep[r]) continue;
        if (terms++) memcpy(q + o, " OR ", 4), o += 4;
        const char *p = w[r].fix ? w[r].fix : w[r].prefix ? w[r].tok : text + start[r];
        const size_t pl = w[r].fix || w[r].prefix ? strlen(p) : rlen[r];
        q[o++] = '"';
        for (size_t k = 0; k < pl; k++) {
            if (p[k] == '"') q[o++] = '"';
            q[o++] = p[k];
        }
        q[o++] = '"';
        if (w[r].prefix) q[o++] = '*';
    }
    q[o] = '\0';
    *out = q;
    return 0;
}

static void add_fix(modattn__kw_query_info *info, const char *from, size_t fl, const char *to, bool star) {
    if (!info) return;
    const size_t o = strlen(info->fixes);
    if (o + 8 >= sizeof info->fixes) return;
    snprintf(info->fixes + o, sizeof info->fixes - o, "%s%.*s \xe2\x86\x92 %s%s", o ? ", " : "", (int)(fl > 64 ? 64 : fl), from,
             to, star ? "*" : "");
}

int modattn__store_keyword_query_info(modattn_store *s, const char *text, size_t len, char **out, char **marks,
                                 modattn__kw_query_info *info) {
    if (info) memset(info, 0, sizeof *info), info->lang = -1;
    if (marks) *marks = NULL;
    if (!s || !out || (!text && len)) return modattn__error(MODATTN_EINVAL, "keyword_query: NULL argument");
    *out = NULL;
    if (!modattn__store_has_keywords(s)) return no_index(s);
    char *clean = NULL;
    int st = valid_text(&text, &len, &clean);
    if (st) return st;
    if (!text) text = "";
    size_t start[MODATTN_KEYWORD_MAX_TERMS], rlen[MODATTN_KEYWORD_MAX_TERMS];
    bool keep[MODATTN_KEYWORD_MAX_TERMS];
    qword *w = modattn__calloc(MODATTN_KEYWORD_MAX_TERMS, sizeof *w, MODATTN_MEM_OTHER);
    if (!w) {
        modattn_free(clean);
        return modattn__mem_last_status();
    }
    const size_t n = runs(text, len, start, rlen);
    sqlite3 *db = modattn__store_db(s);
    fts5_api *api = n ? fts5_of(db) : NULL;
    void *ud = NULL;
    fts5_tokenizer tk;
    Fts5Tokenizer *t = NULL;
    sqlite3_stmt *q = NULL;
    int64_t total = 0;
    for (size_t r = 0; r < n; r++) keep[r] = true, w[r].df = -1;
    /* each one-token phrase's document frequency, through a temporary fts5vocab table (works on a
     * read-only connection: the temp database is this connection's own) */
    const char *args[] = {"remove_diacritics", "2"}; /* as the table's tokenizer */
    if (api && api->xFindTokenizer(api, "unicode61", &ud, &tk) == SQLITE_OK && tk.xCreate(ud, args, 2, &t) == SQLITE_OK &&
        sqlite3_exec(db, "CREATE VIRTUAL TABLE IF NOT EXISTS temp.modattn_vocab USING fts5vocab(main, chunks_fts, row)",
                     NULL, NULL, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT doc FROM temp.modattn_vocab WHERE term = ?1", -1, &q, NULL) == SQLITE_OK) {
        sqlite3_stmt *c = NULL;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM chunks", -1, &c, NULL) == SQLITE_OK && sqlite3_step(c) == SQLITE_ROW)
            total = sqlite3_column_int64(c, 0);
        sqlite3_finalize(c);
        for (size_t r = 0; r < n && total > 0; r++) {
            one_token ot = {0};
            if (tk.xTokenize(t, &ot, FTS5_TOKENIZE_QUERY, text + start[r], (int)rlen[r], on_query_token) != SQLITE_OK ||
                ot.count != 1 || !ot.tok[0])
                continue; /* a phrase of several tokens is selective enough */
            memcpy(w[r].tok, ot.tok, sizeof w[r].tok);
            sqlite3_bind_text(q, 1, ot.tok, -1, SQLITE_STATIC);
            w[r].df = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
            sqlite3_reset(q);
            /* written as a prefix ("recurs*"): every word that begins so (3 characters at least:
             * "a*" would read the postings of a good part of the vocabulary) */
            w[r].prefix = rlen[r] > 1 && text[start[r] + rlen[r] - 1] == '*' && strlen(ot.tok) >= 3;
        }
    }
    if (t) tk.xDelete(t);
    sqlite3_finalize(q);
    /* the text's language, by the stop words it holds, and which words are stop words */
    const char *toks[MODATTN_KEYWORD_MAX_TERMS];
    size_t nt = 0;
    for (size_t r = 0; r < n; r++)
        if (w[r].tok[0]) toks[nt++] = w[r].tok;
    const int lang = modattn__stopword_language(toks, nt);
    size_t strong = 0;
    for (size_t r = 0; r < n; r++) {
        if (!w[r].tok[0] || w[r].prefix) {
            strong++; /* several tokens ("sqlite3_close()"), or a prefix: selective */
            continue;
        }
        w[r].stop = modattn__is_stopword(lang, w[r].tok);
        /* held by more than half the chunks: BM25's idf is about 0 (FTS5 floors it at 1e-6), a
         * chunk found by it alone is found by nothing, and reading its postings costs the most */
        w[r].common = total > 0 && (double)w[r].df > MODATTN__KW_COMMON_SHARE * (double)total;
        if (!w[r].stop && !w[r].common) strong++;
    }
    /* a word no chunk holds: a prefix of some ("recurs"), or, when no word of the query that
     * carries information is in the store as typed, a typo of one ("recursivly"): a word spelt
     * right that the store lacks ("coffee") is not taken for its neighbour ("toffee") while the
     * query's other words find passages */
    bool found = false;
    for (size_t r = 0; r < n; r++) found |= !w[r].stop && (w[r].df > 0 || !w[r].tok[0]);
    vocab *v = NULL;
    for (size_t r = 0; r < n; r++) {
        if (w[r].df != 0 || w[r].stop || w[r].prefix || !w[r].tok[0]) continue;
        bool digit = false;
        for (const char *c = w[r].tok; *c; c++) digit |= *c >= '0' && *c <= '9';
        if (digit || strlen(w[r].tok) < 4) continue; /* (codes and numbers are not spelled) */
        if (!v && !(v = vocab_of(s))) break;
        if (vocab_has_prefix(v, w[r].tok)) {
            w[r].prefix = true;
            add_fix(info, text + start[r], rlen[r], w[r].tok, true);
            continue;
        }
        const long near = found ? -1 : vocab_nearest(v, w[r].tok, lang);
        if (near >= 0) {
            w[r].fix = v->text + v->off[near];
            add_fix(info, text + start[r], rlen[r], w[r].fix, false);
        }
    }
    size_t kept = n;
    bool req[MODATTN_KEYWORD_MAX_TERMS], scored_stop = false;
    if (strong > 0) {
        /* the words that carry information select the rows: the others find nothing by
         * themselves; stop words still score (a tie-break among rows the others found, as
         * before), common words are left out (they weigh about nothing) */
        for (size_t r = 0; r < n; r++) {
            const bool weak = w[r].tok[0] && !w[r].prefix && (w[r].stop || w[r].common);
            req[r] = !weak;
            if (weak && w[r].common) keep[r] = false, kept--;
            else if (weak) scored_stop = true;
        }
    } else if (n) {
        /* only stop words and common ones: the common ones are left out (their postings cost the
         * most and weigh about nothing), unless all are (the rarest stays) */
        for (size_t r = 0; r < n; r++)
            if (w[r].common) keep[r] = false, kept--;
        if (kept == 0) {
            size_t best = 0;
            for (size_t r = 1; r < n; r++)
                if (w[r].df < w[best].df) best = r;
            keep[best] = true;
            kept = 1;
        }
    }
    if (info) {
        info->words = n;
        info->kept = kept;
        info->lang = lang;
        info->weak_only = n > 0 && strong == 0;
        for (size_t r = 0; r < n; r++) info->stop += w[r].stop, info->common += !w[r].stop && w[r].common;
    }
    char *all = NULL, *sel = NULL;
    st = join_words(text, start, rlen, keep, w, n, &all);
    if (!st && scored_stop) st = join_words(text, start, rlen, req, w, n, &sel);
    if (!st && sel) { /* "(S) AND (ALL)": rows that hold one of S, scored over ALL */
        const size_t ls = strlen(sel), la = strlen(all);
        char *q = modattn__malloc(ls + la + 16, MODATTN_MEM_OTHER);
        if (!q) st = modattn__mem_last_status();
        else snprintf(q, ls + la + 16, "(%s) AND (%s)", sel, all);
        *out = q;
    } else if (!st) {
        *out = all;
        all = NULL;
    }
    if (!st && marks) { /* the words that matter: S, or the whole list */
        *marks = sel ? sel : modattn__strndup(*out, strlen(*out), MODATTN_MEM_OTHER);
        if (sel) sel = NULL;
        else if (!*marks) st = modattn__mem_last_status();
    }
    if (st) {
        modattn_free(*out);
        *out = NULL;
    }
    modattn_free(all);
    modattn_free(sel);
    modattn_free(w);
    modattn_free(clean);
    return st;
}

int modattn__store_keyword_query(modattn_store *s, const char *text, size_t len, char **out, size_t *dropped) {
    modattn__kw_query_info info;
    if (dropped) *dropped = 0;
    int st = modattn__store_keyword_query_info(s, text, len, out, NULL, &info);
    if (!st && dropped) *dropped = info.words - info.kept;
    return st;
}

int modattn__store_keyword_spans(modattn_store *s, const char *fts, int64_t id, modattn_text_span **spans, size_t *n) {
    if (!s || !fts || !spans || !n) return modattn__error(MODATTN_EINVAL, "keyword_spans: NULL argument");
    *spans = NULL;
    *n = 0;
    if (!modattn__store_has_keywords(s)) return no_index(s);
    if (!*fts) return 0;
    sqlite3 *db = modattn__store_db(s);
    kw_state *kw = NULL;
    int st0 = kw_of(s, &kw);
    if (st0) return st0;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT modattn_spans(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?1 AND rowid = ?2",
                                -1, &q, NULL);
    if (rc != SQLITE_OK) return sq_fail(s, rc, "keyword spans");
    sqlite3_bind_text(q, 1, fts, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, id);
    int st = 0;
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        const int64_t *b = sqlite3_column_blob(q, 0);
        const size_t pairs = (size_t)sqlite3_column_bytes(q, 0) / (2 * sizeof(int64_t));
        if (pairs) {
            modattn_text_span *out = modattn__malloc(pairs * sizeof *out, MODATTN_MEM_OTHER);
            if (!out) st = modattn__mem_last_status();
            else {
                for (size_t i = 0; i < pairs; i++) out[i] = (modattn_text_span){(size_t)b[2 * i], (size_t)b[2 * i + 1]};
                *spans = out;
                *n = pairs;
            }
        }
    } else if (rc != SQLITE_DONE) {
        st = sq_fail(s, rc, "keyword spans");
    }
    sqlite3_finalize(q);
    return st;
}

/* ---- exact top k without scoring every row (MaxScore)
 *
 * A phrase adds to a row's BM25 idf * f(k1 + 1) / (f + k1(1 - b + b len / avgdl)), less than
 * idf (k1 + 1) however often it occurs: that is its bound. The rows that hold none of the rarer
 * phrases E, only some of the common ones C, score less than the sum of C's bounds. So:
 *   pass A  the rows that hold one of the rarest phrases (about 1/64 of the store's rows in all),
 *           scored over every phrase of the query: "(E0) AND (all)", modattn_bm25 skipping E0's
 *           copies. Its k-th score theta is a real row's score: the true k-th is no lower.
 *   C       the commonest phrases whose bounds sum below theta; E the others.
 *   pass B  if E is more than E0: the rows that hold one of E, scored the same way.
 * No row outside the pass can reach theta, so its top k is the query's, scores and order (ties by
 * rowid) bit for bit; when C comes out empty the query runs whole. On a plain-language query of
 * 17 words over 100k chunks, common words in a third of them, it scores a few thousand rows, not
 * 80,000. */


static int by_df(const void *a, const void *b) {
    const phrase *x = a, *y = b; /* unknown first (never dropped), then rarest first */
    if ((x->df < 0) != (y->df < 0)) return x->df < 0 ? -1 : 1;
    return (x->df > y->df) - (x->df < y->df);
}

/* The phrases of a list that modattn__keyword_query writes, "a" OR "b""c" OR "d"* ..., from c up
 * to the end of the string or a ')' (*end: there); 0 if it is not one. */
static size_t parse_list(const char *c, phrase *p, size_t cap, const char **end) {
    size_t n = 0;
    while (*c && *c != ')') {
        if (*c != '"' || n == cap) return 0;
        const char *s = c++;
        for (;; c++) {
            if (!*c) return 0;
            if (*c == '"') {
                if (c[1] == '"') c++;
                else break;
            }
        }
        c++;
        const bool star = *c == '*';
        if (star) c++;
        p[n++] = (phrase){s, (size_t)(c - s), -1, 0, star};
        if (!*c || *c == ')') break;
        if (strncmp(c, " OR ", 4) != 0) return 0;
        c += 4;
    }
    *end = c;
    return n;
}

/* A query of modattn__store_keyword_query: a plain list, or "(S) AND (ALL)": rows that hold one of
 * the required phrases S (the words that carry information), scored over ALL (them and the stop
 * words). *nreq = |S| (0 for a plain list), the phrases of ALL in p; 0 if fts is neither. */
static size_t parse_query(const char *fts, phrase *p, size_t cap, size_t *nreq) {
    const char *e = NULL;
    *nreq = 0;
    if (*fts != '(') {
        const size_t n = parse_list(fts, p, cap, &e);
        return n && !*e ? n : 0;
    }
    const size_t ns = parse_list(fts + 1, p, cap, &e);
    if (!ns || strncmp(e, ") AND (", 7) != 0) return 0;
    const size_t n = parse_list(e + 7, p, cap, &e);
    if (!n || strcmp(e, ")") != 0) return 0;
    *nreq = ns;
    return n;
}

static char *join_phrases(const phrase *p, size_t n, const char *all) {
    size_t len = strlen(all) + 16;
    for (size_t i = 0; i < n; i++) len += p[i].len + 4;
    char *m = modattn__malloc(len, MODATTN_MEM_OTHER);
    if (!m) return NULL;
    size_t o = 0;
    m[o++] = '(';
    for (size_t i = 0; i < n; i++) {
        if (i) memcpy(m + o, " OR ", 4), o += 4;
        memcpy(m + o, p[i].at, p[i].len), o += p[i].len;
    }
    o += (size_t)snprintf(m + o, len - o, ") AND (%s)", all);
    return m;
}

static int topk_pruned(modattn_store *s, kw_state *kw, const char *fts, size_t k, const char *path_prefix, int64_t *ids,
                       double *scores, size_t *n, bool *done) {
    *done = false;
    phrase p[MODATTN_KEYWORD_MAX_TERMS];
    size_t nreq = 0; /* (the required group's phrases only select: skipped by the scores as E's) */
    const size_t np = parse_query(fts, p, MODATTN_KEYWORD_MAX_TERMS, &nreq);
    if (np < 2 || !kw->have_sizes || kw->n == 0) return 0;
    const double rows = (double)kw->n, k1 = 1.2;
    /* each one-token phrase's rows, from the index's vocabulary */
    sqlite3 *db = modattn__store_db(s);
    fts5_api *api = fts5_of(db);
    void *ud = NULL;
    fts5_tokenizer tk;
    Fts5Tokenizer *t = NULL;
    sqlite3_stmt *q = NULL;
    const char *args[] = {"remove_diacritics", "2"}; /* as the table's tokenizer */
    if (api && api->xFindTokenizer(api, "unicode61", &ud, &tk) == SQLITE_OK && tk.xCreate(ud, args, 2, &t) == SQLITE_OK &&
        sqlite3_exec(db, "CREATE VIRTUAL TABLE IF NOT EXISTS temp.modattn_vocab USING fts5vocab(main, chunks_fts, row)",
                     NULL, NULL, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT doc FROM temp.modattn_vocab WHERE term = ?1", -1, &q, NULL) == SQLITE_OK) {
        for (size_t i = 0; i < np; i++) {
            one_token ot = {0};
            if (p[i].prefix) continue;
            if (tk.xTokenize(t, &ot, FTS5_TOKENIZE_QUERY, p[i].at + 1, (int)p[i].len - 2, on_query_token) != SQLITE_OK ||
                ot.count != 1 || !ot.tok[0])
                continue;
            sqlite3_bind_text(q, 1, ot.tok, -1, SQLITE_STATIC);
            p[i].df = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
            sqlite3_reset(q);
            const double idf = log((rows - (double)p[i].df + 0.5) / ((double)p[i].df + 0.5));
            p[i].bound = (idf > 0 ? idf : 1e-6) * (k1 + 1.0) * (1 + 1e-9); /* (rounding's margin) */
        }
    }
    if (t) tk.xDelete(t);
    sqlite3_finalize(q);
    qsort(p, np, sizeof *p, by_df);
    /* E0: the unknown and the rarest, up to about 1/64 of the rows (at least one phrase) */
    const double budget = rows / 64 > 8.0 * (double)k ? rows / 64 : 8.0 * (double)k;
    size_t e0 = 0;
    double cum = 0;
    while (e0 < np && (p[e0].df < 0 || e0 == 0 || cum + (double)p[e0].df <= budget)) cum += p[e0].df > 0 ? (double)p[e0].df : 0, e0++;
    if (e0 == np) return 0; /* every phrase is rare: the whole query is cheap */
    char *m = join_phrases(p, e0, fts);
    if (!m) return modattn__mem_last_status();
    int st = topk_pass(s, m, (int)(e0 + nreq), k, path_prefix, ids, scores, n);
    modattn_free(m);
    if (st) return st;
    const double theta = *n == k ? scores[k - 1] : 0;
    size_t c = 0; /* C: the commonest phrases whose bounds sum below theta */
    double sum = 0;
    while (c < np - e0 && sum + p[np - 1 - c].bound < theta) sum += p[np - 1 - c].bound, c++;
    if (c == 0) {
        *n = 0;
        return 0; /* the whole query it is */
    }
    kw->pruned++;
    *done = true;
    if (c == np - e0) return 0; /* pass A was the whole answer */
    if (!(m = join_phrases(p, np - c, fts))) {
        *n = 0;
        return modattn__mem_last_status();
    }
    st = topk_pass(s, m, (int)(np - c + nreq), k, path_prefix, ids, scores, n);
    modattn_free(m);
    return st;
}

static void vocab_free(struct vocab *v) {
    if (!v) return;
    modattn_free(v->text);
    modattn_free(v->off);
    modattn_free(v->df);
    modattn_free(v);
}

/* The store's vocabulary, read if the generation moved since (NULL: none to be had: memory, over
 * MAX_VOCAB_BYTES, or the index unreadable; the error is cleared: a search goes on without). */
static vocab *vocab_of(modattn_store *s) {
    kw_state *kw = NULL;
    uint64_t gen = 0;
    if (kw_of(s, &kw) || modattn_store_generation(s, &gen)) {
        modattn_clear_error();
        return NULL;
    }
    if (kw->vocab && kw->vocab->have && kw->vocab->gen == gen) return kw->vocab;
    vocab_free(kw->vocab);
    vocab *v = kw->vocab = modattn__calloc(1, sizeof *v, MODATTN_MEM_OTHER);
    if (!v) {
        modattn_clear_error();
        return NULL;
    }
    const uint64_t tr = modattn__trace_begin();
    sqlite3_stmt *q = NULL;
    size_t cap = 0, tcap = 0;
    bool ok = sqlite3_prepare_v2(modattn__store_db(s), "SELECT term, doc FROM temp.modattn_vocab", -1, &q, NULL) == SQLITE_OK;
    int rc = SQLITE_DONE;
    while (ok && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *term = (const char *)sqlite3_column_text(q, 0);
        const size_t tl = term ? strlen(term) : 0;
        if (!tl) continue;
        if (v->bytes + tl + 1 > MAX_VOCAB_BYTES) {
            ok = false;
            break;
        }
        if (v->n == cap) {
            const size_t nc = cap ? 2 * cap : 4096;
            uint32_t *no = modattn__realloc(v->off, nc * sizeof *no, MODATTN_MEM_OTHER);
            if (no) v->off = no;
            uint32_t *nd = no ? modattn__realloc(v->df, nc * sizeof *nd, MODATTN_MEM_OTHER) : NULL;
            if (nd) v->df = nd;
            if (!no || !nd) {
                ok = false;
                break;
            }
            cap = nc;
        }
        if (v->bytes + tl + 1 > tcap) {
            const size_t nc = tcap ? 2 * tcap : 65536;
            char *nt = modattn__realloc(v->text, nc > MAX_VOCAB_BYTES ? MAX_VOCAB_BYTES : nc, MODATTN_MEM_OTHER);
            if (!nt) {
                ok = false;
                break;
            }
            v->text = nt;
            tcap = nc > MAX_VOCAB_BYTES ? MAX_VOCAB_BYTES : nc;
        }
        memcpy(v->text + v->bytes, term, tl + 1);
        v->off[v->n] = (uint32_t)v->bytes;
        const int64_t df = sqlite3_column_int64(q, 1);
        v->df[v->n++] = df < 0 ? 0 : df > UINT32_MAX ? UINT32_MAX : (uint32_t)df;
        v->bytes += tl + 1;
    }
    sqlite3_finalize(q);
    if (tr) {
        char shape[48];
        snprintf(shape, sizeof shape, "terms=%zu", v->n);
        modattn__trace_end(tr, "search.keyword_vocab", "fts5vocab", shape, (double)v->bytes, 0);
    }
    /* (fts5vocab gives its terms in order, as the lookups need: BINARY collation, as strcmp) */
    if (!ok || rc != SQLITE_DONE) {
        vocab_free(v);
        kw->vocab = NULL;
        modattn_clear_error();
        return NULL;
    }
    v->have = true;
    v->gen = gen;
    return v;
}
