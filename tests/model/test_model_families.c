/* tests/model/test_model_families.c — the encoder families other than BERT against
 * transformers + sentence-transformers (tools/make_goldens.py):
 *
 *   tiny-xlm-roberta   xlm-roberta: positions from pad_token_id + 1, one token type, the Unigram
 *                      tokenizer of tests/fixtures/tokenizer_unigram.json (Precompiled charsmap),
 *                      multilingual texts of tests/fixtures/tokens_unigram.jsonl; mean, Normalize
 *   tiny-distilbert    distilbert: no token types, its own weight and config names; mean, Normalize
 *   tiny-mpnet         mpnet: relative position buckets added to the scores through attention's
 *                      mask, positions from pad + 1; mean+max pooling, no Normalize
 *   tiny-modernbert    modernbert: pre-LN without biases, rotary positions (two bases), GeGLU,
 *                      local layers with a 16-token window (texts up to 128 tokens); the byte-level
 *                      BPE of tests/fixtures/tokenizer_bpe_modernbert.json in ModernBERT's layout
 *                      ([CLS] 1, [SEP] 2, [PAD] 3), multilingual texts too; mean, Normalize;
 *                      also through the token-id entry (modattn_model_embed_ids); on OpenCL too, and
 *                      refused there at load once its 'rotary' op is disabled
 *   tiny-gte           new (the Hub's GTE v1.5): post-LN, rotary positions with fixed NTK scaling
 *                      (factor 2), packed QKV, GeGLU from up_gate_proj ([up | gate]); CLS, Normalize
 *   tiny-gte-hf        gte (transformers' GteModel): the same layers under transformers' own names
 *                      (self_attn.{q,k,v,o}_proj, mlp.{gate,up}_proj), rope_parameters
 *   tiny-nomic         nomic_bert (nomic-ai's config keys and weight names): post-LN without biases,
 *                      rotary positions (NeoX's layout, base 1000), SwiGLU from fc11/fc12; WordPiece;
 *                      mean, Normalize
 *   tiny-nomic-gptj    the same weights with rotary_emb_interleaved (GPT-J's layout); on OpenCL
 *                      refused at load once its 'rotary_interleaved' op is disabled
 *   tiny-jina          jina_bert (model_type "bert", position_embedding_type "alibi"): no position
 *                      table, ALiBi slopes of 6 heads through the contract (one text per call),
 *                      GEGLU (mlp.gated_layers), post-LN; goldens from tools/make_jina_goldens.py
 *                      (its torch forward: transformers has no jina_bert class); mean, Normalize
 *   tiny-qwen3         qwen3 (`test_model_families qwen`): a causal decoder as Qwen3-Embedding runs
 *                      it: RMSNorm, QK-norm, rotary, 4 query heads over 2 key/value heads of 32
 *                      (heads x head_dim = 128, not hidden 64), SwiGLU, last-token pooling; the
 *                      byte-level BPE of tests/fixtures/tokenizer_bpe_qwen2.json with <|endoftext|>
 *                      appended; texts behind the query instruction prompt too; on OpenCL too, bit
 *                      for bit alone vs batched there, and refused once its 'rms_norm' op is disabled
 *   tiny-qwen2         qwen2: q/k/v biases, no QK-norm, one key/value head (MQA)
 *   all-mpnet-base-v2  the real one (PyPI parts): 12 layers, 384 tokens, mean, Normalize
 *
 * The tiny ones come from tools/make_tiny_models.py, all four from `make model`. For every input:
 * the same token ids as sentence-transformers, and on every available CPU attention
 * implementation (all-mpnet-base-v2: the default one) cosine >= 0.99999 and the same length
 * within 1e-4. Then a text alone equals itself batched, bit for bit, and the model gives back its
 * memory. `test_model_families tiny` runs the three tiny models, `test_model_families mpnet` the
 * real one; the tiny ones also on the OpenCL device where there is one. A missing model directory
 * FAILS. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "core/internal_core.h"
#include "device/internal_device.h"
#include "embed_golden.h"
#include "test_util.h"

#define MIN_COSINE 0.99999
#define NORM_TOL 1e-4

typedef struct expect {
    const char *label, *dir, *fixture, *model_type;
    int hidden, layers, heads, intermediate, vocab;
    size_t max_tokens, dim;
    unsigned pooling;
    bool normalize, every_impl;
    size_t min_multilingual; /* inputs with a byte >= 0x80 the fixture must hold */
} expect;

