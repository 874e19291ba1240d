/* device/device.c — the device layer's one home: finds the devices once, and wraps every slot of
 * modattn_device_iface with its default, its argument checks and its memory accounting. Nothing
 * else in modattn calls a device slot directly (SQLite's os.c, ggml's ggml-backend.cpp). */
#include "modattn/backend/device.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "device/internal_device.h"
#include "core/alloc_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/builtins.h" /* the generated table of the backends built in */

#define MAX_DEVICES 32

typedef struct dev_mem {
    _Atomic int64_t cur[MODATTN_MEM_CATEGORY_COUNT], peak[MODATTN_MEM_CATEGORY_COUNT];
    _Atomic int64_t cur_total, peak_total;
    _Atomic uint64_t allocs, failures;
} dev_mem;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;     /* every backend's devices */
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT; /* the CPU alone: CPU-only work starts no driver */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const modattn_device_iface *g_dev[MAX_DEVICES];
static dev_mem g_mem[MAX_DEVICES];
/* fault injection (tests): after this many more encoder ops, every op on the device fails as a
 * lost device would; -1: off. Set from MODATTN_DEVICE_FAIL_AFTER=NAME:N at start-up. */
static _Atomic int64_t g_fail_after[MAX_DEVICES];
static int slot_of(const modattn_device_iface *dev);
static _Atomic int g_ndev;
static char g_absent[1024];

const char *modattn_op_name(modattn_op op) {
    static const char *names[] = {
#define N(name, text) text,
        MODATTN_OP_MAP(N)
#undef N
    };
    return (unsigned)op < MODATTN_OP_COUNT ? names[op] : "unknown";
}

/* Asks one backend for its devices; records why it found none. */
static void probe(const char *backend, modattn__devices_fn fn, size_t *used) {
    const modattn_device_iface *found[MAX_DEVICES];
    char why[256] = "";
    int n = fn(found, MAX_DEVICES - g_ndev, why, sizeof why);
    int kept = 0;
    for (int i = 0; i < n && g_ndev < MAX_DEVICES; i++)
        if (found[i] && found[i]->api_version == MODATTN_DEVICE_API_VERSION && found[i]->get_info &&
            found[i]->buffer_alloc && found[i]->buffer_free) {
            int k = atomic_load(&g_ndev);
            g_dev[k] = found[i]; /* visible before the count that covers it */
            atomic_store(&g_ndev, k + 1);
            kept++;
        }
    if (kept == 0 && *used < sizeof g_absent) {
        int w = snprintf(g_absent + *used, sizeof g_absent - *used, "%s%s: %s", *used ? "; " : "", backend,
                         why[0] ? why : n > 0 ? "its devices were built against another device api_version" : "no device found");
        if (w > 0) *used += (size_t)w;
    }
}

/* Test knobs of the form "DEVICE:VALUE" in the environment (DEVICE as modattn_device_format
 * writes it, "opencl:0"): the slot of that device, and *value the text after the last ':'; -1 if
 * the variable is unset, malformed or names no device here. */
static int env_device(const char *var, const char **value) {
    const char *e = getenv(var);
    const char *last = e ? strrchr(e, ':') : NULL;
    if (!last || last == e) return -1;
    char name[32];
    size_t n = (size_t)(last - e) < sizeof name - 1 ? (size_t)(last - e) : sizeof name - 1;
    memcpy(name, e, n);
    name[n] = '\0';
    for (int i = 0; i < g_ndev; i++) {
        char dn[32];
        modattn_device_format(g_dev[i]->id, dn, sizeof dn);
        if (strcmp(dn, name) == 0) {
            *value = last + 1;
            return i;
        }
    }
    return -1;
}

/* The host backends' devices (the CPU: device 0), which need no driver. */
static void add_cpu(void) {
    for (int i = 0; i < MAX_DEVICES; i++) atomic_store(&g_fail_after[i], -1);
    size_t used = 0;
    for (const modattn__device_backend *b = modattn__builtin_devices; b->name; b++)
        if (b->host) probe(b->name, b->devices, &used);
}

