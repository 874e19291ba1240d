/* modattn/rerank.h — cross-encoders: a query and a passage read together, one relevance score (or
 * one score per label) for the pair. Loaded from a Hugging Face *ForSequenceClassification
 * directory as transformers saves it and sentence-transformers' CrossEncoder loads it:
 *
 *   config.json          the encoder's sizes (as modattn/model.h), "architectures" naming a
 *                        *ForSequenceClassification, num_labels / id2label, and optionally
 *                        sentence-transformers' "sentence_transformers": {"activation_fn": ...}
 *   model.safetensors    the encoder, then the head: BERT's pooler (bert.pooler.dense, tanh) and
 *                        classifier; or RoBERTa's classifier.dense (tanh) and classifier.out_proj
 *   tokenizer.json       the tokenizer (modattn/tokenizer.h)
 *   tokenizer_config.json  model_max_length: the pair's length limit, specials included (else
 *                        max_position_embeddings)
 *
 * A pair is tokenised as the `tokenizers` library does for a pair with truncation "longest_first":
 * [CLS] a [SEP] b [SEP] with token type 0 up to the first [SEP] and 1 after it (a model with one
 * token type, RoBERTa's layout: <s> a </s></s> b </s>, all type 0), the longer side cut first so
 * that the whole fits. The head reads the last hidden state of the first token. Scores: the
 * activation sentence-transformers' CrossEncoder applies by default (config.json's
 * sentence_transformers.activation_fn when given — Sigmoid, Identity or Tanh —, else sigmoid for
 * one label and none for more), or the raw logits with MODATTN_RERANK_RAW.
 *
 * A pair's scores do not depend on the other pairs of a call (bit for bit, as modattn_model_embed's
 * vectors). Thread safety as modattn_model: one thread at a time per reranker, or a session each. */
#ifndef MODATTN_RERANK_H
#define MODATTN_RERANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "modattn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modattn_reranker modattn_reranker;

typedef struct modattn_reranker_info {
    const char *name;          /* the directory's last component */
    const char *dir;           /* as given to modattn_reranker_load */
    const char *architecture;  /* config.json architectures[0] ("BertForSequenceClassification") */
    const char *model_type;    /* "bert" */
    int hidden, layers, heads; /* the encoder's sizes */
    size_t num_labels;         /* scores per pair */
    const char *const *labels; /* [num_labels]: id2label (LABEL_i when absent) */
    const char *activation;    /* "sigmoid", "identity" or "tanh" */
    size_t max_tokens;         /* ids per pair, specials included */
    size_t specials;           /* specials a pair takes (3 for BERT, 4 for RoBERTa) */
    modattn_device device;
} modattn_reranker_info;

/* Load the cross-encoder in dir; opt as modattn_model_load_ex (NULL: the CPU; "auto" is refused).
 * A directory whose model is not a sequence classifier is refused naming what is missing
 * (MODATTN_EUNSUPPORTED: config.json's architectures; MODATTN_EFORMAT: a head tensor missing or of
 * the wrong shape). Ownership: modattn_reranker_free. ctx must outlive it. */
int modattn_reranker_load(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                          modattn_reranker **out);
void modattn_reranker_free(modattn_reranker *r); /* NULL is fine */
const modattn_reranker_info *modattn_reranker_get_info(const modattn_reranker *r);

#define MODATTN_RERANK_RAW 1u /* the logits, no activation */

/* Tokenise one pair: ids[max] and types[max] (types may be NULL) get the pair's ids and token
 * types, *n the count (<= min(max, max_tokens)); *truncated (may be NULL) whether a side was cut.
 * MODATTN_EINVAL if max is smaller than the specials. Time linear in alen + blen. */
int modattn_reranker_tokenize(const modattn_reranker *r, const char *a, size_t alen, const char *b,
                              size_t blen, int32_t *ids, int32_t *types, size_t max, size_t *n,
                              bool *truncated);

/* Score n pairs (a[i], b[i]); alens / blens may be NULL (NUL-terminated). out: [n * num_labels]
 * floats, pair by pair in input order. ntokens (may be NULL): [n] ids per pair; truncated (may be
 * NULL): [n]. session: NULL, or a session of the reranker's ctx (several threads at once, each
 * with its own). flags: 0 or MODATTN_RERANK_RAW. n = 0 is a no-op. Memory: the pairs' ids (at most
 * max_tokens each) and one activation arena for the largest batch. */
int modattn_reranker_score(modattn_reranker *r, modattn_session *session, const char *const *a,
                           const size_t *alens, const char *const *b, const size_t *blens, size_t n,
                           unsigned flags, float *out, int32_t *ntokens, bool *truncated);

/* Score n pairs already tokenised (modattn_reranker_tokenize): ids[i] and types[i] (types may be
 * NULL: all type 0) with counts[i] in [1, max_tokens] entries each; the same scores as
 * modattn_reranker_score for the same pairs. (A server tokenises on its HTTP threads and scores on
 * its executors.) */
int modattn_reranker_score_ids(modattn_reranker *r, modattn_session *session, const int32_t *const *ids,
                               const int32_t *const *types, const size_t *counts, size_t n, unsigned flags,
                               float *out);

/* The encoder underneath (for its batch budget: modattn_model_set_batch_tokens). Borrowed. */
modattn_model *modattn_reranker_model(modattn_reranker *r);

#ifdef __cplusplus
}
#endif
#endif
