/* attn/conformance.c — the conformance suite (see modattn/backend/conformance.h): a generated grid of
 * configurations, the fp64 oracle, a naive fp32 implementation that sets the tolerance, guard
 * regions, and the comparison. */
#include "modattn/backend/conformance.h"
#include "modattn/core.h"
#include "modattn/backend/device.h"
#include "modattn/dispatch.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "device/internal_device.h"
#include "attn/internal.h" /* modattn__impl_sees */

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ configurations */

enum { LAYOUT_CONTIG, LAYOUT_PACKED_QKV, LAYOUT_BSHD, LAYOUT_PADDED, LAYOUT_COUNT };
enum { MASK_NONE, MASK_FULL, MASK_1H, MASK_B1, MASK_11, MASK_COUNT };

typedef struct cfg {
    int B, Hq, Hkv, Sq, Sk, D, Dv;
    bool causal, lse, mask_dead_rows;
    int mask;    /* MASK_* */
    int kvl;     /* 0 none, 1 random lengths, 2 random with zeros */
    int layout;  /* LAYOUT_* for q, k, v */
    int olayout; /* LAYOUT_CONTIG, LAYOUT_BSHD or LAYOUT_PADDED for o */
    float scale; /* 0: default */
    float mag;   /* magnitude of q and k entries */
    bool window; /* sliding window (wl, wr), each >= -1 */
    int wl, wr;
    bool alibi;  /* random ALiBi slopes per head */
    float softcap; /* 0: none */
} cfg;

#define GRID_MAX 760
#define GRID_WINDOW_SWEEP 90 /* the last configurations: a random sweep of windows, ALiBi and softcap */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rng_int(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }
static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static const int k_dims[] = {8, 16, 32, 40, 64, 80, 96, 128, 160, 256};
static const int k_lens[] = {1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 129, 200, 257};
static const int k_heads[][2] = {{1, 1}, {2, 2}, {3, 3}, {4, 2}, {4, 1}, {8, 2}, {12, 12}, {12, 6}, {12, 3}, {12, 1}, {6, 3}};

static cfg base(int B, int Hq, int Hkv, int Sq, int Sk, int D) {
    cfg c;
    memset(&c, 0, sizeof c);
    c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.Sq = Sq, c.Sk = Sk, c.D = D, c.Dv = D;
    c.mag = 1.0f;
    return c;
}

static double cfg_work(const cfg *c) { return (double)c->B * c->Hq * c->Sq * c->Sk * (c->D + c->Dv); }

static cfg windowed(cfg c, int wl, int wr) {
    c.window = true, c.wl = wl, c.wr = wr;
    return c;
}

