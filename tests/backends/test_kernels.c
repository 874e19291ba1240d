/* tests/backends/test_kernels.c — the fast CPU implementations (cpu_flash, cpu_blas, whichever are
 * built in) against a naive fp64 computation written here, on random shapes that cover the
 * contract: GQA, causal with Sq != Sk, kv_lens (zeros included), broadcast masks with -inf rows,
 * stride-0 mask rows, BSHD / padded / element-strided views, lse, D from 1 to 256, Dv != D.
 * Also: guard regions around o and lse, inputs unchanged, no NaN, bitwise determinism (two runs
 * with 2 threads, one with 1 thread), run() allocating nothing through the modattn allocator,
 * refusals with a reason, a too-small workspace refused; cpu_flash: a text's rows alone and padded in
 * a batch give the same bits (its kernel choice depends on the row count), and so do the same values
 * in the encoder's layout (QKV rows, heads packed) and in contiguous tensors, and its workspace for
 * an encoder's shape is the same whatever the key count.
 *
 *   test_kernels [NAME...]    (default: every built-in implementation except `reference`)
 * The CTest entries also run it with MODATTN_CPU_DISABLE set, to cover the AVX2 and scalar paths. */
#include "modattn/modattn.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "backends/cpu_flash/flash.h" /* MODATTN_CPU_FLASH_CTL_ISA_NAME */
#include "backends/isa_expect.h"
#include "test_util.h"

#include <float.h>
#include <math.h>

static uint64_t g_rng;
static uint64_t rnd(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rint_(int n) { return (int)(rnd() % (uint64_t)n); }
static double runit(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

#define GUARD 64
static const float SENT = 1234.5f;

typedef struct tbuf {
    float *base; /* GUARD + cap + GUARD floats */
    int64_t cap;
} tbuf;

static float *tb_alloc(tbuf *b, int64_t cap) {
    b->cap = cap;
    b->base = modattn__malloc((size_t)(cap + 2 * GUARD) * sizeof(float), MODATTN_MEM_OTHER);
    if (!b->base) abort();
    for (int64_t i = 0; i < cap + 2 * GUARD; i++) b->base[i] = SENT;
    return b->base + GUARD;
}

/* A view of shape s in a fresh buffer with one of four layouts:
 *   0 contiguous; 1 BSHD (dims 1 and 2 swapped in memory); 2 padded rows (row stride > last dim);
 *   3 element-strided (last-dim stride 2 and padded rows). */
static modattn_tensor make_view(tbuf *b, const int64_t s[4], int layout) {
    int64_t st[4], cap;
    switch (layout) {
    case 1: /* memory order b, i, h, d */
        st[3] = 1, st[1] = s[3], st[2] = s[1] * s[3], st[0] = s[2] * s[1] * s[3];
        cap = s[0] * st[0];
        break;
    case 2:
        st[3] = 1, st[2] = s[3] + 5, st[1] = s[2] * st[2] + 3, st[0] = s[1] * st[1] + 1;
        cap = s[0] * st[0];
        break;
    case 3:
        st[3] = 2, st[2] = 2 * s[3] + 3, st[1] = s[2] * st[2], st[0] = s[1] * st[1] + 7;
        cap = s[0] * st[0];
        break;
    default:
        st[3] = 1, st[2] = s[3], st[1] = s[2] * s[3], st[0] = s[1] * s[2] * s[3];
        cap = s[0] * st[0];
    }
    if (cap < 1) cap = 1;
    modattn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = tb_alloc(b, cap);
    t.dtype = MODATTN_DTYPE_F32;
    t.device.kind = MODATTN_DEVICE_CPU;
    memcpy(t.shape, s, sizeof t.shape);
    memcpy(t.stride, st, sizeof t.stride);
    t.capacity = cap;
    return t;
}

static int64_t off(const modattn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3];
}
static float *at(const modattn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return (float *)t->data + off(t, a, b, c, d);
}

typedef struct tcase {
    int64_t B, Hq, Hkv, Sq, Sk, D, Dv;
    modattn_attn_call call;
    tbuf bq, bk, bv, bo, bm, bl;
    int32_t kvl[8];
    double *o64, *lse64, *mag; /* expected; per row: max |scaled score| (sets the tolerance) */
    char what[256];
} tcase;

static void fill(const modattn_tensor *t, double mag) {
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                for (int64_t d = 0; d < t->shape[3]; d++) *at(t, a, b, c, d) = (float)((2 * runit() - 1) * mag);
}

/* The fp64 oracle for this test: straight from the contract in attention.h. */
static void oracle(tcase *tc) {
    const modattn_attn_call *c = &tc->call;
    const int64_t G = tc->Hq / tc->Hkv;
    double scale = c->scale != 0.0f ? c->scale : 1.0 / sqrt((double)tc->D);
    double *s = malloc(sizeof(double) * (size_t)(tc->Sk + 1));
    for (int64_t b = 0; b < tc->B; b++)
        for (int64_t h = 0; h < tc->Hq; h++)
            for (int64_t i = 0; i < tc->Sq; i++) {
                int64_t row = (b * tc->Hq + h) * tc->Sq + i;
                int64_t L = c->kv_lens ? c->kv_lens[b] : tc->Sk;
                double mx = -INFINITY, amax = 0;
                for (int64_t j = 0; j < tc->Sk; j++) {
                    s[j] = -INFINITY;
                    if (j >= L || (c->causal && j > i + L - tc->Sq)) continue;
                    double dot = 0;
                    for (int64_t d = 0; d < tc->D; d++)
                        dot += (double)*at(&c->q, b, h, i, d) * *at(&c->k, b, h / G, j, d);
                    s[j] = (float)scale * dot;
                    if (fabs(s[j]) > amax) amax = fabs(s[j]);
                    if (c->mask.data) {
                        float m = *at(&c->mask, c->mask.shape[0] == 1 ? 0 : b, c->mask.shape[1] == 1 ? 0 : h, i, j);
                        s[j] = m == -INFINITY ? -INFINITY : s[j] + m;
                    }
                    if (s[j] > mx) mx = s[j];
                }
                tc->mag[row] = amax;
                double sum = 0;
                for (int64_t j = 0; j < tc->Sk; j++) sum += s[j] == -INFINITY ? 0 : (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < tc->Dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < tc->Sk; j++)
                        if (s[j] != -INFINITY) acc += s[j] * *at(&c->v, b, h / G, j, e);
                    tc->o64[row * tc->Dv + e] = mx == -INFINITY ? 0.0 : acc / sum;
                }
                tc->lse64[row] = mx == -INFINITY ? -INFINITY : mx + log(sum);
            }
    free(s);
}

