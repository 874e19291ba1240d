/* pipeline/internal_search.h — the library's own functions of modattn/search.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_PIPELINE_INTERNAL_SEARCH_H
#define MODATTN_PIPELINE_INTERNAL_SEARCH_H

#include "modattn/search.h"
#include "pipeline/internal_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which rankings brought a result, as every surface's "found_by" (docs/FIELDS.md): "meaning",
 * "words" or "both" without a sparse ranking; with one, the names of those that did joined by
 * '+' ("sparse", "meaning+sparse", "words+sparse", "meaning+words+sparse"). */
const char *modattn__search_found_by(const modattn_search_result *r);

/* "scalar", "avx2", "avx512" ("auto" for AUTO). */
const char *modattn__scan_isa_name(modattn_scan_isa isa);

/* What AUTO picks on this machine (and whether a forced one can run: EUNSUPPORTED if not). */
modattn_scan_isa modattn__scan_isa_auto(void);

int modattn__scan_isa_available(modattn_scan_isa isa);

/* The k rows of mat ([n, dim], rows ld floats apart, ld >= dim) with the largest dot product with
 * query ([dim]), best first, into out (room for k); *nout = min(k, n). exec may be NULL (serial).
 * Allocates O(k x threads + block) workspace (category WORKSPACE). */
int modattn__topk(const float *mat, size_t n, size_t dim, size_t ld, const float *query, size_t k,
                 const modattn_exec *exec, modattn_scan_isa isa, modattn_hit *out, size_t *nout);

/* The same, leaving out every row r whose bit skip_row0 + r is set in skip (bit b of byte b/8;
 * NULL: none): *nout = min(k, rows not left out). Rows of out are mat's. */
int modattn__topk_masked(const float *mat, size_t n, size_t dim, size_t ld, const float *query,
                        size_t k, const modattn_exec *exec, modattn_scan_isa isa,
                        const uint8_t *skip, size_t skip_row0, modattn_hit *out, size_t *nout);

/* The k best rows of a store's vectors (every segment, masked rows left out) for the normalised
 * query q ([v->dim]): chunk ids and scores, best first (ties: lower chunk id first, as one scan
 * in chunk order); *nout = min(k, v->n). */
int modattn__store_vectors_topk(const modattn_store_vectors *v, const float *q, size_t k,
                               const modattn_exec *exec, int64_t *ids, float *scores, size_t *nout);

/* The same among the rows whose chunk id is in allow (nallow ids, ascending; allow NULL: every
 * row; an empty list: none). */
int modattn__store_vectors_topk_among(const modattn_store_vectors *v, const float *q, size_t k,
                                     const modattn_exec *exec, const int64_t *allow, size_t nallow,
                                     int64_t *ids, float *scores, size_t *nout);

/* The k best rows for each of nq queries (queries: [nq, dim], rows qld floats apart) in one pass
 * over mat: blocks of rows are scored against blocks of queries by a GEMM (compute-bound, each row
 * read once per 256 queries instead of once per query), each query keeps its k + 8 best by those
 * scores, and these are scored again with modattn__topk's kernel: the scores are modattn__topk's bit
 * for bit, and so is the order, unless the GEMM's rounding (~1e-7) moved a row across the cut by
 * more than 8 places. skip/skip_row0 as modattn__topk_masked (NULL: none). out: [nq, k], query q's
 * hits at out + q * k, best first; nout: [nq], min(k, rows not left out). Workspace: O(threads x
 * nq x (k + 8)) hits and 1 MiB of scores per thread (category WORKSPACE). */
int modattn__topk_batch(const float *mat, size_t n, size_t dim, size_t ld, const float *queries,
                       size_t nq, size_t qld, size_t k, const modattn_exec *exec, const uint8_t *skip,
                       size_t skip_row0, modattn_hit *out, size_t *nout);

/* modattn__store_vectors_topk for nq normalised queries at once (queries [nq, v->dim], contiguous)
 * through modattn__topk_batch: ids and scores [nq, k] (query q's at + q * k), nout [nq]. */
