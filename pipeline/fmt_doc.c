/* pipeline/fmt_doc.c — the text of a legacy Word 97–2003 document (.doc). The container is an OLE2
 * compound file, opened with libgsf (libgsf-1-dev) in memory; the Word binary text is read here,
 * by [MS-DOC]: the FIB at the start of the WordDocument stream (wIdent 0xA5EC, nFib, fEncrypted,
 * fWhichTblStm, ccpText, fcClx/lcbClx — §2.5), the Clx in the 0Table or 1Table stream it names
 * (Prc records skipped, then the Pcdt and its PlcPcd piece table — §2.9.38, §2.9.178), and each
 * piece's characters: 8-bit "compressed" (Windows-1252's byte values with [MS-DOC] §2.4.1's
 * special cases 0x82..0x9F) or UTF-16LE, written as UTF-8. Only the main document's text (CPs
 * [0, ccpText)) is read: footnotes, headers and text boxes come after it and are not.
 *
 * Characters: a paragraph mark (0x0D) ends a paragraph (a new position mark); 0x0B (line break),
 * 0x0C (page/section break) and 0x0E (column break) break lines; a cell mark (0x07) is a tab, and
 * the row-end mark that directly follows a row's last cell mark ends the line (an empty cell, which
 * also shows as two 0x07 in a row, does too: the piece table alone cannot tell them apart); fields
 * (0x13 code 0x14 result 0x15, nested) keep their result and drop their code; 0x1E (non-breaking
 * hyphen) is '-', 0xA0 a space; the other control characters (pictures, footnote references,
 * optional hyphens, C1 controls) are dropped.
 *
 * Every length and offset is checked against the stream that holds it: a damaged file is a
 * refusal that says what is wrong (MODATTN_EFORMAT), an encrypted one is refused as such, and the
 * text written is bounded by `cap` (MODATTN_ERANGE: pieces may point at the same bytes again and
 * again). Streams are read whole into memory, each at most the file's own size. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsf/gsf-infile-msole.h>
#include <gsf/gsf-infile.h>
#include <gsf/gsf-input-memory.h>
#include <gsf/gsf-input.h>
#include <gsf/gsf-utils.h>

#include "modattn/core.h"
#include "core/internal_status.h"
#include "pipeline/fmt_internal.h"

#define DOC_MAX_FIELD_DEPTH 64

static uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }

/* [MS-DOC] §2.4.1: the bytes of a compressed piece that are not their own code point */
static uint32_t compressed_cp(unsigned char c) {
    static const struct {
        unsigned char b;
        uint16_t u;
    } k[] = {{0x82, 0x201A}, {0x83, 0x0192}, {0x84, 0x201E}, {0x85, 0x2026}, {0x86, 0x2020}, {0x87, 0x2021},
             {0x88, 0x02C6}, {0x89, 0x2030}, {0x8A, 0x0160}, {0x8B, 0x2039}, {0x8C, 0x0152}, {0x91, 0x2018},
             {0x92, 0x2019}, {0x93, 0x201C}, {0x94, 0x201D}, {0x95, 0x2022}, {0x96, 0x2013}, {0x97, 0x2014},
             {0x98, 0x02DC}, {0x99, 0x2122}, {0x9A, 0x0161}, {0x9B, 0x203A}, {0x9C, 0x0153}, {0x9F, 0x0178}};
    if (c >= 0x82 && c <= 0x9F)
        for (size_t i = 0; i < sizeof k / sizeof *k; i++)
            if (k[i].b == c) return k[i].u;
    return c;
}

typedef struct doc_reader {
    modattn__textw w;
    int64_t para;
    bool field_code[DOC_MAX_FIELD_DEPTH]; /* per open field: still in its code (before 0x14) */
    int depth;
    bool after_cell; /* the last character was a cell mark: a tab is owed, or a row end comes */
    int64_t owed;    /* paragraphs ended and not yet started: a newline and a mark owed before text */
    size_t cap;
} doc_reader;

static void new_para(doc_reader *r) { r->owed++; }

/* Before text: the line break and position mark of the paragraphs ended since (none at the end) */
static void start_text(doc_reader *r) {
    if (!r->owed) return;
    modattn__textw_sep(&r->w, 2);
    r->para += r->owed;
    r->owed = 0;
    modattn__textw_mark(&r->w, r->para);
}

