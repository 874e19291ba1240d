/* tests/backends/test_softmax_clones.c — cpu_blas's row softmax and exp (backends/cpu_blas/softmax.c)
 * called directly, against fp64: odd lengths (tails of the 16-lane loops), lim < n, masks with
 * stride 1 and 3 holding -inf, all keys hidden, large scores, exp over its whole range. On x86-64
 * with GCC both functions are target_clones (AVX-512 / AVX2 / default) and the sanitizer build
 * keeps them cloned, so under ASan+UBSan this runs the clone the CPU picks (printed; the test
 * softmax_clones_built checks the library holds the clones). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_blas/softmax.h"
#include "test_util.h"

static uint32_t rng = 2463534242u;
static float frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)((int32_t)rng) * (1.0f / 2147483648.0f);
}

static const char *clone_name(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "avx512f";
    if (__builtin_cpu_supports("avx2")) return "avx2";
    return "default";
#else
    return "none (not cloned here)";
#endif
}

static int cases;

static void check_row(int64_t n, int64_t lim, int mask_kind, float scale) {
    const int64_t stride = mask_kind == 2 ? 3 : 1;
    float *s = malloc((size_t)n * sizeof *s), *mask = malloc((size_t)(n * 3 + 1) * sizeof *mask);
    double *ref = malloc((size_t)n * sizeof *ref);
    CHECK(s && mask && ref);
    if (!s || !mask || !ref) goto out;
    for (int64_t j = 0; j < n; j++) s[j] = scale * frand();
    for (int64_t j = 0; j < n * 3 + 1; j++) mask[j] = (j % 7 == 3) ? -INFINITY : 0.5f * frand();
    /* fp64: the visible keys' softmax (mask added, -inf hides) */
    const int64_t vis = lim > n ? n : lim < 0 ? 0 : lim;
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        const float m = mask_kind ? mask[j * stride] : 0.0f;
        ref[j] = j < vis && m != -INFINITY ? (double)(mask_kind ? s[j] + m : s[j]) : -INFINITY;
        if (ref[j] > mx) mx = ref[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) sum += ref[j] == -INFINITY ? 0.0 : exp(ref[j] - mx);
    for (int64_t j = 0; j < n; j++) ref[j] = ref[j] == -INFINITY ? 0.0 : exp(ref[j] - mx) / sum;
    const double lse_ref = mx == -INFINITY ? -INFINITY : mx + log(sum);
    const float lse = modattn__cpu_blas_softmax_row(s, n, lim, mask_kind ? mask : NULL, stride);
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t j = 0; j < n; j++) {
        const double e = fabs((double)s[j] - ref[j]);
        const double tol = 4e-6 * ref[j] + 1e-12;
        if (!(e <= tol)) bad++;
        if (ref[j] > 0 && e / ref[j] > worst) worst = e / ref[j];
    }
    CHECK_MSG(bad == 0, "n %lld lim %lld mask %d scale %g: %lld probabilities off fp64 (worst rel %.3g)", (long long)n,
              (long long)lim, mask_kind, scale, (long long)bad, worst);
    if (lse_ref == -INFINITY) CHECK_MSG(lse == -INFINITY, "n %lld lim %lld: all hidden, lse %g", (long long)n,
                                        (long long)lim, lse);
    else
        CHECK_MSG(fabs((double)lse - lse_ref) <= 2e-6 * fmax(1.0, fabs(lse_ref)), "n %lld lim %lld mask %d: lse %.9g, fp64 %.9g",
                  (long long)n, (long long)lim, mask_kind, lse, lse_ref);
    cases++;
out:
    free(s), free(mask), free(ref);
}

int main(void) {
    printf("softmax clone this CPU runs: %s\n", clone_name());
    const int64_t ns[] = {1, 2, 15, 16, 17, 31, 33, 64, 100, 257, 1000};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const int64_t n = ns[i];
        const int64_t lims[] = {n, n / 2 + 1, 0, n + 5};
        for (size_t l = 0; l < 4; l++)
            for (int mk = 0; mk < 3; mk++)
                for (float scale = 1.0f; scale <= 1000.0f; scale *= 31.0f) check_row(n, lims[l], mk, scale);
    }
    /* every key hidden by the mask: zeros and -inf */
    {
        float s[20], m[20];
        for (int j = 0; j < 20; j++) s[j] = frand(), m[j] = -INFINITY;
        const float lse = modattn__cpu_blas_softmax_row(s, 20, 20, m, 1);
        int nz = 0;
        for (int j = 0; j < 20; j++) nz += s[j] != 0.0f;
        CHECK_MSG(lse == -INFINITY && nz == 0, "all masked: lse %g, %d non-zero", lse, nz);
    }
    /* exp over its range: within 4 ulp of fp64 over [-87, 88] (normal results), 0 at and past -104 */
    {
        enum { N = 4099 };
        static float x[N], y[N];
        for (int i = 0; i < N; i++) x[i] = -87.0f + 175.0f * (float)i / (float)(N - 1);
        modattn__cpu_blas_exp(x, y, N);
        int bad = 0;
        double worst = 0.0;
        for (int i = 0; i < N; i++) {
            const double r = exp((double)x[i]), e = fabs((double)y[i] - r) / r;
            bad += !(e <= 4.0 * 0x1p-24);
            if (e > worst) worst = e;
        }
        CHECK_MSG(bad == 0, "exp: %d of %d values over 4 ulp (worst %.3g ulp)", bad, N, worst / 0x1p-24);
        const float lo[4] = {-104.0f, -200.0f, -INFINITY, -1e30f};
        float ly[4];
        modattn__cpu_blas_exp(lo, ly, 4);
        for (int i = 0; i < 4; i++) CHECK_MSG(ly[i] >= 0.0f && ly[i] < 1e-44f, "exp(%g) = %g", lo[i], ly[i]);
        printf("exp: %d values, worst %.2f ulp\n", N, worst / 0x1p-24);
    }
    printf("softmax rows checked: %d\n", cases);
    CHECK(cases == 11 * 4 * 3 * 3);
    return test_finish("test_softmax_clones");
}
