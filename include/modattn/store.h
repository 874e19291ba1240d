/* modattn/store.h — the document store: an SQLite database in WAL mode holding documents, their
 * chunks and one embedding per chunk, for one embedding model.
 *
 * Schema (PRAGMA user_version = MODATTN_STORE_SCHEMA_VERSION):
 *   meta(key, value)          the model the store belongs to: model_name, model_weights_hash
 *                             (XXH3-64 of model.safetensors, 16 hex digits), model_dim; and
 *                             generation (raised by every transaction that changes the data)
 *   models(id, name, weights_hash, dim)
 *   documents(id, path UNIQUE, hash, mtime_ns, size, kind, chunk_tokens, overlap, nchunks,
 *             indexed_at)     hash: XXH3-64 of the file's bytes, 16 hex digits
 *   chunks(id, document, seq, start, end, line, page, ntokens, text)
 *                             [start, end): bytes of the document's text (see ingest.h);
 *                             text: those bytes with invalid UTF-8 replaced by U+FFFD
 *   embeddings(chunk, model, vector, generation)
 *                             vector: dim float32 in host byte order (little-endian on every
 *                             machine modattn builds for), L2-normalised (cosine = dot);
 *                             generation: the store's generation that wrote it (0 for rows
 *                             written before schema 2), indexed with chunk
 *   chunks_fts(text, name)    schema 3: FTS5 over each chunk's text and its file's name (the
 *                             path's last component), rowid = chunks.id, kept by triggers in the
 *                             chunk rows' transaction (unicode61, diacritics removed)
 * Stores of schema 1 and 2 are migrated to 3 when opened for writing, in one transaction (the
 * keyword index of a large store takes a while: about as long as SQLite takes to read its texts);
 * read-only they are read as they are (no keyword index below 3). Where SQLite has no FTS5 a store
 * stays at (or is made at) schema 2, with a note (modattn_store_note).
 *
 * Crash safety: a document, its chunks and its embeddings are written in one transaction
 * (modattn_store_begin .. modattn_store_commit), so a process killed at any moment leaves every
 * document either fully indexed or absent. synchronous=NORMAL: with WAL this survives a crash of
 * the process; a power cut may lose the last transactions but never corrupts the file.
 *
 * A store is used by one thread at a time. Errors carry SQLite's message and the store's path. */
#ifndef MODATTN_STORE_H
#define MODATTN_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "modattn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODATTN_STORE_SCHEMA_VERSION 3
#define MODATTN_STORE_DEFAULT_PATH "modattn.db"

typedef struct modattn_store modattn_store;

/* Open flags. */
#define MODATTN_STORE_CREATE 1u   /* create the file if missing (else MODATTN_ENOTFOUND) */
#define MODATTN_STORE_READONLY 2u /* searching: no writes */

/* Opt-in, process-wide: route all of SQLite's memory (every connection in the process, the
 * store's and any other) through modattn's accounting (category "other"), so that --stats and
 * memory budgets count it and allocation-failure tests reach it. Call it once, before anything in
 * the process initialises SQLite; later calls return the first one's result. The CLI and the
 * server call it at start; a library embedding modattn next to other SQLite users (Python's
 * sqlite3 module) should not. MODATTN_EUNSUPPORTED when SQLite was initialised already (its memory
 * is then simply not counted; everything else works). */
int modattn_store_account_sqlite_memory(void);

/* Opens (and with CREATE, initialises) the store at path. A file that is not an SQLite database
 * is MODATTN_EFORMAT; a schema version this build does not know is MODATTN_EVERSION.
 * Ownership: close with modattn_store_close(). */
int modattn_store_open(const char *path, unsigned flags, modattn_store **out);
void modattn_store_close(modattn_store *s); /* NULL is fine; rolls back an open transaction */
/* Another process writing the store holds its lock for one document's transaction at a time
 * (milliseconds: `index` embeds outside it). A writer that finds it taken waits up to `seconds`
 * (default MODATTN_STORE_DEFAULT_WAIT_S; 0: not at all), calling on_wait (optional) once when
 * the wait passes half a second; past it the call fails with MODATTN_EIO and a message that
 * says so. Readers (searches) never wait for writers in WAL mode. */
#define MODATTN_STORE_DEFAULT_WAIT_S 60.0
void modattn_store_set_wait(modattn_store *s, double seconds, void (*on_wait)(void *ud, const char *msg),
                            void *ud);
