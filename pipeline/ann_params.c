/* pipeline/ann_params.c — the ANN index's kinds and parameters: names, parsing, formatting, and
 * the values a build resolves from the rows and dimension (modattn/ann.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ann.h"
#include "pipeline/ann_internal.h"

const char *modattn_ann_kind_name(modattn_ann_kind k) {
    switch (k) {
    case MODATTN_ANN_NONE: return "none";
    case MODATTN_ANN_HNSW: return "hnsw";
    case MODATTN_ANN_IVF_SQ8: return "ivf-sq8";
    case MODATTN_ANN_IVF_PQ: return "ivf-pq";
    case MODATTN_ANN_F16: return "f16";
    case MODATTN_ANN_INT8: return "int8";
    case MODATTN_ANN_BINARY: return "binary";
    }
    return "unknown";
}

int modattn_ann_kind_parse(const char *name, modattn_ann_kind *out) {
    static const modattn_ann_kind all[] = {MODATTN_ANN_NONE, MODATTN_ANN_HNSW, MODATTN_ANN_IVF_SQ8, MODATTN_ANN_IVF_PQ,
                                           MODATTN_ANN_F16,  MODATTN_ANN_INT8, MODATTN_ANN_BINARY};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, modattn_ann_kind_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return modattn__error(MODATTN_EINVAL, "unknown ANN index kind '%s' (hnsw, ivf-sq8, ivf-pq, f16, int8, binary or none)",
                         name ? name : "(null)");
}

bool modattn__ann_kind_needs_faiss(modattn_ann_kind k) {
    return k == MODATTN_ANN_HNSW || k == MODATTN_ANN_IVF_SQ8 || k == MODATTN_ANN_IVF_PQ;
}

int modattn_ann_kind_available(modattn_ann_kind k) {
    return modattn__ann_kind_needs_faiss(k) ? modattn_ann_available() : 0;
}

int modattn_ann_available(void) {
#if MODATTN_HAVE_FAISS
    return 0;
#else
    return modattn__error(MODATTN_EUNSUPPORTED,
                         "this build of modattn has no FAISS: install it (Debian: apt-get install libfaiss-dev, "
                         "or `make deps`) and build again");
#endif
}

const char *modattn_ann_faiss_version(void) {
#if MODATTN_HAVE_FAISS
    return modattn__faiss_version();
#else
    return NULL;
#endif
}

typedef struct param_def {
    const char *name, *alias;
    size_t offset;
    long lo, hi;
    const char *what;
} param_def;
static const param_def PARAMS[] = {
    {"M", NULL, offsetof(modattn_ann_params, M), 4, 128, "hnsw: links per node"},
    {"efConstruction", NULL, offsetof(modattn_ann_params, ef_construction), 8, 2048, "hnsw: the build's beam"},
    {"nlist", NULL, offsetof(modattn_ann_params, nlist), 1, 65536, "ivf: cells"},
    {"m", "pq_m", offsetof(modattn_ann_params, pq_m), 1, 4096, "ivf-pq: sub-vectors"},
    {"nbits", "pq_nbits", offsetof(modattn_ann_params, pq_nbits), 1, 12, "ivf-pq: bits per code"},
    {"efSearch", NULL, offsetof(modattn_ann_params, ef_search), 1, 32768, "hnsw: the search's beam"},
    {"nprobe", NULL, offsetof(modattn_ann_params, nprobe), 1, 65536, "ivf: cells visited"},
    {"rescore", NULL, offsetof(modattn_ann_params, rescore), 1, 1000000, "candidates scored again exactly"},
};
#define NPARAMS (sizeof PARAMS / sizeof PARAMS[0])

int modattn_ann_params_parse(const char *text, modattn_ann_params *p) {
    if (!text || !p) return modattn__error(MODATTN_EINVAL, "ANN parameters: NULL argument");
    const char *s = text;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (len == 0) {
            s += end ? 1 : 0;
            if (!end) break;
            continue;
        }
        if (!eq)
            return modattn__error(MODATTN_EINVAL, "ANN parameters: '%.*s' is not NAME=VALUE (e.g. M=32,efSearch=64)",
                                 (int)(len > 64 ? 64 : len), s);
        const size_t nl = (size_t)(eq - s);
        const param_def *d = NULL;
        for (size_t i = 0; i < NPARAMS && !d; i++)
            if ((strlen(PARAMS[i].name) == nl && memcmp(PARAMS[i].name, s, nl) == 0) ||
                (PARAMS[i].alias && strlen(PARAMS[i].alias) == nl && memcmp(PARAMS[i].alias, s, nl) == 0))
                d = &PARAMS[i];
        if (!d)
            return modattn__error(MODATTN_EINVAL,
                                 "ANN parameters: unknown parameter '%.*s' (M, efConstruction, nlist, m, nbits, "
                                 "efSearch, nprobe, rescore)",
                                 (int)(nl > 64 ? 64 : nl), s);
        char num[32];
        const size_t vl = len - nl - 1;
        if (vl == 0 || vl >= sizeof num)
            return modattn__error(MODATTN_EINVAL, "ANN parameters: %s needs a whole number in %ld..%ld (%s)", d->name,
                                 d->lo, d->hi, d->what);
        memcpy(num, eq + 1, vl);
        num[vl] = '\0';
        char *e = NULL;
        errno = 0;
        long v = strtol(num, &e, 10);
        if (errno || !e || *e || e == num || v < d->lo || v > d->hi)
            return modattn__error(MODATTN_EINVAL, "ANN parameters: %s=%s is out of range: a whole number in %ld..%ld (%s)",
                                 d->name, num, d->lo, d->hi, d->what);
        *(int *)((char *)p + d->offset) = (int)v;
        if (!end) break;
        s = end + 1;
    }
    return 0;
}

static void append_param(char *buf, size_t len, size_t *at, const char *name, int v) {
    if (v <= 0 || *at >= len) return;
    int w = snprintf(buf + *at, len - *at, "%s%s=%d", *at ? "," : "", name, v);
    if (w > 0) *at += (size_t)w;
}

void modattn_ann_params_format(modattn_ann_kind kind, const modattn_ann_params *p, char *buf, size_t len) {
    if (!buf || !len) return;
    buf[0] = '\0';
    if (!p) return;
    size_t at = 0;
    if (kind == MODATTN_ANN_HNSW) {
        append_param(buf, len, &at, "M", p->M);
        append_param(buf, len, &at, "efConstruction", p->ef_construction);
        append_param(buf, len, &at, "efSearch", p->ef_search);
    } else if (kind == MODATTN_ANN_IVF_SQ8 || kind == MODATTN_ANN_IVF_PQ) {
        append_param(buf, len, &at, "nlist", p->nlist);
        if (kind == MODATTN_ANN_IVF_PQ) {
            append_param(buf, len, &at, "m", p->pq_m);
            append_param(buf, len, &at, "nbits", p->pq_nbits);
        }
        append_param(buf, len, &at, "nprobe", p->nprobe);
    }
    append_param(buf, len, &at, "rescore", p->rescore);
}

/* FAISS's k-means wants 39 training rows per centroid at least (fewer: it warns on stderr). */
#define ROWS_PER_CENTROID 39

