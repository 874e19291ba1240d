/* modattn/types.h — the types every layer shares: tensors, dtypes, devices, buffers and the host's
 * execution services (modattn_exec). The core layer's: the device layer, the attention layer, the
 * backends, search and plugins all use them, and none of them owns them (docs/ARCHITECTURE.md).
 * Nothing here calls into the library but the three name/size functions and
 * modattn_tensor_contiguous (core/types.c). */
#ifndef MODATTN_TYPES_H
#define MODATTN_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum modattn_device_kind {
    MODATTN_DEVICE_CPU = 0,
    MODATTN_DEVICE_CUDA = 1,
    MODATTN_DEVICE_OPENCL = 2,
    MODATTN_DEVICE_XLA = 3, /* a PJRT plugin's device (backends/xla): CPU, TPU or GPU through XLA */
    MODATTN_DEVICE_KIND_COUNT
} modattn_device_kind;

typedef struct modattn_device {
    modattn_device_kind kind;
    int index;
} modattn_device;

typedef enum modattn_dtype {
    MODATTN_DTYPE_F32 = 0,
    MODATTN_DTYPE_F16 = 1,
    MODATTN_DTYPE_BF16 = 2,
    MODATTN_DTYPE_F64 = 3,
    MODATTN_DTYPE_COUNT
} modattn_dtype;

const char *modattn_device_kind_name(modattn_device_kind kind);
const char *modattn_dtype_name(modattn_dtype dtype);
size_t modattn_dtype_size(modattn_dtype dtype); /* 0 for an unknown dtype */

/* Memory on a device (see modattn/backend/device.h, which allocates them). Readable by implementations:
 * `handle` is the device's own handle (an OpenCL cl_mem, a CUDA device pointer; on the CPU the
 * host pointer), `host` the host address of byte 0 or NULL when the memory is no host pointer. */
typedef struct modattn_buffer {
    void *handle;
    void *host;
    size_t bytes;
    modattn_device device;
    const struct modattn_device_iface *iface; /* the owning device (opaque to implementations) */
    int category;                             /* modattn_mem_category */
    bool borrowed;                            /* host memory the buffer wraps and does not own
                                               * (modattn__buffer_from_host on a host device) */
} modattn_buffer;

/* A strided view of a 4-D tensor, in one of two forms:
 *   host:   `data` points at element 0 and `buffer` is NULL; `capacity` is the number of
 *           elements that may be addressed from `data` (data[0 .. capacity-1]);
 *   buffer: `buffer` is set and element 0 is `offset` bytes into it (a multiple of the element
 *           size); `data` is buffer->host + offset when the buffer has a host address, else NULL;
 *           `capacity` is ignored: the view must stay inside the buffer's bytes.
 * Every index the view reaches must be inside. A view with neither data nor buffer is "absent"
 * (for the optional mask and lse). `device` must be the buffer's device. */
typedef struct modattn_tensor {
    void *data;
    modattn_device device;
    modattn_dtype dtype;
    int64_t shape[4];
    int64_t stride[4]; /* elements; >= 0 */
    int64_t capacity;  /* elements (host form) */
    modattn_buffer *buffer;
    int64_t offset;    /* bytes (buffer form) */
} modattn_tensor;

/* Whether a view is present (has data or a buffer). */
static inline bool modattn_tensor_present(const modattn_tensor *t) { return t->data != NULL || t->buffer != NULL; }

/* A contiguous row-major view over `data` with exactly shape[0]*...*shape[3] elements. */
modattn_tensor modattn_tensor_contiguous(void *data, modattn_dtype dtype, int64_t d0, int64_t d1,
                                         int64_t d2, int64_t d3);

/* The host's execution services, handed to run(). */
typedef struct modattn_exec {
    int nthreads; /* thread ids passed to tasks are in [0, nthreads) */
    /* Runs fn(ctx, i, thread) for every i in [0, n) and returns when all are done. */
    void (*parallel_for)(const struct modattn_exec *exec, int64_t n,
                         void (*fn)(void *ctx, int64_t i, int thread), void *ctx);
    void *host; /* the host's, opaque */
} modattn_exec;

#ifdef __cplusplus
}
#endif
#endif
