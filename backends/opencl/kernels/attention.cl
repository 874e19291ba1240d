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

/* Visible key range [*lo, lim) of query row i (before the mask): attention.h's rule with
 * i' = i + L - Sq; wl, wr: the window's sides (-1: unbounded; the host clipped them below Sk). */
static int visible_range(int i, int L, int Sq, int causal, int wl, int wr, int *lo) {
    const int ip = i + L - Sq;
    int a = 0, b = L;
    if (causal && ip + 1 < b) b = ip + 1;
    if (wl >= 0 && ip - wl > a) a = ip - wl;
    if (wr >= 0 && ip + wr + 1 < b) b = ip + wr + 1;
    *lo = a;
    return b > a ? b : a;
}

/* The scaled score v of key j for a row at i' = ip: softcapping, then ALiBi (-slope |i' - j|). */
static float score_extras(float v, float softcap, int alibi, float slope, int ip, int j) {
    if (softcap > 0.0f) v = softcap * tanh(v / softcap);
    if (alibi) v -= slope * fabs((float)(ip - j));
    return v;
}

/* Rows are held as float4 vectors (the head dim padded with zeros to a multiple of 4): the dot
 * products and the accumulation are 4-wide within a work-item, which CPU drivers (PoCL) turn
 * into SIMD and GPUs into 128-bit local-memory loads. */
#define MAXD4 (MAXD / 4)
#define D4C MAXD4
#define DV4C MAXD4

