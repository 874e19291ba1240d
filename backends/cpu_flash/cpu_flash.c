/* backends/cpu_flash/cpu_flash.c — "cpu_flash": exact attention on the CPU, tiled with an online
 * softmax (FlashAttention's algorithm), SIMD kernels chosen at run time. Fast version; the oracle
 * is backends/reference.
 *
 * This file is the driver: supports(), the per-thread workspace layout, splitting the call into
 * work items (b, kv head, query tile) over exec->parallel_for, and the choice of ISA kernel
 * (arch/avx512.c, arch/avx2.c, arch/neon.c, arch/scalar.c; see flash.h and flash_kernel.inc.h).
 * Decode (a kv head's G * Sq query rows fit one tile): the ISA's narrower kernels where it has
 * them (shape_isa: 16 lanes on AVX-512, 8 on AVX2, and for Sq = 1 sliced kernels that give each
 * row several lanes), so no arithmetic on empty lanes, and split-KV once Sk > SPLIT_KEYS: work
 * items (b, kv head, key range of SPLIT_KEYS) each leave a partial max, sum and O, merged per
 * (b, kv head) in split order through their log-sum-exp (FlashDecoding's scheme), so one head's
 * long cache is read by every thread instead of one.
 * Deterministic: every output element is computed by one work item (or merged from a fixed set of
 * them) in a fixed order, so results are bitwise identical whatever the thread count or
 * scheduling. */
#include "backends/cpu_flash/flash.h"

#include "modattn/core.h"
#include "core/internal_core.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ ISA choice */

/* Forced by the control op for calls made from the forcing thread only (the kernel is chosen on
 * the calling thread, before any work is handed to the pool): a test or benchmark that forces an
 * ISA never changes what other threads of the process run. */
static _Thread_local const flash_isa *g_forced_isa;

static const flash_isa *isa_auto(void) {
    const modattn_cpu_features *f = modattn__cpu_get();
    (void)f;
#if defined(__x86_64__) || defined(__i386__)
    if (f->avx512f && f->fma) return modattn__flash_isa_avx512();
    if (f->avx2 && f->fma) return modattn__flash_isa_avx2();
#endif
#if defined(__aarch64__)
    if (f->neon) return modattn__flash_isa_neon();
#endif
    return modattn__flash_isa_scalar();
}

const flash_isa *modattn__flash_isa_select(void) {
    const flash_isa *forced = g_forced_isa;
    return forced ? forced : isa_auto();
}

const flash_isa *modattn__flash_isa_by_name(const char *name) {
    const modattn_cpu_features *f = modattn__cpu_get();
    (void)f;
    if (!name) return NULL;
    if (strcmp(name, "scalar") == 0) return modattn__flash_isa_scalar();
#if defined(__x86_64__) || defined(__i386__)
    if (strcmp(name, "avx512") == 0) return f->avx512f && f->fma ? modattn__flash_isa_avx512() : NULL;
    if (strcmp(name, "avx2") == 0) return f->avx2 && f->fma ? modattn__flash_isa_avx2() : NULL;
#endif
#if defined(__aarch64__)
    if (strcmp(name, "neon") == 0) return f->neon ? modattn__flash_isa_neon() : NULL;
#endif
    return NULL;
}

/* ------------------------------------------------------------------ workspace layout */

