/* tests/model/test_config.c — the model directory's configuration files: a valid set, then one
 * broken file or field at a time; every error must name the file and the field. Then every
 * allocation of a load (jansson's, routed through modattn's allocator) is made to fail in turn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model_internal.h"
#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "sweep.h"
#include "test_util.h"

static char g_dir[64];

static const char k_config[] =
    "{\"architectures\":[\"BertModel\"],\"model_type\":\"bert\",\"hidden_size\":64,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"intermediate_size\":128,"
    "\"hidden_act\":\"gelu\",\"layer_norm_eps\":1e-12,\"max_position_embeddings\":32,"
    "\"type_vocab_size\":2,\"vocab_size\":100,\"pad_token_id\":0,"
    "\"position_embedding_type\":\"absolute\"}";
static const char k_modules[] =
    "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
    "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
    "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]";
static const char k_sbert[] = "{\"max_seq_length\":16,\"do_lower_case\":false}";
static const char k_pool[] =
    "{\"word_embedding_dimension\":64,\"pooling_mode_cls_token\":false,"
    "\"pooling_mode_mean_tokens\":true,\"pooling_mode_max_tokens\":false,"
    "\"pooling_mode_mean_sqrt_len_tokens\":false}";

static void put(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (!text) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        CHECK_MSG(0, "cannot write %s", path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

static void reset(void) {
    put("config.json", k_config);
    put("modules.json", k_modules);
    put("sentence_bert_config.json", k_sbert);
    put("1_Pooling/config.json", k_pool);
}

/* Replace `from` by `to` in `base`, write it as `file`, expect status + both needles. */
static void expect(const char *file, const char *base, const char *from, const char *to, int want,
                   const char *n1, const char *n2) {
    char text[4096];
    const char *p = strstr(base, from);
    if (!p) {
        CHECK_MSG(0, "test bug: '%s' not in the base text", from);
        return;
    }
    snprintf(text, sizeof text, "%.*s%s%s", (int)(p - base), base, to, p + strlen(from));
    reset();
    put(file, text);
    modattn__model_config c;
    int st = modattn__config_load(g_dir, &c);
    const char *msg = modattn_last_error();
    CHECK_MSG(st == want && strstr(msg, n1) && (!n2 || strstr(msg, n2)),
              "%s with '%s' -> '%s': status %d (want %d), message '%s' (want '%s', '%s')", file,
              from, to, st, want, msg, n1, n2 ? n2 : "");
}

