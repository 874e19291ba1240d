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
#include "pipeline/pipeline_internal.h"

#define VEC_MAGIC "MODATTNV"
#define VEC_VERSION 1u
#define VEC_HEADER 4096u
#define VEC_F32 1u

/* The header as it lies at offset 0 (fixed-width fields, no padding holes). */
typedef struct vec_header {
    char magic[8];
    uint32_t version, header_bytes, dim, ld, elem, reserved;
    uint64_t count, generation;
    char model_name[128];
    char weights_hash[24];
    uint64_t ids_offset, vec_offset, file_bytes;
    uint64_t ids_xxh3;    /* of the chunk ids */
    uint64_t header_xxh3; /* of the 4096 header bytes with this field zero */
} vec_header;

static uint64_t header_hash(const unsigned char *page) {
    unsigned char tmp[VEC_HEADER];
    memcpy(tmp, page, VEC_HEADER);
    memset(tmp + offsetof(vec_header, header_xxh3), 0, sizeof(uint64_t));
    return XXH3_64bits(tmp, VEC_HEADER);
}

/* Sizes of a file of count rows of ld floats; false on overflow. */
static bool layout(uint64_t count, uint64_t ld, uint64_t *vec_off, uint64_t *total) {
    if (count > (UINT64_MAX - VEC_HEADER - 64) / 8) return false;
    uint64_t ids_end = VEC_HEADER + count * 8;
    uint64_t v = (ids_end + 63) / 64 * 64;
    if (ld && count > (UINT64_MAX - v) / 4 / ld) return false;
    *vec_off = v;
    *total = v + count * ld * 4;
    return true;
}

int modattn_store_vector_file_path(const modattn_store *s, char *buf, size_t len) {
    int w = snprintf(buf, len, "%s.vec", modattn_store_path(s));
    if (w < 0 || (size_t)w >= len) return modattn_error(MODATTN_EINVAL, "vector file path too long");
    return 0;
}

void modattn_store_vectors_free(modattn_store_vectors *v) {
    if (!v) return;
    if (v->map) {
        munmap(v->map, v->map_bytes);
    } else { /* loaded from the store (store.c) */
        modattn_free((void *)v->data);
        modattn_free((void *)v->chunk_ids);
    }
    memset(v, 0, sizeof *v);
}

static int write_all(int fd, const void *p, size_t n, uint64_t off) {
    const char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w, n -= (size_t)w, off += (uint64_t)w;
    }
    return 0;
}

int modattn_store_write_vector_file(modattn_store *s) {
    char path[4200], tmp[4300];
    int st = modattn_store_vector_file_path(s, path, sizeof path);
    if (st) return st;
    modattn_store_vectors v;
    if ((st = modattn_store_load_vectors(s, &v))) return modattn_error_prefix(st, "writing %s", path);
    char name[128] = "", hash[17] = "";
    size_t dim = 0;
    if ((st = modattn_store_get_model(s, name, sizeof name, hash, &dim))) {
        modattn_store_vectors_free(&v);
        return st;
    }
    uint64_t voff, total;
    if (!layout(v.n, v.ld, &voff, &total)) {
        modattn_store_vectors_free(&v);
        return modattn_error(MODATTN_ERANGE, "%s: %zu vectors are too many for one file", path, v.n);
    }
    unsigned char *page = calloc(1, VEC_HEADER);
    if (!page) {
        modattn_store_vectors_free(&v);
        return modattn_error(MODATTN_ENOMEM, "%s: header", path);
    }
    vec_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, VEC_MAGIC, 8);
    h.version = VEC_VERSION, h.header_bytes = VEC_HEADER, h.dim = (uint32_t)v.dim, h.ld = (uint32_t)v.ld;
    h.elem = VEC_F32, h.count = v.n, h.generation = v.generation;
    snprintf(h.model_name, sizeof h.model_name, "%s", name);
    snprintf(h.weights_hash, sizeof h.weights_hash, "%s", hash);
    h.ids_offset = VEC_HEADER, h.vec_offset = voff, h.file_bytes = total;
    h.ids_xxh3 = XXH3_64bits(v.chunk_ids, v.n * sizeof(int64_t));
    memcpy(page, &h, sizeof h);
    h.header_xxh3 = header_hash(page);
    memcpy(page, &h, sizeof h);

    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const char *what = "open";
    bool ok = fd >= 0;
    if (ok) {
        static const char zeros[64];
        what = "write";
        ok = write_all(fd, page, VEC_HEADER, 0) == 0 &&
             write_all(fd, v.chunk_ids, v.n * sizeof(int64_t), VEC_HEADER) == 0 &&
             write_all(fd, zeros, (size_t)(voff - VEC_HEADER - v.n * 8), VEC_HEADER + v.n * 8) == 0 &&
             write_all(fd, v.data, v.n * v.ld * sizeof(float), voff) == 0;
        if (ok) what = "fsync", ok = fsync(fd) == 0;
    }
    int err = errno;
    if (fd >= 0) close(fd);
    if (ok) {
        what = "rename";
        ok = rename(tmp, path) == 0;
        err = errno;
    }
    if (ok) { /* the rename itself must survive a crash: fsync the folder */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
        else snprintf(dir, sizeof dir, ".");
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (fsync(dfd) != 0) what = "fsync of the folder", ok = false, err = errno;
            close(dfd);
        }
    }
    free(page);
    modattn_store_vectors_free(&v);
    if (!ok) {
        unlink(tmp);
        return modattn_error(MODATTN_EIO, "cannot write the vector file %s: %s: %s", path, what, strerror(err));
    }
    return 0;
}

