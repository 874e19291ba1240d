/* backends/cpu/cpu_gemm.c — the encoder's one door to a BLAS: C = alpha * A . B^T + beta * C, row-major
 * fp32, B being a PyTorch Linear weight [out, in] used in place from the weight mapping.
 *
 * Each call runs on the calling thread only: the CPU device's linear op (cpu_encoder.c) splits its
 * GEMMs into row blocks on the caller's thread pool, so the process has one set of worker threads
 * (a BLAS's own pool would spin against ours between calls). Any number of threads may call at
 * once.
 *
 * Which library is chosen at configure time (MODATTN_GEMM=onednn|openblas, see
 * backends/cpu/CMakeLists.txt, where the measurements that decided the default are written down).
 * oneDNN computes each row identically for any M >= 16 (not below: cpu_encoder.c never asks for
 * fewer rows); OpenBLAS with the Haswell kernels does not (rows change with M by ~1e-7). */
#include "backends/cpu/cpu_internal.h"
#include "core/blas.h"
#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#if defined(MODATTN_GEMM_ONEDNN)
#include "core/signals.h"
#include "core/env.h"
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* modattn__sgemm_nt and the OpenMP one-thread bracket are core's (core/blas.c): search uses the
 * same GEMM without the CPU device. */

/* Plans: oneDNN's matmul primitive with the weights reordered once into the layout it asks for
 * (format_tag any). On this machine (Zen 4) that selects its brgemm AVX-512 kernels, which read
 * the packed weights in place: 112-116 GFLOP/s on one core for 64-row blocks of the MiniLM shapes
 * against 96-106 for dnnl_sgemm on 256-1024 rows, which repacks the weights on every call
 * (bench/gemm_plan.c measures both). Scratch memory is ours (scratchpad mode user), so every
 * byte the GEMMs use is counted, and concurrent runs of one plan share nothing. */
struct modattn__gemm_plan {
    dnnl_engine_t eng;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src_md, dst_md, w_md, scratch_md;
    /* the same product for MODATTN__GEMM_SMALL rows, on the same packed weights (NULL where
     * oneDNN wants another layout for it): a short input's last block costs a quarter */
    dnnl_primitive_t prim_small;
    dnnl_memory_desc_t src_md_small, dst_md_small, scratch_md_small;
    void *packed; /* weights in w_md's layout, MODATTN_MEM_WEIGHTS */
    size_t packed_bytes, scratch_bytes;
    /* bf16 and int8: A's block is converted into the caller's scratch at a_off
     * (MODATTN__GEMM_BLOCK x K, dense) before each run; oneDNN's own scratch is the first
     * onednn_scratch bytes. int8 also has the int32 products at acc_off ([BLOCK, N] dense) and
     * the rows' scales at rs_off, and the weights' per-channel scales (wscale [N]). */
    modattn_precision prec;
    bool x3;     /* bf16x3: the product runs over Kd = 3K bf16 terms ([hi | hi | lo] . [hi | lo | hi]) */
    int64_t N, K, lda, ldc;
    bool accumulate;
    size_t onednn_scratch, a_off, acc_off, rs_off;
    float *wscale;
    /* int8 with a folded LayerNorm (in_gamma/in_beta): the quantiser's shift and 1/gamma [K],
     * and W beta [N] added back after */
    float *shift, *inv_g, *corr;
    char impl[64];
    /* Whole row ranges (modattn__gemm_plan_run_big): where oneDNN's matmul is its jit GEMM
     * ("gemm:jit", the AVX2 and older kernels), the "packed" weights are a plain matrix that the
     * kernel packs again on every call, so 64-row blocks pay that packing 16 times per 1024 rows
     * and the copy buys nothing. Such a plan runs dnnl_sgemm on the caller's whole row range
     * instead, reading W in place (transb 'T', ldb K; borrowed: no copy, W must outlive the
     * plan; the caller keeps it, see modattn__gemm_plan_borrows). Every product of such a plan
     * (blocks, panels) is that sgemm, in the same K steps (run_big_cols). */
    bool big, borrowed;
    /* own (the default where the CPU has AVX2 and FMA; MODATTN_GEMM_OWN=0 turns it off): a big
     * plan's products run on our AVX2 GEMM (cpu_sgemm.c) over its own packing of W (packed,
     * packed_bytes; not borrowed) instead of dnnl_sgemm. Measured on a Zen 3 EPYC: 85-92% of the
     * FMA peak against dnnl_sgemm's 73-84% per GEMM (one thread, interleaved, 768 rows), and on a
     * Qwen3-0.6B-shaped model 5-12% less CPU time for the forward passes (3 interleaved runs of 32
     * texts, start-up subtracted); it costs packing at load (1.8 GB: about 2-3 s on this VM, most
     * of it the kernel zeroing fresh pages), and the layer's host copies go as each layer is
     * packed (encoder_load.c release_layer), so the peak RSS stays that of W read in place. */
    bool own;
    char transb;
    int64_t ldb;
    /* Column panels, for a few rows over several threads (modattn__gemm_plan_run_cols): the
     * small-block product for a range of whole weight blocks, reading the same packed weights in
     * place (panel_unit columns a block, panel_step bytes apart; panel_unit 0: the layout has no
     * such ranges). Each panel width's primitive is made on first use and kept only if oneDNN
     * runs the same kernel as for the whole and a probe gives the whole's bits (the cache is the
     * one mutable part of a plan, under panel_mu). Its output goes to a dense [SMALL, width]
     * block of the scratch at panel_off (oneDNN's brgemm takes no strided output). */
    int64_t panel_unit, panel_blk;
    size_t panel_step, panel_off;
    pthread_mutex_t panel_mu;
    _Atomic int npanel; /* entries [0, npanel) are complete and never change (release/acquire) */
    struct gemm_panel {
        int64_t width;
        bool ok;
        dnnl_primitive_t prim;
        dnnl_memory_desc_t w_md, dst_md, scr_md;
    } panel[8];
};

bool modattn__gemm_int8_available(char *reason, size_t len) {
#if defined(__x86_64__)
    const modattn_cpu_features *f = modattn__cpu_get();
    if (f->avx512_vnni && f->avx512bw && f->avx512vl) return true;
    const char *off = getenv("MODATTN_CPU_DISABLE");
    if (len)
        snprintf(reason, len, "int8 GEMMs need AVX512_VNNI (int8 dot products), which this CPU (%s) lacks%s%s",
                 f->model_name, off && *off ? " or has masked off: MODATTN_CPU_DISABLE=" : "", off && *off ? off : "");
    return false;
#else
    if (len) snprintf(reason, len, "int8 GEMMs are written for x86 CPUs with AVX512_VNNI only");
    return false;
#endif
}

#if defined(__x86_64__)
bool modattn__gemm_bf16_available(char *reason, size_t len) {
    const modattn_cpu_features *f = modattn__cpu_get();
    if (f->avx512_bf16 && f->avx512bw && f->avx512vl) return true;
    const char *off = getenv("MODATTN_CPU_DISABLE");
    if (len)
        snprintf(reason, len, "bf16 GEMMs need AVX512_BF16 (bf16 dot products), which this CPU (%s) %s%s%s", f->model_name,
                 f->avx512f ? "lacks" : "lacks, with AVX-512 itself", off && *off ? " or has masked off: MODATTN_CPU_DISABLE=" : "",
                 off && *off ? off : "");
    return false;
}

/* Three bf16 products cost three times one: only AMX makes that faster than fp32's FMAs
 * (AVX512_BF16's dot products alone would not: 2x fp32's rate for 3x the work). */
