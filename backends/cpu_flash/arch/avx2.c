/* backends/cpu_flash/arch/avx2.c — cpu_flash kernel for AVX2 + FMA (fast version).
 * Query tile 16 rows (2 ymm of lanes), key tile 96. S^T blocks of 3 keys x 16 lanes: 6 running sums
 * + 6 block partial sums + 2 loads + 1 broadcast of the 16 ymm registers; O^T blocks of 6 value
 * columns x 16 lanes: 12 accumulators.
 * Decode: an 8-lane kernel and sliced ones (several lanes per query row), see below.
 * Compiled with -mavx2 -mfma (CMake sets it on this file only); only called after modattn__cpu_get()
 * reported avx2 and fma. */
#include "backends/cpu_flash/flash.h"
#include "core/internal_core.h"

#include <immintrin.h>

typedef __m256 vf;
#define VL 8
#define NV 2
#define RQK 3
#define DB 8
#define EPV 6
#define BKT 96
#define FLASH_NAME(x) flash_avx2_##x

static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf vf_bcast(const float *p) { return _mm256_broadcast_ss(p); }
static inline vf vf_set1(float x) { return _mm256_set1_ps(x); }
static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vf_mask_gt(vf s, int32_t j, const int32_t *lim) {
    __m256i gt = _mm256_cmpgt_epi32(_mm256_set1_epi32(j), _mm256_loadu_si256((const __m256i *)lim));
    return _mm256_blendv_ps(s, _mm256_set1_ps(-__builtin_inff()), _mm256_castsi256_ps(gt));
}

/* 8 x 8 transpose in registers (packs Q^T, unpacks O^T). */
#define VF_HAS_TRANSPOSE 1
static inline __attribute__((always_inline)) void vf_transpose(vf r[8]) {
    __m256 t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4) { /* u[i + c]: column 4L + c of rows i..i+3 in 128-bit lane L */
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
#pragma GCC unroll 8
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

static inline vf poly_exp2(vf f) {
    vf p = _mm256_set1_ps(0x1.444p-13f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.5f48c0p-10f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.3b2a1cp-7f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.c6aeccp-5f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.ebfbe0p-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0x1.62e430p-1f));
    return _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
}

static inline vf poly_exp(vf r) {
    vf p = _mm256_set1_ps(0x1.6d7532p-10f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.126fa6p-7f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.5554acp-5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.555404p-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

/* p * 2^n for integral n in [-151, 129], in two exact power-of-two steps so that neither factor
 * leaves the normal range: overflow gives +inf, underflow rounds through the denormals to 0. */
static inline vf scale2(vf p, vf n) {
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi32(127);
    vf s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    vf s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static inline vf vf_exp(vf x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-104.0f));
    x = _mm256_min_ps(x, _mm256_set1_ps(89.0f));
    vf n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(0x1.715476p+0f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), r);
    return scale2(poly_exp(r), n);
}

static inline vf vf_exp2(vf x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-151.0f));
    x = _mm256_min_ps(x, _mm256_set1_ps(129.0f));
    vf n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return scale2(poly_exp2(_mm256_sub_ps(x, n)), n);
}

#include "backends/cpu_flash/flash_kernel.inc.h"

/* Few query rows per kv head (G * Sq <= 8): an 8-lane kernel (1 ymm of lanes), per lane the same
 * arithmetic as the 16-lane one (same blocks of the sum, same key tiles), and for decode (Sq = 1)
 * sliced kernels (flash_kernel.inc.h, TS > 1) that give each of 4, 2 or 1 rows 2, 4 or 8 lanes
 * when TS divides D and Dv: K and V read TS floats at a time
 * (vbroadcastsd, vbroadcastf128, a plain load), a row's lanes added by a butterfly of permutes.
 * S^T blocks of 6 keys (6 running sums + 6 partial sums + the query vector + 1 broadcast of the
 * 16 registers), O^T blocks of 12 columns. */
enum { WIDE_LANES = VL * NV };
#undef NV
#undef RQK
#undef EPV
#undef FLASH_NAME
#define NV 1
#define RQK 6
#define EPV 12
#define FLASH_NAME(x) flash_avx2n_##x
#include "backends/cpu_flash/flash_kernel.inc.h"

static inline vf vf_bcast2(const float *p) { /* p is only 4-byte aligned: memcpy, not a double load */
    double x;
    memcpy(&x, p, sizeof x);
    return _mm256_castpd_ps(_mm256_set1_pd(x));
}
static inline vf vf_bcast4(const float *p) { return _mm256_broadcast_ps((const __m128 *)(const void *)p); }
static inline vf vf_bcast8(const float *p) { return _mm256_loadu_ps(p); }
static inline vf vf_gsum2(vf v) { return _mm256_add_ps(v, _mm256_permute_ps(v, 0xB1)); }
static inline vf vf_gsum4(vf v) {
    v = vf_gsum2(v);
    return _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));
}
static inline vf vf_gsum8(vf v) {
    v = vf_gsum4(v);
    return _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 0x01));
}

#undef FLASH_NAME
#define TS 2
#define vf_bcast_t vf_bcast2
#define vf_group_sum vf_gsum2
#define FLASH_NAME(x) flash_avx2s2_##x
#include "backends/cpu_flash/flash_sliced.inc.h"
#define TS 4
#define vf_bcast_t vf_bcast4
#define vf_group_sum vf_gsum4
#define FLASH_NAME(x) flash_avx2s4_##x
#include "backends/cpu_flash/flash_sliced.inc.h"
#define TS 8
#define vf_bcast_t vf_bcast8
#define vf_group_sum vf_gsum8
#define FLASH_NAME(x) flash_avx2s8_##x
#include "backends/cpu_flash/flash_sliced.inc.h"

FLASH_SLICED_ISA(sliced8, "avx2", flash_avx2s8, 8, NULL);
FLASH_SLICED_ISA(sliced4, "avx2", flash_avx2s4, 4, &sliced8);
FLASH_SLICED_ISA(sliced2, "avx2", flash_avx2s2, 2, &sliced4);

static const flash_isa narrow = {
    /* .name = */ "avx2",
    /* .lanes = */ VL * NV,
    /* .bk = */ BKT,
    /* .tile = */ flash_avx2n_tile,
    /* .exp = */ flash_avx2n_exp_array,
    /* .exp2 = */ flash_avx2n_exp2_array,
    /* .tile_split = */ flash_avx2n_tile_split,
    /* .narrow = */ &sliced2,
    /* .slices = */ 1,
};

static const flash_isa isa = {
    /* .name = */ "avx2",
    /* .lanes = */ WIDE_LANES,
    /* .bk = */ BKT,
    /* .tile = */ flash_avx2_tile,
    /* .exp = */ flash_avx2_exp_array,
    /* .exp2 = */ flash_avx2_exp2_array,
    /* .tile_split = */ flash_avx2_tile_split,
    /* .narrow = */ &narrow,
    /* .slices = */ 1,
};

#ifdef MODATTN_KERNEL_UNCHECKED
const flash_isa *modattn__flash_isa_avx2_unchecked(void) { return &isa; }
#else
/* (sanitizer builds: the uninstrumented twin, avx2_unchecked.c, when MODATTN_ASAN_KERNELS=entry) */
const flash_isa *modattn__flash_isa_avx2(void) {
#ifdef MODATTN_KERNEL_TWINS
    if (modattn__kernel_twins_on()) return modattn__flash_isa_avx2_unchecked();
#endif
    return &isa;
}
#endif
