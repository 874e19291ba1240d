/* backends/opencl/ocl_device.c — the OpenCL device: every device of every platform, each with
 * one context and one in-order queue with profiling; buffers are cl_mem; programs are compiled
 * from the sources built into the binary and cached on disk per device, driver and source. */
#include "backends/opencl/ocl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "opencl_kernels.h"

static ocl_dev g_devs[OCL_MAX_DEVICES];
static int g_n;

int modattn__ocl_count(void) { return g_n; }
ocl_dev *modattn__ocl_get(int index) { return index >= 0 && index < g_n ? &g_devs[index] : NULL; }

const char *modattn__ocl_errname(cl_int e) {
    switch (e) {
#define E(x) case x: return #x;
        E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
        E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
        E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_BUILD_PROGRAM_FAILURE)
        E(CL_MAP_FAILURE) E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM)
        E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE)
        E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
        E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
        E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION)
        E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET)
        E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_BUFFER_SIZE)
        E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL error";
    }
}

int modattn__ocl_fail(char *reason, size_t len, const char *call, cl_int err) {
    snprintf(reason, len, "%s: %d %s", call, (int)err, modattn__ocl_errname(err));
    return err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ? MODATTN_ENOMEM : MODATTN_EDEVICE;
}

/* ---------------------------------------------------------------- the table's slots */

static void ocl_info(void *ctx, modattn_device_info *out) { *out = ((ocl_dev *)ctx)->info; }

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
    if ((unsigned)op < MODATTN_OP_COUNT && (d->disabled_ops & (1u << op))) {
        snprintf(reason, len, "'%s' disabled by request (MODATTN_DEVICE_CONTROL_DISABLE_OP)", modattn_op_name(op));
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
        if (o < 0 || o >= MODATTN_OP_COUNT) return modattn_error(MODATTN_EINVAL, "unknown op %d", o);
        d->disabled_ops |= 1u << o;
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
    if (getenv("MODATTN_OPENCL_TILED")) d->is_cpu = false; /* force the local-memory kernel (tests) */
    modattn__ocl_tune_clblast(d);
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
        for (cl_uint k = 0; k < nd && g_n < OCL_MAX_DEVICES && g_n < max; k++)
            if (setup_device(&g_devs[g_n], plats[p], devs[k], g_n, last, sizeof last) == 0) g_n++;
    }
    for (int i = 0; i < g_n; i++) out[i] = &g_devs[i].iface;
    if (g_n == 0) snprintf(why, len, "%u OpenCL platform%s but no usable device%s%s", np, np == 1 ? "" : "s",
                           last[0] ? ": " : "", last);
    return g_n;
}

/* ---------------------------------------------------------------- programs */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* The cache folder (created), or "" when there is none. */
static void cache_dir(char *buf, size_t len) {
    const char *e = getenv("MODATTN_CACHE_DIR");
    const char *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (e && *e) snprintf(buf, len, "%s/opencl", e);
    else if (x && *x) snprintf(buf, len, "%s/modattn/opencl", x);
    else if (home && *home) snprintf(buf, len, "%s/.cache/modattn/opencl", home);
    else {
        buf[0] = '\0';
        return;
    }
    /* mkdir -p */
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

static cl_program load_cached(ocl_dev *d, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *bin = NULL;
    cl_program prog = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && n < (64l << 20) && fseek(f, 0, SEEK_SET) == 0 && (bin = malloc((size_t)n)) &&
            fread(bin, 1, (size_t)n, f) == (size_t)n) {
            size_t sz = (size_t)n;
            const unsigned char *bp = bin;
            cl_int st, err;
            prog = clCreateProgramWithBinary(d->context, 1, &d->device, &sz, &bp, &st, &err);
            if (prog && (err != CL_SUCCESS || st != CL_SUCCESS ||
                         clBuildProgram(prog, 1, &d->device, NULL, NULL, NULL) != CL_SUCCESS)) {
                clReleaseProgram(prog);
                prog = NULL;
            }
        }
    }
    free(bin);
    fclose(f);
    return prog;
}

/* Saves the binary atomically (temporary file + rename); a cache that cannot be written is
 * reported once on stderr-free terms: the program still works, it is only compiled again. */
