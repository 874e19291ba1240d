/* backends/cpu/cpu_rowops.c — the encoder's elementwise row kernels (bias, activations, LayerNorm),
 * written as plain loops over restrict pointers for the compiler to vectorise: this file is built
 * with -O3 (model/CMakeLists.txt), and on x86-64 with GCC each kernel is cloned for AVX-512 and
 * AVX2 and picked at load time (target_clones), so the generic build runs wide on wide CPUs.
 *
 * erf: a rational approximation (erf_approx.h, shared with the OpenCL device's kernels), not
 * libm's scalar erff. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/internal_core.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MODATTN_NO_CLONES)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

/* Sanitizer builds compile this file twice (core/internal_core.h: kernel twins): ROWOP(f) is the
 * kernel's own name elsewhere; there it is f_unchecked in the uninstrumented twin
 * (cpu_rowops_unchecked.c) and a static f_checked here, and f (at the end of this file) runs one or
 * the other as MODATTN_ASAN_KERNELS says, checking the twin's ranges first. */
#if defined(MODATTN_KERNEL_UNCHECKED)
#define ROWOP(f) f##_unchecked
#define ROWOP_LINK
#elif defined(MODATTN_KERNEL_TWINS)
#define ROWOP(f) f##_checked
#define ROWOP_LINK static
#else
#define ROWOP(f) f
#define ROWOP_LINK
#endif

#include "backends/cpu/erf_approx.h"


#ifndef MODATTN_KERNEL_UNCHECKED
float modattn__erf(float x) { return erf_approx(x); }
#endif

CLONES static void gelu_erf_bias_c(float *restrict y, const float *restrict bias, int64_t n) {
    for (int64_t k = 0; k < n; k++) {
        const float v = y[k] + bias[k];
        y[k] = 0.5f * v * (1.0f + erf_approx(v * 0.70710678118654752f));
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same erf on AVX-512 without the division: 1/q from VRCP14PS (relative error < 2^-14) and one
 * Newton step (< 2^-26, below float's rounding), where VDIVPS on a 512-bit vector alone took as long
 * as the rest of the polynomial (GELU was 3.3% of the fp32 encoder's time, and half of that the
 * division). q is in [1, 2.3] on [-4, 4]: no overflow or denormal. */
__attribute__((target("avx512f"))) static void gelu_erf_bias_avx512(float *restrict y, const float *restrict bias,
                                                                    int64_t n) {
    const __m512 lo = _mm512_set1_ps(-4.0f), hi = _mm512_set1_ps(4.0f), s = _mm512_set1_ps(0.70710678118654752f);
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    for (int64_t k = 0; k < n; k += 16) {
        const __mmask16 m = n - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - k)) - 1);
        const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + k), _mm512_maskz_loadu_ps(m, bias + k));
        const __m512 xc = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, s), lo), hi);
        const __m512 t = _mm512_mul_ps(xc, xc);
        __m512 p = _mm512_set1_ps(2.0272865730017893e-06f);
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.00028618799735757145f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.0038447062794925305f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.052981763019024922f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.19230819351678446f));
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.1283790461436429f));
        __m512 q = _mm512_set1_ps(3.7928556066565041e-05f);
        q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.0011810574145035813f));
        q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.015124428893259751f));
        q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.11487953582778671f));
        q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.50376059838675202f));
        q = _mm512_fmadd_ps(q, t, one);
        __m512 r = _mm512_rcp14_ps(q);
        r = _mm512_mul_ps(r, _mm512_fnmadd_ps(q, r, two)); /* r (2 - q r) */
        const __m512 erf = _mm512_mul_ps(_mm512_mul_ps(xc, p), r);
        _mm512_mask_storeu_ps(y + k, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, erf)));
    }
}
#endif

ROWOP_LINK void ROWOP(modattn__gelu_erf_bias)(float *restrict y, const float *restrict bias, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (modattn__cpu_get()->avx512f) {
        gelu_erf_bias_avx512(y, bias, n);
        return;
    }
#endif
    gelu_erf_bias_c(y, bias, n);
}

