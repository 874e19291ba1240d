/* pipeline/text.c — document kinds (by name and by sniffing the first bytes), the document-text
 * record and its line/page lookup, and the growing buffer the extractors write into. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "pipeline/pipeline_internal.h"

const char *modattn_doc_kind_name(modattn_doc_kind k) {
    switch (k) {
    case MODATTN_DOC_BINARY: return "binary";
    case MODATTN_DOC_TEXT: return "text";
    case MODATTN_DOC_MARKDOWN: return "markdown";
    case MODATTN_DOC_HTML: return "html";
    case MODATTN_DOC_PDF: return "pdf";
    }
    return "unknown";
}

/* Text: no NUL, and control bytes plus bytes of ill-formed UTF-8 at most 10% of the sample. */
static bool looks_like_text(const unsigned char *h, size_t len) {
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = h[i];
        if (c == 0) return false;
        if (c < 0x80) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' &&
                c != 0x1b)
                bad++;
            else if (c == 0x7f)
                bad++;
            i++;
            continue;
        }
        bool ok;
        size_t k = modattn__utf8_next(h + i, len - i, &ok);
        /* a character cut by the end of the sample is not held against the file */
        if (!ok && i + k < len) bad += k;
        i += k;
    }
    return bad * 10 <= len;
}

static bool has_ext(const char *ext, const char *const *list) {
    for (; *list; list++)
        if (strcasecmp(ext, *list) == 0) return true;
    return false;
}

/* "<!doctype html" or "<html" after optional BOM and whitespace */
static bool starts_like_html(const unsigned char *h, size_t len) {
    size_t i = 0;
    if (len >= 3 && h[0] == 0xef && h[1] == 0xbb && h[2] == 0xbf) i = 3;
    while (i < len && isspace(h[i])) i++;
    static const char *const starts[] = {"<!doctype html", "<html", NULL};
    for (const char *const *s = starts; *s; s++) {
        size_t n = strlen(*s);
        if (len - i >= n && strncasecmp((const char *)h + i, *s, n) == 0) return true;
    }
    return false;
}

modattn_doc_kind modattn_sniff_kind(const char *name, const unsigned char *head, size_t len) {
    if (len > MODATTN_INGEST_SNIFF_BYTES) len = MODATTN_INGEST_SNIFF_BYTES;
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : (name ? name : "");
    const char *dot = strrchr(base, '.');
    const char *ext = dot && dot != base ? dot + 1 : "";
    static const char *const pdf[] = {"pdf", NULL};
    static const char *const html[] = {"html", "htm", "xhtml", NULL};
    static const char *const md[] = {"md", "markdown", "mdown", "mkd", NULL};
    if ((head && len >= 5 && memcmp(head, "%PDF-", 5) == 0) || has_ext(ext, pdf))
        return MODATTN_DOC_PDF;
    /* UTF-16 with a byte order mark: judge the decoded start of the text */
    char u8[8192 / 2 * 3 + 4];
    int bom = modattn_utf16_bom(head, len);
    if (bom) {
        size_t n = len - 2 > 8192 ? 8192 : len - 2;
        n = modattn__utf16_decode(head + 2, n, bom == 2, u8);
        head = (const unsigned char *)u8;
        len = n;
    }
    if (!head || !looks_like_text(head, len)) return MODATTN_DOC_BINARY;
    if (has_ext(ext, html)) return MODATTN_DOC_HTML;
    if (has_ext(ext, md)) return MODATTN_DOC_MARKDOWN;
    if (starts_like_html(head, len)) return MODATTN_DOC_HTML;
    return MODATTN_DOC_TEXT;
}

void modattn_doc_text_clear(modattn_doc_text *d) {
    if (!d) return;
    modattn_free(d->text);
    modattn_free(d->marks);
    memset(d, 0, sizeof *d);
}

int64_t modattn_doc_text_locate(const modattn_doc_text *d, size_t offset) {
    if (!d) return 0;
    if (!d->marks) {
        /* a text file: count the lines */
        if (!d->text) return 0;
        if (offset > d->len) offset = d->len;
        int64_t line = 1;
        const char *p = d->text, *end = d->text + offset;
        while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            line++;
            p++;
        }
        return line;
    }
    if (d->nmarks == 0 || offset < d->marks[0].offset) return d->nmarks ? d->marks[0].number : 0;
    size_t lo = 0, hi = d->nmarks; /* last mark with mark.offset <= offset */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->marks[mid].offset <= offset) lo = mid;
        else hi = mid;
    }
    return d->marks[lo].number;
}

/* ------------------------------------------------------------------ growing buffer */

static bool grow(void **p, size_t *cap, size_t need, size_t elem, int *err) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem) {
            *err = modattn_error(MODATTN_ENOMEM, "extracted text too large");
            return false;
        }
        nc *= 2;
    }
    void *n = modattn_realloc(*p, nc * elem, MODATTN_MEM_OTHER);
    if (!n) {
        *err = modattn_mem_last_status();
        return false;
    }
    *p = n;
    *cap = nc;
    return true;
}

void modattn__tbuf_put(modattn__tbuf *b, const char *s, size_t len) {
    if (b->err || len == 0) return;
    if (b->n + len + 1 < b->n) {
        b->err = modattn_error(MODATTN_ENOMEM, "extracted text too large");
        return;
    }
    if (!grow((void **)&b->p, &b->cap, b->n + len + 1, 1, &b->err)) return;
    memcpy(b->p + b->n, s, len);
    b->n += len;
}

void modattn__tbuf_mark(modattn__tbuf *b, int64_t number) {
    if (b->err) return;
    if (b->nmarks) {
        modattn_text_mark *last = &b->marks[b->nmarks - 1];
        if (last->number == number) return;
        if (last->offset == b->n) {
            last->number = number;
            return;
        }
    }
    if (!grow((void **)&b->marks, &b->mcap, b->nmarks + 1, sizeof *b->marks, &b->err)) return;
    b->marks[b->nmarks++] = (modattn_text_mark){b->n, number};
}

int modattn__tbuf_finish(modattn__tbuf *b, modattn_doc_text *d, bool pages) {
    memset(d, 0, sizeof *d);
    if (b->err) {
        int st = b->err;
        modattn__tbuf_free(b);
        return st;
    }
    if (!grow((void **)&b->p, &b->cap, b->n + 1, 1, &b->err)) {
        int st = b->err;
        modattn__tbuf_free(b);
        return st;
    }
    b->p[b->n] = '\0';
    d->text = b->p;
    d->len = b->n;
    d->marks = b->marks;
    d->nmarks = b->nmarks;
    d->pages = pages;
    if (!d->marks) {
        /* an empty mark table still means "not a text file": give it one entry */
        d->marks = modattn_malloc(sizeof *d->marks, MODATTN_MEM_OTHER);
        if (!d->marks) {
            modattn_free(d->text);
            memset(d, 0, sizeof *d);
            memset(b, 0, sizeof *b);
            return modattn_mem_last_status();
        }
        d->marks[0] = (modattn_text_mark){0, 1}; /* line 1 or page 1 */
        d->nmarks = 1;
    }
    memset(b, 0, sizeof *b);
    return 0;
}

void modattn__tbuf_free(modattn__tbuf *b) {
    modattn_free(b->p);
    modattn_free(b->marks);
    memset(b, 0, sizeof *b);
}
