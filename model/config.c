/* model/config.c — reads the configuration files of a Hugging Face / sentence-transformers model
 * directory into a modattn__model_config, checking every field it uses: its presence, its JSON
 * type and its range. Nothing model-specific is assumed; every size comes from config.json.
 * Every error names the file and the field. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "model/model_internal.h"
#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

int modattn__path_join(char *buf, size_t len, const char *dir, const char *name) {
    int n;
    if (!dir || !*dir) n = snprintf(buf, len, "%s", name);
    else if (!name || !*name) n = snprintf(buf, len, "%s", dir);
    else n = snprintf(buf, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    if (n < 0 || (size_t)n >= len)
        return modattn__error(MODATTN_EINVAL, "path %s/%s is too long", dir ? dir : "", name);
    return 0;
}

/* A path for a message: whole when short, else its start and end around "...", so that the
 * file's name survives a folder name of thousands of bytes. */
void modattn__path_shown(const char *path, char *buf, size_t len) {
    size_t n = strlen(path);
    if (n < len) {
        memcpy(buf, path, n + 1);
        return;
    }
    size_t tail = (len - 4) * 2 / 3, head = len - 4 - tail;
    memcpy(buf, path, head);
    memcpy(buf + head, "...", 3);
    memcpy(buf + head + 3, path + n - tail, tail + 1);
}

/* Load a JSON file. `shown` is the name used in messages (relative to the model directory). */
static int load_json(const char *dir, const char *name, json_t **out) {
    char path[MODATTN__PATH_MAX];
    int st = modattn__path_join(path, sizeof path, dir, name);
    if (st) return st;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int err = errno;
        char shown[420];
        modattn__path_shown(path, shown, sizeof shown);
        if (err == ENOENT)
            return modattn__error(MODATTN_ENOTFOUND, "%s: missing (is the folder a model directory? "
                                 "run `make model`)", shown);
        if (err == ELOOP)
            return modattn__error(MODATTN_EIO, "%s: a symbolic link loop (%s)", shown,
                                 strerror(err));
        return modattn__error(err == ENOTDIR ? MODATTN_ENOTFOUND : MODATTN_EIO, "%s: %s", shown, strerror(err));
    }
    json_error_t err;
    json_t *j = NULL;
    st = modattn__json_load_file(path, JSON_REJECT_DUPLICATES, &j, &err);
    if (st == MODATTN_EFORMAT)
        return modattn__error(MODATTN_EFORMAT, "%s: not valid JSON: %s (line %d, column %d)", path,
                             err.text, err.line, err.column);
    if (st == MODATTN_ENOMEM || st == MODATTN_EBUDGET) return modattn__error_prefix(st, "reading %s", path);
    if (st) return st; /* MODATTN_EIO: the message names the file */
    *out = j;
    return 0;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Integer field in [lo, hi]. `required` false: *out keeps its default when the field is absent
 * or null. */
static int get_int(const char *file, const json_t *obj, const char *field, bool required,
                   long long lo, long long hi, int *out) {
    const json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) {
        if (!required) return 0;
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" is missing", file, field);
    }
    if (!json_is_integer(v))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be an integer, not %s", file,
                             field, json_kind(v));
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" = %lld is out of range [%lld, %lld]",
                             file, field, x, lo, hi);
    *out = (int)x;
    return 0;
}

static int get_num(const char *file, const json_t *obj, const char *field, bool required,
                   double lo, double hi, double *out) {
    const json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) {
        if (!required) return 0;
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" is missing", file, field);
    }
    if (!json_is_number(v))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be a number, not %s", file,
                             field, json_kind(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" = %g is out of range [%g, %g]",
                             file, field, x, lo, hi);
    *out = x;
    return 0;
}

static int get_bool(const char *file, const json_t *obj, const char *field, bool *out) {
    const json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be true or false, not %s",
                             file, field, json_kind(v));
    *out = json_is_true(v);
    return 0;
}

/* String field; NULL when absent and not required. */
static int get_str(const char *file, const json_t *obj, const char *field, bool required,
                   const char **out) {
    const json_t *v = json_object_get(obj, field);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (!required) return 0;
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" is missing", file, field);
    }
    if (!json_is_string(v))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be a string, not %s", file,
                             field, json_kind(v));
    *out = json_string_value(v);
    return 0;
}

static int parse_act(const char *F, const char *field, const char *act, modattn__model_config *c) {
    if (strcmp(act, "gelu") == 0) c->act = MODATTN__ACT_GELU_ERF;
    else if (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0 || strcmp(act, "gelu_fast") == 0)
        c->act = MODATTN__ACT_GELU_TANH;
    else if (strcmp(act, "relu") == 0) c->act = MODATTN__ACT_RELU;
    else
        return modattn__error(MODATTN_EUNSUPPORTED,
                             "%s: field \"%s\" = \"%.40s\" is not supported (gelu, gelu_new, "
                             "gelu_pytorch_tanh, gelu_fast, relu)", F, field, act);
    return 0;
}

/* One rope_parameters entry (transformers 5's form): {"rope_type": "default", "rope_theta": x}.
 * Any other rope_type (linear, dynamic, yarn, ...) or key is a variant this encoder does not run. */