bool modattn__gemm_bf16x3_available(char *reason, size_t len) {
    const modattn_cpu_features *f = modattn__cpu_get();
    if (f->amx_bf16 && f->avx512_bf16 && f->avx512bw && f->avx512vl) {
        /* and oneDNN allowed to use it (ONEDNN_MAX_CPU_ISA below AVX512_CORE_AMX would give its
         * AVX-512 bf16 kernels: slower than fp32, so refused rather than run) */
        const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
        if (((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_amx) == (unsigned)dnnl_cpu_isa_avx512_core_amx)
            return true;
        const char *lim = getenv("ONEDNN_MAX_CPU_ISA");
        if (len)
            snprintf(reason, len, "bf16x3 GEMMs need oneDNN's AMX-BF16 kernels, which it may not use here "
                     "(ONEDNN_MAX_CPU_ISA=%s)", lim && *lim ? lim : "(unset)");
        return false;
    }
    const char *off = getenv("MODATTN_CPU_DISABLE");
    if (len)
        snprintf(reason, len, "bf16x3 GEMMs need AMX-BF16 (three bf16 products are slower than one fp32 product "
                 "without it), which this CPU (%s) lacks%s%s", f->model_name,
                 off && *off ? " or has masked off: MODATTN_CPU_DISABLE=" : "", off && *off ? off : "");
    return false;
}

/* A's rows [MODATTN__GEMM_BLOCK, K] (stride lda) to bfloat16, round to nearest even: the CPU's
 * own conversion (VCVTNEPS2BF16), so every element is rounded the same way wherever it sits. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void to_bf16(int64_t rows, const float *A,
                                                                                      int64_t lda, int64_t K,
                                                                                      uint16_t *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *a = A + r * lda;
        uint16_t *o = out + r * K;
        int64_t k = 0;
        for (; k + 32 <= K; k += 32) {
            __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(a + k));
            _mm512_storeu_si512((void *)(o + k), (__m512i)v);
        }
        for (; k < K; k += 16) {
            const __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
            __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, a + k));
            _mm256_mask_storeu_epi16((void *)(o + k), m, (__m256i)v);
        }
    }
}

/* bf16x3: A's rows as [hi | hi | lo] (3K bf16 each), hi = bf16(a), lo = bf16(a - hi) (a - hi is
 * exact in fp32), so that one bf16 product over 3K terms against W's [hi | lo | hi] gives
 * a_hi w_hi + a_hi w_lo + a_lo w_hi: every term but a_lo w_lo (2^-16 of a w), summed in fp32. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void to_bf16x3(int64_t rows, const float *A,
                                                                                        int64_t lda, int64_t K,
                                                                                        uint16_t *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *a = A + r * lda;
        uint16_t *o = out + r * 3 * K;
        for (int64_t k = 0; k < K; k += 16) {
            const __mmask16 m = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
            const __m512 v = _mm512_maskz_loadu_ps(m, a + k);
            const __m256bh hi = _mm512_cvtneps_pbh(v);
            const __m512 hif = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)hi), 16));
            const __m256bh lo = _mm512_cvtneps_pbh(_mm512_sub_ps(v, hif));
            _mm256_mask_storeu_epi16((void *)(o + k), m, (__m256i)hi);
            _mm256_mask_storeu_epi16((void *)(o + K + k), m, (__m256i)hi);
            _mm256_mask_storeu_epi16((void *)(o + 2 * K + k), m, (__m256i)lo);
        }
    }
}

/* A's rows to int8, one scale a row (dynamic, symmetric): t = (a - shift) * inv (the folded
 * LayerNorm's normalised values; shift NULL: t = a), q = round(t * 127 / max|t|) (nearest even),
 * scale max|t| / 127. A row of zeros (the padding past a batch) gets scale -1: its product is 0; a
 * row with a NaN gets scale NaN (NaN out, as fp32 would give); a row of t all below 1e-30 (with a
 * folded LayerNorm: a row equal to its beta) gets codes 0 and scale 0: only W beta remains.
 * Each row's codes depend on that row alone, and the int32 sums of the products are exact: a
 * text's vector is the same alone or batched. */
#define TAIL(K, k) ((K) - (k) >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << ((K) - (k))) - 1))
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void to_int8(int64_t rows, const float *A, int64_t lda,
                                                                          int64_t K, const float *shift,
                                                                          const float *inv_g, int8_t *out, float *scale) {
    for (int64_t r = 0; r < rows; r++) {
        const float *a = A + r * lda;
        int8_t *o = out + r * K;
        __m512 mx = _mm512_setzero_ps(), raw = _mm512_setzero_ps();
        bool nan = false; /* _mm512_max_ps drops NaN: looked for on its own */
        for (int64_t k = 0; k < K; k += 16) {
            const __mmask16 m = TAIL(K, k);
            __m512 t = _mm512_maskz_loadu_ps(m, a + k);
            nan |= _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q) != 0;
            raw = _mm512_max_ps(raw, _mm512_abs_ps(t));
            if (shift) t = _mm512_mul_ps(_mm512_sub_ps(t, _mm512_maskz_loadu_ps(m, shift + k)), _mm512_maskz_loadu_ps(m, inv_g + k));
            mx = _mm512_max_ps(mx, _mm512_abs_ps(t));
        }
        const float amax = _mm512_reduce_max_ps(mx);
        if (_mm512_reduce_max_ps(raw) == 0.0f && !nan) { /* a row of zeros (padding): its product is 0 */
            scale[r] = -1.0f;
            memset(o, 0, (size_t)K);
            continue;
        }
        if (nan || !(amax >= 1e-30f)) { /* NaN in: NaN out; tiny (or the folded LayerNorm's beta): W beta */
            scale[r] = nan ? __builtin_nanf("") : 0.0f;
            memset(o, 0, (size_t)K);
            continue;
        }
        scale[r] = amax / 127.0f;
        const __m512 vinv = _mm512_set1_ps(127.0f / amax);
        for (int64_t k = 0; k < K; k += 16) {
            const __mmask16 m = TAIL(K, k);
            __m512 t = _mm512_maskz_loadu_ps(m, a + k);
            if (shift) t = _mm512_mul_ps(_mm512_sub_ps(t, _mm512_maskz_loadu_ps(m, shift + k)), _mm512_maskz_loadu_ps(m, inv_g + k));
            const __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(t, vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_mask_storeu_epi8(o + k, m, _mm512_cvtsepi32_epi8(q));
        }
    }
}

/* C[r, n] (=, or += with accumulate) acc[r, n] * (row scale r * weight scale n) + corr[n] (the
 * folded LayerNorm's shift through the weight; NULL: none); 0 for a row of zeros (scale -1). */
__attribute__((target("avx512f"))) static void from_int32(int64_t rows, const int32_t *acc, int64_t N,
                                                           const float *rs, const float *ws, const float *corr,
                                                           bool accumulate, float *C, int64_t ldc) {
    for (int64_t r = 0; r < rows; r++) {
        const int32_t *a = acc + r * N;
        float *c = C + r * ldc;
        if (rs[r] < 0) {
            if (!accumulate) memset(c, 0, (size_t)N * sizeof *c);
            continue;
        }
        const __m512 sr = _mm512_set1_ps(rs[r]);
        for (int64_t n = 0; n < N; n += 16) {
            const __mmask16 m = TAIL(N, n);
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, a + n)),
                                     _mm512_mul_ps(sr, _mm512_maskz_loadu_ps(m, ws + n)));
            if (corr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, corr + n));
            if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c + n));
            _mm512_mask_storeu_ps(c + n, m, v);
        }
    }
}
#undef TAIL
#else
bool modattn__gemm_bf16_available(char *reason, size_t len) {
    if (len) snprintf(reason, len, "bf16 GEMMs are written for x86 CPUs with AVX512_BF16 only");
    return false;
}
bool modattn__gemm_bf16x3_available(char *reason, size_t len) {
    if (len) snprintf(reason, len, "bf16x3 GEMMs are written for x86 CPUs with AMX-BF16 only");
    return false;
}
static void to_bf16(int64_t rows, const float *A, int64_t lda, int64_t K, uint16_t *out) {
    (void)rows, (void)A, (void)lda, (void)K, (void)out;
}
static void to_bf16x3(int64_t rows, const float *A, int64_t lda, int64_t K, uint16_t *out) {
    (void)rows, (void)A, (void)lda, (void)K, (void)out;
}
static void to_int8(int64_t rows, const float *A, int64_t lda, int64_t K, const float *shift, const float *inv_g,
                    int8_t *out, float *scale) {
    (void)rows, (void)A, (void)lda, (void)K, (void)shift, (void)inv_g, (void)out, (void)scale;
}
static void from_int32(int64_t rows, const int32_t *acc, int64_t N, const float *rs, const float *ws,
                       const float *corr, bool accumulate, float *C, int64_t ldc) {
    (void)rows, (void)acc, (void)N, (void)rs, (void)ws, (void)corr, (void)accumulate, (void)C, (void)ldc;
}
#endif

