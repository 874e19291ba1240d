/* modattn/search.h — searching a store: one searcher (modattn_searcher_create / _search / _free)
 * with one parameter struct (modattn_search_params: mode hybrid, vector or keyword; k; path prefix;
 * fusion; exact scan or ANN index). The library's other entry points to the same search (one query,
 * a batch, an embedded vector, raw top-k over a matrix) are internal (pipeline/internal_search.h).
 *
 * The scan: vectors lie contiguously in memory ([n, dim], L2-normalised, so cosine = dot); the
 * query is dotted with every row by the widest SIMD the CPU has (AVX-512, AVX2+FMA, or portable
 * C; chosen at run time by modattn__cpu_get(), so MODATTN_CPU_DISABLE narrows it), threaded over
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

typedef struct modattn_hit {
    size_t row;
    float score;
} modattn_hit;

/* Rows at and above which modattn__topk spreads the scan over exec's threads. */
#define MODATTN_TOPK_PARALLEL_ROWS 8192









/* ---- searching a store */
typedef struct modattn_search_result {
    int rank;            /* 1-based */
    float score;         /* the ranking's score: cosine (vector), BM25 (keyword, higher better),
                          * reciprocal rank fusion (hybrid) */
    modattn_store_chunk chunk; /* path, byte range, line/page, text */
    /* modattn__search_run: where each ranking put it (1-based; 0: not among its candidates), its
     * cosine with the query (NaN if its vector was not found) and BM25 (NaN if no keyword match),
     * and the byte spans of chunk.text that the query's words match (owned; freed with the results) */
    int vector_rank, keyword_rank;
    float cosine;
    double bm25;
    modattn_text_span *spans;
    size_t nspans;
    /* where the sparse ranking put it (1-based; 0: not among its candidates, or no sparse ranking)
     * and its sparse dot product with the query (NaN when not among them) */
    int sparse_rank;
    double sparse_score;
    /* the snippet: [snippet_start, snippet_end) of chunk.text, at most 240 bytes (then to a
     * character's end), the window that best shows why it was found: the most distinct marked
     * words, then (for those of the first 5 results no query word marks) the window whose
     * embedding is nearest the query's,
     * then the marks nearest together, then the earliest. The same on every surface. */
    size_t snippet_start, snippet_end;
} modattn_search_result;

/* How modattn__search_run ranks. */
typedef enum modattn_search_mode {
    MODATTN_SEARCH_HYBRID = 0, /* both rankings, fused by reciprocal rank */
    MODATTN_SEARCH_VECTOR,     /* by meaning: cosine of the embeddings */
    MODATTN_SEARCH_KEYWORD,    /* by words: BM25 over the keyword index (store schema 3) */
    MODATTN_SEARCH_SPARSE,     /* by learned sparse vectors (SPLADE): the dot product over the store's
                                * inverted index (`index --sparse`); needs params.sparse */
} modattn_search_mode;
const char *modattn_search_mode_name(modattn_search_mode m); /* "hybrid", "vector", "keyword", "sparse" */

/* Hybrid search's defaults: the fusion's K and the keyword ranking's weight (the vector's being 1),
 * the pair of bench/results/search_quality.md's sweep with the best MRR among those no worse than
 * vector search on any metric of any table. With them the best match by words scores as the 6th by
 * meaning; at the textbook K of 60 only weights up to 0.5 were no worse, and they put a chunk found
 * by words alone behind all 50 candidates found by meaning. */
#define MODATTN_SEARCH_RRF_K 10.0
#define MODATTN_SEARCH_KEYWORD_WEIGHT 0.7
/* Hybrid search on a store with sparse vectors (and params.sparse given): the sparse ranking's
 * weight in the same fusion (the vector's 1, the keyword's 0.7, the same K), measured by
 * bench/search_quality_sparse.py (bench/results/search_quality.md, "Learned sparse vectors"): over
 * the 140 queries of the demo and pydoc corpora with splade-tiny and all-MiniLM-L6-v2, 0.6 gave the
 * best MRR of 0.2-2 (hybrid 0.908 -> 0.925, recall@1 0.857 -> 0.893) and is no worse than 0.7 (the
 * default chosen on demo alone) on any metric of any corpus x kind table: the same on demo, better
 * on pydoc (MRR 0.929 -> 0.943). Every weight loses one demo plain query's recall@3 (-0.033). */
#define MODATTN_SEARCH_SPARSE_WEIGHT 0.6
/* Results when the caller gives no k: the same on every surface (`modattn search -k`, the server's
 * "k", Python's Store.search(k=)): 10, the usual first page of a search engine (Elasticsearch's size,
 * sentence-transformers' semantic_search top_k) and two screens of the CLI's text output. */
#define MODATTN_SEARCH_DEFAULT_K 10

