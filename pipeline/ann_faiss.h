/* pipeline/ann_faiss.h — the few FAISS calls modattn makes, as C (pipeline/ann_faiss.cpp).
 *
 * Why a bridge of our own: Debian's libfaiss-dev ships FAISS's C API headers but not their
 * implementation (libfaiss.a holds the C++ library only), so these ~10 calls are made from C++
 * here. Every call catches what FAISS throws and returns a modattn status (never throws, never
 * aborts) with FAISS's message in msg. Not a public header; built only when FAISS is found
 * (MODATTN_HAVE_FAISS). */
#ifndef MODATTN_ANN_FAISS_H
#define MODATTN_ANN_FAISS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modattn__faiss modattn__faiss;

/* Our dot-product kernel (pipeline_internal.h's modattn__scan_fn: scores[i] = dot(mat + i*ld, q)).
 * Debian builds FAISS for baseline x86-64, where its distance loops run without SIMD (HNSW built
 * 100k rows of 384 floats in 448 s here); an HNSW index's flat storage computes its distances
 * with this kernel instead (create and read take it). */
typedef void (*modattn__faiss_dot)(const float *mat, size_t n, size_t dim, size_t ld, const float *q, float *scores);

/* A new, empty index from FAISS's factory string (inner-product metric), e.g. "HNSW32,Flat",
 * "IVF1024,SQ8", "IVF1024,PQ48x8"; ef_construction > 0 sets HNSW's build-time beam. */
int modattn__faiss_create(const char *factory, size_t dim, int ef_construction, modattn__faiss_dot dot,
                          modattn__faiss **out, char *msg, size_t len);
bool modattn__faiss_is_trained(const modattn__faiss *f);
/* Train on n rows (IVF's coarse centroids and the SQ/PQ codebooks; HNSW needs none). threads: the
 * OpenMP threads for this call only (the caller's setting is restored). */
int modattn__faiss_train(modattn__faiss *f, size_t n, const float *x, int threads, char *msg, size_t len);
/* Appends n rows; their labels are ntotal, ntotal + 1, ... */
int modattn__faiss_add(modattn__faiss *f, size_t n, const float *x, int threads, char *msg, size_t len);
/* The k best labels per query (dist: inner products, best first; label -1 past the end).
 * ef_search (HNSW) and nprobe (IVF), when > 0, are set on the index for this call and the next
 * (FAISS 1.7.3's HNSW reads its own field only); 0 keeps what it has. One thread at a time. */
int modattn__faiss_search(modattn__faiss *f, size_t nq, const float *q, size_t k, int ef_search,
                          int nprobe, int threads, float *dist, int64_t *labels, char *msg, size_t len);
size_t modattn__faiss_ntotal(const modattn__faiss *f);
/* FAISS's serialisation, handed to put(ud, bytes, n) piece by piece (put returns 0 to go on). */
int modattn__faiss_write(const modattn__faiss *f, int (*put)(void *ud, const void *p, size_t n), void *ud,
                         char *msg, size_t len);
/* An index from FAISS's serialisation in memory (buf, size): a truncated or foreign one fails. */
int modattn__faiss_read(const void *buf, size_t size, modattn__faiss_dot dot, modattn__faiss **out, char *msg,
                        size_t len);
void modattn__faiss_free(modattn__faiss *f); /* NULL is fine */
/* An HNSW index's graph and rows as FAISS holds them, for modattn's own search over them
 * (pipeline/ann_hnsw.c): the pointers live as long as the index and are not written to. */
typedef struct modattn__hnsw_view {
    size_t n;                 /* nodes = rows */
    const int32_t *levels;    /* [n]: 1 + the top level of node i */
    const size_t *offsets;    /* [n + 1]: node i's neighbour lists start at offsets[i] */
    const int32_t *neighbors; /* [offsets[n]]: -1 ends a level's list early */
    const int32_t *cum;       /* [ncum]: level l's list is [offsets[i] + cum[l], offsets[i] + cum[l + 1]) */
    size_t ncum;
    int32_t entry;            /* the entry point (-1: empty) */
    int max_level;
    const float *x;           /* [n, d] rows, contiguous */
    size_t d;
} modattn__hnsw_view;
/* 1 with *out for an HNSW index over flat float rows, else 0. */
int modattn__faiss_hnsw_view(const modattn__faiss *f, modattn__hnsw_view *out);
/* FAISS's version, "1.7.3". */
const char *modattn__faiss_version(void);

#ifdef __cplusplus
}
#endif
#endif
