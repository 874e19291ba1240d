/* server/gate.c — the front gate: the listening socket and every connection are ours, not
 * libmicrohttpd's. One thread accepts connections and relays each one to libmicrohttpd through an
 * AF_UNIX socket pair (its end handed over with MHD_add_connection and the client's address, so
 * that --max-client-bodies and the access log see the client), all of them watched with epoll
 * (edge-triggered: a slow or stalled client holds a socket and a little state, never a thread).
 *
 * Why: libmicrohttpd 0.9.75 answers what it cannot parse itself, in HTML (400, 413, 414, 431,
 * 505), one of those replies (a Content-Length that is not a number) has its header block sent
 * twice, some heads get no answer at all, and no hook replaces them. Looking at a connection's
 * first request only was not enough (later requests on a kept-alive connection, a chunked body
 * past the first bytes, a body after 100-continue were its alone), and closing every connection
 * after one response to see every request was 7x slower on /health. So every byte passes here.
 *
 * Every request of a connection is framed here, one at a time: its head (whole, at most
 * SRV_GATE_BUF bytes) checked by srv_head_check's rules and forwarded as it came; its body counted
 * (Content-Length) or its chunks checked as they pass (srv_chunks_step), forwarded as it arrives
 * (never held whole: a client's bytes are read only while the connection's buffer has room, and
 * libmicrohttpd's only while the client takes them: two buffers of SRV_GATE_BUF at most,
 * none while a kept-alive connection waits between requests). The next
 * request is read once libmicrohttpd's response to this one has come whole (its framing followed:
 * Content-Length, chunked, none for HEAD, 204 and 304; "100 Continue" relayed and waited past).
 * Responses pass unchanged.
 *
 * A request that breaks the rules gets one JSON answer written here ({"error": ...}, Connection:
 * close) after the responses before it, libmicrohttpd's end is closed (a request it was reading
 * ends as the client's abort), and the connection is closed after a short lingering read, so that
 * the answer is not lost to a reset. If libmicrohttpd has begun to answer that request already (a
 * refusal it sends before the body, e.g. 413 or 429), its answer stands and the connection closes
 * after it.
 *
 * Deadlines (--timeout): a head within it of the connection's start or of the last response
 * (else 408 if some of it came; an idle connection is closed without an answer), a body within it
 * of its head (else 408), and a client that takes nothing of its answer for that long is closed.
 * libmicrohttpd's own idle timeout is set past these (server.c).
 *
 * Disconnects: a client that closes its side while its request is with libmicrohttpd has that
 * passed on (shutdown of our end), so the server's check for abandoned requests (POLLRDHUP on
 * libmicrohttpd's end, batch.c) still sees it; a reset closes both ends. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

#define SRV_GATE_LINGER_S 2.0   /* after an answer: read and drop what the client still sends */
#define SRV_GATE_TICK_MS 50     /* deadlines are checked this often while connections are held */
#define SRV_HEAD_MAX_METHOD 32
/* libmicrohttpd keeps each header field, query parameter and cookie in its 64 KiB per connection
 * (about 56 bytes each, with the head itself and a copy of the Cookie header): past that it
 * answers 431 in HTML (its header block twice) or, for query parameters, nothing at all */
#define SRV_HEAD_MAX_FIELDS 100
#define SRV_HEAD_MAX_PARAMS 128  /* query parameters ('&' separated) */
#define SRV_HEAD_MAX_COOKIES 128 /* cookies (';' separated), all Cookie headers together */
#define SRV_HEAD_MAX_EMPTY 8    /* empty lines before the request line (RFC 9112 2.2: ignored) */
#define SRV_CHUNK_LINE_MAX 4096 /* a chunk-size line with its extensions */

/* ---- the head's rules (pure: unit-tested and fuzzed through srv_head_check) */

static bool is_tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* a field value's byte: VCHAR, obs-text, SP, HTAB */
static bool is_value_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

static bool is_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static srv_head_verdict refuse(srv_head *h, int status, const char *code, const char *message) {
    h->status = status;
    h->code = code;
    h->message = message;
    return SRV_HEAD_REFUSE;
}

/* The end of the line that starts at p (the index of its CR), or -1 if its CRLF is not in view
 * (more bytes needed), or -2 for a CR or LF alone (*bare set). */
static long line_end(const unsigned char *b, size_t p, size_t n) {
    for (size_t i = p; i < n; i++) {
        if (b[i] == '\n') return -2; /* LF without CR */
        if (b[i] == '\r') {
            if (i + 1 == n) return -1;
            return b[i + 1] == '\n' ? (long)i : -2;
        }
    }
    return -1;
}

