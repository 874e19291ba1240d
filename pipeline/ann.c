/* pipeline/ann.c — the store's ANN index (PATH.ann; layout and rules: modattn/ann.h): parameters,
 * building and updating from the vector file's rows, opening with every check, and searching with
 * exact re-scoring. FAISS itself is behind pipeline/ann_faiss.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "modattn/ann.h"
#include "modattn/core.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/ann_flat.h"
#include "pipeline/pipeline_internal.h"
#if MODATTN_HAVE_FAISS
#include "pipeline/ann_faiss.h"
#include "pipeline/ann_hnsw.h"
#include "core/env.h"
#endif

#define ANN_MAGIC "MODATTNA"
#define ANN_VERSION 1u
#define ANN_HEADER 4096u
#define ANN_MAX_SEG MODATTN_VEC_MAX_SEGMENTS

typedef struct ann_seg {
    uint64_t n, ids_xxh3, data_xxh3;
} ann_seg;

/* The header as it lies at offset 0 (fixed-width fields, no padding holes). */
typedef struct ann_header {
    char magic[8];
    uint32_t version, header_bytes, dim, kind;
    int32_t M, ef_construction, nlist, pq_m, pq_nbits, ef_search, nprobe, rescore;
    uint32_t nseg, reserved;
    uint64_t generation, rows, trained_rows, payload_bytes, payload_xxh3;
    double build_seconds;
    char model_name[128];
    char weights_hash[24];
    char faiss_version[16];
    ann_seg seg[ANN_MAX_SEG];
    uint64_t header_xxh3; /* of the 4096 header bytes with this field zero */
} ann_header;
_Static_assert(sizeof(ann_header) <= ANN_HEADER, "the ANN header fits its page");

struct modattn_ann {
#if MODATTN_HAVE_FAISS
    modattn__faiss *f;
    modattn__hnsw_view g;            /* HNSW: the graph our walk searches (ann_hnsw.c) */
    bool walk;
    modattn__dot1_fn dot;
    modattn__hnsw_scratch *scratch;  /* one per thread of the last exec */
    int nscratch;
#endif
    ann_header h;
    int64_t accounted;
    void *map;                   /* a compact kind's file, mapped: its codes are searched in place */
    size_t map_bytes;
};

/* ---------------------------------------------------------------- kinds and parameters */

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
    return modattn_error(MODATTN_EINVAL, "unknown ANN index kind '%s' (hnsw, ivf-sq8, ivf-pq, f16, int8, binary or none)",
                         name ? name : "(null)");
}

bool modattn_ann_kind_needs_faiss(modattn_ann_kind k) {
    return k == MODATTN_ANN_HNSW || k == MODATTN_ANN_IVF_SQ8 || k == MODATTN_ANN_IVF_PQ;
}

static bool is_flat(uint32_t kind) {
    return kind == MODATTN_ANN_F16 || kind == MODATTN_ANN_INT8 || kind == MODATTN_ANN_BINARY;
}

static modattn__flat_code flat_code(uint32_t kind) {
    return kind == MODATTN_ANN_F16 ? MODATTN__FLAT_F16 : kind == MODATTN_ANN_INT8 ? MODATTN__FLAT_INT8 : MODATTN__FLAT_BINARY;
}

int modattn_ann_kind_available(modattn_ann_kind k) {
    return modattn_ann_kind_needs_faiss(k) ? modattn_ann_available() : 0;
}

