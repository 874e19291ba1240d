/* pipeline/vecfile.c — the vector file beside a store (layout and rules: modattn/store.h): written
 * whole from the store by `index`, mapped read-only by `search` when every header field agrees
 * with the store and the file, else the search reads the store and says why. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "modattn/core.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/internal_store.h"
#include "pipeline/pipeline_internal.h"
#include "pipeline/sidecar.h"
#include "core/env.h"

#define VEC_MAGIC "MODATTNV"
#define VEC_VERSION 2u
#define VEC_HEADER 4096u
#define VEC_F32 1u
#define MAX_SEG MODATTN_VEC_MAX_SEGMENTS

/* One run of rows and their chunk ids, written by one rewrite or one append. */
typedef struct vec_seg {
    uint64_t offset;     /* of its rows, 64-aligned */
    uint64_t count;
    uint64_t ids_offset; /* right after its rows */
    uint64_t ids_xxh3;
} vec_seg;

/* The header as it lies at offset 0 (fixed-width fields, no padding holes). */
typedef struct vec_header {
    char magic[8];
    uint32_t version, header_bytes, dim, ld, elem, nseg;
    uint64_t count, masked, generation; /* rows in all segments; of them, removed ones */
    char model_name[128];
    char weights_hash[24];
    uint64_t mask_offset, mask_bytes, mask_xxh3, file_bytes;
    vec_seg seg[MAX_SEG];
    uint64_t header_xxh3; /* of the 4096 header bytes with this field zero */
} vec_header;

_Static_assert(VEC_HEADER == MODATTN__SIDECAR_PAGE, "the header is one sidecar page");

static uint64_t header_hash(const unsigned char *page) {
    return modattn__sidecar_header_hash(page, offsetof(vec_header, header_xxh3));
}

static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

/* The header's own consistency and its fit to a file of `size` bytes: "" when it holds, else
 * why not in bad. Reads only the 4096 header bytes at page. */
static void check_header(const unsigned char *page, uint64_t size, vec_header *h, char *bad, size_t len) {
    bad[0] = '\0';
    memcpy(h, page, sizeof *h);
    if (memcmp(h->magic, VEC_MAGIC, 8) != 0) {
        snprintf(bad, len, "not a modattn vector file (bad magic)");
        return;
    }
    if (h->version != VEC_VERSION) {
        snprintf(bad, len, "version %u, this build reads %u", h->version, VEC_VERSION);
        return;
    }
    if (h->header_xxh3 != header_hash(page)) {
        snprintf(bad, len, "its header is damaged (checksum)");
        return;
    }
    if (h->header_bytes != VEC_HEADER || h->elem != VEC_F32 || h->dim == 0 || h->ld < h->dim ||
        h->ld % 16 || h->ld > 65536 || h->nseg > MAX_SEG || (h->nseg == 0) != (h->count == 0) ||
        h->masked > h->count) {
        snprintf(bad, len, "its header has an impossible layout");
        return;
    }
    /* the regions against the size the header claims, then that against the file's */
    const uint64_t claimed = h->file_bytes;
    uint64_t end = VEC_HEADER, rows = 0;
    const uint64_t row_bytes = (uint64_t)h->ld * 4;
    for (uint32_t i = 0; i < h->nseg; i++) {
        const vec_seg *g = &h->seg[i];
        if (g->count == 0 || g->offset % 64 || g->offset < end || g->offset > claimed ||
            g->count > (claimed - g->offset) / (row_bytes + 8) || g->ids_offset != g->offset + g->count * row_bytes) {
            snprintf(bad, len, "its segment %u lies outside the file or overlaps another", i);
            return;
        }
        end = g->ids_offset + g->count * 8;
        rows += g->count;
    }
    if (rows != h->count) {
        snprintf(bad, len, "its segments hold %" PRIu64 " rows, its header says %" PRIu64, rows, h->count);
        return;
    }
    if (h->masked) {
        if (h->mask_bytes != (h->count + 7) / 8 || h->mask_offset < end || h->mask_offset > claimed ||
            h->mask_bytes > claimed - h->mask_offset) {
            snprintf(bad, len, "its mask lies outside the file or overlaps a segment");
            return;
        }
        end = h->mask_offset + h->mask_bytes;
    } else if (h->mask_offset || h->mask_bytes) {
        snprintf(bad, len, "its header has an impossible layout (a mask of nothing)");
        return;
    }
    if (h->file_bytes != end) {
        snprintf(bad, len, "its header's offsets do not match its size field");
        return;
    }
    if (size != end)
        snprintf(bad, len, "%" PRIu64 " bytes, its header says %" PRIu64 " (truncated or extended)", size, end);
}

