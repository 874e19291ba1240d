/* backends/cpu_flash/arch/scalar.c — cpu_flash kernel in portable C (fast version's fallback).
 * Same algorithm and tiling as the SIMD files with a "vector" of one float: 8 query lanes, blocks
 * of 4 keys / 4 value columns, key tile 64. The SIMD files do the same arithmetic per output
 * element in the same order (AVX-512 and AVX2 give the same bits); this one rounds a*b+c twice
 * where they use one FMA (a software fmaf would cost more than the whole kernel), so its results
 * differ from theirs in the last bits. Runs anywhere; the conformance suite forces it with
 * MODATTN_CPU_DISABLE=avx,neon. */
#include "backends/cpu_flash/flash.h"

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

/* nearest integer (ties away from zero) for |x| < 2^30; exact whatever FLT_EVAL_METHOD is. */
static inline float round_nearest(float x) { return (float)(int32_t)(x + (x >= 0.0f ? 0.5f : -0.5f)); }

static inline float pow2i(int n) { /* 2^n for n in [-126, 127] */
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* p * 2^n for integral n in [-151, 129], in two exact steps (see arch/avx2.c). */
static inline float scale2(float p, float n) {
    int ni = (int)n;
    int n1 = ni >= 0 ? ni / 2 : -((-ni + 1) / 2);
    return p * pow2i(n1) * pow2i(ni - n1);
}

static inline vf vf_exp(vf x) {
    if (!(x >= -104.0f)) x = x != x ? x : -104.0f; /* -inf -> -104 -> 0; NaN stays NaN */
    if (x > 89.0f) x = 89.0f;
    if (x != x) return x;
    float n = round_nearest(x * 0x1.715476p+0f);
    float r = x - n * 0x1.62e4p-1f;
    r = r - n * 0x1.7f7d1cp-20f;
    float p = 0x1.6d7532p-10f;
    p = p * r + 0x1.126fa6p-7f;
    p = p * r + 0x1.5554acp-5f;
    p = p * r + 0x1.555404p-3f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return scale2(p, n);
}

static inline vf vf_exp2(vf x) {
    if (!(x >= -151.0f)) x = x != x ? x : -151.0f;
    if (x > 129.0f) x = 129.0f;
    if (x != x) return x;
    float n = round_nearest(x);
    float f = x - n;
    float p = 0x1.444p-13f;
    p = p * f + 0x1.5f48c0p-10f;
    p = p * f + 0x1.3b2a1cp-7f;
    p = p * f + 0x1.c6aeccp-5f;
    p = p * f + 0x1.ebfbe0p-3f;
    p = p * f + 0x1.62e430p-1f;
    p = p * f + 1.0f;
    return scale2(p, n);
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