int modattn__store_vectors_topk_batch(const modattn_store_vectors *v, const float *queries, size_t nq,
                                     size_t k, const modattn_exec *exec, int64_t *ids, float *scores,
                                     size_t *nout);

/* The live row of chunk_id among v's (rows of a segment are in ascending chunk id; a later
 * segment's row is newer than an earlier one's; masked rows are not live), or NULL. */
const float *modattn__store_vectors_find(const modattn_store_vectors *v, int64_t chunk_id);

/* scores[i] = dot(mat row i, query) for i in [0, n), with one ISA (tests, benchmarks). */
int modattn__scan_scores(const float *mat, size_t n, size_t dim, size_t ld, const float *query,
                        modattn_scan_isa isa, float *scores);

/* L2-normalise v in place (a zero vector stays zero). */
void modattn__vec_normalize(float *v, size_t dim);

/* The k best chunks for a query given as text and as its embedding (query_vec, [v->dim],
 * normalised here) among vectors the caller holds (v), by p->mode:
 *   vector   as modattn__search_vectors;
 *   keyword  BM25 of modattn__keyword_query(query_text) over the keyword index
 *            (MODATTN_EUNSUPPORTED without it);
 *   hybrid   the best p->candidates of each, fused by reciprocal rank fusion
 *            (weight / (rrf_k + rank), summed; ties by chunk id); without a keyword index, or when
 *            no keyword matches, the vector ranking alone, and notes->note says which.
 * Every result carries both ranks, its cosine and BM25, and the spans of its text that the
 * query's words match (when the store has a keyword index and k <= 1000). notes may be NULL.
 * The caller checks the store belongs to the model. Ownership: modattn_search_results_free(). */
int modattn__search_run(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                       const char *query_text, size_t query_len, const modattn_search_params *p,
                       const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                       modattn_search_notes *notes);

int modattn__search_run_ann(modattn_store *store, const modattn_store_vectors *v, const struct modattn_ann *ann,
                           const float *query_vec, const char *query_text, size_t query_len,
                           const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                           size_t *nout, modattn_search_notes *notes);

/* Embeds query with model, checks the store belongs to the model (MODATTN_EVERSION if not,
 * MODATTN_ENOTFOUND if the store is empty), scans every stored vector and returns the k best
 * chunks. exec: threads for the scan (NULL: serial). Ownership: free with
 * modattn_search_results_free(). */
int modattn__search(modattn_store *store, modattn_model *model, const char *query, size_t k,
                   const modattn_exec *exec, modattn_search_result **out, size_t *nout);

/* The k best chunks of the store for a query vector already embedded (query_vec, [v->dim];
 * normalised here) among vectors the caller holds (modattn__store_open_vectors; a server keeps
 * them between searches and opens them again when the store's generation moves). path_prefix
 * (NULL: all) keeps only the chunks of documents whose stored path begins with its bytes. The
 * caller checks that the store belongs to the model (modattn_store_check_model). Ownership: free
 * with modattn_search_results_free(). */
int modattn__search_vectors(modattn_store *store, const modattn_store_vectors *v, const float *query_vec,
                           size_t k, const char *path_prefix, const modattn_exec *exec,
                           modattn_search_result **out, size_t *nout);

/* The whole search as `modattn search` runs it: checks the store belongs to the model, embeds the
 * query (not for keyword mode), opens the store's vectors (modattn__store_open_vectors; not for
 * keyword mode), and modattn__search_run with p. info and notes may be NULL. */
int modattn__search_with(modattn_store *store, modattn_model *model, const char *query,
                        const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                        size_t *nout, modattn_search_info *info, modattn_search_notes *notes);

/* modattn__search_with for nq queries at once: the store's model checked once, every query embedded
 * in one call, the vectors opened once, and (without a path prefix) the vector rankings of all
 * queries found in one pass over the vectors (modattn__store_vectors_topk_batch: compute-bound
 * instead of memory-bound, the same results as one query at a time); the keyword rankings and the
 * fusion then run per query. out and nout: [nq] (query i's results in out[i], to be freed with
 * modattn_search_results_free(out[i], nout[i])); notes: NULL or [nq]. On error every out[i] is NULL
 * and the message names the query ("query 3: ..."). */
