/* backends/cpu_flash/flash_kernel.inc.h — the cpu_flash tile kernel, written once over a small
 * vector vocabulary and included by each arch/<isa>.c after it defines that vocabulary. Fast
 * version (the oracle is backends/reference).
 *
 * The including file defines:
 *   VL            floats per vector;        NV   vectors per query tile (LANES = VL * NV)
 *   RQK           key rows per S^T block;   EPV  value columns per O^T block (register blocking)
 *   DB            terms per partial sum of a score (blocked summation)
 *   BKT           keys per K/V tile;        FLASH_NAME(x)  the ISA-specific name of x
 *   vf            the vector type and the static inline ops
 *     vf_load vf_store vf_bcast vf_set1 vf_zero vf_fma(a,b,c)=a*b+c vf_add vf_sub vf_mul vf_max
 *     vf_mask_gt(s, j, lim)  s where j <= lim[lane], -inf elsewhere
 *     vf_exp(x)              e^x, ~1-2 ulp, -inf -> 0
 *     vf_exp2(x)             2^x, ~1-2 ulp, -inf -> 0
 *   and optionally VF_HAS_TRANSPOSE with vf_transpose(vf r[VL]) (transpose a VL x VL block in
 *   registers) to pack Q^T and unpack O^T with vector moves;
 *   and optionally TS (slices per query row, default 1) > 1 with
 *     vf_bcast_t(p)    the TS floats p[0..TS) repeated over the vector (lane l gets p[l % TS])
 *     vf_group_sum(v)  every lane l gets the sum of the TS lanes of its group (l / TS), the same
 *                      bits in each (a butterfly of commutative adds)
 *
 * Slices (TS > 1, for decode: a kv head's few query rows would leave most lanes empty): lane
 * l = row * TS + t holds the row's partial dot product over d = d' * TS + t, so a tile holds
 * ROWS = LANES / TS query rows and every lane does useful work. Q^T is packed as
 * Qt[d'][row * TS + t] = q_row[d' * TS + t]; each K row is read TS floats at a time with
 * vf_bcast_t, and after the sum over d' the TS lanes of a row are added (vf_group_sum), leaving
 * every lane of the row with the row's score. The softmax then runs per lane exactly as with
 * TS = 1 (the TS copies stay equal bit for bit), and P^T[j][row * TS + t] is the row's weight in
 * every lane, which is what O^T'[e'][row * TS + t] += V[j][e' * TS + t] * P^T[j][lane] needs: the
 * same vf_bcast_t reads V. O^T' holds o_row[e' * TS + t] at [e'][row * TS + t]. D and Dv must be
 * multiples of TS (cpu_flash.c only picks such a kernel then).
 *
 * One work item = (b, kv head, query tile of ROWS rows of the interleaved row space
 * r = i * G + g). Per key tile [j0, j0 + nk):
 *   S^T[jj][lane] = scale * sum_d K[j0+jj][d] * Qt[d][lane]   (+ mask; causal -> -inf)
 *   m' = max(m, max_jj S^T);  P^T = exp(S^T - m');  l = l * e^(m - m') + sum_jj P^T
 *   O^T[e][lane] = O^T[e][lane] * e^(m - m') + sum_jj V[j0+jj][e] * P^T[jj][lane]
 * Nothing of size Sq x Sk exists; the workspace is O((D + Dv + BKT) * LANES) per thread. */

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define LANES (VL * NV)
#ifndef TS
#define TS 1
#define FLASH_TS_DEFAULTED 1
#endif
#define ROWS (LANES / TS) /* query rows per tile */
#if TS > 1
#define VF_BCAST_T(p) vf_bcast_t(p)
#else
#define VF_BCAST_T(p) vf_bcast(p)
#endif
#define FLASH_INLINE static inline __attribute__((always_inline))
/* The register blocks below are unrolled with "#pragma GCC unroll 32": a block of 24 (EPV) that
 * GCC cannot unroll fully keeps its accumulators in memory (a load, FMA and store for every
 * term: it made the 16-lane decode kernel's P x V twice as slow as its Q K^T). */