#define FLASH_MAX_DIM 65536          /* D, Dv: keeps every size below trivially in range */
#define FLASH_MAX_SEQ (INT64_C(1) << 30) /* key/query indices are compared as int32 */
#define FLASH_MAX_LANES 64               /* the widest kernel's lanes (merge_task's buffers) */

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Keys per split-KV work item (4 of AVX-512's decode key tiles). Fixed, so the split points (and
 * the results' bits) depend on the shape alone. */
#define SPLIT_KEYS 512

/* The kernel for this shape: the narrowest one whose tile the rows of a kv head fit (and whose
 * slices divide D and Dv). Sliced kernels (several lanes a row) only when Sq = 1, decode: they
 * sum a row's dot products in another order than the kernels with a lane per row, so a query
 * row's bits would otherwise depend on how many rows its call has. Those kernels compute a lane
 * alike whatever their width (and a short sequence's keys fit one key tile of either), so an
 * encoder's text gives the same bits alone (Sq = its length) and padded in a batch; a decode
 * step's rows are G whatever the batch. A one-token text alone (Sq = 1) does take a sliced
 * kernel, and its output is still the same bits: with one key, P = e^0 = 1 exactly and O = V[0]
 * in any kernel (its LSE would differ; the encoder asks for none). test_kernels checks it. */
static const flash_isa *shape_isa(const modattn_attn_desc *d) {
    const flash_isa *isa = modattn__flash_isa_select();
    const int64_t rows = d->Hkv > 0 ? d->Hq / d->Hkv * d->Sq : d->Sq;
    for (const flash_isa *n = isa->narrow; n && rows <= flash_isa_rows(n); n = n->narrow) {
        const int ts = flash_isa_slices(n);
        if (ts > 1 && (d->Sq != 1 || d->D % ts != 0 || d->Dv % ts != 0)) break;
        isa = n;
    }
    return isa;
}

/* Split-KV: the number of key ranges per (b, kv head), 1 when not split. */
static int64_t shape_splits(const modattn_attn_desc *d, const flash_isa *isa) {
    const int64_t rows = d->Hkv > 0 ? d->Hq / d->Hkv * d->Sq : d->Sq;
    if (rows > flash_isa_rows(isa) || d->Sk <= SPLIT_KEYS || !isa->tile_split || isa->lanes > FLASH_MAX_LANES)
        return 1;
    return (d->Sk + SPLIT_KEYS - 1) / SPLIT_KEYS;
}

/* Packed heads (flash.h): where a kv head's K and V rows are far apart (the encoder's QKV rows:
 * 3 H floats, so a 32-float key row is a line or two on a page of its own, the rows of a tile
 * falling into a few cache sets), every query tile read them from there, and the kernel ran at
 * 44 GFLOP/s a core against 52 with contiguous rows (B=25, H=12, S=210, D=32, AVX2). A group of up
 * to HEAD_PACK_TILES query tiles copies them once (Sk (D + Dv) floats, against 16 x that in FMAs
 * per tile) and reads the copy. Only where a tile sees all of a head's keys (no causal or window
 * limit: the copy is the keys [0, L)), the head has more than one tile, and Sk <= HEAD_PACK_KEYS;
 * longer heads read their rows in place as before (same bits either way).
 * The copy's room in each thread's slice is HEAD_PACK_KEYS (D + Dv) floats whatever Sk and Sq
 * (head_pack_room: desc has no strides, so it is there wherever packing could be used): a
 * workspace sized by the longest Sk seen would grow from one call to the next (test_no_growth). */
#define HEAD_PACK_KEYS 512 /* every key of a BERT-sized text; 128 KiB a thread at D = Dv = 32 */
#define HEAD_PACK_TILES 8
#define HEAD_PACK_DIMS 256 /* D + Dv at most (512 KiB a thread at 128 + 128); wider heads read in place */

static bool head_pack_room(const modattn_attn_desc *d, const flash_isa *isa) {
    return !d->causal && !d->has_window && d->inner_contiguous && flash_isa_slices(isa) == 1 &&
           d->D + d->Dv <= HEAD_PACK_DIMS;
}

static bool head_pack_shape(const modattn_attn_desc *d, const flash_isa *isa) {
    const int64_t rows = d->Hkv > 0 ? d->Hq / d->Hkv * d->Sq : d->Sq;
    return head_pack_room(d, isa) && rows > flash_isa_rows(isa) && d->Sk <= HEAD_PACK_KEYS;
}

/* floats of the split partials after the threads' slices */
static size_t split_floats(const modattn_attn_desc *d, const flash_isa *isa, int64_t nsplit) {
    if (nsplit <= 1) return 0;
    const size_t per = round16((size_t)(d->Dv / flash_isa_slices(isa)) * (size_t)isa->lanes + 2 * (size_t)isa->lanes);
    /* and one counter of splits left per (b, kv head) */
    return (size_t)d->B * (size_t)d->Hkv * (size_t)nsplit * per + round16((size_t)d->B * (size_t)d->Hkv);
}

/* Fills the offsets of one thread's slice; everything follows from desc alone, so that
 * workspace_bytes() and run() agree. */
static void layout(const modattn_attn_desc *d, const flash_isa *isa, flash_job *job) {
    const size_t L = (size_t)isa->lanes, BK = (size_t)isa->bk;
    const size_t D = (size_t)d->D, Dv = (size_t)d->Dv;
    size_t at = 0;
    job->lanes = isa->lanes;
    job->bk = isa->bk;
    job->slices = flash_isa_slices(isa);
    job->off_qt = at, at += round16(D * L);
    job->off_st = at, at += round16(BK * L);
    job->off_ot = at, at += round16(Dv * L);
    job->off_lane = at, at += round16(4 * L); /* lim, m, l, -lo */
    job->off_mt = job->off_mrow = 0;
    if (d->has_mask || d->has_alibi) {
        job->off_mt = at, at += round16(BK * L);
        job->off_mrow = at, at += round16(BK);
    }
    job->off_kp = job->off_vp = 0;
    if (!d->inner_contiguous) { /* some last-dim stride is not 1: K / V tiles get packed */
        job->off_kp = at, at += round16(BK * D);
        job->off_vp = at, at += round16(BK * Dv);
    }
    job->off_kh = job->off_vh = 0;
    if (head_pack_room(d, isa)) { /* packed heads (used where the rows are apart), Sk-independent */
        job->off_kh = at, at += round16((size_t)HEAD_PACK_KEYS * D);
        job->off_vh = at, at += round16((size_t)HEAD_PACK_KEYS * Dv);
    }
    job->ws_slice_floats = at;
}

/* ------------------------------------------------------------------ the impl slots */

static bool flash_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx;
    if (d->device.kind != MODATTN_DEVICE_CPU) {
        snprintf(reason, len, "cpu_flash runs on the CPU; tensors are on %s", modattn_device_kind_name(d->device.kind));
        return false;
    }
    if (d->dtype != MODATTN_DTYPE_F32) {
        snprintf(reason, len, "cpu_flash computes in fp32 only; dtype is %s", modattn_dtype_name(d->dtype));
        return false;
    }
    if (d->D < 0 || d->D > FLASH_MAX_DIM || d->Dv < 0 || d->Dv > FLASH_MAX_DIM) {
        snprintf(reason, len, "cpu_flash needs D, Dv <= %d (D=%lld, Dv=%lld)",
                 FLASH_MAX_DIM, (long long)d->D, (long long)d->Dv);
        return false;
    }
    if (d->Sq > FLASH_MAX_SEQ || d->Sk > FLASH_MAX_SEQ) {
        snprintf(reason, len, "cpu_flash handles Sq, Sk <= 2^30 (Sq=%lld, Sk=%lld)", (long long)d->Sq,
                 (long long)d->Sk);
        return false;
    }
    if (d->has_alibi && (d->Sq > (INT64_C(1) << 24) || d->Sk > (INT64_C(1) << 24))) {
        snprintf(reason, len, "cpu_flash computes ALiBi distances in fp32, exact up to 2^24: Sq=%lld, Sk=%lld",
                 (long long)d->Sq, (long long)d->Sk);
        return false;
    }
    if (d->Hq > 0 && (d->Hkv < 1 || d->Hq % d->Hkv != 0)) {
        snprintf(reason, len, "Hq=%lld is not a multiple of Hkv=%lld", (long long)d->Hq, (long long)d->Hkv);
        return false;
    }
    return true;
}

