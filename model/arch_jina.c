/* model/arch_jina.c — jina_bert (jina-embeddings-v2-*-en): a BERT whose config.json says
 * model_type "bert" and position_embedding_type "alibi" and whose code lives on the Hub
 * (auto_map -> jinaai/jina-bert-implementation). That code is not run: its architecture is read
 * from the config keys and weight names it uses (docs/MODELS.md):
 *   - no position embeddings: each layer's attention adds the ALiBi bias -slope[h] * |i - j|
 *     (symmetric: an encoder), the slopes of _get_alibi_head_slopes below;
 *   - feed_forward_type "geglu" / "reglu": JinaBertGLUMLP, post-LN:
 *       [g | u] = x gated_layers^T (no bias, [2I, H]); x = layernorm(x + wo(act(g) * u));
 *     act GELU (erf) for geglu, ReLU for reglu, on the FIRST half (as ModernBERT's GeGLU);
 *     feed_forward_type "original": BERT's intermediate/output FFN;
 *   - attention, embeddings (word + token type 0, LayerNorm) and its output as BERT's.
 * Everything else a config could say (another remote implementation, another feed-forward, an
 * attention variant) is refused naming the key. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"
#include "core/internal_status.h"

/* the repository whose published code this file follows */
static const char k_impl[] = "jinaai/jina-bert-implementation";

int modattn__jina_config(const char *F, const struct json_t *j, modattn__model_config *c) {
    c->alibi = true;
    c->jina_glu = true;
    c->act = MODATTN__ACT_GELU_ERF;
    const json_t *ff = json_object_get(j, "feed_forward_type");
    const char *fft = ff && json_is_string(ff) ? json_string_value(ff) : ff && !json_is_null(ff) ? NULL : "original";
    if (!fft)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"feed_forward_type\" must be a string", F);
    if (strcmp(fft, "geglu") == 0) c->act = MODATTN__ACT_GELU_ERF; /* nn.GELU(): erf */
    else if (strcmp(fft, "reglu") == 0) c->act = MODATTN__ACT_RELU;
    else if (strcmp(fft, "original") == 0) c->jina_glu = false; /* BERT's FFN, hidden_act (already read) */
    else
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"feed_forward_type\" = \"%.40s\" is not supported "
                             "(geglu, reglu, original: jina-bert-implementation's)", F, fft);
    /* remote code: only the implementation this file follows (its other repositories differ, e.g.
     * jina-bert-v2-qk-post-norm's extra norms) */
    const json_t *am = json_object_get(j, "auto_map");
    if (am && !json_is_null(am)) {
        if (!json_is_object(am))
            return modattn__error(MODATTN_EFORMAT, "%s: field \"auto_map\" must be an object", F);
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)am, key, v) {
            const char *s = json_is_string(v) ? json_string_value(v) : "";
            const char *bare = strrchr(k_impl, '/') + 1; /* "jina-bert-implementation--modeling_bert..." */
            if (strncmp(s, k_impl, strlen(k_impl)) != 0 && strncmp(s, bare, strlen(bare)) != 0)
                return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"auto_map.%.40s\" = \"%.80s\" is not supported "
                                     "(remote code: this encoder runs jina_bert as %s publishes it, read from "
                                     "its config keys and weights, never run)", F, key, s, k_impl);
        }
    }
    /* keys of attention variants jina-bert-implementation does not have */
    static const char *const k_refused[] = {"num_experts", "num_local_experts", "rotary_emb_base", "rope_theta",
                                            "rope_scaling", "qk_norm", "sliding_window"};
    for (size_t i = 0; i < sizeof k_refused / sizeof *k_refused; i++) {
        const json_t *v = json_object_get(j, k_refused[i]);
        if (v && !json_is_null(v) && !json_is_false(v))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s\" is not supported (jina_bert has ALiBi "
                                 "positions and dense layers only)", F, k_refused[i]);
    }
    const json_t *ep = json_object_get(j, "emb_pooler");
    if (ep && !json_is_null(ep) && !json_is_string(ep))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"emb_pooler\" must be a string or null", F);
    /* (emb_pooler names JinaBertModel.encode's pooling; sentence-transformers' modules say ours) */
    return 0;
}

/* jina-bert-implementation's _get_alibi_head_slopes (the ALiBi paper's), in Python's doubles,
 * then float32 (torch.Tensor): for n a power of two, start = 2^(-2^-(log2 n - 3)) and slope k =
 * start * start**k; otherwise the closest power of two's slopes, then every other slope of twice it. */
static double slope_pow2(int n, int i) { /* get_slopes_power_of_2(n)[i] = start * ratio**i */
    const double start = pow(2.0, -pow(2.0, -(log2((double)n) - 3.0)));
    return start * pow(start, (double)i);
}

void modattn__jina_slopes(int heads, float *out) {
    int p = 1;
    while (p <= heads / 2) p *= 2;
    for (int k = 0; k < p; k++) out[k] = (float)slope_pow2(p, k);
    /* _get_alibi_head_slopes(2p)[0::2][: heads - p] */
    for (int k = 0; k < heads - p; k++) out[p + k] = (float)slope_pow2(2 * p, 2 * k);
}