/* S^T rows [jj, jj + R) of the current key tile: R key rows x LANES queries in registers, then
 * the fused epilogue (scale, mask, causal, running tile max) and one store.
 * The dot products are summed in blocks of DB terms (a fresh partial sum per block, added to the
 * total): the rounding error grows like sqrt(D * DB) + D / sqrt(DB) instead of D, which halves
 * the score error of a plain running sum at D = 64..256 for the price of one add per DB FMAs.
 * The scale is applied after the sum (pre-scaling q adds a rounding per term). */
typedef struct FLASH_NAME(qk_epi) {
    float scale;
    const float *mrow;  /* FLASH_MASK_ROW: one mask value per key row, or NULL */
    const float *mt;    /* FLASH_MASK_TILE: mask tile [BKT][LANES], or NULL */
    const int32_t *lim; /* per-lane upper limits (causal, window right side) */
    const int32_t *neglo; /* per-lane minus the lower limits (window left side) */
    int64_t kfull;      /* keys >= kfull need the upper compare */
    int64_t klo;        /* keys < klo need the lower compare */
    int causal;         /* an upper limit applies */
    int lower;          /* a lower limit applies */
} FLASH_NAME(qk_epi);

FLASH_INLINE void FLASH_NAME(qk_block)(const int R, const float *qt, int64_t Dp, const float *k0,
                                       int64_t kstride, float *st, int64_t j, const FLASH_NAME(qk_epi) *ep,
                                       int64_t jj, vf *tmax) {
    vf acc[RQK][NV], blk[RQK][NV], qv[NV];
    const float *kr[RQK];
#pragma GCC unroll 32
    for (int r = 0; r < R; r++) {
        kr[r] = k0 + r * kstride;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[r][v] = vf_zero();
    }
    for (int64_t d0 = 0; d0 < Dp; d0 += DB) { /* Dp = D / TS slices */
        const int64_t d1 = Dp - d0 < DB ? Dp : d0 + DB;
#pragma GCC unroll 32
        for (int r = 0; r < R; r++) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) blk[r][v] = vf_zero();
        }
        for (int64_t d = d0; d < d1; d++) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) qv[v] = vf_load(qt + d * LANES + v * VL);
#pragma GCC unroll 32
            for (int r = 0; r < R; r++) {
                vf kb = VF_BCAST_T(kr[r] + d * TS);
#pragma GCC unroll 8
                for (int v = 0; v < NV; v++) blk[r][v] = vf_fma(kb, qv[v], blk[r][v]);
            }
        }
#pragma GCC unroll 32
        for (int r = 0; r < R; r++) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = vf_add(acc[r][v], blk[r][v]);
        }
    }
#if TS > 1
#pragma GCC unroll 32
    for (int r = 0; r < R; r++) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[r][v] = vf_group_sum(acc[r][v]);
    }
#endif
    /* epilogue: the arguments come from memory here, keeping registers free for the loop above */
    const vf scale = vf_set1(ep->scale);
    const float *mrow = ep->mrow ? ep->mrow + jj : NULL;
    const float *mt = ep->mt ? ep->mt + jj * LANES : NULL;
    const int partial = ep->causal && j + R - 1 >= ep->kfull;
    const int partial_lo = ep->lower && j < ep->klo;
    const int32_t *lim = ep->lim, *neglo = ep->neglo;
#pragma GCC unroll 32
    for (int r = 0; r < R; r++) {
        if (mrow) {
            vf mb = vf_set1(mrow[r]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = vf_fma(acc[r][v], scale, mb);
        } else if (mt) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = vf_fma(acc[r][v], scale, vf_load(mt + r * LANES + v * VL));
        } else {
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = vf_mul(acc[r][v], scale);
        }
        if (partial) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = vf_mask_gt(acc[r][v], (int32_t)(j + r), lim + v * VL);
        }
        if (partial_lo) { /* j < lo  <=>  -j > -lo */
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = vf_mask_gt(acc[r][v], (int32_t)-(j + r), neglo + v * VL);
        }
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            tmax[v] = vf_max(tmax[v], acc[r][v]);
            vf_store(st + r * LANES + v * VL, acc[r][v]);
        }
    }
}

