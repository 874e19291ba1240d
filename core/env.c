/* core/env.c — the table of modattn's environment variables and their one reader. */
#define _GNU_SOURCE
#include "core/env.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#define CPU_ISAS "avx512f,avx512,avx512_bf16,avx512_vnni,amx,avx2,fma,avx,neon"

const modattn__env_var modattn__env_vars[] = {
    /* what to run, for every command that loads a model */
    {"MODATTN_MODEL", MODATTN__ENV_TEXT, 0, 0, NULL, "the model (a folder or a name) when --model is not given"},
    {"MODATTN_MODELS", MODATTN__ENV_TEXT, 0, 0, NULL, "folders holding models by name, for --model NAME (PATH[:PATH])"},
    {"MODATTN_DB", MODATTN__ENV_TEXT, 0, 0, NULL, "serve: the store /search reads (--db)"},
    {"MODATTN_DEVICE", MODATTN__ENV_TEXT, 0, 0, NULL, "the device when --device is not given (cpu, opencl:0, xla:0)"},
    {"MODATTN_PJRT_PLUGIN", MODATTN__ENV_TEXT, 0, 0, NULL,
     "PJRT plugins for the xla device (PATH[:PATH]; default: those pip installed, then the one make deps laid out)"},
    {"MODATTN_PRECISION", MODATTN__ENV_CHOICE, 0, 0, "fp32,float32,bf16,bfloat16,int8,bf16x3",
     "the precision when --precision is not given"},
    {"MODATTN_HOST_FALLBACK", MODATTN__ENV_BOOL, 0, 0, NULL, "1: ops a device refuses run on the host (--host-fallback)"},
    {"MODATTN_PLUGIN_PATH", MODATTN__ENV_TEXT, 0, 0, NULL, "attention plugins to load (PATH[:PATH])"},
    {"MODATTN_CACHE_DIR", MODATTN__ENV_TEXT, 0, 0, NULL,
     "where tuning results and compiled kernels are cached (default $XDG_CACHE_HOME/modattn)"},
    /* tuning knobs */
    {"MODATTN_POOL_SPIN_US", MODATTN__ENV_INT, 0, 1000000, NULL,
     "microseconds a pool worker spins for work before it sleeps (default 200)"},
    {"MODATTN_HUGEPAGES", MODATTN__ENV_BOOL, 0, 0, NULL, "0: no transparent huge pages for large blocks (default 1)"},
    {"MODATTN_CPU_DISABLE", MODATTN__ENV_LIST, 0, 0, CPU_ISAS,
     "instruction sets to treat as absent (comma-separated: " CPU_ISAS ")"},
    {"MODATTN_GEMM_PLANS", MODATTN__ENV_BOOL, 0, 0, NULL, "0: fp32 GEMMs without prepacked plans (comparisons)"},
    {"MODATTN_GEMM_OWN", MODATTN__ENV_BOOL, 0, 0, NULL,
     "0: on AVX2 CPUs, fp32 GEMMs on oneDNN's jit GEMM instead of ours over weights packed at load (comparisons)"},
    {"MODATTN_VECTOR_FILE", MODATTN__ENV_CHOICE, 0, 0, "on,off",
     "off: search reads vectors from SQLite, not the mapped vector file (default on)"},
    {"MODATTN_ANN_FAISS_SEARCH", MODATTN__ENV_BOOL, 0, 0, NULL, "1: FAISS's own HNSW search instead of ours (comparisons)"},
    {"MODATTN_OPENCL_TILED", MODATTN__ENV_BOOL, 0, 0, NULL, "1: OpenCL's local-memory kernels on a CPU device (tests)"},
    {"MODATTN_PEAK_GFLOPS", MODATTN__ENV_REAL, 0.001, 1e9, NULL, "bench attn: the peak to report against (--peak)"},
    {"MODATTN_ASAN_KERNELS", MODATTN__ENV_CHOICE, 0, 0, "full,entry",
     "sanitizer builds: entry runs the hot kernels' uninstrumented twins, each call's operands checked at entry "
     "(default full; ignored by other builds)"},
    {"MODATTN_MPI_VERBOSE", MODATTN__ENV_BOOL, 0, 0, NULL, "1: MPI ranks say what they do on stderr"},
    /* serve: each the same as its flag */
    {"MODATTN_HOST", MODATTN__ENV_TEXT, 0, 0, NULL, "serve --host"},
    {"MODATTN_PORT", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --port"},
    {"MODATTN_API_KEY_FILE", MODATTN__ENV_TEXT, 0, 0, NULL, "serve --api-key-file"},
    {"MODATTN_THREADS", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --threads"},
    {"MODATTN_WORKERS", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --workers"},
    {"MODATTN_MAX_CONCURRENT_REQUESTS", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --max-concurrent-requests"},
    {"MODATTN_MAX_BATCH_TOKENS", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --max-batch-tokens"},
    {"MODATTN_MAX_BODY", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --max-body"},
    {"MODATTN_MAX_INPUTS", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --max-inputs"},
    {"MODATTN_RERANK_MODEL", MODATTN__ENV_TEXT, 0, 0, NULL, "serve --rerank-model"},
    {"MODATTN_TIMEOUT", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --timeout"},
    {"MODATTN_DRAIN_TIMEOUT", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --drain-timeout"},
    {"MODATTN_MAX_CLIENT_BODIES", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --max-client-bodies"},
    {"MODATTN_MAX_QUEUE_TIME", MODATTN__ENV_SERVE, 0, 0, NULL, "serve --max-queue-time"},
    {"MODATTN_CORS", MODATTN__ENV_TEXT, 0, 0, NULL, "serve --cors"},
    {"MODATTN_TRUNCATE", MODATTN__ENV_BOOL, 0, 0, NULL, "serve: 0 is --no-truncate"},
    {"MODATTN_LOG_JSON", MODATTN__ENV_BOOL, 0, 0, NULL, "serve: 1 is --log-json"},
    {"MODATTN_QUIET", MODATTN__ENV_BOOL, 0, 0, NULL, "serve: 1 is --quiet"},
    /* test knobs, DEVICE:VALUE */
    {"MODATTN_DEVICE_FAIL_AFTER", MODATTN__ENV_TEST, 0, 0, NULL, "tests: DEVICE:N, the device is lost after N ops"},
    {"MODATTN_DEVICE_DISABLE_OPS", MODATTN__ENV_TEST, 0, 0, NULL, "tests: DEVICE:OP[,OP], the device refuses those ops"},
    {NULL, MODATTN__ENV_TEXT, 0, 0, NULL, NULL},
};

const char *modattn__env_raw(const char *name) { return getenv(name); }

static int parse_bool(const char *v, bool *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return *out = true, 0;
        if (strcasecmp(v, no[i]) == 0) return *out = false, 0;
    }
    return -1;
}

static int parse_ll(const char *v, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int parse_real(const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* whether word (n bytes) is one of the comma-separated choices, any case */
static bool is_choice(const char *choices, const char *word, size_t n) {
    for (const char *p = choices; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, word, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

bool modattn__env_bool(const char *name, bool dflt) {
    const char *v = getenv(name);
    bool b;
    return v && parse_bool(v, &b) == 0 ? b : dflt;
}

static const modattn__env_var *row(const char *name) {
    for (const modattn__env_var *r = modattn__env_vars; r->name; r++)
        if (strcmp(r->name, name) == 0) return r;
    return NULL;
}

long long modattn__env_int(const char *name, long long dflt) {
    const char *v = getenv(name);
    const modattn__env_var *r = row(name);
    long long x;
    if (!v || !r) return dflt;
    return parse_ll(v, (long long)r->lo, (long long)r->hi, &x) == 0 ? x : dflt;
}

double modattn__env_real(const char *name, double dflt) {
    const char *v = getenv(name);
    const modattn__env_var *r = row(name);
    double x;
    if (!v || !r) return dflt;
    return parse_real(v, r->lo, r->hi, &x) == 0 ? x : dflt;
}

bool modattn__env_has(const char *name, const char *word) {
    const char *v = getenv(name);
    return v && is_choice(v, word, strlen(word));
}

/* the value as shown in a message: at most 40 bytes, anything unprintable as '?' */
static const char *shown(const char *v, char *buf, size_t cap) {
    snprintf(buf, cap, "%.40s%s", v, strlen(v) > 40 ? "..." : "");
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    return buf;
}

static int check_one(const modattn__env_var *r, const char *v) {
    char s[48];
    if (!*v)
        return modattn__error(MODATTN_EINVAL, "%s is set but empty: unset it or give it a value (%s)", r->name, r->doc);
    switch (r->kind) {
    case MODATTN__ENV_BOOL: {
        bool b;
        if (parse_bool(v, &b))
            return modattn__error(MODATTN_EINVAL, "%s: '%s' is not 1 or 0 (true/false, yes/no, on/off)", r->name,
                                 shown(v, s, sizeof s));
        return 0;
    }
    case MODATTN__ENV_INT: {
        long long x;
        if (parse_ll(v, (long long)r->lo, (long long)r->hi, &x))
            return modattn__error(MODATTN_EINVAL, "%s: '%s' is not a whole number from %.0f to %.0f", r->name,
                                 shown(v, s, sizeof s), r->lo, r->hi);
        return 0;
    }
    case MODATTN__ENV_REAL: {
        double x;
        if (parse_real(v, r->lo, r->hi, &x))
            return modattn__error(MODATTN_EINVAL, "%s: '%s' is not a number from %g to %g", r->name,
                                 shown(v, s, sizeof s), r->lo, r->hi);
        return 0;
    }
    case MODATTN__ENV_CHOICE:
        if (!is_choice(r->choices, v, strlen(v)))
            return modattn__error(MODATTN_EINVAL, "%s: '%s' is not one of %s", r->name, shown(v, s, sizeof s),
                                 r->choices);
        return 0;
    case MODATTN__ENV_LIST:
        for (const char *p = v;;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (!is_choice(r->choices, p, len)) {
                char w[48];
                snprintf(w, sizeof w, "%.*s", (int)(len < 40 ? len : 40), p);
                return modattn__error(MODATTN_EINVAL, "%s: '%s' is not one of %s (a comma-separated list)", r->name,
                                     shown(w, s, sizeof s), r->choices);
            }
            if (!e) break;
            p = e + 1;
        }
        return 0;
    default: return 0; /* TEXT, SERVE (serve's parser), TEST (read where used) */
    }
}

int modattn__env_check(void) {
    for (const modattn__env_var *r = modattn__env_vars; r->name; r++) {
        const char *v = getenv(r->name);
        if (!v) continue;
        if (*v && r->kind == MODATTN__ENV_SERVE) continue; /* serve checks its own, with its flags' messages */
        int st = check_one(r, v);
        if (st) return st;
    }
    return 0;
}
