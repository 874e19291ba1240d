/* tests/device/test_opencl.c — the device layer on a real second device (OpenCL: PoCL in CI):
 * names and lookups, buffers and their accounting, budgets and injected failures, the
 * dispatcher across devices, trace spans on the device's track, the conformance suite for both
 * OpenCL implementations, the goldens of three models embedded on the device (sentence-
 * transformers' vectors, Hugging Face's token counts), an allocation-failure sweep over a model
 * load and an embed on the device, and a model refused for an op the device does not run.
 *
 * Without an OpenCL device it exits 77 (CTest: skipped) after printing why: never a pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "core/internal_core.h"
#include "device/internal_device.h"
#include "backends/opencl/ocl.h" /* the program builder, for the build-failure case */
#include "embed_golden.h"
#include "test_util.h"

#define MIN_COSINE 0.99999

static const modattn_device_iface *g_dev;

/* Device bytes in use, less the dispatcher's attention workspace (the ctx keeps it between
 * calls: it is not a model's to give back). */
static int64_t dev_total(void) {
    modattn_device_mem_stats s;
    modattn__device_mem_get_stats(g_dev, &s);
    return s.current_total - s.current[MODATTN_MEM_WORKSPACE];
}

static void test_lookup(void) {
    const modattn_device_iface *d;
    CHECK(modattn_device_lookup("opencl", &d) == 0 && d == g_dev);
    CHECK(modattn_device_lookup("opencl:0", &d) == 0 && d == g_dev);
    CHECK(modattn_device_lookup("cpu", &d) == 0 && d->id.kind == MODATTN_DEVICE_CPU);
    CHECK_ERR(modattn_device_lookup("opencl:99", &d), MODATTN_ENOTFOUND, "this machine has");
    CHECK_ERR(modattn_device_lookup("gpu", &d), MODATTN_EINVAL, "unknown device 'gpu'");
    CHECK_ERR(modattn_device_lookup("opencl:x", &d), MODATTN_EINVAL, "index after ':'");
    CHECK_ERR(modattn_device_lookup("opencl:", &d), MODATTN_EINVAL, "index after ':'");
    CHECK_ERR(modattn_device_lookup("", &d), MODATTN_EINVAL, "empty");
    modattn_device_info in;
    CHECK(modattn_device_info_get(g_dev, &in) == 0);
    CHECK(strcmp(in.name, "opencl:0") == 0 && in.memory_bytes > 0 && in.max_alloc_bytes > 0 && !in.host_memory);
    printf("opencl:0 is %s (%s), driver %s, %.1f GiB\n", in.model, in.platform, in.driver,
           (double)in.memory_bytes / (1 << 30));
}