static void tc_free(tcase *tc) {
    tbuf *all[6] = {&tc->bq, &tc->bk, &tc->bv, &tc->bo, &tc->bm, &tc->bl};
    for (int i = 0; i < 6; i++) modattn_free(all[i]->base);
    free(tc->o64), free(tc->lse64), free(tc->mag);
    memset(tc, 0, sizeof *tc);
}

/* A random configuration; `k` selects some hand-picked edge cases first. */
static void tc_make(tcase *tc, int k) {
    static const int dims[] = {1, 3, 8, 16, 32, 40, 64, 80, 96, 128, 160, 256};
    memset(tc, 0, sizeof *tc);
    int64_t B = 1 + rint_(3), Hkv = 1 + rint_(3), G = 1 + rint_(4);
    int64_t Sq = rint_(4) == 0 ? 1 + rint_(3) : 1 + rint_(70), Sk = rint_(4) == 0 ? 1 + rint_(3) : 1 + rint_(140);
    int64_t D = dims[rint_(12)], Dv = rint_(4) == 0 ? dims[rint_(12)] : D;
    bool causal = rint_(2), lse = rint_(2);
    int kvl = rint_(3), mask = rint_(6), lay_in = rint_(4), lay_o = rint_(4);
    double mag = rint_(5) == 0 ? 4.0 : 1.0;
    float scale = rint_(4) == 0 ? (float)(0.05 + runit()) : 0.0f;
    switch (k) { /* edge cases */
    case 0: Sq = 0; break;
    case 1: Sk = 0; lse = true; break;
    case 2: B = 0; break;
    case 3: kvl = 3; lse = true; break;                 /* every kv_len 0 */
    case 4: causal = true; Sq = 70; Sk = 20; lse = true; break; /* rows seeing nothing */
    case 5: mask = 1; lse = true; break;                /* with dead rows (below) */
    case 6: D = 1; Dv = 1; break;
    case 7: D = 256; Dv = 256; Sq = 33; Sk = 130; break;
    case 8: mag = 30.0; lse = true; break;              /* huge logits: still no NaN */
    case 9: mask = 6; lse = true; Sq = 5; break;        /* -FLT_MAX everywhere: uniform rows */
    case 10: Dv = 0; lse = true; break;
    case 11: G = 8; Hkv = 1; Sq = 1; Sk = 100; break;   /* MQA decode */
    case 12: G = 8; Hkv = 2; Sq = 1; Sk = 1300; break;  /* GQA decode, a long cache: split-KV */
    case 13: G = 4; Hkv = 1; Sq = 3; Sk = 900; lse = true; break; /* 12 rows, split, causal or not */
    /* decode (Sq = 1) with 1 to 8 rows per kv head: cpu_flash's sliced kernels (lanes per row) */
    case 14: G = 1; Hkv = 3; Sq = 1; Sk = 1100; D = Dv = 128; lse = true; break;      /* 1 row, split */
    case 15: G = 2; Hkv = 2; Sq = 1; Sk = 700; D = Dv = 64; mask = 1; break;           /* 2 rows, tile mask */
    case 16: G = 3; Sq = 1; Sk = 1500; D = Dv = 32; causal = true; lse = true; break; /* 3 rows, causal */
    case 17: G = 8; Sq = 1; Sk = 600; D = Dv = 128; kvl = 1; mask = 5; break;          /* kv_lens, row mask */
    case 18: G = 6; Sq = 1; Sk = 530; D = 80; Dv = 16; mask = 1; causal = true; break; /* 6 rows, D != Dv */
    case 19: G = 5; Hkv = 1; Sq = 1; Sk = 513; D = 40; Dv = 8; lse = true; break;     /* 5 rows */
    case 20: G = 2; Hkv = 1; Sq = 1; Sk = 1025; D = 3; Dv = 6; break;                  /* D odd: unsliced */
    default: break;
    }
    tc->B = B, tc->Hq = Hkv * G, tc->Hkv = Hkv, tc->Sq = Sq, tc->Sk = Sk, tc->D = D, tc->Dv = Dv;
    modattn_attn_call *c = &tc->call;
    c->q = make_view(&tc->bq, (int64_t[4]){B, tc->Hq, Sq, D}, lay_in);
    c->k = make_view(&tc->bk, (int64_t[4]){B, Hkv, Sk, D}, lay_in);
    c->v = make_view(&tc->bv, (int64_t[4]){B, Hkv, Sk, Dv}, (lay_in + rint_(2)) % 4);
    c->o = make_view(&tc->bo, (int64_t[4]){B, tc->Hq, Sq, Dv}, lay_o);
    fill(&c->q, mag), fill(&c->k, mag), fill(&c->v, 1.0);
    c->scale = scale;
    c->causal = causal;
    if (kvl && B > 0) {
        for (int64_t b = 0; b < B; b++) tc->kvl[b] = kvl == 3 ? 0 : (int32_t)rint_((int)Sk + 1);
        if (kvl == 2) tc->kvl[0] = 0;
        c->kv_lens = tc->kvl;
    }
    if (mask) {
        /* 1: [B,Hq]  2: [1,Hq]  3: [B,1]  4: [1,1]  5: [B,1] with stride 0 over Sq (padding mask)
         * 6: [1,1] all -FLT_MAX */
        int64_t mb = (mask == 1 || mask == 3 || mask == 5) ? B : 1, mh = (mask == 1 || mask == 2) ? tc->Hq : 1;
        c->mask = make_view(&tc->bm, (int64_t[4]){mb, mh, Sq, Sk}, 0);
        if (mask == 5) c->mask.stride[2] = 0; /* every query row reads the same mask row */
        for (int64_t a = 0; a < mb; a++)
            for (int64_t h = 0; h < mh; h++)
                for (int64_t i = 0; i < Sq; i++) {
                    bool dead = mask != 5 && rint_(5) == 0;
                    for (int64_t j = 0; j < Sk; j++) {
                        float m = mask == 6 ? -FLT_MAX
                                  : dead || rint_(4) == 0 ? -INFINITY
                                                         : (float)(2 * runit() - 1);
                        *at(&c->mask, a, h, i, j) = m;
                    }
                }
    }
    if (lse) c->lse = make_view(&tc->bl, (int64_t[4]){B, tc->Hq, Sq, 1}, lay_o == 1 ? 1 : 0);
    int64_t rows = B * tc->Hq * Sq;
    tc->o64 = calloc((size_t)(rows * Dv + 1), sizeof(double));
    tc->lse64 = calloc((size_t)(rows + 1), sizeof(double));
    tc->mag = calloc((size_t)(rows + 1), sizeof(double));
    oracle(tc);
    snprintf(tc->what, sizeof tc->what,
             "case %d: B=%lld Hq=%lld Hkv=%lld Sq=%lld Sk=%lld D=%lld Dv=%lld causal=%d kvl=%d mask=%d lse=%d layout=%d/%d "
             "mag=%g scale=%g",
             k, (long long)B, (long long)tc->Hq, (long long)Hkv, (long long)Sq, (long long)Sk, (long long)D,
             (long long)Dv, causal, kvl, mask, lse, lay_in, lay_o, mag, (double)scale);
}

