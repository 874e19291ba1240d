/* backends/opencl/ocl_device.c — the OpenCL device: every device of every platform, each with
 * one context and one in-order queue with profiling; buffers are cl_mem; the encoder's ops come
 * from ocl_encoder.c, programs and errors from ocl_common.c. */
#include "backends/opencl/ocl.h"
#include "core/internal_status.h"
#include "core/env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


static ocl_dev g_devs[OCL_MAX_DEVICES];
static int g_n;

int modattn__ocl_count(void) { return g_n; }
ocl_dev *modattn__ocl_get(int index) {
    return index >= 0 && index < g_n && g_devs[index].queue ? &g_devs[index] : NULL; /* NULL once shut down */
}

/* ---------------------------------------------------------------- the table's slots */

static void ocl_info(void *ctx, modattn_device_info *out) {
    ocl_dev *d = ctx;
    pthread_mutex_lock(&d->mu); /* the note may be rewritten by a program build */
    *out = d->info;
    pthread_mutex_unlock(&d->mu);
}

static int ocl_alloc(void *ctx, size_t bytes, modattn_mem_category cat, void **handle, void **host, char *reason,
                     size_t len) {
    (void)cat;
    ocl_dev *d = ctx;
    if ((int64_t)bytes > d->info.max_alloc_bytes) {
        snprintf(reason, len, "larger than the device's largest buffer (%lld bytes)", (long long)d->info.max_alloc_bytes);
        return MODATTN_ENOMEM;
    }
    cl_int err;
    cl_mem m = clCreateBuffer(d->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (!m) return modattn__ocl_fail(reason, len, "clCreateBuffer", err);
    /* drivers allocate lazily: touch the buffer so an out-of-memory shows here, not in a kernel */
    cl_uchar zero = 0;
    err = clEnqueueFillBuffer(d->queue, m, &zero, 1, 0, bytes, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(d->queue);
    if (err != CL_SUCCESS) {
        clReleaseMemObject(m);
        return modattn__ocl_fail(reason, len, "clEnqueueFillBuffer (first touch)", err);
    }
    *handle = m;
    *host = NULL;
    return 0;
}

static void ocl_free(void *ctx, void *handle) {
    (void)ctx;
    clReleaseMemObject((cl_mem)handle);
}

static int ocl_write(void *ctx, void *handle, size_t off, const void *src, size_t n, char *reason, size_t len) {
    ocl_dev *d = ctx;
    cl_int err = clEnqueueWriteBuffer(d->queue, (cl_mem)handle, CL_TRUE, off, n, src, 0, NULL, NULL);
    return err == CL_SUCCESS ? 0 : modattn__ocl_fail(reason, len, "clEnqueueWriteBuffer", err);
}

static int ocl_read(void *ctx, void *handle, size_t off, void *dst, size_t n, char *reason, size_t len) {
    ocl_dev *d = ctx;
    cl_int err = clEnqueueReadBuffer(d->queue, (cl_mem)handle, CL_TRUE, off, n, dst, 0, NULL, NULL);
    return err == CL_SUCCESS ? 0 : modattn__ocl_fail(reason, len, "clEnqueueReadBuffer", err);
}

static int ocl_copy(void *ctx, void *dst, size_t doff, void *src, size_t soff, size_t n, char *reason, size_t len) {
    ocl_dev *d = ctx;
    cl_int err = clEnqueueCopyBuffer(d->queue, (cl_mem)src, (cl_mem)dst, soff, doff, n, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(d->queue);
    return err == CL_SUCCESS ? 0 : modattn__ocl_fail(reason, len, "clEnqueueCopyBuffer", err);
}

static int ocl_fill(void *ctx, void *handle, size_t off, uint8_t byte, size_t n, char *reason, size_t len) {
    ocl_dev *d = ctx;
    cl_uchar v = byte;
    cl_int err = clEnqueueFillBuffer(d->queue, (cl_mem)handle, &v, 1, off, n, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(d->queue);
    return err == CL_SUCCESS ? 0 : modattn__ocl_fail(reason, len, "clEnqueueFillBuffer", err);
}

static int ocl_sync(void *ctx, char *reason, size_t len) {
    cl_int err = clFinish(((ocl_dev *)ctx)->queue);
    return err == CL_SUCCESS ? 0 : modattn__ocl_fail(reason, len, "clFinish", err);
}

static bool ocl_supports_op(void *ctx, modattn_op op, char *reason, size_t len) {
    ocl_dev *d = ctx;
    if ((unsigned)op < MODATTN_OP_COUNT && (atomic_load(&d->disabled_ops) & (1u << op))) {
        snprintf(reason, len, "'%s' disabled by request (MODATTN_DEVICE_CONTROL_DISABLE_OP)", modattn_op_name(op));
        return false;
    }
    if (op == MODATTN_OP_LINEAR_BF16 || op == MODATTN_OP_LINEAR_INT8 || op == MODATTN_OP_LINEAR_BF16X3) {
        snprintf(reason, len, "%s GEMMs are not written for OpenCL devices (CLBlast runs them in fp32 here)",
                 op == MODATTN_OP_LINEAR_BF16 ? "bf16" : op == MODATTN_OP_LINEAR_INT8 ? "int8" : "bf16x3");
        return false;
    }
#ifndef MODATTN_HAVE_CLBLAST
    if (op == MODATTN_OP_LINEAR || op == MODATTN_OP_LINEAR_GELU || op == MODATTN_OP_LINEAR_RESIDUAL) {
        snprintf(reason, len, "'%s' needs CLBlast (libclblast-dev), which this build lacks", modattn_op_name(op));
        return false;
    }
#endif
    return (unsigned)op < MODATTN_OP_COUNT;
}

static int ocl_control(void *ctx, int op, void *arg) {
    ocl_dev *d = ctx;
    if (op == MODATTN_DEVICE_CONTROL_DISABLE_OP && arg) {
        int o = *(const int *)arg;
        if (o < 0 || o >= MODATTN_OP_COUNT) return modattn__error(MODATTN_EINVAL, "unknown op %d", o);
        atomic_fetch_or(&d->disabled_ops, 1u << o);
        return 0;
    }
    return MODATTN_EUNSUPPORTED;
}

static void ocl_shutdown(void *ctx) {
    ocl_dev *d = ctx;
    for (int i = 0; i < d->nprograms; i++) clReleaseProgram(d->programs[i].program);
    d->nprograms = 0;
    if (d->queue) clReleaseCommandQueue(d->queue);
    if (d->context) clReleaseContext(d->context);
    d->queue = NULL;
    d->context = NULL;
    pthread_mutex_destroy(&d->mu);
    if (d->iface.id.index == g_n - 1) g_n--; /* shut down last to first: none is left after all */
}

/* ---------------------------------------------------------------- discovery */

static void str_info(cl_device_id dev, cl_device_info what, char *buf, size_t len) {
    buf[0] = '\0';
    if (clGetDeviceInfo(dev, what, len, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
    buf[len - 1] = '\0';
}

static bool has_ext(cl_device_id dev, const char *ext) {
    size_t n = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || n == 0) return false;
    char *buf = malloc(n + 1);
    if (!buf) return false;
    bool yes = clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, buf, NULL) == CL_SUCCESS && strstr(buf, ext) != NULL;
    free(buf);
    return yes;
}

static const modattn_device_iface k_template = {
    /* .api_version  = */ MODATTN_DEVICE_API_VERSION,
    /* .id           = */ {MODATTN_DEVICE_OPENCL, 0},
    /* .ctx          = */ NULL,
    /* .get_info     = */ ocl_info,
    /* .buffer_alloc = */ ocl_alloc,
    /* .buffer_free  = */ ocl_free,
    /* .buffer_write = */ ocl_write,
    /* .buffer_read  = */ ocl_read,
    /* .buffer_copy  = */ ocl_copy,
    /* .buffer_fill  = */ ocl_fill,
    /* .synchronize  = */ ocl_sync,
    /* .supports_op  = */ ocl_supports_op,
    /* .shutdown     = */ ocl_shutdown,
    /* .control      = */ ocl_control,
    /* .ops          = */ NULL, /* set in setup_device: modattn__ocl_encoder_ops() */
    /* .graph        = */ NULL, /* op by op */
};

static int setup_device(ocl_dev *d, cl_platform_id plat, cl_device_id dev, int index, char *why, size_t len) {
    memset(d, 0, sizeof *d);
    d->platform = plat;
    d->device = dev;
    cl_int err;
    d->context = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (!d->context) return modattn__ocl_fail(why, len, "clCreateContext", err);
    d->queue = clCreateCommandQueue(d->context, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    if (!d->queue) {
        clReleaseContext(d->context);
        return modattn__ocl_fail(why, len, "clCreateCommandQueue", err);
    }
    pthread_mutex_init(&d->mu, NULL);
    d->iface = k_template;
    d->iface.id.index = index;
    d->iface.ctx = d;
    d->iface.ops = modattn__ocl_encoder_ops();
    modattn_device_info *in = &d->info;
    clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof in->platform, in->platform, NULL);
    in->platform[sizeof in->platform - 1] = '\0';
    str_info(dev, CL_DEVICE_VENDOR, in->vendor, sizeof in->vendor);
    str_info(dev, CL_DEVICE_NAME, in->model, sizeof in->model);
    char drv[96], ver[160];
    str_info(dev, CL_DRIVER_VERSION, drv, sizeof drv);
    str_info(dev, CL_DEVICE_VERSION, ver, sizeof ver);
    snprintf(in->driver, sizeof in->driver, "%s (%s)", drv, ver);
    cl_ulong u = 0;
    cl_uint cu = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof u, &u, NULL) == CL_SUCCESS) in->memory_bytes = (int64_t)u;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof u, &u, NULL) == CL_SUCCESS) in->max_alloc_bytes = (int64_t)u;
    if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof u, &u, NULL) == CL_SUCCESS) in->local_mem_bytes = (int64_t)u;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL) == CL_SUCCESS) in->compute_units = (int)cu;
    in->fp16 = has_ext(dev, "cl_khr_fp16");
    in->fp64 = has_ext(dev, "cl_khr_fp64");
    in->host_memory = false;
    cl_device_type type = 0;
    d->is_cpu = clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) == CL_SUCCESS && (type & CL_DEVICE_TYPE_CPU);
    if (modattn__env_bool("MODATTN_OPENCL_TILED", false)) d->is_cpu = false; /* force the local-memory kernel (tests) */
    modattn__ocl_tune_clblast(d);
    modattn__ocl_cache_dir(d->cache_dir, sizeof d->cache_dir, in->note, sizeof in->note);
    return 0;
}

