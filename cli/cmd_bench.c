/* cli/cmd_bench.c — `modattn bench attn`: per implementation and shape, median time, GFLOP/s,
 * workspace, and % of the machine's measured FMA peak. Validates before it benchmarks: the
 * last 64 query rows of head 0 are checked against the reference implementation (rows at the
 * bottom keep the causal alignment of the full problem). */
#include "cli/cli.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "device/internal_device.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_shape {
    int64_t B, Hq, Hkv, Sq, Sk, D;
    bool causal;
} bench_shape;

static void usage(void) {
    printf("usage: modattn bench attn [--backend NAME[,NAME...]] [--shape B,Hq,Hkv,Sq,Sk,D]... [--causal]\n"
           "                          [--min-time SEC] [--peak GFLOPS] [--json]\n\n"
           "Times attention implementations on fp32 tensors (random inputs, contiguous; on the device an\n"
           "implementation runs on: the --device of that kind, else its first) and prints, per\n"
           "implementation and shape: median ms, GFLOP/s (4*B*Hq*Sq*Sk*D FLOPs, halved when causal), the\n"
           "workspace the implementation declares, and %% of the FMA peak when known (--peak, or the\n"
           "MODATTN_PEAK_GFLOPS environment variable; measure it with build/peak_flops).\n"
           "Each result is validated first against the reference on the last 64 query rows of head 0.\n\n"
           "Without --shape, a sweep: B 1,2,4,8 x H 12,16 x S 128..8192 x D 32,64,128, causal and not\n"
           "(long: hours at the large end; --max-gflop N skips shapes above N GFLOP per call).\n"
           "The reference implementation is skipped above 2 GFLOP per call unless named by --backend.\n"
           "Runs each case for at least --min-time seconds (default 0.5) and reports the median.\n");
}


static uint64_t rng_state = 0x1234567ull;
static float rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Max abs difference between the last `rows` rows of head 0 of o and the reference's. */
static int validate(modattn_ctx *ctx, long ref, const modattn_attn_call *c, const bench_shape *s, double *err) {
    int64_t rows = s->Sq < 64 ? s->Sq : 64, first = s->Sq - rows;
    float *o = modattn__malloc((size_t)(rows * s->D) * sizeof(float), MODATTN_MEM_OTHER);
    if (!o) return modattn__mem_last_status();
    modattn_attn_call v;
    memset(&v, 0, sizeof v);
    v.q = c->q;
    v.q.data = (float *)c->q.data + first * s->D;
    v.q.shape[0] = 1, v.q.shape[1] = 1, v.q.shape[2] = rows;
    v.q.capacity = rows * s->D;
    v.k = c->k;
    v.k.shape[0] = 1, v.k.shape[1] = 1;
    v.k.capacity = s->Sk * s->D;
    v.v = c->v;
    v.v.shape[0] = 1, v.v.shape[1] = 1;
    v.v.capacity = s->Sk * s->D;
    v.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, 1, 1, rows, s->D);
    v.causal = s->causal;
    int st = modattn_attention_with(ctx, (size_t)ref, &v);
    double m = 0;
    const float *got = (const float *)c->o.data + first * s->D;
    for (int64_t i = 0; st == 0 && i < rows * s->D; i++) {
        double e = fabs((double)got[i] - (double)o[i]);
        if (!(e <= m)) m = e;
    }
    modattn_free(o);
    *err = m;
    return st;
}

