/* bench/trace_overhead.c — what tracing costs when it is off, and when it is on.
 *
 * 1. The span calls themselves: ns per modattn__trace_begin + modattn__trace_end pair, off and on.
 * 2. A real workload: median time of a MiniLM-shaped attention call (B=32, H=12, S=128, D=32) through
 *    the dispatcher with tracing off and on, interleaved, 200 rounds each.
 * Prints medians; "off" should be within noise of a build without tracing at all (one relaxed
 * atomic load and a predictable branch per span). */
#include "modattn/modattn.h"
#include "core/internal_core.h"

#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double span_cost_ns(int iters) {
    uint64_t t0 = modattn__now_ns();
    for (int i = 0; i < iters; i++) {
        uint64_t s = modattn__trace_begin();
        modattn__trace_end(s, "probe", "bench", "", 0, 0);
    }
    return (double)(modattn__now_ns() - t0) / iters;
}

int main(void) {
    printf("span begin+end, tracing off: %.2f ns\n", span_cost_ns(10000000));
    modattn__trace_enable(true);
    printf("span begin+end, tracing on:  %.2f ns (recorded)\n", span_cost_ns(200000));
    modattn__trace_clear();
    modattn__trace_enable(false);

    enum { B = 32, H = 12, S = 128, D = 32, ROUNDS = 200 };
    size_t n = (size_t)B * H * S * D;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4);
    for (size_t i = 0; i < n; i++) q[i] = (float)(i % 13) * 0.01f, k[i] = (float)(i % 7) * 0.02f, v[i] = (float)(i % 5);
    modattn_ctx *ctx;
    if (modattn_ctx_create(NULL, &ctx) != 0) return 1;
    modattn_attn_call c = {0};
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
    c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, H, S, D);
    static double off[ROUNDS], on[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        for (int pass = 0; pass < 2; pass++) {
            modattn__trace_enable(pass == 1);
            uint64_t t0 = modattn__now_ns();
            if (modattn_attention(ctx, &c) != 0) return 1;
            (pass ? on : off)[r] = (double)(modattn__now_ns() - t0) / 1e6;
        }
    }
    modattn__trace_enable(false);
    qsort(off, ROUNDS, sizeof *off, cmp);
    qsort(on, ROUNDS, sizeof *on, cmp);
    printf("attention 32x12x128x32 (%s), median of %d: tracing off %.4f ms, on %.4f ms (%+.2f%%)\n",
           modattn_ctx_policy(ctx), ROUNDS, off[ROUNDS / 2], on[ROUNDS / 2],
           100.0 * (on[ROUNDS / 2] - off[ROUNDS / 2]) / off[ROUNDS / 2]);
    modattn__trace_clear();
    modattn_ctx_free(ctx);
    free(q), free(k), free(v), free(o);
    return 0;
}
