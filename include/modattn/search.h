/* modattn/search.h — exact top-k search by cosine similarity.
 *
 * The scan: vectors lie contiguously in memory ([n, dim], L2-normalised, so cosine = dot); the
 * query is dotted with every row by the widest SIMD the CPU has (AVX-512, AVX2+FMA, or portable
 * C; chosen at run time by modattn_cpu_get(), so MODATTN_CPU_DISABLE narrows it), threaded over
 * the host's pool for large matrices, and the k best rows are kept. Exact: every row is scored;
 * ties go to the lower row; NaN scores rank last. */
#ifndef MODATTN_SEARCH_H
#define MODATTN_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "modattn/status.h"
#include "modattn/types.h" /* modattn_exec */
#include "modattn/model.h"
#include "modattn/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum modattn_scan_isa {
    MODATTN_SCAN_AUTO = 0,
    MODATTN_SCAN_SCALAR,
    MODATTN_SCAN_AVX2,
    MODATTN_SCAN_AVX512,
} modattn_scan_isa;
/* "scalar", "avx2", "avx512" ("auto" for AUTO). */
const char *modattn_scan_isa_name(modattn_scan_isa isa);
/* What AUTO picks on this machine (and whether a forced one can run: EUNSUPPORTED if not). */
modattn_scan_isa modattn_scan_isa_auto(void);
int modattn_scan_isa_available(modattn_scan_isa isa);

typedef struct modattn_hit {
    size_t row;
    float score;
} modattn_hit;

/* Rows at and above which modattn_topk spreads the scan over exec's threads. */
#define MODATTN_TOPK_PARALLEL_ROWS 8192

/* The k rows of mat ([n, dim], rows ld floats apart, ld >= dim) with the largest dot product with
 * query ([dim]), best first, into out (room for k); *nout = min(k, n). exec may be NULL (serial).
 * Allocates O(k x threads + block) workspace (category WORKSPACE). */
int modattn_topk(const float *mat, size_t n, size_t dim, size_t ld, const float *query, size_t k,
                 const modattn_exec *exec, modattn_scan_isa isa, modattn_hit *out, size_t *nout);
/* The same, leaving out every row r whose bit skip_row0 + r is set in skip (bit b of byte b/8;
 * NULL: none): *nout = min(k, rows not left out). Rows of out are mat's. */
int modattn_topk_masked(const float *mat, size_t n, size_t dim, size_t ld, const float *query,
                        size_t k, const modattn_exec *exec, modattn_scan_isa isa,
                        const uint8_t *skip, size_t skip_row0, modattn_hit *out, size_t *nout);

/* The k best rows of a store's vectors (every segment, masked rows left out) for the normalised
 * query q ([v->dim]): chunk ids and scores, best first (ties: lower chunk id first, as one scan
 * in chunk order); *nout = min(k, v->n). */
int modattn_store_vectors_topk(const modattn_store_vectors *v, const float *q, size_t k,
                               const modattn_exec *exec, int64_t *ids, float *scores, size_t *nout);

/* The same among the rows whose chunk id is in allow (nallow ids, ascending; allow NULL: every
 * row; an empty list: none). */
int modattn_store_vectors_topk_among(const modattn_store_vectors *v, const float *q, size_t k,
                                     const modattn_exec *exec, const int64_t *allow, size_t nallow,
                                     int64_t *ids, float *scores, size_t *nout);

/* The k best rows for each of nq queries (queries: [nq, dim], rows qld floats apart) in one pass
 * over mat: blocks of rows are scored against blocks of queries by a GEMM (compute-bound, each row
 * read once per 256 queries instead of once per query), each query keeps its k + 8 best by those
 * scores, and these are scored again with modattn_topk's kernel: the scores are modattn_topk's bit
 * for bit, and so is the order, unless the GEMM's rounding (~1e-7) moved a row across the cut by
 * more than 8 places. skip/skip_row0 as modattn_topk_masked (NULL: none). out: [nq, k], query q's
 * hits at out + q * k, best first; nout: [nq], min(k, rows not left out). Workspace: O(threads x
 * nq x (k + 8)) hits and 1 MiB of scores per thread (category WORKSPACE). */
int modattn_topk_batch(const float *mat, size_t n, size_t dim, size_t ld, const float *queries,
                       size_t nq, size_t qld, size_t k, const modattn_exec *exec, const uint8_t *skip,
                       size_t skip_row0, modattn_hit *out, size_t *nout);

