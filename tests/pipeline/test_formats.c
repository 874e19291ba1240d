/* tests/pipeline/test_formats.c — issue 40's formats one by one: every fixture that
 * tests/pipeline/make_format_fixtures.py writes (by hand, with Python's zipfile/gzip/bz2/lzma/
 * tarfile and the zstd command) is sniffed to its kind, and its text, extracted in process and in
 * the extraction child (bit for bit the same), holds its two phrases in order; the hostile ones
 * (truncated zip, zip slip, encrypted member, nested archives, XML bombs and an external entity,
 * a zip bomb, a 1 GiB gzip bomb, malformed RTF) are refused with their reason, never a crash;
 * the archive reader lists and reads members and keeps the "archive.zip!/inner" path rule. Prints
 * the extraction time of each format. Runs from the repository root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/fmt_internal.h"
#include "test_util.h"

static char g_dir[64];

static char *slurp(const char *name, size_t *len) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) {
        fprintf(stderr, "cannot open fixture %s\n", p);
        *len = 0;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = '\0';
    fclose(f);
    return b;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of this process: the figures stay meaningful on a loaded machine */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *find(const modattn_doc_text *d, const char *s) {
    return d->text ? strstr(d->text, s) : NULL;
}

#define CAP ((size_t)64 << 20)

/* The fixture is sniffed to kind, and its text (in process, and in the child: the same bytes and
 * marks) has "<tag> alpha phrase" before "<tag> omega phrase". Keeps the text in *keep. */
static void good(const char *name, modattn_doc_kind kind, const char *tag, modattn_doc_text *keep) {
    size_t len;
    char *buf = slurp(name, &len);
    CHECK_MSG(buf != NULL, "%s", name);
    if (!buf) return;
    modattn_doc_kind k = modattn_sniff_kind(name, (const unsigned char *)buf, len);
    CHECK_MSG(k == kind, "%s sniffed as %s, not %s", name, modattn_doc_kind_name(k), modattn_doc_kind_name(kind));
    CHECK(modattn__kind_extracted(kind));
    modattn_doc_text d;
    const int reps = strncmp(name, "large", 5) == 0 ? 3 : 20;
    double t0 = cpu_s();
    int st = 0;
    for (int i = 0; i < reps; i++) {
        if (i) modattn_doc_text_clear(&d);
        st = modattn__fmt_extract(kind, buf, len, CAP, &d);
        if (st) break;
    }
    double per = (cpu_s() - t0) / reps;
    CHECK_MSG(st == 0, "%s: %s", name, modattn_last_error());
    if (st) {
        free(buf);
        return;
    }
    char a[64], o[64];
    snprintf(a, sizeof a, "%s alpha phrase", tag);
    snprintf(o, sizeof o, "%s omega phrase", tag);
    const char *pa = find(&d, a), *po = find(&d, o);
    CHECK_MSG(pa && po && pa < po, "%s: '%s' then '%s' in: [%s]", name, a, o, d.text ? d.text : "");
    CHECK(d.text[d.len] == '\0' && memchr(d.text, '\0', d.len) == NULL);
    /* through the child, under limits: the same result */
    modattn__extract_limits lim = {256u << 20, 10.0, CAP, NULL, NULL};
    modattn_doc_text c;
    double t1 = now_s();
    bool stopped = false;
    int st2 = modattn__extract_isolated(kind, buf, len, &lim, &c, &stopped);
    double child = now_s() - t1;
    CHECK_MSG(st2 == 0, "%s isolated: %s", name, modattn_last_error());
    if (!st2) {
        CHECK_MSG(c.len == d.len && memcmp(c.text, d.text, d.len) == 0 && c.nmarks == d.nmarks &&
                      (!d.nmarks || memcmp(c.marks, d.marks, d.nmarks * sizeof *d.marks) == 0),
                  "%s: the child's text differs", name);
        modattn_doc_text_clear(&c);
    }
    printf("  %-16s %-10s %6zu bytes -> %5zu bytes of text, %3zu marks: %8.3f ms CPU in process, %6.1f ms wall in the child\n",
           name, modattn_doc_kind_name(kind), len, d.len, d.nmarks, per * 1e3, child * 1e3);
    if (keep) *keep = d;
    else modattn_doc_text_clear(&d);
    free(buf);
}