static size_t flash_workspace_bytes(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx;
    flash_job job;
    const flash_isa *isa = shape_isa(d);
    layout(d, isa, &job);
    if (nthreads < 1) nthreads = 1;
    return ((size_t)nthreads * job.ws_slice_floats + split_floats(d, isa, shape_splits(d, isa))) * sizeof(float);
}

typedef struct flash_run {
    const flash_job *job;
    flash_tile_fn tile;
    float *ws;
    int nthreads;
    atomic_int bad_thread;
    atomic_int *left; /* split-KV: splits of each (b, kv head) not yet done; NULL otherwise */
} flash_run;

static void merge_task(void *ctx, int64_t item, int thread);
/* the counters live in the workspace's float area, counted in floats (split_floats) */
_Static_assert(sizeof(atomic_int) <= sizeof(float) && _Alignof(atomic_int) <= _Alignof(float), "counter size");

static void flash_task(void *ctx, int64_t item, int thread) {
    flash_run *r = ctx;
    if (thread < 0 || thread >= r->nthreads) { /* the host broke its promise: refuse, don't race */
        atomic_store(&r->bad_thread, 1);
        return;
    }
    r->tile(r->job, item, r->ws + (size_t)thread * r->job->ws_slice_floats);
    /* split-KV: the task that finishes a (b, kv head)'s last split merges them (acq_rel: it sees
     * every other split's partial); the merge's order is fixed, so is its result */
    if (r->left) {
        const int64_t bh = item / r->job->nsplit;
        if (atomic_fetch_sub_explicit(&r->left[bh], 1, memory_order_acq_rel) == 1) merge_task(ctx, bh, thread);
    }
}