static void test_buffers(void) {
    int64_t t0 = dev_total();
    modattn_buffer *a = NULL, *b = NULL;
    CHECK(modattn__buffer_alloc(g_dev, 4096, MODATTN_MEM_ACTIVATIONS, "test a", &a) == 0);
    CHECK(modattn__buffer_alloc(g_dev, 4096, MODATTN_MEM_ACTIVATIONS, "test b", &b) == 0);
    CHECK(a && a->host == NULL && a->handle != NULL && a->bytes == 4096);
    CHECK(dev_total() == t0 + 8192);
    float src[1024], dst[1024];
    for (int i = 0; i < 1024; i++) src[i] = (float)i * 0.5f;
    CHECK(modattn__buffer_write(a, 0, src, sizeof src) == 0);
    CHECK(modattn__buffer_copy(b, 0, a, 0, sizeof src) == 0);
    memset(dst, 0, sizeof dst);
    CHECK(modattn__buffer_read(b, 0, dst, sizeof dst) == 0 && memcmp(src, dst, sizeof src) == 0);
    /* a copy inside one buffer whose ranges overlap: as memmove (drivers refuse it natively) */
    CHECK(modattn__buffer_write(b, 0, src, sizeof src) == 0);
    CHECK_MSG(modattn__buffer_copy(b, 16, b, 0, 64) == 0, "%s", modattn_last_error());
    CHECK(modattn__buffer_read(b, 0, dst, sizeof dst) == 0 && dst[4] == src[0] && dst[19] == src[15] && dst[3] == src[3]);
    CHECK(modattn__buffer_write(b, 0, src, sizeof src) == 0);
    CHECK(modattn__buffer_fill(b, 16, 0, 32) == 0);
    CHECK(modattn__buffer_read(b, 0, dst, sizeof dst) == 0 && dst[3] == 1.5f && dst[4] == 0.0f && dst[11] == 0.0f &&
          dst[12] == 6.0f);
    CHECK_ERR(modattn__buffer_write(a, 4000, src, 100), MODATTN_ERANGE, "outside the 4096-byte buffer");
    CHECK_ERR(modattn__buffer_read(a, 5000, dst, 1), MODATTN_ERANGE, "outside");
    /* a tensor view checked against its buffer, not a capacity */
    modattn_tensor t = modattn__tensor_on_buffer(a, 0, MODATTN_DTYPE_F32, 1, 1, 32, 32);
    CHECK(t.buffer == a && t.data == NULL && t.device.kind == MODATTN_DEVICE_OPENCL);
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = c.k = c.v = t;
    c.o = modattn__tensor_on_buffer(b, 0, MODATTN_DTYPE_F32, 1, 1, 32, 32);
    modattn_attn_desc d;
    CHECK(modattn_attn_describe(&c, &d) == 0 && d.device.kind == MODATTN_DEVICE_OPENCL);
    c.o.offset = 4; /* one element in: the last row runs past the end */
    CHECK_ERR(modattn_attn_describe(&c, &d), MODATTN_EINVAL, "o: strides reach byte 4100 of a 4096-byte buffer");
    c.o.offset = 2;
    CHECK_ERR(modattn_attn_describe(&c, &d), MODATTN_EINVAL, "not a multiple");
    { /* lse inside the mask's device buffer */
        modattn_attn_call m = c;
        m.mask = modattn__tensor_on_buffer(a, 0, MODATTN_DTYPE_F32, 1, 1, 32, 32);
        m.q = m.k = m.v = modattn__tensor_on_buffer(b, 0, MODATTN_DTYPE_F32, 1, 1, 32, 32);
        modattn_buffer *bo2 = NULL;
        CHECK(modattn__buffer_alloc(g_dev, 4096, MODATTN_MEM_ACTIVATIONS, "test o", &bo2) == 0);
        m.o = modattn__tensor_on_buffer(bo2, 0, MODATTN_DTYPE_F32, 1, 1, 32, 32);
        m.lse = modattn__tensor_on_buffer(a, 64, MODATTN_DTYPE_F32, 1, 1, 32, 1);
        CHECK_ERR(modattn_attn_describe(&m, &d), MODATTN_EINVAL, "lse overlaps mask");
        modattn__buffer_free(bo2);
    }
    c.o = c.q; /* o aliasing q in the same device buffer */
    CHECK_ERR(modattn_attn_describe(&c, &d), MODATTN_EINVAL, "o overlaps q");
    c.o = modattn__tensor_on_buffer(b, 0, MODATTN_DTYPE_F32, 1, 1, 32, 32);
    c.k = modattn_tensor_contiguous(src, MODATTN_DTYPE_F32, 1, 1, 32, 32); /* a host tensor among device ones */
    CHECK_ERR(modattn_attn_describe(&c, &d), MODATTN_EINVAL, "different devices");
    modattn__buffer_free(a);
    modattn__buffer_free(b);
    CHECK(dev_total() == t0);

    /* the budget counts this device's bytes; the message names the device, the buffer and the size */
    modattn_mem_set_budget(1 << 20);
    CHECK_ERR(modattn__buffer_alloc(g_dev, 2u << 20, MODATTN_MEM_WEIGHTS, "big weight", &a), MODATTN_EBUDGET,
              "exceeded on opencl:0: big weight asked for 2097152 bytes");
    CHECK(a == NULL && dev_total() == t0);
    modattn_mem_set_budget(0);
    /* larger than the device can hold in one buffer: a status, not a crash */
    modattn_device_info in;
    modattn_device_info_get(g_dev, &in);
    CHECK_ERR(modattn__buffer_alloc(g_dev, (size_t)in.max_alloc_bytes + 4096, MODATTN_MEM_WEIGHTS, "huge", &a),
              MODATTN_ENOMEM, "huge of");
    CHECK(dev_total() == t0);
    /* injected failure: clean, nothing counted */
    modattn__mem_fail_nth(2); /* 1: the handle's host struct, 2: the device bytes */
    CHECK_ERR(modattn__buffer_alloc(g_dev, 4096, MODATTN_MEM_WEIGHTS, "injected", &a), MODATTN_ENOMEM, "injected failure");
    modattn__mem_fail_nth(0);
    CHECK(a == NULL && dev_total() == t0);
}

