/* modattn/model.h — BERT-family sentence-embedding models, loaded from a Hugging Face /
 * sentence-transformers model directory as it is on disk:
 *
 *   config.json                 architecture (model_type "bert": sizes, activation, eps, ...)
 *   model.safetensors           weights (memory-mapped, validated, used in place)
 *   tokenizer.json              WordPiece tokenizer (see modattn/tokenizer.h)
 *   modules.json                the sentence-transformers pipeline: Transformer -> Pooling
 *                               [-> Normalize]
 *   sentence_bert_config.json   max_seq_length (truncation), do_lower_case
 *   <pooling path>/config.json  pooling modes (cls, mean, max, mean_sqrt_len, weightedmean,
 *                               lasttoken; several at once are concatenated in that
 *                               sentence-transformers order: cls, max, mean, mean_sqrt_len,
 *                               weightedmean, lasttoken)
 *
 * Attention runs only through the public dispatcher (modattn_attention) of the ctx given at load
 * time, so the ctx's policy chooses the implementation; every conforming implementation gives the
 * same embeddings within float rounding.
 *
 * Thread safety: after loading, a model is read-only. modattn_model_embed uses the model's own
 * threads and the ctx's attention workspace, so one thread at a time calls it. Threads that embed
 * at the same time share one model and pass each their own session (modattn_session_create on the
 * model's ctx: its threads, its attention workspace; modattn_model_embed_with): the vectors are
 * the same bit for bit as modattn_model_embed's. On the CPU the sessions' batches run at once; on
 * a device with its own memory (one queue) they take turns. */
#ifndef MODATTN_MODEL_H
#define MODATTN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "modattn/status.h"
#include "modattn/dispatch.h"
#include "modattn/core.h"
#include "modattn/backend/device.h" /* modattn_pooling */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modattn_model modattn_model;

/* Pooling modes (modattn_pooling, MODATTN_POOL_*): in modattn/backend/device.h, whose pool op takes them. */

/* "mean", "cls", "max", "mean_sqrt_len", "weightedmean", "lasttoken" or "mean+max" ... into buf. */
void modattn_pooling_format(unsigned pooling, char *buf, size_t len);

#define MODATTN_MODEL_DEFAULT_BATCH_TOKENS 8192

typedef struct modattn_model_info {
    const char *name;        /* the directory's last component ("all-MiniLM-L6-v2") */
    const char *dir;         /* the directory as given to modattn_model_load */
    const char *model_type;  /* config.json model_type ("bert") */
    size_t dim;              /* embedding size (hidden x number of pooling modes) */
    int hidden;              /* hidden_size */
    int layers;              /* num_hidden_layers */
    int heads;               /* num_attention_heads */
    int intermediate;        /* intermediate_size */
    int vocab;               /* vocab_size */
    size_t max_tokens;       /* word pieces per text after truncation, [CLS]/[SEP] included */
    unsigned pooling;        /* modattn_pooling bits */
    bool normalize;          /* modules.json has a Normalize module: L2-normalised output */
    bool lower_case;         /* sentence_bert_config do_lower_case */
    uint64_t weights_xxh3;   /* XXH3_64bits of model.safetensors (store compatibility checks) */
    char weights_hash[17];   /* the same, 16 lowercase hex digits */
    uint64_t weights_bytes;  /* size of model.safetensors */
    /* The model's identity, what a store checks: 16 hex digits of XXH3 over the weights' hash,
     * every setting that changes the vectors (architecture sizes, activation, layer-norm epsilon,
     * max_seq_length, pooling, normalisation, lower-casing, a precision other than fp32) and
     * tokenizer.json's bytes. Never the
     * folder's name or path: the same model through a link or a renamed copy is the same model. */
    char identity[17];
    modattn_device device;   /* where the weights and the whole forward pass live (the GEMMs,
                              * norms, pooling and attention all run there) */
    unsigned host_fallback_ops; /* bit (1u << modattn_op) for each op that runs on the host
                                 * instead (only with modattn_model_options.host_fallback) */
    modattn_precision precision; /* the dense layers' arithmetic (modattn_model_options) */
    /* device "auto": which device was chosen and why, with every device's timing or reason
     * ("auto chose cpu: 1.90 ms for 8 inputs of 32 tokens; opencl:0 9.80 ms; xla:0 4.10 ms");
     * "" when a device was named */
    char device_choice[512];
    unsigned device_auto_passed_over; /* devices that failed to load it and were passed over */
    /* config_sentence_transformers.json (modattn_model_embed_opt): the prompt a query and a document
     * get by default (encode_query's and encode_document's choice; NULL: none), and "truncate_dim"
     * (0: none declared) */
    const char *query_prompt;
    const char *document_prompt;
    size_t truncate_dim;
} modattn_model_info;

