/* model/arch_qwen.c — config.json of the Qwen decoders run as embedding models (Qwen3-Embedding's
 * layout: Qwen3Model / Qwen2Model, last-token pooling): transformers' Qwen3Config and Qwen2Config,
 * with the Hub's keys (rope_theta, rope_scaling) and transformers 5's (rope_parameters,
 * layer_types). What a config could say and these layers do not do is refused naming the key. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"
#include "core/internal_status.h"

static int q_int(const char *F, const json_t *j, const char *k, bool required, long long lo, long long hi, int *out) {
    const json_t *v = json_object_get(j, k);
    if (!v || json_is_null(v)) {
        if (!required) return 0;
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" is missing", F, k);
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be an integer in [%lld, %lld]", F, k, lo, hi);
    *out = (int)json_integer_value(v);
    return 0;
}

static int q_num(const char *F, const json_t *j, const char *k, double lo, double hi, double *out) {
    const json_t *v = json_object_get(j, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be a number in [%g, %g]", F, k, lo, hi);
    *out = json_number_value(v);
    return 0;
}

static int q_bool(const char *F, const json_t *j, const char *k, bool *out) {
    const json_t *v = json_object_get(j, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be true or false", F, k);
    *out = json_is_true(v);
    return 0;
}

/* rope_scaling / rope_parameters: only the default (unscaled) rotary embedding; its rope_theta */
static int q_rope(const char *F, const char *key, const json_t *r, double *theta) {
    if (!r || json_is_null(r)) return 0;
    if (!json_is_object(r)) return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be an object", F, key);
    const json_t *ty = json_object_get(r, "rope_type");
    if (!ty) ty = json_object_get(r, "type");
    const char *tn = ty && json_is_string(ty) ? json_string_value(ty) : "(none)";
    if (ty && strcmp(tn, "default") != 0)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s\" (rope_type \"%.40s\") is not supported (only "
                             "\"default\" rotary embeddings: no scaling)", F, key, tn);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)r, k, v) {
        if (strcmp(k, "rope_type") == 0 || strcmp(k, "type") == 0) continue;
        if (strcmp(k, "rope_theta") == 0) {
            if (!json_is_number(v) || !(json_number_value(v) >= 1.0 && json_number_value(v) <= 1e12))
                return modattn__error(MODATTN_EFORMAT, "%s: field \"%s.rope_theta\" must be a number in [1, 1e12]", F,
                                     key);
            *theta = json_number_value(v);
            continue;
        }
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s.%.60s\" is not supported (only \"default\" "
                             "rotary embeddings: no scaling)", F, key, k);
    }
    if (!ty && json_object_size(r) > 0 && !json_object_get(r, "rope_theta"))
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s\" names no rope_type", F, key);
    return 0;
}

