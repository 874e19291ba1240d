/* server/gate.c — the front gate: the listening socket is ours, not libmicrohttpd's. One thread
 * accepts connections and watches them with epoll (edge-triggered: a slow or stalled client holds
 * a socket and about 200 bytes of state, never a thread), peeks (MSG_PEEK) at the first request
 * of each connection until its head is complete and checks it (srv_head_check). A head that
 * breaks the rules gets one JSON answer written here ({"error": ...}, Connection: close) and the
 * connection is closed (after a short lingering read, so that the answer is not lost to a reset);
 * a good one is handed to libmicrohttpd untouched (MHD_add_connection): the peeked bytes are still
 * in the socket, and libmicrohttpd reads them as if it had accepted the connection itself.
 *
 * Why: libmicrohttpd 0.9.75 answers what it cannot parse itself, in HTML (400, 413, 414, 431,
 * 505), and one of those replies (a first Content-Length that is not a number) has its header
 * block sent twice; no hook replaces them. Every head it would refuse is refused here first.
 *
 * A chunked body cannot be judged from the head: the gate keeps peeking after the head until the
 * last chunk and its trailers are in view (the whole body then checked), or until it has seen
 * SRV_GATE_WINDOW bytes (what follows is libmicrohttpd's to parse), or the client asked for
 * 100-continue (it waits for libmicrohttpd's "100 Continue" before sending the body).
 *
 * Deadlines: a head not complete within --timeout of the connection's start is answered 408 (a
 * connection that sent nothing is closed without an answer); a chunked body in view of the gate
 * gets --timeout from the end of its head. Later requests on a kept-alive connection are
 * libmicrohttpd's (see README: the server's own checks in the handler still see every head it
 * parses). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

/* The chunked body from b[p]: SRV_HEAD_PASS once its last chunk and trailers are in view and
 * well formed, SRV_HEAD_MORE while what is in view is well formed, else refused. */