static int build_grid(cfg *g) {
    int n = 0;
    /* hand-picked cases first: every feature the contract names */
    for (size_t i = 0; i < sizeof k_dims / sizeof *k_dims; i++) {
        g[n++] = base(1, 2, 2, 1, 1, k_dims[i]);          /* Sq = Sk = 1 */
        g[n++] = base(2, 2, 1, 33, 65, k_dims[i]);        /* every head dim, odd lengths */
        cfg c = base(1, 4, 2, 17, 63, k_dims[i]);
        c.causal = true;
        g[n++] = c;
    }
    g[n++] = base(2, 3, 3, 1, 100, 64);                   /* decode-like: Sq = 1 */
    g[n++] = base(2, 3, 3, 100, 1, 64);                   /* Sk = 1 */
    g[n++] = base(1, 12, 12, 31, 31, 32);                 /* GQA 1 */
    g[n++] = base(1, 12, 6, 31, 31, 32);                  /* GQA 2 */
    g[n++] = base(1, 12, 3, 31, 31, 32);                  /* GQA 4 */
    g[n++] = base(1, 12, 1, 31, 31, 32);                  /* GQA 12 (MQA) */
    {
        cfg c = base(2, 2, 2, 40, 17, 32); c.causal = true; c.lse = true; g[n++] = c; /* causal Sq > Sk */
        c = base(2, 2, 2, 17, 40, 32); c.causal = true; c.lse = true; g[n++] = c;     /* causal Sq < Sk */
        c = base(3, 2, 1, 20, 50, 16); c.kvl = 2; c.lse = true; g[n++] = c;           /* zero-length batch rows */
        c = base(3, 2, 1, 20, 50, 16); c.kvl = 2; c.causal = true; c.lse = true; g[n++] = c;
        c = base(2, 4, 4, 30, 30, 32); c.mask = MASK_FULL; c.mask_dead_rows = true; c.lse = true; g[n++] = c;
        c = base(2, 4, 2, 30, 45, 32); c.mask = MASK_1H; c.mask_dead_rows = true; g[n++] = c;
        c = base(2, 4, 2, 30, 45, 32); c.mask = MASK_B1; g[n++] = c;
        c = base(2, 4, 2, 30, 45, 32); c.mask = MASK_11; c.causal = true; g[n++] = c;
        c = base(2, 4, 4, 37, 37, 32); c.layout = LAYOUT_PACKED_QKV; g[n++] = c;      /* views into one QKV buffer */
        c = base(2, 12, 12, 65, 65, 32); c.layout = LAYOUT_PACKED_QKV; c.olayout = LAYOUT_BSHD; c.kvl = 1; g[n++] = c;
        c = base(2, 4, 2, 33, 47, 64); c.layout = LAYOUT_BSHD; c.olayout = LAYOUT_PADDED; g[n++] = c;
        c = base(2, 4, 2, 33, 47, 64); c.layout = LAYOUT_PADDED; c.olayout = LAYOUT_PADDED; c.lse = true; g[n++] = c;
        c = base(1, 2, 2, 0, 10, 32); g[n++] = c;                                     /* Sq = 0: no-op */
        c = base(1, 2, 2, 10, 0, 32); c.lse = true; g[n++] = c;                        /* Sk = 0: O = 0, LSE = -inf */
        c = base(0, 2, 2, 10, 10, 32); g[n++] = c;                                     /* B = 0 */
        c = base(1, 2, 2, 64, 64, 64); c.mag = 8.0f; c.lse = true; g[n++] = c;        /* large scores */
        c = base(1, 2, 2, 64, 64, 64); c.scale = 0.9f; c.mag = 4.0f; g[n++] = c;      /* custom scale */
        c = base(1, 2, 2, 48, 80, 64); c.Dv = 32; g[n++] = c;                         /* Dv != D */
        c = base(1, 2, 1, 48, 80, 40); c.Dv = 96; c.causal = true; g[n++] = c;
        c = base(1, 1, 1, 300, 300, 16); c.causal = true; g[n++] = c;                 /* longer sequences */
        c = base(1, 1, 1, 520, 130, 8); g[n++] = c;
        /* decode over long caches: GQA rows in one tile, keys split into ranges and merged
         * (cpu_flash's split-KV), with lengths, zero-length rows, masks, causal and Dv != D */
        c = base(2, 8, 1, 1, 1500, 64); c.lse = true; g[n++] = c;
        c = base(3, 8, 2, 1, 1100, 32); c.kvl = 2; c.lse = true; g[n++] = c;
        c = base(2, 4, 4, 1, 1300, 32); c.mask = MASK_1H; c.mask_dead_rows = true; c.lse = true; g[n++] = c;
        c = base(1, 16, 2, 2, 700, 40); c.Dv = 24; c.causal = true; c.lse = true; g[n++] = c;
        c = base(1, 8, 1, 1, 1025, 16); c.mag = 8.0f; c.kvl = 1; c.olayout = LAYOUT_BSHD; g[n++] = c;
    }
    /* sliding windows, ALiBi and softcapping: sizes 0, small, tile-sized and past S; with causal,
     * kv_lens, masks, GQA, Sq != Sk both ways, lse; long enough that a tiled kernel skips key
     * tiles (whole tiles left of and right of the window, and whole split-KV ranges in decode) */
    {
        cfg c = windowed(base(1, 2, 2, 40, 40, 32), 0, 0); c.lse = true; g[n++] = c;          /* the diagonal alone */
        c = windowed(base(1, 2, 2, 40, 40, 32), 3, 3); g[n++] = c;
        c = windowed(base(2, 4, 2, 37, 37, 64), 5, -1); c.lse = true; g[n++] = c;               /* left only */
        c = windowed(base(2, 4, 2, 37, 37, 64), -1, 4); g[n++] = c;                             /* right only */
        c = windowed(base(1, 2, 2, 33, 33, 32), 1000, 1000); g[n++] = c;                        /* wider than S */
        c = windowed(base(1, 2, 2, 33, 33, 32), -1, -1); g[n++] = c;                            /* window on, unbounded */
        c = windowed(base(1, 4, 1, 300, 300, 32), 64, 64); c.lse = true; g[n++] = c;            /* ModernBERT-like local */
        c = windowed(base(1, 2, 2, 300, 300, 64), 20, 0); c.causal = true; c.lse = true; g[n++] = c; /* Mistral-like */
        c = windowed(base(1, 2, 2, 300, 300, 16), 7, 9); c.causal = true; g[n++] = c;           /* causal cuts the right side */
        c = windowed(base(1, 3, 3, 257, 129, 32), 10, 30); g[n++] = c;                          /* Sq > Sk: early rows see nothing */
        c = windowed(base(1, 3, 3, 129, 257, 32), 10, 30); c.lse = true; g[n++] = c;            /* Sq < Sk */
        c = windowed(base(2, 2, 2, 200, 200, 32), 0, 130); c.causal = true; c.lse = true; g[n++] = c;
        c = windowed(base(3, 4, 2, 150, 200, 32), 25, 25); c.kvl = 2; c.lse = true; g[n++] = c; /* per-batch L_b */
        c = windowed(base(3, 4, 2, 150, 200, 32), 40, -1); c.kvl = 1; c.causal = true; c.lse = true; g[n++] = c;
        c = windowed(base(2, 4, 4, 100, 100, 32), 12, 12); c.mask = MASK_FULL; c.mask_dead_rows = true; c.lse = true; g[n++] = c;
        c = windowed(base(2, 4, 2, 100, 130, 32), 30, 2); c.mask = MASK_11; c.causal = true; g[n++] = c;
        c = windowed(base(1, 12, 3, 120, 120, 40), 16, 16); c.layout = LAYOUT_BSHD; c.olayout = LAYOUT_PADDED; g[n++] = c;
        c = windowed(base(2, 8, 1, 1, 1500, 64), 100, -1); c.lse = true; g[n++] = c;           /* decode, split-KV ranges skipped */
        c = windowed(base(3, 8, 2, 1, 1100, 32), 300, 0); c.kvl = 2; c.causal = true; c.lse = true; g[n++] = c;
        c = windowed(base(1, 16, 2, 2, 700, 40), 0, 0); c.Dv = 24; c.causal = true; c.lse = true; g[n++] = c;
        c = windowed(base(1, 1, 1, 520, 520, 8), 200, 1); c.Dv = 16; g[n++] = c;
        c = windowed(base(1, 2, 2, 64, 64, 64), 8, 8); c.mag = 8.0f; c.lse = true; g[n++] = c;  /* large scores */
        c = base(2, 4, 4, 60, 60, 32); c.alibi = true; c.lse = true; g[n++] = c;                 /* ALiBi */
        c = base(2, 4, 4, 60, 80, 32); c.alibi = true; c.causal = true; c.lse = true; g[n++] = c; /* one-sided */
        c = base(1, 12, 3, 70, 50, 32); c.alibi = true; c.kvl = 2; c.lse = true; g[n++] = c;      /* GQA, lengths */
        c = base(1, 8, 2, 1, 1300, 32); c.alibi = true; c.lse = true; g[n++] = c;                /* decode */
        c = base(2, 4, 2, 50, 50, 32); c.alibi = true; c.mask = MASK_1H; c.mask_dead_rows = true; g[n++] = c;
        c = windowed(base(1, 4, 2, 256, 256, 64), 32, 32); c.alibi = true; c.lse = true; g[n++] = c;
        c = windowed(base(1, 4, 4, 200, 200, 32), 50, 0); c.alibi = true; c.causal = true; c.kvl = 1; g[n++] = c;
        c = base(1, 2, 2, 64, 64, 64); c.softcap = 2.0f; c.mag = 4.0f; c.lse = true; g[n++] = c; /* softcap */
        c = base(2, 4, 2, 64, 90, 32); c.softcap = 30.0f; c.mag = 8.0f; c.causal = true; g[n++] = c;
        c = windowed(base(1, 4, 2, 150, 150, 32), 20, 20); c.softcap = 5.0f; c.alibi = true; c.mask = MASK_B1; c.lse = true; g[n++] = c;
    }
    /* then a seeded random sweep */
    uint64_t s = 0x6d6f6461747431ull;
    while (n < GRID_MAX - GRID_WINDOW_SWEEP) {
        const int *hh = k_heads[rng_int(&s, (int)(sizeof k_heads / sizeof *k_heads))];
        cfg c = base(1 + rng_int(&s, 3), hh[0], hh[1], k_lens[rng_int(&s, 18)], k_lens[rng_int(&s, 18)],
                     k_dims[rng_int(&s, 10)]);
        if (rng_int(&s, 6) == 0) c.Dv = k_dims[rng_int(&s, 10)];
        c.causal = rng_int(&s, 5) < 2;
        c.lse = rng_int(&s, 3) == 0;
        c.mask = rng_int(&s, 10) < 3 ? 1 + rng_int(&s, MASK_COUNT - 1) : MASK_NONE;
        c.mask_dead_rows = c.mask != MASK_NONE && rng_int(&s, 2) == 0;
        c.kvl = rng_int(&s, 10) < 3 ? 1 + rng_int(&s, 2) : 0;
        c.layout = rng_int(&s, LAYOUT_COUNT);
        if (c.layout == LAYOUT_PACKED_QKV && (c.Sq != c.Sk || c.Hq != c.Hkv || c.D != c.Dv)) {
            if (rng_int(&s, 2)) { c.Sk = c.Sq; c.Hkv = c.Hq; c.Dv = c.D; }
            else c.layout = LAYOUT_BSHD;
        }
        int ol[3] = {LAYOUT_CONTIG, LAYOUT_BSHD, LAYOUT_PADDED};
        c.olayout = ol[rng_int(&s, 3)];
        if (rng_int(&s, 8) == 0) c.mag = 3.0f;
        if (rng_int(&s, 10) == 0) c.scale = (float)(0.05 + rng_unit(&s));
        if (cfg_work(&c) > 4e6) continue;
        g[n++] = c;
    }
    /* and a random sweep of windows, ALiBi and softcapping over the same shapes */
    uint64_t w = 0x77696e646f7773ull;
    static const int k_win[] = {-1, 0, 1, 2, 5, 16, 31, 64, 100, 300};
    while (n < GRID_MAX) {
        const int *hh = k_heads[rng_int(&w, (int)(sizeof k_heads / sizeof *k_heads))];
        cfg c = base(1 + rng_int(&w, 3), hh[0], hh[1], k_lens[rng_int(&w, 18)], k_lens[rng_int(&w, 18)],
                     k_dims[rng_int(&w, 10)]);
        c.causal = rng_int(&w, 3) == 0;
        c.lse = rng_int(&w, 2) == 0;
        c.mask = rng_int(&w, 5) == 0 ? 1 + rng_int(&w, MASK_COUNT - 1) : MASK_NONE;
        c.mask_dead_rows = c.mask != MASK_NONE && rng_int(&w, 2) == 0;
        c.kvl = rng_int(&w, 4) == 0 ? 1 + rng_int(&w, 2) : 0;
        c.layout = rng_int(&w, 2) ? LAYOUT_CONTIG : LAYOUT_BSHD;
        c.window = rng_int(&w, 4) != 0;
        c.wl = k_win[rng_int(&w, 10)], c.wr = k_win[rng_int(&w, 10)];
        c.alibi = rng_int(&w, 3) == 0;
        if (rng_int(&w, 6) == 0) c.softcap = (float)(1.0 + 20.0 * rng_unit(&w)), c.mag = 3.0f;
        if (!c.window && !c.alibi && c.softcap == 0.0f) c.window = true;
        if (cfg_work(&c) > 4e6) continue;
        g[n++] = c;
    }
    return n;
}

