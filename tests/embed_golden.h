/* tests/embed_golden.h — reads an embedding fixture written by tools/make_goldens.py
 * (one JSON object per line: "text", "bytes_b64" for invalid UTF-8 inputs, "ids", "truncated",
 * "embedding") into memory. Texts may hold U+0000, hence JSON_ALLOW_NUL. */
#ifndef MODATTN_TESTS_EMBED_GOLDEN_H
#define MODATTN_TESTS_EMBED_GOLDEN_H
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct embed_golden {
    char *text; /* the exact bytes to embed (raw bytes for bytes_b64 inputs), NUL-terminated */
    size_t len;
    bool invalid_utf8; /* the line had bytes_b64 */
    bool truncated;    /* sentence-transformers truncated it at max_seq_length */
    int32_t *ids;
    size_t nids;
    float *emb;
    size_t dim;
} embed_golden;

static int eg_b64_val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 ('=' padding) into a malloc'ed, NUL-terminated buffer; NULL on a bad digit. */
static char *eg_b64_decode(const char *s, size_t *out_len) {
    size_t n = strlen(s), k = 0;
    char *o = malloc(n / 4 * 3 + 4);
    unsigned acc = 0;
    int bits = 0;
    if (!o) return NULL;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        int v = eg_b64_val((unsigned char)s[i]);
        if (v < 0) {
            free(o);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (char)((acc >> bits) & 0xff);
        }
    }
    o[k] = '\0';
    *out_len = k;
    return o;
}

static void eg_free(embed_golden *g, size_t n) {
    for (size_t i = 0; g && i < n; i++) {
        free(g[i].text);
        free(g[i].ids);
        free(g[i].emb);
    }
    free(g);
}

/* The sanitizer lane (`make test-sanitize`) spent ~16 minutes embedding the fixtures again with
 * every CPU implementation: numbers the plain lane already checks, while what the sanitizers look
 * for (memory errors) depends on the code paths, which a subset takes too. A sanitized build keeps
 * every 4th input, the longest one and every invalid-UTF-8 one (moved to the front; all n stay for
 * eg_free), says so, and returns how many; other builds keep all. */
#if defined(__SANITIZE_ADDRESS__)
#define EG_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EG_SANITIZED 1
#endif
#endif
static inline size_t eg_sanitizer_subset(embed_golden *g, size_t n, const char *label) {
#ifdef EG_SANITIZED
    size_t longest = 0, m = 0;
    for (size_t i = 1; i < n; i++)
        if (g[i].nids > g[longest].nids) longest = i;
    for (size_t i = 0; i < n; i++) /* (position i still holds input i here) */
        if (i % 4 == 0 || i == longest || g[i].invalid_utf8) {
            embed_golden t = g[m];
            g[m++] = g[i];
            g[i] = t;
        }
    printf("%s: sanitized build: %zu of %zu inputs (every 4th, the longest, the invalid UTF-8 ones); "
           "the plain build checks all\n", label, m, n);
    return m;
#else
    (void)g, (void)label;
    return n;
#endif
}

/* Loads every line of `path`. Returns NULL (and prints why on stderr) when the file cannot be read
 * or a line is malformed. */
static embed_golden *eg_load(const char *path, size_t *n_out) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open (made by tools/make_goldens.py)\n", path);
        return NULL;
    }
    embed_golden *g = NULL;
    size_t n = 0, cap = 0, lcap = 0;
    char *line = NULL;
    ssize_t got;
    bool ok = true;
    while (ok && (got = getline(&line, &lcap, f)) > 0) {
        json_error_t err;
        json_t *j = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &err);
        if (!j) {
            fprintf(stderr, "%s line %zu: %s\n", path, n + 1, err.text);
            ok = false;
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 128;
            embed_golden *ng = realloc(g, cap * sizeof *g);
            if (!ng) {
                json_decref(j);
                ok = false;
                break;
            }
            g = ng;
        }
        embed_golden *e = &g[n++];
        memset(e, 0, sizeof *e);
        json_t *b64 = json_object_get(j, "bytes_b64"), *text = json_object_get(j, "text");
        json_t *ids = json_object_get(j, "ids"), *emb = json_object_get(j, "embedding");
        if (json_is_string(b64)) {
            e->invalid_utf8 = true;
            e->text = eg_b64_decode(json_string_value(b64), &e->len);
        } else if (json_is_string(text)) {
            e->len = json_string_length(text);
            e->text = malloc(e->len + 1);
            if (e->text) {
                memcpy(e->text, json_string_value(text), e->len);
                e->text[e->len] = '\0';
            }
        }
        e->truncated = json_is_true(json_object_get(j, "truncated"));
        e->nids = json_array_size(ids);
        e->dim = json_array_size(emb);
        e->ids = malloc((e->nids + 1) * sizeof *e->ids);
        e->emb = malloc((e->dim + 1) * sizeof *e->emb);
        if (!e->text || !e->ids || !e->emb || !json_is_array(ids) || !json_is_array(emb) ||
            e->nids == 0 || e->dim == 0) {
            fprintf(stderr, "%s line %zu: missing or malformed text/ids/embedding\n", path, n);
            ok = false;
        } else {
            for (size_t k = 0; k < e->nids; k++)
                e->ids[k] = (int32_t)json_integer_value(json_array_get(ids, k));
            for (size_t k = 0; k < e->dim; k++)
                e->emb[k] = (float)json_number_value(json_array_get(emb, k));
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    if (!ok || n == 0) {
        if (ok) fprintf(stderr, "%s: no lines\n", path);
        eg_free(g, n);
        return NULL;
    }
    *n_out = n;
    return g;
}

static double eg_dot(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t k = 0; k < n; k++) d += (double)a[k] * b[k];
    return d;
}

static double eg_cosine(const float *a, const float *b, size_t n) {
    return eg_dot(a, b, n) / sqrt(eg_dot(a, a, n) * eg_dot(b, b, n) + 1e-300);
}

#endif