/* q, k, v, o on the device; the CPU's cpu_flash on host copies is the comparison */
static void test_dispatch(modattn_ctx *ctx) {
    const int B = 2, H = 4, S = 37, D = 32;
    const size_t n = (size_t)B * H * S * D;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4), *o2 = malloc(n * 4);
    uint64_t r = 42;
    for (size_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        q[i] = (float)((r >> 40) % 2001) / 1000.0f - 1.0f;
        k[i] = q[i] * 0.7f + 0.1f;
        v[i] = -q[i];
    }
    modattn_buffer *bq, *bk, *bv, *bo;
    CHECK(modattn__buffer_alloc(g_dev, n * 4, MODATTN_MEM_ACTIVATIONS, "q", &bq) == 0);
    CHECK(modattn__buffer_alloc(g_dev, n * 4, MODATTN_MEM_ACTIVATIONS, "k", &bk) == 0);
    CHECK(modattn__buffer_alloc(g_dev, n * 4, MODATTN_MEM_ACTIVATIONS, "v", &bv) == 0);
    CHECK(modattn__buffer_alloc(g_dev, n * 4, MODATTN_MEM_ACTIVATIONS, "o", &bo) == 0);
    modattn__buffer_write(bq, 0, q, n * 4), modattn__buffer_write(bk, 0, k, n * 4), modattn__buffer_write(bv, 0, v, n * 4);
    int32_t lens[2] = {37, 20};
    modattn_attn_call c;
    memset(&c, 0, sizeof c);
    c.q = modattn__tensor_on_buffer(bq, 0, MODATTN_DTYPE_F32, B, H, S, D);
    c.k = modattn__tensor_on_buffer(bk, 0, MODATTN_DTYPE_F32, B, H, S, D);
    c.v = modattn__tensor_on_buffer(bv, 0, MODATTN_DTYPE_F32, B, H, S, D);
    c.o = modattn__tensor_on_buffer(bo, 0, MODATTN_DTYPE_F32, B, H, S, D);
    c.kv_lens = lens;
    c.causal = true;

    /* explain: the CPU implementations are refused because of where the tensors are */
    modattn_attn_desc d;
    CHECK(modattn_attn_describe(&c, &d) == 0);
    modattn_explain_entry e[32];
    size_t cnt = 0;
    CHECK(modattn_ctx_set_policy(ctx, "auto") == 0);
    CHECK(modattn_explain(ctx, &d, e, 32, &cnt) == 0);
    for (size_t i = 0; i < cnt; i++) {
        printf("  explain %-14s %-9s %s\n", e[i].name, modattn_verdict_name(e[i].verdict), e[i].reason);
        if (strcmp(e[i].name, "opencl_flash") == 0) CHECK(e[i].verdict == MODATTN_VERDICT_CHOSEN);
        if (strcmp(e[i].name, "cpu_flash") == 0)
            CHECK(e[i].verdict == MODATTN_VERDICT_REFUSED && strstr(e[i].reason, "the tensors are on opencl:0"));
    }
    /* auto runs it on the device, and the result equals cpu_flash's on the host (within fp32) */
    modattn__trace_clear();
    modattn__trace_enable(true);
    CHECK_MSG(modattn_attention(ctx, &c) == 0, "%s", modattn_last_error());
    modattn__trace_enable(false);
    CHECK(modattn__buffer_read(bo, 0, o, n * 4) == 0);
    bool device_span = false;
    for (size_t i = 0; i < modattn__trace_count(); i++) {
        modattn_trace_span s;
        modattn__trace_get(i, &s);
        if (s.thread == MODATTN_TRACE_DEVICE_TRACK(MODATTN_DEVICE_OPENCL, 0) && strncmp(s.name, "opencl.flash_fwd", 16) == 0 &&
            s.t1_ns >= s.t0_ns && s.flops > 0)
            device_span = true;
    }
    CHECK_MSG(device_span, "no opencl.flash_fwd span on the device's track");
    modattn__trace_clear();
    modattn_attn_call h = c;
    h.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
    h.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
    h.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
    h.o = modattn_tensor_contiguous(o2, MODATTN_DTYPE_F32, B, H, S, D);
    CHECK(modattn_ctx_set_policy(ctx, "cpu_flash") == 0);
    CHECK(modattn_attention(ctx, &h) == 0);
    float worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(o[i] - o2[i]));
    CHECK_MSG(worst < 1e-5f, "opencl_flash vs cpu_flash differ by %g", (double)worst);
    /* a CPU-only policy cannot run device tensors: refused with the reason */
    CHECK_ERR(modattn_attention(ctx, &c), MODATTN_EUNSUPPORTED, "the tensors are on opencl:0");
    /* each OpenCL implementation by name; tune chooses among the device's only */
    CHECK(modattn_ctx_set_policy(ctx, "opencl_blas") == 0);
    CHECK(modattn_attention(ctx, &c) == 0 && modattn__buffer_read(bo, 0, o2, n * 4) == 0);
    worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(o[i] - o2[i]));
    CHECK_MSG(worst < 1e-5f, "opencl_blas vs opencl_flash differ by %g", (double)worst);
    CHECK(modattn_ctx_set_policy(ctx, "tune") == 0);
    CHECK(modattn_attention(ctx, &c) == 0);
    CHECK(modattn_explain(ctx, &d, e, 32, &cnt) == 0);
    for (size_t i = 0; i < cnt; i++) {
        if (e[i].verdict == MODATTN_VERDICT_CHOSEN)
            CHECK_MSG(strncmp(e[i].name, "opencl_", 7) == 0 && e[i].measured_ms >= 0, "tune chose %s", e[i].name);
        if (strcmp(e[i].name, "cpu_flash") == 0) CHECK(e[i].verdict == MODATTN_VERDICT_REFUSED);
    }
    CHECK(modattn_ctx_set_policy(ctx, "auto") == 0);
    modattn__buffer_free(bq), modattn__buffer_free(bk), modattn__buffer_free(bv), modattn__buffer_free(bo);
    free(q), free(k), free(v), free(o), free(o2);
}