static void test_valid(void) {
    reset();
    modattn__model_config c;
    int st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "valid: %s", modattn_last_error());
    CHECK(strcmp(c.model_type, "bert") == 0);
    CHECK(c.hidden == 64 && c.layers == 2 && c.heads == 4 && c.intermediate == 128);
    CHECK(c.max_positions == 32 && c.type_vocab == 2 && c.vocab == 100 && c.pad_id == 0);
    CHECK(c.ln_eps == 1e-12 && c.act == MODATTN__ACT_GELU_ERF);
    CHECK(c.max_tokens == 16 && !c.lower_case && c.normalize);
    CHECK(c.pooling == MODATTN_POOL_MEAN && c.dim == 64);

    /* several pooling modes concatenate; max_seq_length past the positions is clamped */
    expect("1_Pooling/config.json", k_pool, "\"pooling_mode_cls_token\":false",
           "\"pooling_mode_cls_token\":true,\"pooling_mode_lasttoken\":true", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK(st == 0 && c.pooling == (MODATTN_POOL_CLS | MODATTN_POOL_MEAN | MODATTN_POOL_LAST) &&
          c.dim == 3 * 64);
    expect("sentence_bert_config.json", k_sbert, "16", "512", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK(st == 0 && c.max_tokens == 32);
    /* no Normalize module; tanh GELU; do_lower_case */
    expect("modules.json", k_modules,
           ",{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers."
           "models.Normalize\"}",
           "", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK(st == 0 && !c.normalize);
    expect("config.json", k_config, "\"gelu\"", "\"gelu_new\"", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK(st == 0 && c.act == MODATTN__ACT_GELU_TANH);
    expect("sentence_bert_config.json", k_sbert, "false", "true", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK(st == 0 && c.lower_case);
    char buf[64];
    modattn_pooling_format(MODATTN_POOL_MEAN | MODATTN_POOL_MAX, buf, sizeof buf);
    CHECK(strcmp(buf, "max+mean") == 0);
}

/* The other families: their own keys and what follows from them (docs/MODELS.md). */
static const char k_distil[] =
    "{\"model_type\":\"distilbert\",\"dim\":64,\"n_layers\":2,\"n_heads\":4,\"hidden_dim\":128,"
    "\"activation\":\"gelu\",\"max_position_embeddings\":32,\"vocab_size\":100,\"pad_token_id\":0,"
    "\"sinusoidal_pos_embds\":false}";
static const char k_mpnet[] =
    "{\"model_type\":\"mpnet\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"intermediate_size\":128,\"hidden_act\":\"gelu\",\"layer_norm_eps\":1e-05,"
    "\"max_position_embeddings\":20,\"vocab_size\":100,\"pad_token_id\":1,"
    "\"relative_attention_num_buckets\":16}";

static void test_families(void) {
    const int F = MODATTN_EFORMAT, U = MODATTN_EUNSUPPORTED;
    modattn__model_config c;
    /* xlm-roberta: BERT's keys; positions from pad_token_id + 1, so 32 - 2 = 30 of them */
    expect("config.json", k_config, "\"bert\"", "\"xlm-roberta\"", 0, "", NULL);
    put("sentence_bert_config.json", "{\"max_seq_length\":512}");
    int st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "xlm-roberta: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_XLM_ROBERTA && c.pos_offset == 1 && c.max_tokens == 31 && c.rel_buckets == 0);
    CHECK(strcmp(c.model_type, "xlm-roberta") == 0 && c.type_vocab == 2);
    /* distilbert: dim / n_layers / n_heads / hidden_dim / activation; eps fixed at 1e-12; no types */
    expect("config.json", k_distil, "\"gelu\"", "\"relu\"", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "distilbert: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_DISTILBERT && c.hidden == 64 && c.layers == 2 && c.heads == 4 &&
          c.intermediate == 128 && c.act == MODATTN__ACT_RELU && c.ln_eps == 1e-12 && c.type_vocab == 0 &&
          c.pos_offset == 0 && c.max_tokens == 16 && !c.sinusoidal);
    expect("config.json", k_distil, "\"dim\":64,", "", F, "config.json", "\"dim\" is missing");
    expect("config.json", k_distil, "\"gelu\"", "\"swish\"", U, "config.json", "\"activation\" = \"swish\"");
    expect("config.json", k_distil, "\"n_heads\":4", "\"n_heads\":5", F, "config.json", "\"n_heads\" = 5");
    expect("config.json", k_distil, "false", "1", F, "config.json", "\"sinusoidal_pos_embds\" must be true or false");
    /* mpnet: buckets, positions from pad + 1 (20 - 2 = 18 positions, fewer than max_seq_length) */
    expect("config.json", k_mpnet, "\"mpnet\"", "\"mpnet\"", 0, "", NULL);
    put("sentence_bert_config.json", "{\"max_seq_length\":384}");
    st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "mpnet: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_MPNET && c.rel_buckets == 16 && c.rel_max_distance == 128 &&
          c.pos_offset == 2 && c.max_tokens == 18 && c.type_vocab == 0 && c.ln_eps == 1e-05);
    expect("config.json", k_mpnet, "16}", "1}", F, "config.json", "\"relative_attention_num_buckets\" = 1");
    expect("config.json", k_mpnet, "\"max_position_embeddings\":20", "\"max_position_embeddings\":3", F,
           "config.json", "\"max_position_embeddings\" = 3 leaves no position");
    expect("config.json", k_mpnet, "\"mpnet\"", "\"roberta\"", U, "config.json", "\"model_type\" = \"roberta\"");

    /* MPNet's buckets (transformers' relative_position_bucket, 32 buckets, max_distance 128): exact
     * within 8 on either side, logarithmic to 128, the last bucket past it; keys to the right get
     * the upper half */
    static const struct { int rel, want; } b[] = {{0, 0}, {1, 17}, {-1, 1}, {7, 23}, {-7, 7}, {8, 24}, {-8, 8},
                                                   {12, 25}, {-20, 10}, {50, 29}, {-127, 15}, {128, 31}, {-1000, 15}};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) {
        int got = modattn__mpnet_bucket(b[i].rel, 32, 128);
        CHECK_MSG(got == b[i].want, "mpnet bucket of %d: %d, want %d", b[i].rel, got, b[i].want);
    }
    reset();
}

/* modernbert: the Hub's keys (global_rope_theta, local_attention, global_attn_every_n_layers) and
 * transformers 5's (layer_types, rope_parameters); what it does not run is refused by name. */
static const char k_modern[] =
    "{\"model_type\":\"modernbert\",\"hidden_size\":64,\"num_hidden_layers\":5,\"num_attention_heads\":4,"
    "\"intermediate_size\":96,\"hidden_activation\":\"gelu\",\"norm_eps\":1e-05,\"norm_bias\":false,"
    "\"max_position_embeddings\":64,\"vocab_size\":100,\"pad_token_id\":0,\"global_attn_every_n_layers\":2,"
    "\"local_attention\":16,\"global_rope_theta\":160000.0,\"local_rope_theta\":10000.0,"
    "\"attention_bias\":false,\"mlp_bias\":false}";

static void test_modernbert(void) {
    const int F = MODATTN_EFORMAT, U = MODATTN_EUNSUPPORTED;
    modattn__model_config c;
    expect("config.json", k_modern, "\"modernbert\"", "\"modernbert\"", 0, "", NULL);
    put("sentence_bert_config.json", "{\"max_seq_length\":8192}");
    int st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "modernbert: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_MODERNBERT && c.modern && c.hidden == 64 && c.layers == 5 && c.heads == 4 &&
          c.intermediate == 96 && c.act == MODATTN__ACT_GELU_ERF && c.ln_eps == 1e-05 && c.type_vocab == 0 &&
          c.pos_offset == 0 && c.max_tokens == 64 && c.window == 8 && c.rope_global == 160000.0 &&
          c.rope_local == 10000.0 && !c.norm_bias && !c.attn_bias && !c.mlp_bias);
    /* every 2nd layer global: layers 0, 2, 4 */
    CHECK(!c.local_layer[0] && c.local_layer[1] && !c.local_layer[2] && c.local_layer[3] && !c.local_layer[4]);
    /* transformers 5's layer_types and rope_parameters win over the older keys */
    expect("config.json", k_modern, "\"mlp_bias\":false}",
           "\"mlp_bias\":true,\"layer_types\":[\"sliding_attention\",\"full_attention\",\"full_attention\","
           "\"full_attention\",\"sliding_attention\"],\"rope_parameters\":{\"full_attention\":{\"rope_type\":"
           "\"default\",\"rope_theta\":5000.0},\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":"
           "500.0}}}", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "modernbert (transformers 5 keys): %s", modattn_last_error());
    CHECK(c.local_layer[0] && !c.local_layer[1] && !c.local_layer[3] && c.local_layer[4] && c.mlp_bias);
    CHECK(c.rope_global == 5000.0 && c.rope_local == 500.0);
    /* refused, naming the key */
    expect("config.json", k_modern, "\"mlp_bias\":false}", "\"mlp_bias\":false,\"rope_scaling\":{\"type\":\"yarn\","
           "\"factor\":4.0}}", U, "config.json", "\"rope_scaling\" (type \"yarn\")");
    expect("config.json", k_modern, "\"mlp_bias\":false}", "\"mlp_bias\":false,\"rope_parameters\":{"
           "\"full_attention\":{\"rope_type\":\"dynamic\",\"rope_theta\":5000.0,\"factor\":2.0}}}", U,
           "config.json", "\"rope_parameters.full_attention.rope_type\" = \"dynamic\"");
    expect("config.json", k_modern, "\"mlp_bias\":false}", "\"mlp_bias\":false,\"num_experts\":8}", U,
           "config.json", "\"num_experts\" is not supported (mixture-of-experts layers)");
    expect("config.json", k_modern, "\"mlp_bias\":false}", "\"mlp_bias\":false,\"head_dim\":32}", U,
           "config.json", "\"head_dim\" = 32");
    expect("config.json", k_modern, "\"gelu\"", "\"silu\"", U, "config.json", "\"hidden_activation\" = \"silu\"");
    expect("config.json", k_modern, "\"mlp_bias\":false}", "\"mlp_bias\":false,\"layer_types\":[\"full_attention\"]}",
           F, "config.json", "\"layer_types\" must be an array of 5");
    expect("config.json", k_modern, "\"mlp_bias\":false}", "\"mlp_bias\":false,\"layer_types\":[\"full_attention\","
           "\"chunked_attention\",\"full_attention\",\"full_attention\",\"full_attention\"]}", U, "config.json",
           "\"layer_types\"[1] = \"chunked_attention\"");
    expect("config.json", k_modern, "\"num_attention_heads\":4", "\"num_attention_heads\":64", F, "config.json",
           "rotary embeddings rotate pairs");
    expect("config.json", k_modern, "\"local_attention\":16", "\"local_attention\":1", F, "config.json",
           "\"local_attention\" = 1");
    reset();
}

/* gte: the Hub's NewModel keys (model_type "new": rope_theta, rope_scaling ntk, pack_qkv, ...) and
 * transformers' GteModel's ("gte": rope_parameters); what neither runs is refused by name. */
static const char k_gte[] =
    "{\"model_type\":\"new\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"intermediate_size\":96,\"hidden_act\":\"gelu\",\"layer_norm_eps\":1e-12,\"layer_norm_type\":\"layer_norm\","
    "\"logn_attention_clip1\":false,\"logn_attention_scale\":false,\"max_position_embeddings\":8192,"
    "\"pack_qkv\":true,\"pad_token_id\":0,\"position_embedding_type\":\"rope\",\"rope_scaling\":{\"factor\":2.0,"
    "\"type\":\"ntk\"},\"rope_theta\":500000,\"type_vocab_size\":0,\"unpad_inputs\":true,"
    "\"use_memory_efficient_attention\":true,\"vocab_size\":100,\"auto_map\":{\"AutoConfig\":"
    "\"Alibaba-NLP/new-impl--configuration.NewConfig\",\"AutoModel\":\"Alibaba-NLP/new-impl--modeling.NewModel\"}}";

static void test_gte(void) {
    const int F = MODATTN_EFORMAT, U = MODATTN_EUNSUPPORTED;
    modattn__model_config c;
    expect("config.json", k_gte, "\"new\"", "\"new\"", 0, "", NULL);
    int st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "gte: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_GTE && c.gte && !c.modern && c.hidden == 64 && c.layers == 2 && c.heads == 4 &&
          c.intermediate == 96 && c.type_vocab == 0 && c.pos_offset == 0 && c.rope_global == 500000.0 &&
          c.rope_ntk == 2.0 && !c.local_layer[0] && !c.local_layer[1] && c.max_tokens == 16);
    /* transformers' GteModel: rope_parameters, GteConfig's defaults (1 token type, theta 160000) */
    expect("config.json", "{\"model_type\":\"gte\",\"hidden_size\":64,\"num_hidden_layers\":2,"
           "\"num_attention_heads\":4,\"intermediate_size\":96,\"max_position_embeddings\":64,\"vocab_size\":100,"
           "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":20000.0}}", "\"gte\"", "\"gte\"", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "gte (transformers): %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_GTE && c.gte && c.type_vocab == 1 && c.pad_id == 1 && c.rope_global == 20000.0 &&
          c.rope_ntk == 0.0);
    expect("config.json", "{\"model_type\":\"gte\",\"hidden_size\":64,\"num_hidden_layers\":2,"
           "\"num_attention_heads\":4,\"intermediate_size\":96,\"max_position_embeddings\":64,\"vocab_size\":100,"
           "\"rope_parameters\":{\"rope_type\":\"yarn\",\"factor\":4.0}}", "\"gte\"", "\"gte\"", U, "config.json",
           "\"rope_parameters.rope_type\" is not supported");
    /* refused, naming the key */
    expect("config.json", k_gte, "\"logn_attention_scale\":false", "\"logn_attention_scale\":true", U, "config.json",
           "\"logn_attention_scale\" = true");
    expect("config.json", k_gte, "\"layer_norm_type\":\"layer_norm\"", "\"layer_norm_type\":\"rms_norm\"", U,
           "config.json", "\"layer_norm_type\" = \"rms_norm\"");
    expect("config.json", k_gte, "\"pack_qkv\":true", "\"pack_qkv\":false", U, "config.json", "\"pack_qkv\" = false");
    expect("config.json", k_gte, "\"type\":\"ntk\"", "\"type\":\"dynamic\"", U, "config.json",
           "\"rope_scaling.type\" = \"dynamic\"");
    expect("config.json", k_gte, "\"type\":\"ntk\"", "\"type\":\"ntk\",\"mixed_b\":0.3", U, "config.json",
           "\"rope_scaling.mixed_b\" is not supported (mixed NTK scaling)");
    expect("config.json", k_gte, "{\"factor\":2.0,\"type\":\"ntk\"}", "{\"type\":\"ntk\"}", F, "config.json",
           "\"rope_scaling\" needs");
    expect("config.json", k_gte, "\"factor\":2.0", "\"factor\":0.5", F, "config.json", "\"rope_scaling.factor\"");
    expect("config.json", k_gte, "\"rope\"", "\"absolute\"", U, "config.json",
           "\"position_embedding_type\" = \"absolute\"");
    expect("config.json", k_gte, "modeling.NewModel", "modeling.OtherModel", U, "config.json", "\"auto_map\"");
    expect("config.json", k_gte, "\"type_vocab_size\":0,", "", F, "config.json", "\"type_vocab_size\" is missing");
    expect("config.json", k_gte, "\"unpad_inputs\":true", "\"unpad_inputs\":1", F, "config.json", "\"unpad_inputs\"");
    expect("config.json", k_gte, "\"num_attention_heads\":4", "\"num_attention_heads\":64", F, "config.json",
           "rotary embeddings rotate pairs");
    reset();
}