static void find_devices(void) {
    pthread_once(&g_cpu_once, add_cpu);
    size_t used = 0;
    for (const modattn__device_backend *b = modattn__builtin_devices; b->name; b++)
        if (!b->host) probe(b->name, b->devices, &used);
    const char *v;
    /* MODATTN_DEVICE_FAIL_AFTER=opencl:0:120: the device is lost after 120 more encoder ops */
    int s = env_device("MODATTN_DEVICE_FAIL_AFTER", &v);
    if (s >= 0) atomic_store(&g_fail_after[s], strtoll(v, NULL, 10));
    /* MODATTN_DEVICE_DISABLE_OPS=opencl:0:linear_gelu,pool_mean (tests of the refusal and host
     * fallback paths from the command line): the device refuses those ops, as after its control
     * MODATTN_DEVICE_CONTROL_DISABLE_OP */
    s = env_device("MODATTN_DEVICE_DISABLE_OPS", &v);
    if (s >= 0 && g_dev[s]->control)
        for (const char *p = v; *p;) {
            size_t k = strcspn(p, ",");
            for (int op = 0; op < MODATTN_OP_COUNT; op++)
                if (strlen(modattn_op_name((modattn_op)op)) == k && strncmp(modattn_op_name((modattn_op)op), p, k) == 0)
                    (void)g_dev[s]->control(g_dev[s]->ctx, MODATTN_DEVICE_CONTROL_DISABLE_OP, &op);
            p += k + (p[k] == ',');
        }
}

/* 0, or MODATTN_EDEVICE when the injected loss of the device has come. */
static int injected_loss(const modattn_device_iface *dev, const char *name, modattn_op op) {
    int s = slot_of(dev);
    if (s < 0 || atomic_load(&g_fail_after[s]) < 0) return 0;
    if (atomic_fetch_sub(&g_fail_after[s], 1) > 0) return 0;
    atomic_store(&g_fail_after[s], 0);
    return modattn__error(MODATTN_EDEVICE, "%s: %s: device lost (injected by MODATTN_DEVICE_FAIL_AFTER)", name,
                         modattn_op_name(op));
}

void modattn__devices_init(void) { pthread_once(&g_once, find_devices); }

void modattn_devices_shutdown(void) {
    pthread_mutex_lock(&g_mu);
    for (int i = g_ndev - 1; i >= 0; i--)
        if (g_dev[i]->shutdown) g_dev[i]->shutdown(g_dev[i]->ctx);
    g_ndev = 0;
    pthread_mutex_unlock(&g_mu);
}

int modattn_device_count(void) {
    modattn__devices_init();
    return g_ndev;
}

const modattn_device_iface *modattn_device_get(int i) {
    modattn__devices_init();
    return i >= 0 && i < g_ndev ? g_dev[i] : NULL;
}

static int slot_of(const modattn_device_iface *dev) {
    for (int i = 0; i < g_ndev; i++)
        if (g_dev[i] == dev) return i;
    return -1;
}

const modattn_device_iface *modattn_device_find(modattn_device id) {
    if (id.kind == MODATTN_DEVICE_CPU && id.index == 0) { /* the host needs no probing of the others */
        pthread_once(&g_cpu_once, add_cpu);
        return g_dev[0];
    }
    modattn__devices_init();
    for (int i = 0; i < g_ndev; i++)
        if (g_dev[i]->id.kind == id.kind && g_dev[i]->id.index == id.index) return g_dev[i];
    return NULL;
}

const char *modattn_device_absent_reasons(void) {
    modattn__devices_init();
    return g_absent;
}

void modattn_device_format(modattn_device id, char *buf, size_t len) {
    if (id.kind == MODATTN_DEVICE_CPU && id.index == 0) snprintf(buf, len, "cpu");
    else snprintf(buf, len, "%s:%d", modattn_device_kind_name(id.kind), id.index);
}

int modattn_device_lookup(const char *name, const modattn_device_iface **out) {
    *out = NULL;
    if (!name || !*name) return modattn__error(MODATTN_EINVAL, "device name is empty (expected cpu, opencl[:N], cuda[:N], xla[:N])");
    const char *colon = strchr(name, ':');
    size_t klen = colon ? (size_t)(colon - name) : strlen(name);
    modattn_device id = {MODATTN_DEVICE_KIND_COUNT, 0};
    for (int k = 0; k < MODATTN_DEVICE_KIND_COUNT; k++) {
        const char *kn = modattn_device_kind_name((modattn_device_kind)k);
        if (strlen(kn) == klen && strncmp(kn, name, klen) == 0) id.kind = (modattn_device_kind)k;
    }
    if (id.kind == MODATTN_DEVICE_KIND_COUNT)
        return modattn__error(MODATTN_EINVAL, "unknown device '%s' (expected cpu, opencl[:N], cuda[:N] or xla[:N])", name);
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || v < 0 || v > 1000)
            return modattn__error(MODATTN_EINVAL, "device '%s': the index after ':' must be a number from 0", name);
        id.index = (int)v;
    }
    *out = modattn_device_find(id);
    if (*out) return 0;
    modattn__devices_init();
    int same = 0;
    for (int i = 0; i < g_ndev; i++) same += g_dev[i]->id.kind == id.kind;
    if (same > 0)
        return modattn__error(MODATTN_ENOTFOUND, "device '%s' not found: this machine has %d %s device%s (0..%d)", name,
                             same, modattn_device_kind_name(id.kind), same == 1 ? "" : "s", same - 1);
    const char *why = strstr(g_absent, modattn_device_kind_name(id.kind));
    return modattn__error(MODATTN_ENOTFOUND, "device '%s' not found: %s", name,
                         why ? why : "this build has no backend for that kind of device");
}

