/* backends/opencl/ocl.h — what the OpenCL device and its attention implementations share (this
 * folder only): per-device state, error text, and the program cache. */
#ifndef MODATTN_OCL_H
#define MODATTN_OCL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <CL/cl.h>

#include "modattn/backend/device.h"
#include "modattn/backend/impl.h"

#define OCL_MAX_DEVICES 16

typedef struct ocl_program {
    char options[64];   /* "-DBN=32" */
    cl_program program;
} ocl_program;

typedef struct ocl_dev {
    modattn_device_iface iface; /* iface.ctx points back here */
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;     /* in order, profiling on */
    modattn_device_info info;
    pthread_mutex_t mu;         /* programs, and kernels' argument setting (per device) */
    ocl_program programs[8];
    int nprograms;
    char cache_dir[1024];       /* where compiled programs are kept; "" when none can be */
    /* monotonic host time minus device time, for trace spans on the host's time axis */
    bool is_cpu;                /* CL_DEVICE_TYPE_CPU: kernels without local-memory tiling */
    bool clblast_tuned;         /* our Xgemm parameters replace CLBlast's defaults (CPU devices) */
    _Atomic unsigned disabled_ops; /* bits of modattn_op refused on request (control) */
    bool clock_known;
    int64_t clock_offset_ns;
} ocl_dev;

/* The devices found (ocl_device.c). */
int modattn__ocl_count(void);
ocl_dev *modattn__ocl_get(int index);

/* "clEnqueueNDRangeKernel: -5 CL_OUT_OF_RESOURCES" into reason; returns MODATTN_EDEVICE (or
 * MODATTN_ENOMEM for the out-of-memory codes). */
int modattn__ocl_fail(char *reason, size_t len, const char *call, cl_int err);
const char *modattn__ocl_errname(cl_int err);

/* The attention program built with `options` for this device: from the in-process table, the
 * on-disk cache ($MODATTN_CACHE_DIR or $XDG_CACHE_HOME/modattn or ~/.cache/modattn: opencl/),
 * or compiled now (and saved). A build failure returns MODATTN_EDEVICE with the compiler's log
 * in the message. Thread-safe. */
int modattn__ocl_program(ocl_dev *d, const char *options, cl_program *out, char *reason, size_t len);

/* The program cache folder (created): MODATTN_CACHE_DIR/opencl, else XDG_CACHE_HOME/modattn/opencl,
 * else ~/.cache/modattn/opencl; "" when there is none or it is not writable, with `note` saying so. */
void modattn__ocl_cache_dir(char *buf, size_t len, char *note, size_t nlen);

/* Waits for ev, and records a trace span for it on the device's track from its profiling
 * times. Releases ev. */
int modattn__ocl_finish(ocl_dev *d, cl_event ev, const char *name, const char *impl, const char *shape, double bytes,
                        double flops, char *reason, size_t len);

/* Shared by both attention implementations (ocl_flash.c): device kind and index, dtype, index
 * ranges; and kv_lens and the ALiBi slopes uploaded into the workspace's first
 * modattn__ocl_extras_bytes() bytes (kv_lens at 0, the slopes at float *sl0): *out / *slopes
 * NULL when there are none. */
bool modattn__ocl_common_supports(const modattn_attn_desc *d, char *reason, size_t len);
size_t modattn__ocl_extras_bytes(const modattn_attn_desc *d);
int modattn__ocl_upload_kvl(ocl_dev *dev, const modattn_attn_desc *d, const modattn_attn_call *c, void *workspace,
                            cl_mem *out, cl_mem *slopes, cl_int *sl0, char *reason, size_t len);

/* The encoder's ops on OpenCL (ocl_encoder.c). */
const modattn_encoder_ops *modattn__ocl_encoder_ops(void);
/* CLBlast parameters for CPU-type devices (ocl_encoder.c). */
void modattn__ocl_tune_clblast(ocl_dev *d);

/* Both implementations' init slot (ocl_flash.c): available when an OpenCL device was found. */
int modattn__ocl_impl_init(void *ctx, char *reason, size_t len);

/* The cl_mem of a tensor in buffer form. */
static inline cl_mem modattn__ocl_mem(const modattn_tensor *t) { return t->buffer ? (cl_mem)t->buffer->handle : NULL; }

#endif
