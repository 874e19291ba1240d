/* bench/attn_kernels.c — times attention implementations on given shapes through the public API
 * (modattn_attention_with: the dispatcher's own call path, workspace included), after checking
 * a sample of output rows against an fp64 computation ("validate, then benchmark").
 *
 *   attn_kernels [--impl NAME[,NAME...]] [--threads N] [--reps N] [--json]
 *                SHAPE...        SHAPE = B,H,S,D[,FLAGS]   (Hq = Hkv = H, Sq = Sk = S)
 *
 * FLAGS, letters: c causal; e the encoder's layout (model/encoder_device.c): Q, K and V are views
 * of one [B, S, 3, H, D] buffer (the QKV GEMM's rows, so a head's consecutive key rows are 3 H D
 * floats apart) and O is [B, S, H, D], instead of contiguous [B, H, S, D] tensors.
 *
 * Prints, per implementation and shape, the median time of --reps runs and GFLOP/s counted as
 * 4*B*H*S^2*D (halved when causal), the FlashAttention convention, by the wall clock and per
 * CPU-second of the process (the rate one core delivers while it runs this: fair on a shared
 * machine, compare it with bench/peak_flops' per-CPU-second figure). */
#include "modattn/modattn.h"
#include "core/internal_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t g_rng = 0x1234567u;
static float frand(void) { /* xorshift, uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static double cpu_now_s(void) { /* CPU time of the whole process (all its threads) */
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Row (b, h, i) of a tensor (unit last-dim stride). */
static const float *row_of(const modattn_tensor *t, int64_t b, int64_t h, int64_t i) {
    return (const float *)t->data + b * t->stride[0] + h * t->stride[1] + i * t->stride[2];
}

/* fp64 check of a few rows: max |o - exact| over them. */
static double check_rows(const modattn_attn_call *c, int64_t B, int64_t H, int64_t S, int64_t D, bool causal) {
    double worst = 0;
    double *s = malloc(sizeof(double) * (size_t)S);
    for (int t = 0; t < 8; t++) {
        int64_t b = t % B, h = (t * 7) % H, i = (S - 1) * t / 7;
        const float *qr = row_of(&c->q, b, h, i);
        int64_t lim = causal ? i + 1 : S;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < lim; j++) {
            const float *kr = row_of(&c->k, b, h, j);
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += (double)qr[d] * kr[d];
            s[j] = dot / sqrt((double)D);
            if (s[j] > mx) mx = s[j];
        }
        for (int64_t j = 0; j < lim; j++) sum += (s[j] = exp(s[j] - mx));
        for (int64_t e = 0; e < D; e++) {
            double acc = 0;
            for (int64_t j = 0; j < lim; j++) acc += s[j] * row_of(&c->v, b, h, j)[e];
            double err = fabs(acc / sum - row_of(&c->o, b, h, i)[e]);
            if (err > worst) worst = err;
        }
    }
    free(s);
    return worst;
}

/* A view of buf as [B, H, S, D] whose rows are `row` floats apart, head h at h * D in a row;
 * cap: the elements addressable from buf. */
static modattn_tensor enc_view(float *buf, int64_t cap, int64_t B, int64_t H, int64_t S, int64_t D, int64_t row) {
    modattn_tensor t = modattn_tensor_contiguous(buf, MODATTN_DTYPE_F32, B, H, S, D);
    t.stride[0] = S * row, t.stride[1] = D, t.stride[2] = row, t.stride[3] = 1;
    t.capacity = cap;
    return t;
}