/* modattn_store_vectors_topk for nq normalised queries at once (queries [nq, v->dim], contiguous)
 * through modattn_topk_batch: ids and scores [nq, k] (query q's at + q * k), nout [nq]. */
int modattn_store_vectors_topk_batch(const modattn_store_vectors *v, const float *queries, size_t nq,
                                     size_t k, const modattn_exec *exec, int64_t *ids, float *scores,
                                     size_t *nout);

/* The live row of chunk_id among v's (rows of a segment are in ascending chunk id; a later
 * segment's row is newer than an earlier one's; masked rows are not live), or NULL. */
const float *modattn_store_vectors_find(const modattn_store_vectors *v, int64_t chunk_id);

/* scores[i] = dot(mat row i, query) for i in [0, n), with one ISA (tests, benchmarks). */
int modattn_scan_scores(const float *mat, size_t n, size_t dim, size_t ld, const float *query,
                        modattn_scan_isa isa, float *scores);

/* L2-normalise v in place (a zero vector stays zero). */
void modattn_vec_normalize(float *v, size_t dim);

/* ---- searching a store */
typedef struct modattn_search_result {
    int rank;            /* 1-based */
    float score;         /* the ranking's score: cosine (vector), BM25 (keyword, higher better),
                          * reciprocal rank fusion (hybrid) */
    modattn_store_chunk chunk; /* path, byte range, line/page, text */
    /* modattn_search_run: where each ranking put it (1-based; 0: not among its candidates), its
     * cosine with the query (NaN if its vector was not found) and BM25 (NaN if no keyword match),
     * and the byte spans of chunk.text that the query's words match (owned; freed with the results) */
    int vector_rank, keyword_rank;
    float cosine;
    double bm25;
    modattn_text_span *spans;
    size_t nspans;
} modattn_search_result;

/* How modattn_search_run ranks. */
typedef enum modattn_search_mode {
    MODATTN_SEARCH_HYBRID = 0, /* both rankings, fused by reciprocal rank */
    MODATTN_SEARCH_VECTOR,     /* by meaning: cosine of the embeddings */
    MODATTN_SEARCH_KEYWORD,    /* by words: BM25 over the keyword index (store schema 3) */
} modattn_search_mode;
const char *modattn_search_mode_name(modattn_search_mode m); /* "hybrid", "vector", "keyword" */

/* Hybrid search's defaults: the fusion's K and the keyword ranking's weight (the vector's being 1),
 * the pair of bench/results/search_quality.md's sweep with the best MRR among those no worse than
 * vector search on any metric of any table. With them the best match by words scores as the 6th by
 * meaning; at the textbook K of 60 only weights up to 0.5 were no worse, and they put a chunk found
 * by words alone behind all 50 candidates found by meaning. */
#define MODATTN_SEARCH_RRF_K 10.0
#define MODATTN_SEARCH_KEYWORD_WEIGHT 0.7

/* What finds the vector ranking's candidates (modattn/ann.h). */
typedef enum modattn_search_index {
    MODATTN_SEARCH_INDEX_AUTO = 0, /* the store's ANN index when it is there and current, and
                                    * reading it costs less than scanning for this many queries
                                    * (one query over 1M rows: the scan, 84 ms, against 2.3 s to
                                    * read 1.8 GB of HNSW); else the exact scan, index_note saying
                                    * why (a path prefix is always scanned exactly). A caller that
                                    * searches many times keeps it open (modattn_ann_open) */
    MODATTN_SEARCH_INDEX_EXACT,    /* the exact scan, always */
    MODATTN_SEARCH_INDEX_ANN,      /* the ANN index, or MODATTN_ENOTFOUND saying why it cannot be used */
} modattn_search_index;
struct modattn_ann_params;

