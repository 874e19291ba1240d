/* model/safetensors.c — validating safetensors reader: mmap the file, check every rule of the
 * format before handing out a single tensor, then serve zero-copy views.
 *
 * Rules checked (each failure is MODATTN_EFORMAT with a message "FILE: RULE: detail", naming the
 * tensor where there is one):
 *   header-length   the file starts with a u64 little-endian header length N, N <= 100,000,000,
 *                   and 8 + N bytes are in the file;
 *   header-start    the header's first byte is '{' (trailing spaces are allowed by JSON);
 *   header-json     the header is valid UTF-8 JSON, one object, no duplicate keys;
 *   metadata        __metadata__, if present, maps strings to strings;
 *   entry           every other value is an object with dtype, shape and data_offsets;
 *   dtype           the dtype is one the format defines;
 *   shape           the shape is an array of at most 8 non-negative integers;
 *   data_offsets    [begin, end] with 0 <= begin <= end <= the data buffer's length;
 *   size            end - begin == numel x dtype size, computed with overflow checks;
 *   tiling          sorted by offset, the tensors tile the data buffer exactly: the first begins
 *                   at 0, each begins where the previous ended (no hole, no overlap), the last
 *                   ends at the file's end.
 * Every size that comes from the file is checked before it is used in arithmetic. */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

static const struct {
    const char *name;
    size_t size;
} k_dtypes[] = {
#define X(name, text, size) {text, size},
    MODATTN_ST_DTYPE_MAP(X)
#undef X
};

const char *modattn__st_dtype_name(modattn_st_dtype dt) {
    return (unsigned)dt < MODATTN_ST_DTYPE_COUNT ? k_dtypes[dt].name : "?";
}

size_t modattn__st_dtype_size(modattn_st_dtype dt) {
    return (unsigned)dt < MODATTN_ST_DTYPE_COUNT ? k_dtypes[dt].size : 0;
}

static int dtype_parse(const char *s, modattn_st_dtype *out) {
    for (int i = 0; i < MODATTN_ST_DTYPE_COUNT; i++) {
        if (strcmp(s, k_dtypes[i].name) == 0) {
            *out = (modattn_st_dtype)i;
            return 0;
        }
    }
    return -1;
}

static int fmt_err(const modattn_st_file *f, const char *rule, const char *tensor, const char *fmt,
                   ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* "PATH: RULE: tensor 'NAME': detail" */
static int fmt_err(const modattn_st_file *f, const char *rule, const char *tensor, const char *fmt,
                   ...) {
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (tensor)
        return modattn__error(MODATTN_EFORMAT, "%s: %s: tensor '%.200s': %s", f->path, rule, tensor,
                             detail);
    return modattn__error(MODATTN_EFORMAT, "%s: %s: %s", f->path, rule, detail);
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const modattn_st_tensor *)a)->name, ((const modattn_st_tensor *)b)->name);
}