int modattn_conformance_grid_size(void) {
    static cfg g[GRID_MAX];
    return build_grid(g);
}

/* ------------------------------------------------------------ buffers */

#define GUARD 64 /* elements of sentinel before and after every buffer */
static const uint32_t SENTINEL = 0x7fa5a5a5u; /* a NaN nobody computes */

typedef struct buf {
    float *base; /* GUARD + cap + GUARD floats */
    int64_t cap;
} buf;

static void buf_fill_sentinel(buf *b);
static int buf_alloc(buf *b, int64_t cap) {
    b->cap = cap;
    b->base = modattn__malloc((size_t)(cap + 2 * GUARD) * sizeof(float), MODATTN_MEM_OTHER);
    if (!b->base) return modattn__mem_last_status();
    buf_fill_sentinel(b); /* guards and gaps defined from the start */
    return 0;
}
static float *buf_data(const buf *b) { return b->base + GUARD; }
static void buf_free(buf *b) { modattn_free(b->base); b->base = NULL; }
static void buf_fill_sentinel(buf *b) {
    for (int64_t i = 0; i < b->cap + 2 * GUARD; i++) memcpy(&b->base[i], &SENTINEL, 4);
}

/* A view of logical shape [d0, d1, d2, d3] in `layout` (not packed) over a fresh buffer. */
static int make_view(buf *b, modattn_tensor *t, int layout, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    memset(t, 0, sizeof *t);
    t->dtype = MODATTN_DTYPE_F32;
    t->device.kind = MODATTN_DEVICE_CPU;
    t->shape[0] = d0, t->shape[1] = d1, t->shape[2] = d2, t->shape[3] = d3;
    int64_t cap;
    if (layout == LAYOUT_BSHD) { /* [d0, d2, d1, d3] in memory */
        t->stride[3] = 1, t->stride[1] = d3, t->stride[2] = d1 * d3, t->stride[0] = d2 * d1 * d3;
        cap = d0 * d1 * d2 * d3;
    } else if (layout == LAYOUT_PADDED) { /* gaps after every row, head and batch */
        t->stride[3] = 1, t->stride[2] = d3 + 3, t->stride[1] = d2 * (d3 + 3) + 5;
        t->stride[0] = d1 * t->stride[1] + 7;
        cap = d0 * t->stride[0];
    } else {
        t->stride[3] = 1, t->stride[2] = d3, t->stride[1] = d2 * d3, t->stride[0] = d1 * d2 * d3;
        cap = d0 * d1 * d2 * d3;
    }
    int st = buf_alloc(b, cap);
    if (st) return st;
    t->data = buf_data(b);
    t->capacity = cap;
    return 0;
}

static int64_t off4(const modattn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3];
}

/* ------------------------------------------------------------ one configuration */

typedef struct setup {
    cfg c;
    buf bq, bk, bv, bm, bo, bl; /* bk/bv unused (base NULL) when packed */
    modattn_attn_call call;
    int32_t kv_lens[8];
    float slopes[32]; /* ALiBi */
    /* oracle (f64, contiguous) */
    double *o64, *lse64;
    /* naive fp32 errors */
    double naive_err_o, naive_err_lse;
    /* input snapshot */
    float *snap;
    int64_t snap_n;
    unsigned char *touched_o, *touched_l; /* which elements of the o / lse buffers the views address */
} setup;

static void setup_free(setup *s) {
    buf_free(&s->bq), buf_free(&s->bk), buf_free(&s->bv), buf_free(&s->bm), buf_free(&s->bo), buf_free(&s->bl);
    modattn_free(s->o64), modattn_free(s->lse64), modattn_free(s->snap);
    modattn_free(s->touched_o), modattn_free(s->touched_l);
    memset(s, 0, sizeof *s);
}

