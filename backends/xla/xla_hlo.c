/* backends/xla/xla_hlo.c — StableHLO text (MLIR, generic op syntax: parsed alike by every
 * plugin from PJRT API 0.81 on) for the whole BERT encoder of one (B, S) bucket and for attention
 * alone. The arithmetic is the model's as sentence-transformers computes it: embeddings summed and
 * LayerNorm'ed; per layer fused QKV, softmax(q k^T * scale) over keys j < len with the rest at
 * -inf, the output projection plus the residual and LayerNorm, the FFN with the model's
 * activation (erf GELU as chlo.erf), plus the residual and LayerNorm; pooling over rows < len;
 * x / max(||x||, 1e-12). Every fp32 dot carries precision HIGHEST, so a TPU or GPU does not drop
 * to bf16 or TF32 on its own. */
#define _GNU_SOURCE
#include "backends/xla/xla.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/backend/device.h" /* MODATTN_POOL_* */

void xla_text_free(xla_text *t) {
    free(t->s);
    memset(t, 0, sizeof *t);
}

static void put(xla_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(xla_text *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            t->oom = true;
            return;
        }
        if (t->s && t->n + (size_t)w < t->cap) {
            t->n += (size_t)w;
            return;
        }
        size_t nc = t->cap ? t->cap * 2 : 65536;
        while (nc < t->n + (size_t)w + 1) nc *= 2;
        char *ns = realloc(t->s, nc);
        if (!ns) {
            t->oom = true;
            return;
        }
        t->s = ns, t->cap = nc;
    }
}

/* ---- values: an SSA number and its tensor type */
typedef struct val {
    int id;
    int nd;
    int64_t d[6];
    bool i32, i1, bf16;
} val;

typedef struct emit {
    xla_text *t;
    int next;
    bool bf16_dense; /* the dense layers' products in bfloat16, summed in fp32 (--precision bf16) */
} emit;

/* "tensor<2x3xf32>" */
static const char *ty(const val *v, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "tensor<");
    for (int i = 0; i < v->nd; i++) o += (size_t)snprintf(buf + o, len - o, "%lldx", (long long)v->d[i]);
    snprintf(buf + o, len - o, "%s>", v->i1 ? "i1" : v->i32 ? "i32" : v->bf16 ? "bf16" : "f32");
    return buf;
}

static val shape(int nd, const int64_t *d, bool i32) {
    val v;
    memset(&v, 0, sizeof v);
    v.nd = nd;
    for (int i = 0; i < nd; i++) v.d[i] = d[i];
    v.i32 = i32;
    return v;
}
#define SHAPE(...) shape((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, false)
#define SHAPE_I(...) shape((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, true)

static val fresh(emit *e, val like) {
    like.id = e->next++;
    return like;
}

/* "array<i64: 0, 1>" */
static const char *dims(const int64_t *d, int n, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "array<i64");
    for (int i = 0; i < n; i++) o += (size_t)snprintf(buf + o, len - o, "%s %lld", i ? "," : ":", (long long)d[i]);
    snprintf(buf + o, len - o, ">");
    return buf;
}

static val unary(emit *e, const char *op, val a) {
    val r = fresh(e, a);
    char t[96];
    put(e->t, "    %%v%d = \"%s\"(%%v%d) : (%s) -> %s\n", r.id, op, a.id, ty(&a, t, sizeof t), t);
    return r;
}

static val binary(emit *e, const char *op, val a, val b) {
    val r = fresh(e, a);
    char t[96];
    ty(&a, t, sizeof t);
    put(e->t, "    %%v%d = \"stablehlo.%s\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", r.id, op, a.id, b.id, t, t, t);
    return r;
}

static val constant(emit *e, double x) {
    val r = fresh(e, shape(0, NULL, false));
    put(e->t, "    %%v%d = \"stablehlo.constant\"() {value = dense<%.9e> : tensor<f32>} : () -> tensor<f32>\n", r.id, x);
    return r;
}