int modattn_device_info_get(const modattn_device_iface *dev, modattn_device_info *out) {
    memset(out, 0, sizeof *out);
    if (!dev) return modattn__error(MODATTN_EINVAL, "device is NULL");
    dev->get_info(dev->ctx, out);
    modattn_device_format(dev->id, out->name, sizeof out->name);
    return 0;
}

bool modattn_device_supports_op(const modattn_device_iface *dev, modattn_op op, char *reason, size_t len) {
    if (len) reason[0] = '\0';
    if ((unsigned)op >= MODATTN_OP_COUNT) {
        snprintf(reason, len, "unknown op %d", (int)op);
        return false;
    }
    if (!dev->supports_op) {
        snprintf(reason, len, "'%s' is not implemented on this device", modattn_op_name(op));
        return false;
    }
    const bool rotary = op == MODATTN_OP_ROTARY || op == MODATTN_OP_ROTARY_INTERLEAVED;
    if (((op == MODATTN_OP_NORM || op == MODATTN_OP_RMS_NORM) && (!dev->ops || !dev->ops->norm)) ||
        (rotary && (!dev->ops || !dev->ops->rotary)) ||
        (op == MODATTN_OP_GLU && (!dev->ops || !dev->ops->glu))) {
        snprintf(reason, len, "'%s' is not implemented on this device", modattn_op_name(op));
        return false;
    }
    bool ok = dev->supports_op(dev->ctx, op, reason, len);
    if (!ok && len && !reason[0]) snprintf(reason, len, "'%s' is not implemented on this device", modattn_op_name(op));
    return ok;
}

static int dev_error(const modattn_device_iface *dev, int st, const char *what, const char *reason) {
    char name[32];
    modattn_device_format(dev->id, name, sizeof name);
    return modattn__error(st < 0 ? st : MODATTN_EDEVICE, "%s: %s: %s", name, what, reason[0] ? reason : modattn_strerror(st));
}

int modattn__device_synchronize(const modattn_device_iface *dev) {
    if (!dev->synchronize) return 0;
    char reason[256] = "";
    int st = dev->synchronize(dev->ctx, reason, sizeof reason);
    return st ? dev_error(dev, st, "synchronize", reason) : 0;
}

int modattn__device_control(const modattn_device_iface *dev, int op, void *arg) {
    if (!dev->control) return modattn__error(MODATTN_EUNSUPPORTED, "device control %d: the device has none", op);
    return dev->control(dev->ctx, op, arg);
}

/* Runs one encoder op: the device must have it and say yes to it. The span is the caller's name
 * for the op ("encoder.qkv") or "device.<slot>", labelled with the device. */
