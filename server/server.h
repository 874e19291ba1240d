/* server/server.h — `modattn serve`: an OpenAI-compatible embedding and search service over
 * libmicrohttpd. A front end: it parses HTTP and JSON, calls the public library API (a model
 * shared read-only, one session per executor, a store per executor) and writes JSON; no model
 * logic lives here.
 *
 *   server.c   the daemon: options, start-up (HTTP first, so /health says 503 while the model
 *              loads), routing, admission (429), limits (413, 408), API keys (401), the access
 *              log, SIGTERM/SIGINT drain
 *   api.c      the routes' JSON: requests parsed and checked field by field (400 naming the field),
 *              responses and OpenAI-style error objects
 *   batch.c    dynamic batching: a queue of inputs from every request, executors that take
 *              token-budget batches from it (oldest request first), embed them in their session
 *              and hand each request its vectors in order; searches run there too
 *   metrics.c  counters and histograms in Prometheus' text format
 *   gate.c     the front gate: accepts connections and relays them to libmicrohttpd, framing
 *              and checking every request on the way (malformed: answered in JSON and closed)
 *   web/       the search page (GET /) and the API documentation page (GET /docs): HTML, CSS and
 *              scripts embedded at build time (embed.cmake), loading nothing from elsewhere
 *
 * Threads: the gate's (one, epoll), libmicrohttpd's (HTTP_THREADS, epoll: a slow or stalled client
 * holds a socket, never a thread), the executors (--workers: by default one per model thread,
 * elastic, see batch.c), and the main thread, which loads the model and then waits for a signal. */
#ifndef MODATTN_SERVER_H
#define MODATTN_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "core/internal_core.h"

struct json_t;

#define SRV_HTTP_THREADS 2
/* elastic executors: the least queued tokens an executor's share may be (less: one executor
 * alone takes it all, on every thread) */
#define SRV_SPLIT_MIN_TOKENS 256

/* ---- configuration (cli/cmd_serve.c fills it from options and the environment) */
typedef struct srv_config {
    const char *model_dir;
    const char *rerank_model_dir; /* --rerank-model: a cross-encoder for POST /rerank (NULL: 404 there) */
    const char *sparse_model_dir; /* --sparse-model: a SPLADE model for POST /embed_sparse (NULL: 404 there) */
    const char *db;              /* the store for /search (NULL: /search answers 503) */
    const char *host;            /* "127.0.0.1" */
    int port;                    /* 0: any free port (printed) */
    int threads;                 /* model threads in all (0: all CPUs) */
    int workers;                 /* executors, each with its own session (threads / workers each); 0:
                                    auto, one per thread, elastic (batch.c) */
    size_t max_concurrent;       /* requests in flight (embeddings, search) before 429: counted once
                                    a request's body is complete */
    size_t max_client_bodies;    /* bodies still arriving from one client address before 429 */
    double max_queue_s;          /* a job that waited longer for an executor: 503 (0: no bound) */
    const char *cors_origin;     /* NULL: no CORS headers; else Access-Control-Allow-Origin for it */
    size_t max_batch_tokens;     /* tokens per executor batch */
    size_t max_body;             /* bytes */
    size_t max_inputs;           /* inputs per embeddings request */
    double timeout_s;            /* a request's header and body must arrive within it: 408 */
    double drain_s;              /* on SIGTERM, in-flight requests finish within it */
    const char *api_key_file;    /* NULL: no key */
    bool truncate;               /* default for requests that do not say (true: cut to the model's length) */
    bool log_json;               /* access log as JSON lines (else one text line) on stderr */
    bool quiet;                  /* no access log */
    const char *port_file;       /* write the bound port there once listening (tests) */
} srv_config;

/* Our limits on a request's head (the gate refuses past them: 414, 431, on every request of a
 * connection) */
#define SRV_MAX_URI 8192       /* the request target (path and query) */
#define SRV_MAX_HEADERS 16384  /* the header field lines */
#define SRV_GATE_BUF 32768     /* the most the gate holds of a connection, each way (a head fits) */

