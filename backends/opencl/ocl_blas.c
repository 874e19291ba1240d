/* backends/opencl/ocl_blas.c — opencl_blas: the "native" path on OpenCL. S = Q·Kᵀ and O = P·V
 * through CLBlast's batched SGEMM (one GEMM per (batch, head), GQA by the K/V offsets), and a
 * softmax kernel in between (kernels/attention.cl: softmax_rows) that applies scale, softcap,
 * ALiBi, causal, the window, kv_lens and the mask and writes LSE (every score is computed: a
 * window saves nothing here). The workspace holds kv_lens, the ALiBi slopes and the
 * [B*Hq, Sq, Sk] scores. Needs stride 1 on the head dim (CLBlast's matrices are row-major with a leading dim). */
#include "backends/opencl/ocl.h"

#include <clblast_c.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CHUNK 256 /* GEMMs per batched call (the offset arrays live on the stack) */

static size_t kvl_bytes(const modattn_attn_desc *d) { return modattn__ocl_extras_bytes(d); } /* kv_lens, slopes */

/* The scores' bytes, or 0 when they overflow (supports() refuses those shapes). */
static size_t score_bytes(const modattn_attn_desc *d) {
    uint64_t n = 4;
    const int64_t f[4] = {d->B, d->Hq, d->Sq, d->Sk};
    for (int i = 0; i < 4; i++)
        if (f[i] < 0 || __builtin_mul_overflow(n, (uint64_t)f[i], &n) || n > (uint64_t)SIZE_MAX / 2) return 0;
    return (size_t)n;
}

static size_t blas_workspace(void *ctx, const modattn_attn_desc *d, int nthreads) {
    (void)ctx, (void)nthreads;
    return kvl_bytes(d) + score_bytes(d);
}

static bool blas_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    if (!modattn__ocl_common_supports(d, reason, len)) return false;
    if (!d->inner_contiguous) {
        snprintf(reason, len, "needs stride 1 on the last dim of every tensor (CLBlast matrices)");
        return false;
    }
    const ocl_dev *dev = modattn__ocl_get(d->device.index);
    if (score_bytes(d) == 0 && d->B * d->Hq * d->Sq * d->Sk != 0) {
        snprintf(reason, len, "the B*Hq*Sq*Sk score buffer's size overflows");
        return false;
    }
    double need = (double)blas_workspace(ctx, d, 1);
    if (need > (double)dev->info.max_alloc_bytes) {
        snprintf(reason, len, "the %.0f-byte score buffer exceeds the device's largest buffer (%lld bytes)", need,
                 (long long)dev->info.max_alloc_bytes);
        return false;
    }
    return true;
}

static int clblast_fail(char *reason, size_t len, const char *what, CLBlastStatusCode s) {
    snprintf(reason, len, "CLBlast %s failed: status %d", what, (int)s);
    return s == CLBlastOpenCLOutOfHostMemory || s == CLBlastOpenCLOutOfResources ? MODATTN_ENOMEM : MODATTN_EDEVICE;
}

static int enqueue(ocl_dev *dev, cl_kernel k, size_t n, const char *name, const char *shape, double flops, char *reason,
                   size_t len) {
    cl_event ev;
    cl_int err = clEnqueueNDRangeKernel(dev->queue, k, 1, NULL, &n, NULL, 0, NULL, &ev);
    if (err != CL_SUCCESS) return modattn__ocl_fail(reason, len, "clEnqueueNDRangeKernel", err);
    return modattn__ocl_finish(dev, ev, name, "opencl_blas", shape, 0, flops, reason, len);
}

