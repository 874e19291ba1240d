/* tests/model/test_tokenizer_golden.c — our tokenizer against Hugging Face `tokenizers`.
 *
 * tests/fixtures/tokens_minilm.jsonl and tokens_variants.jsonl are written by
 * tools/make_token_goldens.py from the real package: for every input, the ids and the byte
 * offsets HF gives. This test tokenises the same bytes with modattn_tokenize_offsets and wants
 * the same ids and offsets, printing a readable diff for each mismatch.
 * The variants are edits of all-MiniLM-L6-v2's tokenizer.json (normaliser flags, added tokens,
 * post-processor); make_variant() below mirrors VARIANTS in the script.
 * Needs .models/all-MiniLM-L6-v2 (`make model`); without it the test fails, on purpose. */
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

#define MODEL_JSON ".models/all-MiniLM-L6-v2/tokenizer.json"

/* ---- variants: the same edits as VARIANTS in tools/make_token_goldens.py */

static void set_norm(json_t *j, const char *key, json_t *v) {
    json_object_set_new(json_object_get(j, "normalizer"), key, v);
}

static json_t *added(const char *content, int id, bool sw, bool l, bool r, bool norm, bool special) {
    return json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", content, "single_word",
                     sw, "lstrip", l, "rstrip", r, "normalized", norm, "special", special);
}

static bool make_variant(json_t *j, const char *name) {
    if (!strcmp(name, "cased")) {
        set_norm(j, "lowercase", json_false());
        set_norm(j, "strip_accents", json_null());
    } else if (!strcmp(name, "lower_keep_accents")) {
        set_norm(j, "lowercase", json_true());
        set_norm(j, "strip_accents", json_false());
    } else if (!strcmp(name, "strip_no_lower")) {
        set_norm(j, "lowercase", json_false());
        set_norm(j, "strip_accents", json_true());
    } else if (!strcmp(name, "no_clean")) {
        set_norm(j, "clean_text", json_false());
    } else if (!strcmp(name, "no_cjk")) {
        set_norm(j, "handle_chinese_chars", json_false());
    } else if (!strcmp(name, "all_off")) {
        set_norm(j, "clean_text", json_false());
        set_norm(j, "handle_chinese_chars", json_false());
        set_norm(j, "strip_accents", json_false());
        set_norm(j, "lowercase", json_false());
    } else if (!strcmp(name, "added")) {
        json_t *vocab = json_object_get(json_object_get(j, "model"), "vocab");
        json_int_t base = 0;
        const char *k;
        json_t *v;
        json_object_foreach(vocab, k, v) if (json_integer_value(v) >= base) base = json_integer_value(v) + 1;
        json_t *a = json_object_get(j, "added_tokens");
        int id = (int)base;
        json_array_append_new(a, added("<foo>", id++, false, true, true, false, true));
        json_array_append_new(a, added("zqzq", id++, true, false, false, false, false));
        json_array_append_new(a, added("\xc3\x9cn\xc3\xaf", id++, false, false, false, true, false));
        json_array_append_new(a, added("new york", id++, false, false, false, true, false));
        json_array_append_new(a, added("<foo>zqzq", id++, false, false, false, false, false));
        json_array_append_new(a, added("\xe9\xbe\x98", id++, false, false, false, false, false));
    } else if (!strcmp(name, "bert_processing")) {
        json_object_set_new(j, "post_processor",
                            json_pack("{s:s, s:[s,i], s:[s,i]}", "type", "BertProcessing", "sep", "[SEP]",
                                      102, "cls", "[CLS]", 101));
    } else if (!strcmp(name, "no_post")) {
        json_object_set_new(j, "post_processor", json_null());
    } else {
        return false;
    }
    return true;
}

static modattn_tokenizer *load_variant(const char *name) {
    json_error_t err;
    json_t *j = json_load_file(MODEL_JSON, 0, &err);
    if (!j || !make_variant(j, name)) {
        fprintf(stderr, "cannot make variant %s\n", name);
        json_decref(j);
        return NULL;
    }
    char path[] = "/tmp/modattn_tok_variant_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        json_decref(j);
        return NULL;
    }
    close(fd);
    json_dump_file(j, path, 0);
    json_decref(j);
    modattn_tokenizer *t = NULL;
    int rc = modattn_tokenizer_load(path, &t);
    unlink(path);
    if (rc) fprintf(stderr, "variant %s: %s\n", name, modattn_last_error());
    return t;
}

int main(void) {
    if (access(MODEL_JSON, R_OK) != 0) {
        fprintf(stderr,
                "FAIL: %s is missing. The tokenizer goldens need the all-MiniLM-L6-v2 files: run "
                "`make model` (tools/setup_model.sh) first.\n",
                MODEL_JSON);
        printf("test_tokenizer_golden: 0 passed, 1 failed\n");
        return 1;
    }
    modattn_tokenizer *t = NULL;
    int rc = modattn_tokenizer_load(MODEL_JSON, &t);
    CHECK_MSG(rc == 0, "load %s: %s", MODEL_JSON, modattn_last_error());
    if (rc) return test_finish("test_tokenizer_golden");
    CHECK(modattn_tokenizer_vocab_size(t) == 30522);
    CHECK(modattn_tokenizer_cls_id(t) == 101);
    CHECK(modattn_tokenizer_sep_id(t) == 102);
    CHECK(modattn_tokenizer_pad_id(t) == 0);
    CHECK(modattn_tokenizer_unk_id(t) == 100);

    stats a = run_fixture("tests/fixtures/tokens_minilm.jsonl", t, NULL);
    printf("all-MiniLM-L6-v2: ids and offsets matched %d/%d inputs\n", a.matched, a.inputs);
    CHECK_MSG(a.inputs >= 400 && a.matched == a.inputs, "%d of %d inputs differ from HF",
              a.inputs - a.matched, a.inputs);
    stats v = run_fixture("tests/fixtures/tokens_variants.jsonl", t, load_variant);
    printf("variants: ids and offsets matched %d/%d inputs\n", v.matched, v.inputs);
    CHECK_MSG(v.inputs > 0 && v.matched == v.inputs, "%d of %d variant inputs differ from HF",
              v.inputs - v.matched, v.inputs);
    modattn_tokenizer_free(t);

    /* (no bge-small-en-v1.5 token golden: its fixture was never generated, no package carries the
     * fp32 model; the int8 copy's tokenizer is checked by tests/model against its goldens' ids) */

    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    CHECK_MSG(ms.current_total == 0, "%lld bytes still allocated", (long long)ms.current_total);
    return test_finish("test_tokenizer_golden");
}
