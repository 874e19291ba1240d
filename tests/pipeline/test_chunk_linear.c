/* tests/pipeline/test_chunk_linear.c — chunking a text the tokenizer cannot cut into blocks is
 * linear work (pipeline/chunk.c).
 *
 * The chunker tokenises from each window's start; the tokenizer works through blocks it cuts at
 * safe places about every 8 KiB, so each window costs O(window) on ordinary text. Where it finds
 * no such place (a SentencePiece/Unigram piece without spaces, long CJK text; byte-level BPE text
 * with no "\n" before an ASCII letter; letters that begin a single_word added token) the block is
 * the whole rest of the text, and tokenising it again for every window made chunking quadratic:
 * 13 s for 480 KB of Chinese through the Unigram fixture, over 20 minutes for 5 MB. Now such a
 * block is tokenised once and the windows are taken from its pieces.
 *
 * The check is a count, not a time: the text bytes the tokenizer's blocks decoded while chunking
 * (modattn__tokenize_bytes_decoded) must stay under 3x the text (the quadratic chunker decoded
 * 82x to 527x on the texts here: see the planted check in the commit). The chunks must also lie on the pieces of the text's own
 * tokenisation, at most `window` of them each, overlapping, covering every piece. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/tokenizer.h"
#include "model/internal_tokenize.h"
#include "test_util.h"

static char *repeat(const char *seed, size_t reps, size_t *len) {
    size_t sl = strlen(seed);
    char *t = malloc(sl * reps + 1);
    for (size_t i = 0; i < reps; i++) memcpy(t + i * sl, seed, sl);
    t[sl * reps] = '\0';
    *len = sl * reps;
    return t;
}

enum { ANY = 0, ON_PIECES = 1, COUNTED = 2 };

/* chunks of text (window, overlap): decoded bytes at most `factor` x the text; with ON_PIECES,
 * every chunk begins and ends where pieces of the whole text's tokenisation do (the one run from
 * the text's start gives every window here), and they cover all of them; with COUNTED, ntokens
 * is the number of those pieces inside (not for byte-level BPE, whose pieces of one character
 * share its offsets) */
static void check_linear(const char *what, const modattn_tokenizer *tok, const char *text, size_t len,
                         size_t window, size_t overlap, double factor, int pieces) {
    modattn_chunk *c = NULL;
    size_t n = 0;
    uint64_t before = modattn__tokenize_bytes_decoded();
    int st = modattn_chunk_text(tok, text, len, window, overlap, &c, &n);
    uint64_t decoded = modattn__tokenize_bytes_decoded() - before;
    CHECK_MSG(st == 0, "%s: %s", what, modattn_last_error());
    printf("  %-44s %7zu bytes, %5zu chunks: %9llu bytes decoded (%.2fx)\n", what, len, n,
           (unsigned long long)decoded, (double)decoded / (double)len);
    CHECK_MSG((double)decoded <= factor * (double)len,
              "%s: chunking decoded %llu bytes of a %zu-byte text (%.1fx, want at most %.0fx): the tokenizer "
              "ran again over the uncut block for each window", what, (unsigned long long)decoded, len,
              (double)decoded / (double)len, factor);
    CHECK_MSG(n > 10, "%s: only %zu chunks", what, n);
    for (size_t i = 0; i < n; i++) {
        CHECK_MSG(c[i].start < c[i].end && c[i].end <= len && c[i].ntokens >= 1 && c[i].ntokens <= window,
                  "%s: chunk %zu [%zu, %zu) of %zu pieces", what, i, c[i].start, c[i].end, c[i].ntokens);
        if (i > 0)
            CHECK_MSG(c[i].start > c[i - 1].start && (overlap ? c[i].start < c[i - 1].end : c[i].start >= c[i - 1].end),
                      "%s: chunk %zu [%zu, %zu) does not follow [%zu, %zu) with an overlap of %zu pieces", what, i,
                      c[i].start, c[i].end, c[i - 1].start, c[i - 1].end, overlap);
    }
    if ((pieces & ON_PIECES) && st == 0) {
        size_t cap = 2 * len + 16, total = 0;
        int32_t *ids = malloc(cap * sizeof *ids);
        modattn_token_offset *offs = malloc(cap * sizeof *offs);
        st = modattn_tokenize_ex(tok, text, len, MODATTN_TOKENIZE_NO_SPECIALS, ids, offs, cap, &total);
        CHECK(st == 0 && total < cap);
        size_t p = 0, covered = 0; /* p: the first piece of chunk i; covered: pieces covered so far */
        for (size_t i = 0; i < n && st == 0; i++) {
            while (p < total && offs[p].start < c[i].start) p++;
            size_t q = p;
            while (q < total && offs[q].end <= c[i].end && offs[q].start < c[i].end) q++;
            bool on = p < total && offs[p].start == c[i].start && q > p && offs[q - 1].end == c[i].end;
            CHECK_MSG(on && (pieces & COUNTED ? q - p == c[i].ntokens : q - p >= c[i].ntokens),
                      "%s: chunk %zu [%zu, %zu) with %zu pieces is not %zu whole pieces of the text's tokenisation",
                      what, i, c[i].start, c[i].end, c[i].ntokens, q - p);
            CHECK_MSG(p <= covered, "%s: pieces %zu to %zu are in no chunk", what, covered, p);
            if (q > covered) covered = q;
        }
        CHECK_MSG(covered == total, "%s: the chunks cover %zu of %zu pieces", what, covered, total);
        free(ids);
        free(offs);
    }
    modattn_free(c);
}

