/* model/internal_static.h — a model's static proxy for a text's meaning, for pipeline/ (the
 * snippets' meaning weight, pipeline/snippet.c): the input word-embedding table alone, no
 * transformer layer (model/static_embed.c). */
#ifndef MODATTN_MODEL_INTERNAL_STATIC_H
#define MODATTN_MODEL_INTERNAL_STATIC_H

#include <stddef.h>

#include "modattn/model.h"

/* The width of the model's word-embedding rows (its hidden size); 0 for a NULL model. */
size_t modattn__model_static_dim(const modattn_model *m);

/* The model's input word-embedding rows of text's word pieces, in order ([CLS], [SEP] and padding
 * left out; lower-cased and cut to max_tokens as embed does): rows[i] points into the model's host
 * table ([static_dim] floats each, valid while the model lives), at most max of them; *n receives
 * how many. */
int modattn__model_static_rows(const modattn_model *m, const char *text, size_t len, const float **rows, size_t max,
                               size_t *n);

/* The mean of the model's input word-embedding rows over text's word pieces ([CLS], [SEP] and
 * padding left out; lower-cased and cut to max_tokens as embed does), into out ([static_dim]).
 * No position or type rows, no layers: microseconds, on the host's copy of the table whatever the
 * model's device, and a text's mean never depends on another's. *ntok (may be NULL) receives the
 * word pieces averaged; none: out is zeros. */
int modattn__model_static_mean(const modattn_model *m, const char *text, size_t len, float *out, size_t *ntok);

#endif
