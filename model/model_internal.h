/* model/model_internal.h — what the model/ files share: the parsed configuration of a model
 * directory (config.c) and the forward pass on a device (encoder_device.c). Not a public header. */
#ifndef MODATTN_MODEL_INTERNAL_H
#define MODATTN_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modattn/model.h"

typedef enum modattn__act {
    MODATTN__ACT_GELU_ERF = 0, /* "gelu": x/2 (1 + erf(x/sqrt 2)) */
    MODATTN__ACT_GELU_TANH,    /* "gelu_new", "gelu_pytorch_tanh", "gelu_fast" */
    MODATTN__ACT_RELU,         /* "relu" */
    MODATTN__ACT_SILU,         /* "silu" (nomic_bert's "swiglu" gate) */
} modattn__act;

#define MODATTN__PATH_MAX 4096

/* config.json's model_type: the encoders this file runs (docs/MODELS.md) */
typedef enum modattn__arch {
    MODATTN__ARCH_BERT = 0,    /* "bert": BertModel */
    MODATTN__ARCH_XLM_ROBERTA, /* "xlm-roberta": BERT's layers, positions from pad_token_id + 1 */
    MODATTN__ARCH_DISTILBERT,  /* "distilbert": no token types, its own weight names */
    MODATTN__ARCH_MPNET,       /* "mpnet": relative position buckets added to the scores */
    MODATTN__ARCH_MODERNBERT,  /* "modernbert": pre-LN, rotary, GeGLU, sliding-window local layers */
    MODATTN__ARCH_GTE,         /* "new" (the Hub's GTE v1.5) and "gte" (transformers' GteModel) */
    MODATTN__ARCH_NOMIC_BERT,  /* "nomic_bert": post-LN, rotary (NeoX or GPT-J), SwiGLU/GeGLU, no biases */
    MODATTN__ARCH_JINA_BERT,   /* "bert" with position_embedding_type "alibi": jina_bert (model/arch_jina.c) */
    MODATTN__ARCH_QWEN3,       /* "qwen3": causal decoder, RMSNorm, QK-norm, rotary, GQA, SwiGLU (arch_qwen.c) */
    MODATTN__ARCH_QWEN2,       /* "qwen2": qwen3's layers without QK-norm, with q/k/v biases */
} modattn__arch;

#define MODATTN__MAX_LAYERS 1024

typedef struct modattn__model_config {
    /* config.json */
    char model_type[32];
    modattn__arch arch;
    int pos_offset;     /* the first position id: pad_token_id + 1 for xlm-roberta and mpnet, else 0 */
    int rel_buckets;    /* mpnet: relative_attention_num_buckets (0: no relative position bias) */
    int rel_max_distance; /* mpnet: 128, as transformers' MPNet buckets */
    bool sinusoidal;    /* distilbert: sinusoidal_pos_embds (used when the weights hold no table) */
    int hidden;         /* hidden_size */
    int layers;         /* num_hidden_layers */
    int heads;          /* num_attention_heads */
    int intermediate;   /* intermediate_size */
    int max_positions;  /* max_position_embeddings */
    int type_vocab;     /* type_vocab_size */
    int vocab;          /* vocab_size */
    int pad_id;         /* pad_token_id */
    double ln_eps;      /* layer_norm_eps (modernbert: norm_eps) */
    /* modernbert (docs/MODELS.md): pre-LN layers (layer 0 without attn_norm), a final norm, rotary
     * positions (NeoX layout) with one base for global and one for local layers, a gated FFN (Wi:
     * [2I, H] -> act(first half) * second half), local layers' attention within |i - j| <= window */
    bool modern;
    bool norm_bias, attn_bias, mlp_bias; /* the weights hold these biases (else zeros) */
    double rope_global, rope_local;      /* rope_theta of full_attention / sliding_attention layers */
    int window;                          /* local_attention / 2 */
    bool local_layer[MODATTN__MAX_LAYERS]; /* layer l is a sliding_attention layer */
    modattn__act act;   /* hidden_act */
    /* nomic_bert (docs/MODELS.md): BERT's post-LN layers without position table or biases, rotary
     * positions on all of each head (base rope_global; GPT-J's layout where rope_interleaved), a
     * gated FFN whose one weight is [fc12; fc11] -> act(fc12 x) * fc11 x */
    bool nomic;
    bool rope_interleaved;
    /* jina_bert (model/arch_jina.c): ALiBi slopes per head in place of positions, and (jina_glu) a
     * post-LN gated FFN: mlp.gated_layers [2I, H] -> act(first half) * second half -> mlp.wo */
    bool alibi, jina_glu;
    /* modules.json + sentence_bert_config.json + the pooling config */
    char transformer_dir[MODATTN__PATH_MAX]; /* dir + the Transformer module's path */
    size_t max_tokens;  /* max_seq_length, at most max_position_embeddings */
    bool lower_case;    /* do_lower_case */
    unsigned pooling;   /* modattn_pooling bits */
    bool normalize;     /* a Normalize module follows the pooling */
    size_t dim;         /* hidden x number of pooling modes */
    /* modattn_model_options.precision: the dense layers' arithmetic */
    modattn_precision precision;
    /* gte (docs/MODELS.md): BERT's post-LN layers (the LayerNorms fused into the residual GEMMs) with
     * rotary positions (NeoX layout, base rope_global, every layer global) on q and k, a gated FFN
     * (w1 [2I, H] as [gate | up]: act(gate) * up) and no position table */
    bool gte;
    double rope_ntk; /* rope_scaling {"type": "ntk", "factor": f}: f, fixed NTK on every position (0: none) */
    /* qwen3, qwen2 (model/arch_qwen.c): causal pre-RMSNorm decoder layers; the embeddings unnormalised,
     * QKV of heads*head_dim + 2*kv_heads*head_dim columns (GQA), rotary (NeoX) with rope_theta, per-head
     * RMSNorm of Q and K before it (qk_norm), a SwiGLU FFN (gate|up in one GEMM), a final RMSNorm */
    bool decoder;
    bool qk_norm, qkv_bias;
    int kv_heads, head_dim;
    double rope_theta;
} modattn__model_config;

