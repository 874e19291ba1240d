/* model/safetensors.h — a validating reader for the safetensors format (internal to modattn).
 *
 * The file is memory-mapped read-only and checked against the format's rules before any tensor
 * is handed out (see safetensors.c for the list). Tensors are views into the mapping: nothing is
 * copied. The mapped bytes are accounted as MODATTN_MEM_WEIGHTS while the file is open. */
#ifndef MODATTN_MODEL_SAFETENSORS_H
#define MODATTN_MODEL_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The header may not be longer than this (the reference implementation's cap). */
#define MODATTN_ST_MAX_HEADER 100000000ull
/* A tensor may have at most this many dimensions (a limit of this reader, not of the format). */
#define MODATTN_ST_MAX_DIMS 8

#define MODATTN_ST_DTYPE_MAP(X) \
    X(BOOL, "BOOL", 1)          \
    X(U8, "U8", 1)              \
    X(I8, "I8", 1)              \
    X(F8_E5M2, "F8_E5M2", 1)    \
    X(F8_E4M3, "F8_E4M3", 1)    \
    X(I16, "I16", 2)            \
    X(U16, "U16", 2)            \
    X(F16, "F16", 2)            \
    X(BF16, "BF16", 2)          \
    X(I32, "I32", 4)            \
    X(U32, "U32", 4)            \
    X(F32, "F32", 4)            \
    X(F64, "F64", 8)            \
    X(I64, "I64", 8)            \
    X(U64, "U64", 8)

typedef enum modattn_st_dtype {
#define MODATTN__ST_ENUM(name, text, size) MODATTN_ST_##name,
    MODATTN_ST_DTYPE_MAP(MODATTN__ST_ENUM)
#undef MODATTN__ST_ENUM
    MODATTN_ST_DTYPE_COUNT
} modattn_st_dtype;

const char *modattn__st_dtype_name(modattn_st_dtype dt);
size_t modattn__st_dtype_size(modattn_st_dtype dt);

typedef struct modattn_st_tensor {
    const char *name;       /* owned by the file */
    modattn_st_dtype dtype;
    int ndim;
    int64_t shape[MODATTN_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;    /* byte offsets in the data buffer (after the header) */
    const void *data;       /* the bytes inside the mapping (or the buffer given to parse) */
    /* set by a reader's pass over the whole file (model/encoder_load.c hash_weights): with
     * `scanned`, the index of the first NaN or infinity of an F32 tensor, numel if none */
    bool scanned;
    uint64_t first_nonfinite;
} modattn_st_tensor;

typedef struct modattn_st_meta {
    const char *key, *value; /* owned by the file */
} modattn_st_meta;

typedef struct modattn_st_file {
    char *path;                 /* for messages */
    void *map;                  /* mmap base, NULL for an in-memory parse */
    size_t map_len;
    const uint8_t *bytes;       /* whole file */
    size_t len;
    uint64_t header_len;
    const uint8_t *data;        /* bytes + 8 + header_len */
    uint64_t data_len;
    size_t ntensors;
    modattn_st_tensor *tensors; /* sorted by name */
    modattn_st_tensor **by_offset; /* the same, in file order (they tile the data: validated) */
    size_t nmeta;
    modattn_st_meta *meta;
    int64_t accounted;          /* bytes accounted as MODATTN_MEM_WEIGHTS */
} modattn_st_file;

/* Map and validate `path`. On error returns MODATTN_EIO (cannot open or map), MODATTN_EFORMAT
 * (a rule is broken: the message names the file, the rule and the tensor), MODATTN_ENOMEM or
 * MODATTN_EBUDGET. Ownership: close with modattn__st_close(). */
int modattn__st_open(const char *path, modattn_st_file **out);

/* Validate a file image held in memory (`bytes` must outlive the result; nothing is mapped or
 * accounted). `name` is used in messages. Same errors as modattn__st_open. Close with
 * modattn__st_close(). */
int modattn__st_parse(const void *bytes, size_t len, const char *name, modattn_st_file **out);

void modattn__st_close(modattn_st_file *f);

/* Gives back the memory of the whole pages of the mapping inside [p, p + n) (nothing where p is
 * not in the mapping, or for an in-memory parse): for a tensor the loader has copied or packed
 * elsewhere, so that its pages are not resident beside the copy. The mapping is a read-only
 * private map of the file, so nothing is lost: a later read of the range reads the file's pages
 * again (MADV_DONTNEED), it only costs the page faults. */
void modattn__st_release(const modattn_st_file *f, const void *p, size_t n);

/* The tensor called `name`, or NULL. */
const modattn_st_tensor *modattn__st_find(const modattn_st_file *f, const char *name);

/* The value of `key` in __metadata__, or NULL. */
const char *modattn__st_meta(const modattn_st_file *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif
