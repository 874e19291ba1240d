/* server/server.c — the daemon around the routes: libmicrohttpd with an internal epoll thread pool
 * (a slow or stalled client holds a socket, never a thread, so /health answers whatever the
 * others do), suspend/resume for requests waiting on the executors, and the rules every request
 * meets in this order: a header that took longer than --timeout to arrive (408), the head's
 * framing (505 for an HTTP version other than 1.0 and 1.1, 400 for HTTP/1.1 without Host or for
 * Content-Length headers that differ or come with Transfer-Encoding, 501 for a Transfer-Encoding
 * other than chunked, 414 and 431 past our limits on the URI and the header fields), a CORS
 * preflight (--cors), the API key (401; /health needs none), the route (404) and method (405),
 * the Content-Type of a POST (415 unless application/json), the model still loading (503),
 * draining (503), the body's declared size (413), the client address's unfinished bodies (429 past
 * --max-client-bodies), then the body, read within --timeout of its headers (408) and no larger
 * than --max-body (413), and only then admission (429 with Retry-After past
 * --max-concurrent-requests, never an unbounded queue). A queued request whose client goes away
 * is dropped before it runs (client-closed); one that waits past --max-queue-time gets 503. One
 * access-log line per request on stderr (JSON lines with --log-json). SIGTERM/SIGINT: stop
 * accepting, finish what is in flight within --drain-timeout, exit 0.
 *
 * Before any of that, the front gate (gate.c) owns the listening socket and every connection:
 * libmicrohttpd gets one end of a socket pair per connection (MHD_add_connection, with the
 * client's address), and the gate relays between the two, framing every request on the way. What
 * libmicrohttpd 0.9.75 would answer itself in HTML (no hook lets us replace those bodies) never
 * reaches it: a request line it cannot parse, HTTP/0.x or HTTP/2 and up, a head past its memory, a
 * header line without a colon, a Content-Length that is not a number (its header block sent twice:
 * a bug of 0.9.75) or past 2^64, a malformed chunked body; the gate answers those in JSON, on the
 * first request of a connection or any later one. The gate also keeps --timeout (a head, a body,
 * an idle connection); the checks in on_request below (505, Host, the Content-Length and
 * Transfer-Encoding rules, 414, 431) stay as a second line behind it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "modattn/backend/device.h"
#include "modattn/ingest.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ingest.h"
#include "server/server.h"

#define SRV_CB_BUCKETS 1024

/* unfinished bodies of one client address (--max-client-bodies) */
typedef struct cb_node {
    struct cb_node *next;
    uint8_t fam;
    uint8_t addr[16];
    size_t n;
} cb_node;

typedef struct server {
    srv_config cfg;
    modattn_ctx *ctx;
    struct MHD_Daemon *d;
    srv_gate *gate;
    _Atomic bool ready, draining;
    srv_api api;
    srv_batcher *batcher;
    char *api_key;
    size_t api_key_len;
    modattn_model *model;
    const modattn_device_iface *dev;
    pthread_mutex_t log_mu;
    _Atomic int64_t admitted; /* requests holding an admission slot (their bodies complete) */
    pthread_mutex_t cb_mu;
    cb_node *cb[SRV_CB_BUCKETS];
} server;

/* per connection: when it began waiting for its current request's headers */
typedef struct conn_info {
    uint64_t t_ready;
} conn_info;

enum { ST_READING = 0, ST_QUEUED, ST_DONE, ST_ANSWERED };

typedef struct req {
    server *s;
    srv_route route;
    char method[12];
    char path[160];
    char client[64];
    uint64_t t0;
    char *body;
    size_t len, cap;
    int state;
    bool admitted;
    bool body_slot; /* counted among its client address's unfinished bodies */
    bool abandoned; /* its job was dropped: the client had gone */
    bool model_match; /* GET /v1/models/{id}: the id (the whole of it) is the model served */
    uint8_t cfam, caddr[16];
    struct MHD_Connection *conn;
    srv_job job;
    srv_embed_req er;
    srv_search_req sr;
    srv_rerank_req rr;
    srv_sparse_req xr; /* POST /embed_sparse */
    int32_t *search_ids[1];
    size_t search_count[1];
    float *vectors;
    int reject;     /* 408 or 413 once the body broke a limit: the rest is dropped */
    size_t dropped; /* body bytes dropped */
    int status;
    size_t bytes_out;
    size_t inputs, tokens;
} req;

static double secs_since(uint64_t t0) { return (double)(modattn__now_ns() - t0) * 1e-9; }

/* ---- responses */

static enum MHD_Result respond(req *r, int status, const char *content_type, char *body, size_t len,
                               const char *extra_name, const char *extra_value, bool close) {
    struct MHD_Response *resp =
        body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO; /* libmicrohttpd closes the connection */
    }
    if (content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    /* an error may quote the URL (a 404's path, a model id): a browser that opens it must show
     * JSON as text, never sniff it into a page */
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->s->cfg.cors_origin) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, r->s->cfg.cors_origin);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
    }
    if (extra_name) MHD_add_response_header(resp, extra_name, extra_value);
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    r->status = status;
    r->bytes_out = len;
    r->state = ST_ANSWERED;
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result respond_json(req *r, int status, char *body) {
    if (!body) { /* the body could not be made: out of memory */
        static const char oom[] = "{\"error\":{\"message\":\"the server is out of memory\",\"type\":"
                                  "\"service_unavailable_error\",\"param\":null,\"code\":\"out_of_memory\"}}";
        char *copy = strdup(oom);
        return respond(r, 503, "application/json", copy, copy ? strlen(copy) : 0, NULL, NULL, true);
    }
    return respond(r, status, "application/json", body, strlen(body), NULL, NULL, false);
}

static enum MHD_Result respond_error(req *r, int status, const char *message, const char *param, const char *code,
                                     const char *hname, const char *hvalue, bool close) {
    char *body = srv_error_body(status, message, param, code);
    if (!body) return respond_json(r, 503, NULL);
    return respond(r, status, "application/json", body, strlen(body), hname, hvalue, close);
}

/* A page or asset compiled into the binary. The Content-Security-Policy lets it load only from
 * this server and run no inline script: even if a document's text reached the page as markup, it
 * could neither run nor fetch anything. */
