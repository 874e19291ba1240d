/* pipeline/ann_build.c — the ANN index built and updated from the vector file's rows: a new
 * index, rows added to a current one, or only its header (generation, search parameters) renewed;
 * written whole through the sidecar writer (pipeline/sidecar.h: temporary, fsync, rename). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "modattn/core.h"
#include "modattn/search.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ann.h"
#include "pipeline/internal_store.h"
#include "pipeline/ann_internal.h"

/* ---------------------------------------------------------------- building and updating */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct writer {
    int fd;
    uint64_t at;
    XXH3_state_t *xx;
    int err;
} writer;
static int put_bytes(void *ud, const void *p, size_t n) {
    writer *w = ud;
    const char *c = p;
    XXH3_64bits_update(w->xx, p, n);
    while (n) {
        ssize_t k = pwrite(w->fd, c, n, (off_t)w->at);
        if (k < 0) {
            if (errno == EINTR) continue;
            w->err = errno;
            return -1;
        }
        c += k, n -= (size_t)k, w->at += (uint64_t)k;
    }
    return 0;
}

static int write_header_at(int fd, const ann_header *h) {
    unsigned char page[ANN_HEADER];
    modattn__ann_seal(h, page);
    return modattn__sidecar_write_all(fd, page, ANN_HEADER, 0);
}

/* Writes an index's payload through put_bytes(w, ...); msg says why it could not. */
typedef int (*emit_fn)(void *src, writer *w, char *msg, size_t len);

/* h (payload fields filled here) and the payload emit writes into a temporary file, renamed over
 * path. */
static int write_file(const char *path, ann_header *h, emit_fn emit, void *src) {
    modattn__sidecar_tmp t;
    /* builders are not serialised by the store's lock: only a dead one's temporary is removed */
    if (modattn__sidecar_begin(&t, path, true) != 0)
        return modattn__error(MODATTN_EIO, "cannot write the ANN index %s: %s", t.tmp, strerror(t.err));
    writer w = {t.fd, ANN_HEADER, XXH3_createState(), 0};
    int st = 0;
    char msg[256] = "";
    if (!w.xx) st = modattn__error(MODATTN_ENOMEM, "writing the ANN index: checksum state");
    if (!st) {
        XXH3_64bits_reset(w.xx);
        st = emit(src, &w, msg, sizeof msg);
        if (st && w.err) st = modattn__error(MODATTN_EIO, "cannot write the ANN index %s: %s", t.tmp, strerror(w.err));
        else if (st) st = modattn__error(st, "writing the ANN index %s: %s", t.tmp, msg);
    }
    if (!st) {
        h->payload_bytes = w.at - ANN_HEADER;
        h->payload_xxh3 = XXH3_64bits_digest(w.xx);
    }
    if (w.xx) XXH3_freeState(w.xx);
    if (st) {
        modattn__sidecar_abandon(&t);
        return st;
    }
    unsigned char page[ANN_HEADER];
    modattn__ann_seal(h, page);
    if (modattn__sidecar_commit(&t, page, "ann.rewrite") == 0) return 0;
    char dir[4200];
    modattn__sidecar_parent_dir(path, dir, sizeof dir);
    if (strcmp(t.what, "rename") == 0)
        return modattn__error(MODATTN_EIO, "cannot rename %s to %s: %s", t.tmp, path, strerror(t.err));
    if (strcmp(t.what, "fsync of the folder") == 0)
        return modattn__error(MODATTN_EIO, "fsync of the folder %s: %s", dir, strerror(t.err));
    return modattn__error(MODATTN_EIO, "cannot write the ANN index %s: %s: %s", t.tmp, t.what, strerror(t.err));
}