/* ---- the front gate (gate.c): our listening socket; every connection is relayed to
 * libmicrohttpd through a socket pair, and every request on it is framed and checked on the way:
 * one whose head or body breaks HTTP/1.1's rules is answered here, in JSON, and the connection
 * closed; a good one goes on as it came. */
typedef enum srv_head_verdict { SRV_HEAD_MORE = 0, SRV_HEAD_PASS, SRV_HEAD_REFUSE } srv_head_verdict;
typedef struct srv_head {
    int status;               /* REFUSE: 400, 413, 414, 431, 501, 505 */
    const char *code;         /* REFUSE: the error object's code ("bad_request", "bad_framing", ...) */
    const char *message;      /* REFUSE: why (static, or msg_buf) */
    char msg_buf[128];
    char method[16], target[160]; /* as far as they were read (the access log) */
    size_t head_len;          /* 0 until the head's empty line is in view */
    unsigned long long content_length;
    size_t ncl;               /* Content-Length headers (all equal) */
    size_t cookies;           /* in the Cookie headers */
    bool chunked, expect, host, http11;
} srv_head;
/* The request at the start of buf[0, n) (the bytes in view): SRV_HEAD_REFUSE (h says how),
 * SRV_HEAD_PASS (a head libmicrohttpd parses as we do; with Transfer-Encoding: chunked, the whole
 * chunked body well formed too, unless the client waits for 100-continue), or SRV_HEAD_MORE (well
 * formed so far; h->head_len > 0 once the head is complete and a chunked body is awaited).
 * Rules: METHOD (a token) SP TARGET (no spaces or control characters, at most SRV_MAX_URI bytes,
 * else 414) SP HTTP/1.0 or HTTP/1.1 (another version 505), lines ending in CRLF (a CR or LF
 * alone 400), field lines name ':' value (a token, no spaces before the colon, no control
 * characters, no obs-fold), at most SRV_MAX_HEADERS bytes, 100 fields and 128 cookies (431), at
 * most 128 query parameters (414: libmicrohttpd keeps each field, parameter and cookie in its
 * 64 KiB per connection), Content-Length
 * digits only (400; past 2^64 413) and equal if repeated, Transfer-Encoding chunked only (501)
 * and never with Content-Length (400), one Host (HTTP/1.1 needs it). */
srv_head_verdict srv_head_check(const char *buf, size_t n, srv_head *h);
/* A chunked body read as it arrives: st zeroed at the body's start; each call reads on from *pos
 * in buf[0, n) and leaves *pos after what it consumed (a chunk-size or trailer line only whole:
 * the caller keeps the rest for the next call). SRV_HEAD_PASS at the end of the trailers (*pos
 * just past them), SRV_HEAD_MORE, or SRV_HEAD_REFUSE (h->status, code, message set; h is
 * otherwise untouched). The rules srv_head_check applies to a chunked body in view. */
typedef struct srv_chunks {
    int phase;
    unsigned long long left;  /* of the chunk being read */
    size_t trailer_bytes, trailer_fields;
} srv_chunks;
srv_head_verdict srv_chunks_step(const char *buf, size_t *pos, size_t n, srv_chunks *st, srv_head *h);

typedef struct srv_gate_refusal {
    char client[64];
    const char *method, *target; /* "-" when not read */
    int status;
    size_t bytes;
    double seconds;           /* since the connection was accepted */
    bool malformed;           /* else a timeout (408) */
} srv_gate_refusal;
typedef struct srv_gate_config {
    int listen_fd;            /* listening, non-blocking; the gate owns it from srv_gate_start */
    double timeout_s;         /* --timeout: a head within it of the connection's start or of the
                               * last response, a body within it of its head (else 408); a client
                               * that reads nothing of its response for that long is closed */
    size_t max_connections;   /* client connections held at once (past it they wait in the backlog) */
    /* hands libmicrohttpd its end of a connection's socket pair, with the client's address: 0, or
     * -1 (fd closed) if it cannot take it */
    int (*hand_off)(void *ud, int fd, const struct sockaddr *addr, socklen_t addrlen);
    void (*refused)(void *ud, const srv_gate_refusal *r); /* answered by the gate: log, count */
    void *ud;
} srv_gate_config;
typedef struct srv_gate srv_gate;
/* Starts the gate's thread (0), or -1 with errno (listen_fd closed either way on failure). */
int srv_gate_start(const srv_gate_config *cfg, srv_gate **out);
/* SIGTERM: the listening socket closed (at once: no new connection is accepted when this
 * returns); connections whose first head is still arriving closed, the others relayed on
 * (libmicrohttpd answers their next requests 503). */