static void test_conformance(modattn_ctx *ctx) {
    const char *names[] = {"opencl_flash", "opencl_blas"};
    for (int i = 0; i < 2; i++) {
        modattn_conformance_options o;
        memset(&o, 0, sizeof o);
        o.only = names[i];
        o.log = stderr;
#ifdef EG_SANITIZED
        /* the sanitizers look for memory errors in our host code: the first 192 configurations (the
         * hand-picked cases, every feature the contract names, then the head of the random sweep)
         * take its paths; the plain build runs the whole grid */
        o.max_configs = 192;
#endif
        modattn_conformance_result r[4];
        size_t n = 0;
        int st = modattn_conformance_run(ctx, &o, r, 4, &n);
        CHECK_MSG(st == 0 && n == 1, "%s: %s", names[i], modattn_last_error());
        if (st || n != 1) continue;
        printf("conformance %s: %d passed, %d failed, %d unsupported, worst err/tol %.3f%s%s\n", names[i], r[0].passed,
               r[0].failed, r[0].unsupported, r[0].worst_ratio, r[0].unsupported ? "; unsupported: " : "",
               r[0].unsupported_reason);
#ifdef EG_SANITIZED
        CHECK_MSG(r[0].failed == 0 && r[0].passed + r[0].unsupported == 192 && r[0].passed > 0, "%s: %s", names[i],
                  r[0].first_failure);
#else
        CHECK_MSG(r[0].failed == 0 && r[0].passed >= 640, "%s: %s", names[i], r[0].first_failure);
#endif
    }
}

/* The goldens of one model on the device: ids counts and cosine against sentence-transformers; all
 * of them, or (shape_subset) the inputs of the shapes that take the kernels' paths (tests/embed_golden.h). */
