/* modattn/core.h — memory accounting, thread pool, CPU features and tracing.
 *
 * Everything the library allocates goes through modattn_malloc() and friends, so that bytes in
 * use and peak bytes are known per category, a budget can be enforced, and tests can make the
 * Nth allocation fail. jansson's allocations (the JSON files the library reads) join them when
 * the application asks: modattn_json_count_allocations(). */
#ifndef MODATTN_CORE_H
#define MODATTN_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "modattn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- environment */

/* Validates every MODATTN_* variable that is set against its kind and range (the README's table
 * of them): 0, or MODATTN_EINVAL with a message naming the variable and what it takes. The CLI
 * calls it before any work (a usage error, exit 2); modattn_ctx_create() calls it too. */
int modattn_env_check(void);

/* ---------------------------------------------------------------- memory */

#define MODATTN_MEM_CATEGORY_MAP(X) \
    X(WEIGHTS, "weights")           \
    X(ACTIVATIONS, "activations")   \
    X(WORKSPACE, "workspace")       \
    X(INDEX, "index")               \
    X(OTHER, "other")

typedef enum modattn_mem_category {
#define MODATTN__MEMCAT_ENUM(name, text) MODATTN_MEM_##name,
    MODATTN_MEM_CATEGORY_MAP(MODATTN__MEMCAT_ENUM)
#undef MODATTN__MEMCAT_ENUM
    MODATTN_MEM_CATEGORY_COUNT
} modattn_mem_category;

const char *modattn_mem_category_name(modattn_mem_category cat);

/* All returned blocks are aligned to MODATTN_ALIGN bytes (enough for AVX-512 loads).
 * On failure (out of memory, over budget, injected failure) they return NULL and record an
 * error message naming the category and the request size (status MODATTN_ENOMEM or
 * MODATTN_EBUDGET, available from modattn_mem_last_status()).
 * Ownership: the caller frees the block with modattn_free(). */
#define MODATTN_ALIGN 64
void *modattn_malloc(size_t bytes, modattn_mem_category cat);
void *modattn_calloc(size_t count, size_t size, modattn_mem_category cat); /* checked count*size */
void *modattn_realloc(void *ptr, size_t bytes, modattn_mem_category cat); /* ptr may be NULL */
char *modattn_strdup(const char *s, modattn_mem_category cat);
char *modattn_strndup(const char *s, size_t n, modattn_mem_category cat);
void modattn_free(void *ptr); /* NULL is fine */
/* Bytes requested for a live block (0 for NULL). */
size_t modattn_mem_block_size(const void *ptr);
/* Status of the last failed allocation on this thread (MODATTN_ENOMEM or MODATTN_EBUDGET). */
int modattn_mem_last_status(void);

/* Account for memory the library holds but did not allocate (e.g. mapped weight files).
 * `delta` may be negative. Counts against the budget when positive; returns MODATTN_EBUDGET
 * (and accounts nothing) when it would exceed it. */
int modattn_mem_account(modattn_mem_category cat, int64_t delta);

typedef struct modattn_mem_stats {
    int64_t current[MODATTN_MEM_CATEGORY_COUNT];
    int64_t peak[MODATTN_MEM_CATEGORY_COUNT];
    int64_t current_total;
    int64_t peak_total;
    uint64_t allocations;  /* successful allocations since start */
    uint64_t failures;     /* failed allocations (real, budget or injected) */
    int64_t budget;        /* 0 = none */
} modattn_mem_stats;

void modattn_mem_get_stats(modattn_mem_stats *out);
/* Reset the peaks to the current values. */
void modattn_mem_reset_peak(void);
/* Limit total bytes in use (allocated + accounted); 0 removes the limit. */
void modattn_mem_set_budget(int64_t bytes);
/* Parse "123", "64K", "512M", "2G" (powers of 1024). Returns MODATTN_EINVAL with a message. */
int modattn_parse_bytes(const char *text, int64_t *out);

/* Fault injection for tests: make the Nth allocation from now fail (1 = the next one);
 * 0 disables. Returns how many allocations have been attempted since it was armed. */
void modattn_mem_fail_nth(uint64_t n);
uint64_t modattn_mem_fail_counter(void);

/* ---------------------------------------------------------------- jansson */

/* modattn reads its JSON files (config.json, tokenizer.json, the safetensors header) with
 * jansson. By default jansson allocates with malloc(), out of sight of the accounting above. */
struct json_t;
struct json_error_t;