CLONES ROWOP_LINK void ROWOP(modattn__gelu_tanh_bias)(float *restrict y, const float *restrict bias, int64_t n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int64_t k = 0; k < n; k++) {
        const float v = y[k] + bias[k];
        y[k] = 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
}

/* e^x as a loop the vectoriser takes (libm's expf is a scalar call: SiLU was 3% of a Qwen3-shaped
 * encoder's time, most of it in expf): x clamped to [-87, 88] (e^x then stays a normal float),
 * x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, Cody and Waite), e^r from the classic degree-6
 * minimax polynomial (Moshier's Cephes expf coefficients), times 2^n built in the exponent bits.
 * Relative error about 1e-7 (measured against double exp on 2^24 points: tests/device/test_rowops). */
static inline float exp_approx(float x) {
    x = x < 88.0f ? x : 88.0f; /* (NaN -> 88: n stays an int; the caller's NaN is kept by its v) */
    x = x > -87.0f ? x : -87.0f;
    const float n = floorf(x * 1.44269504088896341f + 0.5f);
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return e * scale;
}

#ifndef MODATTN_KERNEL_UNCHECKED
float modattn__exp(float x) { return exp_approx(x); }
#endif

/* y = silu(y + bias) = v / (1 + e^-v), as torch's F.silu in float32 */
CLONES ROWOP_LINK void ROWOP(modattn__silu_bias)(float *restrict y, const float *restrict bias, int64_t n) {
    for (int64_t k = 0; k < n; k++) {
        const float v = y[k] + bias[k];
        y[k] = v / (1.0f + exp_approx(-v));
    }
}

/* SwiGLU's product: x[k] = silu(x[k]) * x[n + k] (gate then up, one row) */
CLONES ROWOP_LINK void ROWOP(modattn__silu_mul)(float *restrict x, int64_t n) {
    float *restrict up = x + n;
    for (int64_t k = 0; k < n; k++) {
        const float v = x[k];
        x[k] = v / (1.0f + exp_approx(-v)) * up[k];
    }
}

CLONES ROWOP_LINK void ROWOP(modattn__relu_bias)(float *restrict y, const float *restrict bias, int64_t n) {
    for (int64_t k = 0; k < n; k++) {
        const float v = y[k] + bias[k];
        y[k] = v > 0.0f ? v : 0.0f;
    }
}

CLONES ROWOP_LINK void ROWOP(modattn__bias_add)(float *restrict y, const float *restrict bias, int64_t n) {
    for (int64_t k = 0; k < n; k++) y[k] += bias[k];
}

/* y = LN(y + bias) * g + b; the statistics accumulate in double (n is the hidden size: a few
 * hundred values whose mean may be large against their spread), in 16 partial sums so that the
 * compiler can keep them in vector registers: one running double sum is a serial chain of n
 * dependent adds that the compiler may not reorder (it took 3.6% of all-MiniLM-L6-v2's time).
 * bias may be NULL. */
#define LN_PARTS 16
CLONES ROWOP_LINK void ROWOP(modattn__bias_layer_norm)(float *restrict y, const float *restrict bias,
                                     const float *restrict g, const float *restrict b, int64_t n,
                                     double eps) {
    if (bias)
        for (int64_t k = 0; k < n; k++) y[k] += bias[k];
    double part[LN_PARTS] = {0};
    int64_t k = 0;
    for (; k + LN_PARTS <= n; k += LN_PARTS)
        for (int u = 0; u < LN_PARTS; u++) part[u] += (double)y[k + u];
    double s = 0;
    for (; k < n; k++) s += y[k];
    for (int u = 0; u < LN_PARTS; u++) s += part[u];
    const double mean = s / (double)n;
    double vpart[LN_PARTS] = {0};
    for (k = 0; k + LN_PARTS <= n; k += LN_PARTS)
        for (int u = 0; u < LN_PARTS; u++) {
            const double d = (double)y[k + u] - mean;
            vpart[u] += d * d;
        }
    double v = 0;
    for (; k < n; k++) {
        const double d = (double)y[k] - mean;
        v += d * d;
    }
    for (int u = 0; u < LN_PARTS; u++) v += vpart[u];
    const float mu = (float)mean;
    const float inv = (float)(1.0 / sqrt(v / (double)n + eps));
    for (k = 0; k < n; k++) y[k] = (y[k] - mu) * inv * g[k] + b[k];
}

