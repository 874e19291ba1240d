/* core/internal_core.h — the library's own functions of modattn/core.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_CORE_INTERNAL_CORE_H
#define MODATTN_CORE_INTERNAL_CORE_H

#include "modattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Validates every MODATTN_* variable that is set against its kind and range (the README's table
 * of them): 0, or MODATTN_EINVAL with a message naming the variable and what it takes. The CLI
 * calls it before any work (a usage error, exit 2); modattn_ctx_create() calls it too. */
int modattn__env_check(void);

void *modattn__malloc(size_t bytes, modattn_mem_category cat);

void *modattn__calloc(size_t count, size_t size, modattn_mem_category cat); /* checked count*size */

void *modattn__realloc(void *ptr, size_t bytes, modattn_mem_category cat); /* ptr may be NULL */

char *modattn__strdup(const char *s, modattn_mem_category cat);

char *modattn__strndup(const char *s, size_t n, modattn_mem_category cat);

/* Bytes requested for a live block (0 for NULL). */
size_t modattn__mem_block_size(const void *ptr);

/* Status of the last failed allocation on this thread (MODATTN_ENOMEM or MODATTN_EBUDGET). */
int modattn__mem_last_status(void);

/* Account for memory the library holds but did not allocate (e.g. mapped weight files).
 * `delta` may be negative. Counts against the budget when positive; returns MODATTN_EBUDGET
 * (and accounts nothing) when it would exceed it. */
int modattn__mem_account(modattn_mem_category cat, int64_t delta);

/* Reset the peaks to the current values. */
void modattn__mem_reset_peak(void);

/* Parse "123", "64K", "512M", "2G" (powers of 1024). Returns MODATTN_EINVAL with a message. */
int modattn__parse_bytes(const char *text, int64_t *out);

/* Fault injection for tests: make the Nth allocation from now fail (1 = the next one);
 * 0 disables. Returns how many allocations have been attempted since it was armed. */
void modattn__mem_fail_nth(uint64_t n);

uint64_t modattn__mem_fail_counter(void);

/* Route every allocation jansson makes (parsing, json_dumps(), objects built with json_pack()
 * and the like, by modattn or by the application) through modattn's accounting, in category
 * MODATTN_MEM_OTHER: counted in modattn_mem_get_stats() (the bytes jansson asked for), checked
 * against modattn_mem_set_budget() and modattn__mem_fail_nth().
 *
 * Opt-in: the library never calls it, because it calls json_set_alloc_funcs(), which is
 * process-global. The `modattn` command calls it first thing. Rules once it is on:
 *   - Call it once at start-up: before other threads use jansson, and while no memory jansson
 *     allocated is live (simplest: before the first jansson object or string exists). Freeing a
 *     block jansson allocated before the switch aborts with a message.
 *   - Memory jansson hands the caller to free (the string from json_dumps()) must be released
 *     with modattn__json_free(), never free().
 *   - A refused allocation (over the budget, or an injected failure) is not refused to jansson:
 *     jansson 2.14 does not survive a NULL from its allocator (its parser and its json_dumps()
 *     drop bytes and return wrong JSON as success; the parser can also write past a heap buffer
 *     or fail an assert). The block is served and counted (the budget is exceeded), the failure
 *     is counted in the statistics and recorded for the thread:
 *       . modattn__json_load_file() / modattn__json_loadb() stop the parse at the end of the 1 KiB
 *         block of input being read and fail with the allocator's error; parse with them, not
 *         json_load*(), which would read on to the end. The budget is exceeded by the refused
 *         allocation (which can be large: a big object's hash table, a long string) and what
 *         jansson allocates for the rest of that block;
 *       . after building or dumping JSON, call modattn__json_take_failure() and discard the result
 *         if it reports a failure.
 *     Only a failure of the system's malloc itself reaches jansson as NULL.
 * Returns 0 (also when already on), or MODATTN_EINVAL, changing nothing, when other code has
 * already given jansson its own allocation functions. Not thread-safe. */
int modattn__json_count_allocations(void);

/* Whether jansson's allocations are routed through modattn's accounting. */
bool modattn__json_allocations_counted(void);

/* The first jansson allocation refused on this thread since the last call (over the budget:
 * MODATTN_EBUDGET, injected or real failure: MODATTN_ENOMEM), with the allocator's message
 * recorded again for modattn_last_error(); 0 if none. Clears it. */
int modattn__json_take_failure(void);

/* Free memory that jansson allocated for the caller (json_dumps()) with the free function
 * jansson uses now (json_get_alloc_funcs()): right whether or not allocations are routed.
 * NULL is fine. */