static int dnnl_fail(dnnl_status_t s, const char *what) {
    if (s == dnnl_out_of_memory) return modattn__error(MODATTN_ENOMEM, "oneDNN: out of memory in %s", what);
    if (s == dnnl_unimplemented) { /* e.g. bf16 with ONEDNN_MAX_CPU_ISA below AVX512_CORE_BF16 */
        const char *isa = getenv("ONEDNN_MAX_CPU_ISA");
        return modattn__error(MODATTN_EUNSUPPORTED, "oneDNN %d.%d has no %s for this CPU%s%s", DNNL_VERSION_MAJOR,
                             DNNL_VERSION_MINOR, what, isa && *isa ? " as limited by ONEDNN_MAX_CPU_ISA=" : "",
                             isa && *isa ? isa : "");
    }
    return modattn__error(MODATTN_EINTERNAL, "oneDNN: %s failed (status %d)", what, (int)s);
}

static void panel_layout(modattn__gemm_plan *p);

/* Whether the plan's weights are a plain [K, N] matrix (no blocking, no padding, no extra data):
 * then big, with transb and ldb as dnnl_sgemm takes them (W[N, K] is [K, N] with strides {1, K}:
 * 'T', ldb K; strides {N, 1}: 'N', ldb N). */
static bool plain_layout(modattn__gemm_plan *p) {
    const dnnl_memory_desc_t *w = &p->w_md;
    if (w->ndims != 2 || w->format_kind != dnnl_blocked || w->extra.flags != 0 || w->offset0 != 0 ||
        w->format_desc.blocking.inner_nblks != 0 || w->padded_dims[0] != w->dims[0] || w->padded_dims[1] != w->dims[1])
        return false;
    const dnnl_dims_t *st = &w->format_desc.blocking.strides;
    const int64_t K = w->dims[0], N = w->dims[1];
    if ((*st)[0] == 1 && (*st)[1] == K) p->transb = 'T', p->ldb = K;
    else if ((*st)[0] == N && (*st)[1] == 1) p->transb = 'N', p->ldb = N;
    else return false;
    p->big = true;
    return true;
}

bool modattn__gemm_plan_big(const modattn__gemm_plan *p) { return p && p->big; }
bool modattn__gemm_plan_borrows(const modattn__gemm_plan *p) { return p && p->borrowed; }

/* The whole-range product's K steps. dnnl_sgemm (oneDNN 2.6, AVX2) splits K itself, by 256 for
 * up to about 280-380 rows and by 192 above (measured: the rows of a 16-row and a 1024-row call
 * of 6144x1024 differ, and equal those of explicit 256- and 192-wide K steps respectively), so a
 * row's sum would depend on how many rows the call had. Steps of 192 here, each added onto C
 * (beta 1 after the first), are never split again: the same sums for any row count, as fast as
 * the library's own blocking (86-88 GFLOP per CPU-second on 1024 rows of 6144x1024 either way). */
#define BIG_KSTEP 192

/* C[rows, n0..n1) (=, or += with accumulate) A . W[n0..n1)^T in K steps of BIG_KSTEP */
static int run_big_cols(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C, int64_t n0, int64_t n1) {
    if (p->own) {
        float *scr = modattn__malloc(modattn__sgemm_scratch_bytes(p->K), MODATTN_MEM_WORKSPACE);
        if (!scr) return modattn__mem_last_status();
        const int st = modattn__sgemm_run(p->packed, p->N, p->K, rows, A, p->lda, C, p->ldc, n0, n1, p->accumulate, scr);
        modattn_free(scr);
        return st;
    }
    const int omp_prev = modattn__blas_single_begin();
    sigset_t sig; /* oneDNN's JIT GEMM must not take a signal (core/signals.h) */
    modattn__signals_hold(&sig);
    const float *W = (const float *)p->packed;
    dnnl_status_t s = dnnl_success;
    for (int64_t k0 = 0; k0 < p->K && s == dnnl_success; k0 += BIG_KSTEP) {
        const int64_t kk = p->K - k0 < BIG_KSTEP ? p->K - k0 : BIG_KSTEP;
        const float *B = p->transb == 'T' ? W + n0 * p->ldb + k0 : W + k0 * p->ldb + n0;
        s = dnnl_sgemm('N', p->transb, rows, n1 - n0, kk, 1.0f, A + k0, p->lda, B, p->ldb,
                       k0 > 0 || p->accumulate ? 1.0f : 0.0f, C + n0, p->ldc);
    }
    modattn__signals_release(&sig);
    modattn__blas_single_end(omp_prev);
    return s == dnnl_success ? 0 : dnnl_fail(s, "sgemm");
}

/* Row counts. dnnl_sgemm's rows are not the same bits for every row count even in K steps: its
 * kernel takes rows in groups of 6 (last groups of 1 to 3 rows go through other code) and above
 * about 75-150 rows it splits the rows into blocks of its own choosing, each with such a last
 * group (measured: 441 of the counts 16..1024 give some row other bits on 384x192). Calls of 64,
 * 192 and 768 rows give every row the bits of 16-row calls, wherever it sits in the call (measured
 * on the encoder's shapes, MiniLM's and Qwen3-0.6B's: also 96, 144, 240, 288, 384, 480, 576, 960;
 * not 128, 256 or 512; tests/device/test_gemm_rows checks the sizes used here). oneDNN runs
 * calls of about 288 rows and more through its AVX2 gemm driver (83-89 GFLOP per CPU-second on
 * 6144x1024, one thread), fewer through its older AVX kernel (192 rows: 78-80; 64: about 71). So a
 * range is computed in calls of the sizes below, its last rows below 49 in 16-row calls: the rows
 * never past the range rounded up to whole 64-row blocks (running into the buffers' zero rows
 * past it, as the plan's own blocks do). */
static const int64_t big_sizes[] = {768, 576, 384, 288, 192};

/* The next call's rows, with `left` rows to do and `room` (left rounded up to a whole 64-row block
 * from the range's start) that may be computed: the largest size that fits the room and computes
 * at most an eighth of its rows past `left` (the last 736 rows of 2,272 as one 768-row call, 4%
 * more rows on the faster kernel), else 64; 48 rows or fewer in 16-row calls. */