const char *modattn_store_path(const modattn_store *s);
/* How a store was opened, when a reader should know: NULL usually. A READONLY open of a store in a
 * folder this user cannot write to (SQLite's WAL mode would create DB-shm there) reads the file
 * alone, without locks, when no write-ahead log holds changes, and says so here (SQLite then
 * assumes the file does not change: a reader that stays open, such as a server, should open it
 * again when the file's size or time changes); when one does, the open fails with MODATTN_EIO and
 * a message saying how to fold the log in. A folder on a read-only mount is treated the same. */
const char *modattn_store_note(const modattn_store *s);

/* The embedding model a store belongs to. */
typedef struct modattn_store_model {
    const char *name;         /* "all-MiniLM-L6-v2" */
    const char *weights_hash; /* 16 hex digits */
    size_t dim;
    /* modattn_model_info.identity (16 hex digits): what is compared, with dim; the name is a
     * label. NULL: only weights_hash and dim are compared. A store made before identities were
     * recorded is compared by weights and dim, and gains the identity when next bound. */
    const char *identity;
    /* modattn_precision_name(info.precision): recorded with a new store's model, and named when
     * a model of another precision is refused (the identity already differs). NULL: "fp32". */
    const char *precision;
    /* The prompts its vectors are made with (modattn_model_embed_opt): the text prepended to each
     * chunk when indexing and to each query when searching; "": none; NULL: not compared (a search
     * embeds no chunk). Recorded with a new store's model (a store made before prompts were
     * recorded has none) and compared, so that a store indexed with one prompt refuses a search
     * with another. */
    const char *document_prompt;
    const char *query_prompt;
} modattn_store_model;

/* The identity of a loaded model (modattn_model_get_info) as a store records it: every field from
 * info (name, weights hash, dim, identity, the precision's name, the query and document prompts;
 * a caller that embeds with other prompts or dimensions sets them after), pointing into info, which must
 * outlive the result. The one way to build it, so that what is compared cannot drift. */
struct modattn_model_info;
modattn_store_model modattn_store_model_of(const struct modattn_model_info *info);

/* How to embed for this store with model (modattn_model_embed_opt): *eo is `asked` (NULL: the
 * defaults) with the task (query: a search's; else the indexer's documents) and, when asked gives
 * none, the dimensions the store's vectors have (a store of this model's weights cut to fewer);
 * *sm the identity to check or bind: the model's, with those dimensions and the resolved prompt
 * (a query's: the document prompt is then not compared). Errors: an unknown prompt name, dimensions
 * out of range (MODATTN_EINVAL). s NULL: no store to follow. */
struct modattn_model;
struct modattn_embed_options;
int modattn_store_embed_options(modattn_store *s, const struct modattn_model *model,
                                const struct modattn_embed_options *asked, bool query,
                                struct modattn_embed_options *eo, modattn_store_model *sm);

/* Records the model in a store that has none; accepts the same model again; refuses another one
 * (other name, weights hash or dimension) with MODATTN_EVERSION and a message naming both. */
int modattn_store_bind_model(modattn_store *s, const modattn_store_model *m);
/* Checks without recording: MODATTN_ENOTFOUND if the store has no model yet (nothing indexed),
 * MODATTN_EVERSION on a mismatch. */
int modattn_store_check_model(modattn_store *s, const modattn_store_model *m);
/* The model the store records, into caller buffers (name_len >= 1, hash buffer of 17 bytes). */
int modattn_store_get_model(modattn_store *s, char *name, size_t name_len, char hash[17],
                            size_t *dim);
/* The model folder the store was last indexed with (an absolute path; `modattn index` records it),
 * so that `search` and `serve --db` need no --model: 0 with buf filled, MODATTN_ENOTFOUND if none
 * was recorded, MODATTN_ERANGE if it does not fit in len. set: a writable store only. */
int modattn_store_get_model_dir(modattn_store *s, char *buf, size_t len);
int modattn_store_set_model_dir(modattn_store *s, const char *dir);
/* The folders and files `index` was given (absolute paths), so that `index` with no path refreshes
 * them. add: a writable store; paths already held (or under one held) are not added twice.
 * get: *out an array of n strings (each and the array freed with modattn_free); n = 0 if none. */
int modattn_store_add_roots(modattn_store *s, const char *const *paths, size_t n);
int modattn_store_get_roots(modattn_store *s, char ***out, size_t *n);
/* The precision its vectors were made in ("fp32", "bf16", "int8"; "fp32" for stores made before
 * precisions were recorded), into buf (len >= 8). */