static int read_rope_entry(const char *F, const json_t *rp, const char *type, double *theta) {
    json_t *e = json_object_get(rp, type);
    if (!e || json_is_null(e)) return 0;
    char field[96];
    snprintf(field, sizeof field, "rope_parameters.%s", type);
    if (!json_is_object(e))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" must be an object, not %s", F, field, json_kind(e));
    const char *key;
    json_t *v;
    json_object_foreach(e, key, v) {
        if (strcmp(key, "rope_theta") == 0) {
            if (!json_is_number(v) || !(json_number_value(v) > 1.0) || !(json_number_value(v) < 1e12))
                return modattn__error(MODATTN_EFORMAT, "%s: field \"%s.rope_theta\" must be a number in (1, 1e12)", F,
                                     field);
            *theta = json_number_value(v);
        } else if (strcmp(key, "rope_type") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "default") != 0)
                return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s.rope_type\" = \"%.40s\" is not supported "
                                     "(only \"default\" rotary embeddings: no scaling)", F, field,
                                     json_is_string(v) ? json_string_value(v) : "(not a string)");
        } else {
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s.%.60s\" is not supported (a rotary scaling "
                                 "parameter: only \"default\" rotary embeddings run)", F, field, key);
        }
    }
    return 0;
}

/* The sizes of an encoder with rotary positions under transformers' names (modernbert, gte): each
 * head's dimension even (rotary rotates pairs) and head_dim, where given, hidden / heads. */
static int read_rotary_sizes(const char *F, json_t *j, modattn__model_config *c) {
    int st;
    if ((st = get_int(F, j, "hidden_size", true, 1, 65536, &c->hidden)) ||
        (st = get_int(F, j, "num_hidden_layers", true, 1, MODATTN__MAX_LAYERS, &c->layers)) ||
        (st = get_int(F, j, "num_attention_heads", true, 1, 65536, &c->heads)) ||
        (st = get_int(F, j, "intermediate_size", true, 1, 1 << 20, &c->intermediate)) ||
        (st = get_int(F, j, "max_position_embeddings", true, 2, 1 << 20, &c->max_positions)) ||
        (st = get_int(F, j, "vocab_size", true, 1, 1 << 24, &c->vocab)))
        return st;
    if (c->hidden % c->heads != 0 || (c->hidden / c->heads) % 2 != 0)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"hidden_size\" = %d is not an even multiple of "
                             "\"num_attention_heads\" = %d (rotary embeddings rotate pairs)", F, c->hidden, c->heads);
    int head_dim = c->hidden / c->heads;
    if ((st = get_int(F, j, "head_dim", false, 1, 65536, &head_dim))) return st;
    if (head_dim != c->hidden / c->heads)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"head_dim\" = %d is not supported (hidden_size / "
                             "num_attention_heads = %d)", F, head_dim, c->hidden / c->heads);
    return 0;
}

/* config.json of a ModernBertModel (transformers' ModernBertConfig: the Hub's keys, and transformers
 * 5's layer_types / rope_parameters). Keys naming a variant this encoder does not run are refused
 * by name: a rotary scaling, experts (MoE), remote code, a head size other than hidden / heads. */
static int read_modernbert(const char *F, json_t *j, modattn__model_config *c) {
    int st;
    c->modern = true;
    if ((st = read_rotary_sizes(F, j, c))) return st;
    c->type_vocab = 0;
    c->pad_id = c->vocab > 50283 ? 50283 : 0; /* ModernBertConfig's default */
    if ((st = get_int(F, j, "pad_token_id", false, 0, c->vocab - 1, &c->pad_id))) return st;
    c->ln_eps = 1e-5;
    if ((st = get_num(F, j, "norm_eps", false, 0.0, 1.0, &c->ln_eps))) return st;
    c->norm_bias = c->attn_bias = c->mlp_bias = false;
    if ((st = get_bool(F, j, "norm_bias", &c->norm_bias)) || (st = get_bool(F, j, "attention_bias", &c->attn_bias)) ||
        (st = get_bool(F, j, "mlp_bias", &c->mlp_bias)))
        return st;
    const char *act = NULL;
    if ((st = get_str(F, j, "hidden_activation", false, &act))) return st;
    if ((st = parse_act(F, "hidden_activation", act ? act : "gelu", c))) return st;
    /* what ModernBERT does not have and a config could still say: refused, never ignored */
    static const char *const k_refused[] = {"num_experts", "num_local_experts", "moe_every_n_layers",
                                            "num_experts_per_tok", "auto_map"};
    for (size_t i = 0; i < sizeof k_refused / sizeof *k_refused; i++) {
        const json_t *v = json_object_get(j, k_refused[i]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s\" is not supported (%s)", F, k_refused[i],
                                 strcmp(k_refused[i], "auto_map") == 0 ? "remote code: this encoder runs "
                                 "ModernBertModel as transformers defines it" : "mixture-of-experts layers");
    }
    bool is_decoder = false;
    if ((st = get_bool(F, j, "is_decoder", &is_decoder))) return st;
    if (is_decoder)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"is_decoder\" = true is not supported (an encoder only)", F);
    /* local layers: layer_types (transformers 5), else all but every global_attn_every_n_layers-th */
    int every = 3, local = 128;
    if ((st = get_int(F, j, "global_attn_every_n_layers", false, 1, 1 << 20, &every)) ||
        (st = get_int(F, j, "local_attention", false, 2, 1 << 24, &local)))
        return st;
    c->window = local / 2;
    const json_t *lt = json_object_get(j, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)c->layers)
            return modattn__error(MODATTN_EFORMAT, "%s: field \"layer_types\" must be an array of %d strings "
                                 "(num_hidden_layers)", F, c->layers);
        for (int l = 0; l < c->layers; l++) {
            const json_t *v = json_array_get(lt, (size_t)l);
            const char *t = json_is_string(v) ? json_string_value(v) : "";
            if (strcmp(t, "sliding_attention") == 0) c->local_layer[l] = true;
            else if (strcmp(t, "full_attention") == 0) c->local_layer[l] = false;
            else
                return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"layer_types\"[%d] = \"%.40s\" is not "
                                     "supported (full_attention, sliding_attention)", F, l, t);
        }
    } else {
        for (int l = 0; l < c->layers; l++) c->local_layer[l] = l % every != 0;
    }
    /* rotary bases: rope_parameters (transformers 5) or global_rope_theta / local_rope_theta */
    c->rope_global = 160000.0, c->rope_local = 10000.0;
    if ((st = get_num(F, j, "global_rope_theta", false, 1.0, 1e12, &c->rope_global)) ||
        (st = get_num(F, j, "local_rope_theta", false, 1.0, 1e12, &c->rope_local)))
        return st;
    const json_t *rs = json_object_get(j, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        const json_t *ty = json_is_object(rs) ? json_object_get(rs, "rope_type") : NULL;
        if (!ty && json_is_object(rs)) ty = json_object_get(rs, "type");
        const char *tn = ty && json_is_string(ty) ? json_string_value(ty) : "(none)";
        if (strcmp(tn, "default") != 0 || json_object_size(rs) != 1)
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"rope_scaling\" (type \"%.40s\") is not supported "
                                 "(only \"default\" rotary embeddings: no scaling)", F, tn);
    }
    json_t *rp = json_object_get(j, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        if (!json_is_object(rp))
            return modattn__error(MODATTN_EFORMAT, "%s: field \"rope_parameters\" must be an object, not %s", F,
                                 json_kind(rp));
        const char *key;
        json_t *v;
        json_object_foreach(rp, key, v) {
            if (strcmp(key, "full_attention") != 0 && strcmp(key, "sliding_attention") != 0)
                return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"rope_parameters.%.60s\" is not supported "
                                     "(full_attention, sliding_attention)", F, key);
        }
        if ((st = read_rope_entry(F, rp, "full_attention", &c->rope_global)) ||
            (st = read_rope_entry(F, rp, "sliding_attention", &c->rope_local)))
            return st;
    }
    return 0;
}

