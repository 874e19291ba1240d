/* core/trace.c — tracing spans, recorded cheaply and written as Chrome trace-event JSON.
 *
 * Off (the default), modattn__trace_begin() is one relaxed atomic load and returns 0, and
 * modattn__trace_end(0, ...) returns at once. On, spans are appended to a block list under a
 * mutex: spans are per op, not per element, so contention is negligible. */
#define _GNU_SOURCE
#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096

typedef struct block {
    struct block *next;
    size_t used;
    modattn_trace_span spans[BLOCK];
} block;

static atomic_bool g_on;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
/* The trace's own copies of span names and implementation names (a plugin's name goes away with
 * the plugin, a device's name may be a caller's buffer): a span never points at memory it does
 * not own. Few distinct strings exist (op names, implementations, devices): a list, searched by
 * content, kept until modattn__trace_clear. */
static char **g_strs;
static size_t g_nstrs, g_capstrs;
static block *g_head, *g_tail;
static size_t g_count;
static uint64_t g_epoch;
static _Thread_local int g_tid;

uint64_t modattn__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void modattn__trace_enable(bool on) {
    pthread_mutex_lock(&g_mu);
    if (on && !g_epoch) g_epoch = modattn__now_ns();
    pthread_mutex_unlock(&g_mu);
    atomic_store(&g_on, on);
}

bool modattn__trace_enabled(void) { return atomic_load_explicit(&g_on, memory_order_relaxed); }

uint64_t modattn__trace_begin(void) {
    if (!atomic_load_explicit(&g_on, memory_order_relaxed)) return 0;
    return modattn__now_ns();
}

/* s's copy in the trace's list (g_mu held); NULL for NULL, or when memory fails ("?" then) */
static const char *intern(const char *s) {
    if (!s) return NULL;
    for (size_t i = 0; i < g_nstrs; i++)
        if (strcmp(g_strs[i], s) == 0) return g_strs[i];
    if (g_nstrs == g_capstrs) {
        size_t nc = g_capstrs ? 2 * g_capstrs : 64;
        char **n = modattn__realloc(g_strs, nc * sizeof *n, MODATTN_MEM_OTHER);
        if (!n) return "?";
        g_strs = n, g_capstrs = nc;
    }
    char *c = modattn__strndup(s, 200, MODATTN_MEM_OTHER);
    if (!c) return "?";
    g_strs[g_nstrs++] = c;
    return c;
}

static void push(const char *name, const char *impl, const char *shape, double bytes, double flops, int tid,
                 uint64_t t0, uint64_t t1) {
    pthread_mutex_lock(&g_mu);
    if (!g_tail || g_tail->used == BLOCK) {
        block *b = modattn__malloc(sizeof *b, MODATTN_MEM_OTHER);
        if (!b) { /* tracing never fails the traced work: drop the span */
            pthread_mutex_unlock(&g_mu);
            return;
        }
        b->next = NULL;
        b->used = 0;
        if (g_tail) g_tail->next = b;
        else g_head = b;
        g_tail = b;
    }
    modattn_trace_span *s = &g_tail->spans[g_tail->used++];
    s->name = intern(name ? name : "?");
    s->impl = intern(impl);
    snprintf(s->shape, sizeof s->shape, "%s", shape ? shape : "");
    s->bytes = bytes;
    s->flops = flops;
    s->thread = tid;
    s->t0_ns = t0;
    s->t1_ns = t1;
    g_count++;
    pthread_mutex_unlock(&g_mu);
}

void modattn__trace_end(uint64_t t0, const char *name, const char *impl, const char *shape,
                       double bytes, double flops) {
    if (!t0) return;
    uint64_t t1 = modattn__now_ns();
    if (!g_tid) g_tid = (int)syscall(SYS_gettid);
    push(name, impl, shape, bytes, flops, g_tid, t0, t1);
}

