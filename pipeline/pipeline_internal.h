/* pipeline/pipeline_internal.h — what the pipeline/ files share; not a public header. */
#ifndef MODATTN_PIPELINE_INTERNAL_H
#define MODATTN_PIPELINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/internal_core.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"

/* Length of the UTF-8 character (or of the maximal subpart of an ill-formed sequence) at s,
 * len >= 1; *valid says which. */
size_t modattn__utf8_next(const unsigned char *s, size_t len, bool *valid);
/* UTF-16 code units p[0..len) (no BOM) as UTF-8 into out, which holds len / 2 * 3 + 3 bytes;
 * returns the bytes written (no NUL). */
size_t modattn__utf16_decode(const unsigned char *p, size_t len, bool big_endian, char *out);

/* Scan kernels: scores[i] = dot(mat + i*ld, q) over dim floats, for i in [0, n).
 * mat rows and q need no particular alignment. One per instruction set, each in its own file
 * compiled with that set's flags (scan_avx2.c, scan_avx512.c); call them only when
 * modattn__cpu_get() says the CPU has the set. */
typedef void (*modattn__scan_fn)(const float *mat, size_t n, size_t dim, size_t ld,
                                 const float *q, float *scores);
void modattn__scan_scalar(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                          float *scores);
/* The widest kernel this CPU runs (what modattn__topk's AUTO picks). */
modattn__scan_fn modattn__scan_best(void);
/* One row's score by the same kernel, bit for bit what it gives that row in a scan (the ANN
 * graph's walk: pipeline/ann_hnsw.c). */
typedef float (*modattn__dot1_fn)(const float *row, const float *q, size_t dim);
modattn__dot1_fn modattn__dot1_best(void);
#if defined(MODATTN_SCAN_X86)
void modattn__scan_avx2(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                        float *scores);
void modattn__scan_avx512(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                          float *scores);
float modattn__dot1_avx2(const float *row, const float *q, size_t dim);
float modattn__dot1_avx512(const float *row, const float *q, size_t dim);
#endif

/* A growing text buffer with its marks (html.c, pdf.c). On allocation failure `err` is set and
 * further appends do nothing. */
struct modattn_text_mark;
struct modattn_doc_text;
typedef struct modattn__tbuf {
    char *p;
    size_t n, cap;
    struct modattn_text_mark *marks;
    size_t nmarks, mcap;
    int err;
} modattn__tbuf;
void modattn__tbuf_put(modattn__tbuf *b, const char *s, size_t len);
void modattn__tbuf_mark(modattn__tbuf *b, int64_t number); /* from the current end on */
/* Moves the text (NUL-terminated) and marks into d, or returns the error; b is left empty. */
int modattn__tbuf_finish(modattn__tbuf *b, struct modattn_doc_text *d, bool pages);
void modattn__tbuf_free(modattn__tbuf *b);

/* The store's side of the vector file (store.c for vecfile.c). */
struct modattn_store;
struct modattn_store_vectors;
/* BEGIN IMMEDIATE: the store's write lock, held while the vector file is brought up to date, so
 * two writers never update it at once and what it is made from is one snapshot. */
int modattn__store_lock(struct modattn_store *s);
void modattn__store_unlock(struct modattn_store *s); /* ends it, writing nothing */
/* Inside a transaction: the rows with generation > after (after < 0: all), ascending chunk id,
 * one at a time to fn (a non-zero status from it stops the scan and is returned); *n the rows
 * given. modattn__store_count_vectors counts them; modattn__store_read_vectors copies them into
 * one block, as modattn__store_load_vectors. */
typedef int (*modattn__vector_fn)(void *ctx, int64_t chunk, const void *v, size_t dim); /* v: dim floats, unaligned */
int modattn__store_scan_vectors(struct modattn_store *s, int64_t after, modattn__vector_fn fn, void *ctx, size_t *n);
int modattn__store_count_vectors(struct modattn_store *s, int64_t after, size_t *n);
int modattn__store_read_vectors(struct modattn_store *s, int64_t after, struct modattn_store_vectors *out);
/* Inside a transaction: the chunk ids of the rows with generation <= upto, unordered, in a block
 * the caller frees with modattn_free. Schema 2 only. */
int modattn__store_ids_upto(struct modattn_store *s, uint64_t upto, int64_t **ids, size_t *n);
int modattn__store_schema(const struct modattn_store *s); /* user_version as opened */
/* The stored paths of documents with this content hash and size, in path order, one at a time to fn
 * (a non-zero return stops the scan and is returned). A scan of the documents table: the indexer
 * asks only for files with more than one hard link. */
int modattn__store_paths_with_hash(struct modattn_store *s, uint64_t hash, int64_t size,
                                   int (*fn)(void *ud, const char *path), void *ud);
/* The connection (keywords.c; what an extension keeps on it: store_ext.h). */
struct sqlite3 *modattn__store_db(struct modattn_store *s);
/* The store's sparse (SPLADE) vectors (store_sparse.c): an inverted index sparse(term, chunk,
 * weight) kept in each chunk's transaction, and the sparse model that made them (in meta). */