/* nomic_bert: nomic-ai's keys (n_embd, rotary_emb_*, ...) as nomic-embed-text-v1.5's folder has them,
 * transformers' names beside them; what it does not run is refused by name. */
static const char k_nomic[] =
    "{\"model_type\":\"nomic_bert\",\"activation_function\":\"swiglu\",\"n_embd\":64,\"n_head\":4,"
    "\"n_inner\":96,\"n_layer\":2,\"n_positions\":512,\"vocab_size\":128,\"type_vocab_size\":2,"
    "\"layer_norm_epsilon\":1e-12,\"rotary_emb_base\":1000,\"rotary_emb_fraction\":1.0,"
    "\"rotary_emb_interleaved\":false,\"rotary_emb_scale_base\":null,\"rotary_scaling_factor\":null,"
    "\"prenorm\":false,\"qkv_proj_bias\":false,\"mlp_fc1_bias\":false,\"mlp_fc2_bias\":false,"
    "\"use_rms_norm\":false,\"causal\":false,\"scale_attn_weights\":true,\"auto_map\":{\"AutoModel\":\"x\"}}";

static void test_nomic(void) {
    const int F = MODATTN_EFORMAT, U = MODATTN_EUNSUPPORTED;
    modattn__model_config c;
    expect("config.json", k_nomic, "\"nomic_bert\"", "\"nomic_bert\"", 0, "", NULL);
    put("sentence_bert_config.json", "{\"max_seq_length\":8192}");
    int st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "nomic_bert: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_NOMIC_BERT && c.nomic && !c.modern && c.hidden == 64 && c.layers == 2 &&
          c.heads == 4 && c.intermediate == 96 && c.act == MODATTN__ACT_SILU && c.ln_eps == 1e-12 &&
          c.type_vocab == 2 && c.max_tokens == 512 && c.rope_global == 1000.0 && !c.rope_interleaved);
    /* GPT-J's layout; transformers' own names, agreeing; geglu */
    expect("config.json", k_nomic, "\"rotary_emb_interleaved\":false", "\"rotary_emb_interleaved\":true,"
           "\"hidden_size\":64,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1000.0}", 0, "", NULL);
    CHECK(modattn__config_load(g_dir, &c) == 0 && c.rope_interleaved && c.hidden == 64);
    expect("config.json", k_nomic, "\"swiglu\"", "\"geglu\"", 0, "", NULL);
    CHECK(modattn__config_load(g_dir, &c) == 0 && c.act == MODATTN__ACT_GELU_ERF);
    /* refused, naming the key */
    expect("config.json", k_nomic, "\"rotary_scaling_factor\":null", "\"rotary_scaling_factor\":2.0", U,
           "config.json", "\"rotary_scaling_factor\" is not supported (dynamic NTK");
    expect("config.json", k_nomic, "\"rotary_emb_fraction\":1.0", "\"rotary_emb_fraction\":0.5", U, "config.json",
           "\"rotary_emb_fraction\" = 0.5");
    expect("config.json", k_nomic, "\"causal\":false", "\"causal\":false,\"moe_every_n_layers\":2,\"num_experts\":8",
           U, "config.json", "mixture-of-experts");
    expect("config.json", k_nomic, "\"prenorm\":false", "\"prenorm\":true", U, "config.json", "\"prenorm\" = true");
    expect("config.json", k_nomic, "\"qkv_proj_bias\":false", "\"qkv_proj_bias\":true", U, "config.json",
           "\"qkv_proj_bias\" = true");
    expect("config.json", k_nomic, "\"use_rms_norm\":false", "\"use_rms_norm\":true", U, "config.json",
           "\"use_rms_norm\" = true");
    expect("config.json", k_nomic, "\"scale_attn_weights\":true", "\"scale_attn_weights\":false", U, "config.json",
           "\"scale_attn_weights\" = false");
    expect("config.json", k_nomic, "\"swiglu\"", "\"gelu\"", U, "config.json", "\"activation_function\" = \"gelu\"");
    expect("config.json", k_nomic, "\"causal\":false", "\"causal\":false,\"rope_parameters\":{\"rope_type\":"
           "\"dynamic\",\"factor\":2.0}", U, "config.json", "rope_type\" = \"dynamic\"");
    expect("config.json", k_nomic, "\"n_embd\":64", "\"n_embd\":64,\"hidden_size\":128", F, "config.json",
           "\"n_embd\" = 64 and field \"hidden_size\" = 128 disagree");
    expect("config.json", k_nomic, "\"rotary_emb_base\":1000,", "", F, "config.json", "\"rotary_emb_base\" is missing");
    expect("config.json", k_nomic, "\"n_inner\":96,", "", F, "config.json", "\"n_inner\" is missing");
    expect("config.json", k_nomic, "\"n_head\":4", "\"n_head\":64", F, "config.json", "rotary embeddings rotate pairs");
    reset();
}