static void copy_text(char *dst, size_t cap, const unsigned char *src, size_t len) {
    if (len >= cap) len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* the value of the field line [v, e) without its leading whitespace: libmicrohttpd (0.9.75)
 * drops that, never the trailing whitespace (so "Content-Length: 14 " is not a number to it) */
static void skip_ows(const unsigned char *b, size_t *v, size_t e) {
    while (*v < e && (b[*v] == ' ' || b[*v] == '\t')) (*v)++;
}

/* One field line [p, e) (no CRLF): name ':' value. Counts and framing into h. 0 or refused. */
static int field_line(const unsigned char *b, size_t p, size_t e, bool trailer, srv_head *h) {
    if (b[p] == ' ' || b[p] == '\t') {
        refuse(h, 400, "bad_request", trailer ? "a trailer field line starts with whitespace (obs-fold is not accepted)"
                                              : "a header line starts with whitespace (a folded header, obs-fold, is "
                                                "not accepted)");
        return -1;
    }
    size_t c = p;
    while (c < e && is_tchar(b[c])) c++;
    if (c == e || b[c] != ':') {
        const void *colon = memchr(b + p, ':', e - p);
        refuse(h, 400, "bad_request",
               !colon ? (trailer ? "a trailer field line has no colon" : "a header line has no colon (name: value)")
               : c == p ? "a header line has no field name before its colon"
                        : "a header field name has a character a token may not have (spaces before the colon "
                          "included)");
        return -1;
    }
    if (c == p) {
        refuse(h, 400, "bad_request", "a header line has no field name before its colon");
        return -1;
    }
    for (size_t i = c + 1; i < e; i++)
        if (!is_value_char(b[i])) {
            refuse(h, 400, "bad_request", "a header field value has a control character");
            return -1;
        }
    if (trailer) return 0;
    size_t v = c + 1;
    const size_t ve = e;
    skip_ows(b, &v, ve);
    const size_t nlen = c - p;
    if (nlen == 14 && strncasecmp((const char *)b + p, "Content-Length", 14) == 0) {
        unsigned long long x = 0;
        bool over = false;
        if (v == ve) {
            refuse(h, 400, "bad_framing", "the Content-Length header is empty: it must be a number of bytes");
            return -1;
        }
        for (size_t i = v; i < ve; i++) {
            if (b[i] < '0' || b[i] > '9') {
                refuse(h, 400, "bad_framing", "the Content-Length header is not a number of bytes (digits only, "
                                              "nothing after them)");
                return -1;
            }
            const unsigned d = (unsigned)(b[i] - '0');
            if (x > (~0ULL - d) / 10) over = true;
            else x = x * 10 + d;
        }
        if (over) {
            refuse(h, 413, "payload_too_large", "the Content-Length header is larger than any body this server takes");
            return -1;
        }
        if (h->ncl && x != h->content_length) {
            refuse(h, 400, "bad_framing", "the request has Content-Length headers that differ");
            return -1;
        }
        h->content_length = x;
        h->ncl++;
    } else if (nlen == 17 && strncasecmp((const char *)b + p, "Transfer-Encoding", 17) == 0) {
        if (h->chunked) {
            refuse(h, 400, "bad_framing", "the request has more than one Transfer-Encoding header");
            return -1;
        }
        if (ve - v != 7 || strncasecmp((const char *)b + v, "chunked", 7) != 0) {
            refuse(h, 501, "bad_framing", "the only Transfer-Encoding this server takes is chunked");
            return -1;
        }
        h->chunked = true;
    } else if (nlen == 4 && strncasecmp((const char *)b + p, "Host", 4) == 0) {
        if (h->host) {
            refuse(h, 400, "bad_request", "the request has more than one Host header");
            return -1;
        }
        h->host = true;
    } else if (nlen == 6 && strncasecmp((const char *)b + p, "Expect", 6) == 0) {
        h->expect = true;
    } else if (nlen == 6 && strncasecmp((const char *)b + p, "Cookie", 6) == 0) {
        size_t k = 1;
        for (size_t i = v; i < ve; i++) k += b[i] == ';';
        h->cookies += k;
        if (h->cookies > SRV_HEAD_MAX_COOKIES) {
            snprintf(h->msg_buf, sizeof h->msg_buf, "the request has more cookies than this server takes (%d)",
                     SRV_HEAD_MAX_COOKIES);
            refuse(h, 431, "header_fields_too_large", h->msg_buf);
            return -1;
        }
    }
    return 0;
}

enum { CK_SIZE = 0, CK_DATA, CK_CRLF, CK_TRAILER, CK_DONE };

srv_head_verdict srv_chunks_step(const char *buf, size_t *pos, size_t n, srv_chunks *st, srv_head *h) {
    const unsigned char *b = (const unsigned char *)buf;
    size_t p = *pos;
    srv_head_verdict v = SRV_HEAD_MORE;
    for (;;) {
        if (st->phase == CK_SIZE) {
            /* chunk-size [ ";" extensions ] CRLF: consumed only once its CRLF is in view */
            size_t i = p, digits = 0;
            while (i < n && is_hex(b[i])) {
                if (digits || b[i] != '0') digits++;
                i++;
            }
            if (i == p && i < n) {
                v = refuse(h, 400, "bad_framing", "a chunk of the chunked body does not start with its size in hexadecimal");
                break;
            }
            if (digits > 16) {
                v = refuse(h, 413, "payload_too_large", "a chunk of the chunked body is larger than any body this server takes");
                break;
            }
            if (i < n && b[i] != ';' && b[i] != '\r') {
                v = refuse(h, 400, "bad_framing", "a chunk's size is followed by something other than ';' or CRLF");
                break;
            }
            size_t e = i;
            while (e < n && b[e] != '\r' && b[e] != '\n' && is_value_char(b[e])) e++;
            if (e < n && b[e] != '\r' && b[e] != '\n') {
                v = refuse(h, 400, "bad_framing", "a chunk extension has a control character");
                break;
            }
            if (e - p > SRV_CHUNK_LINE_MAX) {
                v = refuse(h, 400, "bad_framing", "a chunk-size line is longer than this server takes");
                break;
            }
            const long le = line_end(b, e, n);
            if (le == -2) {
                v = refuse(h, 400, "bad_framing", "a chunk-size line ends in a CR or LF alone, not CRLF");
                break;
            }
            if (le < 0 || i == p) break; /* more bytes needed */
            unsigned long long size = 0;
            for (size_t k = p; k < i; k++) {
                const unsigned char c = b[k];
                size = size * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
            }
            p = (size_t)le + 2;
            st->left = size;
            st->phase = size ? CK_DATA : CK_TRAILER;
        } else if (st->phase == CK_DATA) {
            const size_t take = (unsigned long long)(n - p) < st->left ? n - p : (size_t)st->left;
            p += take;
            st->left -= take;
            if (st->left) break;
            st->phase = CK_CRLF;
        } else if (st->phase == CK_CRLF) {
            if (n - p < 2) break;
            if (b[p] != '\r' || b[p + 1] != '\n') {
                v = refuse(h, 400, "bad_framing", "a chunk's data is not followed by CRLF (its size is wrong)");
                break;
            }
            p += 2;
            st->phase = CK_SIZE;
        } else if (st->phase == CK_TRAILER) {
            /* the trailer section: field lines, then an empty line */
            const long le = line_end(b, p, n);
            if (le == -2) {
                v = refuse(h, 400, "bad_framing", "a trailer line ends in a CR or LF alone, not CRLF");
                break;
            }
            if (le < 0) {
                if (n - p > SRV_CHUNK_LINE_MAX)
                    v = refuse(h, 431, "header_fields_too_large", "a trailer field is longer than this server takes");
                break;
            }
            if ((size_t)le == p) {
                p += 2;
                st->phase = CK_DONE;
                continue;
            }
            if (field_line(b, p, (size_t)le, true, h)) {
                v = SRV_HEAD_REFUSE;
                break;
            }
            /* libmicrohttpd keeps trailers in its 64 KiB per connection, as it keeps headers */
            st->trailer_bytes += (size_t)le - p + 2;
            if (++st->trailer_fields > SRV_HEAD_MAX_FIELDS || st->trailer_bytes > SRV_MAX_HEADERS) {
                v = refuse(h, 431, "header_fields_too_large", "the chunked body's trailer fields are more or larger "
                                                               "than this server takes");
                break;
            }
            p = (size_t)le + 2;
        } else {
            v = SRV_HEAD_PASS;
            break;
        }
    }
    *pos = p;
    return v;
}

/* The chunked body from b[p], all of it in view: SRV_HEAD_PASS once its last chunk and trailers
 * are in view and well formed, SRV_HEAD_MORE while what is in view is well formed, else refused. */
static srv_head_verdict check_chunks(const unsigned char *b, size_t p, size_t n, srv_head *h) {
    srv_chunks st;
    memset(&st, 0, sizeof st);
    return srv_chunks_step((const char *)b, &p, n, &st, h);
}

static srv_head_verdict head_check(const char *buf, size_t n, srv_head *h, bool body) {
    const unsigned char *b = (const unsigned char *)buf;
    memset(h, 0, sizeof *h);
    size_t p = 0;
    /* empty lines before the request line are ignored (a few) */
    for (int k = 0; p + 1 < n && b[p] == '\r' && b[p + 1] == '\n'; k++, p += 2)
        if (k == SRV_HEAD_MAX_EMPTY)
            return refuse(h, 400, "bad_request", "the request starts with too many empty lines");
    if (p + 1 == n && b[p] == '\r') return SRV_HEAD_MORE;
    if (p < n && (b[p] == '\n' || b[p] == '\r'))
        return refuse(h, 400, "bad_request", "the request starts with a CR or LF alone, not CRLF");

    /* the request line: method SP target SP HTTP/x.y CRLF */
    size_t m = p;
    while (m < n && is_tchar(b[m])) m++;
    copy_text(h->method, sizeof h->method, b + p, m - p);
    if (m - p > SRV_HEAD_MAX_METHOD)
        return refuse(h, 400, "bad_request", "the request's method is longer than any this server knows");
    if (m == n) return SRV_HEAD_MORE;
    if (m == p || b[m] != ' ')
        return refuse(h, 400, "bad_request",
                      m == p ? "the request line is not 'METHOD TARGET HTTP/1.1' (the method is not a token)"
                             : "the request line is not 'METHOD TARGET HTTP/1.1'");
    size_t t = m + 1;
    size_t te = t;
    while (te < n && b[te] > 0x20 && b[te] != 0x7f) te++;
    copy_text(h->target, sizeof h->target, b + t, te - t);
    if (te - t > SRV_MAX_URI) {
        char *msg = h->msg_buf;
        snprintf(msg, sizeof h->msg_buf, "the request's URI is longer than this server takes (%d bytes)", SRV_MAX_URI);
        return refuse(h, 414, "uri_too_long", msg);
    }
    const unsigned char *q = memchr(b + t, '?', te - t);
    if (q) {
        size_t params = 1;
        for (const unsigned char *x = q; x < b + te; x++) params += *x == '&';
        if (params > SRV_HEAD_MAX_PARAMS) {
            snprintf(h->msg_buf, sizeof h->msg_buf,
                     "the request's query has more parameters than this server takes (%d)", SRV_HEAD_MAX_PARAMS);
            return refuse(h, 414, "uri_too_long", h->msg_buf);
        }
    }
    if (te == n) return SRV_HEAD_MORE;
    if (te == t || b[te] != ' ')
        return refuse(h, 400, "bad_request",
                      "the request line is not 'METHOD TARGET HTTP/1.1' (one space, then a target without spaces or "
                      "control characters)");
    size_t v = te + 1;
    static const char proto[] = "HTTP/";
    for (size_t k = 0; k < 5; k++) {
        if (v + k == n) return SRV_HEAD_MORE;
        if (b[v + k] != (unsigned char)proto[k])
            return refuse(h, 400, "bad_request", "the request line does not end in an HTTP version (HTTP/1.1)");
    }
    size_t ve = v + 5;
    while (ve < n && ((b[ve] >= '0' && b[ve] <= '9') || b[ve] == '.') && ve - v < 16) ve++;
    if (ve == n) return SRV_HEAD_MORE;
    if (b[ve] != '\r' && b[ve] != '\n')
        return refuse(h, 400, "bad_request", "the request line does not end in an HTTP version (HTTP/1.1)");
    if (ve == v + 8 && b[v + 5] == '1' && b[v + 6] == '.' && (b[v + 7] == '0' || b[v + 7] == '1')) {
        h->http11 = b[v + 7] == '1';
    } else {
        /* HTTP/DIGITS[.DIGITS]: a version, not this one; anything else is not a version */
        size_t k = v + 5, d1 = 0, d2 = 0;
        while (k < ve && b[k] != '.') k++, d1++;
        bool dot = k < ve;
        if (dot) d2 = ve - k - 1;
        if (d1 == 0 || (dot && d2 == 0) || memchr(b + k + (dot ? 1 : 0), '.', ve - k - (dot ? 1 : 0)))
            return refuse(h, 400, "bad_request", "the request line does not end in an HTTP version (HTTP/1.1)");
        snprintf(h->msg_buf, sizeof h->msg_buf, "%.*s is not supported: use HTTP/1.1 or HTTP/1.0", (int)(ve - v),
                 (const char *)b + v);
        return refuse(h, 505, "http_version_not_supported", h->msg_buf);
    }
    long le = line_end(b, ve, n);
    if (le == -2) return refuse(h, 400, "bad_request", "the request line ends in a CR or LF alone, not CRLF");
    if (le < 0) return SRV_HEAD_MORE;
    p = (size_t)le + 2;

    /* the header fields, then an empty line */
    size_t bytes = 0, fields = 0;
    for (;;) {
        le = line_end(b, p, n);
        if (le == -2) return refuse(h, 400, "bad_request", "a header line ends in a CR or LF alone, not CRLF");
        const size_t len = le < 0 ? n - p : (size_t)le - p;
        if (len && bytes + len + 2 > SRV_MAX_HEADERS) {
            snprintf(h->msg_buf, sizeof h->msg_buf,
                     "the request's header fields are larger than this server takes (%d bytes)", SRV_MAX_HEADERS);
            return refuse(h, 431, "header_fields_too_large", h->msg_buf);
        }
        if (le < 0) {
            /* the line so far (its CR, if in view, left out): refused now if it cannot become a
             * field line */
            const size_t pe = b[n - 1] == '\r' ? n - 1 : n;
            if (pe == p) return SRV_HEAD_MORE;
            size_t i = p;
            while (i < pe && is_tchar(b[i])) i++;
            bool bad = i == p || (i < pe && b[i] != ':');
            for (size_t k = i + 1; !bad && k < pe; k++) bad = !is_value_char(b[k]);
            if (bad) return field_line(b, p, pe, false, h) ? SRV_HEAD_REFUSE : SRV_HEAD_MORE;
            return SRV_HEAD_MORE;
        }
        if (len == 0) break;
        if (++fields > SRV_HEAD_MAX_FIELDS) {
            snprintf(h->msg_buf, sizeof h->msg_buf, "the request has more header fields than this server takes (%d)",
                     SRV_HEAD_MAX_FIELDS);
            return refuse(h, 431, "header_fields_too_large", h->msg_buf);
        }
        if (field_line(b, p, (size_t)le, false, h)) return SRV_HEAD_REFUSE;
        bytes += len + 2;
        p = (size_t)le + 2;
    }
    h->head_len = p + 2;
    if (h->http11 && !h->host) return refuse(h, 400, "bad_request", "an HTTP/1.1 request needs a Host header");
    if (h->ncl && h->chunked)
        return refuse(h, 400, "bad_framing", "the request has both Content-Length and Transfer-Encoding");
    if (!body || !h->chunked || h->expect) return SRV_HEAD_PASS;
    return check_chunks(b, h->head_len, n, h);
}

srv_head_verdict srv_head_check(const char *buf, size_t n, srv_head *h) { return head_check(buf, n, h, true); }

/* ---- the gate's thread: a relay per connection */

enum { GC_OPEN = 0, GC_LINGER };
/* the request being read from the client */
enum { RQ_HEAD = 0, RQ_BODY_CL, RQ_BODY_CHUNKED, RQ_DONE, RQ_CLOSED };
/* the response being read from libmicrohttpd */
enum { RS_HEAD = 0, RS_BODY, RS_CHUNK_SIZE, RS_CHUNK_DATA, RS_TRAILER, RS_UNTIL_CLOSE };

#define SRV_GATE_OUT_SPARE 2048 /* room past SRV_GATE_BUF for the gate's own answer */
#define SRV_GATE_RHEAD 1024     /* the response head kept to read its framing */

typedef struct gate_conn {
    int fd;                   /* the client's */
    int mfd;                  /* our end of the socket pair to libmicrohttpd, -1 before or after */
    int state, rq, rs;
    uint64_t t_start;         /* accepted */
    uint64_t deadline;        /* ns: the head's, the body's, or the lingering close's */
    uint64_t t_out;           /* the last progress writing to the client (or when output began) */
    bool c_rd, c_wr, m_rd, m_wr;   /* ready (edge-triggered epoll) */
    bool c_eof, c_hup, m_shut;     /* the client closed its side; its socket failed; we shut mfd's */
    bool close_after;         /* no more requests: close once the output is out (and mfd closed) */
    bool dead;
    bool is_head;             /* the request is HEAD: its response has no body */
    bool resp_close;          /* the response says Connection: close */
    /* client -> libmicrohttpd: in[0, fwd) checked and not yet written, in[fwd, in_len) not yet
     * read by the framing */
    char *in;
    size_t in_len, in_cap, fwd;
    unsigned long long left;  /* RQ_BODY_CL: the body's bytes still to come */
    srv_chunks ck;            /* RQ_BODY_CHUNKED */
    /* libmicrohttpd -> client: out[out_off, out_len) not yet written */
    char *out;
    size_t out_len, out_off;
    char rh[SRV_GATE_RHEAD];  /* the response head so far */
    size_t rh_len;
    unsigned long long r_left;
    char rline;               /* RS_CHUNK_SIZE, RS_TRAILER: the line's last byte ('\n': a new line) */
    bool r_empty;             /* RS_TRAILER: the line so far is empty */
    char method[16], target[160]; /* the current request's (the access log of a refusal) */
    struct sockaddr_storage addr;
    socklen_t alen;
    struct gate_conn *prev, *next;
} gate_conn;

struct srv_gate {
    srv_gate_config cfg;
    int ep, wake, lfd;
    pthread_t th;
    gate_conn *head;
    gate_conn *dead;          /* closed during this round of events, freed after it */
    size_t nconns;
    _Atomic int cmd;          /* 1: stop accepting; 2: quit */
    _Atomic bool accepting_stopped;
    uint64_t accept_paused_until;
    char tag_listen, tag_wake;
    char scratch[16384];
};

static uint64_t ns_from_s(double s) { return (uint64_t)(s * 1e9); }

static void close_mfd(srv_gate *g, gate_conn *c) {
    if (c->mfd < 0) return;
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->mfd, NULL);
    close(c->mfd);
    c->mfd = -1;
    c->m_rd = c->m_wr = false;
}