static int64_t big_call_rows(int64_t left, int64_t room) {
    if (left <= 48) return MODATTN__GEMM_SMALL;
    for (size_t i = 0; i < sizeof big_sizes / sizeof *big_sizes; i++)
        if (big_sizes[i] <= room && big_sizes[i] - left <= big_sizes[i] / 8) return big_sizes[i];
    return MODATTN__GEMM_BLOCK;
}

int modattn__gemm_plan_run_big(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C) {
    return modattn__gemm_plan_run_big_cols(p, rows, A, C, 0, p ? p->N : 0);
}

/* Column ranges of the whole-range product. dnnl_sgemm's columns are the same bits in a call of
 * a part of them as in the whole call, for parts at least MODATTN__GEMM_BIG_COLS_MIN wide that
 * start at a multiple of MODATTN__GEMM_BIG_COLS_UNIT (measured on 6144x1024 with 16-, 64-, 192-
 * and 768-row calls, every split at a multiple of 16: only parts 16, 48 or 80 wide gave other
 * bits; 768-row calls none), so a thread can take a part of the columns of every row: calls of
 * 768 rows over half the weights, where a split by rows gave each thread calls of 192 rows,
 * which oneDNN runs through its older AVX kernel (80 GFLOP per CPU-second on 6144x1024 against
 * 86-88 for 768-row calls, which its AVX2 gemm driver runs). */
int modattn__gemm_plan_run_big_cols(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C, int64_t n0,
                                    int64_t n1) {
    if (!p || !p->big || rows < 1)
        return modattn__error(MODATTN_EINTERNAL, "GEMM plan: no whole-range product of %lld rows here", (long long)rows);
    if (n0 < 0 || n1 > p->N || n1 <= n0 ||
        ((n0 > 0 || n1 < p->N) && (n0 % MODATTN__GEMM_BIG_COLS_UNIT || n1 - n0 < MODATTN__GEMM_BIG_COLS_MIN)))
        return modattn__error(MODATTN_EINTERNAL, "GEMM plan: columns %lld..%lld of %lld are not a part it can run",
                              (long long)n0, (long long)n1, (long long)p->N);
    if (p->own) return run_big_cols(p, rows, A, C, n0, n1); /* any row count: the same bits */
    int st = 0;
    const int64_t end = (rows + MODATTN__GEMM_BLOCK - 1) / MODATTN__GEMM_BLOCK * MODATTN__GEMM_BLOCK;
    for (int64_t r = 0, m; r < rows && !st; r += m) {
        m = big_call_rows(rows - r, end - r);
        st = run_big_cols(p, m, A + r * p->lda, C + r * p->ldc, n0, n1);
    }
    return st;
}

void modattn__gemm_plan_free(modattn__gemm_plan *p) {
    if (!p) return;
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->prim_small) dnnl_primitive_destroy(p->prim_small);
    for (int i = 0; i < atomic_load(&p->npanel); i++)
        if (p->panel[i].prim) dnnl_primitive_destroy(p->panel[i].prim);
    if (p->panel_unit) pthread_mutex_destroy(&p->panel_mu);
    if (p->eng) dnnl_engine_destroy(p->eng);
    if (!p->borrowed) modattn_free(p->packed);
    modattn_free(p->wscale);
    modattn_free(p->shift), modattn_free(p->inv_g), modattn_free(p->corr);
    modattn_free(p);
}

/* x rounded to bfloat16 (nearest even), as fp32; NaN stays NaN */
static float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

