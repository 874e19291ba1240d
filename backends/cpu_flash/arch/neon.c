/* backends/cpu_flash/arch/neon.c — cpu_flash kernel for AArch64 Advanced SIMD (fast version).
 * Query tile 16 rows (4 q registers of lanes), key tile 64. S^T blocks of 3 keys: 12 running sums +
 * 12 block partial sums + 4 loads + 1 broadcast of the 32 vector registers; O^T blocks of 6 value
 * columns: 24 accumulators. Compiled into the library on AArch64 only; on x86 machines
 * tests/backends/test_flash_neon_cross.c cross-compiles it (aarch64-linux-gnu-gcc) and runs it under
 * qemu-aarch64 against a double-precision computation. */
#include "backends/cpu_flash/flash.h"

#if defined(__aarch64__)
#include <arm_neon.h>

typedef float32x4_t vf;
#define VL 4
#define NV 4
#define RQK 3
#define DB 8
#define EPV 6
#define BKT 64
#define FLASH_NAME(x) flash_neon_##x

static inline vf vf_load(const float *p) { return vld1q_f32(p); }
static inline void vf_store(float *p, vf v) { vst1q_f32(p, v); }
static inline vf vf_bcast(const float *p) { return vld1q_dup_f32(p); }
static inline vf vf_set1(float x) { return vdupq_n_f32(x); }
static inline vf vf_zero(void) { return vdupq_n_f32(0.0f); }
static inline vf vf_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
static inline vf vf_add(vf a, vf b) { return vaddq_f32(a, b); }
static inline vf vf_sub(vf a, vf b) { return vsubq_f32(a, b); }
static inline vf vf_mul(vf a, vf b) { return vmulq_f32(a, b); }
static inline vf vf_max(vf a, vf b) { return vmaxq_f32(a, b); }
static inline vf vf_mask_gt(vf s, int32_t j, const int32_t *lim) {
    uint32x4_t gt = vcgtq_s32(vdupq_n_s32(j), vld1q_s32(lim));
    return vbslq_f32(gt, vdupq_n_f32(-__builtin_inff()), s);
}

static inline vf poly_exp2(vf f) {
    vf p = vdupq_n_f32(0x1.444p-13f);
    p = vfmaq_f32(vdupq_n_f32(0x1.5f48c0p-10f), p, f);
    p = vfmaq_f32(vdupq_n_f32(0x1.3b2a1cp-7f), p, f);
    p = vfmaq_f32(vdupq_n_f32(0x1.c6aeccp-5f), p, f);
    p = vfmaq_f32(vdupq_n_f32(0x1.ebfbe0p-3f), p, f);
    p = vfmaq_f32(vdupq_n_f32(0x1.62e430p-1f), p, f);
    return vfmaq_f32(vdupq_n_f32(1.0f), p, f);
}

static inline vf poly_exp(vf r) {
    vf p = vdupq_n_f32(0x1.6d7532p-10f);
    p = vfmaq_f32(vdupq_n_f32(0x1.126fa6p-7f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0x1.5554acp-5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0x1.555404p-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    return vfmaq_f32(vdupq_n_f32(1.0f), p, r);
}

/* p * 2^n for integral n in [-151, 129] in two exact steps (see arch/avx2.c). */
static inline vf scale2(vf p, vf n) {
    int32x4_t ni = vcvtq_s32_f32(n);
    int32x4_t n1 = vshrq_n_s32(ni, 1);
    int32x4_t n2 = vsubq_s32(ni, n1);
    int32x4_t bias = vdupq_n_s32(127);
    vf s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    vf s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

static inline vf vf_exp(vf x) {
    x = vmaxq_f32(x, vdupq_n_f32(-104.0f));
    x = vminq_f32(x, vdupq_n_f32(89.0f));
    vf n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(0x1.715476p+0f)));
    vf r = vfmsq_f32(x, n, vdupq_n_f32(0x1.62e4p-1f));
    r = vfmsq_f32(r, n, vdupq_n_f32(0x1.7f7d1cp-20f));
    return scale2(poly_exp(r), n);
}

static inline vf vf_exp2(vf x) {
    x = vmaxq_f32(x, vdupq_n_f32(-151.0f));
    x = vminq_f32(x, vdupq_n_f32(129.0f));
    vf n = vrndnq_f32(x);
    return scale2(poly_exp2(vsubq_f32(x, n)), n);
}

#include "backends/cpu_flash/flash_kernel.inc.h"

static const flash_isa isa = {
    /* .name = */ "neon",
    /* .lanes = */ VL * NV,
    /* .bk = */ BKT,
    /* .tile = */ flash_neon_tile,
    /* .exp = */ flash_neon_exp_array,
    /* .exp2 = */ flash_neon_exp2_array,
    /* .tile_split = */ flash_neon_tile_split,
    /* .narrow = */ NULL,
    /* .slices = */ 1,
};

const flash_isa *modattn__flash_isa_neon(void) { return &isa; }
#endif