static int blas_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *workspace,
                    size_t ws_bytes, const modattn_exec *exec, char *reason, size_t len) {
    (void)ctx, (void)ws_bytes, (void)exec;
    ocl_dev *dev = modattn__ocl_get(d->device.index);
    if (d->Sq == 0 || d->B == 0 || d->Hq == 0) return 0;
    cl_program prog;
    int st = modattn__ocl_program(dev, "-DBM=32 -DBN=32", &prog, reason, len);
    if (st) return st;
    cl_mem kvl, slopes;
    cl_int sl0;
    if ((st = modattn__ocl_upload_kvl(dev, d, c, workspace, &kvl, &slopes, &sl0, reason, len))) return st;
    modattn_buffer *ws = workspace;
    cl_mem S = ws ? (cl_mem)ws->handle : NULL; /* none when there are no scores (Sk = 0) */
    size_t s0 = kvl_bytes(d) / sizeof(float); /* scores start after kv_lens */
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lldx%lldx%lld%s", (long long)d->B, (long long)d->Hq,
             (long long)d->Hkv, (long long)d->Sq, (long long)d->Sk, (long long)d->D, d->causal ? "c" : "");
    int64_t G = d->Hkv ? d->Hq / d->Hkv : 1, BH = d->B * d->Hq;
    size_t qo = (size_t)c->q.offset / 4, ko = (size_t)c->k.offset / 4, vo = (size_t)c->v.offset / 4, oo = (size_t)c->o.offset / 4;
    size_t ao[CHUNK], bo[CHUNK], co[CHUNK];
    float alphas[CHUNK], betas[CHUNK];
    for (int i = 0; i < CHUNK; i++) alphas[i] = 1.0f, betas[i] = 0.0f;

    /* O is written with beta = 0: zero its view first so no NaN already there can leak in */
    cl_int err;
    cl_kernel kz = clCreateKernel(prog, "zero_view", &err);
    if (!kz) return modattn__ocl_fail(reason, len, "clCreateKernel(zero_view)", err);
    {
        cl_mem mo = modattn__ocl_mem(&c->o);
        cl_long x0 = (cl_long)oo, st0 = c->o.stride[0], st1 = c->o.stride[1], st2 = c->o.stride[2], st3 = c->o.stride[3];
        cl_int d1 = (cl_int)d->Hq, d2 = (cl_int)d->Sq, d3 = (cl_int)d->Dv;
        cl_uint a = 0;
        err = clSetKernelArg(kz, a++, sizeof mo, &mo);
        err |= clSetKernelArg(kz, a++, sizeof x0, &x0);
        err |= clSetKernelArg(kz, a++, sizeof st0, &st0);
        err |= clSetKernelArg(kz, a++, sizeof st1, &st1);
        err |= clSetKernelArg(kz, a++, sizeof st2, &st2);
        err |= clSetKernelArg(kz, a++, sizeof st3, &st3);
        err |= clSetKernelArg(kz, a++, sizeof d1, &d1);
        err |= clSetKernelArg(kz, a++, sizeof d2, &d2);
        err |= clSetKernelArg(kz, a++, sizeof d3, &d3);
        st = err != CL_SUCCESS ? (snprintf(reason, len, "clSetKernelArg(zero_view) failed"), MODATTN_EDEVICE)
                               : enqueue(dev, kz, (size_t)(d->B * d->Hq * d->Sq), "opencl.zero_o", shape, 0, reason, len);
        clReleaseKernel(kz);
        if (st) return st;
    }
    if (d->Sk == 0) goto softmax; /* no keys: S is empty, O stays 0, LSE = -inf */

    /* S[bh] = Q[b,h] · K[b,h/G]ᵀ */
    for (int64_t base = 0; base < BH; base += CHUNK) {
        size_t n = (size_t)(BH - base < CHUNK ? BH - base : CHUNK);
        for (size_t t = 0; t < n; t++) {
            int64_t bh = base + (int64_t)t, b = bh / d->Hq, h = bh % d->Hq;
            ao[t] = qo + (size_t)(b * c->q.stride[0] + h * c->q.stride[1]);
            bo[t] = ko + (size_t)(b * c->k.stride[0] + (h / G) * c->k.stride[1]);
            co[t] = s0 + (size_t)bh * (size_t)(d->Sq * d->Sk);
        }
        cl_event ev;
        CLBlastStatusCode s = CLBlastSgemmBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                                  (size_t)d->Sq, (size_t)d->Sk, (size_t)d->D, alphas,
                                                  modattn__ocl_mem(&c->q), ao, (size_t)c->q.stride[2],
                                                  modattn__ocl_mem(&c->k), bo, (size_t)c->k.stride[2], betas, S, co,
                                                  (size_t)d->Sk, n, &dev->queue, &ev);
        if (s != CLBlastSuccess) return clblast_fail(reason, len, "SgemmBatched (Q·Kᵀ)", s);
        if ((st = modattn__ocl_finish(dev, ev, "opencl.gemm_qk", "opencl_blas", shape, 0,
                                      2.0 * (double)n * d->Sq * d->Sk * d->D, reason, len)))
            return st;
    }