static int cmp_offsets(const void *a, const void *b) {
    const modattn_st_tensor *x = *(const modattn_st_tensor *const *)a;
    const modattn_st_tensor *y = *(const modattn_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* A JSON integer that is >= 0, as uint64. */
static int json_uint(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return -1;
    json_int_t i = json_integer_value(v);
    if (i < 0) return -1;
    *out = (uint64_t)i;
    return 0;
}

static void fmt_shape(const modattn_st_tensor *t, char *buf, size_t len) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int d = 0; d < t->ndim && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

static int parse_tensor(modattn_st_file *f, const char *name, const json_t *v,
                        modattn_st_tensor *t) {
    if (!json_is_object(v)) return fmt_err(f, "entry", name, "the value is not an object");
    const json_t *jd = json_object_get(v, "dtype");
    const json_t *js = json_object_get(v, "shape");
    const json_t *jo = json_object_get(v, "data_offsets");
    if (!jd) return fmt_err(f, "entry", name, "no \"dtype\"");
    if (!js) return fmt_err(f, "entry", name, "no \"shape\"");
    if (!jo) return fmt_err(f, "entry", name, "no \"data_offsets\"");
    if (!json_is_string(jd)) return fmt_err(f, "dtype", name, "\"dtype\" is not a string");
    if (dtype_parse(json_string_value(jd), &t->dtype) != 0)
        return fmt_err(f, "dtype", name, "unknown dtype \"%.40s\"", json_string_value(jd));
    if (!json_is_array(js)) return fmt_err(f, "shape", name, "\"shape\" is not an array");
    size_t nd = json_array_size(js);
    if (nd > MODATTN_ST_MAX_DIMS)
        return fmt_err(f, "shape", name, "%zu dimensions (this reader allows at most %d)", nd,
                       MODATTN_ST_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    bool overflow = false;
    for (size_t d = 0; d < nd; d++) {
        uint64_t dim;
        if (json_uint(json_array_get(js, d), &dim) != 0)
            return fmt_err(f, "shape", name, "dimension %zu is not a non-negative integer", d);
        t->shape[d] = (int64_t)dim; /* json_int_t is int64: dim <= INT64_MAX */
        if (dim != 0 && numel > UINT64_MAX / dim) overflow = true;
        else numel *= dim;
    }
    /* A zero dimension makes the product 0 even if earlier factors overflowed. */
    for (size_t d = 0; d < nd; d++)
        if (t->shape[d] == 0) {
            overflow = false;
            numel = 0;
        }
    if (overflow) return fmt_err(f, "size", name, "the element count overflows 64 bits");
    t->numel = numel;
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return fmt_err(f, "data_offsets", name, "\"data_offsets\" is not an array [begin, end]");
    if (json_uint(json_array_get(jo, 0), &t->begin) != 0 ||
        json_uint(json_array_get(jo, 1), &t->end) != 0)
        return fmt_err(f, "data_offsets", name, "offsets are not non-negative integers");
    if (t->end < t->begin)
        return fmt_err(f, "data_offsets", name, "end %llu is before begin %llu",
                       (unsigned long long)t->end, (unsigned long long)t->begin);
    if (t->end > f->data_len)
        return fmt_err(f, "data_offsets", name,
                       "end %llu is past the end of the data buffer (%llu bytes)",
                       (unsigned long long)t->end, (unsigned long long)f->data_len);
    size_t es = modattn__st_dtype_size(t->dtype);
    if (numel > UINT64_MAX / es)
        return fmt_err(f, "size", name, "%llu elements x %zu bytes overflows 64 bits",
                       (unsigned long long)numel, es);
    if (t->end - t->begin != numel * es) {
        char sh[160];
        fmt_shape(t, sh, sizeof sh);
        return fmt_err(f, "size", name,
                       "data_offsets [%llu, %llu] hold %llu bytes but shape %s x %s needs %llu",
                       (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)(t->end - t->begin), sh,
                       modattn__st_dtype_name(t->dtype), (unsigned long long)(numel * es));
    }
    t->data = f->data + t->begin;
    return 0;
}

static int parse_metadata(modattn_st_file *f, const json_t *m) {
    if (!json_is_object(m)) return fmt_err(f, "metadata", NULL, "__metadata__ is not an object");
    size_t n = json_object_size(m);
    f->meta = modattn__calloc(n ? n : 1, sizeof *f->meta, MODATTN_MEM_OTHER);
    if (!f->meta) return modattn__mem_last_status();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        if (!json_is_string(v))
            return fmt_err(f, "metadata", NULL, "__metadata__ value of \"%.100s\" is not a string",
                           k);
        modattn_st_meta *e = &f->meta[f->nmeta];
        e->key = modattn__strdup(k, MODATTN_MEM_OTHER);
        e->value = e->key ? modattn__strdup(json_string_value(v), MODATTN_MEM_OTHER) : NULL;
        if (!e->value) {
            modattn_free((void *)e->key);
            e->key = NULL;
            return modattn__mem_last_status();
        }
        f->nmeta++;
    }
    return 0;
}

static int check_tiling(modattn_st_file *f) {
    if (f->ntensors == 0) {
        if (f->data_len != 0)
            return fmt_err(f, "tiling", NULL,
                           "no tensors but %llu data bytes follow the header (hole)",
                           (unsigned long long)f->data_len);
        return 0;
    }
    modattn_st_tensor **order = modattn__malloc(f->ntensors * sizeof *order, MODATTN_MEM_OTHER);
    if (!order) return modattn__mem_last_status();
    for (size_t i = 0; i < f->ntensors; i++) order[i] = &f->tensors[i];
    qsort(order, f->ntensors, sizeof *order, cmp_offsets);
    uint64_t expect = 0;
    const char *prev = NULL;
    int st = 0;
    for (size_t i = 0; i < f->ntensors && st == 0; i++) {
        const modattn_st_tensor *t = order[i];
        if (t->begin > expect) {
            st = prev ? fmt_err(f, "tiling", t->name,
                                "begins at %llu but '%.200s' ends at %llu: a hole of %llu bytes",
                                (unsigned long long)t->begin, prev, (unsigned long long)expect,
                                (unsigned long long)(t->begin - expect))
                      : fmt_err(f, "tiling", t->name,
                                "the first tensor begins at %llu, not 0: a hole at the start",
                                (unsigned long long)t->begin);
        } else if (t->begin < expect) {
            st = fmt_err(f, "tiling", t->name,
                         "begins at %llu, inside '%.200s' which ends at %llu: overlap",
                         (unsigned long long)t->begin, prev, (unsigned long long)expect);
        }
        expect = t->end;
        prev = t->name;
    }
    if (st == 0 && expect != f->data_len)
        st = fmt_err(f, "tiling", prev,
                     "the last tensor ends at %llu but the data buffer holds %llu bytes: %llu "
                     "trailing bytes",
                     (unsigned long long)expect, (unsigned long long)f->data_len,
                     (unsigned long long)(f->data_len - expect));
    if (st == 0) f->by_offset = order; /* kept: readers walk the file in order (encoder_load.c) */
    else modattn_free(order);
    return st;
}

static int parse_header(modattn_st_file *f) {
    if (f->len < 8)
        return fmt_err(f, "header-length", NULL,
                       "the file holds %zu bytes, fewer than the 8-byte header length", f->len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | f->bytes[i];
    if (n > MODATTN_ST_MAX_HEADER)
        return fmt_err(f, "header-length", NULL, "header length %llu exceeds the cap of %llu",
                       (unsigned long long)n, (unsigned long long)MODATTN_ST_MAX_HEADER);
    if (n > f->len - 8)
        return fmt_err(f, "header-length", NULL,
                       "header length %llu runs past the end of the file (%zu bytes)",
                       (unsigned long long)n, f->len);
    f->header_len = n;
    f->data = f->bytes + 8 + n;
    f->data_len = f->len - 8 - n;
    const char *hdr = (const char *)f->bytes + 8;
    if (n == 0 || hdr[0] != '{')
        return fmt_err(f, "header-start", NULL, "the header does not start with '{'");

    json_error_t jerr;
    json_t *root = NULL;
    int st = modattn__json_loadb(hdr, (size_t)n, JSON_REJECT_DUPLICATES, &root, &jerr);
    if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET)
        return modattn__error_prefix(st, "%s: reading the header", f->path);
    if (st)
        return fmt_err(f, "header-json", NULL, "%.200s (header line %d, column %d)", jerr.text,
                       jerr.line, jerr.column);
    if (!json_is_object(root)) {
        st = fmt_err(f, "header-json", NULL, "the header is not a JSON object");
        goto out;
    }
    size_t cap = json_object_size(root);
    f->tensors = modattn__calloc(cap ? cap : 1, sizeof *f->tensors, MODATTN_MEM_OTHER);
    if (!f->tensors) {
        st = modattn__mem_last_status();
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((st = parse_metadata(f, val)) != 0) goto out;
            continue;
        }
        modattn_st_tensor *t = &f->tensors[f->ntensors];
        if ((st = parse_tensor(f, key, val, t)) != 0) goto out;
        t->name = modattn__strdup(key, MODATTN_MEM_OTHER);
        if (!t->name) {
            st = modattn__mem_last_status();
            goto out;
        }
        f->ntensors++;
    }
    if ((st = check_tiling(f)) != 0) goto out;
    qsort(f->tensors, f->ntensors, sizeof *f->tensors, cmp_name);
out:
    json_decref(root);
    return st;
}

static modattn_st_file *file_new(const char *name) {
    modattn_st_file *f = modattn__calloc(1, sizeof *f, MODATTN_MEM_OTHER);
    if (!f) return NULL;
    f->path = modattn__strdup(name ? name : "(memory)", MODATTN_MEM_OTHER);
    if (!f->path) {
        modattn_free(f);
        return NULL;
    }
    return f;
}

int modattn__st_parse(const void *bytes, size_t len, const char *name, modattn_st_file **out) {
    *out = NULL;
    modattn_st_file *f = file_new(name);
    if (!f) return modattn__mem_last_status();
    f->bytes = bytes;
    f->len = len;
    int st = parse_header(f);
    if (st != 0) {
        modattn__st_close(f);
        return st;
    }
    *out = f;
    return 0;
}

int modattn__st_open(const char *path, modattn_st_file **out) {
    *out = NULL;
    /* O_NONBLOCK: a FIFO in the file's place is refused below instead of waiting for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return modattn__error(MODATTN_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return modattn__error(MODATTN_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return modattn__error(MODATTN_EIO, "%s: not a regular file", path);
    }
    modattn_st_file *f = file_new(path);
    if (!f) {
        close(fd);
        return modattn__mem_last_status();
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        modattn__st_close(f);
        return modattn__error(MODATTN_EFORMAT, "%s: file too large to map", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len > 0) {
        int st = modattn__mem_account(MODATTN_MEM_WEIGHTS, (int64_t)len);
        if (st != 0) {
            close(fd);
            modattn__st_close(f);
            return modattn__error_prefix(st, "%s: mapping %zu bytes", path, len);
        }
        f->accounted = (int64_t)len;
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            modattn__st_close(f);
            return modattn__error(MODATTN_EIO, "%s: cannot map %zu bytes: %s", path, len,
                                 strerror(e));
        }
        f->map = m;
        f->map_len = len;
    }
    close(fd);
    f->bytes = f->map;
    f->len = len;
    int st = parse_header(f);
    if (st != 0) {
        modattn__st_close(f);
        return st;
    }
    *out = f;
    return 0;
}

void modattn__st_close(modattn_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->ntensors; i++) modattn_free((void *)f->tensors[i].name);
    modattn_free(f->tensors);
    modattn_free(f->by_offset);
    for (size_t i = 0; i < f->nmeta; i++) {
        modattn_free((void *)f->meta[i].key);
        modattn_free((void *)f->meta[i].value);
    }
    modattn_free(f->meta);
    if (f->map) munmap(f->map, f->map_len);
    if (f->accounted) modattn__mem_account(MODATTN_MEM_WEIGHTS, -f->accounted);
    modattn_free(f->path);
    modattn_free(f);
}

void modattn__st_release(const modattn_st_file *f, const void *p, size_t n) {
    if (!f || !f->map || !p || n == 0) return;
    const uintptr_t base = (uintptr_t)f->map, end = base + f->map_len, a = (uintptr_t)p;
    if (a < base || a >= end) return;
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096u;
    const uintptr_t lo = (a + page - 1) / page * page; /* the pages wholly inside the range */
    uintptr_t hi = (n > end - a ? end : a + n) / page * page;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: its failure loses nothing */
}

const modattn_st_tensor *modattn__st_find(const modattn_st_file *f, const char *name) {
    modattn_st_tensor key;
    memset(&key, 0, sizeof key);
    key.name = name;
    return bsearch(&key, f->tensors, f->ntensors, sizeof key, cmp_name);
}

const char *modattn__st_meta(const modattn_st_file *f, const char *key) {
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}