static void conn_close(srv_gate *g, gate_conn *c) {
    if (c->dead) return;
    close_mfd(g, c);
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev) c->prev->next = c->next;
    else g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    g->nconns--;
    c->dead = true;
    c->next = g->dead; /* events of this round may still name it */
    g->dead = c;
}

static void client_text(const gate_conn *c, char *buf, size_t len) {
    snprintf(buf, len, "-");
    if (c->addr.ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)&c->addr)->sin_addr, buf, (socklen_t)len);
    else if (c->addr.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)&c->addr)->sin6_addr, buf, (socklen_t)len);
}

static const char *reason(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

static bool out_alloc(gate_conn *c) {
    if (!c->out) c->out = malloc(SRV_GATE_BUF + SRV_GATE_OUT_SPARE);
    return c->out != NULL;
}

/* The gate answers the request itself (nothing of a response to it has come from libmicrohttpd):
 * the JSON error goes out after what is still being written of earlier responses, libmicrohttpd's
 * end is closed (a request it was reading ends there as the client's abort), and the connection
 * is closed once the answer is out (after a lingering read). Logged and counted. */
static void answer(srv_gate *g, gate_conn *c, int status, const char *code, const char *message, bool malformed) {
    close_mfd(g, c);
    c->rq = RQ_CLOSED;
    c->close_after = true;
    c->in_len = c->fwd = 0;
    char *body = srv_error_body(status, message, NULL, code);
    static const char oom[] = "{\"error\":{\"message\":\"the request was refused (the server is out of memory to say "
                              "why)\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}";
    const char *bt = body ? body : oom;
    size_t blen = strlen(bt);
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (out_alloc(c)) {
        if (c->out_off == c->out_len) c->out_off = c->out_len = 0, c->t_out = srv_gate_now_ns();
        const size_t room = SRV_GATE_BUF + SRV_GATE_OUT_SPARE - c->out_len;
        if (blen > room / 2) blen = 0; /* (never: the messages are short) */
        int hl = snprintf(c->out + c->out_len, room,
                          "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: %zu\r\nContent-Type: "
                          "application/json\r\nDate: %s\r\n\r\n%.*s",
                          status, reason(status), blen, date, (int)blen, bt);
        if (hl > 0 && (size_t)hl < room) c->out_len += (size_t)hl;
    }
    free(body);
    if (g->cfg.refused) {
        srv_gate_refusal r;
        memset(&r, 0, sizeof r);
        client_text(c, r.client, sizeof r.client);
        r.method = c->method[0] ? c->method : "-";
        r.target = c->target[0] ? c->target : "-";
        r.status = status;
        r.bytes = blen;
        r.seconds = (double)(srv_gate_now_ns() - c->t_start) * 1e-9;
        r.malformed = malformed;
        g->cfg.refused(g->cfg.ud, &r);
    }
}

static void refuse_head(srv_gate *g, gate_conn *c, const srv_head *h) {
    snprintf(c->method, sizeof c->method, "%s", h->method);
    snprintf(c->target, sizeof c->target, "%s", h->target);
    answer(g, c, h->status, h->code, h->message, true);
}

/* libmicrohttpd's end of the connection: a socket pair, its end handed over with the client's
 * address (its per-address limit and its log see the client); 0, else answered 503 */
static int open_relay(srv_gate *g, gate_conn *c) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        answer(g, c, 503, "unavailable", "the server is out of file descriptors; retry later", false);
        return -1;
    }
    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                            .data.u64 = (uint64_t)(uintptr_t)c | 1u};
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, sv[0], &e) != 0) {
        close(sv[0]);
        close(sv[1]);
        answer(g, c, 503, "unavailable", "the server is out of memory; retry later", false);
        return -1;
    }
    c->mfd = sv[0];
    c->m_rd = false;
    c->m_wr = true;
    if (g->cfg.hand_off(g->cfg.ud, sv[1], (const struct sockaddr *)&c->addr, c->alen) != 0) {
        answer(g, c, 503, "unavailable", "the server is at its connection limit; retry later", false);
        return -1;
    }
    return 0;
}

