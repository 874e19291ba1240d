/* model/internal_tokenize.h — what the chunker (pipeline/chunk.c) asks of the tokenizer beyond
 * the public modattn_tokenize_ex: the word pieces of a text into buffers that may grow past the
 * budget, to finish a block the tokenizer found no place to cut (model/tokenizer.c), and a count
 * of the text bytes its blocks have decoded (for the tests' linear-work checks). Not a public
 * header. */
#ifndef MODATTN_MODEL_INTERNAL_TOKENIZE_H
#define MODATTN_MODEL_INTERNAL_TOKENIZE_H

#include <stddef.h>
#include <stdint.h>

#include "modattn/tokenizer.h"

/* A block of at least this many bytes is one the tokenizer could not cut (it cuts ordinary text
 * every TK_BLOCK_BYTES = 8 KiB, and takes a rest of up to 16 KiB whole). */
#define MODATTN_TK_LONG_BLOCK ((size_t)32 << 10)
/* Unigram's: over 16 KiB. Its blocks end at the first space it may cut at 8 KiB or more from
 * their start, and a rest of up to 16 KiB is taken whole, so a block longer than that holds 8 KiB
 * or more with no such space: a long word (Unigram's Viterbi runs over a whole word, so
 * tokenising from each window's start inside it ran over the rest of it again: 60 words of 20 KB
 * took 9.6 s to chunk against 0.14 s to tokenise) or text without spaces. Where the tokenizer may
 * cut nowhere (modattn__tk_unigram_cut: a Metaspace without split, a left Strip, an rstrip added
 * token, ...), the whole text is one block, so any text over 16 KiB counts (it was 32 KiB). */
#define MODATTN_TK_LONG_BLOCK_UNIGRAM (((size_t)16 << 10) + 1)
/* The one of the two for t's model. */
size_t modattn__tk_long_block(const modattn_tokenizer *t);

/* Word pieces and their byte offsets (relative to the text given), in buffers the callee grows;
 * zero-initialise, free with modattn__tk_pieces_free. */
typedef struct modattn__tk_pieces {
    int32_t *ids;
    modattn_token_offset *offs;
    size_t n, cap;
} modattn__tk_pieces;

/* modattn_tokenize_ex(t, text, len, MODATTN_TOKENIZE_NO_SPECIALS, ..., want, ...): the same first
 * min(want, all) pieces (out->n of them), with one difference: when the want-th piece falls in a
 * block of modattn__tk_long_block(t) bytes or more, every piece of that block is returned (out->n may
 * exceed want), so that a caller that would otherwise tokenise such a block again from each of
 * many starting points inside it can take them all from this one run. *reach (may be NULL): the
 * end of the last block processed (bytes of text); when out->n > want, every piece of the text
 * that begins before it is in out (so with *reach == len, every piece of the text). want >= 1. */
int modattn__tokenize_pieces(const modattn_tokenizer *t, const char *text, size_t len, size_t want,
                             modattn__tk_pieces *out, size_t *reach);
void modattn__tk_pieces_free(modattn__tk_pieces *p);

/* Text bytes decoded by every tokenisation's blocks so far, in this process (all threads): the
 * work a tokenisation does is proportional to it. */
uint64_t modattn__tokenize_bytes_decoded(void);

#endif
