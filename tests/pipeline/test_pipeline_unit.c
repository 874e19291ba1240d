/* tests/pipeline/test_pipeline_unit.c — the pieces of the indexing pipeline one by one: UTF-8
 * repair (against Python's errors="replace"), file-kind sniffing, HTML and PDF text extraction,
 * chunk byte ranges (against the tokenizer on the whole text), the top-k scan on every instruction
 * set (against an fp64 brute force), and the SQLite store (model binding, transactions, schema
 * versions, foreign files). Runs from the repository root (the model's tokenizer.json is read from
 * .models/all-MiniLM-L6-v2: `tools/setup_model.sh` puts it there). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "pipeline/internal_ingest.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"
#include "pipeline/pipeline_internal.h"
#include "backends/isa_expect.h"
#include "test_util.h"
#include "sweep.h"

#define TOKENIZER_JSON ".models/all-MiniLM-L6-v2/tokenizer.json"

/* ------------------------------------------------------------------ UTF-8 */

static void test_utf8(void) {
    /* expected outputs: bytes.decode("utf-8", "replace").encode() in Python 3.11 */
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"abc", "abc"},
        {"\xff", "\xef\xbf\xbd"},
        {"\xe2\x82" "a", "\xef\xbf\xbd" "a"},
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf0\x9f\x98", "\xef\xbf\xbd"},
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
        {"a\xf4\x90\x80\x80" "b", "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b"},
        {"\xe0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"caf\xc3\xa9", "caf\xc3\xa9"},
        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
        {"\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xe2\x82\xac\xe2", "\xe2\x82\xac\xef\xbf\xbd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = 0;
        char *s = modattn__utf8_sanitize(cases[i].in, strlen(cases[i].in), &n);
        CHECK_MSG(s && n == strlen(cases[i].out) && memcmp(s, cases[i].out, n) == 0,
                  "utf8 case %zu", i);
        CHECK(modattn__utf8_valid(cases[i].in, strlen(cases[i].in)) ==
              (strcmp(cases[i].in, cases[i].out) == 0));
        CHECK(s && modattn__utf8_valid(s, n));
        modattn_free(s);
    }
    /* UTF-16 with a BOM: bytes.decode("utf-16", "replace").encode() in Python 3.11 */
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } u16[] = {
        {"\xff\xfeh\0i\0", 6, "hi"},
        {"\xfe\xff\0h\0i", 6, "hi"},
        {"\xff\xfe", 2, ""},
        {"\xff\xfe\x00\xd8" "a\0", 6, "\xef\xbf\xbd" "a"},          /* lone high surrogate */
        {"\xff\xfe\x00\xdc", 4, "\xef\xbf\xbd"},                    /* lone low surrogate */
        {"\xff\xfe" "a\0b", 5, "a\xef\xbf\xbd"},                     /* odd last byte */
        {"\xff\xfe=\xd8\x00\xde", 6, "\xf0\x9f\x98\x80"},            /* a pair */
        {"\xff\xfe\x00\xd8", 4, "\xef\xbf\xbd"},                    /* high at the end */
        {"\xff\xfe\x00\xd8" "a", 5, "\xef\xbf\xbd"},                /* ... and an odd byte: one */
        {"\xff\xfe\x00\xd8=\xd8\x00\xde", 8, "\xef\xbf\xbd\xf0\x9f\x98\x80"},
        {"\xfe\xff\xd8=\xde\x00\x00\xe9", 8, "\xf0\x9f\x98\x80\xc3\xa9"},
        {"\xff\xfe\xac\x20\0\0", 6, "\xe2\x82\xac\0"},               /* U+0000 is kept */
    };
    for (size_t i = 0; i < sizeof u16 / sizeof *u16; i++) {
        size_t n = 99, want = strlen(u16[i].out) + (i == 11);
        CHECK(modattn__utf16_bom(u16[i].in, u16[i].len) == (u16[i].in[0] == '\xff' ? 1 : 2));
        char *s = modattn__utf16_to_utf8(u16[i].in, u16[i].len, &n);
        CHECK_MSG(s && n == want && memcmp(s, u16[i].out, n) == 0 && s[n] == 0, "utf16 case %zu", i);
        modattn_free(s);
    }
    CHECK(modattn__utf16_bom("ab", 2) == 0 && modattn__utf16_bom("\xff", 1) == 0);
    CHECK(modattn__utf16_to_utf8("abcd", 4, NULL) == NULL && strstr(modattn_last_error(), "byte order mark"));
    CHECK(modattn__utf8_valid("", 0));
    /* a NUL inside is valid UTF-8 */
    CHECK(modattn__utf8_valid("a\0b", 3));
}

/* ------------------------------------------------------------------ sniffing */

static void test_sniff(void) {
    const unsigned char *txt = (const unsigned char *)"Hello, world.\nSecond line\n";
    size_t tl = strlen((const char *)txt);
    CHECK(modattn_sniff_kind("a.txt", txt, tl) == MODATTN_DOC_TEXT);
    CHECK(modattn_sniff_kind("notes", txt, tl) == MODATTN_DOC_TEXT);
    CHECK(modattn_sniff_kind("dir.d/README.MD", txt, tl) == MODATTN_DOC_MARKDOWN);
    CHECK(modattn_sniff_kind("x/page.HTM", txt, tl) == MODATTN_DOC_HTML);
    CHECK(modattn_sniff_kind("x/page.xhtml", txt, tl) == MODATTN_DOC_HTML);
    const unsigned char *h = (const unsigned char *)"\n  <!DOCTYPE html><html><body>x</body></html>";
    CHECK(modattn_sniff_kind("page", h, strlen((const char *)h)) == MODATTN_DOC_HTML);
    CHECK(modattn_sniff_kind("doc.bin", (const unsigned char *)"%PDF-1.4\n", 9) == MODATTN_DOC_PDF);
    CHECK(modattn_sniff_kind("doc.pdf", (const unsigned char *)"garbage", 7) == MODATTN_DOC_PDF);
    /* binary: a NUL, or too many control bytes / bad UTF-8 */
    CHECK(modattn_sniff_kind("a.txt", (const unsigned char *)"ab\0cd", 5) == MODATTN_DOC_BINARY);
    CHECK(modattn_sniff_kind("a.html", (const unsigned char *)"ab\0cd", 5) == MODATTN_DOC_BINARY);
    unsigned char rnd[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof rnd; i++) {
        x = x * 1103515245u + 12345u;
        rnd[i] = (unsigned char)((x >> 16) | 0x80); /* high bytes, no NUL: ill-formed UTF-8 */
    }
    CHECK(modattn_sniff_kind("r.dat", rnd, sizeof rnd) == MODATTN_DOC_BINARY);
    /* UTF-16 without a byte order mark has NULs; with one it is judged decoded */
    CHECK(modattn_sniff_kind("u.txt", (const unsigned char *)"h\0i\0", 4) == MODATTN_DOC_BINARY);
    CHECK(modattn_sniff_kind("u.txt", (const unsigned char *)"\xff\xfeh\0i\0", 6) == MODATTN_DOC_TEXT);
    CHECK(modattn_sniff_kind("u", (const unsigned char *)"\xfe\xff\0<\0h\0t\0m\0l\0>", 14) ==
          MODATTN_DOC_HTML);
    CHECK(modattn_sniff_kind("u.txt", (const unsigned char *)"\xff\xfe\x01\0\x02\0\x03\0", 8) ==
          MODATTN_DOC_BINARY); /* control characters, decoded */
    CHECK(modattn_sniff_kind("u.txt", (const unsigned char *)"\xff\xfe" "a\0\0\0", 6) ==
          MODATTN_DOC_BINARY); /* U+0000 */
    /* a few invalid bytes in prose (Latin-1 accents) still make text */
    const char *latin = "Caf\xe9 au lait, cr\xe8me br\xfbl\xe9" "e, and a long enough sentence.";
    CHECK(modattn_sniff_kind("l.txt", (const unsigned char *)latin, strlen(latin)) ==
          MODATTN_DOC_TEXT);
    /* a UTF-8 character cut by the end of the sample is not held against the file */
    CHECK(modattn_sniff_kind("c.txt", (const unsigned char *)"ab\xe2\x82", 4) == MODATTN_DOC_TEXT);
    CHECK(strcmp(modattn_doc_kind_name(MODATTN_DOC_PDF), "pdf") == 0);
}

/* ------------------------------------------------------------------ HTML */

static char *html_text(const char *html, modattn_doc_text *d) {
    int st = modattn_extract_html(html, strlen(html), d);
    CHECK_MSG(st == 0, "extract_html: %s", modattn_last_error());
    return st ? NULL : d->text;
}

static void expect_html(const char *html, const char *want) {
    modattn_doc_text d;
    char *t = html_text(html, &d);
    CHECK_MSG(t && strcmp(t, want) == 0, "html\n  in:   %s\n  got:  [%s]\n  want: [%s]", html,
              t ? t : "(null)", want);
    modattn_doc_text_clear(&d);
}

