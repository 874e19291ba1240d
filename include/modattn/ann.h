/* modattn/ann.h — approximate nearest-neighbour search through FAISS, beside the exact scan.
 *
 * The store stays the source of truth and the vector file (store.h) its flat copy; an ANN index
 * is derived from the vector file: PATH.ann beside the store at PATH, one FAISS index over the
 * vector file's rows in their order (FAISS's label of a row is its row number), built by
 * `modattn index --ann KIND` and kept up to date by every later `index`:
 *   - rows appended to the vector file are added to the index (HNSW and IVF both take additions;
 *     an IVF index is trained again once the rows are 4 times those it was trained on);
 *   - rows of removed chunks stay in the index, and searches leave them out by the vector file's
 *     mask (so a deleted document never comes back); when the vector file is compacted (rewritten:
 *     a quarter of its rows removed) the index is built again;
 *   - a change of the store that leaves the rows as they are (a deletion) rewrites the header.
 * File layout (version 1, little-endian): a 4096-byte header (magic "MODATTNA", the kind and its
 * parameters, dimension, the model's name and weights hash, the store's generation, the vector
 * file's segments it covers {rows, XXH3 of their chunk ids, XXH3 of their vectors}, the bytes
 * and XXH3 of FAISS's serialisation that follows, an XXH3 of the header), then FAISS's bytes; for
 * the compact kinds (f16, int8, binary: no FAISS) the rows' codes in row order instead (and, for
 * int8, their scales after them: pipeline/ann_flat.h), mapped and searched in place, their bytes not
 * checksummed at open (a damaged code costs recall, never a wrong score: candidates are re-scored).
 * Written whole into a temporary file, fsynced, renamed over the old one, the folder fsynced.
 * A search uses it only when it is for exactly the vectors being searched (same generation, same
 * segments) and every checksum holds; else the search scans exactly and says why. A missing,
 * truncated, damaged, foreign or stale index is never used for an answer.
 *
 * Scores are the exact scan's bit for bit and only recall is approximate: an HNSW graph is walked
 * by modattn (pipeline/ann_hnsw.c) scoring rows with the scan's own kernel; an IVF index's
 * candidates are scored again against the float vectors. */
#ifndef MODATTN_ANN_H
#define MODATTN_ANN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "modattn/types.h" /* modattn_exec */
#include "modattn/status.h"
#include "modattn/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum modattn_ann_kind {
    MODATTN_ANN_NONE = 0,
    MODATTN_ANN_HNSW,    /* graph (FAISS IndexHNSWFlat): best recall per query time; 4 bytes x dim
                          * + ~8 x M bytes per vector */
    MODATTN_ANN_IVF_SQ8, /* inverted lists of 8-bit scalar-quantised vectors: dim bytes per vector */
    MODATTN_ANN_IVF_PQ,  /* inverted lists of product-quantised codes: pq_m x pq_nbits / 8 bytes */
    /* Compact copies of every row, scanned whole (no FAISS needed); each query's best `rescore`
     * rows by the copy are scored again exactly against the float vectors (pipeline/ann_flat.h): */
    MODATTN_ANN_F16,     /* IEEE half floats: 2 x dim bytes per vector */
    MODATTN_ANN_INT8,    /* int8 with a scale per vector: dim + 4 bytes */
    MODATTN_ANN_BINARY,  /* sign bits, ranked by Hamming distance: dim / 8 bytes */
} modattn_ann_kind;
/* "none", "hnsw", "ivf-sq8", "ivf-pq", "f16", "int8", "binary". */
const char *modattn_ann_kind_name(modattn_ann_kind k);
/* MODATTN_EINVAL with a message listing the kinds for anything else. */
int modattn_ann_kind_parse(const char *name, modattn_ann_kind *out);
/* 0 when this build can build and search an index of kind k; MODATTN_EUNSUPPORTED with a message
 * saying how to get it (a FAISS kind in a build without FAISS). */
int modattn_ann_kind_available(modattn_ann_kind k);

