/* backends/xla/xla_device.c — the XLA device: one modattn device ("xla:N") per PJRT plugin found,
 * running on the plugin's first addressable device. Plugins come from MODATTN_PJRT_PLUGIN
 * (PATH[:PATH]) or the standard places a pip install puts them (libtpu, jax-cuda*-pjrt,
 * xla-cpu-pjrt) and the one `make deps` lays out; a plugin is opened (dlopen, client) the first time
 * its device is described or used, so a command on another device never pays for it.
 *
 * The device computes through the graph slot only: the whole encoder is one StableHLO program per
 * shape bucket (batch rows and padded length, each rounded up to a power of two), compiled once and
 * kept in memory and on disk (PJRT_Executable_Serialize under the cache folder; the file names its
 * key, and a file whose key, length or checksum does not match is recompiled, never trusted).
 * Weights are uploaded once at load; per batch only ids and lengths go up and pooled vectors come
 * down. Its buffers (modattn__buffer_alloc) are host arrays that attention alone (xla_attn.c)
 * uploads per call, since a PJRT buffer cannot be written in part. */
#define _GNU_SOURCE
#include "backends/xla/xla.h"

#include <stdatomic.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "modattn/core.h"
#include "modattn/backend/device.h" /* MODATTN_POOL_* */
#include "core/internal_core.h"
#include "device/internal_device.h"

#define XLA_MAX_BUCKETS 48

typedef struct xla_dev {
    modattn_device_iface iface;
    int index;
    char path[1024];
    pthread_mutex_t mu; /* opening, and every PJRT call: the device runs one program at a time */
    xla_plugin *p;
    bool tried;
    char why[640];
    /* counters for --stats and explain */
    uint64_t compiles, cache_loads, cache_rejects, runs;
    double compile_s;
} xla_dev;

static xla_dev g_devs[XLA_MAX_DEVICES];
static int g_n;

/* ---- the plugin, opened on first use */
static xla_plugin *plugin(xla_dev *d, char *why, size_t len) {
    if (!d->tried) {
        d->tried = true;
        uint64_t t0 = modattn__trace_begin();
        if (xla_plugin_open(d->path, &d->p, d->why, sizeof d->why)) d->p = NULL;
        modattn__trace_end(t0, "xla.plugin_open", "xla", "", 0, 0);
    }
    if (!d->p) snprintf(why, len, "%s", d->why);
    return d->p;
}

/* ---- the device's slots */
static void get_info(void *ctx, modattn_device_info *out) {
    xla_dev *d = ctx;
    char why[640];
    pthread_mutex_lock(&d->mu);
    xla_plugin *p = plugin(d, why, sizeof why);
    snprintf(out->vendor, sizeof out->vendor, "XLA (PJRT plugin)");
    if (p) {
        snprintf(out->platform, sizeof out->platform, "PJRT %s", xla_plugin_platform(p));
        snprintf(out->model, sizeof out->model, "%s: the plugin's first of %d device%s", xla_plugin_platform(p),
                 xla_plugin_devices(p), xla_plugin_devices(p) == 1 ? "" : "s");
        snprintf(out->driver, sizeof out->driver, "%s", xla_plugin_version(p));
        snprintf(out->note, sizeof out->note, "plugin %s; runs the whole encoder as one compiled program per shape "
                 "bucket (%llu compiled, %llu from the cache)", d->path, (unsigned long long)d->compiles,
                 (unsigned long long)d->cache_loads);
    } else {
        snprintf(out->platform, sizeof out->platform, "PJRT (not loaded)");
        snprintf(out->model, sizeof out->model, "-");
        snprintf(out->note, sizeof out->note, "cannot be used: %s", why);
    }
    pthread_mutex_unlock(&d->mu);
    out->host_memory = false;
    out->fp64 = false;
}

static int buffer_alloc(void *ctx, size_t bytes, modattn_mem_category cat, void **handle, void **host, char *reason,
                        size_t len) {
    (void)ctx;
    *host = NULL;
    *handle = modattn__malloc(bytes, cat);
    if (!*handle) {
        snprintf(reason, len, "%s", modattn_last_error());
        return modattn__mem_last_status();
    }
    return 0;
}
static void buffer_free(void *ctx, void *handle) {
    (void)ctx;
    modattn_free(handle);
}
static int buffer_write(void *ctx, void *handle, size_t off, const void *src, size_t n, char *r, size_t len) {
    (void)ctx, (void)r, (void)len;
    memcpy((char *)handle + off, src, n);
    return 0;
}
static int buffer_read(void *ctx, void *handle, size_t off, void *dst, size_t n, char *r, size_t len) {
    (void)ctx, (void)r, (void)len;
    memcpy(dst, (const char *)handle + off, n);
    return 0;
}

