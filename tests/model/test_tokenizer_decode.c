/* tests/model/test_tokenizer_decode.c — modattn_tokenizer_decode against `tokenizers`' decode.
 *
 * tests/fixtures/decode_bpe.jsonl (tools/make_decode_goldens.py) holds what Tokenizer.decode gives
 * on the BPE goldens' ids (tokens_bpe.jsonl) with skip_special_tokens True and False, on cuts of
 * them that end or start inside a character, with a special token in the middle, on every id alone
 * and on random id lists (bytes that are not UTF-8: U+FFFD, one per maximal ill-formed subpart).
 * Four tokenizers: GPT-2, Qwen2 and ModernBERT layouts (ByteLevel decoder) and the suffix one (no
 * decoder: tokens joined by spaces). Then the WordPiece decoder on the tiny WordPiece tokenizer,
 * and the refusals: an unknown decoder type, ids outside the vocabulary, bad arguments. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/tokenizer.h"
#include "test_util.h"

static modattn_tokenizer *load_path(const char *path) {
    modattn_tokenizer *t = NULL;
    int st = modattn_tokenizer_load(path, &t);
    CHECK_MSG(st == 0, "%s: %s", path, modattn_last_error());
    return t;
}

/* the JSON at path with `decoder` replaced by dec (stolen), loaded; *st gets the status */
static modattn_tokenizer *load_with_decoder(const char *path, json_t *dec, int *st) {
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    modattn_tokenizer *t = NULL;
    *st = -1;
    if (!j) {
        json_decref(dec);
        return NULL;
    }
    json_object_set_new(j, "decoder", dec);
    char tmp[] = "/tmp/modattn_tok_dec_XXXXXX";
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        close(fd);
        json_dump_file(j, tmp, JSON_COMPACT);
        *st = modattn_tokenizer_load(tmp, &t);
        unlink(tmp);
    }
    json_decref(j);
    return t;
}

static void goldens(void) {
    FILE *f = fopen("tests/fixtures/decode_bpe.jsonl", "r");
    CHECK_MSG(f != NULL, "tests/fixtures/decode_bpe.jsonl: cannot open");
    if (!f) return;
    const char *names[] = {"gpt2", "qwen2", "modernbert", "suffix"};
    modattn_tokenizer *toks[4] = {0};
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "tests/fixtures/tokenizer_bpe_%s.json", names[i]);
        toks[i] = load_path(path);
    }
    char *line = NULL;
    size_t cap = 0, lines = 0, ok = 0, bad = 0, fffd = 0, per[4] = {0};
    int32_t *ids = NULL;
    size_t ids_cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t err;
        json_t *j = json_loads(line, JSON_ALLOW_NUL, &err);
        if (!j) {
            CHECK_MSG(0, "decode_bpe.jsonl: %s", err.text);
            break;
        }
        const char *fx = json_string_value(json_object_get(j, "fixture"));
        if (!fx) { /* the header line */
            json_decref(j);
            continue;
        }
        lines++;
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(fx, names[i])) k = i;
        json_t *jids = json_object_get(j, "ids");
        const char *want = json_string_value(json_object_get(j, "text"));
        const size_t want_len = json_string_length(json_object_get(j, "text")); /* the text may hold NUL */
        const bool skip = json_is_true(json_object_get(j, "skip"));
        const size_t n = json_array_size(jids);
        if (n + 1 > ids_cap) {
            ids_cap = 2 * (n + 1);
            ids = realloc(ids, ids_cap * sizeof *ids);
        }
        for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
        char *got = NULL;
        size_t len = 0;
        int st = k >= 0 && toks[k] ? modattn_tokenizer_decode(toks[k], ids, n, skip ? 0u : MODATTN_DECODE_KEEP_SPECIALS,
                                                               &got, &len)
                                   : -1;
        if (st == 0 && want && len == want_len && memcmp(got, want, len) == 0) {
            ok++;
            per[k]++;
            if (strstr(want, "\xEF\xBF\xBD")) fffd++;
        } else if (bad++ < 8) {
            fprintf(stderr, "line %zu (%s, %zu ids, skip %d): status %d, got '%s', want '%s'\n", lines, fx, n, skip, st,
                    got ? got : "(null)", want ? want : "(null)");
        }
        modattn_free(got);
        json_decref(j);
    }
    free(line);
    free(ids);
    fclose(f);
    CHECK_MSG(bad == 0 && lines > 6000, "decode goldens: %zu of %zu equal tokenizers' decode", ok, lines);
    CHECK_MSG(fffd > 1000, "the goldens include ill-formed UTF-8: %zu decodes with U+FFFD", fffd);
    printf("decode goldens: %zu/%zu equal (gpt2 %zu, qwen2 %zu, modernbert %zu, suffix %zu; %zu with U+FFFD)\n", ok,
           lines, per[0], per[1], per[2], per[3], fffd);
    for (int i = 0; i < 4; i++) modattn_tokenizer_free(toks[i]);
}