/* Compares the outputs with the oracle; also guard regions. Returns the worst err/tol. */
static double tc_check(const tcase *tc, const char *impl) {
    const modattn_attn_call *c = &tc->call;
    double worst = 0;
    const tbuf *outs[2] = {&tc->bo, &tc->bl};
    for (int k = 0; k < 2; k++) {
        const tbuf *b = outs[k];
        if (!b->base) continue;
        for (int64_t i = 0; i < GUARD; i++) {
            CHECK_MSG(b->base[i] == SENT && b->base[GUARD + b->cap + i] == SENT, "%s %s: wrote outside %s", impl,
                      tc->what, k ? "lse" : "o");
            if (b->base[i] != SENT || b->base[GUARD + b->cap + i] != SENT) return INFINITY;
        }
    }
    for (int64_t b = 0; b < tc->B; b++)
        for (int64_t h = 0; h < tc->Hq; h++)
            for (int64_t i = 0; i < tc->Sq; i++) {
                int64_t row = (b * tc->Hq + h) * tc->Sq + i;
                /* fp32 scores carry an absolute error ~ u * |score| * sqrt(D): scale the tolerance */
                double tol = 2e-6 + 2e-6 * tc->mag[row];
                for (int64_t e = 0; e < tc->Dv; e++) {
                    double got = *at(&c->o, b, h, i, e), want = tc->o64[row * tc->Dv + e];
                    double r = fabs(got - want) / tol;
                    if (!(r <= 1.0)) {
                        CHECK_MSG(0, "%s %s: o[%lld,%lld,%lld,%lld] = %.9g, want %.9g", impl, tc->what, (long long)b,
                                  (long long)h, (long long)i, (long long)e, got, want);
                        return isnan(r) ? INFINITY : r;
                    }
                    if (r > worst) worst = r;
                }
                if (c->lse.data) {
                    double got = *at(&c->lse, b, h, i, 0), want = tc->lse64[row];
                    bool ok = isinf(want) ? got == want : fabs(got - want) <= tol * (1 + fabs(want));
                    if (!ok) {
                        CHECK_MSG(0, "%s %s: lse[%lld,%lld,%lld] = %.9g, want %.9g", impl, tc->what, (long long)b,
                                  (long long)h, (long long)i, got, want);
                        return INFINITY;
                    }
                }
            }
    return worst;
}