static bool supports_op(void *ctx, modattn_op op, char *reason, size_t len) {
    (void)ctx, (void)op;
    snprintf(reason, len, "the xla device runs the whole encoder as one compiled program (the graph slot), not op "
             "by op");
    return false;
}

static int control(void *ctx, int op, void *arg) {
    xla_dev *d = ctx;
    if (op != MODATTN_DEVICE_CONTROL_STATS || !arg) return MODATTN_EUNSUPPORTED;
    modattn_device_stats_text *t = arg;
    pthread_mutex_lock(&d->mu);
    if (d->compiles + d->cache_loads + d->runs == 0) snprintf(t->buf, t->len, "%s", "");
    else
        snprintf(t->buf, t->len, "%llu program%s compiled (%.2f s), %llu from the compile cache, %llu cache file%s "
                 "rejected, %llu encoder run%s",
                 (unsigned long long)d->compiles, d->compiles == 1 ? "" : "s", d->compile_s,
                 (unsigned long long)d->cache_loads, (unsigned long long)d->cache_rejects,
                 d->cache_rejects == 1 ? "" : "s", (unsigned long long)d->runs, d->runs == 1 ? "" : "s");
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* set by xla_attn.c (always the same function) and read under any device's lock: atomic */
static _Atomic(xla_drop_fn) g_on_close;
void modattn__xla_on_close(xla_drop_fn fn) { atomic_store(&g_on_close, fn); }

static void shutdown_dev(void *ctx) {
    xla_dev *d = ctx;
    pthread_mutex_lock(&d->mu);
    xla_drop_fn drop = atomic_load(&g_on_close);
    if (d->p && drop) drop(d->index, d->p);
    xla_plugin_close(d->p);
    d->p = NULL;
    d->tried = false;
    pthread_mutex_unlock(&d->mu);
}

/* ---- the compile cache on disk */
static bool cache_dir(char *buf, size_t len) {
    const char *dir = getenv("MODATTN_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(buf, len, "%s/xla", dir);
    else if (xdg && *xdg) snprintf(buf, len, "%s/modattn/xla", xdg);
    else if (home && *home) snprintf(buf, len, "%s/.cache/modattn/xla", home);
    else return false;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s", buf);
    for (char *s = tmp + 1; *s; s++) /* mkdir -p */
        if (*s == '/') {
            *s = '\0';
            (void)mkdir(tmp, 0755);
            *s = '/';
        }
    return mkdir(tmp, 0755) == 0 || errno == EEXIST;
}

static const char k_magic[8] = {'M', 'A', 'X', 'L', 'A', 'E', 'X', '1'};

/* The cached executable for key, or NULL (absent, damaged, another key: recompiled). */
static xla_exe *cache_load(xla_dev *d, const char *file, const char *key) {
    FILE *f = fopen(file, "rb");
    if (!f) return NULL;
    char magic[8];
    uint64_t klen = 0, plen = 0, hash = 0;
    void *payload = NULL;
    char *k = NULL;
    xla_exe *e = NULL;
    bool ok = fread(magic, 1, 8, f) == 8 && memcmp(magic, k_magic, 8) == 0 && fread(&klen, 8, 1, f) == 1 &&
              klen == strlen(key) && (k = malloc(klen + 1)) && fread(k, 1, klen, f) == klen &&
              memcmp(k, key, klen) == 0 && fread(&plen, 8, 1, f) == 1 && fread(&hash, 8, 1, f) == 1 &&
              plen > 0 && plen < ((uint64_t)1 << 34) && (payload = malloc(plen)) && fread(payload, 1, plen, f) == plen &&
              fgetc(f) == EOF && XXH64(payload, plen, 0) == hash;
    fclose(f);
    if (ok) {
        char why[512];
        if (xla_deserialize(d->p, payload, plen, &e, why, sizeof why)) e = NULL;
    }
    if (!e) d->cache_rejects++;
    free(k);
    free(payload);
    return e;
}

static void cache_store(xla_dev *d, xla_exe *e, const char *file, const char *key) {
    void *data = NULL;
    size_t n = 0;
    char why[512], tmp[1200];
    if (xla_serialize(d->p, e, &data, &n, why, sizeof why) || n == 0) return; /* a plugin that cannot: memory only */
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", file, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    uint64_t klen = strlen(key), plen = n, hash = XXH64(data, n, 0);
    bool ok = f && fwrite(k_magic, 1, 8, f) == 8 && fwrite(&klen, 8, 1, f) == 1 && fwrite(key, 1, klen, f) == klen &&
              fwrite(&plen, 8, 1, f) == 1 && fwrite(&hash, 8, 1, f) == 1 && fwrite(data, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, file) == 0) ok = true;
    else unlink(tmp);
    free(data);
}

/* ---- the graph slot */
typedef struct xla_model {
    xla_dev *d;
    xla_encoder_shape shape; /* B and S per bucket */
    int32_t pad_id;
    char identity[256];
    xla_buf **w;
    size_t nw;
    int64_t wbytes;
    struct {
        int64_t B, S;
        xla_exe *e;
    } bucket[XLA_MAX_BUCKETS];
    int nbucket;
} xla_model;

static bool graph_supports(void *ctx, const modattn_encoder_graph *g, char *reason, size_t len) {
    xla_dev *d = ctx;
    if (g->pooling & ~(unsigned)(MODATTN_POOL_CLS | MODATTN_POOL_MAX | MODATTN_POOL_MEAN)) {
        snprintf(reason, len, "pooling modes other than cls, max and mean are not built for xla yet");
        return false;
    }
    if (g->precision != MODATTN_PRECISION_FP32 && g->precision != MODATTN_PRECISION_BF16) {
        snprintf(reason, len, "precision %s: the xla device runs fp32 (dots at precision HIGHEST) and bf16 (bfloat16 "
                 "operands, fp32 sums) only", modattn_precision_name(g->precision));
        return false;
    }
    if (g->heads < 1 || g->hidden % g->heads) {
        snprintf(reason, len, "hidden size %lld is not a multiple of %lld heads", (long long)g->hidden,
                 (long long)g->heads);
        return false;
    }
    pthread_mutex_lock(&d->mu);
    bool ok = plugin(d, reason, len) != NULL;
    pthread_mutex_unlock(&d->mu);
    return ok;
}

static void model_free(xla_model *m) {
    if (!m) return;
    xla_dev *d = m->d;
    for (int i = 0; i < m->nbucket; i++) xla_exe_free(d->p, m->bucket[i].e);
    for (size_t i = 0; i < m->nw; i++)
        if (m->w[i]) {
            modattn__device_mem_release(&d->iface, MODATTN_MEM_WEIGHTS, (size_t)xla_buf_bytes(m->w[i]));
            xla_buf_free(d->p, m->w[i]);
        }
    free(m->w);
    free(m);
}

static int graph_load(void *ctx, const modattn_encoder_graph *g, void **out, char *reason, size_t len) {
    xla_dev *d = ctx;
    *out = NULL;
    xla_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(reason, len, "out of memory");
        return MODATTN_ENOMEM;
    }
    m->d = d;
    m->shape = (xla_encoder_shape){0, 0, g->hidden, g->heads, g->intermediate, g->vocab, g->max_positions, g->layers,
                                   g->dim, g->eps, g->act, g->pooling, g->normalize,
                                   g->precision == MODATTN_PRECISION_BF16};
    m->pad_id = g->pad_id;
    snprintf(m->identity, sizeof m->identity, "%s", g->identity ? g->identity : "");
    m->nw = 5 + (size_t)g->layers * 12;
    m->w = calloc(m->nw, sizeof *m->w);
    if (!m->w) {
        free(m);
        snprintf(reason, len, "out of memory");
        return MODATTN_ENOMEM;
    }
    const int64_t H = g->hidden, I = g->intermediate;
    int st = 0;
    pthread_mutex_lock(&d->mu);
    if (!plugin(d, reason, len)) st = MODATTN_EDEVICE;
    uint64_t t0 = modattn__trace_begin();
    for (size_t i = 0; i < m->nw && !st; i++) {
        const float *src;
        int64_t dims[2];
        int nd = 1;
        if (i < 5) {
            const float *e5[5] = {g->word, g->pos, g->type0, g->emb_g, g->emb_b};
            src = e5[i];
            if (i == 0) dims[0] = g->vocab, dims[1] = H, nd = 2;
            else if (i == 1) dims[0] = g->max_positions, dims[1] = H, nd = 2;
            else dims[0] = H;
        } else {
            const modattn_graph_layer *L = &g->layer[(i - 5) / 12];
            const float *lw[12] = {L->wqkv, L->bqkv, L->wo, L->bo, L->ln1_g, L->ln1_b,
                                   L->w1, L->b1, L->w2, L->b2, L->ln2_g, L->ln2_b};
            const int64_t shp[12][2] = {{3 * H, H}, {3 * H, 0}, {H, H}, {H, 0}, {H, 0}, {H, 0},
                                        {I, H},     {I, 0},     {H, I}, {H, 0}, {H, 0}, {H, 0}};
            const size_t k = (i - 5) % 12;
            src = lw[k];
            dims[0] = shp[k][0], dims[1] = shp[k][1];
            nd = shp[k][1] ? 2 : 1;
        }
        if (!src) {
            snprintf(reason, len, "weight %zu of the graph is missing", i);
            st = MODATTN_EINVAL;
            break;
        }
        if ((st = xla_buf_upload(d->p, src, XLA_F32, dims, nd, &m->w[i], reason, len))) break;
        const size_t b = (size_t)xla_buf_bytes(m->w[i]);
        if ((st = modattn__device_mem_reserve(&d->iface, MODATTN_MEM_WEIGHTS, b, "the encoder's weights"))) {
            snprintf(reason, len, "%s", modattn_last_error());
            xla_buf_free(d->p, m->w[i]);
            m->w[i] = NULL;
            break;
        }
        m->wbytes += (int64_t)b;
    }
    modattn__trace_end(t0, "xla.upload_weights", "xla", "", 0, 0);
    if (st) {
        model_free(m);
        pthread_mutex_unlock(&d->mu);
        return st;
    }
    pthread_mutex_unlock(&d->mu);
    *out = m;
    return 0;
}