static val constant_i(emit *e, int64_t x) {
    val r = fresh(e, shape(0, NULL, true));
    put(e->t, "    %%v%d = \"stablehlo.constant\"() {value = dense<%lld> : tensor<i32>} : () -> tensor<i32>\n", r.id,
        (long long)x);
    return r;
}

static val constant_inf(emit *e, bool negative) {
    val r = fresh(e, shape(0, NULL, false));
    put(e->t, "    %%v%d = \"stablehlo.constant\"() {value = dense<0x%s> : tensor<f32>} : () -> tensor<f32>\n", r.id,
        negative ? "FF800000" : "7F800000");
    return r;
}

/* a broadcast of a into `to`'s shape, a's dims landing on `map` */
static val bcast(emit *e, val a, val to, const int64_t *map) {
    val r = to;
    r.i32 = a.i32, r.i1 = a.i1;
    r = fresh(e, r);
    char ta[96], tr[96], dm[96];
    put(e->t, "    %%v%d = \"stablehlo.broadcast_in_dim\"(%%v%d) {broadcast_dimensions = %s} : (%s) -> %s\n", r.id, a.id,
        dims(map, a.nd, dm, sizeof dm), ty(&a, ta, sizeof ta), ty(&r, tr, sizeof tr));
    return r;
}

static val scalar_like(emit *e, double x, val like) { return bcast(e, constant(e, x), like, NULL); }

static val reshape(emit *e, val a, val to) {
    to.i32 = a.i32, to.i1 = a.i1;
    val r = fresh(e, to);
    char ta[96], tr[96];
    put(e->t, "    %%v%d = \"stablehlo.reshape\"(%%v%d) : (%s) -> %s\n", r.id, a.id, ty(&a, ta, sizeof ta),
        ty(&r, tr, sizeof tr));
    return r;
}

static val transpose(emit *e, val a, const int64_t *perm) {
    val r = a;
    for (int i = 0; i < a.nd; i++) r.d[i] = a.d[perm[i]];
    r = fresh(e, r);
    char ta[96], tr[96], dm[96];
    put(e->t, "    %%v%d = \"stablehlo.transpose\"(%%v%d) {permutation = %s} : (%s) -> %s\n", r.id, a.id,
        dims(perm, a.nd, dm, sizeof dm), ty(&a, ta, sizeof ta), ty(&r, tr, sizeof tr));
    return r;
}

/* a[start[i] .. limit[i]) */
static val slice(emit *e, val a, const int64_t *start, const int64_t *limit) {
    val r = a;
    int64_t one[6] = {1, 1, 1, 1, 1, 1};
    for (int i = 0; i < a.nd; i++) r.d[i] = limit[i] - start[i];
    r = fresh(e, r);
    char ta[96], tr[96], d1[96], d2[96], d3[96];
    put(e->t,
        "    %%v%d = \"stablehlo.slice\"(%%v%d) {start_indices = %s, limit_indices = %s, strides = %s} : (%s) -> %s\n",
        r.id, a.id, dims(start, a.nd, d1, sizeof d1), dims(limit, a.nd, d2, sizeof d2), dims(one, a.nd, d3, sizeof d3),
        ty(&a, ta, sizeof ta), ty(&r, tr, sizeof tr));
    return r;
}

/* reduce a over dimension `dim` with add or maximum */
static val reduce(emit *e, val a, int dim, const char *op, double init_neg_inf) {
    val init = init_neg_inf != 0 ? constant_inf(e, true) : constant(e, 0.0);
    val r = a;
    r.nd = a.nd - 1;
    for (int i = dim; i < r.nd; i++) r.d[i] = a.d[i + 1];
    r = fresh(e, r);
    const int x = e->next++, y = e->next++, z = e->next++;
    char ta[96], tr[96];
    put(e->t,
        "    %%v%d = \"stablehlo.reduce\"(%%v%d, %%v%d) ({\n"
        "    ^bb0(%%v%d: tensor<f32>, %%v%d: tensor<f32>):\n"
        "      %%v%d = \"stablehlo.%s\"(%%v%d, %%v%d) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
        "      \"stablehlo.return\"(%%v%d) : (tensor<f32>) -> ()\n"
        "    }) {dimensions = array<i64: %d>} : (%s, tensor<f32>) -> %s\n",
        r.id, a.id, init.id, x, y, z, op, x, y, z, dim, ty(&a, ta, sizeof ta), ty(&r, tr, sizeof tr));
    return r;
}

