/* backends/opencl/ocl_encoder.c — the encoder's ops on an OpenCL device: embedding gather +
 * LayerNorm, linear (CLBlast SGEMM, then one epilogue kernel for bias, activation, LayerNorm and
 * the padding rows), pooling and L2 normalisation (kernels/encoder.cl). Each kernel is a span on
 * the device's trace track, timed by its profiling event. */
#include "backends/opencl/ocl.h"

#include <stdio.h>
#include <string.h>

#ifdef MODATTN_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#define WG 64
#define PROGRAM_OPTS "-DBM=32 -DBN=32"

static cl_mem mem(const modattn_buffer *b) { return b ? (cl_mem)b->handle : NULL; }

typedef struct kargs {
    cl_kernel k;
    cl_uint n;
    cl_int err;
} kargs;

static void karg(kargs *a, size_t size, const void *v) {
    if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->k, a->n, size, v);
    a->n++;
}
#define KARG(a, v) karg(&(a), sizeof(v), &(v))

static int launch(ocl_dev *d, const char *kernel_name, kargs *a, size_t global, size_t local, const char *span,
                  double flops, char *reason, size_t len) {
    if (a->err != CL_SUCCESS) {
        clReleaseKernel(a->k);
        return modattn__ocl_fail(reason, len, "clSetKernelArg", a->err);
    }
    cl_event ev;
    cl_int err = clEnqueueNDRangeKernel(d->queue, a->k, 1, NULL, &global, local ? &local : NULL, 0, NULL, &ev);
    clReleaseKernel(a->k);
    if (err != CL_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", kernel_name);
        return modattn__ocl_fail(reason, len, what, err);
    }
    return modattn__ocl_finish(d, ev, span, "opencl", "", 0, flops, reason, len);
}

static int kernel(ocl_dev *d, const char *name, kargs *a, char *reason, size_t len) {
    cl_program prog;
    int st = modattn__ocl_program(d, PROGRAM_OPTS, &prog, reason, len);
    if (st) return st;
    cl_int err;
    memset(a, 0, sizeof *a);
    a->k = clCreateKernel(prog, name, &err);
    if (!a->k) {
        char what[96];
        snprintf(what, sizeof what, "clCreateKernel(%s)", name);
        return modattn__ocl_fail(reason, len, what, err);
    }
    return 0;
}

static int op_embed(void *ctx, const modattn_op_embed_args *e, char *reason, size_t len) {
    ocl_dev *d = ctx;
    kargs a;
    int st = kernel(d, "embed_ln", &a, reason, len);
    if (st) return st;
    cl_mem ids = mem(e->ids), lens = mem(e->lens), word = mem(e->word), pos = mem(e->pos), type0 = mem(e->type0);
    cl_mem g = mem(e->gamma), bt = mem(e->beta), x = mem(e->x);
    cl_int S = (cl_int)e->S, H = (cl_int)e->H, has_pids = e->pos_ids != NULL, plain = e->plain;
    cl_float eps = e->eps;
    cl_mem pids = e->pos_ids ? mem(e->pos_ids) : ids; /* any buffer when unused */
    KARG(a, ids), KARG(a, lens), KARG(a, word), KARG(a, pos), KARG(a, type0), KARG(a, g), KARG(a, bt), KARG(a, x);
    KARG(a, S), KARG(a, H), KARG(a, eps), KARG(a, pids), KARG(a, has_pids), KARG(a, plain);
    return launch(d, "embed_ln", &a, (size_t)(e->B * e->S) * WG, WG, "opencl.embed_ln", 0, reason, len);
}

static int op_linear(void *ctx, const modattn_op_linear_args *l, char *reason, size_t len) {
    ocl_dev *d = ctx;
    int st;
#ifdef MODATTN_HAVE_CLBLAST
    cl_event ev;
    CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, (size_t)l->rows,
                                       (size_t)l->N, (size_t)l->K, 1.0f, mem(l->a), 0, (size_t)l->lda, mem(l->w), 0,
                                       (size_t)l->K, l->accumulate ? 1.0f : 0.0f, mem(l->y), 0, (size_t)l->ldy,
                                       &d->queue, &ev);
    if (s != CLBlastSuccess) {
        snprintf(reason, len, "CLBlast Sgemm [%lld x %lld] x [%lld x %lld]^T failed: status %d", (long long)l->rows,
                 (long long)l->K, (long long)l->N, (long long)l->K, (int)s);
        return s == CLBlastOpenCLOutOfResources || s == CLBlastOpenCLOutOfHostMemory ? MODATTN_ENOMEM : MODATTN_EDEVICE;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "[%lld x %lld] x [%lld x %lld]^T", (long long)l->rows, (long long)l->K,
             (long long)l->N, (long long)l->K);
    st = modattn__ocl_finish(d, ev, "opencl.sgemm", "clblast", shape, 0, 2.0 * (double)l->rows * l->N * l->K, reason,
                                 len);
    if (st) return st;