/* Load the model in `dir`. `ctx` is borrowed: it must outlive the model; its policy and thread
 * count are used by every embed call. Errors name the file and the field (MODATTN_ENOTFOUND for
 * a missing file, MODATTN_EFORMAT for a malformed one or a tensor of the wrong shape or dtype,
 * MODATTN_EUNSUPPORTED for an unknown architecture, activation or pooling mode).
 * Ownership: free with modattn_model_free(). */
int modattn_model_load(modattn_ctx *ctx, const char *dir, modattn_model **out);
void modattn_model_free(modattn_model *model); /* NULL is fine */

/* Where and how to load. Zero-initialise, then fill in. */
typedef struct modattn_model_options {
    /* "auto": every device present is asked and the model loaded on the one that runs a short
     * timed forward fastest (timings cached per model and device; info.device_choice says why).
     * "cpu" (or NULL / ""): the CPU device (the mapped weights used in place); "opencl[:N]",
     * ...: a device with its own memory. The model refuses to load on a device that lacks an op
     * it needs (MODATTN_EUNSUPPORTED, naming the op and the device's reason): no op is ever run
     * elsewhere silently. On such a device the weights are uploaded once, activations stay on
     * the device, and each batch sends only token ids and lengths and reads back the pooled
     * vectors. Attention runs through ctx's dispatcher, among the implementations on that
     * device. */
    const char *device;
    /* Borrowed (must outlive the model): the CPU device's row passes run on it. NULL: the model
     * makes its own pool with the ctx's thread count. The model never uses the ctx's pool. */
    modattn_pool *pool;
    /* An op the device does not run (other than attention) runs on the host instead of refusing
     * the load: its inputs are read back, the CPU computes it, its outputs go back up, on every
     * call. Each such op is in info.host_fallback_ops with its reason
     * (modattn_model_fallback_reason), each call is counted (modattn__device_fallback_count) and
     * traced ("fallback.<op>"). Off by default. */
    bool host_fallback;
    /* The model will embed a few short inputs (a search's query) and then be freed: the device
     * does not prepare its weights (the CPU: no oneDNN packed copy, ~90 MB less for
     * all-MiniLM-L6-v2 and a faster load). The vectors then agree with a prepared model's to
     * rounding (about 1e-7), not bit for bit. */
    bool few_inputs;
    /* The dense layers' arithmetic (modattn/core.h): MODATTN_PRECISION_FP32 (0, the default);
     * MODATTN_PRECISION_BF16: weights packed in bfloat16 (half the memory), GEMM inputs rounded to
     * bfloat16, sums in fp32; MODATTN_PRECISION_INT8: int8 weights (a quarter) with a scale per
     * output channel, GEMM inputs quantised per row, exact int32 sums scaled back to fp32 (the
     * LayerNorm before the FFN folded into its weight). Attention, softmax, LayerNorm, GELU and
     * pooling stay fp32. The vectors differ from fp32's (min cosine to sentence-transformers on
     * the goldens: bf16 0.99994, int8 0.984), so the model's identity differs too and a store of
     * one precision refuses the other. A device that cannot run it refuses the load
     * (MODATTN_EUNSUPPORTED, naming what is missing: on the CPU, AVX512_BF16 / AVX512_VNNI); the
     * host fallback never applies to it. few_inputs does not change such a model (its weights
     * are always prepared). A text's vector is still the same alone or batched, bit for bit. */
    modattn_precision precision;
} modattn_model_options;

/* Why op runs on the host for this model (the device's reason), or NULL if it runs on the
 * model's device. op is a modattn_op (modattn/backend/device.h). */
const char *modattn_model_fallback_reason(const modattn_model *model, int op);

/* modattn_model_load with options (NULL: the defaults). Errors of modattn_model_load, and
 * MODATTN_EINVAL / MODATTN_ENOTFOUND for a device name that is wrong or not here. */
