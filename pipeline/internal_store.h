/* pipeline/internal_store.h — the library's own functions of modattn/store.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_PIPELINE_INTERNAL_STORE_H
#define MODATTN_PIPELINE_INTERNAL_STORE_H

#include "modattn/store.h"
#include "pipeline/internal_search.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opt-in, process-wide: route all of SQLite's memory (every connection in the process, the
 * store's and any other) through modattn's accounting (category "other"), so that --stats and
 * memory budgets count it and allocation-failure tests reach it. Call it once, before anything in
 * the process initialises SQLite; later calls return the first one's result. The CLI and the
 * server call it at start; a library embedding modattn next to other SQLite users (Python's
 * sqlite3 module) should not. MODATTN_EUNSUPPORTED when SQLite was initialised already (its memory
 * is then simply not counted; everything else works). */
int modattn__store_account_sqlite_memory(void);

/* Records the model in a store that has none; accepts the same model again; refuses another one
 * (other name, weights hash or dimension) with MODATTN_EVERSION and a message naming both. */
int modattn__store_bind_model(modattn_store *s, const modattn_store_model *m);

/* The model folder the store was last indexed with (an absolute path; `modattn index` records it),
 * so that `search` and `serve --db` need no --model: 0 with buf filled, MODATTN_ENOTFOUND if none
 * was recorded, MODATTN_ERANGE if it does not fit in len. set: a writable store only. */
int modattn__store_get_model_dir(modattn_store *s, char *buf, size_t len);

int modattn__store_set_model_dir(modattn_store *s, const char *dir);

/* The folders and files `index` was given (absolute paths), so that `index` with no path refreshes
 * them. add: a writable store; paths already held (or under one held) are not added twice.
 * get: *out an array of n strings (each and the array freed with modattn_free); n = 0 if none. */
int modattn__store_add_roots(modattn_store *s, const char *const *paths, size_t n);

/* Finds the document stored under path: 1 found (*out filled; out->path and out->kind are NULL),
 * 0 not found, negative on error. */
int modattn__store_find_document(modattn_store *s, const char *path, modattn_store_doc *out);

/* Updates the mtime and size of an unchanged document (content hash equal). */
int modattn__store_touch_document(modattn_store *s, int64_t id, int64_t mtime_ns, int64_t size);

/* Transactions (BEGIN IMMEDIATE / COMMIT / ROLLBACK). */
int modattn__store_begin(modattn_store *s);

int modattn__store_commit(modattn_store *s);

void modattn__store_rollback(modattn_store *s); /* no-op without an open transaction */

/* Inside a transaction: replaces any document stored under doc->path (its chunks and embeddings
 * too) with a new row; sets doc->id. nchunks is what the document will hold. */
int modattn__store_put_document(modattn_store *s, modattn_store_doc *doc);

int modattn__store_put_chunk(modattn_store *s, int64_t doc_id, const modattn_store_chunk_in *c,
                            const float *vec, size_t dim);

/* Calls fn(ud, path) for every stored document, in path order; fn returns 0 to go on. The path
 * is valid during the call only. Do not modify the store from fn. */
int modattn__store_each_path(modattn_store *s, int (*fn)(void *ud, const char *path), void *ud);

/* Loads every embedding into one contiguous block (memory category INDEX). Ownership: free with
 * modattn__store_vectors_free(). */
int modattn__store_load_vectors(modattn_store *s, modattn_store_vectors *out);

void modattn__store_vectors_free(modattn_store_vectors *v);

/* A read snapshot: every read of s between these sees the store as it was at read_begin (an
 * SQLite read transaction: in WAL mode it never waits for and never blocks a writer), so that
 * a search's vectors, chunk ids and chunks agree while another process indexes. Not inside
 * another transaction. */
int modattn__store_read_begin(modattn_store *s);

void modattn__store_read_end(modattn_store *s); /* NULL is fine */

/* "PATH.vec" into buf. MODATTN_EINVAL if it does not fit. */
int modattn__store_vector_file_path(const modattn_store *s, char *buf, size_t len);

/* Rewrites the vector file whole from the store (one snapshot, under the store's write lock).
 * Errors name the file and the call (a read-only folder: MODATTN_EIO with the reason); the store
 * is unchanged. The store must be open for writing. */
int modattn__store_write_vector_file(modattn_store *s);

/* Whether the vector file is there and current: 1 yes, 0 no (why in `why`), < 0 an error of
 * the store itself. */
int modattn__store_vector_file_current(modattn_store *s, char *why, size_t len);

/* The vectors for a search: the vector file mapped read-only when it is current (no copy; the
 * mapping lives until modattn__store_vectors_free), else loaded from the store with out->note
 * saying why the file was not used. MODATTN_VECTOR_FILE=off in the environment skips the file. */
int modattn__store_open_vectors(modattn_store *s, modattn_store_vectors *out);

/* Ownership: free the strings with modattn__store_chunk_clear(). MODATTN_ENOTFOUND if absent. */
int modattn__store_get_chunk(modattn_store *s, int64_t chunk_id, modattn_store_chunk *out);

void modattn__store_chunk_clear(modattn_store_chunk *c);

/* The ids of every chunk of the documents whose stored path begins with the bytes of prefix,
 * ascending. Ownership: *ids is freed with modattn_free (NULL when *n is 0). */
int modattn__store_chunk_ids_under(modattn_store *s, const char *prefix, int64_t **ids, size_t *n);

/* Whether the store has its keyword index (schema 3). */
bool modattn__store_has_keywords(const modattn_store *s);

int modattn__keyword_query(const char *text, size_t len, char **out);

/* modattn__keyword_query for this store: a one-word phrase that more than half of the chunks hold
 * is left out (its BM25 weight is about nothing, reading its postings is the most of the cost: a
 * "the" in a query over 100k chunks took ~100 ms), unless every word is that common (then the
 * rarest stays). Stop words (the Snowball lists of 13 languages, built in; the query's language is
 * the one whose list holds most of its words) and those common words carry no information: when
 * the query has other words, the query is "(S) AND (ALL)": the rows that hold one of those others
 * (S), scored by BM25 over S and the stop words (ALL; modattn__store_keyword_topk scores each word
 * once), so a chunk that only stop words match is not found. A word no chunk holds is searched as
 * a prefix ("recurs"*) when the store has words that begin with it, else, when no other word of
 * the query is in the store, as the store's nearest word by edit distance (1 edit for 4 to 7
 * characters, 2 from 8; none for a word with digits). A word written with a trailing '*' is a
 * prefix. *dropped (may be NULL) counts what was left out. MODATTN_EUNSUPPORTED without the
 * keyword index. Ownership: modattn_free. */
int modattn__store_keyword_query(modattn_store *s, const char *text, size_t len, char **out, size_t *dropped);

/* The k best chunks by BM25 for the FTS5 query fts (from modattn__keyword_query; "" finds
 * nothing), best first, with their score (FTS5's bm25, negated: higher is better; a match in a
 * file's name weighs half as much as one in the text); path_prefix (NULL: all) as in
 * modattn__search_vectors. *n = how many matched, up to k. MODATTN_EUNSUPPORTED without the
 * keyword index. */
int modattn__store_keyword_topk(modattn_store *s, const char *fts, size_t k, const char *path_prefix,
                               int64_t *ids, double *scores, size_t *n);

int modattn__store_keyword_spans(modattn_store *s, const char *fts, int64_t id, modattn_text_span **spans,
                                size_t *n);

#ifdef __cplusplus
}
#endif
#endif