void srv_gate_stop_accepting(srv_gate *g);
/* Stops the thread (once the responses it is relaying have gone out, 2 s at most) and closes
 * whatever the gate still holds. */
void srv_gate_free(srv_gate *g);
uint64_t srv_gate_now_ns(void);

/* Loads the model (called on the main thread once HTTP is up). */
typedef int (*srv_load_fn)(void *ud, modattn_model **out);

/* Runs the server until SIGTERM or SIGINT, then drains. 0 on a clean stop, 1 if it could not
 * start (said on stderr). ctx: the library context (its policy); the model is loaded with load. */
int srv_run(const srv_config *cfg, modattn_ctx *ctx, srv_load_fn load, void *load_ud);

/* ---- metrics (metrics.c) */
typedef enum srv_route {
    SRV_ROUTE_EMBEDDINGS = 0,
    SRV_ROUTE_MODELS,
    SRV_ROUTE_SEARCH,
    SRV_ROUTE_HEALTH,
    SRV_ROUTE_METRICS,
    SRV_ROUTE_OPENAPI,
    SRV_ROUTE_INFO,
    SRV_ROUTE_TOKENIZE,
    SRV_ROUTE_DETOKENIZE,
    SRV_ROUTE_MODEL,          /* GET /v1/models/{id} */
    SRV_ROUTE_DOCS,
    SRV_ROUTE_PAGE,           /* GET / and its assets */
    SRV_ROUTE_RERANK,         /* POST /rerank */
    SRV_ROUTE_EMBED_SPARSE,   /* POST /embed_sparse */
    SRV_ROUTE_OTHER,
    SRV_ROUTE_COUNT
} srv_route;
const char *srv_route_name(srv_route r);

void srv_metrics_init(void);
void srv_metrics_request(srv_route r, int status, double seconds);
void srv_metrics_batch(size_t inputs, size_t tokens, double seconds);
void srv_metrics_queue(int64_t delta_inputs);
/* threads: model threads an executor's batch runs on (< 0: done); wide: on all of them */
void srv_metrics_executors(int threads, bool wide);
void srv_metrics_inflight(int64_t delta);
/* a queued job dropped: its client went away (abandoned) or it waited past --max-queue-time */
void srv_metrics_dropped(bool abandoned);
/* a request the gate refused for its framing (status 400, 413, 414, 431, 501, 505) */
void srv_metrics_malformed(int status);
int64_t srv_metrics_inflight_now(void);
/* The Prometheus text (text/plain; version=0.0.4) into a malloc'ed string (free()), NULL on
 * allocation failure. ctx: attention calls per implementation; device: the model's (its memory
 * too when it is not the CPU; NULL before the model is loaded). */
struct modattn_device_iface;
char *srv_metrics_render(modattn_ctx *ctx, bool ready, const struct modattn_device_iface *device);

/* ---- the batcher (batch.c) */
typedef struct srv_job srv_job;
typedef void (*srv_job_done)(srv_job *job, void *ud); /* called on an executor thread */
/* Whether the job's client has gone away (its connection closed): asked on an executor thread,
 * under the batcher's lock, before the job's next inputs are taken. Must not block. */
typedef bool (*srv_job_gone)(srv_job *job, void *ud);

