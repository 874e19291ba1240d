/* modattn/core.h — memory accounting, thread pool, CPU features and tracing.
 *
 * Everything the library allocates goes through modattn__malloc() and friends, so that bytes in
 * use and peak bytes are known per category, a budget can be enforced, and tests can make the
 * Nth allocation fail. jansson's allocations (the JSON files the library reads) join them when
 * the application asks: modattn__json_count_allocations(). */
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
 * MODATTN_EBUDGET, available from modattn__mem_last_status()).
 * Ownership: the caller frees the block with modattn_free(). */
#define MODATTN_ALIGN 64
void modattn_free(void *ptr); /* NULL is fine */


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
/* Limit total bytes in use (allocated + accounted); 0 removes the limit. */
void modattn_mem_set_budget(int64_t bytes);


/* ---------------------------------------------------------------- jansson */

/* modattn reads its JSON files (config.json, tokenizer.json, the safetensors header) with
 * jansson. By default jansson allocates with malloc(), out of sight of the accounting above. */
struct json_t;
struct json_error_t;



/* ---------------------------------------------------------------- threads */

typedef struct modattn_pool modattn_pool;

/* fn(ctx, i, thread) is called once for every i in [0, n); thread is in [0, nthreads). */
typedef void (*modattn_task_fn)(void *ctx, int64_t i, int thread);


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


/* ---------------------------------------------------------------- tracing */

typedef struct modattn_trace_span {
    const char *name;   /* the trace's copy (valid until modattn__trace_clear) */
    const char *impl;   /* the trace's copy, or NULL */
    char shape[64];
    double bytes;
    double flops;
    int thread;
    uint64_t t0_ns, t1_ns;
} modattn_trace_span;

/* Records a span with explicit times (CLOCK_MONOTONIC ns, as modattn__now_ns) on a track: a
 * thread id, or MODATTN_TRACE_DEVICE_TRACK(kind, index) for a device's queue (device ops timed
 * by the device's own profiling events). Nothing when tracing is off. */
#define MODATTN_TRACE_DEVICE_TRACK(kind, index) (1000000000 + (int)(kind) * 1000 + (int)(index))

#ifdef __cplusplus
}
#endif
#endif