#define RUN_OP(dev, slot, opcode, args, span)                                                            \
    do {                                                                                                 \
        char reason_[256] = "", name_[32];                                                               \
        modattn_device_format((dev)->id, name_, sizeof name_);                                          \
        if (!(dev)->ops || !(dev)->ops->slot || !modattn_device_supports_op(dev, opcode, reason_, sizeof reason_)) \
            return modattn__error(MODATTN_EUNSUPPORTED, "%s does not run the encoder op '%s': %s", name_,  \
                                 modattn_op_name(opcode), reason_[0] ? reason_ : "no such slot");       \
        if (injected_loss(dev, name_, opcode)) return MODATTN_EDEVICE;                                   \
        uint64_t t0_ = modattn__trace_begin();                                                            \
        int st_ = (dev)->ops->slot((dev)->ctx, args, reason_, sizeof reason_);                           \
        modattn__trace_end(t0_, (span) ? (span) : "device." #slot, modattn_device_kind_name((dev)->id.kind), "", 0, 0); \
        if (st_) return modattn__error(st_ < 0 ? st_ : MODATTN_EDEVICE, "%s: %s: %s", name_, modattn_op_name(opcode), \
                                      reason_[0] ? reason_ : modattn_strerror(st_));                    \
        return 0;                                                                                        \
    } while (0)

int modattn__device_embed(const modattn_device_iface *dev, const modattn_op_embed_args *a) {
    char r[256];
    if (a->plain) { /* no LayerNorm: an op of its own, which a device that would normalise anyway refuses */
        if (!modattn_device_supports_op(dev, MODATTN_OP_EMBED_PLAIN, r, sizeof r))
            return modattn__error(MODATTN_EUNSUPPORTED, "device does not run the encoder op 'embed_plain': %s", r);
    } else if (!modattn_device_supports_op(dev, MODATTN_OP_LAYERNORM, r, sizeof r)) /* the embedding's LayerNorm */
        return modattn__error(MODATTN_EUNSUPPORTED, "device does not run the encoder op 'layernorm': %s", r);
    if (a->pos_ids && !modattn_device_supports_op(dev, MODATTN_OP_EMBED_POSITIONS, r, sizeof r))
        return modattn__error(MODATTN_EUNSUPPORTED, "device does not run the encoder op 'embed_positions': %s", r);
    RUN_OP(dev, embed, MODATTN_OP_EMBED_GATHER, a, "encoder.embeddings");
}

static modattn_op linear_code(const modattn_op_linear_args *a) {
    return a->gamma ? MODATTN_OP_LINEAR_RESIDUAL : a->act != MODATTN_ACT_NONE ? MODATTN_OP_LINEAR_GELU : MODATTN_OP_LINEAR;
}

int modattn__device_linear(const modattn_device_iface *dev, const modattn_op_linear_args *a) {
    if (a->gamma) { /* the LayerNorm after it is an op of its own too */
        char r[256];
        if (!modattn_device_supports_op(dev, MODATTN_OP_LAYERNORM, r, sizeof r))
            return modattn__error(MODATTN_EUNSUPPORTED, "device does not run the encoder op 'layernorm': %s", r);
    }
    if (a->plan && a->plan->iface != dev)
        return modattn__error(MODATTN_EINVAL, "linear: the weight was prepared for another device");
    if (!a->w && !(a->plan && a->plan->owns_weight))
        return modattn__error(MODATTN_EINVAL, "linear: no weight (w is NULL and no plan holds it)");
    RUN_OP(dev, linear, linear_code(a), a, a->name);
}

int modattn__device_pool(const modattn_device_iface *dev, const modattn_op_pool_args *a) {
    if (a->normalize) {
        char r[256];
        if (!modattn_device_supports_op(dev, MODATTN_OP_L2_NORMALIZE, r, sizeof r))
            return modattn__error(MODATTN_EUNSUPPORTED, "device does not run the encoder op 'l2_normalize': %s", r);
    }
    RUN_OP(dev, pool, a->modes & 2u ? MODATTN_OP_POOL_MAX : a->modes & 1u ? MODATTN_OP_POOL_CLS : MODATTN_OP_POOL_MEAN, a,
           "encoder.pool");
}

int modattn__device_norm(const modattn_device_iface *dev, const modattn_op_norm_args *a) {
    if (!a->x || !a->y || !a->gamma || !a->beta || a->H <= 0 || a->ldx < a->H || a->ldy < a->H)
        return modattn__error(MODATTN_EINVAL, "norm: x, y, gamma and beta are required, H >= 1, ldx and ldy >= H");
    if (a->group < 0 || (a->group > 0 && a->H % a->group != 0))
        return modattn__error(MODATTN_EINVAL, "norm: group %lld does not divide H = %lld", (long long)a->group,
                             (long long)a->H);
    if (a->rms || a->group > 0) RUN_OP(dev, norm, MODATTN_OP_RMS_NORM, a, "encoder.norm");
    RUN_OP(dev, norm, MODATTN_OP_NORM, a, "encoder.norm");
}

int modattn__device_rotary(const modattn_device_iface *dev, const modattn_op_rotary_args *a) {
    if (!a->x || !a->cos || !a->sin || a->D <= 0 || a->D % 2 || a->ldx < a->heads * a->D)
        return modattn__error(MODATTN_EINVAL, "rotary: x, cos and sin are required, D even, ldx >= heads * D");
    if (a->interleaved) { /* a device that does not say it runs GPT-J's layout would run NeoX's */
        char r[256];
        if (!modattn_device_supports_op(dev, MODATTN_OP_ROTARY_INTERLEAVED, r, sizeof r))
            return modattn__error(MODATTN_EUNSUPPORTED, "device does not run the encoder op 'rotary_interleaved': %s", r);
        RUN_OP(dev, rotary, MODATTN_OP_ROTARY_INTERLEAVED, a, "encoder.rotary");
    }
    RUN_OP(dev, rotary, MODATTN_OP_ROTARY, a, "encoder.rotary");
}

int modattn__device_glu(const modattn_device_iface *dev, const modattn_op_glu_args *a) {
    if (!a->x || a->N <= 0 || a->ldx < 2 * a->N || a->act == MODATTN_ACT_NONE)
        return modattn__error(MODATTN_EINVAL, "glu: x is required, ldx >= 2N, an activation");
    RUN_OP(dev, glu, MODATTN_OP_GLU, a, "encoder.glu");
}

/* ---- the graph slot: a device has it or runs op by op (this is the one place that says which) */
bool modattn__device_has_graph(const modattn_device_iface *dev) {
    return dev && dev->api_version >= 3u && dev->graph && dev->graph->load && dev->graph->forward;
}

bool modattn__device_graph_supports(const modattn_device_iface *dev, const modattn_encoder_graph *g, char *reason,
                                   size_t len) {
    if (len) reason[0] = '\0';
    if (!modattn__device_has_graph(dev)) {
        snprintf(reason, len, "the device runs the encoder op by op, not as one program");
        return false;
    }
    return !dev->graph->supports || dev->graph->supports(dev->ctx, g, reason, len);
}

int modattn__device_graph_load(const modattn_device_iface *dev, const modattn_encoder_graph *g, void **model) {
    *model = NULL;
    char reason[512] = "", name[32];
    modattn_device_format(dev->id, name, sizeof name);
    if (!modattn__device_graph_supports(dev, g, reason, sizeof reason))
        return modattn__error(MODATTN_EUNSUPPORTED, "%s does not run this encoder as one program: %s", name, reason);
    uint64_t t0 = modattn__trace_begin();
    int st = dev->graph->load(dev->ctx, g, model, reason, sizeof reason);
    modattn__trace_end(t0, "device.graph_load", modattn_device_kind_name(dev->id.kind), "", 0, 0);
    if (st) return modattn__error(st < 0 ? st : MODATTN_EDEVICE, "%s: loading the encoder: %s", name,
                                 reason[0] ? reason : modattn_strerror(st));
    return 0;
}

int modattn__device_graph_forward(const modattn_device_iface *dev, void *model, int64_t B, int64_t S,
                                 const int32_t *ids, const int32_t *lens, float *out) {
    char reason[512] = "", name[32];
    modattn_device_format(dev->id, name, sizeof name);
    if (!modattn__device_has_graph(dev) || !model)
        return modattn__error(MODATTN_EINVAL, "%s: graph forward without a loaded graph", name);
    if (B < 1 || S < 1 || !ids || !lens || !out)
        return modattn__error(MODATTN_EINVAL, "%s: graph forward: B %lld, S %lld and ids, lens, out are required", name,
                             (long long)B, (long long)S);
    if (injected_loss(dev, name, MODATTN_OP_ATTENTION)) return MODATTN_EDEVICE;
    uint64_t t0 = modattn__trace_begin();
    int st = dev->graph->forward(dev->ctx, model, B, S, ids, lens, out, reason, sizeof reason);
    char shape[48];
    snprintf(shape, sizeof shape, "B=%lld S=%lld", (long long)B, (long long)S);
    modattn__trace_end(t0, "device.graph_forward", modattn_device_kind_name(dev->id.kind), shape, 0, 0);
    if (st) return modattn__error(st < 0 ? st : MODATTN_EDEVICE, "%s: running the encoder (B %lld, S %lld): %s", name,
                                 (long long)B, (long long)S, reason[0] ? reason : modattn_strerror(st));
    return 0;
}

void modattn__device_graph_unload(const modattn_device_iface *dev, void *model) {
    if (model && modattn__device_has_graph(dev) && dev->graph->unload) dev->graph->unload(dev->ctx, model);
}

int modattn__device_linear_prepare(const modattn_device_iface *dev, const modattn_op_linear_args *shape,
                                  modattn_linear_plan **out) {
    *out = NULL;
    if (!dev->ops || !dev->ops->linear_prepare) return 0;
    char reason[256] = "";
    void *impl = NULL;
    bool owns = false;
    int st = dev->ops->linear_prepare(dev->ctx, shape, &impl, &owns, reason, sizeof reason);
    if (st) return dev_error(dev, st, "preparing a linear weight", reason);
    if (!impl) return 0;
    modattn_linear_plan *p = modattn__calloc(1, sizeof *p, MODATTN_MEM_OTHER);
    if (!p) {
        if (dev->ops->linear_release) dev->ops->linear_release(dev->ctx, impl);
        return modattn__mem_last_status();
    }
    p->iface = dev, p->impl = impl, p->owns_weight = owns;
    *out = p;
    return 0;
}

void modattn__linear_plan_free(modattn_linear_plan *p) {
    if (!p) return;
    const modattn_device_iface *dev = p->iface;
    if (dev->ops && dev->ops->linear_release) dev->ops->linear_release(dev->ctx, p->impl);
    modattn_free(p);
}

int64_t modattn__device_row_block(const modattn_device_iface *dev) {
    return dev->ops && dev->ops->row_block > 1 ? dev->ops->row_block : 1;
}

/* ---------------------------------------------------------------- accounting */

static void peak_up(_Atomic int64_t *p, int64_t v) {
    int64_t o = atomic_load(p);
    while (v > o && !atomic_compare_exchange_weak(p, &o, v)) {
    }
}

/* Host buffers (the CPU device) are counted by the host allocator itself; other devices here,
 * with the budget applied to each device's total. */
static int dev_reserve(const modattn_device_iface *dev, modattn_mem_category cat, size_t bytes, const char *what) {
    int s = slot_of(dev);
    char name[32];
    modattn_device_format(dev->id, name, sizeof name);
    if (s < 0) return modattn__error(MODATTN_EINVAL, "buffer: device %s is not one of this process's devices", name);
    dev_mem *m = &g_mem[s];
    if (bytes > (size_t)INT64_MAX / 2) {
        atomic_fetch_add(&m->failures, 1);
        return modattn__error(MODATTN_ENOMEM, "%s: %s of %zu bytes is too large", name, what, bytes);
    }
    int st = modattn__mem_inject(cat, bytes, name);
    if (st) {
        atomic_fetch_add(&m->failures, 1);
        return modattn__error_prefix(st, "%s", what);
    }
    modattn_mem_stats hs;
    modattn_mem_get_stats(&hs);
    int64_t b = (int64_t)bytes;
    int64_t total = atomic_fetch_add(&m->cur_total, b) + b;
    if (hs.budget > 0 && total > hs.budget) {
        atomic_fetch_sub(&m->cur_total, b);
        atomic_fetch_add(&m->failures, 1);
        modattn__mem_note_failure(MODATTN_EBUDGET);
        return modattn__error(MODATTN_EBUDGET,
                             "memory budget of %lld bytes exceeded on %s: %s asked for %zu bytes (%s) with %lld "
                             "bytes already in use on that device",
                             (long long)hs.budget, name, what, bytes, modattn_mem_category_name(cat),
                             (long long)(total - b));
    }
    peak_up(&m->peak_total, total);
    peak_up(&m->peak[cat], atomic_fetch_add(&m->cur[cat], b) + b);
    return 0;
}

static void dev_release(const modattn_device_iface *dev, modattn_mem_category cat, size_t bytes) {
    int s = slot_of(dev);
    if (s < 0) return;
    atomic_fetch_sub(&g_mem[s].cur[cat], (int64_t)bytes);
    atomic_fetch_sub(&g_mem[s].cur_total, (int64_t)bytes);
}

int modattn__device_mem_reserve(const modattn_device_iface *dev, modattn_mem_category cat, size_t bytes,
                               const char *what) {
    int st = dev_reserve(dev, (unsigned)cat < MODATTN_MEM_CATEGORY_COUNT ? cat : MODATTN_MEM_OTHER, bytes, what);
    int s = slot_of(dev);
    if (!st && s >= 0) atomic_fetch_add(&g_mem[s].allocs, 1);
    return st;
}

void modattn__device_mem_release(const modattn_device_iface *dev, modattn_mem_category cat, size_t bytes) {
    dev_release(dev, (unsigned)cat < MODATTN_MEM_CATEGORY_COUNT ? cat : MODATTN_MEM_OTHER, bytes);
}

int modattn__device_mem_get_stats(const modattn_device_iface *dev, modattn_device_mem_stats *out) {
    memset(out, 0, sizeof *out);
    int s = slot_of(dev);
    if (s < 0) return modattn__error(MODATTN_EINVAL, "device is not one of this process's devices");
    if (dev->id.kind == MODATTN_DEVICE_CPU) { /* host memory: the host allocator's figures */
        modattn_mem_stats hs;
        modattn_mem_get_stats(&hs);
        for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++) out->current[c] = hs.current[c], out->peak[c] = hs.peak[c];
        out->current_total = hs.current_total, out->peak_total = hs.peak_total;
        out->allocations = hs.allocations, out->failures = hs.failures;
        return 0;
    }
    dev_mem *m = &g_mem[s];
    for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++) out->current[c] = atomic_load(&m->cur[c]), out->peak[c] = atomic_load(&m->peak[c]);
    out->current_total = atomic_load(&m->cur_total), out->peak_total = atomic_load(&m->peak_total);
    out->allocations = atomic_load(&m->allocs), out->failures = atomic_load(&m->failures);
    return 0;
}

