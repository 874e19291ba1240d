/* pipeline/ann_flat.h — compact copies of the vectors (float16, int8 with a scale per row, sign
 * bits) and the scan over them that picks each query's candidates, which ann.c then scores again
 * exactly against the float vectors (pipeline/ann_flat.c). Not a public header.
 *
 * Codes, row after row, `stride` bytes apart (a multiple of 8; the file's rows start 4096-aligned):
 *   f16:    dim IEEE half floats, rounded to nearest even (the same bits on every machine: the
 *           encoder is scalar C);
 *   int8:   dim int8 codes c with x ~ c * scale, scale = max |x| / 127 per row; the scales follow
 *           all the rows' codes, one float per row;
 *   binary: ceil(dim / 64) little-endian 64-bit words, bit i of word w set when x[64w + i] > 0.
 * The candidates' order is the code's own score: dot(q, decoded row) for f16 and int8, and
 * dim - 2 x Hamming(sign bits of q, codes) for binary. */
#ifndef MODATTN_ANN_FLAT_H
#define MODATTN_ANN_FLAT_H

#include <stddef.h>
#include <stdint.h>

#include "modattn/backend/impl.h"
#include "modattn/search.h"

typedef enum modattn__flat_code { MODATTN__FLAT_F16 = 1, MODATTN__FLAT_INT8, MODATTN__FLAT_BINARY } modattn__flat_code;

/* Bytes between rows' codes. */
size_t modattn__flat_stride(modattn__flat_code c, size_t dim);
/* Bytes of the codes of rows rows (and their scales, for int8). */
uint64_t modattn__flat_bytes(modattn__flat_code c, size_t dim, uint64_t rows);
/* Codes of n rows of x (ld floats apart) into codes (stride apart); for int8 the rows' scales
 * into scales. */
void modattn__flat_encode(modattn__flat_code c, const float *x, size_t n, size_t dim, size_t ld, unsigned char *codes,
                          float *scales);
uint16_t modattn__f32_to_f16(float f);
float modattn__f16_to_f32(uint16_t h);

/* For each of nq queries ([nq, dim], normalised), its best `fetch` rows among rows rows of codes
 * by the code's score, rows whose bit is set in mask (NULL: none) left out: out[q * fetch ...]
 * best first (ties: lower row), nout[q] of them. Rows are split over exec's threads in blocks and
 * the heaps merged, so the answer does not depend on the thread count. */
int modattn__flat_candidates(modattn__flat_code c, const unsigned char *codes, const float *scales, size_t rows,
                             size_t dim, const uint8_t *mask, const float *queries, size_t nq, size_t fetch,
                             const modattn_exec *exec, modattn_hit *out, size_t *nout);

/* One block's scores: out[i] = the code's score of row i for query q (f16, int8: q is dim floats;
 * binary: q is the query's sign bits, stride bytes). */
typedef void (*modattn__flat_fn)(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                                 const void *q, float *out);
void modattn__flat_f16_avx2(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                            const void *q, float *out);
void modattn__flat_int8_avx2(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                             const void *q, float *out);
/* n rows' codes decoded to floats (f16: exact; int8: code x scale) into out [n, dim]. */
typedef void (*modattn__flat_decode_fn)(const unsigned char *codes, size_t stride, const float *scales, size_t n,
                                        size_t dim, float *out);
void modattn__flat_decode_avx2(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                               float *out);
void modattn__flat_binary_popcnt(const unsigned char *codes, size_t stride, const float *scales, size_t n, size_t dim,
                                 const void *q, float *out);

#endif
