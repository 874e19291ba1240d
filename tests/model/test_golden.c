/* tests/model/test_golden.c — end to end against sentence-transformers' own output
 * (tests/fixtures/golden_*.jsonl, made by tools/make_goldens.py): for every input, the same ids
 * and an embedding with cosine >= 0.99999, on every available CPU attention implementation.
 * Also: a text's embedding does not depend on its batch-mates or on the token budget (1e-6),
 * and the model gives back every byte it took.
 *
 * The model directories come from `make model` (tools/setup_model.sh); when they are missing the
 * test fails and says so: a golden test that skips quietly proves nothing. (The fp32
 * bge-small-en-v1.5 has no golden here: no package carries its weights, so its fixture was never
 * generated (tests/fixtures/golden_meta.json); its int8 weights, dequantised, and a generated CLS
 * model are tested by tests/model.) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "core/internal_core.h"
#include "embed_golden.h"
#include "test_util.h"

#define MIN_COSINE 0.99999
#define BATCH_TOL 1e-6f

static void run_fixture(modattn_ctx *ctx, const char *label, const char *dir, const char *path) {
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        CHECK_MSG(0, "%s: model directory %s is missing: run `make model` (tools/setup_model.sh) "
                  "first", label, dir);
        return;
    }
    size_t n = 0;
    embed_golden *g = eg_load(path, &n);
    CHECK_MSG(g && n > 0, "%s: cannot read the fixture %s", label, path);
    if (!g || n == 0) return;
    const size_t n_all = n;
    n = eg_sanitizer_subset(g, n, label);
    {
        char why[200];
        CHECK_MSG(eg_subset_missing(g, n, n_all, why, sizeof why), "%s: the inputs checked lack %s", label, why);
    }

    modattn_mem_stats m0, m1;
    modattn_mem_get_stats(&m0);
    modattn_model *m = NULL;
    int st = modattn_model_load(ctx, dir, &m);
    CHECK_MSG(st == 0, "%s: load: %s", label, modattn_last_error());
    if (st) {
        eg_free(g, n_all);
        return;
    }
    const modattn_model_info *info = modattn_model_get_info(m);
    const size_t dim = modattn_model_dim(m);
    CHECK_MSG(g[0].dim == dim, "%s: fixture dim %zu, model dim %zu", label, g[0].dim, dim);
    char pool[64];
    modattn_pooling_format(info->pooling, pool, sizeof pool);
    printf("%s: %s, %d layers, hidden %d, dim %zu, pooling %s%s, max %zu tokens, weights %s\n",
           label, info->name, info->layers, info->hidden, dim, pool,
           info->normalize ? " + normalize" : "", info->max_tokens, info->weights_hash);

    const char **texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    for (size_t i = 0; i < n; i++) texts[i] = g[i].text, lens[i] = g[i].len;
    float *out = malloc(n * dim * sizeof *out);
    float *ref = malloc(n * dim * sizeof *ref);
    int32_t *ntok = malloc(n * sizeof *ntok);

    /* ids */
    int32_t *ids = malloc(info->max_tokens * sizeof *ids);
    size_t ids_equal = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        st = modattn_model_tokenize(m, texts[i], lens[i], ids, info->max_tokens, &k);
        bool eq = st == 0 && k == g[i].nids && memcmp(ids, g[i].ids, k * sizeof *ids) == 0;
        ids_equal += eq;
        CHECK_MSG(eq, "%s: input %zu: ids differ from sentence-transformers (%zu vs %zu ids)",
                  label, i, k, g[i].nids);
    }
    free(ids);
    printf("%s: ids equal for %zu/%zu inputs\n", label, ids_equal, n);
    {   /* sanitized: the truncated inputs that repeat a token count are embedded once per count */
        const size_t n_ids = n;
        n = eg_sanitizer_embed_count(g, n);
        if (n < n_ids)
            printf("%s: sanitized build: embedding %zu of them (%zu truncated ones of a token count already "
                   "embedded: their ids are checked above)\n", label, n, n_ids - n);
    }

    /* embeddings on every available CPU implementation */
    const char *saved = modattn_ctx_policy(ctx);
    char saved_policy[256];
    snprintf(saved_policy, sizeof saved_policy, "%s", saved ? saved : "auto");
    int impls = 0;
    for (size_t x = 0; x < modattn_ctx_impl_count(ctx); x++) {
        modattn_impl_info ii;
        if (modattn_ctx_impl_info(ctx, x, &ii) != 0) continue;
        if (ii.device != MODATTN_DEVICE_CPU || !ii.available) continue;
        if (modattn_ctx_set_policy(ctx, ii.name) != 0) {
            CHECK_MSG(0, "set policy %s: %s", ii.name, modattn_last_error());
            continue;
        }
        impls++;
        uint64_t t0 = modattn__now_ns();
        st = modattn_model_embed(m, texts, lens, n, out, ntok);
        double secs = (double)(modattn__now_ns() - t0) * 1e-9;
        CHECK_MSG(st == 0, "%s/%s: embed: %s", label, ii.name, modattn_last_error());
        if (st) continue;
        double mn = 2.0;
        size_t worst = 0, below = 0, tokens = 0;
        for (size_t i = 0; i < n; i++) {
            double c = eg_cosine(out + i * dim, g[i].emb, dim);
            if (c < mn) mn = c, worst = i;
            if (!(c >= MIN_COSINE) && below++ < 10)
                fprintf(stderr, "%s/%s: input %zu: cosine %.9f < %g\n", label, ii.name, i, c, MIN_COSINE);
            CHECK_MSG(ntok[i] == (int32_t)g[i].nids, "%s/%s: input %zu: %d tokens, want %zu",
                      label, ii.name, i, (int)ntok[i], g[i].nids);
            tokens += (size_t)ntok[i];
        }
        CHECK_MSG(below == 0, "%s/%s: %zu of %zu inputs below cosine %g (the lowest %.9f, input %zu)", label, ii.name,
                  below, n, MIN_COSINE, mn, worst);
        printf("%s/%s: %zu inputs, min cosine %.9f (1 - cos = %.1e, input %zu), %zu below %g, "
               "%.0f tokens/s\n",
               label, ii.name, n, mn, 1.0 - mn, worst, below, MIN_COSINE, (double)tokens / secs);
    }
    CHECK_MSG(impls > 0, "%s: no available CPU attention implementation", label);
    CHECK(modattn_ctx_set_policy(ctx, saved_policy) == 0);

    /* batch independence: all at once (default budget) vs one at a time vs a small budget */
    st = modattn_model_embed(m, texts, lens, n, ref, NULL);
    CHECK(st == 0);
    float worst_single = 0, worst_small = 0;
    for (size_t i = 0; i < n && st == 0; i++) {
        st = modattn_model_embed(m, texts + i, lens + i, 1, out + i * dim, NULL);
        CHECK(st == 0);
    }
    for (size_t k = 0; k < n * dim && st == 0; k++) {
        float d = fabsf(out[k] - ref[k]);
        if (d > worst_single) worst_single = d;
    }
    CHECK(modattn_model_set_batch_tokens(m, 300) == 0);
    CHECK(modattn_model_batch_tokens(m) == 300);
    st = modattn_model_embed(m, texts, lens, n, out, NULL);
    CHECK(st == 0);
    for (size_t k = 0; k < n * dim && st == 0; k++) {
        float d = fabsf(out[k] - ref[k]);
        if (d > worst_small) worst_small = d;
    }
    CHECK_MSG(worst_single <= BATCH_TOL, "%s: alone vs batched differ by %g", label,
              (double)worst_single);
    CHECK_MSG(worst_small <= BATCH_TOL, "%s: budget 300 vs 8192 differ by %g", label,
              (double)worst_small);
    printf("%s: batch independence: alone vs batched max |diff| %.3g, budget 300 vs default %.3g\n",
           label, (double)worst_single, (double)worst_small);
    /* the same text twice in one call, and n = 0 */
    {
        const char *two[2] = {texts[0], texts[0]};
        size_t l2[2] = {lens[0], lens[0]};
        CHECK(modattn_model_embed(m, two, l2, 2, out, NULL) == 0);
        float d2 = 0;
        for (size_t k = 0; k < dim; k++)
            if (fabsf(out[k] - out[dim + k]) > d2) d2 = fabsf(out[k] - out[dim + k]);
        CHECK_MSG(d2 <= BATCH_TOL, "%s: the same text twice differs by %g", label, (double)d2);
        CHECK(modattn_model_embed(m, two, l2, 0, out, NULL) == 0);
    }

    modattn_model_free(m);
    modattn_mem_get_stats(&m1);
    /* the attention workspace is the ctx's (kept between calls): not the model's to give back */
    for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
        if (c != MODATTN_MEM_WORKSPACE)
            CHECK_MSG(m1.current[c] == m0.current[c], "%s: %s: %lld bytes not given back", label,
                      modattn_mem_category_name((modattn_mem_category)c),
                      (long long)(m1.current[c] - m0.current[c]));
    /* few_inputs (what `search` loads for its query): no packed weights, the direct GEMM
     * kernel. Against sentence-transformers as above; against the packed path within fp32
     * rounding; and, the kernel being row-independent, alone and batched equal bit for bit. On
     * the shape subset (tests/embed_golden.h: every token count at or next to a block boundary,
     * the longest, the invalid UTF-8 and truncated inputs), which takes every path of the kernel
     * that the row count and the length choose: the packed path above checks every input, and
     * the direct kernel's 249 + 2 x 249 calls were 18 of this test's 42 s. */
    {
        size_t longest = 0, ns = 0;
        for (size_t i = 1; i < n; i++)
            if (g[i].nids > g[longest].nids) longest = i;
        size_t *sel = malloc(n * sizeof *sel);
        const char **stexts = malloc(n * sizeof *stexts);
        size_t *slens = malloc(n * sizeof *slens);
        for (size_t i = 0; sel && stexts && slens && i < n; i++)
            if (eg_in_subset(g, n, i, longest)) sel[ns] = i, stexts[ns] = texts[i], slens[ns] = lens[i], ns++;
        CHECK_MSG(ns > 0, "%s/few_inputs: no inputs", label);
        modattn_model_options fo;
        memset(&fo, 0, sizeof fo);
        fo.few_inputs = true;
        modattn_model *f = NULL;
        st = modattn_model_load_ex(ctx, dir, &fo, &f);
        CHECK_MSG(st == 0, "%s: few_inputs load: %s", label, modattn_last_error());
        if (!st && ns > 0) {
            /* ref: the packed model's embeddings of all the texts at once (above) */
            CHECK(modattn_model_embed(f, stexts, slens, ns, out, NULL) == 0);
            double mn = 2.0;
            float dmax = 0;
            for (size_t j = 0; j < ns; j++) {
                double c = eg_cosine(out + j * dim, g[sel[j]].emb, dim);
                if (c < mn) mn = c;
                for (size_t k = 0; k < dim; k++)
                    if (fabsf(out[j * dim + k] - ref[sel[j] * dim + k]) > dmax) dmax = fabsf(out[j * dim + k] - ref[sel[j] * dim + k]);
            }
            CHECK_MSG(mn >= MIN_COSINE, "%s/few_inputs: min cosine %.9f < %g", label, mn, MIN_COSINE);
            CHECK_MSG(dmax <= BATCH_TOL, "%s/few_inputs: differs from the packed path by %g", label, (double)dmax);
            float *one = malloc(dim * sizeof *one);
            size_t differ = 0;
            for (size_t j = 0; j < ns && one; j++) {
                CHECK(modattn_model_embed(f, stexts + j, slens + j, 1, one, NULL) == 0);
                differ += memcmp(one, out + j * dim, dim * sizeof *one) != 0;
            }
            CHECK_MSG(one && differ == 0, "%s/few_inputs: %zu of %zu texts differ alone vs batched", label, differ, ns);
            /* a text alone on 3 threads: its GEMMs split by columns over them (cpu_encoder.c), the
             * same bits as batched (rows in whole-row tasks) on this ctx's threads */
            modattn_ctx *c3 = NULL;
            modattn_ctx_options o3;
            memset(&o3, 0, sizeof o3);
            o3.threads = 3;
            modattn_model *f3 = NULL;
            CHECK(modattn_ctx_create(&o3, &c3) == 0 && modattn_model_load_ex(c3, dir, &fo, &f3) == 0);
            size_t differ3 = 0;
            for (size_t j = 0; j < ns && one && f3; j++) {
                CHECK(modattn_model_embed(f3, stexts + j, slens + j, 1, one, NULL) == 0);
                differ3 += memcmp(one, out + j * dim, dim * sizeof *one) != 0;
            }
            CHECK_MSG(f3 && differ3 == 0, "%s/few_inputs: %zu of %zu texts differ alone on 3 threads vs batched", label,
                      differ3, ns);
            modattn_model_free(f3);
            modattn_ctx_free(c3);
            free(one);
            printf("%s/few_inputs: the shape subset, %zu of %zu inputs: min cosine %.9f, max |diff| vs packed %.3g, "
                   "alone == batched bit for bit: %s\n",
                   label, ns, n, mn, (double)dmax, differ == 0 ? "yes" : "no");
        }
        modattn_model_free(f);
        free(sel), free(stexts), free(slens);
    }

    free(texts);
    free(lens);
    free(out);
    free(ref);
    free(ntok);
    eg_free(g, n_all);
}

int main(void) {
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    int st = modattn_ctx_create(&o, &ctx);
    CHECK_MSG(st == 0, "ctx: %s", modattn_last_error());
    if (st) return test_finish("test_golden");
    run_fixture(ctx, "minilm", ".models/all-MiniLM-L6-v2", "tests/fixtures/golden_minilm.jsonl");
    modattn_ctx_free(ctx);
    return test_finish("test_golden");
}