/* tests/fixtures/decode_unigram.jsonl: the Metaspace decoder of tokenizer_unigram.json (XLM-R's
 * layout) against tokenizers' decode */
static void metaspace_goldens(void) {
    FILE *f = fopen("tests/fixtures/decode_unigram.jsonl", "r");
    CHECK_MSG(f != NULL, "tests/fixtures/decode_unigram.jsonl: cannot open");
    if (!f) return;
    modattn_tokenizer *t = load_path("tests/fixtures/tokenizer_unigram.json");
    char *line = NULL;
    size_t cap = 0, lines = 0, bad = 0, lead = 0;
    int32_t ids[64];
    while (t && getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j || !json_object_get(j, "fixture")) {
            json_decref(j);
            continue;
        }
        lines++;
        json_t *jids = json_object_get(j, "ids");
        const size_t n = json_array_size(jids) < 64 ? json_array_size(jids) : 64;
        for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
        const char *want = json_string_value(json_object_get(j, "text"));
        char *got = NULL;
        int st = modattn_tokenizer_decode(t, ids, n, json_is_true(json_object_get(j, "skip")) ? 0u : MODATTN_DECODE_KEEP_SPECIALS,
                                          &got, NULL);
        if (st || !want || strcmp(got, want)) {
            if (bad++ < 8) fprintf(stderr, "decode_unigram line %zu: got '%s', want '%s'\n", lines, got ? got : "(null)", want);
        } else if (want[0] == ' ') {
            lead++;
        }
        modattn_free(got);
        json_decref(j);
    }
    free(line);
    fclose(f);
    CHECK_MSG(bad == 0 && lines > 2000, "Metaspace decodes: %zu of %zu equal tokenizers'", lines - bad, lines);
    CHECK_MSG(lead > 50, "the goldens include a replacement opening a later token: %zu", lead);
    printf("Metaspace decode goldens: %zu/%zu equal\n", lines - bad, lines);
    modattn_tokenizer_free(t);
}

static char *dec(const modattn_tokenizer *t, const char *const *pieces, size_t n, unsigned flags) {
    int32_t ids[16];
    for (size_t i = 0; i < n; i++) {
        ids[i] = modattn_tokenizer_find(t, pieces[i], strlen(pieces[i]));
        CHECK_MSG(ids[i] >= 0, "token '%s' in the vocabulary", pieces[i]);
    }
    char *out = NULL;
    int st = modattn_tokenizer_decode(t, ids, n, flags, &out, NULL);
    CHECK_MSG(st == 0, "decode: %s", modattn_last_error());
    return out;
}