static void test_html(void) {
    expect_html("<html><head><title>T</title><style>p{color:red}</style>"
                "<script>var a = '<p>no</p>';</script></head>"
                "<body><h1>Head &amp; shoulders</h1><p>One <b>bold</b> word.</p>"
                "<!-- a comment --><p>Caf&eacute; &lt;3 &#x263A; &nbsp;x</p></body></html>",
                "T\n\nHead & shoulders\n\nOne bold word.\n\nCaf\xc3\xa9 <3 \xe2\x98\xba x");
    /* hidden elements, display:none, noscript, template */
    expect_html("<body><p>seen</p><div hidden>not seen</div>"
                "<div style=\"color: red; DISPLAY : None\">nor this</div>"
                "<noscript>no</noscript><template><p>t</p></template><p>end</p></body>",
                "seen\n\nend");
    /* whitespace collapses; pre keeps it */
    expect_html("<p>  a \n\t b  </p><pre>x  y\n  z</pre><p>c</p>", "a b\n\nx  y\n  z\n\nc");
    /* inline elements do not split words; block elements do */
    expect_html("<div>ab<span>cd</span></div><div>ef</div>", "abcd\nef");
    expect_html("<ul><li>one</li><li>two</li></ul>", "one\ntwo");
    expect_html("<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>",
                "a\tb\nc\td");
    expect_html("line one<br>line two", "line one\nline two");
    /* tag soup: unclosed tags, stray end tags */
    expect_html("<p>first<p>second</i></b><div>third", "first\n\nsecond\n\nthird");
    /* no markup at all; empty; only a script */
    expect_html("just text", "just text");
    expect_html("", "");
    expect_html("<script>x()</script>", "");
    /* UTF-8 without a declaration, and Latin-1 with one */
    expect_html("<p>na\xc3\xafve \xe2\x82\xac</p>", "na\xc3\xafve \xe2\x82\xac");
    expect_html("<html><head><meta charset=\"iso-8859-1\"></head><body><p>caf\xe9</p></body></html>",
                "caf\xc3\xa9");
    /* source lines: the text of line 4 is marked with line 4 */
    modattn_doc_text d;
    char *t = html_text("<html>\n<body>\n<p>alpha</p>\n<p>beta</p>\n</body></html>", &d);
    if (t) {
        const char *b = strstr(t, "beta");
        CHECK(b != NULL);
        CHECK(modattn_doc_text_locate(&d, 0) == 3);
        if (b) CHECK_MSG(modattn_doc_text_locate(&d, (size_t)(b - t)) == 4, "line of beta: %lld",
                         (long long)modattn_doc_text_locate(&d, (size_t)(b - t)));
    }
    modattn_doc_text_clear(&d);
    /* deep trees: 1000 levels keep their text; 20000 levels do not crash */
    size_t depth = 1000;
    char *deep = malloc(depth * 5 + 16);
    size_t o = 0;
    for (size_t i = 0; i < depth; i++) o += (size_t)sprintf(deep + o, "<div>");
    o += (size_t)sprintf(deep + o, "deep");
    deep[o] = '\0';
    t = html_text(deep, &d);
    CHECK(t && strstr(t, "deep"));
    modattn_doc_text_clear(&d);
    free(deep);
    depth = 20000;
    deep = malloc(depth * 5 + 16);
    o = 0;
    for (size_t i = 0; i < depth; i++) o += (size_t)sprintf(deep + o, "<div>");
    o += (size_t)sprintf(deep + o, "deep");
    modattn_doc_text_clear(&d);
    CHECK(modattn_extract_html(deep, o, &d) == 0);
    modattn_doc_text_clear(&d);
    free(deep);
}

/* ------------------------------------------------------------------ PDF */