/* SRV_JOB_RERANK: ids are query-passage pairs (types their token types) scored by the batcher's
 * reranker into out [n, num_labels]; a batch never mixes them with embedding inputs */
/* SRV_JOB_SPARSE: texts' ids for the batcher's SPLADE model, each text's vector into sparse_out[i]
 * (handed over: the job's creator frees them with modattn_sparse_vec_free) */
typedef enum srv_job_kind { SRV_JOB_EMBED = 0, SRV_JOB_SEARCH, SRV_JOB_RERANK, SRV_JOB_SPARSE } srv_job_kind;

struct srv_job {
    srv_job_kind kind;
    size_t n;                 /* inputs */
    int32_t **ids;            /* [n] token ids (owned by the job's creator) */
    size_t *counts;           /* [n] */
    float *out;               /* [n, dim] (rerank: [n, num_labels]) */
    int32_t **types;          /* rerank: [n] token types */
    unsigned rerank_flags;    /* rerank: MODATTN_RERANK_RAW or 0 */
    struct modattn_sparse_vec *sparse_out; /* sparse: [n] */
    /* search */
    size_t k;
    const char *path_prefix;  /* NULL: all */
    int mode;                 /* modattn_search_mode */
    double keyword_weight;
    double sparse_weight;
    double rrf_k;
    const char *query;        /* the text (keywords, snippets) */
    size_t query_len;
    const char *prompt;       /* the query's prompt ("" none): the store must have been indexed for it */
    bool prompt_given;
    modattn_search_result *results;
    size_t nresults;
    /* "rerank": true (--rerank-model): the first rerank_top candidates re-scored by the
     * cross-encoder on the executor after the search (k is then max(k, rerank_top), k_show the k
     * asked for); first_rank / first_score [nreranked] keep the first stage's, in the new order */
    bool rerank;
    size_t rerank_top, k_show, nreranked;
    int *first_rank;
    float *first_score;
    bool vectors_mapped;
    int ann_kind;             /* modattn_ann_kind that found the candidates by meaning (0: the exact scan) */
    /* the outcome: status 0, else an HTTP status and message */
    int http_status;
    char message[512];
    /* the queue's bookkeeping */
    size_t next;              /* inputs taken by executors */
    size_t pending;           /* inputs not yet finished */
    srv_job *qnext;
    srv_job_done done;
    void *done_ud;
    srv_job_gone gone;        /* NULL: never asked (ud: done_ud) */
    uint64_t t_queued;        /* modattn__now_ns() when submitted */
    bool abandoned;           /* dropped: gone() said the client went away */
    bool expired;             /* dropped: it waited past max_queue_s (http_status 503) */
};

typedef struct srv_batcher srv_batcher;
typedef struct srv_batcher_config {
    modattn_ctx *ctx;
    modattn_model *model;
    int workers, threads;
    size_t max_batch_tokens;
    const char *db;           /* NULL: searches fail with 503 */
    double max_queue_s;       /* a job not started within it fails with 503 (expired); 0: no bound */
    struct modattn_reranker *reranker; /* NULL: no rerank jobs */
    struct modattn_sparse_encoder *sparse; /* NULL: no sparse jobs */
} srv_batcher_config;
int srv_batcher_start(const srv_batcher_config *cfg, srv_batcher **out);
/* "2 executors of 1 thread, elastic (one alone with a short queue runs on all 2)" or "1 executor",
 * for the log */
void srv_batcher_describe(const srv_batcher *b, char *buf, size_t len);
/* Queues a job (never blocks): done(job) runs once every input is embedded (and the search run),
 * or it failed, or it was dropped: its client gone (job->abandoned; checked before each batch
 * takes its inputs, so a job of many batches stops between them) or not started within
 * max_queue_s (job->expired, 503). */
void srv_batcher_submit(srv_batcher *b, srv_job *job);
/* Fails every job no executor has started on (503, message), at once. */
void srv_batcher_cancel(srv_batcher *b, const char *message);
/* Stops after the queue is empty and joins the executors; a job submitted from then on fails at
 * once (503). srv_batcher_free then releases it (once nothing can submit: HTTP stopped). */