/* The fixture is refused with status want and a message containing needle. */
static void bad(const char *name, modattn_doc_kind kind, size_t cap, int want, const char *needle) {
    size_t len;
    char *buf = slurp(name, &len);
    CHECK_MSG(buf != NULL, "%s", name);
    if (!buf) return;
    modattn_doc_text d;
    double t0 = cpu_s();
    int st = modattn__fmt_extract(kind, buf, len, cap, &d);
    double t = cpu_s() - t0;
    CHECK_ERR(st, want, needle);
    printf("  %-16s refused in %7.1f ms CPU: %s\n", name, t * 1e3, st ? modattn_last_error() : "(accepted!)");
    if (!st) modattn_doc_text_clear(&d);
    free(buf);
}

static void test_good(void) {
    printf("formats (extraction time per file, mean of 20 (3 for the large ones) in process; one run in the child):\n");
    modattn_doc_text d;
    good("budget.docx", MODATTN_DOC_DOCX, "docx", &d);
    CHECK(find(&d, "zebra sanctuary") && !find(&d, "deleted words"));
    CHECK(d.nmarks >= 2 && modattn_doc_text_locate(&d, (size_t)(find(&d, "docx omega") - d.text)) == 3);
    modattn_doc_text_clear(&d);
    good("deck.pptx", MODATTN_DOC_PPTX, "pptx", &d); /* presentation.xml's order: slide2 first */
    CHECK(modattn_doc_text_locate(&d, (size_t)(find(&d, "pptx omega") - d.text)) == 2);
    modattn_doc_text_clear(&d);
    good("sheet.xlsx", MODATTN_DOC_XLSX, "xlsx", &d);
    CHECK_MSG(find(&d, "xlsx alpha phrase\t42\ninline cell text\txlsx omega phrase") != NULL, "[%s]", d.text);
    modattn_doc_text_clear(&d);
    good("memo.odt", MODATTN_DOC_ODT, "odt", &d);
    CHECK_MSG(find(&d, "the memo says\thello") != NULL, "[%s]", d.text);
    modattn_doc_text_clear(&d);
    good("talk.odp", MODATTN_DOC_ODP, "odp", &d);
    CHECK(modattn_doc_text_locate(&d, (size_t)(find(&d, "odp omega") - d.text)) == 2);
    modattn_doc_text_clear(&d);
    good("calc.ods", MODATTN_DOC_ODS, "ods", &d);
    CHECK_MSG(find(&d, "ods alpha phrase\t7\nods omega phrase") != NULL, "[%s]", d.text);
    modattn_doc_text_clear(&d);
    good("zebras.epub", MODATTN_DOC_EPUB, "epub", &d); /* the spine's order: "ch 2" first */
    CHECK(find(&d, "stripes & more") && !find(&d, "color"));
    CHECK(modattn_doc_text_locate(&d, (size_t)(find(&d, "epub omega") - d.text)) == 2);
    modattn_doc_text_clear(&d);
    good("letter.rtf", MODATTN_DOC_RTF, "rtf", &d);
    CHECK_MSG(find(&d, "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac" "euro {braces}") != NULL, "[%s]", d.text);
    CHECK(!find(&d, "Helvetica") && !find(&d, "secret title") && !find(&d, "hidden destination") &&
          !find(&d, "Hand 1.0"));
    modattn_doc_text_clear(&d);
    good("note.eml", MODATTN_DOC_EMAIL, "email", &d);
    CHECK_MSG(find(&d, "From: Zo\xc3\xa9 <zoe@example.org>") && find(&d, "Subject: email alpha phrase caf\xc3\xa9") &&
                  find(&d, "Date: Mon, 1 Jun 2026") &&
                  find(&d, "The coffee shop closes at noon on Sunday, says the plain part.") &&
                  find(&d, "email omega phrase, d\xc3\xa9j\xc3\xa0 vu") && !find(&d, "html alternative") &&
                  find(&d, "[attachment: report.pdf (application/pdf)]"),
              "[%s]", d.text);
    modattn_doc_text_clear(&d);
    good("inbox.mbox", MODATTN_DOC_MBOX, "mbox", &d);
    CHECK(modattn_doc_text_locate(&d, (size_t)(find(&d, "mbox omega") - d.text)) == 2);
    modattn_doc_text_clear(&d);
    good("README.gz", MODATTN_DOC_COMPRESSED, "gz", &d);
    CHECK(d.marks == NULL && modattn_doc_text_locate(&d, (size_t)(find(&d, "gz omega") - d.text)) == 3);
    modattn_doc_text_clear(&d);
    good("notes.txt.bz2", MODATTN_DOC_COMPRESSED, "bz2", NULL);
    good("notes.txt.xz", MODATTN_DOC_COMPRESSED, "xz", NULL);
    if (access("/usr/bin/zstd", X_OK) == 0 || access("/bin/zstd", X_OK) == 0)
        good("notes.txt.zst", MODATTN_DOC_COMPRESSED, "zst", NULL);
    else
        printf("  (no zstd command: the .zst fixture was not made)\n");
    good("large.docx", MODATTN_DOC_DOCX, "large", NULL);
    good("large.epub", MODATTN_DOC_EPUB, "largeepub", NULL);
    good("large.txt.gz", MODATTN_DOC_COMPRESSED, "largegz", NULL);
    good("large.rtf", MODATTN_DOC_RTF, "largertf", NULL);
    good("page.html.gz", MODATTN_DOC_COMPRESSED, "htmlgz", &d);
    CHECK(!find(&d, "x()"));
    modattn_doc_text_clear(&d);
}