/* 0 when this build has FAISS; MODATTN_EUNSUPPORTED with a message saying how to get it. */
int modattn_ann_available(void);
/* FAISS's version ("1.7.3"), or NULL in a build without it. */
const char *modattn_ann_faiss_version(void);

/* Parameters, named as FAISS names them; 0 means the default (resolved for the store's rows when
 * the index is built: modattn__ann_resolve). */
typedef struct modattn_ann_params {
    /* building */
    int M;               /* hnsw: links per node, 4..128 (32) */
    int ef_construction; /* hnsw: the build's beam, 8..2048 (40) */
    int nlist;           /* ivf: cells, 1..65536, at most rows / 39 (about sqrt(rows)) */
    int pq_m;            /* ivf-pq: sub-vectors, dividing dim (dim / 8) */
    int pq_nbits;        /* ivf-pq: bits per sub-vector code, 1..12 (8, fewer below 10k rows) */
    /* searching (the index keeps those it was built with; a search may give its own) */
    int ef_search;       /* hnsw: the search's beam, 1..32768 (64) */
    int nprobe;          /* ivf: cells visited, 1..nlist (nlist / 16, at least 8) */
    int rescore;         /* ivf: candidates scored again exactly per query, at least k,
                          * 1..1000000 (8k, at least 100); hnsw: the beam is at least this wide
                          * (its walk scores every row exactly already); f16: (2k, at least k + 16);
                          * int8: (4k, at least k + 32); binary: (100k, at least 1000) */
} modattn_ann_params;

/* Parses "M=32,efConstruction=200,efSearch=128,nlist=1024,nprobe=16,m=48,nbits=8,rescore=100"
 * (names are FAISS's, case-sensitive: M, efConstruction, efSearch, nlist, nprobe, m or pq_m,
 * nbits or pq_nbits, rescore) into p, over what p holds already. An unknown name, a value out of
 * its range (above) or malformed text: MODATTN_EINVAL naming the parameter and its range. */
int modattn_ann_params_parse(const char *text, modattn_ann_params *p);
/* "M=32,efConstruction=40,efSearch=64" for the parameters that apply to kind (0s left out). */
void modattn_ann_params_format(modattn_ann_kind kind, const modattn_ann_params *p, char *buf, size_t len);


typedef enum modattn_ann_action {
    MODATTN_ANN_ACTION_NONE,    /* there is no index, and none was asked for */
    MODATTN_ANN_ACTION_CURRENT, /* it was current (or only its header needed the new generation) */
    MODATTN_ANN_ACTION_ADDED,   /* rows_added rows added to it */
    MODATTN_ANN_ACTION_BUILT,   /* built whole; reason says why */
    MODATTN_ANN_ACTION_REMOVED, /* removed (kind "none" asked for) */
} modattn_ann_action;
typedef struct modattn_ann_update {
    modattn_ann_action action;
    modattn_ann_kind kind;
    modattn_ann_params params; /* as built */
    size_t rows, rows_added;
    uint64_t file_bytes;
    double seconds;
    char reason[320];
} modattn_ann_update;

/* Brings the store's ANN index up to date with its vectors (above). kind NONE with params NULL:
 * the index there is kept up to date (none there: nothing); kind NONE with `remove`: the file is
 * removed; another kind: that index is built (or kept, and added to, when the one there is of
 * that kind and its build parameters equal p's resolved ones; p NULL: the ones there, or the
 * defaults). progress (may be NULL) is told phase ("train", "add", "write"), done and total.
 * exec: threads for FAISS (NULL: 1). The store must be open for writing. */
int modattn_store_update_ann(modattn_store *s, modattn_ann_kind kind, const modattn_ann_params *p, bool remove,
                             const modattn_exec *exec,
                             void (*progress)(void *ud, const char *phase, size_t done, size_t total), void *ud,
                             modattn_ann_update *u);

/* An ANN index open for searching, by one thread at a time (FAISS's search parameters are set on
 * the index for each call). */
typedef struct modattn_ann modattn_ann;


#ifdef __cplusplus
}
#endif
#endif