void srv_batcher_stop(srv_batcher *b);
void srv_batcher_free(srv_batcher *b);

/* ---- a growing text buffer (api.c): responses and the metrics text. Plain malloc (libmicrohttpd
 * frees what it sends); a failed allocation marks it failed and later calls do nothing. */
typedef struct srv_buf {
    char *p;
    size_t n, cap;
    bool failed;
} srv_buf;
void srv_buf_reserve(srv_buf *b, size_t more);
void srv_buf_put(srv_buf *b, const char *s, size_t len);
void srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text (NUL-terminated; the caller free()s it), or NULL if anything failed (then freed). */
char *srv_buf_take(srv_buf *b);

/* ---- the routes' JSON (api.c) */
typedef struct srv_api {
    modattn_model *model;
    const char *model_id;     /* "all-MiniLM-L6-v2" */
    size_t dim, max_tokens, vocab, max_inputs;
    int32_t cls_id, sep_id;   /* put around token-id inputs, as around texts */
    bool truncate;
    int64_t created;          /* when it loaded (unix seconds) */
    char *openapi;            /* srv_openapi_for(this), made once */
    /* GET /info */
    char pooling[64], device[64];
    const char *precision, *identity;
    size_t max_batch_tokens, max_concurrent, max_body;
    const char *db;           /* NULL: no store */
    struct modattn_reranker *reranker; /* --rerank-model (NULL: none) */
    struct modattn_sparse_encoder *sparse; /* --sparse-model (NULL: none) */
} srv_api;

/* An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}. malloc'ed. */
char *srv_error_body(int status, const char *message, const char *param, const char *code);

/* The parsed body of POST /v1/embeddings, tokenized: ids/counts for a job, and what the response
 * needs. On a bad request: the HTTP status (400, 404, 413, 422), a message, the field. */
