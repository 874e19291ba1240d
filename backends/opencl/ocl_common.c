/* backends/opencl/ocl_common.c — what every file of the OpenCL backend uses: OpenCL error text,
 * the program cache (compiled once per device, on disk per device, driver and source), and
 * kernel completion with its trace span on the device's track. The bottom of the folder. */
#include "backends/opencl/ocl.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opencl_kernels.h"

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

/* ---------------------------------------------------------------- programs */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* The cache folder (created), or "" when there is none; `note` says which, or why not. */
void modattn__ocl_cache_dir(char *buf, size_t len, char *note, size_t nlen) {
    const char *e = getenv("MODATTN_CACHE_DIR");
    const char *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (e && *e) snprintf(buf, len, "%s/opencl", e);
    else if (x && *x) snprintf(buf, len, "%s/modattn/opencl", x);
    else if (home && *home) snprintf(buf, len, "%s/.cache/modattn/opencl", home);
    else {
        buf[0] = '\0';
        snprintf(note, nlen, "no program cache (no MODATTN_CACHE_DIR, XDG_CACHE_HOME or HOME): kernels are compiled at "
                             "every start");
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
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(buf, W_OK) != 0) {
        snprintf(note, nlen, "program cache %s is not a writable folder (%s): kernels are compiled at every start", buf,
                 strerror(errno ? errno : ENOTDIR));
        buf[0] = '\0';
        return;
    }
    snprintf(note, nlen, "program cache %s", buf);
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
        } else {
            snprintf(d->info.note, sizeof d->info.note, "program cache not writable (%s: %s): kernels are compiled at every "
                     "start", tmp, strerror(errno));
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
    const char *dir = d->cache_dir;
    char path[1100];
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
            /* the log goes into the reason too (as much as fits): callers wrap the reason in their
             * own message, which replaces this thread's */
            size_t k = strlen(reason);
            if (k + 16 < len) snprintf(reason + k, len - k, "; compiler log: %s", log);
            modattn__error(st, "opencl:%d: building the kernels (%s) failed: %d %s; compiler log:\n%s",
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
    if (err == CL_SUCCESS && modattn__trace_enabled()) {
        cl_ulong t0 = 0, t1 = 0;
        uint64_t host_now = modattn__now_ns();
        if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 >= t0) {
            /* the device clock's origin is its own: place the end of the command at (about) now */
            int64_t off = (int64_t)host_now - (int64_t)t1;
            pthread_mutex_lock(&d->mu);
            if (!d->clock_known || off < d->clock_offset_ns) d->clock_offset_ns = off, d->clock_known = true;
            off = d->clock_offset_ns;
            pthread_mutex_unlock(&d->mu);
            modattn__trace_record(name, impl, shape, bytes, flops, MODATTN_TRACE_DEVICE_TRACK(MODATTN_DEVICE_OPENCL, d->iface.id.index),
                                 (uint64_t)((int64_t)t0 + off), (uint64_t)((int64_t)t1 + off));
        }
    }
    clReleaseEvent(ev);
    return err == CL_SUCCESS ? 0 : modattn__ocl_fail(reason, len, "kernel execution", err);
}
