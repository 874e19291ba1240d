/* pipeline/fmt_doc.c — the text of a legacy Word 97–2003 document (.doc). The container is an OLE2
 * compound file, opened with libgsf (libgsf-1-dev) in memory; the Word binary text is read here,
 * by [MS-DOC]: the FIB at the start of the WordDocument stream (wIdent 0xA5EC, nFib, fEncrypted,
 * fWhichTblStm, ccpText, fcClx/lcbClx — §2.5), the Clx in the 0Table or 1Table stream it names
 * (Prc records skipped, then the Pcdt and its PlcPcd piece table — §2.9.38, §2.9.178), and each
 * piece's characters: 8-bit "compressed" (Windows-1252's byte values with [MS-DOC] §2.4.1's
 * special cases 0x82..0x9F) or UTF-16LE, written as UTF-8.
 *
 * Stories ([MS-DOC] §2.3): the CP stream holds the main text, then footnotes, headers and footers,
 * comments, endnotes, text boxes and header text boxes, each as long as FibRgLw97's ccpText,
 * ccpFtn, ccpHdd, ccpAtn, ccpEdn, ccpTxbx, ccpHdrTxbx say. All are read, written in this order: the
 * main text, footnotes, endnotes, comments, text boxes, headers and footers, header text boxes
 * (the ones that repeat on every page last), each story set off from the one before by a blank
 * line, its paragraphs numbered on from the main text's. Headers: the PlcfHdd says where each
 * story begins; its first six (footnote and endnote separators and continuation notices) are not
 * read, and without a PlcfHdd there is no header document (§2.3.3). Text boxes: the last range of
 * the PlcftxbxTxt/PlcfHdrtxbxTxt is not text (§2.8.32); without one the whole story is read. The
 * guard paragraph marks that end stories write nothing (an empty paragraph never does).
 *
 * Characters: a paragraph mark (0x0D) ends a paragraph (a new position mark); 0x0B (line break),
 * 0x0C (page/section break) and 0x0E (column break) break lines; a table row is one line, its cells
 * separated by tabs (an empty cell still has its tab: `a<TAB><TAB>c`; empty cells at a row's end
 * write nothing): a cell mark (0x07) is a tab owed before the next text, and a row's end mark (also
 * 0x07) ends the line. Which 0x07 ends a row is in its paragraph's properties (sprmPFTtp, found
 * through the PlcBtePapx and its PapxFkp pages); a file without usable ones falls back to taking a
 * cell mark right after another for the row's end, as an empty cell would also be. Fields (0x13
 * code 0x14 result 0x15, nested) keep their result and drop their code; 0x1E (non-breaking hyphen)
 * is '-', 0xA0 a space; the other control characters (pictures, footnote and comment references,
 * separators, optional hyphens, C1 controls) are dropped.
 *
 * Every length and offset is checked against the stream that holds it: a damaged file is a
 * refusal that says what is wrong (MODATTN_EFORMAT: a story count past the piece table names
 * the story; a story table outside the table stream or with CPs past its story names the table),
 * an encrypted one is refused as such, and the
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
    bool after_cell; /* the last character was a cell mark (no character since) */
    int tabs;        /* cell marks since the last text: a tab each is owed before the next text */
    int64_t owed;    /* paragraphs ended and not yet started: a newline and a mark owed before text */
    int owed_sep;    /* the separator owed with them: 2 a line break, 3 a blank line (a new story) */
    size_t cap;
    /* paragraph properties, to tell a table row's end mark from a cell mark (0x07) */
    const unsigned char *wd, *bte; /* the WordDocument stream; the PlcBtePapx (NULL: not usable) */
    size_t wd_len, nbte;
} doc_reader;

static void new_para(doc_reader *r) { r->owed++; }

/* Before text: the line break (or blank line) and position mark of the paragraphs ended since,
 * then the tabs of the cell marks since (none at the end) */
static void start_text(doc_reader *r) {
    if (r->owed) {
        modattn__textw_sep(&r->w, r->owed_sep);
        r->para += r->owed;
        r->owed = 0;
        r->owed_sep = 2;
        modattn__textw_mark(&r->w, r->para);
    }
    for (; r->tabs > 0; r->tabs--) modattn__textw_raw(&r->w, "\t", 1);
}

