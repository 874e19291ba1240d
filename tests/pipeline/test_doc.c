/* tests/pipeline/test_doc.c — legacy Word 97-2003 .doc (pipeline/fmt_doc.c). The fixtures in
 * tests/fixtures/doc/ are written byte by byte by tools/make_doc_fixtures.py (an OLE2 writer and a
 * minimal FIB + piece table; checked there with olefile). Here: each is sniffed by its content
 * (OLE2 magic + a WordDocument stream; an OLE2 file without one stays unsupported, saying so); the
 * text of the 8-bit ("compressed") file and of the UTF-16 file equals the string [MS-DOC]'s rules
 * give, in process and in the extraction child; stories.doc's every story (footnotes, endnotes, a
 * comment, text boxes, a header and footer: separators and the text boxes' last range not read)
 * in its documented order, and its table rows with empty cells, told by sprmPFTtp; each story
 * count past the piece table, each story table outside its stream or past its story, is a
 * refusal naming it; unusable paragraph properties fall back to the old row guess, the text all
 * read; an encrypted document is refused by name; every
 * truncation of a file, and each damaged FIB or piece-table field, is MODATTN_EFORMAT naming what
 * is wrong; a text past cap is MODATTN_ERANGE; every single-byte change of the FIB and the Clx
 * gives text or a refusal, never a crash (run under ASan/UBSan in the sanitizer tree). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "pipeline/fmt_internal.h"
#include "pipeline/internal_ingest.h"
#include "test_util.h"

#define DIR "tests/fixtures/doc/"
#define CAP ((size_t)1 << 20)

static unsigned char *slurp(const char *name, size_t *len) {
    FILE *f = fopen(name, "rb");
    *len = 0;
    if (!f) {
        fprintf(stderr, "cannot open fixture %s\n", name);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* the text each fixture gives, by the reader's rules (tools/make_doc_fixtures.py has the source
 * characters: fields' codes dropped, results kept; a row's cells tab-separated, its end a line) */
static const char k_word97[] =
    "doc alpha phrase in a Word 97 file.\n"
    "Caf\xc3\xa9 \xe2\x80\x9cquoted\xe2\x80\x9d \xe2\x80\x93 \xc5\xa0koda example link after.\n"
    "name\tvalue\n"
    "cell one\tcell two\n"
    "doc omega phrase ends here.";
static const char k_unicode[] =
    "unicode alpha phrase: Gr\xc3\xbc\xc3\x9f" "e, na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 "
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80.\n"
    "field result kept\n"
    "\xce\xb1\xce\xb2\xce\xb3\t\xd0\xb6\xd0\xb7\n"
    "unicode omega phrase\nsecond line";
/* stories.doc: every story, in the order written (main text, footnotes, endnotes, comments, text
 * boxes, headers and footers, header text boxes), each set off by a blank line; the separators'
 * stories, the text boxes' last ranges and the guard paragraph marks write nothing; a row whose
 * middle cell is empty keeps two tabs, one whose first is empty starts with a tab (its row end
 * known from its paragraph's sprmPFTtp, not guessed) */
static const char k_stories[] =
    "stories alpha phrase with notes.\n"
    "a1\t\tc1\n"
    "\tb2\n"
    "stories omega phrase.\n\n"
    "footnote one text.\n"
    "footnote two \xc3\xa9t\xc3\xa9.\n\n"
    "endnote text here.\n\n"
    "comment text here.\n\n"
    "text box words.\n\n"
    "header words here\n"
    "footer 1 words\n\n"
    "header box words.";