/* dot_general: batching dims bl/br (nb of them), contracting cl/cr; result batch, lhs free, rhs free */
static val dot(emit *e, val a, val b, int nb, const int64_t *bl, const int64_t *br, int64_t cl, int64_t cr) {
    val r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < nb; i++) r.d[r.nd++] = a.d[bl[i]];
    for (int i = 0; i < a.nd; i++) {
        bool skip = i == cl;
        for (int k = 0; k < nb; k++) skip |= i == bl[k];
        if (!skip) r.d[r.nd++] = a.d[i];
    }
    for (int i = 0; i < b.nd; i++) {
        bool skip = i == cr;
        for (int k = 0; k < nb; k++) skip |= i == br[k];
        if (!skip) r.d[r.nd++] = b.d[i];
    }
    r.bf16 = false; /* fp32 sums, whatever the operands */
    r = fresh(e, r);
    const char *prec = a.bf16 ? "DEFAULT" : "HIGHEST";
    char ta[96], tb[96], tr[96], b1[64] = "", b2[64] = "";
    if (nb) {
        char x1[48], x2[48];
        size_t o1 = 0, o2 = 0;
        for (int i = 0; i < nb; i++) {
            o1 += (size_t)snprintf(x1 + o1, sizeof x1 - o1, "%s%lld", i ? ", " : "", (long long)bl[i]);
            o2 += (size_t)snprintf(x2 + o2, sizeof x2 - o2, "%s%lld", i ? ", " : "", (long long)br[i]);
        }
        snprintf(b1, sizeof b1, "lhs_batching_dimensions = [%s], ", x1);
        snprintf(b2, sizeof b2, "rhs_batching_dimensions = [%s], ", x2);
    }
    put(e->t,
        "    %%v%d = \"stablehlo.dot_general\"(%%v%d, %%v%d) {dot_dimension_numbers = #stablehlo.dot<%s%s"
        "lhs_contracting_dimensions = [%lld], rhs_contracting_dimensions = [%lld]>, precision_config = "
        "[#stablehlo<precision %s>, #stablehlo<precision %s>]} : (%s, %s) -> %s\n",
        r.id, a.id, b.id, b1, b2, (long long)cl, (long long)cr, prec, prec, ty(&a, ta, sizeof ta),
        ty(&b, tb, sizeof tb), ty(&r, tr, sizeof tr));
    return r;
}

static val iota(emit *e, val like, int dim) {
    like.i32 = true, like.i1 = false;
    val r = fresh(e, like);
    char tr[96];
    put(e->t, "    %%v%d = \"stablehlo.iota\"() {iota_dimension = %d : i64} : () -> %s\n", r.id, dim, ty(&r, tr, sizeof tr));
    return r;
}

static val compare(emit *e, val a, val b, const char *dir) {
    val r = a;
    r.i32 = false, r.i1 = true;
    r = fresh(e, r);
    char ta[96], tr[96];
    ty(&a, ta, sizeof ta);
    put(e->t,
        "    %%v%d = \"stablehlo.compare\"(%%v%d, %%v%d) {comparison_direction = #stablehlo<comparison_direction %s>} : "
        "(%s, %s) -> %s\n",
        r.id, a.id, b.id, dir, ta, ta, ty(&r, tr, sizeof tr));
    return r;
}

static val select_(emit *e, val p, val a, val b) {
    val r = fresh(e, a);
    char tp[96], ta[96];
    ty(&a, ta, sizeof ta);
    put(e->t, "    %%v%d = \"stablehlo.select\"(%%v%d, %%v%d, %%v%d) : (%s, %s, %s) -> %s\n", r.id, p.id, a.id, b.id,
        ty(&p, tp, sizeof tp), ta, ta, ta);
    return r;
}