/* A two-page PDF with Helvetica text, its xref table computed. */
static size_t make_pdf(char *buf, size_t cap, const char *p1, const char *p2) {
    size_t off[9], o = 0;
    char s1[256], s2[256];
    snprintf(s1, sizeof s1, "BT /F1 18 Tf 72 700 Td (%s) Tj ET", p1);
    snprintf(s2, sizeof s2, "BT /F1 18 Tf 72 700 Td (%s) Tj ET", p2);
    o += (size_t)snprintf(buf + o, cap - o, "%%PDF-1.4\n");
    off[1] = o;
    o += (size_t)snprintf(buf + o, cap - o, "1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
    off[2] = o;
    o += (size_t)snprintf(buf + o, cap - o,
                          "2 0 obj\n<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>\nendobj\n");
    off[3] = o;
    o += (size_t)snprintf(buf + o, cap - o,
                          "3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                          "/Contents 4 0 R /Resources << /Font << /F1 7 0 R >> >> >>\nendobj\n");
    off[4] = o;
    o += (size_t)snprintf(buf + o, cap - o, "4 0 obj\n<< /Length %zu >>\nstream\n%s\nendstream\nendobj\n",
                          strlen(s1), s1);
    off[5] = o;
    o += (size_t)snprintf(buf + o, cap - o,
                          "5 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                          "/Contents 6 0 R /Resources << /Font << /F1 7 0 R >> >> >>\nendobj\n");
    off[6] = o;
    o += (size_t)snprintf(buf + o, cap - o, "6 0 obj\n<< /Length %zu >>\nstream\n%s\nendstream\nendobj\n",
                          strlen(s2), s2);
    off[7] = o;
    o += (size_t)snprintf(buf + o, cap - o,
                          "7 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\nendobj\n");
    size_t xref = o;
    o += (size_t)snprintf(buf + o, cap - o, "xref\n0 8\n0000000000 65535 f \n");
    for (int i = 1; i <= 7; i++) o += (size_t)snprintf(buf + o, cap - o, "%010zu 00000 n \n", off[i]);
    o += (size_t)snprintf(buf + o, cap - o,
                          "trailer\n<< /Size 8 /Root 1 0 R >>\nstartxref\n%zu\n%%%%EOF\n", xref);
    return o;
}

static void test_pdf(void) {
    char pdf[4096];
    size_t n = make_pdf(pdf, sizeof pdf, "Hello PDF page one", "Second page text");
    modattn_doc_text d;
    int st = modattn_extract_pdf(pdf, n, &d);
    CHECK_MSG(st == 0, "extract_pdf: %s", modattn_last_error());
    if (st == 0) {
        const char *a = strstr(d.text, "Hello PDF page one");
        const char *b = strstr(d.text, "Second page text");
        CHECK_MSG(a && b && a < b, "pdf text: [%s]", d.text);
        CHECK(d.pages);
        if (a) CHECK(modattn_doc_text_locate(&d, (size_t)(a - d.text)) == 1);
        if (b) CHECK(modattn_doc_text_locate(&d, (size_t)(b - d.text)) == 2);
    }
    modattn_doc_text_clear(&d);
    /* not a PDF at all, and a truncated one */
    CHECK_ERR(modattn_extract_pdf("%PDF-1.4\ngarbage", 16, &d), MODATTN_EFORMAT, "PDF");
    modattn_doc_text_clear(&d);
    CHECK(modattn_extract_pdf(pdf, 40, &d) != 0);
    modattn_doc_text_clear(&d);
}

/* ------------------------------------------------------------------ extraction in a child */

static bool same_text(const modattn_doc_text *a, const modattn_doc_text *b) {
    return a->len == b->len && !memcmp(a->text, b->text, a->len) && a->text[a->len] == '\0' &&
           a->nmarks == b->nmarks && a->pages == b->pages &&
           (!a->nmarks || !memcmp(a->marks, b->marks, a->nmarks * sizeof *a->marks));
}

static int cancel_now(void *ud) {
    (*(int *)ud)++;
    return 1;
}

/* A lock another thread holds across the fork (as the indexer's embedding thread or an OpenCL
 * runtime's worker may hold one of the allocator's): the child's copy is never released. The hook
 * takes it in the first g_stall->limit children (counted across processes in shared memory). */
typedef struct stall_share {
    int forked, limit;
} stall_share;
static stall_share *g_stall;
static pthread_mutex_t g_held = PTHREAD_MUTEX_INITIALIZER;
static void stall_hook(void) {
    if (__atomic_fetch_add(&g_stall->forked, 1, __ATOMIC_SEQ_CST) < g_stall->limit) pthread_mutex_lock(&g_held);
}
/* A lock that yields rather than sleeps (AddressSanitizer's spin locks call sched_yield): the
 * first g_stall->limit children spin in the kernel for ever. */
static void spin_hook(void) {
    if (__atomic_fetch_add(&g_stall->forked, 1, __ATOMIC_SEQ_CST) < g_stall->limit)
        for (;;) sched_yield();
}
static void *hold_lock(void *arg) {
    pthread_mutex_lock(&g_held);
    while (!__atomic_load_n((int *)arg, __ATOMIC_SEQ_CST)) usleep(1000);
    pthread_mutex_unlock(&g_held);
    return NULL;
}

/* The stall watch: a child waiting on an inherited lock is replaced in about
 * modattn__extract_stall_s, not left to --file-timeout; one that stalls every time says so. */
static void test_extract_stalled(void) {
    const modattn__extract_limits lim = {256u << 20, 60.0, 64u << 20, NULL, NULL};
    const char *html = "<p>after a stalled child</p>";
    g_stall = mmap(NULL, sizeof *g_stall, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(g_stall != MAP_FAILED);
    if (g_stall == MAP_FAILED) return;
    int release = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, hold_lock, &release) == 0);
    while (pthread_mutex_trylock(&g_held) == 0) { /* until the thread holds it */
        pthread_mutex_unlock(&g_held);
        usleep(1000);
    }
    const double saved = modattn__extract_stall_s;
    modattn__extract_stall_s = 0.5;
    modattn__extract_child_hook = stall_hook;
    modattn_doc_text a, b;
    bool stopped = false;
    CHECK(modattn_extract_html(html, strlen(html), &a) == 0);
    /* the first child stalls, the second answers: the text as in-process, long before 60 s */
    *g_stall = (stall_share){0, 1};
    uint64_t t0 = modattn__now_ns();
    int st = modattn__extract_isolated(MODATTN_DOC_HTML, html, strlen(html), &lim, &b, &stopped);
    double secs = (double)(modattn__now_ns() - t0) * 1e-9;
    CHECK_MSG(st == 0 && same_text(&a, &b), "after one stalled child: %s", st ? modattn_last_error() : "other text");
    CHECK_MSG(g_stall->forked == 2, "after one stalled child: %d children", g_stall->forked);
    CHECK_MSG(secs >= 0.5 && secs < 20, "one stalled child took %.1f s to replace (watch 0.5 s)", secs);
    modattn_doc_text_clear(&b);
    /* every child stalls: the reason, after MODATTN__EXTRACT_TRIES children */
    *g_stall = (stall_share){0, 1000};
    t0 = modattn__now_ns();
    CHECK_ERR(modattn__extract_isolated(MODATTN_DOC_HTML, html, strlen(html), &lim, &b, &stopped), MODATTN_ERANGE,
              "extraction process stalled");
    secs = (double)(modattn__now_ns() - t0) * 1e-9;
    CHECK_MSG(g_stall->forked == MODATTN__EXTRACT_TRIES, "every child stalled: %d children", g_stall->forked);
    CHECK_MSG(strstr(modattn_last_error(), "3 times") != NULL, "the reason: %s", modattn_last_error());
    CHECK_MSG(secs < 40, "three stalled children took %.1f s", secs);
    /* a child spinning on a yielding lock: replaced too, with its own reason when every child spins */
    modattn__extract_child_hook = spin_hook;
    *g_stall = (stall_share){0, 1};
    t0 = modattn__now_ns();
    st = modattn__extract_isolated(MODATTN_DOC_HTML, html, strlen(html), &lim, &b, &stopped);
    secs = (double)(modattn__now_ns() - t0) * 1e-9;
    CHECK_MSG(st == 0 && same_text(&a, &b), "after one spinning child: %s", st ? modattn_last_error() : "other text");
    CHECK_MSG(g_stall->forked == 2, "after one spinning child: %d children", g_stall->forked);
    CHECK_MSG(secs >= 0.5 && secs < 20, "one spinning child took %.1f s to replace (watch 0.5 s)", secs);
    modattn_doc_text_clear(&b);
    *g_stall = (stall_share){0, 1000};
    CHECK_ERR(modattn__extract_isolated(MODATTN_DOC_HTML, html, strlen(html), &lim, &b, &stopped), MODATTN_ERANGE,
              "spinning");
    CHECK_MSG(g_stall->forked == MODATTN__EXTRACT_TRIES, "every child spun: %d children", g_stall->forked);
    CHECK_MSG(strstr(modattn_last_error(), "in the kernel without progress") && strstr(modattn_last_error(), "3 times"),
              "the reason: %s", modattn_last_error());
    modattn__extract_child_hook = stall_hook;
    /* no watch (0): the time limit ends it, as before */
    modattn__extract_stall_s = 0;
    *g_stall = (stall_share){0, 1000};
    modattn__extract_limits quick = lim;
    quick.timeout_s = 1.0;
    CHECK_ERR(modattn__extract_isolated(MODATTN_DOC_HTML, html, strlen(html), &quick, &b, &stopped), MODATTN_ERANGE,
              "took longer than --file-timeout 1 s");
    modattn__extract_child_hook = NULL;
    modattn__extract_stall_s = saved;
    __atomic_store_n(&release, 1, __ATOMIC_SEQ_CST);
    pthread_join(th, NULL);
    modattn_doc_text_clear(&a);
    munmap(g_stall, sizeof *g_stall);
}

/* modattn__extract_isolated (pipeline/extract.c): the in-process result bit for bit, the
 * extractor's errors as they were, and each limit as a reason that names it. */
static void test_extract_isolated(void) {
    const modattn__extract_limits lim = {256u << 20, 20.0, 64u << 20, NULL, NULL};
    const char *htmls[] = {
        "<html><body><h1>Head &amp; shoulders</h1><p>One <b>bold</b> word.</p><pre>x  y\n  z</pre></body></html>",
        "<table><tr><td>a</td><td>b</td></tr></table>\n\n\n<p>line 4</p>",
        "   ",
        "",
    };
    for (size_t i = 0; i < sizeof htmls / sizeof *htmls; i++) {
        modattn_doc_text a, b;
        bool stopped = true;
        int s1 = modattn_extract_html(htmls[i], strlen(htmls[i]), &a);
        int s2 = modattn__extract_isolated(MODATTN_DOC_HTML, htmls[i], strlen(htmls[i]), &lim, &b, &stopped);
        CHECK_MSG(s1 == 0 && s2 == 0 && !stopped, "html %zu: %d %d: %s", i, s1, s2, modattn_last_error());
        if (!s1 && !s2) CHECK_MSG(same_text(&a, &b), "html %zu: [%s] vs [%s] from the child", i, a.text, b.text);
        modattn_doc_text_clear(&a);
        modattn_doc_text_clear(&b);
    }
    char pdf[4096];
    size_t n = make_pdf(pdf, sizeof pdf, "Hello PDF page one", "Second page text");
    modattn_doc_text a, b;
    bool stopped = false;
    CHECK(modattn_extract_pdf(pdf, n, &a) == 0);
    int st = modattn__extract_isolated(MODATTN_DOC_PDF, pdf, n, &lim, &b, &stopped);
    CHECK_MSG(st == 0, "pdf in a child: %s", modattn_last_error());
    if (st == 0) CHECK_MSG(same_text(&a, &b) && b.pages, "pdf: [%s] vs [%s] from the child", a.text, b.text);
    modattn_doc_text_clear(&a);
    modattn_doc_text_clear(&b);
    /* the extractor's own error, as in-process */
    CHECK_ERR(modattn__extract_isolated(MODATTN_DOC_PDF, "%PDF-1.4\ngarbage", 16, &lim, &b, &stopped), MODATTN_EFORMAT,
              "PDF");
    /* the text over max_text */
    modattn__extract_limits small = lim;
    small.max_text = 10;
    CHECK_ERR(modattn__extract_isolated(MODATTN_DOC_PDF, pdf, n, &small, &b, &stopped), MODATTN_ERANGE,
              "over the cap");
    /* quadratic markup: 300,000 attributes on one element (minutes in libxml2) past a time limit */
    size_t cap = 300000 * 16 + 64, o = 0;
    char *big = malloc(cap);
    o += (size_t)snprintf(big + o, cap - o, "<div ");
    for (int i = 0; i < 300000; i++) o += (size_t)snprintf(big + o, cap - o, "a%d=\"x\" ", i);
    o += (size_t)snprintf(big + o, cap - o, ">text</div>");
    modattn__extract_limits quick = lim;
    quick.timeout_s = 0.5;
    uint64_t t0 = modattn__now_ns();
    CHECK_ERR(modattn__extract_isolated(MODATTN_DOC_HTML, big, o, &quick, &b, &stopped), MODATTN_ERANGE,
              "took longer than --file-timeout 0.5 s");
    double secs = (double)(modattn__now_ns() - t0) * 1e-9;
    CHECK_MSG(secs < 5, "the time limit of 0.5 s took %.1f s", secs);
    /* and a cancel hook stops it at once */
    int asked = 0;
    modattn__extract_limits stop = lim;
    stop.cancel = cancel_now;
    stop.cancel_ud = &asked;
    st = modattn__extract_isolated(MODATTN_DOC_HTML, big, o, &stop, &b, &stopped);
    CHECK_MSG(st != 0 && stopped && asked >= 1, "cancel: %d, stopped %d, asked %d", st, stopped, asked);
    /* memory: libxml2's tree of 400,000 paragraphs does not fit in 8 MiB more */
    o = 0;
    for (int i = 0; i < 400000 && o + 16 < cap; i++) o += (size_t)snprintf(big + o, cap - o, "<p>w%d</p>", i % 10);
    modattn__extract_limits tight = lim;
    tight.mem_bytes = 8u << 20;
    CHECK_ERR(modattn__extract_isolated(MODATTN_DOC_HTML, big, o, &tight, &b, &stopped), MODATTN_ERANGE,
              "exceeded the memory budget");
    /* ... and does in 256 MiB, the same text as in-process */
    CHECK(modattn_extract_html(big, o, &a) == 0);
    st = modattn__extract_isolated(MODATTN_DOC_HTML, big, o, &lim, &b, &stopped);
    CHECK_MSG(st == 0 && same_text(&a, &b), "400,000 paragraphs in a child: %s", st ? modattn_last_error() : "other text");
    modattn_doc_text_clear(&a);
    modattn_doc_text_clear(&b);
    free(big);
}

static bool contains(const char *p, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(p + i, needle, k)) return true;
    return false;
}

/* A chunk holds at most MODATTN_CHUNK_MAX_BYTES, whatever the text: one word of megabytes (one
 * [UNK]), blank space between two words, many [UNK] words in a window. */
static void test_chunk_cap(const modattn_tokenizer *tok) {
    const size_t big = 3u << 20;
    char *t = malloc(big + 64);
    memset(t, 'a', big);
    size_t len = big + (size_t)snprintf(t + big, 64, " orchard apples");
    modattn_chunk *c = NULL;
    size_t n = 0;
    int st = modattn_chunk_text(tok, t, len, 254, 32, &c, &n);
    CHECK_MSG(st == 0 && n == 2, "one 3 MB word: %d, %zu chunks", st, n);
    if (st == 0 && n == 2) {
        CHECK_MSG(c[0].start == 0 && c[0].end == MODATTN_CHUNK_MAX_BYTES && c[0].ntokens == 1,
                  "the word's chunk: [%zu, %zu) %zu pieces", c[0].start, c[0].end, c[0].ntokens);
        /* it tokenises alone to the one [UNK] it stands for */
        int32_t ids[4];
        size_t got = 0;
        modattn_tokenize_ex(tok, t, c[0].end, MODATTN_TOKENIZE_NO_SPECIALS, ids, NULL, 4, &got);
        CHECK(got == 1 && ids[0] == modattn_tokenizer_unk_id(tok));
        CHECK_MSG(c[1].end - c[1].start <= MODATTN_CHUNK_MAX_BYTES && c[1].end == len &&
                  contains(t + c[1].start, c[1].end - c[1].start, "orchard apples"),
                  "the rest: [%zu, %zu)", c[1].start, c[1].end);
    }
    modattn_free(c);
    /* a multibyte word: cut on a character boundary */
    for (size_t i = 0; i + 2 <= big; i += 2) memcpy(t + i, "\xc3\xa9", 2);
    st = modattn_chunk_text(tok, t, big, 254, 32, &c, &n);
    CHECK_MSG(st == 0 && n >= 1 && c[0].end - c[0].start <= MODATTN_CHUNK_MAX_BYTES &&
              modattn__utf8_valid(t + c[0].start, c[0].end - c[0].start), "a word of e-acutes: %d, %zu chunks", st, n);
    modattn_free(c);
    /* blank space: two words 2 MB apart are two chunks, not one of 2 MB */
    memset(t, ' ', big);
    memcpy(t, "valley", 6);
    memcpy(t + big - 6, "meadow", 6);
    st = modattn_chunk_text(tok, t, big, 254, 32, &c, &n);
    CHECK_MSG(st == 0 && n == 2 && c[0].start == 0 && c[0].end == 6 && c[1].start == big - 6 && c[1].end == big,
              "two words apart: %d, %zu chunks", st, n);
    modattn_free(c);
    /* [UNK] words of 300 letters, 254 to a window: more chunks, each under the cap, every word in one */
    size_t o = 0;
    for (int w = 0; w < 1000; w++) {
        memset(t + o, 'b' + w % 20, 300);
        o += 300;
        t[o++] = ' ';
    }
    st = modattn_chunk_text(tok, t, o, 254, 32, &c, &n);
    CHECK_MSG(st == 0 && n >= 5, "1000 long words: %d, %zu chunks", st, n);
    size_t covered = 0;
    for (size_t i = 0; st == 0 && i < n; i++) {
        CHECK_MSG(c[i].end - c[i].start <= MODATTN_CHUNK_MAX_BYTES, "chunk %zu: %zu bytes", i, c[i].end - c[i].start);
        CHECK_MSG(c[i].start <= covered, "chunk %zu starts at %zu, after a gap from %zu", i, c[i].start, covered);
        if (c[i].end > covered) covered = c[i].end;
    }
    CHECK_MSG(covered == o - 1, "the chunks end at %zu of %zu", covered, o - 1);
    modattn_free(c);
    free(t);
}

/* ------------------------------------------------------------------ chunking */

static bool is_word_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* Every chunk: in bounds, ordered, overlapping its successor, starting on a word, tokenising on
 * its own to ntokens <= window pieces; together they cover every piece of the whole text.
 * strict: also no chunk starts inside a word and consecutive chunks overlap (true when no word
 * has more pieces than the window and the overlap can hold). */
static void check_chunks(const modattn_tokenizer *tok, const char *text, size_t len, size_t window,
                         size_t overlap, bool strict, const char *what) {
    modattn_chunk *c = NULL;
    size_t n = 0;
    int st = modattn_chunk_text(tok, text, len, window, overlap, &c, &n);
    CHECK_MSG(st == 0, "%s: chunk_text: %s", what, modattn_last_error());
    if (st) return;
    /* the whole text's pieces */
    size_t cap = len + 16, total = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    modattn_token_offset *offs = malloc(cap * sizeof *offs);
    st = modattn_tokenize_ex(tok, text, len, MODATTN_TOKENIZE_NO_SPECIALS, ids, offs, cap, &total);
    CHECK(st == 0);
    CHECK_MSG((total == 0) == (n == 0), "%s: %zu pieces, %zu chunks", what, total, n);
    int32_t *ids2 = malloc((window + 2) * sizeof *ids2);
    size_t covered = 0; /* pieces of the whole text covered so far, in order */
    for (size_t i = 0; i < n; i++) {
        CHECK_MSG(c[i].start < c[i].end && c[i].end <= len, "%s: chunk %zu [%zu, %zu) of %zu",
                  what, i, c[i].start, c[i].end, len);
        CHECK_MSG(c[i].ntokens >= 1 && c[i].ntokens <= window, "%s: chunk %zu has %zu pieces",
                  what, i, c[i].ntokens);
        size_t alone = 0;
        modattn_tokenize_ex(tok, text + c[i].start, c[i].end - c[i].start,
                            MODATTN_TOKENIZE_NO_SPECIALS, ids2, NULL, window + 2, &alone);
        CHECK_MSG(alone == c[i].ntokens, "%s: chunk %zu tokenises alone to %zu pieces, not %zu",
                  what, i, alone, c[i].ntokens);
        if (i > 0) {
            CHECK_MSG(c[i].start > c[i - 1].start, "%s: chunk %zu does not move on", what, i);
            if (strict && overlap > 0)
                CHECK_MSG(c[i].start < c[i - 1].end, "%s: chunks %zu and %zu do not overlap", what,
                          i - 1, i);
            /* never inside an ASCII word */
            if (strict)
                CHECK_MSG(!(is_word_byte((unsigned char)text[c[i].start - 1]) &&
                        is_word_byte((unsigned char)text[c[i].start]) &&
                        (unsigned char)text[c[i].start] < 0x80),
                      "%s: chunk %zu starts inside a word at %zu", what, i, c[i].start);
        }
        /* the pieces of the whole text that lie inside this chunk continue the covered run */
        while (covered < total && offs[covered].start >= c[i].start && offs[covered].end <= c[i].end)
            covered++;
    }
    if (strict) {
        CHECK_MSG(covered == total, "%s: the chunks cover %zu of %zu pieces", what, covered, total);
    } else {
        /* a chunk forced to start inside a long word tokenises differently: check bytes */
        char *in = calloc(len + 1, 1);
        for (size_t i = 0; i < n; i++) memset(in + c[i].start, 1, c[i].end - c[i].start);
        for (size_t p = 0; p < total; p++)
            for (size_t b = offs[p].start; b < offs[p].end; b++)
                if (!in[b]) {
                    CHECK_MSG(0, "%s: byte %zu of piece %zu is in no chunk", what, b, p);
                    p = total;
                    break;
                }
        free(in);
    }
    if (n) {
        CHECK(c[0].start == offs[0].start);
        CHECK(c[n - 1].end == offs[total - 1].end);
    }
    free(ids);
    free(ids2);
    free(offs);
    modattn_free(c);
}

static void test_chunking(void) {
    if (access(TOKENIZER_JSON, R_OK) != 0) {
        t_fail++;
        fprintf(stderr, "FAIL: %s is missing: run tools/setup_model.sh (tests run from the "
                "repository root)\n", TOKENIZER_JSON);
        return;
    }
    modattn_tokenizer *tok = NULL;
    int st = modattn_tokenizer_load(TOKENIZER_JSON, &tok);
    CHECK_MSG(st == 0, "tokenizer: %s", modattn_last_error());
    if (st) return;
    /* a long text from the corpus */
    FILE *f = fopen("demo/corpus/alice-ch01-down-the-rabbit-hole.txt", "rb");
    CHECK_MSG(f != NULL, "demo/corpus/alice-ch01-down-the-rabbit-hole.txt is missing");
    if (f) {
        char *text = malloc(1 << 20);
        size_t len = fread(text, 1, (1 << 20) - 1, f);
        fclose(f);
        check_chunks(tok, text, len, 254, 32, true, "alice 254/32");
        check_chunks(tok, text, len, 64, 0, true, "alice 64/0");
        check_chunks(tok, text, len, 16, 15, true, "alice 16/15");
        check_chunks(tok, text, len, 3, 1, false, "alice 3/1");
        free(text);
    }
    /* long words (many pieces), invalid UTF-8, accents, CJK, punctuation runs */
    const char *odd = "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism "
                      "bad\xff\xfe bytes \xe2\x82 here, caf\xc3\xa9 na\xc3\xafve "
                      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e !!!??? end.";
    for (size_t w = 1; w <= 12; w++)
        for (size_t ov = 0; ov < w; ov += (w > 4 ? 3 : 1)) {
            char what[32];
            snprintf(what, sizeof what, "odd %zu/%zu", w, ov);
            check_chunks(tok, odd, strlen(odd), w, ov, false, what);
        }
    /* one chunk when the text fits; none for blank text */
    modattn_chunk *c = NULL;
    size_t n = 99;
    CHECK(modattn_chunk_text(tok, "  short text  ", 14, 254, 32, &c, &n) == 0 && n == 1 && c &&
          c[0].start == 2 && c[0].end == 12);
    modattn_free(c);
    CHECK(modattn_chunk_text(tok, " \n\t ", 4, 254, 32, &c, &n) == 0 && n == 0 && c == NULL);
    CHECK(modattn_chunk_text(tok, "", 0, 254, 32, &c, &n) == 0 && n == 0);
    CHECK_ERR(modattn_chunk_text(tok, "x", 1, 8, 8, &c, &n), MODATTN_EINVAL, "overlap");
    CHECK_ERR(modattn_chunk_text(tok, "x", 1, 0, 0, &c, &n), MODATTN_EINVAL, "window");
    test_chunk_cap(tok);
    modattn_tokenizer_free(tok);
}

/* ------------------------------------------------------------------ top-k */

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct ref_hit {
    double s;
    size_t row;
} ref_hit;
static int cmp_ref(const void *a, const void *b) {
    const ref_hit *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->row < y->row ? -1 : 1;
}

static void test_topk_case(size_t n, size_t dim, size_t k, const modattn_exec *exec) {
    size_t ld = dim + (dim % 3); /* rows need not be packed */
    float *m = malloc((n ? n : 1) * ld * sizeof(float));
    float *q = malloc(dim * sizeof(float));
    for (size_t i = 0; i < n * ld; i++) m[i] = frand();
    for (size_t j = 0; j < dim; j++) q[j] = frand();
    ref_hit *ref = malloc((n ? n : 1) * sizeof *ref);
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t j = 0; j < dim; j++) s += (double)m[i * ld + j] * q[j];
        ref[i] = (ref_hit){s, i};
    }
    qsort(ref, n, sizeof *ref, cmp_ref);
    float *sc = malloc((n ? n : 1) * sizeof(float));
    modattn_hit *hits = malloc((k ? k : 1) * sizeof *hits);
    static const modattn_scan_isa isas[] = {MODATTN_SCAN_SCALAR, MODATTN_SCAN_AVX2,
                                            MODATTN_SCAN_AVX512, MODATTN_SCAN_AUTO};
    const isa_expect want = isa_expected(); /* the test's own reading of the CPU, not the library's */
    static bool said[4];
    for (size_t a = 0; a < sizeof isas / sizeof *isas; a++) {
        const char *nm = modattn__scan_isa_name(isas[a]);
        if (modattn__scan_isa_available(isas[a]) != 0) {
            const bool has = (isas[a] == MODATTN_SCAN_AVX2 && want.avx2) || (isas[a] == MODATTN_SCAN_AVX512 && want.avx512);
            CHECK_MSG(!has, "scan %s refused on a CPU that has it: %s", nm, modattn_last_error());
            if (!has && !said[a]) printf("  not run here: scan %s (this CPU, or MODATTN_CPU_DISABLE, lacks it)\n", nm);
            said[a] = true;
            continue;
        }
        /* scores within float rounding of the fp64 dot products (a scan that fails is a failure) */
        const int sst = n ? modattn__scan_scores(m, n, dim, ld, q, isas[a], sc) : 0;
        CHECK_MSG(sst == 0, "%s n=%zu dim=%zu: scan_scores failed: %s", nm, n, dim, modattn_last_error());
        if (n && sst == 0) {
            double worst = 0;
            for (size_t i = 0; i < n; i++) {
                double s = 0, mag = 0;
                for (size_t j = 0; j < dim; j++) {
                    s += (double)m[i * ld + j] * q[j];
                    mag += fabs((double)m[i * ld + j] * q[j]);
                }
                double e = fabs(sc[i] - s) / (mag + 1e-30);
                if (e > worst) worst = e;
            }
            CHECK_MSG(worst < 1e-5, "%s n=%zu dim=%zu: relative score error %g", nm, n, dim, worst);
        }
        size_t got = 99;
        int st = modattn__topk(m, n, dim, ld, q, k, exec, isas[a], hits, &got);
        CHECK_MSG(st == 0, "%s: topk: %s", nm, modattn_last_error());
        size_t want = k < n ? k : n;
        CHECK_MSG(got == want, "%s n=%zu k=%zu: %zu hits", nm, n, k, got);
        for (size_t i = 0; i < got && i < want; i++) {
            /* the same rows as the fp64 ranking, except where two scores are within rounding */
            if (hits[i].row != ref[i].row) {
                double sr = 0;
                for (size_t j = 0; j < dim; j++) sr += (double)m[hits[i].row * ld + j] * q[j];
                CHECK_MSG(fabs(sr - ref[i].s) < 1e-5 * (1 + fabs(ref[i].s)),
                          "%s n=%zu dim=%zu k=%zu: rank %zu is row %zu (%.9g), fp64 says row %zu (%.9g)",
                          nm, n, dim, k, i, hits[i].row, sr, ref[i].row, ref[i].s);
            }
            if (i) CHECK(hits[i - 1].score >= hits[i].score);
        }
    }
    free(m);
    free(q);
    free(ref);
    free(sc);
    free(hits);
}

