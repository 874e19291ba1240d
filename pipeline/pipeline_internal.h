/* pipeline/pipeline_internal.h — what the pipeline/ files share; not a public header. */
#ifndef MODATTN_PIPELINE_INTERNAL_H
#define MODATTN_PIPELINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the UTF-8 character (or of the maximal subpart of an ill-formed sequence) at s,
 * len >= 1; *valid says which. */
size_t modattn__utf8_next(const unsigned char *s, size_t len, bool *valid);

/* Scan kernels: scores[i] = dot(mat + i*ld, q) over dim floats, for i in [0, n).
 * mat rows and q need no particular alignment. One per instruction set, each in its own file
 * compiled with that set's flags (scan_avx2.c, scan_avx512.c); call them only when
 * modattn_cpu_get() says the CPU has the set. */
typedef void (*modattn__scan_fn)(const float *mat, size_t n, size_t dim, size_t ld,
                                 const float *q, float *scores);
void modattn__scan_scalar(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                          float *scores);
#if defined(MODATTN_SCAN_X86)
void modattn__scan_avx2(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                        float *scores);
void modattn__scan_avx512(const float *mat, size_t n, size_t dim, size_t ld, const float *q,
                          float *scores);
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

#endif