/* jina_bert: model_type "bert" with position_embedding_type "alibi" (jina-embeddings-v2's keys);
 * the variants jina-bert-implementation does not have, or another remote implementation, are
 * refused naming the key. */
static const char k_jina[] =
    "{\"architectures\":[\"JinaBertForMaskedLM\"],\"model_type\":\"bert\",\"hidden_size\":64,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"intermediate_size\":128,\"hidden_act\":\"gelu\","
    "\"layer_norm_eps\":1e-12,\"max_position_embeddings\":8192,\"type_vocab_size\":2,\"vocab_size\":100,"
    "\"pad_token_id\":0,\"position_embedding_type\":\"alibi\",\"feed_forward_type\":\"geglu\","
    "\"emb_pooler\":\"mean\",\"auto_map\":{\"AutoModel\":"
    "\"jinaai/jina-bert-implementation--modeling_bert.JinaBertModel\"}}";

static void test_jina(void) {
    const int F = MODATTN_EFORMAT, U = MODATTN_EUNSUPPORTED;
    modattn__model_config c;
    expect("config.json", k_jina, "\"geglu\"", "\"geglu\"", 0, "", NULL);
    int st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "jina_bert: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_JINA_BERT && c.alibi && c.jina_glu && !c.modern && c.act == MODATTN__ACT_GELU_ERF &&
          c.heads == 4 && c.intermediate == 128 && c.max_tokens == 16 && c.pos_offset == 0);
    expect("config.json", k_jina, "\"geglu\"", "\"reglu\"", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK(st == 0 && c.alibi && c.jina_glu && c.act == MODATTN__ACT_RELU);
    expect("config.json", k_jina, "\"geglu\"", "\"original\"", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK(st == 0 && c.alibi && !c.jina_glu && c.act == MODATTN__ACT_GELU_ERF);
    expect("config.json", k_jina, "\"geglu\"", "\"swiglu\"", U, "config.json", "\"feed_forward_type\" = \"swiglu\"");
    expect("config.json", k_jina, "\"geglu\"", "7", F, "config.json", "\"feed_forward_type\" must be a string");
    expect("config.json", k_jina, "jinaai/jina-bert-implementation--", "jinaai/jina-bert-v2-qk-post-norm--", U,
           "config.json", "\"auto_map.AutoModel\"");
    expect("config.json", k_jina, "\"emb_pooler\":\"mean\"", "\"emb_pooler\":\"mean\",\"rope_scaling\":{}", U,
           "config.json", "\"rope_scaling\" is not supported");
    expect("config.json", k_jina, "\"emb_pooler\":\"mean\"", "\"emb_pooler\":3", F, "config.json", "\"emb_pooler\"");
    /* alibi belongs to "bert" (jina's layout) only */
    expect("config.json", k_jina, "\"model_type\":\"bert\"", "\"model_type\":\"xlm-roberta\"", U, "config.json",
           "\"position_embedding_type\" = \"alibi\"");
    reset();
}

/* qwen3 / qwen2: Qwen3-Embedding's config keys (rope_theta, rope_scaling null, use_sliding_window false)
 * and transformers 5's (rope_parameters, layer_types); what the layers do not do is refused by name. */
static const char k_qwen3[] =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":64,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32,\"intermediate_size\":96,"
    "\"hidden_act\":\"silu\",\"rms_norm_eps\":1e-06,\"max_position_embeddings\":64,\"vocab_size\":100,"
    "\"rope_theta\":1000000,\"rope_scaling\":null,\"sliding_window\":null,\"use_sliding_window\":false,"
    "\"tie_word_embeddings\":true,\"attention_bias\":false}";
static const char k_pool_last[] =
    "{\"word_embedding_dimension\":64,\"pooling_mode_lasttoken\":true,\"pooling_mode_mean_tokens\":false}";

static void test_qwen(void) {
    const int F = MODATTN_EFORMAT, U = MODATTN_EUNSUPPORTED;
    modattn__model_config c;
    expect("config.json", k_qwen3, "\"qwen3\"", "\"qwen3\"", 0, "", NULL);
    put("1_Pooling/config.json", k_pool_last);
    put("config.json", k_qwen3);
    int st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "qwen3: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_QWEN3 && c.decoder && !c.modern && c.hidden == 64 && c.layers == 2 &&
          c.heads == 4 && c.kv_heads == 2 && c.head_dim == 32 && c.intermediate == 96 && c.act == MODATTN__ACT_SILU &&
          c.ln_eps == 1e-06 && c.rope_theta == 1000000.0 && c.qk_norm && !c.qkv_bias && !c.attn_bias &&
          c.pooling == MODATTN_POOL_LAST && c.max_tokens == 16);
    /* qwen2: q/k/v biases, no QK-norm, head_dim = hidden / heads; transformers 5's rope_parameters */
    expect("config.json", k_qwen3, "\"qwen3\"", "\"qwen2\"", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0, "qwen2: %s", modattn_last_error());
    CHECK(c.arch == MODATTN__ARCH_QWEN2 && c.qkv_bias && !c.qk_norm && c.head_dim == 16);
    expect("config.json", k_qwen3, "\"rope_theta\":1000000,", "\"rope_parameters\":{\"rope_type\":\"default\","
           "\"rope_theta\":5000.0},\"layer_types\":[\"full_attention\",\"full_attention\"],", 0, "", NULL);
    st = modattn__config_load(g_dir, &c);
    CHECK_MSG(st == 0 && c.rope_theta == 5000.0, "qwen3 (transformers 5 keys): %s", modattn_last_error());
    /* refused, naming the key */
    expect("config.json", k_qwen3, "\"rope_scaling\":null", "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0}",
           U, "config.json", "\"rope_scaling\" (rope_type \"yarn\")");
    expect("config.json", k_qwen3, "\"rope_scaling\":null", "\"rope_scaling\":{\"rope_type\":\"default\",\"factor\":4.0}",
           U, "config.json", "\"rope_scaling.factor\"");
    expect("config.json", k_qwen3, "\"rope_theta\":1000000,", "\"rope_parameters\":{\"rope_type\":\"dynamic\"},", U,
           "config.json", "\"rope_parameters\" (rope_type \"dynamic\")");
    expect("config.json", k_qwen3, "\"use_sliding_window\":false", "\"use_sliding_window\":true", U, "config.json",
           "\"use_sliding_window\" = true");
    expect("config.json", k_qwen3, "\"attention_bias\":false}", "\"attention_bias\":false,\"num_experts\":8}", U,
           "config.json", "\"num_experts\" is not supported (mixture-of-experts");
    expect("config.json", k_qwen3, "\"attention_bias\":false}", "\"attention_bias\":false,\"auto_map\":{}}", U,
           "config.json", "\"auto_map\" is not supported (remote code");
    expect("config.json", k_qwen3, "\"silu\"", "\"gelu\"", U, "config.json", "\"hidden_act\" = \"gelu\"");
    expect("config.json", k_qwen3, "\"attention_bias\":false}", "\"attention_bias\":false,\"layer_types\":"
           "[\"full_attention\",\"sliding_attention\"]}", U, "config.json", "\"layer_types\"[1] = \"sliding_attention\"");
    expect("config.json", k_qwen3, "\"num_key_value_heads\":2", "\"num_key_value_heads\":3", F, "config.json",
           "\"num_key_value_heads\" = 3");
    expect("config.json", k_qwen3, "\"head_dim\":32", "\"head_dim\":33", F, "config.json", "rotate pairs");
    reset();
}