/* modattn__topk_batch against modattn__topk query by query: the same rows and the same scores, bit
 * for bit (candidates are re-scored with the single-query kernel), serial and threaded, with a
 * mask, more queries than one GEMM takes, k larger than n, and errors. */
static void test_topk_batch_case(size_t n, size_t dim, size_t nq, size_t k, const modattn_exec *exec,
                                 bool masked) {
    const size_t ld = dim + 3, qld = dim + 1;
    float *m = malloc((n ? n : 1) * ld * sizeof(float)), *qs = malloc(nq * qld * sizeof(float));
    uint8_t *skip = masked ? calloc(n / 8 + 2, 1) : NULL;
    for (size_t i = 0; i < n * ld; i++) m[i] = frand();
    for (size_t i = 0; i < nq * qld; i++) qs[i] = frand();
    if (skip)
        for (size_t r = 0; r < n; r += 3) skip[(r + 5) / 8] |= (uint8_t)(1u << ((r + 5) % 8));
    modattn_hit *hb = malloc(nq * k * sizeof *hb), *h1 = malloc(k * sizeof *h1);
    size_t *nb = malloc(nq * sizeof *nb);
    int st = modattn__topk_batch(m, n, dim, ld, qs, nq, qld, k, exec, skip, 5, hb, nb);
    CHECK_MSG(st == 0, "batch n=%zu dim=%zu nq=%zu k=%zu: %s", n, dim, nq, k, modattn_last_error());
    size_t bad = 0;
    for (size_t q = 0; st == 0 && q < nq; q++) {
        size_t n1 = 0;
        CHECK(modattn__topk_masked(m, n, dim, ld, qs + q * qld, k, NULL, MODATTN_SCAN_AUTO, skip, 5, h1, &n1) == 0);
        if (n1 != nb[q]) bad++;
        for (size_t i = 0; i < n1 && i < nb[q]; i++)
            if (h1[i].row != hb[q * k + i].row || memcmp(&h1[i].score, &hb[q * k + i].score, sizeof(float)))
                bad++;
    }
    CHECK_MSG(bad == 0, "batch n=%zu dim=%zu nq=%zu k=%zu%s: %zu differences from modattn__topk", n, dim, nq,
              k, masked ? " masked" : "", bad);
    free(m), free(qs), free(skip), free(hb), free(h1), free(nb);
}

