/* tests/model/test_tokenizer_bpe.c — byte-level BPE tokenizers (GPT-2, Qwen2/Qwen3,
 * ModernBERT/GPT-NeoX layouts) against Hugging Face `tokenizers`.
 *
 * tests/fixtures/tokenizer_bpe_*.json are small BPE tokenizers trained by tools/make_bpe_goldens.py
 * with `tokenizers`, in the layouts of the real files (GPT-2: ByteLevel pre-tokenizer and
 * post-processor, merges as "a b"; Qwen2: NFC, Sequence[Split(Qwen2's regex), ByteLevel], merges
 * as [a, b]; ModernBERT: ByteLevel + TemplateProcessing [CLS] $A [SEP]; suffix: no ByteLevel,
 * continuing_subword_prefix and end_of_word_suffix). tokens_bpe.jsonl holds the ids and byte
 * offsets HF gives for each, and for edits of them (make_variant() below mirrors the generator's
 * VARIANTS). Then: what we do not implement, and damaged files, are refused naming the field; a
 * long word without spaces is merged in bounded time. No model needed: everything is committed. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "test_util.h"
#include "model/golden_util.h"

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_RE                                                                                                     \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"

static json_t *load_fixture(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/tokenizer_bpe_%s.json", name);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) fprintf(stderr, "%s: %s\n", path, err.text);
    return j;
}

static int load_from(json_t *j, modattn_tokenizer **t) {
    char path[] = "/tmp/modattn_tok_bpe_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    json_dump_file(j, path, JSON_COMPACT);
    *t = NULL;
    int rc = modattn_tokenizer_load(path, t);
    unlink(path);
    return rc;
}

static json_t *split_gpt2(void) {
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", GPT2_RE, "behavior", "Isolated",
                     "invert", 0);
}

static json_t *template_eot(json_t *j) {
    json_int_t eot = json_integer_value(json_object_get(json_object_get(json_object_get(j, "model"), "vocab"), "<|endoftext|>"));
    return json_pack("{s:s, s:[{s:{s:s,s:i}}, {s:{s:s,s:i}}], s:{s:{s:s, s:[I], s:[s]}}}", "type", "TemplateProcessing",
                     "single", "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id", "<|endoftext|>", "type_id", 0,
                     "special_tokens", "<|endoftext|>", "id", "<|endoftext|>", "ids", eot, "tokens", "<|endoftext|>");
}

/* the generator's VARIANTS, edit for edit */
static bool make_variant(json_t *j, const char *name) {
    json_t *pre = json_object_get(j, "pre_tokenizer"), *post = json_object_get(j, "post_processor");
    json_t *model = json_object_get(j, "model");
    if (!strcmp(name, "prefix")) {
        json_object_set_new(pre, "add_prefix_space", json_true());
        json_object_set_new(post, "add_prefix_space", json_true());
    } else if (!strcmp(name, "roberta")) {
        json_int_t eot = json_integer_value(json_object_get(json_object_get(model, "vocab"), "<|endoftext|>"));
        json_object_set_new(j, "post_processor",
                            json_pack("{s:s, s:[s,I], s:[s,I], s:b, s:b}", "type", "RobertaProcessing", "sep",
                                      "<|endoftext|>", eot, "cls", "<|endoftext|>", eot, "trim_offsets", 1,
                                      "add_prefix_space", 1));
        json_object_set_new(pre, "add_prefix_space", json_true());
    } else if (!strcmp(name, "split_gpt2")) {
        json_object_set_new(j, "pre_tokenizer",
                            json_pack("{s:s, s:[o, {s:s, s:b, s:b, s:b}]}", "type", "Sequence", "pretokenizers",
                                      split_gpt2(), "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                                      "use_regex", 0));
    } else if (!strcmp(name, "unk") || !strcmp(name, "fuse_unk") || !strcmp(name, "nounk")) {
        json_object_set_new(j, "pre_tokenizer", split_gpt2());
        json_object_set_new(model, "unk_token", !strcmp(name, "nounk") ? json_null() : json_string("<|endoftext|>"));
        json_object_set_new(model, "fuse_unk", json_boolean(!strcmp(name, "fuse_unk")));
        json_object_set_new(j, "post_processor", json_null());
    } else if (!strcmp(name, "llama3")) {
        json_t *split = json_array_get(json_object_get(pre, "pretokenizers"), 0);
        json_object_set_new(json_object_get(split, "pattern"), "Regex", json_string(LLAMA3_RE));
        json_object_set_new(model, "ignore_merges", json_true());
    } else if (!strcmp(name, "qprefix")) {
        json_object_set_new(json_array_get(json_object_get(pre, "pretokenizers"), 1), "add_prefix_space", json_true());
    } else if (!strcmp(name, "template")) {
        json_object_set_new(j, "post_processor", template_eot(j));
    } else if (!strcmp(name, "seq_post")) {
        json_object_set_new(j, "post_processor",
                            json_pack("{s:s, s:[{s:s, s:b, s:b, s:b}, o]}", "type", "Sequence", "processors", "type",
                                      "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1,
                                      template_eot(j)));
    } else if (!strcmp(name, "neox")) {
        json_object_set_new(j, "normalizer", json_pack("{s:s}", "type", "NFC"));
        json_object_set_new(j, "post_processor", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                                                           0, "trim_offsets", 1, "use_regex", 1));
    } else {
        return false;
    }
    return true;
}

static modattn_tokenizer *load_named(const char *fixture, const char *variant) {
    json_t *j = load_fixture(fixture);
    modattn_tokenizer *t = NULL;
    if (!j) return NULL;
    if (variant && !make_variant(j, variant)) {
        fprintf(stderr, "unknown variant %s\n", variant);
    } else if (load_from(j, &t) != 0) {
        fprintf(stderr, "%s/%s: %s\n", fixture, variant ? variant : "-", modattn_last_error());
    }
    json_decref(j);
    return t;
}

/* every line of tokens_bpe.jsonl against its fixture or variant */
static void goldens(void) {
    const char *path = "tests/fixtures/tokens_bpe.jsonl";
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s (run tools/make_bpe_goldens.py)", path);
    if (!f) return;
    char *line = NULL, cur[96] = "";
    size_t cap = 0;
    int lineno = 0, inputs = 0, matched = 0, per_key = 0, per_ok = 0;
    modattn_tokenizer *t = NULL;
    while (getline(&line, &cap, f) > 0) {
        if (++lineno == 1) continue;
        json_error_t err;
        json_t *rec = json_loads(line, JSON_ALLOW_NUL, &err);
        CHECK_MSG(rec != NULL, "%s:%d: %s", path, lineno, rec ? "" : err.text);
        if (!rec) continue;
        const char *fx = json_string_value(json_object_get(rec, "fixture"));
        const char *var = json_string_value(json_object_get(rec, "variant"));
        char key[96];
        snprintf(key, sizeof key, "%s/%s", fx ? fx : "?", var ? var : "-");
        if (strcmp(key, cur) != 0) {
            if (cur[0]) printf("  %-22s %d/%d\n", cur, per_ok, per_key);
            modattn_tokenizer_free(t);
            t = fx ? load_named(fx, var) : NULL;
            CHECK_MSG(t != NULL, "%s does not load", key);
            snprintf(cur, sizeof cur, "%s", key);
            per_key = per_ok = 0;
        }
        if (t) {
            inputs++;
            per_key++;
            if (check_record(t, rec, key, lineno)) matched++, per_ok++;
        }
        json_decref(rec);
    }
    if (cur[0]) printf("  %-22s %d/%d\n", cur, per_ok, per_key);
    modattn_tokenizer_free(t);
    free(line);
    fclose(f);
    printf("bpe goldens: ids and offsets matched %d/%d inputs\n", matched, inputs);
    CHECK_MSG(inputs >= 1300 && matched == inputs, "%d of %d inputs differ from HF", inputs - matched, inputs);
}

/* An edit of a fixture that must be refused, with `needle` in the message. */
static void refused(const char *fixture, const char *what, void (*edit)(json_t *), const char *needle) {
    json_t *j = load_fixture(fixture);
    if (!j) {
        CHECK(0);
        return;
    }
    edit(j);
    modattn_tokenizer *t = NULL;
    int rc = load_from(j, &t);
    CHECK_MSG(rc != 0 && t == NULL, "%s: loaded", what);
    if (rc)
        CHECK_MSG(strstr(modattn_last_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
                  modattn_last_error(), needle);
    else
        printf("  %s: loaded\n", what);
    modattn_tokenizer_free(t);
    json_decref(j);
}

static json_t *qsplit(json_t *j) {
    return json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0);
}
static void e_pattern(json_t *j) {
    json_object_set_new(json_object_get(qsplit(j), "pattern"), "Regex", json_string("\\p{L}+|\\s+"));
}
static void e_pattern_near(json_t *j) { /* Qwen2's with one character changed */
    const char *re = json_string_value(json_object_get(json_object_get(qsplit(j), "pattern"), "Regex"));
    char *s = strdup(re);
    s[strlen(s) - 1] = '*';
    json_object_set_new(json_object_get(qsplit(j), "pattern"), "Regex", json_string(s));
    free(s);
}
static void e_string(json_t *j) { json_object_set_new(qsplit(j), "pattern", json_pack("{s:s}", "String", " ")); }
static void e_behavior(json_t *j) { json_object_set_new(qsplit(j), "behavior", json_string("MergedWithNext")); }
static void e_invert(json_t *j) { json_object_set_new(qsplit(j), "invert", json_true()); }
static void e_no_merges(json_t *j) { json_object_del(json_object_get(j, "model"), "merges"); }
static void e_merge_unknown(json_t *j) {
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_pack("[s,s]", "zzq", "e"));
}
static void e_merge_result(json_t *j) { /* both halves known, their concatenation not */
    json_array_insert_new(json_object_get(json_object_get(j, "model"), "merges"), 0, json_pack("[s,s]", "q", "q"));
}
static void e_merge_form(json_t *j) {
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_string("a b"));
}
static void e_merge_str(json_t *j) { /* GPT-2's string form with three parts */
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_string("a b c"));
}
static void e_dropout(json_t *j) { json_object_set_new(json_object_get(j, "model"), "dropout", json_real(0.1)); }
static void e_pretok(json_t *j) {
    json_object_set_new(j, "pre_tokenizer", json_pack("{s:s}", "type", "Whitespace"));
}
static void e_norm(json_t *j) { json_object_set_new(j, "normalizer", json_pack("{s:s}", "type", "BertNormalizer")); }
static void e_vocab(json_t *j) { json_object_set_new(json_object_get(j, "model"), "vocab", json_array()); }
static void e_post(json_t *j) {
    json_object_set_new(j, "post_processor", json_pack("{s:s, s:[{s:s}]}", "type", "Sequence", "processors", "type",
                                                       "Nonsense"));
}