static srv_head_verdict check_chunks(const unsigned char *b, size_t p, size_t n, srv_head *h) {
    for (;;) {
        /* chunk-size [ ";" extensions ] CRLF */
        size_t i = p, digits = 0;
        while (i < n && is_hex(b[i])) {
            if (digits || b[i] != '0') digits++;
            i++;
        }
        if (i == p && i < n)
            return refuse(h, 400, "bad_framing",
                          "a chunk of the chunked body does not start with its size in hexadecimal");
        if (digits > 16)
            return refuse(h, 413, "payload_too_large",
                          "a chunk of the chunked body is larger than any body this server takes");
        if (i < n && b[i] != ';' && b[i] != '\r')
            return refuse(h, 400, "bad_framing", "a chunk's size is followed by something other than ';' or CRLF");
        size_t e = i;
        while (e < n && b[e] != '\r' && b[e] != '\n') {
            if (!is_value_char(b[e])) return refuse(h, 400, "bad_framing", "a chunk extension has a control character");
            e++;
        }
        if (e - p > SRV_CHUNK_LINE_MAX)
            return refuse(h, 400, "bad_framing", "a chunk-size line is longer than this server takes");
        const long le = line_end(b, e, n);
        if (le == -2) return refuse(h, 400, "bad_framing", "a chunk-size line ends in a CR or LF alone, not CRLF");
        if (le < 0 || i == p) return SRV_HEAD_MORE;
        unsigned long long size = 0;
        for (size_t k = p; k < i; k++) {
            const unsigned char c = b[k];
            size = size * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        p = (size_t)le + 2;
        if (size == 0) break;
        if (size > n - p || n - p - size < 2) return SRV_HEAD_MORE; /* the chunk and its CRLF not all in view */
        p += size;
        if (b[p] != '\r' || b[p + 1] != '\n')
            return refuse(h, 400, "bad_framing", "a chunk's data is not followed by CRLF (its size is wrong)");
        p += 2;
    }
    /* the trailer section: field lines, then an empty line */
    for (;;) {
        const long le = line_end(b, p, n);
        if (le == -2) return refuse(h, 400, "bad_framing", "a trailer line ends in a CR or LF alone, not CRLF");
        if (le < 0) {
            if (n - p > SRV_CHUNK_LINE_MAX)
                return refuse(h, 431, "header_fields_too_large", "a trailer field is longer than this server takes");
            return SRV_HEAD_MORE;
        }
        if ((size_t)le == p) return SRV_HEAD_PASS;
        if (field_line(b, p, (size_t)le, true, h)) return SRV_HEAD_REFUSE;
        p = (size_t)le + 2;
    }
}

srv_head_verdict srv_head_check(const char *buf, size_t n, srv_head *h) {
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
    if (!h->chunked || h->expect) return SRV_HEAD_PASS;
    return check_chunks(b, h->head_len, n, h);
}

/* ---- the gate's thread */

enum { GC_HEAD = 0, GC_LINGER };

typedef struct gate_conn {
    int fd;
    int state;
    uint64_t t_start;    /* accepted (its head's deadline runs from here) */
    uint64_t deadline;   /* ns */
    size_t seen;         /* bytes in view at the last look */
    bool head_done;      /* the head is complete: a chunked body is being looked at */
    struct sockaddr_storage addr;
    socklen_t alen;
    struct gate_conn *prev, *next;
} gate_conn;

struct srv_gate {
    srv_gate_config cfg;
    int ep, wake, lfd;
    pthread_t th;
    gate_conn *head;
    size_t nconns;
    _Atomic int cmd;            /* 1: stop accepting; 2: quit */
    _Atomic bool accepting_stopped;
    uint64_t accept_paused_until;
    char tag_listen, tag_wake;
    char scratch[SRV_GATE_WINDOW];
};

static uint64_t ns_from_s(double s) { return (uint64_t)(s * 1e9); }

static void conn_unlink(srv_gate *g, gate_conn *c) {
    if (c->prev) c->prev->next = c->next;
    else g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    g->nconns--;
}

static void conn_close(srv_gate *g, gate_conn *c) {
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    conn_unlink(g, c);
    free(c);
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
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* Writes the JSON answer, logs and counts it, and starts the lingering close. */
static void answer(srv_gate *g, gate_conn *c, int status, const char *code, const char *message, const srv_head *h,
                   bool malformed) {
    char *body = srv_error_body(status, message, NULL, code);
    static const char oom[] = "{\"error\":{\"message\":\"the request was refused (the server is out of memory to say "
                              "why)\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}";
    const char *bt = body ? body : oom;
    const size_t blen = strlen(bt);
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    char headbuf[384];
    int hl = snprintf(headbuf, sizeof headbuf,
                      "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: %zu\r\nContent-Type: application/json\r\n"
                      "Date: %s\r\n\r\n", status, reason(status), blen, date);
    struct iovec iov[2] = {{headbuf, (size_t)hl}, {(void *)bt, blen}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    size_t total = (size_t)hl + blen, sent = 0;
    /* a fresh socket's send buffer holds a few hundred bytes at once; a client that does not read
     * them is not waited for */
    while (sent < total) {
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0) break;
        sent += (size_t)w;
        while (w > 0 && mh.msg_iovlen) {
            if ((size_t)w >= mh.msg_iov[0].iov_len) {
                w -= (ssize_t)mh.msg_iov[0].iov_len;
                mh.msg_iov++;
                mh.msg_iovlen--;
            } else {
                mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + w;
                mh.msg_iov[0].iov_len -= (size_t)w;
                w = 0;
            }
        }
    }
    free(body);
    if (g->cfg.refused) {
        srv_gate_refusal r;
        memset(&r, 0, sizeof r);
        client_text(c, r.client, sizeof r.client);
        r.method = h && h->method[0] ? h->method : "-";
        r.target = h && h->target[0] ? h->target : "-";
        r.status = status;
        r.bytes = blen;
        r.seconds = (double)(srv_gate_now_ns() - c->t_start) * 1e-9;
        r.malformed = malformed;
        g->cfg.refused(g->cfg.ud, &r);
    }
    /* lingering close: the client's unread bytes are read and dropped for a while, so that
     * closing does not reset the connection before the client has read the answer */
    shutdown(c->fd, SHUT_WR);
    c->state = GC_LINGER;
    c->deadline = srv_gate_now_ns() + ns_from_s(SRV_GATE_LINGER_S);
    for (;;) {
        ssize_t r = recv(c->fd, g->scratch, sizeof g->scratch, MSG_DONTWAIT);
        if (r > 0) continue;
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) conn_close(g, c);
        return;
    }
}

static void hand_off(srv_gate *g, gate_conn *c) {
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    const int fd = c->fd;
    struct sockaddr_storage addr = c->addr;
    const socklen_t alen = c->alen;
    conn_unlink(g, c);
    free(c);
    g->cfg.hand_off(g->cfg.ud, fd, (const struct sockaddr *)&addr, alen); /* closes fd if it cannot take it */
}

static void on_head_io(srv_gate *g, gate_conn *c, uint32_t ev) {
    ssize_t n = recv(c->fd, g->scratch, sizeof g->scratch, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        conn_close(g, c); /* gone before a request (or reset): nothing to answer */
        return;
    }
    const bool ended = (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    if (n < 0) {
        if (ev & (EPOLLHUP | EPOLLERR)) conn_close(g, c);
        return;
    }
    if ((size_t)n == c->seen && !ended) return; /* nothing new */
    c->seen = (size_t)n;
    srv_head h;
    switch (srv_head_check(g->scratch, (size_t)n, &h)) {
    case SRV_HEAD_REFUSE: answer(g, c, h.status, h.code, h.message, &h, true); return;
    case SRV_HEAD_PASS: hand_off(g, c); return;
    case SRV_HEAD_MORE: break;
    }
    if (h.head_len && !c->head_done) { /* a chunked body follows: --timeout from here */
        c->head_done = true;
        c->deadline = srv_gate_now_ns() + ns_from_s(g->cfg.timeout_s);
    }
    if (ev & (EPOLLHUP | EPOLLERR)) {
        conn_close(g, c);
    } else if (ended) { /* the client closed its side: no more bytes will come */
        answer(g, c, 400, h.head_len ? "bad_framing" : "bad_request",
               h.head_len ? "the request's chunked body ended before its last chunk"
                          : "the request's head ended before its empty line",
               &h, true);
    } else if (h.head_len && (size_t)n == sizeof g->scratch) {
        hand_off(g, c); /* the rest of the body is past what the gate looks at */
    }
}

static void on_linger_io(srv_gate *g, gate_conn *c) {
    for (;;) {
        ssize_t r = recv(c->fd, g->scratch, sizeof g->scratch, MSG_DONTWAIT);
        if (r > 0) continue;
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) conn_close(g, c);
        return;
    }
}

static void on_deadline(srv_gate *g, gate_conn *c) {
    if (c->state == GC_LINGER || c->seen == 0) { /* lingered enough, or never sent a byte */
        conn_close(g, c);
        return;
    }
    /* the head (or the chunked body in view) did not arrive in time: what came is checked once
     * more, so that a head broken before the deadline is said to be broken */
    ssize_t n = recv(c->fd, g->scratch, sizeof g->scratch, MSG_PEEK | MSG_DONTWAIT);
    srv_head h;
    if (n > 0 && srv_head_check(g->scratch, (size_t)n, &h) == SRV_HEAD_REFUSE) {
        answer(g, c, h.status, h.code, h.message, &h, true);
        return;
    }
    if (n <= 0) memset(&h, 0, sizeof h);
    answer(g, c, 408, "request_timeout",
           c->head_done ? "the request's body took longer than the server's timeout to arrive"
                        : "the request's headers took longer than the server's timeout to arrive",
           &h, false);
}

/* no accepting for a moment: out of descriptors, or at the connection limit (new connections
 * wait in the kernel's backlog, as libmicrohttpd left them, until one closes) */
static void pause_accepting(srv_gate *g) {
    if (!g->accept_paused_until) epoll_ctl(g->ep, EPOLL_CTL_DEL, g->lfd, NULL);
    g->accept_paused_until = srv_gate_now_ns() + (uint64_t)SRV_GATE_TICK_MS * 1000 * 1000;
}

static bool at_limit(srv_gate *g) {
    return g->nconns + (g->cfg.connections ? g->cfg.connections(g->cfg.ud) : 0) >= g->cfg.max_connections;
}

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
        c->fd = fd;
        c->addr = tmp.addr;
        c->alen = tmp.alen;
        c->t_start = srv_gate_now_ns();
        c->deadline = c->t_start + ns_from_s(g->cfg.timeout_s);
        struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
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

/* SIGTERM: no new connections; heads complete (a chunked body in view) go on to libmicrohttpd,
 * which answers 503 (draining); heads still arriving are closed */
static void stop_accepting(srv_gate *g) {
    if (g->lfd >= 0) {
        epoll_ctl(g->ep, EPOLL_CTL_DEL, g->lfd, NULL);
        close(g->lfd);
        g->lfd = -1;
    }
    for (gate_conn *c = g->head, *nx; c; c = nx) {
        nx = c->next;
        if (c->state == GC_HEAD && c->head_done) hand_off(g, c);
        else if (c->state == GC_HEAD) conn_close(g, c);
    }
    atomic_store(&g->accepting_stopped, true);
}

static void *gate_main(void *arg) {
    srv_gate *g = arg;
    struct epoll_event evs[256];
    uint64_t last_tick = srv_gate_now_ns();
    for (;;) {
        const int wait_ms = g->nconns || g->accept_paused_until ? SRV_GATE_TICK_MS : -1;
        int n = epoll_wait(g->ep, evs, (int)(sizeof evs / sizeof *evs), wait_ms);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &g->tag_listen) {
                if (g->lfd >= 0) accept_all(g);
            } else if (p == &g->tag_wake) {
                uint64_t v;
                if (read(g->wake, &v, sizeof v) < 0) { /* (nothing to do: the command is in cmd) */
                }
            } else {
                gate_conn *c = p;
                if (c->state == GC_HEAD) on_head_io(g, c, evs[i].events);
                else on_linger_io(g, c);
            }
        }
        const int cmd = atomic_load(&g->cmd);
        if (cmd >= 1 && !atomic_load(&g->accepting_stopped)) stop_accepting(g);
        if (cmd >= 2) break;
        const uint64_t now = srv_gate_now_ns();
        if (now - last_tick >= (uint64_t)SRV_GATE_TICK_MS * 1000 * 1000 / 2) {
            last_tick = now;
            for (gate_conn *c = g->head, *nx; c; c = nx) {
                nx = c->next;
                if (now >= c->deadline) on_deadline(g, c);
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
    }
    while (g->head) conn_close(g, g->head);
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