static void fill_random(buf *b, uint64_t *rng, double mag) {
    float *d = buf_data(b);
    for (int64_t i = 0; i < b->cap; i++) d[i] = (float)((2.0 * rng_unit(rng) - 1.0) * mag);
}

/* Is key j visible to row i of batch b, before the mask? attention.h's rule written out again from
 * the configuration (FlashAttention 2's window with its clipping of a side >= Sk), independent of
 * the descriptor's helper that kernels use and of the oracle. */
static bool visible(const cfg *c, const int32_t *kv_lens, int64_t b, int64_t i, int64_t j) {
    const int64_t L = kv_lens ? kv_lens[b] : c->Sk, ip = i + L - c->Sq;
    if (j >= L || (c->causal && j > ip)) return false;
    if (c->window) {
        const int64_t wl = c->wl >= c->Sk ? -1 : c->wl, wr = c->wr >= c->Sk ? -1 : c->wr;
        if (wl >= 0 && j < ip - wl) return false;
        if (wr >= 0 && j > ip + wr) return false;
    }
    return true;
}

/* The naive fp32 implementation: float everywhere, softmax with max subtraction, in one of three
 * summation orders: 0 forward, 1 reverse, 2 eight interleaved partial sums (as a SIMD kernel
 * adds). fp32 rounding noise depends on the order, so the tolerance takes the largest error of
 * the three: one order alone can be luckily exact where any other fp32 kernel is not. */
#define NAIVE_ORDERS 3
#define ORACLE_AGREEMENT 1e-3
static void naive_f32(const setup *s, float *o, float *lse, float *scores, float scale, int order) {
    bool reverse = order == 1;
    const cfg *c = &s->c;
    const modattn_attn_call *k = &s->call;
    int G = c->Hkv ? c->Hq / c->Hkv : 1;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < c->Sq; i++) {
                const int64_t lim = k->kv_lens ? k->kv_lens[b] : c->Sk, ip = i + lim - c->Sq;
                float mx = -INFINITY;
                for (int64_t j = 0; j < lim; j++) {
                    if (!visible(c, k->kv_lens, b, i, j)) {
                        scores[j] = -INFINITY;
                        continue;
                    }
                    float dot = 0.0f;
                    const float *q = (const float *)k->q.data + off4(&k->q, b, h, i, 0);
                    const float *kk = (const float *)k->k.data + off4(&k->k, b, h / G, j, 0);
                    if (order == 2) {
                        float part[8] = {0};
                        for (int e = 0; e < c->D; e++) part[e % 8] += q[e] * kk[e];
                        dot = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
                    } else if (reverse) {
                        for (int e = c->D - 1; e >= 0; e--) dot += q[e] * kk[e];
                    } else {
                        for (int e = 0; e < c->D; e++) dot += q[e] * kk[e];
                    }
                    float v = scale * dot;
                    if (c->softcap > 0.0f) v = c->softcap * tanhf(v / c->softcap);
                    if (c->alibi) v -= k->alibi_slopes[h] * fabsf((float)(ip - j));
                    if (k->mask.data) {
                        float m = ((const float *)k->mask.data)[off4(&k->mask, k->mask.shape[0] == 1 ? 0 : b,
                                                                      k->mask.shape[1] == 1 ? 0 : h, i, j)];
                        v = m == -INFINITY ? -INFINITY : v + m;
                    }
                    scores[j] = v;
                    if (v > mx) mx = v;
                }
                float *orow = o + ((b * c->Hq + h) * c->Sq + i) * c->Dv;
                for (int e = 0; e < c->Dv; e++) orow[e] = 0.0f;
                if (mx == -INFINITY) {
                    lse[(b * c->Hq + h) * c->Sq + i] = -INFINITY;
                    continue;
                }
                float sum = 0.0f;
                for (int64_t jj = 0; jj < lim; jj++) {
                    int64_t j = reverse ? lim - 1 - jj : jj;
                    if (scores[j] == -INFINITY) continue;
                    float p = expf(scores[j] - mx);
                    sum += p;
                    const float *vv = (const float *)k->v.data + off4(&k->v, b, h / G, j, 0);
                    for (int e = 0; e < c->Dv; e++) orow[e] += p * vv[e];
                }
                for (int e = 0; e < c->Dv; e++) orow[e] /= sum;
                lse[(b * c->Hq + h) * c->Sq + i] = mx + logf(sum);
            }
}

static void mark_touched(unsigned char *touched, const modattn_tensor *t) {
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                for (int64_t d = 0; d < t->shape[3]; d++) touched[GUARD + off4(t, a, b, c, d)] = 1;
}

/* Gather a strided f32 view into a contiguous f64 array. */
static double *gather64(const modattn_tensor *t) {
    int64_t n = t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
    double *out = modattn__malloc((size_t)(n ? n : 1) * sizeof(double), MODATTN_MEM_OTHER);
    if (!out) return NULL;
    int64_t k = 0;
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                for (int64_t d = 0; d < t->shape[3]; d++) out[k++] = ((const float *)t->data)[off4(t, a, b, c, d)];
    return out;
}

static modattn_tensor view64(double *data, const int64_t shape[4]) {
    modattn_tensor t = modattn_tensor_contiguous(data, MODATTN_DTYPE_F64, shape[0], shape[1], shape[2], shape[3]);
    return t;
}