static val to_f32(emit *e, val a) {
    val r = a;
    r.i32 = false, r.i1 = false;
    r = fresh(e, r);
    char ta[96], tr[96];
    put(e->t, "    %%v%d = \"stablehlo.convert\"(%%v%d) : (%s) -> %s\n", r.id, a.id, ty(&a, ta, sizeof ta),
        ty(&r, tr, sizeof tr));
    return r;
}

/* ---- the encoder's pieces */

/* x[..., H]: (x - mean) / sqrt(var + eps) * g + b over the last dimension */
static val layernorm(emit *e, val x, val g, val b, double eps) {
    const int last = x.nd - 1;
    int64_t keep[4] = {0, 1, 2, 3}, lastd[1] = {last};
    val sum = reduce(e, x, last, "add", 0);
    val n = scalar_like(e, (double)x.d[last], sum);
    val mean = binary(e, "divide", sum, n);
    val d = binary(e, "subtract", x, bcast(e, mean, x, keep));
    val var = binary(e, "divide", reduce(e, binary(e, "multiply", d, d), last, "add", 0), n);
    val rstd = unary(e, "stablehlo.rsqrt", binary(e, "add", var, scalar_like(e, eps, var)));
    val y = binary(e, "multiply", d, bcast(e, rstd, x, keep));
    y = binary(e, "multiply", y, bcast(e, g, x, lastd));
    return binary(e, "add", y, bcast(e, b, x, lastd));
}

static val to_bf16(emit *e, val a) {
    val r = a;
    r.bf16 = true;
    r = fresh(e, r);
    char ta[96], tr[96];
    put(e->t, "    %%v%d = \"stablehlo.convert\"(%%v%d) : (%s) -> %s\n", r.id, a.id, ty(&a, ta, sizeof ta),
        ty(&r, tr, sizeof tr));
    return r;
}

/* x[B,S,K] . w[N,K]^T + bias[N]; with bf16_dense the operands rounded to bfloat16 (round to nearest
 * even, as the CPU's VCVTNEPS2BF16) and the products summed in fp32 (the result type) */
static val linear(emit *e, val x, val w, val bias) {
    if (e->bf16_dense) x = to_bf16(e, x), w = to_bf16(e, w);
    val y = dot(e, x, w, 0, NULL, NULL, 2, 1);
    int64_t lastd[1] = {2};
    return binary(e, "add", y, bcast(e, bias, y, lastd));
}

static val activation(emit *e, val x, modattn_act act) {
    if (act == MODATTN_ACT_RELU) return binary(e, "maximum", x, scalar_like(e, 0.0, x));
    if (act == MODATTN_ACT_GELU_TANH) { /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        val x3 = binary(e, "multiply", binary(e, "multiply", x, x), x);
        val in = binary(e, "add", x, binary(e, "multiply", x3, scalar_like(e, 0.044715, x)));
        val t = unary(e, "stablehlo.tanh", binary(e, "multiply", in, scalar_like(e, 0.7978845608028654, x)));
        val h = binary(e, "multiply", x, scalar_like(e, 0.5, x));
        return binary(e, "multiply", h, binary(e, "add", t, scalar_like(e, 1.0, x)));
    }
    /* x/2 (1 + erf(x / sqrt 2)) */
    val t = unary(e, "chlo.erf", binary(e, "multiply", x, scalar_like(e, 0.70710678118654752, x)));
    val h = binary(e, "multiply", x, scalar_like(e, 0.5, x));
    return binary(e, "multiply", h, binary(e, "add", t, scalar_like(e, 1.0, x)));
}

/* softmax(q k^T scale + mask) v for q[B,Hq,Sq,D], k[B,Hkv,Sk,D], v[B,Hkv,Sk,Dv] with Hq = Hkv
 * (the encoder) or grouped (attention alone: k and v repeated per group by a broadcast); keys
 * j >= lens[b] invisible; causal: query i sees key j iff j <= i + lens[b] - Sq (the contract's
 * bottom-right diagonal); mask (has_mask) additive [B|1, Hq|1, Sq, Sk]. A row that sees no key gives
 * o = 0 and lse = -inf. *lse (when not NULL) gets [B,Hq,Sq,1]. */