static void wordpiece(void) {
    modattn_tokenizer *t = load_path("tests/fixtures/tokenizer_tiny.json");
    if (!t) return;
    /* a word piece that does not begin the text keeps its "##" (HF: only after the first token) */
    const char *a[] = {"[CLS]", "the", "##s", ",", "a", "[SEP]"};
    char *s = dec(t, a, 6, 0);
    CHECK_MSG(s && !strcmp(s, "thes, a"), "WordPiece: '%s'", s ? s : "(null)");
    modattn_free(s);
    s = dec(t, a, 6, MODATTN_DECODE_KEEP_SPECIALS);
    CHECK_MSG(s && !strcmp(s, "[CLS] thes, a [SEP]"), "WordPiece, specials kept: '%s'", s ? s : "(null)");
    modattn_free(s);
    const char *b[] = {"##s", "the"};
    s = dec(t, b, 2, 0);
    CHECK_MSG(s && !strcmp(s, "##s the"), "WordPiece, a first '##' piece: '%s'", s ? s : "(null)");
    modattn_free(s);
    /* refusals */
    char *out = (char *)1;
    int32_t ids[2] = {0, (int32_t)modattn_tokenizer_vocab_size(t)};
    CHECK_ERR(modattn_tokenizer_decode(t, ids, 2, 0, &out, NULL), MODATTN_EINVAL, "ids[1]");
    CHECK(out == NULL);
    ids[1] = -1;
    CHECK_ERR(modattn_tokenizer_decode(t, ids, 2, 0, &out, NULL), MODATTN_EINVAL, "outside the vocabulary");
    CHECK_ERR(modattn_tokenizer_decode(t, ids, 1, 8u, &out, NULL), MODATTN_EINVAL, "flags");
    CHECK_ERR(modattn_tokenizer_decode(t, NULL, 1, 0, &out, NULL), MODATTN_EINVAL, "NULL");
    CHECK_ERR(modattn_tokenizer_decode(NULL, ids, 1, 0, &out, NULL), MODATTN_EINVAL, "NULL");
    size_t len = 9;
    CHECK(modattn_tokenizer_decode(t, NULL, 0, 0, &out, &len) == 0 && out && out[0] == '\0' && len == 0);
    modattn_free(out);
    modattn_tokenizer_free(t);

    /* a decoder we do not implement loads (encoding does not need it) and decoding names it */
    int st = 0;
    t = load_with_decoder("tests/fixtures/tokenizer_tiny.json", json_pack("{s:s, s:s}", "type", "CTC", "pad_token", "_"), &st);
    CHECK_MSG(st == 0 && t, "a CTC decoder loads: %s", modattn_last_error());
    if (t) {
        int32_t one = 0;
        CHECK_ERR(modattn_tokenizer_decode(t, &one, 1, 0, &out, NULL), MODATTN_EUNSUPPORTED, "\"CTC\"");
    }
    modattn_tokenizer_free(t);
    /* Metaspace's fields are checked */
    t = load_with_decoder("tests/fixtures/tokenizer_tiny.json",
                          json_pack("{s:s, s:s, s:s}", "type", "Metaspace", "replacement", "_", "prepend_scheme", "sometimes"), &st);
    CHECK_ERR(st, MODATTN_EFORMAT, "decoder.prepend_scheme");
    modattn_tokenizer_free(t);
    t = load_with_decoder("tests/fixtures/tokenizer_tiny.json", json_pack("{s:s, s:i}", "type", "Metaspace", "replacement", 5), &st);
    CHECK_ERR(st, MODATTN_EFORMAT, "decoder.replacement");
    modattn_tokenizer_free(t);
    /* prepend_scheme "never": the first token's replacement is a space too */
    t = load_with_decoder("tests/fixtures/tokenizer_tiny.json",
                          json_pack("{s:s, s:s, s:s}", "type", "Metaspace", "replacement", "#", "prepend_scheme", "never"), &st);
    if (t) {
        const char *c[] = {"##s", "the"};
        s = dec(t, c, 2, 0);
        CHECK_MSG(s && !strcmp(s, "  sthe"), "Metaspace never: '%s'", s ? s : "(null)");
        modattn_free(s);
    }
    modattn_tokenizer_free(t);
    t = load_with_decoder("tests/fixtures/tokenizer_tiny.json", json_string("ByteLevel"), &st);
    CHECK_ERR(st, MODATTN_EFORMAT, "decoder");
    CHECK(t == NULL);
    t = load_with_decoder("tests/fixtures/tokenizer_tiny.json", json_pack("{s:s, s:i}", "type", "WordPiece", "prefix", 3), &st);
    CHECK_ERR(st, MODATTN_EFORMAT, "decoder.prefix");
    modattn_tokenizer_free(t);
    /* no decoder: tokens joined by spaces */
    t = load_with_decoder("tests/fixtures/tokenizer_tiny.json", json_null(), &st);
    if (t) {
        const char *c[] = {"the", "##s", "[SEP]"};
        s = dec(t, c, 3, MODATTN_DECODE_KEEP_SPECIALS);
        CHECK_MSG(s && !strcmp(s, "the ##s [SEP]"), "no decoder: '%s'", s ? s : "(null)");
        modattn_free(s);
    }
    modattn_tokenizer_free(t);
}

int main(void) {
    goldens();
    metaspace_goldens();
    wordpiece();
    return test_finish("test_tokenizer_decode");
}