/* config.json of a GTE v1.5 encoder: the Hub's NewModel (model_type "new": Alibaba-NLP/new-impl, whose
 * code is remote; read here from its keys) or transformers' GteModel (model_type "gte"). Both are
 * BERT's post-LN layers with rotary positions and a gated FFN. What neither runs here is refused by
 * name: logn attention scaling, an RMSNorm, an unpacked QKV, a rotary scaling other than fixed NTK,
 * absolute positions, remote code other than NewModel. */
static int read_gte(const char *F, json_t *j, modattn__model_config *c) {
    const bool hub = strcmp(c->model_type, "new") == 0;
    int st;
    c->gte = true;
    if ((st = read_rotary_sizes(F, j, c))) return st;
    /* NewConfig writes type_vocab_size (0 in gte-base-en-v1.5: no token types); GteConfig's default is 1 */
    c->type_vocab = 1;
    if ((st = get_int(F, j, "type_vocab_size", hub, 0, 1 << 16, &c->type_vocab))) return st;
    c->pad_id = hub ? 0 : 1;
    if ((st = get_int(F, j, "pad_token_id", false, 0, c->vocab - 1, &c->pad_id))) return st;
    c->ln_eps = 1e-12;
    if ((st = get_num(F, j, "layer_norm_eps", false, 0.0, 1.0, &c->ln_eps))) return st;
    const char *s = NULL;
    if ((st = get_str(F, j, "hidden_act", false, &s)) || (st = parse_act(F, "hidden_act", s ? s : "gelu", c)))
        return st;
    if ((st = get_str(F, j, "layer_norm_type", false, &s))) return st;
    if (s && strcmp(s, "layer_norm") != 0)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"layer_norm_type\" = \"%.40s\" is not supported "
                             "(layer_norm)", F, s);
    if ((st = get_str(F, j, "position_embedding_type", false, &s))) return st;
    if (s && strcmp(s, "rope") != 0)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"position_embedding_type\" = \"%.40s\" is not "
                             "supported (rope)", F, s);
    /* unpad_inputs, use_memory_efficient_attention: how NewModel computes, not what (checked, then
     * unused); logn_attention_clip1 only acts with logn_attention_scale */
    bool logn = false, pack = true, unused = false, dec = false;
    if ((st = get_bool(F, j, "logn_attention_scale", &logn)) || (st = get_bool(F, j, "pack_qkv", &pack)) ||
        (st = get_bool(F, j, "logn_attention_clip1", &unused)) || (st = get_bool(F, j, "unpad_inputs", &unused)) ||
        (st = get_bool(F, j, "use_memory_efficient_attention", &unused)) || (st = get_bool(F, j, "is_decoder", &dec)))
        return st;
    if (logn)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"logn_attention_scale\" = true is not supported "
                             "(queries scaled by log(length) / log(max_position_embeddings))", F);
    if (!pack)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"pack_qkv\" = false is not supported (the packed "
                             "attention.qkv_proj of every published GTE v1.5)", F);
    if (dec)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"is_decoder\" = true is not supported (an encoder only)", F);
    const json_t *am = json_object_get(j, "auto_map");
    if (am && !json_is_null(am)) {
        const json_t *v = json_is_object(am) ? json_object_get(am, "AutoModel") : NULL;
        const char *t = v && json_is_string(v) ? json_string_value(v) : "";
        const size_t n = strlen(t);
        if (!hub || (v && (n < 9 || strcmp(t + n - 9, ".NewModel") != 0)))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"auto_map\" is not supported (remote code%s%.80s: "
                                 "this encoder runs %s)", F, *t ? " " : "", t, hub ? "the Hub's NewModel as "
                                 "Alibaba-NLP/new-impl defines it" : "GteModel as transformers defines it");
    }
    /* the rotary base: rope_theta (NewConfig, default 10000) or rope_parameters (GteConfig, 160000) */
    c->rope_global = hub ? 10000.0 : 160000.0;
    if ((st = get_num(F, j, "rope_theta", false, 1.0, 1e12, &c->rope_global))) return st;
    json_t *rp = json_object_get(j, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        if (!json_is_object(rp))
            return modattn__error(MODATTN_EFORMAT, "%s: field \"rope_parameters\" must be an object, not %s", F,
                                 json_kind(rp));
        const char *key;
        json_t *v;
        json_object_foreach(rp, key, v) {
            if (strcmp(key, "rope_theta") == 0) {
                if (!json_is_number(v) || !(json_number_value(v) > 1.0) || !(json_number_value(v) < 1e12))
                    return modattn__error(MODATTN_EFORMAT, "%s: field \"rope_parameters.rope_theta\" must be a number "
                                         "in (1, 1e12)", F);
                c->rope_global = json_number_value(v);
            } else if (strcmp(key, "rope_type") != 0 || !json_is_string(v) ||
                       strcmp(json_string_value(v), "default") != 0) {
                return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"rope_parameters.%.60s\" is not supported "
                                     "(rope_type \"default\" and rope_theta only)", F, key);
            }
        }
    }
    c->rope_local = c->rope_global;
    /* rope_scaling: null, or NewModel's fixed NTK ({"type": "ntk", "factor": f}, no mixed_b) */
    json_t *rs = json_object_get(j, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        if (!json_is_object(rs))
            return modattn__error(MODATTN_EFORMAT, "%s: field \"rope_scaling\" must be an object, not %s", F,
                                 json_kind(rs));
        const char *key;
        json_t *v;
        bool typed = false;
        c->rope_ntk = 0.0;
        json_object_foreach(rs, key, v) {
            if (strcmp(key, "type") == 0 || strcmp(key, "rope_type") == 0) {
                const char *t = json_is_string(v) ? json_string_value(v) : "(not a string)";
                if (strcmp(t, "ntk") != 0)
                    return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"rope_scaling.%s\" = \"%.40s\" is not "
                                         "supported (\"ntk\", NewModel's fixed NTK scaling)", F, key, t);
                typed = true;
            } else if (strcmp(key, "factor") == 0) {
                if (!json_is_number(v) || !(json_number_value(v) >= 1.0) || !(json_number_value(v) <= 1e6))
                    return modattn__error(MODATTN_EFORMAT, "%s: field \"rope_scaling.factor\" must be a number in "
                                         "[1, 1e6]", F);
                c->rope_ntk = json_number_value(v);
            } else if (!json_is_null(v)) {
                return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"rope_scaling.%.60s\" is not supported (%s)",
                                     F, key, strcmp(key, "mixed_b") == 0 ? "mixed NTK scaling" : "type and factor only");
            }
        }
        if (!typed || c->rope_ntk == 0.0)
            return modattn__error(MODATTN_EFORMAT, "%s: field \"rope_scaling\" needs \"type\" and \"factor\"", F);
    }
    for (int l = 0; l < c->layers; l++) c->local_layer[l] = false;
    return 0;
}

