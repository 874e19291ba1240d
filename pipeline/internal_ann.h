/* pipeline/internal_ann.h — the library's own functions of modattn/ann.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_PIPELINE_INTERNAL_ANN_H
#define MODATTN_PIPELINE_INTERNAL_ANN_H

#include "modattn/ann.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the kind is built and searched by FAISS (hnsw, ivf-sq8, ivf-pq). */
bool modattn__ann_kind_needs_faiss(modattn_ann_kind k);

/* The parameters an index of kind over rows vectors of dimension dim is built with: p's, with
 * each 0 replaced by its default. MODATTN_EINVAL when one does not fit (nlist above rows / 39,
 * pq_m not dividing dim, 2^pq_nbits above rows / 39), naming it. */
int modattn__ann_resolve(modattn_ann_kind kind, size_t rows, size_t dim, const modattn_ann_params *p,
                        modattn_ann_params *out);

/* "PATH.ann" into buf. */
int modattn__store_ann_file_path(const modattn_store *s, char *buf, size_t len);

/* The store's ANN index for the vectors v (modattn__store_open_vectors): 1 with *out when its file
 * is there and current for exactly v; 0 with *out NULL when there is none (why "") or it cannot
 * be used (why says why: stale, damaged, other model, a build without FAISS); < 0 on an error of
 * the store or of memory (a memory budget counts the index's bytes, category INDEX). */
int modattn__ann_open(modattn_store *s, const modattn_store_vectors *v, modattn_ann **out, char *why, size_t len);

void modattn__ann_close(modattn_ann *a); /* NULL is fine */

/* What modattn__ann_open would find, from the file's header alone (4096 bytes read): 1 there and
 * for exactly v (*file_bytes: its size, what opening it reads); 0 missing (why "") or not usable
 * (why: truncated, damaged header, stale, another model); < 0 an error of the store. The payload's
 * checksum is checked only by modattn__ann_open. */
int modattn__ann_peek(modattn_store *s, const modattn_store_vectors *v, uint64_t *file_bytes, char *why, size_t len);

modattn_ann_kind modattn__ann_get_kind(const modattn_ann *a);

/* The parameters it was built with (search ones as stored). */
void modattn__ann_get_params(const modattn_ann *a, modattn_ann_params *out);

size_t modattn__ann_rows(const modattn_ann *a);

uint64_t modattn__ann_file_bytes(const modattn_ann *a);

/* The k best rows for each of nq normalised queries ([nq, v->dim]) through the index: each
 * query's rescore candidates (search: efSearch, nprobe and rescore for this call; NULL or 0s: the
 * index's) are scored again exactly, masked rows left out, best first (ties: lower chunk id), as
 * modattn__store_vectors_topk_batch returns them: ids and scores [nq, k], nout [nq]. v must be the
 * vectors the index was opened for. exec: threads for FAISS across queries (NULL: 1). */
int modattn__ann_topk_batch(const modattn_ann *a, const modattn_store_vectors *v, const float *queries, size_t nq,
                           size_t k, const modattn_ann_params *search, const modattn_exec *exec, int64_t *ids,
                           float *scores, size_t *nout);

#ifdef __cplusplus
}
#endif
#endif