/* What the header does not cover: the chunk ids of every segment and the mask, against their
 * checksums, and the mask's bits against its count. file holds the whole file. */
static void check_body(const unsigned char *file, const vec_header *h, char *bad, size_t len) {
    bad[0] = '\0';
    for (uint32_t i = 0; i < h->nseg; i++)
        if (XXH3_64bits(file + h->seg[i].ids_offset, h->seg[i].count * 8) != h->seg[i].ids_xxh3) {
            snprintf(bad, len, "its chunk ids are damaged (checksum)");
            return;
        }
    if (!h->masked) return;
    const unsigned char *m = file + h->mask_offset;
    if (XXH3_64bits(m, h->mask_bytes) != h->mask_xxh3) {
        snprintf(bad, len, "its mask is damaged (checksum)");
        return;
    }
    uint64_t bits = 0;
    for (uint64_t i = 0; i < h->mask_bytes; i++) bits += (uint64_t)__builtin_popcount(m[i]);
    const unsigned tail = (unsigned)(h->count % 8);
    if (bits != h->masked || (tail && (m[h->mask_bytes - 1] >> tail)))
        snprintf(bad, len, "its mask marks %" PRIu64 " rows, its header says %" PRIu64, bits, h->masked);
}

void modattn__vecfile_reseal(void *file, size_t size) {
    if (size < VEC_HEADER) return;
    unsigned char *f = file;
    vec_header h;
    memcpy(&h, f, sizeof h);
    const uint32_t nseg = h.nseg < MAX_SEG ? h.nseg : MAX_SEG;
    for (uint32_t i = 0; i < nseg; i++) {
        const vec_seg *g = &h.seg[i];
        if (g->ids_offset <= size && g->count <= (size - g->ids_offset) / 8)
            h.seg[i].ids_xxh3 = XXH3_64bits(f + g->ids_offset, g->count * 8);
    }
    if (h.mask_offset <= size && h.mask_bytes <= size - h.mask_offset)
        h.mask_xxh3 = XXH3_64bits(f + h.mask_offset, h.mask_bytes);
    memcpy(f, &h, sizeof h);
    h.header_xxh3 = header_hash(f);
    memcpy(f, &h, sizeof h);
}

/* The vectors a search sees in a checked file at base (no copy). */
static void fill_view(const unsigned char *base, const vec_header *h, modattn_store_vectors *out) {
    out->dim = h->dim, out->ld = h->ld, out->generation = h->generation;
    out->rows = (size_t)h->count, out->masked = (size_t)h->masked, out->n = out->rows - out->masked;
    out->nseg = h->nseg;
    size_t row0 = 0;
    for (uint32_t i = 0; i < h->nseg; i++) {
        out->seg[i].data = (const float *)(const void *)(base + h->seg[i].offset);
        out->seg[i].chunk_ids = (const int64_t *)(const void *)(base + h->seg[i].ids_offset);
        out->seg[i].n = (size_t)h->seg[i].count;
        out->seg[i].row0 = row0;
        row0 += out->seg[i].n;
    }
    out->data = out->seg[0].data, out->chunk_ids = out->seg[0].chunk_ids;
    out->mask = h->masked ? base + h->mask_offset : NULL;
}

int modattn__vecfile_view(const void *file, size_t size, modattn_store_vectors *out, char *why, size_t len) {
    char tmp[8];
    if (!why || !len) why = tmp, len = sizeof tmp;
    memset(out, 0, sizeof *out);
    if (size < VEC_HEADER) {
        snprintf(why, len, "shorter than its header (%zu bytes)", size);
        return 0;
    }
    if ((uintptr_t)file % 64) {
        snprintf(why, len, "not 64-byte aligned in memory");
        return 0;
    }
    vec_header h;
    check_header(file, size, &h, why, len);
    if (!why[0]) check_body(file, &h, why, len);
    if (why[0]) return 0;
    fill_view(file, &h, out);
    return 1;
}

