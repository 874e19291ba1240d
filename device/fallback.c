/* device/fallback.c — an encoder op run on the host for a device that does not run it, only when
 * the caller asked for that (modattn_model_options.host_fallback). The op's inputs are read from
 * the device into host buffers, the CPU device runs the op, its outputs are written back; every
 * call is counted per device and op (modattn__device_fallback_count) and is a trace span
 * "fallback.<op>" around the copies and the CPU's own op span. It is slow by design (the weights
 * of a linear cross the bus on every call): a way to run a model on a device that lacks one op,
 * never a silent one. */
#include "modattn/backend/device.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "device/internal_device.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MAX_SLOTS 32
static _Atomic uint64_t g_count[MAX_SLOTS][MODATTN_OP_COUNT];

static int slot(const modattn_device_iface *dev) {
    for (int i = 0, n = modattn_device_count(); i < n && i < MAX_SLOTS; i++)
        if (modattn_device_get(i) == dev) return i;
    return -1;
}

uint64_t modattn__device_fallback_count(const modattn_device_iface *dev, modattn_op op) {
    int s = slot(dev);
    return s >= 0 && (unsigned)op < MODATTN_OP_COUNT ? atomic_load(&g_count[s][op]) : 0;
}

/* Counts one call under each op of it that the device refuses (a residual linear whose
 * LayerNorm the device lacks counts as layernorm), or under `op` if it refuses none. */
static void count(const modattn_device_iface *dev, modattn_op op, const modattn_op *parts, int nparts) {
    int s = slot(dev);
    if (s < 0) return;
    bool any = false;
    for (int i = 0; i < nparts; i++) {
        char why[8];
        if ((unsigned)parts[i] < MODATTN_OP_COUNT && !modattn_device_supports_op(dev, parts[i], why, sizeof why)) {
            atomic_fetch_add(&g_count[s][parts[i]], 1);
            any = true;
        }
    }
    if (!any && (unsigned)op < MODATTN_OP_COUNT) atomic_fetch_add(&g_count[s][op], 1);
}

/* The host copies of one op's buffers: up to 12. */
typedef struct host_set {
    const modattn_device_iface *cpu;
    modattn_buffer *bufs[12];
    int n;
} host_set;

static void set_free(host_set *h) {
    for (int i = 0; i < h->n; i++) modattn__buffer_free(h->bufs[i]);
    h->n = 0;
}

/* A host buffer of `rows` rounded up to the CPU's row block times `ld` elements of 4 bytes (at
 * least `bytes_min`), zeroed, with the first `copy` bytes read from src (NULL src: none). */
static int host_copy(host_set *h, const modattn_buffer *src, size_t copy, size_t bytes, const char *what,
                     modattn_buffer **out) {
    *out = NULL;
    if (!src) return 0;
    if (copy > src->bytes)
        return modattn__error(MODATTN_ERANGE, "%s: the op needs %zu bytes, the buffer has %zu", what, copy, src->bytes);
    if (bytes < copy) bytes = copy;
    modattn_buffer *b;
    int st = modattn__buffer_alloc(h->cpu, bytes, MODATTN_MEM_WORKSPACE, what, &b);
    if (st) return st;
    h->bufs[h->n++] = b;
    if ((st = modattn__buffer_fill(b, 0, 0, bytes))) return st;
    if (copy && (st = modattn__buffer_read(src, 0, b->host, copy))) return st;
    *out = b;
    return 0;
}

static size_t rounded_rows(const modattn_device_iface *cpu, int64_t rows) {
    const int64_t rb = modattn__device_row_block(cpu);
    return (size_t)((rows + rb - 1) / rb * rb);
}

/* "fallback.<op>": trace names are kept by pointer */
static const char *span_name(modattn_op op) {
    static const char *names[] = {
#define N(name, text) "fallback." text,
        MODATTN_OP_MAP(N)
#undef N
    };
    return (unsigned)op < MODATTN_OP_COUNT ? names[op] : "fallback";
}

#define FALLBACK_BEGIN(op, parts, nparts)                                                      \
    const modattn_device_iface *cpu_ = modattn_device_find((modattn_device){MODATTN_DEVICE_CPU, 0}); \
    if (!cpu_ || cpu_ == dev) return modattn__error(MODATTN_EINVAL, "host fallback: the device is the host"); \
    host_set h_ = {.cpu = cpu_};                                                               \
    uint64_t t0_ = modattn__trace_begin();                                                      \
    count(dev, op, parts, nparts);                                                             \
    int st_ = 0

#define FALLBACK_END(op)                                                                       \
    set_free(&h_);                                                                             \
    if (t0_) {                                                                                 \
        modattn__trace_end(t0_, span_name(op), modattn_device_kind_name(dev->id.kind), "host", 0, 0); \
    }                                                                                          \
    return st_ ? modattn__error_prefix(st_, "host fallback of '%s'", modattn_op_name(op)) : 0