int modattn_store_get_precision(modattn_store *s, char *buf, size_t len);
/* The prompt its chunks (document) or its queries (query) are embedded with, into buf ("" when none;
 * MODATTN_ERANGE when it does not fit in len). */
int modattn_store_get_prompt(modattn_store *s, bool query, char *buf, size_t len);

/* ---- documents */
typedef struct modattn_store_doc {
    int64_t id;             /* set by find/put */
    const char *path;       /* as stored (absolute) */
    uint64_t hash;          /* XXH3-64 of the file's bytes */
    int64_t mtime_ns;
    int64_t size;
    const char *kind;       /* "text", "markdown", "html", "pdf" */
    int32_t chunk_tokens;   /* chunking used for it */
    int32_t overlap;
    int64_t nchunks;
} modattn_store_doc;

/* Finds the document stored under path: 1 found (*out filled; out->path and out->kind are NULL),
 * 0 not found, negative on error. */
int modattn_store_find_document(modattn_store *s, const char *path, modattn_store_doc *out);
/* Updates the mtime and size of an unchanged document (content hash equal). */
int modattn_store_touch_document(modattn_store *s, int64_t id, int64_t mtime_ns, int64_t size);

/* Transactions (BEGIN IMMEDIATE / COMMIT / ROLLBACK). */
int modattn_store_begin(modattn_store *s);
int modattn_store_commit(modattn_store *s);
void modattn_store_rollback(modattn_store *s); /* no-op without an open transaction */

/* Inside a transaction: replaces any document stored under doc->path (its chunks and embeddings
 * too) with a new row; sets doc->id. nchunks is what the document will hold. */
int modattn_store_put_document(modattn_store *s, modattn_store_doc *doc);
/* Inside a transaction: one chunk of document doc_id and its embedding. text need not be valid
 * UTF-8: it is stored with invalid sequences replaced by U+FFFD. vec has the model's dim floats. */
typedef struct modattn_store_chunk_in {
    int64_t seq;         /* 0, 1, ... within the document */
    int64_t start, end;  /* bytes of the document's text */
    int64_t line;        /* 1-based line of `start` in the source file, 0 if unknown */
    int64_t page;        /* 1-based PDF page of `start`, 0 if not a PDF */
    int64_t ntokens;     /* word pieces fed to the model, specials included */
    const char *text;
    size_t len;
} modattn_store_chunk_in;
int modattn_store_put_chunk(modattn_store *s, int64_t doc_id, const modattn_store_chunk_in *c,
                            const float *vec, size_t dim);
/* Deletes the document stored under path (with its chunks and embeddings), in its own
 * transaction unless one is open. 1 deleted, 0 there was none. */
int modattn_store_delete_document(modattn_store *s, const char *path);

/* Calls fn(ud, path) for every stored document, in path order; fn returns 0 to go on. The path
 * is valid during the call only. Do not modify the store from fn. */
int modattn_store_each_path(modattn_store *s, int (*fn)(void *ud, const char *path), void *ud);

typedef struct modattn_store_counts {
    int64_t documents, chunks, embeddings;
} modattn_store_counts;
int modattn_store_get_counts(modattn_store *s, modattn_store_counts *out);

/* ---- vectors and chunks for search */
#define MODATTN_VEC_MAX_SEGMENTS 16
typedef struct modattn_store_vector_segment {
    const float *data;        /* [n, ld] row-major, rows MODATTN_ALIGN-aligned */
    const int64_t *chunk_ids; /* [n] */
    size_t n;
    size_t row0;              /* index of its first row among all rows (the mask's numbering) */
} modattn_store_vector_segment;
typedef struct modattn_store_vectors {
    const float *data;        /* the first segment's rows (all of them when nseg <= 1) */
    const int64_t *chunk_ids; /* the first segment's ids */
    size_t n;                 /* rows a search sees: rows - masked */
    size_t dim, ld;
    size_t rows;              /* rows in all segments, masked ones included */
    size_t nseg;              /* 0 (empty), 1 (from the store, or a file never appended to), ... */
    modattn_store_vector_segment seg[MODATTN_VEC_MAX_SEGMENTS];
    const uint8_t *mask;      /* bit r set: row r is of a removed chunk (NULL: none is) */
    size_t masked;
    uint64_t generation;      /* the store's generation these vectors are of */
    void *map;                /* the vector file's mapping (modattn_store_open_vectors), or NULL */
    size_t map_bytes;
    char note[320];           /* why the vector file was not used ("" if it was, or none asked) */
} modattn_store_vectors;
/* Loads every embedding into one contiguous block (memory category INDEX). Ownership: free with
 * modattn_store_vectors_free(). */