typedef struct modattn_search_params {
    modattn_search_mode mode;
    size_t k;                 /* results */
    const char *path_prefix;  /* NULL: every document */
    double rrf_k;             /* hybrid: score = sum over rankings of weight / (rrf_k + rank); 0: 10
                               * (MODATTN_SEARCH_RRF_K) */
    double keyword_weight;    /* hybrid: the keyword ranking's weight, the vector's being 1; 0: 0.7
                               * (MODATTN_SEARCH_KEYWORD_WEIGHT) */
    size_t candidates;        /* hybrid: how many each ranking brings to the fusion; 0: max(k, 50) */
    modattn_search_index index; /* the vector ranking: the store's ANN index when usable, or exact */
    const struct modattn_ann_params *ann; /* ANN search parameters (efSearch, nprobe, rescore) for
                                         * this search; NULL: the index's own */
    /* How the query is embedded (modattn_model_embed_opt; NULL: the defaults): the prompt (by
     * default the model's query prompt, encode_query's choice) and the dimensions (always the
     * store's: set them only to say so). A store indexed for another query prompt or cut to other
     * dimensions refuses the search (MODATTN_EVERSION, naming the fix). */
    const struct modattn_embed_options *embed;
} modattn_search_params;

/* What a search did beyond its results. */
typedef struct modattn_search_notes {
    bool keywords_used;       /* the keyword index answered (hybrid, keyword) */
    char note[320];           /* why the keyword ranking was left out of a hybrid search ("" if not) */
    char keywords[256];       /* words searched for other than as typed: a prefix of the store's
                               * words ("recurs → recurs*") or a typo's nearest one ("recursivly →
                               * recursively"); "" if none */
} modattn_search_notes;

/* The k best chunks for a query given as text and as its embedding (query_vec, [v->dim],
 * normalised here) among vectors the caller holds (v), by p->mode:
 *   vector   as modattn_search_vectors;
 *   keyword  BM25 of modattn_keyword_query(query_text) over the keyword index
 *            (MODATTN_EUNSUPPORTED without it);
 *   hybrid   the best p->candidates of each, fused by reciprocal rank fusion
 *            (weight / (rrf_k + rank), summed; ties by chunk id); without a keyword index, or when
 *            no keyword matches, the vector ranking alone, and notes->note says which.
 * Every result carries both ranks, its cosine and BM25, and the spans of its text that the
 * query's words match (when the store has a keyword index and k <= 1000). notes may be NULL.
 * The caller checks the store belongs to the model. Ownership: modattn_search_results_free(). */
int modattn_search_run(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                       const char *query_text, size_t query_len, const modattn_search_params *p,
                       const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                       modattn_search_notes *notes);

/* modattn_search_run with the vector ranking's candidates found by an ANN index open for v
 * (modattn_ann_open; the caller serialises calls on one index): scores stay exact. ann NULL, a
 * path prefix, keyword mode or p->index EXACT: modattn_search_run itself. */
struct modattn_ann;
int modattn_search_run_ann(modattn_store *store, const modattn_store_vectors *v, const struct modattn_ann *ann,
                           const float *query_vec, const char *query_text, size_t query_len,
                           const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                           size_t *nout, modattn_search_notes *notes);

/* Embeds query with model, checks the store belongs to the model (MODATTN_EVERSION if not,
 * MODATTN_ENOTFOUND if the store is empty), scans every stored vector and returns the k best
 * chunks. exec: threads for the scan (NULL: serial). Ownership: free with
 * modattn_search_results_free(). */
int modattn_search(modattn_store *store, modattn_model *model, const char *query, size_t k,
                   const modattn_exec *exec, modattn_search_result **out, size_t *nout);
void modattn_search_results_free(modattn_search_result *r, size_t n);

/* The k best chunks of the store for a query vector already embedded (query_vec, [v->dim];
 * normalised here) among vectors the caller holds (modattn_store_open_vectors; a server keeps
 * them between searches and opens them again when the store's generation moves). path_prefix
 * (NULL: all) keeps only the chunks of documents whose stored path begins with its bytes. The
 * caller checks that the store belongs to the model (modattn_store_check_model). Ownership: free
 * with modattn_search_results_free(). */
int modattn_search_vectors(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                           size_t k, const char *path_prefix, const modattn_exec *exec,
                           modattn_search_result **out, size_t *nout);

/* What a search read its vectors from. */
typedef struct modattn_search_info {
    bool mapped;        /* the vector file (modattn_store_open_vectors), else the store */
    char note[320];     /* why the vector file was not used ("" if it was) */
    size_t vectors;     /* rows scanned */
    char index[16];     /* what found the vector ranking: "exact", or the ANN index's kind ("hnsw",
                         * "ivf-sq8", "ivf-pq", "f16", "int8", "binary"); "" when there was no
                         * vector ranking (keywords) */
    char index_note[512]; /* why the ANN index there was not used ("" if it was, or if there is none) */
    double index_open_ms; /* time to open (read and check) the ANN index */
} modattn_search_info;
/* The whole search as `modattn search` runs it: checks the store belongs to the model, embeds the
 * query (not for keyword mode), opens the store's vectors (modattn_store_open_vectors; not for
 * keyword mode), and modattn_search_run with p. info and notes may be NULL. */
