/* tests/model/test_tokenizer_unigram.c — SentencePiece Unigram tokenizers (the XLM-RoBERTa
 * family) against Hugging Face `tokenizers`.
 *
 * tests/fixtures/tokenizer_unigram.json is a small multilingual Unigram model trained by
 * tools/make_unigram_tokenizer.py with sentencepiece (nmt_nfkc, so it carries a real Precompiled
 * charsmap) and converted as transformers converts XLM-R's; tokenizer_unigram_bytes.json is the
 * byte_fallback one. tools/make_unigram_goldens.py wrote the ids and byte offsets HF gives for
 * the existing goldens' texts, a multilingual set and invalid UTF-8 (tokens_unigram*.jsonl);
 * variant lines are edits of the file that make_variant() below mirrors (VARIANTS there).
 * Then: components we do not implement are refused naming them, and damaged charsmaps are
 * refused at load. No model needed: everything is committed. */
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
#include "model/golden_util.h"

#define UNI_JSON "tests/fixtures/tokenizer_unigram.json"
#define UNI_BYTES_JSON "tests/fixtures/tokenizer_unigram_bytes.json"

static json_t *load_json(void) {
    json_error_t err;
    json_t *j = json_load_file(UNI_JSON, 0, &err);
    if (!j) fprintf(stderr, "%s: %s\n", UNI_JSON, err.text);
    return j;
}

/* Load tokenizer.json from a JSON value through a temporary file; rc and the error kept. */
static int load_from(json_t *j, modattn_tokenizer **t) {
    char path[] = "/tmp/modattn_tok_unigram_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    json_dump_file(j, path, JSON_COMPACT);
    *t = NULL;
    int rc = modattn_tokenizer_load(path, t);
    unlink(path);
    return rc;
}

static bool make_variant(json_t *j, const char *name) {
    json_t *pre = json_object_get(j, "pre_tokenizer");
    if (!strcmp(name, "first")) {
        json_object_set_new(pre, "prepend_scheme", json_string("first"));
    } else if (!strcmp(name, "never")) {
        json_object_set_new(pre, "prepend_scheme", json_string("never"));
    } else if (!strcmp(name, "nosplit")) {
        json_object_set_new(pre, "split", json_false());
    } else if (!strcmp(name, "seq")) {
        json_t *ns = json_object_get(json_object_get(j, "normalizer"), "normalizers");
        json_array_append_new(ns, json_pack("{s:s}", "type", "Lowercase"));
        json_array_append_new(ns, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String",
                                            "\xc3\x9f", "content", "ss"));
        json_t *seq = json_pack("{s:s, s:[{s:s}, O]}", "type", "Sequence", "pretokenizers", "type",
                                "WhitespaceSplit", pre);
        json_object_set_new(j, "pre_tokenizer", seq);
    } else if (!strcmp(name, "roberta")) {
        json_object_set_new(j, "post_processor",
                            json_pack("{s:s, s:[s,i], s:[s,i], s:b, s:b}", "type", "RobertaProcessing", "sep", "</s>", 2,
                                      "cls", "<s>", 0, "trim_offsets", 0, "add_prefix_space", 1));
    } else if (!strcmp(name, "nfc") || !strcmp(name, "nfd") || !strcmp(name, "nfkc") || !strcmp(name, "nfkd_lower")) {
        json_t *ns = json_object_get(json_object_get(j, "normalizer"), "normalizers");
        const char *form = !strcmp(name, "nfc") ? "NFC" : !strcmp(name, "nfd") ? "NFD" : !strcmp(name, "nfkc") ? "NFKC" : "NFKD";
        json_array_set_new(ns, 0, json_pack("{s:s}", "type", form));
        if (!strcmp(name, "nfkd_lower")) json_array_append_new(ns, json_pack("{s:s}", "type", "Lowercase"));
    } else {
        return false;
    }
    return true;
}

static modattn_tokenizer *load_variant(const char *name) {
    json_t *j = load_json();
    modattn_tokenizer *t = NULL;
    if (j && make_variant(j, name) && load_from(j, &t) != 0)
        fprintf(stderr, "variant %s: %s\n", name, modattn_last_error());
    json_decref(j);
    return t;
}