void modattn__json_free(void *ptr);

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
int modattn__json_load_file(const char *path, size_t flags, struct json_t **out,
                           struct json_error_t *err);

int modattn__json_loadb(const char *buf, size_t len, size_t flags, struct json_t **out,
                       struct json_error_t *err);

/* nthreads <= 0 means "one per online CPU". Ownership: free with modattn__pool_free(). Between
 * jobs the workers spin for MODATTN_POOL_SPIN_US microseconds (read at creation; default 200, 0:
 * none) before they sleep, so back-to-back jobs do not wait for a wake-up. */
int modattn__pool_create(int nthreads, modattn_pool **out);

void modattn__pool_free(modattn_pool *pool);

int modattn__pool_threads(const modattn_pool *pool);

/* Runs fn over [0, n) on the pool (the calling thread takes part) and returns when all are done.
 * Items are handed out dynamically; an item's result must not depend on which thread ran it.
 * Threads calling one pool at once take turns (one job at a time: give concurrent workers a pool
 * each, modattn_session); a call from inside one of the pool's own tasks runs serially on the
 * calling thread (thread 0). A NULL pool runs serially. */
void modattn__pool_run(modattn_pool *pool, int64_t n, modattn_task_fn fn, void *ctx);

/* Detected once; the OS must also save the registers (XGETBV) for AVX/AVX-512 to count.
 * MODATTN_CPU_DISABLE (comma list, e.g. "avx512f,avx2"; also "avx512_bf16", "avx512_vnni", "amx")
 * masks features off, so tests can force the narrower code paths on a wide machine. It steers
 * modattn's own choices (its kernels; whether bf16 / int8 are offered); oneDNN picks its GEMM
 * kernels on its own, and ONEDNN_MAX_CPU_ISA is what limits those (e.g. AVX512_CORE_BF16: no AMX). */
const modattn_cpu_features *modattn__cpu_get(void);

/* "avx512f avx2 fma ..." into buf. */
void modattn__cpu_describe(char *buf, size_t len);

/* Tracing is off by default; when off, modattn__trace_begin costs one relaxed atomic load. */
void modattn__trace_enable(bool on);

bool modattn__trace_enabled(void);

uint64_t modattn__now_ns(void);

/* Returns a start timestamp, or 0 when tracing is off. */
uint64_t modattn__trace_begin(void);

/* Records a span if t0 != 0. name and impl are copied (once per distinct string): a plugin's
 * name or a caller's buffer may go away after the call. */
void modattn__trace_end(uint64_t t0, const char *name, const char *impl, const char *shape,
                       double bytes, double flops);

void modattn__trace_record(const char *name, const char *impl, const char *shape, double bytes, double flops,
                          int track, uint64_t t0_ns, uint64_t t1_ns);

/* Number of spans recorded; copy out with modattn__trace_get(i, &span). */
size_t modattn__trace_count(void);

int modattn__trace_get(size_t i, modattn_trace_span *out);

void modattn__trace_clear(void);

/* Write Chrome trace-event JSON (Perfetto, chrome://tracing). */
int modattn__trace_write_json(const char *path);

/* ---- kernel twins (sanitizer builds; core/kernel_twins.c)
 * Under MODATTN_SANITIZE (which defines MODATTN_KERNEL_TWINS) the hottest kernels, our AVX2 GEMM
 * (backends/cpu/cpu_sgemm.c), the row kernels and few-row GEMM (cpu_rowops.c), cpu_flash's AVX2 and
 * AVX-512 tiles, and the load's scan of the weights for NaNs, are compiled twice: like every other
 * file, each load and store checked by ASan and each operation by UBSan, and again without either
 * (the *_unchecked.c twins). With MODATTN_ASAN_KERNELS=entry a call runs the twin after
 * modattn__asan_check_region has checked, at the call's entry, every byte range the call reads or
 * writes: an operand shorter than its shape says is reported by ASan there, with the call's stack.
 * What entry mode does not see is a kernel stepping outside the ranges it was given, or UBSan's
 * findings inside it; the kernels' own tests run with full instrumentation (the default) for that.
 * Instrumented, the kernels ran 5-8x slower than plain (UBSan's checks alone kept the row kernels
 * from vectorising); the twins run at plain speed, and they were most of the sanitizer pass's time
 * in the tests that embed. Other builds have no twins: false. */
bool modattn__kernel_twins_on(void);
/* ASan reports the first byte of [p, p + bytes) that is not live memory (nothing when p is NULL
 * or bytes 0), after a line naming `what` on stderr; a no-op in builds without ASan. */
void modattn__asan_check_region(const void *p, size_t bytes, bool write, const char *what);

#ifdef __cplusplus
}
#endif
#endif