int modattn_search_with(modattn_store *store, modattn_model *model, const char *query,
                        const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                        size_t *nout, modattn_search_info *info, modattn_search_notes *notes);
/* modattn_search_with for nq queries at once: the store's model checked once, every query embedded
 * in one call, the vectors opened once, and (without a path prefix) the vector rankings of all
 * queries found in one pass over the vectors (modattn_store_vectors_topk_batch: compute-bound
 * instead of memory-bound, the same results as one query at a time); the keyword rankings and the
 * fusion then run per query. out and nout: [nq] (query i's results in out[i], to be freed with
 * modattn_search_results_free(out[i], nout[i])); notes: NULL or [nq]. On error every out[i] is NULL
 * and the message names the query ("query 3: ..."). */
int modattn_search_batch(modattn_store *store, modattn_model *model, const char *const *queries, size_t nq,
                         const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                         size_t *nout, modattn_search_info *info, modattn_search_notes *notes);
/* A searcher: a store's vectors and ANN index held open between searches, for a caller that
 * searches many times (a server, a Python Store): the vectors (the mapped vector file) are opened
 * on the first search and again whenever the store's generation has moved since (a search after
 * an `index` sees its documents; nothing is re-read while the store is unchanged); the ANN index,
 * when there is one and it is current, is read once per generation (and again when its file is
 * created, rebuilt or removed; one that cannot be read, as over the memory budget, is not used
 * until then: searched exactly) and then used for every search
 * that may (no cost rule: its reading is paid once; modattn_search_params.index as for
 * modattn_search_with). Used by one thread at a time, as its store is. The store and model must
 * outlive it. Ownership: modattn_searcher_free. */
typedef struct modattn_searcher modattn_searcher;
int modattn_searcher_create(modattn_store *store, modattn_model *model, modattn_searcher **out);
void modattn_searcher_free(modattn_searcher *h); /* NULL is fine */
/* modattn_search_batch on the held vectors and index (nq = 1 for one query). */
int modattn_searcher_search(modattn_searcher *h, const char *const *queries, size_t nq, const modattn_search_params *p,
                            const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                            modattn_search_info *info, modattn_search_notes *notes);
/* Searchers on several connections to one store (one per thread: a server's executors) may share
 * one ANN index, whose memory is the store's size: made with the same share, they read it once per
 * generation (or when its file changes) and search it one at a time (the share's lock). The share
 * must outlive its searchers. Ownership: modattn_searcher_share_free. */
typedef struct modattn_searcher_share modattn_searcher_share;
int modattn_searcher_share_create(modattn_searcher_share **out);
void modattn_searcher_share_free(modattn_searcher_share *sh); /* NULL is fine */
/* modattn_searcher_create with the ANN index held in share (NULL: its own). */
int modattn_searcher_create_shared(modattn_store *store, modattn_model *model, modattn_searcher_share *share,
                                   modattn_searcher **out);
/* The held vectors, opened again first if the store's generation moved (*v valid until the next
 * call on h). */
int modattn_searcher_vectors(modattn_searcher *h, const modattn_store_vectors **v);
/* One query already embedded (query_vec: the model's dim floats; query: its text, for keywords
 * and spans, query_len bytes) on the held vectors and index, as modattn_search_run_ann or
 * modattn_search_run. The store's model is not checked here (modattn_store_check_model). */
int modattn_searcher_search_vector(modattn_searcher *h, const float *query_vec, const char *query, size_t query_len,
                                   const modattn_search_params *p, const modattn_exec *exec,
                                   modattn_search_result **out, size_t *nout, modattn_search_info *info,
                                   modattn_search_notes *notes);

/* modattn_search, telling where the vectors came from (info may be NULL). */
int modattn_search_ex(modattn_store *store, modattn_model *model, const char *query, size_t k,
                      const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                      modattn_search_info *info);

#ifdef __cplusplus
}
#endif
#endif