/* What finds the vector ranking's candidates (modattn/ann.h). */
typedef enum modattn_search_index {
    MODATTN_SEARCH_INDEX_AUTO = 0, /* the store's ANN index when it is there and current, and
                                    * reading it costs less than scanning for this many queries
                                    * (one query over 1M rows: the scan, 84 ms, against 2.3 s to
                                    * read 1.8 GB of HNSW); else the exact scan, index_note saying
                                    * why (a path prefix is always scanned exactly). A caller that
                                    * searches many times keeps it open (modattn__ann_open) */
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
    /* The sparse encoder the store's sparse vectors were made with (modattn/sparse.h; NULL: no
     * sparse ranking): mode sparse ranks by it alone, hybrid fuses its ranking with the others
     * when the store has sparse vectors. Another encoder than the store's is refused
     * (MODATTN_EVERSION); sparse mode on a store without sparse vectors is MODATTN_EUNSUPPORTED
     * naming the fix. */
    struct modattn_sparse_encoder *sparse;
    double sparse_weight;     /* hybrid: the sparse ranking's weight; 0: MODATTN_SEARCH_SPARSE_WEIGHT */
    struct modattn_session *sparse_session; /* where the query's sparse vector is encoded (a session
                                             * of the encoder's ctx; NULL: its own threads): callers
                                             * searching from several threads give each its own */
} modattn_search_params;

/* What a search did beyond its results. */
typedef struct modattn_search_notes {
    bool keywords_used;       /* the keyword index answered (hybrid, keyword) */
    char note[320];           /* why the keyword ranking was left out of a hybrid search ("" if not) */
    char keywords[256];       /* words searched for other than as typed: a prefix of the store's
                               * words ("recurs → recurs*") or a typo's nearest one ("recursivly →
                               * recursively"); "" if none */
} modattn_search_notes;


/* modattn__search_run with the vector ranking's candidates found by an ANN index open for v
 * (modattn__ann_open; the caller serialises calls on one index): scores stay exact. ann NULL, a
 * path prefix, keyword mode or p->index EXACT: modattn__search_run itself. */
struct modattn_ann;

void modattn_search_results_free(modattn_search_result *r, size_t n);


/* What a search read its vectors from. */
typedef struct modattn_search_info {
    bool mapped;        /* the vector file (modattn__store_open_vectors), else the store */
    char note[320];     /* why the vector file was not used ("" if it was) */
    size_t vectors;     /* rows scanned */
    char index[16];     /* what found the vector ranking: "exact", or the ANN index's kind ("hnsw",
                         * "ivf-sq8", "ivf-pq", "f16", "int8", "binary"); "" when there was no
                         * vector ranking (keywords) */
    char index_note[512]; /* why the ANN index there was not used ("" if it was, or if there is none) */
    double index_open_ms; /* time to open (read and check) the ANN index */
} modattn_search_info;
/* A searcher: a store's vectors and ANN index held open between searches, for a caller that
 * searches many times (a server, a Python Store): the vectors (the mapped vector file) are opened
 * on the first search and again whenever the store's generation has moved since (a search after
 * an `index` sees its documents; nothing is re-read while the store is unchanged); the ANN index,
 * when there is one and it is current, is read once per generation (and again when its file is
 * created, rebuilt or removed; one that cannot be read, as over the memory budget, is not used
 * until then: searched exactly) and then used for every search
 * that may (no cost rule: its reading is paid once; modattn_search_params.index as for
 * modattn__search_with). Used by one thread at a time, as its store is. The store and model must
 * outlive it. Ownership: modattn_searcher_free. */
typedef struct modattn_searcher modattn_searcher;
int modattn_searcher_create(modattn_store *store, modattn_model *model, modattn_searcher **out);
void modattn_searcher_free(modattn_searcher *h); /* NULL is fine */
/* The search: nq queries (nq = 1 for one) on the held vectors and index, ranked as p says (required;
 * modattn_search_params above). out and nout: [nq] (query i's results in out[i], freed
 * with modattn_search_results_free(out[i], nout[i])); notes: NULL or [nq]; info may be NULL. On
 * error every out[i] is NULL and the message names the query. exec: the threads the scan may use
 * (modattn_ctx_exec, modattn/dispatch.h), or NULL for the calling thread alone. */
int modattn_searcher_search(modattn_searcher *h, const char *const *queries, size_t nq, const modattn_search_params *p,
                            const modattn_exec *exec, modattn_search_result **out, size_t *nout,
                            modattn_search_info *info, modattn_search_notes *notes);
/* Searchers on several connections to one store (one per thread: a server's executors) may share
 * one ANN index, whose memory is the store's size: made with the same share, they read it once per
 * generation (or when its file changes) and search it one at a time (the share's lock). The share
 * must outlive its searchers. Ownership: modattn__searcher_share_free. */
typedef struct modattn_searcher_share modattn_searcher_share;


#ifdef __cplusplus
}
#endif
#endif