static void test_errors(void) {
    const int F = MODATTN_EFORMAT, U = MODATTN_EUNSUPPORTED, N = MODATTN_ENOTFOUND;
    /* missing files */
    const char *files[] = {"config.json", "modules.json", "sentence_bert_config.json",
                           "1_Pooling/config.json"};
    for (int i = 0; i < 4; i++) {
        reset();
        put(files[i], NULL);
        modattn__model_config c;
        CHECK_ERR(modattn__config_load(g_dir, &c), N, files[i]);
        /* malformed */
        reset();
        put(files[i], "{\"a\": ");
        CHECK_ERR(modattn__config_load(g_dir, &c), F, files[i]);
    }
    {
        modattn__model_config c;
        CHECK_ERR(modattn__config_load("/nonexistent/model", &c), N, "modules.json");
    }
    /* config.json: wrong types, ranges, architecture */
    expect("config.json", k_config, "\"hidden_size\":64", "\"hidden_size\":\"64\"", F,
           "config.json", "\"hidden_size\" must be an integer");
    expect("config.json", k_config, "\"hidden_size\":64", "\"hidden_size\":64.5", F,
           "config.json", "\"hidden_size\"");
    expect("config.json", k_config, "\"hidden_size\":64,", "", F, "config.json",
           "\"hidden_size\" is missing");
    expect("config.json", k_config, "\"num_hidden_layers\":2", "\"num_hidden_layers\":0", F,
           "config.json", "\"num_hidden_layers\" = 0 is out of range");
    expect("config.json", k_config, "\"num_attention_heads\":4", "\"num_attention_heads\":5", F,
           "config.json", "\"num_attention_heads\"");
    expect("config.json", k_config, "\"intermediate_size\":128", "\"intermediate_size\":-1", F,
           "config.json", "\"intermediate_size\"");
    expect("config.json", k_config, "\"vocab_size\":100", "\"vocab_size\":true", F, "config.json",
           "\"vocab_size\"");
    expect("config.json", k_config, "\"pad_token_id\":0", "\"pad_token_id\":100", F,
           "config.json", "\"pad_token_id\"");
    expect("config.json", k_config, "1e-12", "\"small\"", F, "config.json",
           "\"layer_norm_eps\" must be a number");
    expect("config.json", k_config, "\"max_position_embeddings\":32",
           "\"max_position_embeddings\":[32]", F, "config.json", "\"max_position_embeddings\"");
    expect("config.json", k_config, "\"type_vocab_size\":2", "\"type_vocab_size\":0", F,
           "config.json", "\"type_vocab_size\"");
    expect("config.json", k_config, "\"bert\"", "\"gpt2\"", U, "config.json",
           "\"model_type\" = \"gpt2\" is not supported (this encoder runs \"bert\", \"xlm-roberta\", "
           "\"distilbert\", \"mpnet\", \"modernbert\"");
    expect("config.json", k_config, "\"model_type\":\"bert\",", "", F, "config.json",
           "\"model_type\" is missing");
    expect("config.json", k_config, "\"gelu\"", "\"swish\"", U, "config.json",
           "\"hidden_act\" = \"swish\"");
    expect("config.json", k_config, "\"gelu\"", "1", F, "config.json",
           "\"hidden_act\" must be a string");
    expect("config.json", k_config, "\"absolute\"", "\"relative_key\"", U, "config.json",
           "\"position_embedding_type\"");
    expect("config.json", k_config, "{", "{\"is_decoder\":true,", U, "config.json",
           "\"is_decoder\"");
    expect("config.json", k_config, "{\"architectures\"", "[{\"architectures\"", F, "config.json",
           NULL);
    /* modules.json */
    expect("modules.json", "{\"a\":1}", "1", "2", F, "modules.json", "array");
    expect("modules.json", k_modules, "models.Pooling", "models.Dense", U, "modules.json[1]",
           "\"type\" = \"sentence_transformers.models.Dense\"");
    expect("modules.json", k_modules, "\"type\":\"sentence_transformers.models.Transformer\"",
           "\"type\":7", F, "modules.json[0]", "\"type\" must be a string");
    expect("modules.json", k_modules, "\"1_Pooling\"", "\"../x\"", F, "modules.json[1]",
           "\"path\"");
    expect("modules.json", k_modules,
           ",{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers."
           "models.Pooling\"},{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":"
           "\"sentence_transformers.models.Normalize\"}",
           "", U, "modules.json", "Pooling");
    /* sentence_bert_config.json */
    expect("sentence_bert_config.json", k_sbert, "16", "\"16\"", F, "sentence_bert_config.json",
           "\"max_seq_length\" must be an integer");
    expect("sentence_bert_config.json", k_sbert, "16", "1", F, "sentence_bert_config.json",
           "\"max_seq_length\" = 1 is out of range");
    expect("sentence_bert_config.json", k_sbert, "false", "\"no\"", F,
           "sentence_bert_config.json", "\"do_lower_case\" must be true or false");
    /* pooling */
    expect("1_Pooling/config.json", k_pool, "64", "32", F, "1_Pooling/config.json",
           "\"word_embedding_dimension\" = 32 differs");
    expect("1_Pooling/config.json", k_pool, "\"word_embedding_dimension\":64,", "", F,
           "1_Pooling/config.json", "\"word_embedding_dimension\" is missing");
    expect("1_Pooling/config.json", k_pool, "\"pooling_mode_mean_tokens\":true",
           "\"pooling_mode_mean_tokens\":false", F, "1_Pooling/config.json", "no pooling mode");
    expect("1_Pooling/config.json", k_pool, "\"pooling_mode_mean_tokens\":true",
           "\"pooling_mode_mean_tokens\":1", F, "1_Pooling/config.json",
           "\"pooling_mode_mean_tokens\" must be true or false");
    expect("1_Pooling/config.json", k_pool, "{", "{\"pooling_mode_median_tokens\":true,", U,
           "1_Pooling/config.json", "\"pooling_mode_median_tokens\": unknown pooling mode");
}