/* Read and check every configuration file of a model directory. Errors name the file and the
 * field: MODATTN_ENOTFOUND (missing file), MODATTN_EFORMAT (not JSON, missing or wrong-typed
 * field, value out of range), MODATTN_EUNSUPPORTED (architecture, activation, module or pooling
 * mode this encoder does not run). */
int modattn__config_load(const char *dir, modattn__model_config *cfg);

/* A Hugging Face directory without sentence-transformers files (a *ForSequenceClassification or
 * *ForMaskedLM checkpoint): config.json in dir only, the Transformer in dir itself, pooling cls, no
 * normalisation, max_tokens = min(max_tokens, max_position_embeddings) (0: the latter). */
int modattn__config_load_hf(const char *dir, size_t max_tokens, modattn__model_config *cfg);

/* jina_bert's config keys (after BERT's): feed_forward_type, auto_map, emb_pooler (arch_jina.c). */
struct json_t;
int modattn__jina_config(const char *F, const struct json_t *j, modattn__model_config *c);
/* jina-bert-implementation's ALiBi slopes for `heads` heads, in float32, into out[heads]. */
void modattn__jina_slopes(int heads, float *out);

/* path for a message in buf (len >= 8): whole, or its start and end around "...". */
void modattn__path_shown(const char *path, char *buf, size_t len);
/* "dir/name" into buf; MODATTN_EINVAL if it does not fit. */
int modattn__path_join(char *buf, size_t len, const char *dir, const char *name);
/* A head's config.json (a cross-encoder's, a SPLADE model's): dir/config.json loaded into *j (the
 * caller's to json_decref; its path into F, of MODATTN__PATH_MAX bytes) whose "architectures"[0]
 * ends in suffix ("ForMaskedLM"), duplicated into *arch; else an error naming the field and then
 * `needed` ("not a SPLADE model (a *ForMaskedLM model ... is needed)"), *j NULL. */
struct json_t;
/* model/arch_qwen.c: config.json of a Qwen3Model / Qwen2Model (F: its path for messages) into c */
int modattn__read_qwen(const char *F, struct json_t *j, modattn__model_config *c);
int modattn__head_config_load(const char *dir, const char *suffix, const char *needed, char *F, struct json_t **j,
                              char **arch);

/* ---- the forward pass on a device (encoder_device.c): weights uploaded once at load (borrowed
 * on a device with host memory), activations kept on the device through every layer; per batch
 * only ids and lengths go in and the pooled vectors come out. Every op goes through the device layer's wrappers
 * (modattn/backend/device.h) and attention through the dispatcher, on buffer-form tensors. */
#include "modattn/backend/device.h"

/* one layer's host weights: the graph slot's struct (modattn/backend/device.h), the one layout of them */
typedef modattn_graph_layer modattn__layer_weights;

typedef struct modattn__dev_model modattn__dev_model;
typedef struct modattn__dev_arena modattn__dev_arena;

/* The ops this model needs on `dev`, each asked of the device (supports_op) and attention of the
 * dispatcher (an implementation on the device that takes the model's shape): MODATTN_EUNSUPPORTED
 * naming the first op the device does not run and why. */