/* One character of the main document (a code point, surrogates already paired). */
static int doc_char(doc_reader *r, uint32_t c) {
    if (c == 0x13) { /* field begin: its code follows */
        if (r->depth >= DOC_MAX_FIELD_DEPTH)
            return modattn__error(MODATTN_EFORMAT, "damaged Word document: fields nested deeper than %d",
                                  DOC_MAX_FIELD_DEPTH);
        r->field_code[r->depth++] = true;
        return 0;
    }
    if (c == 0x14) { /* field separator: its result follows */
        if (r->depth) r->field_code[r->depth - 1] = false;
        return 0;
    }
    if (c == 0x15) { /* field end (one that ends no field is ignored) */
        if (r->depth) r->depth--;
        return 0;
    }
    for (int i = 0; i < r->depth; i++)
        if (r->field_code[i]) return 0; /* inside a field's code */
    if (r->after_cell) {
        r->after_cell = false;
        if (c == 0x07) { /* the row-end mark after the row's last cell */
            new_para(r);
            return 0;
        }
        start_text(r);
        modattn__textw_raw(&r->w, "\t", 1);
    }
    switch (c) {
    case 0x0D: new_para(r); return 0;
    case 0x07: r->after_cell = true; return 0;
    case 0x0B:
    case 0x0C:
    case 0x0E: modattn__textw_sep(&r->w, 2); return 0;
    case 0x09: start_text(r), modattn__textw_raw(&r->w, "\t", 1); return 0;
    case 0x1E: start_text(r), modattn__textw_put(&r->w, "-", 1); return 0;
    case 0xA0: modattn__textw_put(&r->w, " ", 1); return 0;
    default: break;
    }
    if (c < 0x20 || (c >= 0x7F && c < 0xA0) || c == 0xFEFF) return 0; /* special characters */
    start_text(r);
    modattn__textw_cp(&r->w, c);
    return 0;
}

/* The characters [from, to) of one piece, held at byte fc of the WordDocument stream. */
static int doc_piece(doc_reader *r, const unsigned char *wd, size_t wd_len, uint32_t fc_raw, uint32_t from,
                     uint32_t to, size_t piece) {
    bool compressed = (fc_raw >> 30) & 1;
    uint64_t fc = fc_raw & 0x3FFFFFFFu;
    uint64_t n = to - from;
    if (compressed) fc /= 2;
    uint64_t bytes = compressed ? n : 2 * n;
    if (fc > wd_len || bytes > wd_len - fc)
        return modattn__error(MODATTN_EFORMAT,
                              "damaged Word document: piece %zu (%llu characters at byte %llu) runs past the end "
                              "of the WordDocument stream (%zu bytes)",
                              piece, (unsigned long long)n, (unsigned long long)fc, wd_len);
    const unsigned char *p = wd + fc;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t c;
        if (compressed) c = compressed_cp(p[i]);
        else {
            c = rd16(p + 2 * i);
            if (c >= 0xD800 && c < 0xDC00 && i + 1 < n) {
                uint32_t lo = rd16(p + 2 * i + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                    i++;
                }
            }
        }
        int st = doc_char(r, c);
        if (st) return st;
        if (r->w.b.err) return r->w.b.err;
        if (r->w.b.n > r->cap)
            return modattn__error(MODATTN_ERANGE,
                                  "a Word document whose text passes %zu bytes (--max-file-size): not read", r->cap);
    }
    return 0;
}

