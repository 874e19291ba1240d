/* backends/cpu_blas/softmax.c — row softmax for cpu_blas (fast version).
 *
 * Written as plain loops the compiler vectorises (this file is built with -O3), each loop with
 * 16 independent partial results so that max and sum vectorise without reassociating anything:
 * the results are the same bits whatever the vector width. On x86 the function is cloned for
 * AVX-512 / AVX2 / baseline and picked at load time (GCC/Clang target_clones).
 * exp: e^x = 2^n e^r, n = round(x log2 e), r = x - n ln2 (two-constant Cody-Waite), e^r by a
 * degree-6 fit on [-ln2/2, ln2/2] (abs. error 2e-9), 2^n applied in two exact steps: ~1 ulp. */
#include "backends/cpu_blas/softmax.h"

#include <math.h>
#include <string.h>

/* (not with clang: clang 14 names the resolver "f.ifunc" and leaves f itself undefined; with GCC
 * also under ASan+UBSan, so that the clone this CPU runs is the one the sanitizers see:
 * tests/kernels/test_softmax_clones.c and the test softmax_clones_built) */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define SOFTMAX_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SOFTMAX_CLONES
#endif

#define LANES 16

static inline float pow2i(int32_t n) { /* 2^n for n in [-126, 127] */
    union {
        uint32_t u;
        float f;
    } b;
    b.u = (uint32_t)(n + 127) << 23;
    return b.f;
}

/* x <= 89 expected; x < -104 (and -inf) gives 0. No branches: vectorisable. */
static inline float exp_poly(float x) {
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    const float magic = 0x1.8p+23f; /* adding it rounds to an integer (|x log2 e| < 2^22) */
    float t = x * 0x1.715476p+0f + magic;
    float n = t - magic;
    float r = x - n * 0x1.62e4p-1f;
    r = r - n * 0x1.7f7d1cp-20f;
    float p = 0x1.6d7532p-10f;
    p = p * r + 0x1.126fa6p-7f;
    p = p * r + 0x1.5554acp-5f;
    p = p * r + 0x1.555404p-3f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ni = (int32_t)n, n1 = ni >> 1; /* arithmetic shift: floor(ni / 2) */
    return p * pow2i(n1) * pow2i(ni - n1);
}

SOFTMAX_CLONES
float modattn__cpu_blas_softmax_row(float *s, int64_t n, int64_t lim, const float *mask, int64_t mask_stride) {
    if (lim > n) lim = n;
    if (lim < 0) lim = 0;
    if (mask) {
        if (mask_stride == 1) {
            for (int64_t j = 0; j < lim; j++) s[j] = mask[j] == -INFINITY ? -INFINITY : s[j] + mask[j];
        } else {
            for (int64_t j = 0; j < lim; j++) {
                float mj = mask[j * mask_stride];
                s[j] = mj == -INFINITY ? -INFINITY : s[j] + mj;
            }
        }
    }
    float part[LANES];
    for (int k = 0; k < LANES; k++) part[k] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= lim; j += LANES)
        for (int k = 0; k < LANES; k++) part[k] = s[j + k] > part[k] ? s[j + k] : part[k];
    for (int k = 0; j + k < lim; k++) part[k] = s[j + k] > part[k] ? s[j + k] : part[k];
    float mx = -INFINITY;
    for (int k = 0; k < LANES; k++) mx = part[k] > mx ? part[k] : mx;
    if (mx == -INFINITY) {
        memset(s, 0, sizeof(float) * (size_t)n);
        return -INFINITY;
    }
    for (int k = 0; k < LANES; k++) part[k] = 0.0f;
    for (j = 0; j + LANES <= lim; j += LANES)
        for (int k = 0; k < LANES; k++) {
            float p = exp_poly(s[j + k] - mx);
            s[j + k] = p;
            part[k] += p;
        }
    for (int k = 0; j + k < lim; k++) {
        float p = exp_poly(s[j + k] - mx);
        s[j + k] = p;
        part[k] += p;
    }
    /* pairwise over the 16 partial sums */
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) part[k] += part[k + w];
    float sum = part[0];
    float inv = 1.0f / sum;
    for (j = 0; j < lim; j++) s[j] *= inv;
    for (; j < n; j++) s[j] = 0.0f;
    return (float)((double)mx + log((double)sum));
}

SOFTMAX_CLONES
void modattn__cpu_blas_exp(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = exp_poly(x[i]);
}