/* One size of a nomic_bert config.json: the Hub's key (n_embd, ...: nomic-ai's own config) or
 * transformers' (hidden_size, ...); where both are present they must agree. */
static int nomic_int(const char *F, json_t *j, const char *hub, const char *hf, long long lo, long long hi, int *out) {
    int a = -1, b = -1, st;
    if ((st = get_int(F, j, hub, false, lo, hi, &a)) || (st = get_int(F, j, hf, false, lo, hi, &b))) return st;
    if (a < 0 && b < 0) return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" is missing", F, hub);
    if (a >= 0 && b >= 0 && a != b)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"%s\" = %d and field \"%s\" = %d disagree", F, hub, a, hf, b);
    *out = a >= 0 ? a : b;
    return 0;
}

/* config.json of a nomic_bert model (nomic-embed-text-v1 / v1.5: nomic-ai's NomicBertModel keys,
 * which transformers 5's NomicBertModel runs as BERT post-LN layers with rotary positions and a
 * SwiGLU FFN). Every key that names a variant this encoder does not run is refused by name. */
static int read_nomic(const char *F, json_t *j, modattn__model_config *c) {
    int st;
    c->nomic = true;
    if ((st = nomic_int(F, j, "n_embd", "hidden_size", 1, 65536, &c->hidden)) ||
        (st = nomic_int(F, j, "n_layer", "num_hidden_layers", 1, MODATTN__MAX_LAYERS, &c->layers)) ||
        (st = nomic_int(F, j, "n_head", "num_attention_heads", 1, 65536, &c->heads)) ||
        (st = nomic_int(F, j, "n_inner", "intermediate_size", 1, 1 << 20, &c->intermediate)) ||
        (st = nomic_int(F, j, "n_positions", "max_position_embeddings", 2, 1 << 20, &c->max_positions)) ||
        (st = get_int(F, j, "vocab_size", true, 1, 1 << 24, &c->vocab)))
        return st;
    if (c->hidden % c->heads != 0 || (c->hidden / c->heads) % 2 != 0)
        return modattn__error(MODATTN_EFORMAT, "%s: field \"n_embd\" = %d is not an even multiple of \"n_head\" = %d "
                             "(rotary embeddings rotate pairs)", F, c->hidden, c->heads);
    int head_dim = c->hidden / c->heads;
    if ((st = get_int(F, j, "head_dim", false, 1, 65536, &head_dim))) return st;
    if (head_dim != c->hidden / c->heads)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"head_dim\" = %d is not supported (n_embd / n_head = %d)",
                             F, head_dim, c->hidden / c->heads);
    c->type_vocab = 2;
    if ((st = get_int(F, j, "type_vocab_size", false, 1, 1 << 16, &c->type_vocab))) return st;
    c->pad_id = 0;
    if ((st = get_int(F, j, "pad_token_id", false, 0, c->vocab - 1, &c->pad_id))) return st;
    c->ln_eps = 1e-12;
    if ((st = get_num(F, j, "layer_norm_eps", false, 0.0, 1.0, &c->ln_eps)) ||
        (st = get_num(F, j, "layer_norm_epsilon", false, 0.0, 1.0, &c->ln_eps)))
        return st;
    /* the FFN: nomic's gated MLP (fc11, fc12, fc2): y = fc11(x) * act(fc12(x)) */
    const char *act = NULL, *hact = NULL;
    if ((st = get_str(F, j, "activation_function", false, &act)) || (st = get_str(F, j, "hidden_act", false, &hact)))
        return st;
    if (act && strcmp(act, "swiglu") == 0) c->act = MODATTN__ACT_SILU;
    else if (act && strcmp(act, "geglu") == 0) c->act = MODATTN__ACT_GELU_ERF;
    else if (act)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"activation_function\" = \"%.40s\" is not supported "
                             "(swiglu, geglu: the gated FFN)", F, act);
    else if (!hact || strcmp(hact, "silu") == 0) c->act = MODATTN__ACT_SILU; /* transformers' NomicBertConfig */
    else
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"hidden_act\" = \"%.40s\" is not supported (silu)", F,
                             hact);
    /* rotary positions on the whole of each head */
    c->rope_global = 0.0;
    if ((st = get_num(F, j, "rotary_emb_base", false, 1.0, 1e12, &c->rope_global))) return st;
    json_t *rp = json_object_get(j, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        json_t *wrap = json_object();
        if (!wrap) return modattn__error(MODATTN_ENOMEM, "%s: reading rope_parameters", F);
        json_object_set(wrap, "rope_parameters", rp);
        double theta = 0.0;
        st = read_rope_entry(F, wrap, "rope_parameters", &theta);
        json_decref(wrap);
        if (st) return st;
        if (theta > 0.0 && c->rope_global > 0.0 && theta != c->rope_global)
            return modattn__error(MODATTN_EFORMAT, "%s: field \"rotary_emb_base\" = %g and field "
                                 "\"rope_parameters.rope_theta\" = %g disagree", F, c->rope_global, theta);
        if (theta > 0.0) c->rope_global = theta;
    }
    if (!(c->rope_global > 0.0))
        return modattn__error(MODATTN_EFORMAT, "%s: field \"rotary_emb_base\" is missing (the rotary base)", F);
    double fraction = 1.0;
    if ((st = get_num(F, j, "rotary_emb_fraction", false, 0.0, 1.0, &fraction))) return st;
    if (fraction != 1.0)
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"rotary_emb_fraction\" = %g is not supported (only 1: "
                             "rotary positions on the whole head)", F, fraction);
    c->rope_interleaved = false;
    if ((st = get_bool(F, j, "rotary_emb_interleaved", &c->rope_interleaved))) return st;
    /* what this encoder does not run: refused by name, never ignored */
    static const char *const k_null[][2] = {
        {"rotary_scaling_factor", "dynamic NTK rotary scaling (transformers' NomicBertModel has none either)"},
        {"rotary_emb_scale_base", "xPos rotary scaling"},
        {"rope_scaling", "rotary scaling"},
        {"num_experts", "mixture-of-experts layers"},
        {"moe_every_n_layers", "mixture-of-experts layers"},
        {"moe_top_k", "mixture-of-experts layers"},
        {"num_experts_per_tok", "mixture-of-experts layers"},
    };
    for (size_t i = 0; i < sizeof k_null / sizeof *k_null; i++) {
        const json_t *v = json_object_get(j, k_null[i][0]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s\" is not supported (%s)", F, k_null[i][0],
                                 k_null[i][1]);
    }
    /* booleans whose other value is a layout this encoder does not run */
    static const struct { const char *key; bool want; const char *what; } k_bool[] = {
        {"prenorm", false, "pre-LN layers"},
        {"qkv_proj_bias", false, "biases on Wqkv and out_proj"},
        {"mlp_fc1_bias", false, "biases on fc11 and fc12"},
        {"mlp_fc2_bias", false, "a bias on fc2"},
        {"use_rms_norm", false, "RMSNorm"},
        {"parallel_block", false, "parallel attention and MLP blocks"},
        {"causal", false, "causal attention"},
        {"is_decoder", false, "a decoder"},
        {"scale_attn_weights", true, "unscaled attention scores"},
        {"scale_attn_by_inverse_layer_idx", false, "scores scaled by the layer index"},
    };
    for (size_t i = 0; i < sizeof k_bool / sizeof *k_bool; i++) {
        bool v = k_bool[i].want;
        if ((st = get_bool(F, j, k_bool[i].key, &v))) return st;
        if (v != k_bool[i].want)
            return modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%s\" = %s is not supported (%s)", F, k_bool[i].key,
                                 v ? "true" : "false", k_bool[i].what);
    }
    return 0;
}

