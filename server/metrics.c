/* server/metrics.c — the server's counters and histograms, and their Prometheus text
 * (text/plain; version=0.0.4: # HELP and # TYPE lines, counters ending in _total, histograms as
 * cumulative _bucket{le=...} ending at +Inf, then _sum and _count; units in the names).
 * Recorded under one mutex: a few additions per request or batch, never while a model runs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/backend/device.h"
#include "attn/internal_dispatch.h"
#include "device/internal_device.h"
#include "server/server.h"

#define MAX_STATUSES 24

typedef struct histo {
    const double *le;
    int nle;
    uint64_t *counts; /* [nle + 1]: per bucket (not cumulative), the last for +Inf */
    double sum;
    uint64_t count;
} histo;

static const double k_seconds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double k_inputs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
static const double k_tokens[] = {16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
#define NSEC (int)(sizeof k_seconds / sizeof *k_seconds)
#define NIN (int)(sizeof k_inputs / sizeof *k_inputs)
#define NTOK (int)(sizeof k_tokens / sizeof *k_tokens)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int status[MAX_STATUSES];
    uint64_t count[MAX_STATUSES];
    int nstatus;
    histo latency;
    uint64_t lat_counts[NSEC + 1];
} g_route[SRV_ROUTE_COUNT];
static histo g_batch_inputs, g_batch_tokens, g_batch_seconds;
static uint64_t g_bi[NIN + 1], g_bt[NTOK + 1], g_bs[NSEC + 1];
static uint64_t g_tokens_total, g_inputs_total, g_batches_total;
static int64_t g_queue, g_inflight;
static int64_t g_slots_busy;
static uint64_t g_batches_wide;
static uint64_t g_abandoned, g_expired;
static int g_mal_status[MAX_STATUSES];
static uint64_t g_mal_count[MAX_STATUSES];
static int g_nmal;

const char *srv_route_name(srv_route r) {
    static const char *const names[] = {"/v1/embeddings", "/v1/models", "/search", "/health",
                                        "/metrics", "/openapi.json", "/info", "/tokenize",
                                        "/detokenize", "/v1/models/{id}", "/docs", "/", "/rerank", "/embed_sparse",
                                        "other"};
    return (unsigned)r < SRV_ROUTE_COUNT ? names[r] : "other";
}

static void histo_init(histo *h, const double *le, int nle, uint64_t *counts) {
    h->le = le, h->nle = nle, h->counts = counts, h->sum = 0, h->count = 0;
}