static void test_hostile(void) {
    printf("hostile files:\n");
    bad("truncated.docx", MODATTN_DOC_DOCX, CAP, MODATTN_EFORMAT, "DOCX");
    bad("slip.docx", MODATTN_DOC_DOCX, CAP, MODATTN_EFORMAT, "zip slip");
    bad("encrypted.docx", MODATTN_DOC_DOCX, CAP, MODATTN_EFORMAT, "encrypted");
    bad("bomb.docx", MODATTN_DOC_DOCX, CAP, MODATTN_EFORMAT, "XML bomb");
    bad("xxe.odt", MODATTN_DOC_ODT, CAP, MODATTN_EFORMAT, "declares entities");
    bad("bomb.epub", MODATTN_DOC_EPUB, CAP, MODATTN_EFORMAT, "XML bomb");
    bad("zipbomb.docx", MODATTN_DOC_DOCX, (size_t)16 << 20, MODATTN_ERANGE, "--max-file-size");
    bad("bomb.txt.gz", MODATTN_DOC_COMPRESSED, CAP, MODATTN_ERANGE, "decompression bomb");
    bad("truncated.gz", MODATTN_DOC_COMPRESSED, CAP, MODATTN_EFORMAT, "gzip");
    bad("bad1.rtf", MODATTN_DOC_RTF, CAP, MODATTN_EFORMAT, "nested deeper");
    bad("bad2.rtf", MODATTN_DOC_RTF, CAP, MODATTN_EFORMAT, "closes no group");
    bad("notrtf.rtf", MODATTN_DOC_RTF, CAP, MODATTN_EFORMAT, "does not start");
    bad("bundle.zip", MODATTN_DOC_DOCX, CAP, MODATTN_EFORMAT, "no word/document.xml");
    const char *trail = "{\\rtf1 body words}} trailing words";
    modattn_doc_text d;
    CHECK(modattn__fmt_extract(MODATTN_DOC_RTF, trail, strlen(trail), CAP, &d) == 0 && find(&d, "body words") &&
          !find(&d, "trailing"));
    modattn_doc_text_clear(&d);
    size_t len;
    char *buf = slurp("bad3.rtf", &len); /* cut inside a control word: whatever it gives, no crash */
    if (buf && modattn__fmt_extract(MODATTN_DOC_RTF, buf, len, CAP, &d) == 0) modattn_doc_text_clear(&d);
    free(buf);
    /* the bombs through the child, as the indexer runs them: a reason, in bounded time */
    static const struct {
        const char *name;
        modattn_doc_kind kind;
    } iso[] = {{"bomb.txt.gz", MODATTN_DOC_COMPRESSED}, {"zipbomb.docx", MODATTN_DOC_DOCX}};
    for (size_t i = 0; i < 2; i++) {
        buf = slurp(iso[i].name, &len);
        modattn__extract_limits lim = {128u << 20, 20.0, (size_t)32 << 20, NULL, NULL};
        double t0 = now_s();
        int st = modattn__extract_isolated(iso[i].kind, buf, len, &lim, &d, NULL);
        CHECK_ERR(st, MODATTN_ERANGE, "--max-file-size");
        printf("  %-16s in the child (cap 32 MiB, 128 MiB memory): refused in %.1f ms: %s\n", iso[i].name,
               (now_s() - t0) * 1e3, modattn_last_error());
        free(buf);
    }
}