__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void flash_fwd(__global const float *Q, long q0, long qs0, long qs1, long qs2, long qs3,
               __global const float *K, long k0, long ks0, long ks1, long ks2, long ks3,
               __global const float *V, long v0, long vs0, long vs1, long vs2, long vs3,
               __global float *O, long o0, long os0, long os1, long os2, long os3,
               __global const float *M, long m0, long ms0, long ms1, long ms2, long ms3,
               __global float *LSE, long l0, long ls0, long ls1, long ls2,
               __global const int *kvl,
               int Hq, int G, int Sq, int Sk, int D, int Dv, float scale, int flags,
               int wl, int wr, float softcap, __global const float *slopes, int sl0,
               __local float4 *Ks, __local float4 *Vs) {
    const int has_mask = flags & 1, has_lse = flags & 2, has_kvl = flags & 4, causal = flags & 8, alibi = flags & 16;
    const int D4 = (D + 3) / 4, Dv4 = (Dv + 3) / 4;
    const int lid = get_local_id(0);
    const int bh = get_group_id(1);
    const int b = bh / Hq, h = bh % Hq, hk = h / G;
    const int i = get_group_id(0) * BM + lid;
    const int row = i < Sq;
    const int L = has_kvl ? kvl[b] : Sk;
    int ilast = get_group_id(0) * BM + BM - 1;
    if (ilast > Sq - 1) ilast = Sq - 1;
    int glo, lo = 0, unused;
    visible_range(get_group_id(0) * BM, L, Sq, causal, wl, wr, &glo); /* the group's first key: uniform */
    const int glim = visible_range(ilast, L, Sq, causal, wl, wr, &unused); /* and its furthest */
    const int lim = row ? visible_range(i, L, Sq, causal, wl, wr, &lo) : 0;
    const int ip = i + L - Sq;
    const float slope = alibi ? slopes[sl0 + h] : 0.0f;

    float4 q[D4C], acc[DV4C];
    __global const float *qrow = Q + q0 + b * qs0 + h * qs1 + (long)(row ? i : 0) * qs2;
    for (int e4 = 0; e4 < D4; e4++) {
        float t[4];
        for (int u = 0; u < 4; u++) {
            const int e = 4 * e4 + u;
            t[u] = row && e < D ? qrow[e * qs3] : 0.0f;
        }
        q[e4] = (float4)(t[0], t[1], t[2], t[3]);
    }
    for (int e4 = 0; e4 < Dv4; e4++) acc[e4] = (float4)(0.0f);
    float m = -INFINITY, l = 0.0f;
    __global const float *kb = K + k0 + b * ks0 + hk * ks1;
    __global const float *vb = V + v0 + b * vs0 + hk * vs1;
    __global const float *mrow = M + m0 + b * ms0 + h * ms1 + (long)(row ? i : 0) * ms2;
    __local float *Kf = (__local float *)Ks, *Vf = (__local float *)Vs;

    for (int j0 = glo; j0 < glim; j0 += BN) { /* tiles left of the window are never loaded */
        const int n = glim - j0 < BN ? glim - j0 : BN;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < n * D4 * 4; t += BM) {
            const int jj = t / (D4 * 4), e = t - jj * (D4 * 4);
            Kf[t] = e < D ? kb[(long)(j0 + jj) * ks2 + e * ks3] : 0.0f;
        }
        for (int t = lid; t < n * Dv4 * 4; t += BM) {
            const int jj = t / (Dv4 * 4), e = t - jj * (Dv4 * 4);
            Vf[t] = e < Dv ? vb[(long)(j0 + jj) * vs2 + e * vs3] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (row && j0 < lim && j0 + n > lo) {
            float s[BN];
            float mt = m;
            for (int jj = 0; jj < n; jj++) {
                const int j = j0 + jj;
                float v = -INFINITY;
                if (j >= lo && j < lim) {
                    float4 d4 = (float4)(0.0f);
                    for (int e4 = 0; e4 < D4; e4++) d4 = fma(q[e4], Ks[jj * D4 + e4], d4);
                    v = score_extras(scale * ((d4.x + d4.y) + (d4.z + d4.w)), softcap, alibi, slope, ip, j);
                    if (has_mask) {
                        const float mv = mrow[(long)j * ms3];
                        v = mv == -INFINITY ? -INFINITY : v + mv;
                    }
                }
                s[jj] = v;
                mt = fmax(mt, v);
            }
            if (mt != -INFINITY) {
                const float corr = m == -INFINITY ? 0.0f : exp(m - mt);
                l *= corr;
                for (int e4 = 0; e4 < Dv4; e4++) acc[e4] *= corr;
                for (int jj = 0; jj < n; jj++) {
                    if (s[jj] == -INFINITY) continue;
                    const float p = exp(s[jj] - mt);
                    l += p;
                    for (int e4 = 0; e4 < Dv4; e4++) acc[e4] = fma((float4)(p), Vs[jj * Dv4 + e4], acc[e4]);
                }
                m = mt;
            }
        }
    }
    if (!row) return;
    __global float *orow = O + o0 + b * os0 + h * os1 + (long)i * os2;
    const float inv = m == -INFINITY ? 0.0f : 1.0f / l;
    for (int e4 = 0; e4 < Dv4; e4++) {
        const float4 r = acc[e4] * inv;
        const float t[4] = {r.x, r.y, r.z, r.w};
        for (int u = 0; u < 4; u++)
            if (4 * e4 + u < Dv) orow[(4 * e4 + u) * os3] = m == -INFINITY ? 0.0f : t[u];
    }
    if (has_lse) LSE[l0 + b * ls0 + h * ls1 + (long)i * ls2] = m == -INFINITY ? -INFINITY : m + log(l);
}

/* flash_fwd_direct: the same computation with no local memory and no barrier: every work-item
 * reads its K and V rows from global memory (the cache shares them within a work-group). For
 * CPU drivers: without barriers PoCL keeps a work-item's row in registers instead of spilling
 * it to per-work-item context arrays at every barrier (measured 3x faster on PoCL). */
static float4 load4(__global const float *p, long stride, int e, int n) {
    float t[4];
    for (int u = 0; u < 4; u++) t[u] = e + u < n ? p[(long)(e + u) * stride] : 0.0f;
    return (float4)(t[0], t[1], t[2], t[3]);
}

