/* backends/cpu/cpu_internal.h — what the CPU device's files share: the GEMM wrapper and plans
 * (cpu_gemm.c), the elementwise row kernels (cpu_rowops.c) and the encoder's ops (cpu_encoder.c). Not a public header; bench/gemm_plan
 * includes it to time the two GEMM paths. */
#ifndef MODATTN_CPU_INTERNAL_H
#define MODATTN_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modattn/backend/device.h"

/* ---- the encoder's ops on host memory (cpu_encoder.c): slots of the CPU device's table */
int modattn__cpu_embed(void *ctx, const modattn_op_embed_args *a, char *reason, size_t len);
int modattn__cpu_linear(void *ctx, const modattn_op_linear_args *a, char *reason, size_t len);
int modattn__cpu_pool(void *ctx, const modattn_op_pool_args *a, char *reason, size_t len);
int modattn__cpu_linear_prepare(void *ctx, const modattn_op_linear_args *a, void **plan, bool *owns_weight, char *reason,
                                size_t len);
void modattn__cpu_linear_release(void *ctx, void *plan);
int modattn__cpu_norm(void *ctx, const modattn_op_norm_args *a, char *reason, size_t len);
int modattn__cpu_rotary(void *ctx, const modattn_op_rotary_args *a, char *reason, size_t len);
int modattn__cpu_glu(void *ctx, const modattn_op_glu_args *a, char *reason, size_t len);

/* ---- GEMM on the CPU: modattn__sgemm_nt and modattn__gemm_name are core's (core/blas.h: search
 * uses the same GEMM without going through this device). */
#include "core/blas.h"
/* ---- GEMM plans (cpu_gemm.c): the same product for a fixed weight, prepared once at model load.
 * C[MODATTN__GEMM_BLOCK, N] (= or +=) A[MODATTN__GEMM_BLOCK, K] . W[N, K]^T with the row strides
 * lda and ldc fixed at creation. The weight is copied into the BLAS's own blocked layout (counted
 * as weights memory), so no call packs it again; a call always computes exactly
 * MODATTN__GEMM_BLOCK rows, so every row goes through the same kernel with the same summation
 * order whatever its position and batch-mates. (Where oneDNN's kernel takes W's own layout, the
 * plan reads W in place instead of copying it: modattn__gemm_plan_borrows.) With a BLAS that has no such path (OpenBLAS)
 * modattn__gemm_plan_create gives *out = NULL and status 0: use modattn__sgemm_nt.
 * Runs on the calling thread only; any number of threads may run one plan at once, each with
 * its own scratch of modattn__gemm_plan_scratch() bytes (MODATTN_ALIGN-aligned). */
#define MODATTN__GEMM_BLOCK 64
typedef struct modattn__gemm_plan modattn__gemm_plan;
/* prec BF16: the weights are packed in bfloat16 (round to nearest even) and each run rounds A's
 * block the same way into the scratch before the product, which sums in fp32 (oneDNN's AMX or
 * AVX512_BF16 kernels). INT8: the weights are int8 with one scale per output channel, each run
 * quantises A's rows with one scale a row (dynamic, symmetric), the products sum exactly in int32
 * (AMX or AVX512_VNNI) and are scaled back to fp32 (added to C with accumulate). Either:
 * MODATTN_EUNSUPPORTED with the reason where it cannot run here (modattn__gemm_*_available). */
/* in_gamma, in_beta (int8 only, may be NULL): the LayerNorm that made A, folded into the weight
 * (see modattn_op_linear_args). */
int modattn__gemm_plan_create(const float *W, int64_t N, int64_t K, int64_t lda, int64_t ldc,
                              bool accumulate, modattn_precision prec, const float *in_gamma,
                              const float *in_beta, modattn__gemm_plan **out);
/* Whether bf16 (int8) plans run here: a oneDNN build and a CPU with AVX512_BF16 (AVX512_VNNI);
 * else false and why. */
bool modattn__gemm_bf16_available(char *reason, size_t len);
bool modattn__gemm_int8_available(char *reason, size_t len);
/* bf16x3 (three bf16 products for an fp32 one): AMX-BF16, where it is faster than fp32 */
bool modattn__gemm_bf16x3_available(char *reason, size_t len);
modattn_precision modattn__gemm_plan_precision(const modattn__gemm_plan *p);
size_t modattn__gemm_plan_scratch(const modattn__gemm_plan *p);
/* 0, or MODATTN_EINTERNAL with a message if the BLAS refuses (it does not for valid plans). */
int modattn__gemm_plan_run(const modattn__gemm_plan *p, const float *A, float *C, void *scratch);
/* The same for rows = MODATTN__GEMM_SMALL where the plan has a small-block kernel
 * (modattn__gemm_plan_has_small: the same kernel and packed weights, so each row comes out the
 * same bits as in a full block), else for MODATTN__GEMM_BLOCK rows. */
#define MODATTN__GEMM_SMALL 16
int modattn__gemm_plan_run_rows(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C, void *scratch);
bool modattn__gemm_plan_has_small(const modattn__gemm_plan *p);
/* Column panels: a few rows' product split by columns over threads, each thread reading only its
 * part of the packed weights (a single short input is bound by reading them). Columns come in
 * units of modattn__gemm_plan_panel_unit() (0: this plan has no panels). A panel width must be
 * made ready first (modattn__gemm_plan_panel_ready: made on first use, kept only where oneDNN runs
 * the same kernel and a probe gives the whole product's bits, so a panel's columns equal the
 * whole's, bit for bit); then modattn__gemm_plan_run_cols computes C[0..SMALL, n0..n1) for
 * MODATTN__GEMM_SMALL rows (n0 a multiple of the unit), from any thread, with its own scratch. */