/* A compact kind's payload: every row's codes, then (int8) every row's scale. */
typedef struct flat_src {
    const modattn_store_vectors *v;
    modattn__flat_code c;
} flat_src;
static int emit_flat(void *src, writer *w, char *msg, size_t len) {
    const flat_src *f = src;
    const modattn_store_vectors *v = f->v;
    const size_t stride = modattn__flat_stride(f->c, v->dim), block = 1024;
    unsigned char *buf = modattn__malloc(block * stride, MODATTN_MEM_WORKSPACE);
    float *scales = f->c == MODATTN__FLAT_INT8 ? modattn__malloc((v->rows ? v->rows : 1) * sizeof(float), MODATTN_MEM_WORKSPACE) : NULL;
    int st = 0;
    if (!buf || (f->c == MODATTN__FLAT_INT8 && !scales)) {
        snprintf(msg, len, "out of memory for the codes");
        st = MODATTN_ENOMEM;
    }
    for (size_t g = 0; !st && g < v->nseg; g++) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        for (size_t r = 0; !st && r < sg->n; r += block) {
            const size_t n = sg->n - r < block ? sg->n - r : block;
            modattn__flat_encode(f->c, sg->data + r * v->ld, n, v->dim, v->ld, buf, scales ? scales + sg->row0 + r : NULL);
            if (put_bytes(w, buf, n * stride) != 0) st = MODATTN_EIO;
        }
    }
    if (!st && scales && put_bytes(w, scales, v->rows * sizeof(float)) != 0) st = MODATTN_EIO;
    modattn_free(buf);
    modattn_free(scales);
    return st;
}

#if MODATTN_HAVE_FAISS
static int emit_faiss(void *src, writer *w, char *msg, size_t len) {
    return modattn__faiss_write(src, put_bytes, w, msg, len);
}

/* FAISS's factory string for kind with resolved parameters. */
static void factory_for(modattn_ann_kind kind, const modattn_ann_params *p, char *buf, size_t len) {
    if (kind == MODATTN_ANN_HNSW) snprintf(buf, len, "HNSW%d,Flat", p->M);
    else if (kind == MODATTN_ANN_IVF_SQ8) snprintf(buf, len, "IVF%d,SQ8", p->nlist);
    else snprintf(buf, len, "IVF%d,PQ%dx%d", p->nlist, p->pq_m, p->pq_nbits);
}

typedef void (*progress_fn)(void *ud, const char *phase, size_t done, size_t total);

/* Adds rows [from, v->rows) of v to f, each segment's in one call: FAISS's HNSW inserts a call's
 * rows highest level first, and smaller calls make a worse graph (100k rows in calls of 16384:
 * recall@10 0.964 at efSearch 16, in one call 0.9915). Padded rows (ld > dim) are copied into one
 * contiguous block per segment. */
static int add_rows(modattn__faiss *f, const modattn_store_vectors *v, size_t from, int threads, progress_fn progress,
                    void *ud) {
    const size_t dim = v->dim, total = v->rows - from;
    int st = 0;
    size_t done = 0;
    if (progress) progress(ud, "add", 0, total);
    for (size_t g = 0; !st && g < v->nseg; g++) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        const size_t r = from > sg->row0 ? from - sg->row0 : 0;
        if (r >= sg->n) continue;
        const size_t n = sg->n - r;
        const float *x = sg->data + r * v->ld;
        float *buf = NULL;
        if (v->ld != dim) {
            if (!(buf = modattn__malloc(n * dim * sizeof(float), MODATTN_MEM_WORKSPACE))) return modattn__mem_last_status();
            for (size_t i = 0; i < n; i++) memcpy(buf + i * dim, x + i * v->ld, dim * sizeof(float));
            x = buf;
        }
        char msg[256] = "";
        if ((st = modattn__faiss_add(f, n, x, threads, msg, sizeof msg)))
            st = modattn__error(st, "adding rows to the ANN index: %s", msg);
        modattn_free(buf);
        done += n;
        if (progress) progress(ud, "add", done, total);
    }
    return st;
}

/* Training rows: at most 256 per centroid (what FAISS's k-means samples), evenly spaced over v's
 * rows (masked ones too: they were real vectors of this corpus), contiguous. */
