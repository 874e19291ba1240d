/* fuzz/fuzz_tokenizer.c — arbitrary bytes through the tokenizer.
 *
 * Loads all-MiniLM-L6-v2's tokenizer.json once, or tests/fixtures/tokenizer_tiny.json when the
 * model folder is absent (so the corpus replay never depends on the model; the tiny one has
 * added tokens with lstrip/rstrip/single_word/normalized and a short word limit, so every path
 * is reachable). The first input byte picks the id budget and the flags; the rest is the text.
 * Invariants: success; count within the budget; specials in place; ids inside the vocabulary;
 * offsets inside the text ({0,0} for specials); the same ids with and without offsets; a
 * smaller budget gives a prefix of a larger one (truncation never changes earlier tokens). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/tokenizer.h"

#define FUZZ_CHECK(c)                                                                   \
    do {                                                                                \
        if (!(c)) {                                                                     \
            fprintf(stderr, "fuzz_tokenizer: invariant failed: %s (line %d)\n", #c, __LINE__); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

static modattn_tokenizer *g_tok;

static modattn_tokenizer *tokenizer(void) {
    if (g_tok) return g_tok;
    const char *paths[] = {".models/all-MiniLM-L6-v2/tokenizer.json", "tests/fixtures/tokenizer_tiny.json"};
    /* force one, e.g. the tiny fixture, or tests/fixtures/tokenizer_unigram.json (SentencePiece
     * Unigram: Precompiled charsmap, Metaspace) */
    const char *env = getenv("MODATTN_FUZZ_TOKENIZER");
    if (env) {
        if (modattn_tokenizer_load(env, &g_tok) == 0) return g_tok;
        fprintf(stderr, "fuzz_tokenizer: %s\n", modattn_last_error()); /* not a silent fallback */
        abort();
    }
    for (size_t i = 0; i < 2 && !g_tok; i++)
        if (access(paths[i], R_OK) == 0 && modattn_tokenizer_load(paths[i], &g_tok) != 0)
            fprintf(stderr, "fuzz_tokenizer: %s\n", modattn_last_error());
    if (!g_tok) {
        fprintf(stderr, "fuzz_tokenizer: no tokenizer.json found (run from the repository root)\n");
        abort();
    }
    return g_tok;
}

#define CAP 600

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const modattn_tokenizer *t = tokenizer();
    if (size == 0) return 0;
    uint8_t ctl = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    unsigned flags = (ctl & 0x80) ? MODATTN_TOKENIZE_NO_SPECIALS : 0;
    size_t budget = (ctl & 0x40) ? CAP : 2 + (ctl & 0x3F); /* small budgets cut inside words */
    size_t nspec = flags ? 0 : modattn_tokenizer_num_specials(t);
    size_t vocab = modattn_tokenizer_vocab_size(t);

    static int32_t ids[CAP], ids2[CAP], full[CAP];
    static modattn_token_offset off[CAP];
    size_t n = 0, n2 = 0, nf = 0;
    FUZZ_CHECK(modattn_tokenize_ex(t, text, len, flags, ids, off, budget, &n) == 0);
    FUZZ_CHECK(n <= budget && n >= nspec);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0 && (size_t)ids[i] < vocab);
        FUZZ_CHECK(modattn_tokenizer_token(t, ids[i]) != NULL);
        FUZZ_CHECK(off[i].start <= off[i].end && off[i].end <= len);
    }
    if (!flags && nspec) { /* (a byte-level BPE such as Qwen2's adds none) */
        FUZZ_CHECK(ids[0] == modattn_tokenizer_cls_id(t) && ids[n - 1] == modattn_tokenizer_sep_id(t));
        FUZZ_CHECK(off[0].start == 0 && off[0].end == 0 && off[n - 1].start == 0 && off[n - 1].end == 0);
    }
    /* the same without offsets */
    FUZZ_CHECK(modattn_tokenize_ex(t, text, len, flags, ids2, NULL, budget, &n2) == 0);
    FUZZ_CHECK(n2 == n && memcmp(ids, ids2, n * sizeof(int32_t)) == 0);
    /* truncation keeps a prefix of the word pieces */
    FUZZ_CHECK(modattn_tokenize_ex(t, text, len, MODATTN_TOKENIZE_NO_SPECIALS, full, NULL, CAP, &nf) == 0);
    size_t pieces = n - nspec, lead = nspec ? 1 : 0; /* BERT: one special on each side */
    FUZZ_CHECK(pieces <= nf);
    if (nspec == 0 || nspec == 2) FUZZ_CHECK(memcmp(ids + lead, full, pieces * sizeof(int32_t)) == 0);
    if (pieces < nf) FUZZ_CHECK(n == budget); /* stopped only because the budget was full */
    return 0;
}