/* Route every allocation jansson makes (parsing, json_dumps(), objects built with json_pack()
 * and the like, by modattn or by the application) through modattn's accounting, in category
 * MODATTN_MEM_OTHER: counted in modattn_mem_get_stats() (the bytes jansson asked for), checked
 * against modattn_mem_set_budget() and modattn_mem_fail_nth().
 *
 * Opt-in: the library never calls it, because it calls json_set_alloc_funcs(), which is
 * process-global. The `modattn` command calls it first thing. Rules once it is on:
 *   - Call it once at start-up: before other threads use jansson, and while no memory jansson
 *     allocated is live (simplest: before the first jansson object or string exists). Freeing a
 *     block jansson allocated before the switch aborts with a message.
 *   - Memory jansson hands the caller to free (the string from json_dumps()) must be released
 *     with modattn_json_free(), never free().
 *   - A refused allocation (over the budget, or an injected failure) is not refused to jansson:
 *     jansson 2.14 does not survive a NULL from its allocator (its parser and its json_dumps()
 *     drop bytes and return wrong JSON as success; the parser can also write past a heap buffer
 *     or fail an assert). The block is served and counted (the budget is exceeded), the failure
 *     is counted in the statistics and recorded for the thread:
 *       . modattn_json_load_file() / modattn_json_loadb() stop the parse at the end of the 1 KiB
 *         block of input being read and fail with the allocator's error; parse with them, not
 *         json_load*(), which would read on to the end. The budget is exceeded by the refused
 *         allocation (which can be large: a big object's hash table, a long string) and what
 *         jansson allocates for the rest of that block;
 *       . after building or dumping JSON, call modattn_json_take_failure() and discard the result
 *         if it reports a failure.
 *     Only a failure of the system's malloc itself reaches jansson as NULL.
 * Returns 0 (also when already on), or MODATTN_EINVAL, changing nothing, when other code has
 * already given jansson its own allocation functions. Not thread-safe. */
int modattn_json_count_allocations(void);
/* Whether jansson's allocations are routed through modattn's accounting. */
bool modattn_json_allocations_counted(void);
/* The first jansson allocation refused on this thread since the last call (over the budget:
 * MODATTN_EBUDGET, injected or real failure: MODATTN_ENOMEM), with the allocator's message
 * recorded again for modattn_last_error(); 0 if none. Clears it. */
int modattn_json_take_failure(void);
/* Free memory that jansson allocated for the caller (json_dumps()) with the free function
 * jansson uses now (json_get_alloc_funcs()): right whether or not allocations are routed.
 * NULL is fine. */
void modattn_json_free(void *ptr);

/* Parse JSON like json_load_file() / json_loadb() (same flags) into *out; the caller
 * json_decref()s it. Works whether or not allocations are routed. Returns
 *   0                              success;
 *   MODATTN_EFORMAT                not valid JSON: `err` holds jansson's text, line, column and
 *                                  position; the message is "line L, column C: text";
 *   MODATTN_EIO                    the file cannot be opened or read (message and err->text
 *                                  say why);
 *   MODATTN_ENOMEM/MODATTN_EBUDGET an allocation was refused: the allocator's message (budget,
 *                                  category, size); err->text is "out of memory". The parse
 *                                  stopped within 1 KiB of input of it (see above).
 * *out is NULL on every error; `err` may be NULL. A refusal recorded before the call and not
 * yet taken stays recorded. */
int modattn_json_load_file(const char *path, size_t flags, struct json_t **out,
                           struct json_error_t *err);
int modattn_json_loadb(const char *buf, size_t len, size_t flags, struct json_t **out,
                       struct json_error_t *err);

/* ---------------------------------------------------------------- threads */

typedef struct modattn_pool modattn_pool;

/* fn(ctx, i, thread) is called once for every i in [0, n); thread is in [0, nthreads). */
typedef void (*modattn_task_fn)(void *ctx, int64_t i, int thread);

/* nthreads <= 0 means "one per online CPU". Ownership: free with modattn_pool_free(). Between
 * jobs the workers spin for MODATTN_POOL_SPIN_US microseconds (read at creation; default 200, 0:
 * none) before they sleep, so back-to-back jobs do not wait for a wake-up. */
int modattn_pool_create(int nthreads, modattn_pool **out);
void modattn_pool_free(modattn_pool *pool);
int modattn_pool_threads(const modattn_pool *pool);
/* Runs fn over [0, n) on the pool (the calling thread takes part) and returns when all are done.
 * Items are handed out dynamically; an item's result must not depend on which thread ran it.
 * Threads calling one pool at once take turns (one job at a time: give concurrent workers a pool
 * each, modattn_session); a call from inside one of the pool's own tasks runs serially on the
 * calling thread (thread 0). A NULL pool runs serially. */
void modattn_pool_run(modattn_pool *pool, int64_t n, modattn_task_fn fn, void *ctx);

/* ---------------------------------------------------------------- precision */

/* The arithmetic of a model's dense layers (its GEMMs). Attention, softmax, LayerNorm, the
 * activation and pooling run in fp32 in every mode. */