static void good(const char *file, const char *want, const char *omega, int64_t omega_para) {
    size_t len;
    unsigned char *buf = slurp(file, &len);
    CHECK(buf != NULL);
    if (!buf) return;
    /* by content: the same kind under a name that says nothing */
    CHECK_MSG(modattn_sniff_kind(file, buf, len) == MODATTN_DOC_DOC, "%s", file);
    CHECK_MSG(modattn_sniff_kind("attachment.bin", buf, len) == MODATTN_DOC_DOC, "%s", file);
    /* a head that ends before the directory: the name decides (.doc/.dot), else not Word */
    CHECK(modattn_sniff_kind("old.DOC", buf, 1024) == MODATTN_DOC_DOC);
    CHECK(modattn_sniff_kind("old.dot", buf, 1024) == MODATTN_DOC_DOC);
    CHECK(modattn_sniff_kind("old.bin", buf, 1024) == MODATTN_DOC_BINARY);
    CHECK(modattn__kind_extracted(MODATTN_DOC_DOC));
    CHECK(strcmp(modattn_doc_kind_name(MODATTN_DOC_DOC), "doc") == 0);
    modattn_doc_text d;
    int st = modattn__fmt_extract(MODATTN_DOC_DOC, (const char *)buf, len, CAP, &d);
    CHECK_MSG(st == 0, "%s: %s", file, modattn_last_error());
    if (!st) {
        CHECK_MSG(d.len == strlen(want) && strcmp(d.text, want) == 0, "%s:\n got [%s]\nwant [%s]", file, d.text, want);
        const char *o = strstr(d.text, omega);
        CHECK(o && modattn_doc_text_locate(&d, (size_t)(o - d.text)) == omega_para);
        modattn__extract_limits lim = {256u << 20, 10.0, CAP, NULL, NULL};
        modattn_doc_text c;
        bool stopped = false;
        int st2 = modattn__extract_isolated(MODATTN_DOC_DOC, (const char *)buf, len, &lim, &c, &stopped);
        CHECK_MSG(st2 == 0, "%s in the child: %s", file, modattn_last_error());
        if (!st2) {
            CHECK(c.len == d.len && memcmp(c.text, d.text, d.len) == 0 && c.nmarks == d.nmarks &&
                  memcmp(c.marks, d.marks, d.nmarks * sizeof *d.marks) == 0);
            modattn_doc_text_clear(&c);
        }
        printf("  %-24s %5zu bytes -> %3zu bytes of text, %zu paragraphs\n", file, len, d.len, d.nmarks);
        modattn_doc_text_clear(&d);
    }
    /* every truncation: refused as damaged (libgsf or our checks), never a crash */
    int refused = 0, cuts = 0;
    for (size_t cut = 0; cut < len; cut += (cut < 1024 ? 37 : 211)) {
        cuts++;
        st = modattn__fmt_extract(MODATTN_DOC_DOC, (const char *)buf, cut, CAP, &d);
        if (st == MODATTN_EFORMAT && strstr(modattn_last_error(), "Word")) refused++;
        else {
            CHECK_MSG(0, "%s cut at %zu: status %d (%s)", file, cut, st, st ? modattn_last_error() : "accepted");
            if (!st) modattn_doc_text_clear(&d);
        }
    }
    printf("  %-24s %d truncations, %d refused as damaged (at %zu bytes: %s)\n", file, cuts, refused, len - 100,
           modattn__fmt_extract(MODATTN_DOC_DOC, (const char *)buf, len - 100, CAP, &d) ? modattn_last_error() : "read");
    CHECK_ERR(modattn__fmt_extract(MODATTN_DOC_DOC, (const char *)buf, len, 40, &d), MODATTN_ERANGE,
              "--max-file-size");
    free(buf);
}

/* the fixtures' streams are contiguous (one writer made them): stream `name`'s bytes and size
 * from the directory sector (sector 1, at byte 1024) */