static void test_topk_batch(void) {
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 3;
    o.plugin_path = "";
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    const modattn_exec *ex = ctx ? modattn_ctx_exec(ctx) : NULL;
    test_topk_batch_case(1, 4, 1, 1, NULL, false);
    test_topk_batch_case(5, 3, 4, 10, NULL, false);      /* k > n */
    test_topk_batch_case(1000, 384, 7, 10, NULL, false);
    test_topk_batch_case(1000, 17, 3, 5, NULL, true);
    test_topk_batch_case(5000, 384, 300, 10, ex, false); /* two GEMMs of queries, 5 blocks of rows */
    test_topk_batch_case(4097, 33, 20, 50, ex, true);
    /* ties go to the lower row; NaN ranks last, as modattn__topk */
    {
        float m[5 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, NAN, 0, 0, 0, 1, 0, 0, 0};
        float q[8] = {1, 0, 0, 0, 0, 1, 0, 0};
        modattn_hit h[10];
        size_t n[2] = {0, 0};
        CHECK(modattn__topk_batch(m, 5, 4, 4, q, 2, 4, 5, NULL, NULL, 0, h, n) == 0 && n[0] == 5 && n[1] == 5);
        CHECK(h[0].row == 0 && h[1].row == 2 && h[2].row == 4 && h[3].row == 1 && h[4].row == 3);
        CHECK(h[4].score == -INFINITY && h[5].row == 1 && h[5].score == 1.0f);
    }
    modattn_hit h[2];
    size_t n[2] = {7, 7};
    float v[8] = {0};
    CHECK_ERR(modattn__topk_batch(v, 1, 4, 2, v, 1, 4, 1, NULL, NULL, 0, h, n), MODATTN_EINVAL, "ld");
    CHECK_ERR(modattn__topk_batch(v, 1, 4, 4, v, 1, 2, 1, NULL, NULL, 0, h, n), MODATTN_EINVAL, "qld");
    CHECK(modattn__topk_batch(v, 1, 4, 4, v, 2, 4, 0, NULL, NULL, 0, h, n) == 0 && n[0] == 0 && n[1] == 0);
    modattn_ctx_free(ctx);
}

static void test_topk(void) {
    static const size_t dims[] = {1, 3, 8, 15, 16, 17, 31, 33, 64, 384};
    static const size_t ns[] = {0, 1, 3, 4, 5, 97, 1000};
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++)
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            test_topk_case(ns[i], dims[d], 1, NULL);
            test_topk_case(ns[i], dims[d], 10, NULL);
        }
    /* threaded, past the parallel threshold, against serial: the same answer */
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 3;
    o.plugin_path = "";
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    const modattn_exec *ex = ctx ? modattn_ctx_exec(ctx) : NULL;
    test_topk_case(MODATTN_TOPK_PARALLEL_ROWS * 3 + 5, 384, 7, ex);
    test_topk_case(MODATTN_TOPK_PARALLEL_ROWS + 1, 33, 100, ex);
    {
        size_t n = MODATTN_TOPK_PARALLEL_ROWS * 2 + 3, dim = 40;
        float *m = malloc(n * dim * sizeof(float));
        float q[40];
        for (size_t i = 0; i < n * dim; i++) m[i] = frand();
        for (size_t j = 0; j < dim; j++) q[j] = frand();
        modattn_hit a[50], b[50];
        size_t na = 0, nb = 0;
        CHECK(modattn__topk(m, n, dim, dim, q, 50, NULL, MODATTN_SCAN_AUTO, a, &na) == 0);
        CHECK(modattn__topk(m, n, dim, dim, q, 50, ex, MODATTN_SCAN_AUTO, b, &nb) == 0);
        CHECK(na == 50 && nb == 50);
        for (size_t i = 0; i < 50; i++) CHECK(a[i].row == b[i].row && a[i].score == b[i].score);
        free(m);
    }
    /* ties go to the lower row; NaN ranks last */
    {
        float m[5 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, NAN, 0, 0, 0, 1, 0, 0, 0};
        float q[4] = {1, 0, 0, 0};
        modattn_hit h[5];
        size_t n = 0;
        CHECK(modattn__topk(m, 5, 4, 4, q, 5, NULL, MODATTN_SCAN_AUTO, h, &n) == 0 && n == 5);
        CHECK(h[0].row == 0 && h[1].row == 2 && h[2].row == 4 && h[3].row == 1 && h[4].row == 3);
        CHECK(h[4].score == -INFINITY);
    }
    /* errors */
    modattn_hit h[1];
    size_t n = 0;
    float v[4] = {0};
    CHECK_ERR(modattn__topk(v, 1, 4, 2, v, 1, NULL, MODATTN_SCAN_AUTO, h, &n), MODATTN_EINVAL, "ld");
    CHECK(modattn__topk(v, 1, 4, 4, v, 0, NULL, MODATTN_SCAN_AUTO, h, &n) == 0 && n == 0);
    float z[3] = {0, 0, 0}, u[2] = {3, 4};
    modattn__vec_normalize(z, 3);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
    modattn__vec_normalize(u, 2);
    CHECK(fabsf(u[0] - 0.6f) < 1e-6f && fabsf(u[1] - 0.8f) < 1e-6f);
    modattn_ctx_free(ctx);
}

/* ------------------------------------------------------------------ store */