int64_t modattn__gemm_plan_panel_unit(const modattn__gemm_plan *p);
/* oneDNN's name for the plan's kernel ("brg:avx512_core", ...; "" without plans). */
const char *modattn__gemm_plan_impl(const modattn__gemm_plan *p);
bool modattn__gemm_plan_panel_ready(const modattn__gemm_plan *p, int64_t width);
int modattn__gemm_plan_run_cols(const modattn__gemm_plan *p, const float *A, float *C, int64_t n0, int64_t n1,
                                void *scratch);
/* Whole row ranges: where oneDNN's kernel is its jit GEMM (AVX2 and older CPUs: "gemm:jit"),
 * which packs the weights itself on every call, the plan runs a range of rows of A (stride lda)
 * in dnnl_sgemm calls of up to 768 rows over W read in place: larger calls amortise that packing
 * (64-row blocks paid it 12 times per 768 rows). Every row comes out the bits of the plan's 16-
 * and 64-row blocks and column panels, wherever it sits (tests/device/test_gemm_rows): calls of
 * sizes that keep it so, in whole 64-row blocks (the last range below 49 rows in 16-row blocks),
 * so A and C must hold `rows` rounded up to a multiple of 64 from the first row, zero past rows
 * as the plan's blocks need. modattn__gemm_plan_big: whether the plan has this path. */
bool modattn__gemm_plan_big(const modattn__gemm_plan *p);
int modattn__gemm_plan_run_big(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C);
/* The same for columns [n0, n1) of every row: the bits of the whole product's, for n0, n1 the
 * whole (0, N) or a part that starts at a multiple of MODATTN__GEMM_BIG_COLS_UNIT and is at least
 * MODATTN__GEMM_BIG_COLS_MIN wide (the last part may end at N, whatever N is); another range is
 * an internal error. A split of the columns over threads gives each one calls of many rows. */
#define MODATTN__GEMM_BIG_COLS_UNIT 64
#define MODATTN__GEMM_BIG_COLS_MIN 128
int modattn__gemm_plan_run_big_cols(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C, int64_t n0,
                                    int64_t n1);
/* Whether the plan reads the W given to modattn__gemm_plan_create in place (its plain layout is
 * W's own: no copy is made), so that W must outlive the plan. */
bool modattn__gemm_plan_borrows(const modattn__gemm_plan *p);
void modattn__gemm_plan_free(modattn__gemm_plan *p);
/* Bytes of packed weights a plan holds. */
size_t modattn__gemm_plan_bytes(const modattn__gemm_plan *p);

/* ---- our fp32 GEMM on AVX2+FMA over weights packed once (cpu_sgemm.c): C[i, n] (= or, with
 * accumulate, +=) A[i] . W[n] for rows i < M and columns n0 <= n < n1 (n0 a multiple of
 * MODATTN__SGEMM_NR), each element's sums in the same order for any M, any row's place in the
 * call and any such column range (K slices of MODATTN__SGEMM_KC added to C in order). W [N, K]
 * dense is packed by modattn__sgemm_pack into modattn__sgemm_packed_bytes(N, K); scratch holds
 * modattn__sgemm_scratch_bytes(K) per concurrent call. */
#define MODATTN__SGEMM_NR 16
#define MODATTN__SGEMM_KC 512
bool modattn__sgemm_available(char *reason, size_t len);
size_t modattn__sgemm_packed_bytes(int64_t N, int64_t K);
size_t modattn__sgemm_scratch_bytes(int64_t K);
void modattn__sgemm_pack(const float *W, int64_t N, int64_t K, float *out);
int modattn__sgemm_run(const float *Wp, int64_t N, int64_t K, int64_t M, const float *A, int64_t lda, float *C,
                       int64_t ldc, int64_t n0, int64_t n1, bool accumulate, float *scratch);

/* ---- elementwise row kernels (cpu_rowops.c): y[0..n) op= bias[0..n) */
float modattn__erf(float x); /* |error| < 4e-7 */
void modattn__gelu_erf_bias(float *y, const float *bias, int64_t n);
void modattn__gelu_tanh_bias(float *y, const float *bias, int64_t n);
float modattn__exp(float x); /* relative error ~1e-7 on [-87, 88], clamped outside */
void modattn__silu_bias(float *y, const float *bias, int64_t n);
void modattn__silu_mul(float *x, int64_t n); /* x[k] = silu(x[k]) * x[n + k] */
void modattn__rms_norm(float *y, const float *g, int64_t n, double eps);
void modattn__relu_bias(float *y, const float *bias, int64_t n);
void modattn__bias_add(float *y, const float *bias, int64_t n);
/* C[r] (beta 0: =, else +=) A[r] . W^T, r < M, W [N, K] dense: the direct kernel of few-row
 * plans (cpu_rowops.c); row-independent, deterministic. */
void modattn__gemm_direct(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *W,
                          float beta, float *C, int64_t ldc);
/* y = LayerNorm(y + bias) * g + b (bias may be NULL) */
void modattn__bias_layer_norm(float *y, const float *bias, const float *g, const float *b,
                              int64_t n, double eps);


#endif