static enum MHD_Result respond_static(req *r, const char *content_type, const char *data, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                            "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    r->status = 200;
    r->bytes_out = len;
    r->state = ST_ANSWERED;
    enum MHD_Result ok = MHD_queue_response(r->conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* ---- routing */

typedef struct route_def {
    const char *path;
    srv_route route;
    const char *method; /* "GET" (HEAD too) or "POST" */
} route_def;

static const route_def k_routes[] = {
    {"/v1/embeddings", SRV_ROUTE_EMBEDDINGS, "POST"}, {"/embeddings", SRV_ROUTE_EMBEDDINGS, "POST"},
    {"/v1/models", SRV_ROUTE_MODELS, "GET"},          {"/models", SRV_ROUTE_MODELS, "GET"},
    {"/search", SRV_ROUTE_SEARCH, "POST"},            {"/health", SRV_ROUTE_HEALTH, "GET"},
    {"/metrics", SRV_ROUTE_METRICS, "GET"},           {"/openapi.json", SRV_ROUTE_OPENAPI, "GET"},
    {"/info", SRV_ROUTE_INFO, "GET"},                 {"/tokenize", SRV_ROUTE_TOKENIZE, "POST"},
    {"/detokenize", SRV_ROUTE_DETOKENIZE, "POST"},    {"/docs", SRV_ROUTE_DOCS, "GET"},
    {"/", SRV_ROUTE_PAGE, "GET"},                     {"/assets/page.css", SRV_ROUTE_PAGE, "GET"},
    {"/rerank", SRV_ROUTE_RERANK, "POST"},             {"/embed_sparse", SRV_ROUTE_EMBED_SPARSE, "POST"},
    {"/assets/page.js", SRV_ROUTE_PAGE, "GET"},       {"/assets/docs.js", SRV_ROUTE_PAGE, "GET"},
};
static const route_def k_model_route = {"/v1/models/{id}", SRV_ROUTE_MODEL, "GET"};

/* GET /v1/models/{id} (and /models/{id}): the id after the prefix, else NULL */
static const char *model_id_in(const char *url) {
    if (strncmp(url, "/v1/models/", 11) == 0) return url + 11;
    if (strncmp(url, "/models/", 8) == 0) return url + 8;
    return NULL;
}

static const route_def *find_route(const char *url) {
    for (size_t i = 0; i < sizeof k_routes / sizeof *k_routes; i++)
        if (strcmp(url, k_routes[i].path) == 0) return &k_routes[i];
    if (model_id_in(url)) return &k_model_route;
    return NULL;
}

static bool post_body_route(srv_route r) {
    return r == SRV_ROUTE_EMBEDDINGS || r == SRV_ROUTE_SEARCH || r == SRV_ROUTE_TOKENIZE || r == SRV_ROUTE_DETOKENIZE ||
           r == SRV_ROUTE_RERANK || r == SRV_ROUTE_EMBED_SPARSE;
}

/* The pages and their assets hold no data (everything they show comes from the API, which asks
 * for the key): a browser cannot send a bearer key when it opens a page, so they need none. */
static bool public_route(srv_route r) { return r == SRV_ROUTE_HEALTH || r == SRV_ROUTE_PAGE || r == SRV_ROUTE_DOCS; }

/* constant time in the key's length: every byte compared whatever the first difference */
static bool key_ok(const server *s, struct MHD_Connection *c) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    const char *given = h + 7;
    size_t n = strlen(given);
    unsigned char diff = (unsigned char)(n != s->api_key_len);
    for (size_t i = 0; i < s->api_key_len; i++) diff |= (unsigned char)(s->api_key[i] ^ (i < n ? given[i] : 0));
    return diff == 0;
}

static void client_name(req *r, char *buf, size_t len) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(buf, len, "-");
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
        const struct in_addr *a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        inet_ntop(AF_INET, a, buf, (socklen_t)len);
        r->cfam = 4;
        memcpy(r->caddr, a, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        inet_ntop(AF_INET6, a, buf, (socklen_t)len);
        r->cfam = 6;
        memcpy(r->caddr, a, 16);
    }
}

/* ---- unfinished bodies per client address: a request counts against --max-concurrent-requests
 * only once its body is in; until then against its address's --max-client-bodies, so that one
 * address stalling bodies holds neither the admission slots nor more than its share */

static unsigned cb_hash(const req *r) {
    uint32_t h = 2166136261u ^ r->cfam;
    for (int i = 0; i < 16; i++) h = (h ^ r->caddr[i]) * 16777619u;
    return h % SRV_CB_BUCKETS;
}

/* 0: counted; 1: the address is at its limit; -1: out of memory */
static int client_body_acquire(server *s, req *r) {
    unsigned h = cb_hash(r);
    int rc = 0;
    pthread_mutex_lock(&s->cb_mu);
    cb_node *n = s->cb[h];
    while (n && !(n->fam == r->cfam && memcmp(n->addr, r->caddr, 16) == 0)) n = n->next;
    if (!n) {
        n = modattn__malloc(sizeof *n, MODATTN_MEM_OTHER);
        if (!n) rc = -1;
        else {
            n->fam = r->cfam;
            memcpy(n->addr, r->caddr, 16);
            n->n = 0;
            n->next = s->cb[h];
            s->cb[h] = n;
        }
    }
    if (n && n->n >= s->cfg.max_client_bodies) rc = 1;
    else if (n) n->n++;
    pthread_mutex_unlock(&s->cb_mu);
    if (rc == 0) r->body_slot = true;
    return rc;
}

static void client_body_release(server *s, req *r) {
    if (!r->body_slot) return;
    r->body_slot = false;
    unsigned h = cb_hash(r);
    pthread_mutex_lock(&s->cb_mu);
    for (cb_node **pp = &s->cb[h]; *pp; pp = &(*pp)->next) {
        cb_node *n = *pp;
        if (n->fam != r->cfam || memcmp(n->addr, r->caddr, 16) != 0) continue;
        if (--n->n == 0) {
            *pp = n->next;
            modattn_free(n);
        }
        break;
    }
    pthread_mutex_unlock(&s->cb_mu);
}

/* ---- the request's head, checked again here (the gate refuses all of these first): libmicrohttpd
 * (0.9.75) takes a second Content-Length that differs from the first, and Content-Length with
 * Transfer-Encoding (it reads the chunks): both are refused (400), as is a head past our limits
 * (414, 431) */

typedef struct head_scan {
    size_t bytes;        /* header names and values */
    size_t ncl;
    unsigned long long cl;
    bool cl_bad, cl_differ, te, te_other;
} head_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    head_scan *h = cls;
    const size_t vlen = value ? strlen(value) : 0;
    h->bytes += strlen(key) + vlen + 4;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        unsigned long long v = 0;
        bool ok = vlen > 0;
        for (size_t i = 0; ok && i < vlen; i++) {
            const unsigned d = (unsigned)(value[i] - '0');
            if (value[i] < '0' || value[i] > '9' || v > (~0ULL - d) / 10) ok = false; /* (past 2^64: the gate's 413) */
            else v = v * 10 + d;
        }
        if (!ok) h->cl_bad = true;
        else if (h->ncl && v != h->cl) h->cl_differ = true;
        h->cl = v;
        h->ncl++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        h->te = true;
        if (!value || strcasecmp(value, "chunked") != 0) h->te_other = true; /* unknown framing */
    }
    return MHD_YES;
}

static enum MHD_Result scan_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    *(size_t *)cls += strlen(key) + (value ? strlen(value) + 1 : 0) + 1;
    return MHD_YES;
}