static void test_sniff(void) {
    static const struct {
        const char *fixture, *as;
        modattn_doc_kind kind;
    } k[] = {
        {"budget.docx", "budget", MODATTN_DOC_DOCX},   /* by its parts, no name needed */
        {"memo.odt", "memo", MODATTN_DOC_ODT},         /* by its mimetype member */
        {"zebras.epub", "book", MODATTN_DOC_EPUB},
        {"calc.ods", "calc", MODATTN_DOC_ODS},
        {"letter.rtf", "letter.txt", MODATTN_DOC_RTF}, /* by "{\rtf" */
        {"note.eml", "message", MODATTN_DOC_EMAIL},   /* by its headers */
        {"inbox.mbox", "mbox", MODATTN_DOC_MBOX},
        {"README.gz", "README.gz", MODATTN_DOC_COMPRESSED},
        {"bundle.zip", "bundle.zip", MODATTN_DOC_BINARY},
        {"bundle.tar.gz", "bundle.tar.gz", MODATTN_DOC_BINARY},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        size_t len;
        char *buf = slurp(k[i].fixture, &len);
        modattn_doc_kind got = modattn_sniff_kind(k[i].as, (const unsigned char *)buf, len);
        CHECK_MSG(got == k[i].kind, "%s as %s: %s", k[i].fixture, k[i].as, modattn_doc_kind_name(got));
        free(buf);
    }
    size_t len;
    char *buf = slurp("bundle.zip", &len);
    CHECK(strcmp(modattn__sniff_unsupported("bundle.zip", (const unsigned char *)buf, len),
                 "a ZIP archive (not read)") == 0);
    CHECK(modattn_archive_sniff("bundle.zip", (const unsigned char *)buf, len));
    free(buf);
    buf = slurp("bundle.tar.gz", &len);
    CHECK(strstr(modattn__sniff_unsupported("x/bundle.tar.gz", (const unsigned char *)buf, len), "compressed TAR"));
    CHECK(modattn_archive_sniff("bundle.tar.gz", (const unsigned char *)buf, len));
    free(buf);
    CHECK(strstr(modattn__sniff_unsupported("a.png", (const unsigned char *)"\x89PNG\r\n\x1a\n....", 12), "PNG image"));
    CHECK(strstr(modattn__sniff_unsupported("a.doc", (const unsigned char *)"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 8),
                 "legacy Microsoft Office"));
    CHECK(strcmp(modattn__sniff_unsupported("r.bin", (const unsigned char *)"\x01\x02\x03\x04", 4), "binary file") == 0);
    /* plain text stays text: prose that starts with "From " and no headers after it, a .txt of headers */
    const char *prose = "From the start, this was a plain note.\nNothing else.\n";
    CHECK(modattn_sniff_kind("notes", (const unsigned char *)prose, strlen(prose)) == MODATTN_DOC_TEXT);
    const char *hdrs = "From: a\nSubject: b\n\nbody\n";
    CHECK(modattn_sniff_kind("mail.txt", (const unsigned char *)hdrs, strlen(hdrs)) == MODATTN_DOC_TEXT);
    CHECK(strcmp(modattn_doc_kind_name(MODATTN_DOC_DOCX), "docx") == 0);
    CHECK(MODATTN_DOC_PDF == 4 && MODATTN_DOC_DOCX == 5); /* the old values are kept */
}

typedef struct listing {
    char names[16][128];
    uint64_t sizes[16];
    bool arch[16];
    int n;
} listing;

static int on_member(void *ud, const modattn_archive_member *m) {
    listing *l = ud;
    if (l->n < 16) {
        snprintf(l->names[l->n], sizeof l->names[0], "%s", m->name);
        l->sizes[l->n] = m->size;
        l->arch[l->n] = m->is_archive;
        l->n++;
    }
    return 0;
}

/* modattn__archive_each, as the indexer's walk sees an archive: each member with its bytes, or
 * with why it is not read (the walk goes on) */
typedef struct each_log {
    char names[16][64];
    char data[16][64];
    char why[16][160];
    int n;
} each_log;

static int on_each(void *ud, const char *name, const char *data, size_t n, const char *why) {
    each_log *l = ud;
    if (l->n < 16) {
        snprintf(l->names[l->n], sizeof l->names[0], "%s", name);
        snprintf(l->data[l->n], sizeof l->data[0], "%.*s", data ? (int)(n < 63 ? n : 63) : 0, data ? data : "");
        snprintf(l->why[l->n], sizeof l->why[0], "%s", why ? why : "");
        l->n++;
    }
    return 0;
}

static void test_archive_each(void) {
    size_t len;
    char *buf = slurp("bundle.zip", &len);
    each_log l = {0};
    CHECK(modattn__archive_each(buf, len, 1 << 20, on_each, &l) == 0);
    CHECK_MSG(l.n == 3 && strcmp(l.names[0], "inner/file.txt") == 0 && strcmp(l.data[0], "archive member phrase") == 0 &&
                  !l.why[0][0] && strcmp(l.names[2], "top.md") == 0 && strcmp(l.data[2], "# top") == 0,
              "%d members, first %s: %s", l.n, l.names[0], l.data[0]);
    each_log c = {0}; /* a member past the cap: said, the walk goes on */
    CHECK(modattn__archive_each(buf, len, 10, on_each, &c) == 0);
    CHECK_MSG(c.n == 3 && strstr(c.why[0], "--max-file-size") && strcmp(c.data[2], "# top") == 0, "%d: %s", c.n, c.why[0]);
    free(buf);
    /* zip slip: the escaping member refused by name, the good one read */
    buf = slurp("slip.zip", &len);
    each_log s = {0};
    CHECK(modattn__archive_each(buf, len, 1 << 20, on_each, &s) == 0);
    CHECK_MSG(s.n == 2 && strcmp(s.names[0], "ok.txt") == 0 && strcmp(s.data[0], "fine") == 0 &&
                  strstr(s.why[1], "zip slip"), "%d: %s %s", s.n, s.names[1], s.why[1]);
    free(buf);
    buf = slurp("encrypted.zip", &len);
    each_log e = {0};
    CHECK(modattn__archive_each(buf, len, 1 << 20, on_each, &e) == 0);
    CHECK_MSG(e.n >= 1 && strstr(e.why[0], "encrypted"), "%d: %s", e.n, e.why[0]);
    free(buf);
    buf = slurp("bundle.tar.gz", &len);
    each_log t = {0};
    CHECK(modattn__archive_each(buf, len, 1 << 20, on_each, &t) == 0 && t.n == 1 &&
          strcmp(t.data[0], "tar member phrase") == 0);
    each_log tr = {0}; /* truncated: an error, after what came before */
    CHECK_ERR(modattn__archive_each(buf, len / 2, 1 << 20, on_each, &tr), MODATTN_EFORMAT, "archive");
    free(buf);
}

/* modattn__walk_isolated (the walk in the extraction child) gives exactly what the walkers give in
 * process: the same members, bytes, reasons, return and message */
static int walk_same(modattn__walk_kind kind, const char *buf, size_t len, size_t cap, const char *what) {
    static const modattn__extract_limits lim = {1ull << 30, 30, 1 << 20, NULL, NULL};
    each_log a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int sa = kind == MODATTN__WALK_ARCHIVE ? modattn__archive_each(buf, len, cap, on_each, &a)
                                           : modattn__mail_each_attachment(buf, len, cap, kind == MODATTN__WALK_MBOX,
                                                                           on_each, &a);
    char ma[512];
    snprintf(ma, sizeof ma, "%s", sa ? modattn_last_error() : "");
    bool stopped = true;
    int sb = modattn__walk_isolated(kind, buf, len, cap, &lim, on_each, &b, &stopped);
    const char *mb = sb ? modattn_last_error() : "";
    CHECK_MSG(sa == sb && strcmp(ma, mb) == 0 && !stopped && memcmp(&a, &b, sizeof a) == 0,
              "%s: in process %d (%s), %d members; in the child %d (%s), %d members", what, sa, ma, a.n, sb, mb, b.n);
    return a.n;
}

static void test_walk_isolated(void) {
    static const char *const zips[] = {"bundle.zip", "slip.zip", "encrypted.zip", "bundle.tar.gz"};
    for (size_t i = 0; i < sizeof zips / sizeof *zips; i++) {
        size_t len;
        char *buf = slurp(zips[i], &len);
        CHECK(walk_same(MODATTN__WALK_ARCHIVE, buf, len, 1 << 20, zips[i]) >= 1);
        walk_same(MODATTN__WALK_ARCHIVE, buf, len, 10, zips[i]);        /* members past the cap */
        walk_same(MODATTN__WALK_ARCHIVE, buf, len / 2, 1 << 20, zips[i]); /* truncated */
        free(buf);
    }
    size_t len;
    char *buf = slurp("note.eml", &len);
    CHECK(walk_same(MODATTN__WALK_MAIL, buf, len, 1 << 20, "note.eml") >= 1); /* report.pdf */
    free(buf);
    buf = slurp("inbox.mbox", &len);
    walk_same(MODATTN__WALK_MBOX, buf, len, 1 << 20, "inbox.mbox");
    free(buf);
}

static void test_archive(void) {
    size_t len;
    char *buf = slurp("bundle.zip", &len);
    listing l = {0};
    CHECK(modattn_archive_list(buf, len, on_member, &l) == 0);
    CHECK_MSG(l.n == 3 && strcmp(l.names[0], "inner/file.txt") == 0 && l.sizes[0] == 21 && !l.arch[0] &&
                  strcmp(l.names[1], "inner/b.zip") == 0 && l.arch[1] && strcmp(l.names[2], "top.md") == 0,
              "%d members, first %s (%llu)", l.n, l.names[0], (unsigned long long)l.sizes[0]);
    char *m;
    size_t ml;
    CHECK(modattn_archive_read(buf, len, "inner/file.txt", 1 << 20, &m, &ml) == 0 && ml == 21 &&
          strcmp(m, "archive member phrase") == 0);
    modattn_free(m);
    CHECK_ERR(modattn_archive_read(buf, len, "inner/file.txt", 5, &m, &ml), MODATTN_ERANGE, "--max-file-size");
    CHECK_ERR(modattn_archive_read(buf, len, "nope.txt", 1 << 20, &m, &ml), MODATTN_EINVAL, "no file");
    /* the nested zip, read and listed in turn (depth 2) */
    CHECK(modattn_archive_read(buf, len, "inner/b.zip", 1 << 20, &m, &ml) == 0);
    listing l2 = {0};
    CHECK(modattn_archive_list(m, ml, on_member, &l2) == 0 && l2.n == 1 && strcmp(l2.names[0], "deep.txt") == 0);
    modattn_free(m);
    free(buf);
    buf = slurp("bundle.tar.gz", &len);
    listing l3 = {0};
    CHECK(modattn_archive_list(buf, len, on_member, &l3) == 0 && l3.n == 1 && strcmp(l3.names[0], "docs/file.txt") == 0);
    CHECK(modattn_archive_read(buf, len, "docs/file.txt", 1 << 20, &m, &ml) == 0 && strcmp(m, "tar member phrase") == 0);
    modattn_free(m);
    listing l4 = {0};
    CHECK_ERR(modattn_archive_list(buf, len / 2, on_member, &l4), MODATTN_EFORMAT, "archive");
    free(buf);
    /* hostile: nothing handed out before the refusal */
    buf = slurp("slip.zip", &len);
    listing l5 = {0};
    CHECK_ERR(modattn_archive_list(buf, len, on_member, &l5), MODATTN_EFORMAT, "zip slip");
    CHECK(l5.n == 0);
    CHECK_ERR(modattn_archive_read(buf, len, "ok.txt", 1 << 20, &m, &ml), MODATTN_EFORMAT, "zip slip");
    free(buf);
    buf = slurp("encrypted.zip", &len);
    CHECK_ERR(modattn_archive_list(buf, len, on_member, &l5), MODATTN_EFORMAT, "encrypted");
    free(buf);
    buf = slurp("truncated.docx", &len);
    CHECK_ERR(modattn_archive_list(buf, len, on_member, &l5), MODATTN_EFORMAT, "");
    free(buf);
    buf = slurp("bomb.txt.gz", &len); /* not an archive: gzip of spaces */
    CHECK_ERR(modattn_archive_list(buf, len, on_member, &l5), MODATTN_EFORMAT, "");
    free(buf);
    /* the path rule */
    char *j = modattn_archive_join("/docs/a.zip", "inner/file.txt");
    CHECK(j && strcmp(j, "/docs/a.zip!/inner/file.txt") == 0);
    char *a, *mem;
    CHECK(modattn_archive_split(j, &a, &mem) == 1 && strcmp(a, "/docs/a.zip") == 0 && strcmp(mem, "inner/file.txt") == 0);
    modattn_free(a);
    modattn_free(mem);
    modattn_free(j);
    CHECK(modattn_archive_split("/docs/plain.txt", &a, &mem) == 0 && !a && !mem);
    CHECK(modattn_archive_split("a.zip!/in/b.zip!/x.txt", &a, &mem) == 1 && strcmp(mem, "in/b.zip!/x.txt") == 0);
    modattn_free(a);
    modattn_free(mem);
    CHECK_ERR(modattn_archive_split("nested.zip!/b.zip!/c.zip!/x.txt", &a, &mem), MODATTN_EFORMAT, "nested 3 deep");
    CHECK_ERR(modattn_archive_split("a.zip!/../etc/passwd", &a, &mem), MODATTN_EFORMAT, "escapes");
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/modattn-formats-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "python3 tests/pipeline/make_format_fixtures.py %s", g_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "the fixtures could not be made (%s)\n", cmd);
        return 1;
    }
    test_sniff();
    test_good();
    test_hostile();
    test_archive();
    test_archive_each();
    test_walk_isolated();
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_finish("test_formats");
}