static bool same_bits(const tcase *tc, const float *o1, const float *l1) {
    bool same = memcmp(o1, tc->bo.base, (size_t)(tc->bo.cap + 2 * GUARD) * sizeof(float)) == 0;
    if (tc->bl.base) same = same && memcmp(l1, tc->bl.base, (size_t)(tc->bl.cap + 2 * GUARD) * sizeof(float)) == 0;
    return same;
}

static void reset_outputs(tcase *tc) {
    for (int64_t i = 0; i < tc->bo.cap + 2 * GUARD; i++) tc->bo.base[i] = SENT;
    for (int64_t i = 0; tc->bl.base && i < tc->bl.cap + 2 * GUARD; i++) tc->bl.base[i] = SENT;
}

/* Runs the cases on `name`; returns the number that ran (an implementation named but absent or
 * unavailable is a failure: the list of names comes from the registry or from the command line). */
static int test_impl(modattn_ctx *ctx2, modattn_ctx *ctx1, const char *name, int ncases) {
    long i2 = modattn_ctx_find(ctx2, name), i1 = modattn_ctx_find(ctx1, name);
    CHECK_MSG(i2 >= 0 && i1 >= 0, "%s: not built in", name);
    if (i2 < 0 || i1 < 0) return 0;
    modattn_impl_info info;
    modattn_ctx_impl_info(ctx2, (size_t)i2, &info);
    CHECK_MSG(info.available, "%s: unavailable here (%s)", name, info.reason);
    if (!info.available) return 0;
    const modattn_attn_impl *impl = modattn__ctx_impl(ctx2, (size_t)i2);
    g_rng = 42;
    double worst = 0;
    int ran = 0, refused = 0;
    for (int k = 0; k < ncases; k++) {
        tcase tc;
        tc_make(&tc, k);
        modattn_attn_desc desc;
        int st = modattn_attn_describe(&tc.call, &desc);
        CHECK_MSG(st == 0, "%s: describe failed: %s", tc.what, modattn_last_error());
        char why[256] = "";
        if (st || !impl->supports(impl->ctx, &desc, why, sizeof why)) {
            refused++;
            CHECK_MSG(why[0] != '\0', "%s refused %s without a reason", name, tc.what);
            tc_free(&tc);
            continue;
        }
        /* snapshot inputs */
        size_t nin = (size_t)(tc.bq.cap + tc.bk.cap + tc.bv.cap + (tc.bm.base ? tc.bm.cap : 0) + 8 * GUARD);
        float *snap = malloc(nin * sizeof(float)), *p = snap;
        const tbuf *ins[4] = {&tc.bq, &tc.bk, &tc.bv, &tc.bm};
        for (int a = 0; a < 4; a++)
            if (ins[a]->base) memcpy(p, ins[a]->base, (size_t)(ins[a]->cap + 2 * GUARD) * 4), p += ins[a]->cap + 2 * GUARD;

        st = modattn_attention_with(ctx2, (size_t)i2, &tc.call);
        CHECK_MSG(st == 0, "%s %s: %s", name, tc.what, modattn_last_error());
        if (st == 0) {
            double r = tc_check(&tc, name);
            if (r > worst) worst = r;
            ran++;
            /* determinism: again with 2 threads, then with 1 thread: bitwise equal */
            float *o1 = malloc((size_t)(tc.bo.cap + 2 * GUARD) * 4), *l1 = NULL;
            memcpy(o1, tc.bo.base, (size_t)(tc.bo.cap + 2 * GUARD) * 4);
            if (tc.bl.base) {
                l1 = malloc((size_t)(tc.bl.cap + 2 * GUARD) * 4);
                memcpy(l1, tc.bl.base, (size_t)(tc.bl.cap + 2 * GUARD) * 4);
            }
            reset_outputs(&tc);
            modattn_attention_with(ctx2, (size_t)i2, &tc.call);
            CHECK_MSG(same_bits(&tc, o1, l1), "%s %s: two runs with 2 threads differ", name, tc.what);
            reset_outputs(&tc);
            modattn_attention_with(ctx1, (size_t)i1, &tc.call);
            CHECK_MSG(same_bits(&tc, o1, l1), "%s %s: 1 thread and 2 threads differ", name, tc.what);
            free(o1), free(l1);
        }
        p = snap;
        for (int a = 0; a < 4; a++)
            if (ins[a]->base) {
                CHECK_MSG(memcmp(p, ins[a]->base, (size_t)(ins[a]->cap + 2 * GUARD) * 4) == 0, "%s %s: input %d changed",
                          name, tc.what, a);
                p += ins[a]->cap + 2 * GUARD;
            }
        free(snap);
        tc_free(&tc);
    }
    printf("%s: %d configurations run, %d refused, worst err/tol %.3f\n", name, ran, refused, worst);
    /* the cases stay inside the contract every built-in CPU implementation takes whole (fp32, D and
     * Dv <= 256, any views): one that refuses them (all of them, or some) is not tested by them */
    CHECK_MSG(ran > 0 && refused == 0 && ran == ncases, "%s: %d of %d configurations ran, %d refused", name, ran,
              ncases, refused);
    return ran;
}