/* O^T rows [e, e + E): the tile's sum over its nk key rows of P^T x V, started from zero (a
 * blocked sum again: one block per key tile), then O^T = O^T * alpha + sum. */
FLASH_INLINE void FLASH_NAME(pv_block)(const int E, float *ot, const float *pt, int64_t nk, const float *v0,
                                       int64_t vstride, const vf *alpha) {
    vf acc[EPV][NV];
#pragma GCC unroll 32
    for (int r = 0; r < E; r++) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) acc[r][v] = vf_zero();
    }
    const float *vp = v0;
    for (int64_t jj = 0; jj < nk; jj++, vp += vstride) {
        vf p[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) p[v] = vf_load(pt + jj * LANES + v * VL);
#pragma GCC unroll 32
        for (int r = 0; r < E; r++) {
            vf vb = VF_BCAST_T(vp + r * TS);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = vf_fma(vb, p[v], acc[r][v]);
        }
    }
#pragma GCC unroll 32
    for (int r = 0; r < E; r++) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            float *op = ot + r * LANES + v * VL;
            vf_store(op, vf_fma(vf_load(op), alpha[v], acc[r][v]));
        }
    }
}

__attribute__((noinline)) static void FLASH_NAME(qk_tile)(const float *qt, int64_t Dp, const float *kbase, int64_t kstride, float *st,
                                int64_t j0, int64_t nk, const FLASH_NAME(qk_epi) *ep, vf *tmax) {
    int64_t jj = 0;
#define FLASH_QK(Rn)                                                                                         \
    FLASH_NAME(qk_block)(Rn, qt, Dp, kbase + jj * kstride, kstride, st + jj * LANES, j0 + jj, ep, jj, tmax); \
    jj += (Rn)
    while (jj + RQK <= nk) { FLASH_QK(RQK); }
#if RQK > 8
    while (nk - jj >= 8) { FLASH_QK(8); }
#endif
#if RQK > 4
    while (nk - jj >= 4) { FLASH_QK(4); }
#endif
#if RQK > 2
    while (nk - jj >= 2) { FLASH_QK(2); }
#endif
#if RQK > 1
    while (nk - jj >= 1) { FLASH_QK(1); }
#endif
#undef FLASH_QK
}

__attribute__((noinline)) static void FLASH_NAME(pv_tile)(float *ot, int64_t Dvp, const float *pt, int64_t nk, const float *vbase,
                                int64_t vstride, const vf *alpha) {
    int64_t e = 0;
#define FLASH_PV(En)                                                                          \
    FLASH_NAME(pv_block)(En, ot + e * LANES, pt, nk, vbase + e * TS, vstride, alpha);        \
    e += (En)
    while (e + EPV <= Dvp) { FLASH_PV(EPV); } /* Dvp = Dv / TS slices */
#if EPV > 8
    while (Dvp - e >= 8) { FLASH_PV(8); }
#endif
#if EPV > 4
    while (Dvp - e >= 4) { FLASH_PV(4); }
#endif
#if EPV > 2
    while (Dvp - e >= 2) { FLASH_PV(2); }
#endif
#if EPV > 1
    while (Dvp - e >= 1) { FLASH_PV(1); }
#endif
#undef FLASH_PV
}

/* Logit softcapping over a tile's scores (scalar: no vector tanh here), then the mask (row or
 * tile, ALiBi folded in) that the epilogue left out, and the tile max again. -inf (outside the
 * window, causal) stays -inf. */
static void FLASH_NAME(softcap_pass)(float cap, float *st, int64_t nk, const float *mrow, const float *mt, vf *tmax) {
    const float inv = 1.0f / cap;
    for (int v = 0; v < NV; v++) tmax[v] = vf_set1(-INFINITY);
    for (int64_t jj = 0; jj < nk; jj++) {
        float *sp = st + jj * LANES;
        for (int l = 0; l < LANES; l++) {
            float x = sp[l];
            if (x == -INFINITY) continue;
            x = cap * tanhf(x * inv);
            if (mrow) x += mrow[jj];
            else if (mt) x += mt[jj * LANES + l];
            sp[l] = x;
        }
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) tmax[v] = vf_max(tmax[v], vf_load(sp + v * VL));
    }
}