int modattn__read_qwen(const char *F, json_t *j, modattn__model_config *c) {
    const bool q3 = c->arch == MODATTN__ARCH_QWEN3;
    int st;
    c->decoder = c->modern = false;
    if ((st = q_int(F, j, "hidden_size", true, 1, 65536, &c->hidden)) ||
        (st = q_int(F, j, "num_hidden_layers", true, 1, MODATTN__MAX_LAYERS, &c->layers)) ||
        (st = q_int(F, j, "num_attention_heads", true, 1, 4096, &c->heads)) ||
        (st = q_int(F, j, "intermediate_size", true, 1, 1 << 20, &c->intermediate)) ||
        (st = q_int(F, j, "max_position_embeddings", true, 2, 1 << 24, &c->max_positions)) ||
        (st = q_int(F, j, "vocab_size", true, 1, 1 << 24, &c->vocab)))
        return st;
    c->kv_heads = c->heads;
    if ((st = q_int(F, j, "num_key_value_heads", false, 1, 4096, &c->kv_heads))) return st;
    if (c->heads % c->kv_heads != 0)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"num_attention_heads\" = %d is not a multiple of "
                             "\"num_key_value_heads\" = %d", F, c->heads, c->kv_heads);
    c->head_dim = c->hidden / c->heads;
    if (q3 && (st = q_int(F, j, "head_dim", false, 2, 65536, &c->head_dim))) return st;
    if (!q3 && c->hidden % c->heads != 0)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"hidden_size\" = %d is not a multiple of "
                             "\"num_attention_heads\" = %d", F, c->hidden, c->heads);
    if (c->head_dim % 2 != 0)
        return modattn__error(MODATTN_EFORMAT, "%s: the head size %d is odd (rotary embeddings rotate pairs)", F,
                             c->head_dim);
    c->type_vocab = 0;
    c->pad_id = 0;
    c->ln_eps = 1e-6;
    if ((st = q_num(F, j, "rms_norm_eps", 0.0, 1.0, &c->ln_eps))) return st;
    const json_t *act = json_object_get(j, "hidden_act");
    const char *an = act && json_is_string(act) ? json_string_value(act) : act && !json_is_null(act) ? "?" : "silu";
    if (strcmp(an, "silu") != 0 && strcmp(an, "swish") != 0)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"hidden_act\" = \"%.40s\" is not supported (silu: "
                             "SwiGLU)", F, an);
    c->act = MODATTN__ACT_SILU;
    /* Qwen2's q/k/v projections always have biases (o_proj none); Qwen3's attention_bias gives all four */
    c->qkv_bias = !q3;
    c->attn_bias = false;
    if (q3 && (st = q_bool(F, j, "attention_bias", &c->attn_bias))) return st;
    if (q3) c->qkv_bias = c->attn_bias;
    c->qk_norm = q3;
    /* what these layers do not do: refused, never ignored */
    static const char *const k_moe[] = {"num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
                                        "decoder_sparse_step", "shared_expert_intermediate_size"};
    for (size_t i = 0; i < sizeof k_moe / sizeof *k_moe; i++) {
        const json_t *v = json_object_get(j, k_moe[i]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s\" is not supported (mixture-of-experts "
                                 "layers: model_type \"%s\" runs dense layers)", F, k_moe[i], c->model_type);
    }
    const json_t *am = json_object_get(j, "auto_map");
    if (am && !json_is_null(am))
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"auto_map\" is not supported (remote code: this "
                             "encoder runs %s as transformers defines it)", F, q3 ? "Qwen3Model" : "Qwen2Model");
    bool sliding = false;
    if ((st = q_bool(F, j, "use_sliding_window", &sliding))) return st;
    if (sliding)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"use_sliding_window\" = true is not supported (causal "
                             "attention over the whole text only)", F);
    const json_t *lt = json_object_get(j, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)c->layers)
            return modattn__error(MODATTN_EFORMAT, "%s: field \"layer_types\" must be an array of %d strings "
                                 "(num_hidden_layers)", F, c->layers);
        for (int l = 0; l < c->layers; l++) {
            const json_t *v = json_array_get(lt, (size_t)l);
            const char *t = json_is_string(v) ? json_string_value(v) : "";
            if (strcmp(t, "full_attention") != 0)
                return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"layer_types\"[%d] = \"%.40s\" is not "
                                     "supported (full_attention)", F, l, t);
        }
    }
    bool is_enc_dec = false;
    if ((st = q_bool(F, j, "is_encoder_decoder", &is_enc_dec))) return st;
    if (is_enc_dec)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"is_encoder_decoder\" = true is not supported", F);
    c->rope_theta = 10000.0;
    if ((st = q_num(F, j, "rope_theta", 1.0, 1e12, &c->rope_theta)) ||
        (st = q_rope(F, "rope_scaling", json_object_get(j, "rope_scaling"), &c->rope_theta)) ||
        (st = q_rope(F, "rope_parameters", json_object_get(j, "rope_parameters"), &c->rope_theta)))
        return st;
    c->decoder = true;
    return 0;
}