int modattn__gemm_plan_create(const float *W, int64_t N, int64_t K, int64_t lda, int64_t ldc,
                              bool accumulate, modattn_precision prec, const float *in_gamma,
                              const float *in_beta, modattn__gemm_plan **out) {
    *out = NULL;
    const bool x3 = prec == MODATTN_PRECISION_BF16X3;
    const bool bf16 = prec == MODATTN_PRECISION_BF16 || x3, int8 = prec == MODATTN_PRECISION_INT8;
    const int64_t Kd = x3 ? 3 * K : K; /* the product's terms */
    float *wx = NULL;                  /* bf16x3: W as [hi | lo | hi], before oneDNN's reorder */
    char why[256];
    if (bf16 && !modattn__gemm_bf16_available(why, sizeof why)) return modattn__error(MODATTN_EUNSUPPORTED, "%s", why);
    if (x3 && !modattn__gemm_bf16x3_available(why, sizeof why)) return modattn__error(MODATTN_EUNSUPPORTED, "%s", why);
    if (int8 && !modattn__gemm_int8_available(why, sizeof why)) return modattn__error(MODATTN_EUNSUPPORTED, "%s", why);
    if (!bf16 && !int8) {
        if (prec != MODATTN_PRECISION_FP32)
            return modattn__error(MODATTN_EINVAL, "GEMM plan: unknown precision %d", (int)prec);
        /* MODATTN_GEMM_PLANS=0: no plans, dnnl_sgemm on 1024-row blocks as before (for comparison;
         * never for bf16 or int8, which have no other path) */
        if (!modattn__env_bool("MODATTN_GEMM_PLANS", true)) return 0;
    }
    modattn__gemm_plan *p = modattn__calloc(1, sizeof *p, MODATTN_MEM_OTHER);
    if (!p) return modattn__mem_last_status();
    int8_t *wq = NULL; /* int8: the quantised weights, before oneDNN's reorder */
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t wsrc = NULL, wdst = NULL;
    dnnl_stream_t stream = NULL;
    const char *what = "engine";
    int st = 0;
    dnnl_status_t s;
    dnnl_dims_t sdims = {MODATTN__GEMM_BLOCK, Kd}, sstr = {bf16 || int8 ? Kd : lda, 1};
    const dnnl_data_type_t dt = bf16 ? dnnl_bf16 : int8 ? dnnl_s8 : dnnl_f32;
    dnnl_dims_t wdims = {Kd, N}, wstr = {1, Kd}; /* W[N, K] row-major is the [K, N] weights "ba" */
    dnnl_dims_t ddims = {MODATTN__GEMM_BLOCK, N}, dstr = {int8 ? N : ldc, 1};
    dnnl_memory_desc_t w_user, w_any;
    /* 1 OpenMP thread from here on: oneDNN sizes a primitive's parallel work when it is created,
     * and a matmul created while the caller's setting said 2 runs a team of 2 inside each of our
     * pool's threads (measured: 96 ms instead of 17 for one short text's forward pass) */
    const int omp_prev = modattn__blas_single_begin();
    if ((s = dnnl_engine_create(&p->eng, dnnl_cpu, 0)) != dnnl_success) goto dnnl_err;
    what = "memory descriptors";
    if ((s = dnnl_memory_desc_init_by_strides(&p->src_md, 2, sdims, dt, sstr)) ||
        (s = dnnl_memory_desc_init_by_strides(&p->dst_md, 2, ddims, int8 ? dnnl_s32 : dnnl_f32, dstr)) ||
        (s = dnnl_memory_desc_init_by_strides(&w_user, 2, wdims, int8 ? dnnl_s8 : dnnl_f32, wstr)) ||
        (s = dnnl_memory_desc_init_by_tag(&w_any, 2, wdims, dt, dnnl_format_tag_any)))
        goto dnnl_err;
    what = "matmul attributes";
    if ((s = dnnl_primitive_attr_create(&attr)) ||
        (s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)))
        goto dnnl_err;
    if (accumulate && !int8) { /* int8 adds while it scales the int32 sums (from_int32) */
        if ((s = dnnl_post_ops_create(&po)) || (s = dnnl_post_ops_append_sum(po, 1.0f)) ||
            (s = dnnl_primitive_attr_set_post_ops(attr, po)))
            goto dnnl_err;
    }
    what = "matmul";
    dnnl_matmul_desc_t md;
    if ((s = dnnl_matmul_desc_init(&md, &p->src_md, &w_any, NULL, &p->dst_md)) ||
        (s = dnnl_primitive_desc_create(&pd, &md, attr, p->eng, NULL)))
        goto dnnl_err;
    p->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    p->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->packed_bytes = dnnl_memory_desc_get_size(&p->w_md);
    p->scratch_bytes = p->onednn_scratch = dnnl_memory_desc_get_size(&p->scratch_md);
    {
        /* the small-block primitive: kept only where it takes the same packed weights and the
         * same kernel, whose rows then come out the same bits as in a full block (each row's sums
         * run in one order; tests/model/test_golden and test_precision check alone == batched) */
        dnnl_dims_t sdims16 = {MODATTN__GEMM_SMALL, Kd}, ddims16 = {MODATTN__GEMM_SMALL, N};
        dnnl_memory_desc_t w_small;
        dnnl_matmul_desc_t md16;
        dnnl_primitive_desc_t pd16 = NULL;
        const char *impl = NULL, *impl16 = NULL;
        if (dnnl_memory_desc_init_by_strides(&p->src_md_small, 2, sdims16, dt, sstr) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&p->dst_md_small, 2, ddims16, int8 ? dnnl_s32 : dnnl_f32, dstr) ==
                dnnl_success &&
            dnnl_matmul_desc_init(&md16, &p->src_md_small, &w_any, NULL, &p->dst_md_small) == dnnl_success &&
            dnnl_primitive_desc_create(&pd16, &md16, attr, p->eng, NULL) == dnnl_success) {
            w_small = *dnnl_primitive_desc_query_md(pd16, dnnl_query_weights_md, 0);
            dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
            dnnl_primitive_desc_query(pd16, dnnl_query_impl_info_str, 0, &impl16);
            if (dnnl_memory_desc_equal(&w_small, &p->w_md) && impl && impl16 && strcmp(impl, impl16) == 0 &&
                dnnl_primitive_create(&p->prim_small, pd16) == dnnl_success) {
                p->scratch_md_small = *dnnl_primitive_desc_query_md(pd16, dnnl_query_scratchpad_md, 0);
                const size_t s16 = dnnl_memory_desc_get_size(&p->scratch_md_small);
                if (s16 > p->onednn_scratch) p->scratch_bytes = p->onednn_scratch = s16;
            }
        }
        if (pd16) dnnl_primitive_desc_destroy(pd16);
    }
    {
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            snprintf(p->impl, sizeof p->impl, "%s", impl);
    }
    p->prec = prec, p->x3 = x3, p->N = N, p->K = K, p->lda = lda, p->ldc = ldc, p->accumulate = accumulate;
    if (bf16 || int8) {
        /* a reference loop would be slower than fp32: never taken for a faster mode silently */
        if (strncmp(p->impl, "ref", 3) == 0) {
            st = modattn__error(MODATTN_EUNSUPPORTED, "oneDNN %d.%d has no optimised %s matmul for this CPU (it "
                               "offered '%s')", DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, modattn_precision_name(prec),
                               p->impl);
            goto done;
        }
        /* int8 only on VNNI or AMX kernels: the older ones (gemm:jit under ONEDNN_MAX_CPU_ISA=AVX512_CORE
         * or AVX2) add pairs of products in int16 and saturate, which s8 x s8 codes of 127 overflow */
        if (int8 && !strstr(p->impl, "vnni") && !strstr(p->impl, "amx")) {
            st = modattn__error(MODATTN_EUNSUPPORTED, "int8 GEMMs need oneDNN's VNNI or AMX kernels; it offered '%s' "
                               "(is ONEDNN_MAX_CPU_ISA set below AVX512_CORE_VNNI?)", p->impl);
            goto done;
        }
#define UP(x) (((x) + MODATTN_ALIGN - 1) / MODATTN_ALIGN * MODATTN_ALIGN)
        const size_t rows = MODATTN__GEMM_BLOCK;
        p->a_off = UP(p->onednn_scratch);
        p->scratch_bytes = p->a_off + rows * (size_t)Kd * (bf16 ? sizeof(uint16_t) : sizeof(int8_t));
        if (int8) {
            p->acc_off = UP(p->scratch_bytes);
            p->rs_off = UP(p->acc_off + rows * (size_t)N * sizeof(int32_t));
            p->scratch_bytes = p->rs_off + rows * sizeof(float);
        }
#undef UP
    }
    panel_layout(p);
    if (int8) {
        /* one scale per output channel (a row of W): q = round(w * 127 / max|w|), nearest even */
        p->wscale = modattn__malloc((size_t)N * sizeof(float), MODATTN_MEM_WEIGHTS);
        wq = modattn__malloc((size_t)N * (size_t)K, MODATTN_MEM_WORKSPACE);
        if (!p->wscale || !wq) {
            st = modattn__mem_last_status();
            goto done;
        }
        /* The LayerNorm that made A, folded in (a = n * gamma + beta): W a = (W diag(gamma)) n + W beta.
         * BERT's hidden states carry a few channels far larger than the rest, put there by
         * gamma and beta; one scale per row of n loses far less than one per row of a. Channels
         * with |gamma| < 1e-3 stay as they are. */
        const bool fold = in_gamma && in_beta;
        if (fold) {
            p->shift = modattn__malloc((size_t)K * sizeof(float), MODATTN_MEM_WEIGHTS);
            p->inv_g = modattn__malloc((size_t)K * sizeof(float), MODATTN_MEM_WEIGHTS);
            p->corr = modattn__malloc((size_t)N * sizeof(float), MODATTN_MEM_WEIGHTS);
            if (!p->shift || !p->inv_g || !p->corr) {
                st = modattn__mem_last_status();
                goto done;
            }
            for (int64_t k = 0; k < K; k++) {
                const bool f = fabsf(in_gamma[k]) >= 1e-3f;
                p->shift[k] = f ? in_beta[k] : 0.0f;
                p->inv_g[k] = f ? 1.0f / in_gamma[k] : 1.0f;
            }
        }
        for (int64_t n = 0; n < N; n++) {
            const float *w = W + n * K;
            float amax = 0;
            double corr = 0;
            for (int64_t k = 0; k < K; k++) {
                const float wk = fold && p->inv_g[k] != 1.0f ? w[k] * in_gamma[k] : w[k];
                amax = fabsf(wk) > amax ? fabsf(wk) : amax;
                if (fold) corr += (double)w[k] * (double)p->shift[k];
            }
            if (fold) p->corr[n] = (float)corr;
            const bool live = amax >= 1e-30f; /* (a model's weights are finite: checked at load) */
            const float inv = live ? 127.0f / amax : 0.0f;
            p->wscale[n] = live ? amax / 127.0f : 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float wk = fold && p->inv_g[k] != 1.0f ? w[k] * in_gamma[k] : w[k];
                const float q = nearbyintf(wk * inv);
                wq[n * K + k] = (int8_t)(!(q == q) ? 0 : q > 127.0f ? 127 : q < -127.0f ? -127 : q);
            }
        }
        W = (const float *)(const void *)wq;
    }
    if (x3) {
        /* W's rows as [hi | lo | hi]: fp32 values that bf16 holds exactly (the reorder's rounding
         * keeps them) */
        wx = modattn__malloc((size_t)N * (size_t)Kd * sizeof(float), MODATTN_MEM_WORKSPACE);
        if (!wx) {
            st = modattn__mem_last_status();
            goto done;
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) {
                const float w = W[n * K + k], hi = bf16_round(w), lo = bf16_round(w - hi);
                wx[n * Kd + k] = hi, wx[n * Kd + K + k] = lo, wx[n * Kd + 2 * K + k] = hi;
            }
        W = wx;
    }
    if ((s = dnnl_primitive_create(&p->prim, pd))) goto dnnl_err;
    if (!bf16 && !int8 && strncmp(p->impl, "gemm:", 5) == 0 && plain_layout(p)) {
        /* every product of this plan is then a dnnl_sgemm (run_big_cols), which reads W as it
         * is (transb 'T'): no copy, whatever plain layout the matmul primitive asked for */
        p->transb = 'T', p->ldb = K;
        if (modattn__sgemm_available(NULL, 0) && modattn__env_bool("MODATTN_GEMM_OWN", true)) {
            /* our GEMM instead: W packed once (oneDNN's copy kernels repacked it on every call) */
            p->packed_bytes = modattn__sgemm_packed_bytes(N, K);
            if (!(p->packed = modattn__malloc(p->packed_bytes, MODATTN_MEM_WEIGHTS))) {
                st = modattn__mem_last_status();
                goto done;
            }
            modattn__sgemm_pack(W, N, K, p->packed);
            p->own = true;
            p->scratch_bytes = 0; /* run_big_cols keeps its own (modattn__sgemm_scratch_bytes) */
            snprintf(p->impl, sizeof p->impl, "own:avx2_fma_6x16");
            goto done;
        }
        p->packed = (void *)W;
        p->borrowed = true;
        goto done;
    }
    p->packed = modattn__malloc(p->packed_bytes ? p->packed_bytes : 1, MODATTN_MEM_WEIGHTS);
    if (!p->packed) {
        st = modattn__mem_last_status();
        goto done;
    }
    what = "weight reorder";
    if ((s = dnnl_memory_create(&wsrc, &w_user, p->eng, (void *)W)) ||
        (s = dnnl_memory_create(&wdst, &p->w_md, p->eng, p->packed)) ||
        (s = dnnl_reorder_primitive_desc_create(&rpd, &w_user, p->eng, &p->w_md, p->eng, NULL)) ||
        (s = dnnl_primitive_create(&reorder, rpd)) ||
        (s = dnnl_stream_create(&stream, p->eng, dnnl_stream_default_flags)))
        goto dnnl_err;
    {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, wsrc}, {DNNL_ARG_TO, wdst}};
        sigset_t sig;
        modattn__signals_hold(&sig);
        if ((s = dnnl_primitive_execute(reorder, stream, 2, ra)) == dnnl_success) s = dnnl_stream_wait(stream);
        modattn__signals_release(&sig);
        if (s != dnnl_success) goto dnnl_err;
    }
    goto done;