/* Frames what the client sent: a head checked whole (then forwarded), a body counted or its
 * chunks checked as they pass. One request at a time: the next is read once libmicrohttpd has
 * answered this one. */
static void frame_in(srv_gate *g, gate_conn *c) {
    for (;;) {
        if (c->rq == RQ_HEAD) {
            if (c->fwd == c->in_len || c->fwd) return; /* nothing new, or the last request not all written */
            srv_head h;
            const srv_head_verdict v = head_check(c->in, c->in_len, &h, false);
            if (v == SRV_HEAD_REFUSE) {
                refuse_head(g, c, &h);
                return;
            }
            if (v == SRV_HEAD_MORE) {
                if (c->in_len == SRV_GATE_BUF) { /* (the limits above keep a head shorter) */
                    snprintf(h.msg_buf, sizeof h.msg_buf, "the request's head is larger than this server takes");
                    h.status = 431, h.code = "header_fields_too_large", h.message = h.msg_buf;
                    refuse_head(g, c, &h);
                }
                return;
            }
            snprintf(c->method, sizeof c->method, "%s", h.method);
            snprintf(c->target, sizeof c->target, "%s", h.target);
            if (c->mfd < 0 && open_relay(g, c)) return;
            c->is_head = strcmp(h.method, "HEAD") == 0;
            c->fwd = h.head_len;
            c->deadline = srv_gate_now_ns() + ns_from_s(g->cfg.timeout_s); /* the body's */
            c->rs = RS_HEAD;
            c->rh_len = 0;
            c->resp_close = false;
            if (h.chunked) {
                memset(&c->ck, 0, sizeof c->ck);
                c->rq = RQ_BODY_CHUNKED;
            } else if (h.content_length) {
                c->left = h.content_length;
                c->rq = RQ_BODY_CL;
            } else {
                c->rq = RQ_DONE;
            }
        } else if (c->rq == RQ_BODY_CL) {
            const size_t avail = c->in_len - c->fwd;
            const size_t take = (unsigned long long)avail < c->left ? avail : (size_t)c->left;
            c->fwd += take;
            c->left -= take;
            if (c->left) return;
            c->rq = RQ_DONE;
        } else if (c->rq == RQ_BODY_CHUNKED) {
            srv_head h;
            size_t pos = c->fwd;
            const srv_head_verdict v = srv_chunks_step(c->in, &pos, c->in_len, &c->ck, &h);
            c->fwd = pos;
            if (v == SRV_HEAD_REFUSE) {
                if (c->rs == RS_HEAD && c->rh_len == 0) answer(g, c, h.status, h.code, h.message, true);
                else c->rq = RQ_CLOSED, c->close_after = true, c->in_len = c->fwd = 0; /* answered already */
                return;
            }
            if (v == SRV_HEAD_MORE) return;
            c->rq = RQ_DONE;
        } else {
            return;
        }
    }
}

