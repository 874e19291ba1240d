/* backends/opencl/kernels/attention.cl — attention kernels of the OpenCL backend (fast path,
 * fp32). Built into the binary as a string; compiled once per device and cached.
 *
 * flash_fwd: one work-group of BM work-items computes BM query rows of one (batch, head); each
 * work-item owns one row: its q and output accumulator in private memory, an online softmax
 * over key tiles of BN rows that the work-group loads together into local memory. No Sq x Sk
 * buffer exists. Rows that see no key give O = 0 and LSE = -inf.
 *
 * softmax_rows / zero_view: the pieces of opencl_blas (scores from CLBlast's batched GEMM). */

#ifndef BM
#define BM 32
#endif
#ifndef BN
#define BN 32
#endif
#define MAXD 256

/* Visible key range [0, lim) of query row i (before the mask). */
static int visible_limit(int i, int L, int Sq, int causal) {
    if (!causal) return L;
    int lim = i + L - Sq + 1;
    if (lim > L) lim = L;
    return lim < 0 ? 0 : lim;
}

__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void flash_fwd(__global const float *Q, long q0, long qs0, long qs1, long qs2, long qs3,
               __global const float *K, long k0, long ks0, long ks1, long ks2, long ks3,
               __global const float *V, long v0, long vs0, long vs1, long vs2, long vs3,
               __global float *O, long o0, long os0, long os1, long os2, long os3,
               __global const float *M, long m0, long ms0, long ms1, long ms2, long ms3,
               __global float *LSE, long l0, long ls0, long ls1, long ls2,
               __global const int *kvl,
               int Hq, int G, int Sq, int Sk, int D, int Dv, float scale, int flags,
               __local float *Ks, __local float *Vs) {
    const int has_mask = flags & 1, has_lse = flags & 2, has_kvl = flags & 4, causal = flags & 8;
    const int lid = get_local_id(0);
    const int bh = get_group_id(1);
    const int b = bh / Hq, h = bh % Hq, hk = h / G;
    const int i = get_group_id(0) * BM + lid;
    const int row = i < Sq;
    const int L = has_kvl ? kvl[b] : Sk;
    int ilast = get_group_id(0) * BM + BM - 1;
    if (ilast > Sq - 1) ilast = Sq - 1;
    const int glim = visible_limit(ilast, L, Sq, causal); /* the group's furthest key: uniform */
    const int lim = row ? visible_limit(i, L, Sq, causal) : 0;

    float q[MAXD], acc[MAXD];
    __global const float *qrow = Q + q0 + b * qs0 + h * qs1 + (long)(row ? i : 0) * qs2;
    for (int e = 0; e < D; e++) q[e] = row ? qrow[e * qs3] : 0.0f;
    for (int e = 0; e < Dv; e++) acc[e] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    __global const float *kb = K + k0 + b * ks0 + hk * ks1;
    __global const float *vb = V + v0 + b * vs0 + hk * vs1;
    __global const float *mrow = M + m0 + b * ms0 + h * ms1 + (long)(row ? i : 0) * ms2;

    for (int j0 = 0; j0 < glim; j0 += BN) {
        const int n = glim - j0 < BN ? glim - j0 : BN;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < n * D; t += BM) {
            int jj = t / D, e = t - jj * D;
            Ks[jj * D + e] = kb[(long)(j0 + jj) * ks2 + e * ks3];
        }
        for (int t = lid; t < n * Dv; t += BM) {
            int jj = t / Dv, e = t - jj * Dv;
            Vs[jj * Dv + e] = vb[(long)(j0 + jj) * vs2 + e * vs3];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (row && j0 < lim) {
            float s[BN];
            float mt = m;
            for (int jj = 0; jj < n; jj++) {
                int j = j0 + jj;
                float v = -INFINITY;
                if (j < lim) {
                    float dot = 0.0f;
                    for (int e = 0; e < D; e++) dot = fma(q[e], Ks[jj * D + e], dot);
                    v = scale * dot;
                    if (has_mask) {
                        float mv = mrow[(long)j * ms3];
                        v = mv == -INFINITY ? -INFINITY : v + mv;
                    }
                }
                s[jj] = v;
                mt = fmax(mt, v);
            }
            if (mt != -INFINITY) {
                float corr = m == -INFINITY ? 0.0f : exp(m - mt);
                l *= corr;
                for (int e = 0; e < Dv; e++) acc[e] *= corr;
                for (int jj = 0; jj < n; jj++) {
                    if (s[jj] == -INFINITY) continue;
                    float p = exp(s[jj] - mt);
                    l += p;
                    for (int e = 0; e < Dv; e++) acc[e] = fma(p, Vs[jj * Dv + e], acc[e]);
                }
                m = mt;
            }
        }
    }
    if (!row) return;
    __global float *orow = O + o0 + b * os0 + h * os1 + (long)i * os2;
    if (m == -INFINITY) {
        for (int e = 0; e < Dv; e++) orow[e * os3] = 0.0f;
        if (has_lse) LSE[l0 + b * ls0 + h * ls1 + (long)i * ls2] = -INFINITY;
        return;
    }
    float inv = 1.0f / l;
    for (int e = 0; e < Dv; e++) orow[e * os3] = acc[e] * inv;
    if (has_lse) LSE[l0 + b * ls0 + h * ls1 + (long)i * ls2] = m + log(l);
}