int modattn_model_load_ex(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                          modattn_model **out);

/* Owned by the model; valid until modattn_model_free. */
const modattn_model_info *modattn_model_get_info(const modattn_model *model);
size_t modattn_model_dim(const modattn_model *model);
size_t modattn_model_max_tokens(const modattn_model *model);

/* Batching: texts are sorted by length and grouped so that a batch holds at most `tokens`
 * (padded) tokens, each batch padded only to its longest text. With the default oneDNN build the
 * GEMMs run in whole 64-row blocks, a block per thread at a time, so the grouping is the one of
 * fewest such rounds, then fewest padded rows (dynamic programming over the sorted texts, at most
 * 512 texts a batch); else (OpenBLAS) batches are filled up to the budget. A text longer than the
 * budget runs alone. Default MODATTN_MODEL_DEFAULT_BATCH_TOKENS. 0 is EINVAL. */
int modattn_model_set_batch_tokens(modattn_model *model, size_t tokens);
size_t modattn_model_batch_tokens(const modattn_model *model);

/* Tokenize one text as embed does (lower-casing if the model asks, truncation to max_tokens,
 * [CLS] ... [SEP]). `ids` has room for `max` ids; *n receives the count (<= max). */
int modattn_model_tokenize(const modattn_model *model, const char *text, size_t len,
                           int32_t *ids, size_t max, size_t *n);
/* The same, and *truncated says whether the text had more word pieces than fit in
 * min(max, max_tokens) ids, so that what is embedded is a cut of it (a server refuses those when
 * asked not to truncate). */
int modattn_model_tokenize_ex(const modattn_model *model, const char *text, size_t len, int32_t *ids,
                              size_t max, size_t *n, bool *truncated);

/* A separate copy of the model's tokenizer (the tokenizer.json of its Transformer module), for
 * callers that need what modattn_model_tokenize does not give: token byte offsets, word pieces
 * without [CLS]/[SEP] (document chunking). It does not apply the sentence_bert_config lower-casing
 * (for BERT tokenizers the tokenizer.json normalizer lower-cases anyway).
 * Ownership: free *out with modattn_tokenizer_free(); it does not depend on the model's lifetime.
 * (model/model_tokenizer_access.c) */
struct modattn_tokenizer;
int modattn_model_load_tokenizer(const modattn_model *model, struct modattn_tokenizer **out);

/* The model's own tokenizer, borrowed: the very tables modattn_model_tokenize uses, valid until
 * modattn_model_free, safe to use from several threads (the tokenizer functions take it const).
 * What document chunking uses: no second parse of tokenizer.json (0.1 s for a BERT vocabulary)
 * and no chance of a file changed on disk since the model was loaded. */
const struct modattn_tokenizer *modattn_model_tokenizer(const modattn_model *model);

/* Embed n texts, as they are (no prompt, the whole vector: modattn_model_embed_opt below applies
 * the model's prompts and dimensions). texts[i] has lens[i] bytes (lens may be NULL: NUL-terminated texts; a NULL
 * texts[i] is the empty text, EINVAL if lens[i] > 0). Nothing is kept after the call returns:
 * activations come from one arena (MODATTN_MEM_ACTIVATIONS) sized for the call's largest batch
 * and freed before returning. A text's embedding does not depend on the other texts of the
 * call, the token budget or the thread count: within 1e-6 always, and bit for bit with the
 * default oneDNN GEMM and the built-in attention implementations (tests/model/test_golden.c).
 * out: [n, dim] floats, written in input order. ntokens_out (may be NULL): [n], the word pieces
 * fed to the model for each text ([CLS]/[SEP] included, after truncation).
 * On error nothing useful is in out. n = 0 is a no-op. */
int modattn_model_embed(modattn_model *model, const char *const *texts, const size_t *lens,
                        size_t n, float *out, int32_t *ntokens_out);

/* modattn_model_embed in a session of the model's ctx (else MODATTN_EINVAL): its threads and
 * workspace, so that several threads may embed with one model at once, each with its own session. */
int modattn_model_embed_with(modattn_model *model, modattn_session *session, const char *const *texts,
                             const size_t *lens, size_t n, float *out, int32_t *ntokens_out);