static int prepare(modattn_ctx *ctx, long ref, const cfg *c, uint64_t seed, setup *s) {
    memset(s, 0, sizeof *s);
    s->c = *c;
    uint64_t rng = seed;
    int st;
    modattn_attn_call *k = &s->call;
    if (c->layout == LAYOUT_PACKED_QKV) {
        /* one [B, S, 3, H, D] buffer, as a fused QKV projection writes it */
        int64_t H = c->Hq, S = c->Sq, D = c->D;
        if ((st = buf_alloc(&s->bq, c->B * S * 3 * H * D))) return st;
        fill_random(&s->bq, &rng, c->mag);
        float *base = buf_data(&s->bq);
        int64_t strides[4] = {S * 3 * H * D, D, 3 * H * D, 1};
        modattn_tensor *views[3] = {&k->q, &k->k, &k->v};
        for (int w = 0; w < 3; w++) {
            modattn_tensor *t = views[w];
            memset(t, 0, sizeof *t);
            t->data = base + w * H * D;
            t->dtype = MODATTN_DTYPE_F32;
            t->device.kind = MODATTN_DEVICE_CPU;
            t->shape[0] = c->B, t->shape[1] = H, t->shape[2] = S, t->shape[3] = D;
            memcpy(t->stride, strides, sizeof strides);
            t->capacity = s->bq.cap - w * H * D;
        }
    } else {
        if ((st = make_view(&s->bq, &k->q, c->layout, c->B, c->Hq, c->Sq, c->D))) return st;
        if ((st = make_view(&s->bk, &k->k, c->layout, c->B, c->Hkv, c->Sk, c->D))) return st;
        if ((st = make_view(&s->bv, &k->v, c->layout, c->B, c->Hkv, c->Sk, c->Dv))) return st;
        fill_random(&s->bq, &rng, c->mag);
        fill_random(&s->bk, &rng, c->mag);
        fill_random(&s->bv, &rng, 1.0);
    }
    if ((st = make_view(&s->bo, &k->o, c->olayout, c->B, c->Hq, c->Sq, c->Dv))) return st;
    if (c->mask != MASK_NONE) {
        int64_t mb = (c->mask == MASK_FULL || c->mask == MASK_B1) ? c->B : 1;
        int64_t mh = (c->mask == MASK_FULL || c->mask == MASK_1H) ? c->Hq : 1;
        if ((st = make_view(&s->bm, &k->mask, LAYOUT_CONTIG, mb, mh, c->Sq, c->Sk))) return st;
        float *m = buf_data(&s->bm);
        for (int64_t i = 0; i < s->bm.cap; i++) m[i] = rng_int(&rng, 8) == 0 ? -INFINITY : (float)(4.0 * rng_unit(&rng) - 2.0);
        if (c->mask_dead_rows && c->Sq > 0)
            for (int64_t r = 0; r < mb * mh * c->Sq; r += 3) /* every third row fully masked */
                for (int64_t j = 0; j < c->Sk; j++) m[r * c->Sk + j] = -INFINITY;
    }
    if (c->lse) {
        if ((st = make_view(&s->bl, &k->lse, c->olayout == LAYOUT_PADDED ? LAYOUT_PADDED : LAYOUT_CONTIG, c->B, c->Hq,
                            c->Sq, 1)))
            return st;
    }
    if (c->kvl) {
        for (int b = 0; b < c->B; b++) s->kv_lens[b] = rng_int(&rng, c->Sk + 1);
        if (c->kvl == 2 && c->B > 0) s->kv_lens[0] = 0;
        k->kv_lens = s->kv_lens;
    }
    k->scale = c->scale;
    k->causal = c->causal;
    k->window = c->window;
    k->window_left = c->wl, k->window_right = c->wr;
    k->softcap = c->softcap;
    if (c->alibi) { /* random slopes in [0, 0.5), the geometric ones of ALiBi's paper lie there too */
        for (int h = 0; h < c->Hq && h < 32; h++) s->slopes[h] = (float)(0.5 * rng_unit(&rng));
        k->alibi_slopes = s->slopes;
    }

    /* which output elements the views address (everything else must stay sentinel) */
    s->touched_o = modattn__calloc((size_t)(s->bo.cap + 2 * GUARD), 1, MODATTN_MEM_OTHER);
    if (!s->touched_o) return modattn__mem_last_status();
    mark_touched(s->touched_o, &k->o);
    if (c->lse) {
        s->touched_l = modattn__calloc((size_t)(s->bl.cap + 2 * GUARD), 1, MODATTN_MEM_OTHER);
        if (!s->touched_l) return modattn__mem_last_status();
        mark_touched(s->touched_l, &k->lse);
    }

    /* snapshot every input buffer */
    buf *ins[4] = {&s->bq, &s->bk, &s->bv, &s->bm};
    s->snap_n = 0;
    for (int i = 0; i < 4; i++) if (ins[i]->base) s->snap_n += ins[i]->cap + 2 * GUARD;
    s->snap = modattn__malloc((size_t)(s->snap_n ? s->snap_n : 1) * sizeof(float), MODATTN_MEM_OTHER);
    if (!s->snap) return modattn__mem_last_status();
    int64_t at = 0;
    for (int i = 0; i < 4; i++)
        if (ins[i]->base) {
            memcpy(s->snap + at, ins[i]->base, (size_t)(ins[i]->cap + 2 * GUARD) * sizeof(float));
            at += ins[i]->cap + 2 * GUARD;
        }

    /* the oracle: the reference implementation on f64 copies */
    int64_t no = (int64_t)c->B * c->Hq * c->Sq * c->Dv, nl = (int64_t)c->B * c->Hq * c->Sq;
    s->o64 = modattn__calloc((size_t)(no ? no : 1), sizeof(double), MODATTN_MEM_OTHER);
    s->lse64 = modattn__calloc((size_t)(nl ? nl : 1), sizeof(double), MODATTN_MEM_OTHER);
    double *q64 = gather64(&k->q), *k64 = gather64(&k->k), *v64 = gather64(&k->v);
    double *m64 = k->mask.data ? gather64(&k->mask) : NULL;
    st = (!s->o64 || !s->lse64 || !q64 || !k64 || !v64 || (k->mask.data && !m64)) ? modattn__mem_last_status() : 0;
    if (st == 0) {
        modattn_attn_call o;
        memset(&o, 0, sizeof o);
        o.q = view64(q64, k->q.shape);
        o.k = view64(k64, k->k.shape);
        o.v = view64(v64, k->v.shape);
        o.o = view64(s->o64, k->o.shape);
        o.lse = view64(s->lse64, (int64_t[4]){c->B, c->Hq, c->Sq, 1});
        if (m64) o.mask = view64(m64, k->mask.shape);
        o.kv_lens = k->kv_lens;
        o.scale = k->scale;
        o.causal = k->causal;
        o.window = k->window, o.window_left = k->window_left, o.window_right = k->window_right;
        o.alibi_slopes = k->alibi_slopes;
        o.softcap = k->softcap;
        st = modattn_attention_with(ctx, (size_t)ref, &o);
        if (st) modattn__error_prefix(st, "oracle");
        if (c->B == 0 || c->Hq == 0 || c->Sq == 0) st = 0;
    }
    modattn_free(q64), modattn_free(k64), modattn_free(v64), modattn_free(m64);
    if (st) return st;
    /* Sk = 0 is a no-op for the oracle's buffers' sake: make its expectation explicit */
    if (c->Sk == 0)
        for (int64_t i = 0; i < nl; i++) s->lse64[i] = -INFINITY;

    /* the naive fp32 error sets the tolerance */
    float *on = modattn__malloc((size_t)(no ? no : 1) * sizeof(float), MODATTN_MEM_OTHER);
    float *ln = modattn__malloc((size_t)(nl ? nl : 1) * sizeof(float), MODATTN_MEM_OTHER);
    float *sc = modattn__malloc((size_t)(c->Sk ? c->Sk : 1) * sizeof(float), MODATTN_MEM_OTHER);
    if (!on || !ln || !sc) {
        modattn_free(on), modattn_free(ln), modattn_free(sc);
        return modattn__mem_last_status();
    }
    float scale = c->scale != 0.0f ? c->scale : (float)(1.0 / sqrt((double)c->D));
    s->naive_err_o = s->naive_err_lse = 0.0;
    for (int order = 0; order < NAIVE_ORDERS; order++) {
        naive_f32(s, on, ln, sc, scale, order);
        for (int64_t i = 0; i < no; i++) {
            double e = fabs((double)on[i] - s->o64[i]);
            if (e > s->naive_err_o) s->naive_err_o = e;
        }
        for (int64_t i = 0; i < nl; i++)
            if (isfinite(s->lse64[i])) {
                double e = fabs((double)ln[i] - s->lse64[i]);
                if (e > s->naive_err_lse) s->naive_err_lse = e;
            }
    }
    modattn_free(on), modattn_free(ln), modattn_free(sc);
    /* The naive fp32 implementation and the oracle follow the contract independently (each writes
     * out the visibility rule, ALiBi and the cap on its own): fp32 rounding keeps them within 3e-5
     * on this grid (large scores), so a gap over 1e-3 means one of them is wrong, not a loose tolerance. */
    if (!(s->naive_err_o <= ORACLE_AGREEMENT) || !(s->naive_err_lse <= ORACLE_AGREEMENT))
        return modattn__error(MODATTN_ERUNTIME,
                             "the fp64 oracle and the naive fp32 implementation disagree (|O| by %.3g, LSE by %.3g, "
                             "over %g): one of them breaks the contract",
                             s->naive_err_o, s->naive_err_lse, ORACLE_AGREEMENT);
    return 0;
}