void modattn__trace_record(const char *name, const char *impl, const char *shape, double bytes, double flops,
                          int track, uint64_t t0_ns, uint64_t t1_ns) {
    if (!modattn__trace_enabled() || t1_ns < t0_ns) return;
    if (t0_ns < g_epoch) t0_ns = g_epoch; /* a device clock mapped a little before tracing began */
    if (t1_ns < t0_ns) t1_ns = t0_ns;
    push(name, impl, shape, bytes, flops, track, t0_ns, t1_ns);
}

size_t modattn__trace_count(void) {
    pthread_mutex_lock(&g_mu);
    size_t n = g_count;
    pthread_mutex_unlock(&g_mu);
    return n;
}

int modattn__trace_get(size_t i, modattn_trace_span *out) {
    int st = MODATTN_ERANGE;
    pthread_mutex_lock(&g_mu);
    for (block *b = g_head; b; b = b->next) {
        if (i < b->used) {
            *out = b->spans[i];
            st = 0;
            break;
        }
        i -= b->used;
    }
    pthread_mutex_unlock(&g_mu);
    return st == 0 ? 0 : modattn__error(st, "trace span index out of range");
}

void modattn__trace_clear(void) {
    pthread_mutex_lock(&g_mu);
    block *b = g_head;
    while (b) {
        block *n = b->next;
        modattn_free(b);
        b = n;
    }
    g_head = g_tail = NULL;
    g_count = 0;
    for (size_t i = 0; i < g_nstrs; i++) modattn_free(g_strs[i]);
    modattn_free(g_strs);
    g_strs = NULL, g_nstrs = g_capstrs = 0;
    pthread_mutex_unlock(&g_mu);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int modattn__trace_write_json(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return modattn__error(MODATTN_EIO, "cannot write trace file '%s'", path);
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    pthread_mutex_lock(&g_mu);
    int pid = (int)getpid();
    bool first = true;
    /* device queues are tracks of their own: name them */
    int named[64], nnamed = 0;
    for (block *b = g_head; b; b = b->next)
        for (size_t i = 0; i < b->used; i++) {
            int t = b->spans[i].thread;
            if (t < MODATTN_TRACE_DEVICE_TRACK(0, 0)) continue;
            bool seen = false;
            for (int k = 0; k < nnamed; k++) seen |= named[k] == t;
            if (seen || nnamed == 64) continue;
            named[nnamed++] = t;
            int kind = (t - MODATTN_TRACE_DEVICE_TRACK(0, 0)) / 1000, index = (t - MODATTN_TRACE_DEVICE_TRACK(0, 0)) % 1000;
            static const char *kinds[] = {"cpu", "cuda", "opencl", "xla"};
            fprintf(f, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s:%d queue\"}}",
                    first ? "" : ",\n", pid, t, kind >= 0 && kind < 4 ? kinds[kind] : "device", index);
            first = false;
        }
    for (block *b = g_head; b; b = b->next) {
        for (size_t i = 0; i < b->used; i++) {
            const modattn_trace_span *s = &b->spans[i];
            fprintf(f, "%s{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"name\":",
                    first ? "" : ",\n", pid, s->thread, (double)(s->t0_ns - g_epoch) / 1e3,
                    (double)(s->t1_ns - s->t0_ns) / 1e3);
            json_str(f, s->name);
            fprintf(f, ",\"cat\":");
            json_str(f, s->impl ? s->impl : "modattn");
            fprintf(f, ",\"args\":{\"impl\":");
            json_str(f, s->impl ? s->impl : "");
            fprintf(f, ",\"shape\":");
            json_str(f, s->shape);
            fprintf(f, ",\"bytes\":%.0f,\"flops\":%.0f}}", s->bytes, s->flops);
            first = false;
        }
    }
    pthread_mutex_unlock(&g_mu);
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) return modattn__error(MODATTN_EIO, "error writing trace file '%s'", path);
    return 0;
}