int modattn__store_vector_file_path(const modattn_store *s, char *buf, size_t len) {
    int w = snprintf(buf, len, "%s.vec", modattn_store_path(s));
    if (w < 0 || (size_t)w >= len) return modattn__error(MODATTN_EINVAL, "vector file path too long");
    return 0;
}

void modattn__store_vectors_free(modattn_store_vectors *v) {
    if (!v) return;
    if (v->map) {
        munmap(v->map, v->map_bytes);
    } else { /* loaded from the store (store.c) */
        modattn_free((void *)v->data);
        modattn_free((void *)v->chunk_ids);
    }
    memset(v, 0, sizeof *v);
}

/* Seals the header (checksum) into a zeroed 4096-byte page. */
static void seal(const vec_header *h, unsigned char *page) {
    modattn__sidecar_seal(h, sizeof *h, offsetof(vec_header, header_xxh3), page);
}

static int store_identity(modattn_store *s, char name[128], char hash[17], size_t *dim, uint64_t *gen) {
    int st = modattn_store_get_model(s, name, 128, hash, dim);
    if (!st) st = modattn_store_generation(s, gen);
    return st;
}

static void fill_identity(vec_header *h, const char *name, const char *hash, size_t dim, size_t ld) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, VEC_MAGIC, 8);
    h->version = VEC_VERSION, h->header_bytes = VEC_HEADER, h->dim = (uint32_t)dim, h->ld = (uint32_t)ld;
    h->elem = VEC_F32;
    snprintf(h->model_name, sizeof h->model_name, "%s", name);
    snprintf(h->weights_hash, sizeof h->weights_hash, "%s", hash);
}

/* Rows streamed from the store into the file at off through a 1 MiB buffer (never the whole
 * set in memory: 1.5 GB at 1M chunks), their chunk ids gathered to follow them. */
typedef struct seg_writer {
    int fd;
    uint64_t at;        /* where the next buffer goes */
    size_t ld, n, cap;  /* floats per row; rows so far; rows counted beforehand */
    int64_t *ids;
    unsigned char *buf;
    size_t used, bufcap;
    const char *path;
} seg_writer;

static int seg_flush(seg_writer *w) {
    if (w->used && modattn__sidecar_write_all(w->fd, w->buf, w->used, w->at) != 0)
        return modattn__error(MODATTN_EIO, "cannot write the vector file %s: write: %s", w->path, strerror(errno));
    w->at += w->used;
    w->used = 0;
    return 0;
}

static int seg_row(void *ctx, int64_t chunk, const void *v, size_t dim) {
    seg_writer *w = ctx;
    const size_t rb = w->ld * 4;
    if (w->n >= w->cap) return modattn__error(MODATTN_EFORMAT, "%s: more vectors than counted", w->path);
    if (w->used + rb > w->bufcap) {
        int st = seg_flush(w);
        if (st) return st;
    }
    memcpy(w->buf + w->used, v, dim * 4);
    memset(w->buf + w->used + dim * 4, 0, rb - dim * 4);
    w->used += rb;
    w->ids[w->n++] = chunk;
    return 0;
}

/* The n rows of generation > after (counted before, under the same lock) as a segment at off:
 * rows, then ids; *g describes it. */