/* The ISA cpu_flash runs is the widest this CPU has (isa_expect.h), as core/cpu.c reports it too:
 * where the CPU has AVX-512 (and MODATTN_CPU_DISABLE leaves it), the AVX-512 kernels must be the
 * ones that run, asked both as the driver's choice and as the kernel a shape gets. */
static void test_isa_choice(modattn_ctx *ctx) {
    const isa_expect want = isa_expected();
    long idx = modattn_ctx_find(ctx, "cpu_flash");
    CHECK_MSG(idx >= 0, "cpu_flash is not built in");
    if (idx < 0) return;
    const modattn_attn_impl *impl = modattn__ctx_impl(ctx, (size_t)idx);
    const char *isa = NULL;
    CHECK(impl->control(impl->ctx, MODATTN_CPU_FLASH_CTL_ISA_NAME, &isa) == 0 && isa);
    CHECK_MSG(!strcmp(isa_from_modattn(), want.widest), "core/cpu.c's features give %s, the CPU has %s",
              isa_from_modattn(), want.widest);
    CHECK_MSG(isa && !strcmp(isa, want.widest), "cpu_flash runs %s, this CPU (MODATTN_CPU_DISABLE applied) has %s",
              isa ? isa : "?", want.widest);
    char buf[160] = "";
    modattn_attn_desc enc = modattn_attn_desc_make(2, 12, 12, 128, 128, 64, false); /* an encoder's shape */
    modattn_ctl_kernel q = {&enc, 2, buf, sizeof buf};
    CHECK(impl->control(impl->ctx, MODATTN_CTL_KERNEL, &q) == 0);
    CHECK_MSG(strncmp(buf, want.widest, strlen(want.widest)) == 0 && buf[strlen(want.widest)] == ',',
              "an encoder's shape runs '%s', want the %s kernels", buf, want.widest);
    printf("cpu_flash ISA: %s (the CPU, MODATTN_CPU_DISABLE applied: %s); an encoder's shape: %s\n", isa ? isa : "?",
           want.widest, buf);
}

/* run() itself: no allocation through the modattn allocator, a short workspace refused. */
static void test_run_contract(modattn_ctx *ctx, const char *name) {
    long idx = modattn_ctx_find(ctx, name);
    if (idx < 0) return;
    const modattn_attn_impl *impl = modattn__ctx_impl(ctx, (size_t)idx);
    const modattn_exec *exec = modattn_ctx_exec(ctx);
    g_rng = 7;
    tcase tc;
    tc_make(&tc, 100);
    modattn_attn_desc desc;
    CHECK(modattn_attn_describe(&tc.call, &desc) == 0);
    char why[256] = "";
    if (!impl->supports(impl->ctx, &desc, why, sizeof why)) {
        tc_free(&tc);
        return;
    }
    size_t ws = impl->workspace_bytes ? impl->workspace_bytes(impl->ctx, &desc, exec->nthreads) : 0;
    void *w = modattn__malloc(ws ? ws : 1, MODATTN_MEM_WORKSPACE);
    modattn_mem_stats before, after;
    modattn_mem_get_stats(&before);
    int st = impl->run(impl->ctx, &desc, &tc.call, w, ws, exec, why, sizeof why);
    modattn_mem_get_stats(&after);
    CHECK_MSG(st == 0, "%s run: %s", name, why);
    CHECK_MSG(after.allocations == before.allocations, "%s: run() allocated %llu blocks", name,
              (unsigned long long)(after.allocations - before.allocations));
    if (ws >= 64) {
        why[0] = '\0';
        st = impl->run(impl->ctx, &desc, &tc.call, w, ws - 64, exec, why, sizeof why);
        CHECK_MSG(st != 0 && why[0] != '\0', "%s: a short workspace was accepted (st %d)", name, st);
    }
    modattn_free(w);
    /* dtype refusal with a reason */
    modattn_attn_desc d16 = desc;
    d16.dtype = MODATTN_DTYPE_F16;
    why[0] = '\0';
    CHECK_MSG(!impl->supports(impl->ctx, &d16, why, sizeof why) && strstr(why, "f16"), "%s: f16 not refused clearly ('%s')",
              name, why);
    tc_free(&tc);
}