int modattn__ann_resolve(modattn_ann_kind kind, size_t rows, size_t dim, const modattn_ann_params *p,
                        modattn_ann_params *out) {
    modattn_ann_params r;
    memset(&r, 0, sizeof r);
    if (p) r = *p;
    if (kind == MODATTN_ANN_NONE) {
        *out = r;
        return 0;
    }
    if (rows == 0) return modattn__error(MODATTN_EINVAL, "an ANN index needs vectors: the store has none");
    if (ann_is_flat(kind)) {
        const int rescore = r.rescore;
        memset(&r, 0, sizeof r);
        r.rescore = rescore; /* 0: by k at each search (fetch_for) */
    } else if (kind == MODATTN_ANN_HNSW) {
        if (!r.M) r.M = 32;
        if (!r.ef_construction) r.ef_construction = 40;
        if (!r.ef_search) r.ef_search = 64;
        r.nlist = r.pq_m = r.pq_nbits = r.nprobe = 0;
    } else {
        const size_t most = rows / ROWS_PER_CENTROID ? rows / ROWS_PER_CENTROID : 1;
        if (r.nlist && (size_t)r.nlist > most)
            return modattn__error(MODATTN_EINVAL,
                                 "ANN parameters: nlist=%d needs %d x %d rows to train; the store has %zu (nlist "
                                 "at most %zu)",
                                 r.nlist, ROWS_PER_CENTROID, r.nlist, rows, most);
        if (!r.nlist) {
            size_t n = (size_t)lround(sqrt((double)rows));
            if (n > most) n = most;
            if (n > 65536) n = 65536;
            r.nlist = (int)(n ? n : 1);
        }
        if (!r.nprobe) r.nprobe = r.nlist / 16 > 8 ? r.nlist / 16 : 8;
        if (r.nprobe > r.nlist) r.nprobe = r.nlist;
        if (kind == MODATTN_ANN_IVF_PQ) {
            if (!r.pq_m) {
                r.pq_m = (int)(dim / 8 ? dim / 8 : 1);
                while (dim % (size_t)r.pq_m) r.pq_m--;
            }
            if (dim % (size_t)r.pq_m)
                return modattn__error(MODATTN_EINVAL, "ANN parameters: m=%d does not divide the dimension %zu", r.pq_m,
                                     dim);
            if (!r.pq_nbits) {
                r.pq_nbits = 8;
                while (r.pq_nbits > 1 && ((size_t)ROWS_PER_CENTROID << r.pq_nbits) > rows) r.pq_nbits--;
            }
            if (((size_t)ROWS_PER_CENTROID << r.pq_nbits) > rows && r.pq_nbits > 1)
                return modattn__error(MODATTN_EINVAL,
                                     "ANN parameters: nbits=%d needs %d x %d rows to train; the store has %zu",
                                     r.pq_nbits, ROWS_PER_CENTROID, 1 << r.pq_nbits, rows);
        } else {
            r.pq_m = r.pq_nbits = 0;
        }
        r.M = r.ef_construction = r.ef_search = 0;
    }
    *out = r;
    return 0;
}