/* a response (the last of the request's) has come whole from libmicrohttpd */
static void response_done(srv_gate *g, gate_conn *c) {
    c->rs = RS_HEAD;
    c->rh_len = 0;
    if (c->rq == RQ_DONE && !c->resp_close && !c->c_eof) {
        c->rq = RQ_HEAD; /* the next request: its head within --timeout from now */
        c->deadline = srv_gate_now_ns() + ns_from_s(g->cfg.timeout_s);
        c->method[0] = c->target[0] = '\0';
        frame_in(g, c);
        return;
    }
    /* answered before its body was all in (a refusal), or the last one: no more requests */
    c->rq = RQ_CLOSED;
    c->close_after = true;
    c->in_len = c->fwd = 0;
    close_mfd(g, c);
}

/* The response's head is in c->rh: where its body ends. */
static void response_head(srv_gate *g, gate_conn *c) {
    const char *h = c->rh;
    const int status = c->rh_len > 12 ? atoi(h + 9) : 0;
    if (status >= 100 && status < 200 && status != 101) { /* 100 Continue: the final one follows */
        c->rh_len = 0;
        return;
    }
    long long cl = -1;
    bool chunked = false;
    for (const char *l = strstr(h, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
        const char *v = strchr(l + 2, ':');
        if (!v) break;
        const size_t nl = (size_t)(v - (l + 2));
        v++;
        while (*v == ' ' || *v == '\t') v++;
        if (nl == 14 && strncasecmp(l + 2, "Content-Length", 14) == 0) cl = atoll(v);
        else if (nl == 17 && strncasecmp(l + 2, "Transfer-Encoding", 17) == 0) chunked = strncasecmp(v, "chunked", 7) == 0;
        else if (nl == 10 && strncasecmp(l + 2, "Connection", 10) == 0) c->resp_close = strncasecmp(v, "close", 5) == 0;
    }
    if (c->is_head || status == 204 || status == 304 || (!chunked && cl == 0)) {
        response_done(g, c);
    } else if (chunked) {
        c->rs = RS_CHUNK_SIZE;
        c->r_left = 0;
        c->rline = '\n';
    } else if (cl > 0) {
        c->rs = RS_BODY;
        c->r_left = (unsigned long long)cl;
    } else {
        c->rs = RS_UNTIL_CLOSE;
        c->resp_close = true;
    }
}

/* Follows libmicrohttpd's output b[0, n) (already in c->out) to see where each response ends.
 * Its framing is trusted: it is ours. */
static void follow_response(srv_gate *g, gate_conn *c, const char *b, size_t n) {
    size_t i = 0;
    while (i < n && !c->dead) {
        switch (c->rs) {
        case RS_HEAD:
            if (c->rh_len < SRV_GATE_RHEAD - 1) c->rh[c->rh_len] = b[i];
            c->rh_len++;
            i++;
            if (c->rh_len >= 4 && c->rh_len < SRV_GATE_RHEAD &&
                memcmp(c->rh + c->rh_len - 4, "\r\n\r\n", 4) == 0) {
                c->rh[c->rh_len] = '\0';
                response_head(g, c);
            } else if (c->rh_len >= SRV_GATE_RHEAD) { /* (never: libmicrohttpd's heads are short) */
                c->rs = RS_UNTIL_CLOSE;
                c->resp_close = true;
            }
            break;
        case RS_BODY: {
            const size_t take = (unsigned long long)(n - i) < c->r_left ? n - i : (size_t)c->r_left;
            i += take;
            c->r_left -= take;
            if (!c->r_left) response_done(g, c);
            break;
        }
        case RS_CHUNK_SIZE: { /* hex [;ext] CRLF */
            const char ch = b[i++];
            if (ch == '\n') {
                c->rs = c->r_left ? RS_CHUNK_DATA : RS_TRAILER;
                c->r_left += c->r_left ? 2 : 0; /* the data's CRLF */
                c->r_empty = true;
            } else if (c->rline != ';' && is_hex((unsigned char)ch)) {
                c->r_left = c->r_left * 16 + (unsigned)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
            } else if (ch == ';') {
                c->rline = ';';
            }
            if (ch == '\n') c->rline = '\n';
            break;
        }
        case RS_CHUNK_DATA: {
            const size_t take = (unsigned long long)(n - i) < c->r_left ? n - i : (size_t)c->r_left;
            i += take;
            c->r_left -= take;
            if (!c->r_left) c->rs = RS_CHUNK_SIZE;
            break;
        }
        case RS_TRAILER: {
            const char ch = b[i++];
            if (ch == '\n') {
                if (c->r_empty) response_done(g, c);
                c->r_empty = true;
            } else if (ch != '\r') {
                c->r_empty = false;
            }
            break;
        }
        default: i = n; break; /* RS_UNTIL_CLOSE */
        }
    }
}

/* The client closed its side (or its socket failed). */
static void on_client_eof(srv_gate *g, gate_conn *c) {
    c->c_eof = true;
    if (c->close_after || c->rq == RQ_CLOSED) return;
    if (c->rq == RQ_HEAD) {
        if (c->in_len > c->fwd && !c->c_hup) {
            answer(g, c, 400, "bad_request", "the request's head ended before its empty line", true);
        } else {
            c->rq = RQ_CLOSED;
            c->close_after = true;
            close_mfd(g, c);
        }
    } else if (c->rq == RQ_DONE) {
        /* the request is with libmicrohttpd: it sees the client go (a queued job is dropped) and
         * the rest of its answer still goes out */
        if (c->mfd >= 0 && !c->m_shut && c->fwd == 0) {
            shutdown(c->mfd, SHUT_WR);
            c->m_shut = true;
        }
    } else if (c->rs == RS_HEAD && c->rh_len == 0 && !c->c_hup) {
        answer(g, c, 400, "bad_framing",
               c->rq == RQ_BODY_CHUNKED ? "the request's chunked body ended before its last chunk"
                                        : "the request's body ended before its Content-Length",
               true);
    } else { /* a body cut short: libmicrohttpd sees the client go */
        c->rq = RQ_CLOSED;
        c->close_after = true;
        c->in_len = c->fwd = 0;
        if (c->rs == RS_HEAD && c->rh_len == 0) close_mfd(g, c);
    }
}

/* libmicrohttpd closed its end (all it sent has been read): what it sent goes out, then the
 * connection closes; with nothing to send (it cut off a body without an answer: past twice
 * --max-body), at once, as libmicrohttpd would have closed it itself */
static void on_mhd_eof(srv_gate *g, gate_conn *c) {
    close_mfd(g, c);
    c->rq = RQ_CLOSED;
    c->close_after = true;
    c->in_len = c->fwd = 0;
    if (c->out_off == c->out_len) conn_close(g, c);
}

/* Moves bytes every way they can go until none can. */
static void pump(srv_gate *g, gate_conn *c) {
    for (bool moved = true; moved && !c->dead;) {
        moved = false;
        if (c->state == GC_LINGER) {
            for (;;) {
                ssize_t r = recv(c->fd, g->scratch, sizeof g->scratch, MSG_DONTWAIT);
                if (r > 0) continue;
                if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) conn_close(g, c);
                return;
            }
        }
        /* the client's bytes */
        if (c->c_rd && !c->c_eof) {
            if (c->rq == RQ_CLOSED) { /* no more requests: read and dropped */
                ssize_t r = recv(c->fd, g->scratch, sizeof g->scratch, MSG_DONTWAIT);
                if (r > 0) moved = true;
                else if (r == 0) on_client_eof(g, c), moved = true;
                else if (errno == EAGAIN || errno == EWOULDBLOCK) c->c_rd = false;
                else if (errno != EINTR) c->c_hup = true, on_client_eof(g, c), moved = true;
            } else if (c->in_len < SRV_GATE_BUF) {
                if (c->in_cap < SRV_GATE_BUF && c->in_len == c->in_cap) {
                    const size_t nc = c->in_cap ? 2 * c->in_cap : 4096;
                    char *nb = realloc(c->in, nc);
                    if (!nb) {
                        answer(g, c, 503, "unavailable", "the server is out of memory; retry later", false);
                        moved = true;
                        continue;
                    }
                    c->in = nb;
                    c->in_cap = nc;
                }
                ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
                if (r > 0) {
                    c->in_len += (size_t)r;
                    moved = true;
                    frame_in(g, c);
                } else if (r == 0) {
                    on_client_eof(g, c);
                    moved = true;
                } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    c->c_rd = false;
                } else if (errno != EINTR) {
                    c->c_hup = true;
                    on_client_eof(g, c);
                    moved = true;
                }
            }
        }
        if (c->dead) return;
        /* checked bytes to libmicrohttpd */
        if (c->mfd >= 0 && c->fwd && c->m_wr) {
            ssize_t w = send(c->mfd, c->in, c->fwd, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) {
                memmove(c->in, c->in + w, c->in_len - (size_t)w);
                c->in_len -= (size_t)w;
                c->fwd -= (size_t)w;
                moved = true;
                if (c->c_eof && c->rq == RQ_DONE && !c->fwd && !c->m_shut) { /* (the client went first) */
                    shutdown(c->mfd, SHUT_WR);
                    c->m_shut = true;
                }
                frame_in(g, c);
            } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                c->m_wr = false;
            } else if (w < 0 && errno != EINTR) {
                /* libmicrohttpd closed its end without reading on: it answered before the body
                 * (413, 401, 429: Connection: close), and that answer is still to be read here;
                 * the rest of the client's bytes go nowhere */
                c->rq = RQ_CLOSED;
                c->close_after = true;
                c->in_len = c->fwd = 0;
                c->m_wr = false;
                c->m_rd = true;
                moved = true;
            }
        }
        if (c->dead) return;
        /* libmicrohttpd's answers, as they are */
        if (c->out_off == c->out_len) {
            if (c->out_len) c->t_out = srv_gate_now_ns();
            c->out_off = c->out_len = 0;
        } else if (c->out_off > SRV_GATE_BUF / 2) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->mfd >= 0 && c->m_rd && out_alloc(c) && c->out_len < SRV_GATE_BUF) {
            if (c->out_len == 0) c->t_out = srv_gate_now_ns();
            ssize_t r = recv(c->mfd, c->out + c->out_len, SRV_GATE_BUF - c->out_len, MSG_DONTWAIT);
            if (r > 0) {
                c->out_len += (size_t)r;
                moved = true;
                follow_response(g, c, c->out + c->out_len - r, (size_t)r);
            } else if (r == 0) {
                on_mhd_eof(g, c);
                moved = true;
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->m_rd = false;
            } else if (errno != EINTR) {
                on_mhd_eof(g, c);
                moved = true;
            }
        }
        if (c->dead) return;
        /* to the client */
        if (c->out_off < c->out_len && c->c_wr && !c->c_hup) {
            ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) {
                c->out_off += (size_t)w;
                c->t_out = srv_gate_now_ns();
                moved = true;
            } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                c->c_wr = false;
            } else if (w < 0 && errno != EINTR) {
                c->c_hup = true;
                c->out_off = c->out_len;
                if (!c->c_eof) on_client_eof(g, c);
                moved = true;
            }
        }
        if (c->rq == RQ_HEAD && c->in_len == 0 && c->out_off == c->out_len && (c->in || c->out)) {
            /* between requests: an idle kept-alive connection holds no buffers */
            free(c->in);
            free(c->out);
            c->in = c->out = NULL;
            c->in_cap = c->out_len = c->out_off = 0;
        }
        if (c->out_off == c->out_len && c->close_after && c->mfd < 0) {
            if (c->c_eof || c->c_hup) {
                conn_close(g, c);
                return;
            }
            /* lingering close: the client's unread bytes are read and dropped for a while, so that
             * closing does not reset the connection before the client has read the answer */
            shutdown(c->fd, SHUT_WR);
            c->state = GC_LINGER;
            c->deadline = srv_gate_now_ns() + ns_from_s(SRV_GATE_LINGER_S);
            moved = true;
        }
    }
}