/* ---------------------------------------------------------------- buffers */

/* The buffer's record (not its memory). */
static modattn_buffer *buffer_new(const modattn_device_iface *dev, size_t bytes, modattn_mem_category cat) {
    modattn_buffer *b = modattn__calloc(1, sizeof *b, MODATTN_MEM_OTHER);
    if (!b) return NULL;
    b->device = dev->id;
    b->iface = dev;
    b->category = (int)cat;
    b->bytes = bytes;
    return b;
}

int modattn__buffer_alloc(const modattn_device_iface *dev, size_t bytes, modattn_mem_category cat, const char *what,
                         modattn_buffer **out) {
    *out = NULL;
    if (!dev) return modattn__error(MODATTN_EINVAL, "%s: device is NULL", what);
    if ((unsigned)cat >= MODATTN_MEM_CATEGORY_COUNT) cat = MODATTN_MEM_OTHER;
    modattn_buffer *b = buffer_new(dev, bytes, cat);
    if (!b) return modattn__error_prefix(modattn__mem_last_status(), "%s", what);
    if (bytes == 0) {
        *out = b;
        return 0;
    }
    bool host_dev = dev->id.kind == MODATTN_DEVICE_CPU;
    int st = host_dev ? 0 : dev_reserve(dev, cat, bytes, what);
    if (st) {
        modattn_free(b);
        return st;
    }
    char reason[256] = "";
    st = dev->buffer_alloc(dev->ctx, bytes, cat, &b->handle, &b->host, reason, sizeof reason);
    if (st) {
        if (!host_dev) {
            dev_release(dev, cat, bytes);
            int s = slot_of(dev);
            if (s >= 0) atomic_fetch_add(&g_mem[s].failures, 1);
        }
        modattn_free(b);
        char name[32];
        modattn_device_format(dev->id, name, sizeof name);
        return modattn__error(st, "%s: %s of %zu bytes (%s) failed: %s", name, what, bytes, modattn_mem_category_name(cat),
                             reason[0] ? reason : modattn_strerror(st));
    }
    if (!host_dev) {
        int s = slot_of(dev);
        if (s >= 0) atomic_fetch_add(&g_mem[s].allocs, 1);
    }
    *out = b;
    return 0;
}