/* Maps the store's vector file and checks it against the store: 1 with the mapping, its size and
 * header when current, 0 with why, < 0 on an error of the store. */
static int map_current(modattn_store *s, void **map, size_t *bytes, vec_header *h, char *why, size_t len) {
    *map = NULL;
    char path[4200];
    int pst = modattn_store_vector_file_path(s, path, sizeof path);
    if (pst) return pst;
    char name[128] = "", hash[17] = "";
    size_t dim = 0;
    uint64_t gen = 0;
    int st = modattn_store_get_model(s, name, sizeof name, hash, &dim);
    if (st == 0) st = modattn_store_generation(s, &gen);
    if (st) return st < 0 ? st : -st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "%s: %s", path, strerror(errno));
        return 0;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)VEC_HEADER) {
        snprintf(why, len, "%s: shorter than its header (%lld bytes)", path, (long long)sb.st_size);
        close(fd);
        return 0;
    }
    unsigned char page[VEC_HEADER];
    if (pread(fd, page, VEC_HEADER, 0) != (ssize_t)VEC_HEADER) {
        snprintf(why, len, "%s: cannot read its header", path);
        close(fd);
        return 0;
    }
    memcpy(h, page, sizeof *h);
    uint64_t voff = 0, total = 0;
    const char *bad = NULL;
    char detail[200] = "";
    if (memcmp(h->magic, VEC_MAGIC, 8) != 0) bad = "not a modattn vector file (bad magic)";
    else if (h->version != VEC_VERSION) snprintf(detail, sizeof detail, "version %u, this build reads %u", h->version, VEC_VERSION);
    else if (h->header_xxh3 != header_hash(page)) bad = "its header is damaged (checksum)";
    else if (h->header_bytes != VEC_HEADER || h->elem != VEC_F32 || h->ld < h->dim || h->ld % 16 || h->ld > 65536)
        bad = "its header has an impossible layout";
    else if (h->dim != dim || strncmp(h->model_name, name, sizeof h->model_name) != 0 ||
             strncmp(h->weights_hash, hash, sizeof h->weights_hash) != 0)
        snprintf(detail, sizeof detail, "written for model %.64s (%.16s, %u dims), the store's is %s (%s, %zu)",
                 h->model_name, h->weights_hash, h->dim, name, hash, dim);
    else if (h->generation != gen)
        snprintf(detail, sizeof detail, "stale: written at the store's generation %" PRIu64 ", the store is at %" PRIu64,
                 h->generation, gen);
    else if (!layout(h->count, h->ld, &voff, &total) || h->ids_offset != VEC_HEADER || h->vec_offset != voff ||
             h->file_bytes != total)
        bad = "its header's offsets do not match its count";
    else if ((uint64_t)sb.st_size != total)
        snprintf(detail, sizeof detail, "%lld bytes, its header says %" PRIu64 " (truncated or extended)",
                 (long long)sb.st_size, total);
    if (bad || detail[0]) {
        snprintf(why, len, "%s: %s", path, bad ? bad : detail);
        close(fd);
        return 0;
    }
    void *m = mmap(NULL, (size_t)total, PROT_READ, MAP_SHARED, fd, 0);
    int merr = errno;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, len, "%s: mmap: %s", path, strerror(merr));
        return 0;
    }
    const int64_t *ids = (const int64_t *)((const char *)m + VEC_HEADER);
    if (XXH3_64bits(ids, (size_t)h->count * 8) != h->ids_xxh3) {
        munmap(m, (size_t)total);
        snprintf(why, len, "%s: its chunk ids are damaged (checksum)", path);
        return 0;
    }
    (void)madvise(m, (size_t)total, MADV_WILLNEED);
    *map = m;
    *bytes = (size_t)total;
    return 1;
}

int modattn_store_vector_file_current(modattn_store *s, char *why, size_t len) {
    void *m;
    size_t bytes;
    vec_header h;
    int r = map_current(s, &m, &bytes, &h, why, len);
    if (r == 1) munmap(m, bytes);
    return r;
}

int modattn_store_open_vectors(modattn_store *s, modattn_store_vectors *out) {
    if (!s || !out) return modattn_error(MODATTN_EINVAL, "open_vectors: NULL argument");
    memset(out, 0, sizeof *out);
    char why[320] = "";
    const char *env = getenv("MODATTN_VECTOR_FILE");
    if (env && strcmp(env, "off") == 0) {
        why[0] = '\0'; /* asked for: nothing to say */
    } else {
        void *m;
        size_t bytes;
        vec_header h;
        int r = map_current(s, &m, &bytes, &h, why, sizeof why);
        if (r < 0) return r;
        if (r == 1) {
            out->map = m, out->map_bytes = bytes;
            out->chunk_ids = (const int64_t *)((const char *)m + VEC_HEADER);
            out->data = (const float *)((const char *)m + h.vec_offset);
            out->n = (size_t)h.count, out->dim = h.dim, out->ld = h.ld, out->generation = h.generation;
            return 0;
        }
    }
    int st = modattn_store_load_vectors(s, out);
    if (!st) snprintf(out->note, sizeof out->note, "%s", why);
    return st;
}