#else
    (void)d;
    snprintf(reason, len, "this build has no CLBlast (libclblast-dev) for the encoder's GEMMs");
    return MODATTN_EUNSUPPORTED;
#endif
    kargs a;
    if ((st = kernel(d, "row_epilogue", &a, reason, len))) return st;
    cl_mem y = mem(l->y), bias = mem(l->bias), lens = mem(l->lens), g = mem(l->gamma), bt = mem(l->beta);
    cl_long y0 = 0, ldy = l->ldy;
    cl_int S = (cl_int)l->S, N = (cl_int)l->N, act = (cl_int)l->act, has_ln = l->gamma != NULL;
    cl_float eps = l->eps;
    KARG(a, y), KARG(a, y0), KARG(a, ldy), KARG(a, bias), KARG(a, lens), KARG(a, S), KARG(a, N), KARG(a, act);
    KARG(a, has_ln), KARG(a, g), KARG(a, bt), KARG(a, eps);
    return launch(d, "row_epilogue", &a, (size_t)l->rows * WG, WG, has_ln ? "opencl.bias_layernorm" : "opencl.bias_act", 0,
                  reason, len);
}

static int op_pool(void *ctx, const modattn_op_pool_args *p, char *reason, size_t len) {
    ocl_dev *d = ctx;
    kargs a;
    int st = kernel(d, "pool_rows", &a, reason, len);
    if (st) return st;
    cl_mem x = mem(p->x), lens = mem(p->lens), out = mem(p->out);
    cl_int B = (cl_int)p->B, S = (cl_int)p->S, H = (cl_int)p->H, modes = (cl_int)p->modes, dim = (cl_int)p->dim;
    KARG(a, x), KARG(a, lens), KARG(a, B), KARG(a, S), KARG(a, H), KARG(a, modes), KARG(a, out), KARG(a, dim);
    if ((st = launch(d, "pool_rows", &a, (size_t)(p->B * p->H), 0, "opencl.pool", 0, reason, len))) return st;
    if (!p->normalize) return 0;
    if ((st = kernel(d, "l2_normalize", &a, reason, len))) return st;
    KARG(a, out), KARG(a, dim);
    return launch(d, "l2_normalize", &a, (size_t)p->B * WG, WG, "opencl.l2_normalize", 0, reason, len);
}

/* The pre-LN, rotary and gated encoders' ops (kernels/encoder.cl: norm_rows, rotary_rows,
 * glu_rows); the encoder always passes the batch's lengths. */
static int op_norm(void *ctx, const modattn_op_norm_args *n, char *reason, size_t len) {
    ocl_dev *d = ctx;
    if (!n->lens || n->S <= 0) {
        snprintf(reason, len, "norm needs the batch's lengths (lens, S) on OpenCL");
        return MODATTN_EUNSUPPORTED;
    }
    kargs a;
    int st = kernel(d, "norm_rows", &a, reason, len);
    if (st) return st;
    cl_mem x = mem(n->x), y = mem(n->y), lens = mem(n->lens), g = mem(n->gamma), bt = mem(n->beta);
    cl_long ldx = n->ldx, ldy = n->ldy;
    cl_int S = (cl_int)n->S, H = (cl_int)n->H, rms = n->rms, group = (cl_int)n->group;
    cl_float eps = n->eps;
    KARG(a, x), KARG(a, ldx), KARG(a, y), KARG(a, ldy), KARG(a, lens), KARG(a, S), KARG(a, H), KARG(a, g), KARG(a, bt);
    KARG(a, eps), KARG(a, rms), KARG(a, group);
    return launch(d, "norm_rows", &a, (size_t)n->rows * WG, WG, "opencl.norm", 0, reason, len);
}