__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void flash_fwd_direct(__global const float *Q, long q0, long qs0, long qs1, long qs2, long qs3,
                      __global const float *K, long k0, long ks0, long ks1, long ks2, long ks3,
                      __global const float *V, long v0, long vs0, long vs1, long vs2, long vs3,
                      __global float *O, long o0, long os0, long os1, long os2, long os3,
                      __global const float *M, long m0, long ms0, long ms1, long ms2, long ms3,
                      __global float *LSE, long l0, long ls0, long ls1, long ls2,
                      __global const int *kvl,
                      int Hq, int G, int Sq, int Sk, int D, int Dv, float scale, int flags,
                      int wl, int wr, float softcap, __global const float *slopes, int sl0) {
    const int has_mask = flags & 1, has_lse = flags & 2, has_kvl = flags & 4, causal = flags & 8, alibi = flags & 16;
    const int D4 = (D + 3) / 4, Dv4 = (Dv + 3) / 4;
    const int bh = get_group_id(1);
    const int b = bh / Hq, h = bh % Hq, hk = h / G;
    const int i = get_global_id(0);
    if (i >= Sq) return;
    const int L = has_kvl ? kvl[b] : Sk;
    int lo;
    const int lim = visible_range(i, L, Sq, causal, wl, wr, &lo);
    const int ip = i + L - Sq;
    const float slope = alibi ? slopes[sl0 + h] : 0.0f;
    const int vecs = ks3 == 1 && vs3 == 1 && (D & 3) == 0 && (Dv & 3) == 0 && ((k0 + b * ks0 + hk * ks1) & 3) == 0 &&
                     (ks2 & 3) == 0 && ((v0 + b * vs0 + hk * vs1) & 3) == 0 && (vs2 & 3) == 0;
    float4 q[D4C], acc[DV4C];
    __global const float *qrow = Q + q0 + b * qs0 + h * qs1 + (long)i * qs2;
    for (int e4 = 0; e4 < D4; e4++) q[e4] = load4(qrow, qs3, 4 * e4, D);
    for (int e4 = 0; e4 < Dv4; e4++) acc[e4] = (float4)(0.0f);
    float m = -INFINITY, l = 0.0f;
    __global const float *kb = K + k0 + b * ks0 + hk * ks1;
    __global const float *vb = V + v0 + b * vs0 + hk * vs1;
    __global const float *mrow = M + m0 + b * ms0 + h * ms1 + (long)i * ms2;
    /* keys four at a time: four independent dot-product chains, and one pass over acc per four
     * keys (a CPU's FMA latency, not its width, bounded the one-key loop) */
    for (int j0 = lo; j0 < lim; j0 += BN) { /* only the window's keys */
        const int n = lim - j0 < BN ? lim - j0 : BN;
        float s[BN];
        float mt = m;
        for (int jj = 0; jj < n; jj += 4) {
            float4 d[4] = {(float4)(0.0f), (float4)(0.0f), (float4)(0.0f), (float4)(0.0f)};
            const int nk = n - jj < 4 ? n - jj : 4;
            __global const float *kr[4];
            for (int u = 0; u < 4; u++) kr[u] = kb + (long)(j0 + jj + (u < nk ? u : 0)) * ks2;
            if (vecs) {
                for (int e4 = 0; e4 < D4; e4++) {
                    const float4 qe = q[e4];
                    d[0] = fma(qe, vload4(e4, kr[0]), d[0]);
                    d[1] = fma(qe, vload4(e4, kr[1]), d[1]);
                    d[2] = fma(qe, vload4(e4, kr[2]), d[2]);
                    d[3] = fma(qe, vload4(e4, kr[3]), d[3]);
                }
            } else {
                for (int e4 = 0; e4 < D4; e4++)
                    for (int u = 0; u < 4; u++) d[u] = fma(q[e4], load4(kr[u], ks3, 4 * e4, D), d[u]);
            }
            for (int u = 0; u < nk; u++) {
                const int j = j0 + jj + u;
                float v = score_extras(scale * ((d[u].x + d[u].y) + (d[u].z + d[u].w)), softcap, alibi, slope, ip, j);
                if (has_mask) {
                    const float mv = mrow[(long)j * ms3];
                    v = mv == -INFINITY ? -INFINITY : v + mv;
                }
                s[jj + u] = v;
                mt = fmax(mt, v);
            }
        }
        if (mt == -INFINITY) continue;
        const float corr = m == -INFINITY ? 0.0f : exp(m - mt);
        l *= corr;
        for (int e4 = 0; e4 < Dv4; e4++) acc[e4] *= corr;
        for (int jj = 0; jj < n; jj += 4) {
            float p[4];
            __global const float *vr[4];
            for (int u = 0; u < 4; u++) {
                const int ok = jj + u < n && s[jj + u] != -INFINITY;
                p[u] = ok ? exp(s[jj + u] - mt) : 0.0f;
                vr[u] = vb + (long)(j0 + jj + (jj + u < n ? u : 0)) * vs2;
                l += p[u];
            }
            if (vecs) {
                for (int e4 = 0; e4 < Dv4; e4++)
                    acc[e4] = fma((float4)(p[3]), vload4(e4, vr[3]),
                                  fma((float4)(p[2]), vload4(e4, vr[2]),
                                      fma((float4)(p[1]), vload4(e4, vr[1]), fma((float4)(p[0]), vload4(e4, vr[0]), acc[e4]))));
            } else {
                for (int e4 = 0; e4 < Dv4; e4++)
                    for (int u = 0; u < 4; u++) acc[e4] = fma((float4)(p[u]), load4(vr[u], vs3, 4 * e4, Dv), acc[e4]);
            }
        }
        m = mt;
    }
    __global float *orow = O + o0 + b * os0 + h * os1 + (long)i * os2;
    const float inv = m == -INFINITY ? 0.0f : 1.0f / l;
    for (int e4 = 0; e4 < Dv4; e4++) {
        const float4 r = acc[e4] * inv;
        const float t[4] = {r.x, r.y, r.z, r.w};
        for (int u = 0; u < 4; u++)
            if (4 * e4 + u < Dv) orow[(4 * e4 + u) * os3] = m == -INFINITY ? 0.0f : t[u];
    }
    if (has_lse) LSE[l0 + b * ls0 + h * ls1 + (long)i * ls2] = m == -INFINITY ? -INFINITY : m + log(l);
}