/* Qt[d][lane] = q_lane[d * qsd] for the nrow valid lanes, 0 for the others. With unit stride,
 * VL x VL blocks go through a register transpose when the ISA has one (vf_transpose), a partly
 * valid block too (zero vectors for its missing lanes: short sequences fill part of a tile, and
 * a scalar loop there cost as much as the tile's arithmetic at Sq = 27, D = 32). */
static void FLASH_NAME(pack_qt)(float *qt, const float *const *qrow, int64_t nrow, int64_t D, int64_t qsd) {
#if TS > 1
    /* slices: Qt[d'][row * TS + t] = q_row[d' * TS + t], zero for the missing rows */
    for (int64_t dp = 0; dp < D / TS; dp++)
        for (int l = 0; l < ROWS; l++)
            for (int t = 0; t < TS; t++)
                qt[dp * LANES + l * TS + t] = l < nrow ? qrow[l][(dp * TS + t) * qsd] : 0.0f;
#else
    int l0 = 0;
#ifdef VF_HAS_TRANSPOSE
    if (qsd == 1) {
        for (; l0 < LANES; l0 += VL) {
            const int64_t nv = nrow - l0 < 0 ? 0 : nrow - l0 > VL ? VL : nrow - l0;
            int64_t d0 = 0;
            if (nv == 0) {
                for (int64_t d = 0; d < D; d++) vf_store(qt + d * LANES + l0, vf_zero());
                continue;
            }
            for (; d0 + VL <= D; d0 += VL) {
                vf t[VL];
#pragma GCC unroll 16
                for (int k = 0; k < VL; k++) t[k] = k < nv ? vf_load(qrow[l0 + k] + d0) : vf_zero();
                vf_transpose(t);
#pragma GCC unroll 16
                for (int k = 0; k < VL; k++) vf_store(qt + (d0 + k) * LANES + l0, t[k]);
            }
            for (; d0 < D; d0++)
                for (int k = 0; k < VL; k++) qt[d0 * LANES + l0 + k] = k < nv ? qrow[l0 + k][d0] : 0.0f;
        }
    }
#endif
    for (int l = l0; l < LANES; l++) {
        if (l < nrow) {
            const float *q = qrow[l];
            for (int64_t d = 0; d < D; d++) qt[d * LANES + l] = q[d * qsd];
        } else {
            for (int64_t d = 0; d < D; d++) qt[d * LANES + l] = 0.0f;
        }
    }
#endif
}

/* o_lane[e * osd] = Ot[e][lane] * inv[lane] for the nrow valid lanes (transposed back like Q). */
static void FLASH_NAME(store_o)(float *const *orow, const float *ot, const float *inv, int64_t nrow, int64_t Dv,
                                int64_t osd) {
#if TS > 1
    for (int l = 0; l < nrow; l++) { /* o_row[e] sits at O^T'[e / TS][row * TS + e % TS] */
        float *o = orow[l];
        for (int64_t e = 0; e < Dv; e++) o[e * osd] = ot[(e / TS) * LANES + l * TS + e % TS] * inv[l];
    }
#else
    int l0 = 0;
#ifdef VF_HAS_TRANSPOSE
    if (osd == 1) {
        for (; l0 < nrow; l0 += VL) {
            const int64_t nv = nrow - l0 > VL ? VL : nrow - l0; /* a partly valid block too */
            int64_t e0 = 0;
            for (; e0 + VL <= Dv; e0 += VL) {
                vf t[VL];
#pragma GCC unroll 16
                for (int k = 0; k < VL; k++) t[k] = vf_load(ot + (e0 + k) * LANES + l0);
                vf_transpose(t);
#pragma GCC unroll 16
                for (int k = 0; k < VL; k++)
                    if (k < nv) vf_store(orow[l0 + k] + e0, vf_mul(t[k], vf_set1(inv[l0 + k])));
            }
            for (; e0 < Dv; e0++)
                for (int k = 0; k < nv; k++) orow[l0 + k][e0] = ot[e0 * LANES + l0 + k] * inv[l0 + k];
        }
    }
#endif
    for (int l = l0; l < nrow; l++) {
        float *o = orow[l];
        for (int64_t e = 0; e < Dv; e++) o[e * osd] = ot[e * LANES + l] * inv[l];
    }
#endif
}