int main(void) {
    modattn_tokenizer *uni = NULL, *qwen = NULL, *mini = NULL;
    CHECK_MSG(modattn_tokenizer_load("tests/fixtures/tokenizer_unigram.json", &uni) == 0, "unigram: %s",
              modattn_last_error());
    CHECK_MSG(modattn_tokenizer_load("tests/fixtures/tokenizer_bpe_qwen2.json", &qwen) == 0, "qwen2: %s",
              modattn_last_error());
    CHECK_MSG(modattn_tokenizer_load("tests/fixtures/tokenizer_tiny.json", &mini) == 0, "tiny: %s",
              modattn_last_error());
    if (!uni || !qwen || !mini) return test_finish("test_chunk_linear");
    size_t len;
    /* a Unigram piece without spaces: 144 KB of Chinese, one block */
    char *cjk = repeat("数据库是安全的。", 6000, &len);
    check_linear("unigram, Chinese without spaces 254/32", uni, cjk, len, 254, 32, 3, ON_PIECES | COUNTED);
    check_linear("unigram, Chinese without spaces 64/0", uni, cjk, len, 64, 0, 3, ON_PIECES | COUNTED);
    /* Unigram words of 20 KB between spaces: the tokenizer cuts at the spaces, but a block holding
     * such a word (16 to 32 KiB) was tokenised again from each window's start inside it, its
     * Viterbi over the rest of the word each time (MODATTN_TK_LONG_BLOCK_UNIGRAM) */
    free(cjk);
    char *word = malloc(20002);
    memset(word, 'a', 20000);
    memcpy(word + 20000, " ", 2);
    char *words = repeat(word, 10, &len);
    check_linear("unigram, words of 20 KB 254/32", uni, words, len, 254, 32, 3, ON_PIECES | COUNTED);
    free(words);
    free(word);
    /* byte-level BPE: newlines, but never before an ASCII letter */
    cjk = repeat("我们的数据库在崩溃后是安全的，\n数据库是安全的。\n", 3000, &len);
    check_linear("qwen2 BPE, Chinese lines 254/32", qwen, cjk, len, 254, 32, 3, ON_PIECES);
    /* the same between two stretches of ordinary text the tokenizer cuts (50 KB each) */
    size_t el;
    char *english = repeat("The database is safe after a crash, as the log shows.\nIt said so. ", 750, &el);
    char *mixed = malloc(2 * el + len + 1);
    memcpy(mixed, english, el);
    memcpy(mixed + el, cjk, len);
    memcpy(mixed + el + len, english, el + 1);
    /* the ordinary text costs a block of 8 to 16 KiB per window, as before: bound it loosely */
    check_linear("qwen2 BPE, English, Chinese, English 254/32", qwen, mixed, 2 * el + len, 254, 32, 20, ANY);
    free(mixed);
    free(english);
    free(cjk);
    /* WordPiece: letters that begin a single_word added token (the tiny fixture's "qqq"), between
     * spaces: no cut anywhere */
    char *q = repeat("qq qqq ", 20000, &len);
    check_linear("tiny WordPiece, single_word letters 64/8", mini, q, len, 64, 8, 3, ON_PIECES | COUNTED);
    free(q);
    modattn_tokenizer_free(uni);
    modattn_tokenizer_free(qwen);
    modattn_tokenizer_free(mini);
    return test_finish("test_chunk_linear");
}