static int64_t pow2_at_least(int64_t n, int64_t lo) {
    int64_t p = lo;
    while (p < n) p *= 2;
    return p;
}

/* the executable of bucket (B, S): in memory, else from the disk cache, else compiled (and stored) */
static int bucket_exe(xla_model *m, int64_t B, int64_t S, xla_exe **out, char *reason, size_t len) {
    xla_dev *d = m->d;
    for (int i = 0; i < m->nbucket; i++)
        if (m->bucket[i].B == B && m->bucket[i].S == S) return *out = m->bucket[i].e, 0;
    xla_encoder_shape sh = m->shape;
    sh.B = B, sh.S = S;
    xla_text t;
    int st = xla_hlo_encoder(&sh, &t);
    if (st) {
        snprintf(reason, len, "out of memory writing the program");
        return st;
    }
    /* the key: the program's text (shapes, arithmetic, this emitter's version), the plugin, the CPU,
     * the model: a cached executable is used only for exactly this */
    char key[2048];
    const modattn_cpu_features *cf = modattn__cpu_get();
    snprintf(key, sizeof key, "modattn-xla-1|%s|%s|%s|%s avx2=%d avx512f=%d amx=%d|%s|%s|B%lld|S%lld|hlo%016llx",
             xla_plugin_path(d->p), xla_plugin_platform(d->p), xla_plugin_version(d->p), cf->model_name, cf->avx2,
             cf->avx512f, cf->amx_bf16, m->identity, m->shape.bf16 ? "bf16" : "fp32", (long long)B, (long long)S,
             (unsigned long long)XXH64(t.s, t.n, 0));
    char dir[1024], file[1200];
    bool disk = cache_dir(dir, sizeof dir);
    if (disk) snprintf(file, sizeof file, "%s/%016llx.xlaexe", dir, (unsigned long long)XXH64(key, strlen(key), 0));
    xla_exe *e = NULL;
    uint64_t t0 = modattn__trace_begin();
    if (disk && (e = cache_load(d, file, key))) d->cache_loads++;
    char shape[48];
    snprintf(shape, sizeof shape, "B=%lld S=%lld", (long long)B, (long long)S);
    modattn__trace_end(t0, "xla.cache_load", "xla", shape, 0, 0);
    if (!e) {
        t0 = modattn__trace_begin();
        const uint64_t c0 = modattn__now_ns();
        st = xla_compile(d->p, t.s, t.n, &e, reason, len);
        d->compile_s += (double)(modattn__now_ns() - c0) * 1e-9;
        modattn__trace_end(t0, "xla.compile", "xla", shape, 0, 0);
        if (st) {
            xla_text_free(&t);
            return st;
        }
        d->compiles++;
        if (disk) cache_store(d, e, file, key);
    }
    xla_text_free(&t);
    if (m->nbucket == XLA_MAX_BUCKETS) { /* the oldest goes */
        xla_exe_free(d->p, m->bucket[0].e);
        memmove(&m->bucket[0], &m->bucket[1], sizeof m->bucket[0] * (XLA_MAX_BUCKETS - 1));
        m->nbucket--;
    }
    m->bucket[m->nbucket].B = B, m->bucket[m->nbucket].S = S, m->bucket[m->nbucket].e = e;
    m->nbucket++;
    *out = e;
    return 0;
}