/* config.json of the Transformer module. */
static int read_config(const char *dir, modattn__model_config *c) {
    char F[MODATTN__PATH_MAX];
    json_t *j = NULL;
    int st = modattn__path_join(F, sizeof F, dir, "config.json");
    if (st || (st = load_json(dir, "config.json", &j))) return st;
    if (!json_is_object(j)) {
        st = modattn__error(MODATTN_EFORMAT, "%s: not a JSON object", F);
        goto out;
    }
    const char *mt, *act, *pet;
    if ((st = get_str(F, j, "model_type", true, &mt))) goto out;
    /* BERT family (post-LayerNorm encoders): BertModel, XLMRobertaModel, DistilBertModel and
     * MPNetModel, each as transformers runs it (docs/MODELS.md). */
    if (strcmp(mt, "bert") == 0) c->arch = MODATTN__ARCH_BERT;
    else if (strcmp(mt, "xlm-roberta") == 0) c->arch = MODATTN__ARCH_XLM_ROBERTA;
    else if (strcmp(mt, "distilbert") == 0) c->arch = MODATTN__ARCH_DISTILBERT;
    else if (strcmp(mt, "mpnet") == 0) c->arch = MODATTN__ARCH_MPNET;
    else if (strcmp(mt, "modernbert") == 0) c->arch = MODATTN__ARCH_MODERNBERT;
    else if (strcmp(mt, "new") == 0 || strcmp(mt, "gte") == 0) c->arch = MODATTN__ARCH_GTE;
    else if (strcmp(mt, "nomic_bert") == 0) c->arch = MODATTN__ARCH_NOMIC_BERT;
    else if (strcmp(mt, "qwen3") == 0) c->arch = MODATTN__ARCH_QWEN3;
    else if (strcmp(mt, "qwen2") == 0) c->arch = MODATTN__ARCH_QWEN2;
    else {
        st = modattn__error(MODATTN_EUNSUPPORTED,
                           "%s: field \"model_type\" = \"%.40s\" is not supported (this encoder "
                           "runs \"bert\", \"xlm-roberta\", \"distilbert\", \"mpnet\", \"modernbert\", \"new\", \"gte\", "
                           "\"nomic_bert\", \"qwen3\" and \"qwen2\")",
                           F, mt);
        goto out;
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", mt);
    if (c->arch == MODATTN__ARCH_MODERNBERT) {
        st = read_modernbert(F, j, c);
        goto out;
    }
    if (c->arch == MODATTN__ARCH_GTE) {
        st = read_gte(F, j, c);
        goto out;
    }
    if (c->arch == MODATTN__ARCH_NOMIC_BERT) {
        st = read_nomic(F, j, c);
        goto out;
    }
    if (c->arch == MODATTN__ARCH_QWEN3 || c->arch == MODATTN__ARCH_QWEN2) {
        st = modattn__read_qwen(F, j, c);
        goto out;
    }
    const bool distil = c->arch == MODATTN__ARCH_DISTILBERT;
    /* DistilBertConfig's own names for the sizes (its attribute_map: dim = hidden_size, ...) */
    if ((st = get_int(F, j, distil ? "dim" : "hidden_size", true, 1, 65536, &c->hidden))) goto out;
    if ((st = get_int(F, j, distil ? "n_layers" : "num_hidden_layers", true, 1, 1024, &c->layers))) goto out;
    if ((st = get_int(F, j, distil ? "n_heads" : "num_attention_heads", true, 1, 65536, &c->heads))) goto out;
    if ((st = get_int(F, j, distil ? "hidden_dim" : "intermediate_size", true, 1, 1 << 20, &c->intermediate)))
        goto out;
    if ((st = get_int(F, j, "max_position_embeddings", true, 2, 1 << 20, &c->max_positions)))
        goto out;
    /* one token type is ever used (single-sentence inputs): type 0; distilbert and mpnet have none */
    c->type_vocab = c->arch == MODATTN__ARCH_BERT ? 2 : c->arch == MODATTN__ARCH_XLM_ROBERTA ? 1 : 0;
    if (!distil && c->arch != MODATTN__ARCH_MPNET &&
        (st = get_int(F, j, "type_vocab_size", false, 1, 1 << 16, &c->type_vocab)))
        goto out;
    if ((st = get_int(F, j, "vocab_size", true, 1, 1 << 24, &c->vocab))) goto out;
    c->pad_id = c->arch == MODATTN__ARCH_XLM_ROBERTA || c->arch == MODATTN__ARCH_MPNET ? 1 : 0;
    if ((st = get_int(F, j, "pad_token_id", false, 0, c->vocab - 1, &c->pad_id))) goto out;
    c->ln_eps = 1e-12; /* distilbert: nn.LayerNorm(eps=1e-12), not configurable */
    if (!distil && (st = get_num(F, j, "layer_norm_eps", false, 0.0, 1.0, &c->ln_eps))) goto out;
    if (c->hidden % c->heads != 0) {
        st = modattn__error(MODATTN_EFORMAT,
                           "%s: field \"%s\" = %d is not a multiple of \"%s\" = %d", F,
                           distil ? "dim" : "hidden_size", c->hidden, distil ? "n_heads" : "num_attention_heads",
                           c->heads);
        goto out;
    }
    /* XLMRobertaEmbeddings and MPNetEmbeddings number the positions of real tokens from
     * padding_idx + 1 (create_position_ids_from_input_ids): those rows of the table are used */
    if (c->arch == MODATTN__ARCH_XLM_ROBERTA || c->arch == MODATTN__ARCH_MPNET) {
        c->pos_offset = c->pad_id + 1;
        if (c->pos_offset + 1 >= c->max_positions) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"max_position_embeddings\" = %d leaves no position "
                               "after \"pad_token_id\" + 1 = %d", F, c->max_positions, c->pos_offset);
            goto out;
        }
    }
    if (c->arch == MODATTN__ARCH_MPNET) {
        c->rel_buckets = 32;
        if ((st = get_int(F, j, "relative_attention_num_buckets", false, 2, 4096, &c->rel_buckets))) goto out;
        c->rel_max_distance = 128; /* MPNetEncoder.relative_position_bucket's default: not in the config */
    }
    if (distil) {
        if ((st = get_bool(F, j, "sinusoidal_pos_embds", &c->sinusoidal))) goto out;
        /* DistilBertConfig names the activation "activation" */
        if ((st = get_str(F, j, "activation", true, &act))) goto out;
    } else if ((st = get_str(F, j, "hidden_act", true, &act))) {
        goto out;
    }
    if ((st = parse_act(F, distil ? "activation" : "hidden_act", act, c))) goto out;
    if ((st = get_str(F, j, "position_embedding_type", false, &pet))) goto out;
    if (pet && strcmp(pet, "alibi") == 0 && c->arch == MODATTN__ARCH_BERT) { /* jina_bert: arch_jina.c */
        c->arch = MODATTN__ARCH_JINA_BERT;
        if ((st = modattn__jina_config(F, j, c))) goto out;
    } else if (pet && strcmp(pet, "absolute") != 0) {
        st = modattn__error(MODATTN_EUNSUPPORTED,
                           "%s: field \"position_embedding_type\" = \"%.40s\" is not supported "
                           "(absolute; alibi with model_type \"bert\": jina_bert)", F, pet);
        goto out;
    }
    bool is_decoder = false;
    if ((st = get_bool(F, j, "is_decoder", &is_decoder))) goto out;
    if (is_decoder) {
        st = modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"is_decoder\" = true is not supported "
                           "(an encoder only)", F);
        goto out;
    }