/* With `fallback`, an op other than attention that the device does not run is put in *host_ops
 * (bit 1u << op) with the device's reason in why[op] instead. */
int modattn__dev_model_check(const modattn_device_iface *dev, modattn_ctx *ctx, const modattn__model_config *c,
                             const char *model_name, bool fallback, unsigned *host_ops, char (*why)[192]);
/* Uploads the weights (device memory, category weights); a device with the graph slot takes the
 * whole encoder at once (identity: the model's name and weights hash, for its compile cache).
 * Ownership: modattn__dev_model_free. */
/* pos: [max_positions - pos_offset, H] from the first position id's row; rel_bias: mpnet's
 * [rel_buckets, heads] (NULL without relative positions), turned into the attention mask; fin_g,
 * fin_b: modernbert's final_norm (NULL otherwise). A modernbert's pos is max_tokens rows of zeros
 * and a layer's ln1_g NULL where its attn_norm is the identity (layer 0). */
int modattn__dev_model_create(const modattn_device_iface *dev, const modattn__model_config *c, const float *word,
                              const float *pos, const float *type0, const float *emb_g, const float *emb_b,
                              const float *rel_bias, const float *fin_g, const float *fin_b,
                              const modattn__layer_weights *layers, unsigned host_ops,
                              bool prepare, const char *identity,
                              void (*layer_done)(void *arg, const modattn__dev_model *dm, int layer),
                              void *layer_done_arg, modattn__dev_model **out);
/* qwen3: uploads each layer's QK-norm weights (layer_w.qk_g: [(heads + kv_heads) head_dim]) after
 * modattn__dev_model_create; nothing for other models. */
int modattn__dev_model_decoder_qk_norm(modattn__dev_model *dm, const float *const *qk_g);
/* MPNet's bucket of a key at relative position rel = j - i (transformers'
 * MPNetEncoder.relative_position_bucket, in its float32 arithmetic). */
int modattn__mpnet_bucket(int rel, int num_buckets, int max_distance);
/* Whether a device buffer of dm is `host` itself (a device with host memory borrows the host
 * arrays: they must outlive dm). */
bool modattn__dev_model_borrows(const modattn__dev_model *dm, const void *host);
/* Whether the device has plans for the weights (packed or read in place: fixed row blocks, small
 * batches cost no more per row). */
bool modattn__dev_model_prepared(const modattn__dev_model *dm);
/* Whether those plans read the weights in place (every GEMM call packs them again: fewer, larger
 * batches pay off). */
bool modattn__dev_model_plans_borrow(const modattn__dev_model *dm);
void modattn__dev_model_free(modattn__dev_model *dm);
/* Activation buffers for batches of up to max_T padded tokens in max_B rows. */
int modattn__dev_arena_create(modattn__dev_model *dm, int64_t max_T, int64_t max_B, modattn__dev_arena **out);
void modattn__dev_arena_free(modattn__dev_arena *a);
/* Who runs a batch: attention through `session` (its workspace and threads) when set, else through
 * ctx's own; the device's host passes on `pool` (NULL: the calling thread). */
/* A head other than the pooling (model/sparse.c): per batch row, the final hidden states of the
 * row's real tokens instead of a pooled vector. */
typedef struct modattn__token_head {
    /* h: [len, hidden] of the batch row's `len` tokens (row-major, padding excluded); input: the
     * input's index in the call; pool: the batch's host threads (may be NULL). Called once per
     * row, rows one after another on the calling thread; nonzero stops the batch. */
    int (*row)(void *ud, size_t input, const float *h, size_t len, modattn_pool *pool);
    void *ud;
} modattn__token_head;
typedef struct modattn__fwd_exec {
    modattn_ctx *ctx;
    modattn_session *session;
    modattn_pool *pool;
    /* NULL: pooled vectors (outs); else each row's hidden states go to head->row, inputs[b] naming
     * batch row b's input (the pooling, the pooled vectors and outs are skipped) */
    const modattn__token_head *head;
    const size_t *inputs;
} modattn__fwd_exec;
/* One batch: B rows padded to S (ids [B*S], lens [B]); pooled vectors to outs[b][0..dim), or with
 * x->head each row's hidden states to the head (a device with the graph slot: MODATTN_EUNSUPPORTED). */
int modattn__dev_forward(modattn__dev_model *dm, const modattn__fwd_exec *x, modattn__dev_arena *a, int64_t B,
                         int64_t S, const int32_t *ids, const int32_t *lens, float *const *outs, const char *model_name);

#endif