static const expect TINY[] = {
    {"tiny_xlmr", ".models/tiny-xlm-roberta", "tests/fixtures/golden_tiny_xlm_roberta.jsonl", "xlm-roberta",
     64, 2, 4, 192, 648, 128, 64, MODATTN_POOL_MEAN, true, true, 100},
    {"tiny_distil", ".models/tiny-distilbert", "tests/fixtures/golden_tiny_distilbert.jsonl", "distilbert",
     96, 3, 3, 256, 30522, 100, 96, MODATTN_POOL_MEAN, true, true, 10},
    {"tiny_mpnet", ".models/tiny-mpnet", "tests/fixtures/golden_tiny_mpnet.jsonl", "mpnet",
     64, 2, 4, 160, 30522, 128, 128, MODATTN_POOL_MEAN | MODATTN_POOL_MAX, false, true, 10},
    /* before tiny_modern, whose OpenCL check disables 'rotary' for the rest of the process */
    {"tiny_gte", ".models/tiny-gte", "tests/fixtures/golden_tiny_gte.jsonl", "new",
     64, 2, 4, 96, 30522, 128, 64, MODATTN_POOL_CLS, true, true, 10},
    {"tiny_gte_hf", ".models/tiny-gte-hf", "tests/fixtures/golden_tiny_gte_hf.jsonl", "gte",
     64, 2, 4, 80, 30522, 128, 64, MODATTN_POOL_CLS, true, true, 10},
    /* before tiny_modern, which leaves OpenCL's 'rotary' disabled */
    {"tiny_nomic", ".models/tiny-nomic", "tests/fixtures/golden_tiny_nomic.jsonl", "nomic_bert",
     64, 2, 4, 96, 30528, 128, 64, MODATTN_POOL_MEAN, true, true, 10},
    {"tiny_nomic_gptj", ".models/tiny-nomic-gptj", "tests/fixtures/golden_tiny_nomic_gptj.jsonl", "nomic_bert",
     64, 2, 4, 96, 30528, 128, 64, MODATTN_POOL_MEAN, true, true, 10},
    {"tiny_modern", ".models/tiny-modernbert", "tests/fixtures/golden_tiny_modernbert.jsonl", "modernbert",
     64, 4, 4, 96, 700, 128, 64, MODATTN_POOL_MEAN, true, true, 100},
    {"tiny_jina", ".models/tiny-jina", "tests/fixtures/golden_tiny_jina.jsonl", "bert",
     96, 2, 6, 128, 30522, 128, 96, MODATTN_POOL_MEAN, true, true, 100},
};
static const expect QWEN[] = {
    {"tiny_qwen3", ".models/tiny-qwen3", "tests/fixtures/golden_tiny_qwen3.jsonl", "qwen3",
     64, 3, 4, 96, 700, 128, 64, MODATTN_POOL_LAST, true, true, 100},
    {"tiny_qwen2", ".models/tiny-qwen2", "tests/fixtures/golden_tiny_qwen2.jsonl", "qwen2",
     64, 2, 4, 80, 700, 96, 64, MODATTN_POOL_LAST, true, true, 100},
};
static const expect MPNET = {"mpnet", ".models/all-mpnet-base-v2", "tests/fixtures/golden_all_mpnet_base_v2.jsonl",
                             "mpnet", 768, 12, 12, 3072, 30527, 384, 768, MODATTN_POOL_MEAN, true, false, 10};