static void describe_cfg(const cfg *c, char *buf, size_t len) {
    static const char *lay[] = {"contiguous", "packed-qkv", "bshd", "padded"};
    static const char *msk[] = {"none", "[B,H]", "[1,H]", "[B,1]", "[1,1]"};
    char extra[96] = "";
    int n = 0;
    if (c->window) n += snprintf(extra + n, sizeof extra - (size_t)n, " window=(%d,%d)", c->wl, c->wr);
    if (c->alibi) n += snprintf(extra + n, sizeof extra - (size_t)n, " alibi");
    if (c->softcap > 0.0f) snprintf(extra + n, sizeof extra - (size_t)n, " softcap=%g", (double)c->softcap);
    snprintf(buf, len, "B=%d Hq=%d Hkv=%d Sq=%d Sk=%d D=%d Dv=%d%s%s mask=%s%s kv_lens=%d layout=%s o=%s%s scale=%g mag=%g",
             c->B, c->Hq, c->Hkv, c->Sq, c->Sk, c->D, c->Dv, c->causal ? " causal" : "", extra, msk[c->mask],
             c->mask_dead_rows ? "+dead-rows" : "", c->kvl, lay[c->layout], lay[c->olayout], c->lse ? " lse" : "",
             (double)c->scale, (double)c->mag);
}

/* The spacing of fp32 numbers at |x|. */
static double ulp32(double x) {
    float f = (float)fabs(x);
    if (!isfinite(f)) return 0.0;
    return (double)nextafterf(f, INFINITY) - (double)f;
}