/* An edit of the file that must be refused, with `needle` in the message. */
static void refused(const char *what, void (*edit)(json_t *), const char *needle) {
    json_t *j = load_json();
    if (!j) {
        CHECK(0);
        return;
    }
    edit(j);
    modattn_tokenizer *t = NULL;
    int rc = load_from(j, &t);
    CHECK_MSG(rc != 0 && t == NULL, "%s: loaded", what);
    if (rc) CHECK_MSG(strstr(modattn_last_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
                      modattn_last_error(), needle);
    modattn_tokenizer_free(t);
    json_decref(j);
}

static json_t *norm_step(json_t *j, size_t i) {
    return json_array_get(json_object_get(json_object_get(j, "normalizer"), "normalizers"), i);
}
static void e_nfkc(json_t *j) {
    json_array_append_new(json_object_get(json_object_get(j, "normalizer"), "normalizers"),
                          json_pack("{s:s}", "type", "NmtNormalizer"));
}
static void e_regex(json_t *j) {
    json_object_set_new(json_object_get(norm_step(j, 2), "pattern"), "Regex", json_string("[ab]+"));
}
static void e_pretok(json_t *j) { json_object_set_new(j, "pre_tokenizer", json_pack("{s:s}", "type", "ByteLevel")); }
static void e_model(json_t *j) { json_object_set_new(json_object_get(j, "model"), "type", json_string("WordLevel")); }
static void e_post(json_t *j) {
    json_object_set_new(j, "post_processor", json_pack("{s:s, s:[{s:s}]}", "type", "Sequence", "processors", "type", "Nonsense"));
}
static void e_unk(json_t *j) { json_object_set_new(json_object_get(j, "model"), "unk_id", json_integer(100000)); }
static void e_vocab(json_t *j) {
    json_array_append_new(json_object_get(json_object_get(j, "model"), "vocab"), json_pack("[s,s]", "x", "y"));
}

/* A damaged charsmap: the base64 blob is decoded, edited, encoded again. */
static char *g_cm;
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static unsigned char *cm_bytes(const char *s, size_t *n) {
    unsigned char *out = malloc(strlen(s));
    *n = b64decode(s, out);
    return out;
}
static char *cm_b64(const unsigned char *b, size_t n) {
    char *o = malloc(n / 3 * 4 + 8), *p = o;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        *p++ = B64[w >> 18 & 63];
        *p++ = B64[w >> 12 & 63];
        *p++ = i + 1 < n ? B64[w >> 6 & 63] : '=';
        *p++ = i + 2 < n ? B64[w & 63] : '=';
    }
    *p = 0;
    return o;
}
static void e_charsmap(json_t *j) { json_object_set_new(norm_step(j, 0), "precompiled_charsmap", json_string(g_cm)); }
static void damaged(const char *what, void (*damage)(unsigned char *, size_t *), const char *needle) {
    json_t *j = load_json();
    size_t n = 0;
    unsigned char *b = cm_bytes(json_string_value(json_object_get(norm_step(j, 0), "precompiled_charsmap")), &n);
    json_decref(j);
    damage(b, &n);
    g_cm = cm_b64(b, n);
    refused(what, e_charsmap, needle);
    free(g_cm);
    free(b);
}
static void d_trunc_header(unsigned char *b, size_t *n) { (void)b; *n = 3; }
static void d_trunc_array(unsigned char *b, size_t *n) { (void)b; *n = *n / 3; }
static void d_size(unsigned char *b, size_t *n) { (void)n; b[3] = 0x7F; }
static void d_root(unsigned char *b, size_t *n) { (void)n; b[4 + 2] = 0xFF; b[4 + 3] = 0xFF; }
static void d_pool(unsigned char *b, size_t *n) {
    uint32_t tb = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    *n = 4 + tb + 10; /* the pool cut short: replacements point past it */
}
static void d_units(unsigned char *b, size_t *n) {
    /* every unit's offset bits set high: children fall outside the array */
    uint32_t tb = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    (void)n;
    for (uint32_t i = 4; i < 4 + tb; i += 4) b[i + 3] |= 0x70;
}

/* Random bit flips in the charsmap's binary: each mutant loads or is refused, and one that loads
 * tokenizes without reading outside its tables (the ASan build checks that). */
