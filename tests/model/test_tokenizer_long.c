/* tests/model/test_tokenizer_long.c — long texts without ASCII whitespace or punctuation for
 * a long way (issue 18, class 6): the tokenizer must cut them into blocks elsewhere, or drop the
 * unread middle of one giant word, and still give Hugging Face's ids and byte offsets exactly,
 * in memory that does not grow with the text.
 *
 * tests/fixtures/tokens_long.jsonl (tools/make_long_token_goldens.py, from the real `tokenizers`)
 * holds for each case the text's recipe (seed * reps + tail), the id count, the first and last 16
 * ids and an FNV-1a hash of every (id, start, end). The scratch the tokenizer allocates while
 * tokenising a case (peak bytes of the library's accounting, beyond the caller's buffers) must
 * stay under 8 MiB: it was about 56 bytes per input byte (168 MB for the 3 MB word). Then the
 * chunker over the same texts: bounded the same way, and every chunk inside the text.
 * The Unigram cases (tests/fixtures/tokenizer_unigram*.json) are about 1 MB of multilingual text
 * with spaces, which the Unigram path cuts before a space (tokenizer_unigram.c,
 * modattn__tk_unigram_cut), and one CJK piece without spaces, which it cannot cut (not bounded).
 * Chunking that piece used to tokenise the rest of it again for each window (13 of this test's 31
 * s); the chunker now takes the windows of such a block from one run of it (pipeline/chunk.c, its
 * linear work counted by tests/pipeline/test_chunk_linear.c). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/ingest.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "test_util.h"

#define SCRATCH_MAX ((int64_t)8 << 20)

static uint64_t fnv_i64(uint64_t h, int64_t v) {
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++) {
        h ^= (u >> (8 * i)) & 0xFF;
        h *= 0x100000001B3ull;
    }
    return h;
}

static int64_t peak_beyond(int64_t base) {
    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    return ms.peak_total - base;
}

static int64_t mem_now(void) {
    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    return ms.current_total;
}

int main(void) {
    modattn_tokenizer *mini = NULL, *tiny = NULL, *uni = NULL, *uni_bytes = NULL;
    CHECK_MSG(modattn_tokenizer_load(".models/all-MiniLM-L6-v2/tokenizer.json", &mini) == 0,
              "loading MiniLM's tokenizer (run `make model`): %s", modattn_last_error());
    CHECK_MSG(modattn_tokenizer_load("tests/fixtures/tokenizer_tiny.json", &tiny) == 0, "tiny: %s",
              modattn_last_error());
    CHECK_MSG(modattn_tokenizer_load("tests/fixtures/tokenizer_unigram.json", &uni) == 0, "unigram: %s",
              modattn_last_error());
    CHECK_MSG(modattn_tokenizer_load("tests/fixtures/tokenizer_unigram_bytes.json", &uni_bytes) == 0,
              "unigram_bytes: %s", modattn_last_error());
    FILE *f = fopen("tests/fixtures/tokens_long.jsonl", "r");
    CHECK_MSG(f != NULL, "tests/fixtures/tokens_long.jsonl is missing");
    if (!mini || !tiny || !uni || !uni_bytes || !f) return test_finish("test_tokenizer_long");
    char *line = NULL;
    size_t cap = 0;
    int cases = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        if (!j || !json_object_get(j, "seed")) {
            json_decref(j);
            continue;
        }
        const char *name = json_string_value(json_object_get(j, "tokenizer"));
        const char *seed = json_string_value(json_object_get(j, "seed"));
        const char *tail = json_string_value(json_object_get(j, "tail"));
        size_t reps = (size_t)json_integer_value(json_object_get(j, "reps"));
        size_t n_want = (size_t)json_integer_value(json_object_get(j, "n"));
        const char *fnv_want = json_string_value(json_object_get(j, "fnv"));
        const modattn_tokenizer *t = !strcmp(name, "tiny")            ? tiny
                                     : !strcmp(name, "unigram")       ? uni
                                     : !strcmp(name, "unigram_bytes") ? uni_bytes
                                                                      : mini;
        size_t sl = strlen(seed), tl = strlen(tail), len = sl * reps + tl;
        char *text = malloc(len + 1);
        for (size_t i = 0; i < reps; i++) memcpy(text + i * sl, seed, sl);
        memcpy(text + sl * reps, tail, tl + 1);
        size_t cap_ids = n_want + 16;
        int32_t *ids = malloc(cap_ids * sizeof *ids);
        modattn_token_offset *off = malloc(cap_ids * sizeof *off);
        size_t n = 0;
        char label[80];
        snprintf(label, sizeof label, "%s '%.24s' x%zu%s", name, seed, reps, tl ? " + tail" : "");
        int64_t base = mem_now();
        modattn__mem_reset_peak();
        int rc = modattn_tokenize_offsets(t, text, len, ids, off, cap_ids, &n);
        int64_t scratch = peak_beyond(base);
        CHECK_MSG(rc == 0, "%s: %s", label, modattn_last_error());
        CHECK_MSG(n == n_want, "%s: %zu ids, Hugging Face %zu", label, n, n_want);
        json_t *head = json_object_get(j, "head"), *tids = json_object_get(j, "tail_ids");
        for (size_t i = 0; i < json_array_size(head) && i < n; i++)
            CHECK_MSG(ids[i] == (int32_t)json_integer_value(json_array_get(head, i)), "%s: id %zu is %d, HF %lld", label,
                      i, ids[i], (long long)json_integer_value(json_array_get(head, i)));
        size_t nt = json_array_size(tids);
        for (size_t i = 0; i < nt && nt <= n; i++)
            CHECK_MSG(ids[n - nt + i] == (int32_t)json_integer_value(json_array_get(tids, i)),
                      "%s: id %zu from the end differs from HF", label, nt - i);
        uint64_t h = 0xCBF29CE484222325ull;
        for (size_t i = 0; i < n; i++) {
            h = fnv_i64(h, ids[i]);
            h = fnv_i64(h, (int64_t)off[i].start);
            h = fnv_i64(h, (int64_t)off[i].end);
        }
        char got[17];
        snprintf(got, sizeof got, "%016llx", (unsigned long long)h);
        CHECK_MSG(strcmp(got, fnv_want) == 0, "%s: ids or byte offsets differ from HF's (hash %s, HF %s)", label,
                  got, fnv_want);
        bool bounded = json_is_true(json_object_get(j, "bounded"));
        if (!bounded) printf("%s: memory not bounded (runs of letters that begin a single_word added token, or a Unigram piece without spaces): %lld bytes\n", label, (long long)scratch);
        CHECK_MSG(!bounded || scratch < SCRATCH_MAX, "%s: %lld bytes of scratch for %zu bytes of text", label, (long long)scratch,
                  len);
        /* the chunker: windows of 254 pieces over the same text, in bounded memory */
        modattn_chunk *ch = NULL;
        size_t nch = 0;
        base = mem_now();
        modattn__mem_reset_peak();
        rc = modattn_chunk_text(t, text, len, 254, 32, &ch, &nch);
        int64_t chunk_scratch = peak_beyond(base) - (int64_t)(nch * sizeof *ch) * 2;
        CHECK_MSG(rc == 0, "%s: chunking: %s", label, modattn_last_error());
        CHECK_MSG(!bounded || chunk_scratch < SCRATCH_MAX, "%s: chunking took %lld bytes beyond its chunks", label,
                  (long long)chunk_scratch);
        for (size_t i = 0; i < nch; i++)
            CHECK_MSG(ch[i].start < ch[i].end && ch[i].end <= len && (i == 0 || ch[i].start > ch[i - 1].start),
                      "%s: chunk %zu [%zu, %zu) out of order or outside the text", label, i, ch[i].start, ch[i].end);
        modattn_free(ch);
        free(ids);
        free(off);
        free(text);
        json_decref(j);
        cases++;
    }
    free(line);
    fclose(f);
    CHECK_MSG(cases >= 33, "only %d cases in tests/fixtures/tokens_long.jsonl", cases);
    printf("test_tokenizer_long: %d long texts against Hugging Face tokenizers\n", cases);
    modattn_tokenizer_free(mini);
    modattn_tokenizer_free(tiny);
    modattn_tokenizer_free(uni);
    modattn_tokenizer_free(uni_bytes);
    return test_finish("test_tokenizer_long");
}
