/* tests/model/test_sparse.c — SPLADE (modattn/sparse.h) against sentence-transformers' SparseEncoder:
 * tests/fixtures/sparse_golden.json (tools/make_sparse_goldens.py) holds, for .models/splade-tiny
 * (a 2-layer BertForMaskedLM), every non-zero weight of six texts (one over 512 tokens, cut).
 * Checked: the same non-zero ids, each weight within 1e-5 relative + 5e-6 absolute (close_rel), the
 * vectors' cosine >= 0.99999; every
 * text alone equal bit for bit to itself in the whole batch and in batches of another token budget
 * and another thread count; top-k and threshold pruning against the full vector; and the refusals:
 * a sentence-embedding model (no *ForMaskedLM), a *ForMaskedLM whose weights lack the head, a bad
 * threshold. Needs `make model`. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "modattn/sparse.h"
#include "test_util.h"

/* 1e-5 relative, and 5e-6 absolute: a weight is log(1 + logit), a logit a sum of terms of ~1 in
 * fp32, and the fp32 encoder's rounding moves it by up to ~3e-6 whoever computes it (measured: this
 * library 2.98e-6 from transformers in float64, sentence-transformers' own fp32 golden 3.10e-6,
 * transformers fp32 on one text 3.0e-6 from the batched golden) */
static bool close_rel(double got, double want) { return fabs(got - want) <= 1e-5 * fabs(want) + 5e-6; }

static bool same_vec(const modattn_sparse_vec *a, const modattn_sparse_vec *b) {
    return a->n == b->n && memcmp(a->ids, b->ids, a->n * sizeof *a->ids) == 0 &&
           memcmp(a->weights, b->weights, a->n * sizeof *a->weights) == 0;
}

/* tiny-bert-cls's weights (no MLM head) under a config.json that claims BertForMaskedLM */
static void check_missing_head(modattn_ctx *ctx) {
    char tmpl[] = "/tmp/modattn-sparse-XXXXXX";
    char *d = mkdtemp(tmpl);
    CHECK(d != NULL);
    if (!d) return;
    char p[512], src[512];
    json_t *cfg = json_load_file(".models/tiny-bert-cls/config.json", 0, NULL);
    CHECK(cfg != NULL);
    json_object_set_new(cfg, "architectures", json_pack("[s]", "BertForMaskedLM"));
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
    modattn_sparse_encoder *e = NULL;
    CHECK_ERR(modattn_sparse_load(ctx, d, NULL, &e), MODATTN_EFORMAT, "masked-language-model head is missing");
    CHECK(e == NULL);
    for (int i = 0; i < 2; i++) snprintf(p, sizeof p, "%s/%s", d, links[i]), unlink(p);
    snprintf(p, sizeof p, "%s/config.json", d), unlink(p);
    rmdir(d);
}