dnnl_err:
    st = dnnl_fail(s, what);
done:
    if (stream) dnnl_stream_destroy(stream);
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (wdst) dnnl_memory_destroy(wdst);
    if (wsrc) dnnl_memory_destroy(wsrc);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    modattn_free(wq);
    modattn_free(wx);
    modattn__blas_single_end(omp_prev);
    if (st) {
        modattn__gemm_plan_free(p);
        return st;
    }
    *out = p;
    return 0;
}

size_t modattn__gemm_plan_scratch(const modattn__gemm_plan *p) { return p ? p->scratch_bytes : 0; }
modattn_precision modattn__gemm_plan_precision(const modattn__gemm_plan *p) { return p ? p->prec : MODATTN_PRECISION_FP32; }
size_t modattn__gemm_plan_bytes(const modattn__gemm_plan *p) {
    return p ? (p->borrowed ? 0 : p->packed_bytes) + (p->wscale ? (size_t)p->N * sizeof(float) : 0) +
                   (p->corr ? (size_t)(p->N + 2 * p->K) * sizeof(float) : 0)
             : 0;
}

bool modattn__gemm_plan_has_small(const modattn__gemm_plan *p) { return p && p->prim_small; }

int modattn__gemm_plan_run(const modattn__gemm_plan *p, const float *A, float *C, void *scratch) {
    return modattn__gemm_plan_run_rows(p, MODATTN__GEMM_BLOCK, A, C, scratch);
}

/* One execution of prim on the calling thread: src A, weights W, dst C, oneDNN's scratch. */
static dnnl_status_t exec_prim(const modattn__gemm_plan *p, dnnl_primitive_t prim, const dnnl_memory_desc_t *src_md,
                               const void *A, const dnnl_memory_desc_t *w_md, const void *W,
                               const dnnl_memory_desc_t *dst_md, void *C, const dnnl_memory_desc_t *scr_md,
                               void *scratch) {
    dnnl_memory_t src = NULL, wts = NULL, dst = NULL, scr = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t s;
    if ((s = dnnl_stream_create(&stream, p->eng, dnnl_stream_default_flags)) ||
        (s = dnnl_memory_create(&src, src_md, p->eng, (void *)A)) ||
        (s = dnnl_memory_create(&wts, w_md, p->eng, (void *)W)) ||
        (s = dnnl_memory_create(&dst, dst_md, p->eng, C)) || (s = dnnl_memory_create(&scr, scr_md, p->eng, scratch)))
        goto out;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst},
                               {DNNL_ARG_SCRATCHPAD, scr}};
    sigset_t sig; /* the matmul may run oneDNN's JIT GEMM (gemm:jit on AVX2): core/signals.h */
    modattn__signals_hold(&sig);
    if ((s = dnnl_primitive_execute(prim, stream, 4, args)) == dnnl_success) s = dnnl_stream_wait(stream);
    modattn__signals_release(&sig);
out:
    if (scr) dnnl_memory_destroy(scr);
    if (dst) dnnl_memory_destroy(dst);
    if (wts) dnnl_memory_destroy(wts);
    if (src) dnnl_memory_destroy(src);
    if (stream) dnnl_stream_destroy(stream);
    return s;
}

/* A's rows as the product takes them: bf16 or int8 codes in the scratch (int8: with the rows'
 * scales at rs_off), fp32 as they are. */
static const void *convert_a(const modattn__gemm_plan *p, int64_t rows, const float *A, void *scratch) {
    if (p->prec == MODATTN_PRECISION_BF16 || p->x3) { /* A's block, rounded, is the product's input */
        uint16_t *a16 = (uint16_t *)((char *)scratch + p->a_off);
        if (p->x3) to_bf16x3(rows, A, p->lda, p->K, a16);
        else to_bf16(rows, A, p->lda, p->K, a16);
        return a16;
    }
    if (p->prec == MODATTN_PRECISION_INT8) { /* A's codes in, int32 sums out, scaled after */
        int8_t *a8 = (int8_t *)((char *)scratch + p->a_off);
        to_int8(rows, A, p->lda, p->K, p->shift, p->inv_g, a8, (float *)((char *)scratch + p->rs_off));
        return a8;
    }
    return A;
}

int modattn__gemm_plan_run_rows(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C, void *scratch) {
    if (p->big) /* the same K steps as every other call of this plan (run_big_cols) */
        return run_big_cols(p, rows == MODATTN__GEMM_SMALL ? rows : MODATTN__GEMM_BLOCK, A, C, 0, p->N);
    const bool small = rows == MODATTN__GEMM_SMALL && p->prim_small;
    if (!small) rows = MODATTN__GEMM_BLOCK;
    const int omp_prev = modattn__blas_single_begin();
    const bool int8 = p->prec == MODATTN_PRECISION_INT8;
    const void *a = convert_a(p, rows, A, scratch);
    void *dst = int8 ? (char *)scratch + p->acc_off : (void *)C;
    dnnl_status_t s = exec_prim(p, small ? p->prim_small : p->prim, small ? &p->src_md_small : &p->src_md, a, &p->w_md,
                                p->packed, small ? &p->dst_md_small : &p->dst_md, dst,
                                small ? &p->scratch_md_small : &p->scratch_md, scratch);
    if (s == dnnl_success && int8)
        from_int32(rows, (const int32_t *)dst, p->N, (const float *)((char *)scratch + p->rs_off), p->wscale, p->corr,
                   p->accumulate, C, p->ldc);
    modattn__blas_single_end(omp_prev);
    return s == dnnl_success ? 0 : dnnl_fail(s, "matmul");
}