static val and_(emit *e, val a, val b) {
    val r = fresh(e, a);
    char tp[96];
    ty(&a, tp, sizeof tp);
    put(e->t, "    %%v%d = \"stablehlo.and\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", r.id, a.id, b.id, tp, tp, tp);
    return r;
}

/* (wl, wr: a sliding window's sides around i' = i + lens[b] - Sq, -1 unbounded; softcap > 0: the
 * scaled scores capped as softcap * tanh(s / softcap) before the mask; slopes f32[Hq]: the ALiBi
 * bias -slopes[h] * |i' - j| after the cap (one-sided under causal: every visible j <= i' there):
 * attention.h) */
static val attend(emit *e, val q, val k, val v, val lens, const val *mask, double scale, bool causal, int64_t wl,
                  int64_t wr, double softcap, const val *slopes, val *lse) {
    const int64_t B = q.d[0], Hq = q.d[1], Sq = q.d[2], Hkv = k.d[1], Sk = k.d[2], D = k.d[3], Dv = v.d[3];
    if (Hkv != Hq) { /* [B,Hkv,Sk,D] -> [B,Hkv,G,Sk,D] -> [B,Hq,Sk,D] (head h uses kv head h / G) */
        const int64_t G = Hq / Hkv;
        int64_t m[4] = {0, 1, 3, 4};
        val k5 = shape(5, (int64_t[]){B, Hkv, G, Sk, D}, false), v5 = shape(5, (int64_t[]){B, Hkv, G, Sk, Dv}, false);
        k = reshape(e, bcast(e, k, k5, m), SHAPE(B, Hq, Sk, D));
        v = reshape(e, bcast(e, v, v5, m), SHAPE(B, Hq, Sk, Dv));
    }
    int64_t bd[2] = {0, 1}, all4[4] = {0, 1, 2, 3};
    val s = dot(e, q, k, 2, bd, bd, 3, 3); /* [B,Hq,Sq,Sk] */
    s = binary(e, "multiply", s, scalar_like(e, scale, s));
    if (softcap > 0.0)
        s = binary(e, "multiply", unary(e, "stablehlo.tanh", binary(e, "multiply", s, scalar_like(e, 1.0 / softcap, s))),
                   scalar_like(e, softcap, s));
    if (mask) s = binary(e, "add", s, bcast(e, *mask, s, all4));
    int64_t b0[1] = {0};
    val keyidx = iota(e, s, 3);
    val lensb = bcast(e, lens, keyidx, b0);
    if (slopes) { /* s -= slopes[h] * |i' - j|, i' = i + lens[b] - Sq */
        int64_t h1[1] = {1};
        val qi = iota(e, s, 2);
        val ip = binary(e, "add", qi, binary(e, "subtract", lensb, bcast(e, constant_i(e, Sq), qi, NULL)));
        val dist = unary(e, "stablehlo.abs", to_f32(e, binary(e, "subtract", ip, keyidx)));
        s = binary(e, "subtract", s, binary(e, "multiply", dist, bcast(e, *slopes, s, h1)));
    }
    val ok = compare(e, keyidx, lensb, "LT");
    if (causal) { /* key j <= query i + lens[b] - Sq */
        val qi = iota(e, s, 2);
        val lim = binary(e, "add", qi, binary(e, "subtract", lensb, bcast(e, constant_i(e, Sq), qi, NULL)));
        val c = compare(e, keyidx, lim, "LE");
        val r = fresh(e, ok);
        char tp[96];
        ty(&ok, tp, sizeof tp);
        put(e->t, "    %%v%d = \"stablehlo.and\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", r.id, ok.id, c.id, tp, tp, tp);
        ok = r;
    }
    if (wl >= 0 || wr >= 0) { /* i' - wl <= j <= i' + wr */
        val qi = iota(e, s, 2);
        val ip = binary(e, "add", qi, binary(e, "subtract", lensb, bcast(e, constant_i(e, Sq), qi, NULL)));
        if (wl >= 0)
            ok = and_(e, ok, compare(e, keyidx, binary(e, "subtract", ip, bcast(e, constant_i(e, wl), ip, NULL)), "GE"));
        if (wr >= 0)
            ok = and_(e, ok, compare(e, keyidx, binary(e, "add", ip, bcast(e, constant_i(e, wr), ip, NULL)), "LE"));
    }
    s = select_(e, ok, s, bcast(e, constant_inf(e, true), s, NULL));
    int64_t k3[3] = {0, 1, 2};
    val mx = reduce(e, s, 3, "maximum", -1);
    /* a row with no visible key has max -inf: computed with 0 there, its sum is 0, its o 0 */
    val finite = compare(e, mx, bcast(e, constant_inf(e, true), mx, NULL), "GT");
    mx = select_(e, finite, mx, scalar_like(e, 0.0, mx));
    val p = unary(e, "stablehlo.exponential", binary(e, "subtract", s, bcast(e, mx, s, k3)));
    val sum = reduce(e, p, 3, "add", 0);
    val pos = compare(e, sum, scalar_like(e, 0.0, sum), "GT");
    sum = select_(e, pos, sum, scalar_like(e, 1.0, sum));
    if (lse) {
        val l = binary(e, "add", mx, unary(e, "stablehlo.log", sum));
        l = select_(e, finite, l, bcast(e, constant_inf(e, true), l, NULL));
        *lse = reshape(e, l, SHAPE(B, Hq, Sq, 1));
    }
    p = binary(e, "divide", p, bcast(e, sum, p, k3));
    return dot(e, p, v, 2, bd, bd, 3, 2); /* [B,Hq,Sq,Dv] */
}