/* Query tile t of (b, kv head hk) over the keys [ka, kb) (clipped to what the tile may see):
 * leaves the running max and sum in the workspace's lane area and the unnormalised O^T in its
 * ot. Returns the tile's number of valid rows. kh, vh: the head's K and V rows, ksr and vsr
 * floats apart (its rows in the tensors, or their packed copy). */
static int64_t FLASH_NAME(tile_run)(const flash_job *job, int64_t b, int64_t hk, int64_t t, int64_t ka, int64_t kb,
                                    float *ws, const float *kh, int64_t ksr, const float *vh, int64_t vsr) {
    const int64_t G = job->G, D = job->D, Dv = job->Dv;
    const int64_t r0 = t * ROWS;
    const int64_t nrow = job->rows - r0 < ROWS ? job->rows - r0 : ROWS;

    float *qt = ws + job->off_qt, *st = ws + job->off_st, *ot = ws + job->off_ot;
    float *mt = job->mask_mode == FLASH_MASK_TILE ? ws + job->off_mt : NULL;
    float *mrow = job->mask_mode == FLASH_MASK_ROW ? ws + job->off_mrow : NULL;
    int32_t *lim = (int32_t *)(void *)(ws + job->off_lane);
    float *mrun = ws + job->off_lane + LANES, *lrun = ws + job->off_lane + 2 * LANES;
    int32_t *neglo = (int32_t *)(void *)(ws + job->off_lane + 3 * LANES);

    int64_t Lb = job->Sk;
    if (job->kv_lens) {
        Lb = job->kv_lens[b];
        if (Lb < 0) Lb = 0;
        if (Lb > job->Sk) Lb = job->Sk;
    }
    const int64_t off = Lb - job->Sq; /* i' = i + off (attention.h): causal sees j <= i', a window [i' - wl, i' + wr] */

    /* Lanes (TS of them per row): upper and lower limits, the query range of the tile, then Q^T packed. */
    int64_t imin = INT64_MAX, imax = -1;
    const float *qrow[ROWS];
    for (int l = 0; l < ROWS; l++) {
        int32_t lm = INT32_MAX, nl = INT32_MAX;
        if (l < nrow) {
            const int64_t r = r0 + l, i = G == 1 ? r : r / G, h = G == 1 ? hk : hk * G + r % G;
            qrow[l] = job->q + b * job->qs[0] + h * job->qs[1] + i * job->qs[2];
            int64_t li = i + off + job->rw;
            lm = !job->upper ? INT32_MAX : li < -1 ? -1 : li > INT32_MAX ? INT32_MAX : (int32_t)li;
            int64_t lo = i + off - job->wl; /* keys j < lo are left of the window */
            nl = !job->lower ? INT32_MAX : lo < 0 ? 0 : lo > INT32_MAX ? -INT32_MAX : (int32_t)-lo;
            if (i < imin) imin = i;
            if (i > imax) imax = i;
        } else {
            qrow[l] = NULL;
        }
        for (int ts = 0; ts < TS; ts++) {
            lim[l * TS + ts] = lm;
            neglo[l * TS + ts] = nl;
            mrun[l * TS + ts] = -INFINITY;
            lrun[l * TS + ts] = 0.0f;
        }
    }
    FLASH_NAME(pack_qt)(qt, qrow, nrow, D, job->qs[3]);
    memset(ot, 0, sizeof(float) * (size_t)(Dv / TS * LANES));

    /* Keys [kstart, kend) are visible to some lane; keys [klo, kfull) pass every lane's limits.
     * Everything past kend (causal future, right of the window, kv_lens padding) and the whole
     * key tiles before kstart (left of the window) are never touched: a window costs the keys it
     * shows, not Sk. kstart stays on the tile grid (ka + n * BKT), so a key's tile is the same
     * with and without a window and a row's bits do not depend on its tile's neighbours. */
    int64_t kend = Lb, kfull = Lb, kstart = ka, klo = 0;
    if (job->upper) {
        kend = imax + off + job->rw + 1 < Lb ? imax + off + job->rw + 1 : Lb;
        if (kend < 0) kend = 0;
        kfull = imin + off + job->rw + 1 < kend ? imin + off + job->rw + 1 : kend;
        if (kfull < 0) kfull = 0;
    }
    if (job->lower && nrow > 0) {
        const int64_t first = imin + off - job->wl; /* the first key any lane sees */
        klo = imax + off - job->wl;                 /* keys from here pass every lane's lower limit */
        if (first > ka) kstart = ka + (first - ka) / BKT * BKT;
    }
    if (kend > kb) kend = kb; /* a split's share of the keys (tile_split) */

    const float *mb = NULL;
    if (job->mask) mb = job->mask + b * job->ms[0];
    if (mrow) {
        /* every lane reads the same row: take lane 0's */
        const int64_t i = r0 / G, h = hk * G + r0 % G;
        mb += h * job->ms[1] + i * job->ms[2];
    }

    FLASH_NAME(qk_epi) epi;
    epi.scale = job->scale;
    epi.mrow = mrow;
    epi.mt = mt;
    epi.lim = lim;
    epi.kfull = kfull;
    epi.causal = job->upper;
    epi.neglo = neglo;
    epi.klo = klo;
    epi.lower = job->lower;
    if (job->softcap > 0.0f) epi.mrow = NULL, epi.mt = NULL; /* added after the cap (softcap_pass) */

    for (int64_t j0 = kstart; j0 < kend; j0 += BKT) {
        const int64_t nk = kend - j0 < BKT ? kend - j0 : BKT;

        const float *kbase = kh + j0 * ksr;
        int64_t kstride = ksr;
        if (!job->k_unit) {
            float *kp = ws + job->off_kp;
            for (int64_t jj = 0; jj < nk; jj++)
                for (int64_t d = 0; d < D; d++) kp[jj * D + d] = kbase[jj * job->ks[2] + d * job->ks[3]];
            kbase = kp;
            kstride = D;
        }
        if (mrow) {
            for (int64_t jj = 0; jj < nk; jj++) mrow[jj] = mb[(j0 + jj) * job->ms[3]];
        } else if (mt) {
            for (int l = 0; l < LANES; l++) { /* lane l is row l / TS's */
                if (l / TS < nrow) {
                    const int64_t r = r0 + l / TS, i = r / G, h = hk * G + r % G;
                    if (mb) {
                        const float *mr = mb + h * job->ms[1] + i * job->ms[2] + j0 * job->ms[3];
                        for (int64_t jj = 0; jj < nk; jj++) mt[jj * LANES + l] = mr[jj * job->ms[3]];
                    } else {
                        for (int64_t jj = 0; jj < nk; jj++) mt[jj * LANES + l] = 0.0f;
                    }
                    if (job->slopes) { /* ALiBi: - slope * |i' - j| (an -inf mask stays -inf) */
                        const float sl = job->slopes[h];
                        const int64_t ip = i + off;
                        for (int64_t jj = 0; jj < nk; jj++) {
                            const int64_t dist = ip - (j0 + jj);
                            mt[jj * LANES + l] -= sl * (float)(dist < 0 ? -dist : dist);
                        }
                    }
                } else {
                    for (int64_t jj = 0; jj < nk; jj++) mt[jj * LANES + l] = 0.0f;
                }
            }
        }

        vf tmax[NV];
        for (int v = 0; v < NV; v++) tmax[v] = vf_set1(-INFINITY);
        FLASH_NAME(qk_tile)(qt, D / TS, kbase, kstride, st, j0, nk, &epi, tmax);
        if (job->softcap > 0.0f) FLASH_NAME(softcap_pass)(job->softcap, st, nk, mrow, mt, tmax);

        /* Online softmax. msafe keeps a lane that has seen only -inf finite (exp(-inf) = 0, never
         * -inf - -inf = NaN). */
        vf alpha[NV], msafe[NV], lsum[NV];
        for (int v = 0; v < NV; v++) {
            vf mold = vf_load(mrun + v * VL);
            vf mnew = vf_max(mold, tmax[v]);
            msafe[v] = vf_max(mnew, vf_set1(-FLT_MAX));
            alpha[v] = vf_exp(vf_sub(mold, msafe[v]));
            vf_store(mrun + v * VL, mnew);
            lsum[v] = vf_zero();
        }
        for (int64_t jj = 0; jj < nk; jj++) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) {
                float *sp = st + jj * LANES + v * VL;
                vf p = vf_exp(vf_sub(vf_load(sp), msafe[v]));
                vf_store(sp, p);
                lsum[v] = vf_add(lsum[v], p);
            }
        }
        for (int v = 0; v < NV; v++)
            vf_store(lrun + v * VL, vf_fma(vf_load(lrun + v * VL), alpha[v], lsum[v]));

        const float *vbase = vh + j0 * vsr;
        int64_t vstride = vsr;
        if (!job->v_unit) {
            float *vpk = ws + job->off_vp;
            for (int64_t jj = 0; jj < nk; jj++)
                for (int64_t e = 0; e < Dv; e++) vpk[jj * Dv + e] = vbase[jj * job->vs[2] + e * job->vs[3]];
            vbase = vpk;
            vstride = Dv;
        }
        FLASH_NAME(pv_tile)(ot, Dv / TS, st, nk, vbase, vstride, alpha);
    }
    return nrow;
}