int modattn__buffer_from_host(const modattn_device_iface *dev, const void *src, size_t bytes, modattn_mem_category cat,
                             const char *what, modattn_buffer **out) {
    *out = NULL;
    if (!dev) return modattn__error(MODATTN_EINVAL, "%s: device is NULL", what);
    if (bytes && !src) return modattn__error(MODATTN_EINVAL, "%s: no host data", what);
    if (dev->buffer_write) { /* buffers off the host (a device whose buffers all have a host address has none) */
        int st = modattn__buffer_alloc(dev, bytes, cat, what, out);
        if (!st) st = modattn__buffer_write(*out, 0, src, bytes);
        if (st) {
            modattn__buffer_free(*out);
            *out = NULL;
        }
        return st;
    }
    modattn_buffer *b = buffer_new(dev, bytes, cat);
    if (!b) return modattn__error_prefix(modattn__mem_last_status(), "%s", what);
    b->handle = b->host = (void *)src;
    b->borrowed = true;
    *out = b;
    return 0;
}

void modattn__buffer_free(modattn_buffer *b) {
    if (!b) return;
    const modattn_device_iface *dev = b->iface;
    if (b->bytes && !b->borrowed) {
        dev->buffer_free(dev->ctx, b->handle);
        if (dev->id.kind != MODATTN_DEVICE_CPU) dev_release(dev, (modattn_mem_category)b->category, b->bytes);
    }
    modattn_free(b);
}

