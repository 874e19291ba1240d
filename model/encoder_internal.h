/* model/encoder_internal.h — the model object shared by the encoder's files: encoder_load.c
 * (weights, load/free), encoder_host.c (the host engine's forward pass and pooling), encoder.c
 * (tokenising, batching, the embed API). Not a public header. */
#ifndef MODATTN_ENCODER_INTERNAL_H
#define MODATTN_ENCODER_INTERNAL_H

#include "model/model_internal.h"
#include "model/safetensors.h"
#include "modattn/core.h"
#include "modattn/dispatch.h"
#include "modattn/model.h"
#include "modattn/tokenizer.h"

typedef struct layer_w {
    float *wqkv;        /* [3H, H], owned */
    float *bqkv;        /* [3H], owned */
    const float *wo, *bo;       /* [H, H], [H] */
    const float *ln1_g, *ln1_b; /* [H] */
    const float *w1, *b1;       /* [I, H], [I] */
    const float *w2, *b2;       /* [H, I], [H] */
    const float *ln2_g, *ln2_b; /* [H] */
    /* prepared GEMMs (NULL with a BLAS that has none): qkv, output, FFN up, FFN down */
    modattn__gemm_plan *pqkv, *po, *p1, *p2;
} layer_w;

struct modattn_model {
    modattn_ctx *ctx; /* borrowed */
    modattn__model_config cfg;
    modattn_model_info info;
    char *dir, *name;
    modattn_st_file *st;
    modattn_tokenizer *tok;
    const float *word;   /* [vocab, H] */
    const float *pos;    /* [max_positions, H] */
    const float *type0;  /* [H]: token type 0 (single-sentence inputs) */
    const float *emb_g, *emb_b;
    layer_w *layers;
    float **owned;       /* weight copies (unaligned tensors), freed at close */
    size_t nowned;
    size_t batch_tokens;
    size_t gemm_scratch; /* largest scratch of any plan, rounded up to MODATTN_ALIGN */
    /* a device with its own memory (modattn_model_load_ex): the weights live there and every
     * batch runs there (encoder_device.c); NULL: the host engine below */
    const modattn_device_iface *dev;
    modattn__dev_model *dm;
    /* the host engine's threads: borrowed (options) or its own; never the ctx's */
    modattn_pool *pool;
    bool own_pool;
};

/* ---- the host engine (encoder_host.c): activations of one batch of T = B*S token rows live in
 * one arena of modattn__host_arena_floats(cfg, T) floats (the caller allocates it, zeroed);
 * scratch holds the GEMM plans' scratch per thread (m->gemm_scratch each, or NULL). */
size_t modattn__host_arena_floats(const modattn__model_config *c, int64_t T);
int modattn__host_forward(modattn_model *m, float *arena, char *scratch, int64_t B, int64_t S, const int32_t *ids,
                          const int32_t *lens, float *const *outs);

#endif