static void histo_add(histo *h, double v) {
    int b = 0;
    while (b < h->nle && v > h->le[b]) b++;
    h->counts[b]++;
    h->sum += v;
    h->count++;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void init_once(void) {
    for (int r = 0; r < SRV_ROUTE_COUNT; r++) histo_init(&g_route[r].latency, k_seconds, NSEC, g_route[r].lat_counts);
    histo_init(&g_batch_inputs, k_inputs, NIN, g_bi);
    histo_init(&g_batch_tokens, k_tokens, NTOK, g_bt);
    histo_init(&g_batch_seconds, k_seconds, NSEC, g_bs);
}

void srv_metrics_init(void) { pthread_once(&g_once, init_once); }

void srv_metrics_request(srv_route r, int status, double seconds) {
    srv_metrics_init();
    if ((unsigned)r >= SRV_ROUTE_COUNT) r = SRV_ROUTE_OTHER;
    pthread_mutex_lock(&g_mu);
    int i = 0;
    while (i < g_route[r].nstatus && g_route[r].status[i] != status) i++;
    if (i == g_route[r].nstatus && i < MAX_STATUSES) g_route[r].status[g_route[r].nstatus++] = status;
    if (i < MAX_STATUSES) g_route[r].count[i]++;
    histo_add(&g_route[r].latency, seconds);
    pthread_mutex_unlock(&g_mu);
}

void srv_metrics_batch(size_t inputs, size_t tokens, double seconds) {
    srv_metrics_init();
    pthread_mutex_lock(&g_mu);
    histo_add(&g_batch_inputs, (double)inputs);
    histo_add(&g_batch_tokens, (double)tokens);
    histo_add(&g_batch_seconds, seconds);
    g_tokens_total += tokens;
    g_inputs_total += inputs;
    g_batches_total++;
    pthread_mutex_unlock(&g_mu);
}

void srv_metrics_executors(int threads, bool wide) {
    pthread_mutex_lock(&g_mu);
    g_slots_busy += threads;
    if (wide) g_batches_wide++;
    pthread_mutex_unlock(&g_mu);
}

void srv_metrics_queue(int64_t delta) {
    pthread_mutex_lock(&g_mu);
    g_queue += delta;
    pthread_mutex_unlock(&g_mu);
}

void srv_metrics_inflight(int64_t delta) {
    pthread_mutex_lock(&g_mu);
    g_inflight += delta;
    pthread_mutex_unlock(&g_mu);
}

void srv_metrics_dropped(bool abandoned) {
    pthread_mutex_lock(&g_mu);
    if (abandoned) g_abandoned++;
    else g_expired++;
    pthread_mutex_unlock(&g_mu);
}

void srv_metrics_malformed(int status) {
    pthread_mutex_lock(&g_mu);
    int i = 0;
    while (i < g_nmal && g_mal_status[i] != status) i++;
    if (i == g_nmal && i < MAX_STATUSES) g_mal_status[g_nmal++] = status;
    if (i < MAX_STATUSES) g_mal_count[i]++;
    pthread_mutex_unlock(&g_mu);
}

int64_t srv_metrics_inflight_now(void) {
    pthread_mutex_lock(&g_mu);
    int64_t n = g_inflight;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* ---- rendering */
#define put srv_buf_printf

static void put_histo(srv_buf *b, const char *name, const char *labels, const histo *h) {
    uint64_t cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (int i = 0; i < h->nle; i++) {
        cum += h->counts[i];
        put(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, h->le[i], (unsigned long long)cum);
    }
    cum += h->counts[h->nle];
    put(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
    if (labels[0]) {
        put(b, "%s_sum{%s} %.9g\n", name, labels, h->sum);
        put(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)h->count);
    } else {
        put(b, "%s_sum %.9g\n", name, h->sum);
        put(b, "%s_count %llu\n", name, (unsigned long long)h->count);
    }
}

char *srv_metrics_render(modattn_ctx *ctx, bool ready, const modattn_device_iface *device) {
    srv_buf b = {0};
    srv_buf_reserve(&b, 16384);
    srv_metrics_init();
    put(&b, "# HELP modattn_ready 1 once the model is loaded and requests are served.\n"
            "# TYPE modattn_ready gauge\nmodattn_ready %d\n", ready ? 1 : 0);
    pthread_mutex_lock(&g_mu);
    put(&b, "# HELP modattn_http_requests_total HTTP requests answered, by route and status.\n"
            "# TYPE modattn_http_requests_total counter\n");
    for (int r = 0; r < SRV_ROUTE_COUNT; r++)
        for (int i = 0; i < g_route[r].nstatus; i++)
            put(&b, "modattn_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n", srv_route_name((srv_route)r),
                g_route[r].status[i], (unsigned long long)g_route[r].count[i]);
    put(&b, "# HELP modattn_http_request_duration_seconds Time from a request's headers to its response, by route.\n"
            "# TYPE modattn_http_request_duration_seconds histogram\n");
    for (int r = 0; r < SRV_ROUTE_COUNT; r++) {
        if (!g_route[r].latency.count) continue;
        char lab[64];
        snprintf(lab, sizeof lab, "route=\"%s\"", srv_route_name((srv_route)r));
        put_histo(&b, "modattn_http_request_duration_seconds", lab, &g_route[r].latency);
    }
    put(&b, "# HELP modattn_requests_in_flight Embedding and search requests admitted and not yet answered.\n"
            "# TYPE modattn_requests_in_flight gauge\nmodattn_requests_in_flight %lld\n", (long long)g_inflight);
    put(&b, "# HELP modattn_requests_abandoned_total Queued requests dropped before they ran, or between "
            "their batches, because the client had closed its connection.\n"
            "# TYPE modattn_requests_abandoned_total counter\nmodattn_requests_abandoned_total %llu\n",
        (unsigned long long)g_abandoned);
    put(&b, "# HELP modattn_requests_queue_timeout_total Requests answered 503 because they waited longer than "
            "--max-queue-time for an executor.\n"
            "# TYPE modattn_requests_queue_timeout_total counter\nmodattn_requests_queue_timeout_total %llu\n",
        (unsigned long long)g_expired);
    put(&b, "# HELP modattn_requests_malformed_total Requests refused by the front gate before libmicrohttpd "
            "parsed them (their head, or a chunked body in view, broke HTTP/1.1's rules), by status.\n"
            "# TYPE modattn_requests_malformed_total counter\n");
    for (int i = 0; i < g_nmal; i++)
        put(&b, "modattn_requests_malformed_total{status=\"%d\"} %llu\n", g_mal_status[i],
            (unsigned long long)g_mal_count[i]);
    put(&b, "# HELP modattn_queue_depth Inputs waiting for an executor.\n"
            "# TYPE modattn_queue_depth gauge\nmodattn_queue_depth %lld\n", (long long)g_queue);
    put(&b, "# HELP modattn_batch_inputs Inputs per executor batch.\n# TYPE modattn_batch_inputs histogram\n");
    put_histo(&b, "modattn_batch_inputs", "", &g_batch_inputs);
    put(&b, "# HELP modattn_batch_tokens Tokens per executor batch.\n# TYPE modattn_batch_tokens histogram\n");
    put_histo(&b, "modattn_batch_tokens", "", &g_batch_tokens);
    put(&b, "# HELP modattn_batch_duration_seconds Time an executor spent embedding one batch.\n"
            "# TYPE modattn_batch_duration_seconds histogram\n");
    put_histo(&b, "modattn_batch_duration_seconds", "", &g_batch_seconds);
    put(&b, "# HELP modattn_tokens_total Tokens embedded ([CLS] and [SEP] included).\n"
            "# TYPE modattn_tokens_total counter\nmodattn_tokens_total %llu\n", (unsigned long long)g_tokens_total);
    put(&b, "# HELP modattn_inputs_total Inputs embedded (texts, token lists and search queries).\n"
            "# TYPE modattn_inputs_total counter\nmodattn_inputs_total %llu\n", (unsigned long long)g_inputs_total);
    put(&b, "# HELP modattn_batches_total Executor batches run.\n"
            "# TYPE modattn_batches_total counter\nmodattn_batches_total %llu\n", (unsigned long long)g_batches_total);
    put(&b, "# HELP modattn_batches_wide_total Batches one executor ran on every model thread (--workers auto: "
            "it was alone, with a short queue).\n"
            "# TYPE modattn_batches_wide_total counter\nmodattn_batches_wide_total %llu\n", (unsigned long long)g_batches_wide);
    put(&b, "# HELP modattn_executor_threads_busy Model threads running a batch now.\n"
            "# TYPE modattn_executor_threads_busy gauge\nmodattn_executor_threads_busy %lld\n", (long long)g_slots_busy);
    pthread_mutex_unlock(&g_mu);

    put(&b, "# HELP modattn_attention_calls_total Attention calls by implementation.\n"
            "# TYPE modattn_attention_calls_total counter\n");
    put(&b, "# HELP modattn_attention_seconds_total Time in attention by implementation.\n"
            "# TYPE modattn_attention_seconds_total counter\n");
    for (size_t i = 0; ctx && i < modattn_ctx_impl_count(ctx); i++) {
        /* the table's name, not modattn_ctx_impl_info: asking for that starts another device's
         * driver (OpenCL) whose implementations the server never ran */
        const modattn_attn_impl *impl = modattn__ctx_impl(ctx, i);
        modattn_impl_stats s;
        if (!impl || modattn__ctx_impl_stats(ctx, i, &s)) continue;
        put(&b, "modattn_attention_calls_total{implementation=\"%s\"} %llu\n", impl->name, (unsigned long long)s.calls);
        put(&b, "modattn_attention_seconds_total{implementation=\"%s\"} %.6f\n", impl->name, s.total_ms / 1e3);
    }

    put(&b, "# HELP modattn_memory_bytes Memory the library accounts for, by device and category.\n"
            "# TYPE modattn_memory_bytes gauge\n");
    put(&b, "# HELP modattn_memory_peak_bytes Peak of modattn_memory_bytes since start.\n"
            "# TYPE modattn_memory_peak_bytes gauge\n");
    modattn_mem_stats m;
    modattn_mem_get_stats(&m);
    for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++) {
        const char *cat = modattn_mem_category_name((modattn_mem_category)c);
        put(&b, "modattn_memory_bytes{device=\"cpu\",category=\"%s\"} %lld\n", cat, (long long)m.current[c]);
        put(&b, "modattn_memory_peak_bytes{device=\"cpu\",category=\"%s\"} %lld\n", cat, (long long)m.peak[c]);
    }
    if (device && device->id.kind != MODATTN_DEVICE_CPU) {
        const modattn_device_iface *dev = device;
        modattn_device_mem_stats ds;
        modattn__device_mem_get_stats(dev, &ds);
        char name[32];
        modattn_device_format(dev->id, name, sizeof name);
        for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++) {
            const char *cat = modattn_mem_category_name((modattn_mem_category)c);
            put(&b, "modattn_memory_bytes{device=\"%s\",category=\"%s\"} %lld\n", name, cat, (long long)ds.current[c]);
            put(&b, "modattn_memory_peak_bytes{device=\"%s\",category=\"%s\"} %lld\n", name, cat, (long long)ds.peak[c]);
        }
    }
    put(&b, "# HELP modattn_memory_budget_bytes The memory budget (--mem-budget; 0: none).\n"
            "# TYPE modattn_memory_budget_bytes gauge\nmodattn_memory_budget_bytes %lld\n", (long long)m.budget);
    return srv_buf_take(&b);
}