/* ------------------------------------------------------------------ column panels */

/* Pseudo-random values, a few of them 40x larger (as BERT's hidden states have). */
static void probe_fill(float *x, int64_t n, uint32_t seed, float scale) {
    uint32_t v = seed;
    for (int64_t i = 0; i < n; i++) {
        v ^= v << 13, v ^= v >> 17, v ^= v << 5;
        x[i] = (float)((int32_t)v) * (i % 97 == 0 ? 40.0f * scale : scale);
    }
}

/* Where the panels' ranges lie in the packed weights: oneDNN's blocked layout with the columns
 * in blocks of blk, each block's K rows together (brgemm's BA16a64b: blk 64, blocks K*64
 * elements apart), so columns [n0, n1) are one contiguous range; or a plain layout (gemm:jit),
 * where a panel is a strided view. Anything else (extra data such as compensation): none. */
static void panel_layout(modattn__gemm_plan *p) {
    const dnnl_memory_desc_t *w = &p->w_md;
    if (!p->prim_small || w->format_kind != dnnl_blocked || w->extra.flags != 0 || w->ndims != 2) return;
    const dnnl_blocking_desc_t *b = &w->format_desc.blocking;
    int64_t blk = 1;
    for (int i = 0; i < b->inner_nblks; i++)
        if (b->inner_idxs[i] == 1) blk *= b->inner_blks[i];
    const int64_t unit = blk > 1 ? blk : 16;
    if (p->N % unit != 0 || p->N < 2 * unit || unit % blk != 0) return;
    const size_t elem = p->prec == MODATTN_PRECISION_BF16 || p->x3 ? 2 : p->prec == MODATTN_PRECISION_INT8 ? 1 : 4;
    if (pthread_mutex_init(&p->panel_mu, NULL) != 0) return;
    p->panel_unit = unit;
    p->panel_blk = blk;
    p->panel_step = (size_t)b->strides[1] * elem;
    p->panel_off = (p->scratch_bytes + MODATTN_ALIGN - 1) / MODATTN_ALIGN * MODATTN_ALIGN;
    p->scratch_bytes = p->panel_off + (size_t)MODATTN__GEMM_SMALL * (size_t)p->N * 4;
}

int64_t modattn__gemm_plan_panel_unit(const modattn__gemm_plan *p) { return p ? p->panel_unit : 0; }
const char *modattn__gemm_plan_impl(const modattn__gemm_plan *p) { return p ? p->impl : ""; }

static const struct gemm_panel *panel_find(const modattn__gemm_plan *p, int64_t width) {
    const int n = atomic_load_explicit(&p->npanel, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (p->panel[i].width == width) return &p->panel[i];
    return NULL;
}

static int run_panel(const modattn__gemm_plan *p, const struct gemm_panel *e, const float *A, float *C, int64_t n0,
                     void *scratch) {
    const int64_t rows = MODATTN__GEMM_SMALL, w = e->width;
    const int omp_prev = modattn__blas_single_begin();
    const bool int8 = p->prec == MODATTN_PRECISION_INT8;
    const void *a = convert_a(p, rows, A, scratch);
    char *out = (char *)scratch + p->panel_off; /* [rows, w] dense: f32, or s32 for int8 */
    if (p->accumulate && !int8) /* the sum post-op reads what C holds */
        for (int64_t r = 0; r < rows; r++) memcpy(out + (size_t)(r * w) * 4, C + r * p->ldc + n0, (size_t)w * 4);
    dnnl_status_t s = exec_prim(p, e->prim, &p->src_md_small, a, &e->w_md,
                                (const char *)p->packed + (size_t)(n0 / p->panel_blk) * p->panel_step, &e->dst_md,
                                out, &e->scr_md, scratch);
    if (s == dnnl_success) {
        if (int8)
            from_int32(rows, (const int32_t *)(const void *)out, w, (const float *)((char *)scratch + p->rs_off),
                       p->wscale + n0, p->corr ? p->corr + n0 : NULL, p->accumulate, C + n0, p->ldc);
        else
            for (int64_t r = 0; r < rows; r++) memcpy(C + r * p->ldc + n0, out + (size_t)(r * w) * 4, (size_t)w * 4);
    }
    modattn__blas_single_end(omp_prev);
    return s == dnnl_success ? 0 : dnnl_fail(s, "matmul (panel)");
}

/* The probe: the panel at both ends of the columns against the whole small-block product on
 * the same pseudo-random rows (and, with accumulate, the same C before; each end from that C, as
 * the two may overlap): every bit equal. PROBE_FAILED: it could not run (memory): nothing learnt. */
typedef enum { PROBE_EQUAL, PROBE_DIFFER, PROBE_FAILED } probe_result;
static probe_result panel_probe(const modattn__gemm_plan *p, const struct gemm_panel *e) {
    const int64_t rows = MODATTN__GEMM_SMALL;
    const size_t cbytes = (size_t)(rows * p->ldc) * sizeof(float);
    float *A = modattn__malloc((size_t)(rows * p->lda) * sizeof(float), MODATTN_MEM_WORKSPACE);
    float *C0 = modattn__malloc(cbytes, MODATTN_MEM_WORKSPACE);
    float *C1 = modattn__malloc(cbytes, MODATTN_MEM_WORKSPACE);
    float *C2 = modattn__malloc(cbytes, MODATTN_MEM_WORKSPACE);
    void *scr = modattn__malloc(p->scratch_bytes ? p->scratch_bytes : 1, MODATTN_MEM_WORKSPACE);
    probe_result res = A && C0 && C1 && C2 && scr ? PROBE_EQUAL : PROBE_FAILED;
    if (res == PROBE_EQUAL) {
        probe_fill(A, rows * p->lda, 2463534242u, 5e-10f);
        probe_fill(C0, rows * p->ldc, 88675123u, 1e-9f);
        memcpy(C1, C0, cbytes);
        if (modattn__gemm_plan_run_rows(p, rows, A, C1, scr) != 0) res = PROBE_FAILED;
    }
    const int64_t ends[2] = {0, (p->N - e->width) / p->panel_unit * p->panel_unit};
    for (int k = 0; res == PROBE_EQUAL && k < 2; k++) {
        memcpy(C2, C0, cbytes);
        if (run_panel(p, e, A, C2, ends[k], scr) != 0) {
            res = PROBE_FAILED;
            break;
        }
        for (int64_t r = 0; res == PROBE_EQUAL && r < rows; r++)
            if (memcmp(C1 + r * p->ldc + ends[k], C2 + r * p->ldc + ends[k], (size_t)e->width * sizeof(float)) != 0)
                res = PROBE_DIFFER;
    }
    modattn_free(scr), modattn_free(C2), modattn_free(C1), modattn_free(C0), modattn_free(A);
    modattn_clear_error();
    return res;
}

bool modattn__gemm_plan_panel_ready(const modattn__gemm_plan *cp, int64_t width) {
    if (!cp || !cp->panel_unit || width <= 0 || width % cp->panel_unit || width > cp->N) return false;

    const struct gemm_panel *known = panel_find(cp, width); /* published entries: no lock */
    if (known) return known->ok;
    modattn__gemm_plan *p = (modattn__gemm_plan *)cp; /* the panel cache: under panel_mu */
    pthread_mutex_lock(&p->panel_mu);
    const struct gemm_panel *found = panel_find(p, width);
    const int n = atomic_load_explicit(&p->npanel, memory_order_relaxed); /* (written under panel_mu only) */
    if (found || n == (int)(sizeof p->panel / sizeof p->panel[0])) {
        const bool ok = found && found->ok;
        pthread_mutex_unlock(&p->panel_mu);
        return ok;
    }
    /* made in the next free entry, published (npanel) once complete: run_cols in other threads
     * (another session's pool on the same model) read the entries without the mutex */
    struct gemm_panel *e = &p->panel[n];
    *e = (struct gemm_panel){.width = width};
    if (p->big) { /* a range of columns of the same K-stepped sgemm (run_big_cols): nothing to make */
        e->ok = true;
        atomic_store_explicit(&p->npanel, n + 1, memory_order_release);
        pthread_mutex_unlock(&p->panel_mu);
        return true;
    }
    const bool int8 = p->prec == MODATTN_PRECISION_INT8;
    const int omp_prev = modattn__blas_single_begin();
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t md;
    dnnl_dims_t ddims = {MODATTN__GEMM_SMALL, width}, dstr = {width, 1};
    const char *impl = NULL;
    e->w_md = p->w_md;
    e->w_md.dims[1] = e->w_md.padded_dims[1] = width;
    bool ok = dnnl_memory_desc_init_by_strides(&e->dst_md, 2, ddims, int8 ? dnnl_s32 : dnnl_f32, dstr) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && p->accumulate && !int8)
        ok = dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_matmul_desc_init(&md, &p->src_md_small, &e->w_md, NULL, &e->dst_md) == dnnl_success &&
         dnnl_primitive_desc_create(&pd, &md, attr, p->eng, NULL) == dnnl_success &&
         dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
         strcmp(impl, p->impl) == 0 && dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &e->w_md);
    if (ok) {
        e->scr_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        /* within oneDNN's share of the scratch, and the last panel within the packed weights */
        const int64_t last = (p->N - width) / p->panel_blk;
        ok = dnnl_memory_desc_get_size(&e->scr_md) <= p->onednn_scratch &&
             (size_t)last * p->panel_step + dnnl_memory_desc_get_size(&e->w_md) <= p->packed_bytes &&
             dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    modattn__blas_single_end(omp_prev);
    const probe_result pr = ok ? panel_probe(p, e) : PROBE_DIFFER;
    e->ok = pr == PROBE_EQUAL;
    if (!e->ok && e->prim) {
        dnnl_primitive_destroy(e->prim);
        e->prim = NULL;
    }
    /* a refusal is kept (oneDNN's choice or other bits: the same next time); a probe that could
     * not run (out of memory, a budget) is not: the width may be tried again */
    if (pr != PROBE_FAILED) atomic_store_explicit(&p->npanel, n + 1, memory_order_release);
    pthread_mutex_unlock(&p->panel_mu);
    return pr == PROBE_EQUAL;
}

