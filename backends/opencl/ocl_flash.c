/* backends/opencl/ocl_flash.c — opencl_flash: our tiled flash-style attention on an OpenCL
 * device (kernel: kernels/attention.cl, flash_fwd). Q rows in private memory, K/V tiles in local
 * memory, online softmax, no Sq x Sk buffer. The whole contract: head dims up to 256, causal
 * bottom-right, sliding windows (key tiles left of a work-group's window are not loaded), ALiBi,
 * softcapping, kv_lens, broadcast masks, GQA/MQA, LSE, any strides. The workspace holds kv_lens and
 * the ALiBi slopes on the device. */
#include "backends/opencl/ocl.h"
#include "device/internal_device.h"

#include <stdio.h>
#include <string.h>

#define OCL_BM 32
#define OCL_MAXD 256

/* Rows of K and V per tile: 32, or fewer where local memory is small (GPUs at D = 256). */
static int tile_rows(const ocl_dev *d, int64_t D, int64_t Dv) {
    int bn = 32;
    const int64_t row = ((D + 3) / 4 + (Dv + 3) / 4) * 16; /* bytes of one padded K and V row */
    while (bn > 4 && (int64_t)bn * row > d->info.local_mem_bytes - 1024) bn /= 2;
    return bn;
}

bool modattn__ocl_common_supports(const modattn_attn_desc *d, char *reason, size_t len) {
    if (d->device.kind != MODATTN_DEVICE_OPENCL) {
        snprintf(reason, len, "runs on OpenCL tensors");
        return false;
    }
    if (!modattn__ocl_get(d->device.index)) {
        snprintf(reason, len, "no OpenCL device %d in this process", d->device.index);
        return false;
    }
    if (d->dtype != MODATTN_DTYPE_F32) {
        snprintf(reason, len, "fp32 only (got %s)", modattn_dtype_name(d->dtype));
        return false;
    }
    if (d->B * d->Hq > 65535ll * 1024 || d->Sq > (1ll << 30) || d->Sk > (1ll << 30)) {
        snprintf(reason, len, "B*Hq, Sq or Sk beyond the kernel's index range");
        return false;
    }
    return true;
}

static bool flash_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx;
    if (!modattn__ocl_common_supports(d, reason, len)) return false;
    if (d->D > OCL_MAXD || d->Dv > OCL_MAXD) {
        snprintf(reason, len, "head dims up to %d (D=%lld, Dv=%lld): the row lives in private memory", OCL_MAXD,
                 (long long)d->D, (long long)d->Dv);
        return false;
    }
    const ocl_dev *dev = modattn__ocl_get(d->device.index);
    /* the tiled kernel (GPUs) needs at least 4 padded K and V rows in local memory; the
     * barrier-free one (CPU drivers) none */
    const int64_t rows4 = 4 * ((d->D + 3) / 4 + (d->Dv + 3) / 4) * 16;
    if (!dev->is_cpu && rows4 > dev->info.local_mem_bytes - 1024) {
        snprintf(reason, len, "the device's local memory (%lld bytes) cannot hold 4 K and V rows of D=%lld, Dv=%lld",
                 (long long)dev->info.local_mem_bytes, (long long)d->D, (long long)d->Dv);
        return false;
    }
    return true;
}

static size_t kvl_part(const modattn_attn_desc *d) { return d->has_kv_lens ? ((size_t)d->B * 4 + 255) / 256 * 256 : 0; }

size_t modattn__ocl_extras_bytes(const modattn_attn_desc *d) {
    return kvl_part(d) + (d->has_alibi ? ((size_t)d->Hq * 4 + 255) / 256 * 256 : 0);
}

static size_t flash_workspace(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx, (void)nthreads;
    return modattn__ocl_extras_bytes(d);
}

/* Element offset of a buffer-form tensor, and its strides, for the kernel's arguments. */
static void view_args(const modattn_tensor *t, bool present, cl_long out[5], bool bcast) {
    memset(out, 0, 5 * sizeof *out);
    if (!present) return;
    out[0] = (cl_long)(t->offset / (int64_t)sizeof(float));
    for (int i = 0; i < 4; i++) out[1 + i] = (cl_long)t->stride[i];
    if (bcast) { /* broadcast dims of the mask step by 0 */
        if (t->shape[0] == 1) out[1] = 0;
        if (t->shape[1] == 1) out[2] = 0;
    }
}