/* The head's rows in the tensors (b, kv head hk). */
static inline const float *FLASH_NAME(k_head)(const flash_job *job, int64_t b, int64_t hk) {
    return job->k + b * job->ks[0] + hk * job->ks[1];
}
static inline const float *FLASH_NAME(v_head)(const flash_job *job, int64_t b, int64_t hk) {
    return job->v + b * job->vs[0] + hk * job->vs[1];
}

/* O = O^T / l and LSE of query tile t of (b, kv head hk), nrow valid rows, after tile_run. */
static void FLASH_NAME(tile_store)(const flash_job *job, int64_t b, int64_t hk, int64_t t, int64_t nrow, float *ws) {
    const int64_t G = job->G, Dv = job->Dv;
    const int64_t r0 = t * ROWS;
    float *st = ws + job->off_st, *ot = ws + job->off_ot;
    float *mrun = ws + job->off_lane + LANES, *lrun = ws + job->off_lane + 2 * LANES;

    /* O = O^T / l, LSE = m + log l; a lane that saw no key gets O = 0, LSE = -inf. */
    float *orow[ROWS];
    float *inv = st; /* the scores are done with: ROWS floats of scratch */
    for (int l = 0; l < nrow; l++) {
        const int64_t r = r0 + l, i = G == 1 ? r : r / G, h = G == 1 ? hk : hk * G + r % G;
        const float lv = lrun[l * TS]; /* a row's TS lanes hold the same running max and sum */
        inv[l] = lv > 0.0f ? 1.0f / lv : 0.0f;
        orow[l] = job->o + b * job->os[0] + h * job->os[1] + i * job->os[2];
        if (job->lse)
            job->lse[b * job->ls[0] + h * job->ls[1] + i * job->ls[2]] =
                lv > 0.0f ? (float)((double)mrun[l * TS] + log((double)lv)) : -INFINITY;
    }
    FLASH_NAME(store_o)(orow, ot, inv, nrow, Dv, job->os[3]);
}