/* `application/json`, any case, parameters allowed (`; charset=utf-8`) */
static bool is_json_type(const char *ct) {
    if (!ct) return false;
    while (*ct == ' ' || *ct == '\t') ct++;
    if (strncasecmp(ct, "application/json", 16) != 0) return false;
    ct += 16;
    while (*ct == ' ' || *ct == '\t') ct++;
    return *ct == '\0' || *ct == ';';
}

/* ---- jobs */

/* Whether a queued request's client has gone: its connection is suspended (libmicrohttpd does
 * not watch it), so its socket is polled here, without waiting. A client that half-closes its
 * side after sending (shutdown(SHUT_WR)) counts as gone too: HTTP clients do not do that. */
static bool job_gone(srv_job *job, void *ud) {
    (void)job;
    req *r = ud;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void job_done(srv_job *job, void *ud) {
    (void)job;
    req *r = ud;
    r->state = ST_DONE;
    MHD_resume_connection(r->conn); /* the handler runs again on its HTTP thread and answers */
}

/* Queues the request's job (n inputs, their vectors into r->vectors) and suspends its connection
 * until job_done resumes it. */
static enum MHD_Result submit(req *r, srv_job_kind kind, size_t n, int32_t **ids, size_t *counts) {
    server *s = r->s;
    const size_t per = kind == SRV_JOB_RERANK ? modattn_reranker_get_info(s->api.reranker)->num_labels
                       : kind == SRV_JOB_SPARSE ? 0
                                                : s->api.dim;
    r->vectors = modattn__malloc((per ? n * per : 1) * sizeof(float), MODATTN_MEM_OTHER);
    if (!r->vectors) return respond_error(r, 503, "the server is out of memory (or over its --mem-budget)", NULL,
                                          "out_of_memory", NULL, NULL, false);
    memset(&r->job, 0, sizeof r->job);
    r->job.kind = kind;
    r->job.n = n;
    r->job.ids = ids;
    r->job.counts = counts;
    r->job.out = r->vectors;
    r->job.done = job_done;
    r->job.done_ud = r;
    r->job.gone = job_gone;
    if (kind == SRV_JOB_SPARSE) r->job.sparse_out = r->xr.vecs;
    if (kind == SRV_JOB_RERANK) {
        r->job.types = r->rr.types;
        r->job.rerank_flags = r->rr.raw ? MODATTN_RERANK_RAW : 0;
    }
    if (kind == SRV_JOB_SEARCH) {
        r->job.k = r->sr.k;
        r->job.path_prefix = r->sr.path_prefix;
        r->job.mode = r->sr.mode;
        r->job.keyword_weight = r->sr.keyword_weight;
        r->job.sparse_weight = r->sr.sparse_weight;
        r->job.rrf_k = r->sr.rrf_k;
        r->job.query = r->sr.query;
        r->job.query_len = r->sr.query_len;
        r->job.prompt = r->sr.prompt;
        r->job.prompt_given = r->sr.prompt_given;
        /* "rerank": the first stage fetches rerank_top candidates; k of them are answered */
        r->job.rerank = r->sr.rerank;
        r->job.rerank_top = r->sr.rerank_top;
        r->job.k_show = r->sr.k;
        if (r->sr.rerank && r->job.k < r->sr.rerank_top) r->job.k = r->sr.rerank_top;
    }
    r->state = ST_QUEUED;
    MHD_suspend_connection(r->conn); /* before submitting: the job may finish at once */
    srv_batcher_submit(s->batcher, &r->job);
    return MHD_YES;
}

static enum MHD_Result start_embeddings(req *r) {
    srv_bad bad;
    memset(&bad, 0, sizeof bad);
    if (srv_parse_embeddings(&r->s->api, r->body ? r->body : "", r->len, &r->er, &bad))
        return respond_error(r, bad.status, bad.message, bad.param, bad.code, NULL, NULL, false);
    r->inputs = r->er.n;
    r->tokens = r->er.prompt_tokens;
    return submit(r, SRV_JOB_EMBED, r->er.n, r->er.ids, r->er.counts);
}

static enum MHD_Result start_search(req *r) {
    srv_bad bad;
    memset(&bad, 0, sizeof bad);
    if (srv_parse_search(&r->s->api, r->body ? r->body : "", r->len, &r->sr, &bad))
        return respond_error(r, bad.status, bad.message, bad.param, bad.code, NULL, NULL, false);
    r->inputs = 1;
    r->tokens = r->sr.count;
    r->search_ids[0] = r->sr.ids;
    r->search_count[0] = r->sr.count;
    return submit(r, SRV_JOB_SEARCH, 1, r->search_ids, r->search_count);
}

static enum MHD_Result start_rerank(req *r) {
    srv_bad bad;
    memset(&bad, 0, sizeof bad);
    if (srv_parse_rerank(&r->s->api, r->body ? r->body : "", r->len, &r->rr, &bad))
        return respond_error(r, bad.status, bad.message, bad.param[0] ? bad.param : NULL, bad.code, NULL, NULL, false);
    r->inputs = r->rr.n;
    r->tokens = r->rr.tokens;
    return submit(r, SRV_JOB_RERANK, r->rr.n, r->rr.ids, r->rr.counts);
}

static enum MHD_Result start_embed_sparse(req *r) {
    srv_bad bad;
    memset(&bad, 0, sizeof bad);
    if (srv_parse_embed_sparse(&r->s->api, r->body ? r->body : "", r->len, &r->xr, &bad))
        return respond_error(r, bad.status, bad.message, bad.param[0] ? bad.param : NULL, bad.code, NULL, NULL, false);
    r->inputs = r->xr.n;
    r->tokens = r->xr.tokens;
    return submit(r, SRV_JOB_SPARSE, r->xr.n, r->xr.ids, r->xr.counts);
}

static enum MHD_Result finish_job(req *r) {
    server *s = r->s;
    if (r->job.abandoned) { /* nobody to answer: the connection is closed (logged as client-closed) */
        r->abandoned = true;
        r->status = 499;
        return MHD_NO;
    }
    if (r->job.expired)
        return respond_error(r, 503, r->job.message, NULL, "queue_timeout", MHD_HTTP_HEADER_RETRY_AFTER, "1", false);
    if (r->job.http_status) {
        /* a 409 is the query's prompt, or (the store's sparse vectors being another model's or pruning's)
         * the server's --sparse-model; a 400 the mode's index missing from the store */
        const bool sparse_conflict = r->job.http_status == 409 && strstr(r->job.message, "sparse vectors were");
        return respond_error(r, r->job.http_status, r->job.message,
                             sparse_conflict               ? "mode"
                             : r->job.http_status == 409   ? "prompt"
                             : r->job.http_status == 400 ? "mode"
                                                         : NULL,
                             r->job.http_status == 503   ? "unavailable"
                             : sparse_conflict           ? "sparse_model_mismatch"
                             : r->job.http_status == 409 ? "prompt_mismatch"
                             : r->job.http_status == 400 ? (r->job.mode == MODATTN_SEARCH_SPARSE ? "no_sparse_vectors"
                                                                                                 : "no_keyword_index")
                                                         : "internal_error",
                             NULL, NULL, false);
    }
    if (r->route == SRV_ROUTE_EMBED_SPARSE) {
        for (size_t i = 0; i < r->xr.n; i++)
            for (size_t k = 0; k < r->xr.vecs[i].n; k++)
                if (!isfinite(r->xr.vecs[i].weights[k]))
                    return respond_error(r, 500, "the sparse model gave a value that is not a finite number", NULL,
                                         "internal_error", NULL, NULL, false);
        return respond_json(r, 200, srv_sparse_body(&r->xr));
    }
    if (r->route == SRV_ROUTE_RERANK) {
        const size_t L = modattn_reranker_get_info(s->api.reranker)->num_labels;
        for (size_t i = 0; i < r->rr.n * L; i++)
            if (!isfinite(r->vectors[i]))
                return respond_error(r, 500, "the reranker gave a value that is not a finite number", NULL,
                                     "internal_error", NULL, NULL, false);
        return respond_json(r, 200, srv_rerank_body(&s->api, &r->rr, r->vectors));
    }
    if (r->route == SRV_ROUTE_EMBEDDINGS) {
        if (r->er.dims && r->er.dims < s->api.dim) /* Matryoshka: the first dims, normalised again */
            modattn_model_cut_dims(s->api.model, r->vectors, r->er.n, r->er.dims);
        for (size_t i = 0; i < r->er.n * (r->er.dims ? r->er.dims : s->api.dim); i++) /* JSON has no NaN or infinity */
            if (!isfinite(r->vectors[i]))
                return respond_error(r, 500, "the model gave a value that is not a finite number", NULL,
                                     "internal_error", NULL, NULL, false);
        return respond_json(r, 200, srv_embeddings_body(&s->api, &r->er, r->vectors));
    }
    return respond_json(r, 200, srv_search_body(&s->api, &r->job));
}

static enum MHD_Result answer_get(req *r) {
    server *s = r->s;
    switch (r->route) {
    case SRV_ROUTE_HEALTH: {
        bool ready = atomic_load(&s->ready), draining = atomic_load(&s->draining);
        const char *st = draining ? "draining" : ready ? "ok" : "loading";
        char *b = NULL;
        if (asprintf(&b, "{\"status\":\"%s\"}", st) < 0) b = NULL;
        return respond_json(r, ready && !draining ? 200 : 503, b);
    }
    case SRV_ROUTE_METRICS: {
        const bool ready = atomic_load(&s->ready); /* s->dev is written before ready is set */
        char *b = srv_metrics_render(s->ctx, ready, ready ? s->dev : NULL);
        if (!b) return respond_json(r, 503, NULL);
        return respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", b, strlen(b), NULL, NULL, false);
    }
    case SRV_ROUTE_OPENAPI: {
        /* before the model is loaded: the committed document as it is */
        const char *doc = atomic_load(&s->ready) ? s->api.openapi : srv_openapi_json;
        char *b = strdup(doc);
        if (!b) return respond_json(r, 503, NULL);
        return respond(r, 200, "application/json", b, strlen(b), NULL, NULL, false);
    }
    case SRV_ROUTE_MODELS: return respond_json(r, 200, srv_models_body(&s->api));
    case SRV_ROUTE_MODEL: {
        const char *id = model_id_in(r->path);
        if (!r->model_match) {
            char msg[320];
            snprintf(msg, sizeof msg, "the model '%.200s' is not served here; this server serves '%s'", id ? id : "",
                     s->api.model_id);
            return respond_error(r, 404, msg, "model", "model_not_found", NULL, NULL, false);
        }
        return respond_json(r, 200, srv_model_body(&s->api));
    }
    case SRV_ROUTE_INFO: return respond_json(r, 200, srv_info_body(&s->api));
    case SRV_ROUTE_DOCS: return respond_static(r, "text/html; charset=utf-8", srv_web_docs_html, srv_web_docs_html_len);
    case SRV_ROUTE_PAGE:
        if (strcmp(r->path, "/assets/page.css") == 0)
            return respond_static(r, "text/css; charset=utf-8", srv_web_page_css, srv_web_page_css_len);
        if (strcmp(r->path, "/assets/page.js") == 0)
            return respond_static(r, "text/javascript; charset=utf-8", srv_web_page_js, srv_web_page_js_len);
        if (strcmp(r->path, "/assets/docs.js") == 0)
            return respond_static(r, "text/javascript; charset=utf-8", srv_web_docs_js, srv_web_docs_js_len);
        return respond_static(r, "text/html; charset=utf-8", srv_web_index_html, srv_web_index_html_len);
    default: return respond_error(r, 404, "no such route", NULL, "not_found", NULL, NULL, false);
    }
}

/* ---- the access handler */

/* A CORS preflight (OPTIONS on a POST route, with --cors): 204 and what the browser may send. */
static enum MHD_Result answer_preflight(req *r) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, r->s->cfg.cors_origin);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, "POST, OPTIONS");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_HEADERS, "Authorization, Content-Type");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_MAX_AGE, "600");
    r->status = 204;
    r->state = ST_ANSWERED;
    enum MHD_Result ok = MHD_queue_response(r->conn, MHD_HTTP_NO_CONTENT, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* The request's body is complete: admission (a slot, or 429 at once: never an unbounded queue),
 * then its job. */
static enum MHD_Result start_job(req *r) {
    server *s = r->s;
    if (atomic_load(&s->draining))
        return respond_error(r, 503, "the server is shutting down", NULL, "shutting_down", NULL, NULL, true);
    int64_t now_in = atomic_fetch_add(&s->admitted, 1) + 1;
    if (now_in > (int64_t)s->cfg.max_concurrent) {
        atomic_fetch_sub(&s->admitted, 1);
        char msg[160];
        snprintf(msg, sizeof msg, "the server is at its limit of %zu requests in flight (--max-concurrent-requests); "
                                  "retry after a second", s->cfg.max_concurrent);
        return respond_error(r, 429, msg, NULL, "too_many_requests", MHD_HTTP_HEADER_RETRY_AFTER, "1", true);
    }
    r->admitted = true;
    srv_metrics_inflight(1);
    if (r->route == SRV_ROUTE_TOKENIZE || r->route == SRV_ROUTE_DETOKENIZE) {
        /* the tokenizer alone: answered here, on the HTTP thread (its time is linear in the body,
         * which --max-body bounds) */
        srv_bad bad;
        memset(&bad, 0, sizeof bad);
        const char *body = r->body ? r->body : "";
        char *out = r->route == SRV_ROUTE_TOKENIZE ? srv_tokenize_body(&s->api, body, r->len, &bad)
                                                   : srv_detokenize_body(&s->api, body, r->len, &bad);
        if (!out) return respond_error(r, bad.status ? bad.status : 503, bad.status ? bad.message : "the server is out of memory",
                                       bad.param, bad.code ? bad.code : "out_of_memory", NULL, NULL, false);
        r->inputs = 1;
        return respond_json(r, 200, out);
    }
    if (r->route == SRV_ROUTE_RERANK) return start_rerank(r);
    if (r->route == SRV_ROUTE_EMBED_SPARSE) return start_embed_sparse(r);
    return r->route == SRV_ROUTE_EMBEDDINGS ? start_embeddings(r) : start_search(r);
}

/* libmicrohttpd's unescaping, except that "%00" stays as it is: the path reaches the routes as a C
 * string, so a decoded NUL would cut it (GET /%00 would be GET /, /info%00x would be /info); kept
 * as three characters it is a path no route has (404). Decoding only shortens: done in place. */
static size_t unescape_keep_nul(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    char *w = s, *r = s;
    for (;;) {
        char *nul = strstr(r, "%00");
        size_t seg = nul ? (size_t)(nul - r) : strlen(r);
        r[seg] = '\0';
        size_t n = MHD_http_unescape(r);
        memmove(w, r, n);
        w += n;
        if (!nul) break;
        memcpy(w, "%00", 3); /* (w + 3 <= nul + 3: nothing unread is overwritten) */
        w += 3;
        r = nul + 3;
    }
    *w = '\0';
    return (size_t)(w - s);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **req_cls) {
    server *s = cls;
    req *r = *req_cls;
    if (!r) { /* the headers are in */
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        *req_cls = r;
        r->s = s;
        r->conn = c;
        r->t0 = modattn__now_ns();
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        client_name(r, r->client, sizeof r->client);
        const route_def *rd = find_route(url);
        r->route = rd ? rd->route : SRV_ROUTE_OTHER;
        r->model_match = model_id_in(url) && atomic_load(&s->ready) && strcmp(model_id_in(url), s->api.model_id) == 0;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        const conn_info *cn = ci ? ci->socket_context : NULL;
        /* since the connection began waiting for this request: within the idle timeout (whole
         * seconds, as libmicrohttpd's) a keep-alive client may wait, then send at once */
        if (cn && (double)(r->t0 - cn->t_ready) * 1e-9 > ceil(s->cfg.timeout_s))
            return respond_error(r, 408, "the request's headers took longer than the server's timeout to arrive", NULL,
                                 "request_timeout", NULL, NULL, true);
        /* the head: libmicrohttpd answers 505 itself (in HTML) for HTTP/0.x and HTTP/2 and up */
        if (strcmp(version, MHD_HTTP_VERSION_1_1) != 0 && strcmp(version, MHD_HTTP_VERSION_1_0) != 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "%.16s is not supported: use HTTP/1.1 or HTTP/1.0", version);
            return respond_error(r, 505, msg, NULL, "http_version_not_supported", NULL, NULL, true);
        }
        if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
            !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))
            return respond_error(r, 400, "an HTTP/1.1 request needs a Host header", NULL, "bad_request", NULL, NULL,
                                 true);
        size_t uri_bytes = strlen(url);
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, scan_arg, &uri_bytes);
        if (uri_bytes > SRV_MAX_URI) {
            char msg[96];
            snprintf(msg, sizeof msg, "the request's URI is longer than this server takes (%d bytes)", SRV_MAX_URI);
            return respond_error(r, 414, msg, NULL, "uri_too_long", NULL, NULL, true);
        }
        head_scan hs;
        memset(&hs, 0, sizeof hs);
        MHD_get_connection_values(c, MHD_HEADER_KIND, scan_header, &hs);
        if (hs.bytes > SRV_MAX_HEADERS) {
            char msg[112];
            snprintf(msg, sizeof msg, "the request's header fields are larger than this server takes (%d bytes)",
                     SRV_MAX_HEADERS);
            return respond_error(r, 431, msg, NULL, "header_fields_too_large", NULL, NULL, true);
        }
        if (hs.cl_bad || hs.cl_differ || (hs.ncl && hs.te))
            return respond_error(r, 400,
                                 hs.cl_bad      ? "the Content-Length header is not a number of bytes"
                                 : hs.cl_differ ? "the request has Content-Length headers that differ"
                                                : "the request has both Content-Length and Transfer-Encoding",
                                 NULL, "bad_framing", NULL, NULL, true);
        if (hs.te_other)
            return respond_error(r, 501, "the only Transfer-Encoding this server takes is chunked", NULL,
                                 "bad_framing", NULL, NULL, true);
        const bool post_route = rd && strcmp(rd->method, "POST") == 0;
        /* a browser's CORS preflight carries no credentials: answered before the key (--cors) */
        if (s->cfg.cors_origin && post_route && strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0)
            return answer_preflight(r);
        if (s->api_key && !public_route(r->route) && !key_ok(s, c))
            return respond_error(r, 401, "a valid API key is required: send the header 'Authorization: Bearer KEY'",
                                 NULL, "invalid_api_key", MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer", true);
        if (!rd) {
            char msg[400];
            snprintf(msg, sizeof msg, "no route %.160s; the routes are POST /v1/embeddings, GET /v1/models, POST /search, "
                                      "GET /health, GET /metrics, GET /openapi.json, GET /info, POST /tokenize, "
                                      "POST /detokenize, GET /docs, GET /", url);
            return respond_error(r, 404, msg, NULL, "not_found", NULL, NULL, false);
        }
        bool get = strcmp(rd->method, "GET") == 0;
        if (strcmp(method, rd->method) != 0 && !(get && strcmp(method, "HEAD") == 0)) {
            char msg[160];
            snprintf(msg, sizeof msg, "%.20s is not allowed on %s; use %s", method, rd->path, rd->method);
            return respond_error(r, 405, msg, NULL, "method_not_allowed", MHD_HTTP_HEADER_ALLOW,
                                 get ? "GET, HEAD" : "POST", false);
        }
        if (get) return MHD_YES; /* answered on the last call (GET bodies are ignored) */
        /* JSON only: a web page can POST text/plain or a form to a loopback server without a
         * preflight, never application/json (that needs one, which --cors alone answers) */
        if (!is_json_type(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
            return respond_error(r, 415, "the request's Content-Type must be application/json", NULL,
                                 "unsupported_media_type", NULL, NULL, true);
        if (!atomic_load(&s->ready))
            return respond_error(r, 503, "the model is still loading; GET /health says when it is ready", NULL,
                                 "loading", MHD_HTTP_HEADER_RETRY_AFTER, "1", true);
        if (atomic_load(&s->draining))
            return respond_error(r, 503, "the server is shutting down", NULL, "shutting_down", NULL, NULL, true);
        if (hs.ncl && hs.cl > s->cfg.max_body) {
            char msg[160];
            snprintf(msg, sizeof msg, "the body is larger than this server takes (%zu bytes, --max-body)", s->cfg.max_body);
            return respond_error(r, 413, msg, NULL, "payload_too_large", NULL, NULL, true);
        }
        /* the body is awaited: it counts against its client address's unfinished bodies (429 at
         * once past --max-client-bodies), and against admission only once it is complete */
        int cb = client_body_acquire(s, r);
        if (cb < 0)
            return respond_error(r, 503, "the server is out of memory (or over its --mem-budget)", NULL,
                                 "out_of_memory", NULL, NULL, true);
        if (cb > 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "this client address has %zu request bodies still arriving, the server's limit "
                                      "(--max-client-bodies); finish those first", s->cfg.max_client_bodies);
            return respond_error(r, 429, msg, NULL, "too_many_requests", MHD_HTTP_HEADER_RETRY_AFTER, "1", true);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->state != ST_READING) return MHD_YES; /* answered already: the rest is dropped */
        if (!post_body_route(r->route)) {
            /* a GET's body is never read: dropped, not kept (nor counted), and cut off past --max-body */
            r->dropped += n;
            if (r->dropped > s->cfg.max_body) {
                r->status = 413;
                return MHD_NO;
            }
            return MHD_YES;
        }
        /* libmicrohttpd (0.9.75) lets us answer only once the body is in: a body that is too large
         * is read on and dropped, and answered (413) when it ends; one past twice --max-body is
         * cut off (the connection closed, no answer). A body still arriving --timeout after its
         * head is answered 408 by the gate, which then closes libmicrohttpd's end (the request
         * ends as the client's abort). Either way its --max-client-bodies count goes when the
         * request ends. */
        if (!r->reject) {
            if (secs_since(r->t0) > s->cfg.timeout_s) r->reject = 408;
            else if (r->len + n > s->cfg.max_body) r->reject = 413;
        }
        if (r->reject) {
            r->dropped += n;
            if (secs_since(r->t0) > 2 * s->cfg.timeout_s || r->len + r->dropped > 2 * s->cfg.max_body) {
                r->status = r->reject;
                return MHD_NO;
            }
            return MHD_YES;
        }
        if (r->len + n + 1 > r->cap) {
            size_t nc = r->cap ? r->cap : 4096;
            while (nc < r->len + n + 1) nc *= 2;
            if (nc > s->cfg.max_body + 1) nc = s->cfg.max_body + 1;
            char *nb = modattn__realloc(r->body, nc, MODATTN_MEM_OTHER);
            if (!nb) { /* answered when the body ends (libmicrohttpd cannot answer before) */
                r->reject = 503;
                r->dropped += n;
                return MHD_YES;
            }
            r->body = nb;
            r->cap = nc;
        }
        memcpy(r->body + r->len, upload, n);
        r->len += n;
        r->body[r->len] = '\0';
        return MHD_YES;
    }
    switch (r->state) {
    case ST_READING:
        client_body_release(s, r); /* the body is complete (or none was awaited) */
        if (r->reject == 408)
            return respond_error(r, 408, "the request's body took longer than the server's timeout to arrive", NULL,
                                 "request_timeout", NULL, NULL, true);
        if (r->reject == 503)
            return respond_error(r, 503, "the server is out of memory (or over its --mem-budget) reading the body",
                                 NULL, "out_of_memory", NULL, NULL, true);
        if (r->reject == 413) {
            char msg[160];
            snprintf(msg, sizeof msg, "the body is larger than this server takes (%zu bytes, --max-body)", s->cfg.max_body);
            return respond_error(r, 413, msg, NULL, "payload_too_large", NULL, NULL, true);
        }
        if (secs_since(r->t0) > s->cfg.timeout_s && r->len > 0)
            return respond_error(r, 408, "the request's body took longer than the server's timeout to arrive", NULL,
                                 "request_timeout", NULL, NULL, true);
        if (post_body_route(r->route)) return start_job(r);
        if ((r->route == SRV_ROUTE_MODELS || r->route == SRV_ROUTE_MODEL || r->route == SRV_ROUTE_INFO) &&
            !atomic_load(&s->ready))
            return respond_error(r, 503, "the model is still loading", NULL, "loading", MHD_HTTP_HEADER_RETRY_AFTER, "1",
                                 false);
        return answer_get(r);
    case ST_DONE: return finish_job(r);
    default: return MHD_YES; /* queued (a spurious call) or answered */
    }
}