int modattn__doc_text(const unsigned char *wd, size_t wd_len, const unsigned char *t0, size_t t0_len,
                      const unsigned char *t1, size_t t1_len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    /* FibBase (32 bytes), csw + FibRgW97, cslw + FibRgLw97, cbRgFcLcb + the fc/lcb pairs */
    if (wd_len < 34)
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: the WordDocument stream (%zu bytes) is too "
                                               "short for a FIB", wd_len);
    uint32_t ident = rd16(wd), nfib = rd16(wd + 2), flags = rd16(wd + 0x0A);
    if (ident != 0xA5EC)
        return modattn__error(MODATTN_EFORMAT,
                              "not a Word document: the WordDocument stream starts with 0x%04X, not the FIB's 0xA5EC",
                              ident);
    if (flags & 0x0100)
        return modattn__error(MODATTN_EFORMAT, "an encrypted (password-protected) Word document: not read");
    if (nfib < 0x00C0)
        return modattn__error(MODATTN_EFORMAT,
                              "a Word 6.0/95 document (nFib %u): not read (only Word 97-2003 documents are)", nfib);
    size_t o = 32;
    uint32_t csw = rd16(wd + o);
    o += 2 + 2 * (size_t)csw;
    if (o + 2 > wd_len) return modattn__error(MODATTN_EFORMAT, "damaged Word document: the FIB is cut short (csw %u)", csw);
    uint32_t cslw = rd16(wd + o);
    o += 2;
    size_t lw = o;
    o += 4 * (size_t)cslw;
    if (cslw < 4 || o + 2 > wd_len)
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: the FIB's FibRgLw is cut short (cslw %u)", cslw);
    uint32_t ccp_text = rd32(wd + lw + 12);
    uint32_t cb_fclcb = rd16(wd + o);
    o += 2;
    size_t fclcb = o;
    if (cb_fclcb < 34 || fclcb + 8 * (size_t)cb_fclcb > wd_len)
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: the FIB's fc/lcb table is cut short (%u pairs)",
                              cb_fclcb);
    uint32_t fc_clx = rd32(wd + fclcb + 33 * 8), lcb_clx = rd32(wd + fclcb + 33 * 8 + 4);
    bool one = (flags & 0x0200) != 0;
    size_t tlen = one ? t1_len : t0_len;
    const unsigned char *tbl = one ? t1 : t0;
    if (!tbl) return modattn__error(MODATTN_EFORMAT, "damaged Word document: no %s stream", one ? "1Table" : "0Table");
    if (lcb_clx == 0 || fc_clx > tlen || lcb_clx > tlen - fc_clx)
        return modattn__error(MODATTN_EFORMAT,
                              "damaged Word document: the piece table (Clx, %u bytes at %u) is not inside the %s "
                              "stream (%zu bytes)",
                              lcb_clx, fc_clx, one ? "1Table" : "0Table", tlen);
    const unsigned char *clx = tbl + fc_clx;
    size_t cl = lcb_clx, i = 0;
    while (i < cl && clx[i] == 0x01) { /* Prc: clxt, cbGrpprl (signed 16), grpprl */
        if (i + 3 > cl) break;
        int16_t cb = (int16_t)rd16(clx + i + 1);
        if (cb < 0 || (size_t)cb > cl - i - 3)
            return modattn__error(MODATTN_EFORMAT, "damaged Word document: a Prc in the Clx has a bad size (%d)", cb);
        i += 3 + (size_t)cb;
    }
    if (i + 5 > cl || clx[i] != 0x02)
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: the Clx holds no piece table (Pcdt)");
    uint32_t lcb = rd32(clx + i + 1);
    const unsigned char *plc = clx + i + 5;
    if (lcb > cl - i - 5 || lcb < 16 || (lcb - 4) % 12 != 0)
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: the piece table's size (%u bytes) is wrong", lcb);
    size_t npieces = (lcb - 4) / 12;
    const unsigned char *pcd = plc + 4 * (npieces + 1);
    uint32_t last = rd32(plc + 4 * npieces);
    if (rd32(plc) != 0) return modattn__error(MODATTN_EFORMAT, "damaged Word document: the piece table does not start at CP 0");
    if (ccp_text > last)
        return modattn__error(MODATTN_EFORMAT,
                              "damaged Word document: the text (%u characters) is longer than its piece table (%u)",
                              ccp_text, last);
    for (size_t k = 0; k < npieces; k++)
        if (rd32(plc + 4 * (k + 1)) < rd32(plc + 4 * k))
            return modattn__error(MODATTN_EFORMAT,
                                  "damaged Word document: the piece table's CPs go backwards (piece %zu)", k);
    doc_reader *r = calloc(1, sizeof *r);
    if (!r) return modattn__error(MODATTN_ENOMEM, "out of memory");
    r->para = 1;
    r->cap = cap;
    modattn__textw_mark(&r->w, 1);
    int st = 0;
    for (size_t k = 0; k < npieces && !st; k++) {
        uint32_t a = rd32(plc + 4 * k), b = rd32(plc + 4 * (k + 1));
        if (a >= ccp_text) break;
        if (b > ccp_text) b = ccp_text;
        st = doc_piece(r, wd, wd_len, rd32(pcd + 8 * k + 2), a, b, k);
    }
    if (st) {
        modattn__tbuf_free(&r->w.b);
        free(r);
        return st;
    }
    st = modattn__tbuf_finish(&r->w.b, out, false);
    free(r);
    return st;
}

