/* tests/server/test_gate_unit.c — the front gate's rules (srv_head_check, server/gate.c) without a
 * socket: each well-formed request passes, and no prefix of it (what a slow client has sent so
 * far) is refused or passed early; each malformed one is refused with its status, and none of its
 * prefixes passes; then random mutations of the well-formed ones (bytes flipped, inserted,
 * deleted, cut), checked on every prefix: a verdict always, a refusal always with a status and a
 * message, a pass never before the head's end, a verdict that never goes from REFUSE back to
 * MORE or PASS as bytes arrive (the gate looks again at each arrival: what it refused stays
 * refused). Under the sanitizers, the reads stay within the bytes given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "test_util.h"

typedef struct bad_case {
    const char *req;
    int status;
} bad_case;

#define POSTH "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
#define CHUNKH POSTH "Transfer-Encoding: chunked\r\n\r\n"
#define EMB "{\"input\":\"hi\"}"

static const char *const k_good[] = {
    "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /health HTTP/1.0\r\n\r\n",
    "\r\nGET /health HTTP/1.0\r\n\r\n",
    "HEAD /v1/models?a=1&b=2 HTTP/1.1\r\nhost:x\r\nX-Empty:\r\nX-Tab:\tv\t\r\n\r\n",
    POSTH "Content-Length: 14\r\n\r\n" EMB,
    POSTH "Content-Length: 14\r\nContent-Length: 014\r\n\r\n" EMB,
    POSTH "Content-Length:  14\r\nExpect: 100-continue\r\n\r\n",
    POSTH "Content-Length: 00000000000000000000014\r\n\r\n" EMB,
    POSTH "Transfer-Encoding:\tCHUNKED\r\n\r\n0\r\n\r\n",
    CHUNKH "e\r\n" EMB "\r\n0\r\n\r\n",
    CHUNKH "E;ext=1;x\r\n" EMB "\r\n00\r\nX-Trailer: 1\r\n\r\n",
    CHUNKH "7\r\n{\"input\r\n7\r\n\":\"hi\"}\r\n0\r\n\r\n",
    POSTH "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
    "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\nX-Latin: \xe9t\xe9\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
};

static const bad_case k_bad[] = {
    {"GARBAGE\r\n\r\n", 400},
    {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400}, /* a TLS ClientHello */
    {"GET /health\r\n\r\n", 400},
    {"GET  /health HTTP/1.1\r\nHost: x\r\n\r\n", 400},
    {"GET /health HTTP/1.1 \r\nHost: x\r\n\r\n", 400},
    {"GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400},
    {"GET /health HTTP/1.1x\r\n", 400},
    {"GET /health HTTP/1.\r\n", 400},
    {"GET /health HTTP/1.1.1\r\n", 400},
    {"GET /health http/1.1\r\n", 400},
    {"GET /health HTTP/0.9\r\n\r\n", 505},
    {"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505},
    {"GET /health HTTP/3\r\nHost: x\r\n\r\n", 505},
    {"GET /health HTTP/1.2\r\nHost: x\r\n\r\n", 505},
    {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
    {"GET /health HTTP/1.1\r\n\r\n", 400},                      /* no Host */
    {"GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400},
    {"GET /health HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400},
    {"GET /health HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", 400},
    {"GET /health HTTP/1.1\r\n: x\r\nHost: x\r\n\r\n", 400},
    {"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400},
    {"GET /health HTTP/1.1\r\n\tHost: x\r\n\r\n", 400},
    {"GET /health HTTP/1.1\nHost: x\n\n", 400},
    {"GET /health HTTP/1.1\r\nHost: x\rX: y\r\n\r\n", 400},
    {"GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\x01\r\n\r\n", 400},
    {"\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n", 400},
    {POSTH "Content-Length: -1\r\n\r\n", 400},
    {POSTH "Content-Length: abc\r\n\r\n", 400},
    {POSTH "Content-Length:\r\n\r\n", 400},
    {POSTH "Content-Length: 1 2\r\n\r\n", 400},
    {POSTH "Content-Length: 14 \r\n\r\n", 400}, /* (libmicrohttpd keeps the space: not a number to it) */
    {POSTH "Content-Length: 14\t\r\n\r\n", 400},
    {POSTH "Transfer-Encoding: chunked \r\n\r\n", 501},
    {POSTH "Content-Length: 14, 14\r\n\r\n", 400},
    {POSTH "Content-Length: 14\r\nContent-Length: 15\r\n\r\n", 400},
    {POSTH "Content-Length: 18446744073709551616\r\n\r\n", 413},
    {POSTH "Content-Length: 18446744073709551615\r\nContent-Length: 5\r\n\r\n", 400},
    {POSTH "Content-Length: 14\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {POSTH "Transfer-Encoding: gzip\r\n\r\n", 501},
    {POSTH "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
    {POSTH "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {CHUNKH "zz\r\n" EMB "\r\n0\r\n\r\n", 400},
    {CHUNKH "5\r\n" EMB "\r\n0\r\n\r\n", 400},
    {CHUNKH "e \r\n" EMB "\r\n0\r\n\r\n", 400},
    {CHUNKH "e\n" EMB "\r\n0\r\n\r\n", 400},
    {CHUNKH "\r\n" EMB "\r\n0\r\n\r\n", 400},
    {CHUNKH "e;\x01\r\n" EMB "\r\n0\r\n\r\n", 400},
    {CHUNKH "e\r\n" EMB "0\r\n\r\n", 400},
    {CHUNKH "fffffffffffffffffffff\r\n", 413},
    {CHUNKH "e\r\n" EMB "\r\n0\r\nBad\r\n\r\n", 400},
    {CHUNKH "e\r\n" EMB "\r\n0\r\n X: folded\r\n\r\n", 400},
};

static int check_all_prefixes(const char *req, size_t n, srv_head_verdict *final, srv_head *h) {
    /* every prefix: a verdict; once refused, refused on */
    bool refused = false;
    int bad = 0;
    for (size_t k = 0; k <= n; k++) {
        srv_head_verdict v = srv_head_check(req, k, h);
        if (v == SRV_HEAD_REFUSE) {
            if (!h->message || !h->code || h->status < 400 || h->status > 505) bad++;
            refused = true;
        } else if (refused) {
            bad++;
        }
        if (v == SRV_HEAD_PASS && (h->head_len == 0 || h->head_len > k)) bad++;
        *final = v;
    }
    return bad;
}

/* The relay reads a chunked body as it arrives (srv_chunks_step, one byte at a time here: every
 * split), keeping what it did not consume: its verdict on the body is the one srv_head_check gives
 * with the whole request in view, and a PASS consumes exactly the body. 0, or 1 if they differ. */
static int stream_equals_whole(const char *req, size_t n) {
    srv_head h, hs;
    const srv_head_verdict whole = srv_head_check(req, n, &h);
    if (!h.head_len || !h.chunked || h.expect) return 0;
    if (srv_head_check(req, h.head_len, &hs) == SRV_HEAD_REFUSE) return 0; /* the head's own refusal */
    const char *body = req + h.head_len;
    const size_t len = n - h.head_len;
    srv_chunks st;
    memset(&st, 0, sizeof st);
    size_t pos = 0;
    srv_head_verdict v = SRV_HEAD_MORE;
    memset(&hs, 0, sizeof hs);
    for (size_t k = 0; k <= len && v == SRV_HEAD_MORE; k++) {
        v = srv_chunks_step(body, &pos, k, &st, &hs);
        if (pos > k) return 1;
    }
    if (v != whole || (v == SRV_HEAD_REFUSE && hs.status != h.status)) return 1;
    return 0;
}

int main(void) {
    srv_head h;
    for (size_t i = 0; i < sizeof k_good / sizeof *k_good; i++) {
        const char *r = k_good[i];
        const size_t n = strlen(r);
        srv_head_verdict v = srv_head_check(r, n, &h);
        CHECK_MSG(v == SRV_HEAD_PASS, "good request %zu: verdict %d (%d %s)", i, (int)v, h.status,
                  h.message ? h.message : "");
        size_t early = 0;
        for (size_t k = 0; k < n; k++) {
            srv_head_verdict pv = srv_head_check(r, k, &h);
            if (pv == SRV_HEAD_REFUSE || (pv == SRV_HEAD_PASS && k < h.head_len)) early++;
        }
        CHECK_MSG(early == 0, "good request %zu: %zu of its prefixes refused or passed early", i, early);
    }
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++) {
        const char *r = k_bad[i].req;
        const size_t n = strlen(r);
        srv_head_verdict v = srv_head_check(r, n, &h);
        CHECK_MSG(v == SRV_HEAD_REFUSE && h.status == k_bad[i].status && h.message && h.message[0] && h.code,
                  "bad request %zu: verdict %d status %d (want %d): %s", i, (int)v, h.status, k_bad[i].status,
                  h.message ? h.message : "");
        size_t passed = 0;
        for (size_t k = 0; k < n; k++) passed += srv_head_check(r, k, &h) == SRV_HEAD_PASS;
        CHECK_MSG(passed == 0, "bad request %zu: %zu of its prefixes passed", i, passed);
    }
    /* limits */
    {
        static char buf[65536];
        int o = snprintf(buf, sizeof buf, "GET /");
        memset(buf + o, 'a', SRV_MAX_URI + 1);
        CHECK(srv_head_check(buf, (size_t)o + SRV_MAX_URI + 1, &h) == SRV_HEAD_REFUSE && h.status == 414);
        o = snprintf(buf, sizeof buf, "GET /health HTTP/1.1\r\nHost: x\r\nX-A: ");
        memset(buf + o, 'a', SRV_MAX_HEADERS);
        CHECK(srv_head_check(buf, (size_t)o + SRV_MAX_HEADERS, &h) == SRV_HEAD_REFUSE && h.status == 431);
        o = snprintf(buf, sizeof buf, "GET /health HTTP/1.1\r\nHost: x\r\n");
        for (int i = 0; i < 100; i++) o += snprintf(buf + o, sizeof buf - (size_t)o, "X-%d: 1\r\n", i);
        CHECK(srv_head_check(buf, (size_t)o, &h) == SRV_HEAD_REFUSE && h.status == 431); /* 101 fields */
        o = snprintf(buf, sizeof buf, "GET /health?a");
        for (int i = 0; i < 128; i++) o += snprintf(buf + o, sizeof buf - (size_t)o, "&a");
        CHECK(srv_head_check(buf, (size_t)o, &h) == SRV_HEAD_REFUSE && h.status == 414); /* 129 parameters */
        o = snprintf(buf, sizeof buf, "GET /health HTTP/1.1\r\nHost: x\r\nCookie: a=b");
        for (int i = 0; i < 128; i++) o += snprintf(buf + o, sizeof buf - (size_t)o, "; a=b");
        o += snprintf(buf + o, sizeof buf - (size_t)o, "\r\n\r\n");
        CHECK(srv_head_check(buf, (size_t)o, &h) == SRV_HEAD_REFUSE && h.status == 431); /* 129 cookies */
        /* a chunked body larger than what is in view: well formed so far */
        o = snprintf(buf, sizeof buf, CHUNKH "100000\r\n");
        memset(buf + o, 'x', sizeof buf - (size_t)o);
        CHECK(srv_head_check(buf, sizeof buf, &h) == SRV_HEAD_MORE && h.head_len > 0);
    }
    /* a chunked body read as it arrives */
    for (size_t i = 0; i < sizeof k_good / sizeof *k_good; i++)
        CHECK_MSG(stream_equals_whole(k_good[i], strlen(k_good[i])) == 0, "good request %zu: streamed != whole", i);
    for (size_t i = 0; i < sizeof k_bad / sizeof *k_bad; i++)
        CHECK_MSG(stream_equals_whole(k_bad[i].req, strlen(k_bad[i].req)) == 0, "bad request %zu: streamed != whole", i);
    {
        /* a body past any window: 300 chunks of 1000 bytes, then a broken one */
        static char big[400000];
        int o = snprintf(big, sizeof big, CHUNKH);
        for (int i = 0; i < 300; i++) {
            o += snprintf(big + o, sizeof big - (size_t)o, "3e8\r\n");
            memset(big + o, 'x', 1000);
            o += 1000;
            o += snprintf(big + o, sizeof big - (size_t)o, "\r\n");
        }
        srv_chunks st;
        memset(&st, 0, sizeof st);
        size_t pos = 0, from = (size_t)(strstr(big, "\r\n\r\n") - big) + 4;
        srv_head_verdict v = SRV_HEAD_MORE;
        for (size_t k = from; k <= (size_t)o && v == SRV_HEAD_MORE; k += 777) { /* 777 bytes an arrival */
            v = srv_chunks_step(big + from, &pos, k - from, &st, &h);
        }
        CHECK(v == SRV_HEAD_MORE && pos <= (size_t)o - from);
        int e = snprintf(big + o, sizeof big - (size_t)o, "0\r\nX-T: 1\r\n\r\n");
        v = srv_chunks_step(big + from, &pos, (size_t)(o + e) - from, &st, &h);
        CHECK_MSG(v == SRV_HEAD_PASS && pos == (size_t)(o + e) - from, "a 300 kB chunked body passes: %d", (int)v);
        memset(&st, 0, sizeof st);
        pos = 0;
        memcpy(big + o, "zz\r\n", 4);
        v = srv_chunks_step(big + from, &pos, (size_t)o + 4 - from, &st, &h);
        CHECK_MSG(v == SRV_HEAD_REFUSE && h.status == 400, "a broken chunk 300 kB in is refused: %d %d", (int)v, h.status);
    }
    /* mutations */
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    size_t bad = 0, verdicts[3] = {0, 0, 0};
    char m[4096];
    const size_t ngood = sizeof k_good / sizeof *k_good;
    for (int it = 0; it < 20000; it++) {
        const char *r = k_good[(size_t)it % ngood];
        size_t n = strlen(r);
        memcpy(m, r, n);
        const int edits = 1 + (int)(x % 3);
        for (int e = 0; e < edits && n > 0; e++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const size_t at = (size_t)(x >> 20) % n;
            static const char interesting[] = "\r\n \t:;0aZ\x00\x7f\xff/?&=";
            const char c = (x & 1) ? (char)(x >> 40) : interesting[(x >> 40) % (sizeof interesting - 1)];
            switch ((x >> 8) % 4) {
            case 0: m[at] = c; break;
            case 1:
                if (n + 1 < sizeof m) {
                    memmove(m + at + 1, m + at, n - at);
                    m[at] = c;
                    n++;
                }
                break;
            case 2:
                memmove(m + at, m + at + 1, n - at - 1);
                n--;
                break;
            default: n = at; break;
            }
        }
        srv_head_verdict v;
        /* (heap copy, exactly n bytes: the sanitizers catch a read past them) */
        char *heap = malloc(n ? n : 1);
        memcpy(heap, m, n);
        bad += (size_t)check_all_prefixes(heap, n, &v, &h);
        bad += (size_t)stream_equals_whole(heap, n);
        free(heap);
        verdicts[v]++;
    }
    CHECK_MSG(bad == 0, "%zu mutated requests broke an invariant", bad);
    printf("mutations: %zu more, %zu passed, %zu refused\n", verdicts[0], verdicts[1], verdicts[2]);
    CHECK_MSG(verdicts[SRV_HEAD_REFUSE] > 1000 && verdicts[SRV_HEAD_PASS] > 1000,
              "mutations reach both verdicts: %zu more, %zu passed, %zu refused", verdicts[0], verdicts[1], verdicts[2]);
    return test_finish("test_gate_unit");
}