/* A word of 1 MiB without a space: merged with the heap in bounded time (not O(n^2)), and the
 * same ids as the word cut into its repeating unit (every piece is one unit here). */
static void long_word(void) {
    modattn_tokenizer *t = load_named("gpt2", NULL);
    CHECK(t != NULL);
    if (!t) return;
    size_t n = 1 << 20;
    char *s = malloc(n);
    for (size_t i = 0; i < n; i++) s[i] = "abcdefgh"[i % 8];
    size_t cap = n + 8, nt = 0;
    int32_t *ids = malloc(cap * sizeof(int32_t));
    modattn_token_offset *offs = malloc(cap * sizeof(modattn_token_offset));
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = modattn_tokenize_ex(t, s, n, MODATTN_TOKENIZE_NO_SPECIALS, ids, offs, cap, &nt);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    CHECK_MSG(rc == 0, "long word: %s", modattn_last_error());
    size_t n8 = 0;
    int32_t ids8[16];
    CHECK(modattn_tokenize_ex(t, s, 8, MODATTN_TOKENIZE_NO_SPECIALS, ids8, NULL, 16, &n8) == 0);
    bool same = nt > 0 && nt % n8 == 0 && offs[nt - 1].end == n;
    for (size_t i = 0; same && i < nt; i++) same = ids[i] == ids8[i % n8];
    printf("long word: 1 MiB of 'abcdefgh' -> %zu tokens (%zu per unit) in %.2f s\n", nt, n8, secs);
    CHECK_MSG(same, "the long word's pieces differ from the unit's");
    CHECK_MSG(secs < 20.0, "1 MiB word took %.1f s: not bounded", secs);
    free(s);
    free(ids);
    free(offs);
    modattn_tokenizer_free(t);
}