static int write_segment(modattn_store *s, int fd, const char *path, uint64_t off, int64_t after, size_t n,
                         size_t ld, vec_seg *g) {
    seg_writer w = {.fd = fd, .at = off, .ld = ld, .cap = n, .path = path};
    w.bufcap = ld * 4 > (1u << 20) ? ld * 4 : (1u << 20);
    w.buf = modattn__malloc(w.bufcap, MODATTN_MEM_INDEX);
    w.ids = modattn__malloc((n ? n : 1) * sizeof(int64_t), MODATTN_MEM_INDEX);
    int st = (!w.buf || !w.ids) ? modattn__mem_last_status() : 0;
    size_t got = 0;
    if (!st) st = modattn__store_scan_vectors(s, after, seg_row, &w, &got);
    if (!st) st = seg_flush(&w);
    if (!st && got != n)
        st = modattn__error(MODATTN_EFORMAT, "%s: %zu of %zu embeddings belong to the store's model", path, got, n);
    const uint64_t rb = (uint64_t)n * ld * 4;
    if (!st && modattn__sidecar_write_all(fd, w.ids, n * 8, off + rb) != 0)
        st = modattn__error(MODATTN_EIO, "cannot write the vector file %s: write: %s", path, strerror(errno));
    if (!st) *g = (vec_seg){off, n, off + rb, XXH3_64bits(w.ids, n * 8)};
    modattn_free(w.buf);
    modattn_free(w.ids);
    return st;
}

/* The whole file from the store, under the store's lock: one segment in chunk order, no mask,
 * into a temporary file that is fsynced, renamed over the old one, and the folder fsynced. */
static int rewrite_locked(modattn_store *s, const char *path) {
    char name[128] = "", hash[17] = "";
    size_t dim = 0, n = 0;
    uint64_t gen = 0;
    int st = store_identity(s, name, hash, &dim, &gen);
    if (!st) st = modattn__store_count_vectors(s, -1, &n);
    if (st) return modattn__error_prefix(st, "writing %s", path);
    const size_t ld = (dim + 15) & ~(size_t)15;
    if (n > (UINT64_MAX / 2) / (ld * 4 + 8))
        return modattn__error(MODATTN_ERANGE, "%s: %zu vectors are too many for one file", path, n);
    unsigned char *page = calloc(1, VEC_HEADER);
    if (!page) return modattn__error(MODATTN_ENOMEM, "%s: header", path);
    vec_header h;
    fill_identity(&h, name, hash, dim, ld);
    h.generation = gen;
    h.count = n;
    h.file_bytes = VEC_HEADER;

    /* under the store's write lock: no live writer owns a temporary */
    modattn__sidecar_tmp t;
    bool ok = modattn__sidecar_begin(&t, path, false) == 0;
    if (ok && n) {
        h.nseg = 1;
        st = write_segment(s, t.fd, t.tmp, VEC_HEADER, -1, n, ld, &h.seg[0]);
        h.file_bytes = h.seg[0].ids_offset + (uint64_t)n * 8;
        ok = !st;
    }
    if (ok) {
        seal(&h, page);
        ok = modattn__sidecar_commit(&t, page, "vecfile.rewrite") == 0;
    } else {
        modattn__sidecar_abandon(&t);
    }
    free(page);
    if (!ok) {
        if (st) return st;
        return modattn__error(MODATTN_EIO, "cannot write the vector file %s: %s: %s", path, t.what, strerror(t.err));
    }
    return 0;
}

int modattn__store_write_vector_file(modattn_store *s) {
    char path[4200];
    int st = modattn__store_vector_file_path(s, path, sizeof path);
    if (st) return st;
    if ((st = modattn__store_lock(s))) return modattn__error_prefix(st, "writing %s", path);
    st = rewrite_locked(s, path);
    modattn__store_unlock(s);
    return st;
}

/* Reads and checks the header of the open file fd (retrying a header torn by a concurrent
 * append); "" in why when it and the size agree. */
static void read_header(int fd, vec_header *h, uint64_t *size, char *why, size_t len) {
    unsigned char page[VEC_HEADER];
    for (int attempt = 0; attempt < 3; attempt++) {
        struct stat sb;
        if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            snprintf(why, len, "not a regular file");
            return;
        }
        if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)VEC_HEADER) {
            snprintf(why, len, "shorter than its header (%lld bytes)", (long long)sb.st_size);
            return;
        }
        if (pread(fd, page, VEC_HEADER, 0) != (ssize_t)VEC_HEADER) {
            snprintf(why, len, "cannot read its header");
            return;
        }
        *size = (uint64_t)sb.st_size;
        check_header(page, *size, h, why, len);
        if (!why[0] || (h->header_xxh3 == header_hash(page) && *size == h->file_bytes)) return;
        usleep(2000);
    }
}

