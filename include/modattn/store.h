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
 * (modattn__store_begin .. modattn__store_commit), so a process killed at any moment leaves every
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

/* Checks without recording: MODATTN_ENOTFOUND if the store has no model yet (nothing indexed),
 * MODATTN_EVERSION on a mismatch. */
int modattn_store_check_model(modattn_store *s, const modattn_store_model *m);
/* The model the store records, into caller buffers (name_len >= 1, hash buffer of 17 bytes). */
int modattn_store_get_model(modattn_store *s, char *name, size_t name_len, char hash[17],
                            size_t *dim);
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
/* Deletes the document stored under path (with its chunks and embeddings), in its own
 * transaction unless one is open. 1 deleted, 0 there was none. */
int modattn_store_delete_document(modattn_store *s, const char *path);


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
    void *map;                /* the vector file's mapping (modattn__store_open_vectors), or NULL */
    size_t map_bytes;
    char note[320];           /* why the vector file was not used ("" if it was, or none asked) */
} modattn_store_vectors;


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

typedef struct modattn_store_chunk {
    int64_t id, document;
    char *path;          /* owned */
    char *kind;          /* owned */
    int64_t seq, start, end, line, page, ntokens;
    char *text;          /* owned, valid UTF-8 */
} modattn_store_chunk;


/* ---- keywords (schema 3) */


/* The FTS5 query for a user's text, safe whatever it holds: each run of non-space characters
 * becomes a quoted phrase ("..." with " doubled), so FTS5's operators (AND OR NOT NEAR, *, ^,
 * column filters, parentheses, quotes) are plain text, and the phrases are joined with OR (BM25
 * ranks chunks holding more of them, and rarer ones, first). A run with no letter or digit is
 * dropped (it would be an empty phrase); invalid UTF-8 is replaced by U+FFFD, NUL bytes separate
 * runs; at most MODATTN_KEYWORD_MAX_TERMS runs of at most 256 bytes each are kept, so a 1 MB
 * query costs as much as a short one. *out is "" when nothing is left. Ownership: modattn_free. */
#define MODATTN_KEYWORD_MAX_TERMS 32



/* Byte ranges [start, end) of chunk id's text that the FTS5 query fts matches, in order
 * (FTS5's own tokens of the text: the spans a highlight marks). *n = 0 when the chunk does not
 * match. Ownership: *spans is freed with modattn_free (NULL when *n is 0). */
typedef struct modattn_text_span {
    size_t start, end;
} modattn_text_span;

/* PRAGMA integrity_check: 0 when "ok", else MODATTN_EFORMAT with SQLite's first complaint. */
int modattn_store_integrity_check(modattn_store *s);

#ifdef __cplusplus
}
#endif
#endif