static int train(modattn__faiss *f, const modattn_store_vectors *v, const modattn_ann_params *p, int threads) {
    size_t want = (size_t)p->nlist * 256;
    if (p->pq_nbits && ((size_t)256 << (p->pq_nbits > 8 ? p->pq_nbits - 8 : 0)) * 256 > want)
        want = (size_t)256 << p->pq_nbits;
    if (want > v->rows) want = v->rows;
    const size_t dim = v->dim;
    float *x = modattn__malloc(want * dim * sizeof(float), MODATTN_MEM_WORKSPACE);
    if (!x) return modattn__mem_last_status();
    for (size_t i = 0; i < want; i++) {
        const size_t row = (size_t)((double)i * (double)v->rows / (double)want);
        int64_t id;
        const float *r = ann_row_at(v, row, &id);
        memcpy(x + i * dim, r, dim * sizeof(float));
    }
    char msg[256] = "";
    int st = modattn__faiss_train(f, want, x, threads, msg, sizeof msg);
    if (st) st = modattn__error(st, "training the ANN index: %s", msg);
    modattn_free(x);
    return st;
}

#endif

static bool same_build(const ann_header *h, modattn_ann_kind kind, const modattn_ann_params *p) {
    return h->kind == (uint32_t)kind && h->M == p->M && h->ef_construction == p->ef_construction &&
           h->nlist == p->nlist && h->pq_m == p->pq_m && h->pq_nbits == p->pq_nbits;
}