static int graph_forward(void *ctx, void *model, int64_t B, int64_t S, const int32_t *ids, const int32_t *lens,
                         float *out, char *reason, size_t len) {
    xla_dev *d = ctx;
    xla_model *m = model;
    if (S > m->shape.P) {
        snprintf(reason, len, "%lld tokens is past the model's %lld positions", (long long)S, (long long)m->shape.P);
        return MODATTN_EINVAL;
    }
    /* the bucket: rows and length rounded up to powers of two (length at least 8, at most the
     * positions): few programs, each compiled once */
    const int64_t Bb = pow2_at_least(B, 1);
    int64_t Sb = pow2_at_least(S, 8);
    if (Sb > m->shape.P) Sb = m->shape.P;
    const int64_t dim = m->shape.dim;
    int32_t *pids = malloc((size_t)(Bb * Sb) * sizeof *pids), *plens = malloc((size_t)Bb * sizeof *plens);
    float *pout = malloc((size_t)(Bb * dim) * sizeof *pout);
    int st = 0;
    if (!pids || !plens || !pout) {
        snprintf(reason, len, "out of memory");
        st = MODATTN_ENOMEM;
        goto done;
    }
    for (int64_t b = 0; b < Bb; b++) {
        for (int64_t s = 0; s < Sb; s++) pids[b * Sb + s] = b < B && s < S ? ids[b * S + s] : m->pad_id;
        plens[b] = b < B ? lens[b] : 1; /* a filler row: one token, its vector dropped */
    }
    pthread_mutex_lock(&d->mu);
    xla_exe *e = NULL;
    xla_buf *bi = NULL, *bl = NULL, *bo = NULL;
    if (!plugin(d, reason, len)) st = MODATTN_EDEVICE;
    if (!st) st = bucket_exe(m, Bb, Sb, &e, reason, len);
    int64_t di[2] = {Bb, Sb}, dl[1] = {Bb};
    uint64_t t0 = modattn__trace_begin();
    if (!st) st = xla_buf_upload(d->p, pids, XLA_I32, di, 2, &bi, reason, len);
    if (!st) st = xla_buf_upload(d->p, plens, XLA_I32, dl, 1, &bl, reason, len);
    modattn__trace_end(t0, "xla.upload", "xla", "", 0, 0);
    if (!st) {
        xla_buf **args = malloc((m->nw + 2) * sizeof *args);
        if (!args) {
            snprintf(reason, len, "out of memory");
            st = MODATTN_ENOMEM;
        } else {
            memcpy(args, m->w, m->nw * sizeof *args);
            args[m->nw] = bi, args[m->nw + 1] = bl;
            t0 = modattn__trace_begin();
            st = xla_execute(d->p, e, args, m->nw + 2, &bo, 1, reason, len);
            modattn__trace_end(t0, "xla.execute", "xla", "", 0, 0);
            free(args);
        }
    }
    if (!st) {
        t0 = modattn__trace_begin();
        st = xla_buf_download(d->p, bo, pout, (size_t)(Bb * dim) * sizeof *pout, reason, len);
        modattn__trace_end(t0, "xla.download", "xla", "", 0, 0);
    }
    if (!st) d->runs++;
    xla_buf_free(d->p, bo);
    xla_buf_free(d->p, bl);
    xla_buf_free(d->p, bi);
    pthread_mutex_unlock(&d->mu);
    if (!st) memcpy(out, pout, (size_t)(B * dim) * sizeof *out);
done:
    free(pids);
    free(plens);
    free(pout);
    return st;
}

