/* cli/cmd_serve.c — `modattn serve`: options (each also read from the environment), then the
 * server (server/). Front end only. */
#include "cli/cli.h"
#include "core/internal_core.h"

#ifdef MODATTN_HAVE_SERVER
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/server.h"
#include "core/env.h"

static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: modattn serve [OPTIONS]\n\n"
            "An OpenAI-compatible embedding and search service over HTTP:\n"
            "  POST /v1/embeddings   OpenAI's embeddings API (input: text, texts, token ids)\n"
            "  GET  /v1/models       the model served\n"
            "  POST /search          {\"query\": ..., \"k\": 10, \"path_prefix\": ...} over the store (--db);\n"
            "                        \"rerank\": true re-scores the first \"rerank_top\" (50) by the\n"
            "                        cross-encoder of --rerank-model (as search --rerank; 422 without one)\n"
            "  GET  /health          200 when ready, 503 while the model loads or the server drains\n"
            "  GET  /metrics         Prometheus metrics\n"
            "  GET  /info            the model, its limits and the store's size (text-embeddings-\n"
            "                        inference's /info fields and ours)\n"
            "  POST /tokenize        {\"inputs\": text or texts} -> the tokens with their byte offsets\n"
            "  POST /detokenize      {\"ids\": ids or lists of ids} -> texts\n"
            "  GET  /v1/models/ID    one model (404 for another id)\n"
            "  POST /rerank          {\"query\": ..., \"texts\": [...]} -> [{\"index\", \"score\"}] best first,\n"
            "                        by the cross-encoder of --rerank-model (text-embeddings-\n"
            "                        inference's /rerank; 404 without one)\n"
            "  POST /embed_sparse    {\"inputs\": \"text\" or [...]} -> [[{\"index\", \"value\"}, ...]] per\n"
            "                        input, the SPLADE weights of --sparse-model (text-embeddings-\n"
            "                        inference's /embed_sparse; 404 without one)\n"
            "  GET  /                a search page; GET /docs: these routes as a page, to try them\n"
            "  GET  /openapi.json    the OpenAPI 3 description of all of these\n"
            "Texts from concurrent requests are embedded together in token-budget batches; a text's\n"
            "vector equals `modattn embed`'s bit for bit. SIGTERM or SIGINT: stop accepting, finish\n"
            "the requests in flight (--drain-timeout), exit 0.\n\n"
            "options (each also from the environment variable in brackets):\n"
            "  --model DIR                  model directory [MODATTN_MODEL] (default as `modattn embed`)\n"
            "  --rerank-model DIR           a cross-encoder for POST /rerank and /search's \"rerank\"\n"
            "                               (see `modattn rerank`)\n"
            "  --sparse-model DIR           a SPLADE model for POST /embed_sparse (see `modattn embed --sparse`)\n"
            "                               [MODATTN_RERANK_MODEL]; at most %d texts a request (413)\n"
            "  --db FILE                    the store /search reads, made by `modattn index` [MODATTN_DB]\n"
            "                               (none: /search answers 503; it may be made later, and\n"
            "                               documents indexed while serving are searched at once)\n"
            "  --host ADDR                  address to listen on [MODATTN_HOST] (default 127.0.0.1:\n"
            "                               loopback only; 0.0.0.0 or :: for every interface)\n"
            "  --port N                     port [MODATTN_PORT] (default 8080; 0: any free port)\n"
            "  --threads N                  model threads in all [MODATTN_THREADS] (default: all CPUs)\n"
            "  --workers N|auto             executors [MODATTN_WORKERS] (default auto, also 0: one per\n"
            "                               thread, each batch on one thread, or on all of them when\n"
            "                               one executor is busy alone with a small queue; a model on\n"
            "                               a device with its own memory: one executor; N: N executors,\n"
            "                               each always on its N-th of the threads)\n"
            "  --max-concurrent-requests N  embedding and search requests in flight (counted once a\n"
            "                               request's body is complete); past it 429 with Retry-After\n"
            "                               [MODATTN_MAX_CONCURRENT_REQUESTS] (default 512)\n"
            "  --max-client-bodies N        request bodies still arriving from one client address;\n"
            "                               past it 429 at once [MODATTN_MAX_CLIENT_BODIES] (default 64)\n"
            "  --max-queue-time S           a request that waited longer than S seconds for an executor\n"
            "                               is answered 503 with Retry-After instead of run\n"
            "                               [MODATTN_MAX_QUEUE_TIME] (default 30; 0: no bound)\n"
            "  --max-batch-tokens T         tokens per batch an executor runs [MODATTN_MAX_BATCH_TOKENS]\n"
            "                               (default 8192)\n"
            "  --max-body BYTES             largest request body, K/M suffixes; past it 413\n"
            "                               [MODATTN_MAX_BODY] (default 2000000)\n"
            "  --max-inputs N               inputs per embeddings request; past it 413\n"
            "                               [MODATTN_MAX_INPUTS] (default 2048)\n"
            "  --timeout S                  a request's headers and body must arrive within S seconds\n"
            "                               (408); an idle connection is closed after S [MODATTN_TIMEOUT]\n"
            "                               (default 60)\n"
            "  --drain-timeout S            on SIGTERM, how long in-flight requests may take\n"
            "                               [MODATTN_DRAIN_TIMEOUT] (default 30)\n"
            "  --cors ORIGIN                allow the web page of ORIGIN (scheme://host[:port]) to call\n"
            "                               the API from a browser: Access-Control-Allow-Origin: ORIGIN\n"
            "                               and answers to CORS preflights [MODATTN_CORS] (default:\n"
            "                               none, no CORS headers). POST routes take only\n"
            "                               Content-Type: application/json (else 415)\n"
            "  --api-key-file F             require 'Authorization: Bearer KEY' (KEY: the file's one\n"
            "                               line) on every route but /health [MODATTN_API_KEY_FILE]\n"
            "  --no-truncate                refuse inputs longer than the model's max_seq_length (422)\n"
            "                               instead of cutting them [MODATTN_TRUNCATE=0]; a request\n"
            "                               may say \"truncate\": true or false itself\n"
            "  --log-json                   access log as JSON lines [MODATTN_LOG_JSON=1]\n"
            "  --quiet                      no access log [MODATTN_QUIET=1]\n"
            "  --port-file F                write the port there once listening (with --port 0)\n"
            "  -h, --help                   this help\n"
            "global options --attn, --device, --mem-budget, --stats, --trace apply.\n",
            SRV_RERANK_MAX_TEXTS);
}