static int range_ok(const modattn_buffer *b, size_t off, size_t n, const char *op) {
    if (!b) return modattn__error(MODATTN_EINVAL, "buffer %s: buffer is NULL", op);
    if (off > b->bytes || n > b->bytes - off)
        return modattn__error(MODATTN_ERANGE, "buffer %s: bytes [%zu, %zu + %zu) are outside the %zu-byte buffer", op, off,
                             off, n, b->bytes);
    return 0;
}

int modattn__buffer_write(modattn_buffer *b, size_t off, const void *src, size_t n) {
    int st = range_ok(b, off, n, "write");
    if (st || n == 0) return st;
    if (b->host) {
        memcpy((char *)b->host + off, src, n);
        return 0;
    }
    char reason[256] = "";
    st = b->iface->buffer_write(b->iface->ctx, b->handle, off, src, n, reason, sizeof reason);
    return st ? dev_error(b->iface, st, "buffer write", reason) : 0;
}

int modattn__buffer_read(const modattn_buffer *b, size_t off, void *dst, size_t n) {
    int st = range_ok(b, off, n, "read");
    if (st || n == 0) return st;
    if (b->host) {
        memcpy(dst, (const char *)b->host + off, n);
        return 0;
    }
    char reason[256] = "";
    st = b->iface->buffer_read(b->iface->ctx, b->handle, off, dst, n, reason, sizeof reason);
    return st ? dev_error(b->iface, st, "buffer read", reason) : 0;
}