static void check_info(const expect *x, const modattn_model_info *info, size_t dim) {
    CHECK_MSG(info->model_type && strcmp(info->model_type, x->model_type) == 0, "%s: model_type %s, want %s",
              x->label, info->model_type ? info->model_type : "(null)", x->model_type);
    CHECK_MSG(info->hidden == x->hidden && info->layers == x->layers && info->heads == x->heads &&
                  info->intermediate == x->intermediate && info->vocab == x->vocab,
              "%s: sizes %d/%d/%d/%d/%d, want %d/%d/%d/%d/%d", x->label, info->hidden, info->layers, info->heads,
              info->intermediate, info->vocab, x->hidden, x->layers, x->heads, x->intermediate, x->vocab);
    CHECK_MSG(info->max_tokens == x->max_tokens, "%s: max_tokens %zu, want %zu", x->label, info->max_tokens,
              x->max_tokens);
    CHECK_MSG(dim == x->dim && info->dim == x->dim, "%s: dim %zu/%zu, want %zu", x->label, dim, info->dim, x->dim);
    CHECK_MSG(info->pooling == x->pooling, "%s: pooling bits %#x, want %#x", x->label, info->pooling, x->pooling);
    CHECK_MSG(info->normalize == x->normalize, "%s: normalize %d, want %d", x->label, (int)info->normalize,
              (int)x->normalize);
}

/* The fixture must exercise what this test is for. */
static void check_fixture(const expect *x, const embed_golden *g, size_t n) {
    size_t empty = 0, invalid = 0, truncated = 0, at_max = 0, multi = 0;
    for (size_t i = 0; i < n; i++) {
        empty += g[i].len == 0;
        invalid += g[i].invalid_utf8;
        truncated += g[i].truncated;
        at_max += g[i].nids == x->max_tokens;
        bool hi = false;
        for (size_t k = 0; k < g[i].len && !hi; k++) hi = (unsigned char)g[i].text[k] >= 0x80;
        multi += hi;
        CHECK_MSG(g[i].dim == x->dim, "%s: fixture line %zu has %zu values, want %zu", x->label, i + 1, g[i].dim,
                  x->dim);
    }
    CHECK_MSG(n >= 60, "%s: fixture has %zu inputs, want >= 60", x->label, n);
    CHECK_MSG(empty >= 1 && invalid >= 1, "%s: fixture: %zu empty, %zu invalid UTF-8", x->label, empty, invalid);
    CHECK_MSG(truncated >= 1 && at_max >= truncated, "%s: fixture: %zu truncated, %zu at max_tokens", x->label,
              truncated, at_max);
    CHECK_MSG(multi >= x->min_multilingual, "%s: fixture: %zu non-ASCII inputs, want >= %zu", x->label, multi,
              x->min_multilingual);
    printf("%s: fixture %s: %zu inputs (%zu empty, %zu invalid UTF-8, %zu non-ASCII, %zu truncated at %zu)\n",
           x->label, x->fixture, n, empty, invalid, multi, truncated, x->max_tokens);
}