/* The merge of split-KV partials for item (b, kv head): per query row, in split order,
 * M = max m_s, w_s = e^(m_s - M), O = sum w_s O_s / sum w_s l_s, LSE = M + log sum w_s l_s.
 * Row l's max and sum are read from its first lane (l * TS: its TS lanes hold the same). The
 * weighted sum runs over whole lane vectors of the partials' O^T' ([e'][lane], each lane's
 * weight that of its row), into split 0's partial, then row l's o[e] is read back from
 * [e / TS][l * TS + e % TS] (flash_kernel.inc.h). */
static void merge_task(void *ctx, int64_t item, int thread) {
    (void)thread;
    const flash_run *r = ctx;
    const flash_job *j = r->job;
    const int64_t L = j->lanes, TS = j->slices, b = item / j->Hkv, hk = item % j->Hkv, G = j->G, ns = j->nsplit;
    const int64_t Dvp = j->Dv / TS, wat = Dvp * L; /* a split's weights go in place of its maxima */
    float *p0 = j->part + (size_t)item * (size_t)ns * j->part_floats;
    float inv[FLASH_MAX_LANES];
    for (int64_t ln = 0; ln < L; ln++) inv[ln] = 0.0f;
    for (int64_t l = 0; l < j->rows; l++) {
        const int64_t i = l / G, h = hk * G + l % G, ln = l * TS;
        float m = -INFINITY;
        for (int64_t s = 0; s < ns; s++) {
            const float ms = p0[(size_t)s * j->part_floats + (size_t)(wat + ln)];
            if (ms > m) m = ms;
        }
        float sum = 0.0f;
        for (int64_t s = 0; s < ns; s++) {
            float *ps = p0 + (size_t)s * j->part_floats;
            const float ls = ps[wat + L + ln], ms = ps[wat + ln];
            const float ws = ls > 0.0f && m > -INFINITY ? expf(ms - m) : 0.0f;
            for (int64_t t = 0; t < TS; t++) ps[wat + ln + t] = ws;
            sum += ws * ls;
        }
        for (int64_t t = 0; t < TS; t++) inv[ln + t] = sum > 0.0f ? 1.0f / sum : 0.0f;
        if (j->lse)
            j->lse[b * j->ls[0] + h * j->ls[1] + i * j->ls[2]] = sum > 0.0f ? (float)((double)m + log((double)sum)) : -INFINITY;
    }
    for (int64_t ln = j->rows * TS; ln < L; ln++) /* lanes of no row: weight 0 */
        for (int64_t s = 0; s < ns; s++) p0[(size_t)s * j->part_floats + (size_t)(wat + ln)] = 0.0f;
    for (int64_t e = 0; e < Dvp; e++) { /* over whole lane vectors: the compiler vectorises it */
        float acc[FLASH_MAX_LANES];
        for (int64_t ln = 0; ln < L; ln++) acc[ln] = 0.0f;
        for (int64_t s = 0; s < ns; s++) {
            const float *ps = p0 + (size_t)s * j->part_floats;
            for (int64_t ln = 0; ln < L; ln++) acc[ln] += ps[wat + ln] * ps[e * L + ln];
        }
        for (int64_t ln = 0; ln < L; ln++) p0[e * L + ln] = acc[ln] * inv[ln];
    }
    for (int64_t l = 0; l < j->rows; l++) {
        const int64_t i = l / G, h = hk * G + l % G, ln = l * TS;
        float *o = j->o + b * j->os[0] + h * j->os[1] + i * j->os[2];
        for (int64_t e = 0; e < Dvp; e++)
            for (int64_t t = 0; t < TS; t++) o[(e * TS + t) * j->os[3]] = p0[e * L + ln + t];
    }
}