/* ---- the access log, metrics and cleanup when a request ends */

static void log_line(server *s, const char *client, const char *method, const char *path, int status, size_t bytes,
                     double ms, size_t inputs, size_t tokens, const char *outcome) {
    if (s->cfg.quiet) return;
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    pthread_mutex_lock(&s->log_mu);
    if (s->cfg.log_json) {
        /* (the method and path are the client's: not UTF-8, they are not logged as they are) */
        const size_t ml = strlen(method), pl = strlen(path);
        char *cm = modattn__utf8_valid(method, ml) ? NULL : modattn__utf8_sanitize(method, ml, NULL);
        char *cp = modattn__utf8_valid(path, pl) ? NULL : modattn__utf8_sanitize(path, pl, NULL);
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:f, s:I, s:I, s:s}", "time", when, "client", client,
                              "method", cm ? cm : method, "path", cp ? cp : path, "status", status, "bytes",
                              (json_int_t)bytes, "ms", ms, "inputs", (json_int_t)inputs, "tokens", (json_int_t)tokens,
                              "outcome", outcome);
        modattn_free(cm);
        modattn_free(cp);
        char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (line) fprintf(stderr, "%s\n", line);
        modattn__json_free(line);
        json_decref(j);
        modattn__json_take_failure();
    } else {
        /* the path is the client's: shown with anything unprintable as \xHH */
        char safe[4 * sizeof ((req *)0)->path];
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *)path; *p && o + 5 < sizeof safe; p++) {
            if (*p < 0x20 || *p >= 0x7f) o += (size_t)snprintf(safe + o, sizeof safe - o, "\\x%02X", *p);
            else safe[o++] = (char)*p;
        }
        safe[o] = '\0';
        fprintf(stderr, "%s %s \"%s %s\" %d %zu %.1fms inputs=%zu tokens=%zu%s%s\n", when, client, method, safe, status,
                bytes, ms, inputs, tokens, outcome[0] ? " " : "", outcome);
    }
    pthread_mutex_unlock(&s->log_mu);
}

