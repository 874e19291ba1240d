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
} kw_state;

static void kw_release(void *state) {
    kw_state *kw = state;
    if (!kw) return;
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
    if (!st && !done) st = topk_pass(s, fts, 0, k, path_prefix, ids, scores, n);
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

int modattn__store_keyword_query(modattn_store *s, const char *text, size_t len, char **out, size_t *dropped) {
    if (!s || !out || (!text && len)) return modattn__error(MODATTN_EINVAL, "keyword_query: NULL argument");
    *out = NULL;
    if (dropped) *dropped = 0;
    if (!modattn__store_has_keywords(s)) return no_index(s);
    char *clean = NULL;
    int st = valid_text(&text, &len, &clean);
    if (st) return st;
    if (!text) text = "";
    size_t start[MODATTN_KEYWORD_MAX_TERMS], rlen[MODATTN_KEYWORD_MAX_TERMS];
    int64_t df[MODATTN_KEYWORD_MAX_TERMS];
    bool keep[MODATTN_KEYWORD_MAX_TERMS];
    const size_t n = runs(text, len, start, rlen);
    sqlite3 *db = modattn__store_db(s);
    fts5_api *api = n ? fts5_of(db) : NULL;
    void *ud = NULL;
    fts5_tokenizer tk;
    Fts5Tokenizer *t = NULL;
    sqlite3_stmt *q = NULL;
    int64_t total = 0;
    size_t kept = n;
    for (size_t r = 0; r < n; r++) keep[r] = true, df[r] = -1;
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
            sqlite3_bind_text(q, 1, ot.tok, -1, SQLITE_STATIC);
            df[r] = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
            sqlite3_reset(q);
            /* in more than half the chunks: BM25's idf is about 0 (FTS5 floors it at 1e-6), so the
             * word adds at most 2.2e-6 to a score (it may reorder near-ties, and a chunk holding
             * only such words is not found by words), but reading its postings costs the most */
            if ((double)df[r] > 0.5 * (double)total) keep[r] = false, kept--;
        }
    }
    if (t) tk.xDelete(t);
    sqlite3_finalize(q);
    if (n && kept == 0) { /* every word is that common: the rarest of them still ranks something */
        size_t best = 0;
        for (size_t r = 1; r < n; r++)
            if (df[r] < df[best]) best = r;
        keep[best] = true;
        kept = 1;
    }
    if (dropped) *dropped = n - kept;
    st = join_runs(text, start, rlen, keep, n, out);
    modattn_free(clean);
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

typedef struct phrase {
    const char *at; /* "…" as written in the query, quotes included */
    size_t len;
    int64_t df;     /* rows that hold it (one-token phrases), -1 unknown */
    double bound;
} phrase;

static int by_df(const void *a, const void *b) {
    const phrase *x = a, *y = b; /* unknown first (never dropped), then rarest first */
    if ((x->df < 0) != (y->df < 0)) return x->df < 0 ? -1 : 1;
    return (x->df > y->df) - (x->df < y->df);
}

/* The phrases of a query that modattn__keyword_query wrote: "a" OR "b""c" OR ... 0 if it is not one. */
static size_t parse_phrases(const char *fts, phrase *p, size_t cap) {
    size_t n = 0;
    const char *c = fts;
    while (*c) {
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
        p[n++] = (phrase){s, (size_t)(c - s), -1, 0};
        if (!*c) break;
        if (strncmp(c, " OR ", 4) != 0) return 0;
        c += 4;
    }
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
    const size_t np = parse_phrases(fts, p, MODATTN_KEYWORD_MAX_TERMS);
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
    int st = topk_pass(s, m, (int)e0, k, path_prefix, ids, scores, n);
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
    st = topk_pass(s, m, (int)(np - c), k, path_prefix, ids, scores, n);
    modattn_free(m);
    return st;
}