static unsigned char *stream(const unsigned char *f, size_t flen, const char *name, size_t *len) {
    for (size_t e = 1024; e + 128 <= 1536 && e + 128 <= flen; e += 128) {
        char nm[32] = {0};
        for (int i = 0; i < 31 && f[e + 2 * i]; i++) nm[i] = (char)f[e + 2 * i];
        if (strcmp(nm, name) != 0) continue;
        uint32_t start = (uint32_t)f[e + 116] | (uint32_t)f[e + 117] << 8 | (uint32_t)f[e + 118] << 16 |
                         (uint32_t)f[e + 119] << 24;
        uint32_t size = (uint32_t)f[e + 120] | (uint32_t)f[e + 121] << 8 | (uint32_t)f[e + 122] << 16 |
                        (uint32_t)f[e + 123] << 24;
        size_t off = ((size_t)start + 1) * 512;
        if (off + size > flen) return NULL;
        unsigned char *s = malloc(size);
        memcpy(s, f + off, size);
        *len = size;
        return s;
    }
    return NULL;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct streams {
    unsigned char *wd, *t0;
    size_t wl, tl;
} streams;

/* name's WordDocument and 0Table streams (pointers into *file, which the caller frees): false,
 * with a failed check, when the fixture or a stream is missing */
static bool load_streams(const char *path, unsigned char **file, streams *s) {
    size_t len;
    *file = slurp(path, &len);
    *s = (streams){0};
    if (*file) {
        s->wd = stream(*file, len, "WordDocument", &s->wl);
        s->t0 = stream(*file, len, "0Table", &s->tl);
    }
    CHECK(s->wd && s->t0);
    return s->wd && s->t0;
}

/* the reader on a damaged copy of word97.doc's streams: status want, message with needle */
static void damaged(const streams *s, void (*edit)(unsigned char *wd, size_t *wl, unsigned char *t, size_t *tl),
                    int want, const char *needle) {
    unsigned char *wd = malloc(s->wl), *t = malloc(s->tl);
    memcpy(wd, s->wd, s->wl);
    memcpy(t, s->t0, s->tl);
    size_t wl = s->wl, tl = s->tl;
    edit(wd, &wl, t, &tl);
    modattn_doc_text d;
    int st = modattn__doc_text(wd, wl, t, tl, NULL, 0, CAP, &d);
    CHECK_ERR(st, want, needle);
    printf("  damaged: %s\n", st ? modattn_last_error() : "(accepted!)");
    if (!st) modattn_doc_text_clear(&d);
    free(wd);
    free(t);
}

#define FCLCB 154 /* the FIB's fc/lcb pairs: after FibBase, FibRgW97 and FibRgLw97 */
#define CLX 0x100 /* where the fixture writer puts the Clx in the table stream */
static void e_ident(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, w[0] = 0; }
static void e_encrypted(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, w[0x0B] |= 1; }
static void e_word95(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, w[2] = 0x65, w[3] = 0; }
static void e_short(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)w, (void)t, (void)tl, *wl = 20; }
static void e_csw(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)t, (void)tl, w[32] = 0xff, w[33] = 0xff, (void)wl; }
static void e_which(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, w[0x0B] |= 2; }
static void e_lcbclx(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + FCLCB + 33 * 8 + 4, 0x7fffffff); }
static void e_fcclx(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + FCLCB + 33 * 8, 0xfffffff0u); }
static void e_ccp(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + 64 + 12, 100000); }
static void e_clxt(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)w, (void)wl, (void)tl, t[CLX] = 5; }
static void e_pcdt_size(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)w, (void)wl, (void)tl, put32(t + CLX + 1, get32(t + CLX + 1) + 1); }
static void e_cp0(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)w, (void)wl, (void)tl, put32(t + CLX + 5, 3); }
static void e_cp_back(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)w, (void)wl, (void)tl, put32(t + CLX + 5 + 4, 0x7fffffff); }
/* the second piece (PlcPcd: 3 CPs, then Pcds of 8 bytes, fc at +2) points past the stream */
static void e_piece_fc(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)w, (void)wl, (void)tl, put32(t + CLX + 5 + 12 + 8 + 2, 0x3ffff000u); }
static void e_stream_cut(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)w, (void)t, (void)tl, *wl = 0x840; }

static void test_damaged(void) {
    unsigned char *f;
    streams s;
    if (!load_streams(DIR "word97.doc", &f, &s)) {
        free(f);
        return;
    }
    modattn_doc_text d; /* the streams as they are: the same text as through the container */
    CHECK(modattn__doc_text(s.wd, s.wl, s.t0, s.tl, NULL, 0, CAP, &d) == 0 && strcmp(d.text, k_word97) == 0);
    modattn_doc_text_clear(&d);
    damaged(&s, e_ident, MODATTN_EFORMAT, "0xA5EC");
    damaged(&s, e_encrypted, MODATTN_EFORMAT, "encrypted");
    damaged(&s, e_word95, MODATTN_EFORMAT, "Word 6.0/95");
    damaged(&s, e_short, MODATTN_EFORMAT, "too short for a FIB");
    damaged(&s, e_csw, MODATTN_EFORMAT, "FIB is cut short");
    damaged(&s, e_which, MODATTN_EFORMAT, "no 1Table stream");
    damaged(&s, e_lcbclx, MODATTN_EFORMAT, "not inside the 0Table stream");
    damaged(&s, e_fcclx, MODATTN_EFORMAT, "not inside the 0Table stream");
    damaged(&s, e_ccp, MODATTN_EFORMAT, "longer than its piece table");
    damaged(&s, e_clxt, MODATTN_EFORMAT, "no piece table");
    damaged(&s, e_pcdt_size, MODATTN_EFORMAT, "size");
    damaged(&s, e_cp0, MODATTN_EFORMAT, "does not start at CP 0");
    damaged(&s, e_cp_back, MODATTN_EFORMAT, "go backwards");
    damaged(&s, e_piece_fc, MODATTN_EFORMAT, "piece 1");
    damaged(&s, e_stream_cut, MODATTN_EFORMAT, "runs past the end of the WordDocument stream");
    /* every byte of the FIB's start and pairs, and of the Clx, changed in turn: text or a refusal */
    int ok = 0, refused = 0;
    size_t clx_end = CLX + 5 + 4 * 3 + 8 * 2;
    for (int pass = 0; pass < 2; pass++) {
        unsigned char *buf = pass ? s.t0 : s.wd;
        size_t from = pass ? CLX : 0, to = pass ? clx_end : FCLCB + 35 * 8;
        for (size_t i = from; i < to; i++) {
            for (int x = 0; x < 2; x++) {
                unsigned char keep = buf[i];
                buf[i] = x ? (unsigned char)(keep ^ 0xff) : (unsigned char)(keep + 0x41);
                int st = modattn__doc_text(s.wd, s.wl, s.t0, s.tl, NULL, 0, CAP, &d);
                buf[i] = keep;
                if (st == 0) {
                    ok++;
                    CHECK(d.text && d.text[d.len] == '\0' && memchr(d.text, '\0', d.len) == NULL);
                    modattn_doc_text_clear(&d);
                } else {
                    CHECK_MSG(st == MODATTN_EFORMAT || st == MODATTN_ERANGE, "byte %zu: %d %s", i, st,
                              modattn_last_error());
                    refused++;
                }
            }
        }
    }
    printf("  single-byte changes of the FIB and the Clx: %d read, %d refused\n", ok, refused);
    CHECK(ok > 0 && refused > 0);
    free(s.wd);
    free(s.t0);
    free(f);
}