int xla_hlo_encoder(const xla_encoder_shape *c, xla_text *out) {
    memset(out, 0, sizeof *out);
    emit E = {out, 0, c->bf16}, *e = &E;
    const int64_t B = c->B, S = c->S, H = c->H, nh = c->heads, dh = c->H / c->heads, I = c->I;
    /* arguments */
    val word = fresh(e, SHAPE(c->V, H)), pos = fresh(e, SHAPE(c->P, H)), type0 = fresh(e, SHAPE(H));
    val eg = fresh(e, SHAPE(H)), eb = fresh(e, SHAPE(H));
    val *w = calloc((size_t)c->layers * 12, sizeof *w);
    if (!w) return MODATTN_ENOMEM;
    for (int64_t l = 0; l < c->layers; l++) {
        val *L = w + l * 12;
        L[0] = fresh(e, SHAPE(3 * H, H)), L[1] = fresh(e, SHAPE(3 * H));
        L[2] = fresh(e, SHAPE(H, H)), L[3] = fresh(e, SHAPE(H));
        L[4] = fresh(e, SHAPE(H)), L[5] = fresh(e, SHAPE(H));
        L[6] = fresh(e, SHAPE(I, H)), L[7] = fresh(e, SHAPE(I));
        L[8] = fresh(e, SHAPE(H, I)), L[9] = fresh(e, SHAPE(H));
        L[10] = fresh(e, SHAPE(H)), L[11] = fresh(e, SHAPE(H));
    }
    val ids = fresh(e, SHAPE_I(B, S)), lens = fresh(e, SHAPE_I(B));
    int ncol = 0;
    if (c->pooling & MODATTN_POOL_CLS) ncol++;
    if (c->pooling & MODATTN_POOL_MAX) ncol++;
    if (c->pooling & MODATTN_POOL_MEAN) ncol++;
    put(e->t, "module @modattn_encoder attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n");
    put(e->t, "  func.func public @main(");
    const int nargs = 5 + (int)c->layers * 12 + 2;
    for (int i = 0; i < nargs; i++) {
        val a = i < 5 ? (val[]){word, pos, type0, eg, eb}[i] : i < nargs - 2 ? w[i - 5] : i == nargs - 2 ? ids : lens;
        char t[96];
        put(e->t, "%s%%v%d: %s", i ? ", " : "", a.id, ty(&a, t, sizeof t));
    }
    put(e->t, ") -> tensor<%lldx%lldxf32> {\n", (long long)B, (long long)c->dim);

    /* embeddings: word[ids] + pos[0..S) + type0, LayerNorm */
    val ids3 = reshape(e, ids, SHAPE_I(B, S, 1));
    val x = fresh(e, SHAPE(B, S, H));
    {
        char tw[96], ti[96], tx[96];
        put(e->t,
            "    %%v%d = \"stablehlo.gather\"(%%v%d, %%v%d) {dimension_numbers = #stablehlo.gather<offset_dims = [2], "
            "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, slice_sizes = array<i64: 1, %lld>, "
            "indices_are_sorted = false} : (%s, %s) -> %s\n",
            x.id, word.id, ids3.id, (long long)H, ty(&word, tw, sizeof tw), ty(&ids3, ti, sizeof ti), ty(&x, tx, sizeof tx));
    }
    int64_t z2[2] = {0, 0}, sh[2] = {S, H}, m12[2] = {1, 2}, m2[1] = {2};
    x = binary(e, "add", x, bcast(e, slice(e, pos, z2, sh), x, m12));
    x = binary(e, "add", x, bcast(e, type0, x, m2));
    x = layernorm(e, x, eg, eb, c->eps);

    const double scale = 1.0 / __builtin_sqrt((double)dh);
    for (int64_t l = 0; l < c->layers; l++) {
        const val *L = w + l * 12;
        val qkv = linear(e, x, L[0], L[1]); /* [B,S,3H] */
        val heads[3];
        for (int k = 0; k < 3; k++) {
            int64_t s0[3] = {0, 0, k * H}, s1[3] = {B, S, (k + 1) * H}, perm[4] = {0, 2, 1, 3};
            heads[k] = transpose(e, reshape(e, slice(e, qkv, s0, s1), SHAPE(B, S, nh, dh)), perm);
        }
        val ctx = attend(e, heads[0], heads[1], heads[2], lens, NULL, scale, false, -1, -1, 0.0, NULL, NULL); /* [B,nh,S,dh] */
        int64_t perm[4] = {0, 2, 1, 3};
        ctx = reshape(e, transpose(e, ctx, perm), SHAPE(B, S, H));
        x = layernorm(e, binary(e, "add", linear(e, ctx, L[2], L[3]), x), L[4], L[5], c->eps);
        val h = activation(e, linear(e, x, L[6], L[7]), c->act);
        x = layernorm(e, binary(e, "add", linear(e, h, L[8], L[9]), x), L[10], L[11], c->eps);
    }

    /* pooling over rows < len, in sentence-transformers' order: cls, max, mean */
    int64_t b0[1] = {0}, k01[2] = {0, 1}, k0[1] = {0};
    val row = iota(e, SHAPE(B, S), 1);
    val valid = compare(e, row, bcast(e, lens, row, b0), "LT"); /* [B,S] */
    val valid3 = bcast(e, valid, x, k01);
    val parts[3];
    int np = 0;
    if (c->pooling & MODATTN_POOL_CLS) {
        int64_t s0[3] = {0, 0, 0}, s1[3] = {B, 1, H};
        parts[np++] = reshape(e, slice(e, x, s0, s1), SHAPE(B, H));
    }
    if (c->pooling & MODATTN_POOL_MAX)
        parts[np++] = reduce(e, select_(e, valid3, x, bcast(e, constant_inf(e, true), x, NULL)), 1, "maximum", -1);
    if (c->pooling & MODATTN_POOL_MEAN) {
        val sum = reduce(e, select_(e, valid3, x, scalar_like(e, 0.0, x)), 1, "add", 0); /* [B,H] */
        val n = to_f32(e, lens);
        n = binary(e, "maximum", n, scalar_like(e, 1.0, n));
        parts[np++] = binary(e, "divide", sum, bcast(e, n, sum, k0));
    }
    val y = parts[0];
    if (np > 1) {
        y = fresh(e, SHAPE(B, c->dim));
        put(e->t, "    %%v%d = \"stablehlo.concatenate\"(", y.id);
        for (int i = 0; i < np; i++) put(e->t, "%s%%v%d", i ? ", " : "", parts[i].id);
        put(e->t, ") {dimension = 1 : i64} : (");
        for (int i = 0; i < np; i++) {
            char t[96];
            put(e->t, "%s%s", i ? ", " : "", ty(&parts[i], t, sizeof t));
        }
        char t[96];
        put(e->t, ") -> %s\n", ty(&y, t, sizeof t));
    }
    if (c->normalize) { /* x / max(||x||, 1e-12), as torch.nn.functional.normalize */
        val n = unary(e, "stablehlo.sqrt", reduce(e, binary(e, "multiply", y, y), 1, "add", 0));
        n = binary(e, "maximum", n, scalar_like(e, 1e-12, n));
        y = binary(e, "divide", y, bcast(e, n, y, k0));
    }
    char t[96];
    put(e->t, "    func.return %%v%d : %s\n  }\n}\n", y.id, ty(&y, t, sizeof t));
    free(w);
    (void)ncol;
    if (out->oom) {
        xla_text_free(out);
        return MODATTN_ENOMEM;
    }
    return 0;
}

