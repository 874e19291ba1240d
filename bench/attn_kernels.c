/* bench/attn_kernels.c — times attention implementations on given shapes through the public API
 * (modattn_attention_with: the dispatcher's own call path, workspace included), after checking
 * a sample of output rows against an fp64 computation ("validate, then benchmark").
 *
 *   attn_kernels [--impl NAME[,NAME...]] [--threads N] [--reps N] [--json]
 *                SHAPE...        SHAPE = B,H,S,D[,c]   (Hq = Hkv = H, Sq = Sk = S; ",c": causal)
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

/* fp64 check of a few rows: max |o - exact| over them. */
static double check_rows(const float *q, const float *k, const float *v, const float *o, int64_t B, int64_t H,
                         int64_t S, int64_t D, bool causal) {
    double worst = 0;
    double *s = malloc(sizeof(double) * (size_t)S);
    for (int t = 0; t < 8; t++) {
        int64_t b = t % B, h = (t * 7) % H, i = (S - 1) * t / 7;
        const float *qr = q + ((b * H + h) * S + i) * D;
        int64_t lim = causal ? i + 1 : S;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < lim; j++) {
            const float *kr = k + ((b * H + h) * S + j) * D;
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += (double)qr[d] * kr[d];
            s[j] = dot / sqrt((double)D);
            if (s[j] > mx) mx = s[j];
        }
        for (int64_t j = 0; j < lim; j++) sum += (s[j] = exp(s[j] - mx));
        for (int64_t e = 0; e < D; e++) {
            double acc = 0;
            for (int64_t j = 0; j < lim; j++) acc += s[j] * v[((b * H + h) * S + j) * D + e];
            double err = fabs(acc / sum - o[((b * H + h) * S + i) * D + e]);
            if (err > worst) worst = err;
        }
    }
    free(s);
    return worst;
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
            fprintf(stderr, "usage: %s [--impl A,B] [--threads N] [--reps N] [--json] B,H,S,D[,c]...\n", argv[0]);
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
        char c = 0;
        int n = sscanf(argv[a], "%lld,%lld,%lld,%lld,%c", &B, &H, &S, &D, &c);
        if (n < 4 || B < 1 || H < 1 || S < 1 || D < 1) {
            fprintf(stderr, "bad shape '%s' (want B,H,S,D[,c])\n", argv[a]);
            return 2;
        }
        bool causal = n == 5 && c == 'c';
        size_t ne = (size_t)(B * H * S * D);
        float *q = modattn__malloc(ne * 4, MODATTN_MEM_OTHER), *k = modattn__malloc(ne * 4, MODATTN_MEM_OTHER);
        float *v = modattn__malloc(ne * 4, MODATTN_MEM_OTHER), *o = modattn__malloc(ne * 4, MODATTN_MEM_OTHER);
        if (!q || !k || !v || !o) {
            fprintf(stderr, "%s\n", modattn_last_error());
            return 1;
        }
        for (size_t i = 0; i < ne; i++) q[i] = frand(), k[i] = frand(), v[i] = frand();
        modattn_attn_call call;
        memset(&call, 0, sizeof call);
        call.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
        call.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
        call.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
        call.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, H, S, D);
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
            double err = check_rows(q, k, v, o, B, H, S, D, causal);
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
                printf("%s  {\"impl\": \"%s\", \"B\": %lld, \"H\": %lld, \"S\": %lld, \"D\": %lld, \"causal\": %s, "
                       "\"threads\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, \"gflops\": %.2f, \"gflops_per_core_cpu\": %.2f, \"max_err\": %.3g}",
                       nout++ ? ",\n" : "", name, B, H, S, D, causal ? "true" : "false", modattn_ctx_threads(ctx), med,
                       ms[0], flops / med * 1e-6, per_core, err);
            else
                printf("%-10s B=%lld H=%lld S=%lld D=%lld%s threads=%d: median %.3f ms (min %.3f)  %.1f GFLOP/s  "
                       "(%.1f per core per CPU-second)  max err %.2g\n",
                       name, B, H, S, D, causal ? " causal" : "", modattn_ctx_threads(ctx), med, ms[0],
                       flops / med * 1e-6, per_core, err);
            if (!(err < 1e-4)) {
                fprintf(stderr, "%s %s: result check failed (max err %g)\n", name, argv[a], err);
                rc = 1;
            }
            free(ms), free(cpu);
        }
        modattn_free(q), modattn_free(k), modattn_free(v), modattn_free(o);
    }
    if (json) printf("\n]\n");
    modattn_ctx_free(ctx);
    return rc;
}
