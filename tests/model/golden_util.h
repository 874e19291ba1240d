/* tests/model/golden_util.h — shared by the tokenizer tests: runs a fixture written by
 * tools/make_token_goldens.py (one JSON object per line: text or b64, ids, offsets, max, variant)
 * through modattn_tokenize_offsets and prints a readable diff for every input that differs. */
#ifndef MODATTN_TESTS_TOKENIZER_GOLDEN_UTIL_H
#define MODATTN_TESTS_TOKENIZER_GOLDEN_UTIL_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/tokenizer.h"
#include "test_util.h"

/* Loads the tokenizer of a variant line (NULL when it cannot); set by the test. */
typedef modattn_tokenizer *(*golden_variant_fn)(const char *name);

static int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static size_t b64decode(const char *s, unsigned char *out) {
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (; *s; s++) {
        int v = b64val((unsigned char)*s);
        if (v < 0) continue; /* '=' padding */
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    return n;
}

/* Print text with non-printing bytes escaped, at most `max` bytes. */
static void print_escaped(FILE *f, const unsigned char *s, size_t len, size_t max) {
    fputc('"', f);
    for (size_t i = 0; i < len && i < max; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
    if (len > max) fprintf(f, "... (%zu bytes)", len);
}

static const char *tok_str(const modattn_tokenizer *t, int32_t id) {
    const char *s = modattn_tokenizer_token(t, id);
    return s ? s : "?";
}

typedef struct stats {
    int inputs, matched;
} stats;

/* One fixture line: tokenize and compare. Returns true when identical. */
static bool check_record(const modattn_tokenizer *t, json_t *rec, const char *where, int line) {
    json_t *jtext = json_object_get(rec, "text"), *jb64 = json_object_get(rec, "b64");
    json_t *jids = json_object_get(rec, "ids"), *joff = json_object_get(rec, "offsets");
    size_t max = (size_t)json_integer_value(json_object_get(rec, "max"));
    unsigned char *text;
    size_t len;
    if (jtext) {
        len = json_string_length(jtext);
        text = malloc(len + 1);
        memcpy(text, json_string_value(jtext), len);
    } else {
        const char *b = json_string_value(jb64);
        text = malloc(strlen(b) + 1);
        len = b64decode(b, text);
    }
    size_t want_n = json_array_size(jids);
    size_t cap = max < want_n + 8 ? max : want_n + 8;
    int32_t *ids = malloc((cap + 1) * sizeof(int32_t));
    modattn_token_offset *offs = malloc((cap + 1) * sizeof(modattn_token_offset));
    size_t n = 0;
    int rc = modattn_tokenize_offsets(t, (const char *)text, len, ids, offs, cap, &n);
    size_t first = 0, common = rc == 0 ? (n < want_n ? n : want_n) : 0;
    for (; first < common; first++) {
        int32_t w = (int32_t)json_integer_value(json_array_get(jids, first));
        if (ids[first] != w) break;
        if (joff) {
            json_t *o = json_array_get(joff, first);
            size_t s = (size_t)json_integer_value(json_array_get(o, 0));
            size_t e = (size_t)json_integer_value(json_array_get(o, 1));
            if (offs[first].start != s || offs[first].end != e) break;
        }
    }
    bool ok = rc == 0 && n == want_n && first == common;
    if (!ok) {
        fprintf(stderr, "\nMISMATCH %s line %d, input ", where, line);
        print_escaped(stderr, text, len, 160);
        fprintf(stderr, "\n");
        if (rc) {
            fprintf(stderr, "  modattn_tokenize failed: %s\n", modattn_last_error());
        } else {
            if (n != want_n) fprintf(stderr, "  count: HF %zu, ours %zu\n", want_n, n);
            size_t from = first > 3 ? first - 3 : 0;
            fprintf(stderr, "  first difference at token %zu\n  %-5s %-32s %-32s\n", first, "#",
                    "HF id token [start,end)", "ours id token [start,end)");
            size_t hi = n > want_n ? n : want_n;
            for (size_t i = from; i < hi && i < first + 8; i++) {
                char a[64] = "-", b[64] = "-";
                if (i < want_n) {
                    int32_t w = (int32_t)json_integer_value(json_array_get(jids, i));
                    json_t *o = joff ? json_array_get(joff, i) : NULL;
                    snprintf(a, sizeof a, "%d %s [%lld,%lld)", (int)w, tok_str(t, w),
                             o ? (long long)json_integer_value(json_array_get(o, 0)) : -1LL,
                             o ? (long long)json_integer_value(json_array_get(o, 1)) : -1LL);
                }
                if (i < n)
                    snprintf(b, sizeof b, "%d %s [%zu,%zu)", (int)ids[i], tok_str(t, ids[i]),
                             offs[i].start, offs[i].end);
                fprintf(stderr, "  %s%-4zu %-32s %-32s\n", i == first ? ">" : " ", i, a, b);
            }
        }
    }
    free(text);
    free(ids);
    free(offs);
    return ok;
}

/* Runs every line of a fixture; variant lines load their tokenizer on first use. */
static stats run_fixture(const char *path, const modattn_tokenizer *base, golden_variant_fn load_variant) {
    stats st = {0, 0};
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s (run tools/make_token_goldens.py)", path);
    if (!f) return st;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0;
    char cur_name[64] = "";
    modattn_tokenizer *vt = NULL;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        if (lineno == 1) continue; /* header */
        json_error_t err;
        json_t *rec = json_loads(line, JSON_ALLOW_NUL, &err);
        if (!rec) {
            CHECK_MSG(0, "%s:%d: %s", path, lineno, err.text);
            continue;
        }
        const modattn_tokenizer *t = base;
        const char *variant = json_string_value(json_object_get(rec, "variant"));
        if (variant && load_variant) {
            if (strcmp(variant, cur_name) != 0) {
                modattn_tokenizer_free(vt);
                vt = load_variant(variant);
                snprintf(cur_name, sizeof cur_name, "%s", variant);
                CHECK_MSG(vt != NULL, "variant %s does not load", variant);
            }
            t = vt;
        }
        if (t) {
            char where[160];
            snprintf(where, sizeof where, "%s%s%s", path, variant ? " variant " : "", variant ? variant : "");
            st.inputs++;
            if (check_record(t, rec, where, lineno)) st.matched++;
        }
        json_decref(rec);
    }
    modattn_tokenizer_free(vt);
    free(line);
    fclose(f);
    return st;
}

#endif
