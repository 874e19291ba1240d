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
 *   embeddings(chunk, model, vector)
 *                             vector: dim float32 in host byte order (little-endian on every
 *                             machine modattn builds for), L2-normalised (cosine = dot)
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

#define MODATTN_STORE_SCHEMA_VERSION 1
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
const char *modattn_store_path(const modattn_store *s);

/* The embedding model a store belongs to. */
typedef struct modattn_store_model {
    const char *name;         /* "all-MiniLM-L6-v2" */
    const char *weights_hash; /* 16 hex digits */
    size_t dim;
} modattn_store_model;

/* Records the model in a store that has none; accepts the same model again; refuses another one
 * (other name, weights hash or dimension) with MODATTN_EVERSION and a message naming both. */
int modattn_store_bind_model(modattn_store *s, const modattn_store_model *m);
/* Checks without recording: MODATTN_ENOTFOUND if the store has no model yet (nothing indexed),
 * MODATTN_EVERSION on a mismatch. */
int modattn_store_check_model(modattn_store *s, const modattn_store_model *m);
/* The model the store records, into caller buffers (name_len >= 1, hash buffer of 17 bytes). */
int modattn_store_get_model(modattn_store *s, char *name, size_t name_len, char hash[17],
                            size_t *dim);

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
typedef struct modattn_store_vectors {
    const float *data;        /* [n, dim] row-major, rows MODATTN_ALIGN-aligned (ld floats apart) */
    const int64_t *chunk_ids; /* [n] */
    size_t n, dim, ld;
    uint64_t generation;      /* the store's generation these vectors are of */
    void *map;                /* the vector file's mapping (modattn_store_open_vectors), or NULL */
    size_t map_bytes;
    char note[320];           /* why the vector file was not used ("" if it was, or none asked) */
} modattn_store_vectors;
/* Loads every embedding into one contiguous block (memory category INDEX). Ownership: free with
 * modattn_store_vectors_free(). */
int modattn_store_load_vectors(modattn_store *s, modattn_store_vectors *out);
void modattn_store_vectors_free(modattn_store_vectors *v);

/* The store's generation: raised by one in every transaction that changes documents, chunks or
 * embeddings (0 for a store never written). */
int modattn_store_generation(modattn_store *s, uint64_t *out);

/* ---- the vector file: PATH.vec beside the store at PATH (pipeline/vecfile.c)
 *
 * The store's vectors in one flat, memory-mappable file, so that a search maps them instead of
 * reading every row out of SQLite. Layout (little-endian): a 4096-byte header (magic
 * "MODATTNV", version, dim, ld, element type f32, count, the store's generation, the model's name
 * and weights hash, the offsets and the file's size, an XXH3-64 of the header and of the chunk
 * ids), then count chunk ids (int64, ascending), padded to 64 bytes, then count rows of ld floats
 * (64-byte aligned). The store stays the source of truth: the file is written whole from it,
 * into a temporary file that is fsynced, renamed over the old one, and the folder fsynced; it
 * is used only when every header field agrees with the store (same model, same generation) and
 * with the file's size, so a store changed since (a later index, a deletion, an index killed
 * between its commit and the rename) or a damaged file is never read: the search reads the
 * store instead and says why. The rows themselves are not checksummed at each search (that
 * would cost as much as the scan); the atomic replace is what keeps them whole. */

/* "PATH.vec" into buf. MODATTN_EINVAL if it does not fit. */
int modattn_store_vector_file_path(const modattn_store *s, char *buf, size_t len);
/* Writes the vector file from the store (all of it, in one read transaction). Errors name the
 * file and the call (a read-only folder: MODATTN_EIO with the reason); the store is unchanged. */
int modattn_store_write_vector_file(modattn_store *s);
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

/* PRAGMA integrity_check: 0 when "ok", else MODATTN_EFORMAT with SQLite's first complaint. */
int modattn_store_integrity_check(modattn_store *s);

#ifdef __cplusplus
}
#endif
#endif