static void raw_sql(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    char *err = NULL;
    CHECK_MSG(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK, "%s: %s", sql, err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
}

/* ------------------------------------------------------------------ keywords */

static void expect_query(const char *in, size_t len, const char *want) {
    char *q = NULL;
    int st = modattn__keyword_query(in, len, &q);
    CHECK_MSG(st == 0 && q && strcmp(q, want) == 0, "keyword_query(%.60s) = [%s], want [%s]", in, q ? q : "(null)", want);
    modattn_free(q);
}

/* The user's text as FTS5 sees it: quoted phrases joined by OR; operators, quotes and syntax are
 * text; no run without a word; NUL and invalid UTF-8 handled; bounded whatever the length. Then a
 * store: BM25 top-k, spans, prefix filter, and every hostile query accepted by SQLite itself. */
/* modattn__store_keyword_topk's scores (modattn_bm25, chunk sizes cached) against FTS5's own
 * bm25() through a second connection: the same chunks in the same order, scores bit for bit. */
static void check_bm25_equal(modattn_store *s, const char *path, const char *text) {
    char *fts = NULL;
    int64_t ids[16];
    double sc[16];
    size_t n = 0;
    CHECK(modattn__keyword_query(text, strlen(text), &fts) == 0 && fts);
    CHECK(modattn__store_keyword_topk(s, fts, 16, NULL, ids, sc, &n) == 0);
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
          sqlite3_prepare_v2(db, "SELECT rowid, -bm25(chunks_fts, 1.0, 0.5) AS sc FROM chunks_fts WHERE chunks_fts MATCH ?1 "
                                 "ORDER BY sc DESC, rowid LIMIT 16", -1, &q, NULL) == SQLITE_OK);
    sqlite3_bind_text(q, 1, fts ? fts : "", -1, SQLITE_STATIC);
    size_t m = 0;
    while (q && sqlite3_step(q) == SQLITE_ROW) {
        CHECK_MSG(m < n && ids[m] == sqlite3_column_int64(q, 0) && sc[m] == sqlite3_column_double(q, 1),
                  "[%s] #%zu: chunk %lld score %.17g, FTS5's bm25: chunk %lld score %.17g", text, m,
                  m < n ? (long long)ids[m] : -1LL, m < n ? sc[m] : NAN, (long long)sqlite3_column_int64(q, 0),
                  sqlite3_column_double(q, 1));
        m++;
    }
    CHECK_MSG(m == n && n > 0, "[%s]: %zu results, FTS5's bm25 %zu", text, n, m);
    sqlite3_finalize(q);
    sqlite3_close(db);
    modattn_free(fts);
}

/* The pruned keyword search (keywords.c, MaxScore) on a store where it applies: 4000 chunks of
 * common, middling and rare words; its top 16 equals FTS5's bm25() over every matching row. */
static void test_keywords_pruned(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/kwp.db", dir);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(path, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return;
    modattn_store_model m = {"m", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &m) == 0);
    float vec[4] = {1, 0, 0, 0};
    uint64_t x = 88172645463325252ull;
    CHECK(modattn__store_begin(s) == 0);
    for (int d = 0; d < 40; d++) {
        char p[64];
        snprintf(p, sizeof p, "/p/doc%02d.txt", d);
        modattn_store_doc doc = {.path = p, .hash = (uint64_t)d, .kind = "text", .nchunks = 100};
        CHECK(modattn__store_put_document(s, &doc) == 0);
        for (int c = 0; c < 100; c++) {
            char text[1024];
            size_t o = 0;
            const int words = 10 + c % 30;
            for (int w = 0; w < words; w++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                const unsigned r = (unsigned)(x % 1000);
                if (r < 600) o += (size_t)snprintf(text + o, sizeof text - o, "common%u ", r % 8);
                else if (r < 900) o += (size_t)snprintf(text + o, sizeof text - o, "mid%u ", (unsigned)(x >> 20) % 40);
                else o += (size_t)snprintf(text + o, sizeof text - o, "rare%u ", (unsigned)(x >> 20) % 700);
            }
            modattn_store_chunk_in ch = {c, 0, (int64_t)o, 1, 0, words, text, o};
            CHECK(modattn__store_put_chunk(s, doc.id, &ch, vec, 4) == 0);
        }
    }
    CHECK(modattn__store_commit(s) == 0);
    const size_t before = modattn__store_kw_pruned(s);
    check_bm25_equal(s, path, "rare5 rare17 mid3 mid8 common1 common2 common3 common4");
    check_bm25_equal(s, path, "rare99 mid1 mid2 mid3 mid4 mid5 common0 common5 common6 common7");
    check_bm25_equal(s, path, "\"rare7 common1\" mid9 common2 common3");
    CHECK_MSG(modattn__store_kw_pruned(s) > before, "the pruned passes answered %zu of 3 searches",
              modattn__store_kw_pruned(s) - before);
    check_bm25_equal(s, path, "common1 common2 common3"); /* nothing rare: the whole query */
    /* inside a write transaction (rows and generation not final): equal to bm25() on the same
     * connection, after each of two writes, with no cached size or pruning used */
    CHECK(modattn__store_begin(s) == 0);
    {
        modattn_store_doc doc = {.path = "/p/new.txt", .hash = 77, .kind = "text", .nchunks = 2};
        CHECK(modattn__store_put_document(s, &doc) == 0);
        static const char *const more[] = {"rare5 rare5 mid3", "rare5 rare17 rare17 common1 mid8 mid8 mid8 mid8"};
        for (int i = 0; i < 2; i++) {
            modattn_store_chunk_in ch = {i, 0, (int64_t)strlen(more[i]), 1, 0, 8, more[i], strlen(more[i])};
            CHECK(modattn__store_put_chunk(s, doc.id, &ch, vec, 4) == 0);
            char *fts = NULL;
            int64_t ids[8];
            double sc[8];
            size_t n = 0;
            const size_t pruned = modattn__store_kw_pruned(s);
            CHECK(modattn__keyword_query("rare5 rare17 mid3 mid8 common1 common2", 38, &fts) == 0 &&
                  modattn__store_keyword_topk(s, fts, 8, NULL, ids, sc, &n) == 0 && n == 8);
            CHECK(modattn__store_kw_pruned(s) == pruned);
            sqlite3_stmt *q = NULL;
            CHECK(sqlite3_prepare_v2(modattn__store_db(s), "SELECT rowid, -bm25(chunks_fts, 1.0, 0.5) AS sc FROM chunks_fts "
                                     "WHERE chunks_fts MATCH ?1 ORDER BY sc DESC, rowid LIMIT 8", -1, &q, NULL) == SQLITE_OK);
            sqlite3_bind_text(q, 1, fts ? fts : "", -1, SQLITE_STATIC);
            for (size_t j = 0; q && sqlite3_step(q) == SQLITE_ROW; j++)
                CHECK_MSG(j < n && ids[j] == sqlite3_column_int64(q, 0) && sc[j] == sqlite3_column_double(q, 1),
                          "in a write transaction, #%zu differs from bm25()", j);
            sqlite3_finalize(q);
            modattn_free(fts);
        }
    }
    modattn__store_rollback(s);
    modattn_store_close(s);
}