static void charsmap_flips(int count) {
    json_t *j = load_json();
    size_t n = 0;
    unsigned char *orig = cm_bytes(json_string_value(json_object_get(norm_step(j, 0), "precompiled_charsmap")), &n);
    json_decref(j);
    unsigned char *b = malloc(n);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int loaded = 0, refused_n = 0;
    const char *text = "Informação ﬁnance ｶﾀｶﾅ 中文 한국어 e\xcc\x81 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xef\xbc\xa1 \x01";
    for (int k = 0; k < count; k++) {
        memcpy(b, orig, n);
        for (int f = 0; f < 1 + k % 4; f++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            b[4 + x % (n - 4)] ^= (unsigned char)(1u << (x >> 40) % 8);
        }
        g_cm = cm_b64(b, n);
        json_t *m = load_json();
        e_charsmap(m);
        modattn_tokenizer *t = NULL;
        if (load_from(m, &t) == 0) {
            int32_t ids[256];
            size_t nt = 0;
            CHECK(modattn_tokenize(t, text, strlen(text), ids, 256, &nt) == 0);
            loaded++;
        } else {
            refused_n++;
        }
        modattn_tokenizer_free(t);
        json_decref(m);
        free(g_cm);
    }
    printf("charsmap flips: %d loaded, %d refused\n", loaded, refused_n);
    CHECK(loaded + refused_n == count);
    free(b);
    free(orig);
}

int main(void) {
    modattn_tokenizer *t = NULL;
    int rc = modattn_tokenizer_load(UNI_JSON, &t);
    CHECK_MSG(rc == 0, "load %s: %s", UNI_JSON, modattn_last_error());
    if (rc) return test_finish("test_tokenizer_unigram");
    CHECK(modattn_tokenizer_cls_id(t) == 0);
    CHECK(modattn_tokenizer_sep_id(t) == 2);
    CHECK(modattn_tokenizer_pad_id(t) == 1);
    CHECK(modattn_tokenizer_unk_id(t) == 3);
    stats a = run_fixture("tests/fixtures/tokens_unigram.jsonl", t, load_variant);
    printf("unigram (nmt_nfkc charsmap): ids and offsets matched %d/%d inputs\n", a.matched, a.inputs);
    CHECK_MSG(a.inputs >= 900 && a.matched == a.inputs, "%d of %d inputs differ from HF", a.inputs - a.matched,
              a.inputs);
    modattn_tokenizer_free(t);

    rc = modattn_tokenizer_load(UNI_BYTES_JSON, &t);
    CHECK_MSG(rc == 0, "load %s: %s", UNI_BYTES_JSON, modattn_last_error());
    if (!rc) {
        stats b = run_fixture("tests/fixtures/tokens_unigram_bytes.jsonl", t, NULL);
        printf("unigram byte_fallback: ids and offsets matched %d/%d inputs\n", b.matched, b.inputs);
        CHECK_MSG(b.inputs >= 300 && b.matched == b.inputs, "%d of %d inputs differ from HF", b.inputs - b.matched,
                  b.inputs);
        modattn_tokenizer_free(t);
    }

    /* what we do not implement is refused, naming it */
    refused("Nmt normalizer", e_nfkc, "NmtNormalizer");
    refused("Regex other than X{n,}", e_regex, "[ab]+");
    refused("ByteLevel pre-tokenizer", e_pretok, "ByteLevel");
    refused("WordLevel model", e_model, "WordLevel");
    refused("unknown post-processor", e_post, "Nonsense");
    refused("unk_id out of range", e_unk, "unk_id");
    refused("vocab entry not [piece, score]", e_vocab, "model.vocab");
    /* damaged charsmaps */
    damaged("charsmap shorter than its header", d_trunc_header, "truncated");
    damaged("charsmap array cut", d_trunc_array, "truncated");
    damaged("charsmap size past the blob", d_size, "truncated");
    damaged("charsmap root offset out of range", d_root, "damaged");
    damaged("charsmap pool cut", d_pool, "precompiled_charsmap");
    damaged("charsmap offsets out of range", d_units, "damaged");
    charsmap_flips(120);

    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    CHECK_MSG(ms.current_total == 0, "%lld bytes still allocated", (long long)ms.current_total);
    return test_finish("test_tokenizer_unigram");
}
