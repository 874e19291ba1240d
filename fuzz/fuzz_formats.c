/* fuzz/fuzz_formats.c — arbitrary bytes through issue 40's extractors (pipeline/fmt_*.c): the
 * first byte picks DOCX, PPTX, XLSX, OpenDocument, EPUB, RTF, e-mail, mbox, compressed text or
 * the archive reader (list, then read every member), the rest is the file. Decompression is
 * capped at 4 MiB, so a bomb costs a refusal. Invariants of an accepted document: its text is
 * NUL-terminated without NUL bytes inside; its marks sorted, inside the text, numbers >= 1;
 * locating any offset gives >= 1. A refusal carries a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "pipeline/fmt_internal.h"

#define FUZZ_CHECK(c)                                                                     \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "fuzz_formats: invariant failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#define CAP ((size_t)4 << 20)

typedef struct ctx {
    const char *buf;
    size_t len;
    int members;
} ctx;

static int on_member(void *ud, const modattn_archive_member *m) {
    ctx *c = ud;
    FUZZ_CHECK(m->name != NULL && m->name[0] != '\0');
    if (c->members++ >= 8 || m->is_dir) return 0;
    char *out;
    size_t n;
    int st = modattn_archive_read(c->buf, c->len, m->name, CAP, &out, &n);
    if (st == 0) {
        FUZZ_CHECK(out[n] == '\0' && n <= CAP);
        modattn_free(out);
    } else {
        FUZZ_CHECK(modattn_last_error()[0] != '\0');
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const modattn_doc_kind kinds[] = {MODATTN_DOC_DOCX, MODATTN_DOC_PPTX,  MODATTN_DOC_XLSX,
                                             MODATTN_DOC_ODT,  MODATTN_DOC_EPUB,  MODATTN_DOC_RTF,
                                             MODATTN_DOC_EMAIL, MODATTN_DOC_MBOX, MODATTN_DOC_COMPRESSED};
    const size_t nk = sizeof kinds / sizeof *kinds;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    size_t pick = data[0] % (nk + 1);
    if (pick == nk) { /* the archive reader */
        ctx c = {buf, len, 0};
        int st = modattn_archive_list(buf, len, on_member, &c);
        if (st) FUZZ_CHECK(modattn_last_error()[0] != '\0');
        return 0;
    }
    modattn_doc_text d;
    int st = modattn__fmt_extract(kinds[pick], buf, len, CAP, &d);
    if (st) {
        FUZZ_CHECK(st == MODATTN_EFORMAT || st == MODATTN_ERANGE || st == MODATTN_ENOMEM || st == MODATTN_EBUDGET);
        FUZZ_CHECK(modattn_last_error()[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(d.text != NULL || d.len == 0);
    if (d.text) {
        FUZZ_CHECK(d.text[d.len] == '\0');
        /* decompressed text is the file's bytes as a text file's are (NUL past the sniffed head kept) */
        if (kinds[pick] != MODATTN_DOC_COMPRESSED) FUZZ_CHECK(memchr(d.text, '\0', d.len) == NULL);
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