/* stories.doc's streams, edited: the FIB's story counts and the story tables */
#define LW 64 /* FibRgLw97: ccpText at +12, ccpFtn +16, ccpHdd +20, ccpAtn +28, ccpEdn +32, ccpTxbx +36, ccpHdrTxbx +40 */
static void e_ftn_over(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + LW + 16, 100000); }
static void e_hdrtxbx_over(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + LW + 40, get32(w + LW + 40) + 50); }
static void e_edn_negative(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + LW + 32, 0x80000000u); }
static void e_hdd_outside(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + FCLCB + 11 * 8 + 4, 0x10000); }
static void e_hdd_cp(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)tl, put32(t + get32(w + FCLCB + 11 * 8) + 4 * 7, 0x7fff); }
static void e_txbx_size(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)t, (void)tl, put32(w + FCLCB + 56 * 8 + 4, get32(w + FCLCB + 56 * 8 + 4) - 1); }
static void e_txbx_cp(unsigned char *w, size_t *wl, unsigned char *t, size_t *tl) { (void)wl, (void)tl, put32(t + get32(w + FCLCB + 56 * 8) + 4, get32(w + LW + 36) + 1); }

static void test_stories_damaged(void) {
    unsigned char *f;
    streams s;
    if (!load_streams(DIR "stories.doc", &f, &s)) {
        free(f);
        return;
    }
    modattn_doc_text d;
    CHECK(modattn__doc_text(s.wd, s.wl, s.t0, s.tl, NULL, 0, CAP, &d) == 0 && strcmp(d.text, k_stories) == 0);
    modattn_doc_text_clear(&d);
    damaged(&s, e_ftn_over, MODATTN_EFORMAT, "footnotes (100000 characters from CP");
    damaged(&s, e_hdrtxbx_over, MODATTN_EFORMAT, "header text boxes");
    damaged(&s, e_edn_negative, MODATTN_EFORMAT, "endnotes characters is negative");
    damaged(&s, e_hdd_outside, MODATTN_EFORMAT, "header stories (PlcfHdd) table (65536 bytes");
    damaged(&s, e_hdd_cp, MODATTN_EFORMAT, "PlcfHdd) table's CP 7 (32767)");
    damaged(&s, e_txbx_size, MODATTN_EFORMAT, "text boxes (PlcftxbxTxt) table");
    damaged(&s, e_txbx_cp, MODATTN_EFORMAT, "PlcftxbxTxt) table's CP 1");
    /* paragraph properties that cannot be used (the PlcBtePapx's page past the stream): all the
     * text is still read, and the rows fall back to "a cell mark after a cell mark ends the row",
     * which an empty cell is taken for (documented in fmt_doc.c) */
    size_t bte = get32(s.wd + FCLCB + 13 * 8);
    uint32_t keep = get32(s.t0 + bte + 8);
    put32(s.t0 + bte + 8, 0x3fffff);
    int st = modattn__doc_text(s.wd, s.wl, s.t0, s.tl, NULL, 0, CAP, &d);
    put32(s.t0 + bte + 8, keep);
    CHECK_MSG(st == 0, "%s", modattn_last_error());
    if (!st) {
        const char *rows = "stories alpha phrase with notes.\na1\nc1\n\tb2\n\tstories omega phrase.\n\n";
        CHECK_MSG(strncmp(d.text, rows, strlen(rows)) == 0 && strcmp(d.text + strlen(rows), strstr(k_stories, "footnote one")) == 0,
                  "without paragraph properties:\n got [%s]", d.text);
        modattn_doc_text_clear(&d);
    }
    /* every byte of the table stream after the Clx (the story tables, the PlcBtePapx) and of the
     * PapxFkp page, changed in turn: text or a refusal, never a crash */
    int ok = 0, refused = 0;
    for (int pass = 0; pass < 2; pass++) {
        unsigned char *buf = pass ? s.wd : s.t0;
        size_t from = pass ? s.wl - 512 : CLX, to = pass ? s.wl : s.tl;
        for (size_t i = from; i < to; i++)
            for (int x = 0; x < 2; x++) {
                unsigned char k = buf[i];
                buf[i] = x ? (unsigned char)(k ^ 0xff) : (unsigned char)(k + 0x41);
                st = modattn__doc_text(s.wd, s.wl, s.t0, s.tl, NULL, 0, CAP, &d);
                buf[i] = k;
                if (!st) {
                    ok++;
                    CHECK(d.text && d.text[d.len] == '\0' && memchr(d.text, '\0', d.len) == NULL);
                    modattn_doc_text_clear(&d);
                } else {
                    CHECK_MSG(st == MODATTN_EFORMAT || st == MODATTN_ERANGE, "byte %zu: %d %s", i, st,
                              modattn_last_error());
                    refused++;
                }
            }
    }
    printf("  stories.doc: single-byte changes of the story tables and the PapxFkp: %d read, %d refused\n", ok,
           refused);
    CHECK(ok > 0 && refused > 0);
    free(s.wd);
    free(s.t0);
    free(f);
}