int main(int argc, char **argv) {
    const char *impls = "cpu_flash";
    int threads = 0, reps = 7;
    bool json = false;
    int first_shape = argc;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--impl") && a + 1 < argc) impls = argv[++a];
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--json")) json = true;
        else if (argv[a][0] == '-') {
            fprintf(stderr, "usage: %s [--impl A,B] [--threads N] [--reps N] [--json] B,H,S,D[,FLAGS]...\n", argv[0]);
            return 2;
        } else {
            first_shape = a;
            break;
        }
    }
    if (reps < 1) reps = 1;
    modattn_ctx_options opt;
    memset(&opt, 0, sizeof opt);
    opt.threads = threads;
    modattn_ctx *ctx;
    if (modattn_ctx_create(&opt, &ctx)) {
        fprintf(stderr, "%s\n", modattn_last_error());
        return 1;
    }
    if (json) printf("[\n");
    int nout = 0, rc = 0;
    for (int a = first_shape; a < argc; a++) {
        long long B, H, S, D;
        char flags[8] = "";
        int n = sscanf(argv[a], "%lld,%lld,%lld,%lld,%7s", &B, &H, &S, &D, flags);
        if (n < 4 || B < 1 || H < 1 || S < 1 || D < 1 || strspn(flags, "ce") != strlen(flags)) {
            fprintf(stderr, "bad shape '%s' (want B,H,S,D[,FLAGS], FLAGS letters of c, e)\n", argv[a]);
            return 2;
        }
        const bool causal = strchr(flags, 'c') != NULL, enc = strchr(flags, 'e') != NULL;
        size_t ne = (size_t)(B * H * S * D);
        /* the encoder's layout: one QKV buffer, q, k, v the three parts of each row */
        float *qkv = enc ? modattn__malloc(3 * ne * 4, MODATTN_MEM_OTHER) : NULL;
        float *q = enc ? qkv : modattn__malloc(ne * 4, MODATTN_MEM_OTHER);
        float *k = enc ? qkv : modattn__malloc(ne * 4, MODATTN_MEM_OTHER);
        float *v = enc ? qkv : modattn__malloc(ne * 4, MODATTN_MEM_OTHER), *o = modattn__malloc(ne * 4, MODATTN_MEM_OTHER);
        if (!q || !k || !v || !o) {
            fprintf(stderr, "%s\n", modattn_last_error());
            return 1;
        }
        if (enc)
            for (size_t i = 0; i < 3 * ne; i++) qkv[i] = frand();
        else
            for (size_t i = 0; i < ne; i++) q[i] = frand(), k[i] = frand(), v[i] = frand();
        modattn_attn_call call;
        memset(&call, 0, sizeof call);
        if (enc) {
            const int64_t HD = H * D, n3 = 3 * (int64_t)ne;
            call.q = enc_view(qkv, n3, B, H, S, D, 3 * HD);
            call.k = enc_view(qkv + HD, n3 - HD, B, H, S, D, 3 * HD);
            call.v = enc_view(qkv + 2 * HD, n3 - 2 * HD, B, H, S, D, 3 * HD);
            call.o = enc_view(o, (int64_t)ne, B, H, S, D, HD);
        } else {
            call.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
            call.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
            call.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
            call.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, H, S, D);
        }
        call.causal = causal;
        modattn_attn_desc desc;
        modattn_attn_describe(&call, &desc);
        double flops = 4.0 * B * H * S * S * D * (causal ? 0.5 : 1.0);
        char list[256];
        snprintf(list, sizeof list, "%s", impls);
        for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
            long idx = modattn_ctx_find(ctx, name);
            if (idx < 0) {
                fprintf(stderr, "no implementation '%s'\n", name);
                rc = 1;
                continue;
            }
            memset(o, 0, ne * 4);
            if (modattn_attention_with(ctx, (size_t)idx, &call)) {
                fprintf(stderr, "%s %s: %s\n", name, argv[a], modattn_last_error());
                rc = 1;
                continue;
            }
            double err = check_rows(&call, B, H, S, D, causal);
            double *ms = malloc(sizeof(double) * (size_t)reps), *cpu = malloc(sizeof(double) * (size_t)reps);
            for (int r = 0; r < reps; r++) {
                double c0 = cpu_now_s();
                uint64_t t0 = modattn__now_ns();
                modattn_attention_with(ctx, (size_t)idx, &call);
                ms[r] = (double)(modattn__now_ns() - t0) * 1e-6;
                cpu[r] = (cpu_now_s() - c0) * 1e3;
            }
            qsort(ms, (size_t)reps, sizeof *ms, cmp_d);
            qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
            double med = ms[reps / 2];
            /* flops per CPU-second: what one core delivers while it runs this, whatever else the
             * machine is doing (the wall clock counts time the cores spent on other processes) */
            double per_core = flops / cpu[reps / 2] * 1e-6;
            if (json)
                printf("%s  {\"impl\": \"%s\", \"B\": %lld, \"H\": %lld, \"S\": %lld, \"D\": %lld, \"causal\": %s, \"layout\": \"%s\", "
                       "\"threads\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, \"gflops\": %.2f, \"gflops_per_core_cpu\": %.2f, \"max_err\": %.3g}",
                       nout++ ? ",\n" : "", name, B, H, S, D, causal ? "true" : "false", enc ? "encoder" : "contiguous", modattn_ctx_threads(ctx), med,
                       ms[0], flops / med * 1e-6, per_core, err);
            else
                printf("%-10s B=%lld H=%lld S=%lld D=%lld%s%s threads=%d: median %.3f ms (min %.3f)  %.1f GFLOP/s  "
                       "(%.1f per core per CPU-second)  max err %.2g\n",
                       name, B, H, S, D, causal ? " causal" : "", enc ? " encoder-layout" : "", modattn_ctx_threads(ctx), med, ms[0],
                       flops / med * 1e-6, per_core, err);
            if (!(err < 1e-4)) {
                fprintf(stderr, "%s %s: result check failed (max err %g)\n", name, argv[a], err);
                rc = 1;
            }
            free(ms), free(cpu);
        }
        if (enc)
            modattn_free(qkv), modattn_free(o);
        else
            modattn_free(q), modattn_free(k), modattn_free(v), modattn_free(o);
    }
    if (json) printf("\n]\n");
    modattn_ctx_free(ctx);
    return rc;
}