static void copy_strides(int64_t *dst, const modattn_tensor *t, int n) {
    for (int i = 0; i < n; i++) dst[i] = t->shape[i] == 1 ? 0 : t->stride[i];
}

#ifdef MODATTN_KERNEL_TWINS
/* Sanitizer builds running the kernels' uninstrumented twins (core/internal_core.h): every range a
 * call reads or writes, checked once at its entry. */
static void check_span(const void *data, const int64_t *shape, const int64_t *stride, int n, size_t elem, bool write,
                       const char *what) {
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        if (shape[i] <= 0) return;
        last += (shape[i] - 1) * stride[i];
    }
    modattn__asan_check_region(data, (size_t)(last + 1) * elem, write, what);
}

static void check_call(const modattn_attn_desc *d, const modattn_attn_call *call, const flash_job *job,
                       const void *workspace, size_t need) {
    const int64_t qshape[4] = {d->B, d->Hq, d->Sq, d->D}, kshape[4] = {d->B, d->Hkv, d->Sk, d->D};
    const int64_t vshape[4] = {d->B, d->Hkv, d->Sk, d->Dv}, oshape[4] = {d->B, d->Hq, d->Sq, d->Dv};
    check_span(job->q, qshape, call->q.stride, 4, sizeof(float), false, "cpu_flash: q");
    check_span(job->k, kshape, call->k.stride, 4, sizeof(float), false, "cpu_flash: k");
    check_span(job->v, vshape, call->v.stride, 4, sizeof(float), false, "cpu_flash: v");
    check_span(job->o, oshape, call->o.stride, 4, sizeof(float), true, "cpu_flash: o");
    if (job->mask) check_span(job->mask, call->mask.shape, call->mask.stride, 4, sizeof(float), false, "cpu_flash: mask");
    if (job->lse) check_span(job->lse, oshape, call->lse.stride, 3, sizeof(float), true, "cpu_flash: lse");
    if (job->kv_lens) modattn__asan_check_region(job->kv_lens, (size_t)d->B * sizeof(int32_t), false, "cpu_flash: kv_lens");
    if (job->slopes) modattn__asan_check_region(job->slopes, (size_t)d->Hq * sizeof(float), false, "cpu_flash: ALiBi slopes");
    modattn__asan_check_region(workspace, need, true, "cpu_flash: workspace");
}
#endif