/* opencl_blas: S holds [B*Hq, Sq, Sk] raw scores q.k; each row becomes its softmax P in place
 * (scale, causal, kv_lens and mask applied; invisible keys 0; a row that sees nothing all 0),
 * and LSE is written. One work-item per row. */
__kernel void softmax_rows(__global float *S, long s_off, __global const float *M, long m0, long ms0, long ms1, long ms2,
                           long ms3, __global float *LSE, long l0, long ls0, long ls1, long ls2,
                           __global const int *kvl, int B, int Hq, int Sq, int Sk, float scale, int flags) {
    const int has_mask = flags & 1, has_lse = flags & 2, has_kvl = flags & 4, causal = flags & 8;
    const long r = get_global_id(0);
    if (r >= (long)B * Hq * Sq) return;
    const int i = (int)(r % Sq), bh = (int)(r / Sq), b = bh / Hq, h = bh % Hq;
    const int L = has_kvl ? kvl[b] : Sk;
    const int lim = visible_limit(i, L, Sq, causal);
    __global float *s = S + s_off + r * Sk;
    __global const float *mrow = M + m0 + b * ms0 + h * ms1 + (long)i * ms2;
    float mx = -INFINITY;
    for (int j = 0; j < Sk; j++) {
        float v = -INFINITY;
        if (j < lim) {
            v = scale * s[j];
            if (has_mask) {
                float mv = mrow[(long)j * ms3];
                v = mv == -INFINITY ? -INFINITY : v + mv;
            }
        }
        s[j] = v;
        mx = fmax(mx, v);
    }
    if (mx == -INFINITY) {
        for (int j = 0; j < Sk; j++) s[j] = 0.0f;
        if (has_lse) LSE[l0 + b * ls0 + h * ls1 + (long)i * ls2] = -INFINITY;
        return;
    }
    float sum = 0.0f;
    for (int j = 0; j < Sk; j++) {
        float p = s[j] == -INFINITY ? 0.0f : exp(s[j] - mx);
        s[j] = p;
        sum += p;
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < Sk; j++) s[j] *= inv;
    if (has_lse) LSE[l0 + b * ls0 + h * ls1 + (long)i * ls2] = mx + log(sum);
}

/* Zeroes the elements of a strided [d0, d1, d2, d3] view (and nothing between them). */
__kernel void zero_view(__global float *X, long x0, long s0, long s1, long s2, long s3, int d1, int d2, int d3) {
    const long r = get_global_id(0); /* one work-item per (a, b, c) row */
    const int c = (int)(r % d2), bb = (int)((r / d2) % d1), a = (int)(r / ((long)d2 * d1));
    __global float *p = X + x0 + a * s0 + bb * s1 + (long)c * s2;
    for (int e = 0; e < d3; e++) p[e * s3] = 0.0f;
}