/* tools/make_bpe_goldens.py's long_texts(), byte for byte */
static char *long_text(const char *name, size_t *len) {
    size_t cap = 1 << 20, n = 0;
    char *s = malloc(cap);
    if (!strcmp(name, "lines")) {
        for (int i = 0; i < 2500; i++)
            n += (size_t)snprintf(s + n, cap - n, "line %d: value=%d, na\xc3\xafve caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
                                                  "\xf0\x9f\x98\x80 don't\n", i, i * i);
    } else {
        for (int i = 0; i < 4000; i++) n += (size_t)snprintf(s + n, cap - n, "Word%d  and\tmore \r\n%s", i, i % 3 ? "" : "\n");
    }
    *len = n;
    return s;
}

/* Long texts (about 100 KB, so several 8 KiB blocks cut after "\n"): count and FNV-1a of the
 * ids and offsets equal to HF's, whole and cut at 3000 ids */
static void long_goldens(void) {
    FILE *f = fopen("tests/fixtures/tokens_bpe_long.jsonl", "r");
    CHECK_MSG(f != NULL, "cannot open tests/fixtures/tokens_bpe_long.jsonl");
    if (!f) return;
    char line[512];
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *r = json_loads(line, 0, NULL);
        if (!r) continue;
        const char *fx = json_string_value(json_object_get(r, "fixture"));
        const char *tn = json_string_value(json_object_get(r, "text"));
        size_t max = (size_t)json_integer_value(json_object_get(r, "max"));
        size_t want = (size_t)json_integer_value(json_object_get(r, "n"));
        const char *fnv = json_string_value(json_object_get(r, "fnv"));
        modattn_tokenizer *t = load_named(fx, NULL);
        size_t len = 0;
        char *text = long_text(tn, &len);
        size_t cap = want + 8 < max ? want + 8 : max, n = 0;
        int32_t *ids = malloc(cap * sizeof(int32_t));
        modattn_token_offset *offs = malloc(cap * sizeof(modattn_token_offset));
        int rc = t ? modattn_tokenize_offsets(t, text, len, ids, offs, cap, &n) : -1;
        uint64_t h = 0xCBF29CE484222325ull;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            unsigned char b[20];
            uint32_t id = (uint32_t)ids[i];
            uint64_t st = offs[i].start, en = offs[i].end;
            for (int k = 0; k < 4; k++) b[k] = (unsigned char)(id >> (8 * k));
            for (int k = 0; k < 8; k++) b[4 + k] = (unsigned char)(st >> (8 * k)), b[12 + k] = (unsigned char)(en >> (8 * k));
            for (int k = 0; k < 20; k++) h = (h ^ b[k]) * 0x100000001B3ull;
        }
        char got[17];
        snprintf(got, sizeof got, "%016llx", (unsigned long long)h);
        CHECK_MSG(rc == 0 && n == want && !strcmp(got, fnv), "long %s/%s max %zu: %zu tokens (HF %zu), hash %s (HF %s)",
                  fx, tn, max, n, want, got, fnv);
        checked++;
        free(ids);
        free(offs);
        free(text);
        modattn_tokenizer_free(t);
        json_decref(r);
    }
    fclose(f);
    printf("long texts: %d checked against HF's counts and hashes\n", checked);
    CHECK(checked == 16);
}

