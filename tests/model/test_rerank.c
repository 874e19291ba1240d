/* tests/model/test_rerank.c — cross-encoders (modattn/rerank.h) against transformers and
 * sentence-transformers: tests/fixtures/rerank_golden.json (tools/make_rerank_goldens.py) holds, for
 * .models/tiny-cross-encoder (1 label) and tiny-cross-encoder-3 (3 labels, id2label), the ids and
 * token types `tokenizers` gives for each pair with truncation "longest_first", the logits of
 * AutoModelForSequenceClassification and CrossEncoder.predict's scores. Checked: ids and types
 * identical, logits and scores within 1e-5 relative (1e-6 absolute near 0), every pair's score
 * alone equal bit for bit to its score in the whole batch and in batches of another token budget,
 * the labels and activation read from config.json, and the refusals: a sentence-embedding model
 * (no classifier architecture), a classifier architecture whose weights lack the head, a bad flag.
 * Needs `make model`. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "modattn/rerank.h"
#include "test_util.h"

static bool close_rel(double got, double want) {
    return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6;
}

static void check_model(modattn_ctx *ctx, const char *name, const json_t *g, const json_t *pairs) {
    char dir[256];
    snprintf(dir, sizeof dir, ".models/%s", name);
    modattn_reranker *r = NULL;
    int st = modattn_reranker_load(ctx, dir, NULL, &r);
    CHECK_MSG(st == 0, "load %s: %s", dir, modattn_last_error());
    if (st) return;
    const modattn_reranker_info *in = modattn_reranker_get_info(r);
    const size_t L = (size_t)json_integer_value(json_object_get(g, "num_labels"));
    CHECK(in->num_labels == L);
    CHECK(in->max_tokens == (size_t)json_integer_value(json_object_get(g, "max_length")));
    const char *act = json_string_value(json_object_get(g, "activation"));
    CHECK_MSG(strcasecmp(in->activation, act) == 0, "activation %s, transformers %s", in->activation, act);
    if (L == 3) CHECK(strcmp(in->labels[0], "contradiction") == 0 && strcmp(in->labels[2], "neutral") == 0);
    const json_t *rows = json_object_get(g, "rows");
    const size_t n = json_array_size(pairs);
    const char **a = calloc(n, sizeof *a), **b = calloc(n, sizeof *b);
    float *all = calloc(n * L, sizeof *all), *raw = calloc(n * L, sizeof *raw), *again = calloc(n * L, sizeof *again);
    int32_t *ntok = calloc(n, sizeof *ntok);
    bool *trunc = calloc(n, sizeof *trunc);
    for (size_t i = 0; i < n; i++) {
        a[i] = json_string_value(json_array_get(json_array_get(pairs, i), 0));
        b[i] = json_string_value(json_array_get(json_array_get(pairs, i), 1));
    }
    CHECK(modattn_reranker_score(r, NULL, a, NULL, b, NULL, n, 0, all, ntok, trunc) == 0);
    CHECK(modattn_reranker_score(r, NULL, a, NULL, b, NULL, n, MODATTN_RERANK_RAW, raw, NULL, NULL) == 0);
    int32_t ids[512], types[512];
    size_t ok_ids = 0, ok_scores = 0, ok_alone = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *row = json_array_get(rows, i);
        const json_t *gi = json_object_get(row, "ids"), *gt = json_object_get(row, "types");
        size_t k = 0;
        bool tr = false;
        CHECK(modattn_reranker_tokenize(r, a[i], strlen(a[i]), b[i], strlen(b[i]), ids, types, 512, &k, &tr) == 0);
        bool same = k == json_array_size(gi) && (size_t)ntok[i] == k && tr == trunc[i];
        for (size_t t = 0; same && t < k; t++)
            same = ids[t] == json_integer_value(json_array_get(gi, t)) &&
                   types[t] == json_integer_value(json_array_get(gt, t));
        CHECK_MSG(same, "%s pair %zu: %zu ids (transformers %zu) or their types differ", name, i, k, json_array_size(gi));
        ok_ids += same;
        CHECK_MSG(tr == json_is_true(json_object_get(row, "truncated")), "%s pair %zu: truncated %d", name, i, (int)tr);
        for (size_t l = 0; l < L; l++) {
            double want = json_real_value(json_array_get(json_object_get(row, "score"), l));
            double wraw = json_real_value(json_array_get(json_object_get(row, "logits"), l));
            bool good = close_rel(all[i * L + l], want) && close_rel(raw[i * L + l], wraw);
            CHECK_MSG(good, "%s pair %zu label %zu: score %.9g (sentence-transformers %.9g), logit %.9g "
                      "(transformers %.9g)", name, i, l, all[i * L + l], want, raw[i * L + l], wraw);
            ok_scores += good;
        }
        float one[8];
        CHECK(modattn_reranker_score(r, NULL, &a[i], NULL, &b[i], NULL, 1, 0, one, NULL, NULL) == 0);
        bool bit = memcmp(one, all + i * L, L * sizeof *one) == 0;
        CHECK_MSG(bit, "%s pair %zu: alone %.9g, batched %.9g", name, i, one[0], all[i * L]);
        ok_alone += bit;
    }
    /* another batch budget (other neighbours, other padding): the same bits */
    CHECK(modattn_model_set_batch_tokens(modattn_reranker_model(r), 200) == 0);
    CHECK(modattn_reranker_score(r, NULL, a, NULL, b, NULL, n, 0, again, NULL, NULL) == 0);
    CHECK(memcmp(again, all, n * L * sizeof *all) == 0);
    printf("%s: %zu/%zu pairs' ids and types identical to tokenizers', %zu/%zu scores within 1e-5 of "
           "transformers, %zu/%zu alone = batched bit for bit\n", name, ok_ids, n, ok_scores, n * L, ok_alone, n);
    /* bad input */
    CHECK_ERR(modattn_reranker_score(r, NULL, a, NULL, b, NULL, 1, 8u, all, NULL, NULL), MODATTN_EINVAL, "flags");
    size_t k2 = 0;
    CHECK_ERR(modattn_reranker_tokenize(r, "q", 1, "p", 1, ids, types, 2, &k2, NULL), MODATTN_EINVAL, "room");
    free(a), free(b), free(all), free(raw), free(again), free(ntok), free(trunc);
    modattn_reranker_free(r);
}