static int identity_matches(const vec_header *h, const char *name, const char *hash, size_t dim,
                            char *why, size_t len) {
    if (h->dim == dim && strncmp(h->model_name, name, sizeof h->model_name) == 0 &&
        strncmp(h->weights_hash, hash, sizeof h->weights_hash) == 0)
        return 1;
    snprintf(why, len, "written for model %.64s (%.16s, %u dims), the store's is %s (%s, %zu)",
             h->model_name, h->weights_hash, h->dim, name, hash, dim);
    return 0;
}

/* Maps the whole file fd of `size` bytes and checks its body: the mapping, or NULL with why. */
static void *map_checked(int fd, const vec_header *h, uint64_t size, char *why, size_t len) {
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(why, len, "mmap: %s", strerror(errno));
        return NULL;
    }
    check_body(m, h, why, len);
    if (why[0]) {
        munmap(m, (size_t)size);
        return NULL;
    }
    return m;
}

/* Maps the store's vector file and checks it against the store: 1 with the mapping, its size and
 * header when current, 0 with why, < 0 on an error of the store. */
static int map_current(modattn_store *s, void **map, size_t *bytes, vec_header *h, char *why, size_t len) {
    *map = NULL;
    char path[4200];
    int pst = modattn__store_vector_file_path(s, path, sizeof path);
    if (pst) return pst;
    char name[128] = "", hash[17] = "", bad[256] = "";
    size_t dim = 0;
    uint64_t gen = 0, size = 0;
    int st = store_identity(s, name, hash, &dim, &gen);
    if (st) return st < 0 ? st : -st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO there must not block */
    if (fd < 0) {
        snprintf(why, len, "%s: %s", path, strerror(errno));
        return 0;
    }
    read_header(fd, h, &size, bad, sizeof bad);
    if (!bad[0] && identity_matches(h, name, hash, dim, bad, sizeof bad) && h->generation != gen)
        snprintf(bad, sizeof bad, "stale: written at the store's generation %" PRIu64 ", the store is at %" PRIu64,
                 h->generation, gen);
    void *m = bad[0] ? NULL : map_checked(fd, h, size, bad, sizeof bad);
    close(fd);
    if (!m) {
        snprintf(why, len, "%s: %s", path, bad);
        return 0;
    }
    (void)madvise(m, (size_t)size, MADV_WILLNEED);
    *map = m;
    *bytes = (size_t)size;
    return 1;
}