static void golden_on_device(modattn_ctx *ctx, const char *label, const char *dir, const char *fixture,
                             const char *policy, bool shape_subset) {
    struct stat sb;
    CHECK_MSG(stat(dir, &sb) == 0, "%s: %s is missing: run `make model`", label, dir);
    if (stat(dir, &sb) != 0) return;
    size_t n = 0;
    embed_golden *g = eg_load(fixture, &n);
    CHECK_MSG(g && n > 0, "%s: cannot read %s", label, fixture);
    if (!g) return;
    /* a sanitized build embeds the shape subset (tests/embed_golden.h): the plain build checks all */
    const size_t n_all = n;
    n = shape_subset ? eg_shape_subset(g, n, label, "the shape subset") : eg_sanitizer_subset(g, n, label);
    CHECK(modattn_ctx_set_policy(ctx, policy) == 0);
    int64_t t0 = dev_total();
    modattn_model_options mo = {.device = "opencl:0"};
    modattn_model *m = NULL;
    int st = modattn_model_load_ex(ctx, dir, &mo, &m);
    CHECK_MSG(st == 0, "%s: load on opencl:0: %s", label, modattn_last_error());
    if (st) {
        eg_free(g, n_all);
        return;
    }
    const modattn_model_info *info = modattn_model_get_info(m);
    CHECK(info->device.kind == MODATTN_DEVICE_OPENCL && info->device.index == 0);
    CHECK_MSG(dev_total() > t0 + (int64_t)(info->weights_bytes / 2), "%s: the weights are not on the device", label);
    size_t dim = modattn_model_dim(m);
    const char **texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    float *out = malloc(n * dim * sizeof *out);
    int32_t *ntok = malloc(n * sizeof *ntok);
    for (size_t i = 0; i < n; i++) texts[i] = g[i].text, lens[i] = g[i].len;
    uint64_t c0 = modattn__now_ns();
    st = modattn_model_embed(m, texts, lens, n, out, ntok);
    double secs = (double)(modattn__now_ns() - c0) * 1e-9;
    CHECK_MSG(st == 0, "%s: embed on opencl:0: %s", label, modattn_last_error());
    double mn = 2;
    size_t below = 0, tok_bad = 0, tokens = 0;
    for (size_t i = 0; st == 0 && i < n; i++) {
        double c = eg_cosine(out + i * dim, g[i].emb, dim);
        if (c < mn) mn = c;
        if (!(c >= MIN_COSINE)) below++;
        if (ntok[i] != (int32_t)g[i].nids) tok_bad++;
        tokens += (size_t)ntok[i];
    }
    CHECK_MSG(st == 0 && below == 0, "%s/%s: %zu inputs below cosine %g (min %.9f)", label, policy, below, MIN_COSINE, mn);
    CHECK_MSG(st == 0 && tok_bad == 0, "%s/%s: %zu inputs with other token counts than Hugging Face's", label, policy, tok_bad);
    printf("%s on opencl:0 (%s): %zu inputs, min cosine %.9f (1 - cos = %.1e), token counts equal %zu/%zu, %.0f tokens/s\n",
           label, policy, n, mn, 1.0 - mn, n - tok_bad, n, (double)tokens / secs);
    /* alone equals batched (same kernels, same summation order per row) */
    float *one = malloc(dim * sizeof *one);
    CHECK(modattn_model_embed(m, texts + n / 2, lens + n / 2, 1, one, NULL) == 0);
    float d = 0;
    for (size_t k = 0; k < dim; k++) d = fmaxf(d, fabsf(one[k] - out[(n / 2) * dim + k]));
    CHECK_MSG(d <= 1e-5f, "%s: alone vs batched on the device differ by %g", label, (double)d);
    free(one);
    modattn_model_free(m);
    CHECK_MSG(dev_total() == t0, "%s: %lld device bytes not given back", label, (long long)(dev_total() - t0));
    free(texts), free(lens), free(out), free(ntok);
    eg_free(g, n_all);
    CHECK(modattn_ctx_set_policy(ctx, "auto") == 0);
}

/* Every allocation of a model load + a small embed on the device failing in turn (host and
 * device allocations share the injection counter): each a clean error, nothing left behind. */
