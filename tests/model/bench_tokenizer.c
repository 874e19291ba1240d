/* tests/model/bench_tokenizer.c — tokenizer speed, validated first.
 *
 *   bench_tokenizer [tokenizer.json] [text file]
 * Defaults: .models/all-MiniLM-L6-v2/tokenizer.json and that folder's README.md, repeated to
 * 8 MiB. Checks that one long call gives the same ids as tokenizing line by line (words never
 * cross lines), then reports word pieces per second and MB/s for (a) the whole text in one call
 * with no budget and (b) 256-token calls over ~300-byte pieces, the embedding use case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/core.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(s);
        return NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return s;
}

int main(int argc, char **argv) {
    const char *tj = argc > 1 ? argv[1] : ".models/all-MiniLM-L6-v2/tokenizer.json";
    const char *tf = argc > 2 ? argv[2] : ".models/all-MiniLM-L6-v2/README.md";
    modattn_tokenizer *t = NULL;
    uint64_t t0 = modattn__now_ns();
    if (modattn_tokenizer_load(tj, &t)) {
        fprintf(stderr, "%s\n(run `make model` for the default files)\n", modattn_last_error());
        return 1;
    }
    double load_ms = (double)(modattn__now_ns() - t0) / 1e6;
    size_t slen = 0;
    char *seed = read_file(tf, &slen);
    if (!seed || slen == 0) {
        fprintf(stderr, "cannot read %s\n", tf);
        return 1;
    }
    size_t len = 8u << 20;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i += slen) memcpy(text + i, seed, i + slen <= len ? slen : len - i);
    while (len && (text[len - 1] & 0xC0) == 0x80) len--; /* do not cut a character */
    if (len) len--;
    while (len && text[len] != '\n') len--; /* end on a line */

    size_t cap = len + 16;
    int32_t *all = malloc(cap * sizeof(int32_t));
    int32_t *ids = malloc(cap * sizeof(int32_t));
    size_t n_all = 0;
    /* validate: one call == line by line */
    if (modattn_tokenize_ex(t, text, len, MODATTN_TOKENIZE_NO_SPECIALS, all, NULL, cap, &n_all)) {
        fprintf(stderr, "%s\n", modattn_last_error());
        return 1;
    }
    size_t k = 0, pos = 0;
    int bad = 0;
    while (pos < len && !bad) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) + 1 : len, n = 0;
        modattn_tokenize_ex(t, text + pos, end - pos, MODATTN_TOKENIZE_NO_SPECIALS, ids, NULL, cap, &n);
        if (k + n > n_all || memcmp(ids, all + k, n * sizeof(int32_t)) != 0) bad = 1;
        k += n;
        pos = end;
    }
    if (bad || k != n_all) {
        fprintf(stderr, "FAIL: one call and line-by-line calls differ\n");
        return 1;
    }

    int reps = 3;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        t0 = modattn__now_ns();
        size_t n = 0;
        modattn_tokenize_ex(t, text, len, MODATTN_TOKENIZE_NO_SPECIALS, all, NULL, cap, &n);
        double s = (double)(modattn__now_ns() - t0) / 1e9;
        if (s < best) best = s;
    }
    printf("load %s: %.1f ms, vocab %zu\n", tj, load_ms, modattn_tokenizer_vocab_size(t));
    printf("one call, %.1f MiB, %zu word pieces: %.2f M pieces/s, %.1f MB/s\n", (double)len / 1048576.0,
           n_all, (double)n_all / best / 1e6, (double)len / best / 1e6);

    /* embedding use: ~300-byte pieces cut at spaces, 256-id budget each */
    best = 1e30;
    size_t total = 0, calls = 0;
    for (int r = 0; r < reps; r++) {
        total = calls = 0;
        t0 = modattn__now_ns();
        pos = 0;
        while (pos < len) {
            size_t end = pos + 300 < len ? pos + 300 : len;
            while (end < len && text[end] != ' ') end++;
            size_t n = 0;
            modattn_tokenize(t, text + pos, end - pos, ids, 256, &n);
            total += n;
            calls++;
            pos = end;
        }
        double s = (double)(modattn__now_ns() - t0) / 1e9;
        if (s < best) best = s;
    }
    printf("%zu calls of ~300 bytes (256-id budget): %.2f M ids/s, %.1f MB/s, %.2f us/call\n", calls,
           (double)total / best / 1e6, (double)len / best / 1e6, best / (double)calls * 1e6);
    free(all);
    free(ids);
    free(text);
    free(seed);
    modattn_tokenizer_free(t);
    return 0;
}
