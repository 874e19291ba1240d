/* fuzz/fuzz_pdf.c — arbitrary bytes through the PDF text extractor (poppler, page by page).
 * Invariants of an accepted document: NUL-terminated text without NUL bytes, page marks sorted,
 * inside the text, numbered from 1 and rising; locating any offset gives a page >= 1 when there
 * are marks. A refusal (damaged, encrypted, not a PDF) must carry a message. poppler reports
 * every syntax error it recovers from on stderr: `make fuzz` runs this one with -close_fd_mask=2. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"

#define FUZZ_CHECK(c)                                                                 \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "fuzz_pdf: invariant failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    modattn_doc_text d;
    int st = modattn_extract_pdf((const char *)data, size, &d);
    if (st) {
        FUZZ_CHECK(st == MODATTN_EFORMAT || st == MODATTN_ENOMEM || st == MODATTN_EBUDGET);
        FUZZ_CHECK(modattn_last_error()[0] != '\0');
        return 0;
    }
    if (d.text) {
        FUZZ_CHECK(d.text[d.len] == '\0');
        FUZZ_CHECK(strlen(d.text) <= d.len);
    }
    FUZZ_CHECK(d.pages || d.nmarks == 0);
    for (size_t i = 0; i < d.nmarks; i++) {
        FUZZ_CHECK(d.marks[i].offset <= d.len);
        FUZZ_CHECK(d.marks[i].number >= 1);
        if (i) {
            FUZZ_CHECK(d.marks[i].offset >= d.marks[i - 1].offset);
            FUZZ_CHECK(d.marks[i].number > d.marks[i - 1].number);
        }
    }
    if (d.nmarks)
        for (size_t o = 0; o < d.len; o += 1 + d.len / 7) FUZZ_CHECK(modattn_doc_text_locate(&d, o) >= 1);
    modattn_doc_text_clear(&d);
    return 0;
}