static void on_deadline(srv_gate *g, gate_conn *c, uint64_t now) {
    if (c->state == GC_LINGER) {
        if (now >= c->deadline) conn_close(g, c);
        return;
    }
    /* a client that takes nothing of its answer for --timeout is let go */
    if (c->out_off < c->out_len && now - c->t_out >= ns_from_s(g->cfg.timeout_s)) {
        conn_close(g, c);
        return;
    }
    if (now < c->deadline) return;
    if (c->rq == RQ_HEAD && c->fwd == 0) {
        if (c->in_len == 0) { /* idle (or never sent a byte): closed without an answer */
            if (c->out_off == c->out_len) conn_close(g, c);
            return;
        }
        /* the head did not arrive in time: what came is checked once more, so that a head broken
         * before the deadline is said to be broken */
        srv_head h;
        if (head_check(c->in, c->in_len, &h, false) == SRV_HEAD_REFUSE) {
            refuse_head(g, c, &h);
        } else {
            snprintf(c->method, sizeof c->method, "%s", h.method);
            snprintf(c->target, sizeof c->target, "%s", h.target);
            answer(g, c, 408, "request_timeout", "the request's headers took longer than the server's timeout to arrive",
                   false);
        }
    } else if ((c->rq == RQ_BODY_CL || c->rq == RQ_BODY_CHUNKED) && c->rs == RS_HEAD && c->rh_len == 0) {
        answer(g, c, 408, "request_timeout", "the request's body took longer than the server's timeout to arrive",
               false);
    } else {
        return;
    }
    pump(g, c);
}