/* truncation keeps a prefix, and the budget stops early */
static void truncation(void) {
    modattn_tokenizer *t = load_named("modernbert", NULL);
    CHECK(t != NULL);
    if (!t) return;
    const char *s = "The quick brown fox jumps over the lazy dog. Привет, мир! 中文分词测试 😀";
    int32_t full[256], part[8];
    size_t nf = 0, np = 0;
    CHECK(modattn_tokenize(t, s, strlen(s), full, 256, &nf) == 0);
    CHECK(modattn_tokenize(t, s, strlen(s), part, 8, &np) == 0);
    CHECK(np == 8 && nf > 8);
    CHECK(part[0] == full[0] && part[7] == full[nf - 1]); /* [CLS] ... [SEP] */
    for (size_t i = 1; i + 1 < np; i++) CHECK(part[i] == full[i]);
    CHECK(modattn_tokenizer_cls_id(t) == full[0]);
    modattn_tokenizer_free(t);
}

static int64_t mem_now(void) {
    modattn_mem_stats s;
    modattn_mem_get_stats(&s);
    return s.current_total;
}

/* Loading, then tokenizing, with the Nth allocation failing, N = 1, 2, ... until it succeeds: a
 * clean out-of-memory error each time and nothing leaked (Qwen2's: NFC, Split, ByteLevel, merges;
 * the text long enough to take several blocks). */