int modattn__device_host_embed(const modattn_device_iface *dev, const modattn_op_embed_args *a) {
    const modattn_op parts[] = {MODATTN_OP_EMBED_GATHER, MODATTN_OP_LAYERNORM};
    FALLBACK_BEGIN(MODATTN_OP_EMBED_GATHER, parts, 2);
    modattn_op_embed_args e = *a;
    const size_t T = (size_t)(a->B * a->S), H = (size_t)a->H, rows = rounded_rows(cpu_, a->B * a->S);
    modattn_buffer *ids, *lens, *word, *pos, *type0, *g, *b, *x, *pids = NULL;
    if (!(st_ = host_copy(&h_, a->ids, T * 4, 0, "fallback ids", &ids)) &&
        !(a->pos_ids && (st_ = host_copy(&h_, a->pos_ids, T * 4, 0, "fallback position ids", &pids))) &&
        !(st_ = host_copy(&h_, a->lens, (size_t)a->B * 4, 0, "fallback lengths", &lens)) &&
        !(st_ = host_copy(&h_, a->word, a->word ? a->word->bytes : 0, 0, "fallback word embeddings", &word)) &&
        !(st_ = host_copy(&h_, a->pos, a->pos ? a->pos->bytes : 0, 0, "fallback position embeddings", &pos)) &&
        !(st_ = host_copy(&h_, a->type0, H * 4, 0, "fallback type embedding", &type0)) &&
        !(st_ = host_copy(&h_, a->gamma, H * 4, 0, "fallback LayerNorm", &g)) &&
        !(st_ = host_copy(&h_, a->beta, H * 4, 0, "fallback LayerNorm", &b)) &&
        !(st_ = host_copy(&h_, a->x, 0, rows * H * 4, "fallback hidden states", &x))) {
        e.ids = ids, e.lens = lens, e.word = word, e.pos = pos, e.type0 = type0, e.gamma = g, e.beta = b, e.x = x;
        e.pos_ids = pids;
        if (!(st_ = modattn__device_embed(cpu_, &e))) st_ = modattn__buffer_write(a->x, 0, x->host, T * H * 4);
    }
    FALLBACK_END(MODATTN_OP_EMBED_GATHER);
}

int modattn__device_host_linear(const modattn_device_iface *dev, const modattn_op_linear_args *a) {
    const modattn_op op = a->gamma ? MODATTN_OP_LINEAR_RESIDUAL : a->act != MODATTN_ACT_NONE ? MODATTN_OP_LINEAR_GELU
                                                                                         : MODATTN_OP_LINEAR;
    const modattn_op parts[] = {op, MODATTN_OP_LAYERNORM};
    FALLBACK_BEGIN(op, parts, a->gamma ? 2 : 1);
    modattn_op_linear_args l = *a;
    l.plan = NULL; /* a plan is the device's; the host takes the weight as it is */
    const size_t rows = rounded_rows(cpu_, a->rows);
    const int64_t S = a->S > 0 ? a->S : a->rows;
    const size_t nb = (size_t)((a->rows + S - 1) / S);
    /* y is read whole (its columns past N, within ldy, are written back unchanged) */
    const size_t ybytes = (size_t)a->rows * (size_t)a->ldy * 4;
    modattn_buffer *A, *w, *bias, *y, *g, *b, *lens;
    if (!a->w) st_ = modattn__error(MODATTN_EINVAL, "the weight is only in the device's prepared form");
    else if (!(st_ = host_copy(&h_, a->a, (size_t)a->rows * (size_t)a->lda * 4, rows * (size_t)a->lda * 4, "fallback input", &A)) &&
             !(st_ = host_copy(&h_, a->w, (size_t)(a->N * a->K) * 4, 0, "fallback weight", &w)) &&
             !(st_ = host_copy(&h_, a->bias, (size_t)a->N * 4, 0, "fallback bias", &bias)) &&
             !(st_ = host_copy(&h_, a->y, ybytes, rows * (size_t)a->ldy * 4, "fallback output", &y)) &&
             !(st_ = host_copy(&h_, a->gamma, (size_t)a->N * 4, 0, "fallback LayerNorm", &g)) &&
             !(st_ = host_copy(&h_, a->beta, (size_t)a->N * 4, 0, "fallback LayerNorm", &b)) &&
             !(st_ = host_copy(&h_, a->lens, nb * 4, 0, "fallback lengths", &lens))) {
        l.a = A, l.w = w, l.bias = bias, l.y = y, l.gamma = g, l.beta = b, l.lens = lens;
        if (!(st_ = modattn__device_linear(cpu_, &l))) st_ = modattn__buffer_write(a->y, 0, y->host, ybytes);
    }
    FALLBACK_END(op);
}

int modattn__device_host_pool(const modattn_device_iface *dev, const modattn_op_pool_args *a) {
    const modattn_op op = a->modes & 2u ? MODATTN_OP_POOL_MAX : a->modes & 1u ? MODATTN_OP_POOL_CLS : MODATTN_OP_POOL_MEAN;
    modattn_op parts[5];
    int np = 0;
    if (a->modes & 1u) parts[np++] = MODATTN_OP_POOL_CLS;
    if (a->modes & 2u) parts[np++] = MODATTN_OP_POOL_MAX;
    if (a->modes & ~3u) parts[np++] = MODATTN_OP_POOL_MEAN;
    if (a->normalize) parts[np++] = MODATTN_OP_L2_NORMALIZE;
    FALLBACK_BEGIN(op, parts, np);
    modattn_op_pool_args p = *a;
    modattn_buffer *x, *lens, *out;
    const size_t obytes = (size_t)(a->B * a->dim) * 4;
    if (!(st_ = host_copy(&h_, a->x, (size_t)(a->B * a->S * a->H) * 4, 0, "fallback hidden states", &x)) &&
        !(st_ = host_copy(&h_, a->lens, (size_t)a->B * 4, 0, "fallback lengths", &lens)) &&
        !(st_ = host_copy(&h_, a->out, 0, obytes, "fallback pooled vectors", &out))) {
        p.x = x, p.lens = lens, p.out = out;
        if (!(st_ = modattn__device_pool(cpu_, &p))) st_ = modattn__buffer_write(a->out, 0, out->host, obytes);
    }
    FALLBACK_END(op);
}