int xla_hlo_attention(const xla_attn_shape *a, xla_text *out) {
    memset(out, 0, sizeof *out);
    emit E = {out, 0, false}, *e = &E;
    val q = fresh(e, SHAPE(a->B, a->Hq, a->Sq, a->D)), k = fresh(e, SHAPE(a->B, a->Hkv, a->Sk, a->D));
    val v = fresh(e, SHAPE(a->B, a->Hkv, a->Sk, a->Dv)), lens = fresh(e, SHAPE_I(a->B));
    val mask = a->has_mask ? fresh(e, SHAPE(a->mask_b, a->mask_h, a->Sq, a->Sk)) : lens;
    val slopes = a->has_alibi ? fresh(e, SHAPE(a->Hq)) : lens;
    char t1[96], t2[96], t3[96], t4[96], t5[96];
    put(e->t, "module @modattn_attention attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n");
    put(e->t, "  func.func public @main(%%v%d: %s, %%v%d: %s, %%v%d: %s, %%v%d: %s", q.id, ty(&q, t1, sizeof t1), k.id,
        ty(&k, t2, sizeof t2), v.id, ty(&v, t3, sizeof t3), lens.id, ty(&lens, t4, sizeof t4));
    if (a->has_mask) put(e->t, ", %%v%d: %s", mask.id, ty(&mask, t5, sizeof t5));
    if (a->has_alibi) put(e->t, ", %%v%d: %s", slopes.id, ty(&slopes, t5, sizeof t5));
    put(e->t, ") -> (tensor<%lldx%lldx%lldx%lldxf32>", (long long)a->B, (long long)a->Hq, (long long)a->Sq,
        (long long)a->Dv);
    if (a->has_lse) put(e->t, ", tensor<%lldx%lldx%lldx1xf32>", (long long)a->B, (long long)a->Hq, (long long)a->Sq);
    put(e->t, ") {\n");
    val lse;
    val o = attend(e, q, k, v, lens, a->has_mask ? &mask : NULL, a->scale, a->causal, a->wl, a->wr, a->softcap,
                   a->has_alibi ? &slopes : NULL, a->has_lse ? &lse : NULL);
    if (a->has_lse)
        put(e->t, "    func.return %%v%d, %%v%d : %s, %s\n  }\n}\n", o.id, lse.id, ty(&o, t1, sizeof t1),
            ty(&lse, t2, sizeof t2));
    else
        put(e->t, "    func.return %%v%d : %s\n  }\n}\n", o.id, ty(&o, t1, sizeof t1));
    if (out->oom) {
        xla_text_free(out);
        return MODATTN_ENOMEM;
    }
    return 0;
}
