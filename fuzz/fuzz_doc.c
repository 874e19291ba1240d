/* fuzz/fuzz_doc.c — arbitrary bytes through the Word 97-2003 reader (pipeline/fmt_doc.c). The
 * first byte picks: odd, the rest is a whole .doc (libgsf's OLE2 container, then the reader);
 * even, the rest is cut in two at a point the next two bytes give, a WordDocument stream and a
 * table stream handed straight to modattn__doc_text (the FIB and piece-table checks without the
 * container in the way). Text is capped at 4 MiB. Invariants: a refusal is EFORMAT or ERANGE (or
 * out of memory) with a message; accepted text is NUL-terminated without NUL bytes inside, its
 * marks sorted, inside the text, numbers >= 1. Seed corpus: fuzz/corpus/doc/ (the fixtures). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "pipeline/fmt_internal.h"

#define FUZZ_CHECK(c)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "fuzz_doc: invariant failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

#define CAP ((size_t)4 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    modattn_doc_text d;
    int st;
    if (data[0] & 1) {
        st = modattn__fmt_extract(MODATTN_DOC_DOC, (const char *)data + 1, size - 1, CAP, &d);
    } else {
        if (size < 3) return 0;
        size_t rest = size - 3, cut = ((size_t)data[1] | (size_t)data[2] << 8) * 4;
        if (cut > rest) cut = rest;
        const unsigned char *wd = data + 3, *t = data + 3 + cut;
        st = modattn__doc_text(wd, cut, t, rest - cut, t, rest - cut, CAP, &d);
    }
    if (st) {
        FUZZ_CHECK(st == MODATTN_EFORMAT || st == MODATTN_ERANGE || st == MODATTN_ENOMEM || st == MODATTN_EBUDGET);
        FUZZ_CHECK(modattn_last_error()[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(d.text != NULL && d.text[d.len] == '\0' && memchr(d.text, '\0', d.len) == NULL);
    FUZZ_CHECK(d.len <= CAP + 8);
    for (size_t i = 0; i < d.nmarks; i++) {
        FUZZ_CHECK(d.marks[i].offset <= d.len && d.marks[i].number >= 1);
        if (i) FUZZ_CHECK(d.marks[i].offset >= d.marks[i - 1].offset);
    }
    modattn_doc_text_clear(&d);
    return 0;
}