static int load_cb(void *ud, modattn_model **out) {
    void **a = ud;
    return cli_load_model(a[0], a[1], a[2], out);
}

/* An origin as browsers send it: http or https, a host of letters, digits, '-', '.' (or an IPv6
 * literal in brackets), an optional port of 1 to 5 digits, nothing after. */
static bool cors_origin_ok(const char *o) {
    const char *p = strncmp(o, "https://", 8) == 0 ? o + 8 : strncmp(o, "http://", 7) == 0 ? o + 7 : NULL;
    if (!p || !*p) return false;
    if (*p == '[') {
        const char *e = strchr(p, ']');
        if (!e || e == p + 1) return false;
        for (const char *q = p + 1; q < e; q++)
            if (!strchr("0123456789abcdefABCDEF:.", *q)) return false;
        p = e + 1;
    } else {
        const char *h = p;
        while (*p && strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.", *p)) p++;
        if (p == h) return false;
    }
    if (*p == ':') {
        const char *d = ++p;
        while (*p >= '0' && *p <= '9') p++;
        if (p == d || p - d > 5 || atol(d) < 1 || atol(d) > 65535) return false;
    }
    return *p == '\0';
}

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int cli_cmd_serve(cli_globals *g, int argc, char **argv) {
    srv_config c;
    memset(&c, 0, sizeof c);
    c.host = "127.0.0.1";
    c.port = 8080;
    c.workers = 0; /* auto */
    c.max_concurrent = 512;
    c.max_client_bodies = 64;
    c.max_queue_s = 30;
    c.max_batch_tokens = 8192;
    c.max_body = 2000000;
    c.max_inputs = 2048;
    c.timeout_s = 60;
    c.drain_s = 30;
    c.truncate = true;
    /* the environment first, options over it */
    const char *model = env("MODATTN_MODEL"), *v;
    c.db = env("MODATTN_DB");
    c.rerank_model_dir = env("MODATTN_RERANK_MODEL");
    if ((v = env("MODATTN_HOST"))) c.host = v;
    c.api_key_file = env("MODATTN_API_KEY_FILE");
    c.cors_origin = env("MODATTN_CORS");
    c.truncate = modattn__env_bool("MODATTN_TRUNCATE", true);
    c.log_json = modattn__env_bool("MODATTN_LOG_JSON", false);
    c.quiet = modattn__env_bool("MODATTN_QUIET", false);
    struct num {
        const char *opt, *envname;
        double lo, hi;
        bool bytes, real;
        void *dst; /* int, size_t or double */
        char kind;
    } nums[] = {
        {"--port", "MODATTN_PORT", 0, 65535, false, false, &c.port, 'i'},
        {"--workers", "MODATTN_WORKERS", 0, 256, false, false, &c.workers, 'i'},
        {"--max-concurrent-requests", "MODATTN_MAX_CONCURRENT_REQUESTS", 1, 1000000, false, false, &c.max_concurrent, 'z'},
        {"--max-client-bodies", "MODATTN_MAX_CLIENT_BODIES", 1, 1000000, false, false, &c.max_client_bodies, 'z'},
        {"--max-queue-time", "MODATTN_MAX_QUEUE_TIME", 0, 86400, false, true, &c.max_queue_s, 'd'},
        {"--max-batch-tokens", "MODATTN_MAX_BATCH_TOKENS", 2, 4194304, false, false, &c.max_batch_tokens, 'z'},
        {"--max-body", "MODATTN_MAX_BODY", 16, (double)((size_t)1 << 32), true, false, &c.max_body, 'z'},
        {"--max-inputs", "MODATTN_MAX_INPUTS", 1, 1000000, false, false, &c.max_inputs, 'z'},
        {"--timeout", "MODATTN_TIMEOUT", 0.001, 86400, false, true, &c.timeout_s, 'd'},
        {"--drain-timeout", "MODATTN_DRAIN_TIMEOUT", 0, 86400, false, true, &c.drain_s, 'd'},
    };
    const size_t nnums = sizeof nums / sizeof *nums;
    /* one parser for a value from an option or the environment (a usage error: exit 2) */
#define SET_NUM(nm, src, val)                                                                                 \
    do {                                                                                                     \
        if ((nm)->bytes) {                                                                                   \
            int64_t b_;                                                                                      \
            if (modattn__parse_bytes((val), &b_) != 0 || b_ < (int64_t)(nm)->lo || (double)b_ > (nm)->hi) {   \
                fprintf(stderr, "modattn: serve: %s: '%s' is not a size from %.0f to %.0f bytes\n", (src), (val), \
                        (nm)->lo, (nm)->hi);                                                                 \
                return 2;                                                                                    \
            }                                                                                                \
            *(size_t *)(nm)->dst = (size_t)b_;                                                               \
        } else if ((nm)->real) {                                                                             \
            double d_;                                                                                       \
            if (cli_parse_double((src), (val), (nm)->lo, (nm)->hi, false, &d_) != 0) return 2;               \
            *(double *)(nm)->dst = d_;                                                                       \
        } else if ((nm)->dst == (void *)&c.workers && strcasecmp((val), "auto") == 0) {                       \
            c.workers = 0;                                                                                   \
        } else {                                                                                             \
            long long l_;                                                                                    \
            if (cli_parse_ll((src), (val), (long long)(nm)->lo, (long long)(nm)->hi, &l_) != 0) {            \
                if ((nm)->dst == (void *)&c.workers) fprintf(stderr, "modattn: serve: %s: or 'auto'\n", (src)); \
                return 2;                                                                                    \
            }                                                                                                \
            if ((nm)->kind == 'i') *(int *)(nm)->dst = (int)l_;                                              \
            else *(size_t *)(nm)->dst = (size_t)l_;                                                          \
        }                                                                                                    \
    } while (0)
    for (size_t k = 0; k < nnums; k++)
        if ((v = env(nums[k].envname))) SET_NUM(&nums[k], nums[k].envname, v);
    int threads = g->threads;
    if (!threads && (v = env("MODATTN_THREADS"))) {
        long long t;
        if (cli_parse_ll("MODATTN_THREADS (0 = all CPUs)", v, 0, 1024, &t) != 0) return 2;
        threads = (int)t;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            serve_usage(stdout);
            return cli_finish_stdout(0);
        }
        /* flags */
        if (strcmp(a, "--no-truncate") == 0) { c.truncate = false; continue; }
        if (strcmp(a, "--truncate") == 0) { c.truncate = true; continue; }
        if (strcmp(a, "--log-json") == 0) { c.log_json = true; continue; }
        if (strcmp(a, "--quiet") == 0) { c.quiet = true; continue; }
        /* --opt VALUE or --opt=VALUE */
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        bool known = false;
        static const char *const strs[] = {"--model", "--db", "--host", "--api-key-file", "--port-file", "--cors", "--rerank-model", "--sparse-model"};
        for (size_t k = 0; k < sizeof strs / sizeof *strs && !known; k++)
            known = strlen(strs[k]) == nlen && strncmp(a, strs[k], nlen) == 0;
        for (size_t k = 0; k < nnums && !known; k++)
            known = strlen(nums[k].opt) == nlen && strncmp(a, nums[k].opt, nlen) == 0;
        if (!known) {
            fprintf(stderr, "modattn: serve: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!val) {
            fprintf(stderr, "modattn: serve: %.*s needs a value\n", (int)nlen, a);
            return 2;
        }
        if (!eq) i++;
        if (!*val) {
            fprintf(stderr, "modattn: serve: %.*s: an empty value\n", (int)nlen, a);
            return 2;
        }
        if (strncmp(a, "--model", nlen) == 0 && nlen == 7) model = val;
        else if (strncmp(a, "--db", nlen) == 0 && nlen == 4) c.db = val;
        else if (strncmp(a, "--host", nlen) == 0 && nlen == 6) c.host = val;
        else if (strncmp(a, "--api-key-file", nlen) == 0 && nlen == 14) c.api_key_file = val;
        else if (strncmp(a, "--port-file", nlen) == 0 && nlen == 11) c.port_file = val;
        else if (strncmp(a, "--cors", nlen) == 0 && nlen == 6) c.cors_origin = val;
        else if (strncmp(a, "--rerank-model", nlen) == 0 && nlen == 14) c.rerank_model_dir = val;
        else if (strncmp(a, "--sparse-model", nlen) == 0 && nlen == 14) c.sparse_model_dir = val;
        else
            for (size_t k = 0; k < nnums; k++)
                if (strlen(nums[k].opt) == nlen && strncmp(a, nums[k].opt, nlen) == 0) {
                    char opt[64];
                    snprintf(opt, sizeof opt, "%.*s", (int)nlen, a);
                    SET_NUM(&nums[k], opt, val);
                }
    }
#undef SET_NUM
    if (c.port_file && cli_check_output_path("--port-file", c.port_file) != 0) return 2;
    if (c.cors_origin && !cors_origin_ok(c.cors_origin)) {
        fprintf(stderr, "modattn: serve: --cors '%s' is not an origin: scheme://host[:port] with scheme http or https, "
                        "no path (e.g. https://app.example.com or http://localhost:3000)\n", c.cors_origin);
        return 2;
    }
    if (c.api_key_file && access(c.api_key_file, R_OK) != 0) {
        fprintf(stderr, "modattn: serve: --api-key-file %s: %s\n", c.api_key_file, strerror(errno));
        return 1;
    }
    char mbuf[PATH_MAX + 64];
    c.model_dir = cli_model_dir_for_store(model, NULL, c.db, mbuf, sizeof mbuf); /* --db's own model first */
    c.threads = threads;
    if (c.workers > 1 && threads > 0 && c.workers > threads) {
        fprintf(stderr, "modattn: serve: --workers %d is more than --threads %d: each executor needs a thread\n",
                c.workers, threads);
        return 2;
    }
    /* SIGTERM and SIGINT go to the server's main thread only (it drains): blocked before any
     * thread starts, the context's pool included, so that every thread inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    modattn_ctx *ctx = NULL;
    if (cli_open_ctx(g, &ctx)) return 1;
    void *ud[3] = {g, ctx, (void *)c.model_dir};
    return srv_run(&c, ctx, load_cb, ud);
}
#else
int cli_cmd_serve(cli_globals *g, int argc, char **argv) {
    (void)g, (void)argc, (void)argv;
    fprintf(stderr, "modattn: serve: this build has no server (libmicrohttpd was not found when it was configured)\n");
    return 1;
}
#endif
