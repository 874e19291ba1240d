/* bench/make_store.c — a store of N synthetic chunks for the search benchmarks, bound to a real
 * model (its name, weights hash and dim, so `modattn search --model DIR` accepts it): random
 * L2-normalised vectors, a text of 60 made-up words per chunk (for the keyword index), 1000 chunks
 * per document and transaction, then
 * the vector file (`modattn index` writes it the same way). Not a test.
 *   build/bench/make_store DB MODEL_DIR N [TEXTS_DB] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "pipeline/internal_search.h"
#include "pipeline/internal_store.h"

/* The chunk texts of another store (TEXTS_DB), to lend real text to the synthetic chunks. */
static char **load_texts(const char *path, size_t *n) {
    modattn_store *t = NULL;
    *n = 0;
    if (modattn_store_open(path, MODATTN_STORE_READONLY, &t)) return NULL;
    size_t cap = 0;
    char **v = NULL;
    for (int64_t id = 1; id < 10000000; id++) {
        modattn_store_chunk c;
        int st = modattn__store_get_chunk(t, id, &c);
        if (st == MODATTN_ENOTFOUND) {
            if (id > (int64_t)*n + 100000) break; /* far past the last id */
            continue;
        }
        if (st) break;
        if (*n == cap) {
            cap = cap ? cap * 2 : 1024;
            v = realloc(v, cap * sizeof *v);
        }
        v[(*n)++] = strdup(c.text);
        modattn__store_chunk_clear(&c);
    }
    modattn_store_close(t);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: make_store DB MODEL_DIR N [TEXTS_DB|-] [VECTORS]\n"
                        "  TEXTS_DB: a store whose chunk texts the synthetic chunks take in turn (real text for\n"
                        "  the keyword index); - or absent: 60 made-up words each\n"
                        "  VECTORS: N x dim float32 (little-endian, row-major) to store in order (chunk id i + 1\n"
                        "  holds row i; bench/ann_data.py writes them); absent: random unit vectors\n");
        return 2;
    }
    size_t ntexts = 0;
    const bool with_texts = argc >= 5 && strcmp(argv[4], "-") != 0;
    char **texts = with_texts ? load_texts(argv[4], &ntexts) : NULL;
    FILE *vecs = argc == 6 ? fopen(argv[5], "rb") : NULL;
    if (argc == 6 && !vecs) {
        fprintf(stderr, "make_store: cannot open %s\n", argv[5]);
        return 1;
    }
    if (with_texts && !ntexts) {
        fprintf(stderr, "make_store: no chunk texts in %s\n", argv[4]);
        return 1;
    }
    const long long n = atoll(argv[3]);
    modattn_ctx *ctx = NULL;
    modattn_model *m = NULL;
    modattn_store *s = NULL;
    if (modattn_ctx_create(NULL, &ctx) || modattn_model_load(ctx, argv[2], &m) ||
        modattn_store_open(argv[1], MODATTN_STORE_CREATE, &s)) {
        fprintf(stderr, "make_store: %s\n", modattn_last_error());
        return 1;
    }
    const modattn_model_info *in = modattn_model_get_info(m);
    modattn_store_model sm = modattn_store_model_of(in);
    if (modattn__store_bind_model(s, &sm)) {
        fprintf(stderr, "make_store: %s\n", modattn_last_error());
        return 1;
    }
    const size_t dim = in->dim;
    float *v = malloc(dim * sizeof *v);
    unsigned long long rng = 88172645463325252ull;
    int st = 0;
    for (long long done = 0, d = 0; done < n && !st; d++) {
        char path[64];
        snprintf(path, sizeof path, "/synthetic/doc%06lld.txt", d);
        const long long nc = n - done < 1000 ? n - done : 1000;
        modattn_store_doc doc;
        memset(&doc, 0, sizeof doc);
        doc.path = path, doc.kind = "text", doc.nchunks = nc, doc.chunk_tokens = 256, doc.overlap = 32;
        if ((st = modattn__store_begin(s)) || (st = modattn__store_put_document(s, &doc))) break;
        for (long long c = 0; c < nc && !st; c++) {
            if (vecs) {
                if (fread(v, sizeof *v, dim, vecs) != dim) {
                    fprintf(stderr, "make_store: %s holds fewer than %lld vectors of %zu floats\n", argv[5], n, dim);
                    st = MODATTN_EINVAL;
                    break;
                }
            } else {
                for (size_t k = 0; k < dim; k++) {
                    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                    v[k] = (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
                }
            }
            modattn__vec_normalize(v, dim);
            /* 60 words of a 20,000-word vocabulary drawn log-uniformly (a few words in most chunks,
             * most words in a few), so that the keyword index has posting lists of every length */
            char text[1024];
            int tl = snprintf(text, sizeof text, "chunk %lld of document %lld:", c, d);
            for (int w = 0; w < 60 && tl < (int)sizeof text - 32; w++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                const double u = (double)(rng >> 11) / 9007199254740992.0;
                const unsigned r = (unsigned)exp(u * log(20000.0)) - 1;
                static const char *const syl[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ba", "de",
                                                  "fi", "go", "hu", "ja", "ke", "li", "ma", "no", "pe", "qui"};
                tl += snprintf(text + tl, sizeof text - (size_t)tl, " %s%s%s%s", syl[r % 20], syl[r / 20 % 20],
                               syl[r / 400 % 20], r >= 8000 ? syl[r / 8000 % 20] : "");
            }
            const char *ct = text;
            if (ntexts) {
                ct = texts[(size_t)(done + c) % ntexts];
                tl = (int)strlen(ct);
            }
            modattn_store_chunk_in ci = {c, c * 100, c * 100 + 100, c + 1, 0, 80, ct, (size_t)tl};
            st = modattn__store_put_chunk(s, doc.id, &ci, v, dim);
        }
        if (!st) st = modattn__store_commit(s);
        done += nc;
    }
    if (!st) st = modattn__store_write_vector_file(s);
    if (st) fprintf(stderr, "make_store: %s\n", modattn_last_error());
    free(v);
    if (vecs) fclose(vecs);
    modattn_store_close(s);
    modattn_model_free(m);
    modattn_ctx_free(ctx);
    return st ? 1 : 0;
}