/* Packed heads (job->ngroups > 0, see flash.h): item = (b, kv head, group of query tiles); the
 * head's keys [0, L) are copied once, then each tile of the group runs as below over the copy. */
static void FLASH_NAME(tile_group)(const flash_job *job, int64_t item, float *ws) {
    const int64_t ng = job->ngroups, nt = job->ntiles, D = job->D, Dv = job->Dv;
    const int64_t g = item % ng, bh = item / ng, b = bh / job->Hkv, hk = bh % job->Hkv;
    int64_t L = job->Sk;
    if (job->kv_lens) { /* tile_run's clip: no key past L is read */
        L = job->kv_lens[b];
        if (L < 0) L = 0;
        if (L > job->Sk) L = job->Sk;
    }
    const float *kh = FLASH_NAME(k_head)(job, b, hk), *vh = FLASH_NAME(v_head)(job, b, hk);
    float *kp = ws + job->off_kh, *vp = ws + job->off_vh;
    for (int64_t j = 0; j < L; j++) {
        memcpy(kp + j * D, kh + j * job->ks[2], sizeof(float) * (size_t)D);
        memcpy(vp + j * Dv, vh + j * job->vs[2], sizeof(float) * (size_t)Dv);
    }
    const int64_t t0 = g * nt / ng, t1 = (g + 1) * nt / ng;
    for (int64_t t = t1 - 1; t >= t0; t--) {
        const int64_t nrow = FLASH_NAME(tile_run)(job, b, hk, t, 0, INT64_MAX, ws, kp, D, vp, Dv);
        FLASH_NAME(tile_store)(job, b, hk, t, nrow, ws);
    }
}

