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
 * for (memory errors) depends on the code paths, which a subset takes too. The subset is chosen
 * by shape, not by index: every input whose token count is a block boundary or next to one
 * (EG_BOUNDARIES: 1, 2, 63, 64, 65, 127, 128, 129, 255, 256; where a fixture has none of a length,
 * its nearest one), the longest, every invalid-UTF-8 and every truncated input (moved to the
 * front; all n stay for eg_free). A sanitized build says so and returns how many; other builds
 * keep all. eg_subset_missing() names what a subset left out that it must hold. */
#if defined(__SANITIZE_ADDRESS__)
#define EG_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EG_SANITIZED 1
#endif
#endif
static const size_t EG_BOUNDARIES[] = {1, 2, 63, 64, 65, 127, 128, 129, 255, 256};
#define EG_NBOUNDARIES (sizeof EG_BOUNDARIES / sizeof EG_BOUNDARIES[0])

/* the token count nearest to b among g[0..n) (the smaller on a tie); 0 when n is 0 */
static inline size_t eg_nearest_len(const embed_golden *g, size_t n, size_t b) {
    size_t best = 0, bd = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const size_t d = g[i].nids > b ? g[i].nids - b : b - g[i].nids;
        if (d < bd || (d == bd && g[i].nids < best)) bd = d, best = g[i].nids;
    }
    return best;
}
/* whether input i of g[0..n) belongs in the sanitizer subset */
static inline bool eg_in_subset(const embed_golden *g, size_t n, size_t i, size_t longest) {
    if (i == longest || g[i].invalid_utf8 || g[i].truncated) return true;
    for (size_t b = 0; b < EG_NBOUNDARIES; b++)
        if (g[i].nids == eg_nearest_len(g, n, EG_BOUNDARIES[b])) return true;
    return false;
}
/* n, or at most m in a sanitized build (a check whose code path one input already takes). */
#ifdef EG_SANITIZED
#define EG_SANITIZED_MAX(n, m) ((n) < (m) ? (n) : (m))
#else
#define EG_SANITIZED_MAX(n, m) (n)
#endif

/* The shape subset in any build (the inputs eg_in_subset keeps moved to the front, the others after
 * them: all n stay for eg_free); prints what it kept, after `label: why:`. Returns how many. */
static inline size_t eg_shape_subset(embed_golden *g, size_t n, const char *label, const char *why) {
    size_t longest = 0, m = 0;
    for (size_t i = 1; i < n; i++)
        if (g[i].nids > g[longest].nids) longest = i;
    /* class of each input: 0 left out; 1 kept; 2 kept, truncated with an earlier kept truncated
     * input's token count (placed after the 1s: eg_sanitizer_embed_count gives the prefix to embed) */
    unsigned char *cls = calloc(n ? n : 1, 1);
    embed_golden *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!cls || !tmp) { /* no memory for the choice: all of them */
        free(cls), free(tmp);
        return n;
    }
    for (size_t i = 0; i < n; i++) {
        if (!eg_in_subset(g, n, i, longest)) continue;
        cls[i] = 1;
        for (size_t j = 0; j < i && g[i].truncated && cls[i] == 1; j++)
            if (cls[j] && g[j].truncated && g[j].nids == g[i].nids) cls[i] = 2;
    }
    const unsigned char order[3] = {1, 2, 0};
    size_t k = 0;
    for (int o = 0; o < 3; o++)
        for (size_t i = 0; i < n; i++)
            if (cls[i] == order[o]) tmp[k++] = g[i];
    for (size_t i = 0; i < n; i++) m += cls[i] != 0;
    memcpy(g, tmp, n * sizeof *g);
    free(cls), free(tmp);
    printf("%s: %s: %zu of %zu inputs (token counts at or next to the block boundaries "
           "1, 2, 63-65, 127-129, 255, 256 or the nearest there is, the longest, the invalid UTF-8 and "
           "the truncated ones)\n", label, why, m, n);
    return m;
}

static inline size_t eg_sanitizer_subset(embed_golden *g, size_t n, const char *label) {
#ifdef EG_SANITIZED
    return eg_shape_subset(g, n, label, "sanitized build (the plain build checks all)");
#else
    (void)g, (void)label;
    return n;
#endif
}
/* After eg_sanitizer_subset (m kept): how many of them, from the front, to embed in a sanitized
 * build: all but the truncated inputs that repeat an earlier truncated one's token count (their
 * tokenization differs, which the ids check sees; their embedding is the same shape). m elsewhere. */
static inline size_t eg_sanitizer_embed_count(const embed_golden *g, size_t m) {
#ifdef EG_SANITIZED
    size_t k = 0;
    while (k < m) {
        bool dup = false;
        for (size_t j = 0; j < k && g[k].truncated && !dup; j++) dup = g[j].truncated && g[j].nids == g[k].nids;
        if (dup) break;
        k++;
    }
    return k;
#else
    (void)g;
    return m;
#endif
}
/* After eg_sanitizer_subset (m of n kept, at the front): writes into why what the subset lacks
 * (an invalid-UTF-8 or truncated input, or a boundary token count the fixture has) and returns
 * false, else true. */
static inline bool eg_subset_missing(const embed_golden *g, size_t m, size_t n, char *why, size_t len) {
    why[0] = '\0';
    for (size_t i = m; i < n; i++)
        if (g[i].invalid_utf8 || g[i].truncated) {
            snprintf(why, len, "an input %s (%zu tokens) left out", g[i].invalid_utf8 ? "of invalid UTF-8" : "truncated",
                     g[i].nids);
            return false;
        }
    for (size_t b = 0; b < EG_NBOUNDARIES; b++) {
        const size_t want = eg_nearest_len(g, n, EG_BOUNDARIES[b]);
        bool have = false;
        for (size_t i = 0; i < m && !have; i++) have = g[i].nids == want;
        if (!have) {
            snprintf(why, len, "no input of %zu tokens (the nearest to the boundary %zu)", want, EG_BOUNDARIES[b]);
            return false;
        }
    }
    return true;
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