out:
    json_decref(j);
    return st;
}

static const char k_transformer[] = "sentence_transformers.models.Transformer";
static const char k_pooling[] = "sentence_transformers.models.Pooling";
static const char k_normalize[] = "sentence_transformers.models.Normalize";

/* modules.json: Transformer -> Pooling [-> Normalize]. Fills the module paths. */
static int read_modules(const char *dir, modattn__model_config *c, char *pool_dir, size_t plen) {
    char F[MODATTN__PATH_MAX];
    json_t *j = NULL;
    int st = modattn__path_join(F, sizeof F, dir, "modules.json");
    if (st || (st = load_json(dir, "modules.json", &j))) return st;
    if (!json_is_array(j) || json_array_size(j) == 0) {
        st = modattn__error(MODATTN_EFORMAT, "%s: must be a non-empty array of modules", F);
        goto out;
    }
    size_t n = json_array_size(j);
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(j, i);
        char where[MODATTN__PATH_MAX + 32];
        snprintf(where, sizeof where, "%s[%zu]", F, i);
        if (!json_is_object(m)) {
            st = modattn__error(MODATTN_EFORMAT, "%s: module must be an object, not %s", where,
                               json_kind(m));
            goto out;
        }
        const char *type, *path;
        if ((st = get_str(where, m, "type", true, &type))) goto out;
        if ((st = get_str(where, m, "path", false, &path))) goto out;
        if (!path) path = "";
        if (strstr(path, "..")) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"path\" = \"%.100s\" leaves the model "
                               "directory", where, path);
            goto out;
        }
        const char *want = i == 0 ? k_transformer : i == 1 ? k_pooling : k_normalize;
        if (i > 2 || strcmp(type, want) != 0) {
            st = modattn__error(MODATTN_EUNSUPPORTED,
                               "%s: field \"type\" = \"%.100s\" is not supported here (this "
                               "encoder runs %s -> %s [-> %s])", where, type, k_transformer,
                               k_pooling, k_normalize);
            goto out;
        }
        if (i == 0 && (st = modattn__path_join(c->transformer_dir, sizeof c->transformer_dir, dir,
                                               path)))
            goto out;
        if (i == 1 && (st = modattn__path_join(pool_dir, plen, dir, path))) goto out;
        if (i == 2) c->normalize = true;
    }
    if (n < 2) {
        st = modattn__error(MODATTN_EUNSUPPORTED, "%s: no %s module after the Transformer", F,
                           k_pooling);
        goto out;
    }