int main(void) {
    if (access(".models/splade-tiny/model.safetensors", R_OK) != 0) {
        printf("test_sparse: not available here: .models/splade-tiny missing (run `make model`)\n");
        return 77;
    }
    json_t *g = json_load_file("tests/fixtures/sparse_golden.json", 0, NULL);
    CHECK(g != NULL);
    if (!g) return test_finish("test_sparse");
    modattn_ctx *ctx = NULL;
    CHECK(modattn_ctx_create(NULL, &ctx) == 0);
    modattn_sparse_encoder *e = NULL;
    int st = modattn_sparse_load(ctx, ".models/splade-tiny", NULL, &e);
    CHECK_MSG(st == 0, "load: %s", modattn_last_error());
    if (st) return test_finish("test_sparse");
    const modattn_sparse_info *in = modattn_sparse_get_info(e);
    CHECK(in->vocab == 30522 && in->hidden == 128 && in->layers == 2);
    CHECK(in->max_tokens == (size_t)json_integer_value(json_object_get(g, "max_seq_length")));
    CHECK(strcmp(in->pooling, "max") == 0 && strcmp(in->activation, "relu") == 0);
    CHECK(strcmp(in->architecture, "BertForMaskedLM") == 0);

    const json_t *rows = json_object_get(g, "rows");
    const size_t n = json_array_size(rows);
    const char **texts = calloc(n, sizeof *texts);
    for (size_t i = 0; i < n; i++) texts[i] = json_string_value(json_object_get(json_array_get(rows, i), "text"));
    modattn_sparse_vec *all = calloc(n, sizeof *all), *again = calloc(n, sizeof *again);
    int32_t *ntok = calloc(n, sizeof *ntok);
    CHECK(modattn_sparse_encode(e, NULL, texts, NULL, n, NULL, all, ntok) == 0);
    CHECK(ntok[n - 1] == 512); /* the long text is cut */
    size_t ok_ids = 0, ok_w = 0, nw = 0, ok_alone = 0;
    double worst = 0, worst_abs = 0, min_cos = 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *w = json_object_get(json_array_get(rows, i), "weights");
        bool ids_same = all[i].n == json_object_size(w);
        for (size_t k = 0; k < all[i].n; k++) {
            char key[16];
            snprintf(key, sizeof key, "%d", (int)all[i].ids[k]);
            const json_t *v = json_object_get(w, key);
            if (k > 0) CHECK(all[i].ids[k] > all[i].ids[k - 1]);
            CHECK(all[i].weights[k] > 0);
            if (!v) {
                ids_same = false;
                continue;
            }
            const double want = json_real_value(v);
            const bool good = close_rel(all[i].weights[k], want);
            CHECK_MSG(good, "text %zu id %d: %.9g (sentence-transformers %.9g)", i, (int)all[i].ids[k],
                      (double)all[i].weights[k], want);
            ok_w += good, nw++;
            if (fabs(all[i].weights[k] - want) / want > worst) worst = fabs(all[i].weights[k] - want) / want;
            if (fabs(all[i].weights[k] - want) > worst_abs) worst_abs = fabs(all[i].weights[k] - want);
        }
        double dot = 0, na = 0, nb = 0;
        for (size_t k = 0; k < all[i].n; k++) {
            char key[16];
            snprintf(key, sizeof key, "%d", (int)all[i].ids[k]);
            const double want = json_real_value(json_object_get(w, key));
            dot += want * all[i].weights[k], na += (double)all[i].weights[k] * all[i].weights[k];
        }
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)w, key, val) nb += json_real_value(val) * json_real_value(val);
        const double cosv = dot / sqrt(na * nb);
        CHECK_MSG(cosv >= 0.99999, "text %zu: cosine %.9f to sentence-transformers'", i, cosv);
        if (cosv < min_cos) min_cos = cosv;
        CHECK_MSG(ids_same, "text %zu: %zu non-zero weights, sentence-transformers %zu (or other ids)", i, all[i].n,
                  json_object_size(w));
        ok_ids += ids_same;
        modattn_sparse_vec one;
        CHECK(modattn_sparse_encode(e, NULL, &texts[i], NULL, 1, NULL, &one, NULL) == 0);
        const bool bit = same_vec(&one, &all[i]);
        CHECK_MSG(bit, "text %zu: alone differs from batched", i);
        ok_alone += bit;
        modattn_sparse_vec_free(&one, 1);
    }
    /* another batch budget (other neighbours, other padding): the same bits */
    CHECK(modattn_model_set_batch_tokens(modattn_sparse_model(e), 100) == 0);
    CHECK(modattn_sparse_encode(e, NULL, texts, NULL, n, NULL, again, NULL) == 0);
    size_t same2 = 0;
    for (size_t i = 0; i < n; i++) same2 += same_vec(&again[i], &all[i]);
    CHECK_MSG(same2 == n, "%zu/%zu texts the same under another batch budget", same2, n);
    modattn_sparse_vec_free(again, n);
    /* another thread count (a one-thread ctx: the model's pool is the ctx's thread count) */
    {
        modattn_ctx_options co = {0};
        co.threads = 1;
        modattn_ctx *c1 = NULL;
        modattn_sparse_encoder *e1 = NULL;
        CHECK(modattn_ctx_create(&co, &c1) == 0);
        CHECK(modattn_sparse_load(c1, ".models/splade-tiny", NULL, &e1) == 0);
        CHECK(modattn_sparse_encode(e1, NULL, texts, NULL, n, NULL, again, NULL) == 0);
        size_t same1 = 0;
        for (size_t i = 0; i < n; i++) same1 += same_vec(&again[i], &all[i]);
        CHECK_MSG(same1 == n, "%zu/%zu texts the same on one thread", same1, n);
        modattn_sparse_vec_free(again, n);
        modattn_sparse_free(e1);
        modattn_ctx_free(c1);
    }
    printf("splade-tiny: %zu/%zu texts with sentence-transformers' non-zero ids, %zu/%zu weights within tolerance "
           "(worst %.2g absolute, %.2g relative), min cosine %.9f, %zu/%zu alone = batched bit for bit\n", ok_ids, n,
           ok_w, nw, worst_abs, worst, min_cos, ok_alone, n);

    /* pruning: top-k keeps the k largest, ties to the smaller id; threshold drops the smaller */
    modattn_sparse_options po = {.top_k = 5};
    CHECK(modattn_sparse_encode(e, NULL, &texts[1], NULL, 1, &po, again, NULL) == 0);
    {
        const modattn_sparse_vec *f = &all[1];
        float *sorted = malloc(f->n * sizeof *sorted);
        memcpy(sorted, f->weights, f->n * sizeof *sorted);
        for (size_t a = 0; a < f->n; a++) /* descending */
            for (size_t b = a + 1; b < f->n; b++)
                if (sorted[b] > sorted[a]) { float t = sorted[a]; sorted[a] = sorted[b], sorted[b] = t; }
        CHECK(again[0].n == 5);
        for (size_t k = 0; k < again[0].n; k++) {
            CHECK(again[0].weights[k] >= sorted[4]);
            if (k) CHECK(again[0].ids[k] > again[0].ids[k - 1]);
        }
        modattn_sparse_vec_free(again, 1);
        po = (modattn_sparse_options){.threshold = sorted[9]};
        CHECK(modattn_sparse_encode(e, NULL, &texts[1], NULL, 1, &po, again, NULL) == 0);
        CHECK_MSG(again[0].n == 10, "threshold kept %zu, want 10", again[0].n);
        for (size_t k = 0; k < again[0].n; k++) CHECK(again[0].weights[k] >= sorted[9]);
        modattn_sparse_vec_free(again, 1);
        free(sorted);
    }
    po = (modattn_sparse_options){.threshold = -1};
    CHECK_ERR(modattn_sparse_encode(e, NULL, texts, NULL, 1, &po, again, NULL), MODATTN_EINVAL, "threshold");
    po = (modattn_sparse_options){.threshold = NAN};
    CHECK_ERR(modattn_sparse_encode(e, NULL, texts, NULL, 1, &po, again, NULL), MODATTN_EINVAL, "threshold");
    int32_t bad[2] = {101, 40000};
    const int32_t *br = bad;
    size_t bc = 2;
    CHECK_ERR(modattn_sparse_encode_ids(e, NULL, &br, &bc, 1, NULL, again), MODATTN_EINVAL, "vocabulary");
    CHECK(again[0].n == 0 && again[0].ids == NULL);

    /* no MLM head: refused naming what is missing */
    modattn_sparse_encoder *x = NULL;
    CHECK_ERR(modattn_sparse_load(ctx, ".models/tiny-bert-cls", NULL, &x), MODATTN_EUNSUPPORTED, "ForMaskedLM");
    CHECK(x == NULL);
    CHECK_ERR(modattn_sparse_load(ctx, ".models/tiny-cross-encoder", NULL, &x), MODATTN_EUNSUPPORTED, "ForMaskedLM");
    check_missing_head(ctx);

    modattn_sparse_vec_free(all, n);
    free(all), free(again), free(ntok), free(texts);
    modattn_sparse_free(e);
    modattn_ctx_free(ctx);
    json_decref(g);
    return test_finish("test_sparse");
}
