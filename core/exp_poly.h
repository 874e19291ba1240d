/* core/exp_poly.h — the CPU kernels' fast exp: one polynomial, two roundings of n.
 *
 * e^x = 2^n e^r, n = x log2 e rounded to an integer, r = x - n ln2 (two-constant Cody-Waite),
 * e^r by a degree-6 fit on [-ln2/2, ln2/2] (abs. error 2e-9), 2^n applied in two exact steps
 * (2^floor(n/2) * 2^(n - floor(n/2)), so that n down to -151 gives subnormals and 0 rather than
 * garbage): ~1 ulp. The SIMD flash kernels (cpu_flash/arch/avx2.c, avx512.c, neon.c) do the same
 * arithmetic with the same constants, written in intrinsics.
 *
 * Why two variants and not one: they differ only in how x log2 e is rounded to n, and each user's
 * results are pinned bit for bit (cpu_blas's by test_golden and test_softmax_clones, the scalar
 * flash kernel's by the conformance suite run with MODATTN_CPU_DISABLE=avx,neon). Where the two
 * roundings choose different n (exact ties such as 2.5, and products just below a half, which
 * y + 0.5 rounds up), r and so the result's last bits differ: over all 2,239,889,410 floats in
 * [-104, 89], n differs for 147 and the result for 44 (x = 0x1.62e43p-2 the first), so unifying
 * would change one user's bits.
 *  - modattn__exp_fast_even: n by the 1.5*2^23 trick (ties to even). No branches, so the compiler
 *    vectorises a loop of it (cpu_blas's softmax). NaN in gives an unspecified finite value.
 *  - modattn__exp_fast_away: n = (int)(y +- 0.5) (ties away from zero), exact whatever
 *    FLT_EVAL_METHOD is; NaN stays NaN (the portable flash kernel).
 * Both clamp x to [-104, 89]: below, 0 (-inf too); above, e^89 (callers keep x <= 0 in practice). */
#ifndef MODATTN_BACKENDS_COMMON_EXP_POLY_H
#define MODATTN_BACKENDS_COMMON_EXP_POLY_H

#include <stdint.h>
#include <string.h>

#define MODATTN__EXP_LOG2E 0x1.715476p+0f
#define MODATTN__EXP_LN2_HI 0x1.62e4p-1f     /* ln 2 to 16 bits: n * it is exact */
#define MODATTN__EXP_LN2_LO 0x1.7f7d1cp-20f  /* ln 2 - MODATTN__EXP_LN2_HI */
#define MODATTN__EXP_C6 0x1.6d7532p-10f
#define MODATTN__EXP_C5 0x1.126fa6p-7f
#define MODATTN__EXP_C4 0x1.5554acp-5f
#define MODATTN__EXP_C3 0x1.555404p-3f
#define MODATTN__EXP_LO (-104.0f)
#define MODATTN__EXP_HI 89.0f

/* 2^n for n in [-126, 127]. */
static inline float modattn__exp_pow2i(int32_t n) {
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* p * 2^n for n in [-151, 129], in two exact steps (arithmetic shift: floor(n / 2)). */
static inline float modattn__exp_scale2(float p, int32_t n) {
    const int32_t n1 = n >> 1;
    return p * modattn__exp_pow2i(n1) * modattn__exp_pow2i(n - n1);
}

/* e^(x - n ln2) for the integral n chosen by a variant: the reduction and the polynomial, in the
 * one order of operations both variants have always used. */
static inline float modattn__exp_reduced(float x, float n) {
    float r = x - n * MODATTN__EXP_LN2_HI;
    r = r - n * MODATTN__EXP_LN2_LO;
    float p = MODATTN__EXP_C6;
    p = p * r + MODATTN__EXP_C5;
    p = p * r + MODATTN__EXP_C4;
    p = p * r + MODATTN__EXP_C3;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p;
}

/* n rounded ties-to-even by adding 1.5 * 2^23 (|x log2 e| < 2^22 after the clamp); branch-free. */
static inline float modattn__exp_fast_even(float x) {
    x = x < MODATTN__EXP_LO ? MODATTN__EXP_LO : x;
    x = x > MODATTN__EXP_HI ? MODATTN__EXP_HI : x;
    const float magic = 0x1.8p+23f;
    const float t = x * MODATTN__EXP_LOG2E + magic;
    const float n = t - magic;
    return modattn__exp_scale2(modattn__exp_reduced(x, n), (int32_t)n);
}

/* nearest integer (ties away from zero) for |x| < 2^30; exact whatever FLT_EVAL_METHOD is. */
static inline float modattn__exp_round_away(float x) { return (float)(int32_t)(x + (x >= 0.0f ? 0.5f : -0.5f)); }

/* n rounded ties-away; NaN stays NaN. */
static inline float modattn__exp_fast_away(float x) {
    if (!(x >= MODATTN__EXP_LO)) x = x != x ? x : MODATTN__EXP_LO; /* -inf -> -104 -> 0 */
    if (x > MODATTN__EXP_HI) x = MODATTN__EXP_HI;
    if (x != x) return x;
    const float n = modattn__exp_round_away(x * MODATTN__EXP_LOG2E);
    return modattn__exp_scale2(modattn__exp_reduced(x, n), (int32_t)n);
}

#endif
