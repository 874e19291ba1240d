/* modattn/tokenizer.h — Hugging Face tokenizers (tokenizer.json), token for token: WordPiece
 * (BERT, described below), SentencePiece Unigram (XLM-RoBERTa) and byte-level BPE (GPT-2,
 * RoBERTa, ModernBERT, Qwen2/Qwen3, Llama 3); README's "Tokenizers" lists the components read.
 *
 * Reads the `normalizer` (BertNormalizer), `pre_tokenizer` (BertPreTokenizer), `model`
 * (WordPiece), `added_tokens` and `post_processor` (TemplateProcessing, BertProcessing or null)
 * of a tokenizer.json and reproduces what the `tokenizers` library gives for a single sequence:
 * added tokens found in the text first ("[MASK]" typed in a text is the [MASK] id, as in HF),
 * then clean_text, CJK spacing, accent stripping (NFD, drop non-spacing marks), lowercasing,
 * whitespace and punctuation split, greedy longest-match-first WordPiece with its
 * continuing-subword prefix, and [UNK] for words longer than max_input_chars_per_word.
 *
 * A loaded tokenizer is read-only: any number of threads may tokenize with it at once.
 * Tokenizing never reads past `len`, never needs a NUL terminator, and costs time linear in the
 * text it looks at (n log n in a word's length for BPE merges); WordPiece stops reading once
 * max_tokens ids are produced (Unigram and BPE normalise the whole text first). */
#ifndef MODATTN_TOKENIZER_H
#define MODATTN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "modattn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modattn_tokenizer modattn_tokenizer;

/* Load tokenizer.json (WordPiece, Unigram or BPE with their components). Errors name the file and
 * field (MODATTN_EIO, MODATTN_EFORMAT, MODATTN_EUNSUPPORTED for an unknown normalizer,
 * pre-tokenizer, model or post-processor type). The vocabulary is counted as
 * MODATTN_MEM_WEIGHTS. Ownership: *out is freed with modattn_tokenizer_free. */
int modattn_tokenizer_load(const char *tokenizer_json_path, modattn_tokenizer **out);
void modattn_tokenizer_free(modattn_tokenizer *t); /* NULL is fine */

/* Tokenise UTF-8 text of len bytes (invalid UTF-8 bytes are replaced by U+FFFD first, as
 * Python's errors="replace").
 * Writes [CLS] wordpieces... [SEP] into ids, truncated so that the total, specials included, is
 * at most max_tokens (>= 2); *n gets the count. ids must hold max_tokens entries.
 * ("[CLS]"/"[SEP]" stand for whatever the post_processor adds before and after the sequence;
 * max_tokens smaller than that number of specials is MODATTN_EINVAL.) */
int modattn_tokenize(const modattn_tokenizer *t, const char *text, size_t len, int32_t *ids,
                     size_t max_tokens, size_t *n);

/* Byte range [start, end) of a token in the original text; {0, 0} for special tokens. */
typedef struct modattn_token_offset {
    size_t start, end;
} modattn_token_offset;

/* As modattn_tokenize, and offsets[i] (offsets may be NULL; else it holds max_tokens entries)
 * gets the bytes of `text` that token i came from. A word piece covers the bytes of the
 * characters it was made from (a piece of an accented word covers the whole accented character;
 * "[UNK]" for a whole word covers the word). Useful to cut documents into chunks by tokens. */
int modattn_tokenize_offsets(const modattn_tokenizer *t, const char *text, size_t len,
                             int32_t *ids, modattn_token_offset *offsets, size_t max_tokens,
                             size_t *n);

/* Flags for modattn_tokenize_ex. */
#define MODATTN_TOKENIZE_NO_SPECIALS 1u /* word pieces only: no [CLS]/[SEP] */

/* The general form: flags is 0 or MODATTN_TOKENIZE_NO_SPECIALS; offsets may be NULL.
 * With MODATTN_TOKENIZE_NO_SPECIALS any max_tokens >= 0 is valid. */
int modattn_tokenize_ex(const modattn_tokenizer *t, const char *text, size_t len, unsigned flags,
                        int32_t *ids, modattn_token_offset *offsets, size_t max_tokens,
                        size_t *n);

/* Special token ids; -1 when the tokenizer has none.
 * cls: first id the post_processor puts before the sequence (else the vocab's "[CLS]");
 * sep: first id it puts after (else "[SEP]"); pad: `padding.pad_id` if given, else "[PAD]"
 * from the vocabulary, else 0; unk: the WordPiece unk_token. */
int32_t modattn_tokenizer_cls_id(const modattn_tokenizer *t);
int32_t modattn_tokenizer_sep_id(const modattn_tokenizer *t);
int32_t modattn_tokenizer_pad_id(const modattn_tokenizer *t);
int32_t modattn_tokenizer_unk_id(const modattn_tokenizer *t);
/* Number of ids: 1 + the largest id of the vocabulary and the added tokens. */
size_t modattn_tokenizer_vocab_size(const modattn_tokenizer *t);
/* Number of ids the post_processor adds around a single sequence (2 for BERT). */
size_t modattn_tokenizer_num_specials(const modattn_tokenizer *t);

/* id -> token string (NULL if out of range or unused), for debugging/printing. The string
 * belongs to the tokenizer. */
const char *modattn_tokenizer_token(const modattn_tokenizer *t, int32_t id);
/* token string -> id (vocabulary or added token), -1 if absent. */
int32_t modattn_tokenizer_find(const modattn_tokenizer *t, const char *token, size_t len);

/* Flags for modattn_tokenizer_decode. */
#define MODATTN_DECODE_KEEP_SPECIALS 1u /* keep special added tokens (skip_special_tokens=False) */

/* ids -> text, as `tokenizers`' Tokenizer.decode(ids, skip_special_tokens) with the
 * tokenizer.json's `decoder`: special added tokens ("special": true) are dropped unless flags
 * has MODATTN_DECODE_KEEP_SPECIALS; then
 *   ByteLevel (GPT-2, RoBERTa, ModernBERT, Qwen, Llama 3): the tokens' characters mapped back to
 *     bytes (GPT-2's byte-to-character table inverted; a token with a character outside the
 *     table is kept as its own UTF-8), joined, and read as UTF-8 with each maximal ill-formed
 *     subpart replaced by U+FFFD (as Rust's from_utf8_lossy: ids that end inside a character
 *     give U+FFFD);
 *   WordPiece: tokens joined by spaces, the continuing prefix ("##") glued to the token before,
 *     and with `cleanup`, no space before . ? ! , and in the English contractions;
 *   no decoder: tokens joined by single spaces.
 * Any other decoder type is MODATTN_EUNSUPPORTED naming it; an id outside [0, vocab size) is
 * MODATTN_EINVAL naming its index (an id with no token is skipped, as in HF). The result is
 * valid UTF-8, NUL-terminated, *len bytes long (len may be NULL); free it with modattn_free.
 * Time and memory are linear in the tokens' total length. */
int modattn_tokenizer_decode(const modattn_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                             char **out, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