/* Check one implementation's output; returns true if it passes, else fills why. */
static bool check_output(const setup *s, double *ratio, char *why, size_t len) {
    const cfg *c = &s->c;
    const modattn_attn_call *k = &s->call;
    /* Per element: tol = 2 * naive error + 1e-6 + one fp32 ulp of the expected value (an fp32
     * output cannot be closer to the fp64 oracle than its own rounding; large LSE values need it). */
    double base_o = 2.0 * s->naive_err_o + 1e-6, base_l = 2.0 * s->naive_err_lse + 1e-6;
    double worst_o = 0, worst_l = 0, tol_o = base_o, tol_l = base_l; /* the worst element's error and tolerance */
    double ratio_o = 0, ratio_l = 0;
    for (int64_t i = 0; i < s->bo.cap + 2 * GUARD; i++)
        if (!s->touched_o[i] && memcmp(&s->bo.base[i], &SENTINEL, 4) != 0) {
            snprintf(why, len, "wrote outside o's view at element %lld of its buffer (guard %d)", (long long)(i - GUARD), GUARD);
            return false;
        }
    if (c->lse)
        for (int64_t i = 0; i < s->bl.cap + 2 * GUARD; i++)
            if (!s->touched_l[i] && memcmp(&s->bl.base[i], &SENTINEL, 4) != 0) {
                snprintf(why, len, "wrote outside lse's view at element %lld of its buffer", (long long)(i - GUARD));
                return false;
            }
    const buf *ins[4] = {&s->bq, &s->bk, &s->bv, &s->bm};
    int64_t at = 0;
    for (int i = 0; i < 4; i++)
        if (ins[i]->base) {
            if (memcmp(s->snap + at, ins[i]->base, (size_t)(ins[i]->cap + 2 * GUARD) * sizeof(float)) != 0) {
                snprintf(why, len, "modified its input %s", i == 0 ? "q" : i == 1 ? "k" : i == 2 ? "v" : "mask");
                return false;
            }
            at += ins[i]->cap + 2 * GUARD;
        }
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < c->Sq; i++) {
                int64_t row = (b * c->Hq + h) * c->Sq + i;
                for (int64_t e = 0; e < c->Dv; e++) {
                    double got = ((const float *)k->o.data)[off4(&k->o, b, h, i, e)];
                    double want = s->o64[row * c->Dv + e];
                    if (isnan(got)) {
                        snprintf(why, len, "NaN in o[%lld,%lld,%lld,%lld] (expected %.9g)", (long long)b, (long long)h,
                                 (long long)i, (long long)e, want);
                        *ratio = INFINITY; /* the worst err/tol says so too */
                        return false;
                    }
                    double err = fabs(got - want), tol = base_o + ulp32(want);
                    if (err / tol > ratio_o) ratio_o = err / tol, worst_o = err, tol_o = tol;
                }
                if (c->lse) {
                    double got = ((const float *)k->lse.data)[off4(&k->lse, b, h, i, 0)];
                    double want = s->lse64[row];
                    if (isnan(got) || (isinf(want) != isinf(got)) || (isinf(want) && (want < 0) != (got < 0))) {
                        snprintf(why, len, "lse[%lld,%lld,%lld] is %g, expected %g", (long long)b, (long long)h,
                                 (long long)i, got, want);
                        return false;
                    }
                    if (isfinite(want)) {
                        double err = fabs(got - want), tol = base_l + ulp32(want);
                        if (err / tol > ratio_l) ratio_l = err / tol, worst_l = err, tol_l = tol;
                    }
                }
            }
    *ratio = ratio_o > ratio_l ? ratio_o : ratio_l;
    if (ratio_o > 1.0) {
        snprintf(why, len, "max |o - oracle| = %.3g exceeds the tolerance %.3g (naive fp32 error %.3g)", worst_o, tol_o,
                 s->naive_err_o);
        return false;
    }
    if (ratio_l > 1.0) {
        snprintf(why, len, "max |lse - oracle| = %.3g exceeds the tolerance %.3g (naive fp32 error %.3g)", worst_l,
                 tol_l, s->naive_err_lse);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ on a device */

/* The suite's host buffers mirrored on a device, guards included: uploaded before a run,
 * downloaded after it into the host buffers, so that the host-side checks (guards, gaps,
 * unchanged inputs, accuracy) see exactly what the device wrote. */
typedef struct dev_mirror {
    buf *host[6];
    modattn_buffer *dev[6];
    int n;
} dev_mirror;

static void mirror_free(dev_mirror *m) {
    for (int i = 0; i < m->n; i++) modattn__buffer_free(m->dev[i]);
    m->n = 0;
}

static int mirror_make(const modattn_device_iface *dev, setup *s, dev_mirror *m) {
    buf *all[6] = {&s->bq, &s->bk, &s->bv, &s->bm, &s->bo, &s->bl};
    memset(m, 0, sizeof *m);
    for (int i = 0; i < 6; i++) {
        if (!all[i]->base) continue;
        size_t bytes = (size_t)(all[i]->cap + 2 * GUARD) * sizeof(float);
        modattn_buffer *b = NULL;
        int st = modattn__buffer_alloc(dev, bytes, MODATTN_MEM_OTHER, "conformance buffer", &b);
        if (!st) st = modattn__buffer_write(b, 0, all[i]->base, bytes);
        if (st) {
            modattn__buffer_free(b);
            mirror_free(m);
            return st;
        }
        m->host[m->n] = all[i];
        m->dev[m->n++] = b;
    }
    return 0;
}

/* The view `t` of a host buffer re-pointed at its mirror. */
static void mirror_view(const dev_mirror *m, modattn_tensor *t) {
    if (!t->data) return;
    for (int i = 0; i < m->n; i++) {
        const float *lo = m->host[i]->base, *hi = lo + m->host[i]->cap + 2 * GUARD;
        if ((const float *)t->data >= lo && (const float *)t->data < hi) {
            t->offset = (int64_t)((const float *)t->data - lo) * (int64_t)sizeof(float);
            t->buffer = m->dev[i];
            t->device = m->dev[i]->device;
            t->data = m->dev[i]->host ? (char *)m->dev[i]->host + t->offset : NULL;
            return;
        }
    }
}

static int mirror_download(dev_mirror *m) {
    for (int i = 0; i < m->n; i++) {
        int st = modattn__buffer_read(m->dev[i], 0, m->host[i]->base, (size_t)(m->host[i]->cap + 2 * GUARD) * sizeof(float));
        if (st) return st;
    }
    return 0;
}

/* Runs implementation `idx` on the configuration: on the host, or on its device through a
 * mirror. Returns the run's status; a mirror that cannot be made is reported in *setup_err. */
/* A host implementation's run with a workspace of exactly the bytes it asked for, in an
 * allocation of its own (never the context's, never the oracle's) between guard regions, its
 * bytes poisoned (0xA5) first so that reading before writing shows: *overrun (with why) when it
 * wrote outside. */
#define WS_GUARD 256 /* bytes each side: a multiple of MODATTN_ALIGN, so the workspace stays aligned */
static int run_guarded(modattn_ctx *ctx, size_t idx, const modattn_attn_call *call, bool *overrun, char *why,
                       size_t len) {
    *overrun = false;
    const modattn_attn_impl *impl = modattn__ctx_impl(ctx, idx);
    modattn_attn_desc d;
    int st = modattn_attn_describe(call, &d);
    if (st) return st;
    const modattn_exec *ex = modattn_ctx_exec(ctx);
    const size_t wb = impl->workspace_bytes ? impl->workspace_bytes(impl->ctx, &d, ex->nthreads) : 0;
    if (wb > ((size_t)1 << 34)) {
        snprintf(why, len, "asked for a workspace of %zu bytes (over 16 GiB) for this shape", wb);
        return MODATTN_ENOMEM;
    }
    unsigned char *raw = modattn__malloc(wb + 2 * WS_GUARD, MODATTN_MEM_WORKSPACE);
    if (!raw) return modattn__mem_last_status();
    memset(raw, 0xCD, WS_GUARD);
    memset(raw + WS_GUARD, 0xA5, wb);
    memset(raw + WS_GUARD + wb, 0xCD, WS_GUARD);
    char reason[256] = "";
    st = impl->run(impl->ctx, &d, call, wb ? raw + WS_GUARD : NULL, wb, ex, reason, sizeof reason);
    for (size_t i = 0; i < WS_GUARD && !*overrun; i++) {
        if (raw[WS_GUARD - 1 - i] != 0xCD) {
            snprintf(why, len, "wrote outside its workspace: %zu byte%s before its start (it asked for %zu bytes)", i + 1,
                     i ? "s" : "", wb);
            *overrun = true;
        } else if (raw[WS_GUARD + wb + i] != 0xCD) {
            snprintf(why, len, "wrote outside its workspace: byte %zu of the %zu it asked for (workspace_bytes() "
                     "was too small)", wb + i, wb);
            *overrun = true;
        }
    }
    modattn_free(raw);
    if (st && !*overrun) snprintf(why, len, "%s", reason[0] ? reason : modattn_strerror(st));
    return st;
}

static int run_on(modattn_ctx *ctx, size_t idx, const modattn_device_iface *dev, setup *s, int *setup_err,
                  bool *overrun, char *why, size_t len) {
    *setup_err = 0;
    *overrun = false;
    if (!dev || dev->id.kind == MODATTN_DEVICE_CPU) return run_guarded(ctx, idx, &s->call, overrun, why, len);
    dev_mirror m;
    int st = mirror_make(dev, s, &m);
    if (st) {
        *setup_err = st;
        return st;
    }
    modattn_attn_call c = s->call;
    mirror_view(&m, &c.q), mirror_view(&m, &c.k), mirror_view(&m, &c.v), mirror_view(&m, &c.o);
    mirror_view(&m, &c.mask), mirror_view(&m, &c.lse);
    st = modattn_attention_with(ctx, idx, &c);
    if (st == 0) {
        int d = mirror_download(&m);
        if (d) *setup_err = st = d;
    }
    mirror_free(&m);
    return st;
}

void modattn_conformance_describe(int config, char *buf, size_t len) {
    static cfg grid[GRID_MAX];
    static int ng = -1;
    if (len) buf[0] = '\0';
    if (ng < 0) ng = build_grid(grid); /* (the grid is fixed: building it twice gives the same) */
    if (config >= 0 && config < ng) describe_cfg(&grid[config], buf, len);
}

int modattn_conformance_run(modattn_ctx *ctx, const modattn_conformance_options *opt, modattn_conformance_result *out,
                            size_t max, size_t *count) {
    modattn_conformance_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opt) opt = &defaults;
    *count = 0;
    long ref = modattn_ctx_find(ctx, "reference");
    if (ref < 0)
        return modattn__error(MODATTN_ENOTFOUND, "conformance needs the 'reference' implementation as its fp64 oracle, "
                                                "and this build has none");
    size_t nimpl = modattn_ctx_impl_count(ctx);
    size_t idx[64], nt = 0;
    for (size_t i = 0; i < nimpl && nt < 64; i++) {
        modattn_impl_info info;
        modattn_ctx_impl_info(ctx, i, &info);
        if (opt->only && strcmp(opt->only, info.name) != 0) continue;
        idx[nt++] = i;
    }
    if (opt->only && nt == 0)
        return modattn__error(MODATTN_ENOTFOUND, "no implementation named '%s'", opt->only);
    if (nt > max) nt = max;
    for (size_t t = 0; t < nt; t++) {
        memset(&out[t], 0, sizeof out[t]);
        modattn_impl_info info;
        modattn_ctx_impl_info(ctx, idx[t], &info);
        snprintf(out[t].name, sizeof out[t].name, "%s", info.name);
    }
    static cfg grid[GRID_MAX];
    int ng = build_grid(grid);
    if (opt->max_configs > 0 && opt->max_configs < ng) ng = opt->max_configs;
    uint64_t seed0 = opt->seed ? opt->seed : 0x5eed5eedull;
    for (int gi = opt->first_config > 0 ? opt->first_config : 0; gi < ng; gi++) {
        setup s;
        uint64_t seed = seed0 ^ ((uint64_t)gi * 0x9e3779b97f4a7c15ull);
        int st = prepare(ctx, ref, &grid[gi], seed, &s);
        if (st) {
            char d[300];
            describe_cfg(&grid[gi], d, sizeof d);
            modattn__error_prefix(st, "conformance configuration %d (%s)", gi, d);
            setup_free(&s);
            *count = nt;
            return st;
        }
        for (size_t t = 0; t < nt; t++) {
            modattn_conformance_result *r = &out[t];
            modattn_impl_info info;
            modattn_ctx_impl_info(ctx, idx[t], &info);
            const modattn_attn_impl *impl = modattn__ctx_impl(ctx, idx[t]);
            char why[512] = "";
            /* the suite's tensors go to the implementation's device (index opt->device_index) */
            const modattn_device_iface *dev = NULL;
            if (impl->device != MODATTN_DEVICE_CPU) {
                modattn_device id = {impl->device, opt->device_index};
                dev = modattn_device_find(id);
            }
            modattn_attn_desc desc;
            modattn_attn_describe(&s.call, &desc);
            desc.device.kind = impl->device;
            desc.device.index = impl->device == MODATTN_DEVICE_CPU ? 0 : opt->device_index;
            bool no_device = impl->device != MODATTN_DEVICE_CPU && !dev;
            if (!info.available || no_device || !modattn__impl_sees(impl, &desc, why, sizeof why) ||
                !impl->supports(impl->ctx, &desc, why, sizeof why)) {
                r->unsupported++;
                {
                    char rs[160];
                    if (!info.available) snprintf(rs, sizeof rs, "unavailable: %s", info.reason);
                    else if (no_device) snprintf(rs, sizeof rs, "no device here");
                    else snprintf(rs, sizeof rs, "%s", why);
                    int k = 0;
                    while (k < r->nreasons && strcmp(r->reasons[k].text, rs) != 0) k++;
                    if (k < r->nreasons) r->reasons[k].count++;
                    else if (r->nreasons < MODATTN_CONFORMANCE_REASONS) {
                        snprintf(r->reasons[k].text, sizeof r->reasons[k].text, "%s", rs);
                        r->reasons[k].count = 1;
                        r->nreasons++;
                    } else r->other_reasons++;
                }
                if (!r->unsupported_reason[0]) {
                    char dn[32];
                    modattn_device_format(desc.device, dn, sizeof dn);
                    if (!info.available) snprintf(r->unsupported_reason, sizeof r->unsupported_reason, "%s", info.reason);
                    else if (no_device)
                        snprintf(r->unsupported_reason, sizeof r->unsupported_reason, "no device %s here", dn);
                    else snprintf(r->unsupported_reason, sizeof r->unsupported_reason, "%s", why);
                }
                if (opt->on_result) opt->on_result(opt->ud, gi, r->name, 2, 0, !info.available ? info.reason : why);
                continue;
            }
            buf_fill_sentinel(&s.bo);
            if (s.c.lse) buf_fill_sentinel(&s.bl);
            double ratio = 0;
            bool ok, overrun = false;
            int setup_err = 0;
            if (opt->on_config) opt->on_config(opt->ud, gi, r->name);
            char rwhy[512] = "";
            st = run_on(ctx, idx[t], dev, &s, &setup_err, &overrun, rwhy, sizeof rwhy);
            if (setup_err) {
                char d[300];
                describe_cfg(&grid[gi], d, sizeof d);
                modattn__error_prefix(setup_err, "conformance configuration %d (%s) on the device", gi, d);
                setup_free(&s);
                *count = nt;
                return setup_err;
            }
            if (overrun) {
                snprintf(why, sizeof why, "%s", rwhy);
                ok = false;
            } else if (st) {
                snprintf(why, sizeof why, "returned %s: %s", modattn_status_name(st), rwhy[0] ? rwhy : modattn_last_error());
                ok = false;
            } else {
                ok = check_output(&s, &ratio, why, sizeof why);
            }
            if (ratio > r->worst_ratio) r->worst_ratio = ratio;
            if (opt->on_result) opt->on_result(opt->ud, gi, r->name, ok ? 0 : 1, ratio, ok ? "" : why);
            if (ok) {
                r->passed++;
            } else {
                r->failed++;
                char d[300];
                describe_cfg(&s.c, d, sizeof d);
                if (!r->first_failure[0])
                    snprintf(r->first_failure, sizeof r->first_failure, "config %d (%s): %s", gi, d, why);
                if (opt->log) fprintf(opt->log, "FAIL %s config %d (%s): %s\n", r->name, gi, d, why);
            }
        }
        if (opt->log && opt->verbose && (gi + 1) % 100 == 0) fprintf(opt->log, "  %d/%d configurations\n", gi + 1, ng);
        setup_free(&s);
    }
    *count = nt;
    return 0;
}
