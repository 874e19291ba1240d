/* pipeline/ann_internal.h — what the ANN index's files share (not a public header): the file's
 * header as it lies on disk, the open index, and the file's reading and checking (ann_file.c).
 * The index's jobs, one a file: parameters and kinds (ann_params.c), the file (ann_file.c),
 * opening and searching (ann_search.c), building and updating (ann_build.c); FAISS behind
 * ann_faiss.h, the compact kinds' codes in ann_flat.c, the HNSW walk in ann_hnsw.c. Layout and
 * rules: modattn/ann.h. */
#ifndef MODATTN_PIPELINE_ANN_INTERNAL_H
#define MODATTN_PIPELINE_ANN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modattn/ann.h"
#include "modattn/store.h"
#include "pipeline/ann_flat.h"
#include "pipeline/pipeline_internal.h"
#include "pipeline/sidecar.h"
#if MODATTN_HAVE_FAISS
#include "pipeline/ann_faiss.h"
#include "pipeline/ann_hnsw.h"
#endif
#define ANN_MAGIC "MODATTNA"
#define ANN_VERSION 1u
#define ANN_HEADER 4096u
#define ANN_MAX_SEG MODATTN_VEC_MAX_SEGMENTS

typedef struct ann_seg {
    uint64_t n, ids_xxh3, data_xxh3;
} ann_seg;

/* The header as it lies at offset 0 (fixed-width fields, no padding holes). */
typedef struct ann_header {
    char magic[8];
    uint32_t version, header_bytes, dim, kind;
    int32_t M, ef_construction, nlist, pq_m, pq_nbits, ef_search, nprobe, rescore;
    uint32_t nseg, reserved;
    uint64_t generation, rows, trained_rows, payload_bytes, payload_xxh3;
    double build_seconds;
    char model_name[128];
    char weights_hash[24];
    char faiss_version[16];
    ann_seg seg[ANN_MAX_SEG];
    uint64_t header_xxh3; /* of the 4096 header bytes with this field zero */
} ann_header;
_Static_assert(sizeof(ann_header) <= ANN_HEADER, "the ANN header fits its page");

struct modattn_ann {
#if MODATTN_HAVE_FAISS
    modattn__faiss *f;
    modattn__hnsw_view g;            /* HNSW: the graph our walk searches (ann_hnsw.c) */
    bool walk;
    modattn__dot1_fn dot;
    modattn__hnsw_scratch *scratch;  /* one per thread of the last exec */
    int nscratch;
#endif
    ann_header h;
    int64_t accounted;
    void *map;                   /* a compact kind's file, mapped: its codes are searched in place */
    size_t map_bytes;
};
_Static_assert(ANN_HEADER == MODATTN__SIDECAR_PAGE, "the ANN header is one sidecar page");

/* The compact kinds (searched in place by their codes: ann_flat.c) and their code. */
static inline bool ann_is_flat(uint32_t kind) {
    return kind == MODATTN_ANN_F16 || kind == MODATTN_ANN_INT8 || kind == MODATTN_ANN_BINARY;
}
static inline modattn__flat_code ann_flat_code(uint32_t kind) {
    return kind == MODATTN_ANN_F16 ? MODATTN__FLAT_F16 : kind == MODATTN_ANN_INT8 ? MODATTN__FLAT_INT8 : MODATTN__FLAT_BINARY;
}

static inline void ann_params_of(const ann_header *h, modattn_ann_params *p) {
    *p = (modattn_ann_params){h->M, h->ef_construction, h->nlist, h->pq_m, h->pq_nbits, h->ef_search, h->nprobe,
                              h->rescore};
}

/* row number -> its segment's row pointer and chunk id (NULL past the end) */
static inline const float *ann_row_at(const modattn_store_vectors *v, size_t row, int64_t *id) {
    for (size_t g = 0; g < v->nseg; g++) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        if (row >= sg->row0 && row < sg->row0 + sg->n) {
            *id = sg->chunk_ids[row - sg->row0];
            return sg->data + (row - sg->row0) * v->ld;
        }
    }
    return NULL;
}

/* ---- the file (ann_file.c) */

/* The header sealed (its checksum) into a zeroed 4096-byte page. */
void modattn__ann_seal(const ann_header *h, unsigned char *page);
/* The header's own consistency and its fit to a file of size bytes: "" when it holds. */
void modattn__ann_check_header(const unsigned char *page, uint64_t size, ann_header *h, char *bad, size_t len);
/* The identity of v's segments: rows and XXH3 of their chunk ids (and with data, of their rows). */
void modattn__ann_segments_of(const modattn_store_vectors *v, bool data, ann_seg *seg);
/* Whether the header is for exactly the vectors v of the store's model: "" when it is. */
void modattn__ann_check_fit(const ann_header *h, const modattn_store_vectors *v, const ann_seg *seg, const char *model,
                            const char *hash, char *why, size_t len);

typedef struct ann_file {
    void *map;
    size_t bytes;
    ann_header h;
} ann_file;
/* Maps PATH.ann and checks it whole (header, size, payload checksum; a compact kind's payload
 * only with `payload`): 1 valid, 0 missing (why "") or not valid (why), < 0 an error. */
int modattn__ann_map_file(const char *path, ann_file *f, bool payload, char *why, size_t len);
void modattn__ann_unmap_file(ann_file *f);

#endif