/* An encoder's text gives the same bits alone (B = 1, Sq = Sk = n) and padded in a batch (Sq = Sk =
 * S > n, kv_lens = n, another text beside it): cpu_flash picks its kernel by the row count (wide,
 * narrow, and for Sq = 1 sliced), and a row must not see which. Rows i < n of the padded call are
 * compared bit for bit with the call alone, for n = 1..40 and paddings up to n + 130 keys. */
/* Contiguous q [B,G,S,D], one kv head k, v [B,1,S,D], o like q. */
static modattn_attn_call gqa_call(float *q, float *k, float *v, float *o, int B, int G, int S, int D) {
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, G, S, D);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, 1, S, D);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, 1, S, D);
    c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, G, S, D);
    return c;
}

static void test_alone_vs_padded(modattn_ctx *ctx, const char *name) {
    long idx = modattn_ctx_find(ctx, name);
    if (idx < 0) return;
    int compared = 0, differ = 0;
    for (int G = 1; G <= 2; G++)
        for (int D = 32; D <= 64; D += 32)
            for (int n = 1; n <= 40; n += (n < 20 ? 1 : 7)) {
                const int pads[2] = {n + 9, n + 130};
                float *qa = malloc(sizeof(float) * (size_t)(G * n * D)), *ka = malloc(sizeof(float) * (size_t)(n * D));
                float *va = malloc(sizeof(float) * (size_t)(n * D)), *oa = malloc(sizeof(float) * (size_t)(G * n * D));
                g_rng = (uint64_t)(n * 131 + D * 7 + G);
                for (int i = 0; i < G * n * D; i++) qa[i] = (float)(2 * runit() - 1);
                for (int i = 0; i < n * D; i++) ka[i] = (float)(2 * runit() - 1), va[i] = (float)(2 * runit() - 1);
                modattn_attn_call c = gqa_call(qa, ka, va, oa, 1, G, n, D);
                CHECK(modattn_attention_with(ctx, (size_t)idx, &c) == 0);
                for (int p = 0; p < 2; p++) { /* batch of 2: row 0 this text padded to S, row 1 another */
                    const int S = pads[p];
                    const size_t qn = (size_t)(2 * G * S * D), kn = (size_t)(2 * S * D);
                    float *q = calloc(qn, sizeof(float)), *k = calloc(kn, sizeof(float)), *v = calloc(kn, sizeof(float));
                    float *o = calloc(qn, sizeof(float));
                    for (int g = 0; g < G; g++)
                        memcpy(q + (size_t)g * S * D, qa + (size_t)g * n * D, sizeof(float) * (size_t)(n * D));
                    memcpy(k, ka, sizeof(float) * (size_t)(n * D)), memcpy(v, va, sizeof(float) * (size_t)(n * D));
                    for (size_t i = (size_t)(G * S * D); i < qn; i++) q[i] = (float)(2 * runit() - 1);
                    for (size_t i = (size_t)(S * D); i < kn; i++) k[i] = (float)(2 * runit() - 1), v[i] = (float)(2 * runit() - 1);
                    int32_t lens[2] = {n, S};
                    modattn_attn_call cb = gqa_call(q, k, v, o, 2, G, S, D);
                    cb.kv_lens = lens;
                    CHECK(modattn_attention_with(ctx, (size_t)idx, &cb) == 0);
                    for (int g = 0; g < G; g++) {
                        compared++;
                        if (memcmp(o + (size_t)g * S * D, oa + (size_t)g * n * D, sizeof(float) * (size_t)(n * D)) != 0) {
                            differ++;
                            CHECK_MSG(0, "%s: G=%d D=%d n=%d: head %d alone differs from padded to %d", name, G, D, n, g, S);
                        }
                    }
                    free(q), free(k), free(v), free(o);
                }
                free(qa), free(ka), free(va), free(oa);
            }
    printf("%s: %d texts alone vs padded in a batch, %d differ\n", name, compared, differ);
}

/* The encoder's layout: q, k, v views of one [B, S, 3, H, D] buffer (the QKV GEMM's rows, a head's
 * key rows 3 H D floats apart), o [B, S, H, D], kv_lens padding. cpu_flash copies such a head's K and
 * V rows once per group of query tiles (packed heads, flash.h); the result must be the same bits as
 * the same values in contiguous [B, H, S, D] tensors, read in place. S from 17 (2 query tiles) to
 * 512 (several groups of tiles; the most keys packed), 513 (read in place), lengths 0, short, full;
 * D = 32 and 64. */
