/* model/encoder_internal.h — the model object shared by the encoder's files: encoder_load.c
 * (weights, load/free), encoder_device.c (the forward pass, on whichever device), encoder.c
 * (tokenising, batching, the embed API). Not a public header. */
#ifndef MODATTN_ENCODER_INTERNAL_H
#define MODATTN_ENCODER_INTERNAL_H

#include <pthread.h>

#include "model/model_internal.h"
#include "model/safetensors.h"
#include "modattn/core.h"
#include "modattn/dispatch.h"
#include "modattn/model.h"
#include "modattn/tokenizer.h"

typedef struct layer_w {
    float *wqkv;        /* [3H, H], owned (freed once the device holds its own copy) */
    float *bqkv;        /* [3H], owned (likewise) */
    const float *wo, *bo;       /* [H, H], [H] */
    const float *ln1_g, *ln1_b; /* [H] */
    const float *w1, *b1;       /* [I, H], [I] */
    const float *w2, *b2;       /* [H, I], [H] */
    const float *ln2_g, *ln2_b; /* [H] */
    const float *qk_g; /* qwen3: q_norm's weight tiled over the heads, then k_norm's over the KV heads, owned */
} layer_w;

/* --device auto (model/device_auto.c): loads the model on the fastest device, measured. */
int modattn__model_load_auto(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt, modattn_model **out);
/* encoder_load.c: the model on the one device opt->device names (cpu when none) */
int modattn__model_load_on_device(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                                  modattn_model **out);

/* For heads other than sentence-transformers' pooling (model/classifier.c): the encoder of a Hugging
 * Face directory without modules.json (config.json, tokenizer.json and model.safetensors in dir;
 * modattn__config_load_hf), whose output is the [CLS] row of the last hidden states (pooling cls, no
 * normalisation), inputs of at most max_tokens. pair_types (and type_vocab_size >= 2): an id
 * v + vocab stands for id v of token type 1 (the embedding table is held with each type added in,
 * 2 x vocab rows). Device "auto" is refused. */
int modattn__model_load_head(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt, size_t max_tokens,
                             bool pair_types, modattn_model **out);
/* The encoder's forward pass with a token head instead of the pooling (model/sparse.c): n inputs of
 * ids (checked as modattn_model_embed_ids), batched and sorted as there; head->row gets each input's
 * last hidden states once, in batch order. Which inputs share a batch never changes the states. */
int modattn__model_embed_tokens(modattn_model *m, modattn_session *s, const int32_t *const *ids, const size_t *counts,
                                size_t n, const modattn__token_head *head);
/* The fp32 tensor `name` of the model's weights with exactly the shape [d0] (d1 = 0) or [d0, d1],
 * every value finite; errors name the file and the tensor. Valid while the model lives. */
int modattn__model_tensor(modattn_model *m, const char *name, int64_t d0, int64_t d1, const float **out);
/* config_sentence_transformers.json's prompts, default_prompt_name and truncate_dim, and the
 * Pooling config's include_prompt (model/prompts.c) */
typedef struct modattn__prompts {
    size_t n;
    char **names, **texts;     /* n each, owned */
    char *default_name;        /* NULL: none */
    size_t truncate_dim;       /* 0: none */
    bool exclude_prompt;       /* Pooling "include_prompt": false */
} modattn__prompts;
/* Reads them from dir (a missing file: none); errors name the file and the field. */
int modattn__prompts_load(const char *dir, size_t dim, modattn__prompts *p);
void modattn__prompts_free(modattn__prompts *p);

struct modattn_model {
    modattn_ctx *ctx; /* borrowed */
    modattn__model_config cfg;
    modattn_model_info info;
    char *dir, *name;
    modattn_st_file *st;
    modattn_tokenizer *tok;
    const float *word;   /* [vocab, H] */
    const float *pos;    /* [max_positions - pos_offset, H]: from the first position id's row */
    const float *type0;  /* [H]: token type 0 (single-sentence inputs); zeros where the model has none */
    const float *rel_bias; /* mpnet: [relative_attention_num_buckets, heads], else NULL */
    const float *emb_g, *emb_b;
    const float *fin_g, *fin_b; /* modernbert: final_norm (else NULL) */
    layer_w *layers;
    float **owned;       /* weight copies (unaligned tensors), freed at close */
    size_t nowned;
    size_t batch_tokens;
    /* the device every batch runs on (modattn_model_load_ex; the CPU by default) and the weights
     * there (encoder_device.c) */
    const modattn_device_iface *dev;
    modattn__dev_model *dm;
    bool few_inputs;                      /* options.few_inputs: weights not prepared */
    char host_why[MODATTN_OP_COUNT][192]; /* ops in info.host_fallback_ops: the device's reason */
    /* host threads for the device's ops: borrowed (options) or its own; never the ctx's
     * (modattn_model_embed; a session brings its own) */
    modattn_pool *pool;
    bool own_pool;
    /* a device with its own memory (one in-order queue, kernels whose arguments are set per
     * call) runs one batch at a time: sessions take turns on it; the CPU runs them at once */
    bool device_serial;
    pthread_mutex_t device_mu;
    /* config_sentence_transformers.json (model/prompts.c) */
    modattn__prompts prompts;
};

#endif