static void run_model(modattn_ctx *ctx, const expect *x) {
    struct stat sb;
    if (stat(x->dir, &sb) != 0) {
        CHECK_MSG(0, "%s: model directory %s is missing: run `make model` (tools/setup_model.sh) "
                  "first", x->label, x->dir);
        return;
    }
    size_t n = 0;
    embed_golden *g = eg_load(x->fixture, &n);
    CHECK_MSG(g != NULL, "%s: cannot read the fixture %s (tools/make_goldens.py writes it)",
              x->label, x->fixture);
    if (!g) return;
    check_fixture(x, g, n);
    const size_t n_all = n;
    n = eg_sanitizer_subset(g, n, x->label);

    modattn_mem_stats m0, m1;
    modattn_mem_get_stats(&m0);
    modattn_model *m = NULL;
    int st = modattn_model_load(ctx, x->dir, &m);
    CHECK_MSG(st == 0, "%s: load %s: %s", x->label, x->dir, modattn_last_error());
    if (st) {
        eg_free(g, n_all);
        return;
    }
    const modattn_model_info *info = modattn_model_get_info(m);
    const size_t dim = modattn_model_dim(m);
    check_info(x, info, dim);
    printf("%s: %s: %d layers, hidden %d, %d heads, intermediate %d, dim %zu, max %zu tokens, "
           "normalize %s, weights %s\n",
           x->label, info->name, info->layers, info->hidden, info->heads, info->intermediate, dim,
           info->max_tokens, info->normalize ? "yes" : "no", info->weights_hash);
    if (dim != x->dim || g[0].dim != dim) {
        modattn_model_free(m);
        eg_free(g, n_all);
        return;
    }

    const char **texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    float *out = malloc(n * dim * sizeof *out);
    float *ref = malloc(n * dim * sizeof *ref);
    int32_t *ntok = malloc(n * sizeof *ntok);
    int32_t *ids = malloc((info->max_tokens + 1) * sizeof *ids);
    if (!texts || !lens || !out || !ref || !ntok || !ids) {
        CHECK_MSG(0, "%s: out of memory", x->label);
        goto done;
    }
    for (size_t i = 0; i < n; i++) texts[i] = g[i].text, lens[i] = g[i].len;

    /* ids */
    size_t ids_equal = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        st = modattn_model_tokenize(m, texts[i], lens[i], ids, info->max_tokens, &k);
        bool eq = st == 0 && k == g[i].nids && memcmp(ids, g[i].ids, k * sizeof *ids) == 0;
        ids_equal += eq;
        if (!eq) {
            size_t first = 0;
            while (st == 0 && first < k && first < g[i].nids && ids[first] == g[i].ids[first]) first++;
            CHECK_MSG(0, "%s: input %zu: ids differ from sentence-transformers (%zu vs %zu ids, "
                      "first difference at %zu)", x->label, i, k, g[i].nids, first);
        }
    }
    CHECK(ids_equal == n);
    printf("%s: ids equal for %zu/%zu inputs\n", x->label, ids_equal, n);

    /* embeddings on every available CPU implementation */
    const char *saved = modattn_ctx_policy(ctx);
    char saved_policy[256];
    snprintf(saved_policy, sizeof saved_policy, "%s", saved ? saved : "auto");
    int impls = 0;
    /* every CPU implementation, or (!every_impl) once under the policy the caller would get */
    for (size_t xi = 0; xi < (x->every_impl ? modattn_ctx_impl_count(ctx) : 1); xi++) {
        modattn_impl_info ii;
        if (!x->every_impl) {
            memset(&ii, 0, sizeof ii);
            ii.name = saved_policy;
        } else {
            if (modattn_ctx_impl_info(ctx, xi, &ii) != 0) continue;
            if (ii.device != MODATTN_DEVICE_CPU || !ii.available) continue;
        }
        if (modattn_ctx_set_policy(ctx, ii.name) != 0) {
            CHECK_MSG(0, "%s: set policy %s: %s", x->label, ii.name, modattn_last_error());
            continue;
        }
        impls++;
        uint64_t t0 = modattn__now_ns();
        st = modattn_model_embed(m, texts, lens, n, out, ntok);
        double secs = (double)(modattn__now_ns() - t0) * 1e-9;
        CHECK_MSG(st == 0, "%s/%s: embed: %s", x->label, ii.name, modattn_last_error());
        if (st) continue;
        double mn = 2.0, worst_norm = 0;
        size_t worst = 0, bad = 0, tokens = 0;
        for (size_t i = 0; i < n; i++) {
            const float *o = out + i * dim;
            double c = eg_cosine(o, g[i].emb, dim);
            double no = sqrt(eg_dot(o, o, dim)), ng = sqrt(eg_dot(g[i].emb, g[i].emb, dim));
            double dn = fabs(no / (ng + 1e-300) - 1.0);
            if (c < mn) mn = c, worst = i;
            if (dn > worst_norm) worst_norm = dn;
            bool ok = c >= MIN_COSINE && dn <= NORM_TOL && ntok[i] == (int32_t)g[i].nids;
            if (!ok) {
                bad++;
                CHECK_MSG(0, "%s/%s: input %zu: cosine %.9f (want >= %g), length %.6g vs %.6g, "
                          "%d tokens vs %zu", x->label, ii.name, i, c, MIN_COSINE, no, ng,
                          (int)ntok[i], g[i].nids);
            }
            tokens += (size_t)ntok[i];
        }
        CHECK(bad == 0);
        printf("%s/%s: %zu inputs, min cosine %.9f (1 - cos = %.1e, input %zu), max |len ratio - 1| "
               "%.1e, %zu bad, %.0f tokens/s\n",
               x->label, ii.name, n, mn, 1.0 - mn, worst, worst_norm, bad,
               (double)tokens / (secs > 0 ? secs : 1e-9));
    }
    CHECK_MSG(impls > 0, "%s: no available CPU attention implementation", x->label);
    CHECK(modattn_ctx_set_policy(ctx, saved_policy) == 0);

    /* the token-id entry (modattn_model_embed_ids) on the goldens' own ids: the same vectors */
    {
        const int32_t **idp = malloc(n * sizeof *idp);
        size_t *cnt = malloc(n * sizeof *cnt), k = 0, bad_ids = 0;
        double mn_ids = 2.0;
        if (idp && cnt) {
            /* a sanitized build: the first 4 (the path is the same for all; all-mpnet-base-v2's 12
             * layers of 768 under ASan cost minutes a pass) */
            const size_t kmax = EG_SANITIZED_MAX(n, 4);
            for (size_t i = 0; i < n && k < kmax; i++)
                if (g[i].nids > 0) idp[k] = g[i].ids, cnt[k] = g[i].nids, k++;
            st = modattn_model_embed_ids(m, idp, cnt, k, out);
            CHECK_MSG(st == 0, "%s: embed_ids: %s", x->label, modattn_last_error());
            for (size_t i = 0, q = 0; st == 0 && i < n && q < k; i++) {
                if (g[i].nids == 0) continue;
                const double c = eg_cosine(out + q * dim, g[i].emb, dim);
                if (c < mn_ids) mn_ids = c;
                if (c < MIN_COSINE) {
                    bad_ids++;
                    CHECK_MSG(0, "%s: embed_ids: input %zu: cosine %.9f", x->label, i, c);
                }
                q++;
            }
            printf("%s: embed_ids on %zu id lists: min cosine %.9f, %zu bad\n", x->label, k, mn_ids, bad_ids);
        } else {
            CHECK_MSG(0, "%s: out of memory", x->label);
        }
        free(idp), free(cnt);
    }

    /* few_inputs (a query's path: weights not packed, the direct GEMM kernel) gives the same
     * vectors, on the first 16 inputs */
    {
        modattn_model_options fo = {.few_inputs = true};
        modattn_model *fm = NULL;
        const size_t nf = EG_SANITIZED_MAX(n < 16 ? n : 16, 2); /* a sanitized build: 2 */
        st = modattn_model_load_ex(ctx, x->dir, &fo, &fm);
        CHECK_MSG(st == 0, "%s: load with few_inputs: %s", x->label, modattn_last_error());
        if (st == 0) {
            st = modattn_model_embed(fm, texts, lens, nf, out, NULL);
            CHECK_MSG(st == 0, "%s: few_inputs embed: %s", x->label, modattn_last_error());
            double mn_f = 2.0;
            for (size_t i = 0; st == 0 && i < nf; i++) {
                const double c = eg_cosine(out + i * dim, g[i].emb, dim);
                if (c < mn_f) mn_f = c;
            }
            CHECK_MSG(st == 0 && mn_f >= MIN_COSINE, "%s: few_inputs: min cosine %.9f", x->label, mn_f);
            printf("%s: few_inputs on %zu inputs: min cosine %.9f\n", x->label, nf, mn_f);
        }
        modattn_model_free(fm);
    }

    /* without a Normalize module the output is the raw pooled vector: not unit length */
    if (!x->normalize) {
        double no = sqrt(eg_dot(out, out, dim));
        CHECK_MSG(fabs(no - 1.0) > 0.1, "%s: output has length %g without a Normalize module",
                  x->label, no);
    }

    /* a text alone equals itself batched, bit for bit: everything at once vs one at a time vs a
     * small token budget, on the inputs of at most 128 tokens */
    size_t nb = 0;
    for (size_t i = 0; i < n; i++)
        if (g[i].nids <= 128) texts[nb] = g[i].text, lens[nb] = g[i].len, nb++;
    st = modattn_model_embed(m, texts, lens, nb, ref, NULL);
    CHECK(st == 0);
    size_t diff_single = 0, diff_small = 0;
    for (size_t i = 0; i < nb && st == 0; i++) {
        st = modattn_model_embed(m, texts + i, lens + i, 1, out + i * dim, NULL);
        CHECK(st == 0);
        diff_single += memcmp(out + i * dim, ref + i * dim, dim * sizeof *out) != 0;
    }
    CHECK(modattn_model_set_batch_tokens(m, 200) == 0);
    st = modattn_model_embed(m, texts, lens, nb, out, NULL);
    CHECK(st == 0);
    for (size_t i = 0; i < nb && st == 0; i++) diff_small += memcmp(out + i * dim, ref + i * dim, dim * sizeof *out) != 0;
    CHECK_MSG(diff_single == 0, "%s: %zu of %zu texts alone differ from themselves batched", x->label, diff_single, nb);
    CHECK_MSG(diff_small == 0, "%s: %zu of %zu texts differ between budget 200 and the default", x->label, diff_small,
              nb);
    printf("%s: batch independence on %zu inputs: %zu alone and %zu under budget 200 differ in any bit\n", x->label, nb,
           diff_single, diff_small);