static void save_cached(ocl_dev *d, cl_program prog, const char *path) {
    size_t sz = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL) != CL_SUCCESS || sz == 0) return;
    unsigned char *bin = malloc(sz);
    if (!bin) return;
    unsigned char *bp = bin;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bp, &bp, NULL) == CL_SUCCESS) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            bool ok = write(fd, bin, sz) == (ssize_t)sz && fsync(fd) == 0;
            ok = close(fd) == 0 && ok;
            if (!ok || rename(tmp, path) != 0) unlink(tmp);
        } else if (!d->build_error[0]) {
            snprintf(d->build_error, sizeof d->build_error, "program cache not writable (%s: %s): programs are compiled "
                     "at every start", tmp, strerror(errno));
        }
    }
    free(bin);
}

int modattn__ocl_program(ocl_dev *d, const char *options, cl_program *out, char *reason, size_t len) {
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->nprograms; i++)
        if (strcmp(d->programs[i].options, options) == 0) {
            *out = d->programs[i].program;
            pthread_mutex_unlock(&d->mu);
            return 0;
        }
    if (d->nprograms == (int)(sizeof d->programs / sizeof *d->programs)) {
        pthread_mutex_unlock(&d->mu);
        snprintf(reason, len, "too many program variants");
        return MODATTN_EINTERNAL;
    }
    /* key: device, driver, source and options */
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, d->info.platform, strlen(d->info.platform));
    h = fnv1a(h, d->info.model, strlen(d->info.model));
    h = fnv1a(h, d->info.driver, strlen(d->info.driver));
    h = fnv1a(h, modattn__ocl_kernels_src, sizeof modattn__ocl_kernels_src);
    h = fnv1a(h, options, strlen(options));
    char dir[1024], path[1100];
    cache_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels-%016llx.bin", dir, (unsigned long long)h);
    cl_program prog = dir[0] ? load_cached(d, path) : NULL;
    if (!prog) {
        const char *src = modattn__ocl_kernels_src;
        cl_int err;
        prog = clCreateProgramWithSource(d->context, 1, &src, NULL, &err);
        if (!prog) {
            pthread_mutex_unlock(&d->mu);
            return modattn__ocl_fail(reason, len, "clCreateProgramWithSource", err);
        }
        char opts[128];
        snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s", options);
        err = clBuildProgram(prog, 1, &d->device, opts, NULL, NULL);
        if (err != CL_SUCCESS) {
            char log[900] = "";
            clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
            log[sizeof log - 1] = '\0';
            clReleaseProgram(prog);
            pthread_mutex_unlock(&d->mu);
            int st = modattn__ocl_fail(reason, len, "clBuildProgram", err);
            modattn_error(st, "opencl:%d: building the attention kernels (%s) failed: %d %s; compiler log:\n%s",
                          d->iface.id.index, opts, (int)err, modattn__ocl_errname(err), log);
            return st;
        }
        if (dir[0]) save_cached(d, prog, path);
    }
    ocl_program *p = &d->programs[d->nprograms++];
    snprintf(p->options, sizeof p->options, "%s", options);
    p->program = prog;
    *out = prog;
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* ---------------------------------------------------------------- events -> trace */

int modattn__ocl_finish(ocl_dev *d, cl_event ev, const char *name, const char *impl, const char *shape, double bytes,
                        double flops, char *reason, size_t len) {
    cl_int err = clWaitForEvents(1, &ev);
    cl_int status = CL_COMPLETE;
    if (err == CL_SUCCESS) clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    if (err == CL_SUCCESS && status < 0) err = status; /* the command itself failed */
    if (err == CL_SUCCESS && modattn_trace_enabled()) {
        cl_ulong t0 = 0, t1 = 0;
        uint64_t host_now = modattn_now_ns();
        if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 >= t0) {
            /* the device clock's origin is its own: place the end of the command at (about) now */
            int64_t off = (int64_t)host_now - (int64_t)t1;
            if (!d->clock_known || off < d->clock_offset_ns) d->clock_offset_ns = off, d->clock_known = true;
            modattn_trace_record(name, impl, shape, bytes, flops, MODATTN_TRACE_DEVICE_TRACK(MODATTN_DEVICE_OPENCL, d->iface.id.index),
                                 (uint64_t)((int64_t)t0 + d->clock_offset_ns), (uint64_t)((int64_t)t1 + d->clock_offset_ns));
        }
    }
    clReleaseEvent(ev);
    return err == CL_SUCCESS ? 0 : modattn__ocl_fail(reason, len, "kernel execution", err);
}