static void test_refused(void) {
    size_t len;
    unsigned char *buf = slurp(DIR "encrypted.doc", &len);
    CHECK(buf && modattn_sniff_kind("secret.doc", buf, len) == MODATTN_DOC_DOC);
    modattn_doc_text d;
    if (buf) CHECK_ERR(modattn__fmt_extract(MODATTN_DOC_DOC, (const char *)buf, len, CAP, &d), MODATTN_EFORMAT,
                       "encrypted (password-protected) Word document");
    printf("  encrypted.doc: %s\n", modattn_last_error());
    free(buf);
    /* an OLE2 file that is not Word: unsupported, and said so, also when named .doc */
    buf = slurp(DIR "book.xls", &len);
    CHECK(buf && modattn_sniff_kind("book.xls", buf, len) == MODATTN_DOC_BINARY);
    CHECK(buf && modattn_sniff_kind("book.doc", buf, len) == MODATTN_DOC_BINARY);
    const char *why = buf ? modattn__sniff_unsupported("book.xls", buf, len) : "";
    CHECK_MSG(strstr(why, "no WordDocument stream") && strstr(why, "unsupported format"), "%s", why);
    printf("  book.xls: %s\n", why);
    if (buf) CHECK_ERR(modattn__fmt_extract(MODATTN_DOC_DOC, (const char *)buf, len, CAP, &d), MODATTN_EFORMAT,
                       "no WordDocument stream");
    free(buf);
    const char *text = "plain words named like a document";
    CHECK_ERR(modattn__fmt_extract(MODATTN_DOC_DOC, text, strlen(text), CAP, &d), MODATTN_EFORMAT, "OLE2");
    CHECK(modattn_sniff_kind("notes.doc", (const unsigned char *)text, strlen(text)) == MODATTN_DOC_TEXT);
}

int main(void) {
    printf("Word 97-2003 fixtures:\n");
    good(DIR "word97.doc", k_word97, "doc omega", 5);
    good(DIR "unicode.doc", k_unicode, "unicode omega", 4);
    good(DIR "stories.doc", k_stories, "stories omega", 4);
    printf("refused:\n");
    test_refused();
    printf("damaged streams:\n");
    test_damaged();
    printf("stories and tables:\n");
    test_stories_damaged();
    return test_finish("test_doc");
}
