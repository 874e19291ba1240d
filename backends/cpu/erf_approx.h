/* backends/cpu/erf_approx.h — erf for GELU, shared by the CPU's row kernels (cpu_rowops.c includes
 * it) and the OpenCL device's (backends/opencl/CMakeLists.txt puts this file's text before
 * kernels/encoder.cl in the program it builds), so that both devices compute GELU with one approximation: written in
 * the C that is also OpenCL C (no includes, no library calls).
 *
 * A rational approximation erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (deg 5 / deg 5, our own
 * least-squares fit; |erf(4)| = 1 - 1.5e-8, clamped outside), max abs error 3.8e-7 evaluated in
 * float — about the rounding of the float GELU itself, far below what the goldens' cosine 0.99999
 * can see. libm's erff was a scalar call and took 12% of the CPU encoder's time; PoCL's (SLEEF's
 * erff_u10) 11-13% of an encoder's on an OpenCL CPU device. */
#ifndef MODATTN_ERF_APPROX_H
#define MODATTN_ERF_APPROX_H
static inline float erf_approx(float x) {
    const float xc = x > 4.0f ? 4.0f : (x < -4.0f ? -4.0f : x);
    const float t = xc * xc;
    float p = 2.0272865730017893e-06f;
    p = p * t + 0.00028618799735757145f;
    p = p * t + 0.0038447062794925305f;
    p = p * t + 0.052981763019024922f;
    p = p * t + 0.19230819351678446f;
    p = p * t + 1.1283790461436429f;
    float q = 3.7928556066565041e-05f;
    q = q * t + 0.0011810574145035813f;
    q = q * t + 0.015124428893259751f;
    q = q * t + 0.11487953582778671f;
    q = q * t + 0.50376059838675202f;
    q = q * t + 1.0f;
    return xc * p / q;
}
#endif