static void log_request(server *s, const req *r, const char *outcome) {
    log_line(s, r->client, r->method, r->path, r->status, r->bytes_out, secs_since(r->t0) * 1e3, r->inputs, r->tokens,
             outcome);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe) {
    server *s = cls;
    req *r = *req_cls;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_info *cn = ci ? ci->socket_context : NULL;
    if (cn) cn->t_ready = modattn__now_ns(); /* the next request's headers are awaited from now */
    if (!r) return;
    client_body_release(s, r);
    const char *outcome = r->abandoned                                  ? "client-closed"
                          : toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? ""
                          : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "client-timeout"
                          : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "shutdown"
                          : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? "client-closed"
                                                                       : "error";
    if (r->status == 0) r->status = 499; /* nothing was sent: the client went away or timed out */
    srv_metrics_request(r->route, r->status, secs_since(r->t0));
    log_request(s, r, outcome);
    if (r->admitted) {
        atomic_fetch_sub(&s->admitted, 1);
        srv_metrics_inflight(-1);
    }
    srv_embed_req_free(&r->er);
    srv_search_req_free(&r->sr);
    srv_rerank_req_free(&r->rr);
    srv_sparse_req_free(&r->xr);
    modattn_search_results_free(r->job.results, r->job.nresults);
    free(r->job.first_rank);
    free(r->job.first_score);
    modattn_free(r->vectors);
    modattn_free(r->body);
    free(r);
    *req_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    (void)cls;
    (void)c;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_info *cn = malloc(sizeof *cn);
        if (cn) cn->t_ready = modattn__now_ns();
        *socket_context = cn;
    } else {
        free(*socket_context);
        *socket_context = NULL;
    }
}