/* A new story (footnotes, headers, ... after the main text): set off by a blank line, its own
 * paragraph, and no field or table state carried over from the one before. */
static void new_story(doc_reader *r) {
    r->depth = 0;
    r->after_cell = false;
    r->tabs = 0;
    if (r->w.b.n) {
        new_para(r);
        r->owed_sep = 3;
    }
}

/* sprm operand sizes by spra ([MS-DOC] §2.2.5.1); 0: variable (a size byte first) */
static size_t sprm_operand(const unsigned char *g, size_t i, size_t n, uint32_t sprm) {
    static const unsigned char fixed[8] = {1, 1, 2, 4, 2, 2, 0, 3};
    unsigned spra = sprm >> 13;
    if (spra != 6) return fixed[spra];
    if (sprm == 0xD608) /* sprmTDefTable: a 16-bit size, counting itself less one */
        return i + 2 <= n ? 1 + (size_t)rd16(g + i) : (size_t)-1;
    if (i >= n || (sprm == 0xC615 && g[i] == 255)) return (size_t)-1; /* sprmPChgTabs' long form: stop */
    return 1 + (size_t)g[i];
}

/* Whether the paragraph holding the character at byte fc of the WordDocument stream is a table
 * row's end (its properties carry sprmPFTtp or sprmPFInnerTtp = 1: [MS-DOC] §2.6.2): 1 yes, 0 no,
 * -1 not known (no usable PlcBtePapx, or a page or record outside its bounds). The PlcBtePapx
 * ([MS-DOC] §2.8.6) maps file offsets to 512-byte PapxFkp pages (§2.9.175) in the WordDocument
 * stream; each page maps them to a PapxInFkp, whose grpprl is scanned. Bounded: two binary
 * searches and one grpprl of at most 512 bytes. */
static int row_end_at(const doc_reader *r, uint64_t fc) {
    if (!r->bte) return -1;
    size_t n = r->nbte, lo = 0, hi = n;
    const unsigned char *fcs = r->bte, *pns = r->bte + 4 * (n + 1);
    if (fc < rd32(fcs) || fc >= rd32(fcs + 4 * n)) return -1;
    while (hi - lo > 1) { /* the last run with FC <= fc */
        size_t mid = lo + (hi - lo) / 2;
        if (rd32(fcs + 4 * mid) <= fc) lo = mid;
        else hi = mid;
    }
    uint64_t pn = rd32(pns + 4 * lo) & 0x3FFFFF;
    if (pn * 512 + 512 > r->wd_len) return -1;
    const unsigned char *pg = r->wd + pn * 512;
    size_t crun = pg[511];
    if (crun == 0 || 4 * (crun + 1) + 13 * crun > 511) return -1;
    if (fc < rd32(pg) || fc >= rd32(pg + 4 * crun)) return -1;
    lo = 0, hi = crun;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (rd32(pg + 4 * mid) <= fc) lo = mid;
        else hi = mid;
    }
    size_t at = 2 * (size_t)pg[4 * (crun + 1) + 13 * lo];
    if (at == 0) return 0; /* no properties */
    if (at < 4 * (crun + 1) + 13 * crun || at + 1 >= 511) return -1;
    size_t cb = pg[at], start = at + 1, len = 2 * cb - 1;
    if (cb == 0) start = at + 2, len = 2 * (size_t)pg[at + 1];
    if (start + len > 511 || len < 2) return -1;
    const unsigned char *g = pg + start + 2; /* after the istd */
    size_t gn = len - 2;
    for (size_t i = 0; i + 2 <= gn;) {
        uint32_t sprm = rd16(g + i);
        i += 2;
        size_t op = sprm_operand(g, i, gn, sprm);
        if (op == (size_t)-1 || op > gn - i) break;
        if ((sprm == 0x2417 || sprm == 0x244C) && g[i] == 1) return 1;
        i += op;
    }
    return 0;
}