/* opencl_blas: S holds [B*Hq, Sq, Sk] raw scores q.k; each row becomes its softmax P in place
 * (scale, causal, kv_lens and mask applied; invisible keys 0; a row that sees nothing all 0),
 * and LSE is written. One work-item per row. */
__kernel void softmax_rows(__global float *S, long s_off, __global const float *M, long m0, long ms0, long ms1, long ms2,
                           long ms3, __global float *LSE, long l0, long ls0, long ls1, long ls2,
                           __global const int *kvl, int B, int Hq, int Sq, int Sk, float scale, int flags,
                           int wl, int wr, float softcap, __global const float *slopes, int sl0) {
    const int has_mask = flags & 1, has_lse = flags & 2, has_kvl = flags & 4, causal = flags & 8, alibi = flags & 16;
    const long r = get_global_id(0);
    if (r >= (long)B * Hq * Sq) return;
    const int i = (int)(r % Sq), bh = (int)(r / Sq), b = bh / Hq, h = bh % Hq;
    const int L = has_kvl ? kvl[b] : Sk;
    int lo;
    const int lim = visible_range(i, L, Sq, causal, wl, wr, &lo);
    const int ip = i + L - Sq;
    const float slope = alibi ? slopes[sl0 + h] : 0.0f;
    __global float *s = S + s_off + r * Sk;
    __global const float *mrow = M + m0 + b * ms0 + h * ms1 + (long)i * ms2;
    float mx = -INFINITY;
    for (int j = 0; j < Sk; j++) {
        float v = -INFINITY;
        if (j >= lo && j < lim) {
            v = score_extras(scale * s[j], softcap, alibi, slope, ip, j);
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