/* ---- the gate's callbacks (on its thread) */

static int gate_hand_off(void *ud, int fd, const struct sockaddr *addr, socklen_t addrlen) {
    server *s = ud;
    return MHD_add_connection(s->d, fd, addr, addrlen) == MHD_YES ? 0 : -1; /* (on failure it closed fd) */
}

static void gate_refused(void *ud, const srv_gate_refusal *g) {
    server *s = ud;
    char path[160];
    snprintf(path, sizeof path, "%s", g->target);
    path[strcspn(path, "?")] = '\0';
    const route_def *rd = find_route(path);
    srv_metrics_request(rd ? rd->route : SRV_ROUTE_OTHER, g->status, g->seconds);
    if (g->malformed) srv_metrics_malformed(g->status);
    log_line(s, g->client, g->method, g->target, g->status, g->bytes, g->seconds * 1e3, 0, 0,
             g->malformed ? "malformed" : "client-timeout");
}

/* ---- start-up and shutdown */

static int read_api_key(server *s, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "modattn: serve: --api-key-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) buf[--n] = '\0';
    if (more || n == 0 || memchr(buf, '\n', n) || memchr(buf, '\0', n)) {
        fprintf(stderr, "modattn: serve: --api-key-file %s: the file must hold one key on one line (1 to 4095 bytes)\n",
                path);
        return -1;
    }
    s->api_key = strdup(buf);
    s->api_key_len = n;
    return s->api_key ? 0 : -1;
}