static void test_packed_heads(modattn_ctx *ctx, const char *name) {
    long idx = modattn_ctx_find(ctx, name);
    if (idx < 0) return;
    const int Ss[] = {17, 40, 130, 210, 300, 512, 513};
    int compared = 0, differ = 0;
    for (int D = 32; D <= 64; D += 32)
        for (size_t si = 0; si < sizeof Ss / sizeof *Ss; si++) {
            const int B = 3, H = 2, S = Ss[si], HD = H * D;
            const size_t n = (size_t)(B * H * S * D);
            float *qkv = malloc(sizeof(float) * 3 * n), *oe = malloc(sizeof(float) * n);
            float *q = malloc(sizeof(float) * n), *k = malloc(sizeof(float) * n), *v = malloc(sizeof(float) * n);
            float *oc = malloc(sizeof(float) * n);
            g_rng = (uint64_t)(S * 31 + D);
            for (size_t i = 0; i < 3 * n; i++) qkv[i] = (float)(2 * runit() - 1);
            for (int b = 0; b < B; b++) /* the same values, contiguous */
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < S; i++) {
                        const float *row = qkv + ((size_t)(b * S + i) * 3) * (size_t)HD + (size_t)(h * D);
                        const size_t at = ((size_t)(b * H + h) * (size_t)S + (size_t)i) * (size_t)D;
                        memcpy(q + at, row, sizeof(float) * (size_t)D);
                        memcpy(k + at, row + HD, sizeof(float) * (size_t)D);
                        memcpy(v + at, row + 2 * HD, sizeof(float) * (size_t)D);
                    }
            int32_t lens[3] = {S, S / 2 + 1, 0};
            modattn_attn_call c;
            memset(&c, 0, sizeof c);
            const int64_t n3 = 3 * (int64_t)n;
            c.q = modattn_tensor_contiguous(qkv, MODATTN_DTYPE_F32, B, H, S, D);
            c.k = modattn_tensor_contiguous(qkv + HD, MODATTN_DTYPE_F32, B, H, S, D);
            c.v = modattn_tensor_contiguous(qkv + 2 * HD, MODATTN_DTYPE_F32, B, H, S, D);
            c.o = modattn_tensor_contiguous(oe, MODATTN_DTYPE_F32, B, H, S, D);
            modattn_tensor *qkvt[3] = {&c.q, &c.k, &c.v};
            for (int t = 0; t < 3; t++) {
                qkvt[t]->stride[0] = (int64_t)S * 3 * HD, qkvt[t]->stride[1] = D, qkvt[t]->stride[2] = 3 * HD;
                qkvt[t]->capacity = n3 - t * HD;
            }
            c.o.stride[0] = (int64_t)S * HD, c.o.stride[1] = D, c.o.stride[2] = HD;
            c.kv_lens = lens;
            CHECK_MSG(modattn_attention_with(ctx, (size_t)idx, &c) == 0, "%s: encoder layout S=%d D=%d: %s", name, S, D,
                      modattn_last_error());
            modattn_attn_call cc;
            memset(&cc, 0, sizeof cc);
            cc.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
            cc.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
            cc.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
            cc.o = modattn_tensor_contiguous(oc, MODATTN_DTYPE_F32, B, H, S, D);
            cc.kv_lens = lens;
            CHECK(modattn_attention_with(ctx, (size_t)idx, &cc) == 0);
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < S; i++) {
                        compared++;
                        const float *re = oe + (size_t)(b * S + i) * (size_t)HD + (size_t)(h * D);
                        const float *rc = oc + ((size_t)(b * H + h) * (size_t)S + (size_t)i) * (size_t)D;
                        if (memcmp(re, rc, sizeof(float) * (size_t)D) != 0) {
                            if (!differ)
                                CHECK_MSG(0, "%s: encoder layout S=%d D=%d b=%d h=%d row %d differs from contiguous (%g vs %g)",
                                          name, S, D, b, h, i, re[0], rc[0]);
                            differ++;
                        }
                    }
            free(qkv), free(oe), free(q), free(k), free(v), free(oc);
        }
    printf("%s: %d rows in the encoder's layout vs contiguous, %d differ\n", name, compared, differ);
}

/* cpu_flash's workspace for an encoder's shape does not depend on the key count (packed heads
 * reserve a fixed room, cpu_flash.c): the attention workspace is grown to the largest seen, so a
 * size that followed Sk would grow with each longer batch (test_no_growth). Lengths from 64 (two
 * tiles on every ISA) past the packing limit (512) to 2048; D = 32 and 64. */
static void test_ws_independent_of_sk(modattn_ctx *ctx) {
    long idx = modattn_ctx_find(ctx, "cpu_flash");
    if (idx < 0) return;
    const modattn_attn_impl *impl = modattn__ctx_impl(ctx, (size_t)idx);
    const int64_t Ss[] = {64, 130, 210, 512, 513, 2048};
    for (int64_t D = 32; D <= 64; D += 32) {
        size_t first = 0;
        for (size_t i = 0; i < sizeof Ss / sizeof *Ss; i++) {
            modattn_attn_desc d = modattn_attn_desc_make(25, 12, 12, Ss[i], Ss[i], D, false);
            const size_t ws = impl->workspace_bytes(impl->ctx, &d, 2);
            if (i == 0) first = ws;
            CHECK_MSG(ws == first && ws > 0, "cpu_flash workspace at S=%lld D=%lld: %zu bytes, %zu at S=%lld",
                      (long long)Ss[i], (long long)D, ws, first, (long long)Ss[0]);
        }
    }
}

/* cpu_flash answers MODATTN_CTL_KERNEL: GQA decode takes a sliced kernel on AVX-512 and AVX2 (not
 * on the scalar ISA), a split over 512-key ranges, and the same rows with Sq = 2 no sliced one. */
