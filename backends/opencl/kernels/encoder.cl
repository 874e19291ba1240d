/* backends/opencl/kernels/encoder.cl — the encoder's row kernels on OpenCL (fp32): embedding
 * gather + LayerNorm, the GEMMs' epilogue (bias, activation, LayerNorm; padding rows zeroed),
 * pooling and L2 normalisation. The GEMMs themselves are CLBlast's. One work-group of WG
 * work-items per row; statistics are reduced as a tree in local memory, in two passes (mean,
 * then squared deviations), as the host engine does in double. */

#define WG 64

static float wg_sum(__local float *tmp, float v) {
    const int l = get_local_id(0);
    tmp[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) tmp[l] += tmp[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = tmp[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* y[0..n) = LayerNorm(y) * g + b; each work-item owns the elements k = lid + WG*t. */
static void row_layer_norm(__global float *y, int n, __global const float *g, __global const float *b, float eps,
                           __local float *tmp) {
    const int l = get_local_id(0);
    float s = 0.0f;
    for (int k = l; k < n; k += WG) s += y[k];
    const float mean = wg_sum(tmp, s) / (float)n;
    float v = 0.0f;
    for (int k = l; k < n; k += WG) {
        const float d = y[k] - mean;
        v += d * d;
    }
    const float var = wg_sum(tmp, v) / (float)n;
    const float inv = 1.0f / sqrt(var + eps);
    for (int k = l; k < n; k += WG) y[k] = (y[k] - mean) * inv * g[k] + b[k];
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void embed_ln(__global const int *ids, __global const int *lens, __global const float *word,
              __global const float *pos, __global const float *type0, __global const float *g,
              __global const float *bt, __global float *x, int S, int H, float eps, __global const int *pos_ids,
              int has_pos_ids, int plain) {
    __local float tmp[WG];
    const int r = get_group_id(0), l = get_local_id(0);
    const int b = r / S, i = r - b * S;
    __global float *y = x + (long)r * H;
    if (i >= lens[b]) { /* uniform in the group */
        for (int k = l; k < H; k += WG) y[k] = 0.0f;
        return;
    }
    __global const float *w = word + (long)ids[r] * H;
    __global const float *p = pos + (long)(has_pos_ids ? pos_ids[r] : i) * H;
    for (int k = l; k < H; k += WG) y[k] = w[k] + p[k] + type0[k];
    if (!plain) row_layer_norm(y, H, g, bt, eps, tmp); /* plain: a decoder's token embeddings */
}

/* erf_approx: backends/cpu/erf_approx.h, put before this file in the program (CMakeLists.txt) */
/* act: 0 none, 1 GELU (erf), 2 GELU (tanh), 3 ReLU */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void row_epilogue(__global float *y, long y0, long ldy, __global const float *bias, __global const int *lens, int S,
                  int N, int act, int has_ln, __global const float *g, __global const float *bt, float eps) {
    __local float tmp[WG];
    const int r = get_group_id(0), l = get_local_id(0);
    const int b = r / S, i = r - b * S;
    __global float *row = y + y0 + (long)r * ldy;
    if (i >= lens[b]) {
        for (int k = l; k < N; k += WG) row[k] = 0.0f;
        return;
    }
    for (int k = l; k < N; k += WG) {
        float v = row[k] + bias[k];
        if (act == 1) v = 0.5f * v * (1.0f + erf_approx(v * 0.70710678118654752f));
        else if (act == 2) v = 0.5f * v * (1.0f + tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        else if (act == 3) v = v > 0.0f ? v : 0.0f;
        else if (act == 4) v = v / (1.0f + exp(-v));
        row[k] = v;
    }
    if (has_ln) row_layer_norm(row, N, g, bt, eps, tmp);
}

/* One work-item per (batch row, column): the pooling modes in sentence-transformers' order. */
__kernel void pool_rows(__global const float *x, __global const int *lens, int B, int S, int H, int modes,
                        __global float *out, int dim) {
    const long gid = get_global_id(0);
    if (gid >= (long)B * H) return;
    const int b = (int)(gid / H), k = (int)(gid % H);
    const int n = lens[b];
    __global const float *xb = x + (long)b * S * H;
    __global float *o = out + (long)b * dim;
    int at = 0;
    if (modes & 1) { o[at + k] = xb[k]; at += H; }                 /* cls */
    if (modes & 2) {                                               /* max */
        float m = xb[k];
        for (int i = 1; i < n; i++) m = fmax(m, xb[(long)i * H + k]);
        o[at + k] = m;
        at += H;
    }
    if (modes & (4 | 8 | 16)) {                                    /* mean, mean_sqrt_len, weightedmean */
        float s = 0.0f, c = 0.0f, ws = 0.0f, wc = 0.0f;            /* Kahan-compensated sums */
        for (int i = 0; i < n; i++) {
            const float v = xb[(long)i * H + k];
            float y = v - c, t = s + y;
            c = (t - s) - y, s = t;
            y = (float)(i + 1) * v - wc, t = ws + y;
            wc = (t - ws) - y, ws = t;
        }
        const float cnt = n > 0 ? (float)n : 1e-9f;
        if (modes & 4) { o[at + k] = s / cnt; at += H; }
        if (modes & 8) { o[at + k] = s / sqrt(cnt); at += H; }
        if (modes & 16) { o[at + k] = ws / ((float)n * (float)(n + 1) / 2.0f); at += H; }
    }
    if (modes & 32) { o[at + k] = xb[(long)(n > 0 ? n - 1 : 0) * H + k]; at += H; } /* lasttoken */
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void l2_normalize(__global float *out, int dim) {
    __local float tmp[WG];
    const int b = get_group_id(0), l = get_local_id(0);
    __global float *o = out + (long)b * dim;
    float s = 0.0f;
    for (int k = l; k < dim; k += WG) s += o[k] * o[k];
    const float norm = sqrt(wg_sum(tmp, s));
    const float inv = 1.0f / (norm > 1e-12f ? norm : 1e-12f);
    for (int k = l; k < dim; k += WG) o[k] *= inv;
}

/* The pre-LN, rotary and gated encoders' ops (ModernBERT). y = LayerNorm(x) * g + b, one row per
 * work-group; padding rows zero. Each work-item copies and then normalises the same elements. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void norm_rows(__global const float *x, long ldx, __global float *y, long ldy, __global const int *lens, int S, int H,
               __global const float *g, __global const float *bt, float eps, int rms, int group) {
    __local float tmp[WG];
    const int r = get_group_id(0), l = get_local_id(0);
    const int b = r / S, i = r - b * S;
    __global float *row = y + (long)r * ldy;
    if (i >= lens[b]) {
        for (int k = l; k < H; k += WG) row[k] = 0.0f;
        return;
    }
    __global const float *in = x + (long)r * ldx;
    for (int k = l; k < H; k += WG) row[k] = in[k];
    barrier(CLK_GLOBAL_MEM_FENCE);
    const int G = group > 0 ? group : H;
    for (int c0 = 0; c0 < H; c0 += G) { /* group: each head's D on its own (QK-norm) */
        if (!rms) {
            row_layer_norm(row + c0, G, g + c0, bt + c0, eps, tmp);
            continue;
        }
        float s = 0.0f; /* RMSNorm: x * rsqrt(mean(x^2) + eps) * gamma */
        for (int k = l; k < G; k += WG) s += row[c0 + k] * row[c0 + k];
        const float inv = 1.0f / sqrt(wg_sum(tmp, s) / (float)G + eps);
        for (int k = l; k < G; k += WG) row[c0 + k] = g[c0 + k] * (row[c0 + k] * inv);
    }
}

/* Rotary embedding, NeoX layout (interleaved: GPT-J's adjacent pairs), in place on the first
 * `heads` heads of D columns of each row: one work-item per (row, head, j < D/2); position r % S;
 * padding rows left as they are. */
__kernel void rotary_rows(__global float *x, long ldx, __global const int *lens, int S, int rows, int heads, int D,
                          __global const float *cs, __global const float *sn, int interleaved) {
    const long gid = get_global_id(0);
    const int hd = D / 2;
    if (gid >= (long)rows * heads * hd) return;
    const int j = (int)(gid % hd), h = (int)(gid / hd % heads), r = (int)(gid / ((long)hd * heads));
    const int b = r / S, i = r - b * S;
    if (i >= lens[b]) return;
    __global float *p = x + (long)r * ldx + (long)h * D;
    const float c = cs[(long)i * hd + j], s = sn[(long)i * hd + j];
    const int i1 = interleaved ? 2 * j : j, i2 = interleaved ? 2 * j + 1 : j + hd; /* GPT-J: adjacent pairs */
    const float x1 = p[i1], x2 = p[i2];
    p[i1] = x1 * c - x2 * s;
    p[i2] = x2 * c + x1 * s;
}

/* Gated FFN in place: x[r, k] = act(x[r, k]) * x[r, N + k], k < N (act as row_epilogue's). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void glu_rows(__global float *x, long ldx, __global const int *lens, int S, int N, int act) {
    const int r = get_group_id(0), l = get_local_id(0);
    const int b = r / S, i = r - b * S;
    __global float *row = x + (long)r * ldx;
    if (i >= lens[b]) {
        for (int k = l; k < N; k += WG) row[k] = 0.0f;
        return;
    }
    for (int k = l; k < N; k += WG) {
        float v = row[k];
        if (act == 1) v = 0.5f * v * (1.0f + erf_approx(v * 0.70710678118654752f));
        else if (act == 2) v = 0.5f * v * (1.0f + tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        else if (act == 3) v = v > 0.0f ? v : 0.0f;
        else if (act == 4) v = v / (1.0f + exp(-v)); /* SiLU (SwiGLU) */
        row[k] = v * row[N + k];
    }
}