/* RMSNorm (transformers' Qwen3RMSNorm / LlamaRMSNorm in fp32): y = g * (y * rsqrt(mean(y^2) + eps)),
 * the mean of squares in double over LN_PARTS lanes summed in a fixed order (as the LayerNorm's) */
CLONES ROWOP_LINK void ROWOP(modattn__rms_norm)(float *restrict y, const float *restrict g, int64_t n, double eps) {
    double part[LN_PARTS] = {0};
    int64_t k = 0;
    for (; k + LN_PARTS <= n; k += LN_PARTS)
        for (int u = 0; u < LN_PARTS; u++) part[u] += (double)y[k + u] * (double)y[k + u];
    double ss = 0;
    for (; k < n; k++) ss += (double)y[k] * (double)y[k];
    for (int u = 0; u < LN_PARTS; u++) ss += part[u];
    const float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (k = 0; k < n; k++) y[k] = g[k] * (y[k] * inv);
}

/* y[r] (= or +=) a[r] . W^T for rows [0, M): each output one dot product over K in 16 lanes
 * summed in a fixed order, so a row's result depends on nothing but that row (no set-up, no
 * packing, no JIT: the GEMM of `few_rows` plans, where a query's few rows would not repay
 * oneDNN's first-call cost of about 90 ms). Four weight rows per pass share each load of a. */
CLONES ROWOP_LINK void ROWOP(modattn__gemm_direct)(int64_t M, int64_t N, int64_t K, const float *restrict A, int64_t lda,
                                 const float *restrict W, float beta, float *restrict C, int64_t ldc) {
    enum { L = 16 };
    const int64_t K16 = K / L * L;
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) {
        const float *w0 = W + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        for (int64_t r = 0; r < M; r++) {
            const float *a = A + r * lda;
            float *c = C + r * ldc;
            float s0[L] = {0}, s1[L] = {0}, s2[L] = {0}, s3[L] = {0};
            for (int64_t k = 0; k < K16; k += L)
                for (int j = 0; j < L; j++) {
                    const float x = a[k + j];
                    s0[j] += x * w0[k + j], s1[j] += x * w1[k + j];
                    s2[j] += x * w2[k + j], s3[j] += x * w3[k + j];
                }
            float t[4] = {0, 0, 0, 0};
            for (int j = 0; j < L; j++) t[0] += s0[j], t[1] += s1[j], t[2] += s2[j], t[3] += s3[j];
            for (int64_t k = K16; k < K; k++) {
                t[0] += a[k] * w0[k], t[1] += a[k] * w1[k], t[2] += a[k] * w2[k], t[3] += a[k] * w3[k];
            }
            for (int q = 0; q < 4; q++) c[n + q] = beta != 0.0f ? c[n + q] + t[q] : t[q];
        }
    }
    for (; n < N; n++) {
        const float *w = W + n * K;
        for (int64_t r = 0; r < M; r++) {
            const float *a = A + r * lda;
            float *c = C + r * ldc;
            float sv[L] = {0};
            for (int64_t k = 0; k < K16; k += L)
                for (int j = 0; j < L; j++) sv[j] += a[k + j] * w[k + j];
            float t = 0;
            for (int j = 0; j < L; j++) t += sv[j];
            for (int64_t k = K16; k < K; k++) t += a[k] * w[k];
            c[n] = beta != 0.0f ? c[n] + t : t;
        }
    }
}