static void test_keywords(const char *dir) {
    expect_query("error E4021", 11, "\"error\" OR \"E4021\"");
    expect_query("", 0, "");
    expect_query("  \t\n ", 5, "");
    expect_query("-- ... !!", 9, ""); /* no letter or digit: nothing to match */
    expect_query("say \"hi\"", 8, "\"say\" OR \"\"\"hi\"\"\"");
    expect_query("a AND b", 7, "\"a\" OR \"AND\" OR \"b\"");
    expect_query("NEAR(a b", 8, "\"NEAR(a\" OR \"b\"");
    expect_query("text:foo ^bar baz*", 18, "\"text:foo\" OR \"^bar\" OR \"baz*\"");
    expect_query("a\0b", 3, "\"a\" OR \"b\""); /* NUL separates */
    expect_query("caf\xe9 x", 6, "\"caf\xef\xbf\xbd\" OR \"x\"");       /* invalid UTF-8 replaced */
    expect_query("\xe2\x80\x94 na\xc3\xafve", 10, "\"na\xc3\xafve\""); /* an em dash alone is no word */
    /* 1 MB of words: 32 phrases at most, each at most 256 bytes */
    size_t big = 1 << 20;
    char *t = malloc(big);
    for (size_t i = 0; i < big; i++) t[i] = (i % 300 == 299) ? ' ' : (char)('a' + i % 26);
    char *q = NULL;
    CHECK(modattn__keyword_query(t, big, &q) == 0 && q);
    size_t ors = 0;
    for (const char *p = q; p && (p = strstr(p, " OR ")); p += 4) ors++;
    CHECK_MSG(q && ors == MODATTN_KEYWORD_MAX_TERMS - 1 && strlen(q) <= (size_t)MODATTN_KEYWORD_MAX_TERMS * (256 + 6),
              "1 MB query: %zu ORs, %zu bytes", ors, q ? strlen(q) : 0);
    modattn_free(q);
    free(t);

    char path[512];
    snprintf(path, sizeof path, "%s/kw.db", dir);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(path, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return;
    CHECK(modattn__store_has_keywords(s));
    modattn_store_model m = {"m", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &m) == 0);
    static const char *const texts[] = {"The lighthouse keeper lit the lamp.", "Error E4021: the pool is exhausted.",
                                        "Café au lait and croissants.", "Nothing in common here at all."};
    static const char *const paths[] = {"/k/sea/light.txt", "/k/err/codes.md", "/k/food/cafe.txt", "/k/misc/none.txt"};
    float vec[4] = {1, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        modattn_store_doc d = {.path = paths[i], .hash = (uint64_t)i, .kind = "text", .nchunks = 1};
        CHECK(modattn__store_begin(s) == 0 && modattn__store_put_document(s, &d) == 0);
        modattn_store_chunk_in c = {0, 0, (int64_t)strlen(texts[i]), 1, 0, 5, texts[i], strlen(texts[i])};
        CHECK(modattn__store_put_chunk(s, d.id, &c, vec, 4) == 0 && modattn__store_commit(s) == 0);
    }
    int64_t ids[4];
    double sc[4];
    size_t n = 0;
    char *fts = NULL;
    CHECK(modattn__keyword_query("e4021 exhausted", 15, &fts) == 0);
    CHECK(modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n) == 0 && n == 1 && sc[0] > 0);
    modattn_store_chunk ch;
    CHECK(n == 1 && modattn__store_get_chunk(s, ids[0], &ch) == 0 && strcmp(ch.path, paths[1]) == 0);
    modattn__store_chunk_clear(&ch);
    modattn_text_span *sp = NULL;
    size_t nsp = 0;
    CHECK(n == 1 && modattn__store_keyword_spans(s, fts, ids[0], &sp, &nsp) == 0 && nsp == 2 &&
          sp[0].start == 6 && sp[0].end == 11 && sp[1].start == 25 && sp[1].end == 34); /* E4021, exhausted */
    modattn_free(sp);
    modattn_free(fts);
    /* diacritics folded; a file's name is matched too; the prefix keeps only its folder */
    CHECK(modattn__keyword_query("cafe", 4, &fts) == 0 && modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n) == 0 && n == 1);
    CHECK(modattn__store_keyword_topk(s, fts, 4, "/k/err/", ids, sc, &n) == 0 && n == 0);
    modattn_free(fts);
    CHECK(modattn__keyword_query("codes", 5, &fts) == 0 && modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n) == 0 &&
          n == 1); /* only in the name codes.md */
    modattn_free(fts);
    /* every hostile query is accepted by FTS5 as made safe, and finds nothing it should not */
    static const char *const hostile[] = {"\"", "\"unbalanced", "a AND", "NEAR(a b", "*", "^x", "text:lamp", "col:",
                                          "(((", "NOT", "OR OR", "'", "lamp NOT keeper", "{name}: lamp", "\\", "AND",
                                          "NEAR/2", "lamp*", "-lamp", "+lamp"};
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
        fts = NULL;
        int st = modattn__keyword_query(hostile[i], strlen(hostile[i]), &fts);
        st = st ? st : modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n);
        CHECK_MSG(st == 0, "hostile query [%s] -> [%s]: %s", hostile[i], fts ? fts : "", modattn_last_error());
        modattn_free(fts);
    }
    /* "lamp NOT keeper" is three words, not an exclusion: the lighthouse chunk, with all of them */
    CHECK(modattn__keyword_query("lamp NOT keeper", 15, &fts) == 0 && modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n) == 0 &&
          n >= 1 && modattn__store_get_chunk(s, ids[0], &ch) == 0 && strcmp(ch.path, paths[0]) == 0);
    modattn__store_chunk_clear(&ch);
    modattn_free(fts);
    /* our BM25 (sizes read once per generation) equals FTS5's, before and after the store changes */
    check_bm25_equal(s, path, "the lamp pool exhausted cafe codes");
    check_bm25_equal(s, path, "the");
    {
        static const char more[] = "the lamp the lamp the keeper and the pool and the sea";
        modattn_store_doc d = {.path = "/k/sea/more.txt", .hash = 9, .kind = "text", .nchunks = 1};
        modattn_store_chunk_in c = {0, 0, (int64_t)strlen(more), 1, 0, 12, more, strlen(more)};
        CHECK(modattn__store_begin(s) == 0 && modattn__store_put_document(s, &d) == 0);
        CHECK(modattn__store_put_chunk(s, d.id, &c, vec, 4) == 0 && modattn__store_commit(s) == 0);
    }
    check_bm25_equal(s, path, "the lamp pool exhausted cafe codes");
    /* a deleted document's chunks leave the keyword index in the same transaction */
    CHECK(modattn_store_delete_document(s, paths[0]) == 1);
    CHECK(modattn__keyword_query("lighthouse", 10, &fts) == 0 && modattn__store_keyword_topk(s, fts, 4, NULL, ids, sc, &n) == 0 && n == 0);
    modattn_free(fts);
    modattn_store_close(s);
}