static int op_rotary(void *ctx, const modattn_op_rotary_args *r, char *reason, size_t len) {
    ocl_dev *d = ctx;
    if (!r->lens || r->S <= 0) {
        snprintf(reason, len, "rotary needs the batch's lengths (lens, S) on OpenCL");
        return MODATTN_EUNSUPPORTED;
    }
    kargs a;
    int st = kernel(d, "rotary_rows", &a, reason, len);
    if (st) return st;
    cl_mem x = mem(r->x), lens = mem(r->lens), cs = mem(r->cos), sn = mem(r->sin);
    cl_long ldx = r->ldx;
    cl_int S = (cl_int)r->S, rows = (cl_int)r->rows, heads = (cl_int)r->heads, D = (cl_int)r->D;
    cl_int il = r->interleaved ? 1 : 0;
    KARG(a, x), KARG(a, ldx), KARG(a, lens), KARG(a, S), KARG(a, rows), KARG(a, heads), KARG(a, D), KARG(a, cs), KARG(a, sn);
    KARG(a, il);
    const size_t items = (size_t)(r->rows * r->heads * (r->D / 2)), global = (items + WG - 1) / WG * WG;
    return launch(d, "rotary_rows", &a, global ? global : WG, WG, "opencl.rotary", 0, reason, len);
}

static int op_glu(void *ctx, const modattn_op_glu_args *g, char *reason, size_t len) {
    ocl_dev *d = ctx;
    if (!g->lens || g->S <= 0) {
        snprintf(reason, len, "glu needs the batch's lengths (lens, S) on OpenCL");
        return MODATTN_EUNSUPPORTED;
    }
    kargs a;
    int st = kernel(d, "glu_rows", &a, reason, len);
    if (st) return st;
    cl_mem x = mem(g->x), lens = mem(g->lens);
    cl_long ldx = g->ldx;
    cl_int S = (cl_int)g->S, N = (cl_int)g->N, act = (cl_int)g->act;
    KARG(a, x), KARG(a, ldx), KARG(a, lens), KARG(a, S), KARG(a, N), KARG(a, act);
    return launch(d, "glu_rows", &a, (size_t)g->rows * WG, WG, "opencl.glu", 0, reason, len);
}

/* CLBlast's defaults for a CPU device it has no tuning entry for (PoCL on this machine's AMD
 * EPYC) ran [2048 x 384] x [384 x 1152]^T at 18 GFLOP/s; of 16 parameter sets tried by hand
 * (MWG/NWG 32-256, KWG 16-64, thread tiles 8-16, vector widths 4-16, local-memory staging on/off,
 * best of 3 calls each, same process) this one ran at 90 GFLOP/s (68-90 over repeats: the
 * machine is shared). Only for CPU-type devices: CLBlast's own database knows the GPUs. */
void modattn__ocl_tune_clblast(ocl_dev *d) {
#ifdef MODATTN_HAVE_CLBLAST
    cl_device_type type = 0;
    if (clGetDeviceInfo(d->device, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS || !(type & CL_DEVICE_TYPE_CPU))
        return;
    static const char *names[] = {"GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
                                  "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"};
    static const size_t values[] = {0, 1, 32, 2, 16, 16, 128, 8, 8, 128, 0, 0, 0, 0, 8, 8};
    d->clblast_tuned = CLBlastOverrideParameters(d->device, "Xgemm", CLBlastPrecisionSingle, 16, names, values) ==
                       CLBlastSuccess;
    /* Which GEMMs take that kernel: CLBlast runs its direct kernel below m*n*k =
     * XGEMM_MIN_INDIRECT_SIZE^3, whose default left every encoder GEMM of a batch up to ~2,000 rows
     * on the direct kernel, 3.5-5 GFLOP/s here ([256 x 384] x [1152 x 384]^T: 64 ms); the tuned
     * kernel above, with its transposing copies, ran the same call in 14.5 ms, 2048 x 384 x 384 in
     * 37 ms against 133-185. Below ~40 rows (m*n*k ~ 6e6) the direct kernel is as fast or faster
     * (one row: 0.7 ms against 2.0): 192^3 = 7.1e6 splits the two. */
    static const char *rnames[] = {"XGEMM_MIN_INDIRECT_SIZE"};
    static const size_t rvalues[] = {192};
    if (d->clblast_tuned)
        d->clblast_tuned = CLBlastOverrideParameters(d->device, "GemmRoutine", CLBlastPrecisionSingle, 1, rnames,
                                                     rvalues) == CLBlastSuccess;
#else
    (void)d;
#endif
}

static const modattn_encoder_ops k_ops = {
    /* .row_block      = */ 1,
    /* .embed          = */ op_embed,
    /* .linear         = */ op_linear,
    /* .pool           = */ op_pool,
    /* .linear_prepare = */ NULL, /* CLBlast takes the weights as they are */
    /* .linear_release = */ NULL,
    /* .norm           = */ op_norm,
    /* .rotary         = */ op_rotary,
    /* .glu            = */ op_glu,
};

const modattn_encoder_ops *modattn__ocl_encoder_ops(void) { return &k_ops; }