static int flash_run_call(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *call, void *workspace,
                          size_t workspace_bytes, const modattn_exec *exec, char *reason, size_t len) {
    (void)ctx;
    if (!flash_supports(NULL, d, reason, len)) return MODATTN_EUNSUPPORTED;
    if (d->B == 0 || d->Hq == 0 || d->Sq == 0) return 0;
    if (d->Dv == 0 && !d->has_lse) return 0;

    const flash_isa *isa = shape_isa(d);
    flash_job job;
    memset(&job, 0, sizeof job);
    layout(d, isa, &job);
    const int nthreads = exec && exec->parallel_for && exec->nthreads > 0 ? exec->nthreads : 1;
    const int64_t nsplit = shape_splits(d, isa);
    const size_t need = ((size_t)nthreads * job.ws_slice_floats + split_floats(d, isa, nsplit)) * sizeof(float);
    if (!workspace || workspace_bytes < need || ((uintptr_t)workspace % 64) != 0) {
        snprintf(reason, len, "cpu_flash needs %zu bytes of 64-byte aligned workspace for %d threads, got %zu",
                 need, nthreads, workspace ? workspace_bytes : (size_t)0);
        return MODATTN_EINVAL;
    }

    job.B = d->B, job.Hq = d->Hq, job.Hkv = d->Hkv, job.G = d->Hq / d->Hkv;
    job.Sq = d->Sq, job.Sk = d->Sk, job.D = d->D, job.Dv = d->Dv;
    job.rows = job.G * job.Sq;
    const int64_t tile_rows = job.lanes / job.slices;
    job.ntiles = (job.rows + tile_rows - 1) / tile_rows;
    job.scale = d->scale;
    job.causal = d->causal;
    /* the visibility rule (attention.h) as per-lane limits: j <= i' + rw, j >= i' - wl */
    const bool wr_on = d->has_window && d->window_right >= 0, wl_on = d->has_window && d->window_left >= 0;
    job.upper = d->causal || wr_on;
    job.rw = !wr_on ? 0 : d->causal && d->window_right > 0 ? 0 : d->window_right;
    job.lower = wl_on;
    job.wl = wl_on ? d->window_left : 0;
    job.slopes = d->has_alibi ? call->alibi_slopes : NULL;
    job.softcap = d->softcap;
    job.q = call->q.data, job.k = call->k.data, job.v = call->v.data, job.o = call->o.data;
    memcpy(job.qs, call->q.stride, sizeof job.qs);
    memcpy(job.ks, call->k.stride, sizeof job.ks);
    memcpy(job.vs, call->v.stride, sizeof job.vs);
    memcpy(job.os, call->o.stride, sizeof job.os);
    job.k_unit = job.ks[3] == 1 || d->D <= 1;
    job.v_unit = job.vs[3] == 1 || d->Dv <= 1;
    if ((!job.k_unit || !job.v_unit) && d->inner_contiguous) {
        snprintf(reason, len, "cpu_flash: desc says inner_contiguous but k/v last-dim strides are %lld/%lld",
                 (long long)job.ks[3], (long long)job.vs[3]);
        return MODATTN_EINVAL;
    }
    job.mask_mode = FLASH_MASK_NONE;
    if (d->has_mask && call->mask.data) {
        job.mask = call->mask.data;
        copy_strides(job.ms, &call->mask, 4);
        if (d->Sq == 1) job.ms[2] = 0;
        job.mask_mode = (job.ms[2] == 0 && (job.G == 1 || job.ms[1] == 0)) ? FLASH_MASK_ROW : FLASH_MASK_TILE;
    }
    if (job.slopes) job.mask_mode = FLASH_MASK_TILE; /* the bias differs per lane: built per key tile */
    if (d->has_lse && call->lse.data) {
        job.lse = call->lse.data;
        memcpy(job.ls, call->lse.stride, sizeof job.ls);
    }
    job.kv_lens = d->has_kv_lens ? call->kv_lens : NULL;

#ifdef MODATTN_KERNEL_TWINS
    if (modattn__kernel_twins_on()) check_call(d, call, &job, workspace, need);
#endif
    flash_run r;
    r.job = &job;
    r.tile = isa->tile;
    r.ws = workspace;
    r.nthreads = nthreads;
    atomic_init(&r.bad_thread, 0);
    r.left = NULL;
    int64_t items = job.B * job.Hkv * job.ntiles;
    job.ngroups = 0;
    if (head_pack_shape(d, isa) && (job.ks[2] != job.D || job.vs[2] != job.Dv)) { /* packed heads */
        job.ngroups = (job.ntiles + HEAD_PACK_TILES - 1) / HEAD_PACK_TILES;
        items = job.B * job.Hkv * job.ngroups;
    }
    job.nsplit = nsplit;
    if (nsplit > 1) { /* split-KV: partials after the threads' slices, then the merge */
        job.split_keys = SPLIT_KEYS;
        job.part_floats = round16((size_t)(d->Dv / job.slices) * (size_t)job.lanes + 2 * (size_t)job.lanes);
        job.part = (float *)workspace + (size_t)nthreads * job.ws_slice_floats;
        r.tile = isa->tile_split;
        items = job.B * job.Hkv * nsplit;
        r.left = (atomic_int *)(void *)(job.part + (size_t)items * job.part_floats);
        for (int64_t i = 0; i < job.B * job.Hkv; i++) atomic_init(&r.left[i], (int)nsplit);
    }
    if (exec && exec->parallel_for) {
        exec->parallel_for(exec, items, flash_task, &r);
    } else {
        for (int64_t i = 0; i < items; i++) flash_task(&r, i, 0);
    }
    if (atomic_load(&r.bad_thread)) {
        snprintf(reason, len, "cpu_flash: the host ran a task with a thread id outside [0, %d)", nthreads);
        return MODATTN_ERUNTIME;
    }
    return 0;
}