out:
    json_decref(j);
    return st;
}

static int read_sbert(modattn__model_config *c) {
    char F[MODATTN__PATH_MAX];
    json_t *j = NULL;
    int st = modattn__path_join(F, sizeof F, c->transformer_dir, "sentence_bert_config.json");
    if (st || (st = load_json(c->transformer_dir, "sentence_bert_config.json", &j))) return st;
    if (!json_is_object(j)) {
        st = modattn__error(MODATTN_EFORMAT, "%s: not a JSON object", F);
        goto out;
    }
    const int npos = c->max_positions - c->pos_offset; /* the positions a token can have */
    int msl = npos;
    if ((st = get_int(F, j, "max_seq_length", false, 2, 1 << 20, &msl))) goto out;
    /* Positions past max_position_embeddings have no embedding: sentence-transformers would fail
     * on them, we truncate there. */
    c->max_tokens = (size_t)(msl < npos ? msl : npos);
    c->lower_case = false;
    if ((st = get_bool(F, j, "do_lower_case", &c->lower_case))) goto out;
out:
    json_decref(j);
    return st;
}

static const struct {
    const char *key;
    unsigned bit;
} k_modes[] = {
    {"pooling_mode_cls_token", MODATTN_POOL_CLS},
    {"pooling_mode_max_tokens", MODATTN_POOL_MAX},
    {"pooling_mode_mean_tokens", MODATTN_POOL_MEAN},
    {"pooling_mode_mean_sqrt_len_tokens", MODATTN_POOL_MEAN_SQRT_LEN},
    {"pooling_mode_weightedmean_tokens", MODATTN_POOL_WEIGHTED_MEAN},
    {"pooling_mode_lasttoken", MODATTN_POOL_LAST},
};