done:
    modattn_model_free(m);
    modattn_mem_get_stats(&m1);
    for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
        if (c != MODATTN_MEM_WORKSPACE)
            CHECK_MSG(m1.current[c] == m0.current[c], "%s: %s: %lld bytes not given back", x->label,
                      modattn_mem_category_name((modattn_mem_category)c),
                      (long long)(m1.current[c] - m0.current[c]));
    free(texts);
    free(lens);
    free(out);
    free(ref);
    free(ntok);
    free(ids);
    eg_free(g, n_all);
}

/* The same model on the OpenCL device, where there is one (its embed_positions and attention with
 * a mask): every golden against sentence-transformers. None here: said, and the CPU part stands. */
static void run_opencl(modattn_ctx *ctx, const expect *x) {
    const modattn_device_iface *dev = NULL;
    if (modattn_device_lookup("opencl", &dev) != 0) {
        printf("%s/opencl: not available here: %s\n", x->label, modattn_last_error());
        return;
    }
    size_t n = 0;
    embed_golden *g = eg_load(x->fixture, &n);
    if (!g) {
        CHECK_MSG(0, "%s: cannot read %s", x->label, x->fixture);
        return;
    }
    const size_t n_all = n;
    n = eg_sanitizer_subset(g, n, x->label);
    modattn_model_options mo = {.device = "opencl"};
    modattn_model *m = NULL;
    int st = modattn_model_load_ex(ctx, x->dir, &mo, &m);
    CHECK_MSG(st == 0, "%s/opencl: load: %s", x->label, modattn_last_error());
    const char **texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    float *out = malloc(n * x->dim * sizeof *out);
    if (st == 0 && texts && lens && out) {
        for (size_t i = 0; i < n; i++) texts[i] = g[i].text, lens[i] = g[i].len;
        st = modattn_model_embed(m, texts, lens, n, out, NULL);
        CHECK_MSG(st == 0, "%s/opencl: embed: %s", x->label, modattn_last_error());
        double mn = 2.0;
        size_t bad = 0;
        for (size_t i = 0; st == 0 && i < n; i++) {
            double c = eg_cosine(out + i * x->dim, g[i].emb, x->dim);
            if (c < mn) mn = c;
            if (c < MIN_COSINE) {
                bad++;
                CHECK_MSG(0, "%s/opencl: input %zu: cosine %.9f", x->label, i, c);
            }
        }
        printf("%s/opencl: %zu inputs, min cosine %.9f, %zu bad\n", x->label, n, mn, bad);
        /* a decoder's causal attention runs per text: alone equals batched, bit for bit, here too */
        const bool decoder = strncmp(x->model_type, "qwen", 4) == 0;
        size_t differ = 0, nb = n < 48 ? n : 48;
        float *one = decoder ? malloc(x->dim * sizeof *one) : NULL;
        for (size_t i = 0; one && st == 0 && i < nb; i++) {
            st = modattn_model_embed(m, texts + i, lens + i, 1, one, NULL);
            CHECK_MSG(st == 0, "%s/opencl: embed alone: %s", x->label, modattn_last_error());
            differ += st == 0 && memcmp(one, out + i * x->dim, x->dim * sizeof *one) != 0;
        }
        if (decoder) {
            CHECK_MSG(differ == 0, "%s/opencl: %zu of %zu texts alone differ from themselves batched", x->label,
                      differ, nb);
            printf("%s/opencl: batch independence on %zu inputs: %zu differ in any bit\n", x->label, nb, differ);
        }
        free(one);
    }
    free(texts), free(lens), free(out);
    modattn_model_free(m);
    eg_free(g, n_all);
    if (strcmp(x->label, "tiny_nomic_gptj") == 0) {
        /* GPT-J's layout is its own op: a device that lacks it refuses the model at load, naming it
         * (never NeoX's rotation instead); 'rotary' itself stays enabled for tiny_modern */
        const int op = MODATTN_OP_ROTARY_INTERLEAVED;
        CHECK(modattn__device_control(dev, MODATTN_DEVICE_CONTROL_DISABLE_OP, (void *)&op) == 0);
        mo.host_fallback = true;
        st = modattn_model_load_ex(ctx, x->dir, &mo, &m);
        CHECK_MSG(st == MODATTN_EUNSUPPORTED && strstr(modattn_last_error(), "'rotary_interleaved'"),
                  "%s/opencl without rotary_interleaved: load gave %d (%s), want a refusal naming the op", x->label,
                  st, st ? modattn_last_error() : "loaded");
        printf("%s/opencl without 'rotary_interleaved': %s\n", x->label, st ? modattn_last_error() : "(loaded)");
        if (st == 0) modattn_model_free(m);
    }
    if (strcmp(x->model_type, "modernbert") == 0) {
        /* a device without one of its ops refuses it at load, naming the op (no host fallback for
         * rotary); the op stays disabled on this device for the rest of the process: last model */
        const int op = MODATTN_OP_ROTARY;
        CHECK(modattn__device_control(dev, MODATTN_DEVICE_CONTROL_DISABLE_OP, (void *)&op) == 0);
        mo.host_fallback = true;
        st = modattn_model_load_ex(ctx, x->dir, &mo, &m);
        CHECK_MSG(st == MODATTN_EUNSUPPORTED && strstr(modattn_last_error(), "'rotary'"),
                  "%s/opencl without rotary: load gave %d (%s), want a refusal naming the op", x->label, st,
                  st ? modattn_last_error() : "loaded");
        printf("%s/opencl without 'rotary': %s\n", x->label, st ? modattn_last_error() : "(loaded)");
        if (st == 0) modattn_model_free(m);
    }
    if (strcmp(x->model_type, "qwen2") == 0) { /* the last decoder: RMSNorm disabled, a refusal naming it */
        const int op = MODATTN_OP_RMS_NORM;
        CHECK(modattn__device_control(dev, MODATTN_DEVICE_CONTROL_DISABLE_OP, (void *)&op) == 0);
        st = modattn_model_load_ex(ctx, x->dir, &mo, &m);
        CHECK_MSG(st == MODATTN_EUNSUPPORTED && strstr(modattn_last_error(), "'rms_norm'"),
                  "%s/opencl without rms_norm: load gave %d (%s), want a refusal naming the op", x->label, st,
                  st ? modattn_last_error() : "loaded");
        printf("%s/opencl without 'rms_norm': %s\n", x->label, st ? modattn_last_error() : "(loaded)");
        if (st == 0) modattn_model_free(m);
    }
}

int main(int argc, char **argv) {
    const bool tiny = argc < 2 || strcmp(argv[1], "tiny") == 0, mpnet = argc < 2 || strcmp(argv[1], "mpnet") == 0;
    const bool qwen = argc < 2 || strcmp(argv[1], "qwen") == 0;
    if (!tiny && !mpnet && !qwen) {
        fprintf(stderr, "usage: test_model_families [tiny | mpnet | qwen]\n");
        return 2;
    }
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    int st = modattn_ctx_create(&o, &ctx);
    CHECK_MSG(st == 0, "ctx: %s", modattn_last_error());
    if (st) return test_finish("test_model_families");
    if (tiny)
        for (size_t i = 0; i < sizeof TINY / sizeof TINY[0]; i++) run_model(ctx, &TINY[i]), run_opencl(ctx, &TINY[i]);
    if (mpnet) run_model(ctx, &MPNET);
    if (qwen) /* a process of its own: the OpenCL part disables an op for the rest of it */
        for (size_t i = 0; i < sizeof QWEN / sizeof QWEN[0]; i++) run_model(ctx, &QWEN[i]), run_opencl(ctx, &QWEN[i]);
    modattn_ctx_free(ctx);
    return test_finish("test_model_families");
}