/* Uploads kv_lens into the workspace (if any); returns its cl_mem or NULL. */
int modattn__ocl_upload_kvl(ocl_dev *dev, const modattn_attn_desc *d, const modattn_attn_call *c, void *workspace,
                            cl_mem *out, cl_mem *slopes, cl_int *sl0, char *reason, size_t len) {
    *out = NULL, *slopes = NULL, *sl0 = 0;
    if (!d->has_kv_lens && !d->has_alibi) return 0;
    modattn_buffer *ws = workspace;
    if (!ws || ws->bytes < modattn__ocl_extras_bytes(d)) {
        snprintf(reason, len, "workspace too small for kv_lens and ALiBi slopes");
        return MODATTN_EINTERNAL;
    }
    cl_int err;
    if (d->has_kv_lens) {
        err = clEnqueueWriteBuffer(dev->queue, (cl_mem)ws->handle, CL_TRUE, 0, (size_t)d->B * sizeof(int32_t),
                                   c->kv_lens, 0, NULL, NULL);
        if (err != CL_SUCCESS) return modattn__ocl_fail(reason, len, "clEnqueueWriteBuffer (kv_lens)", err);
        *out = (cl_mem)ws->handle;
    }
    if (d->has_alibi) {
        err = clEnqueueWriteBuffer(dev->queue, (cl_mem)ws->handle, CL_TRUE, kvl_part(d), (size_t)d->Hq * sizeof(float),
                                   c->alibi_slopes, 0, NULL, NULL);
        if (err != CL_SUCCESS) return modattn__ocl_fail(reason, len, "clEnqueueWriteBuffer (alibi_slopes)", err);
        *slopes = (cl_mem)ws->handle;
        *sl0 = (cl_int)(kvl_part(d) / sizeof(float));
    }
    return 0;
}