/* One character of a story (a code point, surrogates already paired), at byte fc of the stream. */
static int doc_char(doc_reader *r, uint32_t c, uint64_t fc) {
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
    bool after_cell = r->after_cell;
    r->after_cell = false;
    switch (c) {
    case 0x07: {
        /* a row's end mark by its paragraph's properties; without them, a cell mark right after
         * another (the row's last) is taken for it, as an empty cell would be */
        int end = row_end_at(r, fc);
        if (end == 1 || (end < 0 && after_cell)) {
            r->tabs = 0; /* the cells' tabs owed: none after the row's last cell */
            new_para(r);
            return 0;
        }
        if (r->tabs < (1 << 20)) r->tabs++; /* bounded: pieces may repeat the same cell marks */
        r->after_cell = true;
        return 0;
    }
    case 0x0D: new_para(r); return 0;
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

/* n characters of one piece, from its skip'th on; the piece is held at byte fc of the stream. */
static int doc_piece(doc_reader *r, const unsigned char *wd, size_t wd_len, uint32_t fc_raw, uint64_t skip,
                     uint64_t n, size_t piece) {
    bool compressed = (fc_raw >> 30) & 1;
    uint64_t fc = fc_raw & 0x3FFFFFFFu;
    if (compressed) fc /= 2;
    uint64_t bytes = compressed ? skip + n : 2 * (skip + n);
    if (fc > wd_len || bytes > wd_len - fc)
        return modattn__error(MODATTN_EFORMAT,
                              "damaged Word document: piece %zu (%llu characters at byte %llu) runs past the end "
                              "of the WordDocument stream (%zu bytes)",
                              piece, (unsigned long long)(skip + n), (unsigned long long)fc, wd_len);
    fc += compressed ? skip : 2 * skip;
    const unsigned char *p = wd + fc;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t c;
        uint64_t at = compressed ? fc + i : fc + 2 * i;
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
        int st = doc_char(r, c, at);
        if (st) return st;
        if (r->w.b.err) return r->w.b.err;
        if (r->w.b.n > r->cap)
            return modattn__error(MODATTN_ERANGE,
                                  "a Word document whose text passes %zu bytes (--max-file-size): not read", r->cap);
    }
    return 0;
}

typedef struct doc_pieces {
    const unsigned char *plc, *pcd; /* the piece table's CPs (n + 1) and Pcds (n, 8 bytes each) */
    size_t n;
} doc_pieces;

/* The characters at CPs [from, to) of the document, through the pieces that hold them. */
static int doc_range(doc_reader *r, const doc_pieces *pt, uint64_t from, uint64_t to) {
    if (from >= to) return 0;
    size_t lo = 0, hi = pt->n; /* the last piece that starts at or before `from` */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (rd32(pt->plc + 4 * mid) <= from) lo = mid;
        else hi = mid;
    }
    for (size_t k = lo; k < pt->n; k++) {
        uint64_t a = rd32(pt->plc + 4 * k), b = rd32(pt->plc + 4 * (k + 1));
        if (a >= to) break;
        if (b <= from) continue;
        uint64_t s = from > a ? from : a, e = to < b ? to : b;
        int st = doc_piece(r, r->wd, r->wd_len, rd32(pt->pcd + 8 * k + 2), s - a, e - s, k);
        if (st) return st;
    }
    return 0;
}

/* A PLC of CPs in the table stream (fc/lcb pair `pair` of the FIB, `data` bytes per entry after
 * them: [MS-DOC] §2.2.2): its CPs and their count (n + 1 for n entries), or *cps NULL when the
 * FIB gives none; EFORMAT when it is not inside the stream, has a wrong size, or its first `check`
 * CPs go backwards or pass `limit`. */
