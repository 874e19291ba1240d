/* backends/cpu_blas/softmax.c — row softmax for cpu_blas (fast version).
 *
 * Written as plain loops the compiler vectorises (this file is built with -O3), each loop with
 * 16 independent partial results so that max and sum vectorise without reassociating anything:
 * the results are the same bits whatever the vector width. On x86 the function is cloned for
 * AVX-512 / AVX2 / baseline and picked at load time (GCC/Clang target_clones).
 * exp: the shared polynomial's branch-free variant, n rounded ties-to-even
 * (core/exp_poly.h: why it is not the flash kernel's rounding). */
#include "backends/cpu_blas/softmax.h"
#include "core/exp_poly.h"

#include <math.h>
#include <string.h>

/* (not with clang: clang 14 names the resolver "f.ifunc" and leaves f itself undefined; with GCC
 * also under ASan+UBSan, so that the clone this CPU runs is the one the sanitizers see:
 * tests/backends/test_softmax_clones.c and the test softmax_clones_built) */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define SOFTMAX_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SOFTMAX_CLONES
#endif

#define LANES 16

/* x <= 89 expected; x < -104 (and -inf) gives 0. No branches: vectorisable. */
static inline float exp_poly(float x) { return modattn__exp_fast_even(x); }

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