static void test_kernel_names(modattn_ctx *ctx) {
    long idx = modattn_ctx_find(ctx, "cpu_flash");
    if (idx < 0) return;
    const modattn_attn_impl *impl = modattn__ctx_impl(ctx, (size_t)idx);
    const char *isa = NULL;
    CHECK(impl->control(impl->ctx, MODATTN_CPU_FLASH_CTL_ISA_NAME, &isa) == 0 && isa);
    char buf[160];
    modattn_attn_desc dec = modattn_attn_desc_make(1, 32, 4, 1, 1024, 128, false);
    modattn_ctl_kernel q = {&dec, 2, buf, sizeof buf};
    CHECK(impl->control(impl->ctx, MODATTN_CTL_KERNEL, &q) == 0);
    const bool simd = isa && (!strcmp(isa, "avx512") || !strcmp(isa, "avx2"));
    CHECK_MSG(isa && strncmp(buf, isa, strlen(isa)) == 0 && strstr(buf, "split-KV: 2 ranges of 512 keys") &&
                  (strstr(buf, "(sliced)") != NULL) == (simd && !strcmp(isa, "avx512")),
              "decode 32/4, 1k keys on %s: '%s'", isa ? isa : "?", buf);
    modattn_attn_desc mqa = modattn_attn_desc_make(1, 4, 1, 1, 100, 128, false); /* 4 rows: sliced on both */
    q.desc = &mqa;
    CHECK(impl->control(impl->ctx, MODATTN_CTL_KERNEL, &q) == 0);
    CHECK_MSG((strstr(buf, "(sliced)") != NULL) == simd && !strstr(buf, "split"), "decode 4/1, 100 keys on %s: '%s'",
              isa ? isa : "?", buf);
    modattn_attn_desc two = modattn_attn_desc_make(1, 2, 1, 2, 100, 128, false); /* 4 rows, Sq = 2 */
    q.desc = &two;
    CHECK(impl->control(impl->ctx, MODATTN_CTL_KERNEL, &q) == 0);
    CHECK_MSG(!strstr(buf, "(sliced)"), "Sq = 2 on %s took a sliced kernel: '%s'", isa ? isa : "?", buf);
    char tiny[8];
    q.buf = tiny, q.len = sizeof tiny; /* truncated, still terminated */
    CHECK(impl->control(impl->ctx, MODATTN_CTL_KERNEL, &q) == 0 && strlen(tiny) < sizeof tiny);
    CHECK(impl->control(impl->ctx, MODATTN_CTL_KERNEL, NULL) == MODATTN_EINVAL);
    printf("cpu_flash kernels (%s): decode 32/4 at 1k keys: %s\n", isa ? isa : "?",
           (q.buf = buf, q.len = sizeof buf, q.desc = &dec, impl->control(impl->ctx, MODATTN_CTL_KERNEL, &q), buf));
}

int main(int argc, char **argv) {
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    modattn_ctx *ctx2 = NULL, *ctx1 = NULL;
    CHECK(modattn_ctx_create(&o, &ctx2) == 0);
    o.threads = 1;
    CHECK(modattn_ctx_create(&o, &ctx1) == 0);
    if (!ctx1 || !ctx2) return test_finish("test_kernels");
    const char *cpu_disable = getenv("MODATTN_CPU_DISABLE");
    printf("MODATTN_CPU_DISABLE=%s\n", cpu_disable ? cpu_disable : "");
    int ncases = getenv("MODATTN_TEST_CASES") ? atoi(getenv("MODATTN_TEST_CASES")) : 160;
    int tested = 0, flash_ran = 0;
    if (argc > 1) {
        for (int a = 1; a < argc; a++) tested += test_impl(ctx2, ctx1, argv[a], ncases) > 0, test_run_contract(ctx2, argv[a]);
    } else {
        for (size_t i = 0; i < modattn_ctx_impl_count(ctx2); i++) {
            modattn_impl_info info;
            modattn_ctx_impl_info(ctx2, i, &info);
            if (!strcmp(info.name, "reference") || strcmp(info.origin, "builtin") != 0 ||
                info.device != MODATTN_DEVICE_CPU)
                continue;
            int ran = test_impl(ctx2, ctx1, info.name, ncases);
            tested += ran > 0;
            if (!strcmp(info.name, "cpu_flash")) flash_ran = ran;
            test_run_contract(ctx2, info.name);
        }
        CHECK_MSG(flash_ran > 0, "cpu_flash ran no configuration");
        test_isa_choice(ctx2);
        test_alone_vs_padded(ctx2, "cpu_flash");
        test_packed_heads(ctx2, "cpu_flash");
        test_ws_independent_of_sk(ctx2);
        test_kernel_names(ctx2);
    }
    /* at least one implementation ran cases: a registry, a list or a filter that leaves none out
     * proves nothing */
    CHECK_MSG(tested > 0 && ncases > 0, "no implementation ran a configuration (%d cases asked)", ncases);
    modattn_ctx_free(ctx2);
    modattn_ctx_free(ctx1);
    return test_finish("test_kernels");
}