typedef struct srv_embed_req {
    size_t n;
    int32_t **ids;
    size_t *counts;
    bool base64;
    size_t prompt_tokens;
    size_t dims;              /* the vectors' size in the response ("dimensions", else the model's
                               * truncate_dim, else all): cut after embedding (modattn_model_cut_dims) */
} srv_embed_req;
typedef struct srv_bad {
    int status;
    char message[512];
    char param[64];
    const char *code;
} srv_bad;
/* Fill *bad (status, the offending parameter or NULL, an error code, a printf message); returns -1. */
int srv_bad_req(srv_bad *bad, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int srv_parse_embeddings(const srv_api *api, const char *body, size_t len, srv_embed_req *out, srv_bad *bad);
void srv_embed_req_free(srv_embed_req *r);
/* The response body for a finished job. malloc'ed, NULL on allocation failure. */
char *srv_embeddings_body(const srv_api *api, const srv_embed_req *r, const float *vectors);

typedef struct srv_search_req {
    char *query;
    size_t k;
    char *path_prefix;        /* NULL: all */
    int mode;                 /* modattn_search_mode: "mode" ("hybrid", the default, "vector", "keyword") */
    double keyword_weight;
    double sparse_weight;
    double rrf_k;
    size_t query_len;
    int32_t *ids;
    size_t count;
    char *prompt;             /* the query's prompt (resolved: "prompt", "prompt_name" or the model's
                               * query prompt; "" none), prepended before tokenising */
    bool prompt_given;        /* the request named one */
    bool rerank;              /* "rerank": true (needs --rerank-model: else 422) */
    size_t rerank_top;        /* "rerank_top": candidates re-scored (default 50, at most
                               * min(--max-inputs, SRV_RERANK_MAX_TEXTS): else 413) */
} srv_search_req;
#define SRV_SEARCH_RERANK_TOP 50     /* "rerank_top" when absent: as `modattn search --rerank-top` */
int srv_parse_search(const srv_api *api, const char *body, size_t len, srv_search_req *out, srv_bad *bad);
void srv_search_req_free(srv_search_req *r);
char *srv_search_body(const srv_api *api, const srv_job *job);
char *srv_models_body(const srv_api *api);
/* GET /v1/models/{id}: the one model object (OpenAI's models.retrieve) */
char *srv_model_body(const srv_api *api);
/* GET /info: text-embeddings-inference's /info fields and ours, with the store's size and
 * freshness (opened read-only for the call; "store": null without --db). malloc'ed. */
char *srv_info_body(const srv_api *api);
/* POST /tokenize and POST /detokenize (text-embeddings-inference's bodies): the response body
 * (malloc'ed), or NULL with bad set (400 naming the field, 413 past --max-inputs, 503). */
char *srv_tokenize_body(const srv_api *api, const char *body, size_t len, srv_bad *bad);
char *srv_detokenize_body(const srv_api *api, const char *body, size_t len, srv_bad *bad);

/* Parses a body as a JSON object (as every POST route does); NULL with bad set (400, 503). */
struct json_t *srv_json_body(const char *body, size_t len, srv_bad *bad);

/* POST /rerank (server/rerank.c): text-embeddings-inference's body {query, texts, raw_scores,
 * return_text, truncate, truncation_direction}; its pairs tokenised. Errors: 404 without a
 * reranker, 422 for a missing / empty / wrong-typed field, 413 for more texts than
 * min(--max-inputs, SRV_RERANK_MAX_TEXTS) or a pair over the reranker's length with truncation off. */
#define SRV_RERANK_MAX_TEXTS 1000
typedef struct srv_rerank_req {
    size_t n, tokens;
    int32_t **ids, **types;
    size_t *counts;
    bool raw, return_text;
    struct json_t *texts;     /* the request's list (return_text) */
} srv_rerank_req;
/* POST /embed_sparse (server/sparse.c): text-embeddings-inference's body {inputs: string or list of
 * strings, truncate, truncation_direction}; its texts tokenised for the SPLADE model. Errors: 404
 * without one, 422 for a missing / empty / wrong-typed field, 413 for more inputs than --max-inputs
 * or a text over the model's length with truncation off. */
typedef struct srv_sparse_req {
    size_t n, tokens;
    int32_t **ids;
    size_t *counts;
    struct modattn_sparse_vec *vecs; /* [n]: the job's results */
} srv_sparse_req;
int srv_parse_embed_sparse(const srv_api *api, const char *body, size_t len, srv_sparse_req *out, srv_bad *bad);
void srv_sparse_req_free(srv_sparse_req *r);
/* [[{"index": token_id, "value": weight}, ...], ...] in input order, ids ascending. malloc'ed; NULL on memory. */
char *srv_sparse_body(const srv_sparse_req *r);
int srv_parse_rerank(const srv_api *api, const char *body, size_t len, srv_rerank_req *out, srv_bad *bad);
void srv_rerank_req_free(srv_rerank_req *r);
/* [{"index", "score", "text"?}] best first (ties: input order). malloc'ed; NULL on memory. */
char *srv_rerank_body(const srv_api *api, const srv_rerank_req *r, const float *scores);

/* The OpenAPI document served: the committed one with api's model, dimension, vocabulary size and
 * --max-inputs filled in. malloc'ed; NULL on failure. */
int srv_openapi_for(const srv_api *api, char **doc); /* 0, or an error (EINTERNAL: the embedded spec is broken) */

/* The committed OpenAPI document (server/openapi.json, embedded at build time). */
extern const char srv_openapi_json[];
extern const size_t srv_openapi_json_len;
/* The web pages (server/web/, embedded at build time): the search page at GET /, the API
 * documentation at GET /docs, their style and scripts under /assets/. */
extern const char srv_web_index_html[], srv_web_page_css[], srv_web_page_js[], srv_web_docs_html[],
    srv_web_docs_js[];
extern const size_t srv_web_index_html_len, srv_web_page_css_len, srv_web_page_js_len, srv_web_docs_html_len,
    srv_web_docs_js_len;

#endif
