/* bench/attn_window.c — what a sliding window saves: one implementation (cpu_flash by default) on
 * the same q, k, v at full attention and with windows, measured in the same run (the runs
 * interleaved rep by rep, so both see the same machine), after checking sample rows of every
 * output against an fp64 computation of the window rule written out here.
 *
 *   attn_window [--impl NAME] [--threads N] [--reps N] [--heads H] [--dim D] [--causal]
 *               S WL,WR [WL,WR ...]
 *
 * Prints a markdown table: per window its median time, its ratio to the full path's median, and
 * GFLOP/s counted over the (query, key) pairs it leaves visible (modattn_attn_desc_flops).
 * Exit status 1 if a check fails. */
#include "modattn/modattn.h"
#include "core/internal_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x1234567u;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* max |o - exact| over 8 rows; wl/wr < 0: that side unbounded */
static double check_rows(const float *q, const float *k, const float *v, const float *o, int64_t H, int64_t S,
                         int64_t D, bool causal, int64_t wl, int64_t wr) {
    double worst = 0, *s = malloc(sizeof(double) * (size_t)S);
    for (int t = 0; t < 8; t++) {
        int64_t h = (t * 7) % H, i = (S - 1) * t / 7;
        int64_t lo = wl < 0 ? 0 : i - wl, hi = wr < 0 ? S - 1 : i + wr;
        if (causal && hi > i) hi = i;
        if (lo < 0) lo = 0;
        if (hi > S - 1) hi = S - 1;
        const float *qr = q + (h * S + i) * D;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = lo; j <= hi; j++) {
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += (double)qr[d] * k[(h * S + j) * D + d];
            s[j] = dot / sqrt((double)D);
            if (s[j] > mx) mx = s[j];
        }
        for (int64_t j = lo; j <= hi; j++) sum += (s[j] = exp(s[j] - mx));
        for (int64_t e = 0; e < D; e++) {
            double acc = 0;
            for (int64_t j = lo; j <= hi; j++) acc += s[j] * v[(h * S + j) * D + e];
            double err = fabs(acc / sum - o[(h * S + i) * D + e]);
            if (err > worst) worst = err;
        }
    }
    free(s);
    return worst;
}

int main(int argc, char **argv) {
    const char *impl = "cpu_flash";
    int threads = 0, reps = 5;
    long long H = 4, D = 64;
    bool causal = false;
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--impl") && a + 1 < argc) impl = argv[++a];
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--heads") && a + 1 < argc) H = atoll(argv[++a]);
        else if (!strcmp(argv[a], "--dim") && a + 1 < argc) D = atoll(argv[++a]);
        else if (!strcmp(argv[a], "--causal")) causal = true;
        else break;
    }
    if (a + 2 > argc || reps < 1 || H < 1 || D < 1) {
        fprintf(stderr, "usage: %s [--impl NAME] [--threads N] [--reps N] [--heads H] [--dim D] [--causal] S WL,WR...\n",
                argv[0]);
        return 2;
    }
    const long long S = atoll(argv[a++]);
    const int nw = argc - a + 1; /* window 0: the full path */
    long long *wl = calloc((size_t)nw, sizeof *wl), *wr = calloc((size_t)nw, sizeof *wr);
    wl[0] = wr[0] = -1;
    for (int w = 1; w < nw; w++)
        if (sscanf(argv[a + w - 1], "%lld,%lld", &wl[w], &wr[w]) != 2 || wl[w] < -1 || wr[w] < -1) {
            fprintf(stderr, "bad window '%s' (want WL,WR, each >= -1)\n", argv[a + w - 1]);
            return 2;
        }
    modattn_ctx_options opt;
    memset(&opt, 0, sizeof opt);
    opt.threads = threads;
    modattn_ctx *ctx;
    if (modattn_ctx_create(&opt, &ctx)) {
        fprintf(stderr, "%s\n", modattn_last_error());
        return 1;
    }
    long idx = modattn_ctx_find(ctx, impl);
    if (idx < 0) {
        fprintf(stderr, "no implementation '%s'\n", impl);
        return 1;
    }
    size_t ne = (size_t)(H * S * D);
    float *q = modattn__malloc(ne * 4, MODATTN_MEM_OTHER), *k = modattn__malloc(ne * 4, MODATTN_MEM_OTHER);
    float *v = modattn__malloc(ne * 4, MODATTN_MEM_OTHER), *o = modattn__malloc(ne * 4, MODATTN_MEM_OTHER);
    if (!q || !k || !v || !o) {
        fprintf(stderr, "%s\n", modattn_last_error());
        return 1;
    }
    for (size_t i = 0; i < ne; i++) q[i] = frand(), k[i] = frand(), v[i] = frand();
    modattn_attn_call *calls = calloc((size_t)nw, sizeof *calls);
    double *ms = calloc((size_t)(nw * reps), sizeof *ms), *med = calloc((size_t)nw, sizeof *med);
    int rc = 0;
    for (int w = 0; w < nw; w++) {
        modattn_attn_call *c = &calls[w];
        c->q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, 1, H, S, D);
        c->k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, 1, H, S, D);
        c->v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, 1, H, S, D);
        c->o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, 1, H, S, D);
        c->causal = causal;
        c->window = w > 0, c->window_left = (int32_t)wl[w], c->window_right = (int32_t)wr[w];
        memset(o, 0, ne * 4);
        if (modattn_attention_with(ctx, (size_t)idx, c)) {
            fprintf(stderr, "%s: %s\n", impl, modattn_last_error());
            return 1;
        }
        double err = check_rows(q, k, v, o, H, S, D, causal, wl[w], wr[w]);
        if (!(err < 1e-4)) {
            fprintf(stderr, "window (%lld,%lld): result check failed (max err %g)\n", wl[w], wr[w], err);
            rc = 1;
        }
    }
    for (int r = 0; r < reps; r++) /* interleaved: every configuration once per round */
        for (int w = 0; w < nw; w++) {
            uint64_t t0 = modattn__now_ns();
            modattn_attention_with(ctx, (size_t)idx, &calls[w]);
            ms[w * reps + r] = (double)(modattn__now_ns() - t0) * 1e-6;
        }
    printf("%s, B=1 H=%lld Sq=Sk=%lld D=%lld%s, %d threads, median of %d interleaved runs; sample rows checked "
           "against fp64 (max err < 1e-4)\n\n",
           impl, H, S, D, causal ? " causal" : "", modattn_ctx_threads(ctx), reps);
    printf("| window (left,right) | median ms | min ms | speed-up vs full | GFLOP/s (visible pairs) |\n");
    printf("|---|---:|---:|---:|---:|\n");
    for (int w = 0; w < nw; w++) {
        qsort(ms + w * reps, (size_t)reps, sizeof *ms, cmp_d);
        med[w] = ms[w * reps + reps / 2];
        modattn_attn_desc d;
        modattn_attn_describe(&calls[w], &d);
        char name[64];
        if (w == 0) snprintf(name, sizeof name, "full%s", causal ? " (causal)" : "");
        else snprintf(name, sizeof name, "(%lld,%lld)", wl[w], wr[w]);
        printf("| %s | %.2f | %.2f | %.1fx | %.1f |\n", name, med[w], ms[w * reps], med[0] / med[w],
               modattn_attn_desc_flops(&d) / med[w] * 1e-6);
    }
    modattn_free(q), modattn_free(k), modattn_free(v), modattn_free(o);
    free(calls), free(ms), free(med), free(wl), free(wr);
    modattn_ctx_free(ctx);
    return rc;
}
