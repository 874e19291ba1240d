/* backends/cpu_flash/flash.h — what the cpu_flash driver (cpu_flash.c) and its per-ISA kernels
 * (the files under arch/) share: the resolved job, the per-thread workspace layout and the one kernel
 * signature every ISA file implements.
 *
 * The kernel works "query-transposed": a tile of LANES query rows is packed as Qt[d][lane], so a
 * SIMD vector holds one score for LANES different queries. Then
 *   - S^T = K . Qt needs no packing of K or V (rows broadcast straight from the tensors),
 *   - the softmax row max / row sum are vertical (element-wise) over key rows: no shuffles,
 *   - causal masking is one integer compare per vector (key index vs per-lane limit),
 *   - O^T[e][lane] += V[j][e] * P^T[j][lane] again broadcasts V straight from the tensor.
 * Work item = (b, kv head, query tile); query rows of the G heads sharing a kv head are
 * interleaved into one row space r = i * G + g, so GQA decode (Sq = 1) still fills the lanes.
 * Fewer rows than lanes (decode: G * Sq rows, often 1 to 8) use a kernel with TS "slices" per
 * row: lane row * TS + t sums the row's dot products over d = d' * TS + t (flash_kernel.inc.h),
 * so no lane computes for an empty row. */
#ifndef MODATTN_CPU_FLASH_H
#define MODATTN_CPU_FLASH_H

#include "modattn/backend/impl.h"
#include "core/internal_core.h"

#include <stdbool.h>
#include <stdint.h>

enum { FLASH_MASK_NONE = 0, FLASH_MASK_ROW = 1, FLASH_MASK_TILE = 2 };

typedef struct flash_job {
    int64_t B, Hq, Hkv, G, Sq, Sk, D, Dv;
    int64_t rows;   /* G * Sq: query rows per (b, kv head) */
    int64_t ntiles; /* ceil(rows / lanes) */
    float scale;
    bool causal;
    /* sliding window (attention.h): -1 unbounded; upper: some right bound (causal or wr >= 0),
     * rw its offset from i' (min(wr, 0) under causal); lower: wl >= 0 */
    bool upper, lower;
    int64_t rw, wl;
    const float *slopes; /* ALiBi [Hq] or NULL: folded into the mask tile (FLASH_MASK_TILE) */
    float softcap;       /* > 0: scores capped in a scalar pass after Q K^T, mask tile added there */
    int mask_mode;  /* FLASH_MASK_*: ROW when every lane of a tile reads the same mask row */
    bool k_unit, v_unit; /* last-dim stride 1: rows are broadcast from the tensor, no packing */
    /* q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv], o [B, Hq, Sq, Dv] */
    const float *q, *k, *v;
    float *o;
    const float *mask; /* [B|1, Hq|1, Sq, Sk]: broadcast dims have stride 0 here */
    float *lse;        /* [B, Hq, Sq] or NULL */
    const int32_t *kv_lens;
    int64_t qs[4], ks[4], vs[4], os[4], ms[4], ls[3];
    /* Packed heads (the encoder's layout: K and V rows are views of the QKV GEMM's output rows,
     * 3 H floats apart): a work item is a group of query tiles of one (b, kv head), tiles
     * [g * ntiles / ngroups, (g + 1) * ntiles / ngroups) of group g, and it first copies the head's
     * visible K and V rows into its workspace (off_kh, off_vh: rows D and Dv floats apart), which
     * every tile of the group then reads. 0 groups: one query tile a work item, K and V read in
     * place. The values read are the same, so are the results' bits. */
    int64_t ngroups;
    /* split-KV (tile_split): nsplit key ranges of split_keys per (b, kv head), partial results of
     * part_floats each at part (after the threads' slices in the workspace) */
    int64_t nsplit, split_keys;
    float *part;
    size_t part_floats;
    /* per-thread workspace */
    int lanes, bk;
    int slices;     /* TS: lanes per query row (lanes / slices rows per tile); partial O^T' of a
                     * split holds o_row[e] at [e / slices][row * slices + e % slices] */
    size_t ws_slice_floats; /* floats per thread slice (a multiple of 16) */
    size_t off_qt, off_st, off_ot, off_mt, off_kp, off_vp, off_mrow, off_lane; /* in floats */
    size_t off_kh, off_vh; /* packed heads (ngroups > 0): [HEAD_PACK_KEYS][D] and [..][Dv], cpu_flash.c */
} flash_job;