int modattn_store_update_ann(modattn_store *s, modattn_ann_kind kind, const modattn_ann_params *p, bool remove,
                             const modattn_exec *exec,
                             void (*progress)(void *ud, const char *phase, size_t done, size_t total), void *ud,
                             modattn_ann_update *u) {
    modattn_ann_update dummy;
    if (!u) u = &dummy;
    memset(u, 0, sizeof *u);
    if (!s) return modattn__error(MODATTN_EINVAL, "modattn_store_update_ann: NULL store");
    char path[4200];
    int st = modattn__store_ann_file_path(s, path, sizeof path);
    if (st) return st;
    if (remove) {
        if (unlink(path) == 0) {
            u->action = MODATTN_ANN_ACTION_REMOVED;
            return 0;
        }
        if (errno == ENOENT) return 0;
        return modattn__error(MODATTN_EIO, "cannot remove the ANN index %s: %s", path, strerror(errno));
    }
    const bool present = access(path, F_OK) == 0;
    if (kind == MODATTN_ANN_NONE && !present) return 0;
    const double t0 = now_s();
    char model[128] = "", hash[17] = "";
    size_t mdim = 0;
    if ((st = modattn_store_get_model(s, model, sizeof model, hash, &mdim))) return st;
    ann_file old;
    char why[512] = "";
    memset(&old, 0, sizeof old);
    /* every checksum, a compact kind's codes too (a search does not check those): a damaged file
     * is built again, never kept as current */
    const int valid = present ? modattn__ann_map_file(path, &old, true, why, sizeof why) : 0;
    if (valid < 0) return valid;
    if (kind == MODATTN_ANN_NONE) {
        if (valid != 1)
            return modattn__error(MODATTN_EFORMAT,
                                 "%s cannot be updated: %s; `modattn index --ann KIND` builds it again, or `--ann none` "
                                 "removes it",
                                 path, why);
        kind = (modattn_ann_kind)old.h.kind;
    }
    if ((st = modattn_ann_kind_available(kind))) {
        modattn__ann_unmap_file(&old);
        return modattn__error_prefix(st, "%s %s", present ? "updating the ANN index" : "building the ANN index", path);
    }
#if !MODATTN_HAVE_FAISS
    (void)exec, (void)progress, (void)ud;
#endif
    modattn_ann_params want;
    memset(&want, 0, sizeof want);
    if (p) want = *p;
    else if (valid == 1 && old.h.kind == (uint32_t)kind) ann_params_of(&old.h, &want);

    modattn_store_vectors v;
    memset(&v, 0, sizeof v);
#if MODATTN_HAVE_FAISS
    modattn__faiss *f = NULL;
#endif
    if ((st = modattn__store_open_vectors(s, &v))) goto done;
    if (v.dim != mdim) {
        st = modattn__error(MODATTN_EFORMAT, "the store's vectors are of dimension %zu, its model's %zu", v.dim, mdim);
        goto done;
    }
    if (v.nseg > ANN_MAX_SEG) {
        st = modattn__error(MODATTN_ERANGE, "the vectors have %zu segments", v.nseg);
        goto done;
    }
    if (v.rows == 0) {
        st = modattn__error(MODATTN_ENOTFOUND, "the store has no vectors to build an ANN index from: index documents first");
        goto done;
    }
    modattn_ann_params r;
    /* an index there keeps its own training-time choices (nlist, nbits) while it is added to */
    if ((st = modattn__ann_resolve(kind, valid == 1 && old.h.kind == (uint32_t)kind && !p ? old.h.trained_rows : v.rows,
                                  v.dim, &want, &r)))
        goto done;
    ann_seg seg[ANN_MAX_SEG];
    modattn__ann_segments_of(&v, true, seg);
#if MODATTN_HAVE_FAISS
    const int threads = exec && exec->nthreads > 0 ? exec->nthreads : 1;
#endif
    ann_header h;
    memset(&h, 0, sizeof h);
    bool prefix = false;
    char reason[320] = "";
    if (valid != 1) {
        snprintf(reason, sizeof reason, "%s", present ? why : "there was none");
    } else if (!same_build(&old.h, kind, &r)) {
        snprintf(reason, sizeof reason, "it was %s, %s asked", modattn_ann_kind_name((modattn_ann_kind)old.h.kind),
                 modattn_ann_kind_name(kind));
        char a[160], b[160];
        modattn_ann_params op;
        ann_params_of(&old.h, &op);
        modattn_ann_params_format((modattn_ann_kind)old.h.kind, &op, a, sizeof a);
        modattn_ann_params_format(kind, &r, b, sizeof b);
        if (old.h.kind == (uint32_t)kind) snprintf(reason, sizeof reason, "its parameters were %s, now %s", a, b);
    } else if (strcmp(old.h.model_name, model) != 0 || strcmp(old.h.weights_hash, hash) != 0 || old.h.dim != v.dim) {
        snprintf(reason, sizeof reason, "it was built for another model");
    } else if (old.h.nseg > v.nseg) {
        snprintf(reason, sizeof reason, "the vector file was compacted");
    } else {
        prefix = true;
        for (uint32_t g = 0; g < old.h.nseg && prefix; g++)
            prefix = old.h.seg[g].n == seg[g].n && old.h.seg[g].ids_xxh3 == seg[g].ids_xxh3 &&
                     old.h.seg[g].data_xxh3 == seg[g].data_xxh3;
        if (!prefix) snprintf(reason, sizeof reason, "the vector file was compacted");
        else if ((kind == MODATTN_ANN_IVF_SQ8 || kind == MODATTN_ANN_IVF_PQ) && v.rows > 4 * old.h.trained_rows) {
            prefix = false;
            snprintf(reason, sizeof reason, "it was trained on %llu rows, there are %zu now: trained again",
                     (unsigned long long)old.h.trained_rows, v.rows);
        }
    }
    if (prefix) {
        h = old.h;
        /* search-time parameters given now replace the stored ones */
        if (p && p->ef_search) h.ef_search = p->ef_search;
        if (p && p->nprobe) h.nprobe = p->nprobe > h.nlist && h.nlist ? h.nlist : p->nprobe;
        if (p && p->rescore) h.rescore = p->rescore;
        const bool same_rows = old.h.nseg == v.nseg && old.h.rows == v.rows;
        if (same_rows) {
            u->action = MODATTN_ANN_ACTION_CURRENT;
            if (h.generation != v.generation || memcmp(&h, &old.h, sizeof h) != 0) {
                /* only the generation (a deletion: rows masked, none added) or search parameters */
                h.generation = v.generation;
                int fd = open(path, O_WRONLY | O_CLOEXEC);
                if (fd < 0 || write_header_at(fd, &h) != 0 || fsync(fd) != 0)
                    st = modattn__error(MODATTN_EIO, "cannot update the ANN index %s: %s", path, strerror(errno));
                if (fd >= 0) close(fd);
            }
            u->rows = v.rows;
            u->file_bytes = old.bytes;
            goto fill;
        }
        if (ann_is_flat(kind)) {
            modattn__ann_unmap_file(&old);
        } else {
#if MODATTN_HAVE_FAISS
            char msg[256] = "";
            if ((st = modattn__mem_account(MODATTN_MEM_INDEX, (int64_t)old.h.payload_bytes))) goto done;
            st = modattn__faiss_read((const unsigned char *)old.map + ANN_HEADER, old.h.payload_bytes, modattn__scan_best(), &f,
                                     msg, sizeof msg);
            modattn__mem_account(MODATTN_MEM_INDEX, -(int64_t)old.h.payload_bytes);
            if (st) {
                st = modattn__error(st, "reading the ANN index %s: %s", path, msg);
                goto done;
            }
            modattn__ann_unmap_file(&old);
            if ((st = add_rows(f, &v, (size_t)h.rows, threads, progress, ud))) goto done;
#endif
        }
        u->action = MODATTN_ANN_ACTION_ADDED;
        u->rows_added = v.rows - (size_t)h.rows;
    } else {
        modattn__ann_unmap_file(&old);
        memcpy(h.magic, ANN_MAGIC, 8);
        h.version = ANN_VERSION, h.header_bytes = ANN_HEADER, h.dim = (uint32_t)v.dim, h.kind = (uint32_t)kind;
        h.M = r.M, h.ef_construction = r.ef_construction, h.nlist = r.nlist, h.pq_m = r.pq_m, h.pq_nbits = r.pq_nbits;
        h.ef_search = r.ef_search, h.nprobe = r.nprobe, h.rescore = r.rescore;
        h.trained_rows = v.rows;
        snprintf(h.model_name, sizeof h.model_name, "%s", model);
        snprintf(h.weights_hash, sizeof h.weights_hash, "%s", hash);
        if (!ann_is_flat(kind)) {
#if MODATTN_HAVE_FAISS
            snprintf(h.faiss_version, sizeof h.faiss_version, "%s", modattn__faiss_version());
            char factory[96], msg[256] = "";
            factory_for(kind, &r, factory, sizeof factory);
            if ((st = modattn__faiss_create(factory, v.dim, r.ef_construction, modattn__scan_best(), &f, msg, sizeof msg))) {
                st = modattn__error(st, "creating the ANN index (%s): %s", factory, msg);
                goto done;
            }
            if (!modattn__faiss_is_trained(f)) {
                if (progress) progress(ud, "train", 0, 1);
                if ((st = train(f, &v, &r, threads))) goto done;
                if (progress) progress(ud, "train", 1, 1);
            }
            if ((st = add_rows(f, &v, 0, threads, progress, ud))) goto done;
#endif
        }
        u->action = MODATTN_ANN_ACTION_BUILT;
        snprintf(u->reason, sizeof u->reason, "%s", reason);
        u->rows_added = v.rows;
    }
    h.generation = v.generation;
    h.rows = v.rows;
    h.nseg = (uint32_t)v.nseg;
    memcpy(h.seg, seg, v.nseg * sizeof *seg);
    h.build_seconds = now_s() - t0;
    if (progress) progress(ud, "write", 0, 1);
    flat_src fs = {&v, ann_flat_code(h.kind)};
#if MODATTN_HAVE_FAISS
    st = ann_is_flat(h.kind) ? write_file(path, &h, emit_flat, &fs) : write_file(path, &h, emit_faiss, f);
#else
    st = write_file(path, &h, emit_flat, &fs);
#endif
    if (st) goto done;
    if (progress) progress(ud, "write", 1, 1);
    u->rows = v.rows;
    u->file_bytes = h.payload_bytes + ANN_HEADER;
fill:
    u->kind = (modattn_ann_kind)h.kind;
    ann_params_of(&h, &u->params);
    u->seconds = now_s() - t0;
done:
    modattn__ann_unmap_file(&old);
#if MODATTN_HAVE_FAISS
    modattn__faiss_free(f);
#endif
    modattn__store_vectors_free(&v);
    if (st) memset(u, 0, sizeof *u);
    return st;
}