static int flash_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *workspace,
                     size_t ws_bytes, const modattn_exec *exec, char *reason, size_t len) {
    (void)ctx, (void)ws_bytes, (void)exec;
    ocl_dev *dev = modattn__ocl_get(d->device.index);
    if (d->Sq == 0 || d->B == 0 || d->Hq == 0) return 0;
    int bn = tile_rows(dev, d->D, d->Dv);
    const bool direct = dev->is_cpu;
    const int bm = OCL_BM;
    char opts[64];
    snprintf(opts, sizeof opts, "-DBM=%d -DBN=%d", bm, bn);
    cl_program prog;
    int st = modattn__ocl_program(dev, opts, &prog, reason, len);
    if (st) return st;
    cl_mem kvl, slopes;
    cl_int sl0;
    if ((st = modattn__ocl_upload_kvl(dev, d, c, workspace, &kvl, &slopes, &sl0, reason, len))) return st;

    cl_long qa[5], ka[5], va[5], oa[5], ma[5], la[5];
    view_args(&c->q, true, qa, false), view_args(&c->k, true, ka, false), view_args(&c->v, true, va, false);
    view_args(&c->o, true, oa, false), view_args(&c->mask, d->has_mask, ma, true), view_args(&c->lse, d->has_lse, la, false);
    cl_mem mq = modattn__ocl_mem(&c->q), mk = modattn__ocl_mem(&c->k), mv = modattn__ocl_mem(&c->v);
    cl_mem mo = modattn__ocl_mem(&c->o), mm = d->has_mask ? modattn__ocl_mem(&c->mask) : NULL;
    cl_mem ml = d->has_lse ? modattn__ocl_mem(&c->lse) : NULL;
    cl_int Hq = (cl_int)d->Hq, G = (cl_int)(d->Hkv ? d->Hq / d->Hkv : 1), Sq = (cl_int)d->Sq, Sk = (cl_int)d->Sk;
    cl_int D = (cl_int)d->D, Dv = (cl_int)d->Dv;
    cl_float scale = d->scale;
    cl_int flags = (d->has_mask ? 1 : 0) | (d->has_lse ? 2 : 0) | (d->has_kv_lens ? 4 : 0) | (d->causal ? 8 : 0) |
                   (d->has_alibi ? 16 : 0);
    cl_int wl = (cl_int)d->window_left, wr = (cl_int)d->window_right; /* -1 unbounded; below Sk (describe) */
    cl_float softcap = d->softcap;

    /* a kernel object per call: argument setting is then private to this call (thread-safe) */
    cl_int err;
    /* CPU drivers: the barrier-free variant (see kernels/attention.cl); GPUs: local-memory tiles */
    cl_kernel k = clCreateKernel(prog, direct ? "flash_fwd_direct" : "flash_fwd", &err);
    if (!k) return modattn__ocl_fail(reason, len, "clCreateKernel(flash_fwd)", err);
    cl_uint a = 0;
    err = CL_SUCCESS;
#define ARG(v) err |= clSetKernelArg(k, a++, sizeof(v), &(v))
#define VIEW(mem, arr, n) do { ARG(mem); for (int _i = 0; _i < (n); _i++) ARG(arr[_i]); } while (0)
    VIEW(mq, qa, 5); VIEW(mk, ka, 5); VIEW(mv, va, 5); VIEW(mo, oa, 5); VIEW(mm, ma, 5); VIEW(ml, la, 4);
    ARG(kvl); ARG(Hq); ARG(G); ARG(Sq); ARG(Sk); ARG(D); ARG(Dv); ARG(scale); ARG(flags);
    ARG(wl); ARG(wr); ARG(softcap); ARG(slopes); ARG(sl0);
    if (!direct) {
        err |= clSetKernelArg(k, a++, (size_t)bn * (size_t)((D + 3) / 4 * 4) * sizeof(float), NULL);
        err |= clSetKernelArg(k, a++, (size_t)bn * (size_t)((Dv + 3) / 4 * 4) * sizeof(float), NULL);
    }
#undef VIEW
#undef ARG
    if (err != CL_SUCCESS) {
        clReleaseKernel(k);
        snprintf(reason, len, "clSetKernelArg(flash_fwd) failed");
        return MODATTN_EDEVICE;
    }
    size_t local[2] = {(size_t)bm, 1};
    size_t global[2] = {(size_t)((d->Sq + bm - 1) / bm) * bm, (size_t)(d->B * d->Hq)};
    cl_event ev;
    err = clEnqueueNDRangeKernel(dev->queue, k, 2, NULL, global, local, 0, NULL, &ev);
    clReleaseKernel(k);
    if (err != CL_SUCCESS) return modattn__ocl_fail(reason, len, "clEnqueueNDRangeKernel(flash_fwd)", err);
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lldx%lldx%lld%s", (long long)d->B, (long long)d->Hq,
             (long long)d->Hkv, (long long)d->Sq, (long long)d->Sk, (long long)d->D, d->causal ? "c" : "");
    return modattn__ocl_finish(dev, ev, direct ? "opencl.flash_fwd_direct" : "opencl.flash_fwd", "opencl_flash", shape, 0, modattn_attn_desc_flops(d), reason,
                               len);
}

int modattn__ocl_impl_init(void *ctx, char *reason, size_t len) {
    (void)ctx;
    modattn__devices_init();
    if (modattn__ocl_count() == 0) {
        snprintf(reason, len, "no OpenCL device: %s", modattn_device_absent_reasons());
        return MODATTN_EUNSUPPORTED;
    }
    return 0;
}

static const modattn_attn_impl k_impl = {
    /* .api_version     = */ MODATTN_IMPL_API_VERSION,
    /* .name            = */ "opencl_flash",
    /* .description     = */ "tiled online-softmax attention in OpenCL C (Q rows private, K/V tiles in local memory)",
    /* .device          = */ MODATTN_DEVICE_OPENCL,
    /* .priority        = */ 20,
    /* .ctx             = */ NULL,
    /* .init            = */ modattn__ocl_impl_init,
    /* .shutdown        = */ NULL,
    /* .supports        = */ flash_supports,
    /* .workspace_bytes = */ flash_workspace,
    /* .run             = */ flash_run,
    /* .control         = */ NULL,
};

const modattn_attn_impl *modattn__backend_opencl_flash(void) { return &k_impl; }