static int op_config(void *dir) {
    modattn__model_config c;
    return modattn__config_load((const char *)dir, &c);
}

/* Allocations a load attempts (none fail). */
static uint64_t count_allocations(const char *dir) {
    modattn__mem_fail_nth(UINT64_MAX);
    int st = op_config((void *)dir);
    uint64_t n = modattn__mem_fail_counter();
    modattn__mem_fail_nth(0);
    CHECK_MSG(st == 0, "%s: %s", dir, modattn_last_error());
    return n;
}

/* The sweep with jansson routed; `plain` is the count from before it was. */
static void test_alloc_sweep(const char *dir, uint64_t plain) {
    int points = sweep_allocations(dir, op_config, (void *)dir, 20000);
    printf("config load of %s: %d allocation points with jansson's allocations counted, %llu without\n", dir,
           points, (unsigned long long)plain);
    CHECK(points > 0 && (uint64_t)points > plain);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/modattn_cfg_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    char sub[128];
    snprintf(sub, sizeof sub, "%s/1_Pooling", g_dir);
    mkdir(sub, 0755);
    /* the allocations of a load before jansson's are counted, for comparison; then route them,
     * with no jansson memory live */
    reset();
    const char *real = ".models/all-MiniLM-L6-v2";
    struct stat sb;
    bool have_real = stat(real, &sb) == 0;
    uint64_t plain = count_allocations(g_dir), plain_real = have_real ? count_allocations(real) : 0;
    CHECK(modattn__json_count_allocations() == 0);
    modattn_mem_stats m0;
    modattn_mem_get_stats(&m0);
    test_valid();
    test_errors();
    test_families();
    test_modernbert();
    test_gte();
    test_nomic();
    test_jina();
    test_qwen();
    reset();
    test_alloc_sweep(g_dir, plain);
    if (have_real) test_alloc_sweep(real, plain_real);
    modattn_mem_stats m1;
    modattn_mem_get_stats(&m1);
    CHECK_MSG(m1.current_total == m0.current_total, "%lld bytes left allocated",
              (long long)(m1.current_total - m0.current_total));
    const char *files[] = {"config.json", "modules.json", "sentence_bert_config.json",
                           "1_Pooling/config.json"};
    for (int i = 0; i < 4; i++) put(files[i], NULL);
    rmdir(sub);
    rmdir(g_dir);
    return test_finish("test_config");
}