int modattn_store_load_vectors(modattn_store *s, modattn_store_vectors *out);
void modattn_store_vectors_free(modattn_store_vectors *v);

/* A read snapshot: every read of s between these sees the store as it was at read_begin (an
 * SQLite read transaction: in WAL mode it never waits for and never blocks a writer), so that
 * a search's vectors, chunk ids and chunks agree while another process indexes. Not inside
 * another transaction. */
int modattn_store_read_begin(modattn_store *s);
void modattn_store_read_end(modattn_store *s); /* NULL is fine */

/* The store's generation: raised by one in every transaction that changes documents, chunks or
 * embeddings (0 for a store never written). */
int modattn_store_generation(modattn_store *s, uint64_t *out);

/* ---- the vector file: PATH.vec beside the store at PATH (pipeline/vecfile.c)
 *
 * The store's vectors in one flat, memory-mappable file, so that a search maps them instead of
 * reading every row out of SQLite. Layout (format version 2, little-endian):
 *   a 4096-byte header: magic "MODATTNV", version, dim, ld, element type f32, the store's
 *     generation, the model's name and weights hash, count (rows), masked (rows of removed
 *     chunks), up to MODATTN_VEC_MAX_SEGMENTS segments {offset, count, ids offset, XXH3 of the
 *     ids}, the mask {offset, bytes, XXH3}, the file's size, and an XXH3-64 of the header;
 *   segments: count rows of ld floats (64-byte aligned) followed by their count chunk ids
 *     (int64); the first is written in chunk order by a rewrite, each later one by an append;
 *   the mask: one bit per row (rows numbered across the segments in order), set for a row whose
 *     chunk has been removed or replaced since it was written; searches skip those rows.
 * The store stays the source of truth, and every change to the file happens under the store's
 * write lock. `index` brings the file up to date after its last commit:
 *   - an append (the common case): the rows written since the file's generation (the
 *     embeddings' generation column says which) become a new segment after the file's end, a new
 *     mask marks the rows of chunks gone since, both are fsynced, then one header naming them
 *     and the new generation is written over the old one and fsynced. Nothing a reader may be
 *     reading is overwritten; a reader opening mid-append, or a file left by a kill mid-append,
 *     has a size its header does not name and is not used.
 *   - a rewrite (compaction): when the file is missing, damaged, for another model or of an
 *     older format, when more than a quarter of its rows are masked, or when it has
 *     MODATTN_VEC_MAX_SEGMENTS segments: the whole file from the store into a temporary file
 *     that is fsynced, renamed over the old one, and the folder fsynced.
 * A search uses the file only when every header field agrees with the store (same model, same
 * generation), with the file's size, and the ids' and mask's checksums hold; else it reads the
 * store and says why. Rows are not checksummed at each search (that would cost as much as the
 * scan); that no write ever touches a region a header names is what keeps them whole. */

/* "PATH.vec" into buf. MODATTN_EINVAL if it does not fit. */
int modattn_store_vector_file_path(const modattn_store *s, char *buf, size_t len);
/* Rewrites the vector file whole from the store (one snapshot, under the store's write lock).
 * Errors name the file and the call (a read-only folder: MODATTN_EIO with the reason); the store
 * is unchanged. The store must be open for writing. */
int modattn_store_write_vector_file(modattn_store *s);
typedef enum modattn_vecfile_action {
    MODATTN_VECFILE_CURRENT,   /* it was current: nothing written */
    MODATTN_VECFILE_APPENDED,  /* rows_added rows appended, rows_masked rows masked */
    MODATTN_VECFILE_REWRITTEN, /* written whole; reason says why */
} modattn_vecfile_action;
typedef struct modattn_vecfile_update {
    modattn_vecfile_action action;
    size_t rows_added, rows_masked;
    char reason[320]; /* why it was rewritten rather than appended to */
} modattn_vecfile_update;
/* Brings the vector file up to date with the store: nothing, an append or a rewrite (above).
 * The store must be open for writing and outside a transaction. */
int modattn_store_update_vector_file(modattn_store *s, modattn_vecfile_update *u);
/* Whether the vector file is there and current: 1 yes, 0 no (why in `why`), < 0 an error of
 * the store itself. */
int modattn_store_vector_file_current(modattn_store *s, char *why, size_t len);
/* The vectors for a search: the vector file mapped read-only when it is current (no copy; the
 * mapping lives until modattn_store_vectors_free), else loaded from the store with out->note
 * saying why the file was not used. MODATTN_VECTOR_FILE=off in the environment skips the file. */