static void sweep(modattn_ctx *ctx) {
    const char *dir = ".models/tiny-bert-cls";
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        CHECK_MSG(0, "%s is missing: run `make model`", dir);
        return;
    }
    const char *texts[3] = {"hello", "a somewhat longer text for the device", "x"};
    static float out[3 * 1024], ref[3 * 1024];
    modattn_mem_stats h0, h1;
    int64_t d0 = dev_total();
    modattn_model_options mo = {.device = "opencl:0"};
    int points = 0, failures_ok = 0, survived = 0;
    { /* the reference result, with nothing failing */
        modattn_model *m = NULL;
        CHECK(modattn_model_load_ex(ctx, dir, &mo, &m) == 0 && modattn_model_embed(m, texts, NULL, 3, ref, NULL) == 0);
        modattn_model_free(m);
    }
    for (uint64_t nth = 1; nth < 100000; nth++) {
        modattn_mem_get_stats(&h0);
        modattn__mem_fail_nth(nth);
        modattn_model *m = NULL;
        int st = modattn_model_load_ex(ctx, dir, &mo, &m);
        if (st == 0) st = modattn_model_embed(m, texts, NULL, 3, out, NULL);
        uint64_t attempts = modattn__mem_fail_counter();
        modattn__mem_fail_nth(0);
        modattn_model_free(m);
        modattn_mem_get_stats(&h1);
        if (st == 0 && attempts < nth) break; /* nothing failed: the sweep is complete */
        points++;
        /* a failure is either reported, or survived with the same result (a shrinking realloc
         * that keeps the larger block; a cache that is not loaded) */
        bool same = st == 0 && memcmp(out, ref, sizeof out) == 0;
        survived += same;
        bool clean = (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET || same) && dev_total() == d0;
        for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
            if (c != MODATTN_MEM_WORKSPACE && h1.current[c] != h0.current[c]) clean = false;
        if (clean) failures_ok++;
        else
            CHECK_MSG(0, "allocation %llu failing: status %d (%s), device bytes %lld -> %lld", (unsigned long long)nth, st,
                      modattn_last_error(), (long long)d0, (long long)dev_total());
    }
    CHECK_MSG(points > 20 && failures_ok == points, "sweep: %d of %d failure points clean", failures_ok, points);
    printf("allocation-failure sweep (tiny model load + embed on opencl:0): %d points, all clean (%d survived with "
           "the same vectors)\n", points, survived);
}

/* A kernel build that fails: a status, and the compiler's log in the message. */
static void build_failure(void) {
    ocl_dev *d = modattn__ocl_get(0);
    cl_program p = NULL;
    char reason[256] = "";
    int st = modattn__ocl_program(d, "-DBM=(", &p, reason, sizeof reason); /* a macro that breaks the source */
    CHECK_MSG(st == MODATTN_EDEVICE && p == NULL && strstr(reason, "clBuildProgram") && strstr(reason, "compiler log") &&
                  strstr(modattn_last_error(), "compiler log:") && strstr(modattn_last_error(), "error"),
              "status %d, reason '%s', message '%s'", st, reason, modattn_last_error());
    /* and the device still builds and runs the real program afterwards */
    CHECK(modattn__ocl_program(d, "-DBM=32 -DBN=32", &p, reason, sizeof reason) == 0 && p != NULL);
}

/* An op the device refuses: the model does not load there, and the message names the op. */
static void refusal(modattn_ctx *ctx) {
    int op = MODATTN_OP_LAYERNORM;
    CHECK(modattn__device_control(g_dev, MODATTN_DEVICE_CONTROL_DISABLE_OP, &op) == 0);
    char why[256];
    CHECK(!modattn_device_supports_op(g_dev, MODATTN_OP_LAYERNORM, why, sizeof why) && strstr(why, "disabled"));
    modattn_model_options mo = {.device = "opencl"};
    modattn_model *m = NULL;
    CHECK_ERR(modattn_model_load_ex(ctx, ".models/tiny-bert-cls", &mo, &m), MODATTN_EUNSUPPORTED,
              "cannot run on opencl:0: the device does not run the op 'layernorm'");
    CHECK(m == NULL);
    /* and a model on a device that is not here */
    mo.device = "opencl:7";
    CHECK_ERR(modattn_model_load_ex(ctx, ".models/tiny-bert-cls", &mo, &m), MODATTN_ENOTFOUND, "not found");
}

/* With the explicit option, the op the device refuses (layernorm, disabled by refusal() above)
 * runs on the host: the model loads, says which op and why, every call is counted, and the
 * vectors are the CPU's. Without the option it does not load (refusal()). */