int cli_cmd_bench(cli_globals *g, int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1])) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "attn") != 0) {
        fprintf(stderr, "modattn bench: unknown benchmark '%s' (known: attn)\n", argv[1]);
        return 2;
    }
    bool json = false, causal = false;
    const char *backends = NULL;
    double min_time = 0.5, peak = 0, max_gflop = 0;
    bench_shape shapes[64];
    int nshapes = 0;
    const char *env_peak = getenv("MODATTN_PEAK_GFLOPS");
    if (env_peak && cli_parse_double("MODATTN_PEAK_GFLOPS", env_peak, 0, 1e9, true, &peak) != 0) return 2;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            usage();
            return 0;
        } else if (strcmp(a, "--json") == 0) json = true;
        else if (strcmp(a, "--causal") == 0) causal = true;
        else if (strcmp(a, "--backend") == 0 && val) backends = argv[++i];
        else if (strcmp(a, "--min-time") == 0 && val) {
            if (cli_parse_double("bench attn: --min-time (seconds)", argv[++i], 0, 600, false, &min_time) != 0) return 2;
        } else if (strcmp(a, "--peak") == 0 && val) {
            if (cli_parse_double("bench attn: --peak (GFLOP/s)", argv[++i], 0, 1e9, true, &peak) != 0) return 2;
        } else if (strcmp(a, "--max-gflop") == 0 && val) {
            if (cli_parse_double("bench attn: --max-gflop", argv[++i], 0, 1e12, true, &max_gflop) != 0) return 2;
        }
        else if (strcmp(a, "--shape") == 0 && val) {
            int64_t v[6];
            if (cli_parse_ints(argv[++i], v, 6, 1, 1 << 20) != 0 || v[1] % v[2] != 0 || nshapes == 64) {
                fprintf(stderr, "modattn bench attn: --shape wants B,Hq,Hkv,Sq,Sk,D: six positive integers, Hq a "
                                "multiple of Hkv (at most 64 shapes), got '%s'\n", argv[i]);
                return 2;
            }
            shapes[nshapes++] = (bench_shape){v[0], v[1], v[2], v[3], v[4], v[5], false};
        } else {
            fprintf(stderr, "modattn bench attn: unknown or incomplete option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (min_time < 0 || min_time > 600) {
        fprintf(stderr, "modattn bench attn: --min-time must be in [0, 600] seconds\n");
        return 2;
    }
    bench_shape *list = shapes;
    bench_shape *sweep = NULL;
    int nlist = nshapes;
    if (nshapes == 0) { /* the sweep */
        static const int64_t Bs[] = {1, 2, 4, 8}, Hs[] = {12, 16}, Ss[] = {128, 256, 512, 1024, 2048, 4096, 8192},
                             Ds[] = {32, 64, 128};
        sweep = modattn__malloc(4 * 2 * 7 * 3 * 2 * sizeof *sweep, MODATTN_MEM_OTHER);
        if (!sweep) return cli_fail("bench", MODATTN_ENOMEM);
        nlist = 0;
        for (int c = 0; c < 2; c++)
            for (int d = 0; d < 3; d++)
                for (int s = 0; s < 7; s++)
                    for (int b = 0; b < 4; b++)
                        for (int h = 0; h < 2; h++) sweep[nlist++] = (bench_shape){Bs[b], Hs[h], Hs[h], Ss[s], Ss[s], Ds[d], c == 1};
        list = sweep;
    } else {
        for (int i = 0; i < nshapes; i++) shapes[i].causal = causal;
    }
    modattn_ctx *ctx;
    if (cli_open_ctx(g, &ctx)) {
        modattn_free(sweep);
        return 1;
    }
    long ref = modattn_ctx_find(ctx, "reference");
    /* which implementations */
    size_t nimpl = modattn_ctx_impl_count(ctx);
    size_t chosen[64];
    size_t nchosen = 0;
    for (size_t i = 0; i < nimpl && nchosen < 64; i++) {
        modattn_impl_info info;
        modattn_ctx_impl_info(ctx, i, &info);
        if (backends) {
            const char *p = strstr(backends, info.name);
            size_t L = strlen(info.name);
            bool named = false;
            while (p) {
                if ((p == backends || p[-1] == ',') && (p[L] == '\0' || p[L] == ',')) named = true;
                p = strstr(p + 1, info.name);
            }
            if (!named) continue;
        }
        chosen[nchosen++] = i;
    }
    if (backends && nchosen == 0) {
        fprintf(stderr, "modattn bench attn: no implementation named in '%s' (see `modattn backends`)\n", backends);
        modattn_free(sweep);
        return 2;
    }
    json_t *results = json_array();
    if (!json)
        printf("%-12s %-26s %-6s %10s %10s %12s %8s %s\n", "backend", "shape B,Hq,Hkv,Sq,Sk,D", "causal", "ms",
               "GFLOP/s", "workspace", "%peak", "check");
    int rc = 0;
    for (int si = 0; si < nlist; si++) {
        const bench_shape *s = &list[si];
        modattn_attn_desc d = modattn_attn_desc_make(s->B, s->Hq, s->Hkv, s->Sq, s->Sk, s->D, s->causal);
        double flops = modattn_attn_desc_flops(&d);
        if (max_gflop > 0 && flops / 1e9 > max_gflop) continue;
        int64_t nq = s->B * s->Hq * s->Sq * s->D, nk = s->B * s->Hkv * s->Sk * s->D;
        float *q = modattn__malloc((size_t)nq * 4, MODATTN_MEM_ACTIVATIONS);
        float *k = modattn__malloc((size_t)nk * 4, MODATTN_MEM_ACTIVATIONS);
        float *v = modattn__malloc((size_t)nk * 4, MODATTN_MEM_ACTIVATIONS);
        float *o = modattn__malloc((size_t)nq * 4, MODATTN_MEM_ACTIVATIONS);
        if (!q || !k || !v || !o) {
            rc = cli_fail("bench: allocating the tensors", modattn__mem_last_status());
            modattn_free(q), modattn_free(k), modattn_free(v), modattn_free(o);
            break;
        }
        for (int64_t i = 0; i < nq; i++) q[i] = rnd();
        for (int64_t i = 0; i < nk; i++) k[i] = rnd(), v[i] = rnd();
        modattn_attn_call c;
        memset(&c, 0, sizeof c);
        c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, s->B, s->Hq, s->Sq, s->D);
        c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, s->B, s->Hkv, s->Sk, s->D);
        c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, s->B, s->Hkv, s->Sk, s->D);
        c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, s->B, s->Hq, s->Sq, s->D);
        c.causal = s->causal;
        for (size_t ci = 0; ci < nchosen; ci++) {
            size_t idx = chosen[ci];
            const modattn_attn_impl *impl = modattn__ctx_impl(ctx, idx);
            modattn_impl_info info;
            modattn_ctx_impl_info(ctx, idx, &info);
            char reason[256] = "";
            const char *skip = NULL;
            /* an implementation on a device gets the same inputs in that device's buffers (the
             * --device of its kind, else the kind's first device); its output is read back for
             * the check */
            const modattn_device_iface *dev = NULL;
            modattn_attn_desc dd = d;
            if (info.device != MODATTN_DEVICE_CPU && info.available) {
                modattn_device id = {info.device, 0};
                const modattn_device_iface *want = NULL;
                if (g->device && modattn_device_lookup(g->device, &want) == 0 && want->id.kind == info.device) id = want->id;
                dev = modattn_device_find(id);
                if (!dev) skip = "no such device here";
                else dd.device = dev->id;
            }
            if (skip) {
            } else if (!info.available) skip = info.reason;
            else if (!impl->supports(impl->ctx, &dd, reason, sizeof reason)) skip = reason;
            else if ((long)idx == ref && !backends && flops > 2e9) skip = "the oracle is too slow at this size (name it with --backend)";
            if (skip) {
                if (!json) printf("%-12s %lld,%lld,%lld,%lld,%lld,%lld  skipped: %s\n", info.name, (long long)s->B,
                                  (long long)s->Hq, (long long)s->Hkv, (long long)s->Sq, (long long)s->Sk,
                                  (long long)s->D, skip);
                continue;
            }
            modattn_attn_call cd = c, *cc = &c;
            modattn_buffer *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
            int st = 0;
            if (dev) {
                if ((st = modattn__buffer_alloc(dev, (size_t)nq * 4, MODATTN_MEM_ACTIVATIONS, "bench q", &bq)) ||
                    (st = modattn__buffer_alloc(dev, (size_t)nk * 4, MODATTN_MEM_ACTIVATIONS, "bench k", &bk)) ||
                    (st = modattn__buffer_alloc(dev, (size_t)nk * 4, MODATTN_MEM_ACTIVATIONS, "bench v", &bv)) ||
                    (st = modattn__buffer_alloc(dev, (size_t)nq * 4, MODATTN_MEM_ACTIVATIONS, "bench o", &bo)) ||
                    (st = modattn__buffer_write(bq, 0, q, (size_t)nq * 4)) || (st = modattn__buffer_write(bk, 0, k, (size_t)nk * 4)) ||
                    (st = modattn__buffer_write(bv, 0, v, (size_t)nk * 4))) {
                    rc = cli_fail(info.name, st);
                    modattn__buffer_free(bq), modattn__buffer_free(bk), modattn__buffer_free(bv), modattn__buffer_free(bo);
                    continue;
                }
                cd.q = modattn__tensor_on_buffer(bq, 0, MODATTN_DTYPE_F32, s->B, s->Hq, s->Sq, s->D);
                cd.k = modattn__tensor_on_buffer(bk, 0, MODATTN_DTYPE_F32, s->B, s->Hkv, s->Sk, s->D);
                cd.v = modattn__tensor_on_buffer(bv, 0, MODATTN_DTYPE_F32, s->B, s->Hkv, s->Sk, s->D);
                cd.o = modattn__tensor_on_buffer(bo, 0, MODATTN_DTYPE_F32, s->B, s->Hq, s->Sq, s->D);
                cc = &cd;
            }
            st = modattn_attention_with(ctx, idx, cc); /* warm-up */
            if (st == 0 && dev) st = modattn__buffer_read(bo, 0, o, (size_t)nq * 4);
            double err = 0;
            if (st == 0 && ref >= 0) st = validate(ctx, ref, &c, s, &err);
            if (st) {
                rc = cli_fail(info.name, st);
                modattn__buffer_free(bq), modattn__buffer_free(bk), modattn__buffer_free(bv), modattn__buffer_free(bo);
                continue;
            }
            bool valid = err <= 1e-4;
            double times[1000];
            int reps = 0;
            double spent = 0;
            while (reps < 1000 && (reps < 3 || spent < min_time)) {
                uint64_t t0 = modattn__now_ns();
                st = modattn_attention_with(ctx, idx, cc);
                double ms = (double)(modattn__now_ns() - t0) / 1e6;
                if (st) break;
                times[reps++] = ms;
                spent += ms / 1e3;
            }
            modattn__buffer_free(bq), modattn__buffer_free(bk), modattn__buffer_free(bv), modattn__buffer_free(bo);
            if (st) {
                rc = cli_fail(info.name, st);
                continue;
            }
            qsort(times, (size_t)reps, sizeof *times, cmp_d);
            double med = times[reps / 2];
            double gflops = flops / (med * 1e6);
            size_t ws = impl->workspace_bytes ? impl->workspace_bytes(impl->ctx, &dd, modattn_ctx_threads(ctx)) : 0;
            if (!valid) rc = 1;
            if (json) {
                char devname[32];
                modattn_device_format(dd.device, devname, sizeof devname);
                json_t *r = json_pack("{s:s, s:s, s:[I,I,I,I,I,I], s:b, s:f, s:f, s:I, s:i, s:b, s:f}", "backend", info.name,
                                      "device", devname,
                                      "shape", (json_int_t)s->B, (json_int_t)s->Hq, (json_int_t)s->Hkv, (json_int_t)s->Sq,
                                      (json_int_t)s->Sk, (json_int_t)s->D, "causal", s->causal, "ms", med, "gflops",
                                      gflops, "workspace_bytes", (json_int_t)ws, "reps", reps, "valid", valid,
                                      "max_abs_error", err);
                if (peak > 0) json_object_set_new(r, "pct_peak", json_real(100.0 * gflops / peak));
                char kname[160] = "";
                modattn_ctl_kernel kq = {&dd, modattn_ctx_threads(ctx), kname, sizeof kname};
                if (impl->control && impl->control(impl->ctx, MODATTN_CTL_KERNEL, &kq) == 0 && kname[0])
                    json_object_set_new(r, "kernel", json_string(kname)); /* which of its kernels ran */
                json_array_append_new(results, r);
            } else {
                char shp[64], pct[16] = "-";
                snprintf(shp, sizeof shp, "%lld,%lld,%lld,%lld,%lld,%lld", (long long)s->B, (long long)s->Hq,
                         (long long)s->Hkv, (long long)s->Sq, (long long)s->Sk, (long long)s->D);
                if (peak > 0) snprintf(pct, sizeof pct, "%.1f", 100.0 * gflops / peak);
                printf("%-12s %-26s %-6s %10.3f %10.2f %12zu %8s %s\n", info.name, shp, s->causal ? "yes" : "no", med,
                       gflops, ws, pct, valid ? "ok" : "WRONG");
                fflush(stdout);
            }
        }
        modattn_free(q), modattn_free(k), modattn_free(v), modattn_free(o);
    }
    modattn_free(sweep);
    if (json) {
        char cpu[256];
        modattn__cpu_describe(cpu, sizeof cpu);
        json_t *root = json_pack("{s:o, s:i, s:s, s:s}", "results", results, "threads", modattn_ctx_threads(ctx), "cpu",
                                 modattn__cpu_get()->model_name, "cpu_features", cpu);
        if (peak > 0) json_object_set_new(root, "peak_gflops", json_real(peak));
        char *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
        if (modattn__json_take_failure() != 0 || !out) rc = cli_fail("bench: writing JSON", MODATTN_ENOMEM);
        else puts(out);
        modattn__json_free(out);
    } else {
        json_decref(results);
    }
    return rc;
}