int modattn__devices_opencl(const modattn_device_iface **out, int max, char *why, size_t len) {
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err != CL_SUCCESS || np == 0) {
        if (err != CL_SUCCESS) modattn__ocl_fail(why, len, "no OpenCL platform found (clGetPlatformIDs", err);
        else snprintf(why, len, "no OpenCL platform found (no ICD in /etc/OpenCL/vendors)");
        if (err != CL_SUCCESS) {
            size_t k = strlen(why);
            if (k + 1 < len) why[k] = ')', why[k + 1] = '\0';
        }
        return 0;
    }
    cl_platform_id plats[8];
    if (np > 8) np = 8;
    clGetPlatformIDs(np, plats, NULL);
    g_n = 0;
    char last[256] = "";
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        cl_device_id devs[OCL_MAX_DEVICES];
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, devs, &nd);
        if (err != CL_SUCCESS) {
            modattn__ocl_fail(last, sizeof last, "clGetDeviceIDs", err);
            continue;
        }
        if (nd > OCL_MAX_DEVICES) nd = OCL_MAX_DEVICES; /* nd counts them all; devs holds the first 16 */
        for (cl_uint k = 0; k < nd && g_n < OCL_MAX_DEVICES && g_n < max; k++)
            if (setup_device(&g_devs[g_n], plats[p], devs[k], g_n, last, sizeof last) == 0) g_n++;
    }
    for (int i = 0; i < g_n; i++) out[i] = &g_devs[i].iface;
    if (g_n == 0) snprintf(why, len, "%u OpenCL platform%s but no usable device%s%s", np, np == 1 ? "" : "s",
                           last[0] ? ": " : "", last);
    return g_n;
}