static int doc_plc(const unsigned char *fclcb, uint32_t npairs, unsigned pair, size_t data, const unsigned char *tbl,
                   size_t tlen, const char *tname, const char *what, size_t skip_last, uint64_t limit,
                   const unsigned char **cps, size_t *ncp) {
    *cps = NULL;
    *ncp = 0;
    if (pair >= npairs) return 0;
    uint32_t fc = rd32(fclcb + 8 * pair), lcb = rd32(fclcb + 8 * pair + 4);
    if (lcb == 0) return 0;
    if (fc > tlen || lcb > tlen - fc || lcb < 4 + skip_last * 4 || (lcb - 4) % (4 + data) != 0)
        return modattn__error(MODATTN_EFORMAT,
                              "damaged Word document: the %s table (%u bytes at %u) is not inside the %s stream (%zu "
                              "bytes) or has a wrong size",
                              what, lcb, fc, tname, tlen);
    const unsigned char *p = tbl + fc;
    size_t n = (lcb - 4) / (4 + data) + 1;
    if (n <= skip_last) return modattn__error(MODATTN_EFORMAT, "damaged Word document: the %s table is empty", what);
    for (size_t k = 0; k + skip_last < n; k++) {
        uint32_t cp = rd32(p + 4 * k);
        if (cp > limit || (k && cp < rd32(p + 4 * (k - 1))))
            return modattn__error(MODATTN_EFORMAT,
                                  "damaged Word document: the %s table's CP %zu (%u) goes backwards or passes its "
                                  "story's %llu characters",
                                  what, k, cp, (unsigned long long)limit);
    }
    *cps = p;
    *ncp = n;
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
    /* the stories' lengths in CPs, in the order they follow one another ([MS-DOC] §2.3): FibRgLw97's
     * ccpText, ccpFtn, ccpHdd, ccpAtn, ccpEdn, ccpTxbx, ccpHdrTxbx (a FibRgLw too short for one: 0) */
    enum { S_TEXT, S_FTN, S_HDD, S_ATN, S_EDN, S_TXBX, S_HDRTXBX, S_N };
    static const unsigned lw_at[S_N] = {3, 4, 5, 7, 8, 9, 10};
    static const char *const s_name[S_N] = {"main text", "footnotes", "headers and footers", "comments",
                                           "endnotes", "text boxes", "header text boxes"};
    uint64_t ccp[S_N], start[S_N], total = 0;
    for (int s = 0; s < S_N; s++) {
        uint32_t v = lw_at[s] < cslw ? rd32(wd + lw + 4 * lw_at[s]) : 0;
        if (v > 0x7FFFFFFF)
            return modattn__error(MODATTN_EFORMAT, "damaged Word document: the FIB's count of %s characters is "
                                                   "negative (%d)", s_name[s], (int32_t)v);
        ccp[s] = v;
        start[s] = total;
        total += v;
    }
    uint32_t ccp_text = (uint32_t)ccp[S_TEXT];
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
    const char *tname = one ? "1Table" : "0Table";
    if (!tbl) return modattn__error(MODATTN_EFORMAT, "damaged Word document: no %s stream", tname);
    if (lcb_clx == 0 || fc_clx > tlen || lcb_clx > tlen - fc_clx)
        return modattn__error(MODATTN_EFORMAT,
                              "damaged Word document: the piece table (Clx, %u bytes at %u) is not inside the %s "
                              "stream (%zu bytes)",
                              lcb_clx, fc_clx, tname, tlen);
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
    doc_pieces pt;
    pt.plc = clx + i + 5;
    if (lcb > cl - i - 5 || lcb < 16 || (lcb - 4) % 12 != 0)
        return modattn__error(MODATTN_EFORMAT, "damaged Word document: the piece table's size (%u bytes) is wrong", lcb);
    pt.n = (lcb - 4) / 12;
    pt.pcd = pt.plc + 4 * (pt.n + 1);
    uint32_t last = rd32(pt.plc + 4 * pt.n);
    if (rd32(pt.plc) != 0) return modattn__error(MODATTN_EFORMAT, "damaged Word document: the piece table does not start at CP 0");
    if (ccp_text > last)
        return modattn__error(MODATTN_EFORMAT,
                              "damaged Word document: the text (%u characters) is longer than its piece table (%u)",
                              ccp_text, last);
    if (total > last) /* every story must be held by the pieces: one that is not is named */
        for (int s = 1; s < S_N; s++)
            if (start[s] + ccp[s] > last)
                return modattn__error(MODATTN_EFORMAT,
                                      "damaged Word document: its %s (%llu characters from CP %llu) run past the end of "
                                      "its piece table (%u characters)",
                                      s_name[s], (unsigned long long)ccp[s], (unsigned long long)start[s], last);
    for (size_t k = 0; k < pt.n; k++)
        if (rd32(pt.plc + 4 * (k + 1)) < rd32(pt.plc + 4 * k))
            return modattn__error(MODATTN_EFORMAT,
                                  "damaged Word document: the piece table's CPs go backwards (piece %zu)", k);
    /* the story tables that say which parts of a story are text: the header stories (PlcfHdd, pair
     * 11: the first six are footnote and endnote separators, not read) and the text boxes'
     * (PlcftxbxTxt, pair 56, and PlcfHdrtxbxTxt, pair 58: the last range of each is not text) */
    const unsigned char *hdd = NULL, *txbx = NULL, *htxbx = NULL;
    size_t nhdd = 0, ntxbx = 0, nhtxbx = 0;
    int st = 0;
    if (ccp[S_HDD])
        st = doc_plc(wd + fclcb, cb_fclcb, 11, 0, tbl, tlen, tname, "header stories (PlcfHdd)", 1, ccp[S_HDD], &hdd,
                     &nhdd);
    if (!st && ccp[S_TXBX])
        st = doc_plc(wd + fclcb, cb_fclcb, 56, 22, tbl, tlen, tname, "text boxes (PlcftxbxTxt)", 1, ccp[S_TXBX], &txbx,
                     &ntxbx);
    if (!st && ccp[S_HDRTXBX])
        st = doc_plc(wd + fclcb, cb_fclcb, 58, 22, tbl, tlen, tname, "header text boxes (PlcfHdrtxbxTxt)", 1,
                     ccp[S_HDRTXBX], &htxbx, &nhtxbx);
    if (st) return st;
    doc_reader *r = calloc(1, sizeof *r);
    if (!r) return modattn__error(MODATTN_ENOMEM, "out of memory");
    r->para = 1;
    r->owed_sep = 2;
    r->cap = cap;
    r->wd = wd;
    r->wd_len = wd_len;
    /* the paragraph properties' bin table (PlcBtePapx, pair 13): FCs (n + 1), page numbers (n) */
    uint32_t fc_bte = rd32(wd + fclcb + 13 * 8), lcb_bte = rd32(wd + fclcb + 13 * 8 + 4);
    if (lcb_bte >= 12 && (lcb_bte - 4) % 8 == 0 && fc_bte <= tlen && lcb_bte <= tlen - fc_bte) {
        r->bte = tbl + fc_bte;
        r->nbte = (lcb_bte - 4) / 8;
    }
    modattn__textw_mark(&r->w, 1);
    /* the order written: the main text, then footnotes, endnotes, comments, text boxes, headers
     * and footers, header text boxes (each set off by a blank line) */
    st = doc_range(r, &pt, 0, ccp_text);
    static const int order[] = {S_FTN, S_EDN, S_ATN, S_TXBX, S_HDD, S_HDRTXBX};
    for (size_t k = 0; k < sizeof order / sizeof *order && !st; k++) {
        int s = order[k];
        if (!ccp[s]) continue;
        uint64_t from = 0, to = ccp[s];
        if (s == S_HDD) {
            if (!hdd) continue; /* no PlcfHdd: no header document ([MS-DOC] §2.3.3) */
            size_t end = nhdd - 2; /* CP nhdd-2 ends the last story */
            from = rd32(hdd + 4 * (end < 6 ? end : 6));
            to = rd32(hdd + 4 * end);
        } else if (s == S_TXBX && txbx) {
            from = rd32(txbx), to = rd32(txbx + 4 * (ntxbx - 2));
        } else if (s == S_HDRTXBX && htxbx) {
            from = rd32(htxbx), to = rd32(htxbx + 4 * (nhtxbx - 2));
        }
        new_story(r);
        st = doc_range(r, &pt, start[s] + from, start[s] + to);
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