static void fault_injection(void) {
    const char *path = "tests/fixtures/tokenizer_bpe_qwen2.json";
    int64_t base = mem_now();
    int points = 0;
    modattn_tokenizer *t = NULL;
    for (uint64_t k = 1; k < 20000 && !t; k++) {
        modattn__mem_fail_nth(k);
        int rc = modattn_tokenizer_load(path, &t);
        modattn__mem_fail_nth(0);
        if (rc) {
            points++;
            CHECK_MSG(rc == MODATTN_ENOMEM && t == NULL && strstr(modattn_last_error(), "injected"),
                      "load, allocation %llu failed: status %d: %s", (unsigned long long)k, rc, modattn_last_error());
            CHECK_MSG(mem_now() == base, "load, allocation %llu failed: %lld bytes leaked", (unsigned long long)k,
                      (long long)(mem_now() - base));
        }
    }
    CHECK(t != NULL);
    if (!t) return;
    size_t len = 0;
    char *text = long_text("lines", &len);
    len = 30000; /* four blocks */
    int64_t loaded = mem_now();
    static int32_t ids[20000];
    static modattn_token_offset offs[20000];
    int tpoints = 0;
    size_t n = 0;
    for (uint64_t k = 1; k < 20000; k++) {
        modattn__mem_fail_nth(k);
        int rc = modattn_tokenize_offsets(t, text, len, ids, offs, 20000, &n);
        modattn__mem_fail_nth(0);
        if (rc == 0) break;
        tpoints++;
        CHECK_MSG(rc == MODATTN_ENOMEM && strstr(modattn_last_error(), "injected"), "tokenize, allocation %llu: %s",
                  (unsigned long long)k, modattn_last_error());
        CHECK(mem_now() == loaded);
    }
    printf("fault injection: %d allocation points in loading, %d in tokenizing %zu bytes (%zu tokens)\n", points,
           tpoints, len, n);
    CHECK(points > 10 && tpoints > 3 && n > 1000);
    free(text);
    modattn_tokenizer_free(t);
    CHECK(mem_now() == base);
}

int main(void) {
    (void)run_fixture; /* golden_util.h's: the lines here name their fixture */
    goldens();
    refused("qwen2", "unknown Split pattern", e_pattern, "\\p{L}+|\\s+");
    refused("qwen2", "Qwen2's pattern with one character changed", e_pattern_near, "pattern.Regex");
    refused("qwen2", "Split on a String", e_string, "pattern.String");
    refused("qwen2", "Split behavior MergedWithNext", e_behavior, "MergedWithNext");
    refused("qwen2", "Split invert", e_invert, "invert");
    refused("qwen2", "merges missing", e_no_merges, "model.merges");
    refused("qwen2", "merge of an unknown token", e_merge_unknown, "zzq");
    refused("qwen2", "merge making an unknown token", e_merge_result, "\"qq\"");
    refused("qwen2", "merges of both forms", e_merge_form, "model.merges");
    refused("gpt2", "merge string of three tokens", e_merge_str, "a b c");
    refused("gpt2", "BPE dropout", e_dropout, "model.dropout");
    refused("gpt2", "Whitespace pre-tokenizer", e_pretok, "Whitespace");
    refused("gpt2", "BertNormalizer", e_norm, "BertNormalizer");
    refused("gpt2", "vocab not an object", e_vocab, "model.vocab");
    refused("gpt2", "unknown post-processor in a Sequence", e_post, "Nonsense");
    truncation();
    long_goldens();
    fault_injection();
    long_word();
    return test_finish("test_tokenizer_bpe");
}
