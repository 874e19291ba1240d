/* examples/attention.c — one attention call through the dispatcher, checked against a plain loop.
 * The dispatcher picks the fastest implementation that supports the shape and says why:
 *
 *     cc attention.c $(pkg-config --cflags --libs modattn) -lm -o attention && ./attention
 */
#include <modattn/modattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 2, H = 4, S = 100, D = 64 };

int main(void) {
    static float q[B * H * S * D], k[B * H * S * D], v[B * H * S * D], o[B * H * S * D];
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        q[i] = (float)((i * 7919u) % 1000) / 1000.0f - 0.5f;
        k[i] = (float)((i * 104729u) % 1000) / 1000.0f - 0.5f;
        v[i] = (float)((i * 15485863u) % 1000) / 1000.0f - 0.5f;
    }
    modattn_ctx *ctx = NULL;
    if (modattn_ctx_create(NULL, &ctx) != 0) {
        fprintf(stderr, "attention: %s\n", modattn_last_error());
        return 1;
    }
    modattn_attn_call c = {0};
    c.q = modattn_tensor_contiguous(q, MODATTN_DTYPE_F32, B, H, S, D);
    c.k = modattn_tensor_contiguous(k, MODATTN_DTYPE_F32, B, H, S, D);
    c.v = modattn_tensor_contiguous(v, MODATTN_DTYPE_F32, B, H, S, D);
    c.o = modattn_tensor_contiguous(o, MODATTN_DTYPE_F32, B, H, S, D);
    c.causal = true;
    if (modattn_attention(ctx, &c) != 0) {
        fprintf(stderr, "attention: %s\n", modattn_last_error());
        modattn_ctx_free(ctx);
        return 1;
    }
    /* the same, in double precision, for one head: softmax(q k^T / sqrt(D), causal) v */
    double worst = 0;
    const float *qh = q + D * S * 5, *kh = k + D * S * 5, *vh = v + D * S * 5, *oh = o + D * S * 5;
    for (int i = 0; i < S; i++) {
        double w[S], m = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++) {
            double dot = 0;
            for (int d = 0; d < D; d++) dot += (double)qh[i * D + d] * kh[j * D + d];
            w[j] = dot / sqrt((double)D);
            if (w[j] > m) m = w[j];
        }
        for (int j = 0; j <= i; j++) sum += (w[j] = exp(w[j] - m));
        for (int d = 0; d < D; d++) {
            double acc = 0;
            for (int j = 0; j <= i; j++) acc += w[j] / sum * vh[j * D + d];
            if (fabs(acc - oh[i * D + d]) > worst) worst = fabs(acc - oh[i * D + d]);
        }
    }
    printf("attention [%d, %d, %d, %d], causal: largest difference from fp64 %.2e\n", B, H, S, D, worst);
    modattn_ctx_free(ctx);
    return worst < 1e-5 ? 0 : 1;
}