/* Per-lane bookkeeping kept at ws + off_lane (as floats/ints of `lanes` each). */
typedef struct flash_lane_view {
    int32_t *lim; /* key j is visible to the lane iff j <= lim (causal / window), INT32_MAX otherwise */
    float *m;     /* running max (base-2 units) */
    float *l;     /* running sum */
} flash_lane_view;

/* One ISA's kernel: computes work item `item` (b, kv head, query tile) into o / lse using the
 * thread's workspace slice `ws` (16-float aligned). */
typedef void (*flash_tile_fn)(const flash_job *job, int64_t item, float *ws);
/* Vector exp / exp2 over an array (tests and benchmarks): y[i] = e^x[i] / 2^x[i]. */
typedef void (*flash_vec_fn)(const float *x, float *y, int64_t n);

typedef struct flash_isa {
    const char *name;
    int lanes; /* vector lanes per tile: lanes / slices query rows */
    int bk;    /* keys per tile */
    flash_tile_fn tile;
    flash_vec_fn exp, exp2;
    flash_tile_fn tile_split; /* one key range of a decode tile (see tile_split in flash_kernel.inc.h) */
    /* The same kernel with fewer rows per tile, for rows (G * Sq) that fill no more of them
     * (decode), or NULL: the arithmetic on empty lanes is not done. A chain: each narrow kernel
     * may have a narrower one. */
    const struct flash_isa *narrow;
    int slices; /* lanes per query row (TS in flash_kernel.inc.h); 0 reads as 1. D and Dv must be
                 * multiples of it. */
} flash_isa;

/* The flash_isa entry `var` of a sliced kernel whose functions are prefix##_tile etc. (an arch
 * file's VL, NV and BKT at the point of use), next: the next narrower entry or NULL. */
#define FLASH_SLICED_ISA(var, name, prefix, n, next)                                                   \
    static const flash_isa var = {name, VL * NV, BKT, prefix##_tile, prefix##_exp_array, prefix##_exp2_array, \
                                  prefix##_tile_split, next, n}

/* lanes per query row (0 reads as 1), and query rows per tile, of an ISA's kernel */
static inline int flash_isa_slices(const flash_isa *isa) { return isa->slices > 1 ? isa->slices : 1; }
static inline int flash_isa_rows(const flash_isa *isa) { return isa->lanes / flash_isa_slices(isa); }

const flash_isa *modattn__flash_isa_scalar(void);
#if defined(__x86_64__) || defined(__i386__)
const flash_isa *modattn__flash_isa_avx2(void);
const flash_isa *modattn__flash_isa_avx512(void);
#ifdef MODATTN_KERNEL_TWINS /* their uninstrumented twins (core/internal_core.h: kernel twins) */
const flash_isa *modattn__flash_isa_avx2_unchecked(void);
const flash_isa *modattn__flash_isa_avx512_unchecked(void);
#endif
#endif
#if defined(__aarch64__)
const flash_isa *modattn__flash_isa_neon(void);
#endif

/* The ISA chosen for this machine (modattn__cpu_get(), MODATTN_CPU_DISABLE respected). */
const flash_isa *modattn__flash_isa_select(void);
/* An ISA by name ("avx512", "avx2", "neon", "scalar") if compiled in and supported here, else NULL. */
const flash_isa *modattn__flash_isa_by_name(const char *name);

/* cpu_flash control() ops */
#define MODATTN_CPU_FLASH_CTL_ISA_NAME 1 /* arg: const char ** — the ISA run() will use */
#define MODATTN_CPU_FLASH_CTL_FORCE_ISA 2 /* arg: const char * name or NULL to restore auto (tests);
                                          * for calls made from the calling thread only */

#endif