/* tiny-bert-cls's weights (no classifier) under a config.json that claims a classifier */
static void check_missing_head(modattn_ctx *ctx) {
    char tmpl[] = "/tmp/modattn-rerank-XXXXXX";
    char *d = mkdtemp(tmpl);
    CHECK(d != NULL);
    if (!d) return;
    char p[512], src[512];
    json_t *cfg = json_load_file(".models/tiny-bert-cls/config.json", 0, NULL);
    CHECK(cfg != NULL);
    json_object_set_new(cfg, "architectures", json_pack("[s]", "BertForSequenceClassification"));
    snprintf(p, sizeof p, "%s/config.json", d);
    CHECK(json_dump_file(cfg, p, 0) == 0);
    json_decref(cfg);
    const char *links[] = {"model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", d, links[i]);
        CHECK(realpath(".models/tiny-bert-cls", src) != NULL);
        strcat(src, "/"), strcat(src, links[i]);
        CHECK(symlink(src, p) == 0);
    }
    modattn_reranker *r = NULL;
    CHECK_ERR(modattn_reranker_load(ctx, d, NULL, &r), MODATTN_EFORMAT, "classifier");
    CHECK(r == NULL);
    for (int i = 0; i < 2; i++) snprintf(p, sizeof p, "%s/%s", d, links[i]), unlink(p);
    snprintf(p, sizeof p, "%s/config.json", d), unlink(p);
    rmdir(d);
}

int main(void) {
    if (access(".models/tiny-cross-encoder/model.safetensors", R_OK) != 0 ||
        access(".models/tiny-cross-encoder-3/model.safetensors", R_OK) != 0) {
        printf("test_rerank: not available here: .models/tiny-cross-encoder* missing (run `make model`)\n");
        return 77;
    }
    json_t *g = json_load_file("tests/fixtures/rerank_golden.json", 0, NULL);
    CHECK(g != NULL);
    if (!g) return test_finish("test_rerank");
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(NULL, &ctx) == 0);
    const json_t *pairs = json_object_get(g, "pairs");
    check_model(ctx, "tiny-cross-encoder", json_object_get(json_object_get(g, "models"), "tiny-cross-encoder"), pairs);
    check_model(ctx, "tiny-cross-encoder-3", json_object_get(json_object_get(g, "models"), "tiny-cross-encoder-3"), pairs);
    /* a sentence-embedding model is no cross-encoder: refused, naming what is missing */
    modattn_reranker *r = NULL;
    CHECK_ERR(modattn_reranker_load(ctx, ".models/tiny-bert-cls", NULL, &r), MODATTN_EUNSUPPORTED,
              "ForSequenceClassification");
    CHECK_ERR(modattn_reranker_load(ctx, ".models/no-such-model", NULL, &r), MODATTN_ENOTFOUND, "config.json");
    check_missing_head(ctx);
    modattn_ctx_free(ctx);
    json_decref(g);
    return test_finish("test_rerank");
}