int modattn__search_batch(modattn_store *store, modattn_model *model, const char *const *queries, size_t nq,
                         const modattn_search_params *p, const modattn_exec *exec, modattn_search_result **out,
                         size_t *nout, modattn_search_info *info, modattn_search_notes *notes);

int modattn__searcher_share_create(modattn_searcher_share **out);

void modattn__searcher_share_free(modattn_searcher_share *sh); /* NULL is fine */

/* modattn_searcher_create with the ANN index held in share (NULL: its own). */
int modattn__searcher_create_shared(modattn_store *store, modattn_model *model, modattn_searcher_share *share,
                                   modattn_searcher **out);

/* The held vectors, opened again first if the store's generation moved (*v valid until the next
 * call on h). */
int modattn__searcher_vectors(modattn_searcher *h, const modattn_store_vectors **v);

/* One query already embedded (query_vec: the model's dim floats; query: its text, for keywords
 * and spans, query_len bytes) on the held vectors and index, as modattn__search_run_ann or
 * modattn__search_run. The store's model is not checked here (modattn_store_check_model). */
int modattn__searcher_search_vector(modattn_searcher *h, const float *query_vec, const char *query, size_t query_len,
                                   const modattn_search_params *p, const modattn_exec *exec,
                                   modattn_search_result **out, size_t *nout, modattn_search_info *info,
                                   modattn_search_notes *notes);

/* ---- snippets (pipeline/snippet.c): which window of a result's chunk is shown */
#define MODATTN_SNIPPET_BYTES 240         /* a window's most bytes (then to a character's end) */
#define MODATTN_SNIPPET_MAX_WINDOWS 48    /* candidate windows of one chunk: half the tiling, half at marks */
#define MODATTN_SNIPPET_MEANING_RESULTS 10 /* results whose windows are weighed by meaning (every window) */
typedef struct modattn_snippet_window {
    size_t start, end;      /* [start, end) of the chunk's text */
    size_t distinct, marks; /* marked words in it: distinct (ASCII case folded), all */
    size_t spread;          /* bytes from its first marked word to the end of its last new one */
} modattn_snippet_window;
/* The candidate windows of text (len bytes; spans: its marked words, sorted) into w (at most cap):
 * one window when the text fits; else the text in windows that begin at sentence or line starts
 * (at most cap / 2, spread evenly over a huge text), and one beginning a little before each
 * marked word. Returns how many. */
size_t modattn__snippet_candidates(const char *t, size_t len, const modattn_text_span *sp, size_t nsp,
                                  modattn_snippet_window *w, size_t cap);
/* The windows holding the most distinct marked words (their indexes into idx, by start, at most
 * max: when more are tied, first those that follow one another from the start without overlapping,
 * which cover the chunk, then the others by start). Returns how many. */
size_t modattn__snippet_contenders(const modattn_snippet_window *w, size_t nw, size_t *idx, size_t max);
/* The best of the windows idx[0..nidx) (an index into w): the most distinct marked words, then the
 * highest cos[j] (the window idx[j]'s cosine with the query; cos NULL: not weighed by meaning),
 * then the marked words nearest together, the most marks, the earliest. */
size_t modattn__snippet_pick(const modattn_snippet_window *w, const size_t *idx, size_t nidx, const float *cos);
/* Sets every result's snippet_start/snippet_end: the best window (modattn__snippet_pick), the
 * contenders of a chunk no query word marks among the first MODATTN_SNIPPET_MEANING_RESULTS results
 * weighed by the cosine of their mean input word embedding with the query's (query: qlen bytes;
 * model or query NULL: by words alone). */
int modattn__search_snippets(const modattn_model *model, const char *query, size_t qlen, modattn_search_result *res,
                            size_t n);

/* modattn__search, telling where the vectors came from (info may be NULL). */
int modattn__search_ex(modattn_store *store, modattn_model *model, const char *query, size_t k,
                      const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                      modattn_search_info *info);

#ifdef __cplusplus
}
#endif
#endif