softmax:;
    cl_kernel ks = clCreateKernel(prog, "softmax_rows", &err);
    if (!ks) return modattn__ocl_fail(reason, len, "clCreateKernel(softmax_rows)", err);
    {
        cl_mem mm = d->has_mask ? modattn__ocl_mem(&c->mask) : NULL, ml = d->has_lse ? modattn__ocl_mem(&c->lse) : NULL;
        cl_long m0 = 0, ms0 = 0, ms1 = 0, ms2 = 0, ms3 = 0, l0 = 0, ls0 = 0, ls1 = 0, ls2 = 0;
        if (d->has_mask) {
            m0 = c->mask.offset / 4, ms2 = c->mask.stride[2], ms3 = c->mask.stride[3];
            ms0 = c->mask.shape[0] == 1 ? 0 : c->mask.stride[0];
            ms1 = c->mask.shape[1] == 1 ? 0 : c->mask.stride[1];
        }
        if (d->has_lse) l0 = c->lse.offset / 4, ls0 = c->lse.stride[0], ls1 = c->lse.stride[1], ls2 = c->lse.stride[2];
        cl_int B = (cl_int)d->B, Hq = (cl_int)d->Hq, Sq = (cl_int)d->Sq, Sk = (cl_int)d->Sk;
        cl_float scale = d->scale;
        cl_int flags = (d->has_mask ? 1 : 0) | (d->has_lse ? 2 : 0) | (d->has_kv_lens ? 4 : 0) | (d->causal ? 8 : 0) |
                       (d->has_alibi ? 16 : 0);
        cl_int wl = (cl_int)d->window_left, wr = (cl_int)d->window_right;
        cl_float softcap = d->softcap;
        cl_long soff = (cl_long)s0;
        cl_uint a = 0;
        err = clSetKernelArg(ks, a++, sizeof S, &S);
        err |= clSetKernelArg(ks, a++, sizeof soff, &soff);
        err |= clSetKernelArg(ks, a++, sizeof mm, &mm);
        err |= clSetKernelArg(ks, a++, sizeof m0, &m0);
        err |= clSetKernelArg(ks, a++, sizeof ms0, &ms0);
        err |= clSetKernelArg(ks, a++, sizeof ms1, &ms1);
        err |= clSetKernelArg(ks, a++, sizeof ms2, &ms2);
        err |= clSetKernelArg(ks, a++, sizeof ms3, &ms3);
        err |= clSetKernelArg(ks, a++, sizeof ml, &ml);
        err |= clSetKernelArg(ks, a++, sizeof l0, &l0);
        err |= clSetKernelArg(ks, a++, sizeof ls0, &ls0);
        err |= clSetKernelArg(ks, a++, sizeof ls1, &ls1);
        err |= clSetKernelArg(ks, a++, sizeof ls2, &ls2);
        err |= clSetKernelArg(ks, a++, sizeof kvl, &kvl);
        err |= clSetKernelArg(ks, a++, sizeof B, &B);
        err |= clSetKernelArg(ks, a++, sizeof Hq, &Hq);
        err |= clSetKernelArg(ks, a++, sizeof Sq, &Sq);
        err |= clSetKernelArg(ks, a++, sizeof Sk, &Sk);
        err |= clSetKernelArg(ks, a++, sizeof scale, &scale);
        err |= clSetKernelArg(ks, a++, sizeof flags, &flags);
        err |= clSetKernelArg(ks, a++, sizeof wl, &wl);
        err |= clSetKernelArg(ks, a++, sizeof wr, &wr);
        err |= clSetKernelArg(ks, a++, sizeof softcap, &softcap);
        err |= clSetKernelArg(ks, a++, sizeof slopes, &slopes);
        err |= clSetKernelArg(ks, a++, sizeof sl0, &sl0);
        st = err != CL_SUCCESS ? (snprintf(reason, len, "clSetKernelArg(softmax_rows) failed"), MODATTN_EDEVICE)
                               : enqueue(dev, ks, (size_t)(BH * d->Sq), "opencl.softmax", shape, 0, reason, len);
        clReleaseKernel(ks);
        if (st) return st;
    }
    if (d->Sk == 0) return 0;

    /* O[b,h] = P[bh] · V[b,h/G] */
    for (int64_t base = 0; base < BH; base += CHUNK) {
        size_t n = (size_t)(BH - base < CHUNK ? BH - base : CHUNK);
        for (size_t t = 0; t < n; t++) {
            int64_t bh = base + (int64_t)t, b = bh / d->Hq, h = bh % d->Hq;
            ao[t] = s0 + (size_t)bh * (size_t)(d->Sq * d->Sk);
            bo[t] = vo + (size_t)(b * c->v.stride[0] + (h / G) * c->v.stride[1]);
            co[t] = oo + (size_t)(b * c->o.stride[0] + h * c->o.stride[1]);
        }
        cl_event ev;
        CLBlastStatusCode s = CLBlastSgemmBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo,
                                                  (size_t)d->Sq, (size_t)d->Dv, (size_t)d->Sk, alphas, S, ao,
                                                  (size_t)d->Sk, modattn__ocl_mem(&c->v), bo, (size_t)c->v.stride[2],
                                                  betas, modattn__ocl_mem(&c->o), co, (size_t)c->o.stride[2], n,
                                                  &dev->queue, &ev);
        if (s != CLBlastSuccess) return clblast_fail(reason, len, "SgemmBatched (P·V)", s);
        if ((st = modattn__ocl_finish(dev, ev, "opencl.gemm_pv", "opencl_blas", shape, 0,
                                      2.0 * (double)n * d->Sq * d->Sk * d->Dv, reason, len)))
            return st;
    }
    return 0;
}

static void blas_shutdown(void *ctx) {
    (void)ctx;
    CLBlastClearCache(); /* CLBlast's compiled programs hold the contexts */
}

static const modattn_attn_impl k_impl = {
    /* .api_version     = */ MODATTN_IMPL_API_VERSION,
    /* .name            = */ "opencl_blas",
    /* .description     = */ "CLBlast batched SGEMM for Q·Kᵀ and P·V with a softmax kernel between (scores in workspace)",
    /* .device          = */ MODATTN_DEVICE_OPENCL,
    /* .priority        = */ 10,
    /* .ctx             = */ NULL,
    /* .init            = */ modattn__ocl_impl_init,
    /* .shutdown        = */ blas_shutdown,
    /* .supports        = */ blas_supports,
    /* .workspace_bytes = */ blas_workspace,
    /* .run             = */ blas_run,
    /* .control         = */ NULL,
};

const modattn_attn_impl *modattn__backend_opencl_blas(void) { return &k_impl; }