/* no accepting for a moment: out of descriptors, or at the connection limit (new connections
 * wait in the kernel's backlog until one closes) */
static void pause_accepting(srv_gate *g) {
    if (!g->accept_paused_until) epoll_ctl(g->ep, EPOLL_CTL_DEL, g->lfd, NULL);
    g->accept_paused_until = srv_gate_now_ns() + (uint64_t)SRV_GATE_TICK_MS * 1000 * 1000;
}

static bool at_limit(srv_gate *g) { return g->nconns >= g->cfg.max_connections; }

static void accept_all(srv_gate *g) {
    for (;;) {
        if (at_limit(g)) {
            pause_accepting(g);
            return;
        }
        gate_conn tmp;
        tmp.alen = sizeof tmp.addr;
        int fd = accept4(g->lfd, (struct sockaddr *)&tmp.addr, &tmp.alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) pause_accepting(g);
            return;
        }
        gate_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        const int one = 1; /* answers go out as they come (small writes are not held back) */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->mfd = -1;
        c->addr = tmp.addr;
        c->alen = tmp.alen;
        c->t_start = srv_gate_now_ns();
        c->deadline = c->t_start + ns_from_s(g->cfg.timeout_s);
        c->c_wr = true;
        struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.u64 = (uint64_t)(uintptr_t)c};
        if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &e) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = g->head;
        if (g->head) g->head->prev = c;
        g->head = c;
        g->nconns++;
    }
}