#if defined(MODATTN_KERNEL_TWINS) && !defined(MODATTN_KERNEL_UNCHECKED)
/* the kernels' own names: the twin after checking its ranges under MODATTN_ASAN_KERNELS=entry, else
 * the instrumented copy above */
#define TWIN_RD(p, n, what) modattn__asan_check_region((p), (size_t)(n) * sizeof(float), false, what)
#define TWIN_RW(p, n, what) modattn__asan_check_region((p), (size_t)(n) * sizeof(float), true, what)
#define TWIN_Y_BIAS(f)                                                                          \
    void f##_unchecked(float *y, const float *bias, int64_t n);                                 \
    void f(float *restrict y, const float *restrict bias, int64_t n) {                          \
        if (!modattn__kernel_twins_on()) {                                                      \
            f##_checked(y, bias, n);                                                            \
            return;                                                                             \
        }                                                                                       \
        TWIN_RW(y, n, #f ": y");                                                                \
        TWIN_RD(bias, n, #f ": bias");                                                          \
        f##_unchecked(y, bias, n);                                                              \
    }
TWIN_Y_BIAS(modattn__gelu_erf_bias)
TWIN_Y_BIAS(modattn__gelu_tanh_bias)
TWIN_Y_BIAS(modattn__silu_bias)
TWIN_Y_BIAS(modattn__relu_bias)
TWIN_Y_BIAS(modattn__bias_add)

void modattn__silu_mul_unchecked(float *x, int64_t n);
void modattn__silu_mul(float *restrict x, int64_t n) {
    if (!modattn__kernel_twins_on()) {
        modattn__silu_mul_checked(x, n);
        return;
    }
    TWIN_RW(x, 2 * n, "modattn__silu_mul: gate and up");
    modattn__silu_mul_unchecked(x, n);
}

void modattn__bias_layer_norm_unchecked(float *y, const float *bias, const float *g, const float *b, int64_t n,
                                        double eps);
void modattn__bias_layer_norm(float *restrict y, const float *restrict bias, const float *restrict g,
                              const float *restrict b, int64_t n, double eps) {
    if (!modattn__kernel_twins_on()) {
        modattn__bias_layer_norm_checked(y, bias, g, b, n, eps);
        return;
    }
    TWIN_RW(y, n, "layer norm: y");
    TWIN_RD(bias, n, "layer norm: bias");
    TWIN_RD(g, n, "layer norm: gain");
    TWIN_RD(b, n, "layer norm: shift");
    modattn__bias_layer_norm_unchecked(y, bias, g, b, n, eps);
}

void modattn__rms_norm_unchecked(float *y, const float *g, int64_t n, double eps);
void modattn__rms_norm(float *restrict y, const float *restrict g, int64_t n, double eps) {
    if (!modattn__kernel_twins_on()) {
        modattn__rms_norm_checked(y, g, n, eps);
        return;
    }
    TWIN_RW(y, n, "RMS norm: y");
    TWIN_RD(g, n, "RMS norm: gain");
    modattn__rms_norm_unchecked(y, g, n, eps);
}

void modattn__gemm_direct_unchecked(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *W,
                                    float beta, float *C, int64_t ldc);
void modattn__gemm_direct(int64_t M, int64_t N, int64_t K, const float *restrict A, int64_t lda,
                          const float *restrict W, float beta, float *restrict C, int64_t ldc) {
    if (!modattn__kernel_twins_on()) {
        modattn__gemm_direct_checked(M, N, K, A, lda, W, beta, C, ldc);
        return;
    }
    if (M > 0 && N > 0) {
        if (K > 0) TWIN_RD(A, (M - 1) * lda + K, "direct GEMM: A");
        TWIN_RD(W, N * K, "direct GEMM: W");
        TWIN_RW(C, (M - 1) * ldc + N, "direct GEMM: C");
    }
    modattn__gemm_direct_unchecked(M, N, K, A, lda, W, beta, C, ldc);
}
#endif