int modattn__buffer_copy(modattn_buffer *dst, size_t doff, const modattn_buffer *src, size_t soff, size_t n) {
    int st = range_ok(dst, doff, n, "copy (destination)");
    if (!st) st = range_ok(src, soff, n, "copy (source)");
    if (st || n == 0) return st;
    if (dst->host && src->host) {
        memmove((char *)dst->host + doff, (const char *)src->host + soff, n);
        return 0;
    }
    bool same_overlap = dst == src && doff < soff + n && soff < doff + n;
    if (dst->iface == src->iface && dst->iface->buffer_copy && !same_overlap) {
        char reason[256] = "";
        st = dst->iface->buffer_copy(dst->iface->ctx, dst->handle, doff, src->handle, soff, n, reason, sizeof reason);
        return st ? dev_error(dst->iface, st, "buffer copy", reason) : 0;
    }
    if (src->host) return modattn__buffer_write(dst, doff, (const char *)src->host + soff, n);
    if (dst->host) return modattn__buffer_read(src, soff, (char *)dst->host + doff, n);
    /* default: through the host, in pieces (one piece when the ranges overlap in one buffer, as
     * memmove; drivers refuse overlapping device copies) */
    size_t piece = same_overlap || n < (1u << 20) ? n : (1u << 20);
    char *tmp = modattn__malloc(piece, MODATTN_MEM_WORKSPACE);
    if (!tmp) return modattn__error_prefix(modattn__mem_last_status(), "buffer copy through the host");
    for (size_t at = 0; at < n && !st; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        st = modattn__buffer_read(src, soff + at, tmp, k);
        if (!st) st = modattn__buffer_write(dst, doff + at, tmp, k);
    }
    modattn_free(tmp);
    return st;
}

int modattn__buffer_fill(modattn_buffer *b, size_t off, uint8_t byte, size_t n) {
    int st = range_ok(b, off, n, "fill");
    if (st || n == 0) return st;
    if (b->host) {
        memset((char *)b->host + off, byte, n);
        return 0;
    }
    if (b->iface->buffer_fill) {
        char reason[256] = "";
        st = b->iface->buffer_fill(b->iface->ctx, b->handle, off, byte, n, reason, sizeof reason);
        return st ? dev_error(b->iface, st, "buffer fill", reason) : 0;
    }
    size_t piece = n < (1u << 20) ? n : (1u << 20);
    char *tmp = modattn__malloc(piece, MODATTN_MEM_WORKSPACE);
    if (!tmp) return modattn__error_prefix(modattn__mem_last_status(), "buffer fill through the host");
    memset(tmp, byte, piece);
    for (size_t at = 0; at < n && !st; at += piece) st = modattn__buffer_write(b, off + at, tmp, n - at < piece ? n - at : piece);
    modattn_free(tmp);
    return st;
}

modattn_tensor modattn__tensor_on_buffer(modattn_buffer *buf, size_t offset, modattn_dtype dtype, int64_t d0,
                                        int64_t d1, int64_t d2, int64_t d3) {
    modattn_tensor t = modattn_tensor_contiguous(NULL, dtype, d0, d1, d2, d3);
    t.buffer = buf;
    t.offset = (int64_t)offset;
    if (buf) {
        t.device = buf->device;
        t.data = buf->host ? (char *)buf->host + offset : NULL;
        size_t es = modattn_dtype_size(dtype);
        t.capacity = es && buf->bytes > offset ? (int64_t)((buf->bytes - offset) / es) : 0;
    }
    return t;
}