/* SIGTERM: no new connections; those whose first head is still arriving are closed, the others
 * relayed on (libmicrohttpd answers their next requests 503: draining) */
static void stop_accepting(srv_gate *g) {
    if (g->lfd >= 0) {
        if (!g->accept_paused_until) epoll_ctl(g->ep, EPOLL_CTL_DEL, g->lfd, NULL);
        close(g->lfd);
        g->lfd = -1;
    }
    for (gate_conn *c = g->head, *nx; c; c = nx) {
        nx = c->next;
        if (c->state == GC_OPEN && c->mfd < 0 && c->rq == RQ_HEAD && !c->close_after) conn_close(g, c);
    }
    atomic_store(&g->accepting_stopped, true);
}

static void free_dead(srv_gate *g) {
    while (g->dead) {
        gate_conn *c = g->dead;
        g->dead = c->next;
        free(c->in);
        free(c->out);
        free(c);
    }
}

/* a connection with nothing on its way (no request with libmicrohttpd, nothing left to write) */
static bool idle(const gate_conn *c) {
    return c->state == GC_LINGER || (c->rq == RQ_HEAD && c->fwd == 0 && c->out_off == c->out_len) ||
           (c->rq == RQ_CLOSED && c->out_off == c->out_len);
}

static void *gate_main(void *arg) {
    srv_gate *g = arg;
    struct epoll_event evs[256];
    uint64_t last_tick = srv_gate_now_ns(), quit_by = 0;
    for (;;) {
        const int wait_ms = g->nconns || g->accept_paused_until ? SRV_GATE_TICK_MS : -1;
        int n = epoll_wait(g->ep, evs, (int)(sizeof evs / sizeof *evs), wait_ms);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            const uint32_t ev = evs[i].events;
            if (p == &g->tag_listen) {
                if (g->lfd >= 0) accept_all(g);
            } else if (p == &g->tag_wake) {
                uint64_t v;
                if (read(g->wake, &v, sizeof v) < 0) { /* (nothing to do: the command is in cmd) */
                }
            } else {
                const uint64_t u = evs[i].data.u64;
                gate_conn *c = (gate_conn *)(uintptr_t)(u & ~(uint64_t)1);
                if (c->dead) continue;
                if (u & 1) { /* libmicrohttpd's end */
                    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->m_rd = true;
                    if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) c->m_wr = true;
                } else {
                    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->c_rd = true;
                    if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) c->c_wr = true;
                    if ((ev & EPOLLRDHUP) && c->rq == RQ_DONE && c->fwd == 0 && c->mfd >= 0 && !c->m_shut) {
                        /* gone while its request is with libmicrohttpd (even with bytes unread) */
                        shutdown(c->mfd, SHUT_WR);
                        c->m_shut = true;
                    }
                }
                pump(g, c);
            }
        }
        const int cmd = atomic_load(&g->cmd);
        if (cmd >= 1 && !atomic_load(&g->accepting_stopped)) stop_accepting(g);
        const uint64_t now = srv_gate_now_ns();
        if (cmd >= 2) { /* quit: once what is on its way has gone out (2 s at most) */
            if (!quit_by) quit_by = now + ns_from_s(SRV_GATE_LINGER_S);
            for (gate_conn *c = g->head, *nx; c; c = nx) {
                nx = c->next;
                if (idle(c) || now >= quit_by) conn_close(g, c);
            }
            free_dead(g);
            if (!g->head) break;
        }
        if (now - last_tick >= (uint64_t)SRV_GATE_TICK_MS * 1000 * 1000 / 2) {
            last_tick = now;
            for (gate_conn *c = g->head, *nx; c; c = nx) {
                nx = c->next;
                on_deadline(g, c, now);
            }
            if (g->accept_paused_until && now >= g->accept_paused_until && g->lfd >= 0) {
                if (at_limit(g)) {
                    g->accept_paused_until = now + (uint64_t)SRV_GATE_TICK_MS * 1000 * 1000;
                } else {
                    g->accept_paused_until = 0;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &g->tag_listen};
                    epoll_ctl(g->ep, EPOLL_CTL_ADD, g->lfd, &e);
                    accept_all(g);
                }
            }
        }
        free_dead(g);
    }
    while (g->head) conn_close(g, g->head);
    free_dead(g);
    return NULL;
}

uint64_t srv_gate_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void wake(srv_gate *g, int cmd) {
    atomic_store(&g->cmd, cmd);
    const uint64_t one = 1;
    if (write(g->wake, &one, sizeof one) < 0) { /* (an eventfd's counter cannot overflow here) */
    }
}

int srv_gate_start(const srv_gate_config *cfg, srv_gate **out) {
    *out = NULL;
    srv_gate *g = calloc(1, sizeof *g);
    if (!g) {
        close(cfg->listen_fd);
        errno = ENOMEM;
        return -1;
    }
    g->cfg = *cfg;
    g->lfd = cfg->listen_fd;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event el = {.events = EPOLLIN, .data.ptr = &g->tag_listen};
    struct epoll_event ew = {.events = EPOLLIN, .data.ptr = &g->tag_wake};
    if (g->ep < 0 || g->wake < 0 || epoll_ctl(g->ep, EPOLL_CTL_ADD, g->lfd, &el) != 0 ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake, &ew) != 0 || pthread_create(&g->th, NULL, gate_main, g) != 0) {
        const int e = errno;
        if (g->ep >= 0) close(g->ep);
        if (g->wake >= 0) close(g->wake);
        close(g->lfd);
        free(g);
        errno = e;
        return -1;
    }
    *out = g;
    return 0;
}

void srv_gate_stop_accepting(srv_gate *g) {
    if (!g) return;
    wake(g, 1);
    for (int i = 0; i < 200 && !atomic_load(&g->accepting_stopped); i++) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void srv_gate_free(srv_gate *g) {
    if (!g) return;
    wake(g, 2);
    pthread_join(g->th, NULL);
    if (g->lfd >= 0) close(g->lfd);
    close(g->ep);
    close(g->wake);
    free(g);
}
