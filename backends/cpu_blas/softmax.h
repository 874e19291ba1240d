/* backends/cpu_blas/softmax.h — the row softmax between cpu_blas's two GEMMs. */
#ifndef MODATTN_CPU_BLAS_SOFTMAX_H
#define MODATTN_CPU_BLAS_SOFTMAX_H
#include <stdint.h>

/* In place over s[0 .. n): keys [0, lim) are candidates, [lim, n) invisible. Adds the mask row
 * (mask[j * mask_stride], -inf hides the key) when mask is not NULL, then writes the normalised
 * probabilities (0 for hidden keys) and returns the log-sum-exp of the visible scores, or -inf
 * (and an all-zero row) when no key is visible. */
float modattn__cpu_blas_softmax_row(float *s, int64_t n, int64_t lim, const float *mask, int64_t mask_stride);

/* e^x over an array (tests): ~1 ulp, -inf -> 0. */
void modattn__cpu_blas_exp(const float *x, float *y, int64_t n);
#endif