int modattn__store_vector_file_current(modattn_store *s, char *why, size_t len) {
    void *m;
    size_t bytes;
    vec_header h;
    int r = map_current(s, &m, &bytes, &h, why, len);
    if (r == 1) munmap(m, bytes);
    return r;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static bool bit(const unsigned char *m, uint64_t r) { return m && (m[r >> 3] >> (r & 7)) & 1; }

/* Appends what changed in the store since the file's generation, under the store's lock: the
 * rows written since as a new segment, the rows of chunks removed since marked in a new mask;
 * then the header, naming the new regions, replaces the old one. 1 done, 0 a rewrite is needed
 * (why in u->reason), < 0 an error. Readers that mapped the file before keep a consistent view
 * (nothing they read is overwritten); a reader that opens it mid-append sees a size its header
 * does not name and reads the store; a kill leaves the same. */
static int append_locked(modattn_store *s, int fd, const vec_header *old, uint64_t size, uint64_t gen,
                         modattn_vecfile_update *u) {
    char bad[256] = "";
    unsigned char *file = map_checked(fd, old, size, bad, sizeof bad);
    if (!file) {
        snprintf(u->reason, sizeof u->reason, "%s", bad);
        return 0;
    }
    int64_t *keep = NULL;
    size_t nkeep = 0;
    unsigned char *seen = NULL, *mask = NULL, *page = NULL;
    int r = 0;
    int st = modattn__store_ids_upto(s, old->generation, &keep, &nkeep);
    if (st) goto done;
    qsort(keep, nkeep, sizeof *keep, cmp_i64);
    const unsigned char *omask = old->masked ? file + old->mask_offset : NULL;
    /* which live rows are of chunks no longer there: the rest must be exactly `keep` */
    seen = modattn__calloc(nkeep / 8 + 1, 1, MODATTN_MEM_INDEX);
    size_t ngone = 0, live = 0; /* rows newly masked; rows still live */
    if (!seen) {
        st = modattn__mem_last_status();
        goto done;
    }
    size_t nnew = 0; /* rows written since the file's generation */
    if ((st = modattn__store_count_vectors(s, (int64_t)old->generation, &nnew))) goto done;
    const uint64_t rows = old->count + nnew;
    mask = modattn__calloc((size_t)rows / 8 + 1, 1, MODATTN_MEM_INDEX);
    if (!mask) {
        st = modattn__mem_last_status();
        goto done;
    }
    uint64_t base = 0; /* the segment's first row among all rows */
    for (uint32_t i = 0; i < old->nseg; base += old->seg[i].count, i++) {
        const vec_seg *g = &old->seg[i];
        const int64_t *ids = (const int64_t *)(const void *)(file + g->ids_offset);
        for (uint64_t j = 0; j < g->count; j++) {
            const uint64_t rr = base + j;
            if (bit(omask, rr)) {
                mask[rr >> 3] |= (unsigned char)(1u << (rr & 7));
                continue;
            }
            const int64_t *f = bsearch(&ids[j], keep, nkeep, sizeof *keep, cmp_i64);
            if (!f) {
                mask[rr >> 3] |= (unsigned char)(1u << (rr & 7));
                ngone++;
                continue;
            }
            size_t k = (size_t)(f - keep);
            if (seen[k >> 3] >> (k & 7) & 1) {
                snprintf(u->reason, sizeof u->reason, "chunk %" PRId64 " is in it twice", ids[j]);
                goto done;
            }
            seen[k >> 3] |= (unsigned char)(1u << (k & 7));
            live++;
        }
    }
    if (live != nkeep) {
        snprintf(u->reason, sizeof u->reason, "it holds %zu of the store's %zu rows of its generation", live, nkeep);
        goto done;
    }
    const uint64_t masked = old->masked + ngone;
    if (nnew && old->nseg == MAX_SEG) {
        snprintf(u->reason, sizeof u->reason, "compacting: %d appends", MAX_SEG - 1);
        goto done;
    }
    if (masked * 4 > rows) {
        snprintf(u->reason, sizeof u->reason, "compacting: %" PRIu64 " of %" PRIu64 " rows are of removed chunks",
                 masked, rows);
        goto done;
    }
    vec_header h = *old;
    h.generation = gen;
    h.count = rows;
    h.masked = masked;
    uint64_t end = old->file_bytes;
    bool ok = true;
    if (nnew) {
        char path[4200];
        if ((st = modattn__store_vector_file_path(s, path, sizeof path))) goto done;
        vec_seg *g = &h.seg[h.nseg++];
        if ((st = write_segment(s, fd, path, align64(end), (int64_t)old->generation, nnew, old->ld, g))) goto done;
        end = g->ids_offset + (uint64_t)nnew * 8;
        modattn__sidecar_crash_point("vecfile.segment");
    }
    if (masked && ok && (ngone || nnew)) { /* a new mask; an unchanged one stays where it is */
        h.mask_offset = align64(end);
        h.mask_bytes = (rows + 7) / 8;
        h.mask_xxh3 = XXH3_64bits(mask, h.mask_bytes);
        ok = modattn__sidecar_write_all(fd, mask, (size_t)h.mask_bytes, h.mask_offset) == 0;
        end = h.mask_offset + h.mask_bytes;
    }
    h.file_bytes = end;
    const char *what = "write";
    if (ok) what = "fsync", ok = fsync(fd) == 0; /* the new regions first, then the header naming them */
    if (ok && !(page = calloc(1, VEC_HEADER))) {
        st = modattn__error(MODATTN_ENOMEM, "vector file header");
        goto done;
    }
    if (ok) modattn__sidecar_crash_point("vecfile.mask");
    if (ok) {
        seal(&h, page);
        what = "write of the header";
        const char *e = getenv("MODATTN_TEST_CRASH_POINT");
        if (e && strcmp(e, "vecfile.header") == 0) { /* a torn header: its first half only */
            ok = modattn__sidecar_write_all(fd, page, VEC_HEADER / 8, 0) == 0 && fsync(fd) == 0;
            modattn__sidecar_crash_point("vecfile.header");
        }
        ok = ok && modattn__sidecar_write_all(fd, page, VEC_HEADER, 0) == 0;
    }
    if (ok) what = "fsync", ok = fsync(fd) == 0;
    if (!ok) {
        st = modattn__error(MODATTN_EIO, "cannot append to the vector file: %s: %s", what, strerror(errno));
        goto done;
    }
    u->rows_added = nnew, u->rows_masked = ngone;
    r = 1;
done:
    munmap(file, (size_t)size);
    modattn_free(keep);
    modattn_free(seen);
    modattn_free(mask);
    free(page);
    return st ? st : r;
}

int modattn_store_update_vector_file(modattn_store *s, modattn_vecfile_update *u) {
    if (!s || !u) return modattn__error(MODATTN_EINVAL, "update_vector_file: NULL argument");
    memset(u, 0, sizeof *u);
    char path[4200];
    int st = modattn__store_vector_file_path(s, path, sizeof path);
    if (st) return st;
    if ((st = modattn__store_lock(s))) return modattn__error_prefix(st, "updating %s", path);
    char name[128] = "", hash[17] = "";
    size_t dim = 0;
    uint64_t gen = 0, size = 0;
    if ((st = store_identity(s, name, hash, &dim, &gen))) goto out;
    int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(u->reason, sizeof u->reason, "%s (%s)", errno == ENOENT ? "there was none" : "cannot open it",
                 strerror(errno));
    } else {
        vec_header h;
        read_header(fd, &h, &size, u->reason, sizeof u->reason);
        if (!u->reason[0] && identity_matches(&h, name, hash, dim, u->reason, sizeof u->reason)) {
            if (h.generation == gen) {
                char bad[256] = "";
                void *m = map_checked(fd, &h, size, bad, sizeof bad);
                if (m) {
                    munmap(m, (size_t)size);
                    u->action = MODATTN_VECFILE_CURRENT;
                    close(fd);
                    goto out;
                }
                snprintf(u->reason, sizeof u->reason, "%s", bad);
            } else if (h.generation > gen) {
                snprintf(u->reason, sizeof u->reason, "written at generation %" PRIu64 ", after the store's %" PRIu64,
                         h.generation, gen);
            } else if (modattn__store_schema(s) < 2) {
                snprintf(u->reason, sizeof u->reason, "the store's schema has no generations");
            } else {
                int a = append_locked(s, fd, &h, size, gen, u);
                if (a < 0) {
                    close(fd);
                    st = a;
                    goto out;
                }
                if (a == 1) {
                    u->action = MODATTN_VECFILE_APPENDED;
                    close(fd);
                    goto out;
                }
            }
        }
        close(fd);
    }
    st = rewrite_locked(s, path);
    if (!st) u->action = MODATTN_VECFILE_REWRITTEN;
out:
    modattn__store_unlock(s);
    return st;
}

int modattn__store_open_vectors(modattn_store *s, modattn_store_vectors *out) {
    if (!s || !out) return modattn__error(MODATTN_EINVAL, "open_vectors: NULL argument");
    memset(out, 0, sizeof *out);
    char why[320] = "";
    if (modattn__env_has("MODATTN_VECTOR_FILE", "off")) {
        why[0] = '\0'; /* asked for: nothing to say */
    } else {
        void *m;
        size_t bytes;
        vec_header h;
        int r = map_current(s, &m, &bytes, &h, why, sizeof why);
        if (r < 0) return r;
        if (r == 1) {
            fill_view(m, &h, out);
            out->map = m, out->map_bytes = bytes;
            return 0;
        }
    }
    int st = modattn__store_load_vectors(s, out);
    if (!st) snprintf(out->note, sizeof out->note, "%s", why);
    return st;
}
