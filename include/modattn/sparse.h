/* modattn/sparse.h — learned sparse retrieval (SPLADE): a text becomes a weight per vocabulary
 * entry, most of them zero, from the masked-language-model head of a BERT-family encoder. Loaded
 * from a Hugging Face *ForMaskedLM directory as transformers saves it, or sentence-transformers'
 * SparseEncoder layout of one:
 *
 *   config.json          the encoder's sizes (as modattn/model.h), "architectures" naming a
 *                        *ForMaskedLM
 *   model.safetensors    the encoder, then the MLM head: cls.predictions.transform.dense (+ the
 *                        activation of hidden_act) and .LayerNorm, the decoder (the word embeddings,
 *                        tied, or cls.predictions.decoder.weight when present) and its bias
 *                        (cls.predictions.bias or cls.predictions.decoder.bias); RoBERTa's
 *                        lm_head.dense / lm_head.layer_norm / lm_head.decoder / lm_head.bias
 *   tokenizer.json       the tokenizer (modattn/tokenizer.h)
 *   modules.json         optional (sentence-transformers): an MLMTransformer at the directory itself
 *                        and a SpladePooling whose config.json gives pooling_strategy ("max" or
 *                        "sum") and activation_function ("relu" or "log1p_relu"); without it "max"
 *                        and "relu", SparseEncoder's defaults
 *   sentence_bert_config.json / tokenizer_config.json  max_seq_length / model_max_length: the
 *                        length limit, specials included (else max_position_embeddings)
 *
 * A text's vector, as sentence-transformers' SpladePooling: w[v] = pool over the text's tokens
 * ([CLS] and [SEP] included, padding excluded) of log(1 + ReLU(logit[t, v])), pool max (or sum),
 * where logit[t] = decoder(LayerNorm(act(dense(h[t])))) on the encoder's last hidden state h[t].
 * The head is computed in double precision per token, in one fixed order: a text's vector does not
 * depend on the other texts of a call (bit for bit). Memory: one vocabulary-sized row per text
 * being pooled (never one per token), the encoder's activations for a batch, and the result.
 * Thread safety as modattn_model: one thread at a time per encoder, or a session each. */
#ifndef MODATTN_SPARSE_H
#define MODATTN_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "modattn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modattn_sparse_encoder modattn_sparse_encoder;

typedef struct modattn_sparse_info {
    const char *name;          /* the directory's last component */
    const char *dir;           /* as given to modattn_sparse_load */
    const char *architecture;  /* config.json architectures[0] ("BertForMaskedLM") */
    const char *model_type;    /* "bert" */
    int hidden, layers, heads; /* the encoder's sizes */
    size_t vocab;              /* the vector's dimension (the decoder's rows) */
    size_t max_tokens;         /* ids per text, specials included */
    const char *pooling;       /* "max" or "sum" */
    const char *activation;    /* "relu" (log(1 + ReLU(x))) or "log1p_relu" (log(1 + log(1 + ReLU(x)))) */
    modattn_device device;
} modattn_sparse_info;

/* One text's vector: the n non-zero weights kept, ids ascending (ids[i] < vocab, weights[i] > 0).
 * Owned by the caller: modattn_sparse_vec_free. */
typedef struct modattn_sparse_vec {
    size_t n;
    int32_t *ids;
    float *weights;
} modattn_sparse_vec;

/* Pruning (NULL: none, every non-zero weight). top_k > 0 keeps the top_k largest weights (ties: the
 * smaller id first), as sentence-transformers' max_active_dims; threshold > 0 then drops weights
 * below it. */
typedef struct modattn_sparse_options {
    size_t top_k;
    float threshold;
} modattn_sparse_options;

/* Load the SPLADE model in dir; opt as modattn_model_load_ex (NULL: the CPU; "auto" is refused).
 * A directory without an MLM head is refused naming what is missing (MODATTN_EUNSUPPORTED:
 * config.json's architectures, a SparseEncoder module this does not run; MODATTN_EFORMAT: a head
 * tensor missing or of the wrong shape). Ownership: modattn_sparse_free. ctx must outlive it. */
int modattn_sparse_load(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                        modattn_sparse_encoder **out);
void modattn_sparse_free(modattn_sparse_encoder *e); /* NULL is fine */
const modattn_sparse_info *modattn_sparse_get_info(const modattn_sparse_encoder *e);

/* Encode n texts (lens may be NULL: NUL-terminated) into out[n], in input order; each text cut to
 * max_tokens ids. ntokens (may be NULL): [n] ids per text. session: NULL, or a session of the
 * encoder's ctx. n = 0 is a no-op. On error every out[i] is empty ({0, NULL, NULL}). */
int modattn_sparse_encode(modattn_sparse_encoder *e, modattn_session *session, const char *const *texts,
                          const size_t *lens, size_t n, const modattn_sparse_options *opt, modattn_sparse_vec *out,
                          int32_t *ntokens);

/* The same for texts already tokenised (modattn_model_tokenize_ex on modattn_sparse_model): ids[i]
 * with counts[i] in [1, max_tokens] entries, each id in [0, vocab). */
int modattn_sparse_encode_ids(modattn_sparse_encoder *e, modattn_session *session, const int32_t *const *ids,
                              const size_t *counts, size_t n, const modattn_sparse_options *opt,
                              modattn_sparse_vec *out);

/* Frees the arrays of out[0..n) and empties them. NULL is fine. */
void modattn_sparse_vec_free(modattn_sparse_vec *v, size_t n);

/* The encoder underneath (its tokenizer: modattn_model_tokenizer, modattn_tokenizer_token for an
 * id's string; its batch budget: modattn_model_set_batch_tokens). Borrowed. */
modattn_model *modattn_sparse_model(modattn_sparse_encoder *e);

#ifdef __cplusplus
}
#endif
#endif