static void test_store(const char *dir) {
    char path[512], other[512];
    snprintf(path, sizeof path, "%s/unit.db", dir);
    modattn_store *s = NULL;
    CHECK_ERR(modattn_store_open(path, 0, &s), MODATTN_ENOTFOUND, "run `modattn index` first");
    CHECK(modattn_store_open(path, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return;
    modattn_store_model a = {"model-a", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    modattn_store_model b = {"model-b", "fedcba9876543210", 8, NULL, NULL, NULL, NULL};
    CHECK_ERR(modattn_store_check_model(s, &a), MODATTN_ENOTFOUND, "no model");
    CHECK(modattn__store_bind_model(s, &a) == 0);
    CHECK(modattn__store_bind_model(s, &a) == 0);
    CHECK_ERR(modattn__store_bind_model(s, &b), MODATTN_EVERSION, "holds embeddings of model model-a");
    CHECK_ERR(modattn_store_check_model(s, &b), MODATTN_EVERSION, "model-b");
    modattn_store_model a2 = {"model-a", "0123456789abcdee", 4, NULL, NULL, NULL, NULL}; /* same name, other weights */
    CHECK_ERR(modattn_store_check_model(s, &a2), MODATTN_EVERSION, "0123456789abcdee");
    /* identity is content, never the name (issue 18): the same weights under another name are the
     * same model; this store, bound without an identity, gains the first one it is bound with, then
     * compares by it: the same weights with another identity (config, pooling, tokenizer) are not */
    modattn_store_model renamed = {"a-renamed-copy", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    CHECK(modattn_store_check_model(s, &renamed) == 0);
    /* a store from before identities holds fp32 vectors (none recorded): a bf16 model of the same
     * weights is refused by its precision, not accepted by the weights it shares */
    modattn_store_model a_bf16 = {"model-a", "0123456789abcdef", 4, NULL, "bf16", NULL, NULL};
    CHECK_ERR(modattn_store_check_model(s, &a_bf16), MODATTN_EVERSION, "holds fp32 embeddings");
    CHECK_ERR(modattn__store_bind_model(s, &a_bf16), MODATTN_EVERSION, "--precision fp32");
    char prec[16] = "";
    CHECK(modattn_store_get_precision(s, prec, sizeof prec) == 0 && strcmp(prec, "fp32") == 0);
    modattn_store_model ia = {"via-a-link", "0123456789abcdef", 4, "1111222233334444", NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &ia) == 0); /* records the identity */
    CHECK(modattn_store_check_model(s, &ia) == 0);
    modattn_store_model ib = {"model-a", "0123456789abcdef", 4, "9999222233334444", NULL, NULL, NULL};
    CHECK_ERR(modattn_store_check_model(s, &ib), MODATTN_EVERSION, "the same weights, but a configuration");
    CHECK_ERR(modattn__store_bind_model(s, &ib), MODATTN_EVERSION, "identity 1111222233334444");

    /* a document in a transaction; a rolled back one leaves nothing */
    float v1[4] = {1, 0, 0, 0}, v2[4] = {0, 1, 0, 0};
    modattn_store_doc d;
    memset(&d, 0, sizeof d);
    d.path = "/x/doc.txt";
    d.hash = 0x1234abcdull;
    d.mtime_ns = 42;
    d.size = 100;
    d.kind = "text";
    d.chunk_tokens = 256;
    d.overlap = 32;
    d.nchunks = 2;
    CHECK(modattn__store_begin(s) == 0);
    CHECK(modattn__store_put_document(s, &d) == 0 && d.id > 0);
    modattn_store_chunk_in c1 = {0, 0, 10, 1, 0, 5, "hello \xff world", 13};
    modattn_store_chunk_in c2 = {1, 8, 20, 2, 0, 6, "second", 6};
    CHECK(modattn__store_put_chunk(s, d.id, &c1, v1, 4) == 0);
    CHECK_ERR(modattn__store_put_chunk(s, d.id, &c2, v2, 3), MODATTN_EINVAL, "dimensions");
    CHECK(modattn__store_put_chunk(s, d.id, &c2, v2, 4) == 0);
    CHECK(modattn__store_commit(s) == 0);
    modattn_store_doc e;
    memset(&d, 0, sizeof d);
    d.path = "/x/gone.txt";
    d.kind = "text";
    d.nchunks = 1;
    CHECK(modattn__store_begin(s) == 0);
    CHECK(modattn__store_put_document(s, &d) == 0);
    CHECK(modattn__store_put_chunk(s, d.id, &c2, v2, 4) == 0);
    modattn__store_rollback(s);
    CHECK(modattn__store_find_document(s, "/x/gone.txt", &e) == 0);
    CHECK(modattn__store_find_document(s, "/x/doc.txt", &e) == 1);
    CHECK(e.hash == 0x1234abcdull && e.mtime_ns == 42 && e.size == 100 && e.nchunks == 2 &&
          e.chunk_tokens == 256 && e.overlap == 32);
    CHECK(modattn__store_touch_document(s, e.id, 43, 101) == 0);
    CHECK(modattn__store_find_document(s, "/x/doc.txt", &e) == 1 && e.mtime_ns == 43 && e.size == 101);
    modattn_store_counts cnt;
    CHECK(modattn_store_get_counts(s, &cnt) == 0 && cnt.documents == 1 && cnt.chunks == 2 &&
          cnt.embeddings == 2);

    /* vectors: contiguous, aligned, in chunk order */
    modattn_store_vectors vec;
    CHECK(modattn__store_load_vectors(s, &vec) == 0);
    CHECK(vec.n == 2 && vec.dim == 4 && vec.ld >= 4 && ((uintptr_t)vec.data % 64) == 0);
    if (vec.n == 2) {
        CHECK(memcmp(vec.data, v1, sizeof v1) == 0 && memcmp(vec.data + vec.ld, v2, sizeof v2) == 0);
        modattn_store_chunk ch;
        CHECK(modattn__store_get_chunk(s, vec.chunk_ids[0], &ch) == 0);
        CHECK(ch.path && strcmp(ch.path, "/x/doc.txt") == 0 && ch.start == 0 && ch.end == 10 &&
              ch.line == 1 && ch.ntokens == 5 && strcmp(ch.kind, "text") == 0);
        /* stored text is valid UTF-8 */
        CHECK(ch.text && strcmp(ch.text, "hello \xef\xbf\xbd world") == 0);
        modattn__store_chunk_clear(&ch);
        CHECK_ERR(modattn__store_get_chunk(s, 987654, &ch), MODATTN_ENOTFOUND, "no chunk");
    }
    modattn__store_vectors_free(&vec);
    /* replacing a document replaces its chunks */
    memset(&d, 0, sizeof d);
    d.path = "/x/doc.txt";
    d.kind = "markdown";
    d.nchunks = 1;
    CHECK(modattn__store_begin(s) == 0 && modattn__store_put_document(s, &d) == 0 &&
          modattn__store_put_chunk(s, d.id, &c2, v2, 4) == 0 && modattn__store_commit(s) == 0);
    CHECK(modattn_store_get_counts(s, &cnt) == 0 && cnt.documents == 1 && cnt.chunks == 1 &&
          cnt.embeddings == 1);
    CHECK(modattn_store_integrity_check(s) == 0);
    CHECK(modattn_store_delete_document(s, "/x/doc.txt") == 1);
    CHECK(modattn_store_delete_document(s, "/x/doc.txt") == 0);
    CHECK(modattn_store_get_counts(s, &cnt) == 0 && cnt.documents == 0 && cnt.chunks == 0 &&
          cnt.embeddings == 0);
    modattn_store_close(s);

    /* read-only: the model is still there */
    CHECK(modattn_store_open(path, MODATTN_STORE_READONLY, &s) == 0);
    CHECK(s && modattn_store_check_model(s, &a) == 0);
    char name[64], hash[17];
    size_t dim = 0;
    CHECK(s && modattn_store_get_model(s, name, sizeof name, hash, &dim) == 0 &&
          strcmp(name, "model-a") == 0 && strcmp(hash, "0123456789abcdef") == 0 && dim == 4);
    modattn_store_close(s);

    /* a newer schema is refused, not misread */
    raw_sql(path, "PRAGMA user_version = 99");
    CHECK_ERR(modattn_store_open(path, MODATTN_STORE_CREATE, &s), MODATTN_EVERSION, "newer");
    /* not an SQLite file; somebody else's database; a folder */
    snprintf(other, sizeof other, "%s/not-a-db.db", dir);
    FILE *f = fopen(other, "wb");
    if (f) {
        fputs("this is not a database, just a text file that is long enough to have a header", f);
        fclose(f);
    }
    CHECK_ERR(modattn_store_open(other, MODATTN_STORE_CREATE, &s), MODATTN_EFORMAT, "not-a-db.db");
    snprintf(other, sizeof other, "%s/foreign.db", dir);
    raw_sql(other, "CREATE TABLE t(x); INSERT INTO t VALUES (1)");
    CHECK_ERR(modattn_store_open(other, MODATTN_STORE_CREATE, &s), MODATTN_EFORMAT,
              "not a modattn store");
    CHECK_ERR(modattn_store_open(dir, MODATTN_STORE_CREATE, &s), MODATTN_EINVAL, "not a regular file");
}

static void test_paths(void) {
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    char *p = modattn__path_absolute("/a/./b//c/../d/");
    CHECK(p && strcmp(p, "/a/b/d") == 0);
    modattn_free(p);
    p = modattn__path_absolute("/../..");
    CHECK(p && strcmp(p, "/") == 0);
    modattn_free(p);
    p = modattn__path_absolute("x/y");
    char want[1100];
    snprintf(want, sizeof want, "%s/x/y", strcmp(cwd, "/") ? cwd : "");
    CHECK_MSG(p && strcmp(p, want) == 0, "%s vs %s", p ? p : "(null)", want);
    modattn_free(p);
}

/* ------------------------------------------------------------------ allocation failures */

typedef struct sweep_ctx {
    const char *dir;
    int round;
    const modattn_tokenizer *tok;
    const char *text;
    size_t len;
} sweep_ctx;

/* the whole life of a store: every SQLite allocation goes through modattn__malloc too */
static int sweep_store(void *arg) {
    sweep_ctx *c = arg;
    char path[512];
    snprintf(path, sizeof path, "%s/sweep-%d.db", c->dir, c->round++);
    modattn_store *s = NULL;
    modattn_store_model m = {"model-a", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    float v[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    modattn_store_doc d;
    memset(&d, 0, sizeof d);
    d.path = "/x/a.txt";
    d.kind = "text";
    d.nchunks = 2;
    modattn_store_chunk_in ci = {0, 0, 5, 1, 0, 3, "hello", 5};
    modattn_store_vectors vec;
    memset(&vec, 0, sizeof vec);
    modattn_store_chunk ch;
    memset(&ch, 0, sizeof ch);
    int st = modattn_store_open(path, MODATTN_STORE_CREATE, &s);
    if (!st) st = modattn__store_bind_model(s, &m);
    if (!st) st = modattn__store_begin(s);
    if (!st) st = modattn__store_put_document(s, &d);
    if (!st) st = modattn__store_put_chunk(s, d.id, &ci, v, 4);
    ci.seq = 1;
    ci.text = "bad \xff";
    ci.len = 5;
    if (!st) st = modattn__store_put_chunk(s, d.id, &ci, v, 4);
    if (!st) st = modattn__store_commit(s);
    if (!st) st = modattn__store_load_vectors(s, &vec);
    if (!st) st = modattn__store_get_chunk(s, vec.chunk_ids[1], &ch);
    if (!st) {
        int k = modattn_store_delete_document(s, "/x/a.txt");
        st = k == 1 ? 0 : k < 0 ? k : MODATTN_EINTERNAL;
    }
    modattn__store_chunk_clear(&ch);
    modattn__store_vectors_free(&vec);
    modattn_store_close(s);
    unlink(path);
    char side[600];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return st;
}

static int sweep_chunk(void *arg) {
    sweep_ctx *c = arg;
    modattn_chunk *ch = NULL;
    size_t n = 0;
    int st = modattn_chunk_text(c->tok, c->text, c->len, 30, 5, &ch, &n);
    modattn_free(ch);
    return st;
}

static int sweep_html(void *arg) {
    (void)arg;
    static const char html[] = "<html><head><title>T</title></head><body><h1>Head</h1>"
                               "<p>para <b>bold</b></p><pre>a  b</pre><table><tr><td>1</td>"
                               "<td>2</td></tr></table></body></html>";
    modattn_doc_text d;
    int st = modattn_extract_html(html, sizeof html - 1, &d);
    modattn_doc_text_clear(&d);
    return st;
}

static int sweep_topk(void *arg) {
    const modattn_exec *ex = arg;
    size_t n = MODATTN_TOPK_PARALLEL_ROWS + 10, dim = 8;
    static float m[(MODATTN_TOPK_PARALLEL_ROWS + 10) * 8];
    float q[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (size_t i = 0; i < n * dim; i++) m[i] = (float)((i * 7919) % 101) / 101.0f;
    modattn_hit h[5];
    size_t nh = 0;
    return modattn__topk(m, n, dim, dim, q, 5, ex, MODATTN_SCAN_AUTO, h, &nh);
}

static int sweep_topk_batch(void *arg) {
    const modattn_exec *ex = arg;
    size_t n = 3000, dim = 8;
    static float m[3000 * 8];
    float q[3 * 8];
    for (size_t i = 0; i < n * dim; i++) m[i] = (float)((i * 7919) % 101) / 101.0f;
    for (size_t i = 0; i < 3 * dim; i++) q[i] = (float)i;
    modattn_hit h[3 * 5];
    size_t nh[3];
    return modattn__topk_batch(m, n, dim, dim, q, 3, dim, 5, ex, NULL, 0, h, nh);
}

static int sweep_sanitize(void *arg) {
    (void)arg;
    size_t n = 0;
    char *s = modattn__utf8_sanitize("a\xff" "b", 3, &n);
    if (!s) return modattn__mem_last_status();
    modattn_free(s);
    return 0;
}

static void test_alloc_failures(const char *dir) {
    sweep_ctx c = {dir, 0, NULL, NULL, 0};
    sweep_allocations("store", sweep_store, &c, 5000);
    sweep_allocations("html", sweep_html, NULL, 200);
    sweep_allocations("sanitize", sweep_sanitize, NULL, 10);
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    o.plugin_path = "";
    if (modattn_ctx_create(&o, &ctx) == 0) {
        /* the pool's workers free their start-up argument when they first run: let them */
        sweep_topk((void *)modattn_ctx_exec(ctx));
        sweep_allocations("topk", sweep_topk, (void *)modattn_ctx_exec(ctx), 20);
        sweep_allocations("topk batch", sweep_topk_batch, (void *)modattn_ctx_exec(ctx), 20);
        modattn_ctx_free(ctx);
    }
    modattn_tokenizer *tok = NULL;
    if (access(TOKENIZER_JSON, R_OK) == 0 && modattn_tokenizer_load(TOKENIZER_JSON, &tok) == 0) {
        c.tok = tok;
        c.text = "The quick brown fox jumps over the lazy dog. Pneumonoultramicroscopic words, "
                 "caf\xc3\xa9 and more text so that there are several chunks of thirty pieces in "
                 "it, with five pieces of overlap between them, again and again and again.";
        c.len = strlen(c.text);
        sweep_allocations("chunk", sweep_chunk, &c, 500);
        modattn_tokenizer_free(tok);
    }
}

int main(void) {
    char dir[] = "/tmp/modattn-pipeline-unit-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_utf8();
    test_sniff();
    test_html();
    test_pdf();
    test_extract_isolated();
    test_extract_stalled();
    test_chunking();
    test_topk();
    test_topk_batch();
    test_store(dir);
    test_keywords(dir);
    test_keywords_pruned(dir);
    test_paths();
    test_alloc_failures(dir);
    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    CHECK_MSG(ms.current[MODATTN_MEM_INDEX] == 0, "%lld bytes of index memory still in use",
              (long long)ms.current[MODATTN_MEM_INDEX]);
    CHECK_MSG(ms.current[MODATTN_MEM_WORKSPACE] == 0, "%lld bytes of workspace still in use",
              (long long)ms.current[MODATTN_MEM_WORKSPACE]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_pipeline_unit");
}