int modattn_ann_available(void) {
#if MODATTN_HAVE_FAISS
    return 0;
#else
    return modattn_error(MODATTN_EUNSUPPORTED,
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
    if (!text || !p) return modattn_error(MODATTN_EINVAL, "ANN parameters: NULL argument");
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
            return modattn_error(MODATTN_EINVAL, "ANN parameters: '%.*s' is not NAME=VALUE (e.g. M=32,efSearch=64)",
                                 (int)(len > 64 ? 64 : len), s);
        const size_t nl = (size_t)(eq - s);
        const param_def *d = NULL;
        for (size_t i = 0; i < NPARAMS && !d; i++)
            if ((strlen(PARAMS[i].name) == nl && memcmp(PARAMS[i].name, s, nl) == 0) ||
                (PARAMS[i].alias && strlen(PARAMS[i].alias) == nl && memcmp(PARAMS[i].alias, s, nl) == 0))
                d = &PARAMS[i];
        if (!d)
            return modattn_error(MODATTN_EINVAL,
                                 "ANN parameters: unknown parameter '%.*s' (M, efConstruction, nlist, m, nbits, "
                                 "efSearch, nprobe, rescore)",
                                 (int)(nl > 64 ? 64 : nl), s);
        char num[32];
        const size_t vl = len - nl - 1;
        if (vl == 0 || vl >= sizeof num)
            return modattn_error(MODATTN_EINVAL, "ANN parameters: %s needs a whole number in %ld..%ld (%s)", d->name,
                                 d->lo, d->hi, d->what);
        memcpy(num, eq + 1, vl);
        num[vl] = '\0';
        char *e = NULL;
        errno = 0;
        long v = strtol(num, &e, 10);
        if (errno || !e || *e || e == num || v < d->lo || v > d->hi)
            return modattn_error(MODATTN_EINVAL, "ANN parameters: %s=%s is out of range: a whole number in %ld..%ld (%s)",
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

int modattn_ann_resolve(modattn_ann_kind kind, size_t rows, size_t dim, const modattn_ann_params *p,
                        modattn_ann_params *out) {
    modattn_ann_params r;
    memset(&r, 0, sizeof r);
    if (p) r = *p;
    if (kind == MODATTN_ANN_NONE) {
        *out = r;
        return 0;
    }
    if (rows == 0) return modattn_error(MODATTN_EINVAL, "an ANN index needs vectors: the store has none");
    if (is_flat(kind)) {
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
            return modattn_error(MODATTN_EINVAL,
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
                return modattn_error(MODATTN_EINVAL, "ANN parameters: m=%d does not divide the dimension %zu", r.pq_m,
                                     dim);
            if (!r.pq_nbits) {
                r.pq_nbits = 8;
                while (r.pq_nbits > 1 && ((size_t)ROWS_PER_CENTROID << r.pq_nbits) > rows) r.pq_nbits--;
            }
            if (((size_t)ROWS_PER_CENTROID << r.pq_nbits) > rows && r.pq_nbits > 1)
                return modattn_error(MODATTN_EINVAL,
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

/* How many candidates a query of k results takes from the index. */
static size_t fetch_for(const ann_header *h, const modattn_ann_params *search, size_t k) {
    size_t r = search && search->rescore > 0 ? (size_t)search->rescore : h->rescore > 0 ? (size_t)h->rescore : 0;
    if (!r) {
        if (h->kind == MODATTN_ANN_HNSW || h->kind == MODATTN_ANN_F16) r = 2 * k > k + 16 ? 2 * k : k + 16;
        else if (h->kind == MODATTN_ANN_INT8) r = 4 * k > k + 32 ? 4 * k : k + 32;
        else if (h->kind == MODATTN_ANN_BINARY) r = 100 * k > 1000 ? 100 * k : 1000;
        else r = 8 * k > 100 ? 8 * k : 100;
    }
    return r < k ? k : r;
}

/* ---------------------------------------------------------------- the file */

int modattn_store_ann_file_path(const modattn_store *s, char *buf, size_t len) {
    int w = snprintf(buf, len, "%s.ann", modattn_store_path(s));
    if (w < 0 || (size_t)w >= len) return modattn_error(MODATTN_EINVAL, "ANN index path too long");
    return 0;
}

static uint64_t header_hash(const unsigned char *page) {
    unsigned char tmp[ANN_HEADER];
    memcpy(tmp, page, ANN_HEADER);
    memset(tmp + offsetof(ann_header, header_xxh3), 0, sizeof(uint64_t));
    return XXH3_64bits(tmp, ANN_HEADER);
}

static void seal(const ann_header *h, unsigned char *page) {
    ann_header t = *h;
    t.header_xxh3 = 0;
    memset(page, 0, ANN_HEADER);
    memcpy(page, &t, sizeof t);
    t.header_xxh3 = header_hash(page);
    memcpy(page, &t, sizeof t);
}

static void params_of(const ann_header *h, modattn_ann_params *p) {
    *p = (modattn_ann_params){h->M, h->ef_construction, h->nlist, h->pq_m, h->pq_nbits, h->ef_search, h->nprobe,
                              h->rescore};
}

/* The header's own consistency and its fit to a file of size bytes: "" when it holds. */
static void check_header(const unsigned char *page, uint64_t size, ann_header *h, char *bad, size_t len) {
    bad[0] = '\0';
    if (size < ANN_HEADER) {
        snprintf(bad, len, "it is %llu bytes, shorter than its header", (unsigned long long)size);
        return;
    }
    memcpy(h, page, sizeof *h);
    if (memcmp(h->magic, ANN_MAGIC, 8) != 0) snprintf(bad, len, "it is not a modattn ANN index");
    else if (h->version != ANN_VERSION) snprintf(bad, len, "it is of format version %u, this build reads %u", h->version, ANN_VERSION);
    else if (h->header_xxh3 != header_hash(page)) snprintf(bad, len, "its header's checksum does not match (damaged)");
    else if (h->header_bytes != ANN_HEADER || h->nseg > ANN_MAX_SEG || h->kind < MODATTN_ANN_HNSW ||
             h->kind > MODATTN_ANN_BINARY || h->dim == 0 || h->dim > 65536 || memchr(h->model_name, 0, sizeof h->model_name) == NULL ||
             memchr(h->weights_hash, 0, sizeof h->weights_hash) == NULL)
        snprintf(bad, len, "its header is malformed");
    else if (h->payload_bytes != size - ANN_HEADER)
        snprintf(bad, len, "it is %llu bytes, its header says %llu (truncated, or a write was cut short)",
                 (unsigned long long)size, (unsigned long long)(h->payload_bytes + ANN_HEADER));
    else {
        uint64_t total = 0;
        for (uint32_t g = 0; g < h->nseg; g++) total += h->seg[g].n;
        if (total != h->rows) snprintf(bad, len, "its header is malformed (segments)");
        else if (is_flat(h->kind) && (h->rows > ((uint64_t)1 << 40) ||
                                      h->payload_bytes != modattn__flat_bytes(flat_code(h->kind), h->dim, h->rows)))
            snprintf(bad, len, "its header is malformed (%llu bytes of codes for %llu rows)",
                     (unsigned long long)h->payload_bytes, (unsigned long long)h->rows);
    }
}

/* The identity of v's segments: rows and XXH3 of their chunk ids (and with data, of their rows). */
static void segments_of(const modattn_store_vectors *v, bool data, ann_seg *seg) {
    for (size_t g = 0; g < v->nseg && g < ANN_MAX_SEG; g++) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        seg[g].n = sg->n;
        seg[g].ids_xxh3 = XXH3_64bits(sg->chunk_ids, sg->n * sizeof(int64_t));
        seg[g].data_xxh3 = 0;
        if (data) {
            XXH3_state_t *st = XXH3_createState();
            if (st) {
                XXH3_64bits_reset(st);
                for (size_t r = 0; r < sg->n; r++) XXH3_64bits_update(st, sg->data + r * v->ld, v->dim * sizeof(float));
                seg[g].data_xxh3 = XXH3_64bits_digest(st);
                XXH3_freeState(st);
            }
        }
    }
}

typedef struct ann_file {
    void *map;
    size_t bytes;
    ann_header h;
} ann_file;

/* Maps PATH.ann and checks it whole (header, size, payload checksum; a compact kind's payload
 * only with `payload`): 1 valid, 0 missing (why "") or not valid (why), < 0 an error. */
static int map_file(const char *path, ann_file *f, bool payload, char *why, size_t len) {
    memset(f, 0, sizeof *f);
    why[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        snprintf(why, len, "cannot open %s: %s", path, strerror(errno));
        return 0;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(why, len, "%s is not a regular file", path);
        close(fd);
        return 0;
    }
    if ((uint64_t)sb.st_size < ANN_HEADER) {
        snprintf(why, len, "%s is %lld bytes, shorter than its header (truncated)", path, (long long)sb.st_size);
        close(fd);
        return 0;
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(why, len, "cannot map %s: %s", path, strerror(errno));
        return 0;
    }
    char bad[256];
    check_header(map, (uint64_t)sb.st_size, &f->h, bad, sizeof bad);
    /* a compact kind's codes are not checksummed at each open (that would cost a scan, as the
     * vector file's rows are not): they only choose candidates, whose scores are exact */
    if (!bad[0] && (!is_flat(f->h.kind) || payload) &&
        XXH3_64bits((const unsigned char *)map + ANN_HEADER, f->h.payload_bytes) != f->h.payload_xxh3)
        snprintf(bad, sizeof bad, "its index bytes do not match their checksum (damaged)");
    if (bad[0]) {
        snprintf(why, len, "%s: %s", path, bad);
        munmap(map, (size_t)sb.st_size);
        return 0;
    }
    f->map = map;
    f->bytes = (size_t)sb.st_size;
    return 1;
}

static void unmap_file(ann_file *f) {
    if (f->map) munmap(f->map, f->bytes);
    f->map = NULL;
}

/* Whether the header is for exactly the vectors v of the store's model: "" when it is. */
static void check_fit(const ann_header *h, const modattn_store_vectors *v, const ann_seg *seg, const char *model,
                      const char *hash, char *why, size_t len) {
    why[0] = '\0';
    if (strcmp(h->model_name, model) != 0 || strcmp(h->weights_hash, hash) != 0)
        snprintf(why, len, "it was built for the model %s (%s), the store's is %s (%s)", h->model_name, h->weights_hash,
                 model, hash);
    else if (h->dim != v->dim) snprintf(why, len, "it is of dimension %u, the vectors of %zu", h->dim, v->dim);
    else if (h->generation != v->generation)
        snprintf(why, len, "it is of the store's generation %llu, the store is at %llu (`modattn index` updates it)",
                 (unsigned long long)h->generation, (unsigned long long)v->generation);
    else if (h->rows != v->rows || h->nseg != v->nseg)
        snprintf(why, len, "it covers %llu rows in %u segments, the vectors are %zu rows in %zu", (unsigned long long)h->rows,
                 h->nseg, v->rows, v->nseg);
    else
        for (uint32_t g = 0; g < h->nseg; g++)
            if (h->seg[g].n != seg[g].n || h->seg[g].ids_xxh3 != seg[g].ids_xxh3) {
                snprintf(why, len, "its rows are not the vector file's (segment %u differs)", g + 1);
                break;
            }
}

/* ---------------------------------------------------------------- opening and searching */

int modattn_ann_open(modattn_store *s, const modattn_store_vectors *v, modattn_ann **out, char *why, size_t len) {
    if (!out || !why || !len) return modattn_error(MODATTN_EINVAL, "modattn_ann_open: NULL argument");
    *out = NULL;
    why[0] = '\0';
    if (!s || !v) return modattn_error(MODATTN_EINVAL, "modattn_ann_open: NULL argument");
    char path[4200];
    int st = modattn_store_ann_file_path(s, path, sizeof path);
    if (st) return st;
    if (access(path, F_OK) != 0) return 0;
    if (v->nseg > ANN_MAX_SEG) {
        snprintf(why, len, "the vectors have too many segments");
        return 0;
    }
    char model[128] = "", hash[17] = "";
    size_t dim = 0;
    if ((st = modattn_store_get_model(s, model, sizeof model, hash, &dim))) return st;
    ann_file f;
    char bad[512];
    if (map_file(path, &f, false, bad, sizeof bad) != 1) {
        snprintf(why, len, "%s", bad);
        return 0;
    }
    ann_seg seg[ANN_MAX_SEG];
    segments_of(v, false, seg);
    check_fit(&f.h, v, seg, model, hash, bad, sizeof bad);
    if (bad[0]) {
        snprintf(why, len, "%s: %s", path, bad);
        unmap_file(&f);
        return 0;
    }
    modattn_ann *a = modattn_calloc(1, sizeof *a, MODATTN_MEM_INDEX);
    if (!a) {
        unmap_file(&f);
        return modattn_mem_last_status();
    }
    a->h = f.h;
    if (is_flat(f.h.kind)) {
        /* searched in place: the mapping is the page cache's, as the vector file's is */
        a->map = f.map;
        a->map_bytes = f.bytes;
        *out = a;
        return 1;
    }
#if !MODATTN_HAVE_FAISS
    unmap_file(&f);
    modattn_free(a);
    snprintf(why, len, "%s is a %s index but this build has no FAISS (apt-get install libfaiss-dev, build again)", path,
             modattn_ann_kind_name((modattn_ann_kind)f.h.kind));
    return 0;
#else
    /* FAISS allocates with new: its bytes are counted (and budgeted) here as what they are */
    if ((st = modattn_mem_account(MODATTN_MEM_INDEX, (int64_t)f.h.payload_bytes))) {
        unmap_file(&f);
        modattn_free(a);
        return modattn_error(st, "the ANN index %s (%llu bytes) is over the memory budget", path,
                             (unsigned long long)f.h.payload_bytes);
    }
    a->accounted = (int64_t)f.h.payload_bytes;
    char msg[256] = "";
    st = modattn__faiss_read((const unsigned char *)f.map + ANN_HEADER, f.h.payload_bytes, modattn__scan_best(), &a->f, msg,
                            sizeof msg);
    unmap_file(&f);
    if (!st && (modattn__faiss_ntotal(a->f) != f.h.rows || !modattn__faiss_is_trained(a->f))) {
        snprintf(msg, sizeof msg, "it holds %zu rows, its header says %llu", modattn__faiss_ntotal(a->f),
                 (unsigned long long)f.h.rows);
        st = MODATTN_EFORMAT;
    }
    if (st == MODATTN_ENOMEM) {
        modattn_ann_close(a);
        return modattn_error(st, "reading the ANN index %s: %s", path, msg);
    }
    if (!st && modattn__faiss_hnsw_view(a->f, &a->g)) {
        /* a graph that is not whole would send the walk outside its arrays: not used */
        modattn__hnsw_check(&a->g, msg, sizeof msg);
        if (msg[0]) st = MODATTN_EFORMAT;
        /* MODATTN_ANN_FAISS_SEARCH=1: FAISS's own search instead of our walk (comparisons) */
        a->walk = !st && !modattn__env_bool("MODATTN_ANN_FAISS_SEARCH", false);
        a->dot = modattn__dot1_best();
    }
    if (st) {
        snprintf(why, len, "%s: %s", path, msg);
        modattn_ann_close(a);
        return 0;
    }
    *out = a;
    return 1;
#endif
}

int modattn_ann_peek(modattn_store *s, const modattn_store_vectors *v, uint64_t *file_bytes, char *why, size_t len) {
    if (!why || !len) return modattn_error(MODATTN_EINVAL, "modattn_ann_peek: NULL argument");
    why[0] = '\0';
    if (file_bytes) *file_bytes = 0;
    if (!s || !v) return modattn_error(MODATTN_EINVAL, "modattn_ann_peek: NULL argument");
    char path[4200];
    int st = modattn_store_ann_file_path(s, path, sizeof path);
    if (st) return st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) snprintf(why, len, "cannot open %s: %s", path, strerror(errno));
        return 0;
    }
    struct stat sb;
    unsigned char *page = malloc(ANN_HEADER);
    ssize_t got = page && fstat(fd, &sb) == 0 ? pread(fd, page, ANN_HEADER, 0) : -1;
    close(fd);
    if (got != (ssize_t)ANN_HEADER) {
        free(page);
        snprintf(why, len, "%s: %s", path, got < 0 ? "cannot be read" : "shorter than its header (truncated)");
        return 0;
    }
    ann_header h;
    char bad[256];
    check_header(page, (uint64_t)sb.st_size, &h, bad, sizeof bad);
    free(page);
    if (!bad[0]) {
        char model[128] = "", hash[17] = "";
        size_t dim = 0;
        if ((st = modattn_store_get_model(s, model, sizeof model, hash, &dim))) return st;
        ann_seg seg[ANN_MAX_SEG];
        if (v->nseg > ANN_MAX_SEG) snprintf(bad, sizeof bad, "the vectors have too many segments");
        else {
            segments_of(v, false, seg);
            check_fit(&h, v, seg, model, hash, bad, sizeof bad);
        }
    }
    if (bad[0]) {
        snprintf(why, len, "%s: %s", path, bad);
        return 0;
    }
    /* a compact kind is searched in place: opening it reads its header only */
    if (file_bytes) *file_bytes = is_flat(h.kind) ? ANN_HEADER : (uint64_t)sb.st_size;
    return 1;
}

void modattn_ann_close(modattn_ann *a) {
    if (!a) return;
#if MODATTN_HAVE_FAISS
    modattn__faiss_free(a->f);
    for (int t = 0; t < a->nscratch; t++) modattn__hnsw_scratch_free(&a->scratch[t]);
    modattn_free(a->scratch);
#endif
    if (a->accounted) modattn_mem_account(MODATTN_MEM_INDEX, -a->accounted);
    if (a->map) munmap(a->map, a->map_bytes);
    modattn_free(a);
}

modattn_ann_kind modattn_ann_get_kind(const modattn_ann *a) { return a ? (modattn_ann_kind)a->h.kind : MODATTN_ANN_NONE; }
void modattn_ann_get_params(const modattn_ann *a, modattn_ann_params *out) {
    if (a && out) params_of(&a->h, out);
}
size_t modattn_ann_rows(const modattn_ann *a) { return a ? (size_t)a->h.rows : 0; }
uint64_t modattn_ann_file_bytes(const modattn_ann *a) { return a ? a->h.payload_bytes + ANN_HEADER : 0; }

/* row number -> its segment's row pointer and chunk id (NULL past the end) */
static const float *row_at(const modattn_store_vectors *v, size_t row, int64_t *id) {
    for (size_t g = 0; g < v->nseg; g++) {
        const modattn_store_vector_segment *sg = &v->seg[g];
        if (row >= sg->row0 && row < sg->row0 + sg->n) {
            *id = sg->chunk_ids[row - sg->row0];
            return sg->data + (row - sg->row0) * v->ld;
        }
    }
    return NULL;
}

typedef struct rescored {
    float score;
    int64_t id;
} rescored;
static int rescored_cmp(const void *a, const void *b) {
    const rescored *x = a, *y = b;
    /* NaN last, then score descending, then chunk id ascending (the exact scan's order) */
    const bool xn = x->score != x->score, yn = y->score != y->score;
    if (xn != yn) return xn ? 1 : -1;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Bytes of candidate heaps a compact kind's batch holds at once (threads x queries x candidates x
 * 16): a long batch goes through in slices of queries that fit. */
#define FLAT_HEAP_BYTES ((size_t)64 << 20)

/* A compact kind: each query's best rows by the codes, scored again exactly (the scan's kernel,
 * so that scores are its own bit for bit), the k best kept in the exact scan's order. */
static int flat_batch(const modattn_ann *a, const modattn_store_vectors *v, const float *queries, size_t nq, size_t k,
                      const modattn_ann_params *search, const modattn_exec *exec, int64_t *ids, float *scores,
                      size_t *nout) {
    const size_t want = k > v->n ? v->n : k, dim = v->dim;
    size_t fetch = fetch_for(&a->h, search, k);
    if (fetch > v->rows) fetch = v->rows;
    const size_t threads = exec && exec->parallel_for && exec->nthreads > 1 ? (size_t)exec->nthreads : 1;
    const char *hb = getenv("MODATTN_TEST_FLAT_HEAP_BYTES"); /* tests: small slices */
    size_t slice = (hb ? strtoull(hb, NULL, 10) : FLAT_HEAP_BYTES) / (threads + 1) / (fetch * sizeof(modattn_hit));
    if (slice < 1) slice = 1;
    if (slice > nq) slice = nq;
    if (fetch > SIZE_MAX / sizeof(modattn_hit) / slice)
        return modattn_error(MODATTN_ERANGE, "ann_topk_batch: %zu candidates per query is too many", fetch);
    const modattn__flat_code c = flat_code(a->h.kind);
    const unsigned char *codes = (const unsigned char *)a->map + ANN_HEADER;
    const float *scales =
        c == MODATTN__FLAT_INT8 ? (const float *)(codes + a->h.rows * modattn__flat_stride(c, dim)) : NULL;
    modattn_hit *cand = modattn_malloc(slice * fetch * sizeof *cand, MODATTN_MEM_WORKSPACE);
    size_t *nc = modattn_malloc(slice * sizeof *nc, MODATTN_MEM_WORKSPACE);
    rescored *rs = modattn_malloc(fetch * sizeof *rs, MODATTN_MEM_WORKSPACE);
    int st = 0;
    if (!cand || !nc || !rs) st = modattn_mem_last_status();
    for (size_t q = 0; !st && q < nq; q++) {
        const size_t q0 = q / slice * slice; /* the slice of queries q is in */
        if (q == q0) {
            const size_t m = nq - q0 < slice ? nq - q0 : slice;
            if ((st = modattn__flat_candidates(c, codes, scales, v->rows, dim, v->mask, queries + q0 * dim, m, fetch,
                                               exec, cand, nc)))
                break;
        }
        const size_t qi = q - q0;
        size_t n = 0;
        for (size_t j = 0; j < nc[qi]; j++) {
            int64_t id = 0;
            const float *x = row_at(v, cand[qi * fetch + j].row, &id);
            if (!x) continue;
            float sc = 0;
            if ((st = modattn_scan_scores(x, 1, dim, v->ld, queries + q * dim, MODATTN_SCAN_AUTO, &sc))) break;
            rs[n++] = (rescored){sc, id};
        }
        qsort(rs, n, sizeof *rs, rescored_cmp);
        nout[q] = n < want ? n : want;
        for (size_t j = 0; j < nout[q]; j++) ids[q * k + j] = rs[j].id, scores[q * k + j] = rs[j].score;
    }
    modattn_free(cand);
    modattn_free(nc);
    modattn_free(rs);
    if (st)
        for (size_t q = 0; q < nq; q++) nout[q] = 0;
    return st;
}

#if MODATTN_HAVE_FAISS
typedef struct walk_job {
    modattn_ann *a;
    const modattn_store_vectors *v;
    const float *queries;
    size_t k, ef;
    int64_t *ids;
    float *scores;
    size_t *nout;
} walk_job;

static void walk_one(void *ctx, int64_t i, int thread) {
    walk_job *j = ctx;
    modattn_ann *a = j->a;
    const size_t q = (size_t)i, k = j->k;
    int64_t *ids = j->ids + q * k;
    float *sc = j->scores + q * k;
    modattn__hnsw_search(&a->g, a->dot, j->queries + q * a->g.d, j->ef, k, j->v->mask, &a->scratch[thread], ids, sc,
                         &j->nout[q]);
    /* rows to chunk ids, in the exact scan's order (score, then the lower chunk id) */
    rescored r[64], *rs = k <= 64 ? r : modattn_malloc(k * sizeof *rs, MODATTN_MEM_WORKSPACE);
    for (size_t n = 0; n < j->nout[q]; n++) {
        int64_t id = 0;
        row_at(j->v, (size_t)ids[n], &id);
        ids[n] = id;
        if (rs) rs[n] = (rescored){sc[n], id};
    }
    if (rs) {
        qsort(rs, j->nout[q], sizeof *rs, rescored_cmp);
        for (size_t n = 0; n < j->nout[q]; n++) ids[n] = rs[n].id, sc[n] = rs[n].score;
    }
    if (rs != r) modattn_free(rs); /* (without it, the rare tie keeps the row order) */
}

/* HNSW through our walk over FAISS's graph: scores are the scan kernel's own, so none is scored
 * twice; removed rows are walked through, never returned. */
static int walk_batch(modattn_ann *a, const modattn_store_vectors *v, const float *queries, size_t nq, size_t k,
                      const modattn_ann_params *search, const modattn_exec *exec, int64_t *ids, float *scores,
                      size_t *nout) {
    const size_t want = k > v->n ? v->n : k;
    size_t ef = search && search->ef_search > 0 ? (size_t)search->ef_search : (size_t)a->h.ef_search;
    if (search && search->rescore > 0 && (size_t)search->rescore > ef) ef = (size_t)search->rescore;
    if (ef < want) ef = want;
    const bool par = exec && exec->parallel_for && exec->nthreads > 1 && nq >= 2;
    const int threads = par ? exec->nthreads : 1;
    if (a->nscratch < threads) {
        modattn__hnsw_scratch *sc = modattn_realloc(a->scratch, (size_t)threads * sizeof *sc, MODATTN_MEM_WORKSPACE);
        if (!sc) return modattn_mem_last_status();
        memset(sc + a->nscratch, 0, (size_t)(threads - a->nscratch) * sizeof *sc);
        a->scratch = sc;
        a->nscratch = threads;
    }
    for (int t = 0; t < threads; t++) {
        int st = modattn__hnsw_scratch_fit(&a->scratch[t], &a->g, ef);
        if (st) return st;
    }
    walk_job j = {a, v, queries, want, ef, ids, scores, nout};
    /* results are written at q * want: spread them to q * k when k > want (fewer rows than k) */
    uint64_t tr = modattn_trace_begin();
    if (want == k) {
        if (par) exec->parallel_for(exec, (int64_t)nq, walk_one, &j);
        else
            for (size_t q = 0; q < nq; q++) walk_one(&j, (int64_t)q, 0);
    } else {
        for (size_t q = 0; q < nq; q++) {
            walk_job one = {a, v, queries + q * a->g.d, want, ef, ids + q * k, scores + q * k, nout + q};
            walk_one(&one, 0, 0);
        }
    }
    if (tr) {
        char shape[96];
        snprintf(shape, sizeof shape, "hnsw rows=%zu queries=%zu ef=%zu", v->rows, nq, ef);
        modattn_trace_end(tr, "search.ann", "walk", shape, 0, 0);
    }
    return 0;
}
#endif

int modattn_ann_topk_batch(const modattn_ann *a, const modattn_store_vectors *v, const float *queries, size_t nq,
                           size_t k, const modattn_ann_params *search, const modattn_exec *exec, int64_t *ids,
                           float *scores, size_t *nout) {
    if (nq && !nout) return modattn_error(MODATTN_EINVAL, "ann_topk_batch: nout is NULL");
    for (size_t q = 0; q < nq; q++) nout[q] = 0;
    if (!a || !v || (nq && (!queries || (k && (!ids || !scores)))))
        return modattn_error(MODATTN_EINVAL, "ann_topk_batch: NULL argument");
    if (k == 0 || nq == 0 || v->n == 0) return 0;
    bool same = v->rows == a->h.rows && v->dim == a->h.dim && v->nseg == a->h.nseg;
    for (size_t g = 0; same && g < v->nseg; g++) same = v->seg[g].n == a->h.seg[g].n && v->seg[g].row0 == (g ? v->seg[g - 1].row0 + v->seg[g - 1].n : 0);
    if (!same) return modattn_error(MODATTN_EINVAL, "ann_topk_batch: the vectors are not those the index was opened for");
    if (is_flat(a->h.kind)) return flat_batch(a, v, queries, nq, k, search, exec, ids, scores, nout);
#if !MODATTN_HAVE_FAISS
    (void)search, (void)exec;
    return modattn_ann_available();
#else
    if (a->walk) return walk_batch((modattn_ann *)a, v, queries, nq, k, search, exec, ids, scores, nout);
    const size_t want = k > v->n ? v->n : k;
    size_t fetch = fetch_for(&a->h, search, k);
    if (fetch > v->rows) fetch = v->rows;
    const int ef = search && search->ef_search > 0 ? search->ef_search : a->h.ef_search;
    const int nprobe = search && search->nprobe > 0 ? search->nprobe : a->h.nprobe;
    /* FAISS spreads queries over OpenMP threads: for a few queries the others would only spin */
    const int threads = exec && exec->nthreads > 0 && nq >= 4 * (size_t)exec->nthreads ? exec->nthreads : 1;
    int st = 0;
    /* queries whose candidates, masked rows left out, were fewer than k: asked again for more */
    size_t *todo = modattn_malloc(nq * sizeof *todo, MODATTN_MEM_WORKSPACE);
    size_t ntodo = nq;
    if (!todo) return modattn_mem_last_status();
    for (size_t q = 0; q < nq; q++) todo[q] = q;
    float *qbuf = NULL, *dist = NULL;
    int64_t *lab = NULL;
    rescored *rs = NULL;
    for (;;) {
        const size_t dim = v->dim;
        if (fetch > SIZE_MAX / sizeof(float) / ntodo) {
            st = modattn_error(MODATTN_ERANGE, "ann_topk_batch: %zu queries x %zu candidates is too large", ntodo, fetch);
            break;
        }
        modattn_free(qbuf), modattn_free(dist), modattn_free(lab), modattn_free(rs);
        qbuf = modattn_malloc(ntodo * dim * sizeof(float), MODATTN_MEM_WORKSPACE);
        dist = modattn_malloc(ntodo * fetch * sizeof(float), MODATTN_MEM_WORKSPACE);
        lab = modattn_malloc(ntodo * fetch * sizeof(int64_t), MODATTN_MEM_WORKSPACE);
        rs = modattn_malloc(fetch * sizeof *rs, MODATTN_MEM_WORKSPACE);
        if (!qbuf || !dist || !lab || !rs) {
            st = modattn_mem_last_status();
            break;
        }
        for (size_t i = 0; i < ntodo; i++) memcpy(qbuf + i * dim, queries + todo[i] * dim, dim * sizeof(float));
        char msg[256] = "";
        uint64_t tr = modattn_trace_begin();
        if ((st = modattn__faiss_search(a->f, ntodo, qbuf, fetch, ef, nprobe, threads, dist, lab, msg, sizeof msg))) {
            st = modattn_error(st, "searching the ANN index: %s", msg);
            break;
        }
        if (tr) {
            char shape[96];
            snprintf(shape, sizeof shape, "%s rows=%zu queries=%zu fetch=%zu", modattn_ann_kind_name(a->h.kind),
                     v->rows, ntodo, fetch);
            modattn_trace_end(tr, "search.ann", "faiss", shape, 0, 0);
        }
        size_t again = 0;
        for (size_t i = 0; i < ntodo; i++) {
            const size_t q = todo[i];
            const float *qv = queries + q * dim;
            size_t n = 0;
            for (size_t j = 0; j < fetch; j++) {
                const int64_t row = lab[i * fetch + j];
                if (row < 0 || (uint64_t)row >= v->rows) continue;
                if (v->mask && (v->mask[row / 8] >> (row % 8) & 1)) continue;
                int64_t id = 0;
                const float *x = row_at(v, (size_t)row, &id);
                if (!x) continue;
                float sc = 0;
                /* the exact scan's kernel, so that scores are its own bit for bit */
                if ((st = modattn_scan_scores(x, 1, dim, v->ld, qv, MODATTN_SCAN_AUTO, &sc))) break;
                rs[n++] = (rescored){sc, id};
            }
            if (st) break;
            qsort(rs, n, sizeof *rs, rescored_cmp);
            /* the same row may come twice from FAISS only if the index is damaged: keep one */
            size_t w = 0;
            for (size_t j = 0; j < n; j++)
                if (!w || rs[w - 1].id != rs[j].id || rs[w - 1].score != rs[j].score) rs[w++] = rs[j];
            n = w;
            if (n < want && fetch < v->rows) {
                todo[again++] = q;
                continue;
            }
            nout[q] = n < want ? n : want;
            for (size_t j = 0; j < nout[q]; j++) ids[q * k + j] = rs[j].id, scores[q * k + j] = rs[j].score;
        }
        if (st || again == 0) break;
        ntodo = again;
        fetch = fetch * 4 < v->rows ? fetch * 4 : v->rows;
    }
    modattn_free(todo);
    modattn_free(qbuf);
    modattn_free(dist);
    modattn_free(lab);
    modattn_free(rs);
    if (st)
        for (size_t q = 0; q < nq; q++) nout[q] = 0;
    return st;
#endif
}

/* ---------------------------------------------------------------- building and updating */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void parent_dir(const char *path, char *dir, size_t len) {
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, len, ".");
}

/* Removes PATH.tmp.PID left by builders that were killed (their process is gone). */
static void remove_dead_temporaries(const char *path) {
    char dir[4200];
    parent_dir(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash ? slash + 1 : path);
    const size_t pl = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, pl) != 0) continue;
        char *end = NULL;
        long pid = strtol(e->d_name + pl, &end, 10);
        if (!end || *end || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer lives */
        char f[8400];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        (void)unlink(f);
    }
    closedir(d);
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
    seal(h, page);
    size_t n = ANN_HEADER;
    off_t off = 0;
    const unsigned char *c = page;
    while (n) {
        ssize_t k = pwrite(fd, c, n, off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += k, n -= (size_t)k, off += k;
    }
    return 0;
}

/* MODATTN_TEST_CRASH_POINT=ann.rewrite: killed with the temporary file written, not renamed. */
static void crash_point(const char *name) {
    const char *e = getenv("MODATTN_TEST_CRASH_POINT");
    if (e && strcmp(e, name) == 0) raise(SIGKILL);
}

/* Writes an index's payload through put_bytes(w, ...); msg says why it could not. */
typedef int (*emit_fn)(void *src, writer *w, char *msg, size_t len);

/* h (payload fields filled here) and the payload emit writes into a temporary file, renamed over
 * path. */
static int write_file(const char *path, ann_header *h, emit_fn emit, void *src) {
    char tmp[4300];
    remove_dead_temporaries(path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return modattn_error(MODATTN_EIO, "cannot write the ANN index %s: %s", tmp, strerror(errno));
    writer w = {fd, ANN_HEADER, XXH3_createState(), 0};
    int st = 0;
    const char *what = "write";
    char msg[256] = "";
    if (!w.xx) st = modattn_error(MODATTN_ENOMEM, "writing the ANN index: checksum state");
    if (!st) {
        XXH3_64bits_reset(w.xx);
        st = emit(src, &w, msg, sizeof msg);
        if (st && w.err) st = modattn_error(MODATTN_EIO, "cannot write the ANN index %s: %s", tmp, strerror(w.err));
        else if (st) st = modattn_error(st, "writing the ANN index %s: %s", tmp, msg);
    }
    if (!st) {
        h->payload_bytes = w.at - ANN_HEADER;
        h->payload_xxh3 = XXH3_64bits_digest(w.xx);
        if (write_header_at(fd, h) != 0) st = -1;
        else if (what = "fsync", fsync(fd) != 0) st = -1;
        if (st) st = modattn_error(MODATTN_EIO, "cannot write the ANN index %s: %s: %s", tmp, what, strerror(errno));
    }
    if (w.xx) XXH3_freeState(w.xx);
    close(fd);
    if (!st) crash_point("ann.rewrite");
    if (!st && rename(tmp, path) != 0)
        st = modattn_error(MODATTN_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (!st) {
        char dir[4200];
        parent_dir(path, dir, sizeof dir);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (fsync(dfd) != 0) st = modattn_error(MODATTN_EIO, "fsync of the folder %s: %s", dir, strerror(errno));
            close(dfd);
        }
    }
    if (st) unlink(tmp);
    return st;
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
    unsigned char *buf = modattn_malloc(block * stride, MODATTN_MEM_WORKSPACE);
    float *scales = f->c == MODATTN__FLAT_INT8 ? modattn_malloc((v->rows ? v->rows : 1) * sizeof(float), MODATTN_MEM_WORKSPACE) : NULL;
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
            if (!(buf = modattn_malloc(n * dim * sizeof(float), MODATTN_MEM_WORKSPACE))) return modattn_mem_last_status();
            for (size_t i = 0; i < n; i++) memcpy(buf + i * dim, x + i * v->ld, dim * sizeof(float));
            x = buf;
        }
        char msg[256] = "";
        if ((st = modattn__faiss_add(f, n, x, threads, msg, sizeof msg)))
            st = modattn_error(st, "adding rows to the ANN index: %s", msg);
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
    float *x = modattn_malloc(want * dim * sizeof(float), MODATTN_MEM_WORKSPACE);
    if (!x) return modattn_mem_last_status();
    for (size_t i = 0; i < want; i++) {
        const size_t row = (size_t)((double)i * (double)v->rows / (double)want);
        int64_t id;
        const float *r = row_at(v, row, &id);
        memcpy(x + i * dim, r, dim * sizeof(float));
    }
    char msg[256] = "";
    int st = modattn__faiss_train(f, want, x, threads, msg, sizeof msg);
    if (st) st = modattn_error(st, "training the ANN index: %s", msg);
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
    if (!s) return modattn_error(MODATTN_EINVAL, "modattn_store_update_ann: NULL store");
    char path[4200];
    int st = modattn_store_ann_file_path(s, path, sizeof path);
    if (st) return st;
    if (remove) {
        if (unlink(path) == 0) {
            u->action = MODATTN_ANN_ACTION_REMOVED;
            return 0;
        }
        if (errno == ENOENT) return 0;
        return modattn_error(MODATTN_EIO, "cannot remove the ANN index %s: %s", path, strerror(errno));
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
    const int valid = present ? map_file(path, &old, true, why, sizeof why) : 0;
    if (valid < 0) return valid;
    if (kind == MODATTN_ANN_NONE) {
        if (valid != 1)
            return modattn_error(MODATTN_EFORMAT,
                                 "%s cannot be updated: %s; `modattn index --ann KIND` builds it again, or `--ann none` "
                                 "removes it",
                                 path, why);
        kind = (modattn_ann_kind)old.h.kind;
    }
    if ((st = modattn_ann_kind_available(kind))) {
        unmap_file(&old);
        return modattn_error_prefix(st, "%s %s", present ? "updating the ANN index" : "building the ANN index", path);
    }
#if !MODATTN_HAVE_FAISS
    (void)exec, (void)progress, (void)ud;
#endif
    modattn_ann_params want;
    memset(&want, 0, sizeof want);
    if (p) want = *p;
    else if (valid == 1 && old.h.kind == (uint32_t)kind) params_of(&old.h, &want);

    modattn_store_vectors v;
    memset(&v, 0, sizeof v);
#if MODATTN_HAVE_FAISS
    modattn__faiss *f = NULL;
#endif
    if ((st = modattn_store_open_vectors(s, &v))) goto done;
    if (v.dim != mdim) {
        st = modattn_error(MODATTN_EFORMAT, "the store's vectors are of dimension %zu, its model's %zu", v.dim, mdim);
        goto done;
    }
    if (v.nseg > ANN_MAX_SEG) {
        st = modattn_error(MODATTN_ERANGE, "the vectors have %zu segments", v.nseg);
        goto done;
    }
    if (v.rows == 0) {
        st = modattn_error(MODATTN_ENOTFOUND, "the store has no vectors to build an ANN index from: index documents first");
        goto done;
    }
    modattn_ann_params r;
    /* an index there keeps its own training-time choices (nlist, nbits) while it is added to */
    if ((st = modattn_ann_resolve(kind, valid == 1 && old.h.kind == (uint32_t)kind && !p ? old.h.trained_rows : v.rows,
                                  v.dim, &want, &r)))
        goto done;
    ann_seg seg[ANN_MAX_SEG];
    segments_of(&v, true, seg);
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
        params_of(&old.h, &op);
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
                    st = modattn_error(MODATTN_EIO, "cannot update the ANN index %s: %s", path, strerror(errno));
                if (fd >= 0) close(fd);
            }
            u->rows = v.rows;
            u->file_bytes = old.bytes;
            goto fill;
        }
        if (is_flat(kind)) {
            unmap_file(&old);
        } else {
#if MODATTN_HAVE_FAISS
            char msg[256] = "";
            if ((st = modattn_mem_account(MODATTN_MEM_INDEX, (int64_t)old.h.payload_bytes))) goto done;
            st = modattn__faiss_read((const unsigned char *)old.map + ANN_HEADER, old.h.payload_bytes, modattn__scan_best(), &f,
                                     msg, sizeof msg);
            modattn_mem_account(MODATTN_MEM_INDEX, -(int64_t)old.h.payload_bytes);
            if (st) {
                st = modattn_error(st, "reading the ANN index %s: %s", path, msg);
                goto done;
            }
            unmap_file(&old);
            if ((st = add_rows(f, &v, (size_t)h.rows, threads, progress, ud))) goto done;
#endif
        }
        u->action = MODATTN_ANN_ACTION_ADDED;
        u->rows_added = v.rows - (size_t)h.rows;
    } else {
        unmap_file(&old);
        memcpy(h.magic, ANN_MAGIC, 8);
        h.version = ANN_VERSION, h.header_bytes = ANN_HEADER, h.dim = (uint32_t)v.dim, h.kind = (uint32_t)kind;
        h.M = r.M, h.ef_construction = r.ef_construction, h.nlist = r.nlist, h.pq_m = r.pq_m, h.pq_nbits = r.pq_nbits;
        h.ef_search = r.ef_search, h.nprobe = r.nprobe, h.rescore = r.rescore;
        h.trained_rows = v.rows;
        snprintf(h.model_name, sizeof h.model_name, "%s", model);
        snprintf(h.weights_hash, sizeof h.weights_hash, "%s", hash);
        if (!is_flat(kind)) {
#if MODATTN_HAVE_FAISS
            snprintf(h.faiss_version, sizeof h.faiss_version, "%s", modattn__faiss_version());
            char factory[96], msg[256] = "";
            factory_for(kind, &r, factory, sizeof factory);
            if ((st = modattn__faiss_create(factory, v.dim, r.ef_construction, modattn__scan_best(), &f, msg, sizeof msg))) {
                st = modattn_error(st, "creating the ANN index (%s): %s", factory, msg);
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
    flat_src fs = {&v, flat_code(h.kind)};
#if MODATTN_HAVE_FAISS
    st = is_flat(h.kind) ? write_file(path, &h, emit_flat, &fs) : write_file(path, &h, emit_faiss, f);
#else
    st = write_file(path, &h, emit_flat, &fs);
#endif
    if (st) goto done;
    if (progress) progress(ud, "write", 1, 1);
    u->rows = v.rows;
    u->file_bytes = h.payload_bytes + ANN_HEADER;
fill:
    u->kind = (modattn_ann_kind)h.kind;
    params_of(&h, &u->params);
    u->seconds = now_s() - t0;
done:
    unmap_file(&old);
#if MODATTN_HAVE_FAISS
    modattn__faiss_free(f);
#endif
    modattn_store_vectors_free(&v);
    if (st) memset(u, 0, sizeof *u);
    return st;
}
