/* pipeline/ann_file.c — the ANN index's file (PATH.ann): its path, its sealed header, and its
 * reading with every check (the header's own consistency, the payload's checksum, its fit to the
 * store's vectors). Written by ann_build.c through the sidecar writer (pipeline/sidecar.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "modattn/core.h"
#include "core/internal_status.h"
#include "pipeline/internal_ann.h"
#include "pipeline/ann_internal.h"

int modattn__store_ann_file_path(const modattn_store *s, char *buf, size_t len) {
    int w = snprintf(buf, len, "%s.ann", modattn_store_path(s));
    if (w < 0 || (size_t)w >= len) return modattn__error(MODATTN_EINVAL, "ANN index path too long");
    return 0;
}

static uint64_t header_hash(const unsigned char *page) {
    return modattn__sidecar_header_hash(page, offsetof(ann_header, header_xxh3));
}

void modattn__ann_seal(const ann_header *h, unsigned char *page) {
    modattn__sidecar_seal(h, sizeof *h, offsetof(ann_header, header_xxh3), page);
}

void modattn__ann_check_header(const unsigned char *page, uint64_t size, ann_header *h, char *bad, size_t len) {
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
        else if (ann_is_flat(h->kind) && (h->rows > ((uint64_t)1 << 40) ||
                                          h->payload_bytes != modattn__flat_bytes(ann_flat_code(h->kind), h->dim, h->rows)))
            snprintf(bad, len, "its header is malformed (%llu bytes of codes for %llu rows)",
                     (unsigned long long)h->payload_bytes, (unsigned long long)h->rows);
    }
}

void modattn__ann_segments_of(const modattn_store_vectors *v, bool data, ann_seg *seg) {
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

int modattn__ann_map_file(const char *path, ann_file *f, bool payload, char *why, size_t len) {
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
    modattn__ann_check_header(map, (uint64_t)sb.st_size, &f->h, bad, sizeof bad);
    /* a compact kind's codes are not checksummed at each open (that would cost a scan, as the
     * vector file's rows are not): they only choose candidates, whose scores are exact */
    if (!bad[0] && (!ann_is_flat(f->h.kind) || payload) &&
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

void modattn__ann_unmap_file(ann_file *f) {
    if (f->map) munmap(f->map, f->bytes);
    f->map = NULL;
}

/* Whether the header is for exactly the vectors v of the store's model: "" when it is. */
void modattn__ann_check_fit(const ann_header *h, const modattn_store_vectors *v, const ann_seg *seg, const char *model,
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