/* Embed already tokenized inputs (ids[i] has counts[i] ids, each < vocab, counts[i] in
 * [1, max_tokens]); same output as modattn_model_embed. */
int modattn_model_embed_ids(modattn_model *model, const int32_t *const *ids,
                            const size_t *counts, size_t n, float *out);
/* The same in a session (see modattn_model_embed_with). */
int modattn_model_embed_ids_with(modattn_model *model, modattn_session *session, const int32_t *const *ids,
                                 const size_t *counts, size_t n, float *out);

/* ---- Prompts and Matryoshka dimensions, as sentence-transformers' encode / encode_query /
 * encode_document (model/prompts.c). config_sentence_transformers.json's "prompts" (name -> text),
 * "default_prompt_name" and "truncate_dim" are read at load (a missing file: none of them).
 *
 * A prompt is prepended to each text before tokenisation, so its word pieces count toward the
 * max_seq_length truncation, and pooling covers them (a Pooling config with "include_prompt":
 * false is refused when a prompt is used). An empty prompt is no prompt. Which prompt, first that
 * applies: options.prompt (the text itself), options.prompt_name (MODATTN_ENOTFOUND listing the
 * model's prompts when it has no such name), the task's (query: the prompt named "query";
 * document: the first of "document", "passage", "corpus" the model has), default_prompt_name's.
 *
 * dimensions (Matryoshka): the first N components of the vector; when the model normalises
 * (a Normalize module) the cut vector is L2-normalised again, so that it stays a unit vector
 * (sentence-transformers' encode(truncate_dim=N, normalize_embeddings=True)); otherwise it is the
 * cut alone (encode(truncate_dim=N)). 0: the model's truncate_dim when its config declares one,
 * else the whole vector. 1 <= N <= modattn_model_dim, else MODATTN_EINVAL. */
typedef enum modattn_embed_task {
    MODATTN_EMBED_PLAIN = 0,   /* encode: default_prompt_name's prompt, if any */
    MODATTN_EMBED_QUERY,       /* encode_query */
    MODATTN_EMBED_DOCUMENT,    /* encode_document */
} modattn_embed_task;

typedef struct modattn_embed_options {
    const char *prompt;        /* the prompt's text (NULL: by name, task or default) */
    const char *prompt_name;   /* a name in the model's prompts */
    modattn_embed_task task;
    size_t dimensions;         /* 0: the model's (its truncate_dim, else all) */
} modattn_embed_options;

/* The model's prompts in the file's order: 0 with *name and *text (owned by the model), or
 * MODATTN_ERANGE past the last. */
size_t modattn_model_prompt_count(const modattn_model *model);
int modattn_model_prompt_at(const modattn_model *model, size_t i, const char **name, const char **text);
/* default_prompt_name, or NULL. */
const char *modattn_model_default_prompt_name(const modattn_model *model);
/* The prompt options (NULL: defaults) give: *text NULL when none applies (or it is empty), else
 * the model's string or options->prompt; *name (may be NULL) the prompt's name or NULL when given
 * as text. MODATTN_ENOTFOUND for an unknown name, the message listing the model's prompts. */
int modattn_model_resolve_prompt(const modattn_model *model, const modattn_embed_options *opt, const char **text,
                                 const char **name);
/* The vector size the options give (0 with the error set when dimensions is out of range). */
size_t modattn_model_embed_dim(const modattn_model *model, const modattn_embed_options *opt);

/* modattn_model_embed(_with) with the options (NULL: defaults): out is [n, modattn_model_embed_dim]
 * and ntokens_out counts the prompt's word pieces too. session NULL: the model's own threads
 * (modattn_model_embed), else as modattn_model_embed_with. */
int modattn_model_embed_opt(modattn_model *model, modattn_session *session, const modattn_embed_options *opt,
                            const char *const *texts, const size_t *lens, size_t n, float *out,
                            int32_t *ntokens_out);
/* Cuts n vectors of the model's full dimension in place to `dims` components each (rows packed to
 * [n, dims]), L2-normalising them again when the model normalises. What modattn_model_embed_opt does
 * after embedding; for callers that embed token ids themselves (a server's batcher). */
void modattn_model_cut_dims(const modattn_model *model, float *vecs, size_t n, size_t dims);

#ifdef __cplusplus
}
#endif
#endif