typedef struct modattn__sparse_ident {
    char name[256];    /* the model folder's last component */
    char identity[17]; /* modattn_model_info.identity of its encoder (weights, settings, tokenizer) */
    char dir[4096];    /* the folder as given at index time (what a search loads) */
    size_t top_k;      /* the pruning it was indexed with */
    float threshold;
} modattn__sparse_ident;
/* The query's heaviest terms that a sparse search reads (the rest are left out). */
#define MODATTN__SPARSE_QUERY_TERMS 1024
/* The recorded model (*found false: the store keeps no sparse vectors). */
int modattn__store_sparse_get(struct modattn_store *s, modattn__sparse_ident *out, bool *found);
bool modattn__store_has_sparse(struct modattn_store *s);
/* MODATTN_EVERSION naming the fix when the store's sparse vectors are another model's or pruning's;
 * *recorded: the store has some. */
int modattn__store_sparse_check(struct modattn_store *s, const modattn__sparse_ident *want, bool *recorded);
/* Checks, or records want on a store without chunks (one with chunks but no sparse vectors is
 * refused: its documents would never be found by sparse search). Outside a transaction. */
int modattn__store_sparse_bind(struct modattn_store *s, const modattn__sparse_ident *want);
/* Inside the chunk's transaction: its sparse vector's positive weights. */
int modattn__store_put_sparse(struct modattn_store *s, int64_t chunk, const int32_t *terms, const float *weights,
                              size_t n);
/* The k chunks with the largest dot product with the query (its MODATTN__SPARSE_QUERY_TERMS
 * heaviest terms), best first, ties by chunk id; only the query's terms' postings are read.
 * MODATTN_EUNSUPPORTED naming the fix on a store without sparse vectors. */
int modattn__store_sparse_topk(struct modattn_store *s, const int32_t *terms, const float *weights, size_t n,
                               size_t k, const char *path_prefix, int64_t *ids, double *scores, size_t *nout);
/* Rows of the inverted index, and chunks that have any (tests, stats). */
int modattn__store_sparse_count(struct modattn_store *s, int64_t *rows, int64_t *chunks);
/* The chunk id the last modattn__store_put_chunk wrote. */
int64_t modattn__store_last_chunk(const struct modattn_store *s);
/* How many keyword searches on this store were answered by the pruned passes (keywords.c; tests). */
size_t modattn__store_kw_pruned(struct modattn_store *s);
/* Whether this SQLite has FTS5 (MODATTN_TEST_NO_FTS5=1 says it has not, for tests). */
bool modattn__sqlite_has_fts5(void);
/* Checks a whole vector file held in memory at file (64-byte aligned): header, layout against
 * size, ids and mask. 1 valid, with out the vectors a search would see (pointing into file);
 * 0 not (why in why). Reads nothing outside [file, file + size). The fuzz target's entry. */
int modattn__vecfile_view(const void *file, size_t size, struct modattn_store_vectors *out, char *why, size_t len);
/* Recomputes a vector file's checksums in place (those whose regions lie inside it, then the
 * header's): lets the fuzz target reach the layout checks behind them. */
void modattn__vecfile_reseal(void *file, size_t size);

/* HTML and PDF extraction in a child process (extract.c): the in-process extractor's result, bit
 * for bit, or a reason it has none. The child may map mem_bytes beyond what it inherits
 * (RLIMIT_DATA; 0: no limit) and is killed after timeout_s seconds (<= 0: none) or when cancel
 * returns non-zero (*cancelled then true). The text comes back in blocks from modattn__malloc
 * (MODATTN_MEM_OTHER), refused over max_text bytes. Returns 0; MODATTN_EBUDGET/ENOMEM when the
 * text does not fit this process's budget; MODATTN_EFORMAT with the extractor's message; otherwise
 * (MODATTN_ERANGE, MODATTN_EIO) a message naming the limit or the failure ("extraction exceeded
 * the memory budget ...", "took longer than --file-timeout 30 s ...", "the PDF library crashed
 * (signal 11, ...)"). */
enum modattn_doc_kind;
typedef struct modattn__extract_limits {
    uint64_t mem_bytes;
    double timeout_s;
    size_t max_text;
    int (*cancel)(void *ud);
    void *cancel_ud;
} modattn__extract_limits;
int modattn__extract_isolated(enum modattn_doc_kind kind, const char *buf, size_t len,
                              const modattn__extract_limits *lim, struct modattn_doc_text *out, bool *cancelled);
/* A child asleep this long without using the CPU is stalled on a lock it inherited at the fork:
 * it is killed and a new one forked, MODATTN__EXTRACT_TRIES times in all (then "... stalled ...").
 * Tests lower modattn__extract_stall_s (0: no watch) and set modattn__extract_child_hook (run first
 * in each child). */
#define MODATTN__EXTRACT_STALL_S 3.0
#define MODATTN__EXTRACT_TRIES 3
extern double modattn__extract_stall_s;
extern void (*modattn__extract_child_hook)(void);
/* Held by a thread while it allocates a lot beside the extraction forks (the indexer's embedder):
 * in AddressSanitizer builds a fork waits for it (pipeline/extract.c says why); elsewhere nothing. */
void modattn__fork_guard_enter(void);
void modattn__fork_guard_leave(void);

#endif