/* ---- the OLE2 container, through libgsf */

/* libgsf reports a damaged container with g_return_if_fail (a GLib "CRITICAL" on stderr) and then
 * leaves the entry out. Its messages are kept here instead (the last one, per thread) and named
 * in the refusal, not printed. */
static _Thread_local char t_gsf_said[256];

static void gsf_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer ud) {
    (void)domain, (void)level, (void)ud;
    snprintf(t_gsf_said, sizeof t_gsf_said, "%s", message ? message : "");
}

static void gsf_log_once(void) {
    const GLogLevelFlags lv = G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE;
    g_log_set_handler("libgsf", lv, gsf_log, NULL);
    g_log_set_handler("libgsf:msole", lv, gsf_log, NULL);
}

/* The whole of a named stream, at most max bytes: 0, or EFORMAT (missing: *data NULL and 0 when
 * optional). */
static int read_stream(GsfInfile *ole, const char *name, size_t max, bool optional, unsigned char **data,
                       size_t *len) {
    *data = NULL;
    *len = 0;
    GsfInput *in = gsf_infile_child_by_name(ole, name);
    if (!in && !optional && t_gsf_said[0])
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: its OLE2 directory is damaged (libgsf: %s)",
                              t_gsf_said);
    if (!in) return optional ? 0 : modattn__error(MODATTN_EFORMAT, "not a Word document: no %s stream", name);
    gsf_off_t size = gsf_input_size(in);
    if (size < 0 || (uint64_t)size > max) {
        g_object_unref(in);
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: its %s stream claims %lld bytes, more than the "
                                               "file holds", name, (long long)size);
    }
    unsigned char *b = malloc((size_t)size + 1);
    if (!b) {
        g_object_unref(in);
        return modattn__error(MODATTN_ENOMEM, "out of memory");
    }
    if (size > 0 && !gsf_input_read(in, (size_t)size, b)) {
        free(b);
        g_object_unref(in);
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: its %s stream cannot be read whole", name);
    }
    g_object_unref(in);
    *data = b;
    *len = (size_t)size;
    return 0;
}

int modattn__extract_doc(const char *buf, size_t len, size_t cap, modattn_doc_text *out) {
    memset(out, 0, sizeof *out);
    if (len < 8 || memcmp(buf, "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 8) != 0)
        return modattn__error(MODATTN_EFORMAT, "not a Word 97-2003 document: no OLE2 compound file header");
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, gsf_log_once);
    t_gsf_said[0] = '\0';
    GsfInput *mem = gsf_input_memory_new((const guint8 *)buf, (gsf_off_t)len, FALSE);
    if (!mem) return modattn__error(MODATTN_ENOMEM, "out of memory");
    GError *gerr = NULL;
    GsfInfile *ole = gsf_infile_msole_new(mem, &gerr);
    if (!ole) {
        int st = modattn__error(MODATTN_EFORMAT, "damaged Word document: its OLE2 container cannot be read (%s)",
                                gerr && gerr->message ? gerr->message
                                : t_gsf_said[0]       ? t_gsf_said
                                                      : "libgsf gave no reason");
        if (gerr) g_error_free(gerr);
        g_object_unref(mem);
        return st;
    }
    unsigned char *wd = NULL;
    size_t wd_len = 0;
    unsigned char *t[2] = {NULL, NULL}; /* 0Table, 1Table */
    size_t tl[2] = {0, 0};
    int st = read_stream(ole, "WordDocument", len, false, &wd, &wd_len);
    if (!st) st = read_stream(ole, "0Table", len, true, &t[0], &tl[0]);
    if (!st) st = read_stream(ole, "1Table", len, true, &t[1], &tl[1]);
    g_object_unref(ole);
    g_object_unref(mem);
    if (!st) st = modattn__doc_text(wd, wd_len, t[0], tl[0], t[1], tl[1], cap, out);
    free(wd);
    free(t[0]);
    free(t[1]);
    return st;
}