static void host_fallback(modattn_ctx *ctx) {
    modattn_model_options mo = {.device = "opencl", .host_fallback = true};
    modattn_model *m = NULL, *mc = NULL;
    int st = modattn_model_load_ex(ctx, ".models/tiny-bert-cls", &mo, &m);
    CHECK_MSG(st == 0, "load with host_fallback: %s", modattn_last_error());
    CHECK(modattn_model_load(ctx, ".models/tiny-bert-cls", &mc) == 0);
    if (!m || !mc) {
        modattn_model_free(m), modattn_model_free(mc);
        return;
    }
    const modattn_model_info *in = modattn_model_get_info(m);
    CHECK(in->device.kind == MODATTN_DEVICE_OPENCL);
    CHECK(in->host_fallback_ops == (1u << MODATTN_OP_LAYERNORM));
    const char *why = modattn_model_fallback_reason(m, MODATTN_OP_LAYERNORM);
    CHECK(why && strstr(why, "disabled"));
    CHECK(modattn_model_fallback_reason(m, MODATTN_OP_LINEAR) == NULL);
    const char *texts[] = {"host fallback", "a longer text that runs through the same layers on the device"};
    const size_t dim = in->dim;
    float *a = calloc(2 * dim, sizeof *a), *b = calloc(2 * dim, sizeof *b);
    const uint64_t before = modattn__device_fallback_count(g_dev, MODATTN_OP_LAYERNORM);
    CHECK(modattn_model_embed(m, texts, NULL, 2, a, NULL) == 0);
    CHECK(modattn_model_embed(mc, texts, NULL, 2, b, NULL) == 0);
    const uint64_t calls = modattn__device_fallback_count(g_dev, MODATTN_OP_LAYERNORM) - before;
    /* the embedding's and two residual linears' per layer, per batch (one or two batches) */
    CHECK_MSG(calls > 0 && calls % (2u * (unsigned)in->layers + 1u) == 0, "%llu fallback calls", (unsigned long long)calls);
    CHECK(modattn__device_fallback_count(g_dev, MODATTN_OP_LINEAR_RESIDUAL) == 0);
    for (int t = 0; t < 2; t++) {
        double d = 0, na = 0, nb = 0;
        for (size_t k = 0; k < dim; k++) d += (double)a[t * dim + k] * b[t * dim + k], na += (double)a[t * dim + k] * a[t * dim + k], nb += (double)b[t * dim + k] * b[t * dim + k];
        CHECK_MSG(d / sqrt(na * nb) >= 0.99999, "text %d: cosine %.9f against the CPU", t, d / sqrt(na * nb));
    }
    free(a), free(b);
    modattn_model_free(m);
    modattn_model_free(mc);
}

/* `test_opencl`: all but the allocation-failure sweep; `test_opencl --sweep`: the sweep alone (the
 * ctest entry test_opencl_sweep, labelled sweep: `make test` runs it once, in the ASan+UBSan pass,
 * where it also checks every leak at each point, as it does the other sweeps) */
int main(int argc, char **argv) {
    const bool sweep_only = argc > 1 && strcmp(argv[1], "--sweep") == 0;
    if (argc > 1 && !sweep_only) {
        fprintf(stderr, "usage: test_opencl [--sweep]\n");
        return 2;
    }
    modattn__devices_init();
    modattn_device id = {MODATTN_DEVICE_OPENCL, 0};
    g_dev = modattn_device_find(id);
    if (!g_dev) {
        printf("test_opencl: SKIPPED: no OpenCL device: %s\n", modattn_device_absent_reasons());
        return 77;
    }
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    if (sweep_only) {
        sweep(ctx);
    } else {
        test_lookup();
        test_buffers();
        test_dispatch(ctx);
        test_conformance(ctx);
        golden_on_device(ctx, "minilm", ".models/all-MiniLM-L6-v2", "tests/fixtures/golden_minilm.jsonl", "auto", false);
        golden_on_device(ctx, "tiny-bert-cls", ".models/tiny-bert-cls", "tests/fixtures/golden_tiny_bert_cls.jsonl",
                         "opencl_blas", false);
        /* bge-small is a 12-layer fp32 BERT here (26 s for its 98 inputs on PoCL): the shape subset
         * takes every tile boundary of opencl_flash's kernels, which the two models above check
         * on all their inputs through the other implementations */
        golden_on_device(ctx, "bge-small-int8", ".models/bge-small-en-v1.5-int8", "tests/fixtures/golden_bge_small_int8.jsonl",
                         "opencl_flash", true);
        build_failure();
        refusal(ctx);
        host_fallback(ctx);
    }
    modattn_ctx_free(ctx);
    modattn_devices_shutdown();
    return test_finish(sweep_only ? "test_opencl --sweep" : "test_opencl");
}