int modattn_store_open_vectors(modattn_store *s, modattn_store_vectors *out);

typedef struct modattn_store_chunk {
    int64_t id, document;
    char *path;          /* owned */
    char *kind;          /* owned */
    int64_t seq, start, end, line, page, ntokens;
    char *text;          /* owned, valid UTF-8 */
} modattn_store_chunk;
/* Ownership: free the strings with modattn_store_chunk_clear(). MODATTN_ENOTFOUND if absent. */
int modattn_store_get_chunk(modattn_store *s, int64_t chunk_id, modattn_store_chunk *out);
void modattn_store_chunk_clear(modattn_store_chunk *c);

/* The ids of every chunk of the documents whose stored path begins with the bytes of prefix,
 * ascending. Ownership: *ids is freed with modattn_free (NULL when *n is 0). */
int modattn_store_chunk_ids_under(modattn_store *s, const char *prefix, int64_t **ids, size_t *n);

/* ---- keywords (schema 3) */

/* Whether the store has its keyword index (schema 3). */
bool modattn_store_has_keywords(const modattn_store *s);

/* The FTS5 query for a user's text, safe whatever it holds: each run of non-space characters
 * becomes a quoted phrase ("..." with " doubled), so FTS5's operators (AND OR NOT NEAR, *, ^,
 * column filters, parentheses, quotes) are plain text, and the phrases are joined with OR (BM25
 * ranks chunks holding more of them, and rarer ones, first). A run with no letter or digit is
 * dropped (it would be an empty phrase); invalid UTF-8 is replaced by U+FFFD, NUL bytes separate
 * runs; at most MODATTN_KEYWORD_MAX_TERMS runs of at most 256 bytes each are kept, so a 1 MB
 * query costs as much as a short one. *out is "" when nothing is left. Ownership: modattn_free. */
#define MODATTN_KEYWORD_MAX_TERMS 32
int modattn_keyword_query(const char *text, size_t len, char **out);

/* modattn_keyword_query for this store: a one-word phrase that more than half of the chunks hold
 * is left out (its BM25 weight is about nothing, reading its postings is the most of the cost: a
 * "the" in a query over 100k chunks took ~100 ms), unless every word is that common (then the
 * rarest stays). Stop words (the Snowball lists of 13 languages, built in; the query's language is
 * the one whose list holds most of its words) and those common words carry no information: when
 * the query has other words, the query is "(S) AND (ALL)": the rows that hold one of those others
 * (S), scored by BM25 over S and the stop words (ALL; modattn_store_keyword_topk scores each word
 * once), so a chunk that only stop words match is not found. A word no chunk holds is searched as
 * a prefix ("recurs"*) when the store has words that begin with it, else, when no other word of
 * the query is in the store, as the store's nearest word by edit distance (1 edit for 4 to 7
 * characters, 2 from 8; none for a word with digits). A word written with a trailing '*' is a
 * prefix. *dropped (may be NULL) counts what was left out. MODATTN_EUNSUPPORTED without the
 * keyword index. Ownership: modattn_free. */
int modattn_store_keyword_query(modattn_store *s, const char *text, size_t len, char **out, size_t *dropped);

/* The k best chunks by BM25 for the FTS5 query fts (from modattn_keyword_query; "" finds
 * nothing), best first, with their score (FTS5's bm25, negated: higher is better; a match in a
 * file's name weighs half as much as one in the text); path_prefix (NULL: all) as in
 * modattn_search_vectors. *n = how many matched, up to k. MODATTN_EUNSUPPORTED without the
 * keyword index. */
int modattn_store_keyword_topk(modattn_store *s, const char *fts, size_t k, const char *path_prefix,
                               int64_t *ids, double *scores, size_t *n);

/* Byte ranges [start, end) of chunk id's text that the FTS5 query fts matches, in order
 * (FTS5's own tokens of the text: the spans a highlight marks). *n = 0 when the chunk does not
 * match. Ownership: *spans is freed with modattn_free (NULL when *n is 0). */
typedef struct modattn_text_span {
    size_t start, end;
} modattn_text_span;
int modattn_store_keyword_spans(modattn_store *s, const char *fts, int64_t id, modattn_text_span **spans,
                                size_t *n);

/* PRAGMA integrity_check: 0 when "ok", else MODATTN_EFORMAT with SQLite's first complaint. */
int modattn_store_integrity_check(modattn_store *s);

#ifdef __cplusplus
}
#endif
#endif