static int read_pooling(const char *pool_dir, modattn__model_config *c) {
    char F[MODATTN__PATH_MAX];
    int st = modattn__path_join(F, sizeof F, pool_dir, "config.json");
    if (st) return st;
    json_t *j = NULL;
    if ((st = load_json(pool_dir, "config.json", &j))) return st;
    if (!json_is_object(j)) {
        st = modattn__error(MODATTN_EFORMAT, "%s: not a JSON object", F);
        goto out;
    }
    int wdim = 0;
    if ((st = get_int(F, j, "word_embedding_dimension", true, 1, 1 << 20, &wdim))) goto out;
    if (wdim != c->hidden) {
        st = modattn__error(MODATTN_EFORMAT, "%s: field \"word_embedding_dimension\" = %d differs "
                           "from config.json hidden_size = %d", F, wdim, c->hidden);
        goto out;
    }
    c->pooling = 0;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        if (strncmp(key, "pooling_mode", 12) != 0) continue;
        size_t m = 0;
        while (m < sizeof k_modes / sizeof k_modes[0] && strcmp(k_modes[m].key, key) != 0) m++;
        if (!json_is_boolean(v)) {
            st = modattn__error(MODATTN_EFORMAT, "%s: field \"%.100s\" must be true or false, not %s",
                               F, key, json_kind(v));
            goto out;
        }
        if (!json_is_true(v)) continue;
        if (m == sizeof k_modes / sizeof k_modes[0]) {
            st = modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"%.100s\": unknown pooling mode",
                               F, key);
            goto out;
        }
        c->pooling |= k_modes[m].bit;
    }
    if (c->pooling == 0) {
        st = modattn__error(MODATTN_EFORMAT, "%s: no pooling mode is enabled (pooling_mode_*_tokens)",
                           F);
        goto out;
    }
    size_t k = 0;
    for (unsigned b = c->pooling; b; b &= b - 1) k++;
    c->dim = k * (size_t)c->hidden;
out:
    json_decref(j);
    return st;
}

int modattn__config_load(const char *dir, modattn__model_config *c) {
    memset(c, 0, sizeof *c);
    char pool_dir[MODATTN__PATH_MAX];
    int st = read_modules(dir, c, pool_dir, sizeof pool_dir);
    if (st) return st;
    if ((st = read_config(c->transformer_dir, c))) return st;
    if ((st = read_sbert(c))) return st;
    return read_pooling(pool_dir, c);
}

int modattn__config_load_hf(const char *dir, size_t max_tokens, modattn__model_config *c) {
    memset(c, 0, sizeof *c);
    int st = modattn__path_join(c->transformer_dir, sizeof c->transformer_dir, dir, "");
    if (st || (st = read_config(c->transformer_dir, c))) return st;
    if (c->decoder) /* a head reads the first token, which a causal decoder has seen nothing but itself at */
        return modattn__error(MODATTN_EUNSUPPORTED, "%s: model_type \"%s\" as a cross-encoder or SPLADE head is not "
                             "supported (a decoder runs as an embedding model: sentence-transformers files with "
                             "lasttoken pooling)", c->transformer_dir, c->model_type);
    c->max_tokens = (size_t)c->max_positions;
    if (max_tokens && max_tokens < c->max_tokens) c->max_tokens = max_tokens;
    c->pooling = MODATTN_POOL_CLS;
    c->dim = (size_t)c->hidden;
    return 0;
}

void modattn_pooling_format(unsigned pooling, char *buf, size_t len) {
    static const char *names[] = {"cls", "max", "mean", "mean_sqrt_len", "weightedmean",
                                  "lasttoken"};
    size_t o = 0;
    if (len) buf[0] = '\0';
    for (int b = 0; b < 6; b++) {
        if (!(pooling & (1u << b))) continue;
        int n = snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? "+" : "", names[b]);
        if (n < 0 || o + (size_t)n >= len) return;
        o += (size_t)n;
    }
}

int modattn__head_config_load(const char *dir, const char *suffix, const char *needed, char *F, json_t **j,
                              char **arch) {
    *j = NULL, *arch = NULL;
    int st = modattn__path_join(F, MODATTN__PATH_MAX, dir, "config.json");
    if (st) return st;
    json_error_t jerr;
    if ((st = modattn__json_load_file(F, 0, j, &jerr))) {
        *j = NULL;
        if (st == MODATTN_EFORMAT) return modattn__error(st, "%s: not valid JSON: %s", F, jerr.text);
        if (st == MODATTN_EIO)
            return modattn__error(MODATTN_ENOTFOUND, "%s: cannot read (is the folder a model directory?)", F);
        return st;
    }
    const json_t *a = json_object_get(*j, "architectures");
    const char *a0 = json_is_array(a) ? json_string_value(json_array_get(a, 0)) : NULL;
    size_t la = a0 ? strlen(a0) : 0, ls = strlen(suffix);
    if (!a0 || la < ls || strcmp(a0 + la - ls, suffix) != 0)
        st = modattn__error(MODATTN_EUNSUPPORTED, "%s: field \"architectures\" is %s%.80s%s: %s", F, a0 ? "\"" : "",
                           a0 ? a0 : "missing", a0 ? "\"" : "", needed);
    else if (!(*arch = modattn__strdup(a0, MODATTN_MEM_OTHER)))
        st = modattn__mem_last_status();
    if (st) {
        json_decref(*j);
        *j = NULL;
    }
    return st;
}
