/* bench/make_store.c — a store of N synthetic chunks for the search benchmarks, bound to a real
 * model (its name, weights hash and dim, so `modattn search --model DIR` accepts it): random
 * L2-normalised vectors, a short text per chunk, 1000 chunks per document and transaction, then
 * the vector file (`modattn index` writes it the same way). Not a test.
 *   build/bench/make_store DB MODEL_DIR N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "modattn/search.h"
#include "modattn/store.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: make_store DB MODEL_DIR N\n");
        return 2;
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
    modattn_store_model sm = {in->name, in->weights_hash, in->dim, in->identity};
    if (modattn_store_bind_model(s, &sm)) {
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
        if ((st = modattn_store_begin(s)) || (st = modattn_store_put_document(s, &doc))) break;
        for (long long c = 0; c < nc && !st; c++) {
            for (size_t k = 0; k < dim; k++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                v[k] = (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
            }
            modattn_vec_normalize(v, dim);
            char text[96];
            int tl = snprintf(text, sizeof text, "synthetic chunk %lld of document %lld", c, d);
            modattn_store_chunk_in ci = {c, c * 100, c * 100 + 100, c + 1, 0, 12, text, (size_t)tl};
            st = modattn_store_put_chunk(s, doc.id, &ci, v, dim);
        }
        if (!st) st = modattn_store_commit(s);
        done += nc;
    }
    if (!st) st = modattn_store_write_vector_file(s);
    if (st) fprintf(stderr, "make_store: %s\n", modattn_last_error());
    free(v);
    modattn_store_close(s);
    modattn_model_free(m);
    modattn_ctx_free(ctx);
    return st ? 1 : 0;
}