static int flash_control(void *ctx, int op, void *arg) {
    (void)ctx;
    switch (op) {
    case MODATTN_CTL_KERNEL: {
        modattn_ctl_kernel *q = arg;
        if (!q || !q->desc || !q->buf || q->len == 0) return MODATTN_EINVAL;
        const flash_isa *isa = shape_isa(q->desc);
        const int64_t ns = shape_splits(q->desc, isa);
        const int ts = flash_isa_slices(isa);
        int n = snprintf(q->buf, q->len, "%s, %d lanes: %d quer%s a tile", isa->name, isa->lanes, flash_isa_rows(isa),
                         flash_isa_rows(isa) == 1 ? "y row" : "y rows");
        if (n > 0 && (size_t)n < q->len && ts > 1)
            n += snprintf(q->buf + n, q->len - (size_t)n, ", %d lanes each (sliced)", ts);
        if (n > 0 && (size_t)n < q->len)
            n += snprintf(q->buf + n, q->len - (size_t)n, ", %d-key tiles", isa->bk);
        if (n > 0 && (size_t)n < q->len && ns > 1)
            snprintf(q->buf + n, q->len - (size_t)n, ", split-KV: %lld ranges of %d keys", (long long)ns, SPLIT_KEYS);
        return 0;
    }
    case MODATTN_CPU_FLASH_CTL_ISA_NAME:
        if (!arg) return MODATTN_EINVAL;
        *(const char **)arg = modattn__flash_isa_select()->name;
        return 0;
    case MODATTN_CPU_FLASH_CTL_FORCE_ISA: {
        if (!arg) {
            g_forced_isa = NULL;
            return 0;
        }
        const flash_isa *isa = modattn__flash_isa_by_name(arg);
        if (!isa) return MODATTN_EUNSUPPORTED;
        g_forced_isa = isa;
        return 0;
    }
    default:
        return MODATTN_EUNSUPPORTED;
    }
}

static const modattn_attn_impl cpu_flash_impl = {
    /* .api_version = */ MODATTN_IMPL_API_VERSION,
    /* .name = */ "cpu_flash",
    /* .description = */ "tiled exact attention with online softmax; AVX-512 / AVX2+FMA / NEON / scalar kernels",
    /* .device = */ MODATTN_DEVICE_CPU,
    /* .priority = */ 100,
    /* .ctx = */ NULL,
    /* .init = */ NULL,
    /* .shutdown = */ NULL,
    /* .supports = */ flash_supports,
    /* .workspace_bytes = */ flash_workspace_bytes,
    /* .run = */ flash_run_call,
    /* .control = */ flash_control,
};

const modattn_attn_impl *modattn__backend_cpu_flash(void) { return &cpu_flash_impl; }