static int make_api(server *s) {
    const modattn_model_info *in = modattn_model_get_info(s->model);
    srv_api *a = &s->api;
    a->model = s->model;
    a->model_id = in->name;
    a->dim = in->dim;
    a->max_tokens = in->max_tokens;
    a->vocab = (size_t)in->vocab;
    a->max_inputs = s->cfg.max_inputs;
    a->truncate = s->cfg.truncate;
    a->created = (int64_t)time(NULL);
    modattn_pooling_format(in->pooling, a->pooling, sizeof a->pooling);
    modattn_device_format(in->device, a->device, sizeof a->device);
    a->precision = modattn_precision_name(in->precision);
    a->identity = in->identity;
    a->max_batch_tokens = s->cfg.max_batch_tokens;
    a->max_concurrent = s->cfg.max_concurrent;
    a->max_body = s->cfg.max_body;
    a->db = s->cfg.db;
    const struct modattn_tokenizer *tok = modattn_model_tokenizer(s->model);
    int st = 0;
    a->cls_id = modattn_tokenizer_cls_id(tok);
    a->sep_id = modattn_tokenizer_sep_id(tok);
    const size_t nspec = modattn_tokenizer_num_specials(tok);
    if (a->cls_id < 0 || a->sep_id < 0 || nspec != 2)
        return modattn__error(MODATTN_EUNSUPPORTED, "the model's tokenizer does not put one token before and one after a "
                                                   "text ([CLS] ... [SEP]): token-id inputs cannot be framed");
    if ((st = srv_openapi_for(a, &a->openapi))) return st;
    return 0;
}

/* The listening socket, made here rather than by libmicrohttpd: SO_REUSEADDR only (a port in
 * TIME_WAIT is taken again at once), never SO_REUSEPORT, so that a port another process listens
 * on is refused ("address in use") instead of shared, the kernel splitting connections between
 * the two. The socket (listening, non-blocking) and the port bound (--port 0: the one chosen). */
static int open_listener(const srv_config *cfg, int *fd_out, int *port_out, bool *v6) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    int rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc != 0 || !res) {
        fprintf(stderr, "modattn: serve: --host %s: %s\n", cfg->host, gai_strerror(rc));
        return -1;
    }
    *v6 = res->ai_family == AF_INET6;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    const char *what = "socket";
    if (fd < 0) goto fail;
    what = "setsockopt";
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) goto fail;
    if (*v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) goto fail;
    what = "bind";
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0) goto fail;
    what = "listen";
    if (listen(fd, SOMAXCONN) != 0) goto fail;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    what = "getsockname";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) goto fail;
    *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)(void *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)(void *)&ss)->sin_port);
    *fd_out = fd;
    freeaddrinfo(res);
    return 0;
fail:;
    const int e = errno;
    if (e == EADDRINUSE)
        fprintf(stderr, "modattn: serve: cannot listen on %s port %d: address in use (another process listens there; "
                        "stop it or choose another --port)\n", cfg->host, cfg->port);
    else
        fprintf(stderr, "modattn: serve: cannot listen on %s port %d: %s: %s\n", cfg->host, cfg->port, what,
                strerror(e));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return -1;
}