static void graph_unload(void *ctx, void *model) {
    xla_dev *d = ctx;
    pthread_mutex_lock(&d->mu);
    model_free(model);
    pthread_mutex_unlock(&d->mu);
}

static const modattn_graph_ops k_graph = {graph_supports, graph_load, graph_forward, graph_unload};

xla_plugin *modattn__xla_lock(int index, char *why, size_t len) {
    if (index < 0 || index >= g_n) {
        snprintf(why, len, "no device xla:%d here (%d found)", index, g_n);
        return NULL;
    }
    xla_dev *d = &g_devs[index];
    pthread_mutex_lock(&d->mu);
    xla_plugin *p = plugin(d, why, len);
    if (!p) pthread_mutex_unlock(&d->mu);
    return p;
}

void modattn__xla_unlock(int index) {
    if (index >= 0 && index < g_n) pthread_mutex_unlock(&g_devs[index].mu);
}

/* ---- finding plugins */
static bool seen(char (*paths)[1024], int n, const char *p) {
    for (int i = 0; i < n; i++)
        if (strcmp(paths[i], p) == 0) return true;
    return false;
}

static void add_path(char (*paths)[1024], int *n, const char *p) {
    struct stat st;
    char real[1024];
    if (*n >= XLA_MAX_DEVICES || stat(p, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (!realpath(p, real)) snprintf(real, sizeof real, "%s", p);
    if (!seen(paths, *n, real)) snprintf(paths[(*n)++], sizeof paths[0], "%s", real);
}

int modattn__devices_xla(const modattn_device_iface **out, int max, char *why, size_t len) {
    char paths[XLA_MAX_DEVICES][1024];
    int n = 0;
    const char *env = getenv("MODATTN_PJRT_PLUGIN");
    if (env && *env) { /* the user's list, and nothing else */
        char *copy = strdup(env), *save = NULL;
        for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save)) {
            int before = n;
            add_path(paths, &n, p);
            if (n == before && !seen(paths, n, p))
                snprintf(why, len, "MODATTN_PJRT_PLUGIN: %s is not a file", p);
        }
        free(copy);
    } else {
        /* where pip puts the plugins, in every Python's site-packages we can see, then ours */
        static const char *const rel[] = {"libtpu/libtpu.so", "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
                                          "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
                                          "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"};
        const char *venv = getenv("VIRTUAL_ENV"), *home = getenv("HOME");
        char roots[4][640];
        int nr = 0;
        if (venv && *venv) snprintf(roots[nr++], sizeof roots[0], "%s/lib/python3*/site-packages", venv);
        if (home && *home) snprintf(roots[nr++], sizeof roots[0], "%s/.local/lib/python3*/site-packages", home);
        snprintf(roots[nr++], sizeof roots[0], "/usr/local/lib/python3*/*-packages");
        snprintf(roots[nr++], sizeof roots[0], "/usr/lib/python3*/dist-packages");
        for (int r = 0; r < nr; r++)
            for (size_t k = 0; k < sizeof rel / sizeof *rel; k++) {
                char pat[1024];
                snprintf(pat, sizeof pat, "%s/%s", roots[r], rel[k]);
                glob_t g;
                if (glob(pat, 0, NULL, &g) == 0)
                    for (size_t i = 0; i < g.gl_pathc; i++) add_path(paths, &n, g.gl_pathv[i]);
                globfree(&g);
            }
#ifdef MODATTN_PJRT_DEFAULT_PLUGIN
        add_path(paths, &n, MODATTN_PJRT_DEFAULT_PLUGIN); /* `make deps` puts one here */
#endif
    }
    g_n = 0;
    for (int i = 0; i < n && g_n < max && g_n < XLA_MAX_DEVICES; i++) {
        xla_dev *d = &g_devs[g_n];
        memset(d, 0, sizeof *d);
        pthread_mutex_init(&d->mu, NULL);
        d->index = g_n;
        snprintf(d->path, sizeof d->path, "%s", paths[i]);
        d->iface.api_version = MODATTN_DEVICE_API_VERSION;
        d->iface.id = (modattn_device){MODATTN_DEVICE_XLA, g_n};
        d->iface.ctx = d;
        d->iface.get_info = get_info;
        d->iface.buffer_alloc = buffer_alloc;
        d->iface.buffer_free = buffer_free;
        d->iface.buffer_write = buffer_write;
        d->iface.buffer_read = buffer_read;
        d->iface.supports_op = supports_op;
        d->iface.shutdown = shutdown_dev;
        d->iface.control = control;
        d->iface.graph = &k_graph;
        out[g_n] = &d->iface;
        g_n++;
    }
    if (g_n == 0 && !why[0])
        snprintf(why, len, "no PJRT plugin found (set MODATTN_PJRT_PLUGIN=PATH, or pip install xla-cpu-pjrt, libtpu "
                 "or jax-cuda12-pjrt; `make deps` lays out the CPU one)");
    return g_n;
}
