/* fuzz/fuzz_html.c — arbitrary bytes through the HTML text extractor (libxml2's HTML parser and
 * our walk over its tree). Invariants of an accepted document: its text is NUL-terminated, valid
 * without NUL bytes; its marks are sorted by offset, inside the text, with line numbers >= 1;
 * locating any offset gives a line >= 1. A refusal must carry a message. (Ill-formed UTF-8 in
 * the text is allowed: the indexer replaces it, as for text files.) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"

#define FUZZ_CHECK(c)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "fuzz_html: invariant failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    modattn_doc_text d;
    int st = modattn_extract_html((const char *)data, size, &d);
    if (st) {
        FUZZ_CHECK(st == MODATTN_EFORMAT || st == MODATTN_ENOMEM || st == MODATTN_EBUDGET);
        FUZZ_CHECK(modattn_last_error()[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(d.text != NULL || d.len == 0);
    if (d.text) {
        FUZZ_CHECK(d.text[d.len] == '\0');
        FUZZ_CHECK(memchr(d.text, '\0', d.len) == NULL);
    }
    FUZZ_CHECK(!d.pages);
    for (size_t i = 0; i < d.nmarks; i++) {
        FUZZ_CHECK(d.marks[i].offset <= d.len);
        FUZZ_CHECK(d.marks[i].number >= 1);
        if (i) FUZZ_CHECK(d.marks[i].offset >= d.marks[i - 1].offset);
    }
    for (size_t o = 0; o < d.len; o += 1 + d.len / 7) FUZZ_CHECK(modattn_doc_text_locate(&d, o) >= 1);
    modattn_doc_text_clear(&d);
    return 0;
}