int modattn__gemm_plan_run_cols(const modattn__gemm_plan *p, const float *A, float *C, int64_t n0, int64_t n1,
                                void *scratch) {
    const struct gemm_panel *e = n0 >= 0 && n1 > n0 && n1 <= p->N ? panel_find(p, n1 - n0) : NULL;
    if (!e || !e->ok || n0 % p->panel_unit)
        return modattn__error(MODATTN_EINTERNAL, "GEMM plan: no panel of %lld columns (modattn__gemm_plan_panel_ready)",
                             (long long)(n1 - n0));
    if (p->big) return run_big_cols(p, MODATTN__GEMM_SMALL, A, C, n0, n1);
    return run_panel(p, e, A, C, n0, scratch);
}

#else
#include <cblas.h>
#include <stdatomic.h>
#include <stdio.h>

/* modattn__sgemm_nt (cblas_sgemm on one thread) is core's: core/blas.c. */

/* OpenBLAS has no pre-packed path through CBLAS: no plans, the encoder calls sgemm_nt. */
int modattn__gemm_plan_create(const float *W, int64_t N, int64_t K, int64_t lda, int64_t ldc,
                              bool accumulate, modattn_precision prec, const float *in_gamma,
                              const float *in_beta, modattn__gemm_plan **out) {
    (void)W, (void)N, (void)K, (void)lda, (void)ldc, (void)accumulate, (void)in_gamma, (void)in_beta;
    *out = NULL;
    if (prec != MODATTN_PRECISION_FP32) {
        char why[256];
        modattn__gemm_bf16_available(why, sizeof why);
        return modattn__error(MODATTN_EUNSUPPORTED, "%s", why);
    }
    return 0;
}
bool modattn__gemm_bf16_available(char *reason, size_t len) {
    if (len) snprintf(reason, len, "bf16, bf16x3 and int8 GEMMs need the oneDNN build (MODATTN_GEMM=onednn); this one uses OpenBLAS");
    return false;
}
bool modattn__gemm_int8_available(char *reason, size_t len) { return modattn__gemm_bf16_available(reason, len); }
bool modattn__gemm_bf16x3_available(char *reason, size_t len) { return modattn__gemm_bf16_available(reason, len); }
modattn_precision modattn__gemm_plan_precision(const modattn__gemm_plan *p) { (void)p; return MODATTN_PRECISION_FP32; }
size_t modattn__gemm_plan_scratch(const modattn__gemm_plan *p) { (void)p; return 0; }
size_t modattn__gemm_plan_bytes(const modattn__gemm_plan *p) { (void)p; return 0; }
int modattn__gemm_plan_run(const modattn__gemm_plan *p, const float *A, float *C, void *scratch) {
    (void)p, (void)A, (void)C, (void)scratch;
    return modattn__error(MODATTN_EINTERNAL, "GEMM plans are not available with OpenBLAS");
}
int modattn__gemm_plan_run_rows(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C, void *scratch) {
    (void)rows;
    return modattn__gemm_plan_run(p, A, C, scratch);
}
bool modattn__gemm_plan_has_small(const modattn__gemm_plan *p) { (void)p; return false; }
bool modattn__gemm_plan_big(const modattn__gemm_plan *p) { (void)p; return false; }
bool modattn__gemm_plan_borrows(const modattn__gemm_plan *p) { (void)p; return false; }
int modattn__gemm_plan_run_big(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C) {
    (void)rows, (void)A, (void)C;
    return modattn__gemm_plan_run(p, NULL, NULL, NULL);
}
int modattn__gemm_plan_run_big_cols(const modattn__gemm_plan *p, int64_t rows, const float *A, float *C, int64_t n0,
                                    int64_t n1) {
    (void)rows, (void)A, (void)C, (void)n0, (void)n1;
    return modattn__gemm_plan_run(p, NULL, NULL, NULL);
}
int64_t modattn__gemm_plan_panel_unit(const modattn__gemm_plan *p) { (void)p; return 0; }
const char *modattn__gemm_plan_impl(const modattn__gemm_plan *p) { (void)p; return ""; }
bool modattn__gemm_plan_panel_ready(const modattn__gemm_plan *p, int64_t width) { (void)p, (void)width; return false; }
int modattn__gemm_plan_run_cols(const modattn__gemm_plan *p, const float *A, float *C, int64_t n0, int64_t n1,
                                void *scratch) {
    (void)A, (void)C, (void)n0, (void)n1;
    return modattn__gemm_plan_run(p, NULL, NULL, scratch);
}
void modattn__gemm_plan_free(modattn__gemm_plan *p) { (void)p; }
#endif
