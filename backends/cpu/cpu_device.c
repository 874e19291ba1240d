/* backends/cpu/cpu_device.c — the CPU device: host memory from modattn's allocator, work on the
 * calling thread and the caller's thread pool. Every op of the encoder runs here
 * (cpu_encoder.c), in blocks of MODATTN__GEMM_BLOCK rows. */
#include "backends/cpu/cpu_internal.h"
#include "device/builtins.h" /* modattn__devices_cpu's type */
#include "modattn/backend/device.h"
#include "core/internal_core.h"

#include <stdio.h>
#include <string.h>

static void cpu_info(void *ctx, modattn_device_info *out) {
    (void)ctx;
    const modattn_cpu_features *f = modattn__cpu_get();
    snprintf(out->vendor, sizeof out->vendor, "%s", "host");
    snprintf(out->model, sizeof out->model, "%s", f->model_name);
    modattn__cpu_describe(out->driver, sizeof out->driver);
    out->compute_units = f->logical_cpus;
    out->fp64 = true;
    out->fp16 = f->f16c;
    out->host_memory = true;
    FILE *m = fopen("/proc/meminfo", "r");
    if (m) {
        char line[128];
        long long kb;
        while (fgets(line, sizeof line, m))
            if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) out->memory_bytes = kb * 1024;
        fclose(m);
    }
    out->max_alloc_bytes = out->memory_bytes;
}

static int cpu_alloc(void *ctx, size_t bytes, modattn_mem_category cat, void **handle, void **host, char *reason,
                     size_t len) {
    (void)ctx;
    void *p = modattn__malloc(bytes, cat);
    if (!p) {
        snprintf(reason, len, "%s", modattn_last_error());
        return modattn__mem_last_status();
    }
    *handle = *host = p;
    return 0;
}

static void cpu_free(void *ctx, void *handle) {
    (void)ctx;
    modattn_free(handle);
}

static bool cpu_supports_op(void *ctx, modattn_op op, char *reason, size_t len) {
    (void)ctx;
    if (op == MODATTN_OP_LINEAR_BF16) return modattn__gemm_bf16_available(reason, len);
    if (op == MODATTN_OP_LINEAR_INT8) return modattn__gemm_int8_available(reason, len);
    if (op == MODATTN_OP_LINEAR_BF16X3) return modattn__gemm_bf16x3_available(reason, len);
    return (unsigned)op < MODATTN_OP_COUNT;
}

static const modattn_encoder_ops k_cpu_ops = {
    /* .row_block      = */ MODATTN__GEMM_BLOCK,
    /* .embed          = */ modattn__cpu_embed,
    /* .linear         = */ modattn__cpu_linear,
    /* .pool           = */ modattn__cpu_pool,
    /* .linear_prepare = */ modattn__cpu_linear_prepare,
    /* .linear_release = */ modattn__cpu_linear_release,
    /* .norm           = */ modattn__cpu_norm,
    /* .rotary         = */ modattn__cpu_rotary,
    /* .glu            = */ modattn__cpu_glu,
};

static const modattn_device_iface k_cpu = {
    /* .api_version  = */ MODATTN_DEVICE_API_VERSION,
    /* .id           = */ {MODATTN_DEVICE_CPU, 0},
    /* .ctx          = */ NULL,
    /* .get_info     = */ cpu_info,
    /* .buffer_alloc = */ cpu_alloc,
    /* .buffer_free  = */ cpu_free,
    /* .buffer_write = */ NULL, /* host memory: the layer copies directly */
    /* .buffer_read  = */ NULL,
    /* .buffer_copy  = */ NULL,
    /* .buffer_fill  = */ NULL,
    /* .synchronize  = */ NULL,
    /* .supports_op  = */ cpu_supports_op,
    /* .shutdown     = */ NULL,
    /* .control      = */ NULL,
    /* .ops          = */ &k_cpu_ops,
    /* .graph        = */ NULL, /* op by op */
};

/* The CPU backend's device probe, in the build's generated table like every other backend's
 * (builtins/builtins.c.in; listed as a host backend: probed first, so it is device 0). */
int modattn__devices_cpu(const modattn_device_iface **out, int max, char *why, size_t len) {
    (void)why, (void)len;
    if (max < 1) return 0;
    out[0] = &k_cpu;
    return 1;
}
