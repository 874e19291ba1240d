/* examples/embed.c — embed a few sentences with a sentence-transformers model directory and print
 * how close they are in meaning. Builds against the installed library:
 *
 *     cc embed.c $(pkg-config --cflags --libs modattn) -o embed
 *     ./embed .models/all-MiniLM-L6-v2 "A cat sits on the mat." "A kitten rests on a rug." "Stock prices fell."
 */
#include <modattn/modattn.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what) {
    fprintf(stderr, "embed: %s: %s\n", what, modattn_last_error()); /* modattn's message says why */
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR TEXT [TEXT...]\n", argv[0]);
        return 2;
    }
    printf("modattn %s\n", modattn_version());
    modattn_ctx *ctx = NULL;
    modattn_model *model = NULL;
    if (modattn_ctx_create(NULL, &ctx) != 0) return fail("context");
    if (modattn_model_load(ctx, argv[1], &model) != 0) {
        modattn_ctx_free(ctx);
        return fail(argv[1]);
    }
    const size_t n = (size_t)(argc - 2), dim = modattn_model_dim(model);
    const char *const *texts = (const char *const *)(argv + 2);
    float *vec = malloc(n * dim * sizeof *vec);
    int32_t *ntok = malloc(n * sizeof *ntok);
    int rc = 0;
    if (!vec || !ntok) {
        fprintf(stderr, "embed: out of memory\n");
        rc = 1;
    } else if (modattn_model_embed(model, texts, NULL, n, vec, ntok) != 0) {
        rc = fail("embed");
    } else {
        printf("%zu texts, %zu dimensions\n", n, dim);
        /* all-MiniLM-L6-v2 normalises its vectors: the dot product is the cosine */
        for (size_t i = 1; i < n; i++) {
            float dot = 0;
            for (size_t j = 0; j < dim; j++) dot += vec[j] * vec[i * dim + j];
            printf("cosine(text 1, text %zu) = %.4f  (%d tokens) %s\n", i + 1, dot, ntok[i], texts[i]);
        }
    }
    free(ntok);
    free(vec);
    modattn_model_free(model);
    modattn_ctx_free(ctx);
    return rc;
}
