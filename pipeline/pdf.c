/* pipeline/pdf.c — the text of a PDF held in memory, page by page, through poppler (glib binding).
 * Pages are separated by a blank line and each page's first byte is marked with its number, so a
 * chunk can say which page it starts on. A damaged or encrypted file is an error for that file. */
#include <glib.h>
#include <poppler.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "core/internal_status.h"
#include "pipeline/pipeline_internal.h"

int modattn_extract_pdf(const char *pdf, size_t len, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    /* poppler only borrows the bytes: they outlive the document below */
    GBytes *bytes = g_bytes_new_static(pdf, len);
    GError *gerr = NULL;
    PopplerDocument *doc = poppler_document_new_from_bytes(bytes, NULL, &gerr);
    if (!doc) {
        int st = modattn__error(MODATTN_EFORMAT, "not a readable PDF: %s",
                               gerr && gerr->message ? gerr->message : "poppler refused it");
        if (gerr) g_error_free(gerr);
        g_bytes_unref(bytes);
        return st;
    }
    modattn__tbuf b;
    memset(&b, 0, sizeof b);
    int pages = poppler_document_get_n_pages(doc);
    for (int p = 0; p < pages && !b.err; p++) {
        PopplerPage *page = poppler_document_get_page(doc, p);
        if (!page) continue;
        char *t = poppler_page_get_text(page);
        if (t && *t) {
            if (b.n) modattn__tbuf_put(&b, "\n\n", 2);
            modattn__tbuf_mark(&b, p + 1);
            modattn__tbuf_put(&b, t, strlen(t));
        }
        g_free(t);
        g_object_unref(page);
    }
    g_object_unref(doc);
    g_bytes_unref(bytes);
    return modattn__tbuf_finish(&b, out, true);
}
