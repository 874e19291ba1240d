/* backends/cpu_flash/arch/scalar.c — cpu_flash kernel in portable C (fast version's fallback).
 * Same algorithm and tiling as the SIMD files with a "vector" of one float: 8 query lanes, blocks
 * of 4 keys / 4 value columns, key tile 64. The SIMD files do the same arithmetic per output
 * element in the same order (AVX-512 and AVX2 give the same bits); this one rounds a*b+c twice
 * where they use one FMA (a software fmaf would cost more than the whole kernel), so its results
 * differ from theirs in the last bits. Runs anywhere; the conformance suite forces it with
 * MODATTN_CPU_DISABLE=avx,neon. */
#include "backends/cpu_flash/flash.h"
#include "core/exp_poly.h"

#include <stdint.h>
#include <string.h>

typedef float vf;
#define VL 1
#define NV 8
#define RQK 4
#define DB 8
#define EPV 4
#define BKT 64
#define FLASH_NAME(x) flash_scalar_##x

static inline vf vf_load(const float *p) { return *p; }
static inline void vf_store(float *p, vf v) { *p = v; }
static inline vf vf_bcast(const float *p) { return *p; }
static inline vf vf_set1(float x) { return x; }
static inline vf vf_zero(void) { return 0.0f; }
static inline vf vf_fma(vf a, vf b, vf c) { return a * b + c; }
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_max(vf a, vf b) { return a > b ? a : b; }
static inline vf vf_mask_gt(vf s, int32_t j, const int32_t *lim) { return j > *lim ? -__builtin_inff() : s; }

/* the shared polynomial's variant with n rounded ties-away, NaN kept (core/exp_poly.h:
 * why it is not cpu_blas's rounding) */
static inline vf vf_exp(vf x) { return modattn__exp_fast_away(x); }

static inline vf vf_exp2(vf x) {
    if (!(x >= -151.0f)) x = x != x ? x : -151.0f;
    if (x > 129.0f) x = 129.0f;
    if (x != x) return x;
    float n = modattn__exp_round_away(x);
    float f = x - n;
    float p = 0x1.444p-13f;
    p = p * f + 0x1.5f48c0p-10f;
    p = p * f + 0x1.3b2a1cp-7f;
    p = p * f + 0x1.c6aeccp-5f;
    p = p * f + 0x1.ebfbe0p-3f;
    p = p * f + 0x1.62e430p-1f;
    p = p * f + 1.0f;
    return modattn__exp_scale2(p, (int32_t)n);
}

#include "backends/cpu_flash/flash_kernel.inc.h"

static const flash_isa isa = {
    /* .name = */ "scalar",
    /* .lanes = */ VL * NV,
    /* .bk = */ BKT,
    /* .tile = */ flash_scalar_tile,
    /* .exp = */ flash_scalar_exp_array,
    /* .exp2 = */ flash_scalar_exp2_array,
    /* .tile_split = */ flash_scalar_tile_split,
    /* .narrow = */ NULL,
    /* .slices = */ 1,
};

const flash_isa *modattn__flash_isa_scalar(void) { return &isa; }
