/* backends/cpu_flash/arch/avx512.c — cpu_flash kernel for AVX-512F (fast version).
 * Query tile 32 rows (2 zmm of lanes), key tile 96. S^T blocks of 6 keys x 32 lanes: 12 running sums
 * + 12 block partial sums (blocked summation, see flash_kernel.inc.h) + 2 loads + 1 broadcast of
 * the 32 zmm registers; O^T blocks of 12 value columns x 32 lanes: 24 accumulators.
 * Tile sizes measured on Zen 4 (D = 64, 128; per CPU-second, noisy): 6x2 / 12x2 blocks and key
 * tiles of 96 were within noise of 192 / 48 and of 4-key or 8-column blocks; 64 lanes (4 zmm,
 * 3-key blocks) was ~8% slower, 16 lanes (12-key blocks) ~35% slower.
 * Decode (few query rows per kv head): a 16-lane kernel, and sliced ones that give each of 8,
 * 4, 2 or 1 rows 2, 4, 8 or 16 lanes (see below and flash_kernel.inc.h).
 * Compiled with -mavx512f -mfma (CMake sets it on this file only); only called after
 * modattn__cpu_get() reported avx512f. */
#include "backends/cpu_flash/flash.h"
#include "core/internal_core.h"

#include <immintrin.h>

typedef __m512 vf;
#define VL 16
#ifndef FLASH_TUNE /* tile sizes; bench builds may override them */
#define NV 2
#define RQK 6
#define DB 8
#define EPV 12
#define BKT 96
#endif
#define FLASH_NAME(x) flash_avx512_##x

static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf vf_bcast(const float *p) { return _mm512_set1_ps(*p); }
static inline vf vf_set1(float x) { return _mm512_set1_ps(x); }
static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vf_mask_gt(vf s, int32_t j, const int32_t *lim) {
    __mmask16 k = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(j), _mm512_loadu_si512((const void *)lim));
    return _mm512_mask_mov_ps(s, k, _mm512_set1_ps(-__builtin_inff()));
}

/* 16 x 16 transpose in registers: 4 rounds of shuffles (ps pairs, pd pairs, then 128-bit
 * blocks twice). Packs Q^T and unpacks O^T. */
#define VF_HAS_TRANSPOSE 1
static inline __attribute__((always_inline)) void vf_transpose(vf r[16]) {
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) { /* r[i + c]: column 4L + c of rows i..i+3 in 128-bit lane L */
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
#pragma GCC unroll 16
    for (int c = 0; c < 4; c++) { /* 4 x 4 transpose of the 128-bit lanes across the row groups */
        __m512 b0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), b1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        __m512 b2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), b3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_f32x4(b0, b2, 0x88);
        t[8 + c] = _mm512_shuffle_f32x4(b0, b2, 0xdd);
        t[4 + c] = _mm512_shuffle_f32x4(b1, b3, 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(b1, b3, 0xdd);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* 2^f on [-0.5, 0.5]: degree-6 Chebyshev fit (abs. error 2e-9), Horner in fp32. */
static inline vf poly_exp2(vf f) {
    vf p = _mm512_set1_ps(0x1.444p-13f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.5f48c0p-10f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.3b2a1cp-7f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.c6aeccp-5f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.ebfbe0p-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0x1.62e430p-1f));
    return _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
}

/* e^r on [-ln2/2, ln2/2]: degree-6 Chebyshev fit (abs. error 2e-9). */
static inline vf poly_exp(vf r) {
    vf p = _mm512_set1_ps(0x1.6d7532p-10f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.126fa6p-7f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.5554acp-5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.555404p-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

/* e^x = 2^n e^r, n = round(x log2 e), r = x - n ln2 (Cody-Waite, ln2 split so n * hi is exact).
 * Clamped to [-104, 89]: below, the result rounds to 0 (so -inf -> 0); above, to +inf.
 * vscalefps applies 2^n with correct overflow/underflow (denormals included). */
static inline vf vf_exp(vf x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
    vf n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p+0f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), r);
    return _mm512_scalef_ps(poly_exp(r), n);
}

static inline vf vf_exp2(vf x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-151.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(129.0f));
    vf n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_scalef_ps(poly_exp2(_mm512_sub_ps(x, n)), n);
}

#include "backends/cpu_flash/flash_kernel.inc.h"

/* The 16-lane kernel (1 zmm of lanes) for decode: a kv head's <= 16 query rows (G * Sq) fill
 * it, where the 32-lane tile would compute 16 or more empty lanes for every key; decode (Sq = 1)
 * with fewer rows goes to the sliced kernels below when their slice count divides D and Dv. S^T blocks of 12 keys (12 running sums + 12 partial sums + the
 * query vector + 1 broadcast), O^T blocks of 24 value columns, key tiles of 128. */
enum { WIDE_BK = BKT, WIDE_LANES = VL * NV };
#undef NV
#undef RQK
#undef DB
#undef EPV
#undef BKT
#undef FLASH_NAME
#define NV 1
#define RQK 12
#define DB 8
#define EPV 24
#define BKT 128
#define FLASH_NAME(x) flash_avx512n_##x
#include "backends/cpu_flash/flash_kernel.inc.h"