static void FLASH_NAME(tile)(const flash_job *job, int64_t item, float *ws) {
    if (job->ngroups > 0) {
        FLASH_NAME(tile_group)(job, item, ws);
        return;
    }
    const int64_t nt = job->ntiles;
    const int64_t t = nt - 1 - item % nt; /* the heaviest (causal: last) tiles of a head go first */
    const int64_t bh = item / nt, b = bh / job->Hkv, hk = bh % job->Hkv;
    const int64_t nrow = FLASH_NAME(tile_run)(job, b, hk, t, 0, INT64_MAX, ws, FLASH_NAME(k_head)(job, b, hk),
                                              job->ks[2], FLASH_NAME(v_head)(job, b, hk), job->vs[2]);
    FLASH_NAME(tile_store)(job, b, hk, t, nrow, ws);
}

/* Split-KV (decode: every query row of a kv head in one tile): item = (b, kv head, split s) over
 * the keys [s * split_keys, (s + 1) * split_keys); its running max, sum and unnormalised O^T go to
 * job->part + item * part_floats ([Dv / TS][LANES] O^T', then m[LANES], l[LANES] right after it; lane
 * row * TS + t) for the merge (cpu_flash.c, which reads them with job->slices = TS). The split points depend on the lengths alone, never on the threads. */
static void FLASH_NAME(tile_split)(const flash_job *job, int64_t item, float *ws) {
    const int64_t s = item % job->nsplit, bh = item / job->nsplit, b = bh / job->Hkv, hk = bh % job->Hkv;
    FLASH_NAME(tile_run)(job, b, hk, 0, s * job->split_keys, (s + 1) * job->split_keys, ws,
                         FLASH_NAME(k_head)(job, b, hk), job->ks[2], FLASH_NAME(v_head)(job, b, hk), job->vs[2]);
    float *part = job->part + (size_t)item * job->part_floats;
    memcpy(part, ws + job->off_ot, sizeof(float) * (size_t)(job->Dv / TS * LANES));
    memcpy(part + job->Dv / TS * LANES, ws + job->off_lane + LANES, sizeof(float) * 2 * LANES);
}

static void FLASH_NAME(exp_array)(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) vf_store(y + i, vf_exp(vf_load(x + i)));
    if (i < n) {
        float bx[VL], by[VL];
        for (int k = 0; k < VL; k++) bx[k] = i + k < n ? x[i + k] : 0.0f;
        vf_store(by, vf_exp(vf_load(bx)));
        for (int k = 0; i + k < n; k++) y[i + k] = by[k];
    }
}

static void FLASH_NAME(exp2_array)(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) vf_store(y + i, vf_exp2(vf_load(x + i)));
    if (i < n) {
        float bx[VL], by[VL];
        for (int k = 0; k < VL; k++) bx[k] = i + k < n ? x[i + k] : 0.0f;
        vf_store(by, vf_exp2(vf_load(bx)));
        for (int k = 0; i + k < n; k++) y[i + k] = by[k];
    }
}

#undef LANES
#undef ROWS
#undef VF_BCAST_T
#ifdef FLASH_TS_DEFAULTED
#undef TS
#undef FLASH_TS_DEFAULTED
#endif
#undef FLASH_INLINE