int srv_run(const srv_config *cfg, modattn_ctx *ctx, srv_load_fn load, void *load_ud) {
    server s;
    memset(&s, 0, sizeof s);
    s.cfg = *cfg;
    s.ctx = ctx;
    pthread_mutex_init(&s.log_mu, NULL);
    pthread_mutex_init(&s.cb_mu, NULL);
    srv_metrics_init();
    int rc = 1;
    if (cfg->api_key_file && read_api_key(&s, cfg->api_key_file)) goto out;

    /* signals go to the main thread only: every thread started from here inherits the mask */
    sigset_t sigs, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, &old);
    signal(SIGPIPE, SIG_IGN);

    int lfd0 = -1, port = 0;
    bool v6 = false;
    if (open_listener(cfg, &lfd0, &port, &v6)) goto out;
    /* libmicrohttpd listens on nothing: the gate accepts and hands it connections */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    /* the gate keeps --timeout (a head, a body, an idle connection, a client that reads nothing);
     * libmicrohttpd's own idle timeout is a backstop past it, so that it never closes first */
    unsigned timeout = 2 * (cfg->timeout_s < 1 ? 1 : (unsigned)(cfg->timeout_s + 0.999)) + 2;
    s.d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &s,
                           MHD_OPTION_THREAD_POOL_SIZE, (unsigned)SRV_HTTP_THREADS,
                           MHD_OPTION_CONNECTION_TIMEOUT, timeout,
                           MHD_OPTION_CONNECTION_LIMIT, (unsigned)4000,
                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
                           MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s,
                           MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s,
                           MHD_OPTION_UNESCAPE_CALLBACK, unescape_keep_nul, NULL,
                           MHD_OPTION_END);
    if (!s.d) {
        fprintf(stderr, "modattn: serve: cannot serve on %s port %d: %s\n", cfg->host, port,
                errno ? strerror(errno) : "libmicrohttpd refused the options");
        close(lfd0);
        goto out;
    }
    srv_gate_config gc = {lfd0, cfg->timeout_s, 4000, gate_hand_off, gate_refused, &s};
    if (srv_gate_start(&gc, &s.gate)) { /* (it closed lfd0) */
        fprintf(stderr, "modattn: serve: cannot start accepting connections: %s\n", strerror(errno));
        goto out;
    }
    fprintf(stderr, "modattn: serve: listening on http://%s%s%s:%d (loading %s)\n", v6 ? "[" : "", cfg->host,
            v6 ? "]" : "", port, cfg->model_dir);
    if (cfg->port_file) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", cfg->port_file);
        FILE *pf = fopen(tmp, "w");
        if (!pf || fprintf(pf, "%d\n", port) < 0 || fclose(pf) != 0 || rename(tmp, cfg->port_file) != 0) {
            fprintf(stderr, "modattn: serve: --port-file %s: %s\n", cfg->port_file, strerror(errno));
            goto out;
        }
    }

    /* the model, while /health says 503 (tests stretch the wait: MODATTN_TEST_SERVE_LOAD_DELAY_MS) */
    uint64_t t_load = modattn__now_ns();
    const char *delay = getenv("MODATTN_TEST_SERVE_LOAD_DELAY_MS");
    if (delay && atoi(delay) > 0) {
        struct timespec ts = {atoi(delay) / 1000, (long)(atoi(delay) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    int st = load(load_ud, &s.model);
    if (st) {
        const char *m = modattn_last_error();
        fprintf(stderr, "modattn: serve: loading the model: %s\n", m && *m ? m : modattn_strerror(st));
        goto out;
    }
    if ((st = make_api(&s))) {
        fprintf(stderr, "modattn: serve: %s\n", modattn_last_error());
        goto out;
    }
    if (cfg->rerank_model_dir) {
        modattn_model_options ro;
        memset(&ro, 0, sizeof ro);
        ro.device = "cpu";
        if ((st = modattn_reranker_load(ctx, cfg->rerank_model_dir, &ro, &s.api.reranker))) {
            fprintf(stderr, "modattn: serve: loading the reranker (--rerank-model): %s\n", modattn_last_error());
            goto out;
        }
        modattn_model_set_batch_tokens(modattn_reranker_model(s.api.reranker), cfg->max_batch_tokens);
    }
    if (cfg->sparse_model_dir) {
        modattn_model_options so;
        memset(&so, 0, sizeof so);
        so.device = "cpu";
        if ((st = modattn_sparse_load(ctx, cfg->sparse_model_dir, &so, &s.api.sparse))) {
            fprintf(stderr, "modattn: serve: loading the sparse model (--sparse-model): %s\n", modattn_last_error());
            goto out;
        }
        modattn_model_set_batch_tokens(modattn_sparse_model(s.api.sparse), cfg->max_batch_tokens);
    }
    modattn_model_set_batch_tokens(s.model, cfg->max_batch_tokens);
    s.dev = modattn_device_find(modattn_model_get_info(s.model)->device);
    srv_batcher_config bc = {ctx, s.model, cfg->workers, cfg->threads, cfg->max_batch_tokens, cfg->db, cfg->max_queue_s,
                             s.api.reranker, s.api.sparse};
    if ((st = srv_batcher_start(&bc, &s.batcher))) {
        fprintf(stderr, "modattn: serve: %s\n", modattn_last_error());
        goto out;
    }
    atomic_store(&s.ready, true);
    char exd[160];
    srv_batcher_describe(s.batcher, exd, sizeof exd);
    fprintf(stderr, "modattn: serve: ready in %.2f s: %s, %zu dimensions, %s; store %s%s%s%s%s\n",
            secs_since(t_load), s.api.model_id, s.api.dim, exd,
            cfg->db ? cfg->db : "(none: /search answers 503)", s.api.reranker ? "; reranker " : "",
            s.api.reranker ? modattn_reranker_get_info(s.api.reranker)->name : "", s.api.sparse ? "; sparse " : "",
            s.api.sparse ? modattn_sparse_get_info(s.api.sparse)->name : "");

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "modattn: serve: %s: no new connections; finishing %lld request%s in flight (up to %g s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)srv_metrics_inflight_now(),
            srv_metrics_inflight_now() == 1 ? "" : "s", cfg->drain_s);
    atomic_store(&s.draining, true);
    srv_gate_stop_accepting(s.gate);
    uint64_t t_drain = modattn__now_ns();
    while (atomic_load(&s.admitted) > 0 && secs_since(t_drain) < cfg->drain_s) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int64_t left = atomic_load(&s.admitted);
    if (left > 0) {
        fprintf(stderr, "modattn: serve: %lld request%s still in flight after %g s: those not yet started get 503\n",
                (long long)left, left == 1 ? "" : "s", cfg->drain_s);
        srv_batcher_cancel(s.batcher, "the server is shutting down (its --drain-timeout passed)");
    }
    rc = 0;
out:
    /* the executors finish the queue (resuming every suspended connection) and stop; a request
     * that reaches them from now on is answered 503 at once; once every admitted request has been
     * answered (or 2 s passed), HTTP stops; then the executors' memory goes */
    srv_batcher_stop(s.batcher);
    for (int i = 0; s.d && i < 200 && atomic_load(&s.admitted) > 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    srv_gate_free(s.gate); /* (before libmicrohttpd: the answers it wrote are relayed out first) */
    if (s.d) MHD_stop_daemon(s.d);
    srv_batcher_free(s.batcher);
    if (rc == 0) fprintf(stderr, "modattn: serve: stopped\n");
    modattn_model_free(s.model);
    modattn_reranker_free(s.api.reranker);
    modattn_sparse_free(s.api.sparse);
    free(s.api.openapi);
    free(s.api_key);
    for (int i = 0; i < SRV_CB_BUCKETS; i++) /* (empty once HTTP has stopped) */
        while (s.cb[i]) {
            cb_node *n = s.cb[i];
            s.cb[i] = n->next;
            modattn_free(n);
        }
    pthread_mutex_destroy(&s.cb_mu);
    pthread_mutex_destroy(&s.log_mu);
    return rc;
}