/* Sliced kernels (flash_kernel.inc.h, TS > 1) for 8, 4, 2 and 1 query rows: lane row * TS + t
 * sums over d = d' * TS + t, so every lane works. K and V are read TS floats at a time
 * (vbroadcastsd / vbroadcastf32x4 / vbroadcastf64x4 / a plain load: each one load uop), and the
 * TS lanes of a row are added by a butterfly of in-lane and 128-bit-block permutes.
 * S^T blocks of 8 keys: with 12, GCC 12 spills the query vector of the TS = 2 kernel (the
 * broadcasts need a register, unlike vbroadcastss folded into the FMA) and every FMA reloads it;
 * 8 and 12 time the same for TS >= 4. O^T blocks of 24 columns, key tiles of 128 (64 and 32:
 * within noise). Measured on a Xeon with AMX (1 thread, Sk = 512, D = 128, 8 rows): 35 ns a
 * key, against 49 for the 16-lane kernel with half its lanes empty. */
static inline vf vf_bcast2(const float *p) { /* p is only 4-byte aligned: memcpy, not a double load */
    double x;
    memcpy(&x, p, sizeof x);
    return _mm512_castpd_ps(_mm512_set1_pd(x));
}
static inline vf vf_bcast4(const float *p) { return _mm512_broadcast_f32x4(_mm_loadu_ps(p)); }
static inline vf vf_bcast8(const float *p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)(const void *)p)));
}
static inline vf vf_bcast16(const float *p) { return _mm512_loadu_ps(p); }
static inline vf vf_gsum2(vf v) { return _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1)); }
static inline vf vf_gsum4(vf v) {
    v = vf_gsum2(v);
    return _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
}
static inline vf vf_gsum8(vf v) {
    v = vf_gsum4(v);
    return _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
}
static inline vf vf_gsum16(vf v) {
    v = vf_gsum8(v);
    return _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
}

#undef RQK
#define RQK 8
#undef FLASH_NAME
#define TS 2
#define vf_bcast_t vf_bcast2
#define vf_group_sum vf_gsum2
#define FLASH_NAME(x) flash_avx512s2_##x
#include "backends/cpu_flash/flash_sliced.inc.h"
#define TS 4
#define vf_bcast_t vf_bcast4
#define vf_group_sum vf_gsum4
#define FLASH_NAME(x) flash_avx512s4_##x
#include "backends/cpu_flash/flash_sliced.inc.h"
#define TS 8
#define vf_bcast_t vf_bcast8
#define vf_group_sum vf_gsum8
#define FLASH_NAME(x) flash_avx512s8_##x
#include "backends/cpu_flash/flash_sliced.inc.h"
#define TS 16
#define vf_bcast_t vf_bcast16
#define vf_group_sum vf_gsum16
#define FLASH_NAME(x) flash_avx512s16_##x
#include "backends/cpu_flash/flash_sliced.inc.h"

FLASH_SLICED_ISA(sliced16, "avx512", flash_avx512s16, 16, NULL);
FLASH_SLICED_ISA(sliced8, "avx512", flash_avx512s8, 8, &sliced16);
FLASH_SLICED_ISA(sliced4, "avx512", flash_avx512s4, 4, &sliced8);
FLASH_SLICED_ISA(sliced2, "avx512", flash_avx512s2, 2, &sliced4);

static const flash_isa narrow = {
    /* .name = */ "avx512",
    /* .lanes = */ VL * NV,
    /* .bk = */ BKT,
    /* .tile = */ flash_avx512n_tile,
    /* .exp = */ flash_avx512n_exp_array,
    /* .exp2 = */ flash_avx512n_exp2_array,
    /* .tile_split = */ flash_avx512n_tile_split,
    /* .narrow = */ &sliced2,
    /* .slices = */ 1,
};

static const flash_isa isa = {
    /* .name = */ "avx512",
    /* .lanes = */ WIDE_LANES,
    /* .bk = */ WIDE_BK,
    /* .tile = */ flash_avx512_tile,
    /* .exp = */ flash_avx512_exp_array,
    /* .exp2 = */ flash_avx512_exp2_array,
    /* .tile_split = */ flash_avx512_tile_split,
    /* .narrow = */ &narrow,
    /* .slices = */ 1,
};

#ifdef MODATTN_KERNEL_UNCHECKED
const flash_isa *modattn__flash_isa_avx512_unchecked(void) { return &isa; }
#else
/* (sanitizer builds: the uninstrumented twin, avx512_unchecked.c, when MODATTN_ASAN_KERNELS=entry) */
const flash_isa *modattn__flash_isa_avx512(void) {
#ifdef MODATTN_KERNEL_TWINS
    if (modattn__kernel_twins_on()) return modattn__flash_isa_avx512_unchecked();
#endif
    return &isa;
}
#endif