typedef enum modattn_precision {
    MODATTN_PRECISION_FP32 = 0, /* exact fp32: the default */
    MODATTN_PRECISION_BF16,     /* weights and GEMM inputs rounded to bfloat16 (nearest even),
                                 * products summed in fp32 (AVX512_BF16 / AMX on the CPU) */
    MODATTN_PRECISION_INT8,     /* int8 weights with a scale per output channel, GEMM inputs
                                 * quantised with a scale per row (dynamic, symmetric), products
                                 * summed exactly in int32 and scaled back to fp32 (AVX512_VNNI /
                                 * AMX on the CPU) */
    MODATTN_PRECISION_BF16X3,   /* fp32 to within 2^-16 of each product, on bf16 hardware: a = a_hi +
                                 * a_lo and w = w_hi + w_lo in bfloat16, the sum of a_hi w_hi +
                                 * a_hi w_lo + a_lo w_hi in fp32 (three bf16 products; only
                                 * a_lo w_lo is left out). Vectors agree with fp32's to a cosine of
                                 * 1 - 1e-9, well inside the exactness bar (0.99999), not bit for
                                 * bit. AMX-BF16 on the CPU (without it, slower than fp32) */
} modattn_precision;
#define MODATTN_PRECISION_COUNT 4
/* "fp32", "bf16", "int8", "bf16x3" ("?" out of range). */
const char *modattn_precision_name(modattn_precision p);
/* "fp32" (or "float32"), "bf16" (or "bfloat16"), "int8", "bf16x3", case-insensitive; NULL or "" is fp32.
 * MODATTN_EINVAL naming the choices otherwise. */
int modattn_precision_parse(const char *text, modattn_precision *out);

/* ---------------------------------------------------------------- CPU */

typedef struct modattn_cpu_features {
    bool sse2, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, avx512_fp16;
    bool avx512_vnni;        /* int8 dot products (VPDPBUSD) */
    bool amx_bf16, amx_int8; /* AMX tiles for bf16 / int8 products (the OS saves the tiles) */
    bool neon;
    int logical_cpus;
    char model_name[64]; /* "Intel(R) Xeon(R) ..." from CPUID, or "unknown" */
} modattn_cpu_features;

/* Detected once; the OS must also save the registers (XGETBV) for AVX/AVX-512 to count.
 * MODATTN_CPU_DISABLE (comma list, e.g. "avx512f,avx2"; also "avx512_bf16", "avx512_vnni", "amx")
 * masks features off, so tests can force the narrower code paths on a wide machine. It steers
 * modattn's own choices (its kernels; whether bf16 / int8 are offered); oneDNN picks its GEMM
 * kernels on its own, and ONEDNN_MAX_CPU_ISA is what limits those (e.g. AVX512_CORE_BF16: no AMX). */
const modattn_cpu_features *modattn_cpu_get(void);
/* "avx512f avx2 fma ..." into buf. */
void modattn_cpu_describe(char *buf, size_t len);

/* ---------------------------------------------------------------- tracing */

typedef struct modattn_trace_span {
    const char *name;   /* the trace's copy (valid until modattn_trace_clear) */
    const char *impl;   /* the trace's copy, or NULL */
    char shape[64];
    double bytes;
    double flops;
    int thread;
    uint64_t t0_ns, t1_ns;
} modattn_trace_span;

/* Tracing is off by default; when off, modattn_trace_begin costs one relaxed atomic load. */
void modattn_trace_enable(bool on);
bool modattn_trace_enabled(void);
uint64_t modattn_now_ns(void);
/* Returns a start timestamp, or 0 when tracing is off. */
uint64_t modattn_trace_begin(void);
/* Records a span if t0 != 0. name and impl are copied (once per distinct string): a plugin's
 * name or a caller's buffer may go away after the call. */
void modattn_trace_end(uint64_t t0, const char *name, const char *impl, const char *shape,
                       double bytes, double flops);
/* Records a span with explicit times (CLOCK_MONOTONIC ns, as modattn_now_ns) on a track: a
 * thread id, or MODATTN_TRACE_DEVICE_TRACK(kind, index) for a device's queue (device ops timed
 * by the device's own profiling events). Nothing when tracing is off. */
#define MODATTN_TRACE_DEVICE_TRACK(kind, index) (1000000000 + (int)(kind) * 1000 + (int)(index))
void modattn_trace_record(const char *name, const char *impl, const char *shape, double bytes, double flops,
                          int track, uint64_t t0_ns, uint64_t t1_ns);
/* Number of spans recorded; copy out with modattn_trace_get(i, &span). */
size_t modattn_trace_count(void);
int modattn_trace_get(size_t i, modattn_trace_span *out);
void modattn_trace_clear(void);
/* Write Chrome trace-event JSON (Perfetto, chrome://tracing). */
int modattn_trace_write_json(const char *path);

#ifdef __cplusplus
}
#endif
#endif
